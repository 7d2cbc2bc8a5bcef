/*
 * store_prune.c - retention (store.h, st_prune): finished jobs beyond the
 * count or age limit and finished intents past the age limit deleted in
 * one transaction of bounded size, never a job that still owns circuits,
 * rings or a part of an open intent.
 */
#include "store_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The rows st_prune() deletes in one transaction. */
struct prune_batch {
	char **job_ids; /* finished jobs, oldest first */
	size_t n_jobs, cap_jobs;
	int64_t *txn_ids; /* finished intents past the retention */
	size_t n_txns, cap_txns;
};

static void prune_batch_clear(struct prune_batch *b)
{
	for (size_t i = 0; i < b->n_jobs; i++)
		free(b->job_ids[i]);
	free(b->job_ids);
	free(b->txn_ids);
	memset(b, 0, sizeof(*b));
}

static int prune_add_job(struct prune_batch *b, const unsigned char *id)
{
	char *copy = id ? strdup((const char *)id) : NULL;
	char **ids = copy ? st_grow(b->job_ids, &b->cap_jobs, b->n_jobs, sizeof(*ids)) : NULL;

	if (!ids) {
		free(copy);
		return -ENOMEM;
	}
	b->job_ids = ids;
	b->job_ids[b->n_jobs++] = copy;
	return 0;
}

/* The errno-style code of a step that did not give the row it should have. */
static int step_error(int step_rc)
{
	int rc = st_sql_rc(step_rc);

	return rc ? rc : -EIO;
}

/*
 * Whether finished job id must stay anyway: it still owns circuits, or an
 * open intent names it (as its job, or as the owner of an addition or of
 * links). 1 stays, 0 may go, or a negative errno.
 */
static int prune_job_kept(struct st_store *st, sqlite3_stmt *kept, const unsigned char *id)
{
	int rc;

	st_rearm(kept);
	if (!id)
		return -ENOMEM;
	if (st_bind_text(kept, 1, (const char *)id))
		return st_bind_error(st);
	rc = sqlite3_step(kept);
	return rc == SQLITE_ROW ? sqlite3_column_int(kept, 0) != 0 : step_error(rc);
}

/*
 * The newest finished job that is not among the keep_jobs newest, as its
 * (updated_ms, seq): it and every finished job before it are in excess.
 * *found is false when there are no more than keep_jobs. Reads keep_jobs + 1
 * entries of the index jobs_finished, however many finished jobs there are.
 */
static int prune_boundary(struct st_store *st, size_t keep_jobs, bool *found, int64_t *updated_ms,
			  int64_t *seq)
{
	sqlite3_stmt *s;
	int rc = st_prepare(st,
			    "SELECT updated_ms, seq FROM jobs WHERE " ST_FINISHED_JOB
			    " ORDER BY updated_ms DESC, seq DESC LIMIT 1 OFFSET ?1",
			    &s);

	if (rc)
		return rc;
	*found = false;
	if (sqlite3_bind_int64(s, 1,
			       keep_jobs < INT64_MAX ? (sqlite3_int64)keep_jobs : INT64_MAX)) {
		rc = st_bind_error(st);
	} else {
		rc = sqlite3_step(s);
		*found = rc == SQLITE_ROW;
		if (*found) {
			*updated_ms = sqlite3_column_int64(s, 0);
			*seq = sqlite3_column_int64(s, 1);
		}
		rc = *found || rc == SQLITE_DONE ? 0 : step_error(rc);
	}
	sqlite3_finalize(s);
	return rc;
}

/*
 * Picks up to max finished jobs, oldest first, that are beyond the
 * keep_jobs newest or finished before cutoff_ms, skipping the ones that must
 * stay (prune_job_kept).
 */
static int prune_pick_jobs(struct st_store *st, int64_t cutoff_ms, size_t keep_jobs, size_t max,
			   struct prune_batch *b)
{
	sqlite3_stmt *walk = NULL, *kept = NULL;
	int64_t last_updated_ms = 0, last_seq = 0;
	bool excess = false;
	int rc = prune_boundary(st, keep_jobs, &excess, &last_updated_ms, &last_seq);

