/*
 * test_store_fixture.c - the helpers test_store.c and test_store_schema.c
 * share (test_store_fixture.h): the per-test directory, the store opened
 * on it, list collectors, a plain SQLite connection to the same file, and
 * jobs and intents put in for a test.
 */
#include "test_store_fixture.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	snprintf(f->dir, sizeof(f->dir), "/tmp/ocsd-store-XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->path, sizeof(f->path), "%s/state.db", f->dir);
	*state = f;
	return 0;
}

int teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	if (system(cmd) != 0)
		return -1;
	free(f);
	return 0;
}

struct st_store *open_store(const char *path)
{
	struct st_store *st = NULL;
	char err[256];

	if (st_open(path, &st, err, sizeof(err)) != 0)
		fail_msg("st_open: %s", err);
	return st;
}

int count_job(void *ctx, const struct st_job *job)
{
	char *ids = ctx;

	strcat(ids, job->id);
	strcat(ids, ",");
	return 0;
}

int collect_circuit(void *ctx, const struct st_circuit *c)
{
	struct circuits *cs = ctx;

	if (cs->n < 16)
		cs->items[cs->n] = *c;
	cs->n++;
	return 0;
}

int collect_intent(void *ctx, const struct st_intent *in)
{
	struct st_intent *out = ctx;

	out->txn_id = in->txn_id;
	snprintf(out->job_id, sizeof(out->job_id), "%s", in->job_id);
	out->n_removals = in->n_removals;
	out->n_additions = in->n_additions;
	out->decided = in->decided;
	return 0;
}

static int collect_link(void *ctx, const struct st_link *l)
{
	struct links *ls = ctx;

	if (ls->n == 16)
		return -ENOSPC;
	ls->items[ls->n++] = *l;
	return 0;
}

struct links all_links(struct st_store *st)
{
	struct links ls = {0};

	assert_int_equal(st_link_list(st, collect_link, &ls), 0);
	return ls;
}

/* ---- helpers on a second, plain SQLite connection to the same file ---- */

sqlite3 *raw_open(const char *path)
{
	sqlite3 *db = NULL;

	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	sqlite3_busy_timeout(db, 5000);
	return db;
}

void raw_exec(const char *path, const char *sql)
{
	sqlite3 *db = raw_open(path);
	char *msg = NULL;

	if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
		fail_msg("%s: %s", sql, msg);
	sqlite3_close(db);
}

/* The single integer sql returns. */
long raw_long(const char *path, const char *sql)
{
	sqlite3 *db = raw_open(path);
	sqlite3_stmt *q;
	long v;

	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &q, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(q), SQLITE_ROW);
	v = (long)sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	sqlite3_close(db);
	return v;
}

/* Puts job id (created at 1, updated at updated_ms) into the store. */
void put_job(struct st_store *st, const char *id, const char *key, const char *state,
	     int64_t updated_ms)
{
	struct st_job j = {.id = (char *)id,
			   .idempotency_key = (char *)key,
			   .state = (char *)state,
			   .created_ms = 1,
			   .updated_ms = updated_ms};

	assert_int_equal(st_job_put(st, &j), 0);
}

/* A finished intent of job_id (confirmed at finished_ms) with one addition and one link. */
int64_t finished_intent(struct st_store *st, const char *job_id, int64_t finished_ms,
			enum st_intent_state outcome)
{
	struct st_circuit add = {{0, 0, 1, 2}, ""};
	struct st_link link = {"", 0, 1, 0, 1};
	int64_t t;

	snprintf(add.job_id, sizeof(add.job_id), "%s", job_id);
	snprintf(link.job_id, sizeof(link.job_id), "%s", job_id);
	/* a confirmed addition would become a circuit: keep it a removal then */
	if (outcome == ST_INTENT_CONFIRMED)
		assert_int_equal(st_intent_begin(st, job_id, &add.xc, 1, NULL, 0, &link, 1,
						 finished_ms - 1, &t),
				 0);
	else
		assert_int_equal(st_intent_begin(st, job_id, NULL, 0, &add, 1, &link, 1,
						 finished_ms - 1, &t),
				 0);
	assert_int_equal(st_intent_finish(st, t, outcome, NULL, finished_ms), 0);
	return t;
}
