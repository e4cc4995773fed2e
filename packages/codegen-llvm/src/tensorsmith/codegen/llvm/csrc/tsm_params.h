/*
 * tsm_params.h -- where the weights of a CPU artifact are at run time. Internal to the
 * library.
 */
#ifndef TSM_PARAMS_H
#define TSM_PARAMS_H

#include "tsm_plan.h"

/* The weights (tsm_graph_plan.params_bytes of them), mapped read-only from the artifact
 * file when the library was loaded; NULL if that failed, with *why saying what to do.
 * A plan without weights gets a non-NULL pointer it never reads through. */
TSM_INTERNAL const unsigned char *tsm_params(const char **why);

#endif /* TSM_PARAMS_H */
