/*
 * store.h - ocsd's durable state in one SQLite file (WAL journal, full
 * sync): jobs, the intent of every device transaction, the committed
 * circuits and the leaf-spine links of every job's plan; in an OCSTrx ring
 * domain the rings of every job and the faulty nodes; in a rail-OCS fabric
 * the faulty GPUs, the swaps' intents and the jobs' moved GPUs.
 *
 * The rules that make recovery possible (ARCHITECTURE.md section 5, #3):
 *  1. A job is stored before the client is told it was accepted.
 *  2. A transaction's intent (every cross-connect it removes and adds) is
 *     stored before any device is touched: st_intent_begin(). A ring
 *     transaction's (st_ring_intent_begin) is stored while its devices
 *     prepare, before any is confirmed (txn_driver.c says why that is enough).
 *  3. Once every device holds the change unconfirmed and before the first
 *     confirm is sent, the decision to commit is stored: st_intent_decide()
 *     (on etcd that write is the leader's fence: a replica that no longer
 *     leads cannot store it, and then sends no confirm).
 *  4. Its outcome and the resulting circuit table change are stored in one
 *     SQLite transaction: st_intent_finish(). A crash between 2 and 4 leaves
 *     an open intent, which recovery resolves by reading the devices back:
 *     an undecided one is confirmed only if the devices hold it, a decided
 *     one is finished (the devices that reverted are programmed again).
 *  5. The circuits table is therefore always the state of the last
 *     confirmed transaction: what the devices should hold. The same goes
 *     for the jobs' leaf-spine links, which travel in the intent.
 *
 * Retention: jobs that are over (RELEASED, FAILED) and finished intents are
 * deleted by st_prune() once past the retention the caller gives.
 *
 * Writes that fail: every write (st_job_put, st_job_set_state,
 * st_intent_begin, st_intent_decide, st_intent_finish, st_drain_set, st_prune) is one SQLite
 * transaction. It returns 0 once committed, or a negative errno-style code
 * and then has changed nothing: the store is as before the call, and the
 * caller decides (fail the operation, or stop serving writes). Nothing here
 * logs an error and goes on. The codes: -EBUSY another connection held the
 * file's write lock past the busy timeout (st_set_busy_timeout), -ENOSPC
 * disk full, -EROFS read-only file, -ENOMEM, -EEXIST a uniqueness conflict,
 * -EINVAL a bad argument or another constraint, -EIO anything else. One
 * code breaks the rule, on a replicated store only (store_etcd.h):
 * -EINPROGRESS, the write was sent and its answer lost, so it may be in the
 * log: the local copy is as before the call until it catches up, and the
 * caller must not say that nothing changed (st_changed_note).
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
 * The ring records of an OCSTrx ring domain as the store keeps them (the
 * rings table, a ring intent). They live here, below the ring state that
 * holds them in memory (fabric/rings.h, prefix rg_, whose name they keep).
 */

/* How a ring came to be what it is (ocs.v1.RingChange; stored by name: st_ring_change_name). */
enum rg_change {
	RG_PLACED = 1,
	RG_BYPASSED,
	RG_REPLACED,
	RG_LOST,
	RG_RELEASED,
	RG_EXTENDED, /* bypass-extend; RG_BYPASSED (one node fewer) is an older ocsd's record */
};

/* One TP ring of a job. */
struct rg_ring {
	char job_id[72];
	int index;  /* within the job, 0.. */
	int *nodes; /* m entries in ring order (owned by whoever holds the record) */
	int m;	    /* 0 when lost */
	enum rg_change last_change;
	int failed_node; /* extended, bypassed, replaced, lost: the node that failed; -1 otherwise
			  */
	char reason[200];
	int64_t changed_ms;
};

/*
 * Opens (creating if needed) the store at path; a file of an older schema
 * version is upgraded in place (atomically), one of a newer version is
 * refused with -EPROTO. Returns 0, or a negative errno-style code with a
 * message in err. Caller closes with st_close() (accepts NULL).
 */
int st_open(const char *path, struct st_store **out, char *err, size_t err_len);
void st_close(struct st_store *st);

