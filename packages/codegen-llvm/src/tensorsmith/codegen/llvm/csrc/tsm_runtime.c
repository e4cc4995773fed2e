/*
 * tsm_runtime.c -- the C ABI of tensorsmith_runtime.h, on top of the plan the compiler
 * generates (tsm_plan.h).
 *
 * Why it is built this way: the plan is static data, so a model is only its workspace
 * plus the argument arrays of its steps, computed once in tsm_model_create; tsm_model_run
 * then allocates nothing and is a loop of indirect calls. Every entry point checks its
 * arguments against the plan and refuses, with a message, instead of touching memory it
 * was not given: the ABI is called from ctypes and from C programs we never see.
 *
 * A plan with symbols (dynamic shapes, tsm_plan.h) adds one thing a run may do before its
 * first step: learn the symbols from the inputs' shapes, check them, and -- only when they
 * differ from the last run's -- place the buffers whose size depends on them and point
 * the steps' arguments at the new places. Everything that needs is allocated with the
 * model, except the dynamic region itself, which grows when a placement needs more.
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

/* A dynamic buffer waiting for its place, and one placed that is still live. */
typedef struct {
  int first;
  int64_t bytes;
  int index;
} tsm_pending;

typedef struct {
  int64_t offset, bytes;
  int last;
} tsm_live;

/* What a model of a plan with symbols keeps (tsm_plan.h, "dynamic shapes"). */
typedef struct {
  int64_t *symbols;       /* the current placement's values (the last run's) */
  int64_t *sizes;         /* compute_sizes of them */
  int64_t *next_symbols;  /* a run's binding, until it is placed */
  int64_t *next_sizes;
  int64_t *run_symbols;   /* the symbols as this run knows them: counted ones, once counted */
  int64_t *run_sizes;     /* compute_sizes of them: the outputs' shapes */
  int *bound_input;       /* per symbol: the input and axis that gave it in the binding */
  int *bound_axis;
  int64_t **input_shape;  /* per input: the shape the caller set (NULL: a static input) */
  int64_t *shapes;        /* the memory of input_shape */
  int64_t *input_nbytes;  /* per input: its bytes in that shape */
  int *dynamic_of_buffer; /* per plan buffer: its index in tsm_symbolic.dynamic, or -1 */
  int *dynamic_of_input;  /* per input: the dynamic buffer of a symbolic input, or -1 */
  unsigned char *holds_input; /* per dynamic buffer: a symbolic input's slot */
  int64_t *offset;        /* per dynamic buffer: where it is in the region */
  int64_t *next_offset;   /* a placement being made */
  tsm_pending *pending;   /* scratch of a placement */
  tsm_live *live;
  unsigned char *region;  /* TSM_ALIGNMENT-aligned, capacity bytes */
  int64_t capacity;
  int64_t inputs_end;     /* the symbolic inputs' slots take region[0, inputs_end) */
  int placed;             /* the steps' arguments point at the current placement */
} tsm_dynamic;

