/*
 * jobs.h - the job manager: every training job's lifecycle, from a
 * validated request to circuits on the devices and back.
 *
 *   PENDING -> PLANNING -> PROGRAMMING -> ACTIVE -> RELEASING -> RELEASED
 *      \           \            \                      \
 *       `-----------`------------`---> FAILED <---------'
 *
 * Planning runs on the solver pool against a snapshot of the circuits;
 * a plan made on a snapshot older than the fabric state is re-planned, not
 * applied. Programming is one device transaction at a time (southbound
 * sb_engine), its intent stored before any device is touched and its
 * outcome stored with the circuit change (store.h). The L2 checker runs on
 * every plan and on every read-back.
 *
 * This module knows nothing of gRPC: requests come in as plain structs,
 * answers go out through a callback with a structured status that the API
 * layer (api_pb.c) maps to gRPC exactly once.
 *
 * Threading: every function here runs on the event-loop thread.
 */
#ifndef OCSD_JOBS_H
#define OCSD_JOBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "delta_plan.h"
#include "error.h"
#include "leafcentric.h"
#include "txn_driver.h"

struct clk;
struct devices;
struct cab_table;
struct dr_table;
struct rg_ring;
struct rg_state;
struct fs_state;
struct ocs_pool;
struct ocsd_config;
struct pool_task;
struct st_store;
struct st_intent;

/* Stored by name (jm_state_name); mapped to ocs.v1.JobState once, in api_pb.c. */
enum jm_state {
	JM_PENDING = 1,
	JM_PLANNING = 2,
	JM_PROGRAMMING = 3,
	JM_ACTIVE = 4,
	JM_RELEASING = 5,
	JM_RELEASED = 6,
	JM_FAILED = 7,
};

const char *jm_state_name(enum jm_state s);

/* What DELTA planned for a parallelism demand (one training iteration). */
struct jm_delta_figures {
	double makespan_ms;
	double critical_comm_ms;
	double nct;
	long ports_used;  /* job-wide OCS ports of the pod-level circuits */
	long ports_saved; /* ports of the job's GPUs left unused */
	int generations;  /* DELTA-Fast only */
	double plan_ms;	  /* the DELTA search and the leaf distribution */
};

/*
 * A ring request (OCSTrx ring domains, JobSpec.ring): rings of
 * m = tp / gpus_per_node nodes; gpus / tp of them, or `rings`, or when
 * both are 0 as many as the healthy free nodes give.
 */
struct jm_ring_request {
	int tp;
	int64_t gpus;
	int rings;
	char orchestration[16]; /* "dcn-free" (default), "fat-tree", "greedy" */
	uint64_t seed;		/* greedy; 0 means 1 */
};

/* What a ring plan achieved (solvers/hbd_ring.h). */
struct jm_ring_figures {
	char orchestration[16];
	int rings;
	int nodes_per_ring;
	int64_t gpus_placed;
	int64_t gpus_wasted;
	double cross_tor_share;
	int constraints_kept, constraints_total;
};

/* What a plan achieved (also kept for the plan a job runs on). */
struct jm_figures {
	char planner[32];
	int links_requested;
	int links_placed;
	int circuits_new;   /* bidirectional circuits added */
	int circuits_moved; /* existing circuits of other jobs moved */
	double max_contention;
	int64_t plan_us;
	struct lc_demand *unplaced; /* owned */
	size_t n_unplaced;
	char (*moved_jobs)[72]; /* other jobs whose circuits the plan moves (owned) */
	size_t n_moved_jobs;
	bool has_delta; /* a parallelism demand: delta is set */
	struct jm_delta_figures delta;
	bool has_ring; /* a ring job: ring is set */
	struct jm_ring_figures ring;
};

/*
 * A parallelism demand (planners delta-fast, prop-alloc, sqrt-alloc,
 * iter-halve): the workload spec with its defaults filled in (fabric_pods
 * and gpus set), the search parameters (clock_ms is set by the job manager)
 * and the job's GPUs in rank order (placement.gpus). The job manager plans
 * it into a leaf demand on the pool once and keeps that demand.
 */
struct jm_workload {
	struct delta_workload_spec spec;
	struct delta_ga_params ga;
	int64_t *gpus; /* n_gpus, rank order */
	size_t n_gpus;
};

/* Deep copy (NULL on allocation failure) and free (accepts NULL). */
struct jm_workload *jm_workload_dup(const struct jm_workload *w);
void jm_workload_free(struct jm_workload *w);

