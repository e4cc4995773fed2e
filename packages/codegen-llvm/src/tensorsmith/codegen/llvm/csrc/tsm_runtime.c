/*
 * tsm_runtime.c -- the C ABI of tensorsmith_runtime.h, on top of the plan the compiler
 * generates (tsm_plan.h).
 *
 * Why it is built this way: the plan is static data, so a model is only its workspace
 * plus the argument arrays of its steps, computed once in tsm_model_create; tsm_model_run
 * then allocates nothing and is a loop of indirect calls. Every entry point checks its
 * arguments against the plan and refuses, with a message, instead of touching memory it
 * was not given: the ABI is called from ctypes and from C programs we never see.
 */
#define _POSIX_C_SOURCE 200809L

#include "tensorsmith_runtime.h"
#include "tsm_params.h"
#include "tsm_plan.h"
#include "tsm_threadpool.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TSM_ALIGNMENT 64

typedef struct {
  const tsm_plan *plan;
  unsigned char *workspace; /* TSM_ALIGNMENT-aligned, plan->workspace_bytes (or more) */
  void **step_args;         /* all steps' argument pointers, back to back */
  void ***args_of_step;     /* per step: where its arguments start in step_args */
  unsigned char *input_set; /* per input: set since creation */
  int has_run;
  atomic_int in_use;        /* refuses two threads on one model */
} tsm_model;

/* ---- errors ------------------------------------------------------------------------ */

static _Thread_local char last_error[1024];

__attribute__((format(printf, 1, 2))) static int fail(const char *format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(last_error, sizeof(last_error), format, args);
  va_end(args);
  return -1;
}

const char *tsm_last_error(void) { return last_error; }

/* ---- plan checks ------------------------------------------------------------------- */

/* Bytes per element of a dtype name, or 0 for a name this runtime does not size. */
static int64_t itemsize(const char *dtype) {
  static const struct {
    const char *name;
    int64_t bytes;
  } sizes[] = {{"bool", 1},    {"int8", 1},    {"uint8", 1},   {"int16", 2},  {"uint16", 2},
               {"float16", 2}, {"bfloat16", 2}, {"int32", 4},  {"uint32", 4}, {"float32", 4},
               {"int64", 8},   {"uint64", 8},  {"float64", 8}};
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
    if (strcmp(sizes[i].name, dtype) == 0) return sizes[i].bytes;
  }
  return 0;
}

/* Refuses a tensor whose byte count its shape contradicts. The product is overflow-checked:
 * a shape whose product wrapped around to the stated byte count would otherwise pass, and
 * a caller sizing its buffers from the shape would get far fewer bytes than it expects. */
static int check_io_bytes(const tsm_io *io, const char *what) {
  int64_t count = 1;
  for (int d = 0; d < io->ndim; ++d) {
    if (io->shape[d] < 0) {
      return fail("tsm_model_create: %s '%s' has a negative dimension (%" PRId64 ")", what,
                  io->name, io->shape[d]);
    }
    if (__builtin_mul_overflow(count, io->shape[d], &count)) {
      return fail("tsm_model_create: %s '%s' has more elements than 64 bits count; the "
                  "artifact is damaged",
                  what, io->name);
    }
  }
  int64_t size = itemsize(io->dtype), bytes = 0;
  if (size == 0) return 0; /* a dtype only its producer sizes: the count is still bounded */
  if (__builtin_mul_overflow(count, size, &bytes)) {
    return fail("tsm_model_create: %s '%s' has more bytes than 64 bits count; the artifact "
                "is damaged",
                what, io->name);
  }
  if (bytes != io->nbytes) {
    return fail("tsm_model_create: %s '%s' has %" PRId64 " bytes, but its shape and dtype make "
                "%" PRId64 "; the artifact is damaged",
                what, io->name, io->nbytes, bytes);
  }
  return 0;
}

static int check_io(const tsm_plan *plan, const tsm_io *io, const char *what, int index) {
  if (io->name == NULL || io->dtype == NULL || io->ndim < 0 || io->nbytes < 0 ||
      (io->ndim > 0 && io->shape == NULL)) {
    return fail("tsm_model_create: %s %d of the plan is malformed; the artifact is damaged or "
                "was built by a broken compiler",
                what, index);
  }
  if (check_io_bytes(io, what) != 0) return -1;
  if (io->buffer < 0 || io->buffer >= plan->num_buffers) {
    return fail("tsm_model_create: %s '%s' refers to buffer %d, but the plan has %d buffers",
                what, io->name, io->buffer, plan->num_buffers);
  }
  const tsm_buffer *b = &plan->buffers[io->buffer];
  if (io->nbytes > b->nbytes) {
    return fail("tsm_model_create: %s '%s' has %" PRId64 " bytes, more than its buffer %d (%" PRId64
                " bytes)",
                what, io->name, io->nbytes, io->buffer, b->nbytes);
  }
  return 0;
}

