/*
 * store.c - the SQLite implementation of store.h.
 *
 * Schema (version 7):
 *   meta(key PK, value)                     'schema_version'
 *   jobs(id PK, idempotency_key UNIQUE, state, reason, request BLOB,
 *        created_ms, updated_ms, seq)       seq keeps creation order
 *   intents(txn_id PK AUTOINCREMENT, job_id, state, detail, created_ms,
 *           finished_ms)
 *   intent_decisions(txn_id PK, decided_ms) intents whose commit was decided
 *                                           (st_intent_decide): confirms follow
 *   intent_xcs(id PK, txn_id, op 'del'|'add', grp, device, in_port, out_port, job_id)
 *   intent_links(id PK, txn_id, job_id, a, b, h, links)  links an intent gives jobs
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
 * entries an older ocsd wrote to etcd still apply to a new copy). An
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
 * durable once its changeset is in etcd, which write_commit() waits for.
 */
#include "store.h"
#include "store_repl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#define ST_SCHEMA_VERSION 7
/* How long a write waits for another connection's lock by default. */
#define ST_BUSY_TIMEOUT_MS 5000

struct st_store {
	sqlite3 *db;
	/* a replicated store (store_repl.h); NULL for a plain SQLite file */
	const struct st_repl_hooks *repl;
	void *repl_ctx;
	sqlite3_session *session; /* the open write transaction's changes */
	bool commit_allowed;	  /* write_commit() or a changeset apply is committing */
	bool repl_failed;	  /* the last write failed in the replication */
	void (*on_error)(void *ctx, int rc);
	void *on_error_ctx;
};

/* The lifecycle states of a job that is over (store.h, st_prune). */
#define FINISHED_JOB "state IN ('RELEASED', 'FAILED')"

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
	"WHERE " FINISHED_JOB ";"
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
	" txn_id INTEGER PRIMARY KEY REFERENCES intents(txn_id), decided_ms INTEGER NOT NULL);";

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

/*
 * Maps an SQLite result (extended result codes are on) to the errno-style
 * codes of this module.
 */
static int sql_rc(int rc)
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
static int bind_error(struct st_store *st)
{
	int rc = sql_rc(sqlite3_errcode(st->db));

	return rc ? rc : -EIO;
}

static int exec(struct st_store *st, const char *sql)
{
	return sql_rc(sqlite3_exec(st->db, sql, NULL, NULL, NULL));
}

/*
 * Ends a failed write transaction. Its return is not needed: when SQLite
 * already rolled the transaction back itself (it does on some I/O, full-disk
 * and out-of-memory errors) ROLLBACK fails harmlessly, and either way nothing
 * of the transaction was committed; the caller returns the first error.
 */
static void rollback(struct st_store *st)
{
	if (st->session)
		sqlite3session_delete(st->session);
	st->session = NULL;
	(void)exec(st, "ROLLBACK");
}

/*
 * Every write transaction starts with write_begin() and ends with
 * write_commit() or rollback(). On a replicated store (store_repl.h) a
 * session records the transaction's changes, and write_commit() hands them
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

static int write_begin(struct st_store *st)
{
	int rc = st->repl ? st->repl->prepare(st->repl_ctx) : 0;

	if (rc)
		return write_failed(st, rc, true);
	rc = exec(st, "BEGIN IMMEDIATE");
	if (rc)
		return write_failed(st, rc, false);
	st->repl_failed = false;
	if (!st->repl)
		return 0;
	rc = sql_rc(sqlite3session_create(st->db, "main", &st->session));
	if (rc == 0)
		rc = sql_rc(sqlite3session_attach(st->session, NULL));
	if (rc) {
		rollback(st);
		return write_failed(st, rc, false);
	}
	return 0;
}

/* On failure the transaction is still open: the caller rolls it back. */
static int write_commit(struct st_store *st)
{
	int rc = 0;

	if (st->session) {
		void *changeset = NULL;
		int len = 0;

		rc = sql_rc(sqlite3session_changeset(st->session, &len, &changeset));
		sqlite3session_delete(st->session);
		st->session = NULL;
		if (rc == 0 && len > 0)
			rc = st->repl->publish(st->repl_ctx, changeset, (size_t)len);
		sqlite3_free(changeset);
		if (rc)
			return write_failed(st, rc, true);
	}
	st->commit_allowed = true;
	rc = exec(st, "COMMIT");
	st->commit_allowed = false;
	if (rc && st->repl) /* published but not applied here */
		st->repl->local_commit_failed(st->repl_ctx);
	if (rc)
		return write_failed(st, rc, false);
	st->repl_failed = false;
	return 0;
}

/* One statement as a write transaction of its own. */
static int step_write(struct st_store *st, sqlite3_stmt *s)
{
	int rc = write_begin(st);

	if (rc == 0)
		rc = sql_rc(sqlite3_step(s));
	if (rc == 0)
		rc = write_commit(st);
	if (rc)
		rollback(st);
	return rc;
}

static int commit_guard(void *arg)
{
	const struct st_store *st = arg;

	return st->repl && !st->commit_allowed;
}

static int prepare(struct st_store *st, const char *sql, sqlite3_stmt **stmt)
{
	return sql_rc(sqlite3_prepare_v2(st->db, sql, -1, stmt, NULL));
}

/*
 * Binds text, or NULL when v is NULL. Returns an SQLite result code. The
 * text is not copied: every statement here is finalized before its
 * arguments go away.
 */
static int bind_text(sqlite3_stmt *s, int i, const char *v)
{
	return v ? sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC) : sqlite3_bind_null(s, i);
}

static char *column_dup(sqlite3_stmt *s, int i)
{
	const unsigned char *v = sqlite3_column_text(s, i);

	return v ? strdup((const char *)v) : NULL;
}

