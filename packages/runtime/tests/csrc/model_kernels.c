/* Hand-written stand-ins for LLVM-compiled kernels of the test model (model_plan.c). */
#include "tsm_plan.h"

#define N 1000

void tsm_kernel_affine(void **args) {
  const float *x = args[0], *w = args[1], *b = args[2];
  float *t = args[3];
  for (int i = 0; i < N; ++i) t[i] = x[i] * w[i] + b[i];
}

typedef struct {
  const float *t;
  float scale;
  float *y;
} relu_scale_closure;

static void relu_scale_body(void *closure, int64_t begin, int64_t end) {
  const relu_scale_closure *c = closure;
  for (int64_t i = begin; i < end; ++i) c->y[i] = (c->t[i] > 0.0f ? c->t[i] : 0.0f) * c->scale;
}

void tsm_kernel_relu_scale(void **args) {
  relu_scale_closure c = {args[0], (float)*(const int64_t *)args[1], args[2]};
  tsm_parallel_for(relu_scale_body, &c, N);
}

void tsm_kernel_sum(void **args) {
  const float *y = args[0];
  double total = 0.0;
  for (int i = 0; i < N; ++i) total += y[i];
  *(double *)args[1] = total;
}