/* Refuses a plan whose buffers would make a kernel or a copy leave its memory. */
static int check_plan(const tsm_plan *plan) {
  if (plan->num_buffers < 0 || plan->num_steps < 0 || plan->num_inputs < 0 ||
      plan->num_outputs < 0 || plan->workspace_bytes < 0 || plan->params_bytes < 0) {
    return fail("tsm_model_create: the plan has negative counts; the artifact is damaged");
  }
  for (int i = 0; i < plan->num_buffers; ++i) {
    const tsm_buffer *b = &plan->buffers[i];
    if ((b->kind != TSM_PARAM && b->kind != TSM_WORKSPACE) || b->offset < 0 || b->nbytes < 0) {
      return fail("tsm_model_create: buffer %d of the plan is malformed (kind %d, offset %" PRId64
                  ", %" PRId64 " bytes)",
                  i, b->kind, b->offset, b->nbytes);
    }
    if (b->kind == TSM_PARAM && b->offset > plan->params_bytes - b->nbytes) {
      return fail("tsm_model_create: weights buffer %d (offset %" PRId64 ", %" PRId64
                  " bytes) ends past the weights' %" PRId64 " bytes",
                  i, b->offset, b->nbytes, plan->params_bytes);
    }
    if (b->kind == TSM_WORKSPACE && b->offset > plan->workspace_bytes - b->nbytes) {
      return fail("tsm_model_create: workspace buffer %d (offset %" PRId64 ", %" PRId64
                  " bytes) ends past the workspace of %" PRId64 " bytes",
                  i, b->offset, b->nbytes, plan->workspace_bytes);
    }
  }
  for (int i = 0; i < plan->num_inputs; ++i) {
    if (check_io(plan, &plan->inputs[i], "input", i) != 0) return -1;
    if (plan->buffers[plan->inputs[i].buffer].kind != TSM_WORKSPACE) {
      return fail("tsm_model_create: input '%s' is not in the workspace", plan->inputs[i].name);
    }
  }
  for (int i = 0; i < plan->num_outputs; ++i) {
    if (check_io(plan, &plan->outputs[i], "output", i) != 0) return -1;
  }
  if (plan->num_checks < 0 || (plan->num_checks > 0 && plan->checks == NULL)) {
    return fail("tsm_model_create: the plan's checks are malformed; the artifact is damaged");
  }
  for (int i = 0; i < plan->num_checks; ++i) {
    int b = plan->checks[i].buffer;
    if (b < 0 || b >= plan->num_buffers || plan->buffers[b].nbytes < 4 ||
        plan->checks[i].message == NULL) {
      return fail("tsm_model_create: check %d of the plan is malformed; the artifact is damaged",
                  i);
    }
  }
  for (int s = 0; s < plan->num_steps; ++s) {
    const tsm_step *step = &plan->steps[s];
    if (step->fn == NULL || step->nargs < 0 || (step->nargs > 0 && step->args == NULL)) {
      return fail("tsm_model_create: step %d of the plan is malformed", s);
    }
    for (int a = 0; a < step->nargs; ++a) {
      if (step->args[a] < 0 || step->args[a] >= plan->num_buffers) {
        return fail("tsm_model_create: step %d ('%s') argument %d refers to buffer %d, but the "
                    "plan has %d buffers",
                    s, step->name ? step->name : "?", a, step->args[a], plan->num_buffers);
      }
    }
  }
  return 0;
}

/* ---- lifetime ---------------------------------------------------------------------- */

static void *buffer_address(const tsm_model *m, int buffer) {
  const tsm_buffer *b = &m->plan->buffers[buffer];
  if (b->kind == TSM_PARAM) {
    /* Weights are read-only; kernels only read param buffers. */
    return (void *)(uintptr_t)(tsm_params(NULL) + b->offset);
  }
  return m->workspace + b->offset;
}

void tsm_model_destroy(void *model) {
  tsm_model *m = model;
  if (m == NULL) return;
  free(m->workspace);
  free(m->step_args);
  free(m->args_of_step);
  free(m->input_set);
  free(m);
}

