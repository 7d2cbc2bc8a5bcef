/*
 * bench_store_etcd.c - the state store on etcd next to SQLite, in the same
 * run (issues 15 and 31): the latency of small writes (st_job_put,
 * st_job_set_state), of a job's intent and confirm (st_intent_begin +
 * st_intent_finish) with 64, 1,024, 16,384, 65,536 and 131,072
 * cross-connects with the etcd/SQLite ratio of the medians and the bytes
 * those two entries take in etcd (deflated; etcd at its default limits:
 * entries above 1 MiB go in chunks), the bytes the log holds, and how long a new replica takes to
 * load the copy from etcd (log replay, and from a snapshot). Prints medians and p99 over the
 * repetitions. The etcd is a real single-member one on loopback (etcd_harness.h), its data on /tmp;
 * the SQLite file on /tmp too (WAL, synchronous=FULL).
 *
 * usage: bench_store_etcd [XCS REPS]: with XCS and REPS, only the intent
 * and confirm of XCS cross-connects, REPS times on each store (a profile).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "etcd.h"
#include "etcd_harness.h"
#include "store.h"
#include "store_etcd.h"
#include "bench_clock.h"

#define SMALL_WRITES 200
#define INTENTS	     20 /* the most repetitions of one size */

/* Prints the p50 and p99 of ms[0..n) (sorts it); returns the p50. */
static double report(const char *what, const char *backend, double *ms, int n)
{
	qsort(ms, (size_t)n, sizeof(*ms), bench_cmp_double);
	printf("%-34s %-7s p50 %8.3f ms  p99 %8.3f ms  (n=%d)\n", what, backend, ms[n / 2],
	       ms[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1], n);
	return ms[n / 2];
}

static int small_writes(struct st_store *st, const char *backend)
{
	double ms[SMALL_WRITES];

	for (int i = 0; i < SMALL_WRITES; i++) {
		char id[32];
		struct st_job j = {.id = id,
				   .state = "PENDING",
				   .request = "0123456789abcdef0123456789abcdef",
				   .request_len = 32,
				   .created_ms = i,
				   .updated_ms = i};
		double t0;

		snprintf(id, sizeof(id), "job-%d", i);
		t0 = bench_now_s();
		if (st_job_put(st, &j) != 0 || st_job_set_state(st, id, "ACTIVE", NULL, i) != 0)
			return -1;
		ms[i] = (bench_now_s() - t0) * 1000 / 2;
	}
	report("small write (job put, set state)", backend, ms, SMALL_WRITES);
	return 0;
}

/* intent+confirm of n_xcs cross-connects, reps times: *p50 (ms). */
static int intents(struct st_store *st, const char *backend, size_t n_xcs, int reps, double *p50)
{
	struct st_circuit *adds = calloc(n_xcs, sizeof(*adds));
	double ms[INTENTS];
	char what[64];

	if (!adds)
		return -1;
	for (int r = 0; r < reps; r++) {
		int64_t txn;
		double t0;

		for (size_t i = 0; i < n_xcs; i++) {
			/* ports no earlier round or run used (the circuits stay) */
			adds[i].xc = (struct ocs_xc){(int)(i / 4096), (int)(i % 4096) / 64,
						     (int)(i % 64) + 64 * r + (int)n_xcs * 100, r};
			snprintf(adds[i].job_id, sizeof(adds[i].job_id), "bench-%d", r);
		}
		t0 = bench_now_s();
		if (st_intent_begin(st, adds[0].job_id, NULL, 0, adds, n_xcs, NULL, 0, r, &txn) ||
		    st_intent_finish(st, txn, ST_INTENT_CONFIRMED, NULL, r)) {
			free(adds);
			return -1;
		}
		ms[r] = (bench_now_s() - t0) * 1000;
	}
	snprintf(what, sizeof(what), "intent+confirm, %zu xcs", n_xcs);
	*p50 = report(what, backend, ms, reps);
	free(adds);
	return 0;
}

/* Bytes under prefix in etcd (keys and values) and how many keys. */
static void etcd_bytes(struct st_etcd *se, const char *prefix, const char *what)
{
	struct etcd_kvs r;
	size_t end_len, bytes = 0, biggest = 0;
	uint8_t *end = etcd_prefix_end(prefix, strlen(prefix), &end_len);

	if (!end ||
	    etcd_range(st_etcd_client(se), prefix, strlen(prefix), end, end_len, 0, 0, &r) != 0) {
		free(end);
		return;
	}
	for (size_t i = 0; i < r.n; i++) {
		bytes += r.kvs[i].key_len + r.kvs[i].value_len;
		if (r.kvs[i].value_len > biggest)
			biggest = r.kvs[i].value_len;
	}
	printf("%-34s %zu keys, %zu bytes, largest value %zu bytes\n", what, r.n, bytes, biggest);
	etcd_kvs_clear(&r);
	free(end);
}

/*
 * The bytes log entries seq - 1 and seq (an intent and its confirm) take in
 * etcd, deflated or not: a chunked entry's record says its size.
 */
