/* optim: Keras/TF optimizer updates as plain loops the compiler vectorizes. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "zdist/optim.h"

static const char *s_kind_names[] = {
    [ZDIST_OPTIM_SGD] = "sgd",
    [ZDIST_OPTIM_MOMENTUM] = "momentum",
    [ZDIST_OPTIM_ADAGRAD] = "adagrad",
    [ZDIST_OPTIM_ADAM] = "adam",
    [ZDIST_OPTIM_FTRL] = "ftrl",
};

const char *
zdist_optim_kind_name(zdist_optim_kind_t kind)
{
    if (kind >= ZDIST_OPTIM_SGD && kind <= ZDIST_OPTIM_FTRL)
        return s_kind_names[kind];
    return "invalid";
}

int
zdist_optim_kind_from_name(const char *name, zdist_optim_kind_t *ret_kind)
{
    if (!name)
        return -EINVAL;
    for (int k = ZDIST_OPTIM_SGD; k <= ZDIST_OPTIM_FTRL; k++)
        if (strcmp(s_kind_names[k], name) == 0) {
            *ret_kind = (zdist_optim_kind_t) k;
            return 0;
        }
    return -EINVAL;
}

void
zdist_optim_config_default(zdist_optim_config_t *ret_cfg, zdist_optim_kind_t kind)
{
    zdist_optim_config_t c = {.kind = kind};
    switch (kind) {
    case ZDIST_OPTIM_MOMENTUM:
        c.learning_rate = 0.01;
        c.momentum = 0.9;
        break;
    case ZDIST_OPTIM_ADAGRAD:
        c.learning_rate = 0.001;
        c.initial_accumulator_value = 0.1;
        c.epsilon = 1e-7;
        break;
    case ZDIST_OPTIM_ADAM:
        c.learning_rate = 0.001;
        c.beta1 = 0.9;
        c.beta2 = 0.999;
        c.epsilon = 1e-7;
        break;
    case ZDIST_OPTIM_FTRL: /* tf.keras.optimizers.Ftrl */
        c.learning_rate = 0.001;
        c.learning_rate_power = -0.5;
        c.initial_accumulator_value = 0.1;
        break;
    default:
        c.kind = ZDIST_OPTIM_SGD;
        c.learning_rate = 0.01;
        break;
    }
    *ret_cfg = c;
}

/* TF's Ftrl constructor's checks (a learning_rate_power above 0 would grow
   the step with the accumulator). */
static int
s_validate_ftrl(const zdist_optim_config_t *cfg, zdist_error_t *err)
{
    if (!(cfg->learning_rate_power <= 0) || !isfinite(cfg->learning_rate_power))
        return zdist_error_set(err, -EINVAL, "ftrl: learning_rate_power must be <= 0, got %g",
                               cfg->learning_rate_power);
    const struct {
        const char *name;
        double v;
    } nonneg[] = {
        {"initial_accumulator_value", cfg->initial_accumulator_value},
        {"l1_regularization_strength", cfg->l1},
        {"l2_regularization_strength", cfg->l2},
        {"l2_shrinkage_regularization_strength", cfg->l2_shrinkage},
        {"beta", cfg->beta},
    };
    for (size_t i = 0; i < sizeof nonneg / sizeof nonneg[0]; i++)
        if (!(nonneg[i].v >= 0) || !isfinite(nonneg[i].v))
            return zdist_error_set(err, -EINVAL, "ftrl: %s must be >= 0, got %g", nonneg[i].name,
                                   nonneg[i].v);
    return 0;
}

