/*
 * tsm_plan.h -- the contract between the code the compiler generates for one model and
 * the CPU runtime (tsm_runtime.c, tsm_threadpool.c) linked into every CPU artifact.
 *
 * HOW TO LINK A CPU ARTIFACT
 *   The shared library is built from
 *     plan.c             generated: includes this header, defines `tsm_graph_plan`
 *     kernel objects     LLVM-compiled: `void tsm_kernel_N(void **args)` for each kernel
 *     every .c here      this csrc directory: tsm_runtime.c (the C ABI), tsm_threadpool.c,
 *                        tsm_params.c (maps the weights)
 *   with
 *     cc -O2 -fPIC -shared -std=c11 -I <this csrc dir> -I <tensorsmith.runtime.get_include()> \
 *        plan.c <csrc>/tsm_*.c kernels.o -o model.so -lpthread -lm
 *   (tsm_runtime.c includes "tensorsmith_runtime.h", the public header shipped in
 *   tensorsmith-runtime: `tensorsmith.runtime.get_include()` is its directory.)
 *   The result depends on libc, libm and libpthread only. Compile each file with
 *   -fPIC; `-Wall -Wextra -std=c11` is warnings-clean for csrc.
 *
 * The weights are not in the library: the artifact file appends them to it, as section
 * "params" (starting at a multiple of 64 KiB, so any page size maps it), then section
 * "params.id" (the plan's params_id), then the metadata and the footer (see tsm_params.c
 * and docs/artifact.md). tsm_params.c maps them when the library is loaded.
 *
 * Symbols: everything declared here except tsm_parallel_for is internal to the library
 * (hidden visibility), so two artifacts loaded into one process never bind each other's
 * plan or weights. Declare kernels in plan.c with TSM_INTERNAL (or emit them hidden from
 * LLVM) for the same reason; the linker makes a symbol hidden if any reference is.
 * The C ABI and tsm_parallel_for are marked exported in the source, so compiling with
 * -fvisibility=hidden is fine (and keeps anything else from leaking). tsm_parallel_for is
 * exported for JIT use: a library of tsm_threadpool.c alone provides it to JIT-compiled
 * kernels (e.g. llvmlite's load_library_permanently).
 *
 * plan.c looks like
 *   #include "tsm_plan.h"
 *   TSM_INTERNAL extern void tsm_kernel_0(void **args);
 *   static const int64_t in0_shape[] = {1, 784};
 *   static const tsm_io inputs[] = {{"input", "float32", 2, in0_shape, 3136, 0}};
 *   static const tsm_io outputs[] = {...};
 *   static const tsm_buffer buffers[] = {{TSM_WORKSPACE, 0, 3136}, {TSM_PARAM, 0, 802816}};
 *   static const int step0_args[] = {0, 1, 2};
 *   static const tsm_step steps[] = {{tsm_kernel_0, 3, step0_args, "fused_matmul_add_relu"}};
 *   static const char metadata_json[] = {0x7b, 0x22, ..., 0x7d, 0};
 *   const tsm_plan tsm_graph_plan = {3, buffers, 1, steps, 1, inputs, 1, outputs,
 *                                    workspace_bytes, metadata_json, 802816,
 *                                    {0x3c, 0x91, ... 16 bytes}, 0, checks, 0};
 *   and with symbols (an input float32[batch, 784]) also
 *   static const int input0_dims[] = {0, -1};
 *   static const tsm_io_sizes input_sizes[] = {{input0_dims, 1}};
 *   static int compute_sizes(const int64_t *s, int64_t *v) {
 *     int bad = 0;
 *     v[0] = s[0];                                      // batch
 *     v[1] = tsm_size_mul(INT64_C(3136), s[0], &bad);   // 3136*batch
 *     return bad;
 *   }
 *   static const tsm_symbolic symbolic = {1, symbol_names, 2, size_texts, compute_sizes,
 *                                         input_sizes, output_sizes, 3, dynamic, 1,
 *                                         symbol_buffers};
 *   Writing the metadata as bytes spares escaping it as a C string literal (quotes,
 *   backslashes, non-ASCII, and "??" trigraphs under -std=c11) and its length limits.
 *
 * Rules the plan must follow (tsm_model_create checks the ones it can and fails on a bad
 * plan rather than run it):
 *   - A buffer is a byte range, of the weights (TSM_PARAM, read-only: kernels must not
 *     write them; within params_bytes) or of the model's workspace (TSM_WORKSPACE). The
 *     runtime allocates one workspace of workspace_bytes per model, 64-byte aligned;
 *     buffer offsets are multiples of 64, except where a buffer is a range inside
 *     another (the part of a Concat done in place): kernels assume only their element
 *     size's alignment.
 *   - Inputs and outputs are buffers too. An input is a TSM_WORKSPACE buffer whose range
 *     no step writes and the memory planner never reuses, since inputs keep their values
 *     across runs. An output may be a workspace or a param buffer (a constant output).
 *     tsm_io.nbytes is the tensor's byte size and at most its buffer's nbytes.
 *   - A step calls fn(args) where args[i] points at the start of buffer
 *     step.args[i]. Steps run in order, one after the other.
 *   - After the last step, each check's int32 is read: the first nonzero one makes the run
 *     fail with its message (tsm_last_error), and the outputs stay unset until a run
 *     passes every check.
 *
 * Sizes known only at run time (dynamic shapes). A plan whose graph has symbolic sizes
 * (`batch`, `seq`: each a run-time size >= 1) points tsm_plan.symbolic at a tsm_symbolic;
 * a static plan leaves it NULL and runs exactly as above. With symbols:
 *   - Sizes. plan.c defines compute_sizes(symbols, sizes): from the symbols' values (in
 *     the order of tsm_symbolic.symbols, sorted by name) it computes every size of the plan
 *     that depends on them, sizes[0 .. num_sizes): the symbols themselves first
 *     (sizes[k] = symbols[k] for k < num_symbols), then each distinct expression (an
 *     axis, a tensor's byte count, a buffer's byte count). Its arithmetic is checked
 *     (tsm_size_* below): it returns nonzero on an overflow of int64 or a division by zero.
 *   - Inputs and outputs. Where an axis's size is symbolic, tsm_io.shape holds 0 and
 *     tsm_io_sizes.dims the index of its size; such a tensor's tsm_io.nbytes is 0 and
 *     tsm_io_sizes.nbytes indexes its byte count. A tensor with a symbolic size lives in a
 *     TSM_DYNAMIC buffer, every other one in a TSM_PARAM or TSM_WORKSPACE buffer.
 *   - Binding. A run learns each symbol from the first input axis (inputs in order, axes in
 *     order) whose size is that bare symbol (a dims index below num_symbols), in the shape
 *     the caller gave (tsm_model_set_input_shape; until then, the shape with every symbol
 *     1), and checks every other symbolic axis against the sizes computed from them.
 *     Every symbol is some input axis's size. Axes of static size are checked when the
 *     shape is set.
 *   - Dynamic buffers. A TSM_DYNAMIC buffer (offset and nbytes 0 in tsm_plan.buffers) has a
 *     tsm_dynamic_buffer: its byte count (a size index) and the steps that first and last
 *     use it (last == num_steps for a result). The runtime places them in a dynamic region
 *     of the model, apart from the static workspace: the symbolic inputs first, in input
 *     order, each at a 64-byte-aligned slot of its own that no other buffer shares (inputs
 *     keep their values across runs), then every other one greedily, first fit, in order
 *     of first step (larger first, then plan order), sharing ranges only between buffers
 *     whose lifetimes [first, last] do not meet. It places them again only when a run's
 *     symbols differ from the last placement's, reuses the region while it is large
 *     enough, and rebuilds the steps' argument pointers when the placement changes.
 *   - Symbol buffers. A kernel that uses symbols takes one more argument after its buffers
 *     and scratch: a tsm_symbol_buffer, a TSM_WORKSPACE buffer of 8 bytes per symbol that
 *     the runtime fills before every run with those symbols' values as int64, in the
 *     order the kernel lists them (its attrs["symbols"], sorted). Scratch stays static.
 *   - Counted sizes. A symbol may be counted by a kernel during the run (tsm_counted: the
 *     boxes NonMaxSuppression kept): it is one more than the int64 at the start of its
 *     buffer once its step has run. Binding gives it its bound (a size index) and places
 *     the buffers for that; after the step the runtime sets it to the count plus one,
 *     recomputes the sizes, refills the symbol buffers, and the later steps and the
 *     outputs' shapes use the count.
 *   - Limits. A run whose tensor or buffer would exceed TSM_MAX_TENSOR_BYTES (2**48, the
 *     compiler's limit), whose dynamic region would, or whose sizes overflow, fails
 *     naming it, before any kernel runs.
 */