static size_t last_two_entries(struct st_etcd *se, const char *prefix)
{
	size_t total = 0;

	for (uint64_t seq = st_etcd_seq(se) - 1; seq <= st_etcd_seq(se); seq++) {
		char key[200];
		struct etcd_kvs r;
		unsigned long long chunks, bytes;

		snprintf(key, sizeof(key), "%slog/%016" PRIx64, prefix, seq);
		if (etcd_range(st_etcd_client(se), key, strlen(key), NULL, 0, 0, 0, &r) != 0)
			return 0;
		if (r.n == 1 && r.kvs[0].value_len < 96 &&
		    sscanf((const char *)r.kvs[0].value, "#chunked %llu %llu", &chunks, &bytes) ==
			    2)
			total += bytes;
		else if (r.n == 1)
			total += r.kvs[0].value_len;
		etcd_kvs_clear(&r);
	}
	return total;
}

static int load_time(struct eh_etcd *e, const char *prefix, const char *what)
{
	struct st_etcd_opts o = {.etcd = {.endpoints = e->endpoint}, .prefix = prefix};
	double ms[5];
	char err[512];

	for (int i = 0; i < 5; i++) {
		struct st_store *st;
		struct st_etcd *se;
		double t0 = bench_now_s();

		if (st_etcd_open(&o, &st, &se, err, sizeof(err)) != 0) {
			fprintf(stderr, "%s\n", err);
			return -1;
		}
		ms[i] = (bench_now_s() - t0) * 1000;
		st_close(st);
	}
	report(what, "etcd", ms, 5);
	return 0;
}

int main(int argc, char **argv)
{
	struct eh_etcd e;
	struct st_store *sq = NULL, *et = NULL;
	struct st_etcd *se;
	struct st_etcd_opts o = {.prefix = "/bench/a/", .snapshot_every = 1000000};
	char path[128], err[512];
	int rc = 1;

	if (eh_start(&e, false) != 0)
		return 1;
	o.etcd.endpoints = e.endpoint;
	snprintf(path, sizeof(path), "/tmp/bench-store-etcd-%d.db", (int)getpid());
	if (st_open(path, &sq, err, sizeof(err)) != 0 ||
	    st_etcd_open(&o, &et, &se, err, sizeof(err)) != 0) {
		fprintf(stderr, "%s\n", err);
		goto out;
	}
	if (argc == 3) {
		double sq_ms, et_ms;
		int reps = atoi(argv[2]);

		if (reps < 1 || reps > INTENTS || atol(argv[1]) < 1) {
			fprintf(stderr, "usage: bench_store_etcd [XCS REPS (1..%d)]\n", INTENTS);
			goto out;
		}
		if (intents(sq, "sqlite", (size_t)atol(argv[1]), reps, &sq_ms) ||
		    intents(et, "etcd", (size_t)atol(argv[1]), reps, &et_ms))
			goto failed;
		printf("%-34s etcd/sqlite p50 %.2fx\n", "", et_ms / sq_ms);
		rc = 0;
		goto out;
	}
	if (small_writes(sq, "sqlite") || small_writes(et, "etcd"))
		goto failed;
	/* intent+confirm: SQLite and etcd side by side, size by size */
	static const struct {
		size_t xcs;
		int reps;
	} sizes[] = {{64, 20}, {1024, 10}, {16384, 15}, {65536, 3}, {131072, 3}};
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		double sq_ms, et_ms;

		if (intents(sq, "sqlite", sizes[k].xcs, sizes[k].reps, &sq_ms) ||
		    intents(et, "etcd", sizes[k].xcs, sizes[k].reps, &et_ms))
			goto failed;
		printf("%-34s etcd/sqlite p50 %.2fx; intent+confirm stored in %zu bytes\n", "",
		       et_ms / sq_ms, last_two_entries(se, "/bench/a/"));
	}
	etcd_bytes(se, "/bench/a/log/", "etcd log after the runs:");
	if (load_time(&e, "/bench/a/", "new replica, log replay") != 0)
		goto out;
	/* the same state as a snapshot, due at the next write: that write
	 * takes the image and returns, the snapshot's thread writes it */
	st_close(et);
	o.snapshot_every = 1;
	if (st_etcd_open(&o, &et, &se, err, sizeof(err)) != 0)
		goto out;
	double t0 = bench_now_s();
	if (st_drain_set(et, "x", true) != 0)
		goto failed;
	double t1 = bench_now_s();
	st_etcd_snapshot_wait(se);
	printf("%-34s %.1f ms (the snapshot, written meanwhile: %.1f ms)\n",
	       "the write that found a snapshot due", (t1 - t0) * 1000,
	       (bench_now_s() - t0) * 1000);
	etcd_bytes(se, "/bench/a/snap/", "snapshot:");
	if (load_time(&e, "/bench/a/", "new replica, from the snapshot") != 0)
		goto out;
	rc = 0;
	goto out;
failed:
	fprintf(stderr, "a write failed: %s\n", st_etcd_last_error(se));
out:
	st_close(sq);
	st_close(et);
	unlink(path);
	snprintf(err, sizeof(err), "%s-wal", path);
	unlink(err);
	snprintf(err, sizeof(err), "%s-shm", path);
	unlink(err);
	eh_stop(&e);
	return rc;
}
