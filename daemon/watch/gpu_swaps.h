/*
 * gpu_swaps.h - GPU swaps on a rail-OCS fabric (issue 12, the Rail-only
 * paper's section IV-C): the daemon half of solvers/rail_swap.h.
 *
 * A swap is asked for by ReplaceGpu (operator or scheduler), by MarkGpu
 * FAULTY or by a GPU fault a device reports (port-state-change: the GPU's
 * GPU-side port lost light, faults.c). rail_swap() answers it on the loop
 * (it is pure and takes microseconds) against the port map (rails.h), the
 * faulty GPUs and the GPUs the live jobs hold; then ONE transaction (txn_driver.c:
 * intent stored with the swap, confirmed commit, read-back with the rail
 * L2 check, all or nothing) re-joins the rail ports on every device
 * involved. Swaps run one at a time, in the order asked; rail jobs never
 * program devices (kind_rail.c), so no job work is ever ahead of a swap.
 *
 *   ask --> (queued) --> rail_swap --> none/refused: answered, nothing changed
 *                                 `--> intent + swap stored --> devices
 *                                       confirmed: circuits, fault and jobs'
 *                                       moved GPUs stored together (store.h),
 *                                       map reloaded, jobs' GPUs moved, events
 *                                       not confirmed: nothing changed; a
 *                                       faulty GPU is tried again every second
 *
 * Rules (choices written down in daemon/README.md):
 *  - ReplaceGpu refused (no idle GPU, no spare, drained device) changes
 *    nothing: not the store, not the devices, not the GPU's condition.
 *  - A fault (MarkGpu FAULTY, a device) is stored before anything else; a
 *    GPU still joined to a rail port is then swapped out; if that is
 *    refused the GPU stays faulty on its port and is tried again every
 *    second (logged once), so a released job or a healed server frees the
 *    way later.
 *  - No swap confirms onto a GPU marked faulty: rail_swap never picks one,
 *    and a mark of a GPU the swap in flight moves onto a rail port waits
 *    for that swap (queued ahead of every other request, its condition
 *    stored when it starts; marks of that GPU keep their order).
 *  - A faulty GPU stays out until MarkGpu HEALTHY, light back or not; a
 *    server whose GPUs are all healthy, idle and joined to nothing is a
 *    spare again (rail_swap.h).
 *  - At start, on a store that never held the port map, the devices are
 *    read: all empty, the initial map (GPU r of every active server on its
 *    rail port r) is programmed in one transaction; already holding exactly
 *    it, it is adopted (stored without touching them); anything else is
 *    never overwritten (fail static, issue 14 #2): logged, swaps and jobs
 *    refused until an operator clears the devices and restarts ocsd. While
 *    the initial map's transaction runs, swaps queue behind it and the
 *    API holds job submissions until it ends (gsw_starting).
 *
 * Threading: every function on the loop thread.
 */
#ifndef OCSD_RAILSWAP_H
#define OCSD_RAILSWAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jobs.h"
#include "rail_swap.h"
#include "store.h"
#include "txn_driver.h"

struct devices;
struct fs_state;
struct jm;
struct ocsd_config;
struct rl_state;
struct st_store;

/* What one swap did (valid during the callback only). */
struct gsw_report {
	const struct rail_swap_result *res; /* the solver's answer */
	const struct st_rail_move *moves;   /* res->changes with the job holding each old GPU */
	size_t n_moves;
	const char *source;	    /* "operator", "scheduler", "device" */
	uint64_t txn_id;	    /* 0: nothing programmed */
	const char *const *devices; /* the devices the transaction touched */
	size_t n_devices;
	int64_t reaction_us; /* the request (or fault) reaching ocsd to the swap confirmed */
	int64_t devices_us;  /* the transaction engine's part */
};

/* The answer to a request: err NULL on success; rep NULL when it was refused before rail_swap. */
typedef void (*gsw_answer_fn)(void *ctx, const struct err_info *err, const struct gsw_report *rep);