/*
 * The words for a failed call's code rc: on a replicated store (--store
 * etcd) whose last write failed in the replication, its reason (naming
 * etcd and the endpoint); else strerror(-rc). Valid until the next call.
 */
const char *st_strerror(struct st_store *st, int rc);
/* True on a replicated store (--store etcd), false on a plain SQLite file. */
bool st_replicated(const struct st_store *st);
/*
 * What a failed write did, for the caller's message: "nothing changed", or
 * for -EINPROGRESS that the change may be stored all the same.
 */
const char *st_changed_note(int rc);
/*
 * fn (NULL: none) is called with the code of every write transaction that
 * failed to begin or to commit (the disk, a lock or etcd refused it), not
 * with refusals of the arguments (-EEXIST, -ENOENT, -EINVAL, -EALREADY).
 */
void st_set_error_observer(struct st_store *st, void (*fn)(void *ctx, int rc), void *ctx);
/*
 * fn (NULL: none) is called after every write transaction that committed,
 * with its time from st_write_begin() to the end of its COMMIT in seconds
 * (a replicated store's publish included).
 */
void st_set_commit_observer(struct st_store *st, void (*fn)(void *ctx, double seconds), void *ctx);

/*
 * How long a write waits for another connection's lock on the file before
 * it fails with -EBUSY (default 5000 ms).
 */
void st_set_busy_timeout(struct st_store *st, int timeout_ms);

/* A job as stored. Strings and the request blob belong to the caller. */
struct st_job {
	char *id;
	char *idempotency_key; /* may be NULL */
	char *state;	       /* lifecycle state name, e.g. "ACTIVE" */
	char *reason;	       /* why FAILED; may be NULL */
	void *request;	       /* the request as received (opaque, e.g. protobuf) */
	size_t request_len;
	int64_t created_ms;
	int64_t updated_ms;
	int64_t seq; /* the job's place in creation order (read only: writes ignore it) */
};

/* Frees the strings and blob of a job filled by st_job_get()/st_job_list(). */
void st_job_clear(struct st_job *job);

/*
 * Inserts the job, or replaces the stored one with the same id (keeping its
 * creation order). Fails with -EEXIST when another job holds the
 * idempotency key, -EINVAL without id or state; other failures as above.
 */
int st_job_put(struct st_store *st, const struct st_job *job);
/* The same for n jobs in one write: all of them, or none. */
int st_job_put_many(struct st_store *st, const struct st_job *jobs, size_t n);
/*
 * Updates state and reason only; -ENOENT if there is no such job, other
 * failures as above (the stored state is then the previous one).
 */
int st_job_set_state(struct st_store *st, const char *id, const char *state, const char *reason,
		     int64_t updated_ms);
/* One job's new state for st_job_set_states. */
struct st_job_state {
	const char *id, *state, *reason;
	int64_t updated_ms;
};
/* The states of n jobs in one write: all of them, or none (-ENOENT: a job is missing). */
int st_job_set_states(struct st_store *st, const struct st_job_state *rows, size_t n);
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
	ST_INTENT_OPEN,	       /* stored, devices may have been touched */
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
 * n_links is 0). Returns 0 and the new transaction id; on failure no intent
 * was stored (and no device may be touched).
 */
int st_intent_begin(struct st_store *st, const char *job_id, const struct ocs_xc *removals,
		    size_t n_removals, const struct st_circuit *additions, size_t n_additions,
		    const struct st_link *links, size_t n_links, int64_t now_ms, int64_t *txn_id);
/*
 * Like st_intent_begin, for a wave: one transaction for the n_jobs jobs
 * (at least one; jobs[0] is the intent's job_id) whose circuits and links
 * the change carries (each addition and link names its own job). A
 * released job of the wave has no additions or links: CONFIRMED then
 * clears its links as it clears the intent's job's (st_intent_finish).
 */
int st_intent_begin_wave(struct st_store *st, const char *const *jobs, size_t n_jobs,
			 const struct ocs_xc *removals, size_t n_removals,
			 const struct st_circuit *additions, size_t n_additions,
			 const struct st_link *links, size_t n_links, int64_t now_ms,
			 int64_t *txn_id);
