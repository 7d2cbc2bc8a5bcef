/*
 * store.c - the SQLite connection behind store.h: the schema and its
 * migrations, opening and closing, the SQL helpers and the write
 * transaction every write of the store goes through, the hooks of a
 * replicated store (its log entries built and applied, a confirm's
 * circuits derived: store_repl.h) and whole-database images. The reads
 * and writes of the tables are in store_jobs.c, store_intents.c,
 * store_rings.c, store_rail.c, store_faults.c and store_prune.c (what they
 * share: store_internal.h).
 *
 * Schema (version 8):
 *   meta(key PK, value)                     'schema_version'
 *   jobs(id PK, idempotency_key UNIQUE, state, reason, request BLOB,
 *        created_ms, updated_ms, seq)       seq keeps creation order
 *   intents(txn_id PK AUTOINCREMENT, job_id, state, detail, created_ms,
 *           finished_ms)
 *   intent_decisions(txn_id PK, decided_ms) intents whose commit was decided
 *                                           (st_intent_decide): confirms follow
 *   intent_xcs(id PK, txn_id, op 'del'|'add', grp, device, in_port, out_port, job_id)
 *   intent_links(id PK, txn_id, job_id, a, b, h, links)  links an intent gives jobs
 *   intent_jobs(id PK, txn_id, job_id)      every job of a wave's intent (one
 *                                           transaction for several jobs: jobs.c);
 *                                           intents.job_id is the wave's first
 *   circuits(grp, device, in_port PK together, out_port, job_id)
 *   job_links(job_id, a, b, h PK together, links)  links of confirmed plans
 *   drained(device PK)                      devices taking no new circuits
 *   rings(job_id, ring PK together, nodes 'n,n,..', last_change, failed_node,
 *         reason, changed_ms)               rings of confirmed transactions
 *   node_faults(node PK, source, since_ms)  faulty nodes of a ring domain
 *   ring_intents(txn_id PK)                 intents that set their job's rings
 *   intent_rings(id PK, txn_id, ring, nodes, last_change, failed_node, reason)
 *                                           the rings an intent gives its job
 *   intent_bundles(id PK, txn_id, node, bundle, path, distance, dir)
 *                                           every bundle setting it programs
 *   job_figures(job_id PK, figures)         the figures of the plan a job was
 *                                           last programmed with (text, jobs_util.c)
 *   rail_gpu_faults(gpu PK, source, since_ms)  faulty GPUs of a rail-OCS fabric
 *   rail_intents(txn_id PK, gpu, kind, source, since_ms)
 *                                           intents that swap a GPU out
 *   rail_intent_moves(txn_id, rail_port PK together, old_gpu, new_gpu, job_id)
 *                                           the rail ports a swap re-joins
 *   rail_job_moves(job_id, txn_id, rail_port PK together, old_gpu, new_gpu,
 *                  moved_ms)                the GPUs jobs hold after swaps
 *
 * Indexes: the job id and the idempotency key are looked up through the
 * indexes SQLite keeps for PRIMARY KEY and UNIQUE (sqlite_autoindex_jobs_1
 * and _2); the others are named below. test_store.c checks the query plans.
 *
 * Versions: 2 added intent_links and job_links; 3 added the indexes jobs_seq
 * (creation order: st_job_put's next seq, st_job_list), jobs_finished,
 * intents_job, intents_open and intents_finished (st_prune, recovery); 4
 * added the ring tables (OCSTrx ring domains); 5 added job_figures and the
 * rail tables (rail-OCS fabrics); 6 gave intent_xcs, intent_links,
 * intent_rings and intent_bundles an id INTEGER PRIMARY KEY (SQLite's
 * session extension, which replicated stores use, skips tables without
 * one); 7 added intent_decisions (a table rather than a column of intents:
 * a changeset applies only to a table of the same columns, so the log
 * entries an older ocsd wrote to etcd still apply to a new copy); 8 added
 * intent_jobs (waves: one intent for several jobs). An
 * older file is upgraded in place at open, in one transaction with the new
 * version number; a newer one is refused. An older snapshot image is
 * upgraded the same way when a replica loads it (st_image_load).
 *
 * sqlite3_finalize()'s result is not checked: it repeats the error of the
 * statement's last sqlite3_step(), which every caller already checked.
 *
 * Every write is one SQLite transaction; synchronous=FULL with WAL makes a
 * committed write survive power loss, which is what lets ocsd acknowledge a
 * job only after st_job_put() returned. On a replicated store (--store
 * etcd: store_repl.h, store_etcd.c) the copy is in memory and a write is
 * durable once its changeset is in etcd, which st_write_commit() waits for.
 */
