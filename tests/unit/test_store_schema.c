/*
 * test_store_schema.c - unit tests of the state store's schema
 * (daemon/store/store.c) on real files: refusal of a file or snapshot image of
 * an unknown schema version, the in-place upgrades of a file (1 and 2 to
 * the current version) and of an older replica's snapshot image (6 to 7),
 * and the query plans of the store's own statements (captured from its
 * connection with a trace hook, so the test checks the SQL store.c runs):
 * every table reached through an index. The upgrade of the ring tables
 * (3 to 4) is tested with the rings in test_store.c.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "store.h"
#include "store_repl.h"
#include "test_store_fixture.h"

static void test_unknown_schema_refused(void **state)
{
	struct fixture *f = *state;
	struct st_store *st = open_store(f->path);
	sqlite3 *db;
	char err[256] = "";

	st_close(st);
	assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db,
				      "UPDATE meta SET value = '9' WHERE key = 'schema_version'",
				      NULL, NULL, NULL),
			 SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(st_open(f->path, &st, err, sizeof(err)), -EPROTO);
	assert_null(st);
	assert_non_null(strstr(err, "schema version 9"));

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
	struct st_job j = {0};
	assert_int_equal(st_job_get(st, "old", &j), 0);
	st_job_clear(&j);
	st_close(st);
	assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
	sqlite3_stmt *q;
	assert_int_equal(sqlite3_prepare_v2(db,
					    "SELECT value FROM meta WHERE key = 'schema_version'",
					    -1, &q, NULL),
			 SQLITE_OK);
	assert_int_equal(sqlite3_step(q), SQLITE_ROW);
	assert_string_equal((const char *)sqlite3_column_text(q, 0), "8");
	sqlite3_finalize(q);
	sqlite3_close(db);
	assert_true(st_open("/nonexistent-dir/x.db", &st, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "cannot open /nonexistent-dir/x.db"));
}

/* ---- the statements store.c runs, captured from its own connection ---- */

#define TRACE_MAX 48

struct trace {
	char sql[TRACE_MAX][1024];
	int n;
};

static struct trace *tracing; /* where on_stmt records; NULL: nowhere */

static int on_stmt(unsigned type, void *ctx, void *stmt, void *unexpanded)
{
	const char *sql = sqlite3_sql(stmt);

	if (type != SQLITE_TRACE_STMT || !tracing || !sql)
		return 0;
	for (int i = 0; i < tracing->n; i++)
		if (strcmp(tracing->sql[i], sql) == 0)
			return 0;
	if (tracing->n < TRACE_MAX)
		snprintf(tracing->sql[tracing->n++], sizeof(tracing->sql[0]), "%s", sql);
	return 0;
}

/* Installed as an SQLite auto-extension: every new connection is traced. */
static int trace_connection(sqlite3 *db, char **err, const struct sqlite3_api_routines *api)
{
	return sqlite3_trace_v2(db, SQLITE_TRACE_STMT, on_stmt, NULL);
}

/* Opens the store with its connection traced into *t (cleared by the caller). */
static struct st_store *open_traced(const char *path, struct trace *t)
{
	struct st_store *st;

	/* void (*)(void) is SQLite's generic entry point type; it matches any function. */
	assert_int_equal(sqlite3_auto_extension((void (*)(void))trace_connection), SQLITE_OK);
	st = open_store(path);
	sqlite3_cancel_auto_extension((void (*)(void))trace_connection);
	tracing = t;
	t->n = 0;
	return st;
}

/* Every line of EXPLAIN QUERY PLAN of each statement of t that mentions word. */
static void plans(const char *path, const struct trace *t, const char *word, char *out, size_t size)
{
	sqlite3 *db = raw_open(path);

	out[0] = '\0';
	for (int i = 0; i < t->n; i++) {
		char sql[1100];
		sqlite3_stmt *q;

		if (!strstr(t->sql[i], word))
			continue;
		snprintf(sql, sizeof(sql), "EXPLAIN QUERY PLAN %s", t->sql[i]);
		assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &q, NULL), SQLITE_OK);
		while (sqlite3_step(q) == SQLITE_ROW) {
			size_t len = strlen(out);

			snprintf(out + len, size - len, "%s\n", sqlite3_column_text(q, 3));
		}
		sqlite3_finalize(q);
	}
	sqlite3_close(db);
}

