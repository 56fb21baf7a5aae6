/* zdist partitioners and parameter-server placement: TensorFlow's
   FixedShardsPartitioner, MinSizePartitioner, MaxSizePartitioner, and
   ParameterServerStrategyV2's Div row split with round-robin ps placement. */
#ifndef ZDIST_PARTITION_H
#define ZDIST_PARTITION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zdist/defs.h"
#include "zdist/error.h"
#include "zdist/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* TensorFlow's defaults (MinSizePartitioner, MaxSizePartitioner). */
#define ZDIST_PARTITION_DEFAULT_MIN_SHARD_BYTES (256 << 10)
#define ZDIST_PARTITION_DEFAULT_BYTES_PER_STRING 16
/* Most shards one variable may be split into (a limit of ours, not TF's):
   placing more fails with -E2BIG. */
#define ZDIST_PARTITION_MAX_SHARDS 65536

typedef enum {
    ZDIST_PARTITIONER_NONE = 0, /* variable_partitioner=None */
    ZDIST_PARTITIONER_FIXED,    /* FixedShardsPartitioner(num_shards) */
    ZDIST_PARTITIONER_MIN_SIZE, /* MinSizePartitioner(min_shard_bytes, max_shards, bytes_per_string) */
    ZDIST_PARTITIONER_MAX_SIZE, /* MaxSizePartitioner(max_shard_bytes, max_shards, bytes_per_string) */
} zdist_partitioner_kind_t;

/* A partitioner: plain data, copy freely. Fields a kind does not use are
   ignored. Build one with zdist_partitioner_parse or by hand (then
   zdist_partitioner_validate or zdist_partitioner_partitions checks it).
   max_shards: MIN_SIZE needs >= 1 (TF's default 1); MAX_SIZE takes 0 for
   "no limit" (TF's None), negative is an error. */
typedef struct {
    zdist_partitioner_kind_t kind;
    int64_t num_shards;       /* FIXED, >= 1 */
    int64_t min_shard_bytes;  /* MIN_SIZE, >= 1 */
    int64_t max_shard_bytes;  /* MAX_SIZE, >= 1 */
    int64_t max_shards;       /* MIN_SIZE, MAX_SIZE (see above) */
    int64_t bytes_per_string; /* MIN_SIZE, MAX_SIZE, >= 1: size of a string element */
} zdist_partitioner_t;

/* Parses a partitioner spec, the same text the job JSON uses:
       none
       fixed:NUM_SHARDS
       min_size[:MIN_SHARD_BYTES[:MAX_SHARDS[:BYTES_PER_STRING]]]
       max_size:MAX_SHARD_BYTES[:MAX_SHARDS[:BYTES_PER_STRING]]
   Omitted fields take TensorFlow's defaults (262144, 1, 16 for min_size;
   no limit, 16 for max_size); max_size's MAX_SHARDS may be "none" (= 0).
   Arguments are validated as TF's constructors do. Returns 0 or -EINVAL with
   err naming the field, e.g. "min_size: min_shard_bytes must be positive,
   got 0". ret_spec is written only on success. */
ZDIST_EXPORT int zdist_partitioner_parse(const char *spec, zdist_partitioner_t *ret_spec, zdist_error_t *err);

/* The partitioner a parameter_server job's variables get when neither the
   job (strategy.partitioner) nor the model names one: the documented
   default, MinSizePartitioner(256 KiB, max_shards = num_ps, 16). The one
   place that default is written (the workers and the Strategy object). */
ZDIST_EXPORT zdist_partitioner_t zdist_partitioner_default_ps(int64_t num_ps);

/* Checks a hand-built partitioner's arguments: 0 or -EINVAL with err. */
ZDIST_EXPORT int zdist_partitioner_validate(const zdist_partitioner_t *spec, zdist_error_t *err);

