/*
 * test_store.c - unit tests of the SQLite state store (daemon/store*.c) on
 * real files: jobs, idempotency keys, the intent log and the circuit table,
 * durability across a process killed without closing the store, the
 * decision to commit an intent (st_intent_decide), the rings, ring intents
 * and node faults of OCSTrx ring domains with the upgrade of a file from
 * before them (3 to 4), retention (st_prune: age and count limits, batches,
 * what is never deleted), and writes that fail (another connection holding
 * the write lock, a failure injected half-way through a transaction)
 * leaving the store as it was; the faulty GPUs, swap intents and jobs'
 * moved GPUs of rail-OCS fabrics (schema 5); what applied changesets
 * touch, as a follower's copy notes it (st_touched); a confirm's log entry
 * (its circuits derived by every copy, counts checked). The schema's versions and
 * query plans are tested in test_store_schema.c.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "repl_loopback.h"
#include "store.h"
#include "store_repl.h"
#include "test_store_fixture.h"

static int collect_figures(void *ctx, const char *job_id, const char *figures)
{
	char *out = ctx;

	strcat(out, job_id);
	strcat(out, "=");
	strcat(out, figures);
	strcat(out, ";");
	return 0;
}

/* Schema 5 (issue 14 #2, #14): emptiness, and plan figures kept until retention. */
static void test_figures_and_empty(void **state)
{
	struct fixture *f = *state;
	struct st_store *st = open_store(f->path);
	struct st_job a = {.id = "fig-a", .state = "RELEASED", .created_ms = 1, .updated_ms = 1};
	char got[256] = "";
	bool empty = false;
	size_t n = 0;

	assert_int_equal(st_is_empty(st, &empty), 0);
	assert_true(empty);
	assert_int_equal(st_job_put(st, &a), 0);
	assert_int_equal(st_is_empty(st, &empty), 0);
	assert_false(empty);
	assert_int_equal(st_figures_put(st, "fig-a", "one"), 0);
	assert_int_equal(st_figures_put(st, "fig-a", "two"), 0); /* replaces */
	assert_int_equal(st_figures_put(st, NULL, "x"), -EINVAL);
	assert_int_equal(st_figures_list(st, collect_figures, got), 0);
	assert_string_equal(got, "fig-a=two;");
	/* the finished job goes with its figures */
	assert_int_equal(st_prune(st, 1000000, 1000, 100, 10, &n, NULL, NULL), 0);
	assert_int_equal(n, 1);
	got[0] = '\0';
	assert_int_equal(st_figures_list(st, collect_figures, got), 0);
	assert_string_equal(got, "");
	assert_int_equal(st_is_empty(st, &empty), 0);
	assert_true(empty);
	st_close(st);
}

static void test_jobs(void **state)
{
	struct fixture *f = *state;
	struct st_store *st = open_store(f->path);
	struct st_job a = {.id = "job-a",
			   .idempotency_key = "k1",
			   .state = "PENDING",
			   .request = "\x01\x02\x00\x03",
			   .request_len = 4,
			   .created_ms = 10,
			   .updated_ms = 10};
	struct st_job b = {.id = "job-b", .state = "PENDING", .created_ms = 11, .updated_ms = 11};
	struct st_job dup = {.id = "job-c", .idempotency_key = "k1", .state = "PENDING"};
	struct st_job got;
	char ids[64] = "";
	char *id = NULL;

	assert_int_equal(st_job_put(st, &a), 0);
	assert_int_equal(st_job_put(st, &b), 0);
	assert_int_equal(st_job_put(st, &dup), -EEXIST); /* key already taken */
	assert_int_equal(st_job_set_state(st, "job-a", "FAILED", "no capacity", 20), 0);
	assert_int_equal(st_job_set_state(st, "job-x", "FAILED", NULL, 20), -ENOENT);
	assert_int_equal(st_job_get(st, "job-a", &got), 0);
	assert_string_equal(got.state, "FAILED");
	assert_string_equal(got.reason, "no capacity");
	assert_string_equal(got.idempotency_key, "k1");
	assert_int_equal(got.request_len, 4);
	assert_memory_equal(got.request, "\x01\x02\x00\x03", 4);
	assert_int_equal(got.created_ms, 10);
	assert_int_equal(got.updated_ms, 20);
	st_job_clear(&got);
	assert_int_equal(st_job_get(st, "job-c", &got), -ENOENT);
	assert_int_equal(st_job_by_key(st, "k1", &id), 0);
	assert_string_equal(id, "job-a");
	free(id);
	assert_int_equal(st_job_by_key(st, "k2", &id), -ENOENT);
	/* Replacing keeps the creation order. */
	b.state = "ACTIVE";
	assert_int_equal(st_job_put(st, &b), 0);
	assert_int_equal(st_job_list(st, count_job, ids), 0);
	assert_string_equal(ids, "job-a,job-b,");
	st_close(st);

	st = open_store(f->path);
	assert_int_equal(st_job_get(st, "job-b", &got), 0);
	assert_string_equal(got.state, "ACTIVE");
	assert_null(got.request);
	st_job_clear(&got);
	st_close(st);
	st_close(NULL);
}

static void test_intents_and_circuits(void **state)
{
	struct fixture *f = *state;
	struct st_store *st = open_store(f->path);
	struct st_circuit add1[] = {{{0, 0, 1, 2}, "j1"}, {{0, 1, 2, 1}, "j1"}};
	struct st_circuit add2[] = {{{1, 0, 3, 0}, "j2"}, {{0, 0, 1, 3}, "j2"}};
	struct ocs_xc del2[] = {{0, 0, 1, 2}};
	struct st_intent open_in = {0};
	struct circuits cs = {0};
	int64_t t1, t2, t3;

	assert_int_equal(st_intent_begin(st, "j1", NULL, 0, add1, 2, NULL, 0, 100, &t1), 0);
	assert_int_equal(st_intent_list_open(st, collect_intent, &open_in), 0);
	assert_int_equal(open_in.txn_id, t1);
	assert_int_equal(open_in.n_additions, 2);
	/* Nothing is in the circuit table until the outcome is confirmed. */
	assert_int_equal(st_circuit_list(st, NULL, collect_circuit, &cs), 0);
	assert_int_equal(cs.n, 0);
	assert_int_equal(st_intent_finish(st, t1, ST_INTENT_CONFIRMED, NULL, 110), 0);
	assert_int_equal(st_intent_finish(st, t1, ST_INTENT_ROLLED_BACK, NULL, 111), -EALREADY);
	assert_int_equal(st_intent_finish(st, 999, ST_INTENT_CONFIRMED, NULL, 111), -ENOENT);
	assert_int_equal(st_intent_finish(st, t1, ST_INTENT_OPEN, NULL, 111), -EINVAL);
	assert_int_equal(st_circuit_list(st, NULL, collect_circuit, &cs), 0);
	assert_int_equal(cs.n, 2);
	assert_string_equal(cs.items[0].job_id, "j1");

	/* A rolled-back transaction leaves the table alone. */
	assert_int_equal(st_intent_begin(st, "j2", del2, 1, add2, 2, NULL, 0, 120, &t2), 0);
	assert_true(t2 > t1);
	assert_int_equal(st_intent_finish(st, t2, ST_INTENT_ROLLED_BACK, "device 3 refused", 130),
			 0);
	cs.n = 0;
	assert_int_equal(st_circuit_list(st, NULL, collect_circuit, &cs), 0);
	assert_int_equal(cs.n, 2);

	/* Removal and re-use of the same input port in one confirmed transaction. */
	assert_int_equal(st_intent_begin(st, "j2", del2, 1, add2, 2, NULL, 0, 140, &t3), 0);
	open_in.txn_id = 0;
	assert_int_equal(st_intent_list_open(st, collect_intent, &open_in), 0);
	assert_int_equal(open_in.txn_id, t3);
	assert_int_equal(open_in.n_removals, 1);
	assert_int_equal(st_intent_finish(st, t3, ST_INTENT_CONFIRMED, NULL, 150), 0);
	cs.n = 0;
	assert_int_equal(st_circuit_list(st, NULL, collect_circuit, &cs), 0);
	assert_int_equal(cs.n, 3);
	assert_int_equal(cs.items[0].xc.out, 3); /* (0,0,1) now belongs to j2 */
	assert_string_equal(cs.items[0].job_id, "j2");
	cs.n = 0;
	assert_int_equal(st_circuit_list(st, "j1", collect_circuit, &cs), 0);
	assert_int_equal(cs.n, 1);
	open_in.txn_id = 0;
	assert_int_equal(st_intent_list_open(st, collect_intent, &open_in), 0);
	assert_int_equal(open_in.txn_id, 0);
	st_close(st);
}

