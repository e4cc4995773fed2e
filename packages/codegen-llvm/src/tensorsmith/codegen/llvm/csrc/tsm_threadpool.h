/*
 * tsm_threadpool.h -- the runtime's own controls of the pool behind tsm_parallel_for
 * (declared in tsm_plan.h, for the generated code). Internal to the library.
 */
#ifndef TSM_THREADPOOL_H
#define TSM_THREADPOOL_H

#include "tsm_plan.h"

/* Use n threads (the caller included) from the next parallel loop on; 0 = one per core
 * available to the process. n must be >= 0; values above TSM_MAX_THREADS are capped. */
TSM_INTERNAL void tsm_pool_set_num_threads(int n);

/* The number of threads the next parallel loop may use (deciding the default, from
 * TSM_NUM_THREADS or the core count, if nothing was set yet). */
TSM_INTERNAL int tsm_pool_num_threads(void);

#define TSM_MAX_THREADS 1024

#endif /* TSM_THREADPOOL_H */
