/*
 * bench_follower.c - issue 31: what a follower's refresh costs when it
 * applies the change (daemon/follower.c) against rebuilding its whole
 * view, on the same state in the same run.
 *
 * The state: the 131,072-GPU example fabric (deploy/fabrics/131k.json)
 * with JOBS jobs holding CIRCUITS cross-connects between them (the issue's
 * 1,000 jobs and 100,000 cross-connects by default), written on a leader
 * store (SQLite in memory) whose every write reaches the follower's copy
 * as a changeset (store_repl.h), as the etcd backend delivers it. Then,
 * ROUNDS times each, timed around fw_refresh():
 *   - one job's state changed (the follower applies the change);
 *   - one transaction of 64 cross-connects for a job (applied);
 *   - a device drained or undrained (drains rebuild the view: the whole
 *     state read again, as every refresh did before issue 31).
 * Prints the median and p99 of each, and the ratio of the rebuild's median
 * to each applied one's.
 *
 * usage: bench_follower FABRIC_JSON [JOBS [CIRCUITS [ROUNDS]]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api.h"
#include "config.h"
#include "follower.h"
#include "loop.h"
#include "metrics.h"
#include "store.h"
#include "repl_loopback.h"
#include "store_repl.h"
#include "bench_clock.h"

static double pct(double *v, int n, double p)
{
	qsort(v, (size_t)n, sizeof(*v), bench_cmp_double);
	return v[(int)(p * (n - 1) + 0.5)];
}

/* The i-th distinct input port of the fabric, as a cross-connect to out port (i+1) mod ports. */
static struct ocs_xc nth_xc(const struct ocs_fabric *f, long i)
{
	int ports = ocs_fabric_device_ports_used(f);
	int d = (int)(i / ports), p = (int)(i % ports);

	return (struct ocs_xc){ocs_fabric_device_group(f, d), ocs_fabric_device_in_group(f, d), p,
			       (p + 1) % ports};
}