int
zdist_optim_config_validate(const zdist_optim_config_t *cfg, zdist_error_t *err)
{
    if (cfg->kind < ZDIST_OPTIM_SGD || cfg->kind > ZDIST_OPTIM_FTRL)
        return zdist_error_set(err, -EINVAL, "unknown optimizer %d; use sgd, momentum, adagrad, "
                               "adam or ftrl", (int) cfg->kind);
    const char *k = zdist_optim_kind_name(cfg->kind);
    if (!isfinite(cfg->learning_rate) || cfg->learning_rate <= 0)
        return zdist_error_set(err, -EINVAL, "%s: learning_rate must be a positive number, got %g",
                               k, cfg->learning_rate);
    switch (cfg->kind) {
    case ZDIST_OPTIM_MOMENTUM:
        if (!(cfg->momentum >= 0 && cfg->momentum <= 1))
            return zdist_error_set(err, -EINVAL, "momentum: momentum must be in [0, 1], got %g",
                                   cfg->momentum);
        break;
    case ZDIST_OPTIM_ADAGRAD:
        if (!(cfg->initial_accumulator_value >= 0) || !isfinite(cfg->initial_accumulator_value))
            return zdist_error_set(err, -EINVAL, "adagrad: initial_accumulator_value must be >= 0, "
                                   "got %g", cfg->initial_accumulator_value);
        if (!(cfg->epsilon >= 0) || !isfinite(cfg->epsilon))
            return zdist_error_set(err, -EINVAL, "adagrad: epsilon must be >= 0, got %g",
                                   cfg->epsilon);
        break;
    case ZDIST_OPTIM_ADAM:
        if (!(cfg->beta1 >= 0 && cfg->beta1 < 1))
            return zdist_error_set(err, -EINVAL, "adam: beta_1 must be in [0, 1), got %g",
                                   cfg->beta1);
        if (!(cfg->beta2 >= 0 && cfg->beta2 < 1))
            return zdist_error_set(err, -EINVAL, "adam: beta_2 must be in [0, 1), got %g",
                                   cfg->beta2);
        if (!(cfg->epsilon >= 0) || !isfinite(cfg->epsilon))
            return zdist_error_set(err, -EINVAL, "adam: epsilon must be >= 0, got %g", cfg->epsilon);
        break;
    case ZDIST_OPTIM_FTRL:
        return s_validate_ftrl(cfg, err);
    default:
        break;
    }
    return 0;
}

bool
zdist_optim_config_equal(const zdist_optim_config_t *a, const zdist_optim_config_t *b)
{
    if (a->kind != b->kind || a->learning_rate != b->learning_rate)
        return false;
    switch (a->kind) {
    case ZDIST_OPTIM_MOMENTUM:
        return a->momentum == b->momentum && a->nesterov == b->nesterov;
    case ZDIST_OPTIM_ADAGRAD:
        return a->initial_accumulator_value == b->initial_accumulator_value
               && a->epsilon == b->epsilon;
    case ZDIST_OPTIM_ADAM:
        return a->beta1 == b->beta1 && a->beta2 == b->beta2 && a->epsilon == b->epsilon
               && a->lazy == b->lazy;
    case ZDIST_OPTIM_FTRL:
        return a->learning_rate_power == b->learning_rate_power
               && a->initial_accumulator_value == b->initial_accumulator_value && a->l1 == b->l1
               && a->l2 == b->l2 && a->l2_shrinkage == b->l2_shrinkage && a->beta == b->beta;
    default:
        return true;
    }
}

int
zdist_optim_num_slots(zdist_optim_kind_t kind)
{
    switch (kind) {
    case ZDIST_OPTIM_MOMENTUM:
    case ZDIST_OPTIM_ADAGRAD:
        return 1;
    case ZDIST_OPTIM_ADAM:
    case ZDIST_OPTIM_FTRL:
        return 2;
    default:
        return 0;
    }
}

const char *
zdist_optim_slot_name(zdist_optim_kind_t kind, int i)
{
    if (i < 0 || i >= zdist_optim_num_slots(kind))
        return NULL;
    switch (kind) {
    case ZDIST_OPTIM_MOMENTUM:
        return "momentum";
    case ZDIST_OPTIM_ADAGRAD:
        return "accumulator";
    case ZDIST_OPTIM_FTRL:
        return i == 0 ? "accumulator" : "linear";
    default:
        return i == 0 ? "m" : "v";
    }
}

double
zdist_optim_slot_initial(const zdist_optim_config_t *cfg, int i)
{
    if ((cfg->kind == ZDIST_OPTIM_ADAGRAD || cfg->kind == ZDIST_OPTIM_FTRL) && i == 0)
        return cfg->initial_accumulator_value;
    return 0.0;
}

void
zdist_optim_slot_fill(const zdist_optim_config_t *cfg, int i, zdist_dtype_t dtype, void *slot,
                    size_t n)
{
    double init = zdist_optim_slot_initial(cfg, i);
    if (init == 0.0) {
        memset(slot, 0, n * zdist_dtype_size(dtype));
    } else if (dtype == ZDIST_DTYPE_FLOAT32) {
        float *s = slot, v = (float) init;
        for (size_t k = 0; k < n; k++)
            s[k] = v;
    } else if (dtype == ZDIST_DTYPE_FLOAT64) {
        double *s = slot;
        for (size_t k = 0; k < n; k++)
            s[k] = init;
    }
}

