/*
 * jobs_plan.h - planning, the first stage of the job pipeline: a snapshot
 * of the fabric goes in, a change set comes out.
 *
 *   jobs.c (loop)               jobs_plan.c + the job's kind (solver pool)
 *   jp_task_new(snapshot) ---->  jp_work(): kind->plan(), then the change set:
 *                                 removals, additions with their owners, the
 *                                 leaf-spine links, the figures, or a refusal
 *   plan_done() (loop) <--------  (posted back by the pool)
 *
 * A task owns copies of everything it reads (the circuits configured when
 * it was made, drain blockers, other jobs' usage and demands), so the work
 * is a pure function of the task and runs on any thread. Its result is
 * applied only if the circuits did not change since (gen): see jobs.c.
 *
 * A job kind is a small table (struct jm_kind): which planners it takes,
 * how a spec of its kind is checked against the fabric (loop side), how it
 * plans on the pool (pure) and the figures it adds. Kinds are pluggable:
 * jobs.c picks one per spec and never looks inside.
 */
#ifndef OCSD_JOBS_PLAN_H
#define OCSD_JOBS_PLAN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "hbd_ring.h"
#include "jobs.h"
#include "planners.h"
#include "pool.h"
#include "store.h"

struct clk;
struct fs_state;
struct ocsd_config;
struct jp_task;

struct jm_kind {
	const char *name;		/* "leaf-demand", "parallelism", "ring" */
	bool rings;			/* plans rings of a ring domain, not circuits */
	enum ocs_planner_demand demand; /* its planners in the catalogue (planners.h) */
	const char *demand_name;	/* "a leaf demand", for messages */
	/* Holds GPUs only (rail-OCS jobs): nothing to plan, no circuits of its
	 * own; it goes through PROGRAMMING with an empty change set. */
	bool gpus_only;
	/* Loop side: the spec against the fabric; false with err naming the field. */
	bool (*check)(const struct ocsd_config *cfg, const struct jm_spec *spec,
		      struct err_info *err);
	/* Pool side, pure: plans t (t->plan, or t->kind_rc with t->kind_err). */
	void (*plan)(struct jp_task *t);
	/* The kind's own figures, added to the generic ones. */
	void (*figures)(const struct jp_task *t, struct jm_figures *fig);
};

extern const struct jm_kind jm_kind_leaf;	 /* kind_leaf.c */
extern const struct jm_kind jm_kind_parallelism; /* kind_parallelism.c */
extern const struct jm_kind jm_kind_ring;	 /* kind_ring.c */
extern const struct jm_kind jm_kind_rail;	 /* kind_rail.c */

/* The change set of an accepted plan (all malloc'd, owned by whoever holds it). */
struct jp_change {
	struct ocs_xc *removals;
	size_t n_removals;
	struct st_circuit *additions; /* with the job each serves */
	size_t n_additions;
	struct st_link *links; /* the plan's leaf-spine links, by job */
	size_t n_links;
	/* A ring job's change: every ring the job has afterwards (each owns its
	 * nodes) and the settings of every bundle that changes. */
	struct rg_ring *rings;
	size_t n_rings;
	struct hbd_bundle *bundles;
	size_t n_bundles;
};

void jp_change_clear(struct jp_change *c);

