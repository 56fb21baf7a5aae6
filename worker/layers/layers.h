/* worker layers: forward and backward passes of the sequential model's layers and losses on CBLAS (float32, row-major, channels last). */
#ifndef WORKER_LAYERS_H
#define WORKER_LAYERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zdist/model_spec.h"
#include "zdist/tensor.h"

/* Plain functions over caller-owned buffers: nothing is allocated, nothing
   kept. `n` is the batch; an example's activations are contiguous (NHWC
   for images). Backward functions take dy, the loss's gradient with respect
   to the layer's output, and write (never accumulate into) the gradients of
   the parameters and, when dx is not NULL, of the input. */

/* Kernels built for AVX-512, for AVX2 with FMA and for baseline x86-64, the loader picking one for the CPU
   (GCC's target_clones; not under AddressSanitizer, whose builds keep one): the build stays portable and
   fast machines get 16-wide vectors. LAYER_WIDE (): the AVX-512 build runs. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define LAYER_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define LAYER_WIDE() __builtin_cpu_supports("x86-64-v4")
#else
#define LAYER_CLONES
#define LAYER_WIDE() 0
#endif

/* Their vectors: 16 and 8 floats (one AVX-512 register, two AVX ones, four SSE ones) and comparisons'
   masks; the u types may sit anywhere in memory (4-byte aligned). */
typedef float layer_v16 __attribute__((vector_size(64)));
typedef float layer_vu16 __attribute__((vector_size(64), aligned(4)));
typedef float layer_v8 __attribute__((vector_size(32)));
typedef float layer_vu8 __attribute__((vector_size(32), aligned(4)));
typedef int32_t layer_mu16 __attribute__((vector_size(64), aligned(4)));
typedef int32_t layer_mu8 __attribute__((vector_size(32), aligned(4)));

/* ---- activations, dense, dropout ---- */

/* y = f(y) in place over rows x cols (softmax: over each row). */
void layer_act_forward(zdist_activation_t act, float *y, int64_t rows, int64_t cols);
/* dy = dy * f'(x) in place, from the forward output y = f(x). */
void layer_act_backward(zdist_activation_t act, const float *y, float *dy, int64_t rows, int64_t cols);

/* y[n, out] = x[n, in] w[in, out] + b (b may be NULL). */
void layer_dense_forward(const float *x, int64_t n, int64_t in, int64_t out, const float *w, const float *b, float *y);
/* dw[in, out], db[out] (NULL without bias), dx[n, in] (NULL: not wanted). */
void layer_dense_backward(const float *x, const float *dy, int64_t n, int64_t in, int64_t out, const float *w,
                          float *dw, float *db, float *dx);
/* Columns [u0, u1) of the same layer, in place in y[n, out] and w[in, out]
   (a dense layer split along its units over logical devices, strategy tpu).
   The backward pass writes columns [u0, u1) of dw and db, and dx[n, in]
   (NULL: not wanted) = dy[:, u0:u1] w[:, u0:u1]^T, this part's share of the
   input's gradient (the parts' shares sum to it). The whole-layer calls
   above are these with [0, out). */
void layer_dense_forward_cols(const float *x, int64_t n, int64_t in, int64_t out, int64_t u0, int64_t u1,
                              const float *w, const float *b, float *y);
void layer_dense_backward_cols(const float *x, const float *dy, int64_t n, int64_t in, int64_t out, int64_t u0,
                               int64_t u1, const float *w, float *dw, float *db, float *dx);
/* y[r, c] += b[c] over rows x cols. */
void layer_add_bias(float *y, int64_t rows, int64_t cols, const float *b);
/* Column sums of m[rows, cols] into out[cols] (layer_colsum_add: added to it). */
void layer_colsum(const float *m, int64_t rows, int64_t cols, float *out);
void layer_colsum_add(const float *m, int64_t rows, int64_t cols, float *out);

/* Inverted dropout in place: x[i] = keep(seed, i) ? x[i] / (1 - rate) : 0.
   The mask depends only on (seed, i): the backward pass is the same call on dy. */
void layer_dropout(float *x, int64_t count, double rate, uint64_t seed);

/* ---- convolution and pooling (NHWC) ---- */

/* A sliding window over [h, w, c] inputs (conv2d's kernel, or a pool),
   from the layer's spec: output [oh, ow, c or filters]. */
typedef struct {
    int64_t h, w, c;
    int64_t kh, kw, sh, sw, pad_top, pad_left;
    int64_t oh, ow;
    int64_t filters; /* conv2d */
} layer_window_t;

void layer_window_from_spec(const zdist_layer_spec_t *l, layer_window_t *ret);
/* floats of conv2d's scratch for n examples, which keeps what the forward
   pass leaves for the backward one: the padded input (direct), or the
   im2col matrix, n*oh*ow x kh*kw*c (GEMM). */