#include "store_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ST_SCHEMA_VERSION 8
/* How long a write waits for another connection's lock by default. */
#define ST_BUSY_TIMEOUT_MS 5000

/* Every statement is idempotent: it creates what a file of any older version lacks. */
static const char *const schema_sql =
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
	/* version 2 */
	"CREATE TABLE IF NOT EXISTS intent_links("
	" txn_id INTEGER NOT NULL REFERENCES intents(txn_id), job_id TEXT NOT NULL,"
	" a INTEGER NOT NULL, b INTEGER NOT NULL, h INTEGER NOT NULL, links INTEGER NOT NULL);"
	"CREATE INDEX IF NOT EXISTS intent_links_txn ON intent_links(txn_id);"
	"CREATE TABLE IF NOT EXISTS job_links("
	" job_id TEXT NOT NULL, a INTEGER NOT NULL, b INTEGER NOT NULL, h INTEGER NOT NULL,"
	" links INTEGER NOT NULL, PRIMARY KEY(job_id, a, b, h));"
	/* version 3 */
	"CREATE INDEX IF NOT EXISTS jobs_seq ON jobs(seq);"
	/* state too: counting the finished jobs reads this index alone */
	"CREATE INDEX IF NOT EXISTS jobs_finished ON jobs(updated_ms, seq, state) "
	"WHERE " ST_FINISHED_JOB ";"
	"CREATE INDEX IF NOT EXISTS intents_job ON intents(job_id);"
	"CREATE INDEX IF NOT EXISTS intents_open ON intents(txn_id) WHERE state = 'open';"
	"CREATE INDEX IF NOT EXISTS intents_finished ON intents(finished_ms)"
	" WHERE state <> 'open';"
	/* version 4 */
	"CREATE TABLE IF NOT EXISTS rings("
	" job_id TEXT NOT NULL, ring INTEGER NOT NULL, nodes TEXT NOT NULL,"
	" last_change TEXT NOT NULL, failed_node INTEGER NOT NULL, reason TEXT,"
	" changed_ms INTEGER NOT NULL, PRIMARY KEY(job_id, ring));"
	"CREATE TABLE IF NOT EXISTS node_faults("
	" node INTEGER PRIMARY KEY, source TEXT NOT NULL, since_ms INTEGER NOT NULL);"
	"CREATE TABLE IF NOT EXISTS ring_intents("
	" txn_id INTEGER PRIMARY KEY REFERENCES intents(txn_id));"
	"CREATE TABLE IF NOT EXISTS intent_rings("
	" txn_id INTEGER NOT NULL REFERENCES intents(txn_id), ring INTEGER NOT NULL,"
	" nodes TEXT NOT NULL, last_change TEXT NOT NULL, failed_node INTEGER NOT NULL,"
	" reason TEXT, changed_ms INTEGER NOT NULL);"
	"CREATE INDEX IF NOT EXISTS intent_rings_txn ON intent_rings(txn_id);"
	"CREATE TABLE IF NOT EXISTS intent_bundles("
	" txn_id INTEGER NOT NULL REFERENCES intents(txn_id), node INTEGER NOT NULL,"
	" bundle INTEGER NOT NULL, path INTEGER NOT NULL, distance INTEGER NOT NULL,"
	" dir INTEGER NOT NULL);"
	"CREATE INDEX IF NOT EXISTS intent_bundles_txn ON intent_bundles(txn_id);"
	/* version 5 */
	"CREATE TABLE IF NOT EXISTS job_figures("
	" job_id TEXT PRIMARY KEY, figures TEXT NOT NULL);"
	"CREATE TABLE IF NOT EXISTS rail_gpu_faults("
	" gpu INTEGER PRIMARY KEY, source TEXT NOT NULL, since_ms INTEGER NOT NULL);"
	"CREATE TABLE IF NOT EXISTS rail_intents("
	" txn_id INTEGER PRIMARY KEY REFERENCES intents(txn_id), gpu INTEGER NOT NULL,"
	" kind TEXT NOT NULL, source TEXT NOT NULL, since_ms INTEGER NOT NULL);"
	"CREATE TABLE IF NOT EXISTS rail_intent_moves("
	" txn_id INTEGER NOT NULL REFERENCES intents(txn_id), rail_port INTEGER NOT NULL,"
	" old_gpu INTEGER NOT NULL, new_gpu INTEGER NOT NULL, job_id TEXT NOT NULL,"
	" PRIMARY KEY(txn_id, rail_port));"
	"CREATE TABLE IF NOT EXISTS rail_job_moves("
	" job_id TEXT NOT NULL, txn_id INTEGER NOT NULL, rail_port INTEGER NOT NULL,"
	" old_gpu INTEGER NOT NULL, new_gpu INTEGER NOT NULL, moved_ms INTEGER NOT NULL,"
	" PRIMARY KEY(job_id, txn_id, rail_port));"
	/* version 7 */
	"CREATE TABLE IF NOT EXISTS intent_decisions("
	" txn_id INTEGER PRIMARY KEY REFERENCES intents(txn_id), decided_ms INTEGER NOT NULL);"
	/* version 8 */
	"CREATE TABLE IF NOT EXISTS intent_jobs(id INTEGER PRIMARY KEY,"
	" txn_id INTEGER NOT NULL REFERENCES intents(txn_id), job_id TEXT NOT NULL);"
	"CREATE INDEX IF NOT EXISTS intent_jobs_txn ON intent_jobs(txn_id);"
	"CREATE INDEX IF NOT EXISTS intent_jobs_job ON intent_jobs(job_id);";

