/*
 * store_intents.c - the intent log of store.h (rules 2 to 4 there): an
 * intent stored before any device is touched (st_intent_begin), the
 * decision to commit (st_intent_decide) and its withdrawal (st_intent_undecide), the outcome with
 * the change of the committed circuits, links, rings and rail moves in one transaction
 * (st_intent_finish); the open and failed intents recovery reads back, and
 * the committed circuits and leaf-spine links. The ring part of an intent
 * is read by store_rings.c; rail swaps add their rows in store_rail.c.
 */
#include "store_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* An intent's cross-connects as rows of intent_xcs: its removals, then its additions. */
struct xc_rows {
	const struct ocs_xc *removals;
	size_t n_removals;
	const struct st_circuit *additions;
};

static int bind_xc(sqlite3_stmt *s, size_t i, const void *ctx)
{
	const struct xc_rows *r = ctx;
	bool del = i < r->n_removals;
	const struct ocs_xc *xc = del ? &r->removals[i] : &r->additions[i - r->n_removals].xc;

	return st_bind_text(s, 2, del ? "del" : "add") || sqlite3_bind_int(s, 3, xc->group) ||
	       sqlite3_bind_int(s, 4, xc->device) || sqlite3_bind_int(s, 5, xc->in) ||
	       sqlite3_bind_int(s, 6, xc->out) ||
	       st_bind_text(s, 7, del ? NULL : r->additions[i - r->n_removals].job_id);
}

static int bind_link(sqlite3_stmt *s, size_t i, const void *ctx)
{
	const struct st_link *l = &((const struct st_link *)ctx)[i];

	return st_bind_text(s, 2, l->job_id) || sqlite3_bind_int(s, 3, l->a) ||
	       sqlite3_bind_int(s, 4, l->b) || sqlite3_bind_int(s, 5, l->h) ||
	       sqlite3_bind_int(s, 6, l->links);
}

/* The rows of an intent, inside the caller's SQLite transaction. */
int st_intent_insert(struct st_store *st, const char *job_id, const struct ocs_xc *removals,
		     size_t n_removals, const struct st_circuit *additions, size_t n_additions,
		     const struct st_link *links, size_t n_links, int64_t now_ms, int64_t *txn_id)
{
	struct xc_rows xcs = {removals, n_removals, additions};
	int64_t txn;
	int rc = st_intent_row(st, job_id, now_ms, &txn);

	if (rc == 0)
		rc = st_intent_rows(
			st,
			"INSERT INTO intent_xcs(txn_id, op, grp, device, in_port, out_port, job_id)"
			" VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
			txn, n_removals + n_additions, bind_xc, &xcs);
	if (rc == 0)
		rc = st_intent_rows(st,
				    "INSERT INTO intent_links(txn_id, job_id, a, b, h, links)"
				    " VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
				    txn, n_links, bind_link, links);
	if (rc == 0)
		*txn_id = txn;
	return rc;
}

static int bind_job(sqlite3_stmt *s, size_t i, const void *ctx)
{
	return st_bind_text(s, 2, ((const char *const *)ctx)[i]);
}

int st_intent_begin(struct st_store *st, const char *job_id, const struct ocs_xc *removals,
		    size_t n_removals, const struct st_circuit *additions, size_t n_additions,
		    const struct st_link *links, size_t n_links, int64_t now_ms, int64_t *txn_id)
{
	return st_intent_begin_wave(st, &job_id, 1, removals, n_removals, additions, n_additions,
				    links, n_links, now_ms, txn_id);
}

int st_intent_begin_wave(struct st_store *st, const char *const *jobs, size_t n_jobs,
			 const struct ocs_xc *removals, size_t n_removals,
			 const struct st_circuit *additions, size_t n_additions,
			 const struct st_link *links, size_t n_links, int64_t now_ms,
			 int64_t *txn_id)
{
	int64_t txn = 0;
	int rc;

	if (!n_jobs || !jobs || !jobs[0] || (n_removals && !removals) ||
	    (n_additions && !additions) || (n_links && !links))
		return -EINVAL;
	for (size_t i = 0; i < n_jobs; i++)
		if (!jobs[i])
			return -EINVAL;
	rc = st_write_begin(st);
	if (rc)
		return rc;
	rc = st_intent_insert(st, jobs[0], removals, n_removals, additions, n_additions, links,
			      n_links, now_ms, &txn);
	/* one job: intents.job_id says it all (the rows of every older ocsd) */
	if (rc == 0 && n_jobs > 1)
		rc = st_intent_rows(st, "INSERT INTO intent_jobs(txn_id, job_id) VALUES(?1, ?2)",
				    txn, n_jobs, bind_job, jobs);
	rc = st_write_end(st, rc);
	if (rc == 0)
		*txn_id = txn;
	return rc;
}

