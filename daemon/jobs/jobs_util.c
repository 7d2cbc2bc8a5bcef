/*
 * jobs_util.c - implementation of jobs_util.h (and of the state names and
 * workload copies declared in jobs.h): helpers with no daemon state.
 */
#include "jobs_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const state_names[] = {
	[JM_PENDING] = "PENDING", [JM_PLANNING] = "PLANNING",	[JM_PROGRAMMING] = "PROGRAMMING",
	[JM_ACTIVE] = "ACTIVE",	  [JM_RELEASING] = "RELEASING", [JM_RELEASED] = "RELEASED",
	[JM_FAILED] = "FAILED",
};

const char *jm_state_name(enum jm_state s)
{
	return s >= JM_PENDING && s <= JM_FAILED ? state_names[s] : "UNKNOWN";
}

bool jm_state_parse(const char *name, enum jm_state *out)
{
	for (int i = JM_PENDING; i <= JM_FAILED; i++)
		if (name && strcmp(name, state_names[i]) == 0) {
			*out = (enum jm_state)i;
			return true;
		}
	return false;
}

void jm_figures_clear(struct jm_figures *fig)
{
	free(fig->unplaced);
	free(fig->moved_jobs);
	memset(fig, 0, sizeof(*fig));
}

struct jm_workload *jm_workload_dup(const struct jm_workload *w)
{
	struct jm_workload *c = w ? malloc(sizeof(*c)) : NULL;

	if (!c)
		return NULL;
	*c = *w;
	c->gpus = malloc((w->n_gpus ? w->n_gpus : 1) * sizeof(*c->gpus));
	if (!c->gpus) {
		free(c);
		return NULL;
	}
	if (w->n_gpus)
		memcpy(c->gpus, w->gpus, w->n_gpus * sizeof(*c->gpus));
	return c;
}

void jm_workload_free(struct jm_workload *w)
{
	if (!w)
		return;
	free(w->gpus);
	free(w);
}
