/* zdist ps: operator commands against one zdist-psd (stats, get, drop). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "zdist/defs.h"
#include "zdist/endpoint.h"
#include "zdist/parse.h"
#include "zdist/ps_client.h"
#include "zdist/rpc.h"

#define S_SUB "ps"
/* Rows are pulled in pieces of at most this many bytes (the psd's default
   tensor limit is 256 MiB). */
#define S_CHUNK_BYTES ((size_t) 32 << 20)

static void
s_usage(FILE *out)
{
    fprintf(out,
            "usage: zdist ps stats ADDR [--json]\n"
            "       zdist ps get ADDR VAR [--rows A:B] [--shard N] [--json]\n"
            "       zdist ps drop ADDR JOB [--force] [--json]\n"
            "\n"
            "Asks one zdist-psd (ADDR is host:port or tcp://host:port).\n"
            "  stats   variables, shards, bytes of values and slots, requests and latency\n"
            "          per method, uptime, incarnation\n"
            "  get     the values of variable VAR held by that psd: every shard of VAR it\n"
            "          holds (rows in global order), or one shard with --shard\n"
            "  drop    removes every variable of job JOB (its id: names \"JOB/...\") from that\n"
            "          psd, as the coordinator does once a job has ended: for variables kept\n"
            "          with zdist-coordinator --keep-variables. Under CURVE it takes the\n"
            "          chief's key (--key chief-0). A job the psd saw write lately (zdist-psd\n"
            "          --live-job-seconds) is refused FAILED_PRECONDITION unless --force\n"
            "\n"
            "options:\n"
            "  -r, --rows A:B      only global rows A (included) to B (excluded); all of\n"
            "                      them must be on this psd\n"
            "  -s, --shard N       only shard N of VAR\n"
            "  -f, --force         drop even a job that is still writing (drop: it fails, or\n"
            "                      restores from its last checkpoint)\n"
            "  -j, --json          one JSON line: stats as an object; values as nested lists\n"
            "                      of numbers by shape (non-finite numbers as null)\n"
            "  -t, --timeout MS    give up on the psd after MS milliseconds (default 5000)\n"
            "  -h, --help          show this help\n"
            "      --version       show the version\n"
            "\n"
            "Exit status: 0 done; 2 bad input (one line on stderr says why); 1 the psd is\n"
            "unreachable or refused (the message carries its status).\n");
}

typedef struct {
    const char *cmd;
    const char *addr;
    const char *var;
    bool json;
    bool force;
    int64_t timeout_ms;
    bool have_rows;
    int64_t row_a, row_b;
    bool have_shard;
    int64_t shard;
    char endpoint[300];
} s_args_t;

/* "A:B" with 0 <= A <= B. */
static int
s_parse_rows(const char *text, int64_t *a, int64_t *b)
{
    const char *colon = strchr(text, ':');
    if (!colon)
        return -EINVAL;
    char left[32];
    size_t n = (size_t) (colon - text);
    if (n == 0 || n >= sizeof left)
        return -EINVAL;
    memcpy(left, text, n);
    left[n] = '\0';
    if (zdist_parse_int64(left, 0, INT64_MAX, a) < 0 || zdist_parse_int64(colon + 1, 0, INT64_MAX, b) < 0)
        return -EINVAL;
    return *a <= *b ? 0 : -ERANGE;
}