/* Inside a write transaction: 0 when intent txn_id is open, -ENOENT, -EALREADY or -errno. */
static int check_open(struct st_store *st, int64_t txn_id)
{
	sqlite3_stmt *s = NULL;
	int rc = st_prepare(st, "SELECT state FROM intents WHERE txn_id = ?1", &s);

	if (rc)
		return rc;
	rc = sqlite3_bind_int64(s, 1, txn_id) ? st_bind_error(st) : sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		const unsigned char *state = sqlite3_column_text(s, 0);

		rc = !state ? -ENOMEM : strcmp((const char *)state, "open") == 0 ? 0 : -EALREADY;
	} else if (rc == SQLITE_DONE) {
		rc = -ENOENT;
	} else if (rc > 0) {
		rc = st_sql_rc(rc);
	}
	sqlite3_finalize(s);
	return rc;
}

/* Records (decided) or withdraws the decision to commit open intent txn_id: one write. */
static int set_decision(struct st_store *st, int64_t txn_id, bool decided, int64_t now_ms)
{
	sqlite3_stmt *s = NULL;
	int rc = st_write_begin(st);

	if (rc)
		return rc;
	rc = check_open(st, txn_id);
	if (rc == 0)
		rc = st_prepare(st,
				decided ? "INSERT INTO intent_decisions(txn_id, decided_ms)"
					  " VALUES(?1, ?2)"
					: "DELETE FROM intent_decisions WHERE txn_id = ?1",
				&s);
	if (rc == 0)
		rc = sqlite3_bind_int64(s, 1, txn_id) ||
				     (decided && sqlite3_bind_int64(s, 2, now_ms))
			     ? st_bind_error(st)
			     : st_sql_rc(sqlite3_step(s));
	sqlite3_finalize(s);
	return st_write_end(st, rc);
}

int st_intent_decide(struct st_store *st, int64_t txn_id, int64_t now_ms)
{
	return set_decision(st, txn_id, true, now_ms);
}

int st_intent_undecide(struct st_store *st, int64_t txn_id)
{
	return set_decision(st, txn_id, false, 0);
}

/*
 * Applies intent txn_id's removals and additions to the circuits table and
 * its links to their jobs (and a ring or rail intent's rows), inside the
 * caller's write transaction. On a replicated store the circuits' rows are
 * left out of the changeset (the session is paused for them) and the entry
 * names txn_id instead: every copy derives the same rows from the same
 * intent_xcs (store_repl.h, "a confirm"). The other tables are recorded.
 */
static int apply_confirmed(struct st_store *st, int64_t txn_id, int64_t now_ms)
{
	char sql[2048];
	bool derived = st->session && st->confirm_txn == 0;
	int rc;

	if (derived)
		sqlite3session_enable(st->session, 0);
	rc = st_confirm_circuits(st, txn_id, &st->confirm_removed, &st->confirm_added);
	if (derived)
		sqlite3session_enable(st->session, 1);
	if (rc)
		return rc;
	if (derived)
		st->confirm_txn = txn_id;
	snprintf(sql, sizeof(sql),
		 "DELETE FROM job_links WHERE job_id IN"
		 " (SELECT job_id FROM intents WHERE txn_id = %lld"
		 "  UNION SELECT job_id FROM intent_jobs WHERE txn_id = %lld"
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
		 (long long)txn_id, (long long)txn_id, (long long)txn_id, (long long)now_ms,
		 (long long)txn_id);
	return st_exec(st, sql);
}

/*
 * Records outcome and detail of intent txn_id in one write transaction;
 * CONFIRMED also applies the intent (apply_confirmed). Finishing wants the
 * intent open (check_open: -ENOENT, -EALREADY), settling wants it failed
 * (-EALREADY).
 */
static int record_outcome(struct st_store *st, bool settle, int64_t txn_id,
			  enum st_intent_state outcome, const char *detail, int64_t now_ms,
			  const struct st_job_state *on_confirm, size_t n_on_confirm)
{
	sqlite3_stmt *s = NULL;
	int rc = st_write_begin(st);

	if (rc)
		return rc;
	rc = settle ? 0 : check_open(st, txn_id);
	if (rc == 0)
		rc = st_prepare(
			st,
			settle ? "UPDATE intents SET state = ?2, detail = ?3, finished_ms = ?4"
				 " WHERE txn_id = ?1 AND state = 'failed'"
			       : "UPDATE intents SET state = ?2, detail = ?3, finished_ms = ?4"
				 " WHERE txn_id = ?1",
			&s);
	if (rc == 0) {
		if (sqlite3_bind_int64(s, 1, txn_id) ||
		    st_bind_text(s, 2, st_intent_state_name(outcome)) ||
		    st_bind_text(s, 3, detail) || sqlite3_bind_int64(s, 4, now_ms))
			rc = st_bind_error(st);
		else
			rc = st_sql_rc(sqlite3_step(s));
		sqlite3_finalize(s);
	}
	if (rc == 0 && !sqlite3_changes(st->db))
		rc = -EALREADY;
	if (rc == 0 && outcome == ST_INTENT_CONFIRMED)
		rc = apply_confirmed(st, txn_id, now_ms);
	if (rc == 0 && outcome == ST_INTENT_CONFIRMED && n_on_confirm)
		rc = st_write_job_states(st, on_confirm, n_on_confirm);
	return st_write_end(st, rc);
}

