/* zdist plan: shows how ParameterServerStrategy partitions a variable, places its shards and finds rows. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "zdist/defs.h"
#include "zdist/parse.h"
#include "zdist/partition.h"
#include "zdist/tensor.h"

#define S_SUB "plan"

static void
s_help(FILE *out)
{
    fprintf(out,
            "usage: zdist plan --shape D0[,D1,...] [--dtype NAME] [--partitioner SPEC] [--axis A]\n"
            "                  [--num-ps P] [--name NAME] [--ids I[,J,...]]\n"
            "\n"
            "Shows what TensorFlow's ParameterServerStrategy would do with one variable:\n"
            "the partitioner's answer, the Div split of axis 0 into shards, the ps task\n"
            "of each shard (round robin, the first variable of a job starting at ps 0),\n"
            "and which shard holds each given row id.\n"
            "\n"
            "options:\n"
            "  --shape D0[,D1,...]  the variable's shape (required)\n"
            "  --dtype NAME         element type (default float32); one of\n"
            "                       %s\n"
            "  --partitioner SPEC   none (default) | fixed:NUM_SHARDS\n"
            "                       | min_size[:MIN_SHARD_BYTES[:MAX_SHARDS[:BYTES_PER_STRING]]]\n"
            "                       | max_size:MAX_SHARD_BYTES[:MAX_SHARDS[:BYTES_PER_STRING]]\n"
            "                       (TF's defaults: 262144, 1, 16; max_size's MAX_SHARDS\n"
            "                       may be 0 or none for no limit)\n"
            "  --axis A             axis the partitioner splits (default 0); placement\n"
            "                       only supports splitting axis 0\n"
            "  --num-ps P           number of ps tasks (default 1)\n"
            "  --name NAME          variable name (default var); shards are NAME/part_i\n"
            "  --ids I[,J,...]      global row ids (axis 0) to look up\n"
            "  -h, --help           this text\n"
            "      --version        print the version\n"
            "\n"
            "output: one JSON object on stdout, keys in this order:\n"
            "  shape, dtype, partitions (the partitioner's answer for --axis),\n"
            "  sharded (true when there is more than one shard),\n"
            "  shards [{index, name, ps, offset, rows}],\n"
            "  lookups [{id, shard, offset}] (offset = row within the shard; [] without --ids).\n"
            "When the partitions cannot be placed (an element other than 1 past axis 0,\n"
            "or a first element of 0), sharded is false, shards and lookups are null, and\n"
            "placement_error holds TensorFlow's reason; the exit status is still 0.\n"
            "\n"
            "exit status: 0 planned, 1 failed (out of memory), 2 bad input (one line on stderr).\n",
            zdist_dtype_names());
}

/* Parses "I[,J,...]" into a new array (caller frees). */
static int
s_parse_ids(const char *text, int64_t **ret_ids, size_t *ret_n)
{
    if (!*text)
        return cli_usage_error(S_SUB, "--ids is empty: give row ids like 0,4,12");
    size_t cap = 1;
    for (const char *p = text; *p; p++)
        cap += *p == ',';
    int64_t *ids = calloc(cap, sizeof *ids);
    char *copy = strdup(text);
    if (!ids || !copy) {
        free(ids);
        free(copy);
        fprintf(stderr, "zdist " S_SUB ": out of memory\n");
        return CLI_EXIT_FAILED;
    }
    size_t n = 0;
    int status = CLI_EXIT_OK;
    char *item = copy;
    while (item) {
        char *comma = strchr(item, ',');
        if (comma)
            *comma = '\0';
        if (zdist_parse_int64(item, INT64_MIN, INT64_MAX, &ids[n]) < 0) {
            status = cli_usage_error(S_SUB, "--ids: '%s' is not an integer row id", item);
            break;
        }
        n++;
        item = comma ? comma + 1 : NULL;
    }
    free(copy);
    if (status != CLI_EXIT_OK) {
        free(ids);
        return status;
    }
    *ret_ids = ids;
    *ret_n = n;
    return CLI_EXIT_OK;
}

static json_t *
s_int_array(const int64_t *v, int n)
{
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        json_array_append_new(a, json_integer((json_int_t) v[i]));
    return a;
}

/* The options as given (defaults filled in). */
typedef struct {
    const char *shape, *dtype, *spec, *name, *axis, *num_ps, *ids;
} s_args_t;

