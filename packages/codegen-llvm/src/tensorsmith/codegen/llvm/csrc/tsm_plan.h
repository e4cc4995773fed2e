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
 *                                    {0x3c, 0x91, ... 16 bytes}};
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

/* tsm_buffer.kind */
enum { TSM_PARAM = 0, TSM_WORKSPACE = 1 };

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
} tsm_plan;

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