/*
 * Version 6 (replicated stores, docs/replicas.md): SQLite's session
 * extension, which records each write as a changeset, skips tables without
 * a PRIMARY KEY, so the four intent detail tables are rebuilt with an id
 * INTEGER PRIMARY KEY (the rowid they had, so every ORDER BY rowid reads
 * the same order). Runs once, when upgrading from a version below 6.
 */
static const char *const schema_v6_sql =
	"CREATE TABLE intent_xcs_v6(id INTEGER PRIMARY KEY,"
	" txn_id INTEGER NOT NULL REFERENCES intents(txn_id), op TEXT NOT NULL,"
	" grp INTEGER NOT NULL, device INTEGER NOT NULL, in_port INTEGER NOT NULL,"
	" out_port INTEGER NOT NULL, job_id TEXT);"
	"INSERT INTO intent_xcs_v6 SELECT rowid, txn_id, op, grp, device, in_port, out_port,"
	" job_id FROM intent_xcs ORDER BY rowid;"
	"DROP TABLE intent_xcs;"
	"ALTER TABLE intent_xcs_v6 RENAME TO intent_xcs;"
	"CREATE INDEX intent_xcs_txn ON intent_xcs(txn_id);"
	"CREATE TABLE intent_links_v6(id INTEGER PRIMARY KEY,"
	" txn_id INTEGER NOT NULL REFERENCES intents(txn_id), job_id TEXT NOT NULL,"
	" a INTEGER NOT NULL, b INTEGER NOT NULL, h INTEGER NOT NULL, links INTEGER NOT NULL);"
	"INSERT INTO intent_links_v6 SELECT rowid, txn_id, job_id, a, b, h, links"
	" FROM intent_links ORDER BY rowid;"
	"DROP TABLE intent_links;"
	"ALTER TABLE intent_links_v6 RENAME TO intent_links;"
	"CREATE INDEX intent_links_txn ON intent_links(txn_id);"
	"CREATE TABLE intent_rings_v6(id INTEGER PRIMARY KEY,"
	" txn_id INTEGER NOT NULL REFERENCES intents(txn_id), ring INTEGER NOT NULL,"
	" nodes TEXT NOT NULL, last_change TEXT NOT NULL, failed_node INTEGER NOT NULL,"
	" reason TEXT, changed_ms INTEGER NOT NULL);"
	"INSERT INTO intent_rings_v6 SELECT rowid, txn_id, ring, nodes, last_change,"
	" failed_node, reason, changed_ms FROM intent_rings ORDER BY rowid;"
	"DROP TABLE intent_rings;"
	"ALTER TABLE intent_rings_v6 RENAME TO intent_rings;"
	"CREATE INDEX intent_rings_txn ON intent_rings(txn_id);"
	"CREATE TABLE intent_bundles_v6(id INTEGER PRIMARY KEY,"
	" txn_id INTEGER NOT NULL REFERENCES intents(txn_id), node INTEGER NOT NULL,"
	" bundle INTEGER NOT NULL, path INTEGER NOT NULL, distance INTEGER NOT NULL,"
	" dir INTEGER NOT NULL);"
	"INSERT INTO intent_bundles_v6 SELECT rowid, txn_id, node, bundle, path, distance, dir"
	" FROM intent_bundles ORDER BY rowid;"
	"DROP TABLE intent_bundles;"
	"ALTER TABLE intent_bundles_v6 RENAME TO intent_bundles;"
	"CREATE INDEX intent_bundles_txn ON intent_bundles(txn_id);";