/*
 * Records the outcome of an open intent. CONFIRMED also applies the
 * intent's removals and additions to the circuits table and makes its links
 * the links of their jobs (replacing what the intent's job, every job of
 * its wave and every job named in its links had), atomically with the outcome. -ENOENT: no such
 * intent; -EALREADY: not open any more. On any failure the intent is still
 * open and the circuits and links are unchanged.
 */
int st_intent_finish(struct st_store *st, int64_t txn_id, enum st_intent_state outcome,
		     const char *detail, int64_t now_ms);
/*
 * st_intent_finish, and when the outcome is CONFIRMED the n job states
 * `on_confirm` too, in the same write (a wave's ACTIVE and RELEASED with
 * its outcome: one write instead of two). Fails as either would, and then
 * nothing of it was stored.
 */
int st_intent_finish_states(struct st_store *st, int64_t txn_id, enum st_intent_state outcome,
			    const char *detail, int64_t now_ms,
			    const struct st_job_state *on_confirm, size_t n);
/*
 * Records detail on open intent txn_id (what recovery is about to do to the
 * devices), in one write: on etcd a fenced log entry, so a replica that no
 * longer leads is refused (-EPERM) before it touches anything on the
 * strength of it (recovery.c, the recovery gate). A detail equal to the
 * intent's current one changes nothing and writes nothing: callers make each
 * note new (a count, the time). -ENOENT / -EALREADY as st_intent_finish.
 */
int st_intent_note(struct st_store *st, int64_t txn_id, const char *detail);

/*
 * Records that the commit of open intent txn_id is decided: every device
 * holds it unconfirmed and the confirms are about to be sent (txn_driver.c, the
 * confirm gate). The intent stays open until st_intent_finish(); recovery
 * finishes a decided intent instead of rolling it back (recovery.h).
 * -ENOENT: no such intent; -EALREADY: not open any more; -EEXIST: already
 * decided; else a failed write's code (on etcd -EPERM: this replica does not
 * lead any more) and nothing was recorded.
 */
int st_intent_decide(struct st_store *st, int64_t txn_id, int64_t now_ms);
/*
 * Withdraws the decision to commit of open intent txn_id before the
 * transaction undoes a device it may have confirmed (a compensating edit,
 * txn_driver.c): from then on recovery rolls the intent back instead of finishing
 * it. On etcd the write is fenced like every other: -EPERM when this
 * replica does not lead any more, and then the decision stands (the new
 * leader finishes it) and no device may be undone. -ENOENT, -EALREADY as
 * st_intent_decide; 0 also when it was not decided.
 */
int st_intent_undecide(struct st_store *st, int64_t txn_id);

/*
 * A node fault stored together with the intent of the repair it causes
 * (st_ring_intent_begin), in the same SQLite transaction: one commit
 * between the fault and the devices, and still never a repair without its
 * fault stored. As st_fault_set(node, true, source, since_ms).
 */
struct st_fault {
	int node;
	const char *source;
	int64_t since_ms;
};

/* One bundle setting of a ring domain node (solvers/hbd_ring.h values). */
struct st_bundle {
	int node;
	uint8_t bundle, path, distance, dir;
};

/* An intent as read back for recovery. Arrays belong to the caller. */
struct st_intent {
	int64_t txn_id;
	char job_id[128];
	enum st_intent_state state;
	bool decided; /* st_intent_decide() recorded it */
	struct ocs_xc *removals;
	size_t n_removals;
	struct st_circuit *additions;
	size_t n_additions;
	/* an intent of a ring domain (st_ring_intent_begin): the rings it gives
	 * its job and every bundle setting it programs */
	bool has_rings;
	struct rg_ring *rings; /* each with its own nodes array */
	size_t n_rings;
	struct st_bundle *bundles;
	size_t n_bundles;
};

void st_intent_clear(struct st_intent *in);
/* Calls fn for every open intent, oldest first (see st_job_list for fn). */
int st_intent_list_open(struct st_store *st, int (*fn)(void *ctx, const struct st_intent *intent),
			void *ctx);
/*
 * Calls fn for every failed intent (rollback not proven), oldest first. No
 * index serves it: call it when a failed intent is expected (at start, after
 * a transaction failed), not on every tick.
 */
