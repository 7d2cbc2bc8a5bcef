/*
 * store_rings.c - the store's tables of OCSTrx ring domains (schema 4): a
 * ring intent with its rings and bundle settings (and the node fault that
 * caused it) stored in one transaction, the ring part of an intent read
 * back for store_intents.c, the rings of confirmed transactions and the
 * faulty nodes.
 */
#include "store_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	rc = st_write_begin(st);
	if (rc)
		return rc;
	if (fault) {
		rc = st_prepare(st,
				"INSERT OR IGNORE INTO node_faults(node, source, since_ms)"
				" VALUES(?1, ?2, ?3)",
				&s);
		if (rc == 0)
			rc = sqlite3_bind_int(s, 1, fault->node) ||
					     st_bind_text(s, 2, fault->source) ||
					     sqlite3_bind_int64(s, 3, fault->since_ms)
				     ? st_bind_error(st)
				     : st_sql_rc(sqlite3_step(s));
		sqlite3_finalize(s);
		s = NULL;
		if (rc)
			goto rollback;
	}
	rc = st_prepare(st, "INSERT INTO intents(job_id, state, created_ms) VALUES(?1, 'open', ?2)",
			&s);
	if (rc == 0) {
		if (st_bind_text(s, 1, job_id) || sqlite3_bind_int64(s, 2, now_ms))
			rc = st_bind_error(st);
		else
			rc = st_sql_rc(sqlite3_step(s));
	}
	sqlite3_finalize(s);
	s = NULL;
	if (rc)
		goto rollback;
	txn = sqlite3_last_insert_rowid(st->db);
	rc = st_prepare(st, "INSERT INTO ring_intents(txn_id) VALUES(?1)", &s);
	if (rc == 0)
		rc = sqlite3_bind_int64(s, 1, txn) ? st_bind_error(st) : st_sql_rc(sqlite3_step(s));
	sqlite3_finalize(s);
	s = NULL;
	if (rc == 0)
		rc = st_prepare(
			st,
			"INSERT INTO intent_rings(txn_id, ring, nodes, last_change,"
			" failed_node, reason, changed_ms) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
			&s);
	for (size_t i = 0; rc == 0 && i < n_rings; i++) {
		char *text = nodes_text(rings[i].nodes, rings[i].m);

		st_rearm(s);
		if (!text)
			rc = -ENOMEM;
		else if (sqlite3_bind_int64(s, 1, txn) || sqlite3_bind_int(s, 2, rings[i].index) ||
			 st_bind_text(s, 3, text) ||
			 st_bind_text(s, 4, st_ring_change_name(rings[i].last_change)) ||
			 sqlite3_bind_int(s, 5, rings[i].failed_node) ||
			 st_bind_text(s, 6, rings[i].reason) ||
			 sqlite3_bind_int64(s, 7, rings[i].changed_ms))
			rc = st_bind_error(st);
		else
			rc = st_sql_rc(sqlite3_step(s));
		free(text);
	}
	sqlite3_finalize(s);
	s = NULL;
	if (rc == 0)
		rc = st_prepare(
			st,
			"INSERT INTO intent_bundles(txn_id, node, bundle, path, distance, dir)"
			" VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
			&s);
	for (size_t i = 0; rc == 0 && i < n_bundles; i++) {
		const struct st_bundle *b = &bundles[i];

		st_rearm(s);
		if (sqlite3_bind_int64(s, 1, txn) || sqlite3_bind_int(s, 2, b->node) ||
		    sqlite3_bind_int(s, 3, b->bundle) || sqlite3_bind_int(s, 4, b->path) ||
		    sqlite3_bind_int(s, 5, b->distance) || sqlite3_bind_int(s, 6, b->dir))
			rc = st_bind_error(st);
		else
			rc = st_sql_rc(sqlite3_step(s));
	}
	sqlite3_finalize(s);
	if (rc == 0)
		rc = st_write_commit(st);
	if (rc)
		goto rollback;
	*txn_id = txn;
	return 0;
rollback:
	st_rollback(st);
	return rc;
}

/* The ring part of an open intent (nothing for an intent of circuits). */
int st_read_intent_rings(struct st_store *st, struct st_intent *in)
{
	sqlite3_stmt *s;
	size_t cap = 0;
	int rc = st_prepare(st, "SELECT 1 FROM ring_intents WHERE txn_id = ?1", &s);

	if (rc)
		return rc;
	rc = sqlite3_bind_int64(s, 1, in->txn_id) ? st_bind_error(st) : sqlite3_step(s);
	in->has_rings = rc == SQLITE_ROW;
	rc = rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : rc < 0 ? rc : st_sql_rc(rc);
	sqlite3_finalize(s);
	if (rc || !in->has_rings)
		return rc;
	rc = st_prepare(st,
			"SELECT ring, nodes, last_change, failed_node, reason, changed_ms"
			" FROM intent_rings WHERE txn_id = ?1 ORDER BY ring",
			&s);
	if (rc)
		return rc;
	if (sqlite3_bind_int64(s, 1, in->txn_id))
		rc = st_bind_error(st);
	while (rc == 0 && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct rg_ring *p = st_grow(in->rings, &cap, in->n_rings, sizeof(*p));

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
	rc = rc == SQLITE_DONE ? 0 : rc > 0 ? st_sql_rc(rc) : rc;
	sqlite3_finalize(s);
	if (rc)
		return rc;
	cap = 0;
	rc = st_prepare(st,
			"SELECT node, bundle, path, distance, dir FROM intent_bundles"
			" WHERE txn_id = ?1 ORDER BY rowid",
			&s);
	if (rc)
		return rc;
	if (sqlite3_bind_int64(s, 1, in->txn_id))
		rc = st_bind_error(st);
	while (rc == 0 && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct st_bundle *p = st_grow(in->bundles, &cap, in->n_bundles, sizeof(*p));

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
	rc = rc == SQLITE_DONE ? 0 : rc > 0 ? st_sql_rc(rc) : rc;
	sqlite3_finalize(s);
	return rc;
}

int st_ring_list(struct st_store *st, int (*fn)(void *ctx, const struct rg_ring *r), void *ctx)
{
	sqlite3_stmt *s;
	int rc = st_prepare(
		st,
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
	return st_sql_rc(rc);
}

int st_fault_set(struct st_store *st, int node, bool faulty, const char *source, int64_t since_ms)
{
	sqlite3_stmt *s;
	int rc = st_prepare(st,
			    faulty ? "INSERT OR IGNORE INTO node_faults(node, source, since_ms)"
				     " VALUES(?1, ?2, ?3)"
				   : "DELETE FROM node_faults WHERE node = ?1",
			    &s);

	if (rc)
		return rc;
	if (node < 0 || (faulty && !source))
		rc = -EINVAL;
	else if (sqlite3_bind_int(s, 1, node) ||
		 (faulty && (st_bind_text(s, 2, source) || sqlite3_bind_int64(s, 3, since_ms))))
		rc = st_bind_error(st);
	else
		rc = st_step_write(st, s);
	sqlite3_finalize(s);
	return rc;
}

int st_fault_list(struct st_store *st,
		  int (*fn)(void *ctx, int node, const char *source, int64_t since_ms), void *ctx)
{
	sqlite3_stmt *s;
	int rc = st_prepare(st, "SELECT node, source, since_ms FROM node_faults ORDER BY node", &s);

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
	return st_sql_rc(rc);
}