/*
 * No plan line reads a whole table or sorts: every table is reached through
 * an index (a SELECT without FROM scans its "constant row").
 */
static void assert_indexed(const char *plan)
{
	const char *line = plan;

	assert_true(plan[0] != '\0');
	while (*line) {
		const char *end = strchr(line, '\n');
		char one[256];

		snprintf(one, sizeof(one), "%.*s", (int)(end - line), line);
		if ((strncmp(one, "SCAN ", 5) == 0 && !strstr(one, " USING ") &&
		     strcmp(one, "SCAN CONSTANT ROW") != 0) ||
		    strstr(one, "TEMP B-TREE"))
			fail_msg("not through an index: '%s' in\n%s", one, plan);
		line = end + 1;
	}
}

static void check_plans(const char *path, struct st_store *st, struct trace *t)
{
	char plan[4096], *id = NULL;
	struct st_job got;
	size_t n = 0;

	t->n = 0;
	assert_int_equal(st_job_get(st, "p-old", &got), 0);
	st_job_clear(&got);
	plans(path, t, "FROM jobs WHERE id", plan, sizeof(plan));
	assert_non_null(strstr(plan, "SEARCH jobs USING"));
	assert_non_null(strstr(plan, "INDEX sqlite_autoindex_jobs_1 (id=?)"));
	assert_indexed(plan);

	t->n = 0;
	assert_int_equal(st_job_by_key(st, "key-old", &id), 0);
	assert_string_equal(id, "p-old");
	free(id);
	plans(path, t, "idempotency_key", plan, sizeof(plan));
	assert_non_null(strstr(plan, "SEARCH jobs USING INDEX sqlite_autoindex_jobs_2"
				     " (idempotency_key=?)"));
	assert_indexed(plan);

	/* the next creation order number: the largest seq, read from jobs_seq */
	t->n = 0;
	put_job(st, "p-new", NULL, "PENDING", 2);
	plans(path, t, "INSERT INTO jobs", plan, sizeof(plan));
	assert_non_null(strstr(plan, "jobs_seq"));
	assert_indexed(plan);

	t->n = 0;
	assert_int_equal(st_intent_list_open(st, collect_intent, &(struct st_intent){0}), 0);
	plans(path, t, "intents", plan, sizeof(plan));
	assert_non_null(strstr(plan, "intents_open"));
	assert_indexed(plan);

	/* every statement of a prune that deletes a job and an intent of a live one */
	t->n = 0;
	assert_int_equal(st_prune(st, 1000000, 1000, 100, 10, &n, NULL, NULL), 0);
	assert_int_equal(n, 2);
	plans(path, t, "", plan, sizeof(plan));
	assert_non_null(strstr(plan, "jobs_finished"));
	assert_non_null(strstr(plan, "intents_finished"));
	assert_non_null(strstr(plan, "intents_job"));
	assert_indexed(plan);
}

/* Fills a store for check_plans: an old finished job with an intent, and an old intent of a live
 * job. */
static void fill_for_plans(struct st_store *st)
{
	put_job(st, "p-old", "key-old", "RELEASED", 5);
	put_job(st, "p-live", NULL, "ACTIVE", 5);
	finished_intent(st, "p-old", 4, ST_INTENT_ROLLED_BACK);
	finished_intent(st, "p-live", 4, ST_INTENT_ROLLED_BACK);
}

static void test_query_plans(void **state)
{
	struct fixture *f = *state;
	struct trace *t = calloc(1, sizeof(*t));
	struct st_store *st = open_traced(f->path, t);

	fill_for_plans(st);
	check_plans(f->path, st, t);
	tracing = NULL;
	st_close(st);
	free(t);
}

