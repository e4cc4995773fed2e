/*
 * run_model.c -- run a tensorsmith CPU artifact from C, with no Python.
 *
 *     run_model MODEL.so IN0.bin [IN1.bin ...] [--shape I:D0,D1,...] [--out-dir DIR]
 *               [--repeat N]
 *
 * The artifact is opened with dlopen() at run time, so one program runs any model: it
 * asks the library for its inputs and outputs (names, dtypes, shapes, byte counts) through
 * the C ABI of tensorsmith_runtime.h and nothing else. Input i is read from the i-th file,
 * which holds the tensor's raw bytes (dense, C order, host byte order: what NumPy's
 * `array.tofile(path)` writes); each output is written the same way to DIR/<name>.bin
 * (DIR is created if it does not exist).
 * With --repeat N the model runs N more times and the mean and best latency are printed.
 * A model with dynamic shapes (sizes known only at run time, such as a batch) takes each
 * input at the shape that --shape I:D0,D1,... gives input I (through
 * tsm_model_set_input_shape); its outputs have the shapes that run computed.
 *
 * Build (the header's directory comes from the Python package, or copy the header):
 *     cc -O2 -I "$(python -c 'import tensorsmith.runtime as rt; print(rt.get_include())')" \
 *        run_model.c -o run_model -ldl
 *
 * Exit status: 0 success, 1 the model or a file failed (the message says which, with
 * tsm_last_error() for failures inside the library), 2 wrong command line.
 */
#define _POSIX_C_SOURCE 200809L

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "tensorsmith_runtime.h"

/* The C ABI, resolved with dlsym. __typeof__ (GCC, Clang) takes each pointer's type from
 * the header's declaration, so a signature can never drift from the header. */
#define TSM_FUNCTIONS(X)                                                                      \
  X(tsm_model_create) X(tsm_model_destroy) X(tsm_model_num_inputs) X(tsm_model_num_outputs) \
  X(tsm_model_set_input) X(tsm_model_run) X(tsm_model_get_output) X(tsm_last_error)         \
  X(tsm_model_input_name) X(tsm_model_output_name) X(tsm_model_input_dtype)                 \
  X(tsm_model_output_dtype) X(tsm_model_input_ndim) X(tsm_model_output_ndim)                \
  X(tsm_model_input_shape) X(tsm_model_output_shape) X(tsm_model_input_nbytes)              \
  X(tsm_model_output_nbytes)

#define DECLARE(name) __typeof__(name) *name;
typedef struct { TSM_FUNCTIONS(DECLARE) } tsm_api;
#undef DECLARE

#define MAX_NDIM 16

static const char *program = "run_model";

static int usage(void) {
  fprintf(stderr,
          "usage: %s MODEL.so IN0.bin [IN1.bin ...] [--shape I:D0,D1,...] [--out-dir DIR]\n"
          "          [--repeat N]\n"
          "  runs a tensorsmith CPU artifact; input i is the raw bytes of the i-th file,\n"
          "  at the shape --shape gives input I where the model's sizes are dynamic;\n"
          "  each output is written to DIR/<output name>.bin\n",
          program);
  return 2;
}

/* Opens the artifact and resolves every function; on failure prints why, returns NULL. */
static void *open_artifact(const char *path, tsm_api *api) {
  /* dlopen searches the library path for a name without '/': make it a path. */
  char *local = NULL;
  if (strchr(path, '/') == NULL) {
    local = malloc(strlen(path) + 3);
    if (local == NULL) return NULL;
    sprintf(local, "./%s", path);
  }
  void *lib = dlopen(local ? local : path, RTLD_NOW | RTLD_LOCAL);
  free(local);
  if (lib == NULL) {
    fprintf(stderr, "%s: cannot load '%s': %s\n", program, path, dlerror());
    return NULL;
  }
#define RESOLVE(name)                                                                   \
  *(void **)(&api->name) = dlsym(lib, #name);                                          \
  if (api->name == NULL) {                                                              \
    fprintf(stderr, "%s: '%s' does not export %s: not a tensorsmith CPU artifact?\n",   \
            program, path, #name);                                                      \
    dlclose(lib);                                                                       \
    return NULL;                                                                        \
  }
  TSM_FUNCTIONS(RESOLVE)
#undef RESOLVE
  return lib;
}

/* Reads a whole file into a new buffer; on failure prints why and returns NULL. */
static void *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    fprintf(stderr, "%s: cannot open '%s': %s\n", program, path, strerror(errno));
    return NULL;
  }
  char *data = NULL;
  size_t used = 0, room = 0;
  for (;;) {
    if (used == room) {
      room = room ? 2 * room : 1 << 16;
      char *bigger = realloc(data, room);
      if (bigger == NULL) {
        fprintf(stderr, "%s: out of memory reading '%s'\n", program, path);
        free(data);
        fclose(f);
        return NULL;
      }
      data = bigger;
    }
    size_t got = fread(data + used, 1, room - used, f);
    used += got;
    if (got == 0) break;
  }
  int failed = ferror(f);
  fclose(f);
  if (failed) {
    fprintf(stderr, "%s: cannot read '%s'\n", program, path);
    free(data);
    return NULL;
  }
  *size = used;
  return data;
}

