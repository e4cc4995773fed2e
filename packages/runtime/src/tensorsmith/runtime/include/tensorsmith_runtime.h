/*
 * tensorsmith_runtime.h -- the C ABI of a tensorsmith CPU artifact.
 *
 * A CPU artifact (`module.export_library("model.so")`) is a shared library that exports
 * the functions below and needs nothing beyond libc, libm and libpthread, so a C or C++
 * program runs the model without Python: link against the file (or dlopen it), include
 * this header, and
 *
 *     void *m = tsm_model_create();
 *     if (!m) { fprintf(stderr, "%s\n", tsm_last_error()); return 1; }
 *     tsm_model_set_input(m, 0, x, tsm_model_input_nbytes(m, 0));
 *     tsm_model_run(m);
 *     tsm_model_get_output(m, 0, y, tsm_model_output_nbytes(m, 0));
 *     tsm_model_destroy(m);
 *
 * Get the directory of this header with
 *     python -c "import tensorsmith.runtime as rt; print(rt.get_include())"
 *
 * Conventions
 *  - Functions returning int return 0 on success and nonzero on failure; every failure
 *    leaves a message in tsm_last_error(). Functions returning a pointer return NULL on
 *    failure, tsm_model_*_ndim and tsm_model_input_index return -1, and
 *    tsm_model_*_nbytes return 0 (as a zero-size tensor does: check the index first).
 *  - Indices are 0-based, in the graph's order of inputs and outputs. Tensors are dense,
 *    C-contiguous, in the host's byte order; a byte count must match the tensor's exactly.
 *    A wrong index or byte count is refused; nothing is ever read or written past a
 *    buffer.
 *  - Strings returned by the library are static: never free them.
 *  - Several models may be created from one library and run from different threads at
 *    once. One model is used by one thread at a time: a call on a model that is busy in
 *    another thread fails rather than racing.
 *  - Inputs keep their values across runs; set only those that change.
 *
 * Dynamic shapes
 *  A model compiled with sizes known only at run time (symbols such as `batch` or `seq`:
 *  the artifact's metadata shows them in the inputs' and outputs' shapes, e.g.
 *  [batch, 128]) runs on inputs of any such size. Give an input's shape with
 *  tsm_model_set_input_shape before tsm_model_set_input whenever it changes:
 *
 *     int64_t shape[2] = {batch, 128};
 *     tsm_model_set_input_shape(m, 0, 2, shape);
 *     tsm_model_set_input(m, 0, x, tsm_model_input_nbytes(m, 0));
 *     tsm_model_run(m);
 *     tsm_model_output_shape(m, 0, out_shape);   (the last run's shape)
 *     tsm_model_get_output(m, 0, y, tsm_model_output_nbytes(m, 0));
 *
 *  tsm_model_run learns each symbol from the first input axis whose size it is, and
 *  fails, naming the input, the axis and both sizes, where another axis disagrees
 *  ("input 'mask' axis 1 is 7, but 'seq' is 9 from input 'input_ids' axis 1"). Until
 *  an input's shape is set, and until the first run for the outputs, every symbol is 1.
 *  The model places its buffers again only when the symbols change, reusing its memory
 *  while it is large enough; a run allocates otherwise nothing.
 *  Some sizes are counted by a kernel during the run (NonMaxSuppression's kept boxes,
 *  NonZero's elements): the buffers are placed for the most there could be, and an
 *  output's shape is the run's count (which may be 0) once tsm_model_run has returned;
 *  before the first run it is that most.
 */
#ifndef TENSORSMITH_RUNTIME_H
#define TENSORSMITH_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TSM_API __attribute__((visibility("default")))
#else
#define TSM_API
#endif

/* ---- lifetime ---------------------------------------------------------------------- */

/* A new model: its own workspace (inputs, outputs and intermediates), the library's
 * weights shared read-only. NULL on failure, see tsm_last_error. */
TSM_API void *tsm_model_create(void);

/* Frees a model from tsm_model_create; NULL is ignored. */
TSM_API void tsm_model_destroy(void *model);

/* ---- running ----------------------------------------------------------------------- */

TSM_API int tsm_model_num_inputs(const void *model);  /* -1 if model is NULL */
TSM_API int tsm_model_num_outputs(const void *model); /* -1 if model is NULL */

