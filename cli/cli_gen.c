/* zdist gen: writes data sets for trying zdist at a recommender's scale. */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "zdist/criteo.h"
#include "zdist/parse.h"

#define S_SUB "gen"

static void
s_usage(FILE *out)
{
    fprintf(out,
            "usage: zdist gen criteo --rows N --out DIR [--files K] [--seed S] [--test-fraction F]\n"
            "                        [--max-cardinality C] [--gzip] [--json]\n"
            "\n"
            "Writes Criteo-schema TFRecord files of tf.train.Examples: DIR/train/part-NNNNN.tfrecord and\n"
            "DIR/test/part-NNNNN.tfrecord with label (int64 0/1), I1..I13 (float32, log(1 + count)) and\n"
            "C1..C26 (int64, one id each, Zipf-skewed over Criteo Kaggle's cardinalities, spread over all of\n"
            "int64). Labels come from a hidden teacher model with interactions; its AUC on the test split,\n"
            "the best a model can reach, is printed. The same seed writes the same bytes.\n"
            "\n"
            "  --rows N              rows in all, train and test (2 .. 2^40)\n"
            "  --out DIR             where to write (train/ and test/ must hold no part files yet)\n"
            "  --files K             files per split (default 1; more let workers shard by FILE)\n"
            "  --seed S              (default 1)\n"
            "  --test-fraction F     the last rows, for testing (default 0.1)\n"
            "  --max-cardinality C   ids per feature at most (default 10000000)\n"
            "  --gzip                GZIP files (TFRecordOptions(compression_type=\"GZIP\"))\n"
            "  --json                the report as one JSON object\n");
}

typedef struct {
    zdist_criteo_options_t o;
    const char *out;
    bool json;
} s_args_t;

/* -1 to go on, else the exit status. */
static int
s_parse(int argc, char **argv, s_args_t *a)
{
    static const struct option longopts[] = {
        {"rows", required_argument, NULL, 'r'},  {"out", required_argument, NULL, 'o'},
        {"files", required_argument, NULL, 'f'}, {"seed", required_argument, NULL, 's'},
        {"test-fraction", required_argument, NULL, 't'}, {"max-cardinality", required_argument, NULL, 'c'},
        {"gzip", no_argument, NULL, 'z'},        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},        {0},
    };
    int64_t v;
    double d;
    int opt;
    opterr = 0;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (opt) {
        case 'r':
        case 'f':
        case 'c':
            if (zdist_parse_int64(optarg, 1, INT64_C(1) << 40, &v) < 0)
                return cli_usage_error(S_SUB, "--%s must be a whole number >= 1, got '%s'",
                                       opt == 'r' ? "rows" : opt == 'c' ? "max-cardinality" : "files", optarg);
            if (opt == 'r')
                a->o.rows = v;
            else if (opt == 'c')
                a->o.max_cardinality = v;
            else
                a->o.files = v > 4096 ? 4097 : (int) v;
            break;
        case 's':
            if (zdist_parse_int64(optarg, 0, INT64_MAX, &v) < 0)
                return cli_usage_error(S_SUB, "--seed must be a whole number >= 0, got '%s'", optarg);
            a->o.seed = (uint64_t) v;
            break;
        case 't':
            if (zdist_parse_double(optarg, &d) < 0)
                return cli_usage_error(S_SUB, "--test-fraction must be a number in (0, 1), got '%s'", optarg);
            a->o.test_fraction = d;
            break;
        case 'z': a->o.compression = ZDIST_TFRECORD_GZIP; break;
        case 'j': a->json = true; break;
        case 'o': a->out = optarg; break;
        case 'h': s_usage(stdout); return CLI_EXIT_OK;
        default:
            return cli_usage_error(S_SUB, "unknown option or missing value '%s'; see 'zdist gen --help'",
                                   argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cli_usage_error(S_SUB, "unexpected argument '%s'; see 'zdist gen --help'", argv[optind]);
    if (!a->o.rows || !a->out)
        return cli_usage_error(S_SUB, "criteo needs --rows N and --out DIR; see 'zdist gen --help'");
    return -1;
}

int
cli_gen_main(int argc, char **argv)
{
    if (argc < 2 || argv[1][0] == '-') {
        if (argc >= 2 && !strcmp(argv[1], "--help"))
            return s_usage(stdout), CLI_EXIT_OK;
        return cli_usage_error(S_SUB, "name a data set: zdist gen criteo ...; see 'zdist gen --help'");
    }
    if (strcmp(argv[1], "criteo") != 0)
        return cli_usage_error(S_SUB, "unknown data set '%s' (known: criteo)", argv[1]);
    s_args_t a = {.o = zdist_criteo_defaults(0)};
    int rc = s_parse(argc - 1, argv + 1, &a);
    if (rc >= 0)
        return rc;
    zdist_criteo_report_t r;
    zdist_error_t err = {0};
    rc = zdist_criteo_generate(a.out, &a.o, &r, &err);
    if (rc < 0) {
        fprintf(stderr, "zdist %s: %s\n", S_SUB, err.text);
        return rc == -EINVAL || rc == -EEXIST ? CLI_EXIT_USAGE : CLI_EXIT_FAILED;
    }
    if (a.json)
        printf("{\"train_rows\": %lld, \"test_rows\": %lld, \"files\": %d, \"bytes\": %lld, \"positive_rate\": %.6f, "
               "\"teacher_auc\": %.6f, \"teacher_logloss\": %.6f, \"seconds\": %.3f}\n",
               (long long) r.train_rows, (long long) r.test_rows, a.o.files, (long long) r.bytes, r.positive_rate,
               r.teacher_auc, r.teacher_logloss, r.seconds);
    else
        printf("%s: %lld train and %lld test rows in %d file(s) per split, %.1f MB of records, %.1f s\n"
               "positives %.4f; the teacher's test AUC %.4f (log loss %.4f): no model can beat it\n",
               a.out, (long long) r.train_rows, (long long) r.test_rows, a.o.files, (double) r.bytes / 1e6, r.seconds,
               r.positive_rate, r.teacher_auc, r.teacher_logloss);
    return CLI_EXIT_OK;
}