static int fill(struct st_store *leader, const struct ocs_fabric *f, int jobs, long circuits)
{
	const long batch = 4096;
	struct st_circuit *add = calloc((size_t)batch, sizeof(*add));
	long done = 0;

	for (int k = 0; k < jobs; k++) {
		char id[32];
		struct st_job job = {
			.id = id, .state = "ACTIVE", .created_ms = 1000, .updated_ms = 1000};

		snprintf(id, sizeof(id), "job-%d", k);
		if (st_job_put(leader, &job) != 0)
			return -1;
	}
	while (add && done < circuits) {
		long n = circuits - done < batch ? circuits - done : batch;
		int64_t txn;

		for (long i = 0; i < n; i++) {
			add[i].xc = nth_xc(f, done + i);
			snprintf(add[i].job_id, sizeof(add[i].job_id), "job-%ld",
				 (done + i) * jobs / circuits);
		}
		if (st_intent_begin(leader, add[0].job_id, NULL, 0, add, (size_t)n, NULL, 0, 1000,
				    &txn) != 0 ||
		    st_intent_finish(leader, txn, ST_INTENT_CONFIRMED, "", 1000) != 0)
			return -1;
		done += n;
	}
	free(add);
	return add ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct ocsd_config *cfg = NULL;
	struct cfg_errors errs = {0};
	int jobs = argc > 2 ? atoi(argv[2]) : 1000;
	long circuits = argc > 3 ? atol(argv[3]) : 100000;
	int rounds = argc > 4 ? atoi(argv[4]) : 21;
	struct st_store *leader = NULL, *copy = NULL;
	struct loop *loop;
	struct mx_registry *reg;
	struct api *api;
	struct fw *fw = NULL;
	double *t_state, *t_txn, *t_drain, t0;
	unsigned long applied, rebuilt;
	char err[256];
	long extra = circuits;

	if (argc < 2 || cfg_load_file(argv[1], &cfg, &errs) != 0 || jobs < 1 || rounds < 1) {
		fprintf(stderr, "usage: bench_follower FABRIC_JSON [JOBS [CIRCUITS [ROUNDS]]]\n");
		return 2;
	}
	loop = loop_new();
	reg = mx_registry_new();
	api = api_new(&(struct api_deps){
		.cfg = cfg, .loop = loop, .reg = reg, .version = "bench", .store = "bench"});
	t_state = calloc((size_t)rounds, sizeof(double));
	t_txn = calloc((size_t)rounds, sizeof(double));
	t_drain = calloc((size_t)rounds, sizeof(double));
	if (!loop || !reg || !api || !t_state || !t_txn || !t_drain ||
	    st_open_memory(&leader, err, sizeof(err)) != 0 ||
	    st_open_memory(&copy, err, sizeof(err)) != 0) {
		fprintf(stderr, "bench_follower: cannot set up\n");
		return 1;
	}
	repl_loopback(leader, copy);
	t0 = bench_now_us();
	if (fill(leader, &cfg->fabric, jobs, circuits) != 0 ||
	    fw_new(&(struct fw_deps){cfg, copy, NULL, loop, api}, &fw) != 0) {
		fprintf(stderr, "bench_follower: cannot write the state\n");
		return 1;
	}
	printf("bench_follower: 131k fabric state of %d jobs, %ld cross-connects written and the "
	       "first view built in %.1f s\n",
	       jobs, circuits, (bench_now_us() - t0) / 1e6);
	for (int r = 0; r < rounds; r++) {
		char id[32];
		struct st_circuit add[64];
		int64_t txn;
		double t;

		snprintf(id, sizeof(id), "job-%d", r % jobs);
		if (st_job_set_state(leader, id, r % 2 ? "ACTIVE" : "RELEASING", NULL, 2000 + r) !=
		    0)
			return 1;
		t = bench_now_us();
		fw_refresh(fw);
		t_state[r] = bench_now_us() - t;
		for (int i = 0; i < 64; i++) {
			add[i].xc = nth_xc(&cfg->fabric, extra++);
			snprintf(add[i].job_id, sizeof(add[i].job_id), "%s", id);
		}
		if (st_intent_begin(leader, id, NULL, 0, add, 64, NULL, 0, 2000, &txn) != 0 ||
		    st_intent_finish(leader, txn, ST_INTENT_CONFIRMED, "", 2000) != 0)
			return 1;
		t = bench_now_us();
		fw_refresh(fw);
		t_txn[r] = bench_now_us() - t;
		/* drained in even rounds, undrained in the next: a change every time */
		if (st_drain_set(leader, cfg->devices[(r / 2) % cfg->n_devices].name, r % 2 == 0) !=
		    0)
			return 1;
		t = bench_now_us();
		fw_refresh(fw);
		t_drain[r] = bench_now_us() - t;
	}
	fw_counts(fw, &applied, &rebuilt);
	{
		double ms = pct(t_state, rounds, 0.5), mt = pct(t_txn, rounds, 0.5),
		       md = pct(t_drain, rounds, 0.5);

		printf("%-44s %12s %12s %10s\n", "refresh after", "median us", "p99 us",
		       "rebuild/x");
		printf("%-44s %12.0f %12.0f %9.0fx\n", "one job's state changed (applied)", ms,
		       pct(t_state, rounds, 0.99), md / ms);
		printf("%-44s %12.0f %12.0f %9.0fx\n", "64 cross-connects added (applied)", mt,
		       pct(t_txn, rounds, 0.99), md / mt);
		printf("%-44s %12.0f %12.0f %9s\n", "a drain (the whole view rebuilt)", md,
		       pct(t_drain, rounds, 0.99), "1x");
		printf("refreshes: %lu applied, %lu rebuilt (%d rounds)\n", applied, rebuilt,
		       rounds);
	}
	fw_free(fw);
	api_free(api);
	mx_registry_free(reg);
	st_close(leader);
	st_close(copy);
	loop_free(loop);
	cfg_free(cfg);
	free(t_state);
	free(t_txn);
	free(t_drain);
	return 0;
}
