/*
 * store_rail.c - the store's tables of rail-OCS fabrics (schema 5): a GPU
 * swap's intent (the cross-connects through store_intents.c, the swap and
 * the rail ports it re-joins here) in one transaction, and the GPUs jobs
 * hold after swaps (written when the swap's intent is confirmed,
 * st_intent_finish). The faulty GPUs are store_faults.c's.
 */
#include "store_internal.h"

#include <errno.h>
#include <stdio.h>

static int bind_swap(sqlite3_stmt *s, size_t i, const void *ctx)
{
	const struct st_rail_swap *swap = ctx;

	(void)i;
	return sqlite3_bind_int64(s, 2, swap->gpu) || st_bind_text(s, 3, swap->kind) ||
	       st_bind_text(s, 4, swap->source) || sqlite3_bind_int64(s, 5, swap->since_ms);
}

static int bind_move(sqlite3_stmt *s, size_t i, const void *ctx)
{
	const struct st_rail_move *m = &((const struct st_rail_move *)ctx)[i];

	return sqlite3_bind_int64(s, 2, m->rail_port) || sqlite3_bind_int64(s, 3, m->old_gpu) ||
	       sqlite3_bind_int64(s, 4, m->new_gpu) || st_bind_text(s, 5, m->job_id);
}

int st_rail_intent_begin(struct st_store *st, const struct ocs_xc *removals, size_t n_removals,
			 const struct st_circuit *additions, size_t n_additions,
			 const struct st_rail_swap *swap, int64_t now_ms, int64_t *txn_id)
{
	int64_t txn = 0;
	int rc;

	if (!swap || !swap->kind || !swap->source || (n_removals && !removals) ||
	    (n_additions && !additions) || (swap->n_moves && !swap->moves))
		return -EINVAL;
	rc = st_write_begin(st);
	if (rc)
		return rc;
	rc = st_intent_insert(st, ST_RAIL_OWNER, removals, n_removals, additions, n_additions, NULL,
			      0, now_ms, &txn);
	if (rc == 0)
		rc = st_intent_rows(st,
				    "INSERT INTO rail_intents(txn_id, gpu, kind, source, since_ms)"
				    " VALUES(?1, ?2, ?3, ?4, ?5)",
				    txn, 1, bind_swap, swap);
	if (rc == 0)
		rc = st_intent_rows(
			st,
			"INSERT INTO rail_intent_moves(txn_id, rail_port, old_gpu, new_gpu,"
			" job_id) VALUES(?1, ?2, ?3, ?4, ?5)",
			txn, swap->n_moves, bind_move, swap->moves);
	rc = st_write_end(st, rc);
	if (rc == 0)
		*txn_id = txn;
	return rc;
}

int st_rail_move_list(struct st_store *st, int (*fn)(void *ctx, const struct st_rail_job_move *m),
		      void *ctx)
{
	sqlite3_stmt *s;
	int rc = st_prepare(st,
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
	return st_sql_rc(rc);
}