static int
s_parse_args(int argc, char **argv, s_args_t *args)
{
    enum { OPT_VERSION = 256 };
    static const struct option options[] = {
        {"json", no_argument, NULL, 'j'},
        {"force", no_argument, NULL, 'f'},
        {"rows", required_argument, NULL, 'r'},
        {"shard", required_argument, NULL, 's'},
        {"timeout", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":fjr:s:t:h", options, NULL)) != -1) {
        switch (c) {
        case 'j':
            args->json = true;
            break;
        case 'f':
            args->force = true;
            break;
        case 'r':
            if (s_parse_rows(optarg, &args->row_a, &args->row_b) < 0)
                return cli_usage_error(S_SUB, "--rows '%s' must be A:B with 0 <= A <= B (global rows, B excluded)",
                                       optarg);
            args->have_rows = true;
            break;
        case 's':
            if (zdist_parse_int64(optarg, 0, INT32_MAX, &args->shard) < 0)
                return cli_usage_error(S_SUB, "--shard '%s' must be a shard index >= 0", optarg);
            args->have_shard = true;
            break;
        case 't':
            if (zdist_parse_int64(optarg, 1, INT32_MAX, &args->timeout_ms) < 0)
                return cli_usage_error(S_SUB, "--timeout '%s' must be a number of milliseconds >= 1", optarg);
            break;
        case 'h':
            s_usage(stdout);
            return -1;
        case OPT_VERSION:
            printf("zdist %s (protocol %d)\n", ZDIST_VERSION_STRING, ZDIST_PROTOCOL_VERSION);
            return -1;
        case ':':
            return cli_usage_error(S_SUB, "option '%s' needs a value; see 'zdist ps --help'", argv[optind - 1]);
        default:
            return cli_usage_error(S_SUB, "unknown option '%s'; see 'zdist ps --help'", argv[optind - 1]);
        }
    }
    return 0;
}

/* Prints the failure of a call: exit 1 (unreachable or refused). */
static int
s_failed(const s_args_t *args, int rc, const zdist_error_t *err)
{
    if (zdist_rpc_unreachable(rc))
        fprintf(stderr, "zdist ps %s: no answer from %s within %" PRId64 " ms (is zdist-psd running there?): %s\n",
                args->cmd, args->endpoint, args->timeout_ms, err->text);
    else
        fprintf(stderr, "zdist ps %s: %s\n", args->cmd, err->text);
    return CLI_EXIT_FAILED;
}

static zdist_ps_client_t *
s_connect(s_args_t *args, zdist_ps_stats_t **ret_stats, int *ret_exit)
{
    zdist_error_t err = {0};
    zdist_ps_client_options_t opts;
    zdist_ps_client_options_default(&opts);
    opts.timeout_ms = args->timeout_ms;
    opts.retries = 0;
    opts.rpc.heartbeat_ivl_ms = 0;
    zdist_ps_client_t *client = zdist_ps_client_new(args->endpoint, &opts, &err);
    if (!client) {
        *ret_exit = cli_usage_error(S_SUB, "%s", err.text);
        return NULL;
    }
    int rc = zdist_ps_client_stats(client, ret_stats, &err);
    if (rc < 0) {
        *ret_exit = s_failed(args, rc, &err);
        zdist_ps_client_destroy(&client);
    }
    return client;
}

/* ---- stats ---- */

static void
s_human_bytes(uint64_t n, char *buf, size_t size)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double) n;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, size, "%" PRIu64 " B", n);
    else
        snprintf(buf, size, "%.1f %s", v, units[u]);
}

static json_t *
s_shape_json(const zdist_shape_t *shape)
{
    json_t *a = json_array();
    for (int d = 0; d < shape->rank; d++)
        json_array_append_new(a, json_integer(shape->dims[d]));
    return a;
}

/* A dynamic table's name "JOB/TABLE" as its job and table (job "" without a '/'). */
static void
s_split_table(const char *name, char *job, size_t size, const char **ret_table)
{
    const char *slash = strchr(name, '/');
    size_t n = slash ? (size_t) (slash - name) : 0;
    snprintf(job, size, "%.*s", (int) n, name);
    *ret_table = slash ? slash + 1 : name;
}

/* The dynamic tables: [{job, table, rows, admitted, refused, evicted, bytes, pending, dropped_grads}]. */
static json_t *
s_embeddings_json(const zdist_ps_stats_t *st)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < st->nembeddings; i++) {
        const zdist_ps_embedding_info_t *e = &st->embeddings[i];
        char job[ZDIST_PS_NAME_MAX + 1];
        const char *table;
        s_split_table(e->name, job, sizeof job, &table);
        json_array_append_new(a, json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "job", job, "table",
                                           table, "rows", (json_int_t) e->rows, "admitted", (json_int_t) e->admitted,
                                           "refused", (json_int_t) e->refused, "evicted", (json_int_t) e->evicted,
                                           "bytes", (json_int_t) e->bytes, "pending", (json_int_t) e->pending,
                                           "dropped_grads", (json_int_t) e->dropped_grads));
    }
    return a;
}