/* The schema ocsd wrote up to version 2, exactly as it was. */
static const char *const v2_schema =
	"CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
	"CREATE TABLE jobs("
	" id TEXT PRIMARY KEY, idempotency_key TEXT UNIQUE, state TEXT NOT NULL,"
	" reason TEXT, request BLOB, created_ms INTEGER NOT NULL,"
	" updated_ms INTEGER NOT NULL, seq INTEGER NOT NULL);"
	"CREATE TABLE intents("
	" txn_id INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT NOT NULL,"
	" state TEXT NOT NULL, detail TEXT, created_ms INTEGER NOT NULL, finished_ms INTEGER);"
	"CREATE TABLE intent_xcs("
	" txn_id INTEGER NOT NULL REFERENCES intents(txn_id), op TEXT NOT NULL,"
	" grp INTEGER NOT NULL, device INTEGER NOT NULL, in_port INTEGER NOT NULL,"
	" out_port INTEGER NOT NULL, job_id TEXT);"
	"CREATE INDEX intent_xcs_txn ON intent_xcs(txn_id);"
	"CREATE TABLE circuits("
	" grp INTEGER NOT NULL, device INTEGER NOT NULL, in_port INTEGER NOT NULL,"
	" out_port INTEGER NOT NULL, job_id TEXT NOT NULL,"
	" PRIMARY KEY(grp, device, in_port));"
	"CREATE INDEX circuits_job ON circuits(job_id);"
	"CREATE TABLE drained(device TEXT PRIMARY KEY);"
	"CREATE TABLE intent_links("
	" txn_id INTEGER NOT NULL REFERENCES intents(txn_id), job_id TEXT NOT NULL,"
	" a INTEGER NOT NULL, b INTEGER NOT NULL, h INTEGER NOT NULL, links INTEGER NOT NULL);"
	"CREATE INDEX intent_links_txn ON intent_links(txn_id);"
	"CREATE TABLE job_links("
	" job_id TEXT NOT NULL, a INTEGER NOT NULL, b INTEGER NOT NULL, h INTEGER NOT NULL,"
	" links INTEGER NOT NULL, PRIMARY KEY(job_id, a, b, h));"
	"INSERT INTO meta VALUES('schema_version', '2');";

/* A version-2 file is upgraded to 4 in place: rows kept, indexes added and used. */
static void test_upgrade_2_to_4(void **state)
{
	struct fixture *f = *state;
	struct trace *t = calloc(1, sizeof(*t));
	struct circuits cs = {0};
	struct st_store *st;
	struct st_job got;
	char ids[64] = "";

	raw_exec(f->path, "PRAGMA journal_mode=WAL;");
	raw_exec(f->path, v2_schema);
	raw_exec(f->path,
		 "INSERT INTO jobs(id, idempotency_key, state, created_ms, updated_ms, seq) VALUES"
		 " ('p-old', 'key-old', 'RELEASED', 1, 5, 1), ('p-live', NULL, 'ACTIVE', 1, 5, 2);"
		 "INSERT INTO intents(job_id, state, created_ms, finished_ms) VALUES"
		 " ('p-old', 'rolled_back', 3, 4), ('p-live', 'rolled_back', 3, 4);"
		 "INSERT INTO intent_xcs VALUES (1, 'add', 0, 0, 1, 2, 'p-old'),"
		 " (2, 'add', 0, 0, 1, 2, 'p-live');"
		 "INSERT INTO circuits VALUES (1, 1, 1, 1, 'p-live');"
		 "INSERT INTO job_links VALUES ('p-live', 0, 1, 0, 1);");
	assert_int_equal(raw_long(f->path, "SELECT COUNT(*) FROM sqlite_master WHERE name IN"
					   " ('jobs_seq', 'jobs_finished', 'intents_job',"
					   " 'intents_open', 'intents_finished')"),
			 0);

	st = open_traced(f->path, t);
	assert_int_equal(raw_long(f->path, "SELECT value FROM meta WHERE key = 'schema_version'"),
			 8); /* the current version */
	assert_int_equal(raw_long(f->path, "SELECT COUNT(*) FROM sqlite_master WHERE name IN"
					   " ('jobs_seq', 'jobs_finished', 'intents_job',"
					   " 'intents_open', 'intents_finished')"),
			 5);
	/* version 6: the intent detail tables have an id primary key (what
	 * SQLite's session extension needs), the old rows with their rowids */
	assert_int_equal(raw_long(f->path,
				  "SELECT COUNT(*) FROM pragma_table_info('intent_xcs'),"
				  " pragma_table_info('intent_links') l,"
				  " pragma_table_info('intent_rings') r,"
				  " pragma_table_info('intent_bundles') b"
				  " WHERE pragma_table_info.name = 'id' AND"
				  " pragma_table_info.pk = 1 AND l.name = 'id' AND l.pk = 1"
				  " AND r.name = 'id' AND r.pk = 1 AND b.name = 'id' AND b.pk = 1"),
			 1);
	assert_int_equal(
		raw_long(f->path,
			 "SELECT COUNT(*) FROM intent_xcs WHERE"
			 " (id = 1 AND job_id = 'p-old') OR (id = 2 AND job_id = 'p-live')"),
		2);
	assert_int_equal(st_job_get(st, "p-live", &got), 0);
	assert_string_equal(got.state, "ACTIVE");
	st_job_clear(&got);
	assert_int_equal(st_circuit_list(st, NULL, collect_circuit, &cs), 0);
	assert_int_equal(cs.n, 1);
	assert_int_equal(all_links(st).n, 1);
	/* the upgraded file answers through the new indexes, creation order kept */
	check_plans(f->path, st, t);
	tracing = NULL;
	assert_int_equal(st_job_list(st, count_job, ids), 0);
	assert_string_equal(ids, "p-live,p-new,");
	st_close(st);
	free(t);

	/* opened again: nothing to upgrade, still the current version */
	st = open_store(f->path);
	st_close(st);
	assert_int_equal(raw_long(f->path, "SELECT value FROM meta WHERE key = 'schema_version'"),
			 8); /* the current version */
}