/* One set of kernels per float type and per form. Coefficients arrive
   already converted to the element type, as TF's kernels compute them in
   the variable's dtype. Each kernel writes o[i] = update(W[i]) with W the
   values it reads: o itself (in place), or a separate w (`_to`: a psd
   shard's old values that a reply still holds go untouched and the new ones
   are written in the same pass). Two forms rather than one because restrict
   forbids o == w; with it both vectorize. WPARAM and WARG add w's parameter
   and argument to the `_to` form only. The same operations in the same
   order in both: their results are bitwise equal. */
/* On x86-64 each kernel is built twice, for AVX2 and for the baseline, and
   the loader picks one for the CPU it runs on (an ifunc). Neither uses FMA
   (and C11 mode keeps GCC from contracting a*b+c), so both compute every
   element with the same IEEE operations: bitwise equal results whichever
   runs, on any machine of the cluster. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define S_SIMD __attribute__((target_clones("avx2", "default")))
#else
#define S_SIMD
#endif
#define S_W_PARAM(T) const T *restrict w,
#define S_W_ARG(x) x,
#define S_NO_W(x)
#define S_KERNELS(T, SUF, SQRT, POW, WPARAM, W, WARG)                                         \
    S_SIMD static void s_sgd_##SUF(T *restrict o, WPARAM(T) const T *restrict g, size_t n, T lr) \
    {                                                                                      \
        for (size_t i = 0; i < n; i++)                                                     \
            o[i] = W[i] - lr * g[i];                                                       \
    }                                                                                      \
    S_SIMD static void s_momentum_##SUF(T *restrict o, WPARAM(T) T *restrict v,            \
                                 const T *restrict g, size_t n, T lr, T mu, bool nesterov) \
    {                                                                                      \
        if (nesterov)                                                                      \
            for (size_t i = 0; i < n; i++) {                                               \
                v[i] = mu * v[i] - lr * g[i];                                              \
                o[i] = W[i] + (mu * v[i] - lr * g[i]);                                     \
            }                                                                              \
        else                                                                               \
            for (size_t i = 0; i < n; i++) {                                               \
                v[i] = mu * v[i] - lr * g[i];                                              \
                o[i] = W[i] + v[i];                                                        \
            }                                                                              \
    }                                                                                      \
    S_SIMD static void s_adagrad_##SUF(T *restrict o, WPARAM(T) T *restrict a,             \
                                const T *restrict g, size_t n, T lr, T eps)                \
    {                                                                                      \
        for (size_t i = 0; i < n; i++) {                                                   \
            a[i] += g[i] * g[i];                                                           \
            o[i] = W[i] - lr * g[i] / (SQRT(a[i]) + eps);                                  \
        }                                                                                  \
    }                                                                                      \
    S_SIMD static void s_adam_##SUF(T *restrict o, WPARAM(T) T *restrict m, T *restrict v, \
                             const T *restrict g, size_t n, T lr_t, T b1, T b2, T eps)     \
    {                                                                                      \
        const T c1 = (T) 1 - b1, c2 = (T) 1 - b2;                                          \
        for (size_t i = 0; i < n; i++) {                                                   \
            m[i] = b1 * m[i] + c1 * g[i];                                                  \
            v[i] = b2 * v[i] + c2 * g[i] * g[i];                                           \
            o[i] = W[i] - lr_t * m[i] / (SQRT(v[i]) + eps);                                \
        }                                                                                  \
    }                                                                                      \
    /* TF's ApplyFtrlV2 (multiply_linear_by_lr=false) in its order of operations;          \
       two_l2 already holds 2 * (l2 + beta/(2*lr)). */                                     \
    static void s_ftrl_##SUF(T *restrict o, WPARAM(T) T *restrict a, T *restrict z,         \
                             const T *restrict g, size_t n, T lr, T p, T l1, T two_l2,      \
                             T two_shrink)                                                 \
    {                                                                                      \
        const bool half = p == (T) -0.5;                                                   \
        for (size_t i = 0; i < n; i++) {                                                   \
            const T wi = W[i], gi = g[i];                                                  \
            const T gs = gi + two_shrink * wi;                                             \
            const T an = a[i] + gi * gi;                                                   \
            const T pn = half ? SQRT(an) : POW(an, -p);                                    \
            const T po = half ? SQRT(a[i]) : POW(a[i], -p);                                \
            z[i] += gs - (pn - po) / lr * wi;                                              \
            const T zi = z[i];                                                             \
            const T adj = zi > l1 ? l1 : zi < -l1 ? -l1 : zi;                              \
            o[i] = (adj - zi) / (pn / lr + two_l2);                                        \
            a[i] = an;                                                                     \
        }                                                                                  \
    }                                                                                      \
    /* Adam with a zero gradient: the rows a TF sparse apply does not touch. */            \
    S_SIMD static void s_adam_zero_##SUF(T *restrict o, WPARAM(T) T *restrict m, T *restrict v, \
                                  size_t n, T lr_t, T b1, T b2, T eps)                     \
    {                                                                                      \
        for (size_t i = 0; i < n; i++) {                                                   \
            m[i] = b1 * m[i];                                                              \
            v[i] = b2 * v[i];                                                              \
            o[i] = W[i] - lr_t * m[i] / (SQRT(v[i]) + eps);                                \
        }                                                                                  \
    }                                                                                      \
    static void s_apply_##SUF(const zdist_optim_config_t *c, double lr_t, T *o,            \
                              WPARAM(T) void *const *slots, const T *g, size_t n)          \
    {                                                                                      \
        switch (c->kind) {                                                                 \
        case ZDIST_OPTIM_SGD:                                                              \
            if (g)                                                                         \
                s_sgd_##SUF(o, WARG(w) g, n, (T) c->learning_rate);                        \
            break;                                                                         \
        case ZDIST_OPTIM_MOMENTUM:                                                         \
            if (g)                                                                         \
                s_momentum_##SUF(o, WARG(w) slots[0], g, n, (T) c->learning_rate,          \
                                 (T) c->momentum, c->nesterov);                            \
            break;                                                                         \
        case ZDIST_OPTIM_ADAGRAD:                                                          \
            if (g)                                                                         \
                s_adagrad_##SUF(o, WARG(w) slots[0], g, n, (T) c->learning_rate,           \
                                (T) c->epsilon);                                           \
            break;                                                                         \
        case ZDIST_OPTIM_ADAM:                                                             \
            if (g)                                                                         \
                s_adam_##SUF(o, WARG(w) slots[0], slots[1], g, n, (T) lr_t, (T) c->beta1,  \
                             (T) c->beta2, (T) c->epsilon);                                \
            else                                                                           \
                s_adam_zero_##SUF(o, WARG(w) slots[0], slots[1], n, (T) lr_t,              \
                                  (T) c->beta1, (T) c->beta2, (T) c->epsilon);             \
            break;                                                                         \
        case ZDIST_OPTIM_FTRL:                                                             \
            if (g)                                                                         \
                s_ftrl_##SUF(o, WARG(w) slots[0], slots[1], g, n, (T) c->learning_rate,    \
                             (T) c->learning_rate_power, (T) c->l1,                        \
                             (T) 2 * (T) (c->l2 + c->beta / (2.0 * c->learning_rate)),     \
                             (T) 2 * (T) c->l2_shrinkage);                                 \
            break;                                                                         \
        }                                                                                  \
    }

