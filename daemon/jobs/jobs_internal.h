/*
 * jobs_internal.h - what the files of the job pipeline share: the job
 * record behind struct jm_job and the job manager itself. Not for use
 * outside the job manager; everything here runs on the event-loop thread.
 *
 * Call graph (no file calls back into one that calls it; checked by the
 * callgraph test):
 *
 *   jobs_submit.c                     (the requests that start a job:
 *   jobs_recover.c, jobs_external.c    submit and dry run; start-up,
 *   jobs_faults.c, jobs_release.c      adoption: call jobs.c and what
 *     |                                jobs.c calls; node faults, release
 *     |                                and unproven settling)
 *     v
 *   jobs.c --> jobs_plan.c --> jobs_move.c
 *     |   \        ^
 *     |    \--> kind_leaf.c, kind_parallelism.c, kind_ring.c --> jobs_ring.c
 *     |--> jobs_spec.c --> kind_*.c, jobs_links.c
 *     |--> jobs_table.c --> jobs_links.c
 *     |--> jobs_links.c, jobs_ring.c
 *     |--> jobs_wave.c  (waves: pure helpers)
 *     |--> jobs_batch.c (a burst's group commit) --> jobs_table.c
 *     `--> jobs_util.c  (and everything else calls jobs_util.c)
 *
 * The transaction driver (txn_driver.c) and the planner pool are reached through
 * function pointers in struct jm_deps; recovery (recovery.c) is run by the
 * daemon before jm_recover().
 */
#ifndef OCSD_JOBS_INTERNAL_H
#define OCSD_JOBS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jobs.h"
#include "jobs_plan.h"
#include "loop.h"
#include "rings.h"
#include "store.h"
#include "strmap.h"

/* What becomes of a job of a wave that failed (jobs_wave.c, jw_split). */
enum jw_fate { JW_AGAIN, JW_ALONE, JW_FAIL };

struct waiter {
	jm_answer_fn fn;
	void *ctx;
	bool created;
	bool release; /* a ReleaseJob caller (else a submitter) */
	struct waiter *next;
};

struct job_rt {
	struct jm_job pub;
	const struct jm_kind *kind;
	struct waiter *waiters;
	bool release_requested;
	int replans;
	unsigned long plan_seq; /* of the plan under way: older results are dropped */
	bool search_unreported; /* the DELTA search ran before the job existed */
	size_t live_at;		/* index in jm.live while the job holds leaves */
	int64_t seq;		/* creation order in the store (a follower's view keeps it) */
	struct job_rt *next_queued;
	bool queued;
	/* The accepted plan, between plan_done and its transaction. */
	unsigned long plan_gen;
	struct jp_change change;
	/*
	 * Waves (jobs_wave.c): admitted, its plan's circuits are reserved
	 * (later plans keep clear of them) from plan_done until its
	 * transaction's end; in_txn, its transaction runs (alone or in a
	 * wave); alone, a wave it was in failed on a device its edit touched,
	 * so it runs alone next; queued_us, when it was queued for a
	 * transaction (the wait for a wave, CLOCK_MONOTONIC).
	 */
	bool admitted;
	bool in_txn;
	bool alone;
	int64_t queued_us;
	/* its next state (without reason) is stored already: jm_prestore_states */
	bool prestored;
	enum jm_state prestored_state;
	/* Waiting for its turn to plan (plans run one at a time, in arrival order). */
	struct job_rt *next_planning;
	bool plan_waiting;
	/* new, not stored yet (jm.new_head); admitted, its figures and
	 * PROGRAMMING not stored yet (jm.admit_head) */
	struct job_rt *next_new, *next_admit;
	bool unstored, admit_pending;
	/*
	 * Leaf-spine links (the planner's L[a][b][h]) that the job's committed
	 * circuits load on its leaves' uplinks (none for a job stored by an
	 * ocsd that did not keep them: its leaves are not shared).
	 */
	struct st_link *links;
	size_t n_links;
	/*
	 * Ring jobs: a repair queued or running (the change is the repair's,
	 * ahead of other work), when its fault reached ocsd (CLOCK_MONOTONIC),
	 * and the rings as they were before the running transaction (for the
	 * ring events).
	 */
	bool repair;
	bool repair_failed; /* the last repair rolled back: not retried until the next fault */
	bool drift_repair;  /* the repair programs drifted nodes back (no ring change) */
	int64_t fault_us;
	/* the repair's profile (CLOCK_MONOTONIC): its fault reached the loop, its
	 * rings were computed (0: not a fault's repair) */
	int64_t fault_loop_us, fault_planned_us;
	/* Ring jobs: change.bundles from here on are healed nodes' resets its
	 * transaction carries (jobs.c, absorb_resets) */
	size_t absorbed_at;
	struct rg_ring *prev_rings;
	size_t n_prev_rings;
};