/* Copies nbytes (exactly tsm_model_input_nbytes) from data into input `index`. */
TSM_API int tsm_model_set_input(void *model, int index, const void *data, size_t nbytes);

/* Sets the shape (ndim values, exactly tsm_model_input_ndim) of input `index` for the next
 * runs; tsm_model_input_shape and tsm_model_input_nbytes then report it. Call it before
 * tsm_model_set_input when the shape changes: a new shape leaves the input unset, and a
 * new byte size discards the last run's outputs. Fails where an axis of fixed size differs
 * from the model's, where an axis whose size is a symbol is below 1, or over 2**48 bytes;
 * whether the inputs agree on the symbols is checked by tsm_model_run. Setting the shape
 * an input has (every fixed-shape input's: the model's) changes nothing. */
TSM_API int tsm_model_set_input_shape(void *model, int index, int ndim, const int64_t *shape);

/* Runs the whole graph. Fails, naming it, if an input was never set. Allocates nothing,
 * except with dynamic shapes when the inputs' sizes need more memory than before. */
TSM_API int tsm_model_run(void *model);

/* Copies output `index` (exactly tsm_model_output_nbytes bytes) into data. Fails before
 * the first tsm_model_run. With dynamic shapes, its shape and bytes are the last run's. */
TSM_API int tsm_model_get_output(void *model, int index, void *data, size_t nbytes);

/* The message of the last failure on the calling thread ("" if none yet). Thread-local:
 * valid until the next failing call on the same thread. */
TSM_API const char *tsm_last_error(void);

/* ---- introspection ----------------------------------------------------------------- */

TSM_API const char *tsm_model_input_name(const void *model, int index);  /* NULL if out of range */
TSM_API const char *tsm_model_output_name(const void *model, int index); /* NULL if out of range */
/* NumPy dtype names: "float32", "float16", "float64", "int64", "int32", "int8", "uint8", "bool", ...;
 * "bfloat16" is 16 bits, the upper half of a float32's (the ml_dtypes name). */
TSM_API const char *tsm_model_input_dtype(const void *model, int index);
TSM_API const char *tsm_model_output_dtype(const void *model, int index);
TSM_API int tsm_model_input_ndim(const void *model, int index);
TSM_API int tsm_model_output_ndim(const void *model, int index);
/* Write ndim values into shape (which may be NULL only when ndim is 0): an input's as last
 * set, an output's as the last run made it (see "Dynamic shapes"). */
TSM_API int tsm_model_input_shape(const void *model, int index, int64_t *shape);
TSM_API int tsm_model_output_shape(const void *model, int index, int64_t *shape);
TSM_API size_t tsm_model_input_nbytes(const void *model, int index);
TSM_API size_t tsm_model_output_nbytes(const void *model, int index);
TSM_API int tsm_model_input_index(const void *model, const char *name); /* -1 if absent */
TSM_API int tsm_model_output_index(const void *model, const char *name); /* -1 if absent */

/* The artifact's metadata JSON as the compiler wrote it into the library (the file's
 * metadata less "checksum" and "sections", which only exist once the file is written). */
TSM_API const char *tsm_artifact_metadata(void);

/* Threads used by the parallel loops of every model of this library: n >= 1, or 0 for
 * one per core available to the process. Default: the environment variable
 * TSM_NUM_THREADS if set to a positive integer, else one per core. Fails if n < 0.
 * Idle threads poll for TSM_SPIN_US microseconds (default 500) before they sleep. */
TSM_API int tsm_set_num_threads(int n);

/* ---- profiling --------------------------------------------------------------------- */

/* Steps are the kernel calls of one run, in order; names are the fused ops' names. */
TSM_API int tsm_model_num_steps(const void *model);
TSM_API const char *tsm_model_step_name(const void *model, int index); /* NULL if out of range */

/* Like tsm_model_run, and writes each step's wall time in milliseconds into
 * step_ms[0 .. tsm_model_num_steps - 1]. */
TSM_API int tsm_model_run_profiled(void *model, double *step_ms);

#ifdef __cplusplus
}
#endif

#endif /* TENSORSMITH_RUNTIME_H */