S_KERNELS(float, f32, sqrtf, powf, S_NO_W, o, S_NO_W)
S_KERNELS(double, f64, sqrt, pow, S_NO_W, o, S_NO_W)
S_KERNELS(float, f32_to, sqrtf, powf, S_W_PARAM, w, S_W_ARG)
S_KERNELS(double, f64_to, sqrt, pow, S_W_PARAM, w, S_W_ARG)

static double
s_adam_lr_t(const zdist_optim_config_t *c, int64_t step)
{
    if (c->kind != ZDIST_OPTIM_ADAM)
        return c->learning_rate;
    double t = (double) step;
    return c->learning_rate * sqrt(1.0 - pow(c->beta2, t)) / (1.0 - pow(c->beta1, t));
}

static int
s_check_dtype(zdist_dtype_t dtype)
{
    return dtype == ZDIST_DTYPE_FLOAT32 || dtype == ZDIST_DTYPE_FLOAT64 ? 0 : -EINVAL;
}

/* The in-place kernels of either float type. */
static void
s_apply_in_place(const zdist_optim_config_t *cfg, bool f32, double lr_t, void *w, void *const *slots,
                 const void *g, size_t n)
{
    if (f32)
        s_apply_f32(cfg, lr_t, w, slots, g, n);
    else
        s_apply_f64(cfg, lr_t, w, slots, g, n);
}