int st_sql_rc(int rc)
{
	switch (rc) {
	case SQLITE_OK:
	case SQLITE_DONE:
	case SQLITE_ROW:
		return 0;
	case SQLITE_CONSTRAINT_PRIMARYKEY:
	case SQLITE_CONSTRAINT_UNIQUE:
		return -EEXIST;
	}
	switch (rc & 0xff) {
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_CONSTRAINT: /* NOT NULL, foreign key, a trigger's RAISE */
		return -EINVAL;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_READONLY:
		return -EROFS;
	case SQLITE_TOOBIG:
		return -E2BIG;
	default:
		return -EIO;
	}
}

/* The error of the sqlite3_bind_*() call on st that just failed. */
int st_bind_error(struct st_store *st)
{
	int rc = st_sql_rc(sqlite3_errcode(st->db));

	return rc ? rc : -EIO;
}

int st_exec(struct st_store *st, const char *sql)
{
	return st_sql_rc(sqlite3_exec(st->db, sql, NULL, NULL, NULL));
}

/*
 * Ends a failed write transaction. Its return is not needed: when SQLite
 * already rolled the transaction back itself (it does on some I/O, full-disk
 * and out-of-memory errors) ROLLBACK fails harmlessly, and either way nothing
 * of the transaction was committed; the caller returns the first error.
 */
void st_rollback(struct st_store *st)
{
	if (st->session)
		sqlite3session_delete(st->session);
	st->session = NULL;
	st->confirm_txn = 0;
	(void)st_exec(st, "ROLLBACK");
}

/*
 * Every write transaction starts with st_write_begin() and ends with
 * st_write_commit() or st_rollback(). On a replicated store (store_repl.h) a
 * session records the transaction's changes, and st_write_commit() hands them
 * as one changeset to the replication's publish hook before the local
 * COMMIT: only once the replicated log has the change does the local copy
 * commit. The commit hook refuses any other commit on such a store, so a
 * write that bypasses these two fails instead of forking the copies.
 */
static int write_failed(struct st_store *st, int rc, bool in_repl)
{
	st->repl_failed = in_repl;
	if (st->on_error)
		st->on_error(st->on_error_ctx, rc);
	return rc;
}

int st_write_begin(struct st_store *st)
{
	int rc;

	clock_gettime(CLOCK_MONOTONIC, &st->write_began);
	rc = st->repl ? st->repl->prepare(st->repl_ctx) : 0;
	if (rc)
		return write_failed(st, rc, true);
	rc = st_exec(st, "BEGIN IMMEDIATE");
	if (rc)
		return write_failed(st, rc, false);
	st->repl_failed = false;
	st->confirm_txn = 0;
	if (!st->repl)
		return 0;
	rc = st_sql_rc(sqlite3session_create(st->db, "main", &st->session));
	if (rc == 0)
		rc = st_sql_rc(sqlite3session_attach(st->session, NULL));
	if (rc) {
		st_rollback(st);
		return write_failed(st, rc, false);
	}
	return 0;
}

/* Publishes the entry of a write that confirmed intent st->confirm_txn (store_repl.h). */
static int publish_confirm(struct st_store *st, const void *changeset, size_t len)
{
	char line[80];
	int n = snprintf(line, sizeof(line), ST_CONFIRM_ENTRY "%lld %lld %lld\n",
			 (long long)st->confirm_txn, (long long)st->confirm_removed,
			 (long long)st->confirm_added);
	uint8_t *entry = malloc((size_t)n + len);
	int rc;

	if (!entry)
		return -ENOMEM;
	memcpy(entry, line, (size_t)n);
	if (len)
		memcpy(entry + n, changeset, len);
	rc = st->repl->publish(st->repl_ctx, entry, (size_t)n + len);
	free(entry);
	return rc;
}