int st_intent_note(struct st_store *st, int64_t txn_id, const char *detail)
{
	sqlite3_stmt *s = NULL;
	int rc = st_write_begin(st);

	if (rc)
		return rc;
	rc = check_open(st, txn_id);
	if (rc == 0)
		rc = st_prepare(st, "UPDATE intents SET detail = ?2 WHERE txn_id = ?1", &s);
	if (rc == 0)
		rc = sqlite3_bind_int64(s, 1, txn_id) || st_bind_text(s, 2, detail)
			     ? st_bind_error(st)
			     : st_sql_rc(sqlite3_step(s));
	sqlite3_finalize(s);
	return st_write_end(st, rc);
}

int st_intent_finish(struct st_store *st, int64_t txn_id, enum st_intent_state outcome,
		     const char *detail, int64_t now_ms)
{
	return st_intent_finish_states(st, txn_id, outcome, detail, now_ms, NULL, 0);
}

int st_intent_finish_states(struct st_store *st, int64_t txn_id, enum st_intent_state outcome,
			    const char *detail, int64_t now_ms,
			    const struct st_job_state *on_confirm, size_t n)
{
	if (outcome == ST_INTENT_OPEN || (unsigned)outcome > ST_INTENT_FAILED)
		return -EINVAL;
	return record_outcome(st, false, txn_id, outcome, detail, now_ms, on_confirm, n);
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
	int rc = st_prepare(st,
			    "SELECT op, grp, device, in_port, out_port, job_id FROM intent_xcs"
			    " WHERE txn_id = ?1 ORDER BY rowid",
			    &s);

	if (rc)
		return rc;
	if (sqlite3_bind_int64(s, 1, in->txn_id)) {
		rc = st_bind_error(st);
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
	return st_sql_rc(rc);
oom:
	sqlite3_finalize(s);
	return -ENOMEM;
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
	int rc = st_prepare(st, sql, &s);

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
			r = st_read_intent_rings(st, &in);
		if (r == 0)
			r = fn(ctx, &in);
		st_intent_clear(&in);
		if (r) {
			sqlite3_finalize(s);
			return r;
		}
	}
	sqlite3_finalize(s);
	return st_sql_rc(rc);
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
	if (outcome != ST_INTENT_ROLLED_BACK && outcome != ST_INTENT_FAILED &&
	    outcome != ST_INTENT_CONFIRMED)
		return -EINVAL;
	return record_outcome(st, true, txn_id, outcome, detail, now_ms, NULL, 0);
}

int st_circuit_list(struct st_store *st, const char *job_id,
		    int (*fn)(void *ctx, const struct st_circuit *c), void *ctx)
{
	sqlite3_stmt *s;
	int rc = st_prepare(st,
			    "SELECT grp, device, in_port, out_port, job_id FROM circuits"
			    " WHERE ?1 IS NULL OR job_id = ?1 ORDER BY grp, device, in_port",
			    &s);

	if (rc)
		return rc;
	if (st_bind_text(s, 1, job_id)) {
		rc = st_bind_error(st);
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
	return st_sql_rc(rc);
}

int st_circuit_get(struct st_store *st, const struct ocs_xc *key, struct st_circuit *out)
{
	sqlite3_stmt *s;
	int rc = st_prepare(st,
			    "SELECT out_port, job_id FROM circuits"
			    " WHERE grp = ?1 AND device = ?2 AND in_port = ?3",
			    &s);

	if (rc)
		return rc;
	if (sqlite3_bind_int(s, 1, key->group) || sqlite3_bind_int(s, 2, key->device) ||
	    sqlite3_bind_int(s, 3, key->in)) {
		rc = st_bind_error(st);
		sqlite3_finalize(s);
		return rc;
	}
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		*out = (struct st_circuit){
			{key->group, key->device, key->in, sqlite3_column_int(s, 0)}, ""};
		snprintf(out->job_id, sizeof(out->job_id), "%s", sqlite3_column_text(s, 1));
		rc = 0;
	} else {
		rc = rc == SQLITE_DONE ? -ENOENT : st_sql_rc(rc);
	}
	sqlite3_finalize(s);
	return rc;
}

int st_link_list(struct st_store *st, int (*fn)(void *ctx, const struct st_link *l), void *ctx)
{
	sqlite3_stmt *s;
	int rc = st_prepare(
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
	return st_sql_rc(rc);
}