/* Canonical spec text with every field spelled out ("none", "fixed:2",
   "min_size:262144:1:16", "max_size:4:0:16"); parse(format(x)) == x.
   Returns buf (truncated if size is too small). */
ZDIST_EXPORT char *zdist_partitioner_format(const zdist_partitioner_t *spec, char *buf, size_t size);

/* Calls the partitioner as TF's partitioner(shape, dtype, axis): fills
   ret_partitions[0..shape->rank-1] with 1 everywhere but axis.
     FIXED     min(num_shards, shape[axis])  (0 when shape[axis] is 0, as TF)
     MIN_SIZE  max(1, min(shape[axis], max_shards, ceil(total_bytes / min_shard_bytes)))
     MAX_SIZE  ceil(shape[axis] / max(1, floor(max_shard_bytes / bytes_per_slice))),
               capped by max_shards when it is not 0
     NONE      all ones
   Sizes count string elements as bytes_per_string. Arithmetic is exact
   integer arithmetic (TF uses floats; the two agree whenever byte counts are
   below 2^53). ret_partitions needs room for shape->rank values (at most
   ZDIST_MAX_RANK) and is written only on success.
   Errors (-EINVAL, with err): invalid partitioner arguments; axis outside
   0..rank-1 (so a rank-0 shape is an error for every kind); an invalid dtype
   for MIN_SIZE / MAX_SIZE; MAX_SIZE on a shape with no elements (TF divides by
   zero there). */
ZDIST_EXPORT int zdist_partitioner_partitions(const zdist_partitioner_t *spec, const zdist_shape_t *shape,
                                              zdist_dtype_t dtype, int axis, int64_t *ret_partitions,
                                              zdist_error_t *err);

/* Div split: shard `index` of `total` rows split into `num_shards` shards;
   the first total % num_shards shards get one extra row (13 over 5 -> 3,3,3,2,2).
   -EINVAL if total < 0, num_shards < 1 or index outside 0..num_shards-1. */
ZDIST_EXPORT int zdist_partition_div(int64_t total, int64_t num_shards, int64_t index, int64_t *ret_offset,
                                     int64_t *ret_rows);

/* TF's check of a partitioner's answer under ParameterServerStrategy: every
   element past the first must be 1 and the first must not be 0. Returns 0, or
   -EINVAL with TF's text in err: "variable_partitioner must return a
   list/tuple whose elements are 1 besides the first element (non-zero), got:
   [1, 3]". `rank` is the number of partitions (>= 1). */
ZDIST_EXPORT int zdist_partitions_check_ps(const int64_t *partitions, int rank, zdist_error_t *err);

/* One shard of a placed variable: rows [offset, offset + rows) of axis 0,
   all of the other axes. */
typedef struct {
    char *name;     /* "NAME/part_i", or NAME when unsharded; owned by the layout */
    int ps;         /* ps task index */
    int64_t offset; /* first global row */
    int64_t rows;   /* rows along axis 0 (0 for a rank-0 variable, which has none) */
} zdist_shard_t;

/* Where a variable lives. Made by zdist_placement_place; the caller frees it
   with zdist_layout_destroy. Shards are contiguous and in row order. */
typedef struct {
    char *name;           /* the variable's name; owned */
    zdist_shape_t shape;  /* the whole variable's shape */
    bool sharded;         /* true when num_shards > 1 (TF's ShardedVariable) */
    int num_shards;       /* >= 1 */
    zdist_shard_t *shards; /* num_shards entries; owned */
} zdist_layout_t;

/* The rows shard `s` holds on its psd (row_count at creation, and what its
   reads and whole-shard writes carry): its rows, but 1 for a rank-0
   variable, which a psd stores as one row of its one value. */
ZDIST_EXPORT int64_t zdist_layout_shard_rows(const zdist_layout_t *layout, int s);

/* NULL-safe, idempotent; nulls *self_p; frees half-built layouts too. */
ZDIST_EXPORT void zdist_layout_destroy(zdist_layout_t **self_p);