typedef struct {
  const tsm_plan *plan;
  unsigned char *workspace; /* TSM_ALIGNMENT-aligned, plan->workspace_bytes (or more) */
  void **step_args;         /* all steps' argument pointers, back to back */
  void ***args_of_step;     /* per step: where its arguments start in step_args */
  unsigned char *input_set; /* per input: set since creation (or since its shape changed) */
  int has_run;
  atomic_int in_use;        /* refuses two threads on one model */
  tsm_dynamic *dyn;         /* NULL for a static plan */
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

/* The symbolic sizes of input or output `index`, or NULL where all its sizes are static
 * (always in a static plan). */
static const tsm_io_sizes *io_sizes(const tsm_plan *plan, int is_input, int index) {
  const tsm_symbolic *sym = plan->symbolic;
  if (sym == NULL) return NULL;
  const tsm_io_sizes *sizes = is_input ? &sym->inputs[index] : &sym->outputs[index];
  return sizes->dims != NULL ? sizes : NULL;
}

static int damaged(const char *what) {
  return fail("tsm_model_create: %s; the artifact is damaged or was built by a broken compiler",
              what);
}

static int check_io(const tsm_plan *plan, const tsm_io *io, int is_input, int index) {
  const char *what = is_input ? "input" : "output";
  if (io->name == NULL || io->dtype == NULL || io->ndim < 0 || io->nbytes < 0 ||
      (io->ndim > 0 && io->shape == NULL)) {
    return fail("tsm_model_create: %s %d of the plan is malformed; the artifact is damaged or "
                "was built by a broken compiler",
                what, index);
  }
  if (io->buffer < 0 || io->buffer >= plan->num_buffers) {
    return fail("tsm_model_create: %s '%s' refers to buffer %d, but the plan has %d buffers",
                what, io->name, io->buffer, plan->num_buffers);
  }
  const tsm_buffer *b = &plan->buffers[io->buffer];
  const tsm_io_sizes *sizes = io_sizes(plan, is_input, index);
  if (sizes != NULL) {
    /* sizes computed at run time: check that they index what compute_sizes gives */
    int num_sizes = plan->symbolic->num_sizes;
    int bad = sizes->nbytes < 0 || sizes->nbytes >= num_sizes || b->kind != TSM_DYNAMIC;
    for (int d = 0; d < io->ndim; ++d) {
      bad |= sizes->dims[d] < -1 || sizes->dims[d] >= num_sizes ||
             (sizes->dims[d] < 0 && io->shape[d] < 0);
    }
    if (bad) {
      return fail("tsm_model_create: the symbolic sizes of %s '%s' are malformed; the "
                  "artifact is damaged",
                  what, io->name);
    }
    if (itemsize(io->dtype) == 0) {
      return fail("tsm_model_create: %s '%s' has dtype '%s', whose size this runtime does not "
                  "know, and a size known only at run time",
                  what, io->name, io->dtype);
    }
    return 0;
  }
  if (plan->symbolic != NULL) {
    const tsm_io_sizes *entry =
        is_input ? &plan->symbolic->inputs[index] : &plan->symbolic->outputs[index];
    if (entry->nbytes != -1) return damaged("a static tensor has a symbolic byte count");
  }
  if (check_io_bytes(io, what) != 0) return -1;
  if (b->kind == TSM_DYNAMIC) {
    return fail("tsm_model_create: %s '%s' has a static shape but lies in buffer %d, whose "
                "size is symbolic; the artifact is damaged",
                what, io->name, io->buffer);
  }
  if (io->nbytes > b->nbytes) {
    return fail("tsm_model_create: %s '%s' has %" PRId64 " bytes, more than its buffer %d (%" PRId64
                " bytes)",
                what, io->name, io->nbytes, io->buffer, b->nbytes);
  }
  return 0;
}

/* The tables of a plan with symbols that the rest of the checks rely on. */
static int check_symbolic_tables(const tsm_plan *plan) {
  const tsm_symbolic *sym = plan->symbolic;
  if (sym->num_symbols < 1 || sym->symbols == NULL || sym->num_sizes < sym->num_symbols ||
      sym->size_texts == NULL || sym->compute_sizes == NULL ||
      (plan->num_inputs > 0 && sym->inputs == NULL) ||
      (plan->num_outputs > 0 && sym->outputs == NULL) || sym->num_dynamic < 0 ||
      (sym->num_dynamic > 0 && sym->dynamic == NULL) || sym->num_symbol_buffers < 0 ||
      (sym->num_symbol_buffers > 0 && sym->symbol_buffers == NULL)) {
    return damaged("the plan's symbolic sizes are malformed");
  }
  for (int k = 0; k < sym->num_symbols; ++k) {
    if (sym->symbols[k] == NULL) return damaged("a symbol of the plan has no name");
  }
  for (int k = 0; k < sym->num_sizes; ++k) {
    if (sym->size_texts[k] == NULL) return damaged("a symbolic size of the plan has no text");
  }
  if (sym->num_assumptions < 0 || (sym->num_assumptions > 0 && sym->assumptions == NULL)) {
    return damaged("the plan's assumptions are malformed");
  }
  for (int a = 0; a < sym->num_assumptions; ++a) {
    const tsm_assumption *as = &sym->assumptions[a];
    if (as->lhs < 0 || as->lhs >= sym->num_sizes || as->rhs < 0 || as->rhs >= sym->num_sizes ||
        as->message == NULL) {
      return damaged("an assumption of the plan is malformed");
    }
  }
  return 0;
}

/* The rest of a plan with symbols: its dynamic buffers, its symbol buffers, and that the
 * inputs give every symbol. */
static int check_symbolic(const tsm_plan *plan) {
  const tsm_symbolic *sym = plan->symbolic;
  for (int k = 0; k < sym->num_dynamic; ++k) {
    const tsm_dynamic_buffer *d = &sym->dynamic[k];
    if (d->buffer < 0 || d->buffer >= plan->num_buffers ||
        plan->buffers[d->buffer].kind != TSM_DYNAMIC || d->nbytes < 0 ||
        d->nbytes >= sym->num_sizes || d->first < 0 || d->first > d->last ||
        d->last > plan->num_steps) {
      return fail("tsm_model_create: dynamic buffer %d of the plan is malformed (buffer %d, "
                  "size %d, steps %d..%d); the artifact is damaged",
                  k, d->buffer, d->nbytes, d->first, d->last);
    }
  }
  for (int k = 0; k < sym->num_symbol_buffers; ++k) {
    const tsm_symbol_buffer *sb = &sym->symbol_buffers[k];
    int bad = sb->buffer < 0 || sb->buffer >= plan->num_buffers || sb->count < 1 ||
              sb->count > sym->num_symbols || sb->symbols == NULL;
    bad = bad || plan->buffers[sb->buffer].kind != TSM_WORKSPACE ||
          plan->buffers[sb->buffer].nbytes < 8 * (int64_t)sb->count;
    for (int j = 0; !bad && j < sb->count; ++j) {
      bad = sb->symbols[j] < 0 || sb->symbols[j] >= sym->num_symbols;
    }
    if (bad) {
      return fail("tsm_model_create: symbol buffer %d of the plan is malformed; the artifact "
                  "is damaged",
                  k);
    }
  }
  if (sym->num_computed < 0 || (sym->num_computed > 0 &&
                                 (sym->computed == NULL || sym->compute_values == NULL))) {
    return damaged("the plan's computed sizes are malformed");
  }
  for (int j = 0; j < sym->num_computed; ++j) {
    const tsm_computed *c = &sym->computed[j];
    if (c->symbol < 0 || c->symbol >= sym->num_symbols || c->expr == NULL || c->message == NULL) {
      return damaged("a computed size of the plan is malformed");
    }
  }
  if (sym->num_counted < 0 || (sym->num_counted > 0 && sym->counted == NULL)) {
    return damaged("the plan's counted sizes are malformed");
  }
  for (int j = 0; j < sym->num_counted; ++j) {
    const tsm_counted *c = &sym->counted[j];
    if (c->symbol < 0 || c->symbol >= sym->num_symbols || c->bound < 0 ||
        c->bound >= sym->num_sizes || c->buffer < 0 || c->buffer >= plan->num_buffers ||
        plan->buffers[c->buffer].kind != TSM_WORKSPACE || plan->buffers[c->buffer].nbytes < 8 ||
        c->step < 0 || c->step >= plan->num_steps || c->message == NULL) {
      return damaged("a counted size of the plan is malformed");
    }
  }
  for (int k = 0; k < sym->num_symbols; ++k) {
    int given = 0;
    for (int j = 0; j < sym->num_computed && !given; ++j) given = sym->computed[j].symbol == k;
    for (int j = 0; j < sym->num_counted && !given; ++j) given = sym->counted[j].symbol == k;
    for (int i = 0; i < plan->num_inputs && !given; ++i) {
      const tsm_io_sizes *sizes = io_sizes(plan, 1, i);
      for (int d = 0; sizes != NULL && d < plan->inputs[i].ndim; ++d) given |= sizes->dims[d] == k;
    }
    if (!given) {
      return fail("tsm_model_create: the plan's size '%s' is the size of no input axis and "
                  "is not computed, so a run cannot learn it; the artifact is damaged",
                  sym->symbols[k]);
    }
  }
  return 0;
}

/* Refuses a plan whose buffers would make a kernel or a copy leave its memory. */
static int check_plan(const tsm_plan *plan) {
  if (plan->num_buffers < 0 || plan->num_steps < 0 || plan->num_inputs < 0 ||
      plan->num_outputs < 0 || plan->workspace_bytes < 0 || plan->params_bytes < 0) {
    return fail("tsm_model_create: the plan has negative counts; the artifact is damaged");
  }
  if (plan->symbolic != NULL && check_symbolic_tables(plan) != 0) return -1;
  for (int i = 0; i < plan->num_buffers; ++i) {
    const tsm_buffer *b = &plan->buffers[i];
    if ((b->kind != TSM_PARAM && b->kind != TSM_WORKSPACE &&
         (b->kind != TSM_DYNAMIC || plan->symbolic == NULL)) ||
        b->offset < 0 || b->nbytes < 0 || (b->kind == TSM_DYNAMIC && (b->offset | b->nbytes))) {
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
    if (check_io(plan, &plan->inputs[i], 1, i) != 0) return -1;
    if (plan->buffers[plan->inputs[i].buffer].kind == TSM_PARAM) {
      return fail("tsm_model_create: input '%s' is not in the workspace", plan->inputs[i].name);
    }
  }
  for (int i = 0; i < plan->num_outputs; ++i) {
    if (check_io(plan, &plan->outputs[i], 0, i) != 0) return -1;
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
  if (plan->symbolic != NULL && check_symbolic(plan) != 0) return -1;
  return 0;
}

/* ---- lifetime ---------------------------------------------------------------------- */

static void *buffer_address(const tsm_model *m, int buffer) {
  const tsm_buffer *b = &m->plan->buffers[buffer];
  if (b->kind == TSM_PARAM) {
    /* Weights are read-only; kernels only read param buffers. */
    return (void *)(uintptr_t)(tsm_params(NULL) + b->offset);
  }
  if (b->kind == TSM_DYNAMIC) {
    return m->dyn->region + m->dyn->offset[m->dyn->dynamic_of_buffer[buffer]];
  }
  return m->workspace + b->offset;
}

static void dynamic_destroy(tsm_dynamic *st) {
  if (st == NULL) return;
  free(st->symbols);
  free(st->sizes);
  free(st->next_symbols);
  free(st->next_sizes);
  free(st->run_symbols);
  free(st->run_sizes);
  free(st->bound_input);
  free(st->bound_axis);
  free(st->input_shape);
  free(st->shapes);
  free(st->input_nbytes);
  free(st->dynamic_of_buffer);
  free(st->dynamic_of_input);
  free(st->holds_input);
  free(st->offset);
  free(st->next_offset);
  free(st->pending);
  free(st->live);
  free(st->region);
  free(st);
}

void tsm_model_destroy(void *model) {
  tsm_model *m = model;
  if (m == NULL) return;
  free(m->workspace);
  free(m->step_args);
  free(m->args_of_step);
  free(m->input_set);
  dynamic_destroy(m->dyn);
  free(m);
}

/* Points every step's arguments at its buffers' current places. */
static void point_step_args(tsm_model *m) {
  const tsm_plan *plan = m->plan;
  void **next = m->step_args;
  for (int s = 0; s < plan->num_steps; ++s) {
    const tsm_step *step = &plan->steps[s];
    m->args_of_step[s] = next;
    for (int a = 0; a < step->nargs; ++a) *next++ = buffer_address(m, step->args[a]);
  }
}

/* ---- dynamic shapes ---------------------------------------------------------------- */

/* The bytes a buffer of `nbytes` takes in the dynamic region: a 64-byte-aligned slot of at
 * least 64 bytes, as the compiler's memory planner gives each static buffer. */
static int64_t slot_bytes(int64_t nbytes) {
  return ((nbytes > 0 ? nbytes : 1) + TSM_ALIGNMENT - 1) / TSM_ALIGNMENT * TSM_ALIGNMENT;
}

/* A zeroed, TSM_ALIGNMENT-aligned block of `bytes` (a multiple of it), or NULL. Zeroed so
 * a kernel that reads before writing is at least deterministic, as in the workspace. */
static unsigned char *zeroed_block(int64_t bytes) {
  void *block = NULL;
  if (bytes <= 0 || (uint64_t)bytes > SIZE_MAX ||
      posix_memalign(&block, TSM_ALIGNMENT, (size_t)bytes) != 0) {
    return NULL;
  }
  memset(block, 0, (size_t)bytes);
  return block;
}

/* "batch = 2, seq = 9": the symbols' values, for messages. */
static const char *describe_symbols(const tsm_model *m, const int64_t *values, char *text,
                                    size_t room) {
  const tsm_symbolic *sym = m->plan->symbolic;
  size_t used = 0;
  text[0] = '\0';
  for (int k = 0; k < sym->num_symbols && used < room; ++k) {
    int n = snprintf(text + used, room - used, "%s%s = %" PRId64, k > 0 ? ", " : "",
                     sym->symbols[k], values[k]);
    if (n < 0) break;
    used += (size_t)n;
  }
  return text;
}

/* Whether `name` occurs in `text` as a whole identifier. */
static int mentions(const char *text, const char *name) {
  size_t length = strlen(name);
  for (const char *at = strstr(text, name); at != NULL; at = strstr(at + 1, name)) {
    char before = at == text ? ' ' : at[-1], after = at[length];
    int word_before = before == '_' || (before >= '0' && before <= '9') ||
                      (before >= 'a' && before <= 'z') || (before >= 'A' && before <= 'Z');
    int word_after = after == '_' || (after >= '0' && after <= '9') ||
                     (after >= 'a' && after <= 'z') || (after >= 'A' && after <= 'Z');
    if (!word_before && !word_after) return 1;
  }
  return 0;
}

/* Refuses input `index` axis `d` of size `actual`, which the binding says must be size
 * `k` (its value in next_sizes), naming where the symbols came from. */
static int refuse_axis(const tsm_model *m, int index, int d, int64_t actual, int k,
                       const char *function) {
  const tsm_symbolic *sym = m->plan->symbolic;
  const tsm_dynamic *st = m->dyn;
  const char *name = m->plan->inputs[index].name;
  if (k < sym->num_symbols) {
    return fail("%s: input '%s' axis %d is %" PRId64 ", but '%s' is %" PRId64
                " from input '%s' axis %d",
                function, name, d, actual, sym->symbols[k], st->next_symbols[k],
                m->plan->inputs[st->bound_input[k]].name, st->bound_axis[k]);
  }
  char where[512] = "";
  size_t used = 0;
  for (int j = 0; j < sym->num_symbols && used < sizeof(where); ++j) {
    if (st->bound_input[j] < 0 || !mentions(sym->size_texts[k], sym->symbols[j])) continue;
    int n = snprintf(where + used, sizeof(where) - used, "%s'%s' is %" PRId64
                     " from input '%s' axis %d",
                     used > 0 ? ", " : "", sym->symbols[j], st->next_symbols[j],
                     m->plan->inputs[st->bound_input[j]].name, st->bound_axis[j]);
    if (n < 0) break;
    used += (size_t)n;
  }
  return fail("%s: input '%s' axis %d is %" PRId64 ", but it must be %s = %" PRId64 ", where %s",
              function, name, d, actual, sym->size_texts[k], st->next_sizes[k], where);
}

/* Refuses sizes a run cannot have: negative, or over TSM_MAX_TENSOR_BYTES, or a tensor's
 * byte count that its own shape or its buffer contradicts (a damaged plan). */
static int check_sizes(const tsm_model *m, const int64_t *symbols, const int64_t *sizes,
                       const char *function) {
  const tsm_plan *plan = m->plan;
  const tsm_symbolic *sym = plan->symbolic;
  char values[512];
  for (int k = 0; k < sym->num_dynamic; ++k) {
    int64_t bytes = sizes[sym->dynamic[k].nbytes];
    if (bytes < 0 || bytes > TSM_MAX_TENSOR_BYTES) {
      return fail("%s: with %s, buffer %d of the model would take %" PRId64 " bytes (%s), "
                  "which is %s",
                  function, describe_symbols(m, symbols, values, sizeof(values)),
                  sym->dynamic[k].buffer, bytes, sym->size_texts[sym->dynamic[k].nbytes],
                  bytes < 0 ? "negative: these shapes do not fit the model"
                            : "over the limit of 2**48 bytes (256 TiB) per tensor");
    }
  }
  for (int io_kind = 1; io_kind >= 0; --io_kind) {
    int count = io_kind ? plan->num_inputs : plan->num_outputs;
    for (int i = 0; i < count; ++i) {
      const tsm_io_sizes *ios = io_sizes(plan, io_kind, i);
      if (ios == NULL) continue;
      const tsm_io *io = io_kind ? &plan->inputs[i] : &plan->outputs[i];
      int64_t elements = 1;
      int overflow = 0;
      for (int d = 0; d < io->ndim; ++d) {
        int64_t size = ios->dims[d] >= 0 ? sizes[ios->dims[d]] : io->shape[d];
        if (size < 0) {
          return fail("%s: with %s, %s '%s' axis %d would be %s = %" PRId64
                      ", a negative size: these shapes do not fit the model",
                      function, describe_symbols(m, symbols, values, sizeof(values)),
                      io_kind ? "input" : "output", io->name, d,
                      sym->size_texts[ios->dims[d]], size);
        }
        overflow |= __builtin_mul_overflow(elements, size, &elements);
      }
      int64_t bytes = 0, nbytes = sizes[ios->nbytes];
      overflow |= __builtin_mul_overflow(elements, itemsize(io->dtype), &bytes);
      const tsm_dynamic_buffer *buffer = &sym->dynamic[m->dyn->dynamic_of_buffer[io->buffer]];
      if (overflow || bytes != nbytes || nbytes > sizes[buffer->nbytes]) {
        return fail("%s: with %s, %s '%s' has %" PRId64 " bytes, which its shape or its buffer "
                    "contradicts; the artifact is damaged",
                    function, describe_symbols(m, symbols, values, sizeof(values)),
                    io_kind ? "input" : "output", io->name, nbytes);
      }
    }
  }
  return 0;
}

/* Computes the symbols that small inputs' values give (tsm_computed) into next_symbols. */
static int compute_values(tsm_model *m, const char *function) {
  const tsm_plan *plan = m->plan;
  const tsm_symbolic *sym = plan->symbolic;
  const void *stack[16];
  const void **data =
      plan->num_inputs <= 16 ? stack : malloc(sizeof(void *) * (size_t)plan->num_inputs);
  if (data == NULL) return fail("%s: out of memory", function);
  for (int i = 0; i < plan->num_inputs; ++i) data[i] = buffer_address(m, plan->inputs[i].buffer);
  int bad = 0;
  int failed = sym->compute_values(m->dyn->next_symbols, data, &bad);
  if (data != stack) free(data);
  if (failed == 0) return 0;
  const tsm_computed *c = &sym->computed[failed - 1];
  if (bad) {
    return fail("%s: %s: the size '%s' cannot be computed from these inputs (it overflows or "
                "divides by zero; `tensorsmith inspect` shows how it is computed)",
                function, c->message, sym->symbols[c->symbol]);
  }
  return fail("%s: %s: the size '%s' computed from these inputs is %" PRId64 ", but it must be "
              "at least 1 (`tensorsmith inspect` shows how it is computed)",
              function, c->message, sym->symbols[c->symbol], m->dyn->next_symbols[c->symbol]);
}

/* Learns the symbols from the inputs' shapes into next_symbols, computes next_sizes, and
 * checks every symbolic axis and size against them. */
static int bind(tsm_model *m, const char *function) {
  const tsm_plan *plan = m->plan;
  const tsm_symbolic *sym = plan->symbolic;
  tsm_dynamic *st = m->dyn;
  for (int k = 0; k < sym->num_symbols; ++k) st->bound_input[k] = -1;
  for (int i = 0; i < plan->num_inputs; ++i) {
    const tsm_io_sizes *ios = io_sizes(plan, 1, i);
    for (int d = 0; ios != NULL && d < plan->inputs[i].ndim; ++d) {
      int k = ios->dims[d];
      if (k >= 0 && k < sym->num_symbols && st->bound_input[k] < 0) {
        st->next_symbols[k] = st->input_shape[i][d];
        st->bound_input[k] = i;
        st->bound_axis[k] = d;
      }
    }
  }
  for (int j = 0; j < sym->num_computed; ++j) st->bound_input[sym->computed[j].symbol] = -2;
  for (int j = 0; j < sym->num_counted; ++j) {
    st->bound_input[sym->counted[j].symbol] = -2;
    st->next_symbols[sym->counted[j].symbol] = 1; /* until its bound is known, below */
  }
  for (int k = 0; k < sym->num_symbols; ++k) {
    if (st->bound_input[k] == -2) continue; /* computed below */
    if (st->next_symbols[k] < 1) { /* set_input_shape refuses it: a size is at least 1 */
      return fail("%s: '%s' is %" PRId64 " from input '%s' axis %d, but a size known only at "
                  "run time is at least 1",
                  function, sym->symbols[k], st->next_symbols[k],
                  plan->inputs[st->bound_input[k]].name, st->bound_axis[k]);
    }
  }
  if (sym->num_computed > 0 && compute_values(m, function) != 0) return -1;
  int overflow = 0;
  for (int j = 0; j < sym->num_counted && !overflow; ++j) { /* each bound, in order */
    overflow = sym->compute_sizes(st->next_symbols, st->next_sizes) != 0;
    st->next_symbols[sym->counted[j].symbol] = st->next_sizes[sym->counted[j].bound];
  }
  if (overflow || sym->compute_sizes(st->next_symbols, st->next_sizes) != 0) {
    char values[512];
    return fail("%s: with %s, the model's sizes do not fit in 64 bits",
                function, describe_symbols(m, st->next_symbols, values, sizeof(values)));
  }
  for (int i = 0; i < plan->num_inputs; ++i) {
    const tsm_io_sizes *ios = io_sizes(plan, 1, i);
    for (int d = 0; ios != NULL && d < plan->inputs[i].ndim; ++d) {
      int k = ios->dims[d];
      if (k >= 0 && st->input_shape[i][d] != st->next_sizes[k]) {
        return refuse_axis(m, i, d, st->input_shape[i][d], k, function);
      }
    }
  }
  for (int a = 0; a < sym->num_assumptions; ++a) {
    const tsm_assumption *as = &sym->assumptions[a];
    int64_t lhs = st->next_sizes[as->lhs], rhs = st->next_sizes[as->rhs];
    if (lhs != rhs) {
      char values[512];
      return fail("%s: these input shapes break what the model assumes: %s; with %s, %s = %" PRId64
                  " but %s = %" PRId64,
                  function, as->message, describe_symbols(m, st->next_symbols, values,
                                                          sizeof(values)),
                  sym->size_texts[as->lhs], lhs, sym->size_texts[as->rhs], rhs);
    }
  }
  if (check_sizes(m, st->next_symbols, st->next_sizes, function) != 0) return -1;
  for (int i = 0; i < plan->num_inputs; ++i) {
    const tsm_io_sizes *ios = io_sizes(plan, 1, i);
    if (ios != NULL && st->next_sizes[ios->nbytes] != st->input_nbytes[i]) {
      return fail("%s: input '%s' has %" PRId64 " bytes, but its size in the plan is %" PRId64
                  "; the artifact is damaged",
                  function, plan->inputs[i].name, st->input_nbytes[i],
                  st->next_sizes[ios->nbytes]);
    }
  }
  return 0;
}

static int compare_pending(const void *a, const void *b) {
  const tsm_pending *x = a, *y = b;
  if (x->first != y->first) return x->first < y->first ? -1 : 1;
  if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1; /* larger first */
  return (x->index > y->index) - (x->index < y->index);
}

static int compare_live(const void *a, const void *b) {
  const tsm_live *x = a, *y = b;
  return (x->offset > y->offset) - (x->offset < y->offset);
}

/* Places the dynamic buffers that are not inputs for next_sizes, after the inputs' slots:
 * greedy first fit in order of first step (larger first), each one beside the buffers
 * placed before it whose lifetimes meet its own. Grows the region if the placement needs
 * more (the inputs' bytes move with it), then makes next_* current and points the steps
 * at the new places. On failure nothing changes. */
static int place(tsm_model *m, const char *function) {
  const tsm_symbolic *sym = m->plan->symbolic;
  tsm_dynamic *st = m->dyn;
  int pending = 0;
  for (int k = 0; k < sym->num_dynamic; ++k) {
    st->next_offset[k] = st->offset[k]; /* an input keeps its slot */
    if (st->holds_input[k]) continue;
    tsm_pending p = {sym->dynamic[k].first, slot_bytes(st->next_sizes[sym->dynamic[k].nbytes]), k};
    st->pending[pending++] = p;
  }
  if (pending > 1) qsort(st->pending, (size_t)pending, sizeof(tsm_pending), compare_pending);
  int64_t peak = st->inputs_end;
  int live = 0;
  for (int i = 0; i < pending; ++i) {
    const tsm_pending *p = &st->pending[i];
    int kept = 0; /* the buffers placed so far that are still live at this one's first step */
    for (int j = 0; j < live; ++j) {
      if (st->live[j].last >= p->first) st->live[kept++] = st->live[j];
    }
    live = kept;
    if (live > 1) qsort(st->live, (size_t)live, sizeof(tsm_live), compare_live);
    int64_t cursor = st->inputs_end, offset = -1;
    for (int j = 0; j < live; ++j) {
      if (st->live[j].offset - cursor >= p->bytes) {
        offset = cursor;
        break;
      }
      int64_t end = st->live[j].offset + st->live[j].bytes;
      if (end > cursor) cursor = end;
    }
    if (offset < 0) offset = cursor;
    int64_t end = offset + p->bytes; /* both <= 2**48 * (buffers + 1): no overflow */
    if (end > TSM_MAX_TENSOR_BYTES) {
      char values[512];
      return fail("%s: with %s, the model's buffers would take more than 2**48 bytes "
                  "(256 TiB)",
                  function, describe_symbols(m, st->next_symbols, values, sizeof(values)));
    }
    st->next_offset[p->index] = offset;
    tsm_live placed = {offset, p->bytes, sym->dynamic[p->index].last};
    st->live[live++] = placed;
    if (end > peak) peak = end;
  }
  if (peak > st->capacity) {
    unsigned char *region = zeroed_block(peak);
    if (region == NULL) {
      char values[512];
      return fail("%s: out of memory for the %" PRId64 " bytes the model's buffers take with %s",
                  function, peak, describe_symbols(m, st->next_symbols, values, sizeof(values)));
    }
    if (st->region != NULL) memcpy(region, st->region, (size_t)st->inputs_end);
    free(st->region);
    st->region = region;
    st->capacity = peak;
  }
  int64_t *swap = st->offset;
  st->offset = st->next_offset;
  st->next_offset = swap;
  swap = st->symbols;
  st->symbols = st->next_symbols;
  st->next_symbols = swap;
  swap = st->sizes;
  st->sizes = st->next_sizes;
  st->next_sizes = swap;
  point_step_args(m);
  st->placed = 1;
  memcpy(st->run_symbols, st->symbols, (size_t)sym->num_symbols * sizeof(int64_t));
  memcpy(st->run_sizes, st->sizes, (size_t)sym->num_sizes * sizeof(int64_t));
  return 0;
}

/* Moves the slots of the symbolic inputs after input `index` so that its own takes
 * `nbytes`, growing the region if they no longer fit. The inputs keep their bytes; the
 * other dynamic buffers must be placed again, and the last run's outputs are gone. */
static int resize_input_slot(tsm_model *m, int index, int64_t nbytes, const char *function) {
  tsm_dynamic *st = m->dyn;
  int k = st->dynamic_of_input[index];
  int64_t delta = slot_bytes(nbytes) - slot_bytes(st->input_nbytes[index]);
  if (delta == 0) return 0;
  int64_t tail = st->offset[k] + slot_bytes(st->input_nbytes[index]);
  int64_t tail_bytes = st->inputs_end - tail, inputs_end = st->inputs_end + delta;
  if (inputs_end > TSM_MAX_TENSOR_BYTES) {
    return fail("%s: the model's inputs would take more than 2**48 bytes (256 TiB)", function);
  }
  if (inputs_end > st->capacity) {
    /* keep the room the other buffers had: most often they grow with the inputs */
    int64_t capacity = inputs_end + (st->capacity - st->inputs_end);
    unsigned char *region = zeroed_block(capacity);
    if (region == NULL) {
      return fail("%s: out of memory for the %" PRId64 " bytes of the model's inputs", function,
                  capacity);
    }
    memcpy(region, st->region, (size_t)st->offset[k]);
    memcpy(region + tail + delta, st->region + tail, (size_t)tail_bytes);
    free(st->region);
    st->region = region;
    st->capacity = capacity;
  } else if (tail_bytes > 0) {
    memmove(st->region + tail + delta, st->region + tail, (size_t)tail_bytes);
  }
  for (int i = index + 1; i < m->plan->num_inputs; ++i) {
    if (st->dynamic_of_input[i] >= 0) st->offset[st->dynamic_of_input[i]] += delta;
  }
  st->inputs_end = inputs_end;
  st->placed = 0;
  m->has_run = 0;
  return 0;
}

/* The state of a model of a plan with symbols, placed for every symbol 1 (the shapes the
 * inputs have until the caller sets others). NULL with the error set on failure. */
static tsm_dynamic *dynamic_create(tsm_model *m) {
  const tsm_plan *plan = m->plan;
  const tsm_symbolic *sym = plan->symbolic;
  tsm_dynamic *st = calloc(1, sizeof(*st));
  if (st == NULL) {
    fail("tsm_model_create: out of memory");
    return NULL;
  }
  m->dyn = st;
  size_t ns = (size_t)sym->num_symbols, nz = (size_t)sym->num_sizes;
  size_t nd = sym->num_dynamic > 0 ? (size_t)sym->num_dynamic : 1;
  size_t ni = plan->num_inputs > 0 ? (size_t)plan->num_inputs : 1;
  size_t nb = plan->num_buffers > 0 ? (size_t)plan->num_buffers : 1, axes = 1;
  for (int i = 0; i < plan->num_inputs; ++i) axes += (size_t)plan->inputs[i].ndim;
  st->symbols = calloc(ns, sizeof(int64_t));
  st->next_symbols = calloc(ns, sizeof(int64_t));
  st->sizes = calloc(nz, sizeof(int64_t));
  st->next_sizes = calloc(nz, sizeof(int64_t));
  st->run_symbols = calloc(ns, sizeof(int64_t));
  st->run_sizes = calloc(nz, sizeof(int64_t));
  st->bound_input = calloc(ns, sizeof(int));
  st->bound_axis = calloc(ns, sizeof(int));
  st->input_shape = calloc(ni, sizeof(int64_t *));
  st->shapes = calloc(axes, sizeof(int64_t));
  st->input_nbytes = calloc(ni, sizeof(int64_t));
  st->dynamic_of_buffer = calloc(nb, sizeof(int));
  st->dynamic_of_input = calloc(ni, sizeof(int));
  st->holds_input = calloc(nd, 1);
  st->offset = calloc(nd, sizeof(int64_t));
  st->next_offset = calloc(nd, sizeof(int64_t));
  st->pending = calloc(nd, sizeof(tsm_pending));
  st->live = calloc(nd, sizeof(tsm_live));
  if (!st->symbols || !st->next_symbols || !st->sizes || !st->next_sizes || !st->run_symbols ||
      !st->run_sizes || !st->bound_input ||
      !st->bound_axis || !st->input_shape || !st->shapes || !st->input_nbytes ||
      !st->dynamic_of_buffer || !st->dynamic_of_input || !st->holds_input || !st->offset ||
      !st->next_offset || !st->pending || !st->live) {
    fail("tsm_model_create: out of memory");
    return NULL;
  }
  for (int b = 0; b < plan->num_buffers; ++b) st->dynamic_of_buffer[b] = -1;
  for (int k = 0; k < sym->num_dynamic; ++k) {
    int b = sym->dynamic[k].buffer;
    if (st->dynamic_of_buffer[b] >= 0) {
      damaged("a buffer of the plan is placed twice");
      return NULL;
    }
    st->dynamic_of_buffer[b] = k;
  }
  for (int b = 0; b < plan->num_buffers; ++b) {
    if (plan->buffers[b].kind == TSM_DYNAMIC && st->dynamic_of_buffer[b] < 0) {
      damaged("a buffer of symbolic size has no size");
      return NULL;
    }
  }
  /* every symbol 1: the inputs' first shapes, their slots at the region's start */
  for (int k = 0; k < sym->num_symbols; ++k) st->next_symbols[k] = 1;
  if (sym->compute_sizes(st->next_symbols, st->next_sizes) != 0) {
    damaged("the plan's sizes overflow with every symbol 1");
    return NULL;
  }
  int64_t *shape = st->shapes;
  for (int i = 0; i < plan->num_inputs; ++i) {
    const tsm_io *io = &plan->inputs[i];
    const tsm_io_sizes *ios = io_sizes(plan, 1, i);
    st->dynamic_of_input[i] = -1;
    if (ios == NULL) continue;
    int k = st->dynamic_of_buffer[io->buffer];
    if (st->holds_input[k]) {
      damaged("two inputs share a buffer");
      return NULL;
    }
    st->holds_input[k] = 1;
    st->dynamic_of_input[i] = k;
    st->input_shape[i] = shape;
    for (int d = 0; d < io->ndim; ++d) {
      *shape++ = ios->dims[d] >= 0 ? st->next_sizes[ios->dims[d]] : io->shape[d];
    }
    st->input_nbytes[i] = st->next_sizes[ios->nbytes];
    st->offset[k] = st->inputs_end;
    st->inputs_end += slot_bytes(st->input_nbytes[i]);
  }
  /* the inputs' sizes were checked by bind's checks; a run with these shapes binds these */
  if (check_sizes(m, st->next_symbols, st->next_sizes, "tsm_model_create") != 0) return NULL;
  if (place(m, "tsm_model_create") != 0) return NULL;
  return st;
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

  if (plan->symbolic == NULL) {
    point_step_args(m);
  } else if (dynamic_create(m) == NULL) { /* places the dynamic buffers, points the steps */
    tsm_model_destroy(m);
    return NULL;
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

/* Axis d of input or output `index` now: an input's as the caller set it, an output's as
 * the last run (the current placement) made it. */
static int64_t io_dim(const tsm_model *m, int is_input, int index, int d) {
  const tsm_io *io = is_input ? &m->plan->inputs[index] : &m->plan->outputs[index];
  const tsm_io_sizes *ios = io_sizes(m->plan, is_input, index);
  if (ios == NULL) return io->shape[d];
  if (is_input) return m->dyn->input_shape[index][d];
  return ios->dims[d] >= 0 ? m->dyn->run_sizes[ios->dims[d]] : io->shape[d];
}

/* The bytes of input or output `index` now (see io_dim). */
static int64_t io_nbytes(const tsm_model *m, int is_input, int index) {
  const tsm_io *io = is_input ? &m->plan->inputs[index] : &m->plan->outputs[index];
  const tsm_io_sizes *ios = io_sizes(m->plan, is_input, index);
  if (ios == NULL) return io->nbytes;
  return is_input ? m->dyn->input_nbytes[index] : m->dyn->run_sizes[ios->nbytes];
}

/* ---- running ----------------------------------------------------------------------- */

int tsm_model_num_inputs(const void *model) {
  if (model == NULL) return fail("tsm_model_num_inputs: the model is NULL");
  return ((const tsm_model *)model)->plan->num_inputs;
}

int tsm_model_num_outputs(const void *model) {
  if (model == NULL) return fail("tsm_model_num_outputs: the model is NULL");
  return ((const tsm_model *)model)->plan->num_outputs;
}

/* Refuses `shape` for input `index` where an axis of static size differs or an axis that
 * is a bare symbol is below 1; computes its bytes, overflow-checked, within the limit. */
static int check_input_shape(const tsm_model *m, int index, const int64_t *shape,
                             int64_t *nbytes, const char *function) {
  const tsm_io *io = &m->plan->inputs[index];
  const tsm_io_sizes *ios = io_sizes(m->plan, 1, index);
  int64_t elements = 1;
  int overflow = 0;
  for (int d = 0; d < io->ndim; ++d) {
    int k = ios != NULL ? ios->dims[d] : -1;
    if (shape[d] < 0) {
      return fail("%s: input '%s' axis %d is %" PRId64 ", a negative size", function, io->name,
                  d, shape[d]);
    }
    if (k < 0 && shape[d] != io->shape[d]) {
      return fail("%s: input '%s' axis %d is %" PRId64 ", but the model takes %" PRId64,
                  function, io->name, d, shape[d], io->shape[d]);
    }
    if (k >= 0 && k < m->plan->symbolic->num_symbols && shape[d] < 1) {
      return fail("%s: input '%s' axis %d is %" PRId64 ", but it is the size '%s', which is at "
                  "least 1",
                  function, io->name, d, shape[d], m->plan->symbolic->symbols[k]);
    }
    overflow |= __builtin_mul_overflow(elements, shape[d], &elements);
  }
  overflow |= __builtin_mul_overflow(elements, itemsize(io->dtype), nbytes);
  if (ios != NULL && (overflow || *nbytes > TSM_MAX_TENSOR_BYTES)) {
    return fail("%s: input '%s' of that shape would take more than 2**48 bytes (256 TiB)",
                function, io->name);
  }
  return 0;
}

int tsm_model_set_input_shape(void *model, int index, int ndim, const int64_t *shape) {
  const char *function = "tsm_model_set_input_shape";
  const tsm_io *io = io_at(model, index, 1, function);
  if (io == NULL) return -1;
  if (ndim != io->ndim) {
    return fail("%s: input '%s' has %d ax%s, got a shape of %d", function, io->name, io->ndim,
                io->ndim == 1 ? "is" : "es", ndim);
  }
  if (ndim > 0 && shape == NULL) return fail("%s: shape is NULL for input '%s'", function, io->name);
  tsm_model *m = model;
  if (acquire(m, function) != 0) return -1;
  int64_t nbytes = 0;
  if (check_input_shape(m, index, shape, &nbytes, function) != 0) {
    release(m);
    return -1;
  }
  tsm_dynamic *st = m->dyn;
  if (io_sizes(m->plan, 1, index) == NULL ||
      (ndim == 0 || memcmp(st->input_shape[index], shape, (size_t)ndim * sizeof(int64_t)) == 0)) {
    release(m); /* its static shape, or the one it has */
    return 0;
  }
  if (resize_input_slot(m, index, nbytes, function) != 0) {
    release(m);
    return -1;
  }
  memcpy(st->input_shape[index], shape, (size_t)ndim * sizeof(int64_t));
  st->input_nbytes[index] = nbytes;
  m->input_set[index] = 0; /* its values are the caller's next tsm_model_set_input */
  release(m);
  return 0;
}

int tsm_model_set_input(void *model, int index, const void *data, size_t nbytes) {
  const tsm_io *io = io_at(model, index, 1, "tsm_model_set_input");
  if (io == NULL) return -1;
  tsm_model *m = model;
  int64_t expected = io_nbytes(m, 1, index);
  if (nbytes != (size_t)expected) {
    return fail("tsm_model_set_input: input '%s' (index %d) takes %" PRId64 " bytes, got %zu%s",
                io->name, index, expected, nbytes,
                io_sizes(m->plan, 1, index) != NULL
                    ? " (in the shape it has now; set another with tsm_model_set_input_shape "
                      "first)"
                    : "");
  }
  if (data == NULL && nbytes > 0) {
    return fail("tsm_model_set_input: data for input '%s' is NULL", io->name);
  }
  if (acquire(m, "tsm_model_set_input") != 0) return -1;
  if (nbytes > 0) memcpy(buffer_address(m, io->buffer), data, nbytes);
  m->input_set[index] = 1;
  release(m);
  return 0;
}

/* Before a run of a plan with symbols: learn and check the symbols, place the dynamic
 * buffers again if they changed, and fill the symbol buffers. */
/* The symbol buffers, from the symbols as the run knows them now. */
static void fill_symbol_buffers(tsm_model *m) {
  const tsm_symbolic *sym = m->plan->symbolic;
  for (int k = 0; k < sym->num_symbol_buffers; ++k) {
    const tsm_symbol_buffer *sb = &sym->symbol_buffers[k];
    unsigned char *values = buffer_address(m, sb->buffer);
    for (int j = 0; j < sb->count; ++j) {
      memcpy(values + 8 * (size_t)j, &m->dyn->run_symbols[sb->symbols[j]], sizeof(int64_t));
    }
  }
}

static int prepare_dynamic(tsm_model *m, const char *function) {
  const tsm_symbolic *sym = m->plan->symbolic;
  tsm_dynamic *st = m->dyn;
  if (bind(m, function) != 0) return -1;
  if (!st->placed ||
      memcmp(st->symbols, st->next_symbols, (size_t)sym->num_symbols * sizeof(int64_t)) != 0) {
    if (place(m, function) != 0) return -1;
  }
  memcpy(st->run_symbols, st->symbols, (size_t)sym->num_symbols * sizeof(int64_t));
  memcpy(st->run_sizes, st->sizes, (size_t)sym->num_sizes * sizeof(int64_t));
  fill_symbol_buffers(m);
  return 0;
}

/* After step `step`: the symbols it counted, checked against their bounds, and the sizes
 * and symbol buffers the later steps see. */
static int learn_counts(tsm_model *m, int step, const char *function) {
  const tsm_symbolic *sym = m->plan->symbolic;
  tsm_dynamic *st = m->dyn;
  int learned = 0;
  for (int j = 0; j < sym->num_counted; ++j) {
    const tsm_counted *c = &sym->counted[j];
    if (c->step != step) continue;
    int64_t count, bound = st->sizes[c->bound];
    memcpy(&count, buffer_address(m, c->buffer), sizeof(count));
    if (count < 0 || count > bound - 1) {
      return fail("%s: %s: it counted %" PRId64 " results, outside 0..%" PRId64 " ('%s - 1', "
                  "at most %s - 1); the kernel that counts them is wrong",
                  function, c->message, count, bound - 1, sym->symbols[c->symbol],
                  sym->size_texts[c->bound]);
    }
    st->run_symbols[c->symbol] = count + 1;
    learned = 1;
  }
  if (!learned) return 0;
  if (sym->compute_sizes(st->run_symbols, st->run_sizes) != 0) {
    return fail("%s: the model's sizes overflow with the counts of step %d", function, step);
  }
  fill_symbol_buffers(m);
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
      return fail("%s: input '%s' (index %d) was never set%s; call tsm_model_set_input first",
                  function, plan->inputs[i].name, i,
                  m->dyn != NULL && io_sizes(plan, 1, i) != NULL ? " in the shape it has now"
                                                                 : "");
    }
  }
  if (m->dyn != NULL && prepare_dynamic(m, function) != 0) {
    release(m);
    return -1;
  }
  int counts = m->dyn != NULL && plan->symbolic->num_counted > 0;
  for (int s = 0; s < plan->num_steps; ++s) {
    double start = step_ms != NULL ? now_ms() : 0.0;
    plan->steps[s].fn(m->args_of_step[s]);
    if (step_ms != NULL) step_ms[s] = now_ms() - start;
    if (counts && learn_counts(m, s, function) != 0) {
      m->has_run = 0;
      release(m);
      return -1;
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
  tsm_model *m = model;
  if (acquire(m, "tsm_model_get_output") != 0) return -1;
  int64_t expected = io_nbytes(m, 0, index);
  if (nbytes != (size_t)expected) {
    release(m);
    return fail("tsm_model_get_output: output '%s' (index %d) has %" PRId64 " bytes, got room "
                "for %zu",
                io->name, index, expected, nbytes);
  }
  if (data == NULL && nbytes > 0) {
    release(m);
    return fail("tsm_model_get_output: data for output '%s' is NULL", io->name);
  }
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

static int copy_shape(const void *model, int index, int is_input, int64_t *shape,
                      const char *function) {
  const tsm_io *io = io_at(model, index, is_input, function);
  if (io == NULL) return -1;
  if (io->ndim > 0 && shape == NULL) {
    return fail("%s: shape is NULL; pass room for %d values", function, io->ndim);
  }
  for (int d = 0; d < io->ndim; ++d) shape[d] = io_dim(model, is_input, index, d);
  return 0;
}

int tsm_model_input_shape(const void *model, int index, int64_t *shape) {
  return copy_shape(model, index, 1, shape, "tsm_model_input_shape");
}

int tsm_model_output_shape(const void *model, int index, int64_t *shape) {
  return copy_shape(model, index, 0, shape, "tsm_model_output_shape");
}

size_t tsm_model_input_nbytes(const void *model, int index) {
  const tsm_io *io = io_at(model, index, 1, "tsm_model_input_nbytes");
  return io ? (size_t)io_nbytes(model, 1, index) : 0;
}

size_t tsm_model_output_nbytes(const void *model, int index) {
  const tsm_io *io = io_at(model, index, 0, "tsm_model_output_nbytes");
  return io ? (size_t)io_nbytes(model, 0, index) : 0;
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
