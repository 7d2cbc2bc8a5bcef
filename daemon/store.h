/*
 * store.h - ocsd's durable state in one SQLite file (WAL journal, full
 * sync): jobs, the intent of every device transaction, the committed
 * circuits and the leaf-spine links of every job's plan.
 *
 * The rules that make recovery possible (ARCHITECTURE.md section 5, #3):
 *  1. A job is stored before the client is told it was accepted.
 *  2. A transaction's intent (every cross-connect it removes and adds) is
 *     stored before any device is touched: st_intent_begin().
 *  3. Its outcome and the resulting circuit table change are stored in one
 *     SQLite transaction: st_intent_finish(). A crash between 2 and 3 leaves
 *     an open intent, which recovery resolves by reading the devices back.
 *  4. The circuits table is therefore always the state of the last
 *     confirmed transaction: what the devices should hold. The same goes
 *     for the jobs' leaf-spine links, which travel in the intent.
 *
 * Threading: one store handle belongs to one thread (the event loop). Calls
 * block on disk I/O for the duration of a commit (fsync).
 */
#ifndef OCSD_STORE_H
#define OCSD_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fabric.h"

struct st_store;

/*
 * Opens (creating if needed) the store at path. Returns 0, or a negative
 * errno-style code with a message in err. Caller closes with st_close()
 * (accepts NULL).
 */
int st_open(const char *path, struct st_store **out, char *err, size_t err_len);
void st_close(struct st_store *st);

/* A job as stored. Strings and the request blob belong to the caller. */
struct st_job {
	char *id;
	char *idempotency_key; /* may be NULL */
	char *state;           /* lifecycle state name, e.g. "ACTIVE" */
	char *reason;          /* why FAILED; may be NULL */
	void *request;         /* the request as received (opaque, e.g. protobuf) */
	size_t request_len;
	int64_t created_ms;
	int64_t updated_ms;
};

/* Frees the strings and blob of a job filled by st_job_get()/st_job_list(). */
void st_job_clear(struct st_job *job);

/* Inserts the job, or replaces the stored one with the same id. */
int st_job_put(struct st_store *st, const struct st_job *job);
/* Updates state and reason only; -ENOENT if there is no such job. */
int st_job_set_state(struct st_store *st, const char *id, const char *state, const char *reason,
		     int64_t updated_ms);
/* Fills *job (caller clears it); -ENOENT if absent. */
int st_job_get(struct st_store *st, const char *id, struct st_job *job);
/* Finds the job id holding an idempotency key; -ENOENT if none (caller frees *id). */
int st_job_by_key(struct st_store *st, const char *key, char **id);
/*
 * Calls fn for every job in creation order; fn's job is cleared after it
 * returns. A non-zero return from fn stops the walk and is returned.
 */
int st_job_list(struct st_store *st, int (*fn)(void *ctx, const struct st_job *job), void *ctx);

enum st_intent_state {
	ST_INTENT_OPEN,        /* stored, devices may have been touched */
	ST_INTENT_CONFIRMED,   /* every device confirmed: circuits updated */
	ST_INTENT_ROLLED_BACK, /* every device back to its pre-image */
	ST_INTENT_FAILED,      /* rollback could not be proven: needs reconciliation */
};

const char *st_intent_state_name(enum st_intent_state s);

/* A circuit (one cross-connect) with the job that owns it. */
struct st_circuit {
	struct ocs_xc xc;
	char job_id[128];
};

/*
 * Leaf-spine links of a job's plan (the planner's L[a][b][h]: links of the
 * leaf pair a < b through spine h): how the job loads its leaves' uplinks,
 * which later jobs sharing those leaves are planned around.
 */
struct st_link {
	char job_id[128];
	int a, b, h, links;
};

/*
 * Stores the intent of a transaction for job_id: the cross-connects it
 * removes and the ones it adds (adds carry their owner job), and the
 * leaf-spine links the jobs it plans will have (links may be NULL when
 * n_links is 0). Returns 0 and the new transaction id.
 */
int st_intent_begin(struct st_store *st, const char *job_id, const struct ocs_xc *removals,
		    size_t n_removals, const struct st_circuit *additions, size_t n_additions,
		    const struct st_link *links, size_t n_links, int64_t now_ms,
		    int64_t *txn_id);
/*
 * Records the outcome of an open intent. CONFIRMED also applies the
 * intent's removals and additions to the circuits table and makes its links
 * the links of their jobs (replacing what the intent's job and every job
 * named in its links had), atomically with the outcome. -ENOENT: no such
 * intent; -EALREADY: not open any more.
 */
int st_intent_finish(struct st_store *st, int64_t txn_id, enum st_intent_state outcome,
		     const char *detail, int64_t now_ms);

/* An intent as read back for recovery. Arrays belong to the caller. */
struct st_intent {
	int64_t txn_id;
	char job_id[128];
	enum st_intent_state state;
	struct ocs_xc *removals;
	size_t n_removals;
	struct st_circuit *additions;
	size_t n_additions;
};

void st_intent_clear(struct st_intent *in);
/* Calls fn for every open intent, oldest first (see st_job_list for fn). */
int st_intent_list_open(struct st_store *st,
			int (*fn)(void *ctx, const struct st_intent *intent), void *ctx);

/*
 * The circuit table. job_id NULL lists every circuit, else only that job's.
 * fn as for st_job_list.
 */
int st_circuit_list(struct st_store *st, const char *job_id,
		    int (*fn)(void *ctx, const struct st_circuit *c), void *ctx);

/* Every job's leaf-spine links, by job id. fn as for st_job_list. */
int st_link_list(struct st_store *st, int (*fn)(void *ctx, const struct st_link *l), void *ctx);

/* Drained devices (by name): they get no new circuits, across restarts. */
int st_drain_set(struct st_store *st, const char *device, bool drained);
int st_drain_list(struct st_store *st, int (*fn)(void *ctx, const char *device), void *ctx);

#endif
