/*
 * jobs_internal.h - what the two halves of the job manager share: jobs.c
 * (requests, planning, the job table) and jobs_txn.c (device transactions
 * and recovery). Not for use outside the job manager; everything here runs
 * on the event-loop thread.
 */
#ifndef OCSD_JOBS_INTERNAL_H
#define OCSD_JOBS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "fabric_state.h"
#include "jobs.h"
#include "loop.h"
#include "sb_txn.h"
#include "store.h"

struct txn;

struct waiter {
	jm_answer_fn fn;
	void *ctx;
	bool created;
	struct waiter *next;
};

struct job_rt {
	struct jm_job pub;
	struct waiter *waiters;
	bool release_requested;
	int replans;
	bool search_unreported; /* the DELTA search ran before the job existed */
	/* The accepted plan, between plan_done and its transaction. */
	unsigned long plan_gen;
	struct ocs_xc *removals;
	size_t n_removals;
	struct ocs_xc *additions;
	size_t n_additions;
	char (*add_owner)[72]; /* owner of each addition; NULL: all this job's */
	/*
	 * Leaf-spine links (the planner's L[a][b][h]): links, what the job's
	 * committed circuits load on its leaves' uplinks (none for a job stored
	 * by an ocsd that did not keep them: its leaves are not shared); and
	 * plan_links, those of the accepted plan (with a global re-plan, of
	 * every job it re-plans), which its transaction stores with the intent.
	 */
	struct st_link *links;
	size_t n_links;
	struct st_link *plan_links;
	size_t n_plan_links;
};


struct jm {
	struct jm_deps d;
	const struct ocs_fabric *f;
	struct job_rt **jobs;
	size_t n_jobs, cap_jobs;
	struct job_rt **queue; /* waiting for a transaction, FIFO */
	size_t n_queue, cap_queue;
	struct txn *txn; /* the running transaction */
	bool stopping;   /* no new transaction starts */
	bool *drained;   /* by device id: no new circuits there */
	int n_drained;
};

int64_t jm_now_ms(void);
__attribute__((format(printf, 4, 5))) void jm_set_error(struct jm_error *e, enum jm_status status,
							 const char *field, const char *fmt, ...);
struct job_rt *jm_find_job(const struct jm *jm, const char *id);
int jm_push_ptr(void ***arr, size_t *n, size_t *cap, void *p);
/* Answers every waiter of j (err NULL: success). */
void jm_settle(struct job_rt *j, const struct jm_error *err);
/* Moves j to state (persisted) and tells the event stream. */
void jm_set_state(struct jm *jm, struct job_rt *j, enum jm_state state, const char *reason);
void jm_fail_job(struct jm *jm, struct job_rt *j, const struct jm_error *err);
/* Plans j (again) on the pool. */
void jm_start_planning(struct jm *jm, struct job_rt *j);
/* Starts the next queued transaction when none is running (jobs_txn.c). */
void jm_pump(struct jm *jm);
bool jm_same_device(const struct ocs_xc *a, const struct ocs_xc *b);
/* jobs_links.c: states in which a job stands on its leaves. */
bool jm_holds_leaves(enum jm_state s);
/*
 * Leaves a new job may use: refused (false, err set, field naming the
 * demand pair or GPU) only where a live job whose links are unknown stands.
 */
bool jm_leaves_free(const struct jm *jm, const char *self, const struct lc_demand *demand,
		    size_t n, const struct jm_workload *wl, struct jm_error *err);
/* The leaf-spine usage of every live job but self (caller frees *out). 0 or -ENOMEM. */
int jm_others_usage(const struct jm *jm, const char *self, struct lc_leaf_usage **out,
		    size_t *n_out);
/*
 * After a confirmed transaction of j: every job named in j's plan links,
 * and j itself, now has the links of the plan (none after a release).
 */
void jm_apply_links(struct jm *jm, struct job_rt *j);
/* Reads every job's links from the store (after recovery). 0 or -errno. */
int jm_load_links(struct jm *jm);

/*
 * jobs_delta.c: maps a field name of the DELTA solvers ("model.layers",
 * "placement.gpu_ids[3]", ...) to the JobSpec's ("parallelism.layers",
 * "placement.gpus[3]").
 */
void jm_delta_field(const char *in, char *out, size_t len);
/*
 * jobs_delta.c: plans a workload (on a solver worker) into a leaf demand
 * (*demand, malloc'd, caller frees) and its DELTA figures. 0; -EINVAL or
 * -ENOSPC with err naming the solvers' field (see jm_delta_field()); -ENOMEM.
 * The search's parallel loops run on solver_pool (NULL: serially).
 */
int jm_plan_workload(const struct ocs_fabric *f, const char *planner,
		     const struct jm_workload *wl, const struct ocs_pool *solver_pool,
		     struct lc_demand **demand, size_t *n_demand, struct jm_delta_figures *fig,
		     struct delta_error *err);

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

#endif