/* Maps a global row id (axis 0) to its shard and the row within it, by
   binary search over the shard offsets (O(log k)). Returns 0, or -ERANGE with
   err naming the id and the valid range (also for rank-0 variables, which
   have no rows). Outputs are written only on success. */
ZDIST_EXPORT int zdist_layout_lookup(const zdist_layout_t *layout, int64_t global_id, int *ret_shard,
                                     int64_t *ret_row, zdist_error_t *err);

/* Placement context: ParameterServerStrategyV2's variable counter. Every
   variable (or shard) created takes ps `count % num_ps` and advances the
   count, in creation order, across all the variables of a job. Not thread-safe:
   one context per job, used from one thread. */
typedef struct _zdist_placement_t zdist_placement_t;

/* NULL if num_ps < 1 or out of memory. */
ZDIST_EXPORT zdist_placement_t *zdist_placement_new(int num_ps);
/* NULL-safe, idempotent; nulls *self_p. */
ZDIST_EXPORT void zdist_placement_destroy(zdist_placement_t **self_p);
ZDIST_EXPORT int zdist_placement_num_ps(const zdist_placement_t *self);
/* How many variables (shards count one each) have been placed so far. */
ZDIST_EXPORT int64_t zdist_placement_count(const zdist_placement_t *self);

/* Places variable `name` of `shape` given a partitioner's answer
   `partitions` (shape->rank values; NULL means no partitioner):
   - rank 0, NULL partitions, or partitions[0] == 1 (after the check below):
     one unsharded shard named `name`;
   - otherwise zdist_partitions_check_ps must pass, and k =
     min(partitions[0], shape[0]) shards named "name/part_i" get a Div split
     of axis 0.
   Each shard takes the next ps round robin. On success *ret_layout is the
   caller's; on failure nothing changes (the counter neither). Errors: -EINVAL
   (NULL or empty name, TF's partition check, more than one shard of a
   variable with 0 rows), -E2BIG (more than ZDIST_PARTITION_MAX_SHARDS
   shards), -ENOMEM. */
ZDIST_EXPORT int zdist_placement_place(zdist_placement_t *self, const char *name, const zdist_shape_t *shape,
                                       const int64_t *partitions, zdist_layout_t **ret_layout,
                                       zdist_error_t *err);

/* What ParameterServerStrategyV2._create_variable does: rank-0 variables and
   the NONE partitioner skip the partitioner; otherwise partitioner(shape,
   dtype) on axis 0, then zdist_placement_place. Errors of either. */
ZDIST_EXPORT int zdist_placement_place_variable(zdist_placement_t *self, const char *name,
                                                const zdist_shape_t *shape, zdist_dtype_t dtype,
                                                const zdist_partitioner_t *partitioner,
                                                zdist_layout_t **ret_layout, zdist_error_t *err);

/* StrategyExtended.colocate_vars_with(anchor) under ParameterServerStrategyV2
   (runner.ParameterServerStrategy: "Variables created under
   `strategy.extended.colocate_vars_with` will not be partitioned"): variable
   `name` gets one unsharded shard on the ps task of the anchor's first shard
   (the anchor's only one unless it is sharded), and the round-robin counter
   does not move (TF creates it under ops.colocate_with, outside
   _create_variable_round_robin). Since placement depends only on the order
   of declaration, a restore onto any number of ps tasks places it beside its
   anchor again. Errors: -EINVAL (no anchor, NULL or empty name, bad shape),
   -ENOMEM; on failure nothing changes. */
ZDIST_EXPORT int zdist_placement_colocate(zdist_placement_t *self, const char *name, const zdist_shape_t *shape,
                                          const zdist_layout_t *anchor, zdist_layout_t **ret_layout,
                                          zdist_error_t *err);

/* ------------------------------------------------------------------------ */
/* embedding_lookup's partition_strategy                                     */

