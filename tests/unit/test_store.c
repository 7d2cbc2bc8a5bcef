/*
 * test_store.c - unit tests of the SQLite state store (daemon/store.c) on
 * real files: jobs, idempotency keys, the intent log and the circuit table,
 * durability across a process killed without closing the store, and refusal
 * of a file from an unknown schema version.
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
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "store.h"

struct fixture {
	char dir[64];
	char path[96];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	snprintf(f->dir, sizeof(f->dir), "/tmp/ocsd-store-XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->path, sizeof(f->path), "%s/state.db", f->dir);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	if (system(cmd) != 0)
		return -1;
	free(f);
	return 0;
}

static struct st_store *open_store(const char *path)
{
	struct st_store *st = NULL;
	char err[256];

	if (st_open(path, &st, err, sizeof(err)) != 0)
		fail_msg("st_open: %s", err);
	return st;
}

static int count_job(void *ctx, const struct st_job *job)
{
	char *ids = ctx;

	strcat(ids, job->id);
	strcat(ids, ",");
	return 0;
}

static void test_jobs(void **state)
{
	struct fixture *f = *state;
	struct st_store *st = open_store(f->path);
	struct st_job a = { .id = "job-a", .idempotency_key = "k1", .state = "PENDING",
			    .request = "\x01\x02\x00\x03", .request_len = 4, .created_ms = 10,
			    .updated_ms = 10 };
	struct st_job b = { .id = "job-b", .state = "PENDING", .created_ms = 11, .updated_ms = 11 };
	struct st_job dup = { .id = "job-c", .idempotency_key = "k1", .state = "PENDING" };
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

struct circuits {
	struct st_circuit items[16];
	int n;
};

static int collect_circuit(void *ctx, const struct st_circuit *c)
{
	struct circuits *cs = ctx;

	if (cs->n < 16)
		cs->items[cs->n] = *c;
	cs->n++;
	return 0;
}

static int collect_intent(void *ctx, const struct st_intent *in)
{
	struct st_intent *out = ctx;

	out->txn_id = in->txn_id;
	snprintf(out->job_id, sizeof(out->job_id), "%s", in->job_id);
	out->n_removals = in->n_removals;
	out->n_additions = in->n_additions;
	return 0;
}

static void test_intents_and_circuits(void **state)
{
	struct fixture *f = *state;
	struct st_store *st = open_store(f->path);
	struct st_circuit add1[] = { { { 0, 0, 1, 2 }, "j1" }, { { 0, 1, 2, 1 }, "j1" } };
	struct st_circuit add2[] = { { { 1, 0, 3, 0 }, "j2" }, { { 0, 0, 1, 3 }, "j2" } };
	struct ocs_xc del2[] = { { 0, 0, 1, 2 } };
	struct st_intent open_in = { 0 };
	struct circuits cs = { 0 };
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
	assert_int_equal(st_intent_finish(st, t2, ST_INTENT_ROLLED_BACK, "device 3 refused", 130), 0);
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

struct links {
	struct st_link items[16];
	size_t n;
};

static int collect_link(void *ctx, const struct st_link *l)
{
	struct links *ls = ctx;

	if (ls->n == 16)
		return -ENOSPC;
	ls->items[ls->n++] = *l;
	return 0;
}

static struct links all_links(struct st_store *st)
{
	struct links ls = { 0 };

	assert_int_equal(st_link_list(st, collect_link, &ls), 0);
	return ls;
}

/* Leaf-spine links become their jobs' at CONFIRMED, replacing what the jobs had. */
static void test_job_links(void **state)
{
	struct fixture *f = *state;
	struct st_store *st = open_store(f->path);
	struct st_circuit add[] = { { { 0, 0, 1, 2 }, "j1" } };
	struct st_link l1[] = { { "j1", 0, 2, 0, 1 }, { "j1", 0, 2, 1, 1 } };
	struct st_link l2[] = { { "j2", 0, 4, 1, 2 } };
	struct st_link l1b[] = { { "j1", 0, 2, 3, 2 }, { "j2", 1, 5, 0, 1 } };
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
	st_close(st);
}

/* A process that stored an intent and a job is killed without closing: both survive. */
static void test_survives_kill(void **state)
{
	struct fixture *f = *state;
	struct st_intent open_in = { 0 };
	struct st_store *st;
	struct st_job got;
	int status;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		struct st_job j = { .id = "acked", .state = "PROGRAMMING", .created_ms = 1,
				    .updated_ms = 1 };
		struct st_circuit add[] = { { { 2, 3, 4, 5 }, "acked" } };
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

static void test_unknown_schema_refused(void **state)
{
	struct fixture *f = *state;
	struct st_store *st = open_store(f->path);
	sqlite3 *db;
	char err[256] = "";

	st_close(st);
	assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "UPDATE meta SET value = '7' WHERE key = 'schema_version'",
				      NULL, NULL, NULL),
			 SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(st_open(f->path, &st, err, sizeof(err)), -EPROTO);
	assert_null(st);
	assert_non_null(strstr(err, "schema version 7"));

	/* a version-1 file (no link tables) is upgraded in place, jobs kept */
	assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db,
				      "UPDATE meta SET value = '1' WHERE key = 'schema_version';"
				      "DROP TABLE job_links; DROP TABLE intent_links;"
				      "INSERT INTO jobs(id, state, created_ms, updated_ms, seq)"
				      " VALUES('old', 'ACTIVE', 1, 1, 1);",
				      NULL, NULL, NULL),
			 SQLITE_OK);
	sqlite3_close(db);
	st = open_store(f->path);
	assert_int_equal(all_links(st).n, 0);
	struct st_job j = { 0 };
	assert_int_equal(st_job_get(st, "old", &j), 0);
	st_job_clear(&j);
	st_close(st);
	assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
	sqlite3_stmt *q;
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = 'schema_version'",
					    -1, &q, NULL),
			 SQLITE_OK);
	assert_int_equal(sqlite3_step(q), SQLITE_ROW);
	assert_string_equal((const char *)sqlite3_column_text(q, 0), "2");
	sqlite3_finalize(q);
	sqlite3_close(db);
	assert_true(st_open("/nonexistent-dir/x.db", &st, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "cannot open /nonexistent-dir/x.db"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_jobs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_job_links, setup, teardown),
		cmocka_unit_test_setup_teardown(test_intents_and_circuits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_survives_kill, setup, teardown),
		cmocka_unit_test_setup_teardown(test_drained_devices, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unknown_schema_refused, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