int st_intent_list_failed(struct st_store *st, int (*fn)(void *ctx, const struct st_intent *intent),
			  void *ctx);
/*
 * Settles a failed intent once its devices could be read again (the
 * keepalive, keepalive.h): ROLLED_BACK when every device it touched is back
 * at the pre-image, CONFIRMED when every one holds its target (the
 * intent's circuits and links are then applied as st_intent_finish does,
 * atomically with the outcome), or FAILED again with a new detail.
 * 0, -EALREADY (not failed), -EINVAL, or the store's -errno (nothing
 * changed).
 */
int st_intent_settle(struct st_store *st, int64_t txn_id, enum st_intent_state outcome,
		     const char *detail, int64_t now_ms);

/*
 * The circuit table. job_id NULL lists every circuit, else only that job's.
 * fn as for st_job_list.
 */
int st_circuit_list(struct st_store *st, const char *job_id,
		    int (*fn)(void *ctx, const struct st_circuit *c), void *ctx);
/* The circuit on key's (group, device, in): 0, or -ENOENT when that input holds none. */
int st_circuit_get(struct st_store *st, const struct ocs_xc *key, struct st_circuit *out);

/* Every job's leaf-spine links, by job id. fn as for st_job_list. */
int st_link_list(struct st_store *st, int (*fn)(void *ctx, const struct st_link *l), void *ctx);

/*
 * OCSTrx ring domains. A ring transaction's intent: the rings job_id has
 * once it is confirmed (all of them; none for a release or when every ring
 * was lost, a lost ring being a record with m 0) and every bundle setting
 * it programs (recovery reads the nodes back against them). Like
 * st_intent_begin: 0 and the new transaction id, or nothing stored.
 * st_intent_finish(CONFIRMED) then replaces the job's rows of the rings
 * table with the intent's rings, in the same SQLite transaction. fault
 * (NULL: none) is stored with the intent (struct st_fault).
 */
int st_ring_intent_begin(struct st_store *st, const char *job_id, const struct rg_ring *rings,
			 size_t n_rings, const struct st_bundle *bundles, size_t n_bundles,
			 const struct st_fault *fault, int64_t now_ms, int64_t *txn_id);
/* How a ring change is stored: "placed", "bypass-extended", "replaced",
 * "lost", "released" ("bypassed": an older ocsd's shrunk ring); parse: false when unknown. */
const char *st_ring_change_name(enum rg_change c);
bool st_ring_change_parse(const char *name, enum rg_change *out);
/* Every ring of confirmed transactions, job by job (the ring's nodes are freed after fn). */
int st_ring_list(struct st_store *st, int (*fn)(void *ctx, const struct rg_ring *r), void *ctx);
/*
 * Faulty nodes (out of every plan until marked healthy): st_fault_set is
 * idempotent (a node already faulty keeps its first source and time).
 */
int st_fault_set(struct st_store *st, int node, bool faulty, const char *source, int64_t since_ms);
int st_fault_list(struct st_store *st,
		  int (*fn)(void *ctx, int node, const char *source, int64_t since_ms), void *ctx);

/*
 * Rail-OCS fabrics (schema 5). The port map is the circuit table: every
 * join is two cross-connects owned by ST_RAIL_OWNER (not a job id: job ids
 * have no '@'), so no job's release ever removes one. A swap's intent is
 * stored with st_rail_intent_begin(): its cross-connects (as
 * st_intent_begin) and, in the same SQLite transaction, the failed GPU and
 * the rail ports it re-joins with the job holding each old GPU.
 * st_intent_finish(CONFIRMED) then, atomically with the circuits, marks
 * the GPU faulty (INSERT OR IGNORE: a GPU already faulty keeps its first
 * source and time) and records each move of a job's GPU (rail_job_moves),
 * which st_rail_move_list() gives back in transaction order.
 */
#define ST_RAIL_OWNER "@rail"

struct st_rail_move {
	int64_t rail_port;
	int64_t old_gpu, new_gpu; /* -1: none */
	char job_id[128];	  /* the live job holding old_gpu, "" = none */
};

