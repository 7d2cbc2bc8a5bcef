/*
 * test_store_etcd.c - the etcd backend of the state store
 * (daemon/replica/store_etcd.c) against a real single-member etcd (etcd_harness.h).
 *
 * The oracle is the plain SQLite store: every step runs the same store.h
 * call on a SQLite file and on the etcd store, and after each step a dump
 * of everything the read API returns (jobs, idempotency keys, open intents
 * with their cross-connects, rings and bundles, circuits, links, rings,
 * faults, drains) must be identical on both. Then: a second replica
 * following through a watch converges to the same dump; a replica opened
 * later (empty copy, from etcd alone) too, with and without snapshots and
 * after a compaction; a write from a copy that is behind is refused
 * (-EBUSY) and nothing forks; a write with etcd down is refused (-EIO)
 * and leaves every copy unchanged; the fence refuses writes once the
 * leader key is gone (-EPERM), the confirm gate's decision among them (its
 * log entry holds the decision and nothing else); a write whose answer is
 * lost on the way, sent again by the client, is taken once and reported
 * done. A changeset that compresses is stored deflated; entries larger
 * than a chunk (4 KiB here) are staged in chunks and read whole by
 * followers and new replicas; a refused one leaves no chunk,
 * orphans of a writer that died while staging are never read and go with
 * the next snapshot, a missing chunk is an error rather than part of a
 * change; a writer killed (SIGKILL) at each step of a chunked write leaves
 * its successor the whole write or none of it; and with etcd's default limits (1.5 MiB per request,
 * 128 operations per transaction) and 1 MiB chunks, an intent of 131,072 cross-connects is written,
 * confirmed and read back by a follower.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>
/* the session extension's changeset reader (Debian's libsqlite3 has it; store.c too) */
#define SQLITE_ENABLE_SESSION
#define SQLITE_ENABLE_PREUPDATE_HOOK
#include <sqlite3.h>

#include "etcd.h"
#include "etcd_harness.h"
#include "store.h"
#include "store_etcd.h"

static struct eh_etcd etcd;
static int prefix_n;

static int group_setup(void **state)
{
	(void)state;
	return eh_start(&etcd, false) == 0 ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	eh_stop(&etcd);
	return 0;
}

/* ---- the dump: everything the read API says, as text ---- */

struct dump {
	char *text;
	size_t len, cap;
};