/* How tf.compat.v1.nn.embedding_lookup finds an id among P shards
   (embedding_ops.py _embedding_lookup_and_transform):
   - MOD ("mod", the tf.compat.v1 default): id i on shard i mod P at row
     i div P (13 ids over 5 shards: [[0,5,10],[1,6,11],[2,7,12],[3,8],[4,9]]);
   - DIV ("div", TF 2's tf.nn.embedding_lookup, and how zdist places a
     partitioned variable): contiguous, from the total T of the shards' rows
     only: per = T div P, extras = T mod P, shard max(i div (per + 1),
     (i - extras) div per), row i mod (per + 1) on the first extras shards,
     (i - extras) mod per after ([[0,1,2],[3,4,5],[6,7,8],[9,10],[11,12]]).
   Either needs shards of those sizes: TF does not look at the shards'
   offsets, so an id whose row lies past its shard fails TF's gather. */
typedef enum {
    ZDIST_PARTITION_STRATEGY_DIV = 0,
    ZDIST_PARTITION_STRATEGY_MOD = 1,
} zdist_partition_strategy_t;

/* "div" / "mod" (exact, as TF compares them) -> strategy; -EINVAL with TF's
   "Unrecognized partition strategy: NAME.Must be one of either `mod` or
   `div`." (its missing space kept) otherwise. */
ZDIST_EXPORT int zdist_partition_strategy_from_name(const char *name, zdist_partition_strategy_t *ret,
                                                    zdist_error_t *err);
ZDIST_EXPORT const char *zdist_partition_strategy_name(zdist_partition_strategy_t strategy);

/* TF's assignment of ids[n] to num_shards shards holding rows[num_shards]
   rows: ret_shard[k] and ret_row[k] (the row within the shard) for each
   id, with Python's floor division and modulo (as TF's int ops). One shard
   takes every id at its own row (TF gathers params[0] directly). Fails
   (-EINVAL, nothing meaningful in the outputs) with TF's error for the
   first failure TF meets, as its ops meet them:
   - a shard outside 0..num_shards-1 (div past the last shard, or a
     negative id): dynamic_partition's "partitions[K] = P is not in [0, N)";
   - a row outside its shard (ids >= T under mod, or shards not of the
     strategy's sizes): gather's "indices[J] = R is not in [0, ROWS)" of the
     lowest such shard, J the id's place among that shard's ids;
   - div over fewer rows than shards: "Integer division by zero".
   K and J count the ids in order; with `unique`, only each id's first
   occurrence (embedding_lookup_sparse looks up array_ops.unique(ids)). */
ZDIST_EXPORT int zdist_partition_assign_ids(zdist_partition_strategy_t strategy, const int64_t *rows,
                                            int num_shards, const int64_t *ids, int64_t n, bool unique,
                                            int *ret_shard, int64_t *ret_row, zdist_error_t *err);
/* The ps task of a dynamic embedding table's row (a table without a
   vocabulary, keyed by any int64 id): a documented function that stays the
   same across versions, since checkpoints and a restore onto another
   number of ps tasks depend on it. With x = (uint64_t) id, as unsigned
   64-bit arithmetic (splitmix64's first output with state x):
       z = x + 0x9e3779b97f4a7c15
       z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
       z = (z ^ (z >> 27)) * 0x94d049bb133111eb
       hash = z ^ (z >> 31)
   and task = hash % num_ps. Hashing first spreads consecutive or strided
   ids (a feature's ids are often both) evenly. A psd keying its own hash
   map by these ids must mix them differently: on one task every hash
   leaves the same remainder. */
ZDIST_EXPORT uint64_t zdist_partition_id_hash(int64_t id);
/* hash(id) % num_ps; 0 when num_ps < 1. */
ZDIST_EXPORT int zdist_partition_id_ps(int64_t id, int num_ps);

#ifdef __cplusplus
}
#endif
#endif