/* A submission, converted from the API by the caller (which owns it). */
struct jm_spec {
	const char *id;
	const char *idempotency_key; /* NULL or "" when absent */
	const char *planner;	     /* "leaf-centric" or "pod-centric"; with a
				      * workload "delta-fast" or a baseline */
	bool allow_moving_other_jobs;
	/* A leaf demand, or a workload (parallelism spec) whose leaf demand
	 * the job manager plans (callers give one of the two). */
	const struct lc_demand *demand;
	size_t n_demand;
	const struct jm_workload *workload;
	/* Or a ring request (ring domains; planner unused). */
	const struct jm_ring_request *ring;
	/* Or, on a rail-OCS fabric, nothing but its GPUs (gpus): no planner, no
	 * circuits of its own (kind_rail.c). */
	bool rail;
	/* The request as received (packed protobuf): stored, compared for
	 * idempotency and handed back by GetJob. */
	const void *raw;
	size_t raw_len;
	/* The job's GPUs (placement.gpus); none: a workload's own (workload->gpus). */
	const int64_t *gpus;
	size_t n_gpus;
};

struct jm_job {
	char id[72];
	char key[136];
	enum jm_state state;
	char reason[512];
	void *raw; /* packed request */
	size_t raw_len;
	char planner[32];
	bool allow_move;
	struct lc_demand *demand; /* for a workload: the leaf demand DELTA planned */
	size_t n_demand;
	struct jm_workload *workload; /* owned; NULL for a leaf demand */
	bool is_ring;		      /* a ring job: ring is its request */
	struct jm_ring_request ring;
	/* Dry runs of ring jobs only: the rings the job would get. */
	const struct rg_ring *plan_rings;
	size_t n_plan_rings;
	struct jm_figures figures;
	int64_t created_ms;
	int64_t updated_ms;
	int64_t *gpus; /* placement.gpus (owned); a live job holds them alone */
	size_t n_gpus;
	/* FAILED while it still owns circuits (rings) on the devices: its
	 * release did not take effect (ROLLBACK NOT PROVEN, or settled at the
	 * pre-image). It keeps its GPUs and ports; only a release ends it. */
	bool holding;
};

/*
 * The answer to a request. job is the job as it stands (NULL when the
 * request was refused before a job existed); plan (dry runs only) the
 * cross-connects the job would get. Called once per request, on the loop.
 */
typedef void (*jm_answer_fn)(void *ctx, const struct err_info *err, const struct jm_job *job,
			     bool created, const struct ocs_xc *plan_xcs, size_t n_plan_xcs);

struct jm_events {
	void *ctx;
	void (*job_changed)(void *ctx, const struct jm_job *job);
	/*
	 * What one device transaction did (txn_driver.h), for events and
	 * metrics: the transaction counts once, its outcome is that of the
	 * n_jobs jobs named (a wave's jobs; after a wave failed, only the jobs
	 * it settled: the others go again, and their own transaction tells).
	 */
	void (*transaction_done)(void *ctx, const char *const *jobs, size_t n_jobs,
				 const struct txn_outcome *o);
	/*
	 * How far the running device transaction has got (txn_driver.h,
	 * txn_change.progress; already throttled there), naming the n_jobs
	 * jobs it serves: a wave's jobs, the job alone, a ring's job being
	 * repaired, or the name an external transaction goes by
	 * (jm_external_txn: e.g. "ocsd-clear"). NULL: not asked for.
	 */
	void (*transaction_progress)(void *ctx, const char *const *jobs, size_t n_jobs,
				     const struct txn_progress *p);
	/* A wave's transaction starts: its n_jobs jobs, and how long each
	 * waited since it was queued for a transaction (us). */
	void (*wave_started)(void *ctx, size_t n_jobs, const int64_t *waited_us);
	void (*plan_finished)(void *ctx, const char *planner, double seconds);
	/*
	 * A store write failed where the operation could not be refused (the
	 * devices already changed, or a state change of a job in flight): the
	 * job manager serves no further writes (jm_serving() false, reason
	 * given) until ocsd is restarted and recovery reconciles store and
	 * devices. The daemon marks its health NOT_SERVING.
	 */
	void (*store_failed)(void *ctx, const char *reason);
	/*
	 * Ring domains: a ring of a job changed (placed, bypass-extended, re-placed,
	 * lost, released): now as it is (released: its nodes before), old
	 * its nodes before (NULL, 0 when placed). A repair's reaction_us runs
	 * from the fault reaching ocsd to the transaction confirmed, devices_us
	 * is the engine's part of it (0 for other changes).
	 */
	void (*ring_changed)(void *ctx, const struct rg_ring *now, const int *old, int n_old,
			     int64_t reaction_us, int64_t devices_us);
	/* A node's condition changed (source "device" or "operator"). */
	void (*node_changed)(void *ctx, int node, bool faulty, const char *source);
};