static int
s_print_stats_json(const s_args_t *args, const zdist_ps_stats_t *st)
{
    char inc[32];
    snprintf(inc, sizeof inc, "%016" PRIx64, st->incarnation);
    json_t *methods = json_array();
    for (size_t i = 0; i < st->nmethods; i++) {
        const zdist_ps_method_stats_t *m = &st->methods[i];
        json_array_append_new(methods, json_pack("{s:s, s:I, s:I, s:I, s:I}", "name", m->name, "requests",
                                                 (json_int_t) m->requests, "errors", (json_int_t) m->errors,
                                                 "p50_us", (json_int_t) m->p50_us, "p99_us", (json_int_t) m->p99_us));
    }
    json_t *shards = json_array();
    for (size_t i = 0; i < st->nshard_info; i++) {
        const zdist_ps_shard_info_t *s = &st->shard_info[i];
        json_array_append_new(shards, json_pack("{s:s, s:i, s:s, s:o, s:I, s:I, s:I}", "name", s->name,
                                                "shard_index", (int) s->shard_index, "dtype",
                                                zdist_dtype_name(s->dtype), "shape", s_shape_json(&s->shape),
                                                "row_offset", (json_int_t) s->row_offset, "row_count",
                                                (json_int_t) s->row_count, "step", (json_int_t) s->step));
    }
    json_t *root = json_pack("{s:s, s:i, s:s, s:I, s:s, s:I, s:I, s:I, s:I, s:o, s:o, s:o}", "address", args->endpoint,
                             "ps_task", (int) st->ps_task, "incarnation", inc, "uptime_ms", (json_int_t) st->uptime_ms,
                             "optimizer", st->optimizer, "variables", (json_int_t) st->variables, "shards",
                             (json_int_t) st->shards, "value_bytes", (json_int_t) st->value_bytes, "slot_bytes",
                             (json_int_t) st->slot_bytes, "methods", methods, "shard_info", shards, "embeddings",
                             s_embeddings_json(st));
    char *text = root ? json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(root);
    if (!text) {
        fprintf(stderr, "zdist ps stats: out of memory\n");
        return CLI_EXIT_FAILED;
    }
    puts(text);
    free(text);
    return CLI_EXIT_OK;
}

static int
s_print_stats(const s_args_t *args, const zdist_ps_stats_t *st)
{
    char vb[32], sb[32], shape[128];
    s_human_bytes(st->value_bytes, vb, sizeof vb);
    s_human_bytes(st->slot_bytes, sb, sizeof sb);
    printf("ps task %d at %s\n", st->ps_task, args->endpoint);
    printf("  incarnation  %016" PRIx64 "\n", st->incarnation);
    printf("  uptime       %.1f s\n", (double) st->uptime_ms / 1000.0);
    printf("  optimizer    %s\n", st->optimizer);
    printf("  variables    %" PRIu64 " (%" PRIu64 " shards)\n", st->variables, st->shards);
    printf("  values       %s (%" PRIu64 " bytes)\n", vb, st->value_bytes);
    printf("  slots        %s (%" PRIu64 " bytes)\n", sb, st->slot_bytes);
    printf("\n  %-16s %10s %8s %10s %10s\n", "method", "requests", "errors", "p50 us", "p99 us");
    for (size_t i = 0; i < st->nmethods; i++) {
        const zdist_ps_method_stats_t *m = &st->methods[i];
        printf("  %-16s %10" PRIu64 " %8" PRIu64 " %10" PRId64 " %10" PRId64 "\n", m->name, m->requests, m->errors,
               m->p50_us, m->p99_us);
    }
    if (st->nshard_info) {
        printf("\n  %-24s %5s %-8s %-20s %-24s %8s\n", "variable", "shard", "dtype", "shape", "rows", "step");
        for (size_t i = 0; i < st->nshard_info; i++) {
            const zdist_ps_shard_info_t *s = &st->shard_info[i];
            char rows[64];
            snprintf(rows, sizeof rows, "%" PRId64 "..%" PRId64, s->row_offset, s->row_offset + s->row_count);
            printf("  %-24s %5d %-8s %-20s %-24s %8" PRId64 "\n", s->name, s->shard_index,
                   zdist_dtype_name(s->dtype), zdist_shape_format(&s->shape, shape, sizeof shape), rows, s->step);
        }
    }
    if (st->nembeddings) {
        printf("\n  %-12s %-24s %10s %10s %8s %8s %10s\n", "job", "dynamic table", "rows", "admitted", "refused",
               "evicted", "bytes");
        for (size_t i = 0; i < st->nembeddings; i++) {
            const zdist_ps_embedding_info_t *e = &st->embeddings[i];
            char job[ZDIST_PS_NAME_MAX + 1], b[32];
            const char *table;
            s_split_table(e->name, job, sizeof job, &table);
            s_human_bytes(e->bytes, b, sizeof b);
            printf("  %-12s %-24s %10" PRIu64 " %10" PRIu64 " %8" PRIu64 " %8" PRIu64 " %10s\n", job, table, e->rows,
                   e->admitted, e->refused, e->evicted, b);
        }
    }
    return CLI_EXIT_OK;
}