/* The schema version of the open file; 0 for a new (empty) file. */
static int read_version(struct st_store *st, int *version)
{
	sqlite3_stmt *s;
	int rc = prepare(st, "SELECT value FROM meta WHERE key = 'schema_version'", &s);

	if (rc)
		return rc;
	rc = sqlite3_step(s);
	*version = rc == SQLITE_ROW ? sqlite3_column_int(s, 0) : 0;
	rc = rc == SQLITE_ROW ? 0 : sql_rc(rc);
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
	int rc = exec(st, "BEGIN IMMEDIATE");

	if (rc == 0)
		rc = exec(st, "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY,"
			      " value TEXT NOT NULL)");
	if (rc == 0)
		rc = read_version(st, &version);
	if (rc == 0 && (version < 0 || version > ST_SCHEMA_VERSION)) {
		snprintf(err, err_len, "%s: schema version %d, this ocsd knows %d", path, version,
			 ST_SCHEMA_VERSION);
		rollback(st);
		return -EPROTO;
	}
	if (rc == 0 && version < ST_SCHEMA_VERSION) {
		char sql[96];

		snprintf(sql, sizeof(sql),
			 "INSERT OR REPLACE INTO meta VALUES('schema_version', '%d')",
			 ST_SCHEMA_VERSION);
		rc = exec(st, schema_sql);
		if (rc == 0 && version < 6)
			rc = exec(st, schema_v6_sql);
		if (rc == 0)
			rc = exec(st, sql);
	}
	if (rc == 0)
		rc = exec(st, "COMMIT");
	if (rc) {
		snprintf(err, err_len, "%s: %s", path, sqlite3_errmsg(st->db));
		rollback(st);
	}
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
		rc = sql_rc(rc) ? sql_rc(rc) : -EIO;
		goto fail;
	}
	sqlite3_extended_result_codes(st->db, 1);
	sqlite3_busy_timeout(st->db, ST_BUSY_TIMEOUT_MS);
	rc = exec(st, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;");
	if (rc) {
		snprintf(err, err_len, "%s: %s", path, sqlite3_errmsg(st->db));
		goto fail;
	}
	rc = open_schema(st, path, err, err_len);
	if (rc)
		goto fail;
	*out = st;
	return 0;
fail:
	sqlite3_close(st->db);
	free(st);
	return rc;
}

const char *st_strerror(struct st_store *st, int rc)
{
	if (st && st->repl && st->repl_failed)
		return st->repl->last_error(st->repl_ctx);
	return strerror(rc < 0 ? -rc : rc);
}

void st_set_error_observer(struct st_store *st, void (*fn)(void *ctx, int rc), void *ctx)
{
	st->on_error = fn;
	st->on_error_ctx = ctx;
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
		rc = sql_rc(rc) ? sql_rc(rc) : -EIO;
		goto fail;
	}
	sqlite3_extended_result_codes(st->db, 1);
	rc = exec(st, "PRAGMA foreign_keys=ON;");
	if (rc == 0)
		rc = open_schema(st, "in-memory copy", err, err_len);
	if (rc)
		goto fail;
	*out = st;
	return 0;
fail:
	sqlite3_close(st->db);
	free(st);
	return rc;
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