/*
 * A replica that loads a snapshot an older ocsd wrote (schema 6, no
 * intent_decisions) upgrades it as a file is upgraded at open, so that every
 * replica loading it has the same copy; an image of an unknown version is
 * refused.
 */
static void test_image_upgrade(void **state)
{
	struct st_store *a = NULL, *b = NULL;
	struct st_circuit add[] = {{{0, 0, 1, 2}, "ji"}};
	struct st_intent got = {0};
	void *image = NULL;
	unsigned char *old;
	sqlite3_int64 old_len = 0;
	size_t len = 0;
	sqlite3 *raw;
	char err[256] = "";
	int64_t txn;

	(void)state;
	assert_int_equal(st_open_memory(&a, err, sizeof(err)), 0);
	assert_int_equal(st_intent_begin(a, "ji", NULL, 0, add, 1, NULL, 0, 1, &txn), 0);
	assert_int_equal(st_image_save(a, &image, &len), 0);
	/* the same image as schema 6 wrote it */
	old = sqlite3_malloc64(len);
	assert_non_null(old);
	memcpy(old, image, len);
	assert_int_equal(sqlite3_open(":memory:", &raw), SQLITE_OK);
	assert_int_equal(
		sqlite3_deserialize(raw, "main", old, (sqlite3_int64)len, (sqlite3_int64)len,
				    SQLITE_DESERIALIZE_FREEONCLOSE | SQLITE_DESERIALIZE_RESIZEABLE),
		SQLITE_OK);
	assert_int_equal(sqlite3_exec(raw,
				      "DROP TABLE intent_decisions;"
				      " UPDATE meta SET value = '6' WHERE key = 'schema_version';",
				      NULL, NULL, NULL),
			 SQLITE_OK);
	old = sqlite3_serialize(raw, "main", &old_len, 0);
	assert_non_null(old);
	sqlite3_close(raw);

	assert_int_equal(st_open_memory(&b, err, sizeof(err)), 0);
	assert_int_equal(st_image_load(b, old, (size_t)old_len, err, sizeof(err)), 0);
	assert_int_equal(st_intent_list_open(b, collect_intent, &got), 0);
	assert_int_equal(got.txn_id, txn);
	assert_int_equal(st_intent_decide(b, txn, 2), 0);
	got = (struct st_intent){0};
	assert_int_equal(st_intent_list_open(b, collect_intent, &got), 0);
	assert_true(got.decided);
	/* a newer version than this ocsd knows is refused */
	assert_int_equal(sqlite3_open(":memory:", &raw), SQLITE_OK);
	assert_int_equal(
		sqlite3_exec(raw,
			     "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
			     " INSERT INTO meta VALUES('schema_version', '9');",
			     NULL, NULL, NULL),
		SQLITE_OK);
	sqlite3_free(old);
	old = sqlite3_serialize(raw, "main", &old_len, 0);
	sqlite3_close(raw);
	assert_int_equal(st_image_load(b, old, (size_t)old_len, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "schema version 9"));
	sqlite3_free(old);
	st_image_free(image);
	st_close(a);
	st_close(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_image_upgrade, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unknown_schema_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_query_plans, setup, teardown),
		cmocka_unit_test_setup_teardown(test_upgrade_2_to_4, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