static void out(struct dump *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void out(struct dump *d, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (d->len + (size_t)n + 1 > d->cap) {
		d->cap = (d->len + (size_t)n + 1) * 2;
		d->text = realloc(d->text, d->cap);
		assert_non_null(d->text);
	}
	va_start(ap, fmt);
	vsnprintf(d->text + d->len, d->cap - d->len, fmt, ap);
	va_end(ap);
	d->len += (size_t)n;
}

static int dump_job(void *ctx, const struct st_job *j)
{
	struct dump *d = ctx;

	out(d, "job %s key=%s state=%s reason=%s created=%lld updated=%lld req=", j->id,
	    j->idempotency_key ? j->idempotency_key : "-", j->state, j->reason ? j->reason : "-",
	    (long long)j->created_ms, (long long)j->updated_ms);
	for (size_t i = 0; i < j->request_len; i++)
		out(d, "%02x", ((const uint8_t *)j->request)[i]);
	out(d, "\n");
	return 0;
}

static void dump_ring(struct dump *d, const struct rg_ring *r)
{
	out(d, " ring %s/%d m=%d change=%s failed=%d reason=%s at=%lld nodes=", r->job_id, r->index,
	    r->m, st_ring_change_name(r->last_change), r->failed_node, r->reason,
	    (long long)r->changed_ms);
	for (int i = 0; i < r->m; i++)
		out(d, "%d,", r->nodes[i]);
	out(d, "\n");
}

static int dump_intent(void *ctx, const struct st_intent *in)
{
	struct dump *d = ctx;

	out(d, "intent %lld job=%s state=%s%s\n", (long long)in->txn_id, in->job_id,
	    st_intent_state_name(in->state), in->decided ? " decided" : "");
	for (size_t i = 0; i < in->n_removals; i++)
		out(d, " del %d.%d %d->%d\n", in->removals[i].group, in->removals[i].device,
		    in->removals[i].in, in->removals[i].out);
	for (size_t i = 0; i < in->n_additions; i++)
		out(d, " add %d.%d %d->%d %s\n", in->additions[i].xc.group,
		    in->additions[i].xc.device, in->additions[i].xc.in, in->additions[i].xc.out,
		    in->additions[i].job_id);
	for (size_t i = 0; in->has_rings && i < in->n_rings; i++)
		dump_ring(d, &in->rings[i]);
	for (size_t i = 0; i < in->n_bundles; i++)
		out(d, " bundle %d/%d path=%d dist=%d dir=%d\n", in->bundles[i].node,
		    in->bundles[i].bundle, in->bundles[i].path, in->bundles[i].distance,
		    in->bundles[i].dir);
	return 0;
}

static int dump_circuit(void *ctx, const struct st_circuit *c)
{
	out(ctx, "circuit %d.%d %d->%d %s\n", c->xc.group, c->xc.device, c->xc.in, c->xc.out,
	    c->job_id);
	return 0;
}

static int dump_link(void *ctx, const struct st_link *l)
{
	out(ctx, "link %s %d-%d/%d x%d\n", l->job_id, l->a, l->b, l->h, l->links);
	return 0;
}

static int dump_rings(void *ctx, const struct rg_ring *r)
{
	dump_ring(ctx, r);
	return 0;
}

static int dump_fault(void *ctx, int node, const char *source, int64_t since_ms)
{
	out(ctx, "fault %d %s %lld\n", node, source, (long long)since_ms);
	return 0;
}

static int dump_drain(void *ctx, const char *device)
{
	out(ctx, "drained %s\n", device);
	return 0;
}

/* Caller frees. */
static char *dump(struct st_store *st)
{
	struct dump d = {0};
	char *id = NULL;

	out(&d, "-\n");
	assert_int_equal(st_job_list(st, dump_job, &d), 0);
	assert_int_equal(st_intent_list_open(st, dump_intent, &d), 0);
	assert_int_equal(st_circuit_list(st, NULL, dump_circuit, &d), 0);
	assert_int_equal(st_circuit_list(st, "j2", dump_circuit, &d), 0);
	assert_int_equal(st_link_list(st, dump_link, &d), 0);
	assert_int_equal(st_ring_list(st, dump_rings, &d), 0);
	assert_int_equal(st_fault_list(st, dump_fault, &d), 0);
	assert_int_equal(st_drain_list(st, dump_drain, &d), 0);
	if (st_job_by_key(st, "key-1", &id) == 0)
		out(&d, "key-1 -> %s\n", id);
	free(id);
	return d.text;
}

static void assert_same(struct st_store *a, struct st_store *b)
{
	char *da = dump(a), *db = dump(b);

	if (strcmp(da, db) != 0)
		fprintf(stderr, "--- one:\n%s--- other:\n%s", da, db);
	assert_string_equal(da, db);
	free(da);
	free(db);
}

/* ---- stores ---- */

static void new_prefix(char *prefix, size_t len)
{
	snprintf(prefix, len, "/ocsd/test-%d-%d/", (int)getpid(), ++prefix_n);
}

static struct st_store *open_etcd(const char *prefix, unsigned snapshot_every, struct st_etcd **se)
{
	struct st_etcd_opts o = {.etcd = {.endpoints = etcd.endpoint, .timeout_ms = 1000},
				 .prefix = prefix,
				 .snapshot_every = snapshot_every,
				 .chunk_bytes = 4096};
	struct st_store *st = NULL;
	char err[512];
	int rc = st_etcd_open(&o, &st, se, err, sizeof(err));

	if (rc)
		fprintf(stderr, "st_etcd_open: %s\n", err);
	assert_int_equal(rc, 0);
	return st;
}

static struct st_store *open_sqlite(char *path, size_t len)
{
	struct st_store *st = NULL;
	char err[256];

	snprintf(path, len, "/tmp/ocsd-test-store-etcd-%d-%d.db", (int)getpid(), ++prefix_n);
	assert_int_equal(st_open(path, &st, err, sizeof(err)), 0);
	return st;
}

static void remove_sqlite(const char *path)
{
	char p[300];

	unlink(path);
	snprintf(p, sizeof(p), "%s-wal", path);
	unlink(p);
	snprintf(p, sizeof(p), "%s-shm", path);
	unlink(p);
}

/* ---- the steps, each run on both stores ---- */

#define BOTH(call)                                                                                 \
	do {                                                                                       \
		struct st_store *st_ = ref;                                                        \
		int rc_ref_ = (call);                                                              \
		st_ = dut;                                                                         \
		int rc_dut_ = (call);                                                              \
		assert_int_equal(rc_dut_, rc_ref_);                                                \
		assert_same(ref, dut);                                                             \
	} while (0)

static int put_job(struct st_store *st, const char *id, const char *key, const char *state,
		   int64_t ms)
{
	struct st_job j = {.id = (char *)id,
			   .idempotency_key = (char *)key,
			   .state = (char *)state,
			   .request = "\x01\x00\xff",
			   .request_len = 3,
			   .created_ms = ms,
			   .updated_ms = ms};

	return st_job_put(st, &j);
}

static int begin_leaf(struct st_store *st, const char *job, int64_t ms, int64_t *txn)
{
	const struct ocs_xc del[] = {{0, 1, 2, 3}};
	struct st_circuit add[] = {
		{{0, 1, 4, 5}, "j1"}, {{1, 0, 5, 4}, "j1"}, {{1, 2, 7, 8}, "j2"}};
	struct st_link links[] = {{"j1", 0, 1, 0, 2}, {"j2", 1, 2, 1, 1}};

	return st_intent_begin(st, job, del, 1, add, 3, links, 2, ms, txn);
}

static int begin_ring(struct st_store *st, int64_t ms, int64_t *txn)
{
	int nodes[] = {3, 4, 5, 6};
	struct rg_ring rings[] = {
		{.job_id = "j3",
		 .index = 0,
		 .nodes = nodes,
		 .m = 4,
		 .last_change = RG_PLACED,
		 .failed_node = -1,
		 .changed_ms = ms},
		{.job_id = "j3",
		 .index = 1,
		 .nodes = NULL,
		 .m = 0,
		 .last_change = RG_LOST,
		 .failed_node = 9,
		 .reason = "node 9 failed",
		 .changed_ms = ms},
	};
	struct st_bundle bundles[] = {{3, 0, 1, 1, 0}, {4, 1, 1, 2, 1}};
	struct st_fault fault = {.node = 9, .source = "agent", .since_ms = ms};

	return st_ring_intent_begin(st, "j3", rings, 2, bundles, 2, &fault, ms, txn);
}

static void run_steps(struct st_store *ref, struct st_store *dut, int rounds)
{
	for (int r = 0; r < rounds; r++) {
		char j1[16], j2[16], key[16];
		int64_t t1 = 0, t2 = 0, t3 = 0, ms = 1000 * r;

		snprintf(j1, sizeof(j1), "j1-%d", r);
		snprintf(j2, sizeof(j2), "j2-%d", r);
		if (r == 0) { /* dump() lists the circuits of "j2" on their own */
			snprintf(j1, sizeof(j1), "j1");
			snprintf(j2, sizeof(j2), "j2");
		}
		snprintf(key, sizeof(key), "key-%d", r + 1);
		BOTH(put_job(st_, j1, key, "PENDING", ms + 1));
		BOTH(put_job(st_, j2, NULL, "PENDING", ms + 2));
		BOTH(put_job(st_, "j3", NULL, "PENDING", ms + 3));
		/* refused writes change nothing, on either store */
		BOTH(put_job(st_, "other", key, "PENDING", ms + 4));
		BOTH(st_job_set_state(st_, "none", "ACTIVE", NULL, ms + 5));
		BOTH(st_job_set_state(st_, j1, "PROGRAMMING", NULL, ms + 5));
		BOTH(begin_leaf(st_, j1, ms + 6, &t1));
		assert_true(t1 > 0);
		BOTH(st_intent_finish(st_, t1, ST_INTENT_CONFIRMED, NULL, ms + 7));
		BOTH(st_intent_finish(st_, t1, ST_INTENT_CONFIRMED, NULL, ms + 7));
		BOTH(begin_leaf(st_, j2, ms + 8, &t2));
		BOTH(st_intent_finish(st_, t2, ST_INTENT_ROLLED_BACK, "device 3 refused", ms + 9));
		BOTH(begin_ring(st_, ms + 10, &t3));
		BOTH(st_intent_finish(st_, t3, ST_INTENT_CONFIRMED, NULL, ms + 11));
		BOTH(begin_leaf(st_, "j3", ms + 12, &t2)); /* left open, decided */
		BOTH(st_intent_decide(st_, t2, ms + 12));
		BOTH(st_intent_decide(st_, t2, ms + 12)); /* -EEXIST */
		BOTH(st_intent_decide(st_, t1, ms + 12)); /* -EALREADY */
		BOTH(st_fault_set(st_, 2, true, "operator", ms + 13));
		BOTH(st_fault_set(st_, 2, true, "again", ms + 14)); /* idempotent */
		BOTH(st_fault_set(st_, 9, false, NULL, ms + 14));
		BOTH(st_drain_set(st_, "ocs-3", true));
		BOTH(st_drain_set(st_, "ocs-3", true));
		BOTH(st_drain_set(st_, "ocs-4", true));
		BOTH(st_drain_set(st_, "ocs-4", false));
		BOTH(st_job_set_state(st_, j2, "RELEASED", "done", ms + 15));
		BOTH(st_job_put(st_, &(struct st_job){.id = j1,
						      .idempotency_key = key,
						      .state = "ACTIVE",
						      .reason = "replaced",
						      .created_ms = 1,
						      .updated_ms = ms + 16}));
		size_t n_ref = 0, n_dut = 0;

		assert_int_equal(st_prune(ref, ms + 100000, 10, 0, 100, &n_ref, NULL, NULL), 0);
		assert_int_equal(st_prune(dut, ms + 100000, 10, 0, 100, &n_dut, NULL, NULL), 0);
		assert_int_equal(n_ref, n_dut);
		assert_true(n_ref > 0);
		assert_same(ref, dut);
	}
}

static void run_base(struct event_base *base, int ms)
{
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
}

/* Runs base until b's copy reaches seq (or 5 s). */
static void follow_until(struct event_base *base, struct st_etcd *b, uint64_t seq)
{
	for (int i = 0; i < 250 && st_etcd_seq(b) < seq; i++)
		run_base(base, 20);
	assert_int_equal(st_etcd_seq(b), seq);
}

static int changes;

static void on_change(void *ctx)
{
	(void)ctx;
	changes++;
}

static void test_every_operation(void **state)
{
	char prefix[96], path[128];
	struct st_etcd *a_se, *b_se, *c_se;
	struct st_store *ref = open_sqlite(path, sizeof(path));
	struct st_store *dut, *b, *c;
	struct event_base *base = event_base_new();

	(void)state;
	new_prefix(prefix, sizeof(prefix));
	dut = open_etcd(prefix, 0, &a_se);
	/* a second replica, following from the start */
	b = open_etcd(prefix, 0, &b_se);
	changes = 0;
	assert_int_equal(st_etcd_follow(b_se, base, on_change, NULL), 0);
	run_steps(ref, dut, 2);
	assert_true(st_etcd_seq(a_se) > 20);
	follow_until(base, b_se, st_etcd_seq(a_se));
	assert_true(changes > 0);
	assert_same(ref, b);
	/* a replica started now: an empty copy, everything from etcd */
	c = open_etcd(prefix, 0, &c_se);
	assert_int_equal(st_etcd_seq(c_se), st_etcd_seq(a_se));
	assert_same(ref, c);
	st_close(c);
	st_close(b);
	st_close(dut);
	st_close(ref);
	remove_sqlite(path);
	event_base_free(base);
}

/* The seq of the snapshot etcd records under prefix (0: none). */
static uint64_t snapshot_seq(struct st_etcd *se, const char *prefix)
{
	char key[160];
	struct etcd_kvs r;
	unsigned long long seq = 0;

	snprintf(key, sizeof(key), "%ssnap", prefix);
	assert_int_equal(etcd_range(st_etcd_client(se), key, strlen(key), NULL, 0, 0, 0, &r), 0);
	if (r.n == 1)
		assert_int_equal(sscanf((const char *)r.kvs[0].value, "%llu", &seq), 1);
	etcd_kvs_clear(&r);
	return seq;
}

static void test_snapshots(void **state)
{
	char prefix[96], path[128], key[160];
	struct st_etcd *a_se, *c_se;
	struct st_store *ref = open_sqlite(path, sizeof(path));
	struct st_store *dut, *c;
	struct etcd_kvs r;
	uint8_t *end;
	size_t end_len;

	(void)state;
	new_prefix(prefix, sizeof(prefix));
	/* a snapshot every 10 entries, in 4 KiB chunks */
	dut = open_etcd(prefix, 10, &a_se);
	run_steps(ref, dut, 3);
	/* the snapshot is written on a thread: once it is in, the log before
	 * it is gone but its tail (half of snapshot_every), and the snapshot
	 * is there in chunks */
	st_etcd_snapshot_wait(a_se);
	uint64_t snap = snapshot_seq(a_se, prefix);
	assert_true(snap > 10 && snap <= st_etcd_seq(a_se));
	snprintf(key, sizeof(key), "%slog/", prefix);
	end = etcd_prefix_end(key, strlen(key), &end_len);
	assert_int_equal(etcd_range(st_etcd_client(a_se), key, strlen(key), end, end_len, 0, 0, &r),
			 0);
	assert_int_equal(r.n, st_etcd_seq(a_se) - (snap + 1 - 10 / 2) + 1);
	etcd_kvs_clear(&r);
	free(end);
	snprintf(key, sizeof(key), "%ssnap/", prefix);
	end = etcd_prefix_end(key, strlen(key), &end_len);
	assert_int_equal(etcd_range(st_etcd_client(a_se), key, strlen(key), end, end_len, 0, 0, &r),
			 0);
	assert_true(r.n >= 2); /* the image is larger than one 4 KiB chunk */
	/* one snapshot only: every chunk has the same seq-tag prefix */
	for (size_t i = 1; i < r.n; i++)
		assert_memory_equal(r.kvs[i].key, r.kvs[0].key, strlen(key) + 33);
	etcd_kvs_clear(&r);
	free(end);
	/* a new replica starts from the snapshot and the log after it */
	c = open_etcd(prefix, 10, &c_se);
	assert_int_equal(st_etcd_seq(c_se), st_etcd_seq(a_se));
	assert_same(ref, c);
	/* a writes on past its next snapshot (c keeps the one it loaded), then
	 * c writes, as a follower's copy does at its first write after a
	 * takeover: it learns of a's newer snapshot rather than writing the
	 * whole image again, which held a takeover's first write for seconds */
	uint64_t loaded = snapshot_seq(a_se, prefix), newer;
	for (int i = 0; st_etcd_snapshot_wait(a_se),
		 (newer = snapshot_seq(a_se, prefix)) == loaded || st_etcd_seq(a_se) - newer >= 9;
	     i++) {
		char id[32];

		snprintf(id, sizeof(id), "more-%d", i);
		BOTH(put_job(st_, id, NULL, "PENDING", 10 + i));
	}
	assert_int_equal(st_etcd_sync(c_se), 0);
	assert_int_equal(put_job(c, "by-c", NULL, "PENDING", 99), 0);
	assert_int_equal(put_job(ref, "by-c", NULL, "PENDING", 99), 0);
	assert_int_equal(snapshot_seq(a_se, prefix), newer);
	assert_true(newer > loaded);
	assert_same(ref, c);
	st_close(c);
	st_close(dut);
	st_close(ref);
	remove_sqlite(path);
}

static void test_behind_and_compacted(void **state)
{
	char prefix[96], path[128];
	struct st_etcd *a_se, *b_se;
	struct st_store *ref = open_sqlite(path, sizeof(path));
	struct st_store *dut, *b;
	struct event_base *base = event_base_new();
	int64_t rev;
	uint64_t seq;

	(void)state;
	new_prefix(prefix, sizeof(prefix));
	dut = open_etcd(prefix, 0, &a_se);
	b = open_etcd(prefix, 0, &b_se);
	BOTH(put_job(st_, "j1", "key-1", "PENDING", 1));
	seq = st_etcd_seq(a_se);
	/* b is behind: its write is refused and forks nothing */
	assert_int_equal(put_job(b, "jb", NULL, "PENDING", 2), -EBUSY);
	assert_non_null(strstr(st_etcd_last_error(b_se), "another writer"));
	assert_int_equal(st_etcd_seq(b_se), 0);
	/* its next write catches up first, then goes in after a's */
	assert_int_equal(put_job(b, "jb", NULL, "PENDING", 2), 0);
	assert_int_equal(st_etcd_seq(b_se), seq + 1);
	assert_int_equal(put_job(ref, "jb", NULL, "PENDING", 2), 0);
	assert_same(ref, b);
	/* a is behind now: refused, then current */
	assert_int_equal(put_job(dut, "jc", NULL, "PENDING", 3), -EBUSY);
	assert_int_equal(st_job_get(dut, "jc", &(struct st_job){0}), -ENOENT);
	BOTH(st_job_set_state(st_, "jb", "ACTIVE", NULL, 3));

	/* b follows from here; a writes; etcd compacts before b's watch reads */
	assert_int_equal(st_etcd_sync(b_se), 0);
	assert_int_equal(st_etcd_follow(b_se, base, NULL, NULL), 0);
	BOTH(put_job(st_, "j2", NULL, "PENDING", 4));
	BOTH(put_job(st_, "j3", NULL, "PENDING", 5));
	assert_int_equal(etcd_put(st_etcd_client(a_se), "/unrelated", 10, "x", 1, 0, &rev), 0);
	assert_int_equal(etcd_compact(st_etcd_client(a_se), rev), 0);
	follow_until(base, b_se, st_etcd_seq(a_se));
	assert_same(ref, b);
	/* and it keeps following after the re-read */
	BOTH(st_drain_set(st_, "ocs-1", true));
	follow_until(base, b_se, st_etcd_seq(a_se));
	assert_same(ref, b);
	st_close(b);
	st_close(dut);
	st_close(ref);
	remove_sqlite(path);
	event_base_free(base);
}

static void test_etcd_down(void **state)
{
	char prefix[96], path[128];
	struct st_etcd *a_se, *c_se;
	struct st_store *ref = open_sqlite(path, sizeof(path));
	struct st_store *dut, *c;
	uint64_t seq;
	char *before;

	(void)state;
	new_prefix(prefix, sizeof(prefix));
	dut = open_etcd(prefix, 0, &a_se);
	BOTH(put_job(st_, "j1", "key-1", "PENDING", 1));
	seq = st_etcd_seq(a_se);
	before = dump(dut);
	eh_kill(&etcd);
	/* refused, naming etcd; the copy is unchanged and still reads. The
	 * request was sent and got no answer: whether etcd took it cannot be
	 * known (a connection lost after the request looks the same), so the
	 * first write's outcome is unknown; the next one, which must first read
	 * the log, fails before sending anything */
	assert_int_equal(put_job(dut, "j2", NULL, "PENDING", 2), -EINPROGRESS);
	assert_non_null(strstr(st_etcd_last_error(a_se), "etcd"));
	assert_int_equal(st_drain_set(dut, "ocs-1", true), -EIO);
	char *after = dump(dut);

	assert_string_equal(before, after);
	free(after);
	free(before);
	assert_int_equal(st_etcd_seq(a_se), seq);
	/* etcd back: writes go through again, and a new replica agrees */
	assert_int_equal(eh_restart(&etcd), 0);
	BOTH(put_job(st_, "j2", NULL, "PENDING", 2));
	c = open_etcd(prefix, 0, &c_se);
	assert_same(ref, c);
	st_close(c);

	/* paused etcd: the outcome is unknown (a timeout); the copy marks
	 * itself stale and settles from the log before the next write */
	assert_int_equal(eh_pause(&etcd), 0);
	assert_int_equal(put_job(dut, "j3", NULL, "PENDING", 3), -EINPROGRESS);
	eh_resume(&etcd);
	c = open_etcd(prefix, 0, &c_se);
	/* whichever way it went, the next write makes a agree with etcd */
	assert_int_equal(st_drain_set(dut, "ocs-9", true), 0);
	assert_int_equal(st_etcd_sync(c_se), 0);
	assert_same(dut, c);
	st_close(c);
	st_close(dut);
	st_close(ref);
	remove_sqlite(path);
}

static void test_fence(void **state)
{
	char prefix[96], leader[128];
	struct st_etcd *a_se;
	struct st_store *a;
	struct etcd_client *c;
	int64_t lease, rev;
	struct etcd_kvs r;

	(void)state;
	new_prefix(prefix, sizeof(prefix));
	a = open_etcd(prefix, 0, &a_se);
	c = st_etcd_client(a_se);
	snprintf(leader, sizeof(leader), "%sleader", prefix);
	assert_int_equal(etcd_lease_grant(c, 5, &lease, NULL), 0);
	assert_int_equal(etcd_put(c, leader, strlen(leader), "a", 1, lease, &rev), 0);
	assert_int_equal(st_etcd_set_fence(a_se, leader, strlen(leader), rev), 0);
	assert_int_equal(put_job(a, "j1", NULL, "PENDING", 1), 0);
	/* the lease ends (a deposed leader): the next write is refused as such */
	assert_int_equal(etcd_lease_revoke(c, lease), 0);
	assert_int_equal(put_job(a, "j2", NULL, "PENDING", 2), -EPERM);
	assert_non_null(strstr(st_etcd_last_error(a_se), "not the leader"));
	assert_int_equal(st_job_get(a, "j2", &(struct st_job){0}), -ENOENT);
	/* another replica's leader key of the same name does not pass the fence */
	assert_int_equal(etcd_put(c, leader, strlen(leader), "b", 1, 0, NULL), 0);
	assert_int_equal(put_job(a, "j2", NULL, "PENDING", 2), -EPERM);
	/* nothing of the refused writes reached the log */
	assert_int_equal(etcd_range(c, leader, strlen(leader), NULL, 0, 0, 0, &r), 0);
	etcd_kvs_clear(&r);
	assert_int_equal(st_etcd_seq(a_se), 1);
	st_close(a);
}

/*
 * The confirm gate's write (txn_driver.c): st_intent_decide is one log entry whose
 * changeset records the decision, written by the etcd transaction that
 * compares the leader key (the fence); once the key is not this replica's,
 * the decision is refused (-EPERM) and nothing reaches the log, so no
 * confirm may follow. A replica opened later sees the intent decided.
 */
static void test_decide_fenced(void **state)
{
	char prefix[96], leader[128], key[160];
	struct st_etcd *a_se, *b_se;
	struct st_store *a, *b;
	struct etcd_client *c;
	struct etcd_kvs r, h;
	sqlite3_changeset_iter *it = NULL;
	int64_t lease, rev, t1, t2;
	int n_changes = 0, op, ncol, indirect;
	const char *table;
	sqlite3_value *v;
	char *got;

	(void)state;
	new_prefix(prefix, sizeof(prefix));
	a = open_etcd(prefix, 0, &a_se);
	c = st_etcd_client(a_se);
	snprintf(leader, sizeof(leader), "%sleader", prefix);
	assert_int_equal(etcd_lease_grant(c, 5, &lease, NULL), 0);
	assert_int_equal(etcd_put(c, leader, strlen(leader), "a", 1, lease, &rev), 0);
	assert_int_equal(st_etcd_set_fence(a_se, leader, strlen(leader), rev), 0);
	assert_int_equal(begin_leaf(a, "j1", 10, &t1), 0);
	assert_int_equal(begin_leaf(a, "j2", 11, &t2), 0);
	assert_int_equal(st_intent_decide(a, t1, 12), 0);
	/* the newest log entry is the decision, put with the head in one transaction */
	snprintf(key, sizeof(key), "%slog/%016llx", prefix, (unsigned long long)st_etcd_seq(a_se));
	assert_int_equal(etcd_range(c, key, strlen(key), NULL, 0, 0, 0, &r), 0);
	assert_int_equal(r.n, 1);
	snprintf(key, sizeof(key), "%shead", prefix);
	assert_int_equal(etcd_range(c, key, strlen(key), NULL, 0, 0, 0, &h), 0);
	assert_int_equal(h.n, 1);
	assert_int_equal(r.kvs[0].mod_revision, h.kvs[0].mod_revision);
	etcd_kvs_clear(&h);
	assert_int_equal(
		sqlite3changeset_start(&it, (int)r.kvs[0].value_len, (void *)r.kvs[0].value),
		SQLITE_OK);
	while (sqlite3changeset_next(it) == SQLITE_ROW) {
		assert_int_equal(sqlite3changeset_op(it, &table, &ncol, &op, &indirect), SQLITE_OK);
		assert_string_equal(table, "intent_decisions");
		assert_int_equal(op, SQLITE_INSERT);
		assert_int_equal(sqlite3changeset_new(it, 0, &v), SQLITE_OK);
		assert_int_equal(sqlite3_value_int64(v), t1);
		assert_int_equal(sqlite3changeset_new(it, 1, &v), SQLITE_OK);
		assert_int_equal(sqlite3_value_int64(v), 12);
		n_changes++;
	}
	assert_int_equal(sqlite3changeset_finalize(it), SQLITE_OK);
	assert_int_equal(n_changes, 1);
	etcd_kvs_clear(&r);

	/* the recovery gate's note is a log entry of its own under the fence */
	assert_int_equal(st_intent_note(a, t2, "recovery (note 0): confirm"), 0);
	assert_int_equal(st_etcd_seq(a_se), 4);
	/* the lease ends (a deposed leader): the decision is refused, and so is
	 * recovery's note (a deposed replica's recovery acts on nothing), the log
	 * unchanged */
	assert_int_equal(etcd_lease_revoke(c, lease), 0);
	assert_int_equal(st_intent_note(a, t2, "recovery (note 1): confirm"), -EPERM);
	assert_int_equal(st_intent_decide(a, t2, 13), -EPERM);
	assert_non_null(strstr(st_strerror(a, -EPERM), "not the leader"));
	assert_int_equal(st_etcd_seq(a_se), 4);
	b = open_etcd(prefix, 0, &b_se);
	assert_int_equal(st_etcd_seq(b_se), 4);
	got = dump(b);
	assert_non_null(strstr(got, "job=j1 state=open decided\n"));
	assert_non_null(strstr(got, "job=j2 state=open\n"));
	free(got);
	assert_same(a, b);
	st_close(b);
	st_close(a);
}

/*
 * The client sends a transaction again when its answer is lost (to the
 * same endpoint on a fresh connection, or to the next one). The first
 * attempt went in, so the second one's compare fails on the log's head:
 * that is this replica's own entry, not another writer's, so the write is
 * done (0), once, and the copy goes on (a jepsen run saw a leader stop
 * serving writes, "another writer extended the log", after an etcd member
 * was killed).
 */
static void test_answer_lost(void **state)
{
	char prefix[96], path[128], leader[128], relayed[64], endpoints[200];
	struct st_store *ref = open_sqlite(path, sizeof(path)), *dut, *b;
	struct st_etcd_opts o = {.prefix = prefix};
	struct st_etcd *a_se, *b_se;
	struct eh_proxy *relay;
	struct etcd_client *c;
	char err[256];
	int64_t rev;

	(void)state;
	new_prefix(prefix, sizeof(prefix));
	assert_int_equal(eh_proxy_start(etcd.client_port, relayed, sizeof(relayed), &relay), 0);
	/* the relay first, then etcd itself */
	snprintf(endpoints, sizeof(endpoints), "%s,%s", relayed, etcd.endpoint);
	o.etcd = (struct etcd_opts){.endpoints = endpoints, .timeout_ms = 1000};
	assert_int_equal(st_etcd_open(&o, &dut, &a_se, err, sizeof(err)), 0);
	c = st_etcd_client(a_se);
	snprintf(leader, sizeof(leader), "%sleader", prefix);
	assert_int_equal(etcd_put(c, leader, strlen(leader), "a", 1, 0, &rev), 0);
	assert_int_equal(st_etcd_set_fence(a_se, leader, strlen(leader), rev), 0);
	BOTH(put_job(st_, "j1", "key-1", "PENDING", 1));
	eh_proxy_lose_answer(relay, 1);
	BOTH(put_job(st_, "j2", NULL, "PENDING", 2));
	assert_int_equal(eh_proxy_lost(relay), 1);
	assert_int_equal(st_etcd_seq(a_se), 2);
	/* again, after a write that went through */
	BOTH(st_drain_set(st_, "ocs-1", true));
	eh_proxy_lose_answer(relay, 1);
	BOTH(put_job(st_, "j2", NULL, "ACTIVE", 3));
	assert_int_equal(eh_proxy_lost(relay), 2);
	/* each entry once: 4 writes, 4 entries, and a replica opened now agrees */
	assert_int_equal(st_etcd_seq(a_se), 4);
	b = open_etcd(prefix, 0, &b_se);
	assert_int_equal(st_etcd_seq(b_se), 4);
	assert_same(ref, b);
	st_close(b);
	st_close(dut);
	st_close(ref);
	remove_sqlite(path);
	eh_proxy_stop(relay);
}

/*
 * A writer whose answer is lost while another replica takes over and, with
 * its first write, writes a snapshot whose switch prunes the log (a leader
 * paused at that moment: a jepsen run saw its admission of a job reported
 * "not the leader; nothing changed" while its successor ran the job). The
 * snapshot leaves the log's last entries (store_etcd.c invariant 4), so the
 * writer finds its own entry there and the write is done (0); with no tail
 * to leave (snapshot_every 1) the outcome is unknown (-EINPROGRESS), never
 * a refusal. Either way the entry is in the log for every replica, and the
 * deposed writer's next write is refused as such.
 */
struct takeover {
	struct st_store *b;
	struct st_etcd *b_se;
	const char *leader;
	int rc; /* the relay's thread runs take_over: cmocka asserts on the test's */
};

static void take_over(void *arg)
{
	struct takeover *t = arg;
	struct etcd_client *c = st_etcd_client(t->b_se);
	int64_t rev;

	/* the old leader's key is gone (its lease ended), the new one's created */
	t->rc = etcd_delete(c, t->leader, strlen(t->leader), NULL, 0, NULL);
	if (t->rc == 0)
		t->rc = etcd_put(c, t->leader, strlen(t->leader), "b", 1, 0, &rev);
	if (t->rc == 0)
		t->rc = st_etcd_sync(t->b_se);
	if (t->rc == 0)
		t->rc = st_etcd_set_fence(t->b_se, t->leader, strlen(t->leader), rev);
	if (t->rc == 0)
		t->rc = st_drain_set(t->b, "ocs-9", true);
	st_etcd_snapshot_wait(t->b_se); /* its snapshot is in before the writer reads back */
}

static void lost_while_taken_over(unsigned b_every, int want)
{
	char prefix[96], leader[128], relayed[64], endpoints[200], id[16];
	struct st_etcd_opts o = {.prefix = prefix};
	struct st_etcd *a_se, *c_se;
	struct st_store *a, *c;
	struct eh_proxy *relay;
	struct takeover t = {.leader = leader, .rc = -1};
	struct st_job j = {0};
	char err[256];
	int64_t rev;

	new_prefix(prefix, sizeof(prefix));
	assert_int_equal(eh_proxy_start(etcd.client_port, relayed, sizeof(relayed), &relay), 0);
	snprintf(endpoints, sizeof(endpoints), "%s,%s", relayed, etcd.endpoint);
	o.etcd = (struct etcd_opts){.endpoints = endpoints, .timeout_ms = 1000};
	assert_int_equal(st_etcd_open(&o, &a, &a_se, err, sizeof(err)), 0);
	snprintf(leader, sizeof(leader), "%sleader", prefix);
	assert_int_equal(etcd_put(st_etcd_client(a_se), leader, strlen(leader), "a", 1, 0, &rev),
			 0);
	assert_int_equal(st_etcd_set_fence(a_se, leader, strlen(leader), rev), 0);
	for (int i = 0; i < 5; i++) {
		snprintf(id, sizeof(id), "j%d", i);
		assert_int_equal(put_job(a, id, NULL, "PENDING", i + 1), 0);
	}
	t.b = open_etcd(prefix, b_every, &t.b_se);
	eh_proxy_on_lost(relay, take_over, &t);
	eh_proxy_lose_answer(relay, 1);
	assert_int_equal(put_job(a, "lost", NULL, "PENDING", 6), want);
	assert_int_equal(eh_proxy_lost(relay), 1);
	assert_int_equal(t.rc, 0);
	if (want == -EINPROGRESS)
		assert_non_null(strstr(st_etcd_last_error(a_se), "unknown"));
	/* the successor snapshotted past the entry: the log before it is gone */
	assert_int_equal(st_etcd_seq(t.b_se), 7);
	c = open_etcd(prefix, 0, &c_se);
	assert_int_equal(st_job_get(c, "lost", &j), 0);
	st_job_clear(&j);
	assert_int_equal(put_job(a, "after", NULL, "PENDING", 7), -EPERM);
	st_close(c);
	st_close(t.b);
	st_close(a);
	eh_proxy_stop(relay);
}

static void test_answer_lost_at_takeover(void **state)
{
	(void)state;
	lost_while_taken_over(4, 0);		/* entries 5..7 stay: the entry is found */
	lost_while_taken_over(1, -EINPROGRESS); /* no tail: nothing to read back */
}

/* ---- large entries (store_etcd.c, invariant 5) ---- */

/* A job whose request is n bytes: random (they do not compress) or zeros. */
static int put_blob_job(struct st_store *st, const char *id, size_t n, bool random, int64_t ms)
{
	uint8_t *req = calloc(1, n);
	uint32_t x = 2463534242u;

	assert_non_null(req);
	for (size_t i = 0; random && i < n; i++) {
		x ^= x << 13, x ^= x >> 17, x ^= x << 5;
		req[i] = (uint8_t)x;
	}
	struct st_job j = {.id = (char *)id,
			   .state = "PENDING",
			   .request = req,
			   .request_len = n,
			   .created_ms = ms,
			   .updated_ms = ms};
	int rc = st_job_put(st, &j);

	free(req);
	return rc;
}

static int put_big_job(struct st_store *st, const char *id, size_t n, int64_t ms)
{
	return put_blob_job(st, id, n, true, ms);
}

/* How many keys etcd has under prefix + sub. */
static size_t keys_under(struct st_etcd *se, const char *prefix, const char *sub)
{
	char key[200];
	struct etcd_kvs r;
	size_t end_len, n;
	uint8_t *end;

	snprintf(key, sizeof(key), "%s%s", prefix, sub);
	end = etcd_prefix_end(key, strlen(key), &end_len);
	assert_int_equal(etcd_range(st_etcd_client(se), key, strlen(key), end, end_len, 0, 0, &r),
			 0);
	n = r.n;
	etcd_kvs_clear(&r);
	free(end);
	return n;
}

/* Stages chunks of entry seq as a writer that died before its transaction would. */
static void put_orphans(struct st_etcd *se, const char *prefix, uint64_t seq, int n)
{
	for (int i = 0; i < n; i++) {
		char key[200];

		snprintf(key, sizeof(key), "%schunk/%016llx-%016llx/%08x", prefix,
			 (unsigned long long)seq, 0xdeadULL, i);
		assert_int_equal(etcd_put(st_etcd_client(se), key, strlen(key), "junk", 4, 0, NULL),
				 0);
	}
}

static void test_chunked_entries(void **state)
{
	char prefix[96], path[128], key[200], err[512];
	struct st_etcd *a_se, *b_se, *c_se, *d_se = NULL;
	struct st_store *ref = open_sqlite(path, sizeof(path));
	struct st_store *dut, *b, *c, *d = NULL;
	struct event_base *base = event_base_new();
	struct etcd_kvs r;
	size_t staged;

	(void)state;
	new_prefix(prefix, sizeof(prefix));
	dut = open_etcd(prefix, 0, &a_se);
	b = open_etcd(prefix, 0, &b_se);
	assert_int_equal(st_etcd_follow(b_se, base, on_change, NULL), 0);
	/* 20,000 bytes of request: an entry of 5 chunks of 4 KiB */
	BOTH(put_big_job(st_, "big", 20000, 1));
	snprintf(key, sizeof(key), "%slog/%016llx", prefix, (unsigned long long)st_etcd_seq(a_se));
	assert_int_equal(etcd_range(st_etcd_client(a_se), key, strlen(key), NULL, 0, 0, 0, &r), 0);
	assert_int_equal(r.n, 1);
	assert_true(r.kvs[0].value_len < 64);
	assert_memory_equal(r.kvs[0].value, "#chunked 5 ", 11);
	etcd_kvs_clear(&r);
	assert_int_equal(keys_under(a_se, prefix, "chunk/"), 5);
	/* the follower applies it through its watch, a new replica from the log */
	follow_until(base, b_se, st_etcd_seq(a_se));
	assert_same(ref, b);
	c = open_etcd(prefix, 0, &c_se);
	assert_same(ref, c);

	/* a changeset that compresses is stored deflated, whole under 4 KiB */
	BOTH(put_blob_job(st_, "zeros", 20000, false, 1));
	snprintf(key, sizeof(key), "%slog/%016llx", prefix, (unsigned long long)st_etcd_seq(a_se));
	assert_int_equal(etcd_range(st_etcd_client(a_se), key, strlen(key), NULL, 0, 0, 0, &r), 0);
	assert_int_equal(r.n, 1);
	assert_true(r.kvs[0].value_len < 1024);
	assert_memory_equal(r.kvs[0].value, "#z ", 3);
	etcd_kvs_clear(&r);
	assert_int_equal(keys_under(a_se, prefix, "chunk/"), 5);
	follow_until(base, b_se, st_etcd_seq(a_se));
	assert_same(ref, b);
	assert_int_equal(st_etcd_sync(c_se), 0);
	assert_same(ref, c);

	/* a copy that is behind stages its chunks, is refused, and drops them */
	st_etcd_unfollow(b_se);
	BOTH(put_job(st_, "small", NULL, "PENDING", 2));
	assert_int_equal(put_big_job(b, "refused", 9000, 3), -EBUSY);
	assert_int_equal(keys_under(a_se, prefix, "chunk/"), 5);

	/* a writer died while staging entry seq + 1: its orphans are never read */
	put_orphans(a_se, prefix, st_etcd_seq(a_se) + 1, 3);
	BOTH(put_big_job(st_, "big2", 30000, 4));
	assert_int_equal(keys_under(a_se, prefix, "chunk/"), 5 + 3 + 8);
	assert_int_equal(st_etcd_sync(c_se), 0);
	assert_same(ref, c);

	/* a chunk missing: an error naming it, never part of the change */
	snprintf(key, sizeof(key), "%schunk/", prefix);
	{
		struct etcd_kvs all;
		uint8_t *end;
		size_t end_len;

		end = etcd_prefix_end(key, strlen(key), &end_len);
		assert_int_equal(etcd_range(st_etcd_client(a_se), key, strlen(key), end, end_len, 0,
					    0, &all),
				 0);
		staged = all.n;
		/* the first big entry's third chunk */
		assert_int_equal(etcd_delete(st_etcd_client(a_se), all.kvs[2].key,
					     all.kvs[2].key_len, NULL, 0, NULL),
				 0);
		etcd_kvs_clear(&all);
		free(end);
	}
	assert_int_equal(keys_under(a_se, prefix, "chunk/"), staged - 1);
	struct st_etcd_opts o = {.etcd = {.endpoints = etcd.endpoint, .timeout_ms = 1000},
				 .prefix = prefix,
				 .chunk_bytes = 4096};
	assert_int_equal(st_etcd_open(&o, &d, &d_se, err, sizeof(err)), -EPROTO);
	assert_null(d);
	assert_non_null(strstr(err, "chunks missing"));

	/* etcd gone while the chunks are staged: refused, named, nothing changed */
	{
		char relayed[64];
		struct eh_proxy *relay;
		struct st_job j;

		new_prefix(prefix, sizeof(prefix));
		assert_int_equal(eh_proxy_start(etcd.client_port, relayed, sizeof(relayed), &relay),
				 0);
		o.etcd.endpoints = relayed;
		assert_int_equal(st_etcd_open(&o, &d, &d_se, err, sizeof(err)), 0);
		eh_proxy_stop(relay);
		assert_int_equal(put_big_job(d, "gone", 20000, 5), -EIO);
		assert_non_null(strstr(st_etcd_last_error(d_se), "staging a large entry's chunks"));
		assert_int_equal(st_job_get(d, "gone", &j), -ENOENT);
		st_close(d);
	}
	st_close(c);
	st_close(b);
	st_close(dut);
	st_close(ref);
	remove_sqlite(path);
	event_base_free(base);
}

/* What a follower's change callback saw: a large job present but not whole. */
struct whole_watch {
	struct st_store *st;
	int changes, torn;
};

static void on_change_whole(void *ctx)
{
	static const struct {
		const char *id;
		size_t len;
	} big[] = {{"cut-watch", 20000}, {"lost-read", 30000}, {"both", 40000}};
	struct whole_watch *w = ctx;

	w->changes++;
	for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++) {
		struct st_job j;

		if (st_job_get(w->st, big[i].id, &j) != 0)
			continue;
		if (j.request_len != big[i].len)
			w->torn++;
		st_job_clear(&j);
	}
}

