/* Hand-written stand-ins for LLVM-compiled kernels of the model with dynamic shapes
 * (dynamic_plan.c): each takes the symbols' values it uses as its last argument, an
 * int64 array in the order of its symbols, as the compiler's kernels do. */
#include "tsm_plan.h"

typedef struct {
  const float *x;
  float *t;
} add_one_closure;

static void add_one_body(void *closure, int64_t begin, int64_t end) {
  const add_one_closure *c = closure;
  for (int64_t i = begin; i < end; ++i) c->t[i] = c->x[i] + 1.0f;
}

/* t[i] = x[i] + 1 over batch * 3 floats: symbols {batch} */
void tsm_kernel_add_one(void **args) {
  const int64_t *symbols = args[2];
  add_one_closure c = {args[0], args[1]};
  tsm_parallel_for(add_one_body, &c, symbols[0] * 3);
}

/* r[b] = scale * (sum_j t[b, j] + sum_k m[b, k]): symbols {batch, seq} */
void tsm_kernel_row_sum(void **args) {
  const float *t = args[0], *m = args[1], *scale = args[2];
  float *r = args[3];
  const int64_t *symbols = args[4];
  int64_t batch = symbols[0], seq = symbols[1];
  for (int64_t b = 0; b < batch; ++b) {
    float sum = 0.0f;
    for (int64_t j = 0; j < 3; ++j) sum += t[b * 3 + j];
    for (int64_t k = 0; k < seq; ++k) sum += m[b * seq + k];
    r[b] = *scale * sum;
  }
}

/* p[k] = bias[k] + sum_b m[b, k] for k < seq, p[seq] = bias[seq] + batch; args[3] is u,
 * left alone: symbols {batch, seq} */
void tsm_kernel_col(void **args) {
  const float *m = args[0], *bias = args[1];
  float *p = args[2];
  const int64_t *symbols = args[4];
  int64_t batch = symbols[0], seq = symbols[1];
  for (int64_t k = 0; k < seq; ++k) {
    float sum = bias[k];
    for (int64_t b = 0; b < batch; ++b) sum += m[b * seq + k];
    p[k] = sum;
  }
  p[seq] = bias[seq] + (float)batch;
}