/* A callback of the job manager posted to the loop (a wave's yield, the
 * storing of new jobs: jobs.c); it frees itself when it runs. */
struct jm_post {
	struct loop_node node;
	struct jm *jm; /* NULL once the job manager is freed */
	void (*fn)(struct jm *jm);
	struct jm_post **slot; /* where the job manager points at it */
};

/*
 * The job manager. Owned by the daemon (jm_new / jm_free, jobs_recover.c);
 * the table, the transaction queue and every job in it are touched on the
 * event-loop thread only.
 */
struct jm {
	struct jm_deps d;
	const struct ocs_fabric *f;
	struct job_rt **jobs; /* every job, in creation order */
	size_t n_jobs, cap_jobs;
	struct job_rt *
		*live; /* jobs that hold leaves or circuits (jm_track_live); room for n_jobs */
	size_t n_live;
	struct strmap by_id, by_key;
	size_t n_state[JM_FAILED + 1];		/* jobs in each state (metrics, without a scan) */
	struct job_rt *queue_head, *queue_tail; /* waiting for a transaction, FIFO */
	size_t n_queued;
	struct job_rt *txn_job; /* the job whose transaction runs (a wave's first) */
	/*
	 * Waves (jobs_wave.c): the jobs of the running wave (room for
	 * max_wave), the plans waiting to run (one at a time: planning),
	 * and the epoch plans are checked against: it moves when the circuit
	 * table changes other than by a wave's confirmed plans (fs_seen is the
	 * table's generation last accounted for).
	 */
	struct job_rt **wave;
	size_t n_wave, max_wave;
	struct job_rt *plan_head, *plan_tail;
	unsigned long planning_seq; /* the leaf plan under way (0: none) */
	bool planning_light;	    /* it is a leaf plan, not a DELTA search */
	/* a wave gathering a burst (wave_waits in jobs.c): since when, for at
	 * most gather_us (the last wave's transaction time, clamped), and the
	 * one yield of the loop it takes once no plan is pending */
	bool held, yielded;
	int64_t hold_since_us, gather_us;
	int64_t arrival_us, prev_arrival_us; /* the last two submissions (CLOCK_MONOTONIC) */
	struct event *gather_ev;	     /* pumps once a burst's gap passed */
	struct jm_post *yield;		     /* posted, not run yet (NULL: none) */
	/*
	 * Group commit of a burst's own writes (jobs.c): jobs submitted in one
	 * turn of the loop are stored in one write (new_head, stored by the
	 * posted store_new), and the plans admitted while a transaction runs
	 * or a wave gathers store their figures and PROGRAMMING in one write
	 * before the wave (admit_head). Without a loop (the unit tests), each
	 * is stored at once.
	 */
	struct job_rt *new_head, *new_tail;
	struct jm_post *store_new;
	struct job_rt *admit_head, *admit_tail;
	size_t n_admit;
	unsigned long epoch, fs_seen;
	unsigned long wave_fs_gen; /* the circuit table's generation at the wave's start */
	/* room for max_wave each, allocated with the job manager (invariant 6):
	 * the wave being settled, each job's wait, fate and id */
	struct job_rt **settling;
	int64_t *waited;
	enum jw_fate *fates;
	const char **names;
	struct st_job_state *rows;
	enum jm_state *next_states;
	bool stopping;		   /* no new transaction starts */
	struct jp_task *answering; /* dry runs and searches before a job exists (cancellable) */
	struct {
		bool running; /* a transaction of no job (jm_external_txn) */
		txn_done_fn done;
		void *arg;
		char job_id[72]; /* the name its intent is stored under */
	} external;
	unsigned long plan_seq; /* last plan started */
	bool not_serving;	/* a store write failed: no further writes */
	char not_serving_reason[600];
	/*
	 * Ring domains: nodes marked healthy again whose bundles still hold
	 * what they had when they failed (a faulty node is never programmed),
	 * set back to loopback by transactions of this pseudo job (never in
	 * the table; id JM_RESET_JOB), queued like a repair.
	 */
	struct job_rt reset;
	int *reset_nodes;
	size_t n_reset, cap_reset;
	struct event *reset_ev;	 /* the reset's delay (jm_queue_reset) */
	unsigned long ring_txns; /* ring transactions started (jm_ring_txns) */
};