/* Leaf-spine links become their jobs' at CONFIRMED, replacing what the jobs had. */
/*
 * A failed intent (rollback not proven) is listed by st_intent_list_failed
 * and settled once by st_intent_settle (the keepalive's read-back): rolled
 * back or failed again with a new detail (the circuits are not touched), or
 * confirmed (its circuits applied); never an open or finished one.
 */
static int count_circuits(void *ctx, const struct st_circuit *c)
{
	(void)c;
	++*(int *)ctx;
	return 0;
}

static void test_failed_intents_settled(void **state)
{
	struct fixture *f = *state;
	struct st_store *st = open_store(f->path);
	struct st_circuit add[1] = {{{0, 1, 2, 3}, "jf"}};
	struct st_intent got = {0};
	int64_t t_failed, t_open, t_again;

	assert_int_equal(st_intent_begin(st, "jf", NULL, 0, add, 1, NULL, 0, 10, &t_failed), 0);
	assert_int_equal(st_intent_finish(st, t_failed, ST_INTENT_FAILED, "not proven", 11), 0);
	assert_int_equal(st_intent_begin(st, "jo", NULL, 0, add, 1, NULL, 0, 12, &t_open), 0);
	assert_int_equal(st_intent_list_failed(st, collect_intent, &got), 0);
	assert_int_equal(got.txn_id, t_failed);
	assert_string_equal(got.job_id, "jf");
	assert_int_equal(got.n_additions, 1);
	/* only a failed intent, to rolled back or failed */
	assert_int_equal(st_intent_settle(st, t_open, ST_INTENT_ROLLED_BACK, "x", 13), -EALREADY);
	assert_int_equal(st_intent_settle(st, t_failed, ST_INTENT_OPEN, "x", 13), -EINVAL);
	assert_int_equal(st_intent_settle(st, t_open, ST_INTENT_CONFIRMED, "x", 13), -EALREADY);
	assert_int_equal(st_intent_settle(st, t_failed, ST_INTENT_ROLLED_BACK, "proven later", 14),
			 0);
	assert_int_equal(st_intent_settle(st, t_failed, ST_INTENT_ROLLED_BACK, "again", 15),
			 -EALREADY);
	got = (struct st_intent){0};
	assert_int_equal(st_intent_list_failed(st, collect_intent, &got), 0);
	assert_int_equal(got.txn_id, 0);
	/* failed again with what was found: still listed */
	assert_int_equal(st_intent_begin(st, "jg", NULL, 0, add, 1, NULL, 0, 16, &t_again), 0);
	assert_int_equal(st_intent_finish(st, t_again, ST_INTENT_FAILED, "not proven", 17), 0);
	assert_int_equal(st_intent_settle(st, t_again, ST_INTENT_FAILED, "holds the target", 18),
			 0);
	assert_int_equal(st_intent_list_failed(st, collect_intent, &got), 0);
	assert_int_equal(got.txn_id, t_again);
	/* the circuits are the confirmed ones only: none here */
	int n = 0;
	assert_int_equal(st_circuit_list(st, NULL, count_circuits, &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(st_intent_finish(st, t_open, ST_INTENT_ROLLED_BACK, NULL, 19), 0);
	/* found at the target: CONFIRMED applies its circuits, once */
	assert_int_equal(st_intent_settle(st, t_again, ST_INTENT_CONFIRMED, "took effect", 20), 0);
	assert_int_equal(st_intent_settle(st, t_again, ST_INTENT_CONFIRMED, "again", 21),
			 -EALREADY);
	n = 0;
	assert_int_equal(st_circuit_list(st, "jf", count_circuits, &n), 0);
	assert_int_equal(n, 1);
	got = (struct st_intent){0};
	assert_int_equal(st_intent_list_failed(st, collect_intent, &got), 0);
	assert_int_equal(got.txn_id, 0);
	st_close(st);
}

static void test_job_links(void **state)
{
	struct fixture *f = *state;
	struct st_store *st = open_store(f->path);
	struct st_circuit add[] = {{{0, 0, 1, 2}, "j1"}};
	struct st_link l1[] = {{"j1", 0, 2, 0, 1}, {"j1", 0, 2, 1, 1}};
	struct st_link l2[] = {{"j2", 0, 4, 1, 2}};
	struct st_link l1b[] = {{"j1", 0, 2, 3, 2}, {"j2", 1, 5, 0, 1}};
	struct links ls;
	int64_t t;

	assert_int_equal(st_intent_begin(st, "j1", NULL, 0, add, 1, l1, 2, 10, &t), 0);
	assert_int_equal(all_links(st).n, 0); /* nothing before the outcome */
	assert_int_equal(st_intent_finish(st, t, ST_INTENT_CONFIRMED, NULL, 11), 0);
	ls = all_links(st);
	assert_int_equal(ls.n, 2);
	assert_string_equal(ls.items[1].job_id, "j1");
	assert_int_equal(ls.items[1].h, 1);
	assert_int_equal(ls.items[1].links, 1);

	/* rolled back: the links stay as they were */
	assert_int_equal(st_intent_begin(st, "j2", NULL, 0, NULL, 0, l2, 1, 12, &t), 0);
	assert_int_equal(st_intent_finish(st, t, ST_INTENT_ROLLED_BACK, "refused", 13), 0);
	assert_int_equal(all_links(st).n, 2);
	assert_int_equal(st_intent_begin(st, "j2", NULL, 0, NULL, 0, l2, 1, 14, &t), 0);
	assert_int_equal(st_intent_finish(st, t, ST_INTENT_CONFIRMED, NULL, 15), 0);
	assert_int_equal(all_links(st).n, 3);

	/* a re-plan of j1 that also moves j2: both jobs' links are replaced */
	assert_int_equal(st_intent_begin(st, "j1", NULL, 0, NULL, 0, l1b, 2, 16, &t), 0);
	assert_int_equal(st_intent_finish(st, t, ST_INTENT_CONFIRMED, NULL, 17), 0);
	ls = all_links(st);
	assert_int_equal(ls.n, 2);
	assert_string_equal(ls.items[0].job_id, "j1");
	assert_int_equal(ls.items[0].h, 3);
	assert_string_equal(ls.items[1].job_id, "j2");
	assert_int_equal(ls.items[1].b, 5);

	/* a release (no links) clears its job's links, across a reopen */
	assert_int_equal(st_intent_begin(st, "j2", NULL, 0, NULL, 0, NULL, 0, 18, &t), 0);
	assert_int_equal(st_intent_finish(st, t, ST_INTENT_CONFIRMED, NULL, 19), 0);
	st_close(st);
	st = open_store(f->path);
	ls = all_links(st);
	assert_int_equal(ls.n, 1);
	assert_string_equal(ls.items[0].job_id, "j1");

	/* a wave: j1 released, j3 and j4 added, in one intent; rolled back it
	 * changes nothing, confirmed it clears j1's links and gives j3 and j4
	 * theirs */
	{
		const char *wave[] = {"j3", "j1", "j4"};
		struct st_link lw[] = {{"j3", 0, 1, 2, 1}, {"j4", 2, 3, 0, 2}};

		assert_int_equal(
			st_intent_begin_wave(st, wave, 0, NULL, 0, NULL, 0, NULL, 0, 20, &t),
			-EINVAL);
		assert_int_equal(st_intent_begin_wave(st, wave, 3, NULL, 0, NULL, 0, lw, 2, 20, &t),
				 0);
		assert_int_equal(st_intent_finish(st, t, ST_INTENT_ROLLED_BACK, "refused", 21), 0);
		assert_int_equal(all_links(st).n, 1);
		assert_int_equal(st_intent_begin_wave(st, wave, 3, NULL, 0, NULL, 0, lw, 2, 22, &t),
				 0);
		assert_int_equal(raw_long(f->path, "SELECT COUNT(*) FROM intent_jobs"), 6);
		assert_int_equal(st_intent_finish(st, t, ST_INTENT_CONFIRMED, NULL, 23), 0);
		ls = all_links(st);
		assert_int_equal(ls.n, 2);
		assert_string_equal(ls.items[0].job_id, "j3");
		assert_string_equal(ls.items[1].job_id, "j4");
	}
	st_close(st);
}

/* A wave's outcome carries its jobs' states: stored with CONFIRMED only, all or nothing. */
static void test_finish_with_states(void **state)
{
	struct fixture *f = *state;
	struct st_store *st = open_store(f->path);
	struct st_job a = {.id = "wa", .state = "PROGRAMMING", .created_ms = 1, .updated_ms = 1};
	struct st_job b = {.id = "wb", .state = "RELEASING", .created_ms = 1, .updated_ms = 1};
	const char *wave[] = {"wa", "wb"};
	struct st_circuit add[] = {{{0, 0, 1, 2}, "wa"}};
	struct st_job_state rows[] = {{"wa", "ACTIVE", NULL, 30}, {"wb", "RELEASED", NULL, 30}};
	struct st_job_state bad[] = {{"wa", "ACTIVE", NULL, 30}, {"nobody", "RELEASED", NULL, 30}};
	struct st_intent open_in = {0};
	struct st_job got;
	int64_t t;

	assert_int_equal(st_job_put(st, &a), 0);
	assert_int_equal(st_job_put(st, &b), 0);
	/* rolled back: the states are not the outcome's */
	assert_int_equal(st_intent_begin_wave(st, wave, 2, NULL, 0, add, 1, NULL, 0, 10, &t), 0);
	assert_int_equal(st_intent_finish_states(st, t, ST_INTENT_ROLLED_BACK, "no", 11, rows, 2),
			 0);
	assert_int_equal(st_job_get(st, "wa", &got), 0);
	assert_string_equal(got.state, "PROGRAMMING");
	st_job_clear(&got);
	/* a state that cannot be stored: nothing is, the intent stays open */
	assert_int_equal(st_intent_begin_wave(st, wave, 2, NULL, 0, add, 1, NULL, 0, 20, &t), 0);
	assert_int_equal(st_intent_finish_states(st, t, ST_INTENT_CONFIRMED, NULL, 21, bad, 2),
			 -ENOENT);
	assert_int_equal(st_intent_list_open(st, collect_intent, &open_in), 0);
	assert_int_equal(open_in.txn_id, t);
	st_intent_clear(&open_in);
	assert_int_equal(st_job_get(st, "wa", &got), 0);
	assert_string_equal(got.state, "PROGRAMMING");
	st_job_clear(&got);
	/* confirmed: the outcome, the circuits and the states in one write, across a reopen */
	assert_int_equal(st_intent_finish_states(st, t, ST_INTENT_CONFIRMED, NULL, 22, rows, 2), 0);
	st_close(st);
	st = open_store(f->path);
	assert_int_equal(st_job_get(st, "wa", &got), 0);
	assert_string_equal(got.state, "ACTIVE");
	assert_int_equal(got.updated_ms, 30);
	st_job_clear(&got);
	assert_int_equal(st_job_get(st, "wb", &got), 0);
	assert_string_equal(got.state, "RELEASED");
	st_job_clear(&got);
	st_close(st);
}

/* A process that stored an intent and a job is killed without closing: both survive. */
static void test_survives_kill(void **state)
{
	struct fixture *f = *state;
	struct st_intent open_in = {0};
	struct st_store *st;
	struct st_job got;
	int status;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		struct st_job j = {
			.id = "acked", .state = "PROGRAMMING", .created_ms = 1, .updated_ms = 1};
		struct st_circuit add[] = {{{2, 3, 4, 5}, "acked"}};
		struct st_store *child = NULL;
		char err[128];
		int64_t t;

		if (st_open(f->path, &child, err, sizeof(err)) != 0 || st_job_put(child, &j) != 0 ||
		    st_intent_begin(child, "acked", NULL, 0, add, 1, NULL, 0, 5, &t) != 0)
			_exit(1);
		kill(getpid(), SIGKILL);
		_exit(2);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	st = open_store(f->path);
	assert_int_equal(st_job_get(st, "acked", &got), 0);
	assert_string_equal(got.state, "PROGRAMMING");
	st_job_clear(&got);
	assert_int_equal(st_intent_list_open(st, collect_intent, &open_in), 0);
	assert_string_equal(open_in.job_id, "acked");
	assert_int_equal(open_in.n_additions, 1);
	st_close(st);
}

static int collect_drained(void *ctx, const char *device)
{
	strcat(ctx, device);
	strcat(ctx, ",");
	return 0;
}

static void test_drained_devices(void **state)
{
	struct fixture *f = *state;
	struct st_store *st = open_store(f->path);
	char names[64] = "";

	assert_int_equal(st_drain_set(st, "ocs-g1-d2", true), 0);
	assert_int_equal(st_drain_set(st, "ocs-g0-d0", true), 0);
	assert_int_equal(st_drain_set(st, "ocs-g0-d0", true), 0); /* idempotent */
	st_close(st);
	st = open_store(f->path);
	assert_int_equal(st_drain_list(st, collect_drained, names), 0);
	assert_string_equal(names, "ocs-g0-d0,ocs-g1-d2,");
	assert_int_equal(st_drain_set(st, "ocs-g1-d2", false), 0);
	names[0] = '\0';
	assert_int_equal(st_drain_list(st, collect_drained, names), 0);
	assert_string_equal(names, "ocs-g0-d0,");
	st_close(st);
}

/* ---- OCSTrx rings (schema 4) ---- */

struct ring_rows {
	char text[512];
	int n;
};

static int collect_ring(void *ctx, const struct rg_ring *r)
{
	struct ring_rows *rows = ctx;
	size_t at = strlen(rows->text);

	at += (size_t)snprintf(rows->text + at, sizeof(rows->text) - at, "%s#%d:%s:%d:", r->job_id,
			       r->index, st_ring_change_name(r->last_change), r->failed_node);
	for (int k = 0; k < r->m; k++)
		at += (size_t)snprintf(rows->text + at, sizeof(rows->text) - at, "%s%d",
				       k ? "," : "", r->nodes[k]);
	snprintf(rows->text + at, sizeof(rows->text) - at, ";");
	rows->n++;
	return 0;
}

static char *rings_text(struct st_store *st, struct ring_rows *rows)
{
	memset(rows, 0, sizeof(*rows));
	assert_int_equal(st_ring_list(st, collect_ring, rows), 0);
	return rows->text;
}

static int collect_fault(void *ctx, int node, const char *source, int64_t since_ms)
{
	char *out = ctx;
	size_t at = strlen(out);

	snprintf(out + at, 256 - at, "%d:%s:%lld;", node, source, (long long)since_ms);
	return 0;
}

struct open_ring_intent {
	int n;
	bool has_rings;
	size_t n_rings, n_bundles;
	int first_node, last_bundle_node;
};

static int collect_open_ring(void *ctx, const struct st_intent *in)
{
	struct open_ring_intent *o = ctx;

	o->n++;
	o->has_rings = in->has_rings;
	o->n_rings = in->n_rings;
	o->n_bundles = in->n_bundles;
	o->first_node = in->n_rings && in->rings[0].m ? in->rings[0].nodes[0] : -1;
	o->last_bundle_node = in->n_bundles ? in->bundles[in->n_bundles - 1].node : -1;
	return 0;
}

/*
 * A ring intent: stored open with its rings and bundle settings (what
 * recovery reads), nothing in the rings table until confirmed; confirming
 * replaces the job's rings (a bypass: one ring fewer node), a rolled-back
 * one changes nothing, a release removes them. Faults: idempotent set,
 * cleared, listed. All of it survives a reopen.
 */
static void test_rings(void **state)
{
	struct fixture *f = *state;
	struct st_store *st = open_store(f->path);
	int r0[] = {0, 4, 8, 12}, r1[] = {16, 20, 24, 28}, bypass[] = {0, 8, 12};
	struct rg_ring placed[2] = {
		{"", 0, r0, 4, RG_PLACED, -1, "", 10},
		{"", 1, r1, 4, RG_PLACED, -1, "", 10},
	};
	struct rg_ring repaired[2] = {
		{"", 0, bypass, 3, RG_BYPASSED, 4, "", 20},
		{"", 1, r1, 4, RG_PLACED, -1, "", 10},
	};
	struct st_bundle b[] = {{0, 1, 1, 2, 0}, {12, 0, 1, 2, 1}};
	struct st_fault fault5 = {5, "device", 9};
	struct open_ring_intent open = {0};
	struct ring_rows rows;
	char faults[256] = "";
	int64_t txn, txn2;

	assert_int_equal(st_ring_intent_begin(st, "j", placed, 2, b, 2, NULL, 5, &txn), 0);
	assert_int_equal(rings_text(st, &rows)[0], '\0');
	assert_int_equal(st_intent_list_open(st, collect_open_ring, &open), 0);
	assert_int_equal(open.n, 1);
	assert_true(open.has_rings);
	assert_int_equal(open.n_rings, 2);
	assert_int_equal(open.n_bundles, 2);
	assert_int_equal(open.first_node, 0);
	assert_int_equal(open.last_bundle_node, 12);
	assert_int_equal(st_intent_finish(st, txn, ST_INTENT_CONFIRMED, "ok", 6), 0);
	assert_string_equal(rings_text(st, &rows),
			    "j#0:placed:-1:0,4,8,12;j#1:placed:-1:16,20,24,28;");

	/* a bypass rolled back changes nothing; confirmed, it replaces the job's rings */
	assert_int_equal(st_fault_set(st, 4, true, "device", 7), 0);
	assert_int_equal(st_fault_set(st, 4, true, "operator", 8), 0); /* first source kept */
	assert_int_equal(st_ring_intent_begin(st, "j", repaired, 2, b, 1, &fault5, 9, &txn2), 0);
	assert_int_equal(st_intent_finish(st, txn2, ST_INTENT_ROLLED_BACK, "no", 9), 0);
	assert_string_equal(rings_text(st, &rows),
			    "j#0:placed:-1:0,4,8,12;j#1:placed:-1:16,20,24,28;");
	assert_int_equal(st_ring_intent_begin(st, "j", repaired, 2, b, 1, &fault5, 10, &txn2), 0);
	assert_int_equal(st_intent_finish(st, txn2, ST_INTENT_CONFIRMED, "ok", 11), 0);
	st_close(st);

	st = open_store(f->path); /* all of it survives */
	assert_string_equal(rings_text(st, &rows),
			    "j#0:bypassed:4:0,8,12;j#1:placed:-1:16,20,24,28;");
	assert_int_equal(st_fault_list(st, collect_fault, faults), 0);
	/* the fault stored with an intent stays, even when the intent rolled back */
	assert_string_equal(faults, "4:device:7;5:device:9;");
	/* a circuit intent of another job leaves the rings alone */
	assert_int_equal(st_intent_begin(st, "k", NULL, 0, NULL, 0, NULL, 0, 12, &txn), 0);
	assert_int_equal(st_intent_finish(st, txn, ST_INTENT_CONFIRMED, "ok", 12), 0);
	assert_int_equal(rings_text(st, &rows)[0] != '\0' ? rows.n : 0, 2);
	/* release: no rings */
	assert_int_equal(st_ring_intent_begin(st, "j", NULL, 0, b, 2, NULL, 13, &txn), 0);
	assert_int_equal(st_intent_finish(st, txn, ST_INTENT_CONFIRMED, "ok", 14), 0);
	assert_int_equal(rings_text(st, &rows)[0], '\0');
	assert_int_equal(st_fault_set(st, 4, false, NULL, 15), 0);
	assert_int_equal(st_fault_set(st, 5, false, NULL, 15), 0);
	faults[0] = '\0';
	assert_int_equal(st_fault_list(st, collect_fault, faults), 0);
	assert_string_equal(faults, "");
	assert_int_equal(st_fault_set(st, -1, true, "device", 1), -EINVAL);
	st_close(st);
}

/* A version-3 file (no ring tables) is upgraded to 4 in place: rows kept, ring tables work. */
static void test_upgrade_3_to_4(void **state)
{
	struct fixture *f = *state;
	struct st_store *st = open_store(f->path);
	struct st_job job = {"old", NULL, "ACTIVE", NULL, NULL, 0, 1, 1, 0}, got;
	int nodes[] = {1, 2};
	struct rg_ring r = {"", 0, nodes, 2, RG_PLACED, -1, "", 1};
	struct ring_rows rows;
	int64_t txn;

	assert_int_equal(st_job_put(st, &job), 0);
	st_close(st);
	raw_exec(f->path, "DROP TABLE rings; DROP TABLE node_faults; DROP TABLE ring_intents;"
			  " DROP TABLE intent_rings; DROP TABLE intent_bundles;"
			  " UPDATE meta SET value = '3' WHERE key = 'schema_version';");
	st = open_store(f->path);
	assert_int_equal(raw_long(f->path, "SELECT value FROM meta WHERE key = 'schema_version'"),
			 8); /* the current version */
	assert_int_equal(st_job_get(st, "old", &got), 0);
	st_job_clear(&got);
	assert_int_equal(st_ring_intent_begin(st, "old", &r, 1, NULL, 0, NULL, 2, &txn), 0);
	assert_int_equal(st_intent_finish(st, txn, ST_INTENT_CONFIRMED, "ok", 3), 0);
	assert_string_equal(rings_text(st, &rows), "old#0:placed:-1:1,2;");
	st_close(st);
}

/* ---- retention ---- */

struct pruned {
	char ids[512];
	int calls;
};

static void on_pruned(void *ctx, const char *job_id)
{
	struct pruned *p = ctx;

	strcat(p->ids, job_id);
	strcat(p->ids, ",");
	p->calls++;
}

static char *job_ids(struct st_store *st, char *ids)
{
	ids[0] = '\0';
	assert_int_equal(st_job_list(st, count_job, ids), 0);
	return ids;
}

#define DAY_MS (24LL * 3600 * 1000)

/* Finished jobs older than keep_ms go, with their intents; live ones stay at any age. */
static void test_prune_age(void **state)
{
	struct fixture *f = *state;
	struct st_store *st = open_store(f->path);
	struct pruned p = {"", 0};
	int64_t now = 100 * DAY_MS;
	char ids[256];
	size_t n = 9;

	put_job(st, "old-released", NULL, "RELEASED", now - 8 * DAY_MS);
	put_job(st, "old-failed", "k-failed", "FAILED", now - 7 * DAY_MS - 1);
	put_job(st, "old-active", NULL, "ACTIVE", now - 30 * DAY_MS);
	put_job(st, "old-pending", NULL, "PENDING", now - 30 * DAY_MS);
	put_job(st, "old-releasing", NULL, "RELEASING", now - 30 * DAY_MS);
	put_job(st, "new-released", NULL, "RELEASED", now - 7 * DAY_MS);
	finished_intent(st, "old-released", now - 8 * DAY_MS, ST_INTENT_CONFIRMED);
	finished_intent(st, "new-released", now - 7 * DAY_MS, ST_INTENT_ROLLED_BACK);
	assert_int_equal(raw_long(f->path, "SELECT COUNT(*) FROM job_links"), 1);

	assert_int_equal(st_prune(st, now, 7 * DAY_MS, 10000, 100, &n, on_pruned, &p), 0);
	assert_int_equal(n, 2);
	assert_string_equal(p.ids, "old-released,old-failed,");
	assert_string_equal(job_ids(st, ids), "old-active,old-pending,old-releasing,new-released,");
	/* the deleted job's intent, its cross-connects and links, and its job links went along */
	assert_int_equal(raw_long(f->path, "SELECT COUNT(*) FROM intents"), 1);
	assert_int_equal(raw_long(f->path, "SELECT COUNT(*) FROM intent_xcs"), 1);
	assert_int_equal(raw_long(f->path, "SELECT COUNT(*) FROM intent_links"), 1);
	assert_int_equal(raw_long(f->path, "SELECT COUNT(*) FROM job_links"), 0);
	/* the idempotency key of a deleted job is free again */
	put_job(st, "again", "k-failed", "PENDING", now);

	/* nothing more is due: the next call deletes nothing */
	p.calls = 0;
	assert_int_equal(st_prune(st, now, 7 * DAY_MS, 10000, 100, &n, on_pruned, &p), 0);
	assert_int_equal(n, 0);
	assert_int_equal(p.calls, 0);
	/* a day later the one that finished 7 days ago is due, with its intent */
	assert_int_equal(st_prune(st, now + DAY_MS, 7 * DAY_MS, 10000, 100, &n, on_pruned, &p), 0);
	assert_int_equal(n, 1);
	assert_int_equal(p.calls, 1);
	assert_int_equal(raw_long(f->path, "SELECT COUNT(*) FROM intents"), 0);
	assert_int_equal(st_prune(st, now, -1, 10, 100, &n, NULL, NULL), -EINVAL);
	assert_int_equal(st_prune(st, now, 0, 10, 0, &n, NULL, NULL), -EINVAL);
	st_close(st);
}

/* Beyond keep_jobs finished jobs the oldest go, whatever their age; live jobs do not count. */
static void test_prune_count(void **state)
{
	struct fixture *f = *state;
	struct st_store *st = open_store(f->path);
	struct pruned p = {"", 0};
	char ids[256];
	size_t n;

	/* finished in the order f3, f1, f4, f2 (updated_ms), created f1..f4 */
	put_job(st, "f1", NULL, "RELEASED", 20);
	put_job(st, "f2", NULL, "FAILED", 40);
	put_job(st, "live", NULL, "ACTIVE", 1);
	put_job(st, "f3", NULL, "RELEASED", 10);
	put_job(st, "f4", NULL, "FAILED", 30);

	assert_int_equal(st_prune(st, 50, 1000, 2, 100, &n, on_pruned, &p), 0);
	assert_int_equal(n, 2);
	assert_string_equal(p.ids, "f3,f1,");
	assert_string_equal(job_ids(st, ids), "f2,live,f4,");
	assert_int_equal(st_prune(st, 50, 1000, 2, 100, &n, on_pruned, &p), 0);
	assert_int_equal(n, 0);
	/* keep none: every finished job goes, the live one stays */
	assert_int_equal(st_prune(st, 50, 1000, 0, 100, &n, on_pruned, &p), 0);
	assert_int_equal(n, 2);
	assert_string_equal(p.ids, "f3,f1,f4,f2,");
	assert_string_equal(job_ids(st, ids), "live,");

	/* finished in the same millisecond: the one created last is the newest */
	put_job(st, "t1", NULL, "RELEASED", 60);
	put_job(st, "t2", NULL, "RELEASED", 60);
	put_job(st, "t3", NULL, "FAILED", 60);
	p.ids[0] = '\0';
	assert_int_equal(st_prune(st, 70, 1000, 1, 100, &n, on_pruned, &p), 0);
	assert_string_equal(p.ids, "t1,t2,");
	assert_string_equal(job_ids(st, ids), "live,t3,");
	st_close(st);
}

/*
 * Never deleted, however old or many: a finished job that still owns circuits,
 * one an open intent names (its own, or as the owner of an addition), an open
 * intent; the live job's circuits and links stay while its old finished
 * intents go.
 */
static void test_prune_keeps_live_rows(void **state)
{
	struct fixture *f = *state;
	struct st_store *st = open_store(f->path);
	struct st_circuit add_other[] = {{{1, 0, 4, 5}, "named-by-open"}};
	struct st_circuit live_add[] = {{{2, 0, 1, 2}, "live"}};
	struct st_link live_link[] = {{"live", 0, 2, 1, 3}};
	struct st_intent open_in = {0};
	struct circuits cs = {0};
	struct pruned p = {"", 0};
	char ids[256];
	int64_t t_open, t_live;
	size_t n;

	put_job(st, "live", NULL, "ACTIVE", 1);
	put_job(st, "owns-circuits", NULL, "FAILED", 1);
	put_job(st, "open-intent", NULL, "FAILED", 1);
	put_job(st, "named-by-open", NULL, "RELEASED", 1);
	put_job(st, "plain", NULL, "RELEASED", 1);
	/* the live job's circuits and links, through a confirmed intent long ago */
	assert_int_equal(
		st_intent_begin(st, "live", NULL, 0, live_add, 1, live_link, 1, 1, &t_live), 0);
	assert_int_equal(st_intent_finish(st, t_live, ST_INTENT_CONFIRMED, NULL, 2), 0);
	/* a failed job whose circuits are still in the table (rollback not proven) */
	raw_exec(f->path, "INSERT INTO circuits VALUES (3, 3, 3, 3, 'owns-circuits');");
	/* an open intent of one job that adds a cross-connect owned by another */
	assert_int_equal(
		st_intent_begin(st, "open-intent", NULL, 0, add_other, 1, NULL, 0, 1, &t_open), 0);

	assert_int_equal(st_prune(st, 100 * DAY_MS, DAY_MS, 0, 100, &n, on_pruned, &p), 0);
	assert_string_equal(p.ids, "plain,");
	assert_int_equal(n, 2); /* plain, and the live job's finished intent */
	assert_string_equal(job_ids(st, ids), "live,owns-circuits,open-intent,named-by-open,");
	assert_int_equal(st_intent_list_open(st, collect_intent, &open_in), 0);
	assert_int_equal(open_in.txn_id, t_open);
	assert_int_equal(raw_long(f->path, "SELECT COUNT(*) FROM intents"), 1);
	assert_int_equal(st_circuit_list(st, NULL, collect_circuit, &cs), 0);
	assert_int_equal(cs.n, 2);
	assert_int_equal(all_links(st).n, 1);

	/* once the intent is over and the circuits are gone, they may go too */
	assert_int_equal(st_intent_finish(st, t_open, ST_INTENT_ROLLED_BACK, NULL, 3), 0);
	raw_exec(f->path, "DELETE FROM circuits WHERE job_id = 'owns-circuits';");
	p.ids[0] = '\0';
	assert_int_equal(st_prune(st, 100 * DAY_MS, DAY_MS, 0, 100, &n, on_pruned, &p), 0);
	assert_string_equal(p.ids, "owns-circuits,open-intent,named-by-open,");
	assert_string_equal(job_ids(st, ids), "live,");
	assert_int_equal(raw_long(f->path, "SELECT COUNT(*) FROM intents"), 0);
	assert_int_equal(all_links(st).n, 1);
	st_close(st);
}

/* One call deletes at most max_rows, oldest first, in separate transactions. */
static void test_prune_batches(void **state)
{
	struct fixture *f = *state;
	struct st_store *st = open_store(f->path);
	struct pruned p = {"", 0};
	size_t n, total = 0;
	char ids[512];

	for (int i = 0; i < 25; i++) {
		char id[16];

		snprintf(id, sizeof(id), "j%02d", i);
		put_job(st, id, NULL, i % 2 ? "FAILED" : "RELEASED", 100 + i);
	}
	for (int i = 0; i < 3; i++) {
		assert_int_equal(st_prune(st, 1000, 10, 100, 10, &n, on_pruned, &p), 0);
		assert_int_equal(n, i < 2 ? 10 : 5);
		assert_int_equal(p.calls, i < 2 ? 10 * (i + 1) : 25);
		total += n;
	}
	assert_int_equal(total, 25);
	assert_int_equal(strncmp(p.ids, "j00,j01,j02,", 12), 0);
	assert_non_null(strstr(p.ids, "j09,j10,"));
	assert_string_equal(job_ids(st, ids), "");
	assert_int_equal(st_prune(st, 1000, 10, 100, 10, &n, on_pruned, &p), 0);
	assert_int_equal(n, 0);
	st_close(st);
}

/* ---- writes that fail ---- */

static int64_t monotonic_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * The decision to commit (st_intent_decide): only for an open intent, once;
 * the intent stays open (recovery sees it decided) until its outcome, which
 * is stored as any other; retention deletes it with its intent. A version-6
 * file (no intent_decisions) is upgraded to 7 with its open intent kept.
 */
static void test_intent_decide(void **state)
{
	struct fixture *f = *state;
	struct st_store *st = open_store(f->path);
	struct st_circuit add[] = {{{0, 0, 1, 2}, "jd"}};
	struct st_intent got = {0};
	struct circuits cs = {0};
	int64_t t1, t2, t3;
	size_t n;

	put_job(st, "jd", NULL, "RELEASED", 1);
	assert_int_equal(st_intent_begin(st, "jd", NULL, 0, add, 1, NULL, 0, 10, &t1), 0);
	assert_int_equal(st_intent_list_open(st, collect_intent, &got), 0);
	assert_int_equal(got.txn_id, t1);
	assert_false(got.decided);
	/* recovery's note (the recovery gate) on an open intent: its detail only */
	assert_int_equal(st_intent_note(st, t1, "recovery (note 0): confirm"), 0);
	assert_int_equal(raw_long(f->path, "SELECT COUNT(*) FROM intents WHERE detail ="
					   " 'recovery (note 0): confirm' AND state = 'open'"),
			 1);
	assert_int_equal(st_intent_note(st, 999, "x"), -ENOENT);
	assert_int_equal(st_intent_decide(st, t1, 11), 0);
	assert_int_equal(raw_long(f->path, "SELECT decided_ms FROM intent_decisions"), 11);
	assert_int_equal(st_intent_decide(st, t1, 12), -EEXIST);
	assert_int_equal(st_intent_decide(st, 999, 12), -ENOENT);
	got = (struct st_intent){0};
	assert_int_equal(st_intent_list_open(st, collect_intent, &got), 0);
	assert_int_equal(got.txn_id, t1);
	assert_true(got.decided);
	/* decided is not confirmed: the circuits wait for the outcome */
	assert_int_equal(st_circuit_list(st, NULL, collect_circuit, &cs), 0);
	assert_int_equal(cs.n, 0);
	assert_int_equal(st_intent_finish(st, t1, ST_INTENT_CONFIRMED, NULL, 13), 0);
	assert_int_equal(st_circuit_list(st, NULL, collect_circuit, &cs), 0);
	assert_int_equal(cs.n, 1);
	assert_int_equal(st_intent_decide(st, t1, 14), -EALREADY);
	assert_int_equal(st_intent_note(st, t1, "recovery (note 1): confirm"), -EALREADY);
	/* an undecided intent is listed so; a failed one is listed decided if it was */
	assert_int_equal(st_intent_begin(st, "jd", NULL, 0, add, 1, NULL, 0, 20, &t2), 0);
	assert_int_equal(st_intent_decide(st, t2, 21), 0);
	assert_int_equal(st_intent_finish(st, t2, ST_INTENT_FAILED, "confirm lost", 22), 0);
	got = (struct st_intent){0};
	assert_int_equal(st_intent_list_failed(st, collect_intent, &got), 0);
	assert_int_equal(got.txn_id, t2);
	assert_true(got.decided);
	assert_int_equal(st_intent_settle(st, t2, ST_INTENT_ROLLED_BACK, "back", 23), 0);
	/* retention deletes the finished intents with their decisions (foreign keys) */
	raw_exec(f->path, "DELETE FROM circuits;");
	assert_int_equal(st_prune(st, 100 * DAY_MS, DAY_MS, 0, 100, &n, NULL, NULL), 0);
	assert_int_equal(raw_long(f->path, "SELECT COUNT(*) FROM intents"), 0);
	assert_int_equal(raw_long(f->path, "SELECT COUNT(*) FROM intent_decisions"), 0);

	/* a version-6 file: upgraded in place, its open intent kept and decidable */
	assert_int_equal(st_intent_begin(st, "jd", NULL, 0, add, 1, NULL, 0, 30, &t3), 0);
	st_close(st);
	raw_exec(f->path, "DROP TABLE intent_decisions;"
			  " UPDATE meta SET value = '6' WHERE key = 'schema_version';");
	st = open_store(f->path);
	assert_int_equal(raw_long(f->path, "SELECT value FROM meta WHERE key = 'schema_version'"),
			 8);
	got = (struct st_intent){0};
	assert_int_equal(st_intent_list_open(st, collect_intent, &got), 0);
	assert_int_equal(got.txn_id, t3);
	assert_false(got.decided);
	assert_int_equal(st_intent_decide(st, t3, 31), 0);
	st_close(st);
}

/* What the store's observers saw (st_set_error_observer, st_set_commit_observer). */
struct observed {
	int errors, last_error, commits;
	double max_commit_s;
};

static void observe_error(void *ctx, int rc)
{
	struct observed *o = ctx;

	o->errors++;
	o->last_error = rc;
}

static void observe_commit(void *ctx, double seconds)
{
	struct observed *o = ctx;

	o->commits++;
	if (seconds > o->max_commit_s)
		o->max_commit_s = seconds;
	/* from this write's begin: a start time never set would read as hours */
	assert_true(seconds >= 0 && seconds < 60);
}

/*
 * Another connection holds the write lock (BEGIN EXCLUSIVE): every write
 * waits the busy timeout, then fails with -EBUSY and changes nothing; reads
 * go on (WAL); once the lock is gone the same writes succeed. The error
 * observer sees each refused write and the commit observer none of them;
 * the commit observer sees each write that committed, with its time.
 */
static void test_write_refused_while_locked(void **state)
{
	struct fixture *f = *state;
	struct st_store *st = open_store(f->path);
	struct st_circuit add[] = {{{0, 0, 1, 2}, "j1"}};
	struct st_job j2 = {.id = "j2", .state = "PENDING", .created_ms = 5, .updated_ms = 5};
	struct st_intent open_in = {0};
	struct circuits cs = {0};
	struct st_job got;
	sqlite3 *other;
	int64_t t1, t2 = 0, t0;
	size_t n = 7;
	char ids[64];
	struct observed seen = {0};

	st_set_error_observer(st, observe_error, &seen);
	st_set_commit_observer(st, observe_commit, &seen);
	put_job(st, "j1", NULL, "PROGRAMMING", 1);
	put_job(st, "done", NULL, "RELEASED", 1);
	assert_int_equal(st_intent_begin(st, "j1", NULL, 0, add, 1, NULL, 0, 2, &t1), 0);
	assert_int_equal(seen.commits, 3);
	assert_int_equal(seen.errors, 0);
	st_set_busy_timeout(st, 100);

	other = raw_open(f->path);
	assert_int_equal(sqlite3_exec(other, "BEGIN EXCLUSIVE", NULL, NULL, NULL), SQLITE_OK);
	t0 = monotonic_ms();
	assert_int_equal(st_job_put(st, &j2), -EBUSY);
	assert_true(monotonic_ms() - t0 >= 100); /* it waited for the lock first */
	assert_int_equal(st_job_set_state(st, "j1", "FAILED", "x", 3), -EBUSY);
	assert_int_equal(st_intent_begin(st, "j1", NULL, 0, add, 1, NULL, 0, 3, &t2), -EBUSY);
	assert_int_equal(t2, 0);
	assert_int_equal(st_intent_finish(st, t1, ST_INTENT_CONFIRMED, NULL, 3), -EBUSY);
	assert_int_equal(st_drain_set(st, "ocs-g0-d0", true), -EBUSY);
	assert_int_equal(st_prune(st, 1000, 0, 0, 10, &n, NULL, NULL), -EBUSY);
	assert_int_equal(n, 0);
	assert_int_equal(seen.errors, 6);
	assert_int_equal(seen.last_error, -EBUSY);
	assert_int_equal(seen.commits, 3);
	/* reads still work, and show nothing of the refused writes */
	assert_int_equal(st_job_get(st, "j1", &got), 0);
	assert_string_equal(got.state, "PROGRAMMING");
	st_job_clear(&got);
	assert_int_equal(sqlite3_exec(other, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(other);

	/* nothing of the refused writes is in the store */
	assert_string_equal(job_ids(st, ids), "j1,done,");
	assert_int_equal(st_intent_list_open(st, collect_intent, &open_in), 0);
	assert_int_equal(open_in.txn_id, t1);
	assert_int_equal(raw_long(f->path, "SELECT COUNT(*) FROM intents"), 1);
	assert_int_equal(st_circuit_list(st, NULL, collect_circuit, &cs), 0);
	assert_int_equal(cs.n, 0);
	assert_int_equal(raw_long(f->path, "SELECT COUNT(*) FROM drained"), 0);

	/* the lock gone, the same writes succeed */
	assert_int_equal(st_job_put(st, &j2), 0);
	assert_int_equal(st_intent_finish(st, t1, ST_INTENT_CONFIRMED, NULL, 3), 0);
	assert_int_equal(st_prune(st, 1000, 0, 0, 10, &n, NULL, NULL), 0);
	assert_int_equal(n, 2); /* the finished job, and j1's intent now finished */
	assert_int_equal(seen.commits, 6);
	assert_int_equal(seen.errors, 6);
	assert_true(seen.max_commit_s > 0);
	assert_string_equal(job_ids(st, ids), "j1,j2,");
	cs.n = 0;
	assert_int_equal(st_circuit_list(st, NULL, collect_circuit, &cs), 0);
	assert_int_equal(cs.n, 1);
	st_close(st);
}

/*
 * A failure half-way through a write (a trigger that refuses a row, set by
 * another connection) rolls the whole write back: the confirmed intent's
 * outcome is not stored without its circuits, a prune deletes nothing and
 * reports no job.
 */
static void test_write_fails_midway(void **state)
{
	struct fixture *f = *state;
	struct st_store *st = open_store(f->path);
	struct st_circuit add[] = {{{0, 0, 1, 2}, "j1"}, {{0, 1, 2, 1}, "j1"}};
	struct st_link link[] = {{"j1", 0, 2, 0, 1}};
	struct st_intent open_in = {0};
	struct circuits cs = {0};
	struct pruned p = {"", 0};
	char ids[64];
	int64_t t1;
	size_t n = 7;

	put_job(st, "j1", NULL, "PROGRAMMING", 1);
	put_job(st, "old", NULL, "RELEASED", 1);
	finished_intent(st, "old", 2, ST_INTENT_ROLLED_BACK);
	assert_int_equal(st_intent_begin(st, "j1", NULL, 0, add, 2, link, 1, 2, &t1), 0);
	raw_exec(f->path, "CREATE TRIGGER refuse_second BEFORE INSERT ON circuits"
			  " WHEN NEW.device = 1 BEGIN SELECT RAISE(ABORT, 'injected'); END;"
			  "CREATE TRIGGER refuse_delete BEFORE DELETE ON jobs"
			  " BEGIN SELECT RAISE(ABORT, 'injected'); END;");

	assert_int_equal(st_intent_finish(st, t1, ST_INTENT_CONFIRMED, NULL, 3), -EINVAL);
	assert_int_equal(st_intent_list_open(st, collect_intent, &open_in), 0);
	assert_int_equal(open_in.txn_id, t1);
	assert_int_equal(st_circuit_list(st, NULL, collect_circuit, &cs), 0);
	assert_int_equal(cs.n, 0);
	assert_int_equal(all_links(st).n, 0);

	assert_int_equal(st_prune(st, 1000, 0, 0, 10, &n, on_pruned, &p), -EINVAL);
	assert_int_equal(n, 0);
	assert_int_equal(p.calls, 0);
	assert_string_equal(job_ids(st, ids), "j1,old,");
	assert_int_equal(raw_long(f->path, "SELECT COUNT(*) FROM intents"), 2);
	assert_int_equal(raw_long(f->path, "SELECT COUNT(*) FROM intent_xcs"), 3);

	/* the fault gone, the same writes go through whole */
	raw_exec(f->path, "DROP TRIGGER refuse_second; DROP TRIGGER refuse_delete;");
	assert_int_equal(st_intent_finish(st, t1, ST_INTENT_CONFIRMED, NULL, 3), 0);
	cs.n = 0;
	assert_int_equal(st_circuit_list(st, NULL, collect_circuit, &cs), 0);
	assert_int_equal(cs.n, 2);
	assert_int_equal(all_links(st).n, 1);
	assert_int_equal(st_prune(st, 1000, 0, 0, 10, &n, on_pruned, &p), 0);
	assert_string_equal(p.ids, "old,");
	st_close(st);
}

/* ---- rail-OCS fabrics (schema 5) ---- */

static int collect_rail_fault(void *ctx, int64_t gpu, const char *source, int64_t since_ms)
{
	char *out = ctx;

	snprintf(out + strlen(out), 256 - strlen(out), "%lld:%s:%lld;", (long long)gpu, source,
		 (long long)since_ms);
	return 0;
}

static int collect_rail_move(void *ctx, const struct st_rail_job_move *m)
{
	char *out = ctx;

	snprintf(out + strlen(out), 256 - strlen(out), "%s@%lld:%lld:%lld->%lld@%lld;", m->job_id,
		 (long long)m->txn_id, (long long)m->rail_port, (long long)m->old_gpu,
		 (long long)m->new_gpu, (long long)m->moved_ms);
	return 0;
}

/*
 * A swap's intent: nothing of it counts until confirmed; confirmed, its
 * circuits, the GPU's fault and the jobs' moves land together; rolled back,
 * none of them; faults set and cleared on their own; and retention deletes
 * a finished swap intent with its rows (foreign keys allow it).
 */
static void test_rail(void **state)
{
	struct fixture *f = *state;
	struct st_store *st = open_store(f->path);
	struct st_circuit add[2] = {{{0, 0, 1, 12}, ST_RAIL_OWNER}, {{0, 0, 12, 1}, ST_RAIL_OWNER}};
	struct ocs_xc del[2] = {{0, 0, 0, 12}, {0, 0, 12, 0}};
	struct st_rail_move moves[2] = {{0, 0, 1, "job-a"}, {3, 1, -1, ""}};
	struct st_rail_swap swap = {7, "idle-gpu", "operator", 42, moves, 2};
	struct circuits cs = {0};
	char faults[256] = "", moved[256] = "";
	int64_t txn, txn2;
	size_t n = 9;

	/* the initial joins, stored as any intent */
	assert_int_equal(st_intent_begin(st, ST_RAIL_OWNER, NULL, 0,
					 (struct st_circuit[]){{{0, 0, 0, 12}, ST_RAIL_OWNER},
							       {{0, 0, 12, 0}, ST_RAIL_OWNER}},
					 2, NULL, 0, 1, &txn),
			 0);
	assert_int_equal(st_intent_finish(st, txn, ST_INTENT_CONFIRMED, "ok", 2), 0);
	assert_int_equal(st_rail_intent_begin(st, NULL, 1, add, 2, &swap, 3, &txn), -EINVAL);
	/* rolled back: nothing of it counts */
	assert_int_equal(st_rail_intent_begin(st, del, 2, add, 2, &swap, 3, &txn), 0);
	assert_int_equal(st_intent_finish(st, txn, ST_INTENT_ROLLED_BACK, "no", 4), 0);
	assert_int_equal(st_rail_fault_list(st, collect_rail_fault, faults), 0);
	assert_int_equal(st_rail_move_list(st, collect_rail_move, moved), 0);
	assert_string_equal(faults, "");
	assert_string_equal(moved, "");
	/* confirmed: circuits, the fault and job-a's move together */
	assert_int_equal(st_rail_intent_begin(st, del, 2, add, 2, &swap, 5, &txn2), 0);
	assert_int_equal(st_intent_finish(st, txn2, ST_INTENT_CONFIRMED, "ok", 6), 0);
	assert_int_equal(st_circuit_list(st, NULL, collect_circuit, &cs), 0);
	assert_int_equal(cs.n, 2);
	assert_int_equal(cs.items[0].xc.in, 1);
	assert_string_equal(cs.items[0].job_id, ST_RAIL_OWNER);
	assert_int_equal(st_rail_fault_list(st, collect_rail_fault, faults), 0);
	assert_string_equal(faults, "7:operator:42;");
	assert_int_equal(st_rail_move_list(st, collect_rail_move, moved), 0);
	snprintf(faults, sizeof(faults), "job-a@%lld:0:0->1@6;", (long long)txn2);
	assert_string_equal(moved, faults);
	/* a GPU already faulty keeps its first source; healthy removes it */
	assert_int_equal(st_rail_fault_set(st, 7, true, "device", 99), 0);
	assert_int_equal(st_rail_fault_set(st, 9, true, "device", 99), 0);
	faults[0] = '\0';
	assert_int_equal(st_rail_fault_list(st, collect_rail_fault, faults), 0);
	assert_string_equal(faults, "7:operator:42;9:device:99;");
	assert_int_equal(st_rail_fault_set(st, 7, false, NULL, 0), 0);
	assert_int_equal(st_rail_fault_set(st, -1, true, "device", 0), -EINVAL);
	faults[0] = '\0';
	assert_int_equal(st_rail_fault_list(st, collect_rail_fault, faults), 0);
	assert_string_equal(faults, "9:device:99;");
	/* retention: finished swap intents go with their rows; the moves of a live job stay */
	assert_int_equal(st_prune(st, 100 * DAY_MS, DAY_MS, 10000, 100, &n, NULL, NULL), 0);
	assert_int_equal(raw_long(f->path, "SELECT COUNT(*) FROM intents"), 0);
	assert_int_equal(raw_long(f->path, "SELECT COUNT(*) FROM rail_intents"), 0);
	assert_int_equal(raw_long(f->path, "SELECT COUNT(*) FROM rail_intent_moves"), 0);
	assert_int_equal(raw_long(f->path, "SELECT COUNT(*) FROM rail_job_moves"), 1);
	st_close(st);
}

/*
 * st_touched (issue 31): a copy fed a leader's changesets notes the jobs
 * and circuits they touch, skips intent tables, asks for a rebuild on a
 * drain, an image loaded, and a change of thousands of rows; nothing is
 * noted before tracking starts or after it stops.
 */
static void test_touched(void **state)
{
	struct st_store *leader, *copy;
	struct st_touched t;
	struct st_job a = {.id = "ta", .state = "PENDING", .created_ms = 1, .updated_ms = 1};
	struct st_circuit add[3000];
	char err[128];
	int64_t txn;
	void *image;
	size_t len;

	(void)state;
	assert_int_equal(st_open_memory(&leader, err, sizeof(err)), 0);
	assert_int_equal(st_open_memory(&copy, err, sizeof(err)), 0);
	repl_loopback(leader, copy);
	assert_int_equal(st_job_put(leader, &a), 0); /* not tracked yet */
	st_touched_track(copy, true);
	st_touched_take(copy, &t);
	assert_false(t.all);
	assert_int_equal(t.n_jobs + t.n_circuits, 0);
	/* a job's state and figures; a transaction of two circuits */
	assert_int_equal(st_job_set_state(leader, "ta", "ACTIVE", NULL, 2), 0);
	assert_int_equal(st_figures_put(leader, "ta", "x"), 0);
	for (int i = 0; i < 2; i++)
		add[i] = (struct st_circuit){{1, 2, i, i + 4}, "ta"};
	assert_int_equal(st_intent_begin(leader, "ta", NULL, 0, add, 2, NULL, 0, 3, &txn), 0);
	assert_int_equal(st_intent_finish(leader, txn, ST_INTENT_CONFIRMED, "", 4), 0);
	st_touched_take(copy, &t);
	assert_false(t.all);
	assert_int_equal(t.n_jobs, 2);
	assert_string_equal(t.jobs[0], "ta");
	assert_string_equal(t.jobs[1], "ta");
	assert_int_equal(t.n_circuits, 2);
	assert_true(t.circuits[0].group == 1 && t.circuits[0].device == 2);
	assert_true(t.circuits[0].in + t.circuits[1].in == 1);
	st_touched_clear(&t);
	/* an intent that stays open touches nothing the view holds */
	assert_int_equal(st_intent_begin(leader, "ta", NULL, 0, add, 1, NULL, 0, 5, &txn), 0);
	st_touched_take(copy, &t);
	assert_false(t.all);
	assert_int_equal(t.n_jobs + t.n_circuits, 0);
	assert_int_equal(st_intent_finish(leader, txn, ST_INTENT_ROLLED_BACK, "", 6), 0);
	st_touched_take(copy, &t);
	assert_int_equal(t.n_jobs + t.n_circuits, 0);
	/* a drain: rebuild */
	assert_int_equal(st_drain_set(leader, "dev", true), 0);
	st_touched_take(copy, &t);
	assert_true(t.all);
	assert_int_equal(t.n_jobs + t.n_circuits, 0);
	/* thousands of circuits in one change: rebuild, no row notes kept */
	for (int i = 0; i < 3000; i++)
		add[i] = (struct st_circuit){{2, i / 64, i % 64, (i + 1) % 64}, "ta"};
	assert_int_equal(st_intent_begin(leader, "ta", NULL, 0, add, 3000, NULL, 0, 7, &txn), 0);
	assert_int_equal(st_intent_finish(leader, txn, ST_INTENT_CONFIRMED, "", 8), 0);
	st_touched_take(copy, &t);
	assert_true(t.all);
	assert_int_equal(t.n_jobs + t.n_circuits, 0);
	/* an image loaded: rebuild */
	assert_int_equal(st_image_save(leader, &image, &len), 0);
	assert_int_equal(st_image_load(copy, image, len, err, sizeof(err)), 0);
	st_image_free(image);
	st_touched_take(copy, &t);
	assert_true(t.all);
	/* stopped: nothing noted, a take says rebuild */
	st_touched_track(copy, false);
	assert_int_equal(st_job_set_state(leader, "ta", "RELEASED", NULL, 9), 0);
	st_touched_take(copy, &t);
	assert_true(t.all);
	assert_int_equal(t.n_jobs + t.n_circuits, 0);
	st_close(leader);
	st_close(copy);
}

/* Every entry a leader published, applied to the copy as well (capture_hooks). */
struct capture {
	struct st_store *copy;
	void *entry[8];
	size_t len[8], n;
};

static int capture_publish(void *ctx, const void *entry, size_t len)
{
	struct capture *c = ctx;

	assert_true(c->n < 8);
	c->entry[c->n] = malloc(len);
	memcpy(c->entry[c->n], entry, len);
	c->len[c->n++] = len;
	return st_apply_changeset(c->copy, entry, len);
}

static int capture_prepare(void *ctx)
{
	(void)ctx;
	return 0;
}

static void capture_commit_failed(void *ctx)
{
	(void)ctx;
}

static const char *capture_last_error(void *ctx)
{
	(void)ctx;
	return "";
}

static void capture_destroy(void *ctx)
{
	(void)ctx;
}

static const struct st_repl_hooks capture_hooks = {capture_prepare, capture_publish,
						   capture_commit_failed, capture_last_error,
						   capture_destroy};

static int circuit_text(void *ctx, const struct st_circuit *c)
{
	char *out = ctx;

	sprintf(out + strlen(out), "%d/%d/%d>%d:%s;", c->xc.group, c->xc.device, c->xc.in,
		c->xc.out, c->job_id);
	return 0;
}

/* Whether the n bytes of s occur in the len bytes of p. */
static bool holds(const void *p, size_t len, const char *s, size_t n)
{
	for (size_t i = 0; i + n <= len; i++)
		if (!memcmp((const char *)p + i, s, n))
			return true;
	return false;
}

/*
 * A confirm's entry (store_repl.h): "C TXN REMOVED ADDED\n" and a changeset
 * without the circuits, which the copy derives from the intent's rows it
 * holds; the copies' circuits agree. A copy where the counts do not come
 * out as the writer's, or a malformed first line, refuses the entry
 * (-EPROTO) and applies nothing of it.
 */
static void test_confirm_entry(void **state)
{
	struct st_store *leader, *copy, *other;
	struct capture cap = {0};
	struct st_circuit add[2] = {{{1, 2, 3, 4}, "ca"}, {{1, 2, 5, 6}, "ca"}};
	struct ocs_xc del = {1, 2, 3, 4};
	struct st_circuit moved = {{1, 2, 3, 7}, "ca"};
	char want[256] = "", got[256] = "", line[64], *bad;
	int64_t txn1, txn2;
	size_t cs;
	char err[128];

	(void)state;
	assert_int_equal(st_open_memory(&leader, err, sizeof(err)), 0);
	assert_int_equal(st_open_memory(&copy, err, sizeof(err)), 0);
	assert_int_equal(st_open_memory(&other, err, sizeof(err)), 0);
	cap.copy = copy;
	st_set_repl(leader, &capture_hooks, &cap);
	assert_int_equal(st_intent_begin(leader, "ca", NULL, 0, add, 2, NULL, 0, 1, &txn1), 0);
	assert_int_equal(st_intent_finish(leader, txn1, ST_INTENT_CONFIRMED, "", 2), 0);
	/* a move: one removal, one addition on the input it frees */
	assert_int_equal(st_intent_begin(leader, "ca", &del, 1, &moved, 1, NULL, 0, 3, &txn2), 0);
	assert_int_equal(st_intent_finish(leader, txn2, ST_INTENT_CONFIRMED, "", 4), 0);
	assert_int_equal(cap.n, 4);
	snprintf(line, sizeof(line), "C %lld 0 2\n", (long long)txn1);
	assert_true(cap.len[1] > strlen(line) && !memcmp(cap.entry[1], line, strlen(line)));
	snprintf(line, sizeof(line), "C %lld 1 1\n", (long long)txn2);
	assert_true(cap.len[3] > strlen(line) && !memcmp(cap.entry[3], line, strlen(line)));
	/* no circuits table in the changesets of the confirms (its name, NUL-terminated) */
	assert_false(holds(cap.entry[1], cap.len[1], "circuits", sizeof("circuits")));
	assert_false(holds(cap.entry[3], cap.len[3], "circuits", sizeof("circuits")));
	assert_int_equal(st_circuit_list(leader, NULL, circuit_text, want), 0);
	assert_int_equal(st_circuit_list(copy, NULL, circuit_text, got), 0);
	assert_string_equal(want, "1/2/3>7:ca;1/2/5>6:ca;");
	assert_string_equal(got, want);
	/* another copy, up to the second intent: a confirm claiming other counts is refused */
	for (int i = 0; i < 3; i++)
		assert_int_equal(st_apply_changeset(other, cap.entry[i], cap.len[i]), 0);
	cs = cap.len[3] - strlen(line);
	bad = malloc(cs + 32);
	for (int k = 0; k < 3; k++) {
		static const char *const lines[] = {"C %lld 1 2\n", "C %lld 0 1\n",
						    "C %lldx 1 1\n"};
		int n = snprintf(bad, 32, lines[k], (long long)txn2);

		memcpy(bad + n, (char *)cap.entry[3] + strlen(line), cs);
		assert_int_equal(st_apply_changeset(other, bad, (size_t)n + cs), -EPROTO);
	}
	free(bad);
	got[0] = '\0';
	assert_int_equal(st_circuit_list(other, NULL, circuit_text, got), 0);
	assert_string_equal(got, "1/2/3>4:ca;1/2/5>6:ca;"); /* nothing of it applied */
	assert_int_equal(st_apply_changeset(other, cap.entry[3], cap.len[3]), 0);
	got[0] = '\0';
	assert_int_equal(st_circuit_list(other, NULL, circuit_text, got), 0);
	assert_string_equal(got, want);
	for (size_t i = 0; i < cap.n; i++)
		free(cap.entry[i]);
	st_close(leader);
	st_close(copy);
	st_close(other);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_jobs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_figures_and_empty, setup, teardown),
		cmocka_unit_test_setup_teardown(test_job_links, setup, teardown),
		cmocka_unit_test_setup_teardown(test_intents_and_circuits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_finish_with_states, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failed_intents_settled, setup, teardown),
		cmocka_unit_test_setup_teardown(test_intent_decide, setup, teardown),
		cmocka_unit_test_setup_teardown(test_survives_kill, setup, teardown),
		cmocka_unit_test_setup_teardown(test_drained_devices, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rings, setup, teardown),
		cmocka_unit_test_setup_teardown(test_upgrade_3_to_4, setup, teardown),
		cmocka_unit_test_setup_teardown(test_prune_age, setup, teardown),
		cmocka_unit_test_setup_teardown(test_prune_count, setup, teardown),
		cmocka_unit_test_setup_teardown(test_prune_keeps_live_rows, setup, teardown),
		cmocka_unit_test_setup_teardown(test_prune_batches, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_refused_while_locked, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_fails_midway, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rail, setup, teardown),
		cmocka_unit_test(test_touched),
		cmocka_unit_test(test_confirm_entry),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