	if (rc == 0)
		rc = st_prepare(st,
				"SELECT id, updated_ms, seq FROM jobs WHERE " ST_FINISHED_JOB
				" ORDER BY updated_ms, seq",
				&walk);
	if (rc == 0)
		rc = st_prepare(
			st,
			"SELECT EXISTS(SELECT 1 FROM circuits WHERE job_id = ?1)"
			" OR EXISTS(SELECT 1 FROM rings WHERE job_id = ?1)"
			" OR EXISTS(SELECT 1 FROM intents WHERE state = 'open' AND job_id = ?1)"
			" OR EXISTS(SELECT 1 FROM intent_xcs WHERE job_id = ?1 AND txn_id IN"
			"  (SELECT txn_id FROM intents WHERE state = 'open'))"
			" OR EXISTS(SELECT 1 FROM intent_links WHERE job_id = ?1 AND txn_id IN"
			"  (SELECT txn_id FROM intents WHERE state = 'open'))"
			" OR EXISTS(SELECT 1 FROM intent_jobs WHERE job_id = ?1 AND txn_id IN"
			"  (SELECT txn_id FROM intents WHERE state = 'open'))",
			&kept);
	/* Oldest first: once a row is neither in excess nor too old, no later one is. */
	while (rc == 0 && b->n_jobs < max) {
		int step = sqlite3_step(walk);
		int64_t updated_ms, seq;

		if (step != SQLITE_ROW) {
			rc = step == SQLITE_DONE ? 0 : step_error(step);
			break;
		}
		updated_ms = sqlite3_column_int64(walk, 1);
		seq = sqlite3_column_int64(walk, 2);
		excess = excess && (updated_ms < last_updated_ms ||
				    (updated_ms == last_updated_ms && seq <= last_seq));
		if (!excess && updated_ms >= cutoff_ms)
			break;
		rc = prune_job_kept(st, kept, sqlite3_column_text(walk, 0));
		if (rc == 0)
			rc = prune_add_job(b, sqlite3_column_text(walk, 0));
		else if (rc == 1)
			rc = 0;
	}
	sqlite3_finalize(walk);
	sqlite3_finalize(kept);
	return rc;
}

/* Picks up to max intents that finished before cutoff_ms, oldest first. */
static int prune_pick_intents(struct st_store *st, int64_t cutoff_ms, size_t max,
			      struct prune_batch *b)
{
	sqlite3_stmt *s;
	int rc = st_prepare(st,
			    "SELECT txn_id FROM intents WHERE state <> 'open' AND finished_ms < ?1"
			    " ORDER BY finished_ms",
			    &s);

	if (rc)
		return rc;
	if (sqlite3_bind_int64(s, 1, cutoff_ms)) {
		rc = st_bind_error(st);
		sqlite3_finalize(s);
		return rc;
	}
	while (b->n_txns < max) {
		int step = sqlite3_step(s);
		int64_t *txns;

		if (step != SQLITE_ROW) {
			rc = step == SQLITE_DONE ? 0 : step_error(step);
			break;
		}
		txns = st_grow(b->txn_ids, &b->cap_txns, b->n_txns, sizeof(*txns));

		if (!txns) {
			rc = -ENOMEM;
			break;
		}
		b->txn_ids = txns;
		b->txn_ids[b->n_txns++] = sqlite3_column_int64(s, 0);
	}
	sqlite3_finalize(s);
	return rc;
}

#define N_JOB_DELETES	 13
#define N_INTENT_DELETES 10
_Static_assert(N_INTENT_DELETES <= N_JOB_DELETES, "delete_each holds N_JOB_DELETES statements");

/*
 * Runs each statement of sql (n_sql, at most N_JOB_DELETES) once for every
 * key, ?1 bound to job_ids[k], or to txn_ids[k] when job_ids is NULL. Each
 * statement is prepared once, on first use.
 */
static int delete_each(struct st_store *st, const char *const *sql, size_t n_sql,
		       char *const *job_ids, const int64_t *txn_ids, size_t n_keys)
{
	sqlite3_stmt *stmts[N_JOB_DELETES] = {NULL};
	int rc = 0;

	for (size_t k = 0; rc == 0 && k < n_keys; k++)
		for (size_t i = 0; rc == 0 && i < n_sql; i++) {
			rc = stmts[i] ? 0 : st_prepare(st, sql[i], &stmts[i]);
			if (rc)
				break;
			st_rearm(stmts[i]);
			if (job_ids ? st_bind_text(stmts[i], 1, job_ids[k])
				    : sqlite3_bind_int64(stmts[i], 1, txn_ids[k]))
				rc = st_bind_error(st);
			else
				rc = st_sql_rc(sqlite3_step(stmts[i]));
		}
	for (size_t i = 0; i < n_sql; i++)
		sqlite3_finalize(stmts[i]);
	return rc;
}