int st_apply_changeset(struct st_store *st, const void *changeset, size_t len)
{
	int rc;

	if (len > INT32_MAX)
		return -E2BIG;
	st->commit_allowed = true;
	rc = sqlite3changeset_apply(st->db, (int)len, (void *)changeset, NULL, changeset_conflict,
				    NULL);
	st->commit_allowed = false;
	if (rc == SQLITE_ABORT || (rc & 0xff) == SQLITE_CONSTRAINT || rc == SQLITE_CORRUPT)
		return -EPROTO;
	return sql_rc(rc);
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

	if (!copy)
		return -ENOMEM;
	memcpy(copy, image, len);
	/* SQLite owns copy from here, whatever the result */
	rc = sql_rc(sqlite3_deserialize(
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
	if (!job->id || !job->state)
		rc = -EINVAL;
	else if (bind_text(s, 1, job->id) || bind_text(s, 2, job->idempotency_key) ||
		 bind_text(s, 3, job->state) || bind_text(s, 4, job->reason) ||
		 (job->request
			  ? sqlite3_bind_blob64(s, 5, job->request, job->request_len, SQLITE_STATIC)
			  : sqlite3_bind_null(s, 5)) ||
		 sqlite3_bind_int64(s, 6, job->created_ms) ||
		 sqlite3_bind_int64(s, 7, job->updated_ms))
		rc = bind_error(st);
	else
		rc = step_write(st, s);
	sqlite3_finalize(s);
	return rc;
}

int st_job_set_state(struct st_store *st, const char *id, const char *state, const char *reason,
		     int64_t updated_ms)
{
	sqlite3_stmt *s;
	int rc = prepare(
		st, "UPDATE jobs SET state = ?2, reason = ?3, updated_ms = ?4 WHERE id = ?1", &s);

	if (rc)
		return rc;
	if (!id || !state)
		rc = -EINVAL;
	else if (bind_text(s, 1, id) || bind_text(s, 2, state) || bind_text(s, 3, reason) ||
		 sqlite3_bind_int64(s, 4, updated_ms))
		rc = bind_error(st);
	else
		rc = step_write(st, s);
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
	if (bind_text(s, 1, id)) {
		rc = bind_error(st);
		sqlite3_finalize(s);
		return rc;
	}
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
	if (bind_text(s, 1, key)) {
		rc = bind_error(st);
		sqlite3_finalize(s);
		return rc;
	}
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

/*
 * Runs s again with new arguments. Its reset's return is the previous
 * step's result, which the caller already checked.
 */
static void rearm(sqlite3_stmt *s)
{
	(void)sqlite3_reset(s);
}

static int insert_xc(struct st_store *st, sqlite3_stmt *s, int64_t txn, const char *op,
		     const struct ocs_xc *xc, const char *job_id)
{
	rearm(s);
	if (sqlite3_bind_int64(s, 1, txn) || bind_text(s, 2, op) ||
	    sqlite3_bind_int(s, 3, xc->group) || sqlite3_bind_int(s, 4, xc->device) ||
	    sqlite3_bind_int(s, 5, xc->in) || sqlite3_bind_int(s, 6, xc->out) ||
	    bind_text(s, 7, job_id))
		return bind_error(st);
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
		rearm(s);
		if (sqlite3_bind_int64(s, 1, txn) || bind_text(s, 2, links[i].job_id) ||
		    sqlite3_bind_int(s, 3, links[i].a) || sqlite3_bind_int(s, 4, links[i].b) ||
		    sqlite3_bind_int(s, 5, links[i].h) || sqlite3_bind_int(s, 6, links[i].links))
			rc = bind_error(st);
		else
			rc = sql_rc(sqlite3_step(s));
	}
	sqlite3_finalize(s);
	return rc;
}

/* The rows of an intent, inside the caller's SQLite transaction. */
static int intent_insert(struct st_store *st, const char *job_id, const struct ocs_xc *removals,
			 size_t n_removals, const struct st_circuit *additions, size_t n_additions,
			 const struct st_link *links, size_t n_links, int64_t now_ms,
			 int64_t *txn_id)
{
	sqlite3_stmt *s = NULL;
	int64_t txn;
	int rc;

	rc = prepare(st, "INSERT INTO intents(job_id, state, created_ms) VALUES(?1, 'open', ?2)",
		     &s);
	if (rc)
		return rc;
	if (bind_text(s, 1, job_id) || sqlite3_bind_int64(s, 2, now_ms))
		rc = bind_error(st);
	else
		rc = sql_rc(sqlite3_step(s));
	sqlite3_finalize(s);
	s = NULL;
	if (rc)
		return rc;
	txn = sqlite3_last_insert_rowid(st->db);
	rc = prepare(st,
		     "INSERT INTO intent_xcs(txn_id, op, grp, device, in_port, out_port, job_id)"
		     " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
		     &s);
	for (size_t i = 0; rc == 0 && i < n_removals; i++)
		rc = insert_xc(st, s, txn, "del", &removals[i], NULL);
	for (size_t i = 0; rc == 0 && i < n_additions; i++)
		rc = insert_xc(st, s, txn, "add", &additions[i].xc, additions[i].job_id);
	sqlite3_finalize(s);
	if (rc == 0)
		rc = insert_links(st, txn, links, n_links);
	if (rc == 0)
		*txn_id = txn;
	return rc;
}

int st_intent_begin(struct st_store *st, const char *job_id, const struct ocs_xc *removals,
		    size_t n_removals, const struct st_circuit *additions, size_t n_additions,
		    const struct st_link *links, size_t n_links, int64_t now_ms, int64_t *txn_id)
{
	int64_t txn;
	int rc;

	if (!job_id || (n_removals && !removals) || (n_additions && !additions) ||
	    (n_links && !links))
		return -EINVAL;
	rc = write_begin(st);
	if (rc)
		return rc;
	rc = intent_insert(st, job_id, removals, n_removals, additions, n_additions, links, n_links,
			   now_ms, &txn);
	if (rc == 0)
		rc = write_commit(st);
	if (rc) {
		rollback(st);
		return rc;
	}
	*txn_id = txn;
	return 0;
}

/* Inside a write transaction: 0 when intent txn_id is open, -ENOENT, -EALREADY or -errno. */
static int check_open(struct st_store *st, int64_t txn_id)
{
	sqlite3_stmt *s = NULL;
	int rc = prepare(st, "SELECT state FROM intents WHERE txn_id = ?1", &s);

	if (rc)
		return rc;
	rc = sqlite3_bind_int64(s, 1, txn_id) ? bind_error(st) : sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		const unsigned char *state = sqlite3_column_text(s, 0);

		rc = !state ? -ENOMEM : strcmp((const char *)state, "open") == 0 ? 0 : -EALREADY;
	} else if (rc == SQLITE_DONE) {
		rc = -ENOENT;
	} else if (rc > 0) {
		rc = sql_rc(rc);
	}
	sqlite3_finalize(s);
	return rc;
}

int st_intent_decide(struct st_store *st, int64_t txn_id, int64_t now_ms)
{
	sqlite3_stmt *s = NULL;
	int rc = write_begin(st);

	if (rc)
		return rc;
	rc = check_open(st, txn_id);
	if (rc == 0)
		rc = prepare(st, "INSERT INTO intent_decisions(txn_id, decided_ms) VALUES(?1, ?2)",
			     &s);
	if (rc == 0)
		rc = sqlite3_bind_int64(s, 1, txn_id) || sqlite3_bind_int64(s, 2, now_ms)
			     ? bind_error(st)
			     : sql_rc(sqlite3_step(s));
	sqlite3_finalize(s);
	if (rc == 0)
		rc = write_commit(st);
	if (rc)
		rollback(st);
	return rc;
}

int st_intent_finish(struct st_store *st, int64_t txn_id, enum st_intent_state outcome,
		     const char *detail, int64_t now_ms)
{
	sqlite3_stmt *s = NULL;
	int rc;

	if (outcome == ST_INTENT_OPEN || (unsigned)outcome > ST_INTENT_FAILED)
		return -EINVAL;
	rc = write_begin(st);
	if (rc)
		return rc;
	rc = check_open(st, txn_id);
	if (rc)
		goto rollback;
	rc = prepare(st,
		     "UPDATE intents SET state = ?2, detail = ?3, finished_ms = ?4"
		     " WHERE txn_id = ?1",
		     &s);
	if (rc)
		goto rollback;
	if (sqlite3_bind_int64(s, 1, txn_id) || bind_text(s, 2, st_intent_state_name(outcome)) ||
	    bind_text(s, 3, detail) || sqlite3_bind_int64(s, 4, now_ms))
		rc = bind_error(st);
	else
		rc = sql_rc(sqlite3_step(s));
	sqlite3_finalize(s);
	s = NULL;
	if (rc)
		goto rollback;
	if (outcome == ST_INTENT_CONFIRMED) {
		char sql[2048];

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
			 " SELECT job_id, a, b, h, links FROM intent_links WHERE txn_id = %lld;"
			 "DELETE FROM rings WHERE job_id IN (SELECT job_id FROM intents"
			 " WHERE txn_id = %lld AND txn_id IN (SELECT txn_id FROM ring_intents));"
			 "INSERT INTO rings(job_id, ring, nodes, last_change, failed_node, reason,"
			 " changed_ms) SELECT i.job_id, r.ring, r.nodes, r.last_change,"
			 " r.failed_node, r.reason, r.changed_ms FROM intent_rings r"
			 " JOIN intents i USING(txn_id) WHERE r.txn_id = %lld;"
			 "INSERT OR IGNORE INTO rail_gpu_faults(gpu, source, since_ms)"
			 " SELECT gpu, source, since_ms FROM rail_intents WHERE txn_id = %lld;"
			 "INSERT INTO rail_job_moves(job_id, txn_id, rail_port, old_gpu, new_gpu,"
			 " moved_ms) SELECT job_id, txn_id, rail_port, old_gpu, new_gpu, %lld"
			 " FROM rail_intent_moves WHERE txn_id = %lld AND job_id <> '';",
			 (long long)txn_id, (long long)txn_id, (long long)txn_id, (long long)txn_id,
			 (long long)txn_id, (long long)txn_id, (long long)txn_id, (long long)txn_id,
			 (long long)now_ms, (long long)txn_id);
		rc = exec(st, sql);
		if (rc)
			goto rollback;
	}
	rc = write_commit(st);
	if (rc)
		goto rollback;
	return 0;
rollback:
	rollback(st);
	return rc;
}

