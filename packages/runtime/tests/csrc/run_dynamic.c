/*
 * A C program that runs the runtime tests' model with dynamic shapes (dynamic_plan.c)
 * with no Python, through tensorsmith_runtime.h alone: for each "batch,seq" argument it
 * sets the inputs' shapes and values, runs, reads the outputs in the shapes the library
 * reports and compares them with the model computed here, printing "run <batch> <seq> ok".
 * With the argument "errors" it prints the message of each call the library must refuse,
 * one "error <message>" line each. Exit status 1 on any unexpected result.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensorsmith_runtime.h"

static int failed(const char *what) {
  fprintf(stderr, "FAIL %s: %s\n", what, tsm_last_error());
  return 1;
}

/* Sets x[batch, 3], m[batch, seq], bias[seq + 1] (shapes and values) and scale. */
static int set_inputs(void *model, int64_t batch, int64_t seq, float *x, float *m, float *bias) {
  float scale = 0.5f;
  int64_t x_shape[] = {batch, 3}, m_shape[] = {batch, seq}, bias_shape[] = {seq + 1};
  for (int64_t i = 0; i < batch * 3; ++i) x[i] = (float)(i % 7) - 3.0f;
  for (int64_t i = 0; i < batch * seq; ++i) m[i] = (float)(i % 5) * 0.25f;
  for (int64_t i = 0; i <= seq; ++i) bias[i] = (float)i;
  if (tsm_model_set_input_shape(model, 0, 2, x_shape) ||
      tsm_model_set_input(model, 0, x, (size_t)(batch * 3) * sizeof(float)) ||
      tsm_model_set_input_shape(model, 1, 2, m_shape) ||
      tsm_model_set_input(model, 1, m, (size_t)(batch * seq) * sizeof(float)) ||
      tsm_model_set_input_shape(model, 2, 1, bias_shape) ||
      tsm_model_set_input(model, 2, bias, (size_t)(seq + 1) * sizeof(float)) ||
      tsm_model_set_input(model, 3, &scale, sizeof(scale))) {
    return failed("set_inputs");
  }
  return 0;
}

static int run_shape(void *model, int64_t batch, int64_t seq) {
  float *x = malloc((size_t)(batch * 3) * sizeof(float));
  float *m = malloc((size_t)(batch * seq) * sizeof(float));
  float *bias = malloc((size_t)(seq + 1) * sizeof(float));
  float *r = malloc((size_t)batch * sizeof(float)), *p = malloc((size_t)(seq + 1) * sizeof(float));
  int status = x == NULL || m == NULL || bias == NULL || r == NULL || p == NULL;
  status = status || set_inputs(model, batch, seq, x, m, bias);
  if (!status && tsm_model_run(model)) status = failed("run");
  int64_t r_shape[1] = {0}, p_shape[1] = {0};
  if (!status && (tsm_model_output_shape(model, 0, r_shape) ||
                  tsm_model_output_shape(model, 1, p_shape))) {
    status = failed("output_shape");
  }
  if (!status && (r_shape[0] != batch || p_shape[0] != seq + 1 ||
                  tsm_model_output_nbytes(model, 0) != (size_t)batch * sizeof(float) ||
                  tsm_model_output_nbytes(model, 1) != (size_t)(seq + 1) * sizeof(float))) {
    fprintf(stderr, "FAIL shapes %lld %lld\n", (long long)r_shape[0], (long long)p_shape[0]);
    status = 1;
  }
  if (!status && (tsm_model_get_output(model, 0, r, tsm_model_output_nbytes(model, 0)) ||
                  tsm_model_get_output(model, 1, p, tsm_model_output_nbytes(model, 1)))) {
    status = failed("get_output");
  }
  for (int64_t b = 0; !status && b < batch; ++b) {
    float sum = 0.0f;
    for (int j = 0; j < 3; ++j) sum += x[b * 3 + j] + 1.0f;
    for (int64_t k = 0; k < seq; ++k) sum += m[b * seq + k];
    if (fabsf(r[b] - 0.5f * sum) > 1e-3f * (1.0f + fabsf(sum))) status = 1;
  }
  for (int64_t k = 0; !status && k <= seq; ++k) {
    float sum = bias[k];
    for (int64_t b = 0; b < batch; ++b) sum += k < seq ? m[b * seq + k] : 1.0f;
    if (fabsf(p[k] - sum) > 1e-3f * (1.0f + fabsf(sum))) status = 1;
  }
  if (status) {
    fprintf(stderr, "FAIL run %lld %lld\n", (long long)batch, (long long)seq);
  } else {
    printf("run %lld %lld ok\n", (long long)batch, (long long)seq);
  }
  free(x);
  free(m);
  free(bias);
  free(r);
  free(p);
  return status;
}