/* A subcommand of positionals only, ADDR first: parses the options and
   checks there are exactly `npos` positionals (`need` names them), ADDR a
   psd's address. 0, -1 after --help, or an exit code after the usage error. */
static int
s_addr_args(int argc, char **argv, s_args_t *args, const char *sub, int npos, const char *need)
{
    int rc = s_parse_args(argc, argv, args);
    if (rc != 0)
        return rc < 0 ? -1 : rc;
    if (args->have_rows || args->have_shard)
        return cli_usage_error(S_SUB, "%s takes no --rows or --shard; see 'zdist ps --help'", sub);
    if (optind + npos > argc)
        return cli_usage_error(S_SUB, "%s needs %s", sub, need);
    if (optind + npos < argc)
        return cli_usage_error(S_SUB, "%s: unexpected argument '%s'", sub, argv[optind + npos]);
    args->addr = argv[optind];
    zdist_error_t err = {0};
    if (zdist_endpoint_normalize(args->addr, args->endpoint, sizeof args->endpoint, &err) < 0)
        return cli_usage_error(S_SUB, "%s", err.text);
    return 0;
}

static int
s_stats_main(int argc, char **argv, s_args_t *args)
{
    int rc = s_addr_args(argc, argv, args, "stats", 1, "ADDR (host:port of a zdist-psd)");
    if (rc != 0)
        return rc < 0 ? CLI_EXIT_OK : rc;
    zdist_ps_stats_t *st = NULL;
    int exit_code = CLI_EXIT_OK;
    zdist_ps_client_t *client = s_connect(args, &st, &exit_code);
    if (!client)
        return exit_code;
    exit_code = args->json ? s_print_stats_json(args, st) : s_print_stats(args, st);
    zdist_ps_stats_destroy(&st);
    zdist_ps_client_destroy(&client);
    return exit_code;
}

/* ---- get ---- */

/* One element as text; JSON has no NaN or infinities. */
static void
s_print_elem(const void *data, zdist_dtype_t dtype, size_t i, bool json)
{
    double d;
    switch (dtype) {
    case ZDIST_DTYPE_FLOAT32:
        d = ((const float *) data)[i];
        if (!isfinite(d) && json)
            fputs("null", stdout);
        else
            printf("%.9g", d);
        return;
    case ZDIST_DTYPE_FLOAT64:
        d = ((const double *) data)[i];
        if (!isfinite(d) && json)
            fputs("null", stdout);
        else
            printf("%.17g", d);
        return;
    case ZDIST_DTYPE_INT32:
        printf("%" PRId32, ((const int32_t *) data)[i]);
        return;
    case ZDIST_DTYPE_INT64:
        printf("%" PRId64, ((const int64_t *) data)[i]);
        return;
    case ZDIST_DTYPE_UINT8:
        printf("%u", (unsigned) ((const uint8_t *) data)[i]);
        return;
    default:
        fputs("null", stdout);
    }
}