void st_intent_clear(struct st_intent *in)
{
	if (!in)
		return;
	free(in->removals);
	free(in->additions);
	for (size_t i = 0; in->rings && i < in->n_rings; i++)
		free(in->rings[i].nodes);
	free(in->rings);
	free(in->bundles);
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
	if (sqlite3_bind_int64(s, 1, in->txn_id)) {
		rc = bind_error(st);
		sqlite3_finalize(s);
		return rc;
	}
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct ocs_xc xc = {sqlite3_column_int(s, 1), sqlite3_column_int(s, 2),
				    sqlite3_column_int(s, 3), sqlite3_column_int(s, 4)};

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
				 sizeof(in->additions[0].job_id), "%s",
				 job ? (const char *)job : "");
			in->n_additions++;
		}
	}
	sqlite3_finalize(s);
	return sql_rc(rc);
oom:
	sqlite3_finalize(s);
	return -ENOMEM;
}

static void *grow(void *items, size_t *cap, size_t n, size_t elem);

/* ---- OCSTrx rings ---- */

static const char *const change_names[] = {
	[RG_PLACED] = "placed", [RG_BYPASSED] = "bypassed", [RG_REPLACED] = "replaced",
	[RG_LOST] = "lost",	[RG_RELEASED] = "released",
};

const char *st_ring_change_name(enum rg_change c)
{
	return c >= RG_PLACED && c <= RG_RELEASED ? change_names[c] : "unknown";
}

bool st_ring_change_parse(const char *name, enum rg_change *out)
{
	for (int c = RG_PLACED; c <= RG_RELEASED; c++)
		if (name && strcmp(name, change_names[c]) == 0) {
			*out = (enum rg_change)c;
			return true;
		}
	return false;
}

/* "3,4,6" for nodes (caller frees). NULL on allocation failure. */
static char *nodes_text(const int *nodes, int m)
{
	char *t = malloc((size_t)m * 12 + 1);
	size_t at = 0;

	if (!t)
		return NULL;
	t[0] = '\0';
	for (int i = 0; i < m; i++)
		at += (size_t)sprintf(t + at, "%s%d", i ? "," : "", nodes[i]);
	return t;
}

/* Parses nodes_text() output into r->nodes/r->m. 0 or -ENOMEM/-EINVAL. */
static int nodes_parse(const char *text, struct rg_ring *r)
{
	size_t cap = 1;
	const char *p = text ? text : "";
	char *end;

	for (const char *q = p; *q; q++)
		cap += *q == ',';
	r->nodes = malloc(cap * sizeof(int));
	r->m = 0;
	if (!r->nodes)
		return -ENOMEM;
	while (*p) {
		long v = strtol(p, &end, 10);

		if (end == p || (*end && *end != ','))
			return -EINVAL;
		r->nodes[r->m++] = (int)v;
		p = *end ? end + 1 : end;
	}
	return 0;
}

/* One ring row from columns first.. (ring, nodes, last_change, failed_node, reason, changed_ms). */
static int ring_from_row(sqlite3_stmt *s, int first, struct rg_ring *r)
{
	const unsigned char *reason = sqlite3_column_text(s, first + 4);

	r->index = sqlite3_column_int(s, first);
	if (!st_ring_change_parse((const char *)sqlite3_column_text(s, first + 2), &r->last_change))
		r->last_change = RG_PLACED;
	r->failed_node = sqlite3_column_int(s, first + 3);
	snprintf(r->reason, sizeof(r->reason), "%s", reason ? (const char *)reason : "");
	r->changed_ms = sqlite3_column_int64(s, first + 5);
	return nodes_parse((const char *)sqlite3_column_text(s, first + 1), r);
}