#define JM_RESET_JOB "ocsd-node-reset"
/* How long healed nodes wait for a job's ring transaction to carry their reset. */
#define JM_RESET_DELAY_US 500000

/* A wave gathers a burst for at most one transaction's time, within these. */
#define JM_GATHER_MIN_US 5000
#define JM_GATHER_MAX_US 100000
/* Submissions less than this apart are a burst a wave gathers. */
#define JM_BURST_GAP_US 8000

/*
 * jobs_table.c: the job table, the transaction queue, the waiters and the
 * state changes (each stored before it is published: invariant 5 of
 * jobs.c). Calls nothing above it (jobs.c and the files calling jobs.c).
 */
/* The wall clock in ms (the injectable clock of jm_deps). */
int64_t jm_now_ms(const struct jm *jm);
/* Frees j and everything it owns (its waiters excepted); NULL: nothing. */
void jm_job_free(struct job_rt *j);
/* The job named id (the table keeps it), or NULL. */
struct job_rt *jm_job_find(const struct jm *jm, const char *id);
/* Adds j to the table and the indexes, with room in `live` for it. 0 or -ENOMEM. */
int jm_table_add(struct jm *jm, struct job_rt *j);
/* Keeps `live` in step with j's state (never allocates: invariant 6): a
 * job is live in the states of jl_holds_leaves, and while pub.holding. */
void jm_track_live(struct jm *jm, struct job_rt *j, bool was_live);
/* Takes j out of the table, the indexes and the live list, and frees it (nobody waits on it). */
void jm_table_drop(struct jm *jm, struct job_rt *j);
/* Puts j (same id) where old is, indexes and live list too, and frees old. 0 or -ENOMEM
 * (unchanged). */
int jm_table_replace(struct jm *jm, struct job_rt *old, struct job_rt *j);
/* As jm_table_add, at j's place by seq (the table sorted by seq). 0 or -ENOMEM. */
int jm_table_insert(struct jm *jm, struct job_rt *j);
/* Every job's leaf-spine links read again from the store. 0 or -errno. */
int jm_reload_links(struct jm *jm);
/* Sets pub.holding (not stored: the circuit table says it at a restart). */
void jm_set_holding(struct jm *jm, struct job_rt *j, bool holding);
/* The queue of transactions (intrusive: never fails). A repair goes ahead
 * of every queued job (jm_enqueue_first); jm_dequeue: NULL when empty. */
void jm_enqueue_first(struct jm *jm, struct job_rt *j);
void jm_enqueue(struct jm *jm, struct job_rt *j);
struct job_rt *jm_dequeue(struct jm *jm);
/* A waiter answered when j settles. 0 or -ENOMEM. */
int jm_add_waiter(struct job_rt *j, jm_answer_fn fn, void *ctx, bool created);
/* Answers every waiter of j (err NULL: success). */
void jm_settle(struct job_rt *j, const struct err_info *err);
/*
 * A release requested during programming failed: the submitters' job
 * became ACTIVE (their request succeeded), only the releasers get err.
 */
void jm_settle_failed_release(struct job_rt *j, const struct err_info *err);
/*
 * Invariant 5: no further writes; the daemon reports why. rc: the store's
 * code (-EPERM on etcd: this replica does not lead any more).
 */
