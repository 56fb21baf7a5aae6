/* zdist's Criteo-schema data generator: TFRecord files of tf.train.Examples
   with Criteo's columns, skewed ids over the whole int64 range and labels
   from a hidden teacher model, so the best achievable AUC is known. */
#ifndef ZDIST_CRITEO_H
#define ZDIST_CRITEO_H

#include <stdint.h>

#include "zdist/defs.h"
#include "zdist/error.h"
#include "zdist/example.h"
#include "zdist/tfrecord.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The columns, as in Criteo's Kaggle and Terabyte click logs:
     label      int64, 0 or 1
     I1 .. I13  float32, log(1 + count) of a count feature
     C1 .. C26  int64, one id each
   Each C feature draws a rank r from a Zipf law (P(r) ~ r^-s, s from 1.05
   to 1.25 by feature) over min(Criteo Kaggle's cardinality of that
   feature, max_cardinality) ranks, and writes id = mix(seed, feature, r),
   a bijection of 64-bit words (so distinct ranks are distinct ids, spread
   over all of int64, none dense). The teacher's logit adds a bias per
   (feature, id), a factorization machine's pairwise interactions of 4-dim
   vectors per (feature, id), and linear and interaction terms of the I
   features; every row is a function of (seed, row) alone. */
#define ZDIST_CRITEO_DENSE 13
#define ZDIST_CRITEO_SPARSE 26

typedef struct {
    int64_t rows;          /* train + test, >= 2 */
    int files;             /* files per split, 1 .. 4096 (default 1) */
    uint64_t seed;
    double test_fraction;  /* the last rows, in (0, 1) (default 0.1) */
    int64_t max_cardinality; /* ids per feature at most (default 10^7) */
    zdist_tfrecord_compression_t compression;
} zdist_criteo_options_t;

/* The defaults above, for `rows` rows. */
ZDIST_EXPORT zdist_criteo_options_t zdist_criteo_defaults(int64_t rows);

typedef struct {
    int64_t train_rows, test_rows;
    int64_t bytes;         /* record bytes written, before compression */
    double positive_rate;  /* labels that are 1, over all rows */
    double teacher_auc;    /* exact ROC AUC of the teacher's probabilities on the test split */
    double teacher_logloss;
    double seconds;
} zdist_criteo_report_t;

/* The generator's columns as a parse spec (zdist/example.h): label, I1..I13,
   C1..C26, each FIXED with shape [] and no default, names borrowed from
   static storage. Fills ret[ZDIST_CRITEO_FEATURES]. */
#define ZDIST_CRITEO_FEATURES (1 + ZDIST_CRITEO_DENSE + ZDIST_CRITEO_SPARSE)
ZDIST_EXPORT void zdist_criteo_feature_specs(zdist_feature_spec_t *ret);

/* Criteo Kaggle's 26 cardinalities, C1 first. */
ZDIST_EXPORT const int64_t *zdist_criteo_cardinalities(void);

/* Writes DIR/train/part-NNNNN.tfrecord and DIR/test/part-NNNNN.tfrecord
   (".gz" added under GZIP), creating DIR, train/ and test/ as needed; each
   file is written aside and renamed into place. -EINVAL (err names the
   option) for options out of range; -EEXIST when DIR/train or DIR/test
   already holds part files (nothing is overwritten); -errno for a failed
   write. *ret (may be NULL) is written on success. */
ZDIST_EXPORT int zdist_criteo_generate(const char *dir, const zdist_criteo_options_t *options,
                                       zdist_criteo_report_t *ret, zdist_error_t *err);

#ifdef __cplusplus
}
#endif

#endif
