/*
 * store_faults.c - the store's two tables of faulty things, one shape
 * (key PK, source, since_ms): the faulty nodes of an OCSTrx ring domain
 * (node_faults, schema 4) and the faulty GPUs of a rail-OCS fabric
 * (rail_gpu_faults, schema 5). Marking is INSERT OR IGNORE: a node or GPU
 * already faulty keeps its first source and time. A ring intent stores the
 * node fault that caused it in its own transaction (st_node_fault_insert);
 * a swap's intent marks its GPU when it is confirmed (store_intents.c).
 */
#include "store_internal.h"

#include <errno.h>

/* One fault table: its statements (?1 the key, ?2 source, ?3 since_ms). */
struct fault_table {
	const char *mark, *clear, *list;
};

static const struct fault_table node_faults = {
	"INSERT OR IGNORE INTO node_faults(node, source, since_ms) VALUES(?1, ?2, ?3)",
	"DELETE FROM node_faults WHERE node = ?1",
	"SELECT node, source, since_ms FROM node_faults ORDER BY node",
};

static const struct fault_table gpu_faults = {
	"INSERT OR IGNORE INTO rail_gpu_faults(gpu, source, since_ms) VALUES(?1, ?2, ?3)",
	"DELETE FROM rail_gpu_faults WHERE gpu = ?1",
	"SELECT gpu, source, since_ms FROM rail_gpu_faults ORDER BY gpu",
};

/* Marks key faulty or healthy: a write of its own, or (in_txn) in the caller's. */
static int fault_write(struct st_store *st, const struct fault_table *t, int64_t key, bool faulty,
		       const char *source, int64_t since_ms, bool in_txn)
{
	sqlite3_stmt *s;
	int rc = st_prepare(st, faulty ? t->mark : t->clear, &s);

	if (rc)
		return rc;
	if (key < 0 || (faulty && !source))
		rc = -EINVAL;
	else if (sqlite3_bind_int64(s, 1, key) ||
		 (faulty && (st_bind_text(s, 2, source) || sqlite3_bind_int64(s, 3, since_ms))))
		rc = st_bind_error(st);
	else
		rc = in_txn ? st_sql_rc(sqlite3_step(s)) : st_step_write(st, s);
	sqlite3_finalize(s);
	return rc;
}

static int fault_list(struct st_store *st, const struct fault_table *t,
		      int (*fn)(void *ctx, int64_t key, const char *source, int64_t since_ms),
		      void *ctx)
{
	sqlite3_stmt *s;
	int rc = st_prepare(st, t->list, &s);

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
	return st_sql_rc(rc);
}

int st_fault_set(struct st_store *st, int node, bool faulty, const char *source, int64_t since_ms)
{
	return fault_write(st, &node_faults, node, faulty, source, since_ms, false);
}

int st_node_fault_insert(struct st_store *st, const struct st_fault *fault)
{
	return fault_write(st, &node_faults, fault->node, true, fault->source, fault->since_ms,
			   true);
}

/* st_fault_list's callback, which takes the node as an int. */
struct node_fault_fn {
	int (*fn)(void *ctx, int node, const char *source, int64_t since_ms);
	void *ctx;
};

static int node_fault(void *arg, int64_t node, const char *source, int64_t since_ms)
{
	const struct node_fault_fn *f = arg;

	return f->fn(f->ctx, (int)node, source, since_ms);
}

int st_fault_list(struct st_store *st,
		  int (*fn)(void *ctx, int node, const char *source, int64_t since_ms), void *ctx)
{
	struct node_fault_fn f = {fn, ctx};

	return fault_list(st, &node_faults, node_fault, &f);
}

int st_rail_fault_set(struct st_store *st, int64_t gpu, bool faulty, const char *source,
		      int64_t since_ms)
{
	return fault_write(st, &gpu_faults, gpu, faulty, source, since_ms, false);
}

int st_rail_fault_list(struct st_store *st,
		       int (*fn)(void *ctx, int64_t gpu, const char *source, int64_t since_ms),
		       void *ctx)
{
	return fault_list(st, &gpu_faults, fn, ctx);
}