struct gsw_events {
	void *ctx;
	/* A swap was confirmed (or, after a fault, refused: rep->res->kind REFUSED). */
	void (*swapped)(void *ctx, const struct gsw_report *rep);
	/* A GPU's condition changed. */
	void (*gpu_changed)(void *ctx, int64_t gpu, bool faulty, const char *source);
	/*
	 * How far a swap's transaction has got (txn_change.progress), naming
	 * the jobs whose GPUs it moves (none: not called). NULL: not told.
	 */
	void (*progress)(void *ctx, const char *const *jobs, size_t n_jobs,
			 const struct txn_progress *p);
	/* The initial port map's transaction ended (gsw_ready tells how). NULL: not told. */
	void (*map_settled)(void *ctx);
};

struct gsw_deps {
	const struct ocsd_config *cfg; /* kind CFG_RAIL_OCS */
	struct st_store *store;
	struct fs_state *fs; /* the circuit table: the port map's joins */
	struct rl_state *rl;
	struct devices *devs; /* drain state (device id = OCS group) and read-back at start */
	/* txn_start() on the swaps' own transaction driver */
	int (*txn_start)(void *ctx, const struct txn_change *c, txn_done_fn done, void *arg,
			 char *why, size_t why_len);
	void *txn_ctx;
	struct gsw_events events;
};

struct rsw;

/* Caller frees with gsw_free() (accepts NULL; answers waiting requests UNAVAILABLE). */
struct rsw *gsw_new(const struct gsw_deps *deps);
void gsw_free(struct rsw *s);
/* The job manager, once it exists (its jobs hold GPUs). */
void gsw_attach(struct rsw *s, struct jm *jm);

/*
 * Start-up, after recovery and after the jobs were loaded (api_restore_jobs)
 * and before jm_recover: loads the port map and the faulty GPUs, gives the
 * jobs the GPUs their confirmed swaps moved them to (jm_set_gpus), and
 * programs or adopts the initial port map on a store that never held one
 * (reading the devices: blocks, start-up only). 0, or -errno when the store
 * could not be read (ocsd must not start).
 */
int gsw_start(struct rsw *s);

/* ReplaceGpu: see the rules above. answer is called once, maybe before this returns. */
void gsw_replace(struct rsw *s, int64_t gpu, const char *source, gsw_answer_fn answer, void *ctx);
/*
 * MarkGpu / a device's fault: the condition is stored and applied first
 * (after the swap in flight when that swap moves onto this GPU); FAULTY
 * then swaps the GPU out if it serves a rail port (answered once the
 * swap settled, refusals included as rep->res->kind REFUSED). received_us
 * (CLOCK_MONOTONIC) is when the fault reached ocsd. answer may be NULL.
 */
void gsw_mark(struct rsw *s, int64_t gpu, bool faulty, const char *source, int64_t received_us,
	      gsw_answer_fn answer, void *ctx);
/* faults.c's port_state callback (arg: the struct rsw). */
void gsw_port_state(void *arg, int device, int port, bool up, int64_t received_us);
/* Every second: faulty GPUs still on a rail port are swapped again (after a failed or refused try).
 */
void gsw_retry(struct rsw *s);

/* True while a transaction of the swaps runs (recon_deps.busy; arg: the struct rsw). */
bool gsw_busy(void *arg);
/* True once the port map is on the devices (and in the store); else *why says why not. */
bool gsw_ready(const struct rsw *s, const char **why);
/*
 * True while the initial port map's transaction runs (started by gsw_start):
 * rail jobs wait for it (api.c), told by gsw_events.map_settled.
 */
bool gsw_starting(const struct rsw *s);
/* A job's moved GPUs, oldest first: malloc'd (caller frees), NULL with *n 0 when none. */
struct st_rail_job_move *gsw_job_moves(const struct rsw *s, const char *job_id, size_t *n);
/*
 * Fills holder[g] (ocs_rail_gpus() entries) with the id of the live job
 * holding GPU g, NULL when idle; the ids are the job manager's, valid until
 * the jobs change (use them within the current loop turn). 0 or -ENOMEM.
 */
int gsw_holders(const struct rsw *s, const char **holder);

#endif