void jm_store_failed(struct jm *jm, const char *what, int rc);
/*
 * Moves j to state, stored first (invariant 5). The change is made in
 * memory even when the store refuses it, since what it records already
 * happened (a plan refused, devices changed); the job manager then stops
 * serving writes and recovery sets the store right at the next start.
 * Returns the store's answer (0, or why it refused: -EPERM when this
 * replica is not the leader any more).
 */
int jm_set_state(struct jm *jm, struct job_rt *j, enum jm_state state, const char *reason);
/* The jobs' next states (without reason) are in the store already: their writes are skipped. */
void jm_mark_prestored(struct job_rt *const *jobs, const enum jm_state *states, size_t n);
/*
 * The states the n jobs of a confirmed wave are about to take (no reason),
 * stored in one write ahead of their jm_set_state, which then writes
 * nothing: one write for the wave instead of one per job. When it fails,
 * each jm_set_state writes (and fails) on its own. n at most max_wave.
 */
void jm_prestore_states(struct jm *jm, struct job_rt *const *jobs, const enum jm_state *states,
			size_t n);
/*
 * Fails j and answers its waiters with err. When the store refuses FAILED
 * because this replica is not the leader any more, the job stays accepted
 * in the store and the new leader runs it (jm_recover): its waiters are
 * told that, never err's "nothing changed", which would not be true.
 */
void jm_fail_job(struct jm *jm, struct job_rt *j, const struct err_info *err);
/* The refusal every write gets once the store failed; true when refused. */
bool jm_refuse_write(const struct jm *jm, jm_answer_fn answer, void *ctx);
/*
 * Stores the figures of the plan j is about to be programmed with, so that
 * they outlive a restart (issue 14 #14). Before any device is touched: a
 * failed write refuses the job (UNAVAILABLE, nothing changed). The same
 * write stores its state PROGRAMMING, which jm_set_state then publishes
 * without a write of its own. 0 or -1 with err set.
 */
int jm_store_figures(struct jm *jm, struct job_rt *j, struct err_info *err);
/* The list of tasks whose caller may go away (jm_cancel_gone); the task
 * stays the pool's, the list only points at it. */
void jm_answering_add(struct jm *jm, struct jp_task *t);
void jm_answering_del(struct jm *jm, struct jp_task *t);

/*
 * jobs_spec.c: a request's checks and what a job takes from it. Field
 * names in errors follow the API's JobSpec.
 */
const struct jm_kind *jm_kind_of(const struct jm_workload *wl);
const struct jm_kind *jm_spec_kind(const struct jm_spec *spec);
const char *jm_planner_of(const struct jm_spec *spec);
/*
 * A GPU belongs to one live job at a time (issue 14 #9): refused with
 * FAILED_PRECONDITION naming the first GPU that a live job other than self
 * holds, and that job. Work grows with the live jobs' GPUs only.
 */
bool jm_gpus_free(const struct jm *jm, const char *self, const int64_t *gpus, size_t n,
		  const struct jm_workload *wl, struct err_info *err);
/* Copies gpus into job->gpus (none: a workload's stay where they are). 0 or -ENOMEM. */
int jm_copy_gpus(struct jm_job *job, const int64_t *gpus, size_t n);
/* Checks a spec against the fabric; field names follow the API's JobSpec. */
bool jm_check_spec(struct jm *jm, const struct jm_spec *spec, struct err_info *err);
/* The id, key, planner, kind and ring of spec into j (nothing allocated). */
void jm_copy_spec(struct job_rt *j, const struct jm_spec *spec);

/*
 * jobs.c: what the requests (jobs_submit.c), start-up, recovery and the
 * transactions of no job (jobs_recover.c, jobs_external.c) need of the
 * state machine.
 * jm_start_planning: plans j (PLANNING) or fails it. jm_pump: starts the
 * next queued transaction when none is running. jm_queue_repairs: queues
 * the repair of j's first ring holding a faulty node, ahead of all work.
 */
void jm_start_planning(struct jm *jm, struct job_rt *j);
/* A planning task for `self` with everything it reads copied (jobs.c; a
 * submission's search and a dry run are made by jobs_submit.c). NULL on
 * ENOMEM. */
struct jp_task *jm_new_task(struct jm *jm, const struct jm_kind *kind, const char *self,
			    const char *planner, bool replan, const struct lc_demand *demand,
			    size_t n_demand, const struct jm_workload *wl,
			    const struct jm_figures *delta, const struct jm_ring_request *ring);
