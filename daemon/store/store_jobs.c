/*
 * store_jobs.c - the store's job table (store.h: st_job_*), the drained
 * devices, each job's plan figures and the emptiness check adopt.c makes
 * at start. Every write is one transaction of store.c (st_step_write).
 */
#include "store_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static char *column_dup(sqlite3_stmt *s, int i)
{
	const unsigned char *v = sqlite3_column_text(s, i);

	return v ? strdup((const char *)v) : NULL;
}

void st_job_clear(struct st_job *job)
{
	if (!job)
		return;
	free(job->id);
	free(job->idempotency_key);
	free(job->state);
	free(job->reason);
	free(job->request);
	memset(job, 0, sizeof(*job));
}

int st_job_put(struct st_store *st, const struct st_job *job)
{
	return st_job_put_many(st, job, 1);
}

int st_job_put_many(struct st_store *st, const struct st_job *jobs, size_t n)
{
	sqlite3_stmt *s = NULL;
	int rc = st_write_begin(st);

	if (rc)
		return rc;
	rc = st_prepare(st,
			"INSERT INTO jobs(id, idempotency_key, state, reason, request, created_ms,"
			" updated_ms, seq) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7,"
			" (SELECT COALESCE(MAX(seq), 0) + 1 FROM jobs))"
			" ON CONFLICT(id) DO UPDATE SET idempotency_key = ?2, state = ?3,"
			" reason = ?4, request = ?5, updated_ms = ?7",
			&s);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		const struct st_job *job = &jobs[i];

		if (!job->id || !job->state)
			rc = -EINVAL;
		else if (sqlite3_reset(s) || st_bind_text(s, 1, job->id) ||
			 st_bind_text(s, 2, job->idempotency_key) ||
			 st_bind_text(s, 3, job->state) || st_bind_text(s, 4, job->reason) ||
			 (job->request ? sqlite3_bind_blob64(s, 5, job->request, job->request_len,
							     SQLITE_STATIC)
				       : sqlite3_bind_null(s, 5)) ||
			 sqlite3_bind_int64(s, 6, job->created_ms) ||
			 sqlite3_bind_int64(s, 7, job->updated_ms))
			rc = st_bind_error(st);
		else
			rc = st_sql_rc(sqlite3_step(s));
	}
	sqlite3_finalize(s);
	return st_write_end(st, rc);
}

/* The job states of rows, inside the caller's write transaction. */
int st_write_job_states(struct st_store *st, const struct st_job_state *rows, size_t n)
{
	sqlite3_stmt *s = NULL;
	int rc = st_prepare(
		st, "UPDATE jobs SET state = ?2, reason = ?3, updated_ms = ?4 WHERE id = ?1", &s);

	for (size_t i = 0; rc == 0 && i < n; i++) {
		if (!rows[i].id || !rows[i].state)
			rc = -EINVAL;
		else if (sqlite3_reset(s) || st_bind_text(s, 1, rows[i].id) ||
			 st_bind_text(s, 2, rows[i].state) || st_bind_text(s, 3, rows[i].reason) ||
			 sqlite3_bind_int64(s, 4, rows[i].updated_ms))
			rc = st_bind_error(st);
		else
			rc = st_sql_rc(sqlite3_step(s));
		if (rc == 0 && sqlite3_changes(st->db) == 0)
			rc = -ENOENT;
	}
	sqlite3_finalize(s);
	return rc;
}

int st_job_set_state(struct st_store *st, const char *id, const char *state, const char *reason,
		     int64_t updated_ms)
{
	struct st_job_state row = {id, state, reason, updated_ms};

	return st_job_set_states(st, &row, 1);
}

int st_job_set_states(struct st_store *st, const struct st_job_state *rows, size_t n)
{
	int rc = st_write_begin(st);

	if (rc)
		return rc;
	return st_write_end(st, st_write_job_states(st, rows, n));
}

#define JOB_COLUMNS "id, idempotency_key, state, reason, request, created_ms, updated_ms, seq"

static int read_job(sqlite3_stmt *s, struct st_job *job)
{
	const void *blob = sqlite3_column_blob(s, 4);
	int n = sqlite3_column_bytes(s, 4);

	memset(job, 0, sizeof(*job));
	job->id = column_dup(s, 0);
	job->idempotency_key = column_dup(s, 1);
	job->state = column_dup(s, 2);
	job->reason = column_dup(s, 3);
	job->created_ms = sqlite3_column_int64(s, 5);
	job->updated_ms = sqlite3_column_int64(s, 6);
	job->seq = sqlite3_column_int64(s, 7);
	if (blob && n > 0) {
		job->request = malloc((size_t)n);
		if (job->request) {
			memcpy(job->request, blob, (size_t)n);
			job->request_len = (size_t)n;
		}
	}
	if (!job->id || !job->state || (blob && n > 0 && !job->request)) {
		st_job_clear(job);
		return -ENOMEM;
	}
	return 0;
}

int st_job_get(struct st_store *st, const char *id, struct st_job *job)
{
	sqlite3_stmt *s;
	int rc = st_prepare(st, "SELECT " JOB_COLUMNS " FROM jobs WHERE id = ?1", &s);

	if (rc)
		return rc;
	if (st_bind_text(s, 1, id)) {
		rc = st_bind_error(st);
		sqlite3_finalize(s);
		return rc;
	}
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		rc = read_job(s, job);
	else
		rc = rc == SQLITE_DONE ? -ENOENT : st_sql_rc(rc);
	sqlite3_finalize(s);
	return rc;
}