/*
 * What the job manager works with. The planner pool and the transaction
 * driver are reached through function pointers only (the daemon passes
 * pool_submit() through a one-line adapter, and txn_start(); the unit tests
 * pass fakes), so the job manager can be run on a fake engine and virtual
 * time.
 */
struct jm_deps {
	const struct ocsd_config *cfg;
	struct st_store *store;
	struct fs_state *fs;
	const struct clk *clock; /* NULL: the system clock */
	/* Runs t->work on a worker, then t->done on the loop: 0, or negative
	 * errno when refused (queue full, shutting down). */
	int (*plan_submit)(void *ctx, struct pool_task *t);
	void *plan_ctx;
	/* Where a planner runs its own parallel loops (NULL: serially). */
	const struct ocs_pool *solver_pool;
	/* txn_start() of txn_driver.h on a struct txn_driver. */
	int (*txn_start)(void *ctx, const struct txn_change *c, txn_done_fn done, void *arg,
			 char *why, size_t why_len);
	void *txn_ctx;
	struct devices *devs;	/* drain state, by device id (devices.h) */
	struct dr_table *drift; /* unowned cross-connects on the devices (drift.h); NULL: none */
	struct cab_table
		*cabling;	/* miswired fibre (cabling.h): its ports take no plan; NULL: none */
	struct rg_state *rings; /* ring domains: the ring state (rings.h); NULL otherwise */
	/*
	 * Rail-OCS fabrics: every job is a rail job (jm_kind_rail) and its GPUs
	 * pass this check before it is stored (rails.h rl_check_job_gpus: in
	 * the fabric, healthy, joined to a rail port); NULL otherwise.
	 */
	bool (*gpus_check)(void *ctx, const int64_t *gpus, size_t n, struct err_info *err);
	void *gpus_check_ctx;
	/* at most this many jobs in one wave's transaction (--max-wave-jobs;
	 * 0: JM_MAX_WAVE_JOBS) */
	size_t max_wave_jobs;
	/* the loop the job manager runs on: a wave gathering a burst yields it
	 * once (jobs.c); NULL: no yield (the unit tests' virtual time) */
	struct loop *loop;
	struct jm_events events;
};

/* The default bound of a wave (--max-wave-jobs). */
#define JM_MAX_WAVE_JOBS 64

struct jm;
struct loop;

/* Loads the jobs from the store. Caller frees with jm_free() (accepts NULL). */
int jm_new(const struct jm_deps *deps, struct jm **out, char *err, size_t err_len);
void jm_free(struct jm *jm);

/*
 * Resumes jobs that were being planned, programmed or released (call after
 * recovery resolved the transactions a previous run left open, see
 * recovery.h, and after jm_set_demand for every stored job). 0 or -errno
 * (the jobs' links could not be read from the store).
 */
int jm_recover(struct jm *jm);

/*
 * A follower's view (follower.c): job id as the store copy holds it now,
 * row (NULL: no longer stored) and its plan figures' text (NULL: none).
 * The job is replaced in place, put at its place in creation order (new,
 * or deleted and stored again), or dropped; the API layer then gives it
 * its request back, as after jm_new. Only for a follower's job manager,
 * which plans and programs nothing, so nothing waits on a job. 0, or
 * -ENOMEM (the job may then be missing: the follower rebuilds its view).
 */
int jm_follow_job(struct jm *jm, const char *id, const struct st_job *row, const char *figures);

/* False once a store write failed (see jm_events.store_failed); why in reason. */
bool jm_serving(const struct jm *jm, const char **reason);

/*
 * Drops a finished (RELEASED or FAILED) job from memory once retention
 * deleted it from the store. -ENOENT (unknown), -EBUSY (not finished, or
 * callers still wait on it), 0.
 */
int jm_forget(struct jm *jm, const char *id);

