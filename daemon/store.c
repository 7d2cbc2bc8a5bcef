/*
 * store.c - the SQLite implementation of store.h.
 *
 * Schema (version 1):
 *   jobs(id PK, idempotency_key UNIQUE, state, reason, request BLOB,
 *        created_ms, updated_ms, seq)          seq keeps creation order
 *   intents(txn_id PK AUTOINCREMENT, job_id, state, detail, created_ms,
 *           finished_ms)
 *   intent_xcs(txn_id, op 'del'|'add', grp, device, in_port, out_port, job_id)
 *   circuits(grp, device, in_port PK together, out_port, job_id)
 *   drained(device PK)                     devices taking no new circuits
 *
 * Every write is one SQLite transaction; synchronous=FULL with WAL makes a
 * committed write survive power loss, which is what lets ocsd acknowledge a
 * job only after st_job_put() returned.
 */
#include "store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

/* 2 added intent_links and job_links (tables a version-1 file gains on open) */
#define ST_SCHEMA_VERSION 2

struct st_store {
	sqlite3 *db;
};

static const char *const schema_sql =
	"CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
	"CREATE TABLE IF NOT EXISTS jobs("
	" id TEXT PRIMARY KEY, idempotency_key TEXT UNIQUE, state TEXT NOT NULL,"
	" reason TEXT, request BLOB, created_ms INTEGER NOT NULL,"
	" updated_ms INTEGER NOT NULL, seq INTEGER NOT NULL);"
	"CREATE TABLE IF NOT EXISTS intents("
	" txn_id INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT NOT NULL,"
	" state TEXT NOT NULL, detail TEXT, created_ms INTEGER NOT NULL, finished_ms INTEGER);"
	"CREATE TABLE IF NOT EXISTS intent_xcs("
	" txn_id INTEGER NOT NULL REFERENCES intents(txn_id), op TEXT NOT NULL,"
	" grp INTEGER NOT NULL, device INTEGER NOT NULL, in_port INTEGER NOT NULL,"
	" out_port INTEGER NOT NULL, job_id TEXT);"
	"CREATE INDEX IF NOT EXISTS intent_xcs_txn ON intent_xcs(txn_id);"
	"CREATE TABLE IF NOT EXISTS circuits("
	" grp INTEGER NOT NULL, device INTEGER NOT NULL, in_port INTEGER NOT NULL,"
	" out_port INTEGER NOT NULL, job_id TEXT NOT NULL,"
	" PRIMARY KEY(grp, device, in_port));"
	"CREATE INDEX IF NOT EXISTS circuits_job ON circuits(job_id);"
	"CREATE TABLE IF NOT EXISTS drained(device TEXT PRIMARY KEY);"
	"CREATE TABLE IF NOT EXISTS intent_links("
	" txn_id INTEGER NOT NULL REFERENCES intents(txn_id), job_id TEXT NOT NULL,"
	" a INTEGER NOT NULL, b INTEGER NOT NULL, h INTEGER NOT NULL, links INTEGER NOT NULL);"
	"CREATE INDEX IF NOT EXISTS intent_links_txn ON intent_links(txn_id);"
	"CREATE TABLE IF NOT EXISTS job_links("
	" job_id TEXT NOT NULL, a INTEGER NOT NULL, b INTEGER NOT NULL, h INTEGER NOT NULL,"
	" links INTEGER NOT NULL, PRIMARY KEY(job_id, a, b, h));";

static const char *const intent_names[] = {
	[ST_INTENT_OPEN] = "open",
	[ST_INTENT_CONFIRMED] = "confirmed",
	[ST_INTENT_ROLLED_BACK] = "rolled_back",
	[ST_INTENT_FAILED] = "failed",
};

const char *st_intent_state_name(enum st_intent_state s)
{
	return (unsigned)s < sizeof(intent_names) / sizeof(intent_names[0]) ? intent_names[s]
									    : "unknown";
}

static enum st_intent_state intent_parse(const char *s)
{
	for (unsigned i = 0; i < sizeof(intent_names) / sizeof(intent_names[0]); i++)
		if (s && strcmp(s, intent_names[i]) == 0)
			return (enum st_intent_state)i;
	return ST_INTENT_FAILED;
}

/* Maps an SQLite result to the errno-style codes of this module. */
static int sql_rc(int rc)
{
	switch (rc) {
	case SQLITE_OK:
	case SQLITE_DONE:
	case SQLITE_ROW:
		return 0;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_CONSTRAINT:
		return -EEXIST;
	case SQLITE_FULL:
		return -ENOSPC;
	default:
		return -EIO;
	}
}