/* jobs_submit.c: stores the jobs submitted but not stored yet
 * (jm.new_head) now, in one write, then plans them (jm_release calls it for
 * a job it finds unstored, jm_recover for the ones accepted before it). */
void jm_store_new_jobs(struct jm *jm);
void jm_pump(struct jm *jm);
void jm_queue_repairs(struct jm *jm, struct job_rt *j);
/*
 * jobs.c: what the node faults (jobs_faults.c) and the release
 * (jobs_release.c) need of it. jm_drained_nodes: ring domains' drained
 * nodes (device id = node), NULL when none is. jm_queue_reset: queues the
 * reset of the healed nodes on the list to loopback, ahead of queued work,
 * after a delay that lets a job's ring transaction carry it.
 * jm_start_ring_txn: starts a ring job's transaction (its plan, a repair or
 * its release; fault: stored with the intent), -errno with why set when it
 * did not start. jm_held_count: the cross-connects (ring jobs: rings) j owns.
 */
const bool *jm_drained_nodes(const struct jm *jm);
void jm_queue_reset(struct jm *jm);
int jm_start_ring_txn(struct jm *jm, struct job_rt *j, bool release, const struct st_fault *fault,
		      char *why, size_t why_len);
size_t jm_held_count(const struct jm *jm, const struct job_rt *j);
/* txn_change.progress of every transaction the job manager starts (arg: the jm). */
void jm_txn_progress(void *arg, const struct txn_progress *p);

/* jobs_links.c: states in which a job stands on its leaves. */
bool jl_holds_leaves(enum jm_state s);
/*
 * Leaves a new job may use, given the live jobs: refused (false, err set,
 * field naming the demand pair or GPU) only where a live job whose links
 * are unknown stands.
 */
bool jl_leaves_free(const struct ocs_fabric *f, struct job_rt *const *live, size_t n_live,
		    const char *self, const struct lc_demand *demand, size_t n,
		    const struct jm_workload *wl, struct err_info *err);
/* The leaf-spine usage of every live job but self (caller frees *out). 0 or -ENOMEM. */
int jl_others_usage(struct job_rt *const *live, size_t n_live, const char *self,
		    struct lc_leaf_usage **out, size_t *n_out);
/*
 * After a confirmed transaction of j carrying links (a plan's, by job;
 * none for a release): every live job named gets its entries, and j gets
 * its own (or none). 0 or -ENOMEM (links then stay as they were).
 */
int jl_apply(struct job_rt *const *live, size_t n_live, struct job_rt *j,
	     const struct st_link *links, size_t n_links);

/*
 * jobs_move.c: attributes each cross-connect of a global re-plan (plan->xcs)
 * to a job: leaf_owner gives each leaf's job index (-1: none), conf and
 * conf_owner the configured cross-connects and their owners. Fills owner[]
 * and reowned[] (a kept cross-connect that changes owner), one per plan
 * cross-connect. 0, -EINVAL when the plan does not add up, -ENOMEM. Pure.
 */
int jm_attribute_owners(const struct ocs_fabric *f, const struct lc_plan *plan,
			const int *leaf_owner, const struct ocs_xc *conf, const int *conf_owner,
			size_t n_conf, int *owner, bool *reowned);

/*
 * jobs_batch.c: the group commit of a burst (calls only below it).
 * jb_post_once: fn posted to run on the loop after what is queued there,
 * once while *slot holds it; false without a loop or memory.
 * jb_store_new: the jobs submitted but not stored (jm.new_head) stored in
 * one write and published; those refused are answered and forgotten; the
 * ones to plan now are returned, linked by next_new (the caller unlinks).
 * jb_admit: j's plan fits: its reservation starts; with a loop its
 * figures and PROGRAMMING wait for jb_store_admitted, without one they are
 * stored and j queued at once (-1: that write failed, j FAILED).
 * jb_store_admitted: the admitted plans' figures and PROGRAMMING in one
 * write, the jobs queued (or FAILED when the write fails).
 * jb_gather: whether a wave about to form waits for the rest of its burst:
 * GO, PLANS (plans pending: plan_done pumps), GAP (requests arriving less
 * than JM_BURST_GAP_US apart: pump again after *wait_us), YIELD (once:
 * let the loop run what is queued, then pump).
 */