static int write_file(const char *path, const void *data, size_t size) {
  FILE *f = fopen(path, "wb");
  if (f == NULL) {
    fprintf(stderr, "%s: cannot write '%s': %s\n", program, path, strerror(errno));
    return -1;
  }
  size_t put = size ? fwrite(data, 1, size, f) : 0;
  if (fclose(f) != 0 || put != size) {
    fprintf(stderr, "%s: cannot write '%s': %s\n", program, path, strerror(errno));
    return -1;
  }
  return 0;
}

/* "float32[1,3,224,224]" into buf. */
static const char *describe(char *buf, size_t room, const char *dtype, int ndim,
                            const int64_t *shape) {
  int n = snprintf(buf, room, "%s[", dtype ? dtype : "?");
  for (int d = 0; d < ndim && n > 0 && (size_t)n < room; ++d) {
    n += snprintf(buf + n, room - (size_t)n, d ? ",%" PRId64 : "%" PRId64, shape[d]);
  }
  if (n > 0 && (size_t)n < room) snprintf(buf + n, room - (size_t)n, "]");
  return buf;
}

/* DIR/<name>.bin, characters of the name other than [A-Za-z0-9._-] made '_' (an output
 * may be named "resnet/fc/out"). -1 if it does not fit. */
static int file_name(char *out, size_t room, const char *dir, const char *name) {
  int len = snprintf(out, room, "%s/", dir);
  if (len < 0) return -1;
  size_t n = (size_t)len;
  for (const char *c = name; *c; ++c) {
    int ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
             (*c >= '0' && *c <= '9') || *c == '.' || *c == '_' || *c == '-';
    if (n + 5 >= room) return -1;
    out[n++] = ok ? *c : '_';
  }
  if (n + 5 > room) return -1;
  memcpy(out + n, ".bin", 5);
  return 0;
}