static int exec(struct st_store *st, const char *sql)
{
	return sql_rc(sqlite3_exec(st->db, sql, NULL, NULL, NULL));
}

static int prepare(struct st_store *st, const char *sql, sqlite3_stmt **stmt)
{
	return sql_rc(sqlite3_prepare_v2(st->db, sql, -1, stmt, NULL));
}

static void bind_text_or_null(sqlite3_stmt *s, int i, const char *v)
{
	if (v)
		sqlite3_bind_text(s, i, v, -1, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(s, i);
}

static char *column_dup(sqlite3_stmt *s, int i)
{
	const unsigned char *v = sqlite3_column_text(s, i);

	return v ? strdup((const char *)v) : NULL;
}

int st_open(const char *path, struct st_store **out, char *err, size_t err_len)
{
	struct st_store *st = calloc(1, sizeof(*st));
	sqlite3_stmt *s = NULL;
	int rc;

	*out = NULL;
	if (!st)
		return -ENOMEM;
	rc = sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
						 SQLITE_OPEN_FULLMUTEX,
			     NULL);
	if (rc != SQLITE_OK) {
		snprintf(err, err_len, "cannot open %s: %s", path,
			 st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc));
		goto fail;
	}
	sqlite3_busy_timeout(st->db, 5000);
	rc = sqlite3_exec(st->db,
			  "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;",
			  NULL, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(st->db, schema_sql, NULL, NULL, NULL);
	if (rc != SQLITE_OK) {
		snprintf(err, err_len, "%s: %s", path, sqlite3_errmsg(st->db));
		goto fail;
	}
	/* Refuse a file written by a newer schema rather than misread it. */
	if (prepare(st, "SELECT value FROM meta WHERE key = 'schema_version'", &s) == 0 &&
	    sqlite3_step(s) == SQLITE_ROW) {
		int version = sqlite3_column_int(s, 0);

		if (version == 1 &&
		    exec(st, "UPDATE meta SET value = '2' WHERE key = 'schema_version'") == 0)
			version = 2; /* upgraded: schema_sql just added the new tables */
		if (version != ST_SCHEMA_VERSION) {
			snprintf(err, err_len, "%s: schema version %d, this ocsd knows %d", path,
				 version, ST_SCHEMA_VERSION);
			rc = SQLITE_MISMATCH;
			goto fail;
		}
	} else if (exec(st, "INSERT OR IGNORE INTO meta VALUES('schema_version', '2')") != 0) {
		snprintf(err, err_len, "%s: %s", path, sqlite3_errmsg(st->db));
		rc = SQLITE_ERROR;
		goto fail;
	}
	sqlite3_finalize(s);
	*out = st;
	return 0;
fail:
	sqlite3_finalize(s);
	sqlite3_close(st->db);
	free(st);
	return rc == SQLITE_MISMATCH ? -EPROTO : sql_rc(rc) ? sql_rc(rc) : -EIO;
}