/* Deletes the picked jobs, children before their parents (foreign keys). */
static int prune_delete_jobs(struct st_store *st, const struct prune_batch *b)
{
	static const char *const sql[N_JOB_DELETES] = {
		"DELETE FROM intent_xcs WHERE txn_id IN"
		" (SELECT txn_id FROM intents WHERE job_id = ?1)",
		"DELETE FROM intent_links WHERE txn_id IN"
		" (SELECT txn_id FROM intents WHERE job_id = ?1)",
		"DELETE FROM intent_rings WHERE txn_id IN"
		" (SELECT txn_id FROM intents WHERE job_id = ?1)",
		"DELETE FROM intent_bundles WHERE txn_id IN"
		" (SELECT txn_id FROM intents WHERE job_id = ?1)",
		"DELETE FROM ring_intents WHERE txn_id IN"
		" (SELECT txn_id FROM intents WHERE job_id = ?1)",
		"DELETE FROM intent_decisions WHERE txn_id IN"
		" (SELECT txn_id FROM intents WHERE job_id = ?1)",
		"DELETE FROM intent_jobs WHERE txn_id IN"
		" (SELECT txn_id FROM intents WHERE job_id = ?1)",
		"DELETE FROM intents WHERE job_id = ?1",
		"DELETE FROM job_links WHERE job_id = ?1",
		"DELETE FROM rings WHERE job_id = ?1",
		"DELETE FROM job_figures WHERE job_id = ?1",
		"DELETE FROM rail_job_moves WHERE job_id = ?1",
		"DELETE FROM jobs WHERE id = ?1",
	};

	return delete_each(st, sql, N_JOB_DELETES, b->job_ids, NULL, b->n_jobs);
}

static int prune_delete_intents(struct st_store *st, const struct prune_batch *b)
{
	static const char *const sql[N_INTENT_DELETES] = {
		"DELETE FROM intent_xcs WHERE txn_id = ?1",
		"DELETE FROM intent_links WHERE txn_id = ?1",
		"DELETE FROM intent_rings WHERE txn_id = ?1",
		"DELETE FROM intent_bundles WHERE txn_id = ?1",
		"DELETE FROM ring_intents WHERE txn_id = ?1",
		"DELETE FROM rail_intent_moves WHERE txn_id = ?1",
		"DELETE FROM rail_intents WHERE txn_id = ?1",
		"DELETE FROM intent_decisions WHERE txn_id = ?1",
		"DELETE FROM intent_jobs WHERE txn_id = ?1",
		"DELETE FROM intents WHERE txn_id = ?1",
	};

	return delete_each(st, sql, N_INTENT_DELETES, NULL, b->txn_ids, b->n_txns);
}

int st_prune(struct st_store *st, int64_t now_ms, int64_t keep_ms, size_t keep_jobs,
	     size_t max_rows, size_t *n_deleted,
	     void (*on_job_deleted)(void *ctx, const char *job_id), void *ctx)
{
	struct prune_batch b = {0};
	int64_t cutoff_ms;
	int rc;

	*n_deleted = 0;
	if (now_ms < 0 || keep_ms < 0 || max_rows == 0)
		return -EINVAL;
	cutoff_ms = now_ms - keep_ms; /* both >= 0: cannot overflow */
	rc = st_write_begin(st);
	if (rc)
		return rc;
	rc = prune_pick_jobs(st, cutoff_ms, keep_jobs, max_rows, &b);
	if (rc == 0)
		rc = prune_delete_jobs(st, &b);
	/* After the jobs: their intents are gone already, none is counted twice. */
	if (rc == 0)
		rc = prune_pick_intents(st, cutoff_ms, max_rows - b.n_jobs, &b);
	if (rc == 0)
		rc = prune_delete_intents(st, &b);
	rc = st_write_end(st, rc);
	if (rc) {
		prune_batch_clear(&b);
		return rc;
	}
	*n_deleted = b.n_jobs + b.n_txns;
	for (size_t i = 0; on_job_deleted && i < b.n_jobs; i++)
		on_job_deleted(ctx, b.job_ids[i]);
	prune_batch_clear(&b);
	return 0;
}