int st_ring_intent_begin(struct st_store *st, const char *job_id, const struct rg_ring *rings,
			 size_t n_rings, const struct st_bundle *bundles, size_t n_bundles,
			 const struct st_fault *fault, int64_t now_ms, int64_t *txn_id)
{
	sqlite3_stmt *s = NULL;
	int64_t txn;
	int rc;

	if (!job_id || (n_rings && !rings) || (n_bundles && !bundles) ||
	    (fault && (fault->node < 0 || !fault->source)))
		return -EINVAL;
	rc = write_begin(st);
	if (rc)
		return rc;
	if (fault) {
		rc = prepare(st,
			     "INSERT OR IGNORE INTO node_faults(node, source, since_ms)"
			     " VALUES(?1, ?2, ?3)",
			     &s);
		if (rc == 0)
			rc = sqlite3_bind_int(s, 1, fault->node) ||
					     bind_text(s, 2, fault->source) ||
					     sqlite3_bind_int64(s, 3, fault->since_ms)
				     ? bind_error(st)
				     : sql_rc(sqlite3_step(s));
		sqlite3_finalize(s);
		s = NULL;
		if (rc)
			goto rollback;
	}
	rc = prepare(st, "INSERT INTO intents(job_id, state, created_ms) VALUES(?1, 'open', ?2)",
		     &s);
	if (rc == 0) {
		if (bind_text(s, 1, job_id) || sqlite3_bind_int64(s, 2, now_ms))
			rc = bind_error(st);
		else
			rc = sql_rc(sqlite3_step(s));
	}
	sqlite3_finalize(s);
	s = NULL;
	if (rc)
		goto rollback;
	txn = sqlite3_last_insert_rowid(st->db);
	rc = prepare(st, "INSERT INTO ring_intents(txn_id) VALUES(?1)", &s);
	if (rc == 0)
		rc = sqlite3_bind_int64(s, 1, txn) ? bind_error(st) : sql_rc(sqlite3_step(s));
	sqlite3_finalize(s);
	s = NULL;
	if (rc == 0)
		rc = prepare(st,
			     "INSERT INTO intent_rings(txn_id, ring, nodes, last_change,"
			     " failed_node, reason, changed_ms) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
			     &s);
	for (size_t i = 0; rc == 0 && i < n_rings; i++) {
		char *text = nodes_text(rings[i].nodes, rings[i].m);

		rearm(s);
		if (!text)
			rc = -ENOMEM;
		else if (sqlite3_bind_int64(s, 1, txn) || sqlite3_bind_int(s, 2, rings[i].index) ||
			 bind_text(s, 3, text) ||
			 bind_text(s, 4, st_ring_change_name(rings[i].last_change)) ||
			 sqlite3_bind_int(s, 5, rings[i].failed_node) ||
			 bind_text(s, 6, rings[i].reason) ||
			 sqlite3_bind_int64(s, 7, rings[i].changed_ms))
			rc = bind_error(st);
		else
			rc = sql_rc(sqlite3_step(s));
		free(text);
	}
	sqlite3_finalize(s);
	s = NULL;
	if (rc == 0)
		rc = prepare(st,
			     "INSERT INTO intent_bundles(txn_id, node, bundle, path, distance, dir)"
			     " VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
			     &s);
	for (size_t i = 0; rc == 0 && i < n_bundles; i++) {
		const struct st_bundle *b = &bundles[i];

		rearm(s);
		if (sqlite3_bind_int64(s, 1, txn) || sqlite3_bind_int(s, 2, b->node) ||
		    sqlite3_bind_int(s, 3, b->bundle) || sqlite3_bind_int(s, 4, b->path) ||
		    sqlite3_bind_int(s, 5, b->distance) || sqlite3_bind_int(s, 6, b->dir))
			rc = bind_error(st);
		else
			rc = sql_rc(sqlite3_step(s));
	}
	sqlite3_finalize(s);
	if (rc == 0)
		rc = write_commit(st);
	if (rc)
		goto rollback;
	*txn_id = txn;
	return 0;
rollback:
	rollback(st);
	return rc;
}

/* The ring part of an open intent (nothing for an intent of circuits). */
static int read_intent_rings(struct st_store *st, struct st_intent *in)
{
	sqlite3_stmt *s;
	size_t cap = 0;
	int rc = prepare(st, "SELECT 1 FROM ring_intents WHERE txn_id = ?1", &s);

	if (rc)
		return rc;
	rc = sqlite3_bind_int64(s, 1, in->txn_id) ? bind_error(st) : sqlite3_step(s);
	in->has_rings = rc == SQLITE_ROW;
	rc = rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : rc < 0 ? rc : sql_rc(rc);
	sqlite3_finalize(s);
	if (rc || !in->has_rings)
		return rc;
	rc = prepare(st,
		     "SELECT ring, nodes, last_change, failed_node, reason, changed_ms"
		     " FROM intent_rings WHERE txn_id = ?1 ORDER BY ring",
		     &s);
	if (rc)
		return rc;
	if (sqlite3_bind_int64(s, 1, in->txn_id))
		rc = bind_error(st);
	while (rc == 0 && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct rg_ring *p = grow(in->rings, &cap, in->n_rings, sizeof(*p));

		rc = 0;
		if (!p) {
			rc = -ENOMEM;
			break;
		}
		in->rings = p;
		memset(&p[in->n_rings], 0, sizeof(*p));
		snprintf(p[in->n_rings].job_id, sizeof(p->job_id), "%.71s", in->job_id);
		rc = ring_from_row(s, 0, &p[in->n_rings]);
		in->n_rings++;
	}
	rc = rc == SQLITE_DONE ? 0 : rc > 0 ? sql_rc(rc) : rc;
	sqlite3_finalize(s);
	if (rc)
		return rc;
	cap = 0;
	rc = prepare(st,
		     "SELECT node, bundle, path, distance, dir FROM intent_bundles"
		     " WHERE txn_id = ?1 ORDER BY rowid",
		     &s);
	if (rc)
		return rc;
	if (sqlite3_bind_int64(s, 1, in->txn_id))
		rc = bind_error(st);
	while (rc == 0 && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct st_bundle *p = grow(in->bundles, &cap, in->n_bundles, sizeof(*p));

		rc = 0;
		if (!p) {
			rc = -ENOMEM;
			break;
		}
		in->bundles = p;
		p[in->n_bundles++] = (struct st_bundle){
			sqlite3_column_int(s, 0), (uint8_t)sqlite3_column_int(s, 1),
			(uint8_t)sqlite3_column_int(s, 2), (uint8_t)sqlite3_column_int(s, 3),
			(uint8_t)sqlite3_column_int(s, 4)};
	}
	rc = rc == SQLITE_DONE ? 0 : rc > 0 ? sql_rc(rc) : rc;
	sqlite3_finalize(s);
	return rc;
}

