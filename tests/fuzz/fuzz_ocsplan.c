/*
 * fuzz_ocsplan.c - libFuzzer harness: ocsplan's JSON inputs, through the
 * real subcommand entry points (solvers/ocsplan/families.def) with the
 * input read from a file as `ocsplan NAME --in FILE` reads it. The first
 * byte picks the subcommand: from 0xf0 up one of models.def (rail-only,
 * hbd-ring), below that one of the catalogue's planners that have a family
 * (leaf-centric, pod-centric, delta-fast and the baselines) and, for leaf demands,
 * --realize / --replan; the rest is the request. The answer goes to
 * /dev/null; the exit code must be 0 or 2 (1 is for I/O and memory
 * failures, which do not happen here), or 1 from hbd-ring, whose answer to
 * a job that cannot be placed is exit 1 with the rings needed.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "io.h"
#include "planners.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define OCSPLAN_FAMILY(kind, fn, options)                                                          \
	int fn(const struct ocs_planner *planner, int argc, char **argv);
#include "families.def"
#undef OCSPLAN_FAMILY

static int (*const family_run[])(const struct ocs_planner *, int, char **) = {
#define OCSPLAN_FAMILY(kind, fn, options) [kind] = fn,
#include "families.def"
#undef OCSPLAN_FAMILY
};
enum { N_FAMILIES = sizeof(family_run) / sizeof(family_run[0]) };

#define OCSPLAN_MODEL(name, fn, options, summary) int fn(int argc, char **argv);
#include "models.def"
#undef OCSPLAN_MODEL

static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
} models[] = {
#define OCSPLAN_MODEL(name, fn, options, summary) {name, fn},
#include "models.def"
#undef OCSPLAN_MODEL
};
enum { N_MODELS = sizeof(models) / sizeof(models[0]) };
/* First bytes from here up pick a model; below, a planner (the seeds' bytes). */
#define MODEL_BYTE 0xf0

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	static char in_path[64];
	const struct ocs_planner *runnable[64], *p;
	size_t n = 0;
	char *argv[8];
	int argc = 0, rc;

	if (fd < 0) {
		fd = memfd_create("ocsplan-input", 0);
		if (fd < 0)
			abort();
		snprintf(in_path, sizeof(in_path), "/proc/self/fd/%d", fd);
	}
	if (size < 1)
		return 0;
	for (size_t i = 0; (p = ocs_planner_at(i)) != NULL && n < 64; i++)
		if ((size_t)p->demand < N_FAMILIES && family_run[p->demand])
			runnable[n++] = p;
	if (ftruncate(fd, 0) != 0 || pwrite(fd, data + 1, size - 1, 0) != (ssize_t)(size - 1))
		abort();
	if (data[0] >= MODEL_BYTE) {
		size_t m = (size_t)data[0] % N_MODELS;
		char *margv[] = {
			(char *)models[m].name, "--in", in_path, "--out", "/dev/null", NULL};

		rc = models[m].run(5, margv);
		if (rc != OCSPLAN_EXIT_OK && rc != OCSPLAN_EXIT_INVALID &&
		    !(rc == OCSPLAN_EXIT_FAILURE && strcmp(models[m].name, "hbd-ring") == 0))
			abort();
		return 0;
	}
	p = runnable[data[0] % n];
	argv[argc++] = (char *)p->name;
	argv[argc++] = "--in";
	argv[argc++] = in_path;
	argv[argc++] = "--out";
	argv[argc++] = "/dev/null";
	if (p->demand == OCS_PLANNER_LEAF_DEMAND && (data[0] / n) % 3 == 1)
		argv[argc++] = "--realize";
	else if (p->demand == OCS_PLANNER_LEAF_DEMAND && (data[0] / n) % 3 == 2)
		argv[argc++] = "--replan";
	argv[argc] = NULL;
	rc = family_run[p->demand](p, argc, argv);
	if (rc != OCSPLAN_EXIT_OK && rc != OCSPLAN_EXIT_INVALID)
		abort();
	return 0;
}