/* Submits a job; answered when it is ACTIVE or FAILED (or at once if refused). */
void jm_submit(struct jm *jm, const struct jm_spec *spec, jm_answer_fn answer, void *ctx);
/* Dry run: plans against the current circuits, touches nothing. */
void jm_plan(struct jm *jm, const struct jm_spec *spec, jm_answer_fn answer, void *ctx);
/*
 * Stops the planning of requests whose caller is gone: gone(ctx) is asked
 * for the ctx of every dry run (jm_plan) and every new parallelism
 * submission still searching (nothing stored yet); a DELTA search of one
 * that is gone stops within a generation and is answered ERR_CANCELLED.
 * Planning of stored jobs always goes on (they were accepted). The daemon
 * calls it every 100 ms while such requests wait (issue 14 #8).
 */
void jm_cancel_gone(struct jm *jm, bool (*gone)(void *ctx));
/* Whether any request jm_cancel_gone() looks at is waiting. */
bool jm_answering(const struct jm *jm);

/*
 * Records cross-connects the devices already hold and no job owns (drift.h)
 * as the circuits of a new job id (issue 14 #2), raw its request as GetJob
 * hands it back (a JobSpec with the id, packed by the caller; copied): stored
 * ACTIVE with planner
 * "adopted" and no demand, its circuits stored through an intent confirmed
 * at once (no device is touched); jm_release() removes them like any job's.
 * The caller checked that they form whole two-way circuits clear of every
 * stored one. 0, or -1 with err (ERR_EXISTS: the id is taken; ERR_UNAVAILABLE:
 * stopping or the store refused, nothing changed).
 */
int jm_adopt(struct jm *jm, const char *id, const void *raw, size_t raw_len,
	     const struct ocs_xc *xcs, size_t n, struct err_info *err);
/*
 * The store writes of an adoption, jm_adopt's and the start-up adoption's
 * (adopt.h, before any job manager runs): the job row PROGRAMMING with raw
 * its request, its figures (planner "adopted"), an intent adding the n
 * circuits adds (owned by id) finished confirmed with message note, with
 * active the row ACTIVE, then adds into fs. The only writer of an adopted
 * job's row. 0, or -errno of the first write that failed (-EIO: the
 * figures); *row_stored says whether the row was stored.
 */
struct jm_adoption {
	const char *id;
	const void *raw;
	size_t raw_len;
	const struct st_circuit *adds;
	size_t n;
	const char *note;
	bool active;
	int64_t now_ms;
};
int jm_adopt_store(struct st_store *store, struct fs_state *fs, const struct jm_adoption *a,
		   bool *row_stored);
/*
 * Runs a transaction that is no job's (clearing unowned cross-connects) when
 * none is running; queued jobs wait for it (jm_busy() is true meanwhile). 0:
 * done(arg, outcome) is called once on the loop; -EBUSY (a transaction
 * runs), -ESHUTDOWN (stopping), -EIO (store failed) or the driver's error,
 * with why set, and done is never called.
 */
int jm_external_txn(struct jm *jm, const struct txn_change *c, txn_done_fn done, void *arg,
		    char *why, size_t why_len);

/*
 * Tells a live job about its circuits (circuit repair, repair.h): note
 * ("" clears it) becomes its reason, as GetJob shows it, and a job_changed
 * event goes out when it changed. Kept in memory only (the reconciliation
 * after a restart finds the same again); the next state change replaces
 * it. 0, or -ENOENT (no such job, or not ACTIVE).
 */
int jm_note(struct jm *jm, const char *id, const char *note);

/* Releases a job; answered when RELEASED (or FAILED). */
void jm_release(struct jm *jm, const char *id, jm_answer_fn answer, void *ctx);

/*
 * Gives a job loaded from the store its demand (the API layer decodes it
 * from the stored request): a leaf demand, or a workload (copied) whose leaf
 * demand is planned again when the job is next planned (the search is
 * deterministic for a seed without a time budget). Call before
 * jm_recover(). 0 or -ENOENT/-ENOMEM.
 */
int jm_set_demand(struct jm *jm, const char *id, const char *planner, bool allow_move,
		  const struct lc_demand *demand, size_t n, const struct jm_workload *workload);

/* The ring request of a ring job loaded from the store (before jm_recover). 0 or -ENOENT. */
int jm_set_ring(struct jm *jm, const char *id, const struct jm_ring_request *req);