int
zdist_optim_apply_dense(const zdist_optim_config_t *cfg, zdist_dtype_t dtype, int64_t step,
                      void *w, void *const *slots, const void *g, size_t n)
{
    return zdist_optim_apply_dense_to(cfg, dtype, step, w, w, slots, g, n);
}

int
zdist_optim_apply_dense_to(const zdist_optim_config_t *cfg, zdist_dtype_t dtype, int64_t step,
                           void *dst, const void *w, void *const *slots, const void *g, size_t n)
{
    if (s_check_dtype(dtype) < 0)
        return -EINVAL;
    double lr_t = s_adam_lr_t(cfg, step);
    bool f32 = dtype == ZDIST_DTYPE_FLOAT32;
    if (dst == w) {
        s_apply_in_place(cfg, f32, lr_t, dst, slots, g, n);
    } else if (!g && cfg->kind != ZDIST_OPTIM_ADAM) {
        memcpy(dst, w, n * zdist_dtype_size(dtype)); /* a zero gradient moves only adam's values */
    } else if (f32) {
        s_apply_f32_to(cfg, lr_t, dst, w, slots, g, n);
    } else {
        s_apply_f64_to(cfg, lr_t, dst, w, slots, g, n);
    }
    return 0;
}

void
zdist_optim_scratch_release(zdist_optim_scratch_t *scratch)
{
    free(scratch->pairs);
    free(scratch->grad);
    memset(scratch, 0, sizeof *scratch);
}

typedef struct {
    int64_t id;
    int64_t pos;
} s_pair_t;

/* Sorts pairs by id, stably: they come in request order, so duplicates stay
   in it. An LSD radix sort over the ids' span, 11 bits a pass (a 1,024-id
   push into a million rows: 2 passes, where qsort spent 3/5 of the apply);
   tmp holds n pairs. */
static void
s_sort_pairs(s_pair_t *pairs, s_pair_t *tmp, size_t n)
{
    if (n < 2)
        return;
    /* Keys: the ids with the sign bit flipped, so unsigned order is signed order. */
    const uint64_t flip = UINT64_C(1) << 63;
    uint64_t lo = (uint64_t) pairs[0].id ^ flip, hi = lo;
    for (size_t i = 1; i < n; i++) {
        uint64_t key = (uint64_t) pairs[i].id ^ flip;
        lo = key < lo ? key : lo;
        hi = key > hi ? key : hi;
    }
    if (n < 64) { /* insertion sort: cheaper than clearing the counts */
        for (size_t i = 1; i < n; i++) {
            s_pair_t p = pairs[i];
            size_t j = i;
            for (; j > 0 && pairs[j - 1].id > p.id; j--)
                pairs[j] = pairs[j - 1];
            pairs[j] = p;
        }
        return;
    }
    uint64_t span = hi - lo;
    s_pair_t *src = pairs, *dst = tmp;
    for (int shift = 0; shift < 64 && (span >> shift) != 0; shift += 11) {
        size_t count[2048] = {0};
        for (size_t i = 0; i < n; i++)
            count[((((uint64_t) src[i].id ^ flip) - lo) >> shift) & 2047]++;
        size_t at = 0;
        for (size_t d = 0; d < 2048; d++) {
            size_t c = count[d];
            count[d] = at;
            at += c;
        }
        for (size_t i = 0; i < n; i++)
            dst[count[((((uint64_t) src[i].id ^ flip) - lo) >> shift) & 2047]++] = src[i];
        s_pair_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != pairs)
        memcpy(pairs, src, n * sizeof *pairs);
}

static int
s_grow(void **buf, size_t *cap, size_t need)
{
    if (*cap >= need)
        return 0;
    size_t n = *cap ? *cap : 4096;
    while (n < need)
        n = n > SIZE_MAX / 2 ? need : n * 2;
    void *p = realloc(*buf, n);
    if (!p)
        return -ENOMEM;
    *buf = p;
    *cap = n;
    return 0;
}

/* Slots of one row (or run of rows) starting at element offset `off`. */
static void
s_slots_at(void *const *slots, int nslots, size_t off, size_t esize, void **ret)
{
    for (int i = 0; i < nslots; i++)
        ret[i] = (char *) slots[i] + off * esize;
}

/* In place on n elements at element offset off of w and the slots: the
   row kernels without zdist_optim_apply_dense's per-call work (its learning
   rate takes two pow() for adam), which a sparse apply would pay per row. */