/* Reads the options into args: -1 to go on, else the exit status (help, version, a usage error). */
static int
s_parse_args(int argc, char **argv, s_args_t *args)
{
    static const struct option options[] = {
        {"shape", required_argument, NULL, 's'},
        {"dtype", required_argument, NULL, 'd'},
        {"partitioner", required_argument, NULL, 'p'},
        {"axis", required_argument, NULL, 'a'},
        {"num-ps", required_argument, NULL, 'n'},
        {"name", required_argument, NULL, 'N'},
        {"ids", required_argument, NULL, 'i'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    *args = (s_args_t){.dtype = "float32", .spec = "none", .name = "var", .axis = "0", .num_ps = "1"};
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
        switch (c) {
        case 's':
            args->shape = optarg;
            break;
        case 'd':
            args->dtype = optarg;
            break;
        case 'p':
            args->spec = optarg;
            break;
        case 'a':
            args->axis = optarg;
            break;
        case 'n':
            args->num_ps = optarg;
            break;
        case 'N':
            args->name = optarg;
            break;
        case 'i':
            args->ids = optarg;
            break;
        case 'h':
            s_help(stdout);
            return CLI_EXIT_OK;
        case 'V':
            printf("zdist %s (protocol %d)\n", ZDIST_VERSION_STRING, ZDIST_PROTOCOL_VERSION);
            return CLI_EXIT_OK;
        case ':':
            return cli_usage_error(S_SUB, "option '%s' needs a value; see 'zdist plan --help'", argv[optind - 1]);
        default:
            if (optopt)
                return cli_usage_error(S_SUB, "unknown option '-%c'; see 'zdist plan --help'", optopt);
            return cli_usage_error(S_SUB, "unknown option '%s'; see 'zdist plan --help'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cli_usage_error(S_SUB, "unexpected argument '%s'; see 'zdist plan --help'", argv[optind]);
    if (!args->shape)
        return cli_usage_error(S_SUB, "--shape is required, e.g. --shape 13,4; see 'zdist plan --help'");
    return -1;
}

/* Ids are rows of the variable whether or not it can be placed; the
   wording matches zdist_layout_lookup's. CLI_EXIT_OK or a usage error. */
static int
s_check_ids(const int64_t *ids, size_t nids, const zdist_shape_t *shape, const char *name)
{
    for (size_t i = 0; i < nids; i++) {
        if (ids[i] >= 0 && ids[i] < shape->dims[0])
            continue;
        if (shape->dims[0] == 0)
            return cli_usage_error(S_SUB, "--ids: row id %" PRId64 " is out of range: variable '%s' has no rows",
                                   ids[i], name);
        return cli_usage_error(S_SUB,
                               "--ids: row id %" PRId64 " is out of range: valid ids of variable '%s' are 0..%" PRId64,
                               ids[i], name, shape->dims[0] - 1);
    }
    return CLI_EXIT_OK;
}

/* The placed variable's shards, and where each id lives. */
static void
s_layout_json(json_t *root, const zdist_layout_t *layout, const int64_t *ids, size_t nids)
{
    json_t *shards = json_array();
    for (int i = 0; shards && i < layout->num_shards; i++) {
        const zdist_shard_t *s = &layout->shards[i];
        json_t *o = json_object();
        json_object_set_new(o, "index", json_integer(i));
        json_object_set_new(o, "name", json_string(s->name));
        json_object_set_new(o, "ps", json_integer(s->ps));
        json_object_set_new(o, "offset", json_integer((json_int_t) s->offset));
        json_object_set_new(o, "rows", json_integer((json_int_t) s->rows));
        json_array_append_new(shards, o);
    }
    json_object_set_new(root, "shards", shards);
    json_t *lookups = json_array();
    for (size_t i = 0; lookups && i < nids; i++) {
        int shard;
        int64_t row;
        if (zdist_layout_lookup(layout, ids[i], &shard, &row, NULL) < 0) /* ids were checked; keep going if not */
            continue;
        json_t *o = json_object();
        json_object_set_new(o, "id", json_integer((json_int_t) ids[i]));
        json_object_set_new(o, "shard", json_integer(shard));
        json_object_set_new(o, "offset", json_integer((json_int_t) row));
        json_array_append_new(lookups, o);
    }
    json_object_set_new(root, "lookups", lookups);
}

/* Prints the plan as one JSON line: the exit status. */
static int
s_print(const zdist_shape_t *shape, zdist_dtype_t dtype, const int64_t *parts, const zdist_layout_t *layout,
        const int64_t *ids, size_t nids, const zdist_error_t *placement_err)
{
    json_t *root = json_object();
    if (root) {
        json_object_set_new(root, "shape", s_int_array(shape->dims, shape->rank));
        json_object_set_new(root, "dtype", json_string(zdist_dtype_name(dtype)));
        json_object_set_new(root, "partitions", s_int_array(parts, shape->rank));
        json_object_set_new(root, "sharded", json_boolean(layout && layout->sharded));
        if (layout) {
            s_layout_json(root, layout, ids, nids);
        } else {
            json_object_set_new(root, "shards", json_null());
            json_object_set_new(root, "lookups", json_null());
            json_object_set_new(root, "placement_error", json_string(placement_err->text));
        }
    }
    /* jansson keeps insertion order; PRESERVE_ORDER says so for old versions. */
    char *text = root ? json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(root);
    if (!text) {
        fprintf(stderr, "zdist " S_SUB ": out of memory\n");
        return CLI_EXIT_FAILED;
    }
    int failed = puts(text) < 0 || fflush(stdout) != 0;
    free(text);
    if (failed) {
        fprintf(stderr, "zdist " S_SUB ": cannot write the plan: %s\n", strerror(errno));
        return CLI_EXIT_FAILED;
    }
    return CLI_EXIT_OK;
}

int
cli_plan_main(int argc, char **argv)
{
    s_args_t args;
    int rc = s_parse_args(argc, argv, &args);
    if (rc >= 0)
        return rc;
    /* Check every input before planning anything. */
    zdist_error_t err = {0};
    zdist_shape_t shape;
    if (zdist_shape_parse(args.shape, &shape, &err) < 0)
        return cli_usage_error(S_SUB, "%s", err.text);
    zdist_dtype_t dtype = zdist_dtype_from_name(args.dtype);
    if (dtype == ZDIST_DTYPE_INVALID)
        return cli_usage_error(S_SUB, "unknown dtype '%s'; use one of %s", args.dtype, zdist_dtype_names());
    zdist_partitioner_t spec;
    if (zdist_partitioner_parse(args.spec, &spec, &err) < 0)
        return cli_usage_error(S_SUB, "%s", err.text);
    int64_t axis, num_ps;
    if (zdist_parse_int64(args.axis, INT_MIN, INT_MAX, &axis) < 0)
        return cli_usage_error(S_SUB, "--axis: '%s' is not an integer", args.axis);
    if (zdist_parse_int64(args.num_ps, 1, INT_MAX, &num_ps) < 0)
        return cli_usage_error(S_SUB, "--num-ps must be a positive integer, got '%s'", args.num_ps);
    if (!*args.name)
        return cli_usage_error(S_SUB, "--name must not be empty");
    int64_t parts[ZDIST_MAX_RANK];
    if (zdist_partitioner_partitions(&spec, &shape, dtype, (int) axis, parts, &err) < 0)
        return cli_usage_error(S_SUB, "%s", err.text);
    int64_t *ids = NULL;
    size_t nids = 0;
    if (args.ids && (rc = s_parse_ids(args.ids, &ids, &nids)) != CLI_EXIT_OK)
        return rc;
    if ((rc = s_check_ids(ids, nids, &shape, args.name)) != CLI_EXIT_OK) {
        free(ids);
        return rc;
    }
    /* Place: a placement the strategy refuses is an answer, not an input error. */
    zdist_layout_t *layout = NULL;
    zdist_error_t placement_err = {0};
    if (zdist_partitions_check_ps(parts, shape.rank, &placement_err) == 0) {
        zdist_placement_t *ctx = zdist_placement_new((int) num_ps);
        rc = ctx ? zdist_placement_place(ctx, args.name, &shape, parts, &layout, &err)
                 : zdist_error_set(&err, -ENOMEM, "out of memory");
        zdist_placement_destroy(&ctx);
        if (rc < 0) {
            free(ids);
            if (rc == -ENOMEM) {
                fprintf(stderr, "zdist " S_SUB ": %s\n", err.text);
                return CLI_EXIT_FAILED;
            }
            return cli_usage_error(S_SUB, "%s", err.text);
        }
    }
    rc = s_print(&shape, dtype, parts, layout, ids, nids, &placement_err);
    zdist_layout_destroy(&layout);
    free(ids);
    return rc;
}
