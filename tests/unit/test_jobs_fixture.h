/*
 * test_jobs_fixture.h - what the job manager's tests (test_jobs.c,
 * test_jobs_unproven.c, property/test_wave_property.c) share: a job
 * manager (daemon/jobs/jobs.c) on a fake planner pool, a fake transaction
 * engine and a fake clock over a real SQLite store in a temporary
 * directory, the answers and events it gave, and the helpers every test
 * uses. Every helper fails the running cmocka test on an error.
 */
#ifndef OCSD_TEST_JOBS_FIXTURE_H
#define OCSD_TEST_JOBS_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clock.h"
#include "config.h"
#include "devices.h"
#include "fabric_state.h"
#include "jobs.h"
#include "kind_txn.h"
#include "pool.h"
#include "rails.h"
#include "rings.h"
#include "store.h"
#include "txn_driver.h"

#define MAX_TASKS   1024
#define MAX_ANSWERS 16

struct answer {
	struct err_info err;
	enum jm_state state; /* of the job answered with (0: none) */
	bool created;
	size_t n_plan_xcs;
};

struct fx {
	char dir[64], path[96];
	struct ocsd_config *cfg;
	struct st_store *store;
	struct fs_state *fs;
	struct devices *devs;
	struct clk_fake clock;
	struct jm *jm;
	/* the fake pool */
	struct pool_task *tasks[MAX_TASKS];
	size_t n_tasks;
	int pool_refuses; /* errno the pool answers with, 0: accepts */
	/* called with each task the pool accepts, as it is handed over (NULL: none) */
	void (*plan_submitted)(struct fx *f, struct pool_task *t);
	/* the fake engine */
	bool txn_open;
	int txn_refuses; /* errno txn_start answers with, 0: starts */
	int64_t txn_id;
	struct txn_change change; /* arrays owned below */
	struct ocs_xc *removals;
	struct st_circuit *additions;
	struct st_link *links;
	char job_id[128];
	size_t max_wave_jobs;		      /* the job manager's bound (0: its default) */
	char wave_jobs[JM_MAX_WAVE_JOBS][72]; /* the jobs of the open transaction (a wave's) */
	size_t n_wave_jobs;
	txn_done_fn done;
	void *done_arg;
	size_t n_txns;
	/* answers and events */
	struct answer answers[MAX_ANSWERS];
	size_t n_answers;
	size_t n_changes;
	bool store_failed_seen;
	/* ring domains: the ring state the fake engine applies confirmed rings to,
	 * the ring part of the open transaction, and the ring events seen */
	struct rg_state *rings;
	struct rg_ring *ring_copy;
	size_t n_ring_copy;
	struct hbd_bundle *bundle_copy;
	size_t n_bundle_copy;
	struct rl_state *rl; /* rail-OCS fabrics: the jobs' GPU check */
	enum rg_change events[32];
	int64_t reactions[32];
	size_t n_events;
	int node_events;
};

/* cmocka setups: the lab fabric (4 pods of 2 leaves, 4 spines each), an
 * OCSTrx ring domain of 64 nodes (ring state, no circuits), a rail-OCS
 * fabric of 6 servers with its initial port map stored; and the teardown
 * (runs what is queued, checks the per-state counters against a scan). */
int setup(void **state);
int setup_ring(void **state);
int setup_rail(void **state);
int teardown(void **state);
/* The setup of a fabric given as configuration JSON (cfg_load_mem), its store
 * in a new directory under parent ("/tmp" for the setups above). */
int setup_json(void **state, const char *json, const char *parent);

/* A new job manager on the fixture's store, fakes and state (after jm_free: a restart). */
void open_jm(struct fx *f);
/* Runs every planning task queued so far (and those they queue), as the pool would. */
size_t run_plans(struct fx *f);
/* Runs the oldest planning task only; false when none is queued. */
bool run_first_plan(struct fx *f);
/* Ends the open transaction with result, as the driver would (store_failed: its outcome write
 * failed). */
void finish_txn(struct fx *f, enum txn_result result, bool store_failed);
/* The same, naming the devices that failed (how a wave's failure is split). */
void finish_txn_faults(struct fx *f, enum txn_result result, bool store_failed,
		       const struct txn_device_fault *faults, size_t n_faults);
/* The answer callback: records the answer in f->answers (ctx is the struct fx). */
void on_answer(void *ctx, const struct err_info *err, const struct jm_job *job, bool created,
	       const struct ocs_xc *plan_xcs, size_t n_plan_xcs);

/* Runs SQL on a second connection to the store (fault injection). */
void sql(struct fx *f, const char *stmt);
/* What retention does: the store deletes a finished job, then memory forgets it. */
int prune(struct fx *f, const char *id);
/* The state the store holds for job id. */
enum jm_state stored_state(struct fx *f, const char *id);

/* A leaf demand between leaf 0 (pod 0) and leaf 2 (pod 1). */
extern const struct lc_demand small_demand[1];
/* A submission of a leaf demand, id its raw body. */
struct jm_spec spec_of(const char *id, const char *key, const struct lc_demand *d, size_t n);
/* Job id in memory (the test fails if it is not there). */
const struct jm_job *job(struct fx *f, const char *id);
/* The last answer's error: status and a word of its message, and its field. */
void check_refusal(struct fx *f, enum err_status st, const char *field, const char *word);
/* Submits id and takes it to PROGRAMMING with its transaction open. */
void submit_to_txn(struct fx *f, const char *id);

#endif
