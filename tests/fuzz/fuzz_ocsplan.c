/*
 * fuzz_ocsplan.c - libFuzzer harness: ocsplan's JSON inputs, through the
 * real subcommand entry points (solvers/ocsplan/families.def) with the
 * input read from a file as `ocsplan NAME --in FILE` reads it. The first
 * byte picks the subcommand among the catalogue's planners that have a
 * family (leaf-centric, pod-centric, delta-fast and the baselines) and, for
 * leaf demands, --realize / --replan; the rest is the request. The answer
 * goes to /dev/null; the exit code must be 0 or 2 (1 is for I/O and memory
 * failures, which do not happen here). The hbd-ring and rail-only
 * subcommands are being written (issue 11); they join here when their
 * family line is in families.def: nothing else changes.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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
	p = runnable[data[0] % n];
	if (ftruncate(fd, 0) != 0 || pwrite(fd, data + 1, size - 1, 0) != (ssize_t)(size - 1))
		abort();
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