int64_t layer_conv2d_cols(const layer_window_t *g, int64_t n);
/* y[n, oh, ow, filters] = conv(x, w) + b; w is [kh, kw, c, filters]
   (Keras's layout), b may be NULL. cols (layer_conv2d_cols floats) keeps
   what the backward pass needs. The path is chosen by the shape: direct
   for few input channels (layer_conv2d_is_direct), else im2col and one
   GEMM for the batch. */
void layer_conv2d_forward(const layer_window_t *g, const float *x, int64_t n, const float *w, const float *b,
                          float *cols, float *y);
/* dw, db (NULL without bias) and dx (NULL: not wanted) from dy and the
   forward pass's cols, which it overwrites. */
void layer_conv2d_backward(const layer_window_t *g, const float *dy, int64_t n, const float *w, float *cols,
                           float *dw, float *db, float *dx);

/* The two paths, which the calls above choose between (the tests call
   both on every shape). GEMM: cols holds n*oh*ow*kh*kw*c floats (im2col).
   Direct: xp holds layer_conv2d_direct_floats, the input padded once;
   outputs and the kernel's gradient are accumulated in registers, the
   batch split over the BLAS threads' count of threads. */
#define LAYER_MAX_TAPS 1024
bool layer_conv2d_is_direct(const layer_window_t *g);
int64_t layer_conv2d_direct_floats(const layer_window_t *g, int64_t n);
void layer_conv2d_gemm_forward(const layer_window_t *g, const float *x, int64_t n, const float *w, const float *b,
                               float *cols, float *y);
void layer_conv2d_gemm_backward(const layer_window_t *g, const float *dy, int64_t n, const float *w, float *cols,
                                float *dw, float *db, float *dx);
void layer_conv2d_direct_forward(const layer_window_t *g, const float *x, int64_t n, const float *w, const float *b,
                                 float *xp, float *y);
void layer_conv2d_direct_backward(const layer_window_t *g, const float *dy, int64_t n, const float *w, float *xp,
                                  float *dw, float *db, float *dx);
/* Winograd's F(2x2, 3x3) for 3x3 stride-1 windows: the direct path (its scratch, its kernel gradient) with
   the forward pass and the input's gradient computed on 2x2 tiles, 16 multiplications per channel and
   filter instead of 36 (layer_conv_winograd.c). layer_conv2d_is_winograd: the shapes where its forward
   pass measured faster than the direct path, layer_conv2d_is_winograd_dx: where its backward one did;
   the calls run the direct path on other windows. */
bool layer_conv2d_is_winograd(const layer_window_t *g);
bool layer_conv2d_is_winograd_dx(const layer_window_t *g);
void layer_conv2d_winograd_forward(const layer_window_t *g, const float *x, int64_t n, const float *w,
                                   const float *b, float *xp, float *y);
void layer_conv2d_winograd_backward(const layer_window_t *g, const float *dy, int64_t n, const float *w, float *xp,
                                    float *dw, float *db, float *dx);

/* The pieces the Winograd path shares with the direct one. layer_conv2d_direct_rows: y[p][0, f) = the sum
   over taps t of xs[p * step + off[t]] w[t][0, f), for np "pixels", in the direct path's register tiles.
   layer_winograd_kernel: u[16][c][f] = G g G^T of each 3x3 kernel slice of w[3][3][c][f].
   layer_winograd_run: y[n][oh][ow][f] (+ b) = the 3x3 windows of x (pixel (oy, ox) of example i at
   x + i * ex + oy * row + ox * c, only hx rows and wx columns there, zeros past them) times the kernel
   whose transform is u; -ENOMEM. */
void layer_conv2d_direct_rows(const float *xs, int64_t step, const int64_t *off, int64_t taps, const float *w,
                              int64_t f, int np, bool wide, float *y);
typedef struct {
    const float *x;
    int64_t ex, row, hx, wx, c;
    int64_t n, oh, ow, f;
    const float *u, *b;
    float *y;
    bool wide;
} layer_wino_t;
void layer_winograd_kernel(const float *w, int64_t c, int64_t f, float *u);
int layer_winograd_run(const layer_wino_t *a);

/* Copies the [n, rows, cols, c] block at (y0, x0) of t[n, h, w, c] into the
   packed part[n, rows, cols, c] (LAYER_BLOCK_GATHER), or part into the block
   (LAYER_BLOCK_SCATTER), or adds it there (LAYER_BLOCK_ADD): a spatially
   split conv2d's part and its halo (strategy tpu). */
