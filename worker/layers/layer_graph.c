/* layer_graph: the functional models' layers — Keras's Hashing (FarmHash64), embedding ids, TFRS's DotInteraction and DCN-v2 Cross, Concatenate. */
#include <string.h>

#include "layers.h"

/* ---- FarmHash Fingerprint64 (farmhashna::Hash64), inputs of up to 32 bytes ---- */

static const uint64_t s_k0 = 0xc3a5c85c97cb3127ull;
static const uint64_t s_k1 = 0xb492b66fbe98f273ull;
static const uint64_t s_k2 = 0x9ae16a3b2f90404full;

static uint64_t
s_fetch64(const char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v); /* little-endian, as farmhash reads it on x86 and arm64 */
    return v;
}

static uint32_t
s_fetch32(const char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint64_t
s_ror(uint64_t v, int shift)
{
    return (v >> shift) | (v << (64 - shift));
}

static uint64_t
s_len16(uint64_t u, uint64_t v, uint64_t mul)
{
    uint64_t a = (u ^ v) * mul;
    a ^= a >> 47;
    uint64_t b = (v ^ a) * mul;
    b ^= b >> 47;
    return b * mul;
}

uint64_t
layer_fingerprint64(const char *s, size_t len)
{
    uint64_t mul = s_k2 + len * 2;
    if (len > 16) {
        uint64_t a = s_fetch64(s) * s_k1, b = s_fetch64(s + 8);
        uint64_t c = s_fetch64(s + len - 8) * mul, d = s_fetch64(s + len - 16) * s_k2;
        return s_len16(s_ror(a + b, 43) + s_ror(c, 30) + d, a + s_ror(b + s_k2, 18) + c, mul);
    }
    if (len >= 8) {
        uint64_t a = s_fetch64(s) + s_k2, b = s_fetch64(s + len - 8);
        uint64_t c = s_ror(b, 37) * mul + a, d = (s_ror(a, 25) + b) * mul;
        return s_len16(c, d, mul);
    }
    if (len >= 4) {
        uint64_t a = s_fetch32(s);
        return s_len16(len + (a << 3), s_fetch32(s + len - 4), mul);
    }
    if (len > 0) {
        uint8_t a = (uint8_t)s[0], b = (uint8_t)s[len >> 1], c = (uint8_t)s[len - 1];
        uint32_t y = (uint32_t)a + ((uint32_t)b << 8), z = (uint32_t)len + ((uint32_t)c << 2);
        uint64_t h = y * s_k2 ^ z * s_k0;
        return (h ^ (h >> 47)) * s_k2;
    }
    return s_k2;
}

/* id's decimal text (tf.as_string's "%lld") ending at end; returns its start.
   A hand loop: snprintf per id would be most of a Criteo step's hashing. */
static char *
s_decimal(int64_t id, char *end)
{
    uint64_t u = id < 0 ? 0 - (uint64_t)id : (uint64_t)id;
    char *p = end;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (id < 0)
        *--p = '-';
    return p;
}

void
layer_hashing(const int64_t *ids, int64_t m, int64_t num_bins, int64_t *out)
{
    char text[24];
    for (int64_t i = 0; i < m; i++) {
        char *p = s_decimal(ids[i], text + sizeof text);
        size_t len = (size_t)(text + sizeof text - p);
        out[i] = (int64_t)(layer_fingerprint64(p, len) % (uint64_t)num_bins);
    }
}

int64_t
layer_embedding_ids(const int64_t *values, const int64_t *row_offsets, int64_t n, int64_t width, int64_t input_dim,
                    int64_t *ids, float *weights, int64_t *offsets)
{
    int64_t m = row_offsets ? row_offsets[n] : n * width, bags = row_offsets ? n : n * width;
    for (int64_t k = 0; k < m; k++) {
        if (input_dim > 0 && (values[k] < 0 || values[k] >= input_dim))
            return -1 - k;
        ids[k] = values[k];
        weights[k] = 1;
    }
    for (int64_t b = 0; b <= bags; b++)
        offsets[b] = row_offsets ? row_offsets[b] : b;
    return m;
}

/* ---- DotInteraction ---- */

/* Whether pair (i, j) is in the gathered triangle. */
static bool
s_pair(int i, int j, bool self_interaction)
{
    return self_interaction ? j <= i : j < i;
}

/* The interaction's values per example. */
static int64_t
s_pairs(int64_t f, bool self_interaction, bool skip_gather)
{
    return skip_gather ? f * f : self_interaction ? f * (f + 1) / 2 : f * (f - 1) / 2;
}

static float
s_dotf(const float *a, const float *b, int64_t d)
{
    float s = 0;
    for (int64_t k = 0; k < d; k++)
        s += a[k] * b[k];
    return s;
}

/* The per-example kernels below keep an example's f x d features and its
   f x f pair gradients on the stack; larger interactions take the pairwise
   loops after them. */
#define S_DOT_MAXF 64
#define S_DOT_MAXFD 4096

/* Example e's pairs, a row of the Gram matrix at a time: xt holds the
   example transposed (d x f), so each multiply-add runs across the row's
   partners (vectorized) while each pair's sum still runs over k in order —
   the same sum, rounding for rounding, as a dot product per pair. */
LAYER_CLONES static void
s_dot_forward_example(const float *const *x, int f, int64_t e, int64_t d, bool self_interaction, bool skip_gather,
                      float *ye)
{
    float xt[S_DOT_MAXFD], acc[S_DOT_MAXF];
    for (int j = 0; j < f; j++)
        for (int64_t k = 0; k < d; k++)
            xt[k * f + j] = x[j][e * d + k];
    for (int i = 0; i < f; i++) {
        int m = skip_gather ? f : i + 1;
        for (int j = 0; j < m; j++)
            acc[j] = 0;
        for (int64_t k = 0; k < d; k++) {
            const float a = xt[k * f + i], *row = xt + k * f;
            for (int j = 0; j < m; j++)
                acc[j] += a * row[j];
        }
        for (int j = 0; j < m; j++) {
            bool in = s_pair(i, j, self_interaction);
            if (in || skip_gather)
                *ye++ = in ? acc[j] : 0;
        }
    }
}

/* The pairwise loops, for interactions too large for the stack. */
static void
s_dot_forward_pairs(const float *const *x, int f, int64_t e, int64_t d, bool self_interaction, bool skip_gather,
                    float *ye)
{
    for (int i = 0; i < f; i++)
        for (int j = 0; j < (skip_gather ? f : i + 1); j++) {
            bool in = s_pair(i, j, self_interaction);
            if (in || skip_gather)
                *ye++ = in ? s_dotf(x[i] + e * d, x[j] + e * d, d) : 0;
        }
}

void
layer_dot_interaction_forward(const float *const *x, int f, int64_t n, int64_t d, bool self_interaction,
                              bool skip_gather, bool concat_dense, float *y)
{
    int64_t out = s_pairs(f, self_interaction, skip_gather) + (concat_dense ? d : 0);
    bool small = f <= S_DOT_MAXF && f * d <= S_DOT_MAXFD;
    for (int64_t e = 0; e < n; e++) {
        float *ye = y + e * out;
        if (concat_dense) {
            memcpy(ye, x[0] + e * d, (size_t)d * sizeof *ye);
            ye += d;
        }
        if (small)
            s_dot_forward_example(x, f, e, d, self_interaction, skip_gather, ye);
        else
            s_dot_forward_pairs(x, f, e, d, self_interaction, skip_gather, ye);
    }
}

/* Example e's input gradients as one product: with S the symmetric f x f
   matrix of pair gradients (a self pair's doubled), dx_i = sum_j S_ij x_j,
   each a vectorized run over the d features. g: the example's pair
   gradients (after any dense part); dx[0]'s row already holds that part. */
LAYER_CLONES static void
s_dot_backward_example(const float *const *x, int f, int64_t e, int64_t d, bool self_interaction, bool skip_gather,
                       const float *g, bool concat_dense, float *const *dx)
{
    float S[S_DOT_MAXF * S_DOT_MAXF];
    memset(S, 0, (size_t)(f * f) * sizeof *S);
    for (int i = 0; i < f; i++)
        for (int j = 0; j < (skip_gather ? f : i + 1); j++) {
            bool in = s_pair(i, j, self_interaction);
            if (!in && !skip_gather)
                continue;
            float gp = *g++;
            if (in) {
                S[i * f + j] += gp;
                S[j * f + i] += gp;
            }
        }
    for (int i = 0; i < f; i++) {
        float *di = dx[i] + e * d;
        if (!(concat_dense && i == 0))
            memset(di, 0, (size_t)d * sizeof *di);
        for (int j = 0; j < f; j++) {
            const float s = S[i * f + j], *xj = x[j] + e * d;
            if (s == 0)
                continue;
            for (int64_t k = 0; k < d; k++)
                di[k] += s * xj[k];
        }
    }
}

/* The pairwise loops (dx zeroed before), for interactions too large for the stack. */
static void
s_dot_backward_pairs(const float *const *x, int f, int64_t e, int64_t d, bool self_interaction, bool skip_gather,
                     const float *g, float *const *dx)
{
    for (int i = 0; i < f; i++)
        for (int j = 0; j < (skip_gather ? f : i + 1); j++) {
            bool in = s_pair(i, j, self_interaction);
            if (!in && !skip_gather)
                continue;
            float gp = *g++;
            if (!in || gp == 0)
                continue;
            const float *xi = x[i] + e * d, *xj = x[j] + e * d;
            float *di = dx[i] + e * d, *dj = dx[j] + e * d;
            for (int64_t k = 0; k < d; k++) {
                di[k] += gp * xj[k];
                dj[k] += gp * xi[k];
            }
        }
}

void
layer_dot_interaction_backward(const float *const *x, int f, int64_t n, int64_t d, bool self_interaction,
                               bool skip_gather, bool concat_dense, const float *dy, float *const *dx)
{
    int64_t out = s_pairs(f, self_interaction, skip_gather) + (concat_dense ? d : 0);
    bool small = f <= S_DOT_MAXF && f * d <= S_DOT_MAXFD;
    for (int k = 0; k < f && !small; k++)
        memset(dx[k], 0, (size_t)(n * d) * sizeof *dx[k]);
    for (int64_t e = 0; e < n; e++) {
        const float *g = dy + e * out;
        if (concat_dense) {
            if (small)
                memcpy(dx[0] + e * d, g, (size_t)d * sizeof *g);
            else
                for (int64_t k = 0; k < d; k++)
                    dx[0][e * d + k] += g[k];
            g += d;
        }
        if (small)
            s_dot_backward_example(x, f, e, d, self_interaction, skip_gather, g, concat_dense, dx);
        else
            s_dot_backward_pairs(x, f, e, d, self_interaction, skip_gather, g, dx);
    }
}

/* ---- Cross ---- */

void
layer_cross_forward(const float *x0, const float *x, int64_t n, int64_t d, const float *w, const float *b,
                    double diag_scale, float *prod, float *y)
{
    layer_dense_forward(x, n, d, d, w, b, prod);
    float s = (float)diag_scale;
    for (int64_t k = 0; k < n * d; k++) {
        prod[k] += s * x[k];
        y[k] = x0[k] * prod[k] + x[k];
    }
}

void
layer_cross_backward(const float *x0, const float *x, const float *prod, const float *dy, int64_t n, int64_t d,
                     const float *w, double diag_scale, float *dprod, float *dw, float *db, float *dx0, float *dx)
{
    for (int64_t k = 0; k < n * d; k++) {
        dprod[k] = dy[k] * x0[k];
        dx0[k] = dy[k] * prod[k];
    }
    layer_dense_backward(x, dprod, n, d, d, w, dw, db, dx);
    float s = (float)diag_scale;
    for (int64_t k = 0; k < n * d; k++)
        dx[k] += s * dprod[k] + dy[k];
}

/* ---- Concatenate(axis=-1) ---- */

void
layer_concat_last_forward(const float *const *x, const int64_t *widths, int k, int64_t rows, float *y)
{
    int64_t total = 0;
    for (int j = 0; j < k; j++)
        total += widths[j];
    for (int64_t r = 0; r < rows; r++) {
        float *yr = y + r * total;
        for (int j = 0; j < k; j++) {
            memcpy(yr, x[j] + r * widths[j], (size_t)widths[j] * sizeof *yr);
            yr += widths[j];
        }
    }
}

void
layer_concat_last_backward(const float *dy, const int64_t *widths, int k, int64_t rows, float *const *dx)
{
    int64_t total = 0;
    for (int j = 0; j < k; j++)
        total += widths[j];
    for (int64_t r = 0; r < rows; r++) {
        const float *g = dy + r * total;
        for (int j = 0; j < k; j++) {
            memcpy(dx[j] + r * widths[j], g, (size_t)widths[j] * sizeof *g);
            g += widths[j];
        }
    }
}