#ifndef TSM_PLAN_H
#define TSM_PLAN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TSM_INTERNAL __attribute__((visibility("hidden")))
#define TSM_EXPORTED __attribute__((visibility("default")))
#else
#define TSM_INTERNAL
#define TSM_EXPORTED
#endif

/* A kernel: args[i] points at the i-th buffer of its step. */
typedef void (*tsm_kernel_fn)(void **args);

/* tsm_buffer.kind: TSM_DYNAMIC is a workspace buffer whose size depends on the symbols,
 * placed by the runtime (tsm_dynamic_buffer) */
enum { TSM_PARAM = 0, TSM_WORKSPACE = 1, TSM_DYNAMIC = 2 };

/* The most bytes one tensor, buffer or dynamic region may take (the compiler's limit). */
#define TSM_MAX_TENSOR_BYTES ((int64_t)1 << 48)

/* A graph input or output. */
typedef struct {
  const char *name;      /* the graph's name for it */
  const char *dtype;     /* NumPy name: "float32", "int64", ... */
  int ndim;
  const int64_t *shape;  /* ndim values; may be NULL when ndim == 0 */
  int64_t nbytes;        /* product(shape) * itemsize */
  int buffer;            /* index into tsm_plan.buffers */
} tsm_io;

/* A byte range of the weights or of the workspace. */
typedef struct {
  int kind;              /* TSM_PARAM or TSM_WORKSPACE */
  int64_t offset;        /* from the weights' start or from the workspace start */
  int64_t nbytes;
} tsm_buffer;