/* Elements [*pos, ...) of dims[d..rank) as nested lists. */
static void
s_print_nested(const void *data, zdist_dtype_t dtype, const zdist_shape_t *shape, int d, size_t *pos)
{
    if (d == shape->rank) {
        s_print_elem(data, dtype, (*pos)++, true);
        return;
    }
    putchar('[');
    for (int64_t i = 0; i < shape->dims[d]; i++) {
        if (i)
            putchar(',');
        s_print_nested(data, dtype, shape, d + 1, pos);
    }
    putchar(']');
}

typedef struct {
    const zdist_ps_shard_info_t *info;
    int64_t start, count; /* global rows wanted from this shard */
} s_piece_t;

static int
s_cmp_piece(const void *a, const void *b)
{
    const s_piece_t *x = a, *y = b;
    return x->info->row_offset < y->info->row_offset ? -1 : x->info->row_offset > y->info->row_offset;
}

/* What `zdist ps get` reads: the pieces of the variable on this psd, in
   row order, and the rows they hold of those asked for. */
typedef struct {
    s_piece_t *pieces;
    size_t npieces;
    const zdist_ps_shard_info_t *first; /* the piece with the lowest rows */
    zdist_dtype_t dtype;
    bool scalar;
    int64_t want;     /* rows wanted, over every piece */
    size_t row_bytes; /* of one row (of the whole value for a scalar) */
    void *buf;        /* want rows, pulled */
} s_get_t;

/* The shards of args->var on this psd (only --shard's when given), in row
   order: -1 to go on, else the exit status. */
static int
s_get_pieces(const s_args_t *args, const zdist_ps_stats_t *st, s_get_t *g)
{
    g->pieces = calloc(st->nshard_info ? st->nshard_info : 1, sizeof *g->pieces);
    if (!g->pieces) {
        fprintf(stderr, "zdist ps get: out of memory\n");
        return CLI_EXIT_FAILED;
    }
    size_t nheld = 0;
    for (size_t i = 0; i < st->nshard_info; i++) {
        const zdist_ps_shard_info_t *s = &st->shard_info[i];
        if (strcmp(s->name, args->var) != 0)
            continue;
        nheld++;
        if (!args->have_shard || s->shard_index == args->shard)
            g->pieces[g->npieces++].info = s;
    }
    if (nheld == 0)
        return cli_usage_error(S_SUB, "variable '%s' is not on ps task %d at %s (it holds %" PRIu64
                                      " variables; see 'zdist ps stats')",
                               args->var, st->ps_task, args->endpoint, st->variables);
    if (g->npieces == 0)
        return cli_usage_error(S_SUB, "variable '%s' has no shard %" PRId64 " on ps task %d at %s", args->var,
                               args->shard, st->ps_task, args->endpoint);
    qsort(g->pieces, g->npieces, sizeof *g->pieces, s_cmp_piece);
    g->first = g->pieces[0].info;
    g->dtype = g->first->dtype;
    g->scalar = g->first->shape.rank == 0;
    return -1;
}

/* Which rows of each piece (--rows, else all), checked against the
   variable, and the row size: -1 to go on, else the exit status. */
