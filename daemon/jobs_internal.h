/*
 * jobs_internal.h - what the files of the job pipeline share: the job
 * record behind struct jm_job and the job manager itself. Not for use
 * outside the job manager; everything here runs on the event-loop thread.
 *
 * Call graph (no file calls back into one that calls it; checked by the
 * callgraph test):
 *
 *   jobs.c --> jobs_plan.c --> jobs_move.c
 *     |   \        ^
 *     |    \--> kind_leaf.c, kind_parallelism.c, kind_ring.c --> jobs_ring.c
 *     |--> jobs_links.c, jobs_ring.c
 *     `--> jobs_util.c  (and everything else calls jobs_util.c)
 *
 * The transaction driver (txn.c) and the planner pool are reached through
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
#include "rings.h"
#include "store.h"
#include "strmap.h"

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
	struct job_rt *next_queued;
	bool queued;
	/* The accepted plan, between plan_done and its transaction. */
	unsigned long plan_gen;
	struct jp_change change;
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
	int64_t fault_us;
	struct rg_ring *prev_rings;
	size_t n_prev_rings;
};

/* jobs_links.c: states in which a job stands on its leaves. */
bool jl_holds_leaves(enum jm_state s);
/*
 * Leaves a new job may use, given the live jobs: refused (false, err set,
 * field naming the demand pair or GPU) only where a live job whose links
 * are unknown stands.
 */
bool jl_leaves_free(const struct ocs_fabric *f, struct job_rt *const *live, size_t n_live,
		    const char *self, const struct lc_demand *demand, size_t n,
		    const struct jm_workload *wl, struct jm_error *err);
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
