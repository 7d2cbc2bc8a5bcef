/*
 * bench_status.c - the status page's renderers (daemon/status/) at the
 * issue-27 scale: the 131k example fabric (deploy/fabrics/131k.json: 256
 * pods, 16 groups of 32 devices of 256 ports) with 1,000 jobs holding every
 * device input (131,072 circuits). Prints the median time of 11 renders
 * and the bytes of /state.json and /topology.svg (targets: 50 ms, 2 MB).
 * Only the renderers: taking the snapshot from the daemon and the HTTP
 * reply are not measured. Exit 0 always (a figure, not a check).
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "status.h"
#include "bench_clock.h"

#define BS_PODS	    256
#define BS_GROUPS   16
#define BS_PER_GRP  32
#define BS_PORTS    256
#define BS_JOBS	    1000
#define BS_ROUNDS   11
#define BS_DEVICES  (BS_GROUPS * BS_PER_GRP)
#define BS_CIRCUITS (BS_DEVICES * BS_PORTS)

static void measure(const char *what, char *(*render)(const struct sp_snapshot *, size_t *),
		    const struct sp_snapshot *s)
{
	double ms[BS_ROUNDS];
	size_t len = 0;

	for (int r = 0; r < BS_ROUNDS; r++) {
		double t0 = bench_now_ms();
		char *text = render(s, &len);

		ms[r] = bench_now_ms() - t0;
		if (!text) {
			printf("%s: out of memory\n", what);
			return;
		}
		free(text);
	}
	qsort(ms, BS_ROUNDS, sizeof(ms[0]), bench_cmp_double);
	printf("%-14s median %7.1f ms  %9zu bytes  (targets: 50 ms, 2000000 bytes)\n", what,
	       ms[BS_ROUNDS / 2], len);
}

int main(void)
{
	static char names[BS_DEVICES][24], ids[BS_JOBS][16];
	struct sp_device *devs = calloc(BS_DEVICES, sizeof(*devs));
	struct sp_job *jobs = calloc(BS_JOBS, sizeof(*jobs));
	struct sp_circuit *c = calloc(BS_CIRCUITS, sizeof(*c));
	struct sp_snapshot s = {.kind = SP_LEAF_SPINE, .name = "131k", .role = "leader"};

	if (!devs || !jobs || !c)
		return 1;
	for (int d = 0; d < BS_DEVICES; d++) {
		snprintf(names[d], sizeof(names[d]), "ocs-g%d-d%d", d / BS_PER_GRP, d % BS_PER_GRP);
		devs[d] = (struct sp_device){
			names[d], d / BS_PER_GRP, "connected", "healthy", "", false, 0};
	}
	/* input p of every device to output p^1: pods p and p^1 */
	for (size_t i = 0; i < BS_CIRCUITS; i++) {
		int p = (int)(i % BS_PORTS);

		c[i] = (struct sp_circuit){(int)(i / BS_PORTS), p, p ^ 1, p, p ^ 1};
	}
	for (size_t j = 0, at = 0; j < BS_JOBS; j++) {
		size_t n = BS_CIRCUITS / BS_JOBS + (j < BS_CIRCUITS % BS_JOBS);

		snprintf(ids[j], sizeof(ids[j]), "job-%zu", j);
		jobs[j] = (struct sp_job){ids[j], "ACTIVE", "", 128, c + at, n};
		at += n;
	}
	s.pods = BS_PODS;
	s.groups = BS_GROUPS;
	s.devices = devs;
	s.n_devices = BS_DEVICES;
	s.jobs = jobs;
	s.n_jobs = BS_JOBS;
	printf("bench_status: %d pods, %d devices, %d jobs, %d circuits\n", BS_PODS, BS_DEVICES,
	       BS_JOBS, BS_CIRCUITS);
	measure("/state.json", sp_state_json, &s);
	measure("/topology.svg", sp_topology_svg, &s);
	free(devs);
	free(jobs);
	free(c);
	return 0;
}