typedef enum { LAYER_BLOCK_GATHER, LAYER_BLOCK_SCATTER, LAYER_BLOCK_ADD } layer_block_op_t;
void layer_block(layer_block_op_t op, float *t, int64_t h, int64_t w, int64_t c, float *part, int64_t n, int64_t y0,
                 int64_t rows, int64_t x0, int64_t cols);
/* Part (ph, pw) of a conv2d's output split into hp x wp parts (rows and
   columns as even as integers allow): its window over the input rows and
   columns it reads (the halo included, clipped to the input; padding
   where the window hangs over the edge), at input (iy0, ix0), writing the
   output block at (oy0, ox0). */
void layer_window_part(const layer_window_t *g, int hp, int wp, int ph, int pw, layer_window_t *ret, int64_t *iy0,
                       int64_t *ix0, int64_t *oy0, int64_t *ox0);

/* Max pool: y[n, oh, ow, c]. Padding is never the maximum. The backward
   pass finds each maximum again in x (the first element equal to y), so the
   forward pass keeps nothing and vectorizes. */
void layer_max_pool_forward(const layer_window_t *g, const float *x, int64_t n, float *y);
void layer_max_pool_backward(const layer_window_t *g, const float *x, const float *y, const float *dy, int64_t n,
                             float *dx);
/* The same keeping the argmax: arg[n, oh, ow, c] (one byte per output) gets the position ky * kw + kx
   in its window of each output's maximum (the first element holding it), for windows of at most
   LAYER_POOL_ARG_MAX elements; the backward pass then adds each input element's share of dy from the
   windows that hold it (no search, every element of dx written once). */
#define LAYER_POOL_ARG_MAX 256
void layer_max_pool_forward_arg(const layer_window_t *g, const float *x, int64_t n, float *y, uint8_t *arg);
void layer_max_pool_backward_arg(const layer_window_t *g, const uint8_t *arg, const float *dy, int64_t n, float *dx);
/* Average pool over the window's elements inside the input (padding not
   counted, as TF). */
void layer_avg_pool_forward(const layer_window_t *g, const float *x, int64_t n, float *y);
void layer_avg_pool_backward(const layer_window_t *g, const float *dy, int64_t n, float *dx);

/* ---- batch normalization over rows x c (c: the last axis) ---- */

/* Batch statistics as sums a replica can all-reduce: sums[0, c) = sum(x -
   shift), sums[c, 2c) = sum((x - shift)^2). shift (e.g. the moving mean,
   the same on every replica) keeps the float sums accurate. */
void layer_bn_sums(const float *x, int64_t rows, int64_t c, const float *shift, float *sums);
/* mean and (biased) variance of `count` rows from their shifted sums. */
void layer_bn_moments(const float *sums, const float *shift, int64_t c, double count, float *mean, float *var);
/* y = gamma * (x - mean) / sqrt(var + eps) + beta; gamma / beta NULL mean
   1 / 0; xhat (NULL at inference) keeps the normalized x. */
void layer_bn_forward(const float *x, int64_t rows, int64_t c, const float *mean, const float *var, double eps,
                      const float *gamma, const float *beta, float *xhat, float *y);
/* This replica's dsums[0, c) = sum(dy) (beta's gradient), dsums[c, 2c) =
   sum(dy * xhat) (gamma's). */
void layer_bn_backward_sums(const float *dy, const float *xhat, int64_t rows, int64_t c, float *dsums);
/* dx from dsums over all `count` rows of the batch the statistics came from. */
void layer_bn_backward(const float *dy, const float *xhat, int64_t rows, int64_t c, const float *var, double eps,
                       const float *gamma, const float *dsums, double count, float *dx);

/* ---- embedding and concat of sparse (CSR) examples ---- */

/* The lookups of n CSR examples: features with id >= first_id become row
   (id - first_id) % input_dim weighted by their value; input_dim 0 (a
   dynamic table) takes every feature's id as it is. ids / weights get the
   m lookups, offsets[n + 1] each example's range; returns m (<= nnz). */
int64_t layer_embedding_lookups(const int64_t *row_offsets, const int64_t *feature_ids, const float *values,
                                int64_t n, int64_t first_id, int64_t input_dim, int64_t *ids, float *weights,
                                int64_t *offsets);
/* y[n, e]: each example's rows (rows[m, e], read by id) combined: sum of
   weight x row, divided by the weights' sum for MEAN and by the square root
   of their squares' sum for SQRTN (zdist_combiner_scale; 0 for no lookups). */
void layer_embedding_forward(const float *rows, const float *weights, const int64_t *offsets, int64_t n, int64_t e,
                             zdist_combiner_t combiner, float *y);
/* The rows' gradients drows[m, e] (a sparse gradient over ids). */
void layer_embedding_backward(const float *dy, const float *weights, const int64_t *offsets, int64_t n, int64_t e,
                              zdist_combiner_t combiner, float *drows);