/* "I:D0,D1,..." into *index, shape and *ndim; -1 if malformed. */
static int parse_shape(const char *text, int *index, int64_t *shape, int *ndim) {
  char *end;
  long i = strtol(text, &end, 10);
  if (end == text || *end != ':' || i < 0) return -1;
  *index = (int)i;
  *ndim = 0;
  const char *p = end + 1;
  while (*p != '\0') {
    if (*ndim == MAX_NDIM) return -1;
    long long d = strtoll(p, &end, 10);
    if (end == p || d < 0 || (*end != ',' && *end != '\0')) return -1;
    shape[(*ndim)++] = (int64_t)d;
    p = *end == ',' ? end + 1 : end;
  }
  return 0;
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

int main(int argc, char **argv) {
  const char *model_path = NULL, *out_dir = NULL;
  const char **input_paths = calloc((size_t)argc, sizeof(char *));
  const char **shape_texts = calloc((size_t)argc, sizeof(char *));
  int num_files = 0, num_shapes = 0;
  long repeat = 0;
  if (input_paths == NULL || shape_texts == NULL) return 1;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--shape") == 0 && i + 1 < argc) {
      shape_texts[num_shapes++] = argv[++i];
    } else if (strcmp(argv[i], "--out-dir") == 0 && i + 1 < argc) {
      out_dir = argv[++i];
    } else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) {
      char *end;
      repeat = strtol(argv[++i], &end, 10);
      if (*end != '\0' || repeat < 1) return usage();
    } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      usage();
      return 0;
    } else if (strncmp(argv[i], "--", 2) == 0) {
      return usage();
    } else if (model_path == NULL) {
      model_path = argv[i];
    } else {
      input_paths[num_files++] = argv[i];
    }
  }
  if (model_path == NULL) return usage();
  /* The output folder is made here (one level, as `mkdir DIR` would), so a first run
     does not fail on a folder nobody has made yet. */
  if (out_dir != NULL && mkdir(out_dir, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "%s: cannot create the output folder '%s': %s\n", program, out_dir,
            strerror(errno));
    return 1;
  }

  tsm_api api;
  void *lib = open_artifact(model_path, &api);
  if (lib == NULL) return 1;
  int status = 1;
  void *model = api.tsm_model_create();
  if (model == NULL) {
    fprintf(stderr, "%s: tsm_model_create: %s\n", program, api.tsm_last_error());
    dlclose(lib);
    return 1;
  }

  int num_inputs = api.tsm_model_num_inputs(model);
  int num_outputs = api.tsm_model_num_outputs(model);
  char text[512];
  int64_t shape[MAX_NDIM];
  if (num_files != num_inputs) {
    fprintf(stderr, "%s: the model takes %d input%s and %d file%s were given:\n", program,
            num_inputs, num_inputs == 1 ? "" : "s", num_files, num_files == 1 ? "" : "s");
    for (int i = 0; i < num_inputs; ++i) {
      int ndim = api.tsm_model_input_ndim(model, i);
      if (ndim < 0 || ndim > MAX_NDIM || api.tsm_model_input_shape(model, i, shape)) ndim = 0;
      fprintf(stderr, "  input %d '%s' %s, %zu bytes\n", i, api.tsm_model_input_name(model, i),
              describe(text, sizeof text, api.tsm_model_input_dtype(model, i), ndim, shape),
              api.tsm_model_input_nbytes(model, i));
    }
    status = 2;
    goto done;
  }

  /* Shapes first: a model with dynamic shapes sizes its inputs from them. The function is
     looked up only when needed, so libraries older than it still run without --shape. */
  for (int k = 0; k < num_shapes; ++k) {
    int index, ndim;
    if (parse_shape(shape_texts[k], &index, shape, &ndim) != 0) {
      fprintf(stderr, "%s: --shape %s: expected I:D0,D1,... (input index, sizes)\n", program,
              shape_texts[k]);
      status = 2;
      goto done;
    }
    int (*set_shape)(void *, int, int, const int64_t *);
    *(void **)(&set_shape) = dlsym(lib, "tsm_model_set_input_shape");
    if (set_shape == NULL) {
      fprintf(stderr, "%s: '%s' predates dynamic shapes: it takes no --shape\n", program,
              model_path);
      goto done;
    }
    if (set_shape(model, index, ndim, shape) != 0) {
      fprintf(stderr, "%s: --shape %s: %s\n", program, shape_texts[k], api.tsm_last_error());
      goto done;
    }
  }

  /* Inputs: the library checks the byte count and says what it expected. */
  for (int i = 0; i < num_inputs; ++i) {
    int ndim = api.tsm_model_input_ndim(model, i);
    if (ndim < 0 || ndim > MAX_NDIM || api.tsm_model_input_shape(model, i, shape)) {
      fprintf(stderr, "%s: input %d: %s\n", program, i, api.tsm_last_error());
      goto done;
    }
    size_t size = 0;
    void *data = read_file(input_paths[i], &size);
    if (data == NULL) goto done;
    int rc = api.tsm_model_set_input(model, i, data, size);
    free(data);
    if (rc != 0) {
      fprintf(stderr, "%s: input %d from '%s': %s\n", program, i, input_paths[i],
              api.tsm_last_error());
      goto done;
    }
    printf("input  %d %s %s <- %s\n", i, api.tsm_model_input_name(model, i),
           describe(text, sizeof text, api.tsm_model_input_dtype(model, i), ndim, shape),
           input_paths[i]);
  }

  double start = now_ms();
  if (api.tsm_model_run(model) != 0) {
    fprintf(stderr, "%s: tsm_model_run: %s\n", program, api.tsm_last_error());
    goto done;
  }
  double first_ms = now_ms() - start;

  for (int i = 0; i < num_outputs; ++i) {
    const char *name = api.tsm_model_output_name(model, i);
    int ndim = api.tsm_model_output_ndim(model, i);
    size_t nbytes = api.tsm_model_output_nbytes(model, i);
    if (name == NULL || ndim < 0 || ndim > MAX_NDIM ||
        api.tsm_model_output_shape(model, i, shape)) {
      fprintf(stderr, "%s: output %d: %s\n", program, i, api.tsm_last_error());
      goto done;
    }
    void *data = malloc(nbytes ? nbytes : 1);
    if (data == NULL) {
      fprintf(stderr, "%s: out of memory for output '%s'\n", program, name);
      goto done;
    }
    if (api.tsm_model_get_output(model, i, data, nbytes) != 0) {
      fprintf(stderr, "%s: output '%s': %s\n", program, name, api.tsm_last_error());
      free(data);
      goto done;
    }
    printf("output %d %s %s", i, name,
           describe(text, sizeof text, api.tsm_model_output_dtype(model, i), ndim, shape));
    if (out_dir != NULL) {
      char path[4096];
      if (file_name(path, sizeof path, out_dir, name) != 0) {
        fprintf(stderr, "%s: the path of output '%s' in '%s' is too long\n", program, name,
                out_dir);
        free(data);
        goto done;
      }
      if (write_file(path, data, nbytes) != 0) {
        free(data);
        goto done;
      }
      printf(" -> %s", path);
    }
    printf("\n");
    free(data);
  }

  if (repeat > 0) {
    double total = 0.0, best = 0.0;
    for (long r = 0; r < repeat; ++r) {
      double t0 = now_ms();
      if (api.tsm_model_run(model) != 0) {
        fprintf(stderr, "%s: tsm_model_run: %s\n", program, api.tsm_last_error());
        goto done;
      }
      double ms = now_ms() - t0;
      total += ms;
      if (r == 0 || ms < best) best = ms;
    }
    printf("latency over %ld runs: mean %.3f ms, min %.3f ms (first run %.3f ms)\n", repeat,
           total / (double)repeat, best, first_ms);
  }
  status = 0;

done:
  api.tsm_model_destroy(model);
  dlclose(lib);
  free(input_paths);
  free(shape_texts);
  return status;
}