/*
 * Invariant 5 from a follower's side (issue 31: a follower that loses its
 * watch mid-chunk). The follower reaches etcd through a relay; the writer
 * does not. Its watch cut while a large entry's chunks are staged and its
 * record written; the read of an entry's chunks losing its answer; the
 * watch cut and its new request's answer lost. Each time the follower
 * applies the entry whole, never part of it
 * (its change callback checks every large job it can read), and ends equal
 * to the SQLite reference.
 */
static void test_follower_loses_watch(void **state)
{
	char prefix[96], path[128], relayed[64], err[512];
	struct st_store *ref = open_sqlite(path, sizeof(path));
	struct st_store *dut, *b = NULL;
	struct st_etcd *a_se, *b_se = NULL;
	struct event_base *base = event_base_new();
	struct eh_proxy *relay;
	struct whole_watch w = {0};

	(void)state;
	new_prefix(prefix, sizeof(prefix));
	dut = open_etcd(prefix, 0, &a_se);
	assert_int_equal(eh_proxy_start(etcd.client_port, relayed, sizeof(relayed), &relay), 0);
	struct st_etcd_opts o = {.etcd = {.endpoints = relayed, .timeout_ms = 1000},
				 .prefix = prefix,
				 .chunk_bytes = 4096};
	assert_int_equal(st_etcd_open(&o, &b, &b_se, err, sizeof(err)), 0);
	w.st = b;
	assert_int_equal(st_etcd_follow(b_se, base, on_change_whole, &w), 0);
	BOTH(put_job(st_, "small", NULL, "PENDING", 1));
	follow_until(base, b_se, st_etcd_seq(a_se)); /* the watch streams */

	/* the watch cut before the entry: it comes back from the revision it
	 * had reached and delivers the record, whose chunks are then read */
	eh_proxy_cut(relay);
	BOTH(put_big_job(st_, "cut-watch", 20000, 2));
	follow_until(base, b_se, st_etcd_seq(a_se));
	assert_same(ref, b);

	/* the record delivered, the read of its chunks losing its answer: the
	 * entry is not applied; the copy re-reads the log and applies it whole */
	eh_proxy_lose_answer(relay, 1);
	BOTH(put_big_job(st_, "lost-read", 30000, 3));
	follow_until(base, b_se, st_etcd_seq(a_se));
	assert_int_equal(eh_proxy_lost(relay), 1);
	assert_same(ref, b);

	/* the watch cut, and the first answer to its new request lost too:
	 * it retries, and gets both entries written meanwhile */
	eh_proxy_cut(relay);
	eh_proxy_lose_answer(relay, 1);
	BOTH(put_big_job(st_, "both", 40000, 4));
	BOTH(put_job(st_, "after", NULL, "PENDING", 5));
	follow_until(base, b_se, st_etcd_seq(a_se));
	assert_int_equal(eh_proxy_lost(relay), 2);
	assert_false(st_etcd_stale(b_se));
	assert_same(ref, b);

	assert_true(w.changes >= 4);
	assert_int_equal(w.torn, 0);
	st_etcd_unfollow(b_se);
	st_close(b);
	eh_proxy_stop(relay);
	st_close(dut);
	st_close(ref);
	remove_sqlite(path);
	event_base_free(base);
}