static int
s_get_rows(const s_args_t *args, const zdist_ps_stats_t *st, s_get_t *g)
{
    if (g->scalar && args->have_rows)
        return cli_usage_error(S_SUB, "variable '%s' is a scalar: it has no rows, drop --rows", args->var);
    int64_t total_rows = g->scalar ? 1 : g->first->shape.dims[0];
    if (args->have_rows && args->row_b > total_rows)
        return cli_usage_error(S_SUB, "--rows %" PRId64 ":%" PRId64 " is outside variable '%s', which has %" PRId64
                                      " rows",
                               args->row_a, args->row_b, args->var, total_rows);
    size_t used = 0;
    for (size_t i = 0; i < g->npieces; i++) {
        const zdist_ps_shard_info_t *s = g->pieces[i].info;
        int64_t lo = g->scalar ? 0 : s->row_offset, hi = g->scalar ? 1 : s->row_offset + s->row_count;
        if (args->have_rows) {
            lo = lo > args->row_a ? lo : args->row_a;
            hi = hi < args->row_b ? hi : args->row_b;
        }
        if (hi <= lo)
            continue;
        g->pieces[used] = (s_piece_t){s, lo, hi - lo};
        g->want += hi - lo;
        used++;
    }
    g->npieces = used;
    if (args->have_rows && g->want != args->row_b - args->row_a)
        return cli_usage_error(S_SUB, "rows %" PRId64 ":%" PRId64 " of '%s' are not all on ps task %d at %s"
                                      " (%" PRId64 " of them are); ask the other ps tasks too",
                               args->row_a, args->row_b, args->var, st->ps_task, args->endpoint, g->want);
    zdist_shape_t row_shape = g->first->shape; /* [1, dims[1:]] */
    if (!g->scalar)
        row_shape.dims[0] = 1;
    if (zdist_tensor_byte_size(g->dtype, &row_shape, &g->row_bytes) < 0 || g->row_bytes == 0 ||
        (uint64_t) g->want > SIZE_MAX / g->row_bytes) {
        fprintf(stderr, "zdist ps get: variable '%s' is too large to print\n", args->var);
        return CLI_EXIT_FAILED;
    }
    return -1;
}

/* Pulls every piece into g->buf, in chunks the psd accepts: -1, or the exit status. */
static int
s_get_pull(zdist_ps_client_t *client, const s_args_t *args, s_get_t *g)
{
    g->buf = malloc(g->want ? (size_t) g->want * g->row_bytes : 1);
    if (!g->buf) {
        fprintf(stderr, "zdist ps get: out of memory for %" PRId64 " rows of '%s'\n", g->want, args->var);
        return CLI_EXIT_FAILED;
    }
    int64_t chunk_rows = (int64_t) (S_CHUNK_BYTES / g->row_bytes);
    if (chunk_rows < 1)
        chunk_rows = 1;
    uint8_t *out = g->buf;
    zdist_error_t err = {0};
    for (size_t i = 0; i < g->npieces; i++) {
        const s_piece_t *p = &g->pieces[i];
        for (int64_t r = 0; r < p->count; r += chunk_rows) {
            int64_t n = p->count - r < chunk_rows ? p->count - r : chunk_rows;
            zdist_tensor_t t = {.dtype = g->dtype, .data = out, .nbytes = (size_t) n * g->row_bytes};
            int rc = zdist_ps_client_pull(client, args->var, p->info->shard_index, g->scalar ? 0 : p->start + r,
                                          g->scalar ? 0 : n, &t, &err);
            if (rc == 0 && t.nbytes != (size_t) n * g->row_bytes)
                rc = zdist_error_set(&err, -EPROTO, "pull '%s': the psd sent %zu bytes, expected %zu", args->var,
                                     t.nbytes, (size_t) n * g->row_bytes);
            if (rc < 0)
                return s_failed(args, rc, &err);
            out += t.nbytes;
        }
    }
    return -1;
}

/* Prints the rows pulled: nested lists (--json), else a header and a line per row. */
static void
s_get_print(const s_args_t *args, const zdist_ps_stats_t *st, const s_get_t *g)
{
    if (args->json) {
        size_t pos = 0;
        if (g->scalar) {
            s_print_elem(g->buf, g->dtype, 0, true);
        } else {
            zdist_shape_t shape = g->first->shape;
            shape.dims[0] = g->want;
            s_print_nested(g->buf, g->dtype, &shape, 0, &pos);
        }
        putchar('\n');
        return;
    }
    char shape_text[128];
    printf("# %s: %s %s on ps task %d", args->var, zdist_dtype_name(g->dtype),
           zdist_shape_format(&g->first->shape, shape_text, sizeof shape_text), st->ps_task);
    if (g->scalar) {
        printf("\n");
        s_print_elem(g->buf, g->dtype, 0, false);
        printf("\n");
        return;
    }
    printf(", %" PRId64 " rows\n", g->want);
    int64_t row_width = (int64_t) (g->row_bytes / zdist_dtype_size(g->dtype));
    size_t e = 0;
    for (size_t i = 0; i < g->npieces; i++) {
        for (int64_t r = 0; r < g->pieces[i].count; r++) {
            printf("%8" PRId64 ":", g->pieces[i].start + r);
            for (int64_t k = 0; k < row_width; k++) {
                putchar(' ');
                s_print_elem(g->buf, g->dtype, e++, false);
            }
            putchar('\n');
        }
    }
}