void st_close(struct st_store *st)
{
	if (!st)
		return;
	sqlite3_close(st->db);
	free(st);
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
	sqlite3_stmt *s;
	int rc = prepare(st,
			 "INSERT INTO jobs(id, idempotency_key, state, reason, request, created_ms,"
			 " updated_ms, seq) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7,"
			 " (SELECT COALESCE(MAX(seq), 0) + 1 FROM jobs))"
			 " ON CONFLICT(id) DO UPDATE SET idempotency_key = ?2, state = ?3,"
			 " reason = ?4, request = ?5, updated_ms = ?7",
			 &s);

	if (rc)
		return rc;
	sqlite3_bind_text(s, 1, job->id, -1, SQLITE_TRANSIENT);
	bind_text_or_null(s, 2, job->idempotency_key);
	sqlite3_bind_text(s, 3, job->state, -1, SQLITE_TRANSIENT);
	bind_text_or_null(s, 4, job->reason);
	if (job->request)
		sqlite3_bind_blob(s, 5, job->request, (int)job->request_len, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(s, 5);
	sqlite3_bind_int64(s, 6, job->created_ms);
	sqlite3_bind_int64(s, 7, job->updated_ms);
	rc = sql_rc(sqlite3_step(s));
	sqlite3_finalize(s);
	return rc;
}

int st_job_set_state(struct st_store *st, const char *id, const char *state, const char *reason,
		     int64_t updated_ms)
{
	sqlite3_stmt *s;
	int rc = prepare(st, "UPDATE jobs SET state = ?2, reason = ?3, updated_ms = ?4 WHERE id = ?1",
			 &s);

	if (rc)
		return rc;
	sqlite3_bind_text(s, 1, id, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(s, 2, state, -1, SQLITE_TRANSIENT);
	bind_text_or_null(s, 3, reason);
	sqlite3_bind_int64(s, 4, updated_ms);
	rc = sql_rc(sqlite3_step(s));
	if (rc == 0 && sqlite3_changes(st->db) == 0)
		rc = -ENOENT;
	sqlite3_finalize(s);
	return rc;
}

#define JOB_COLUMNS "id, idempotency_key, state, reason, request, created_ms, updated_ms"

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
	int rc = prepare(st, "SELECT " JOB_COLUMNS " FROM jobs WHERE id = ?1", &s);

	if (rc)
		return rc;
	sqlite3_bind_text(s, 1, id, -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		rc = read_job(s, job);
	else
		rc = rc == SQLITE_DONE ? -ENOENT : sql_rc(rc);
	sqlite3_finalize(s);
	return rc;
}

int st_job_by_key(struct st_store *st, const char *key, char **id)
{
	sqlite3_stmt *s;
	int rc = prepare(st, "SELECT id FROM jobs WHERE idempotency_key = ?1", &s);

	if (rc)
		return rc;
	sqlite3_bind_text(s, 1, key, -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		*id = column_dup(s, 0);
		rc = *id ? 0 : -ENOMEM;
	} else {
		rc = rc == SQLITE_DONE ? -ENOENT : sql_rc(rc);
	}
	sqlite3_finalize(s);
	return rc;
}

int st_job_list(struct st_store *st, int (*fn)(void *ctx, const struct st_job *job), void *ctx)
{
	sqlite3_stmt *s;
	int rc = prepare(st, "SELECT " JOB_COLUMNS " FROM jobs ORDER BY seq", &s);

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
	return sql_rc(rc);
}

static int insert_xc(sqlite3_stmt *s, int64_t txn, const char *op, const struct ocs_xc *xc,
		     const char *job_id)
{
	sqlite3_reset(s);
	sqlite3_bind_int64(s, 1, txn);
	sqlite3_bind_text(s, 2, op, -1, SQLITE_STATIC);
	sqlite3_bind_int(s, 3, xc->group);
	sqlite3_bind_int(s, 4, xc->device);
	sqlite3_bind_int(s, 5, xc->in);
	sqlite3_bind_int(s, 6, xc->out);
	bind_text_or_null(s, 7, job_id);
	return sql_rc(sqlite3_step(s));
}

static int insert_links(struct st_store *st, int64_t txn, const struct st_link *links,
			size_t n_links)
{
	sqlite3_stmt *s;
	int rc = prepare(st,
			 "INSERT INTO intent_links(txn_id, job_id, a, b, h, links)"
			 " VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
			 &s);

	for (size_t i = 0; rc == 0 && i < n_links; i++) {
		sqlite3_reset(s);
		sqlite3_bind_int64(s, 1, txn);
		sqlite3_bind_text(s, 2, links[i].job_id, -1, SQLITE_TRANSIENT);
		sqlite3_bind_int(s, 3, links[i].a);
		sqlite3_bind_int(s, 4, links[i].b);
		sqlite3_bind_int(s, 5, links[i].h);
		sqlite3_bind_int(s, 6, links[i].links);
		rc = sql_rc(sqlite3_step(s));
	}
	sqlite3_finalize(s);
	return rc;
}

int st_intent_begin(struct st_store *st, const char *job_id, const struct ocs_xc *removals,
		    size_t n_removals, const struct st_circuit *additions, size_t n_additions,
		    const struct st_link *links, size_t n_links, int64_t now_ms,
		    int64_t *txn_id)
{
	sqlite3_stmt *s = NULL;
	int64_t txn;
	int rc = exec(st, "BEGIN IMMEDIATE");

	if (rc)
		return rc;
	rc = prepare(st, "INSERT INTO intents(job_id, state, created_ms) VALUES(?1, 'open', ?2)", &s);
	if (rc)
		goto rollback;
	sqlite3_bind_text(s, 1, job_id, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(s, 2, now_ms);
	rc = sql_rc(sqlite3_step(s));
	sqlite3_finalize(s);
	s = NULL;
	if (rc)
		goto rollback;
	txn = sqlite3_last_insert_rowid(st->db);
	rc = prepare(st,
		     "INSERT INTO intent_xcs(txn_id, op, grp, device, in_port, out_port, job_id)"
		     " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
		     &s);
	for (size_t i = 0; rc == 0 && i < n_removals; i++)
		rc = insert_xc(s, txn, "del", &removals[i], NULL);
	for (size_t i = 0; rc == 0 && i < n_additions; i++)
		rc = insert_xc(s, txn, "add", &additions[i].xc, additions[i].job_id);
	sqlite3_finalize(s);
	if (rc == 0)
		rc = insert_links(st, txn, links, n_links);
	if (rc)
		goto rollback;
	rc = exec(st, "COMMIT");
	if (rc)
		goto rollback;
	*txn_id = txn;
	return 0;
rollback:
	exec(st, "ROLLBACK");
	return rc;
}

int st_intent_finish(struct st_store *st, int64_t txn_id, enum st_intent_state outcome,
		     const char *detail, int64_t now_ms)
{
	sqlite3_stmt *s = NULL;
	int rc;

	if (outcome == ST_INTENT_OPEN || (unsigned)outcome > ST_INTENT_FAILED)
		return -EINVAL;
	rc = exec(st, "BEGIN IMMEDIATE");
	if (rc)
		return rc;
	rc = prepare(st, "SELECT state FROM intents WHERE txn_id = ?1", &s);
	if (rc)
		goto rollback;
	sqlite3_bind_int64(s, 1, txn_id);
	rc = sqlite3_step(s);
	if (rc != SQLITE_ROW)
		rc = rc == SQLITE_DONE ? -ENOENT : sql_rc(rc);
	else
		rc = strcmp((const char *)sqlite3_column_text(s, 0), "open") == 0 ? 0 : -EALREADY;
	sqlite3_finalize(s);
	s = NULL;
	if (rc)
		goto rollback;
	rc = prepare(st, "UPDATE intents SET state = ?2, detail = ?3, finished_ms = ?4"
			 " WHERE txn_id = ?1",
		     &s);
	if (rc)
		goto rollback;
	sqlite3_bind_int64(s, 1, txn_id);
	sqlite3_bind_text(s, 2, st_intent_state_name(outcome), -1, SQLITE_STATIC);
	bind_text_or_null(s, 3, detail);
	sqlite3_bind_int64(s, 4, now_ms);
	rc = sql_rc(sqlite3_step(s));
	sqlite3_finalize(s);
	s = NULL;
	if (rc)
		goto rollback;
	if (outcome == ST_INTENT_CONFIRMED) {
		char sql[1024];

		/* Removals first: an addition may reuse an input port it frees. */
		snprintf(sql, sizeof(sql),
			 "DELETE FROM circuits WHERE (grp, device, in_port) IN"
			 " (SELECT grp, device, in_port FROM intent_xcs"
			 "  WHERE txn_id = %lld AND op = 'del');"
			 "INSERT INTO circuits(grp, device, in_port, out_port, job_id)"
			 " SELECT grp, device, in_port, out_port, job_id FROM intent_xcs"
			 " WHERE txn_id = %lld AND op = 'add';"
			 "DELETE FROM job_links WHERE job_id IN"
			 " (SELECT job_id FROM intents WHERE txn_id = %lld"
			 "  UNION SELECT job_id FROM intent_links WHERE txn_id = %lld);"
			 "INSERT INTO job_links(job_id, a, b, h, links)"
			 " SELECT job_id, a, b, h, links FROM intent_links WHERE txn_id = %lld;",
			 (long long)txn_id, (long long)txn_id, (long long)txn_id, (long long)txn_id,
			 (long long)txn_id);
		rc = exec(st, sql);
		if (rc)
			goto rollback;
	}
	rc = exec(st, "COMMIT");
	if (rc)
		goto rollback;
	return 0;
rollback:
	exec(st, "ROLLBACK");
	return rc;
}

void st_intent_clear(struct st_intent *in)
{
	if (!in)
		return;
	free(in->removals);
	free(in->additions);
	memset(in, 0, sizeof(*in));
}

static int read_intent_xcs(struct st_store *st, struct st_intent *in)
{
	sqlite3_stmt *s;
	size_t cap_del = 0, cap_add = 0;
	int rc = prepare(st,
			 "SELECT op, grp, device, in_port, out_port, job_id FROM intent_xcs"
			 " WHERE txn_id = ?1 ORDER BY rowid",
			 &s);

	if (rc)
		return rc;
	sqlite3_bind_int64(s, 1, in->txn_id);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct ocs_xc xc = { sqlite3_column_int(s, 1), sqlite3_column_int(s, 2),
				     sqlite3_column_int(s, 3), sqlite3_column_int(s, 4) };

		if (strcmp((const char *)sqlite3_column_text(s, 0), "del") == 0) {
			if (in->n_removals == cap_del) {
				size_t n = cap_del ? cap_del * 2 : 16;
				struct ocs_xc *p = realloc(in->removals, n * sizeof(*p));

				if (!p)
					goto oom;
				in->removals = p;
				cap_del = n;
			}
			in->removals[in->n_removals++] = xc;
		} else {
			const unsigned char *job = sqlite3_column_text(s, 5);

			if (in->n_additions == cap_add) {
				size_t n = cap_add ? cap_add * 2 : 16;
				struct st_circuit *p = realloc(in->additions, n * sizeof(*p));

				if (!p)
					goto oom;
				in->additions = p;
				cap_add = n;
			}
			in->additions[in->n_additions].xc = xc;
			snprintf(in->additions[in->n_additions].job_id,
				 sizeof(in->additions[0].job_id), "%s", job ? (const char *)job : "");
			in->n_additions++;
		}
	}
	sqlite3_finalize(s);
	return sql_rc(rc);
oom:
	sqlite3_finalize(s);
	return -ENOMEM;
}

int st_intent_list_open(struct st_store *st,
			int (*fn)(void *ctx, const struct st_intent *intent), void *ctx)
{
	sqlite3_stmt *s;
	int rc = prepare(st,
			 "SELECT txn_id, job_id, state FROM intents WHERE state = 'open'"
			 " ORDER BY txn_id",
			 &s);

	if (rc)
		return rc;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct st_intent in = { .txn_id = sqlite3_column_int64(s, 0) };
		int r;

		snprintf(in.job_id, sizeof(in.job_id), "%s", sqlite3_column_text(s, 1));
		in.state = intent_parse((const char *)sqlite3_column_text(s, 2));
		r = read_intent_xcs(st, &in);
		if (r == 0)
			r = fn(ctx, &in);
		st_intent_clear(&in);
		if (r) {
			sqlite3_finalize(s);
			return r;
		}
	}
	sqlite3_finalize(s);
	return sql_rc(rc);
}

int st_circuit_list(struct st_store *st, const char *job_id,
		    int (*fn)(void *ctx, const struct st_circuit *c), void *ctx)
{
	sqlite3_stmt *s;
	int rc = prepare(st,
			 "SELECT grp, device, in_port, out_port, job_id FROM circuits"
			 " WHERE ?1 IS NULL OR job_id = ?1 ORDER BY grp, device, in_port",
			 &s);

	if (rc)
		return rc;
	bind_text_or_null(s, 1, job_id);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct st_circuit c = { { sqlite3_column_int(s, 0), sqlite3_column_int(s, 1),
					  sqlite3_column_int(s, 2), sqlite3_column_int(s, 3) },
					"" };
		int r;

		snprintf(c.job_id, sizeof(c.job_id), "%s", sqlite3_column_text(s, 4));
		r = fn(ctx, &c);
		if (r) {
			sqlite3_finalize(s);
			return r;
		}
	}
	sqlite3_finalize(s);
	return sql_rc(rc);
}