/*
 * A snapshot is written by a thread of its own, not by the write that finds
 * it due: that write and the next one return while the snapshot's 300
 * chunks are still going in (before, the first waited for all of them: a
 * pause of seconds on a large fabric), the snapshot lands at the seq its
 * image was taken at, and a new replica loads it and the entries after it.
 */
static void test_snapshot_off_the_write(void **state)
{
	char prefix[96], id[24];
	struct st_etcd *a_se, *c_se;
	struct st_store *a, *c;
	struct st_job j = {0};

	(void)state;
	new_prefix(prefix, sizeof(prefix));
	a = open_etcd(prefix, 4, &a_se);
	for (int i = 0; i < 4; i++) { /* an image of about 1.2 MB: 300 chunks of 4 KiB */
		snprintf(id, sizeof(id), "blob-%d", i);
		assert_int_equal(put_blob_job(a, id, 300000, true, i + 1), 0);
	}
	assert_int_equal(put_job(a, "small-1", NULL, "PENDING", 10), 0); /* takes the image */
	assert_int_equal(snapshot_seq(a_se, prefix), 0);
	assert_int_equal(put_job(a, "small-2", NULL, "PENDING", 11), 0);
	assert_int_equal(snapshot_seq(a_se, prefix), 0);
	st_etcd_snapshot_wait(a_se);
	assert_int_equal(snapshot_seq(a_se, prefix), 4);
	c = open_etcd(prefix, 4, &c_se);
	assert_int_equal(st_etcd_seq(c_se), 6);
	assert_int_equal(st_job_get(c, "small-2", &j), 0);
	st_job_clear(&j);
	assert_int_equal(st_job_get(c, "blob-3", &j), 0);
	assert_int_equal(j.request_len, 300000);
	st_job_clear(&j);
	st_close(c);
	st_close(a);
}

