/*
 * jobs_util.h - small helpers every file of the job pipeline uses: the
 * structured error, the figures' and workloads' memory. A leaf of the
 * daemon's call graph: it calls nothing of the daemon.
 */
#ifndef OCSD_JOBS_UTIL_H
#define OCSD_JOBS_UTIL_H

#include "jobs.h"

__attribute__((format(printf, 4, 5))) void jm_set_error(struct jm_error *e, enum jm_status status,
							const char *field, const char *fmt, ...);
/* Frees a figures struct's arrays and zeroes it. */
void jm_figures_clear(struct jm_figures *fig);
/* The state's name ("ACTIVE"), and back (unknown names: false). */
bool jm_state_parse(const char *name, enum jm_state *out);

#endif