/* On failure the transaction is still open: the caller rolls it back. */
int st_write_commit(struct st_store *st)
{
	int rc = 0;

	if (st->session) {
		void *changeset = NULL;
		int len = 0;

		rc = st_sql_rc(sqlite3session_changeset(st->session, &len, &changeset));
		sqlite3session_delete(st->session);
		st->session = NULL;
		if (rc == 0 && st->confirm_txn)
			rc = publish_confirm(st, changeset, (size_t)len);
		else if (rc == 0 && len > 0)
			rc = st->repl->publish(st->repl_ctx, changeset, (size_t)len);
		st->confirm_txn = 0;
		sqlite3_free(changeset);
		if (rc)
			return write_failed(st, rc, true);
	}
	st->commit_allowed = true;
	rc = st_exec(st, "COMMIT");
	st->commit_allowed = false;
	if (rc && st->repl) /* published but not applied here */
		st->repl->local_commit_failed(st->repl_ctx);
	if (rc)
		return write_failed(st, rc, false);
	st->repl_failed = false;
	if (st->on_commit) {
		struct timespec now;

		clock_gettime(CLOCK_MONOTONIC, &now);
		st->on_commit(st->on_commit_ctx,
			      (double)(now.tv_sec - st->write_began.tv_sec) +
				      (double)(now.tv_nsec - st->write_began.tv_nsec) / 1e9);
	}
	return 0;
}

/* One statement as a write transaction of its own. */
int st_write_end(struct st_store *st, int rc)
{
	if (rc == 0)
		rc = st_write_commit(st);
	if (rc)
		st_rollback(st);
	return rc;
}

int st_step_write(struct st_store *st, sqlite3_stmt *s)
{
	int rc = st_write_begin(st);

	if (rc == 0)
		rc = st_sql_rc(sqlite3_step(s));
	return st_write_end(st, rc);
}

static int commit_guard(void *arg)
{
	const struct st_store *st = arg;

	return st->repl && !st->commit_allowed;
}

int st_prepare(struct st_store *st, const char *sql, sqlite3_stmt **stmt)
{
	return st_sql_rc(sqlite3_prepare_v2(st->db, sql, -1, stmt, NULL));
}

/*
 * Binds text, or NULL when v is NULL. Returns an SQLite result code. The
 * text is not copied: every statement here is finalized before its
 * arguments go away.
 */
int st_bind_text(sqlite3_stmt *s, int i, const char *v)
{
	return v ? sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC) : sqlite3_bind_null(s, i);
}

/*
 * Runs s again with new arguments. Its reset's return is the previous
 * step's result, which the caller already checked.
 */
void st_rearm(sqlite3_stmt *s)
{
	(void)sqlite3_reset(s);
}

/*
 * Returns items (n used of *cap elements of elem bytes) with room for one
 * more: items itself, or a larger copy (*cap updated). NULL when out of
 * memory; items is still valid then.
 */
void *st_grow(void *items, size_t *cap, size_t n, size_t elem)
{
	size_t want = *cap ? *cap * 2 : 64;
	void *p;

	if (n < *cap)
		return items;
	p = realloc(items, want * elem);
	if (p)
		*cap = want;
	return p;
}

int st_intent_rows(struct st_store *st, const char *sql, int64_t txn_id, size_t n,
		   int (*bind)(sqlite3_stmt *s, size_t i, const void *ctx), const void *ctx)
{
	sqlite3_stmt *s;
	int rc = st_prepare(st, sql, &s);

	for (size_t i = 0; rc == 0 && i < n; i++) {
		st_rearm(s);
		rc = sqlite3_bind_int64(s, 1, txn_id) ? SQLITE_ERROR
		     : bind			      ? bind(s, i, ctx)
						      : SQLITE_OK;
		rc = rc < 0 ? rc : rc ? st_bind_error(st) : st_sql_rc(sqlite3_step(s));
	}
	sqlite3_finalize(s);
	return rc;
}