int st_ring_list(struct st_store *st, int (*fn)(void *ctx, const struct rg_ring *r), void *ctx)
{
	sqlite3_stmt *s;
	int rc = prepare(st,
			 "SELECT job_id, ring, nodes, last_change, failed_node, reason, changed_ms"
			 " FROM rings ORDER BY job_id, ring",
			 &s);

	if (rc)
		return rc;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct rg_ring r = {0};
		int cb;

		snprintf(r.job_id, sizeof(r.job_id), "%s", sqlite3_column_text(s, 0));
		cb = ring_from_row(s, 1, &r);
		if (cb == 0)
			cb = fn(ctx, &r);
		free(r.nodes);
		if (cb) {
			sqlite3_finalize(s);
			return cb;
		}
	}
	sqlite3_finalize(s);
	return sql_rc(rc);
}

int st_fault_set(struct st_store *st, int node, bool faulty, const char *source, int64_t since_ms)
{
	sqlite3_stmt *s;
	int rc = prepare(st,
			 faulty ? "INSERT OR IGNORE INTO node_faults(node, source, since_ms)"
				  " VALUES(?1, ?2, ?3)"
				: "DELETE FROM node_faults WHERE node = ?1",
			 &s);

	if (rc)
		return rc;
	if (node < 0 || (faulty && !source))
		rc = -EINVAL;
	else if (sqlite3_bind_int(s, 1, node) ||
		 (faulty && (bind_text(s, 2, source) || sqlite3_bind_int64(s, 3, since_ms))))
		rc = bind_error(st);
	else
		rc = step_write(st, s);
	sqlite3_finalize(s);
	return rc;
}

int st_fault_list(struct st_store *st,
		  int (*fn)(void *ctx, int node, const char *source, int64_t since_ms), void *ctx)
{
	sqlite3_stmt *s;
	int rc = prepare(st, "SELECT node, source, since_ms FROM node_faults ORDER BY node", &s);

	if (rc)
		return rc;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		int cb = fn(ctx, sqlite3_column_int(s, 0), (const char *)sqlite3_column_text(s, 1),
			    sqlite3_column_int64(s, 2));

		if (cb) {
			sqlite3_finalize(s);
			return cb;
		}
	}
	sqlite3_finalize(s);
	return sql_rc(rc);
}

/*
 * Calls fn for every intent the query (txn_id, job_id, state, decided; a state
 * written as a literal, so that the partial index intents_open serves the
 * open ones) selects, oldest first.
 */
