/*
 * The hand-written plan of the test model, shaped like the compiler's generated plan.c:
 *   t = x * w + b            (step "affine")
 *   y = max(t, 0) * s        (step "relu_scale", a tsm_parallel_for over 1000 elements)
 *   total = sum(y)           (step "reduce_sum", in float64)
 * inputs x: float32[1, 1000], s: int64[] ; outputs y: float32[1, 1000], total: float64[1]
 * params w, b: float32[1000] (8032 bytes, appended to the library by the test fixture,
 * as the compiler's export does) ; metadata.h (written by the fixture) defines
 * metadata_json, the metadata as a byte array, and PARAMS_ID, the weights' id.
 */
#include "tsm_plan.h"
#include "metadata.h"

TSM_INTERNAL extern void tsm_kernel_affine(void **args);
TSM_INTERNAL extern void tsm_kernel_relu_scale(void **args);
TSM_INTERNAL extern void tsm_kernel_sum(void **args);

static const int64_t x_shape[] = {1, 1000};
static const int64_t y_shape[] = {1, 1000};
static const int64_t total_shape[] = {1};

static const tsm_io inputs[] = {
    {"x", "float32", 2, x_shape, 4000, 0},
    {"s", "int64", 0, 0, 8, 1},
};
static const tsm_io outputs[] = {
    {"y", "float32", 2, y_shape, 4000, 5},
    {"total", "float64", 1, total_shape, 8, 6},
};
static const tsm_buffer buffers[] = {
    {TSM_WORKSPACE, 0, 4000},     /* 0: x */
    {TSM_WORKSPACE, 4032, 8},     /* 1: s */
    {TSM_PARAM, 0, 4000},         /* 2: w */
    {TSM_PARAM, 4032, 4000},      /* 3: b */
    {TSM_WORKSPACE, 4096, 4000},  /* 4: t */
    {TSM_WORKSPACE, 8128, 4000},  /* 5: y */
    {TSM_WORKSPACE, 12160, 8},    /* 6: total */
};
static const int step0_args[] = {0, 2, 3, 4};
static const int step1_args[] = {4, 1, 5};
static const int step2_args[] = {5, 6};
static const tsm_step steps[] = {
    {tsm_kernel_affine, 4, step0_args, "affine"},
    {tsm_kernel_relu_scale, 3, step1_args, "relu_scale"},
    {tsm_kernel_sum, 2, step2_args, "reduce_sum"},
};

const tsm_plan tsm_graph_plan = {7, buffers, 3, steps, 2, inputs, 2, outputs, 12224,
                                 metadata_json, 8032, PARAMS_ID, 0, 0, 0};