/*
 * Ring domains: node is faulty (or healthy again), said by source
 * ("device": the agent's notification, "operator": MarkNode). The
 * condition is stored first; a faulty node leaves every plan and the ring
 * holding it is repaired (bypass-extend, re-place or lost) in one transaction
 * queued ahead of every other job's work. received_us (CLOCK_MONOTONIC)
 * is when the fault reached ocsd: the start of the reaction time. A node
 * stays faulty until marked healthy (an agent saying it recovered is
 * logged, not applied: the issue leaves that to an operator); a node
 * marked healthy that no ring holds is then set back to loopback (its
 * bundles kept what they had when it failed).
 * 0 (*affected_job: the job whose ring is repaired, or NULL), or -1 with
 * err set (store failed, not a ring domain, node out of range).
 */
int jm_mark_node(struct jm *jm, int node, bool faulty, const char *source, int64_t received_us,
		 const char **affected_job, struct err_info *err);

/*
 * Ring domains: repairs (and resets of healed nodes to loopback) whose
 * transaction did not go through are tried again (the daemon calls this
 * every second; a node's lock left by a killed ocsd, an agent restarting).
 */
void jm_retry_repairs(struct jm *jm);

/*
 * Ring domains: programs nodes back to what their live rings say they hold
 * (a reconciliation pass found their bundles changed behind ocsd's back,
 * issue 28 #3): per job, one transaction with its rings as they are and
 * those nodes' settings, queued ahead of other work like a repair.
 * queued[i] (n entries, the caller's) tells whether nodes[i] is being
 * programmed back; not when it is in no live ring (nothing is ever changed
 * there), its job has a transaction of its own queued or running, writes
 * are refused, or out of memory: the next pass tries again.
 */
void jm_reprogram_nodes(struct jm *jm, const int *nodes, size_t n, bool *queued);
/* Ring transactions started so far: a pass that saw it change is discarded. */
unsigned long jm_ring_txns(const struct jm *jm);

/*
 * Sets the GPUs of a stored job (placement.gpus, re-read from its request
 * by the API layer, like jm_set_demand): a live job's GPUs are refused to
 * any other job. Call before jm_recover(). 0 or -ENOENT/-ENOMEM.
 */
int jm_set_gpus(struct jm *jm, const char *id, const int64_t *gpus, size_t n);

const struct jm_job *jm_find(const struct jm *jm, const char *id);
size_t jm_count(const struct jm *jm);
/* Jobs in state s, kept as states change (no scan). */
size_t jm_count_state(const struct jm *jm, enum jm_state s);
/* The highest max_contention of the ACTIVE jobs' plans (a walk of the live jobs only). */
double jm_max_contention(const struct jm *jm);
/* How long the job longest in state s has been in it, by the job manager's
 * clock (0: no live job in s; a walk of the live jobs only). */
int64_t jm_state_age_ms(const struct jm *jm, enum jm_state s);
const struct jm_job *jm_at(const struct jm *jm, size_t i);
/* True while a transaction is running. */
bool jm_busy(const struct jm *jm);

/*
 * Failed transactions settled once their devices answer again (the
 * keepalive, keepalive.h). jm_may_take_effect: true when failed intent `in`
 * may be applied to the circuit table because its devices read back at its
 * target: it is the release of a FAILED job that holds the circuits it
 * removes, or the submission (additions only) of a FAILED job that holds
 * none, and neither has a transaction queued or running. jm_unproven_settled:
 * the intent was settled (took_effect: applied to the circuit table, else
 * proven rolled back); the job follows what was proven (jobs.c, "release
 * not proven").
 */
bool jm_may_take_effect(const struct jm *jm, const struct st_intent *in);
void jm_unproven_settled(struct jm *jm, const struct st_intent *in, bool took_effect);
/*
 * Starts no further transaction (shutdown). Jobs still queued keep their
 * stored state and resume at the next start (jm_recover). jm_free() then
 * answers their waiters ERR_ABORTED (the job is stored and will be carried
 * out), never ERR_UNAVAILABLE, which means nothing changed (issue 14 #7).
 * Searches and dry runs still on the solver pool are cancelled: they end at
 * their next check (a DELTA search between generations) and answer
 * ERR_UNAVAILABLE "ocsd is shutting down; nothing changed" (nothing of
 * theirs is stored), so shutdown never waits for a long search to end.
 */
void jm_stop(struct jm *jm);

#endif