/* ---- CPU features ------------------------------------------------------------------ */

/* Defined by the generated plan.c (plan_c.py): the index-th instruction-set extension the
 * kernels were compiled for that this CPU lacks, NULL past the last. Weak, so that a plan
 * without it (one written by hand, as the runtime's tests do) links and checks nothing. */
TSM_INTERNAL const char *tsm_plan_missing_cpu_feature(int index) __attribute__((weak));

/* Refuses a CPU that lacks an extension the kernels were compiled for: the first kernel
 * would otherwise kill the process with SIGILL ("Illegal instruction"), with no word about
 * why. The check is compiled for the baseline CPU, so it runs everywhere. */
static int check_cpu_features(void) {
  if (tsm_plan_missing_cpu_feature == NULL || tsm_plan_missing_cpu_feature(0) == NULL) return 0;
  char names[512] = "";
  size_t used = 0;
  const char *name;
  for (int i = 0; used < sizeof(names) && (name = tsm_plan_missing_cpu_feature(i)) != NULL; ++i) {
    int n = snprintf(names + used, sizeof(names) - used, "%s%s", i > 0 ? ", " : "", name);
    if (n < 0) break;
    used += (size_t)n;
  }
  return fail("tsm_model_create: this CPU lacks %s, which the model's code was compiled for "
              "(it would stop with an illegal instruction); compile the model again for this "
              "machine: with --target llvm on it, or with --target \"llvm -mcpu=<its CPU>\" "
              "(x86-64-v3 runs on every AVX2 machine)",
              names);
}

void *tsm_model_create(void) {
  if (check_cpu_features() != 0) return NULL;
  const tsm_plan *plan = &tsm_graph_plan;
  if (check_plan(plan) != 0) return NULL;
  const char *why = NULL;
  if (tsm_params(&why) == NULL) {
    fail("tsm_model_create: %s", why);
    return NULL;
  }

  size_t total_args = 0;
  for (int s = 0; s < plan->num_steps; ++s) total_args += (size_t)plan->steps[s].nargs;
  /* Round up: aligned allocations of a multiple of the alignment are portable. */
  size_t workspace_bytes =
      ((size_t)plan->workspace_bytes + TSM_ALIGNMENT - 1) / TSM_ALIGNMENT * TSM_ALIGNMENT;
  if (workspace_bytes == 0) workspace_bytes = TSM_ALIGNMENT;

  tsm_model *m = calloc(1, sizeof(*m));
  if (m == NULL) {
    fail("tsm_model_create: out of memory");
    return NULL;
  }
  m->plan = plan;
  void *workspace = NULL;
  if (posix_memalign(&workspace, TSM_ALIGNMENT, workspace_bytes) != 0) workspace = NULL;
  m->workspace = workspace;
  m->step_args = calloc(total_args > 0 ? total_args : 1, sizeof(void *));
  m->args_of_step = calloc(plan->num_steps > 0 ? (size_t)plan->num_steps : 1, sizeof(void **));
  m->input_set = calloc(plan->num_inputs > 0 ? (size_t)plan->num_inputs : 1, 1);
  if (m->workspace == NULL || m->step_args == NULL || m->args_of_step == NULL ||
      m->input_set == NULL) {
    tsm_model_destroy(m);
    fail("tsm_model_create: out of memory allocating a workspace of %zu bytes", workspace_bytes);
    return NULL;
  }
  /* Zeroed so a kernel that reads before writing is at least deterministic. */
  memset(m->workspace, 0, workspace_bytes);

  void **next = m->step_args;
  for (int s = 0; s < plan->num_steps; ++s) {
    const tsm_step *step = &plan->steps[s];
    m->args_of_step[s] = next;
    for (int a = 0; a < step->nargs; ++a) *next++ = buffer_address(m, step->args[a]);
  }
  atomic_init(&m->in_use, 0);
  return m;
}

/* ---- argument checks --------------------------------------------------------------- */

static const tsm_io *io_at(const void *model, int index, int is_input, const char *function) {
  const tsm_model *m = model;
  if (m == NULL) {
    fail("%s: the model is NULL; create one with tsm_model_create", function);
    return NULL;
  }
  int count = is_input ? m->plan->num_inputs : m->plan->num_outputs;
  if (index < 0 || index >= count) {
    fail("%s: %s index %d is out of range: the model has %d %s%s", function,
         is_input ? "input" : "output", index, count, is_input ? "input" : "output",
         count == 1 ? "" : "s");
    return NULL;
  }
  return is_input ? &m->plan->inputs[index] : &m->plan->outputs[index];
}

