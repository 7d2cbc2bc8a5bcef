/*
 * jobs_util.h - small helpers every file of the job pipeline uses: the
 * figures' and workloads' memory. A leaf of the
 * daemon's call graph: it calls nothing of the daemon.
 */
#ifndef OCSD_JOBS_UTIL_H
#define OCSD_JOBS_UTIL_H

#include "jobs.h"

/* Frees a figures struct's arrays and zeroes it. */
void jm_figures_clear(struct jm_figures *fig);
/*
 * The figures as text for the state store (jobs_figures.c): encode returns
 * a malloc'd string (caller frees; NULL when out of memory); decode fills
 * *out (clear it with jm_figures_clear), 0, -EINVAL (not such a text, out
 * then zeroed) or -ENOMEM.
 */
char *jm_figures_encode(const struct jm_figures *f);
int jm_figures_decode(const char *text, struct jm_figures *out);
/* The state's name ("ACTIVE"), and back (unknown names: false). */
bool jm_state_parse(const char *name, enum jm_state *out);

#endif