static int list_intents(struct st_store *st, const char *sql,
			int (*fn)(void *ctx, const struct st_intent *intent), void *ctx)
{
	sqlite3_stmt *s;
	int rc = prepare(st, sql, &s);

	if (rc)
		return rc;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct st_intent in = {.txn_id = sqlite3_column_int64(s, 0)};
		int r;

		snprintf(in.job_id, sizeof(in.job_id), "%s", sqlite3_column_text(s, 1));
		in.state = intent_parse((const char *)sqlite3_column_text(s, 2));
		in.decided = sqlite3_column_int(s, 3) != 0;
		r = read_intent_xcs(st, &in);
		if (r == 0)
			r = read_intent_rings(st, &in);
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

int st_intent_list_open(struct st_store *st, int (*fn)(void *ctx, const struct st_intent *intent),
			void *ctx)
{
	return list_intents(st,
			    "SELECT txn_id, job_id, state, txn_id IN (SELECT txn_id FROM"
			    " intent_decisions) FROM intents WHERE state = 'open' ORDER BY txn_id",
			    fn, ctx);
}

int st_intent_list_failed(struct st_store *st, int (*fn)(void *ctx, const struct st_intent *intent),
			  void *ctx)
{
	return list_intents(
		st,
		"SELECT txn_id, job_id, state, txn_id IN (SELECT txn_id FROM"
		" intent_decisions) FROM intents WHERE state = 'failed' ORDER BY txn_id",
		fn, ctx);
}

int st_intent_settle(struct st_store *st, int64_t txn_id, enum st_intent_state outcome,
		     const char *detail, int64_t now_ms)
{
	sqlite3_stmt *s = NULL;
	int rc;

	if (outcome != ST_INTENT_ROLLED_BACK && outcome != ST_INTENT_FAILED)
		return -EINVAL;
	rc = prepare(st,
		     "UPDATE intents SET state = ?2, detail = ?3, finished_ms = ?4"
		     " WHERE txn_id = ?1 AND state = 'failed'",
		     &s);
	if (rc)
		return rc;
	if (sqlite3_bind_int64(s, 1, txn_id) || bind_text(s, 2, st_intent_state_name(outcome)) ||
	    bind_text(s, 3, detail) || sqlite3_bind_int64(s, 4, now_ms)) {
		sqlite3_finalize(s);
		return bind_error(st);
	}
	rc = step_write(st, s);
	sqlite3_finalize(s);
	if (rc)
		return rc;
	return sqlite3_changes(st->db) ? 0 : -EALREADY;
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
	if (bind_text(s, 1, job_id)) {
		rc = bind_error(st);
		sqlite3_finalize(s);
		return rc;
	}
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct st_circuit c = {{sqlite3_column_int(s, 0), sqlite3_column_int(s, 1),
					sqlite3_column_int(s, 2), sqlite3_column_int(s, 3)},
				       ""};
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
	int rc = prepare(
		st, "SELECT job_id, a, b, h, links FROM job_links ORDER BY job_id, a, b, h", &s);

	if (rc)
		return rc;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct st_link l = {"", sqlite3_column_int(s, 1), sqlite3_column_int(s, 2),
				    sqlite3_column_int(s, 3), sqlite3_column_int(s, 4)};
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
	int rc = prepare(st,
			 drained ? "INSERT OR IGNORE INTO drained(device) VALUES(?1)"
				 : "DELETE FROM drained WHERE device = ?1",
			 &s);

	if (rc)
		return rc;
	if (!device)
		rc = -EINVAL;
	else if (bind_text(s, 1, device))
		rc = bind_error(st);
	else
		rc = step_write(st, s);
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

/* ---- plan figures and emptiness (version 5) ---- */

int st_figures_put(struct st_store *st, const char *job_id, const char *figures)
{
	sqlite3_stmt *s;
	int rc = prepare(st, "INSERT OR REPLACE INTO job_figures(job_id, figures) VALUES(?1, ?2)",
			 &s);

	if (rc)
		return rc;
	if (!job_id || !figures)
		rc = -EINVAL;
	else if (bind_text(s, 1, job_id) || bind_text(s, 2, figures))
		rc = bind_error(st);
	else
		rc = step_write(st, s);
	sqlite3_finalize(s);
	return rc;
}

int st_figures_list(struct st_store *st,
		    int (*fn)(void *ctx, const char *job_id, const char *figures), void *ctx)
{
	sqlite3_stmt *s;
	int rc = prepare(st, "SELECT job_id, figures FROM job_figures", &s);

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
	return sql_rc(rc);
}

int st_is_empty(struct st_store *st, bool *empty)
{
	sqlite3_stmt *s;
	int rc = prepare(st, "SELECT EXISTS(SELECT 1 FROM jobs) OR EXISTS(SELECT 1 FROM circuits)",
			 &s);

	if (rc)
		return rc;
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		*empty = sqlite3_column_int(s, 0) == 0;
	rc = sql_rc(rc);
	sqlite3_finalize(s);
	return rc;
}

/* ---- retention ---- */

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

/*
 * Returns items (n used of *cap elements of elem bytes) with room for one
 * more: items itself, or a larger copy (*cap updated). NULL when out of
 * memory; items is still valid then.
 */
static void *grow(void *items, size_t *cap, size_t n, size_t elem)
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

static int prune_add_job(struct prune_batch *b, const unsigned char *id)
{
	char *copy = id ? strdup((const char *)id) : NULL;
	char **ids = copy ? grow(b->job_ids, &b->cap_jobs, b->n_jobs, sizeof(*ids)) : NULL;

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
	int rc = sql_rc(step_rc);

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

	rearm(kept);
	if (!id)
		return -ENOMEM;
	if (bind_text(kept, 1, (const char *)id))
		return bind_error(st);
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
	int rc = prepare(st,
			 "SELECT updated_ms, seq FROM jobs WHERE " FINISHED_JOB
			 " ORDER BY updated_ms DESC, seq DESC LIMIT 1 OFFSET ?1",
			 &s);

	if (rc)
		return rc;
	*found = false;
	if (sqlite3_bind_int64(s, 1,
			       keep_jobs < INT64_MAX ? (sqlite3_int64)keep_jobs : INT64_MAX)) {
		rc = bind_error(st);
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
		rc = prepare(st,
			     "SELECT id, updated_ms, seq FROM jobs WHERE " FINISHED_JOB
			     " ORDER BY updated_ms, seq",
			     &walk);
	if (rc == 0)
		rc = prepare(
			st,
			"SELECT EXISTS(SELECT 1 FROM circuits WHERE job_id = ?1)"
			" OR EXISTS(SELECT 1 FROM rings WHERE job_id = ?1)"
			" OR EXISTS(SELECT 1 FROM intents WHERE state = 'open' AND job_id = ?1)"
			" OR EXISTS(SELECT 1 FROM intent_xcs WHERE job_id = ?1 AND txn_id IN"
			"  (SELECT txn_id FROM intents WHERE state = 'open'))"
			" OR EXISTS(SELECT 1 FROM intent_links WHERE job_id = ?1 AND txn_id IN"
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
	int rc = prepare(st,
			 "SELECT txn_id FROM intents WHERE state <> 'open' AND finished_ms < ?1"
			 " ORDER BY finished_ms",
			 &s);

	if (rc)
		return rc;
	if (sqlite3_bind_int64(s, 1, cutoff_ms)) {
		rc = bind_error(st);
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
		txns = grow(b->txn_ids, &b->cap_txns, b->n_txns, sizeof(*txns));

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

/*
 * Runs each statement of sql once with ?1 bound to text, or to num when
 * text is NULL. The statements are prepared on first use into stmts (n of
 * them, NULL until then); the caller finalizes them.
 */
static int run_each(struct st_store *st, const char *const *sql, sqlite3_stmt **stmts, size_t n,
		    const char *text, int64_t num)
{
	for (size_t i = 0; i < n; i++) {
		int rc = stmts[i] ? 0 : prepare(st, sql[i], &stmts[i]);

		if (rc)
			return rc;
		rearm(stmts[i]);
		if (text ? bind_text(stmts[i], 1, text) : sqlite3_bind_int64(stmts[i], 1, num))
			return bind_error(st);
		rc = sql_rc(sqlite3_step(stmts[i]));
		if (rc)
			return rc;
	}
	return 0;
}

#define N_JOB_DELETES	 12
#define N_INTENT_DELETES 9

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
		"DELETE FROM intents WHERE job_id = ?1",
		"DELETE FROM job_links WHERE job_id = ?1",
		"DELETE FROM rings WHERE job_id = ?1",
		"DELETE FROM job_figures WHERE job_id = ?1",
		"DELETE FROM rail_job_moves WHERE job_id = ?1",
		"DELETE FROM jobs WHERE id = ?1",
	};
	sqlite3_stmt *stmts[N_JOB_DELETES] = {NULL};
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < b->n_jobs; i++)
		rc = run_each(st, sql, stmts, N_JOB_DELETES, b->job_ids[i], 0);
	for (size_t i = 0; i < N_JOB_DELETES; i++)
		sqlite3_finalize(stmts[i]);
	return rc;
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
		"DELETE FROM intents WHERE txn_id = ?1",
	};
	sqlite3_stmt *stmts[N_INTENT_DELETES] = {NULL};
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < b->n_txns; i++)
		rc = run_each(st, sql, stmts, N_INTENT_DELETES, NULL, b->txn_ids[i]);
	for (size_t i = 0; i < N_INTENT_DELETES; i++)
		sqlite3_finalize(stmts[i]);
	return rc;
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
	rc = write_begin(st);
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
	if (rc == 0)
		rc = write_commit(st);
	if (rc) {
		rollback(st);
		prune_batch_clear(&b);
		return rc;
	}
	*n_deleted = b.n_jobs + b.n_txns;
	for (size_t i = 0; on_job_deleted && i < b.n_jobs; i++)
		on_job_deleted(ctx, b.job_ids[i]);
	prune_batch_clear(&b);
	return 0;
}

/* ---- rail-OCS fabrics ---- */

int st_rail_intent_begin(struct st_store *st, const struct ocs_xc *removals, size_t n_removals,
			 const struct st_circuit *additions, size_t n_additions,
			 const struct st_rail_swap *swap, int64_t now_ms, int64_t *txn_id)
{
	sqlite3_stmt *s = NULL;
	int64_t txn = 0;
	int rc;

	if (!swap || !swap->kind || !swap->source || (n_removals && !removals) ||
	    (n_additions && !additions) || (swap->n_moves && !swap->moves))
		return -EINVAL;
	rc = write_begin(st);
	if (rc)
		return rc;
	rc = intent_insert(st, ST_RAIL_OWNER, removals, n_removals, additions, n_additions, NULL, 0,
			   now_ms, &txn);
	if (rc == 0)
		rc = prepare(st,
			     "INSERT INTO rail_intents(txn_id, gpu, kind, source, since_ms)"
			     " VALUES(?1, ?2, ?3, ?4, ?5)",
			     &s);
	if (rc == 0) {
		if (sqlite3_bind_int64(s, 1, txn) || sqlite3_bind_int64(s, 2, swap->gpu) ||
		    bind_text(s, 3, swap->kind) || bind_text(s, 4, swap->source) ||
		    sqlite3_bind_int64(s, 5, swap->since_ms))
			rc = bind_error(st);
		else
			rc = sql_rc(sqlite3_step(s));
		sqlite3_finalize(s);
	}
	s = NULL;
	if (rc == 0)
		rc = prepare(st,
			     "INSERT INTO rail_intent_moves(txn_id, rail_port, old_gpu, new_gpu,"
			     " job_id) VALUES(?1, ?2, ?3, ?4, ?5)",
			     &s);
	for (size_t i = 0; rc == 0 && i < swap->n_moves; i++) {
		const struct st_rail_move *m = &swap->moves[i];

		rearm(s);
		if (sqlite3_bind_int64(s, 1, txn) || sqlite3_bind_int64(s, 2, m->rail_port) ||
		    sqlite3_bind_int64(s, 3, m->old_gpu) || sqlite3_bind_int64(s, 4, m->new_gpu) ||
		    bind_text(s, 5, m->job_id))
			rc = bind_error(st);
		else
			rc = sql_rc(sqlite3_step(s));
	}
	sqlite3_finalize(s);
	if (rc == 0)
		rc = write_commit(st);
	if (rc) {
		rollback(st);
		return rc;
	}
	*txn_id = txn;
	return 0;
}

int st_rail_fault_set(struct st_store *st, int64_t gpu, bool faulty, const char *source,
		      int64_t since_ms)
{
	sqlite3_stmt *s;
	int rc = prepare(st,
			 faulty ? "INSERT OR IGNORE INTO rail_gpu_faults(gpu, source, since_ms)"
				  " VALUES(?1, ?2, ?3)"
				: "DELETE FROM rail_gpu_faults WHERE gpu = ?1",
			 &s);

	if (rc)
		return rc;
	if (gpu < 0 || (faulty && !source))
		rc = -EINVAL;
	else if (sqlite3_bind_int64(s, 1, gpu) ||
		 (faulty && (bind_text(s, 2, source) || sqlite3_bind_int64(s, 3, since_ms))))
		rc = bind_error(st);
	else
		rc = step_write(st, s);
	sqlite3_finalize(s);
	return rc;
}

int st_rail_fault_list(struct st_store *st,
		       int (*fn)(void *ctx, int64_t gpu, const char *source, int64_t since_ms),
		       void *ctx)
{
	sqlite3_stmt *s;
	int rc = prepare(st, "SELECT gpu, source, since_ms FROM rail_gpu_faults ORDER BY gpu", &s);

	if (rc)
		return rc;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		int cb = fn(ctx, sqlite3_column_int64(s, 0),
			    (const char *)sqlite3_column_text(s, 1), sqlite3_column_int64(s, 2));

		if (cb) {
			sqlite3_finalize(s);
			return cb;
		}
	}
	sqlite3_finalize(s);
	return sql_rc(rc);
}

int st_rail_move_list(struct st_store *st, int (*fn)(void *ctx, const struct st_rail_job_move *m),
		      void *ctx)
{
	sqlite3_stmt *s;
	int rc = prepare(st,
			 "SELECT job_id, txn_id, rail_port, old_gpu, new_gpu, moved_ms"
			 " FROM rail_job_moves ORDER BY txn_id, rail_port",
			 &s);

	if (rc)
		return rc;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct st_rail_job_move m = {0};
		const unsigned char *job = sqlite3_column_text(s, 0);
		int cb;

		snprintf(m.job_id, sizeof(m.job_id), "%s", job ? (const char *)job : "");
		m.txn_id = sqlite3_column_int64(s, 1);
		m.rail_port = sqlite3_column_int64(s, 2);
		m.old_gpu = sqlite3_column_int64(s, 3);
		m.new_gpu = sqlite3_column_int64(s, 4);
		m.moved_ms = sqlite3_column_int64(s, 5);
		cb = fn(ctx, &m);
		if (cb) {
			sqlite3_finalize(s);
			return cb;
		}
	}
	sqlite3_finalize(s);
	return sql_rc(rc);
}