/* A snapshot deletes the chunks of the entries it prunes, orphans of those seqs too. */
static void test_chunks_pruned(void **state)
{
	char prefix[96], path[128];
	struct st_etcd *a_se, *c_se;
	struct st_store *ref = open_sqlite(path, sizeof(path));
	struct st_store *dut, *c;

	(void)state;
	new_prefix(prefix, sizeof(prefix));
	dut = open_etcd(prefix, 4, &a_se); /* a snapshot every 4 entries, a tail of 2 */
	put_orphans(a_se, prefix, 1, 2);
	BOTH(put_big_job(st_, "big", 20000, 1));
	BOTH(put_big_job(st_, "big2", 10000, 2));
	assert_int_equal(keys_under(a_se, prefix, "chunk/"), 2 + 5 + 3);
	for (int i = 0; i < 8; i++) {
		char id[16];

		snprintf(id, sizeof(id), "j%d", i);
		BOTH(put_job(st_, id, NULL, "PENDING", 10 + i));
	}
	st_etcd_snapshot_wait(a_se); /* written by its thread: any of seq >= 4 prunes them */
	assert_int_equal(keys_under(a_se, prefix, "chunk/"), 0);
	c = open_etcd(prefix, 4, &c_se);
	assert_int_equal(st_etcd_seq(c_se), st_etcd_seq(a_se));
	assert_same(ref, c);
	st_close(c);
	st_close(dut);
	st_close(ref);
	remove_sqlite(path);
}