bool jb_post_once(struct jm *jm, struct jm_post **slot, void (*fn)(struct jm *jm));
struct job_rt *jb_store_new(struct jm *jm);
int jb_admit(struct jm *jm, struct job_rt *j);
void jb_store_admitted(struct jm *jm);
enum jb_gather { JB_GO, JB_PLANS, JB_GAP, JB_YIELD };
enum jb_gather jb_gather(struct jm *jm, int64_t *wait_us);

/*
 * jobs_wave.c: waves, many jobs in one device transaction (pure; jobs.c
 * applies the answers). jw_waveable: j may join a wave (a leaf or
 * parallelism job to program or release, not to run alone). jw_admitted_xcs:
 * the circuits the admitted plans of live jobs other than self add, which
 * a new plan keeps clear of (malloc'ed, NULL when none; 0 or -ENOMEM).
 * jw_any_admitted: some live job's plan is admitted.
 */
bool jw_waveable(const struct job_rt *j);
int jw_admitted_xcs(struct job_rt *const *live, size_t n_live, const char *self,
		    struct ocs_xc **out, size_t *n_out);
bool jw_any_admitted(struct job_rt *const *live, size_t n_live);
/* A wave's change set: its jobs (ids borrowed from the jobs), every job's
 * removals, additions and links (a release: the job's cross-connects). */
struct jw_change {
	const char **jobs;
	size_t n_jobs;
	struct ocs_xc *removals;
	size_t n_removals;
	struct st_circuit *additions;
	size_t n_additions;
	struct st_link *links;
	size_t n_links;
};
/* 0, or -ENOMEM with nothing allocated. */
int jw_change_build(struct job_rt *const *wave, size_t n, const struct fs_state *fs,
		    struct jw_change *c);
void jw_change_clear(struct jw_change *c);
/*
 * A wave's transaction failed (o): each job's fate[k]. AGAIN: it touches
 * no failed device (a wave again, at once); ALONE: a device it touches
 * refused (its own edit may be why: retried in a transaction of its own);
 * FAIL: a device it touches did not answer or was not proven rolled back
 * (its outcome is the wave's). No failed device named (the plan check
 * refused the whole): every job ALONE. fs: the circuit table, unchanged by
 * the failed wave (a release's cross-connects are read there).
 */
void jw_split(const struct ocs_fabric *f, struct job_rt *const *wave, size_t n,
	      const struct fs_state *fs, const struct txn_outcome *o, enum jw_fate *fate);

/*
 * jobs_ring.c: the change sets of ring jobs. jr_request: the solver's
 * request (0, or -EINVAL for an unknown orchestration). jr_plan_change: a
 * plan's rings (placed) and every bundle of their nodes. jr_release_change:
 * every healthy node of the job's rings back to loopback, no rings.
 * jr_broken_ring: the first ring of job_id holding a faulty node (*failed),
 * or NULL. jr_repair_change: the job's rings with ring repaired after
 * failed failed (hbd_repair, never re-placed onto a drained node; *kind
 * says how) and the bundles that change on healthy nodes. 0 or -ENOMEM (-EINVAL from the solver).
 */
int jr_request(const struct jm_ring_request *r, const struct ocs_ring_domain *d,
	       struct hbd_request *out);
int jr_plan_change(const struct ocs_ring_domain *d, const struct hbd_plan *p, struct jp_change *c);
int jr_release_change(const struct rg_state *rg, const char *job_id, struct jp_change *c);
const struct rg_ring *jr_broken_ring(const struct rg_state *rg, const char *job_id, int *failed);
int jr_repair_change(const struct rg_state *rg, const bool *drained, const struct rg_ring *ring,
		     int failed, const struct jm_ring_request *req, int64_t now_ms,
		     struct jp_change *c, enum rg_change *kind);
/* Marks drained nodes (drained by node, NULL: none) that are free as busy in use: no new ring
 * goes on them (a node's existing ring stays). */
void jr_mask_drained(const struct rg_state *rg, const bool *drained, uint8_t *use);

#endif