/* Prints the message of a call that must fail; a call that succeeds is a failure. */
static int refused(int status, const char *what) {
  if (status == 0) {
    fprintf(stderr, "FAIL %s was accepted\n", what);
    return 1;
  }
  printf("error %s\n", tsm_last_error());
  return 0;
}

static int errors(void *model) {
  int bad = 0;
  int64_t shape[2] = {2, 4}, big[2] = {INT64_C(1) << 40, INT64_C(1) << 20};
  float data[64] = {0};
  bad |= refused(tsm_model_set_input_shape(model, 0, 2, shape), "a fixed axis of 4");
  shape[0] = 0;
  shape[1] = 3;
  bad |= refused(tsm_model_set_input_shape(model, 0, 2, shape), "batch 0");
  bad |= refused(tsm_model_set_input_shape(model, 0, 1, shape), "a shape of rank 1");
  bad |= refused(tsm_model_set_input_shape(model, 1, 2, big), "2**62 bytes");
  bad |= refused(tsm_model_set_input_shape(model, 3, 1, shape), "a scalar of rank 1");
  /* batch 2 for x, 3 for m */
  int64_t x_shape[] = {2, 3}, m_shape[] = {3, 4}, bias_shape[] = {5};
  if (tsm_model_set_input_shape(model, 0, 2, x_shape) ||
      tsm_model_set_input_shape(model, 1, 2, m_shape) ||
      tsm_model_set_input_shape(model, 2, 1, bias_shape)) {
    return failed("set shapes");
  }
  bad |= refused(tsm_model_set_input(model, 0, data, 4 * sizeof(float)), "4 floats for x");
  bad |= refused(tsm_model_run(model), "a run before the inputs are set");
  if (tsm_model_set_input(model, 0, data, 6 * sizeof(float)) ||
      tsm_model_set_input(model, 1, data, 12 * sizeof(float)) ||
      tsm_model_set_input(model, 2, data, 5 * sizeof(float)) ||
      tsm_model_set_input(model, 3, data, sizeof(float))) {
    return failed("set inputs");
  }
  bad |= refused(tsm_model_run(model), "batch 2 and 3");
  m_shape[0] = 2;
  bias_shape[0] = 6;
  if (tsm_model_set_input_shape(model, 1, 2, m_shape) ||
      tsm_model_set_input(model, 1, data, 8 * sizeof(float)) ||
      tsm_model_set_input_shape(model, 2, 1, bias_shape) ||
      tsm_model_set_input(model, 2, data, 6 * sizeof(float))) {
    return failed("set m, bias");
  }
  bad |= refused(tsm_model_run(model), "bias of seq + 2");
  bias_shape[0] = 5;
  if (tsm_model_set_input_shape(model, 2, 1, bias_shape) ||
      tsm_model_set_input(model, 2, data, 5 * sizeof(float)) || tsm_model_run(model)) {
    return failed("a consistent run");
  }
  x_shape[0] = 9;
  if (tsm_model_set_input_shape(model, 0, 2, x_shape)) return failed("x of batch 9");
  bad |= refused(tsm_model_get_output(model, 0, data, 2 * sizeof(float)),
                 "the outputs after an input grew");
  return bad;
}

int main(int argc, char **argv) {
  void *model = tsm_model_create();
  if (model == NULL) return failed("create");
  int64_t m_shape[2], p_shape[1];
  if (tsm_model_input_shape(model, 1, m_shape) || tsm_model_output_shape(model, 1, p_shape)) {
    return failed("shapes");
  }
  printf("first m %lld %lld p %lld\n", (long long)m_shape[0], (long long)m_shape[1],
         (long long)p_shape[0]);
  int status = 0;
  for (int i = 1; i < argc && !status; ++i) {
    long long batch = 0, seq = 0;
    if (strcmp(argv[i], "errors") == 0) {
      status = errors(model);
    } else if (sscanf(argv[i], "%lld,%lld", &batch, &seq) == 2) {
      status = run_shape(model, batch, seq);
    }
  }
  tsm_model_destroy(model);
  return status;
}
