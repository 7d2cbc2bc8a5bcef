/*
 * store_internal.h - what the files of the SQLite state store (store.h)
 * share: the store handle behind struct st_store, the SQL helpers and the
 * write transaction of store.c, and the two pieces one table file lends
 * another. Not for use outside the store; like store.h, one handle belongs
 * to one thread (the event loop).
 *
 * Files (no file calls back into one that calls it; checked by the
 * callgraph test):
 *
 *   store.c          the connection: schema and migrations, open/close,
 *                    the write transaction, replication hooks, images;
 *                    the SQL helpers, an intent's own row and detail rows
 *   store_jobs.c     jobs, drained devices, plan figures, emptiness
 *   store_intents.c  the intent log, committed circuits and links
 *   store_rings.c    OCSTrx rings, ring intents
 *   store_rail.c     rail-OCS swaps, the jobs' moved GPUs
 *   store_faults.c   faulty nodes (ring domains) and faulty GPUs (rail-OCS)
 *   store_prune.c    retention (st_prune)
 *   store_touched.c  what applied changesets change, row by row
 *
 *   store_rail.c --> store_intents.c --> store_rings.c --> store_faults.c
 *   --> store.c; store_jobs.c, store_prune.c --> store.c --> store_touched.c
 */
#ifndef OCSD_STORE_INTERNAL_H
#define OCSD_STORE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <sqlite3.h>

#include "store.h"
#include "store_repl.h"

struct st_store {
	sqlite3 *db;
	/* a replicated store (store_repl.h); NULL for a plain SQLite file */
	const struct st_repl_hooks *repl;
	void *repl_ctx;
	sqlite3_session *session; /* the open write transaction's changes */
	/* the open write's confirm whose circuits every copy derives (0: none), and the
	 * circuits it removed and added (store_repl.h) */
	int64_t confirm_txn, confirm_removed, confirm_added;
	bool commit_allowed; /* st_write_commit() or a changeset apply is committing */
	bool repl_failed;    /* the last write failed in the replication */
	void (*on_error)(void *ctx, int rc);
	void *on_error_ctx;
	void (*on_commit)(void *ctx, double seconds);
	void *on_commit_ctx;
	struct timespec write_began; /* CLOCK_MONOTONIC at st_write_begin() */
	struct st_touched *touched;  /* what applied changesets changed; NULL: not noted */
};

/* The lifecycle states of a job that is over (store.h, st_prune). */
#define ST_FINISHED_JOB "state IN ('RELEASED', 'FAILED')"

/* ---- store_touched.c: what applied changesets changed (store_repl.h) ---- */

/* Notes the rows changeset changes (before st_apply_changeset applies it). */
void st_touched_note(struct st_store *st, const void *changeset, size_t len);
/* Every row may have changed (an image loaded): the next take says `all`. */
void st_touched_all(struct st_store *st);
/* Notes the circuits intent txn_id's confirm changed (st_confirm_circuits just ran). */
void st_touched_confirm(struct st_store *st, int64_t txn_id);

/* ---- store.c: SQL helpers ---- */

/*
 * Maps an SQLite result (extended result codes are on) to the errno-style
 * codes of this module.
 */
int st_sql_rc(int rc);
/* The error of the sqlite3_bind_*() call on st that just failed. */
int st_bind_error(struct st_store *st);
int st_exec(struct st_store *st, const char *sql);
/*
 * The circuits table takes intent txn_id's removals and additions (part of
 * its confirm: store_intents.c), inside the caller's write transaction;
 * *removed and *added say how many rows each changed. Also how a copy
 * applies an entry naming a confirm (st_apply_changeset).
 */
int st_confirm_circuits(struct st_store *st, int64_t txn_id, int64_t *removed, int64_t *added);
int st_prepare(struct st_store *st, const char *sql, sqlite3_stmt **stmt);
/*
 * Binds text, or NULL when v is NULL. Returns an SQLite result code. The
 * text is not copied: every statement here is finalized before its
 * arguments go away.
 */
int st_bind_text(sqlite3_stmt *s, int i, const char *v);
/*
 * Runs s again with new arguments. Its reset's return is the previous
 * step's result, which the caller already checked.
 */
void st_rearm(sqlite3_stmt *s);
/*
 * Returns items (n used of *cap elements of elem bytes) with room for one
 * more: items itself, or a larger copy (*cap updated). NULL when out of
 * memory; items is still valid then.
 */
void *st_grow(void *items, size_t *cap, size_t n, size_t elem);
/*
 * Inserts n detail rows of intent txn_id (its cross-connects, links, rings,
 * bundles, swap) through the one statement sql, whose ?1 is the intent's
 * id, inside the caller's write transaction: bind(s, i, ctx) binds row i's
 * other values (NULL: it has none) and returns an SQLite result code, or
 * a negative errno-style code that stops the insert. 0 or -errno.
 */
int st_intent_rows(struct st_store *st, const char *sql, int64_t txn_id, size_t n,
		   int (*bind)(sqlite3_stmt *s, size_t i, const void *ctx), const void *ctx);
/*
 * The intents row of a new open intent of job_id, inside the caller's
 * write transaction: *txn_id its id. Every kind of intent starts with it.
 */
int st_intent_row(struct st_store *st, const char *job_id, int64_t now_ms, int64_t *txn_id);

/* ---- store.c: the write transaction ---- */

/*
 * Every write transaction starts with st_write_begin() and ends with
 * st_write_commit() or st_rollback(). On a replicated store (store_repl.h)
 * the commit first hands the transaction's changeset to the replication's
 * publish hook; any other commit is refused. On failure of st_write_commit()
 * the transaction is still open: the caller rolls it back. st_rollback()
 * has no result: nothing of the transaction was committed either way.
 */
int st_write_begin(struct st_store *st);
int st_write_commit(struct st_store *st);
void st_rollback(struct st_store *st);
/*
 * Ends the open write transaction: commits it when rc (the result of its
 * statements) is 0, else, or when the commit fails, rolls it back. Returns
 * rc or the commit's failure.
 */
int st_write_end(struct st_store *st, int rc);
/* Sets the state of n jobs inside the open write transaction (-ENOENT: a job is missing). */
int st_write_job_states(struct st_store *st, const struct st_job_state *rows, size_t n);
/* One statement as a write transaction of its own. */
int st_step_write(struct st_store *st, sqlite3_stmt *s);

/* ---- store_intents.c ---- */

/*
 * The rows of an intent (intents, intent_xcs, intent_links), inside the
 * caller's write transaction; *txn_id is the new intent's id.
 */
int st_intent_insert(struct st_store *st, const char *job_id, const struct ocs_xc *removals,
		     size_t n_removals, const struct st_circuit *additions, size_t n_additions,
		     const struct st_link *links, size_t n_links, int64_t now_ms, int64_t *txn_id);

/* ---- store_faults.c ---- */

/*
 * Marks fault->node faulty (as st_fault_set) inside the caller's write
 * transaction: a ring intent and the fault that caused it in one commit.
 */
int st_node_fault_insert(struct st_store *st, const struct st_fault *fault);

/* ---- store_rings.c ---- */

/*
 * The ring part of an open intent (nothing for an intent of circuits):
 * in->rings and in->bundles, freed by st_intent_clear().
 */
int st_read_intent_rings(struct st_store *st, struct st_intent *in);

#endif