struct jp_task {
	struct pool_task pool; /* the pool runs it (work, then done on the loop) */
	void *owner;	       /* the job manager (opaque here) */
	const struct clk *clock;
	const struct ocs_pool *solver_pool; /* the planner's parallel loops */
	const struct jm_kind *kind;
	char job_id[72];
	unsigned long seq; /* the job's plan it is (jobs.c) */
	bool dry;
	jm_answer_fn answer; /* dry runs and new parallelism submissions */
	void *ctx;
	/* Set (loop) when the caller of a dry run or of a search before a job
	 * exists is gone; the DELTA search reads it once per generation. */
	atomic_bool cancel;
	struct jp_task *next_answering; /* jobs.c's list of such tasks */
	struct ocs_fabric f;
	char planner[32];
	bool replan; /* allow_moving_other_jobs: a global re-plan first */
	struct lc_demand *demand;
	size_t n_demand;
	/* The configured cross-connects (n_configured, first), the unowned
	 * two-way circuits found on the devices (n_unowned, drift.h: pinned,
	 * never moved) and the drain blockers after them (n_existing in all);
	 * conf_sorted the configured ones sorted (worker side). */
	struct ocs_xc *existing;
	size_t n_existing, n_configured, n_unowned;
	bool unowned_fallback; /* the replan needed ports of unowned circuits */
	struct ocs_xc *conf_sorted;
	bool *drained; /* by device id, NULL when nothing is drained */
	/* Leaf-spine links other live jobs load (planned around, pinned path). */
	struct lc_leaf_usage *usage;
	size_t n_usage;
	/* ports of miswired fibre (cabling.h): out of service for the planner; owned */
	struct ocs_xc *out_of_service;
	size_t n_out_of_service;
	/* the snapshot: what jobs.c checks the plan against (the circuits'
	 * epoch or the ring state's generation), the circuit table's generation */
	unsigned long gen, fs_gen;
	/*
	 * A global re-plan plans every job holding circuits: names[0] is this
	 * job, names[k] the others; conf_owner the owner of each configured
	 * cross-connect; others the other jobs' demands (set by the caller).
	 */
	char (*names)[72];
	size_t n_names;
	int *conf_owner;
	struct lc_demand *others;
	int *others_owner;
	size_t n_others;
	/* A workload whose leaf demand is planned first (NULL: demand given);
	 * search_only: a new submission, only that (the request is in sub). */
	struct jm_workload *wl;
	bool search_only;
	struct {
		char *id, *key;
		void *raw;
		size_t raw_len;
		bool allow_move;
	} sub;
	/* search_only: called on the loop once the search is done, with the
	 * owner (jobs_submit.c creates the job or refuses it) */
	void (*searched)(void *owner, struct jp_task *t);
	/* A ring job (kind->rings): the domain, the planner's view of its nodes
	 * (owned) and the request; the result goes straight into change, fig,
	 * refused and err. */
	struct ocs_ring_domain domain;
	uint8_t *use;
	struct jm_ring_request ring;
	/* results: the kind's */
	int kind_rc; /* the kind refused before planning (e.g. the DELTA search) */
	struct err_info kind_err;
	bool has_delta;
	struct jm_delta_figures delta;
	bool report_search; /* the search's time goes into this plan's metric */
	/* results: the leaf plan */
	bool drain_fallback; /* the replan touched a drained device */
	bool owner_fallback; /* the replan's circuits could not be attributed */
	int *xc_owner;	     /* per plan->xcs after a global re-plan: index into names */
	bool *xc_reowned;    /* a kept cross-connect that changes owner */
	bool *moved_owner;   /* per name: some of its circuits move */
	int *assign_owner;   /* per plan->assignment after a global re-plan */
	int over_leaf, over_spine, over_load; /* a shared uplink over tau (leaf -1: none) */
	/* A refusal the exact search proved (fit.h): the configured
	 * cross-connects (indices into existing) on the ports a placement
	 * would take, were they free; the loop names their jobs. */
	size_t *movers;
	size_t n_movers;
	int rc;
	struct lc_plan *plan;
	int l2_violations;
	char l2_reason[200];
	/* results: what jp_work concluded */
	bool refused;
	struct err_info err; /* why, when refused */
	struct jp_change change;
	struct ocs_xc *added; /* new cross-connects (dry runs show them) */
	size_t n_added;
	struct jm_figures fig;
};

/*
 * A task for job_id (loop side): copies the fabric, the configured
 * cross-connects of fs, the unowned circuits (unowned, n_unowned: pinned
 * like configured ones, drift.h) and the drain blockers (drained by device
 * id, NULL when none), the demand and the workload. delta: the figures of
 * the search that made demand, or NULL. NULL on allocation failure.
 */
struct jp_task *jp_task_new(const struct jm_kind *kind, const struct ocs_fabric *f,
			    const struct fs_state *fs, const struct ocs_xc *unowned,
			    size_t n_unowned, const bool *drained, int n_devices,
			    const char *job_id, const char *planner, bool replan,
			    const struct lc_demand *demand, size_t n_demand,
			    const struct jm_workload *wl, const struct jm_figures *delta);
void jp_task_free(struct jp_task *t);
/*
 * A ring task for job_id: the domain and the planner's view of its nodes
 * (use, taken over: freed with the task), gen the ring state's generation.
 * NULL on allocation failure (use freed).
 */
struct jp_task *jp_ring_task_new(const struct jm_kind *kind, const struct ocs_ring_domain *d,
				 uint8_t *use, unsigned long gen, const char *job_id,
				 const struct jm_ring_request *req);

/* Pool side: the kind's plan, then the refusal or the change set. Pure. */
void jp_work(struct jp_task *t);

/*
 * For kinds: the leaf-centric (or pod-centric) plan of t->demand around
 * the snapshot, a global re-plan first when t->replan, the overload check
 * on shared leaves and the L2 check. Pure.
 */
void jp_plan_leaf(struct jp_task *t);

#endif