/* Circuits of an intent of n cross-connects, owned by job. */
static struct st_circuit *many_circuits(size_t n, const char *job)
{
	struct st_circuit *add = calloc(n, sizeof(*add));

	assert_non_null(add);
	for (size_t i = 0; i < n; i++) {
		add[i].xc = (struct ocs_xc){(int)(i % 16), (int)(i / 16 % 16), (int)(i / 256),
					    (int)(512 + i / 256)};
		snprintf(add[i].job_id, sizeof(add[i].job_id), "%s", job);
	}
	return add;
}

static int count_circuit(void *ctx, const struct st_circuit *c)
{
	(void)c;
	(*(size_t *)ctx)++;
	return 0;
}

/*
 * Issue 31: a transaction of 131,072 cross-connects with etcd's default
 * limits (this etcd runs with them) and the default 1 MiB chunks: written,
 * confirmed, and the follower's copy holds every circuit.
 */
static void test_largest_transaction(void **state)
{
	const size_t n = 131072;
	char prefix[96], err[512];
	struct st_etcd_opts o = {.etcd = {.endpoints = etcd.endpoint, .timeout_ms = 30000},
				 .prefix = prefix};
	struct st_etcd *a_se, *b_se;
	struct st_store *a = NULL, *b = NULL;
	struct st_circuit *add = many_circuits(n, "huge");
	int64_t txn = 0;
	size_t got = 0;

	(void)state;
	new_prefix(prefix, sizeof(prefix));
	assert_int_equal(st_etcd_open(&o, &a, &a_se, err, sizeof(err)), 0);
	assert_int_equal(put_job(a, "huge", NULL, "PENDING", 1), 0);
	assert_int_equal(st_intent_begin(a, "huge", NULL, 0, add, n, NULL, 0, 2, &txn), 0);
	assert_int_equal(st_intent_finish(a, txn, ST_INTENT_CONFIRMED, NULL, 3), 0);
	assert_int_equal(st_etcd_open(&o, &b, &b_se, err, sizeof(err)), 0);
	assert_int_equal(st_etcd_seq(b_se), st_etcd_seq(a_se));
	assert_int_equal(st_circuit_list(b, NULL, count_circuit, &got), 0);
	assert_int_equal(got, n);
	free(add);
	st_close(b);
	st_close(a);
}

