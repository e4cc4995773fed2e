/*
 * The hand-written plan of the runtime tests' model with dynamic shapes, shaped like the
 * plan.c the compiler generates for one (tsm_plan.h, "dynamic shapes"):
 *   t = x + 1                                  (step "add_one": symbols batch)
 *   r = scale * (sum(t, axis 1) + sum(m, axis 1))  (step "row_sum": symbols batch, seq)
 *   p = [bias[:seq] + sum(m, axis 0), bias[seq] + batch]   (step "col": batch, seq)
 * inputs x: float32[batch, 3], m: float32[batch, seq], bias: float32[seq + 1],
 * scale: float32[] ; outputs r: float32[batch], p: float32[seq + 1] ; no weights.
 * Buffer 9 ("u", passed to step "col", which leaves it alone) exists for its size,
 * max(2**60 * (seq // 1000), 4) bytes: 4 below seq 1000, over the limit of 2**48 bytes
 * from 1000, and past int64 from 8000, so the runtime's size checks have something to
 * refuse. metadata.h (written by the fixture) defines metadata_json.
 */
#include "tsm_plan.h"
#include "metadata.h"

TSM_INTERNAL extern void tsm_kernel_add_one(void **args);
TSM_INTERNAL extern void tsm_kernel_row_sum(void **args);
TSM_INTERNAL extern void tsm_kernel_col(void **args);

static const int64_t x_shape[] = {0, 3};
static const int64_t m_shape[] = {0, 0};
static const int64_t bias_shape[] = {0};
static const int64_t r_shape[] = {0};
static const int64_t p_shape[] = {0};

static const tsm_io inputs[] = {
    {"x", "float32", 2, x_shape, 0, 0},
    {"m", "float32", 2, m_shape, 0, 1},
    {"bias", "float32", 1, bias_shape, 0, 2},
    {"scale", "float32", 0, 0, 4, 3},
};
static const tsm_io outputs[] = {
    {"r", "float32", 1, r_shape, 0, 7},
    {"p", "float32", 1, p_shape, 0, 8},
};
static const tsm_buffer buffers[] = {
    {TSM_DYNAMIC, 0, 0},      /* 0: x */
    {TSM_DYNAMIC, 0, 0},      /* 1: m */
    {TSM_DYNAMIC, 0, 0},      /* 2: bias */
    {TSM_WORKSPACE, 0, 4},    /* 3: scale */
    {TSM_WORKSPACE, 64, 8},   /* 4: the values of batch */
    {TSM_WORKSPACE, 128, 16}, /* 5: the values of batch, seq */
    {TSM_DYNAMIC, 0, 0},      /* 6: t */
    {TSM_DYNAMIC, 0, 0},      /* 7: r */
    {TSM_DYNAMIC, 0, 0},      /* 8: p */
    {TSM_DYNAMIC, 0, 0},      /* 9: u */
};
static const int step0_args[] = {0, 6, 4};
static const int step1_args[] = {6, 1, 3, 7, 5};
static const int step2_args[] = {1, 2, 8, 9, 5};
static const tsm_step steps[] = {
    {tsm_kernel_add_one, 3, step0_args, "add_one"},
    {tsm_kernel_row_sum, 5, step1_args, "row_sum"},
    {tsm_kernel_col, 5, step2_args, "col"},
};

/* sizes: 0 batch, 1 seq, 2 seq + 1, 3 12*batch, 4 4*batch*seq, 5 4*seq + 4, 6 4*batch,
 * 7 u's bytes */
static int compute_sizes(const int64_t *s, int64_t *v) {
  int bad = 0;
  v[0] = s[0];
  v[1] = s[1];
  v[2] = tsm_size_add(s[1], INT64_C(1), &bad);
  v[3] = tsm_size_mul(INT64_C(12), s[0], &bad);
  v[4] = tsm_size_mul(tsm_size_mul(INT64_C(4), s[0], &bad), s[1], &bad);
  v[5] = tsm_size_add(tsm_size_mul(INT64_C(4), s[1], &bad), INT64_C(4), &bad);
  v[6] = tsm_size_mul(INT64_C(4), s[0], &bad);
  v[7] = tsm_size_max(tsm_size_mul(INT64_C(1152921504606846976),
                                   tsm_size_floordiv(s[1], INT64_C(1000), &bad), &bad),
                      INT64_C(4));
  return bad;
}
static const char *const symbol_names[] = {"batch", "seq"};
static const char *const size_texts[] = {
    "batch",         "seq",           "seq + 1",   "12*batch",
    "4*batch*seq",   "4*seq + 4",     "4*batch",   "max(1152921504606846976*(seq//1000), 4)",
};
static const int x_dims[] = {0, -1};
static const int m_dims[] = {0, 1};
static const int bias_dims[] = {2};
static const tsm_io_sizes input_sizes[] = {
    {x_dims, 3}, {m_dims, 4}, {bias_dims, 5}, {0, -1}};
static const int r_dims[] = {0};
static const int p_dims[] = {2};
static const tsm_io_sizes output_sizes[] = {{r_dims, 6}, {p_dims, 5}};
static const tsm_dynamic_buffer dynamic_buffers[] = {
    {0, 3, 0, 3}, {1, 4, 0, 3}, {2, 5, 0, 3}, {6, 3, 0, 1},
    {7, 6, 1, 3}, {8, 5, 2, 3}, {9, 7, 2, 2},
};
static const int batch_only[] = {0};
static const int batch_seq[] = {0, 1};
static const tsm_symbol_buffer symbol_buffers[] = {{4, 1, batch_only}, {5, 2, batch_seq}};
static const tsm_symbolic symbolic = {2, symbol_names, 8, size_texts, compute_sizes,
                                      input_sizes, output_sizes, 7, dynamic_buffers,
                                      2, symbol_buffers, 0, 0, 0, 0, 0, 0, 0};

const tsm_plan tsm_graph_plan = {10, buffers, 3, steps, 4, inputs, 2, outputs, 192,
                                 metadata_json, 0, {0}, 0, 0, &symbolic};
