/*
 * store_rings.c - the store's tables of OCSTrx ring domains (schema 4): a
 * ring intent with its rings and bundle settings (and the node fault that
 * caused it, through store_faults.c) stored in one transaction, the ring
 * part of an intent read back for store_intents.c, the rings of confirmed
 * transactions. The faulty nodes are store_faults.c's.
 */
#include "store_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const change_names[] = {
	[RG_PLACED] = "placed", [RG_BYPASSED] = "bypassed", [RG_REPLACED] = "replaced",
	[RG_LOST] = "lost",	[RG_RELEASED] = "released", [RG_EXTENDED] = "bypass-extended",
};

const char *st_ring_change_name(enum rg_change c)
{
	return c >= RG_PLACED && c <= RG_EXTENDED ? change_names[c] : "unknown";
}

bool st_ring_change_parse(const char *name, enum rg_change *out)
{
	for (int c = RG_PLACED; c <= RG_EXTENDED; c++)
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

static int bind_ring(sqlite3_stmt *s, size_t i, const void *ctx)
{
	const struct rg_ring *r = &((const struct rg_ring *)ctx)[i];
	char *text = nodes_text(r->nodes, r->m);
	int rc;

	if (!text)
		return -ENOMEM;
	rc = sqlite3_bind_int(s, 2, r->index) ||
	     sqlite3_bind_text(s, 3, text, -1, SQLITE_TRANSIENT) ||
	     st_bind_text(s, 4, st_ring_change_name(r->last_change)) ||
	     sqlite3_bind_int(s, 5, r->failed_node) || st_bind_text(s, 6, r->reason) ||
	     sqlite3_bind_int64(s, 7, r->changed_ms);
	free(text);
	return rc;
}

static int bind_bundle(sqlite3_stmt *s, size_t i, const void *ctx)
{
	const struct st_bundle *b = &((const struct st_bundle *)ctx)[i];

	return sqlite3_bind_int(s, 2, b->node) || sqlite3_bind_int(s, 3, b->bundle) ||
	       sqlite3_bind_int(s, 4, b->path) || sqlite3_bind_int(s, 5, b->distance) ||
	       sqlite3_bind_int(s, 6, b->dir);
}

int st_ring_intent_begin(struct st_store *st, const char *job_id, const struct rg_ring *rings,
			 size_t n_rings, const struct st_bundle *bundles, size_t n_bundles,
			 const struct st_fault *fault, int64_t now_ms, int64_t *txn_id)
{
	int64_t txn;
	int rc;

	if (!job_id || (n_rings && !rings) || (n_bundles && !bundles) ||
	    (fault && (fault->node < 0 || !fault->source)))
		return -EINVAL;
	rc = st_write_begin(st);
	if (rc)
		return rc;
	if (fault)
		rc = st_node_fault_insert(st, fault);
	if (rc == 0)
		rc = st_intent_row(st, job_id, now_ms, &txn);
	if (rc == 0)
		rc = st_intent_rows(st, "INSERT INTO ring_intents(txn_id) VALUES(?1)", txn, 1, NULL,
				    NULL);
	if (rc == 0)
		rc = st_intent_rows(
			st,
			"INSERT INTO intent_rings(txn_id, ring, nodes, last_change,"
			" failed_node, reason, changed_ms) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
			txn, n_rings, bind_ring, rings);
	if (rc == 0)
		rc = st_intent_rows(
			st,
			"INSERT INTO intent_bundles(txn_id, node, bundle, path, distance, dir)"
			" VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
			txn, n_bundles, bind_bundle, bundles);
	rc = st_write_end(st, rc);
	if (rc == 0)
		*txn_id = txn;
	return rc;
}

/* Calls row(s, in, &cap) for every row of sql (?1 the intent's id) until one fails. */
static int read_rows(struct st_store *st, const char *sql, struct st_intent *in,
		     int (*row)(sqlite3_stmt *s, struct st_intent *in, size_t *cap))
{
	sqlite3_stmt *s;
	size_t cap = 0;
	int rc = st_prepare(st, sql, &s);

	if (rc)
		return rc;
	if (sqlite3_bind_int64(s, 1, in->txn_id))
		rc = st_bind_error(st);
	while (rc == 0 && (rc = sqlite3_step(s)) == SQLITE_ROW)
		rc = row(s, in, &cap);
	rc = rc == SQLITE_DONE ? 0 : rc > 0 ? st_sql_rc(rc) : rc;
	sqlite3_finalize(s);
	return rc;
}

static int ring_row(sqlite3_stmt *s, struct st_intent *in, size_t *cap)
{
	struct rg_ring *p = st_grow(in->rings, cap, in->n_rings, sizeof(*p));

	if (!p)
		return -ENOMEM;
	in->rings = p;
	p += in->n_rings++; /* counted before it is filled: st_intent_clear frees its nodes */
	memset(p, 0, sizeof(*p));
	snprintf(p->job_id, sizeof(p->job_id), "%.71s", in->job_id);
	return ring_from_row(s, 0, p);
}

static int bundle_row(sqlite3_stmt *s, struct st_intent *in, size_t *cap)
{
	struct st_bundle *p = st_grow(in->bundles, cap, in->n_bundles, sizeof(*p));

	if (!p)
		return -ENOMEM;
	in->bundles = p;
	p[in->n_bundles++] = (struct st_bundle){
		sqlite3_column_int(s, 0), (uint8_t)sqlite3_column_int(s, 1),
		(uint8_t)sqlite3_column_int(s, 2), (uint8_t)sqlite3_column_int(s, 3),
		(uint8_t)sqlite3_column_int(s, 4)};
	return 0;
}

/* The ring part of an open intent (nothing for an intent of circuits). */
int st_read_intent_rings(struct st_store *st, struct st_intent *in)
{
	sqlite3_stmt *s;
	int rc = st_prepare(st, "SELECT 1 FROM ring_intents WHERE txn_id = ?1", &s);

	if (rc)
		return rc;
	rc = sqlite3_bind_int64(s, 1, in->txn_id) ? st_bind_error(st) : sqlite3_step(s);
	in->has_rings = rc == SQLITE_ROW;
	rc = rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : rc < 0 ? rc : st_sql_rc(rc);
	sqlite3_finalize(s);
	if (rc || !in->has_rings)
		return rc;
	rc = read_rows(st,
		       "SELECT ring, nodes, last_change, failed_node, reason, changed_ms"
		       " FROM intent_rings WHERE txn_id = ?1 ORDER BY ring",
		       in, ring_row);
	if (rc == 0)
		rc = read_rows(st,
			       "SELECT node, bundle, path, distance, dir FROM intent_bundles"
			       " WHERE txn_id = ?1 ORDER BY rowid",
			       in, bundle_row);
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