int st_intent_row(struct st_store *st, const char *job_id, int64_t now_ms, int64_t *txn_id)
{
	sqlite3_stmt *s;
	int rc = st_prepare(
		st, "INSERT INTO intents(job_id, state, created_ms) VALUES(?1, 'open', ?2)", &s);

	if (rc)
		return rc;
	if (st_bind_text(s, 1, job_id) || sqlite3_bind_int64(s, 2, now_ms))
		rc = st_bind_error(st);
	else
		rc = st_sql_rc(sqlite3_step(s));
	sqlite3_finalize(s);
	if (rc == 0)
		*txn_id = sqlite3_last_insert_rowid(st->db);
	return rc;
}

/* The schema version of the open file; 0 for a new (empty) file. */
static int read_version(struct st_store *st, int *version)
{
	sqlite3_stmt *s;
	int rc = st_prepare(st, "SELECT value FROM meta WHERE key = 'schema_version'", &s);

	if (rc)
		return rc;
	rc = sqlite3_step(s);
	*version = rc == SQLITE_ROW ? sqlite3_column_int(s, 0) : 0;
	rc = rc == SQLITE_ROW ? 0 : st_sql_rc(rc);
	sqlite3_finalize(s);
	return rc;
}

/*
 * Creates the schema in a new file, or upgrades an older one in place: the
 * new tables and indexes and the new version number in one transaction, so
 * a crash leaves the file as it was. A newer version is refused (-EPROTO).
 */
static int open_schema(struct st_store *st, const char *path, char *err, size_t err_len)
{
	int version = 0;
	int rc = st_exec(st, "BEGIN IMMEDIATE");

	if (rc == 0)
		rc = st_exec(st, "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY,"
				 " value TEXT NOT NULL)");
	if (rc == 0)
		rc = read_version(st, &version);
	if (rc == 0 && (version < 0 || version > ST_SCHEMA_VERSION)) {
		snprintf(err, err_len, "%s: schema version %d, this ocsd knows %d", path, version,
			 ST_SCHEMA_VERSION);
		st_rollback(st);
		return -EPROTO;
	}
	if (rc == 0 && version < ST_SCHEMA_VERSION) {
		char sql[96];

		snprintf(sql, sizeof(sql),
			 "INSERT OR REPLACE INTO meta VALUES('schema_version', '%d')",
			 ST_SCHEMA_VERSION);
		rc = st_exec(st, schema_sql);
		if (rc == 0 && version < 6)
			rc = st_exec(st, schema_v6_sql);
		if (rc == 0)
			rc = st_exec(st, sql);
	}
	if (rc == 0)
		rc = st_exec(st, "COMMIT");
	if (rc) {
		snprintf(err, err_len, "%s: %s", path, sqlite3_errmsg(st->db));
		st_rollback(st);
	}
	return rc;
}

/* The end of opening st: on rc 0 *out is st, else st is closed and freed. Returns rc. */
static int open_done(struct st_store *st, int rc, struct st_store **out)
{
	if (rc == 0) {
		*out = st;
		return 0;
	}
	sqlite3_close(st->db);
	free(st);
	return rc;
}

int st_open(const char *path, struct st_store **out, char *err, size_t err_len)
{
	struct st_store *st = calloc(1, sizeof(*st));
	int rc;

	*out = NULL;
	if (!st)
		return -ENOMEM;
	/* A new store is created 0600 whatever the umask (SQLite would make it
	 * 0644); its -wal and -shm files take the database file's mode. */
	rc = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (rc >= 0)
		close(rc);
	rc = sqlite3_open_v2(path, &st->db,
			     SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
			     NULL);
	if (rc != SQLITE_OK) {
		snprintf(err, err_len, "cannot open %s: %s", path,
			 st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc));
		return open_done(st, st_sql_rc(rc) ? st_sql_rc(rc) : -EIO, out);
	}
	sqlite3_extended_result_codes(st->db, 1);
	sqlite3_busy_timeout(st->db, ST_BUSY_TIMEOUT_MS);
	rc = st_exec(st,
		     "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;");
	if (rc) {
		snprintf(err, err_len, "%s: %s", path, sqlite3_errmsg(st->db));
		return open_done(st, rc, out);
	}
	return open_done(st, open_schema(st, path, err, err_len), out);
}

const char *st_strerror(struct st_store *st, int rc)
{
	if (st && st->repl && st->repl_failed)
		return st->repl->last_error(st->repl_ctx);
	return strerror(rc < 0 ? -rc : rc);
}