/* y[n, p + k] = x[n, p] followed by features 0..k-1 of each CSR example
   (absent ones 0); the backward pass keeps dy's first p columns. */
void layer_concat_forward(const float *x, int64_t n, int64_t p, const int64_t *row_offsets,
                          const int64_t *feature_ids, const float *values, int64_t k, float *y);
void layer_concat_backward(const float *dy, int64_t n, int64_t p, int64_t k, float *dx);

/* ---- functional models' layers (layer_graph.c) ---- */

/* FarmHash's Fingerprint64 (farmhashna::Hash64, what TensorFlow's
   Fingerprint64 and tf.strings.to_hash_bucket_fast use) of len bytes, for
   len <= 32 (an int64's decimal text is at most 20). */
uint64_t layer_fingerprint64(const char *s, size_t len);
/* Keras's Hashing(num_bins) of int64 ids: the id's decimal text (tf.as_string)
   through Fingerprint64, modulo num_bins (tf.strings.to_hash_bucket_fast). */
void layer_hashing(const int64_t *ids, int64_t m, int64_t num_bins, int64_t *out);
/* An embedding's lookups of int64 ids: n examples of `width` ids each
   (row_offsets NULL: every id a bag of its own, n * width bags) or ragged
   rows (row_offsets[n + 1]: a bag per example); ids[m] (copied), weights[m]
   = 1, offsets[bags + 1]. Returns m, or -1 - k for ids[k] outside [0,
   input_dim) (TF's "indices[k] = v is not in [0, input_dim)"); input_dim 0
   (a dynamic table) takes any int64 id as it is. */
int64_t layer_embedding_ids(const int64_t *values, const int64_t *row_offsets, int64_t n, int64_t width,
                            int64_t input_dim, int64_t *ids, float *weights, int64_t *offsets);

/* TFRS's DotInteraction over f inputs x[k][n, d]: y[n, out] = (x[0] when
   concat_dense) then x_i . x_j for i in 0..f-1, j < i (j <= i with
   self_interaction), row by row; skip_gather: every (i, j) of the f x f
   matrix, those outside that triangle 0. */
void layer_dot_interaction_forward(const float *const *x, int f, int64_t n, int64_t d, bool self_interaction,
                                   bool skip_gather, bool concat_dense, float *y);
/* dx[k][n, d] for each input (written; separate buffers). */
void layer_dot_interaction_backward(const float *const *x, int f, int64_t n, int64_t d, bool self_interaction,
                                    bool skip_gather, bool concat_dense, const float *dy, float *const *dx);
/* TFRS's dcn.Cross (full rank): prod[n, d] = x w + b + diag_scale x
   (b may be NULL), kept for the backward pass; y = x0 * prod + x. */
void layer_cross_forward(const float *x0, const float *x, int64_t n, int64_t d, const float *w, const float *b,
                         double diag_scale, float *prod, float *y);
/* dw[d, d], db[d] (NULL without bias), dx0 and dx (written; separate
   buffers; the layer's one input is both: sum them); dprod[n, d] is scratch. */
void layer_cross_backward(const float *x0, const float *x, const float *prod, const float *dy, int64_t n, int64_t d,
                          const float *w, double diag_scale, float *dprod, float *dw, float *db, float *dx0,
                          float *dx);
/* Keras's Concatenate(axis=-1) of k inputs x[j][rows, widths[j]] into
   y[rows, sum of widths]; the backward pass cuts dy back into dx[j]. */
void layer_concat_last_forward(const float *const *x, const int64_t *widths, int k, int64_t rows, float *y);
void layer_concat_last_backward(const float *dy, const int64_t *widths, int k, int64_t rows, float *const *dx);

/* ---- losses: sum over the batch; the output becomes its gradient x scale ---- */

/* Softmax cross-entropy of logits[n, classes] (in place: softmax - onehot,
   times scale). Sum of losses and rows whose argmax is the label.
   -ERANGE for a label outside [0, classes). */
int layer_loss_sparse_xent(float *logits, const int32_t *labels, int64_t n, int classes, float scale,
                           double *ret_loss, int64_t *ret_correct);
/* Sigmoid cross-entropy of logits[n] against labels 0/1 (int32) or in
   [0, 1] (float32), correct = (p >= 0.5) == (label >= 0.5). -ERANGE for a
   label outside [0, 1]. */
int layer_loss_sigmoid_xent(float *logits, zdist_dtype_t label_dtype, const void *labels, int64_t n, float scale,
                            double *ret_loss, int64_t *ret_correct);
/* Squared error of pred[n] (in place: 2 (pred - label) x scale). */
int layer_loss_mse(float *pred, zdist_dtype_t label_dtype, const void *labels, int64_t n, float scale,
                   double *ret_loss);

#endif