static void
s_apply_at(const zdist_optim_config_t *cfg, bool f32, double lr_t, void *w, void *const *slots, int nslots,
           size_t off, const void *g, size_t n)
{
    void *row_slots[ZDIST_OPTIM_MAX_SLOTS] = {0};
    size_t esize = f32 ? sizeof(float) : sizeof(double);
    s_slots_at(slots, nslots, off, esize, row_slots);
    s_apply_in_place(cfg, f32, lr_t, (char *) w + off * esize, row_slots, g, n);
}

int
zdist_optim_apply_sparse(const zdist_optim_config_t *cfg, zdist_dtype_t dtype, int64_t step,
                       void *w, void *const *slots, int64_t row_offset, int64_t rows,
                       int64_t width, const int64_t *ids, size_t nids, const void *g,
                       zdist_optim_scratch_t *scratch)
{
    if (s_check_dtype(dtype) < 0)
        return -EINVAL;
    size_t esize = zdist_dtype_size(dtype);
    size_t row_bytes = (size_t) width * esize;
    size_t pair_bytes, grad_bytes;
    if (__builtin_mul_overflow(nids, 2 * sizeof(s_pair_t), &pair_bytes) /* the pairs, and the sort's */
        || __builtin_mul_overflow(nids, row_bytes, &grad_bytes))
        return -ENOMEM;
    if (s_grow(&scratch->pairs, &scratch->pairs_cap, pair_bytes) < 0
        || s_grow(&scratch->grad, &scratch->grad_cap, grad_bytes) < 0)
        return -ENOMEM;

    /* Sort (id, position) so duplicates are adjacent and summed in request order. */
    s_pair_t *pairs = scratch->pairs;
    for (size_t i = 0; i < nids; i++)
        pairs[i] = (s_pair_t){ids[i], (int64_t) i};
    s_sort_pairs(pairs, pairs + nids, nids);
    /* Each unique id's gradient row: the request's own when the id comes
       once, a sum in scratch (first occurrence, then the others in request
       order) when it repeats. The pointers take the sort's half, free again. */
    const void **gp = (const void **) (pairs + nids);
    size_t nuniq = 0, nsums = 0;
    bool summed = false;
    char *ug = scratch->grad;
    const char *gb = g;
    for (size_t i = 0; i < nids; i++) {
        const char *src = gb + (size_t) pairs[i].pos * row_bytes;
        if (nuniq > 0 && pairs[nuniq - 1].id == pairs[i].id) {
            if (!summed) {
                char *sum = ug + nsums++ * row_bytes;
                memcpy(sum, gp[nuniq - 1], row_bytes);
                gp[nuniq - 1] = sum;
                summed = true;
            }
            char *dst = (char *) gp[nuniq - 1];
            if (dtype == ZDIST_DTYPE_FLOAT32) {
                float *d = (float *) dst;
                const float *s = (const float *) src;
                for (int64_t k = 0; k < width; k++)
                    d[k] += s[k];
            } else {
                double *d = (double *) dst;
                const double *s = (const double *) src;
                for (int64_t k = 0; k < width; k++)
                    d[k] += s[k];
            }
        } else {
            pairs[nuniq].id = pairs[i].id;
            gp[nuniq++] = src;
            summed = false;
        }
    }

    int nslots = zdist_optim_num_slots(cfg->kind);
    size_t w_width = (size_t) width;
    bool f32 = dtype == ZDIST_DTYPE_FLOAT32;
    double lr_t = s_adam_lr_t(cfg, step);
    if (cfg->kind == ZDIST_OPTIM_ADAM && !cfg->lazy) {
        /* TF semantics: every row moves; untouched rows see a zero gradient. */
        int64_t r = 0;
        for (size_t u = 0; u <= nuniq; u++) {
            int64_t next = u < nuniq ? pairs[u].id - row_offset : rows;
            if (next > r)
                s_apply_at(cfg, f32, lr_t, w, slots, nslots, (size_t) r * w_width, NULL,
                           (size_t) (next - r) * w_width);
            if (u < nuniq) {
                s_apply_at(cfg, f32, lr_t, w, slots, nslots, (size_t) next * w_width, gp[u], w_width);
                r = next + 1;
            }
        }
        return 0;
    }
    for (size_t u = 0; u < nuniq; u++)
        s_apply_at(cfg, f32, lr_t, w, slots, nslots, (size_t) (pairs[u].id - row_offset) * w_width, gp[u],
                   w_width);
    return 0;
}