/* One kernel call. */
typedef struct {
  tsm_kernel_fn fn;
  int nargs;
  const int *args;       /* nargs buffer indices */
  const char *name;      /* what the profiler reports, e.g. "fused_matmul_add_relu" */
} tsm_step;

/* A check of a run: the int32 at the start of `buffer` is nonzero after a run that must
 * fail with `message` (an index out of range, naming the node) instead of giving outputs. */
typedef struct {
  int buffer;            /* index into tsm_plan.buffers; at least 4 bytes */
  const char *message;
} tsm_check;

/* The symbolic sizes of a graph input or output (tsm_symbolic.inputs, .outputs). */
typedef struct {
  const int *dims;       /* ndim entries: -1 where tsm_io.shape holds the axis's size, else
                            the index of its size in compute_sizes' output; NULL: all static */
  int nbytes;            /* -1: tsm_io.nbytes; else the index of the tensor's byte count */
} tsm_io_sizes;

/* A TSM_DYNAMIC buffer: how large it is and when it is used. */
typedef struct {
  int buffer;            /* index into tsm_plan.buffers */
  int nbytes;            /* the index of its byte count in compute_sizes' output */
  int first, last;       /* the steps that first and last use it; 0 <= first <= last <=
                            num_steps (inputs and results: last == num_steps) */
} tsm_dynamic_buffer;

/* A static buffer the runtime fills before each run with the values of some symbols. */
typedef struct {
  int buffer;            /* index into tsm_plan.buffers: TSM_WORKSPACE, >= 8 * count bytes */
  int count;
  const int *symbols;    /* count indices into tsm_symbolic.symbols */
} tsm_symbol_buffer;

/* An equality of two sizes that the model assumes (`seq == min(512, seq)`): a run whose
 * sizes break it fails with `message` before any step runs. */
typedef struct {
  int lhs, rhs;          /* indices of the two sizes in compute_sizes' output */
  const char *message;   /* names the node and the shapes that need it */
} tsm_assumption;

/* A symbol that no input's shape gives: compute_values computes it from small inputs'
 * values before each run (a Reshape's target shape given as an input). */
typedef struct {
  int symbol;            /* index into tsm_symbolic.symbols */
  const char *expr;      /* how it is computed, for messages */
  const char *message;   /* names the node that needs it */
} tsm_computed;

/* A symbol a kernel counts during the run (see "dynamic shapes" above). */
typedef struct {
  int symbol;            /* index into tsm_symbolic.symbols */
  int bound;             /* index of its bound in compute_sizes' output */
  int buffer;            /* index into tsm_plan.buffers: the int64 count, >= 8 bytes */
  int step;              /* the step that writes the count */
  const char *message;   /* names the node that counts */
} tsm_counted;

