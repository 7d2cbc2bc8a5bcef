/*
 * store_repl.h - what a replicated store backend (store_etcd.c) needs of the
 * SQLite store (store.c): an in-memory local copy with ocsd's schema, a hook
 * that receives every write transaction as one SQLite changeset before it
 * commits locally, the applying of changesets written by another replica,
 * and whole-database images for snapshots.
 *
 * The SQLite engine stays the one query engine; the backend only decides
 * whether a write may commit (its changeset reached the replicated log) and
 * feeds the copy what other replicas wrote. store.c calls the backend only
 * through these hooks, so the two files never call each other.
 *
 * Threading: as store.h (the store's thread only).
 */
#ifndef OCSD_STORE_REPL_H
#define OCSD_STORE_REPL_H

#include <stddef.h>

#include "store.h"

/*
 * A log entry (what publish is handed and st_apply_changeset takes) is one
 * write transaction: its SQLite changeset, or, when the write confirmed an
 * intent, the line "C TXN REMOVED ADDED\n" and then the changeset. The
 * circuits such a confirm removes and adds are not in its changeset: every
 * copy holds the intent's rows (intent_xcs) already and derives them with
 * the same SQL (st_confirm_circuits), checking the counts, so a confirm of
 * 16,384 cross-connects costs no session capture, changeset row or log
 * byte per circuit. (Changesets begin with 'T' or 'P', never 'C'.)
 */
#define ST_CONFIRM_ENTRY "C "

struct st_repl_hooks {
	/*
	 * Called before every write transaction begins (the copy may still be
	 * changed here: e.g. catch up with the log). Non-zero refuses the
	 * write with that code.
	 */
	int (*prepare)(void *ctx);
	/*
	 * Called inside every write transaction that changed something, with
	 * its entry (above: changeset is its bytes), before the local COMMIT.
	 * 0: the change is replicated, commit; else the transaction is rolled
	 * back and the write returns this code.
	 */
	int (*publish)(void *ctx, const void *changeset, size_t len);
	/* The local COMMIT failed after publish succeeded: the copy lags. */
	void (*local_commit_failed)(void *ctx);
	/* Why the last write it refused failed (st_strerror). */
	const char *(*last_error)(void *ctx);
	/* st_close(): free the backend (ctx). */
	void (*destroy)(void *ctx);
};

/* A store in memory with the current schema (the local copy). As st_open. */
int st_open_memory(struct st_store **out, char *err, size_t err_len);
/*
 * Makes st replicated: from now on every write goes through hooks->publish
 * and any commit that bypasses it fails. hooks and ctx must outlive st;
 * st_close() calls hooks->destroy(ctx).
 */
void st_set_repl(struct st_store *st, const struct st_repl_hooks *hooks, void *ctx);
/*
 * Applies an entry another replica published (a changeset, or a confirm:
 * above), in one transaction. -EPROTO when it does not fit this copy (the
 * rows it changes are not as it expects, a confirm's counts differ: the
 * copies differ) or is malformed; then nothing was applied.
 */
int st_apply_changeset(struct st_store *st, const void *changeset, size_t len);
/*
 * What the changesets applied since the last st_touched_take() changed, row
 * by row (store_touched.c): for a follower that updates its view by the
 * change (follower.c). Noted only once st_touched_track(st, true) was
 * called; keys may repeat.
 */
struct st_touched {
	bool all;    /* rebuild: a table the view holds whole changed, an image
			was loaded, more rows changed than reading each again is
			worth, or a note could not be kept */
	char **jobs; /* ids of jobs whose jobs or job_figures row changed */
	size_t n_jobs;
	struct ocs_xc *circuits; /* (group, device, in) of circuit rows that changed; out 0 */
	size_t n_circuits;
};
/* Starts (on) or stops noting changes. Out of memory: the first take says `all`. */
void st_touched_track(struct st_store *st, bool on);
/* Moves what was noted into *out (caller clears it) and starts afresh. */
void st_touched_take(struct st_store *st, struct st_touched *out);
void st_touched_clear(struct st_touched *t);
/* The whole database as bytes (caller frees with st_image_free()). */
int st_image_save(struct st_store *st, void **image, size_t *len);
void st_image_free(void *image);
/*
 * Replaces the whole database with an image made by st_image_save (copied).
 * -EPROTO with a message in err when its schema version is not this ocsd's.
 */
int st_image_load(struct st_store *st, const void *image, size_t len, char *err, size_t err_len);

#endif