bool st_replicated(const struct st_store *st)
{
	return st && st->repl;
}

const char *st_changed_note(int rc)
{
	return rc == -EINPROGRESS ? "it may be stored all the same (the store's answer was lost): "
				    "read it back from the leader before trying again"
				  : "nothing changed";
}

void st_set_error_observer(struct st_store *st, void (*fn)(void *ctx, int rc), void *ctx)
{
	st->on_error = fn;
	st->on_error_ctx = ctx;
}

void st_set_commit_observer(struct st_store *st, void (*fn)(void *ctx, double seconds), void *ctx)
{
	st->on_commit = fn;
	st->on_commit_ctx = ctx;
}

void st_set_busy_timeout(struct st_store *st, int timeout_ms)
{
	sqlite3_busy_timeout(st->db, timeout_ms);
}

void st_close(struct st_store *st)
{
	if (!st)
		return;
	if (st->repl)
		st->repl->destroy(st->repl_ctx);
	st_touched_track(st, false);
	sqlite3_close(st->db);
	free(st);
}

/* ---- the local copy of a replicated store (store_repl.h) ---- */

int st_open_memory(struct st_store **out, char *err, size_t err_len)
{
	struct st_store *st = calloc(1, sizeof(*st));
	int rc;

	*out = NULL;
	if (!st)
		return -ENOMEM;
	rc = sqlite3_open_v2(":memory:", &st->db,
			     SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
			     NULL);
	if (rc != SQLITE_OK) {
		snprintf(err, err_len, "cannot open an in-memory copy: %s", sqlite3_errstr(rc));
		return open_done(st, st_sql_rc(rc) ? st_sql_rc(rc) : -EIO, out);
	}
	sqlite3_extended_result_codes(st->db, 1);
	rc = st_exec(st, "PRAGMA foreign_keys=ON;");
	if (rc == 0)
		rc = open_schema(st, "in-memory copy", err, err_len);
	return open_done(st, rc, out);
}

void st_set_repl(struct st_store *st, const struct st_repl_hooks *hooks, void *ctx)
{
	st->repl = hooks;
	st->repl_ctx = ctx;
	sqlite3_commit_hook(st->db, hooks ? commit_guard : NULL, st);
}

/* A replicated change that does not fit this copy means the copies forked. */
static int changeset_conflict(void *ctx, int conflict, sqlite3_changeset_iter *it)
{
	(void)ctx;
	(void)conflict;
	(void)it;
	return SQLITE_CHANGESET_ABORT;
}

int st_confirm_circuits(struct st_store *st, int64_t txn_id, int64_t *removed, int64_t *added)
{
	/* Removals first: an addition may reuse an input port it frees. */
	static const char *const sql[2] = {
		"DELETE FROM circuits WHERE (grp, device, in_port) IN"
		" (SELECT grp, device, in_port FROM intent_xcs WHERE txn_id = ?1 AND op = 'del')",
		"INSERT INTO circuits(grp, device, in_port, out_port, job_id)"
		" SELECT grp, device, in_port, out_port, job_id FROM intent_xcs"
		" WHERE txn_id = ?1 AND op = 'add'"};
	int64_t *changed[2] = {removed, added};
	int rc = 0;

	for (int i = 0; i < 2; i++) {
		rc = rc ? rc : st_intent_rows(st, sql[i], txn_id, 1, NULL, NULL);
		*changed[i] = rc ? 0 : sqlite3_changes64(st->db);
	}
	return rc;
}

/* An SQLite result of applying an entry: -EPROTO when it does not fit this copy. */
static int apply_rc(int rc)
{
	if (rc == SQLITE_ABORT || (rc & 0xff) == SQLITE_CONSTRAINT || rc == SQLITE_CORRUPT)
		return -EPROTO;
	return st_sql_rc(rc);
}

/* A decimal number of at most 18 digits at *at (advanced past it); -1 when none. */
static long long entry_number(const uint8_t *entry, size_t len, size_t *at)
{
	size_t start = *at;
	long long v = 0;

	for (; *at < len && *at < start + 18 && entry[*at] >= '0' && entry[*at] <= '9'; (*at)++)
		v = v * 10 + (entry[*at] - '0');
	return *at == start ? -1 : v;
}

