/*
 * rails.h - the rail state of a rail-OCS fabric (issue 12): the port map
 * (which GPU each rail-switch port is joined to, and its inverse) and the
 * condition of every GPU (healthy, or faulty with the source and time of
 * the report). It is the one index the API, the swaps and the jobs' GPU
 * check read.
 *
 * Where each fact comes from:
 *  - the port map is the circuit table (fabric_state.h): every join is two
 *    cross-connects owned by ST_RAIL_OWNER, so a swap's transaction
 *    (txn_driver.c) and recovery (recovery.c) keep it exactly as they keep
 *    circuits; rl_load_map() rebuilds the map from it after each change;
 *  - faulty GPUs are stored (st_rail_fault_set, or with a swap's intent)
 *    and loaded at start (rl_load_faults);
 *  - which job holds a GPU is the job manager's (jm_job.gpus): callers
 *    pass it in where it matters (gpu_swaps.c), this module never reads
 *    jobs, so the job manager may call it.
 *
 * The devices of a rail-OCS fabric are numbered by OCS group (device id =
 * group): solvers/rail_layout.h gives the struct ocs_fabric of that shape.
 *
 * Threading: every function on the loop thread.
 */
#ifndef OCSD_RAILS_H
#define OCSD_RAILS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "fabric.h"
#include "rail_swap.h"

struct fs_state;
struct st_store;
struct rl_state;

/* An empty state for a valid fabric (r copied); NULL on allocation failure. */
struct rl_state *rl_new(const struct ocs_rail_fabric *r);
/* Accepts NULL. */
void rl_free(struct rl_state *rl);

/* Rebuilds the port map (and its inverse) from fs's ST_RAIL_OWNER joins. 0 or -ENOMEM. */
int rl_load_map(struct rl_state *rl, const struct fs_state *fs);
/* Loads the faulty GPUs from the store (GPUs outside the fabric are skipped). 0 or -errno. */
int rl_load_faults(struct rl_state *rl, struct st_store *st);

/* The port map (valid until the next rl_load_map). */
const struct rail_port_map *rl_map(const struct rl_state *rl);
/* Rail ports joined to a GPU (0: the map was never programmed). */
int64_t rl_joined(const struct rl_state *rl);
/* The rail port gpu is joined to, or RAIL_NONE (also for a GPU outside the fabric). */
int64_t rl_gpu_port(const struct rl_state *rl, int64_t gpu);

/* Faulty GPUs: out of every swap and job until marked healthy. */
bool rl_faulty(const struct rl_state *rl, int64_t gpu);
/* The source ("device", "operator", "scheduler") and time of a faulty GPU's report; NULL when
 * healthy. */
const char *rl_fault_source(const struct rl_state *rl, int64_t gpu, int64_t *since_ms);
/* Sets a GPU's condition in memory (the caller stored it first). */
void rl_set_faulty(struct rl_state *rl, int64_t gpu, bool faulty, const char *source,
		   int64_t since_ms);
int rl_n_faulty(const struct rl_state *rl);

/*
 * The jobs' GPU check (jm_deps.gpus_check; arg is the struct rl_state):
 * every GPU of a new rail job is in the fabric (INVALID_ARGUMENT), healthy
 * and joined to a rail port (FAILED_PRECONDITION), naming the field
 * placement.gpus[i].gpu. Holding by other jobs is the job manager's check.
 */
bool rl_check_job_gpus(void *arg, const int64_t *gpus, size_t n, struct err_info *err);

#endif