int st_job_by_key(struct st_store *st, const char *key, char **id)
{
	sqlite3_stmt *s;
	int rc = st_prepare(st, "SELECT id FROM jobs WHERE idempotency_key = ?1", &s);

	if (rc)
		return rc;
	if (st_bind_text(s, 1, key)) {
		rc = st_bind_error(st);
		sqlite3_finalize(s);
		return rc;
	}
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		*id = column_dup(s, 0);
		rc = *id ? 0 : -ENOMEM;
	} else {
		rc = rc == SQLITE_DONE ? -ENOENT : st_sql_rc(rc);
	}
	sqlite3_finalize(s);
	return rc;
}

int st_job_list(struct st_store *st, int (*fn)(void *ctx, const struct st_job *job), void *ctx)
{
	sqlite3_stmt *s;
	int rc = st_prepare(st, "SELECT " JOB_COLUMNS " FROM jobs ORDER BY seq", &s);

	if (rc)
		return rc;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct st_job job;
		int r = read_job(s, &job);

		if (r == 0) {
			r = fn(ctx, &job);
			st_job_clear(&job);
		}
		if (r) {
			sqlite3_finalize(s);
			return r;
		}
	}
	sqlite3_finalize(s);
	return st_sql_rc(rc);
}
int st_drain_set(struct st_store *st, const char *device, bool drained)
{
	sqlite3_stmt *s;
	int rc = st_prepare(st,
			    drained ? "INSERT OR IGNORE INTO drained(device) VALUES(?1)"
				    : "DELETE FROM drained WHERE device = ?1",
			    &s);

	if (rc)
		return rc;
	if (!device)
		rc = -EINVAL;
	else if (st_bind_text(s, 1, device))
		rc = st_bind_error(st);
	else
		rc = st_step_write(st, s);
	sqlite3_finalize(s);
	return rc;
}

int st_drain_list(struct st_store *st, int (*fn)(void *ctx, const char *device), void *ctx)
{
	sqlite3_stmt *s;
	int rc = st_prepare(st, "SELECT device FROM drained ORDER BY device", &s);

	if (rc)
		return rc;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		int r = fn(ctx, (const char *)sqlite3_column_text(s, 0));

		if (r) {
			sqlite3_finalize(s);
			return r;
		}
	}
	sqlite3_finalize(s);
	return st_sql_rc(rc);
}

/* ---- plan figures and emptiness (version 5) ---- */

int st_figures_put(struct st_store *st, const char *job_id, const char *figures)
{
	sqlite3_stmt *s;
	int rc = st_prepare(
		st, "INSERT OR REPLACE INTO job_figures(job_id, figures) VALUES(?1, ?2)", &s);

	if (rc)
		return rc;
	if (!job_id || !figures)
		rc = -EINVAL;
	else if (st_bind_text(s, 1, job_id) || st_bind_text(s, 2, figures))
		rc = st_bind_error(st);
	else
		rc = st_step_write(st, s);
	sqlite3_finalize(s);
	return rc;
}

int st_figures_put_states(struct st_store *st, const char *const *figures,
			  const struct st_job_state *states, size_t n)
{
	sqlite3_stmt *s = NULL;
	int rc = st_write_begin(st);

	if (rc)
		return rc;
	rc = st_prepare(st, "INSERT OR REPLACE INTO job_figures(job_id, figures) VALUES(?1, ?2)",
			&s);
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = !states[i].id || !figures[i] ? -EINVAL
		     : sqlite3_reset(s) || st_bind_text(s, 1, states[i].id) ||
				     st_bind_text(s, 2, figures[i])
			     ? st_bind_error(st)
			     : st_sql_rc(sqlite3_step(s));
	sqlite3_finalize(s);
	if (rc == 0)
		rc = st_write_job_states(st, states, n);
	return st_write_end(st, rc);
}

int st_figures_list(struct st_store *st,
		    int (*fn)(void *ctx, const char *job_id, const char *figures), void *ctx)
{
	sqlite3_stmt *s;
	int rc = st_prepare(st, "SELECT job_id, figures FROM job_figures", &s);

	if (rc)
		return rc;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		int r = fn(ctx, (const char *)sqlite3_column_text(s, 0),
			   (const char *)sqlite3_column_text(s, 1));

		if (r) {
			sqlite3_finalize(s);
			return r;
		}
	}
	sqlite3_finalize(s);
	return st_sql_rc(rc);
}

int st_figures_get(struct st_store *st, const char *job_id, char **figures)
{
	sqlite3_stmt *s;
	int rc = st_prepare(st, "SELECT figures FROM job_figures WHERE job_id = ?1", &s);

	*figures = NULL;
	if (rc)
		return rc;
	if (st_bind_text(s, 1, job_id)) {
		rc = st_bind_error(st);
		sqlite3_finalize(s);
		return rc;
	}
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		*figures = column_dup(s, 0);
		rc = *figures ? 0 : -ENOMEM;
	} else {
		rc = rc == SQLITE_DONE ? -ENOENT : st_sql_rc(rc);
	}
	sqlite3_finalize(s);
	return rc;
}

int st_is_empty(struct st_store *st, bool *empty)
{
	sqlite3_stmt *s;
	int rc = st_prepare(
		st, "SELECT EXISTS(SELECT 1 FROM jobs) OR EXISTS(SELECT 1 FROM circuits)", &s);

	if (rc)
		return rc;
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		*empty = sqlite3_column_int(s, 0) == 0;
	rc = st_sql_rc(rc);
	sqlite3_finalize(s);
	return rc;
}