/*
 * The confirm an entry's first line names ("C TXN REMOVED ADDED\n",
 * store_repl.h) into c[3]: 0 for a plain changeset, 1 for a confirm, -1
 * for a malformed line; *skip is the line's length.
 */
static int confirm_of(const uint8_t *entry, size_t len, long long c[3], size_t *skip)
{
	size_t at = strlen(ST_CONFIRM_ENTRY);

	*skip = 0;
	if (len < at || memcmp(entry, ST_CONFIRM_ENTRY, at) != 0)
		return 0;
	for (int i = 0; i < 3; i++) {
		c[i] = entry_number(entry, len, &at);
		if (c[i] < 0 || at >= len || entry[at] != (i < 2 ? ' ' : '\n'))
			return -1;
		at++;
	}
	if (c[0] == 0)
		return -1;
	*skip = at;
	return 1;
}

int st_apply_changeset(struct st_store *st, const void *entry, size_t len)
{
	long long c[3];
	size_t skip;
	int kind = confirm_of(entry, len, c, &skip);
	const uint8_t *changeset = (const uint8_t *)entry + skip;
	int64_t removed, added;
	int rc;

	if (len > INT32_MAX)
		return -E2BIG;
	if (kind < 0)
		return -EPROTO;
	len -= skip;
	st_touched_note(st, changeset, len);
	st->commit_allowed = true;
	if (kind == 0) {
		rc = apply_rc(sqlite3changeset_apply(st->db, (int)len, (void *)changeset, NULL,
						     changeset_conflict, NULL));
		st->commit_allowed = false;
		return rc;
	}
	/* a confirm: its changeset and the circuits it derives, in one transaction */
	rc = st_exec(st, "BEGIN IMMEDIATE");
	if (rc == 0 && len)
		rc = apply_rc(sqlite3changeset_apply(st->db, (int)len, (void *)changeset, NULL,
						     changeset_conflict, NULL));
	if (rc == 0) {
		rc = st_confirm_circuits(st, (int64_t)c[0], &removed, &added);
		/* a circuit held already, or other counts than the writer's: the copies differ */
		if (rc == -EEXIST || rc == -EINVAL ||
		    (rc == 0 && (removed != c[1] || added != c[2])))
			rc = -EPROTO;
	}
	if (rc == 0)
		st_touched_confirm(st, (int64_t)c[0]);
	if (rc == 0)
		rc = st_exec(st, "COMMIT");
	if (rc)
		(void)st_exec(st, "ROLLBACK");
	st->commit_allowed = false;
	return rc;
}

int st_image_save(struct st_store *st, void **image, size_t *len)
{
	sqlite3_int64 n = 0;
	unsigned char *p = sqlite3_serialize(st->db, "main", &n, 0);

	if (!p)
		return -ENOMEM;
	*image = p;
	*len = (size_t)n;
	return 0;
}

void st_image_free(void *image)
{
	sqlite3_free(image);
}

int st_image_load(struct st_store *st, const void *image, size_t len, char *err, size_t err_len)
{
	unsigned char *copy = sqlite3_malloc64(len ? len : 1);
	int version = 0;
	int rc;

	st_touched_all(st); /* whatever the outcome: every row may differ */
	if (!copy)
		return -ENOMEM;
	memcpy(copy, image, len);
	/* SQLite owns copy from here, whatever the result */
	rc = st_sql_rc(sqlite3_deserialize(
		st->db, "main", copy, (sqlite3_int64)len, (sqlite3_int64)len,
		SQLITE_DESERIALIZE_FREEONCLOSE | SQLITE_DESERIALIZE_RESIZEABLE));
	if (rc == 0)
		rc = read_version(st, &version);
	if (rc == 0 && (version < 6 || version > ST_SCHEMA_VERSION)) {
		snprintf(err, err_len, "snapshot of schema version %d, this ocsd knows %d", version,
			 ST_SCHEMA_VERSION);
		return -EPROTO;
	}
	if (rc) {
		snprintf(err, err_len, "snapshot: %s", sqlite3_errmsg(st->db));
		return rc;
	}
	if (version < ST_SCHEMA_VERSION) {
		/* an older replica's snapshot: upgraded here as a file would be at open;
		 * every replica loading it does the same, so the copies stay equal */
		st->commit_allowed = true;
		rc = open_schema(st, "snapshot", err, err_len);
		st->commit_allowed = false;
	}
	return rc;
}