int st_link_list(struct st_store *st, int (*fn)(void *ctx, const struct st_link *l), void *ctx)
{
	sqlite3_stmt *s;
	int rc = prepare(st, "SELECT job_id, a, b, h, links FROM job_links ORDER BY job_id, a, b, h",
			 &s);

	if (rc)
		return rc;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct st_link l = { "", sqlite3_column_int(s, 1), sqlite3_column_int(s, 2),
				     sqlite3_column_int(s, 3), sqlite3_column_int(s, 4) };
		int r;

		snprintf(l.job_id, sizeof(l.job_id), "%s", sqlite3_column_text(s, 0));
		r = fn(ctx, &l);
		if (r) {
			sqlite3_finalize(s);
			return r;
		}
	}
	sqlite3_finalize(s);
	return sql_rc(rc);
}

int st_drain_set(struct st_store *st, const char *device, bool drained)
{
	sqlite3_stmt *s;
	int rc = prepare(st, drained ? "INSERT OR IGNORE INTO drained(device) VALUES(?1)"
				     : "DELETE FROM drained WHERE device = ?1",
			 &s);

	if (rc)
		return rc;
	sqlite3_bind_text(s, 1, device, -1, SQLITE_TRANSIENT);
	rc = sql_rc(sqlite3_step(s));
	sqlite3_finalize(s);
	return rc;
}

int st_drain_list(struct st_store *st, int (*fn)(void *ctx, const char *device), void *ctx)
{
	sqlite3_stmt *s;
	int rc = prepare(st, "SELECT device FROM drained ORDER BY device", &s);

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
	return sql_rc(rc);
}