struct st_rail_swap {
	int64_t gpu;	    /* the GPU swapped out */
	const char *kind;   /* "idle-gpu", "spare-server" (rail_swap_kind_name) */
	const char *source; /* "operator", "scheduler", "device" */
	int64_t since_ms;   /* when it was reported */
	const struct st_rail_move *moves;
	size_t n_moves;
};

/* Like st_intent_begin (job ST_RAIL_OWNER, no links), with the swap. */
int st_rail_intent_begin(struct st_store *st, const struct ocs_xc *removals, size_t n_removals,
			 const struct st_circuit *additions, size_t n_additions,
			 const struct st_rail_swap *swap, int64_t now_ms, int64_t *txn_id);
/* Faulty GPUs: set is idempotent (a GPU already faulty keeps its first source and time). */
int st_rail_fault_set(struct st_store *st, int64_t gpu, bool faulty, const char *source,
		      int64_t since_ms);
int st_rail_fault_list(struct st_store *st,
		       int (*fn)(void *ctx, int64_t gpu, const char *source, int64_t since_ms),
		       void *ctx);

/* A GPU of a job moved by a confirmed swap. */
struct st_rail_job_move {
	char job_id[128];
	int64_t txn_id, rail_port, old_gpu, new_gpu, moved_ms;
};

/* Every job's moves, oldest transaction first (fn as for st_job_list). */
int st_rail_move_list(struct st_store *st, int (*fn)(void *ctx, const struct st_rail_job_move *m),
		      void *ctx);

/*
 * Drained devices (by name): they get no new circuits, across restarts.
 * st_drain_set is idempotent; on failure the device's drain is unchanged.
 */
int st_drain_set(struct st_store *st, const char *device, bool drained);
int st_drain_list(struct st_store *st, int (*fn)(void *ctx, const char *device), void *ctx);

/*
 * The figures of the plan a job was last programmed with, as the job
 * manager encodes them (text, jm_figures_encode): st_figures_put replaces
 * the job's; retention deletes them with the job. st_figures_list calls fn
 * for every job that has them (fn as for st_job_list; the strings are
 * valid during the call).
 */
int st_figures_put(struct st_store *st, const char *job_id, const char *figures);
/* n jobs' figures, each with its job's new state (states[i].id is ids[i]), in one write. */
int st_figures_put_states(struct st_store *st, const char *const *figures,
			  const struct st_job_state *states, size_t n);
/* A job's plan figures (malloc'd, caller frees): 0, or -ENOENT when it has none. */
int st_figures_get(struct st_store *st, const char *job_id, char **figures);
int st_figures_list(struct st_store *st,
		    int (*fn)(void *ctx, const char *job_id, const char *figures), void *ctx);

/*
 * Whether the store knows nothing a device could hold: no job row and no
 * circuit (a new file, or one whose jobs were all deleted). 0 or -errno.
 */
int st_is_empty(struct st_store *st, bool *empty);

/*
 * Deletes, in one transaction, what is past the retention, oldest first:
 *  - finished jobs (state RELEASED or FAILED) beyond the keep_jobs newest
 *    (by the time they finished: their last update), or that finished
 *    before now_ms - keep_ms, each with the rows hanging off it (its
 *    intents with their cross-connects and links, its leaf-spine links);
 *  - then intents that finished (not open) before now_ms - keep_ms, with
 *    their cross-connects and links: nothing reads a finished intent.
 * Never deleted: a job in any other state, a finished job that still owns
 * circuits or that an open intent names, an open intent.
 * At most max_rows jobs and intents go in one call, so that the loop is
 * never blocked long: call again while *n_deleted == max_rows.
 * on_job_deleted (may be NULL) is called with each deleted job's id after
 * the transaction committed (never when it failed); the id is valid during
 * the call only. Returns 0, -EINVAL (negative now_ms or keep_ms, max_rows
 * 0) or a failed write's code (nothing deleted, *n_deleted 0).
 */
int st_prune(struct st_store *st, int64_t now_ms, int64_t keep_ms, size_t keep_jobs,
	     size_t max_rows, size_t *n_deleted,
	     void (*on_job_deleted)(void *ctx, const char *job_id), void *ctx);

#endif