/* What a plan with sizes known only at run time adds (see "dynamic shapes" above). */
typedef struct {
  int num_symbols;
  const char *const *symbols;     /* their names, sorted */
  int num_sizes;                  /* >= num_symbols */
  const char *const *size_texts;  /* each size's expression ("seq + 1"), for messages */
  int (*compute_sizes)(const int64_t *symbols, int64_t *sizes); /* nonzero: overflow */
  const tsm_io_sizes *inputs;     /* tsm_plan.num_inputs entries */
  const tsm_io_sizes *outputs;    /* tsm_plan.num_outputs entries */
  int num_dynamic;
  const tsm_dynamic_buffer *dynamic; /* one per TSM_DYNAMIC buffer */
  int num_symbol_buffers;
  const tsm_symbol_buffer *symbol_buffers;
  int num_assumptions;
  const tsm_assumption *assumptions; /* checked once the inputs' shapes bind the symbols */
  int num_computed;
  const tsm_computed *computed;   /* in the order compute_values computes them */
  /* Writes every computed symbol into symbols[] from the inputs' data (and the symbols
   * the inputs' shapes gave); returns 0, or 1 + the index into `computed` of the first
   * that is below 1 or whose arithmetic failed (*bad set: an overflow, a division by 0). */
  int (*compute_values)(int64_t *symbols, const void *const *inputs, int *bad);
  int num_counted;
  const tsm_counted *counted;     /* in step order */
} tsm_symbolic;

/* The whole execution plan of the model. */
typedef struct {
  int num_buffers;
  const tsm_buffer *buffers;
  int num_steps;
  const tsm_step *steps;
  int num_inputs;
  const tsm_io *inputs;
  int num_outputs;
  const tsm_io *outputs;
  int64_t workspace_bytes;
  const char *metadata_json; /* tsm_artifact_metadata: the artifact's metadata JSON less
                                "checksum" and "sections" (known only once it is written) */
  int64_t params_bytes;      /* the weights' size: the "params" section's length */
  unsigned char params_id[16]; /* the "params.id" section: these weights are this build's */
  int num_checks;
  const tsm_check *checks;   /* tested after every run, in order */
  const tsm_symbolic *symbolic; /* NULL: every size is static */
} tsm_plan;

/*
 * The checked arithmetic of compute_sizes: each sets *bad where the exact result is not an
 * int64 or the divisor is 0 (its result then means nothing). Division and remainder round toward minus
 * infinity, as the compiler's sizes do (they agree with C's / and % on sizes >= 0).
 */
static inline int64_t tsm_size_add(int64_t a, int64_t b, int *bad) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) *bad = 1;
  return r;
}

static inline int64_t tsm_size_mul(int64_t a, int64_t b, int *bad) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) *bad = 1;
  return r;
}

static inline int64_t tsm_size_floordiv(int64_t a, int64_t b, int *bad) {
  if (b == 0 || (a == INT64_MIN && b == -1)) {
    *bad = 1;
    return 0;
  }
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static inline int64_t tsm_size_mod(int64_t a, int64_t b, int *bad) {
  if (b == 0) {
    *bad = 1;
    return 0;
  }
  if (b == -1) return 0;
  int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

static inline int64_t tsm_size_max(int64_t a, int64_t b) { return a > b ? a : b; }

/* floor and ceil of a computed size's float arithmetic, to int64 (*bad outside it). */
static inline int64_t tsm_size_floor(double x, int *bad) {
  double f = __builtin_floor(x);
  if (!(f >= -9.2e18 && f <= 9.2e18)) {
    *bad = 1;
    return 0;
  }
  return (int64_t)f;
}

static inline int64_t tsm_size_ceil(double x, int *bad) { return -tsm_size_floor(-x, bad); }

static inline int64_t tsm_size_min(int64_t a, int64_t b) { return a < b ? a : b; }

/* Defined by the generated plan.c. */
TSM_INTERNAL extern const tsm_plan tsm_graph_plan;

/*
 * The thread pool for parallel loops of generated kernels.
 *
 * Calls body(closure, begin, end) on contiguous chunks that cover [0, n) exactly once,
 * one chunk per thread, the calling thread running the first; returns when all are
 * done. Chunk boundaries are balanced: chunk sizes differ by at most one. If the pool is
 * busy (a nested call from inside a body, or another model running on another thread),
 * or one thread is configured, the whole range runs inline in the caller as
 * body(closure, 0, n). A chunk whose worker has not started it by the time the caller
 * finishes its own runs on the caller: the body must not depend on which thread runs it.
 * Threads: tsm_set_num_threads, else TSM_NUM_THREADS, else one per core. Idle workers
 * poll for TSM_SPIN_US microseconds (default 500) before they sleep.
 */
TSM_EXPORTED void tsm_parallel_for(void (*body)(void *closure, int64_t begin, int64_t end),
                                   void *closure, int64_t n);

#ifdef __cplusplus
}
#endif

#endif /* TSM_PLAN_H */