static void kill_writer(void *ctx)
{
	kill(*(pid_t *)ctx, SIGKILL);
}

/* The child of test_writer_killed: a writer whose big write the relay cuts short. */
static void killed_writer(const char *prefix, const char *endpoint, int ready, int go)
{
	struct st_etcd_opts o = {.etcd = {.endpoints = endpoint, .timeout_ms = 5000},
				 .prefix = prefix,
				 .chunk_bytes = 4096};
	struct st_store *st;
	struct st_etcd *se;
	char err[256], c;

	if (st_etcd_open(&o, &st, &se, err, sizeof(err)) != 0 ||
	    put_job(st, "before", NULL, "PENDING", 1) != 0 || write(ready, "r", 1) != 1 ||
	    read(go, &c, 1) != 1)
		_exit(2);
	put_big_job(st, "big", 20000, 2); /* 5 chunks, then the transaction */
	_exit(0);			  /* the relay did not kill it: the parent fails */
}

/*
 * kill -9 of a writer at every step of a chunked write: a child process
 * writes an entry of 5 chunks through the relay, which forwards its n-th
 * request of that write to etcd and SIGKILLs the child before etcd's answer
 * reaches it, for n = 1..6 (each chunk's put, then the fenced transaction).
 * The successor, a replica opened then, has the whole write (n = 6) or
 * none of it, writes its own entry of that seq, and a third replica agrees
 * with it.
 */