static int
s_get_main(int argc, char **argv, s_args_t *args)
{
    int rc = s_parse_args(argc, argv, args);
    if (rc != 0)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if (optind + 2 > argc)
        return cli_usage_error(S_SUB, "get needs ADDR and VAR; see 'zdist ps --help'");
    if (optind + 2 < argc)
        return cli_usage_error(S_SUB, "get: unexpected argument '%s'", argv[optind + 2]);
    args->addr = argv[optind];
    args->var = argv[optind + 1];
    zdist_error_t err = {0};
    if (zdist_endpoint_normalize(args->addr, args->endpoint, sizeof args->endpoint, &err) < 0)
        return cli_usage_error(S_SUB, "%s", err.text);
    zdist_ps_stats_t *st = NULL;
    int exit_code = CLI_EXIT_OK;
    zdist_ps_client_t *client = s_connect(args, &st, &exit_code);
    if (!client)
        return exit_code;
    s_get_t g = {0};
    if ((exit_code = s_get_pieces(args, st, &g)) < 0 && (exit_code = s_get_rows(args, st, &g)) < 0 &&
        (exit_code = s_get_pull(client, args, &g)) < 0) {
        s_get_print(args, st, &g);
        exit_code = fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILED;
    }
    free(g.buf);
    free(g.pieces);
    zdist_ps_stats_destroy(&st);
    zdist_ps_client_destroy(&client);
    return exit_code;
}

/* ---- drop ---- */

static int
s_drop_main(int argc, char **argv, s_args_t *args)
{
    int rc = s_addr_args(argc, argv, args, "drop", 2, "ADDR (host:port of a zdist-psd) and JOB (the job's id)");
    if (rc != 0)
        return rc < 0 ? CLI_EXIT_OK : rc;
    const char *job = argv[optind + 1];
    zdist_error_t err = {0};
    zdist_ps_stats_t *st = NULL;
    int exit_code = CLI_EXIT_OK;
    zdist_ps_client_t *client = s_connect(args, &st, &exit_code);
    if (!client)
        return exit_code;
    uint64_t shards = 0, bytes = 0;
    rc = zdist_ps_client_drop_job(client, job, args->force, &shards, &bytes, &err);
    if (rc < 0) {
        exit_code = s_failed(args, rc, &err);
    } else if (args->json) {
        printf("{\"ps_task\": %d, \"job\": \"%s\", \"shards\": %" PRIu64 ", \"bytes\": %" PRIu64 "}\n",
               (int) st->ps_task, job, shards, bytes); /* the psd accepted job: [A-Za-z0-9._-] only */
    } else {
        char human[32];
        s_human_bytes(bytes, human, sizeof human);
        printf("ps task %d at %s: dropped job %s: %" PRIu64 " shards, %s freed\n", (int) st->ps_task,
               args->endpoint, job, shards, human);
    }
    zdist_ps_stats_destroy(&st);
    zdist_ps_client_destroy(&client);
    return exit_code;
}

int
cli_ps_main(int argc, char **argv)
{
    s_args_t args = {.timeout_ms = 5000};
    if (argc < 2)
        return cli_usage_error(S_SUB, "needs a command: stats, get or drop; see 'zdist ps --help'");
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        s_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("zdist %s (protocol %d)\n", ZDIST_VERSION_STRING, ZDIST_PROTOCOL_VERSION);
        return CLI_EXIT_OK;
    }
    args.cmd = cmd;
    if (strcmp(cmd, "stats") == 0)
        return s_stats_main(argc - 1, argv + 1, &args);
    if (strcmp(cmd, "get") == 0)
        return s_get_main(argc - 1, argv + 1, &args);
    if (strcmp(cmd, "drop") == 0)
        return s_drop_main(argc - 1, argv + 1, &args);
    return cli_usage_error(S_SUB, "unknown command '%s'; use stats, get or drop (see 'zdist ps --help')", cmd);
}