/* Marks the model busy for one call; refuses if another thread is using it. */
static int acquire(tsm_model *m, const char *function) {
  int expected = 0;
  if (!atomic_compare_exchange_strong(&m->in_use, &expected, 1)) {
    return fail("%s: the model is in use by another thread; create one model per thread",
                function);
  }
  return 0;
}

static void release(tsm_model *m) { atomic_store(&m->in_use, 0); }

/* ---- running ----------------------------------------------------------------------- */

int tsm_model_num_inputs(const void *model) {
  if (model == NULL) return fail("tsm_model_num_inputs: the model is NULL");
  return ((const tsm_model *)model)->plan->num_inputs;
}

int tsm_model_num_outputs(const void *model) {
  if (model == NULL) return fail("tsm_model_num_outputs: the model is NULL");
  return ((const tsm_model *)model)->plan->num_outputs;
}

int tsm_model_set_input(void *model, int index, const void *data, size_t nbytes) {
  const tsm_io *io = io_at(model, index, 1, "tsm_model_set_input");
  if (io == NULL) return -1;
  if (nbytes != (size_t)io->nbytes) {
    return fail("tsm_model_set_input: input '%s' (index %d) takes %" PRId64 " bytes, got %zu",
                io->name, index, io->nbytes, nbytes);
  }
  if (data == NULL && nbytes > 0) {
    return fail("tsm_model_set_input: data for input '%s' is NULL", io->name);
  }
  tsm_model *m = model;
  if (acquire(m, "tsm_model_set_input") != 0) return -1;
  if (nbytes > 0) memcpy(buffer_address(m, io->buffer), data, nbytes);
  m->input_set[index] = 1;
  release(m);
  return 0;
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* Runs every step; times them into step_ms unless it is NULL. */
static int run(tsm_model *m, double *step_ms, const char *function) {
  const tsm_plan *plan = m->plan;
  if (acquire(m, function) != 0) return -1;
  for (int i = 0; i < plan->num_inputs; ++i) {
    if (!m->input_set[i]) {
      release(m);
      return fail("%s: input '%s' (index %d) was never set; call tsm_model_set_input first",
                  function, plan->inputs[i].name, i);
    }
  }
  if (step_ms == NULL) {
    for (int s = 0; s < plan->num_steps; ++s) plan->steps[s].fn(m->args_of_step[s]);
  } else {
    for (int s = 0; s < plan->num_steps; ++s) {
      double start = now_ms();
      plan->steps[s].fn(m->args_of_step[s]);
      step_ms[s] = now_ms() - start;
    }
  }
  for (int i = 0; i < plan->num_checks; ++i) {
    int32_t flag;
    memcpy(&flag, buffer_address(m, plan->checks[i].buffer), sizeof(flag));
    if (flag != 0) {
      m->has_run = 0; /* these outputs are not an answer */
      release(m);
      return fail("%s: %s", function, plan->checks[i].message);
    }
  }
  m->has_run = 1;
  release(m);
  return 0;
}

int tsm_model_run(void *model) {
  if (model == NULL) return fail("tsm_model_run: the model is NULL");
  return run(model, NULL, "tsm_model_run");
}

int tsm_model_run_profiled(void *model, double *step_ms) {
  if (model == NULL) return fail("tsm_model_run_profiled: the model is NULL");
  if (step_ms == NULL) {
    return fail("tsm_model_run_profiled: step_ms is NULL; pass an array of "
                "tsm_model_num_steps doubles");
  }
  return run(model, step_ms, "tsm_model_run_profiled");
}

int tsm_model_get_output(void *model, int index, void *data, size_t nbytes) {
  const tsm_io *io = io_at(model, index, 0, "tsm_model_get_output");
  if (io == NULL) return -1;
  if (nbytes != (size_t)io->nbytes) {
    return fail("tsm_model_get_output: output '%s' (index %d) has %" PRId64 " bytes, got room "
                "for %zu",
                io->name, index, io->nbytes, nbytes);
  }
  if (data == NULL && nbytes > 0) {
    return fail("tsm_model_get_output: data for output '%s' is NULL", io->name);
  }
  tsm_model *m = model;
  if (acquire(m, "tsm_model_get_output") != 0) return -1;
  if (!m->has_run) {
    release(m);
    return fail("tsm_model_get_output: output '%s' has no value yet; call tsm_model_run first",
                io->name);
  }
  if (nbytes > 0) memcpy(data, buffer_address(m, io->buffer), nbytes);
  release(m);
  return 0;
}

/* ---- introspection ----------------------------------------------------------------- */

const char *tsm_model_input_name(const void *model, int index) {
  const tsm_io *io = io_at(model, index, 1, "tsm_model_input_name");
  return io ? io->name : NULL;
}

const char *tsm_model_output_name(const void *model, int index) {
  const tsm_io *io = io_at(model, index, 0, "tsm_model_output_name");
  return io ? io->name : NULL;
}

const char *tsm_model_input_dtype(const void *model, int index) {
  const tsm_io *io = io_at(model, index, 1, "tsm_model_input_dtype");
  return io ? io->dtype : NULL;
}

const char *tsm_model_output_dtype(const void *model, int index) {
  const tsm_io *io = io_at(model, index, 0, "tsm_model_output_dtype");
  return io ? io->dtype : NULL;
}

int tsm_model_input_ndim(const void *model, int index) {
  const tsm_io *io = io_at(model, index, 1, "tsm_model_input_ndim");
  return io ? io->ndim : -1;
}

int tsm_model_output_ndim(const void *model, int index) {
  const tsm_io *io = io_at(model, index, 0, "tsm_model_output_ndim");
  return io ? io->ndim : -1;
}

static int copy_shape(const tsm_io *io, int64_t *shape, const char *function) {
  if (io == NULL) return -1;
  if (io->ndim > 0 && shape == NULL) {
    return fail("%s: shape is NULL; pass room for %d values", function, io->ndim);
  }
  for (int d = 0; d < io->ndim; ++d) shape[d] = io->shape[d];
  return 0;
}

int tsm_model_input_shape(const void *model, int index, int64_t *shape) {
  return copy_shape(io_at(model, index, 1, "tsm_model_input_shape"), shape,
                    "tsm_model_input_shape");
}

int tsm_model_output_shape(const void *model, int index, int64_t *shape) {
  return copy_shape(io_at(model, index, 0, "tsm_model_output_shape"), shape,
                    "tsm_model_output_shape");
}

size_t tsm_model_input_nbytes(const void *model, int index) {
  const tsm_io *io = io_at(model, index, 1, "tsm_model_input_nbytes");
  return io ? (size_t)io->nbytes : 0;
}

size_t tsm_model_output_nbytes(const void *model, int index) {
  const tsm_io *io = io_at(model, index, 0, "tsm_model_output_nbytes");
  return io ? (size_t)io->nbytes : 0;
}

static int index_of(const void *model, const char *name, int is_input, const char *function) {
  const tsm_model *m = model;
  if (m == NULL) return fail("%s: the model is NULL", function);
  if (name == NULL) return fail("%s: name is NULL", function);
  int count = is_input ? m->plan->num_inputs : m->plan->num_outputs;
  const tsm_io *ios = is_input ? m->plan->inputs : m->plan->outputs;
  for (int i = 0; i < count; ++i) {
    if (strcmp(ios[i].name, name) == 0) return i;
  }
  return fail("%s: the model has no %s named '%s'", function, is_input ? "input" : "output",
              name);
}

int tsm_model_input_index(const void *model, const char *name) {
  return index_of(model, name, 1, "tsm_model_input_index");
}

int tsm_model_output_index(const void *model, const char *name) {
  return index_of(model, name, 0, "tsm_model_output_index");
}

const char *tsm_artifact_metadata(void) {
  return tsm_graph_plan.metadata_json != NULL ? tsm_graph_plan.metadata_json : "{}";
}

int tsm_set_num_threads(int n) {
  if (n < 0) {
    return fail("tsm_set_num_threads: %d threads is not a thread count; pass n >= 1, or 0 for "
                "one per core",
                n);
  }
  tsm_pool_set_num_threads(n);
  return 0;
}

/* ---- profiling --------------------------------------------------------------------- */

int tsm_model_num_steps(const void *model) {
  if (model == NULL) return fail("tsm_model_num_steps: the model is NULL");
  return ((const tsm_model *)model)->plan->num_steps;
}

const char *tsm_model_step_name(const void *model, int index) {
  const tsm_model *m = model;
  if (m == NULL) {
    fail("tsm_model_step_name: the model is NULL");
    return NULL;
  }
  if (index < 0 || index >= m->plan->num_steps) {
    fail("tsm_model_step_name: step index %d is out of range: the model has %d steps", index,
         m->plan->num_steps);
    return NULL;
  }
  const char *name = m->plan->steps[index].name;
  return name != NULL ? name : "";
}