static void test_writer_killed(void **state)
{
	(void)state;
	for (int n = 1; n <= 6; n++) {
		char prefix[96], relayed[64];
		struct eh_proxy *relay;
		struct st_etcd *b_se, *c_se;
		struct st_store *b, *c;
		struct st_job j;
		int ready[2], go[2], status = 0;
		char r;
		pid_t pid;

		new_prefix(prefix, sizeof(prefix));
		assert_int_equal(eh_proxy_start(etcd.client_port, relayed, sizeof(relayed), &relay),
				 0);
		assert_int_equal(pipe(ready), 0);
		assert_int_equal(pipe(go), 0);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0)
			killed_writer(prefix, relayed, ready[1], go[0]);
		assert_int_equal(read(ready[0], &r, 1), 1);
		eh_proxy_on_lost(relay, kill_writer, &pid);
		eh_proxy_lose_answer(relay, n);
		assert_int_equal(write(go[1], "g", 1), 1);
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
		eh_proxy_stop(relay);
		close(ready[0]);
		close(ready[1]);
		close(go[0]);
		close(go[1]);

		b = open_etcd(prefix, 0, &b_se);
		assert_int_equal(st_etcd_seq(b_se), n == 6 ? 2 : 1);
		memset(&j, 0, sizeof(j));
		assert_int_equal(st_job_get(b, "big", &j), n == 6 ? 0 : -ENOENT);
		if (n == 6)
			assert_int_equal(j.request_len, 20000);
		st_job_clear(&j);
		assert_int_equal(put_big_job(b, "next", 12000, 3), 0);
		c = open_etcd(prefix, 0, &c_se);
		assert_int_equal(st_etcd_seq(c_se), st_etcd_seq(b_se));
		assert_same(b, c);
		st_close(c);
		st_close(b);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_operation),
		cmocka_unit_test(test_snapshots),
		cmocka_unit_test(test_behind_and_compacted),
		cmocka_unit_test(test_etcd_down),
		cmocka_unit_test(test_fence),
		cmocka_unit_test(test_decide_fenced),
		cmocka_unit_test(test_answer_lost),
		cmocka_unit_test(test_answer_lost_at_takeover),
		cmocka_unit_test(test_chunked_entries),
		cmocka_unit_test(test_snapshot_off_the_write),
		cmocka_unit_test(test_chunks_pruned),
		cmocka_unit_test(test_follower_loses_watch),
		cmocka_unit_test(test_writer_killed),
		cmocka_unit_test(test_largest_transaction),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
