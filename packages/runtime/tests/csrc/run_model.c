/*
 * A C program that runs a tensorsmith CPU artifact with no Python: links against the
 * artifact file, uses only tensorsmith_runtime.h. Input x[i] = i / 1000, s = argv[1];
 * prints the metadata line, then "y <first> <last>" and "total <value>".
 */
#include <stdio.h>
#include <stdlib.h>

#include "tensorsmith_runtime.h"

int main(int argc, char **argv) {
  void *m = tsm_model_create();
  if (m == NULL) {
    fprintf(stderr, "create: %s\n", tsm_last_error());
    return 1;
  }
  int xi = tsm_model_input_index(m, "x"), si = tsm_model_input_index(m, "s");
  size_t n = tsm_model_input_nbytes(m, xi) / sizeof(float);
  float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; ++i) x[i] = (float)i / 1000.0f;
  long long s = argc > 1 ? atoll(argv[1]) : 1;
  double total = 0.0;
  int64_t shape[8];
  if (tsm_model_set_input(m, xi, x, n * sizeof(float)) || tsm_model_set_input(m, si, &s, 8) ||
      tsm_model_run(m) || tsm_model_get_output(m, 0, y, n * sizeof(float)) ||
      tsm_model_get_output(m, 1, &total, sizeof(total)) ||
      tsm_model_output_shape(m, 0, shape)) {
    fprintf(stderr, "error: %s\n", tsm_last_error());
    return 1;
  }
  printf("outputs %s %s ndim %d shape %lld %lld\n", tsm_model_output_name(m, 0),
         tsm_model_output_dtype(m, 0), tsm_model_output_ndim(m, 0), (long long)shape[0],
         (long long)shape[1]);
  printf("y %.6f %.6f\n", y[0], y[n - 1]);
  printf("total %.6f\n", total);
  tsm_model_destroy(m);
  free(x);
  free(y);
  return 0;
}
