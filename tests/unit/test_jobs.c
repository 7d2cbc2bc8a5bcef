/*
 * test_jobs.c - the job manager (daemon/jobs.c) on a fake transaction
 * engine, a fake planner pool and virtual time, over a real SQLite store.
 *
 * The fakes are the two function pointers of struct jm_deps: plan_submit
 * keeps the planning tasks until the test runs them (work, then done, as
 * the pool and the loop would), and txn_start keeps the change set until
 * the test says how the transaction ended. The fake engine does on its
 * side what the real driver (txn.c) does: it stores the intent and the
 * outcome, and applies a confirmed change to the circuit table. Store
 * failures are real: a trigger added through a second SQLite connection
 * makes the chosen writes fail.
 *
 * Every transition of the state machine drawn in jobs.c is driven at least
 * once, with what the caller is answered and what the store holds checked
 * after each. Ring jobs run on an OCSTrx ring domain (setup_ring: the ring
 * state instead of circuits): placement and release with every bundle
 * checked against the physical model independently, a node fault stored
 * first and repaired ahead of queued work, a rolled-back repair retried, a
 * healed node reset, and a stored fault repaired after a restart. Rail
 * jobs run on a rail-OCS fabric (setup_rail: the initial port map stored,
 * the rail state's GPU check): no plan, an empty change set, GPUs held,
 * spare, faulty or a leaf demand refused, release, restart.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "clock.h"
#include "config.h"
#include "devices.h"
#include "fabric_state.h"
#include "jobs.h"
#include "pool.h"
#include "rails.h"
#include "rings.h"
#include "store.h"
#include "txn.h"

/* The lab fabric: 4 pods of 2 leaves, 4 spines each, tau 2, cross wiring. */
static const char lab_json[] =
	"{\"ocsd-fabric:fabric\": {\"name\": \"lab\", \"pods\": 4, \"k-leaf\": 8, \"k-spine\": 4,"
	" \"tau\": 2, \"k-ocs\": 8, \"wiring\": \"cross\", \"devices\": {\"transport\": \"ssh\","
	" \"address\": \"127.0.0.1\", \"port-base\": 18300, \"username\": \"ocsd\","
	" \"password-file\": \"/etc/ocsd/device-password\", \"accept-any-host-key\": true,"
	" \"rpc-timeout-ms\": 5000, \"confirm-timeout-s\": 60}}}";

/* An OCSTrx ring domain: 16 ToRs of 4 nodes (64 nodes), 4 GPUs each, K = 3, 2 bundles. */
static const char ring_json[] =
	"{\"ocsd-fabric:fabric\": {\"name\": \"hbd\", \"ocstrx-ring\": {\"tors\": 16,"
	" \"nodes-per-tor\": 4, \"gpus-per-node\": 4, \"k-hops\": 3, \"bundles\": 2,"
	" \"devices\": {\"address\": \"127.0.0.1\", \"port-base\": 18400,"
	" \"password-file\": \"/etc/ocsd/device-password\", \"accept-any-host-key\": true}}}}";

/* A rail-OCS fabric: 6 servers of 4 GPUs, 3 per OCS group (the last a spare). */
static const char rail_json[] =
	"{\"ocsd-fabric:fabric\": {\"name\": \"rails\", \"rail-ocs\": {\"servers\": 6,"
	" \"rails\": 4, \"servers-per-ocs\": 3, \"spare-servers-per-ocs\": 1,"
	" \"devices\": {\"address\": \"127.0.0.1\", \"port-base\": 18500,"
	" \"password-file\": \"/etc/ocsd/device-password\", \"accept-any-host-key\": true}}}}";

#define MAX_TASKS   1024
#define MAX_ANSWERS 16

struct answer {
	struct jm_error err;
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
	/* the fake engine */
	bool txn_open;
	int txn_refuses; /* errno txn_start answers with, 0: starts */
	int64_t txn_id;
	struct txn_change change; /* arrays owned below */
	struct ocs_xc *removals;
	struct st_circuit *additions;
	struct st_link *links;
	char job_id[128];
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

/* ---- fakes ---- */

static int fake_plan_submit(void *ctx, struct pool_task *t)
{
	struct fx *f = ctx;

	if (f->pool_refuses)
		return -f->pool_refuses;
	assert_true(f->n_tasks < MAX_TASKS);
	f->tasks[f->n_tasks++] = t;
	return 0;
}

/* Runs every planning task queued so far (and those they queue), as the pool would. */
static size_t run_plans(struct fx *f)
{
	size_t ran = 0;

	while (f->n_tasks) {
		struct pool_task *t = f->tasks[0];

		memmove(f->tasks, f->tasks + 1, (f->n_tasks - 1) * sizeof(*f->tasks));
		f->n_tasks--;
		t->work(t);
		t->done(t);
		ran++;
	}
	return ran;
}

static int fake_txn_start(void *ctx, const struct txn_change *c, txn_done_fn done, void *arg,
			  char *why, size_t why_len)
{
	struct fx *f = ctx;

	assert_false(f->txn_open); /* invariant 1: one at a time */
	if (f->txn_refuses) {
		snprintf(why, why_len, "fake engine refuses (%s)", strerror(f->txn_refuses));
		return -f->txn_refuses;
	}
	free(f->removals);
	free(f->additions);
	free(f->links);
	f->change = *c;
	snprintf(f->job_id, sizeof(f->job_id), "%s", c->job_id);
	f->change.job_id = f->job_id;
	f->removals = malloc((c->n_removals + 1) * sizeof(*f->removals));
	f->additions = malloc((c->n_additions + 1) * sizeof(*f->additions));
	f->links = malloc((c->n_links + 1) * sizeof(*f->links));
	assert_non_null(f->removals);
	assert_non_null(f->additions);
	assert_non_null(f->links);
	if (c->n_removals)
		memcpy(f->removals, c->removals, c->n_removals * sizeof(*f->removals));
	if (c->n_additions)
		memcpy(f->additions, c->additions, c->n_additions * sizeof(*f->additions));
	if (c->n_links)
		memcpy(f->links, c->links, c->n_links * sizeof(*f->links));
	f->change.removals = f->removals;
	f->change.additions = f->additions;
	f->change.links = f->links;
	if (c->ring) {
		struct st_bundle *sb = calloc(c->n_bundles + 1, sizeof(*sb));

		rg_rings_free(f->ring_copy, f->n_ring_copy);
		free(f->bundle_copy);
		f->ring_copy = rg_rings_dup(c->rings, c->n_rings);
		f->n_ring_copy = c->n_rings;
		f->bundle_copy = malloc((c->n_bundles + 1) * sizeof(*f->bundle_copy));
		assert_non_null(f->ring_copy);
		assert_non_null(f->bundle_copy);
		assert_non_null(sb);
		memcpy(f->bundle_copy, c->bundles, c->n_bundles * sizeof(*c->bundles));
		f->n_bundle_copy = c->n_bundles;
		for (size_t i = 0; i < c->n_bundles; i++)
			sb[i] = (struct st_bundle){c->bundles[i].node, c->bundles[i].bundle,
						   c->bundles[i].path, c->bundles[i].distance,
						   c->bundles[i].dir};
		assert_int_equal(st_ring_intent_begin(f->store, c->job_id, c->rings, c->n_rings, sb,
						      c->n_bundles, c->fault,
						      clk_wall_ms(&f->clock.clk), &f->txn_id),
				 0);
		free(sb);
		f->done = done;
		f->done_arg = arg;
		f->txn_open = true;
		f->n_txns++;
		return 0;
	}
	assert_int_equal(st_intent_begin(f->store, c->job_id, c->removals, c->n_removals,
					 c->additions, c->n_additions, c->links, c->n_links,
					 clk_wall_ms(&f->clock.clk), &f->txn_id),
			 0);
	f->done = done;
	f->done_arg = arg;
	f->txn_open = true;
	f->n_txns++;
	return 0;
}

/* Ends the open transaction with result, as the driver would (store_failed: its outcome write
 * failed). */
static void finish_txn(struct fx *f, enum txn_result result, bool store_failed)
{
	static const enum st_intent_state st[] = {[TXN_CONFIRMED] = ST_INTENT_CONFIRMED,
						  [TXN_ROLLED_BACK] = ST_INTENT_ROLLED_BACK,
						  [TXN_FAILED] = ST_INTENT_FAILED};
	struct txn_outcome o = {.result = result,
				.txn_id = (uint64_t)f->txn_id,
				.message = result == TXN_CONFIRMED ? "" : "device d0 said no",
				.rollback_failures = result == TXN_FAILED ? 1 : 0,
				.store_failed = store_failed,
				.store_error =
					store_failed ? "injected outcome write failure" : ""};

	assert_true(f->txn_open);
	if (!store_failed) {
		assert_int_equal(st_intent_finish(f->store, f->txn_id, st[result], o.message,
						  clk_wall_ms(&f->clock.clk)),
				 0);
		if (result == TXN_CONFIRMED && f->change.ring)
			assert_int_equal(
				rg_set_job_rings(f->rings, f->job_id, f->ring_copy, f->n_ring_copy),
				0);
		else if (result == TXN_CONFIRMED)
			assert_int_equal(fs_apply(f->fs, f->change.removals, f->change.n_removals,
						  f->change.additions, f->change.n_additions),
					 0);
	}
	f->txn_open = false;
	o.finished_us = 5000;
	o.engine_us = 1000;
	free(f->removals);
	free(f->additions);
	free(f->links);
	f->removals = NULL;
	f->additions = NULL;
	f->links = NULL;
	f->done(f->done_arg, &o);
}

static void on_answer(void *ctx, const struct jm_error *err, const struct jm_job *job, bool created,
		      const struct ocs_xc *plan_xcs, size_t n_plan_xcs)
{
	struct fx *f = ctx;
	struct answer *a;

	(void)plan_xcs;
	assert_true(f->n_answers < MAX_ANSWERS);
	a = &f->answers[f->n_answers++];
	*a = (struct answer){.created = created, .n_plan_xcs = n_plan_xcs};
	if (err)
		a->err = *err;
	a->state = job ? job->state : 0;
}

static void on_job_changed(void *ctx, const struct jm_job *job)
{
	(void)job;
	((struct fx *)ctx)->n_changes++;
}

static void on_store_failed(void *ctx, const char *reason)
{
	assert_non_null(strstr(reason, "state store failed"));
	((struct fx *)ctx)->store_failed_seen = true;
}

static void on_ring_changed(void *ctx, const struct rg_ring *now, const int *old, int n_old,
			    int64_t reaction_us, int64_t devices_us)
{
	struct fx *f = ctx;

	(void)old;
	(void)n_old;
	(void)devices_us;
	assert_true(f->n_events < 32);
	f->reactions[f->n_events] = reaction_us;
	f->events[f->n_events++] = now->last_change;
}

static void on_node_changed(void *ctx, int node, bool faulty, const char *source)
{
	(void)node;
	(void)faulty;
	(void)source;
	((struct fx *)ctx)->node_events++;
}

/* ---- fixture ---- */

static void open_jm(struct fx *f)
{
	struct jm_deps d = {.cfg = f->cfg,
			    .store = f->store,
			    .fs = f->fs,
			    .clock = &f->clock.clk,
			    .plan_submit = fake_plan_submit,
			    .plan_ctx = f,
			    .txn_start = fake_txn_start,
			    .txn_ctx = f,
			    .devs = f->devs,
			    .rings = f->rings,
			    .gpus_check = f->rl ? rl_check_job_gpus : NULL,
			    .gpus_check_ctx = f->rl,
			    .events = {f, on_job_changed, NULL, NULL, on_store_failed,
				       on_ring_changed, on_node_changed}};
	char err[256];

	assert_int_equal(jm_new(&d, &f->jm, err, sizeof(err)), 0);
}

/* The lab fabric (json lab_json) or the ring domain (ring_json: ring state, no circuits). */
static int setup_fabric(void **state, const char *json)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct cfg_errors errs = {0};
	char err[256];

	snprintf(f->dir, sizeof(f->dir), "/tmp/ocsd-jobs-XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->path, sizeof(f->path), "%s/state.db", f->dir);
	if (cfg_load_mem(json, strlen(json), &f->cfg, &errs) != 0)
		return -1;
	cfg_errors_clear(&errs);
	if (st_open(f->path, &f->store, err, sizeof(err)) != 0)
		return -1;
	if (f->cfg->kind == CFG_OCSTRX_RING) {
		f->rings = rg_new(&f->cfg->ring);
		if (!f->rings || rg_load(f->rings, f->store) != 0)
			return -1;
	} else {
		f->fs = fs_new(&f->cfg->fabric);
		if (!f->fs || fs_load(f->fs, f->store) != 0)
			return -1;
	}
	clk_fake_init(&f->clock, 1700000000000);
	{
		const char *names[128];
		struct dev_deps dd = {
			&f->cfg->fabric,	   f->fs, f->store, names, f->cfg->n_devices, 1000,
			clk_wall_ms(&f->clock.clk)};

		for (int i = 0; i < f->cfg->n_devices && i < 128; i++)
			names[i] = f->cfg->devices[i].name;
		f->devs = dev_new(&dd);
		if (!f->devs)
			return -1;
	}
	open_jm(f);
	*state = f;
	return 0;
}

static int setup(void **state)
{
	return setup_fabric(state, lab_json);
}

static int setup_ring(void **state)
{
	return setup_fabric(state, ring_json);
}

/* The rail fabric with its initial port map stored (as railswap.c adopts it). */
static int setup_rail(void **state)
{
	struct fx *f;
	struct rail_port_map m = {0};
	struct ocs_xc *xcs = NULL;
	struct st_circuit *adds;
	size_t n = 0;
	int64_t txn;

	if (setup_fabric(state, rail_json) != 0)
		return -1;
	f = *state;
	jm_free(f->jm);
	f->rl = rl_new(&f->cfg->rail);
	if (!f->rl || rail_port_map_init(&m, &f->cfg->rail) != 0 ||
	    rail_port_map_xcs(&f->cfg->rail, &m, &xcs, &n) != 0)
		return -1;
	rail_port_map_clear(&m);
	adds = calloc(n, sizeof(*adds));
	for (size_t i = 0; adds && i < n; i++) {
		adds[i].xc = xcs[i];
		snprintf(adds[i].job_id, sizeof(adds[i].job_id), "%s", ST_RAIL_OWNER);
	}
	if (!adds || st_intent_begin(f->store, ST_RAIL_OWNER, NULL, 0, adds, n, NULL, 0, 1, &txn) ||
	    st_intent_finish(f->store, txn, ST_INTENT_CONFIRMED, "ok", 1) ||
	    fs_apply(f->fs, NULL, 0, adds, n) || rl_load_map(f->rl, f->fs))
		return -1;
	free(adds);
	free(xcs);
	open_jm(f);
	return 0;
}

/* The per-state counters agree with a scan of the table. */
static void check_counts(struct fx *f)
{
	size_t scan[JM_FAILED + 1] = {0}, total = 0;

	for (size_t i = 0; i < jm_count(f->jm); i++)
		scan[jm_at(f->jm, i)->state]++;
	for (int s = JM_PENDING; s <= JM_FAILED; s++) {
		assert_int_equal(jm_count_state(f->jm, (enum jm_state)s), scan[s]);
		total += scan[s];
	}
	assert_int_equal(total, jm_count(f->jm));
}

static int teardown(void **state)
{
	struct fx *f = *state;
	char cmd[128];

	run_plans(f);
	check_counts(f);
	jm_free(f->jm);
	free(f->removals);
	free(f->additions);
	free(f->links);
	rg_rings_free(f->ring_copy, f->n_ring_copy);
	free(f->bundle_copy);
	rg_free(f->rings);
	rl_free(f->rl);
	dev_free(f->devs);
	fs_free(f->fs);
	st_close(f->store);
	cfg_free(f->cfg);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	if (system(cmd) != 0)
		return -1;
	free(f);
	return 0;
}

/* Runs SQL on a second connection to the store (fault injection). */
static void sql(struct fx *f, const char *stmt)
{
	sqlite3 *db;
	char *msg = NULL;

	assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
	sqlite3_busy_timeout(db, 5000);
	if (sqlite3_exec(db, stmt, NULL, NULL, &msg) != SQLITE_OK)
		fail_msg("%s: %s", stmt, msg);
	sqlite3_close(db);
}

/* What retention does: the store deletes a finished job, then memory forgets it. */
static int prune(struct fx *f, const char *id)
{
	char stmt[160];

	assert_true(strlen(id) < 64);
	snprintf(stmt, sizeof(stmt), "DELETE FROM jobs WHERE id = '%.64s';", id);
	sql(f, stmt);
	return jm_forget(f->jm, id);
}

/* The state the store holds for job id. */
static enum jm_state stored_state(struct fx *f, const char *id)
{
	struct st_job row = {0};
	enum jm_state s = 0;
	static const char *const names[] = {"",	      "PENDING",   "PLANNING", "PROGRAMMING",
					    "ACTIVE", "RELEASING", "RELEASED", "FAILED"};

	assert_int_equal(st_job_get(f->store, id, &row), 0);
	for (int i = 1; i <= 7; i++)
		if (strcmp(row.state, names[i]) == 0)
			s = (enum jm_state)i;
	st_job_clear(&row);
	return s;
}

/* A leaf demand between leaf 0 (pod 0) and leaf 2 (pod 1). */
static const struct lc_demand small_demand[] = {{0, 2, 2}};

static struct jm_spec spec_of(const char *id, const char *key, const struct lc_demand *d, size_t n)
{
	return (struct jm_spec){.id = id,
				.idempotency_key = key,
				.planner = "",
				.demand = d,
				.n_demand = n,
				.raw = id,
				.raw_len = strlen(id)};
}

static const struct jm_job *job(struct fx *f, const char *id)
{
	const struct jm_job *j = jm_find(f->jm, id);

	assert_non_null(j);
	return j;
}

/* The last answer's error: status and a word of its message, and its field. */
static void check_refusal(struct fx *f, enum jm_status st, const char *field, const char *word)
{
	const struct jm_error *e = &f->answers[f->n_answers - 1].err;

	assert_int_equal(e->status, st);
	assert_string_equal(e->field, field);
	assert_non_null(strstr(e->message, word));
}

/* Submits id and takes it to PROGRAMMING with its transaction open. */
static void submit_to_txn(struct fx *f, const char *id)
{
	struct jm_spec s = spec_of(id, NULL, small_demand, 1);
	size_t answers = f->n_answers;

	jm_submit(f->jm, &s, on_answer, f);
	assert_int_equal(job(f, id)->state, JM_PLANNING);
	assert_int_equal(stored_state(f, id), JM_PLANNING);
	assert_int_equal(run_plans(f), 1);
	assert_int_equal(job(f, id)->state, JM_PROGRAMMING);
	assert_true(f->txn_open);
	assert_int_equal(f->n_answers, answers); /* answered when it settles */
}

/* ---- the tests ---- */

static void test_submit_to_active(void **state)
{
	struct fx *f = *state;
	const struct jm_job *j;

	submit_to_txn(f, "j1");
	assert_string_equal(f->change.job_id, "j1");
	assert_false(f->change.release);
	/* two links between two pods: two bidirectional circuits, four cross-connects */
	assert_int_equal(f->change.n_additions, 4);
	assert_int_equal(f->change.n_removals, 0);
	assert_true(f->change.n_links > 0);
	clk_fake_advance_ms(&f->clock, 2500);
	finish_txn(f, TXN_CONFIRMED, false);
	j = job(f, "j1");
	assert_int_equal(j->state, JM_ACTIVE);
	assert_int_equal(stored_state(f, "j1"), JM_ACTIVE);
	assert_int_equal(j->updated_ms - j->created_ms, 2500); /* virtual time */
	assert_int_equal(f->n_answers, 1);
	assert_int_equal(f->answers[0].err.status, JM_OK);
	assert_true(f->answers[0].created);
	assert_int_equal(f->answers[0].state, JM_ACTIVE);
	assert_int_equal(fs_count(f->fs), 4);
	assert_int_equal(j->figures.links_placed, 2);
	assert_true(jm_serving(f->jm, NULL));
	/* PENDING, PLANNING, PROGRAMMING, ACTIVE */
	assert_int_equal(f->n_changes, 4);
}

static void test_idempotency(void **state)
{
	struct fx *f = *state;
	struct jm_spec s = spec_of("j1", "key-1", small_demand, 1);
	struct jm_spec other = spec_of("j2", "key-1", small_demand, 1);
	struct jm_spec changed = s;

	jm_submit(f->jm, &s, on_answer, f);
	jm_submit(f->jm, &s, on_answer, f); /* the same request again, in flight */
	run_plans(f);
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(f->n_answers, 2); /* each waiter answered exactly once */
	assert_true(f->answers[0].created != f->answers[1].created);
	jm_submit(f->jm, &s, on_answer, f); /* again, once ACTIVE: at once */
	assert_int_equal(f->n_answers, 3);
	assert_int_equal(f->answers[2].state, JM_ACTIVE);
	assert_false(f->answers[2].created);
	jm_submit(f->jm, &other, on_answer, f);
	assert_int_equal(f->answers[3].err.status, JM_EXISTS);
	assert_string_equal(f->answers[3].err.field, "idempotency_key");
	changed.raw = "j1 changed";
	changed.raw_len = strlen(changed.raw);
	jm_submit(f->jm, &changed, on_answer, f);
	assert_int_equal(f->answers[4].err.status, JM_EXISTS);
	assert_string_equal(f->answers[4].err.field, "id");
	assert_int_equal(f->n_txns, 1);
	assert_int_equal(jm_count(f->jm), 1);
}

static void test_bad_input_creates_nothing(void **state)
{
	struct fx *f = *state;
	const struct lc_demand bad_leaf[] = {{0, 99, 1}};
	struct jm_spec s = spec_of("bad", NULL, bad_leaf, 1);
	struct jm_spec empty = spec_of("empty", NULL, NULL, 0);
	struct jm_spec wrong_planner = spec_of("wp", NULL, small_demand, 1);

	jm_submit(f->jm, &s, on_answer, f);
	jm_submit(f->jm, &empty, on_answer, f);
	wrong_planner.planner = "delta-fast";
	jm_submit(f->jm, &wrong_planner, on_answer, f);
	assert_int_equal(f->n_answers, 3);
	assert_int_equal(f->answers[0].err.status, JM_INVALID);
	assert_string_equal(f->answers[0].err.field, "leaf_demand.pairs[0]");
	assert_string_equal(f->answers[1].err.field, "leaf_demand.pairs");
	assert_string_equal(f->answers[2].err.field, "options.planner");
	assert_int_equal(jm_count(f->jm), 0);
	assert_int_equal(f->n_tasks, 0);
}

static void test_does_not_fit_fails_untouched(void **state)
{
	struct fx *f = *state;
	/* leaf 0 has 8 spine-facing ports: "full" takes them all */
	const struct lc_demand full[] = {{0, 2, 8}};
	const struct lc_demand more[] = {{0, 4, 1}};
	struct jm_spec a = spec_of("full", NULL, full, 1);
	struct jm_spec s = spec_of("big", NULL, more, 1);

	jm_submit(f->jm, &a, on_answer, f);
	run_plans(f);
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(job(f, "full")->state, JM_ACTIVE);
	f->n_answers = 0;
	f->n_txns = 0;
	jm_submit(f->jm, &s, on_answer, f);
	run_plans(f);
	assert_int_equal(job(f, "big")->state, JM_FAILED);
	assert_int_equal(stored_state(f, "big"), JM_FAILED);
	assert_int_equal(f->n_answers, 1);
	assert_int_equal(f->answers[0].err.status, JM_EXHAUSTED);
	assert_string_equal(f->answers[0].err.field, "leaf_demand");
	assert_int_equal(f->n_txns, 0);
	assert_int_equal(fs_count(f->fs), 16); /* full's circuits only */
}

/* Drained devices get no new circuits: with every device drained nothing fits. */
static void test_drained_devices(void **state)
{
	struct fx *f = *state;
	struct jm_spec s = spec_of("dr", NULL, small_demand, 1);

	for (int i = 0; i < f->cfg->n_devices; i++)
		assert_int_equal(dev_set_drained(f->devs, i, true), 0);
	jm_submit(f->jm, &s, on_answer, f);
	run_plans(f);
	assert_int_equal(job(f, "dr")->state, JM_FAILED);
	assert_int_equal(f->answers[0].err.status, JM_EXHAUSTED);
	assert_non_null(strstr(f->answers[0].err.message, "do not fit"));
	assert_int_equal(f->n_txns, 0);
	/* undrained, the same request runs again and fits */
	for (int i = 0; i < f->cfg->n_devices; i++)
		assert_int_equal(dev_set_drained(f->devs, i, false), 0);
	jm_submit(f->jm, &s, on_answer, f);
	run_plans(f);
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(job(f, "dr")->state, JM_ACTIVE);
}

/*
 * A plan allowed to move other jobs' circuits (a global re-plan) never puts
 * a new cross-connect on a drained device: it is discarded and the job
 * planned pinned instead.
 */
static void test_drain_holds_when_moving_other_jobs(void **state)
{
	struct fx *f = *state;
	const struct lc_demand other[] = {{1, 3, 2}};
	struct jm_spec a = spec_of("a", NULL, small_demand, 1);
	struct jm_spec b = spec_of("b", NULL, other, 1);
	int drained = 0;

	jm_submit(f->jm, &a, on_answer, f);
	run_plans(f);
	finish_txn(f, TXN_CONFIRMED, false);
	for (int i = 0; i < f->cfg->n_devices; i += 2, drained++)
		assert_int_equal(dev_set_drained(f->devs, i, true), 0);
	b.allow_moving_other_jobs = true;
	jm_submit(f->jm, &b, on_answer, f);
	run_plans(f);
	if (job(f, "b")->state == JM_FAILED) {
		assert_int_equal(f->answers[1].err.status, JM_EXHAUSTED);
		return;
	}
	assert_true(f->txn_open);
	for (size_t i = 0; i < f->change.n_additions; i++) {
		const struct ocs_xc *xc = &f->change.additions[i].xc;
		int id = ocs_fabric_device_id(&f->cfg->fabric, xc->group, xc->device);

		assert_false(dev_drained(f->devs, id));
	}
	assert_true(drained > 0);
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(job(f, "b")->state, JM_ACTIVE);
}

static void test_dry_run(void **state)
{
	struct fx *f = *state;
	struct jm_spec s = spec_of("dry", NULL, small_demand, 1);

	jm_plan(f->jm, &s, on_answer, f);
	assert_int_equal(run_plans(f), 1);
	assert_int_equal(f->n_answers, 1);
	assert_int_equal(f->answers[0].err.status, JM_OK);
	assert_int_equal(f->answers[0].n_plan_xcs, 4);
	assert_null(jm_find(f->jm, "dry"));
	assert_int_equal(f->n_txns, 0);
}

static void test_stale_snapshot_replans(void **state)
{
	struct fx *f = *state;
	const struct lc_demand d2[] = {{1, 3, 2}};
	struct jm_spec a = spec_of("a", NULL, small_demand, 1);
	struct jm_spec b = spec_of("b", NULL, d2, 1);

	jm_submit(f->jm, &a, on_answer, f);
	jm_submit(f->jm, &b, on_answer, f);
	assert_int_equal(run_plans(f), 2); /* both planned on the empty fabric */
	assert_int_equal(job(f, "a")->state, JM_PROGRAMMING);
	assert_int_equal(job(f, "b")->state, JM_PROGRAMMING);
	finish_txn(f, TXN_CONFIRMED, false);
	/* b's snapshot is stale: planned again, not applied */
	assert_false(f->txn_open);
	assert_int_equal(job(f, "b")->state, JM_PLANNING);
	assert_int_equal(run_plans(f), 1);
	assert_true(f->txn_open);
	assert_int_equal(f->change.n_removals, 0); /* a's circuits stay where they are */
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(job(f, "b")->state, JM_ACTIVE);
	assert_int_equal(fs_count(f->fs), 8);
}

static void test_engine_outcomes(void **state)
{
	struct fx *f = *state;

	submit_to_txn(f, "rb");
	finish_txn(f, TXN_ROLLED_BACK, false);
	assert_int_equal(job(f, "rb")->state, JM_FAILED);
	assert_int_equal(f->answers[0].err.status, JM_UNAVAILABLE);
	assert_non_null(strstr(f->answers[0].err.message, "rolled back"));
	submit_to_txn(f, "fl");
	finish_txn(f, TXN_FAILED, false);
	assert_int_equal(job(f, "fl")->state, JM_FAILED);
	assert_int_equal(f->answers[1].err.status, JM_INTERNAL);
	assert_non_null(strstr(f->answers[1].err.message, "reconciliation"));
	/* the engine refuses to start (the intent could not be stored) */
	f->txn_refuses = EIO;
	jm_submit(f->jm,
		  &(struct jm_spec){.id = "ns",
				    .planner = "",
				    .demand = small_demand,
				    .n_demand = 1,
				    .raw = "ns",
				    .raw_len = 2},
		  on_answer, f);
	run_plans(f);
	assert_int_equal(job(f, "ns")->state, JM_FAILED);
	assert_int_equal(stored_state(f, "ns"), JM_FAILED);
	assert_int_equal(f->answers[2].err.status, JM_UNAVAILABLE);
	assert_int_equal(fs_count(f->fs), 0);
	/* a FAILED job submitted again runs again */
	f->txn_refuses = 0;
	jm_submit(f->jm,
		  &(struct jm_spec){.id = "ns",
				    .planner = "",
				    .demand = small_demand,
				    .n_demand = 1,
				    .raw = "ns",
				    .raw_len = 2},
		  on_answer, f);
	run_plans(f);
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(job(f, "ns")->state, JM_ACTIVE);
	assert_int_equal(f->answers[3].err.status, JM_OK);
}

static void test_release(void **state)
{
	struct fx *f = *state;

	submit_to_txn(f, "r");
	finish_txn(f, TXN_CONFIRMED, false);
	jm_release(f->jm, "r", on_answer, f);
	assert_int_equal(job(f, "r")->state, JM_RELEASING);
	assert_true(f->change.release);
	assert_int_equal(f->change.n_removals, 4);
	/* a release the devices roll back leaves the job ACTIVE */
	finish_txn(f, TXN_ROLLED_BACK, false);
	assert_int_equal(job(f, "r")->state, JM_ACTIVE);
	assert_int_equal(f->answers[1].err.status, JM_UNAVAILABLE);
	jm_release(f->jm, "r", on_answer, f);
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(job(f, "r")->state, JM_RELEASED);
	assert_int_equal(stored_state(f, "r"), JM_RELEASED);
	assert_int_equal(f->answers[2].err.status, JM_OK);
	assert_int_equal(fs_count(f->fs), 0);
	/* again: answered at once */
	jm_release(f->jm, "r", on_answer, f);
	assert_int_equal(f->answers[3].state, JM_RELEASED);
	jm_release(f->jm, "nope", on_answer, f);
	assert_int_equal(f->answers[4].err.status, JM_NOT_FOUND);
}

static void test_release_before_and_during_programming(void **state)
{
	struct fx *f = *state;
	struct jm_spec p = spec_of("p", NULL, small_demand, 1);

	/* PLANNING: released at once, the plan's result is dropped */
	jm_submit(f->jm, &p, on_answer, f);
	jm_release(f->jm, "p", on_answer, f);
	assert_int_equal(job(f, "p")->state, JM_RELEASED);
	assert_int_equal(f->n_answers, 2); /* the submitter and the releaser */
	run_plans(f);
	assert_false(f->txn_open);
	assert_int_equal(job(f, "p")->state, JM_RELEASED);
	/* PROGRAMMING: released after its transaction; nobody is answered
	 * with RELEASING (issue 14 #11): submitter and releaser get RELEASED */
	submit_to_txn(f, "q");
	jm_release(f->jm, "q", on_answer, f);
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(job(f, "q")->state, JM_RELEASING);
	assert_int_equal(f->n_answers, 2);
	assert_true(f->change.release);
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(job(f, "q")->state, JM_RELEASED);
	assert_int_equal(f->n_answers, 4);
	for (size_t i = 2; i < 4; i++) {
		assert_int_equal(f->answers[i].err.status, JM_OK);
		assert_int_equal(f->answers[i].state, JM_RELEASED);
	}
	assert_int_equal(fs_count(f->fs), 0);
	/* the release rolled back: the submitter's job is ACTIVE (OK), the
	 * releaser gets the devices' error */
	submit_to_txn(f, "s");
	jm_release(f->jm, "s", on_answer, f);
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(f->n_answers, 4);
	finish_txn(f, TXN_ROLLED_BACK, false);
	assert_int_equal(job(f, "s")->state, JM_ACTIVE);
	assert_int_equal(f->n_answers, 6);
	/* waiters are answered newest first: the releaser, then the submitter */
	assert_int_equal(f->answers[4].err.status, JM_UNAVAILABLE);
	assert_int_equal(f->answers[5].err.status, JM_OK);
	assert_int_equal(f->answers[5].state, JM_ACTIVE);
	assert_true(f->answers[5].created);
}

static void test_store_write_refused_creates_nothing(void **state)
{
	struct fx *f = *state;
	struct jm_spec s = spec_of("x", NULL, small_demand, 1);

	sql(f, "CREATE TRIGGER no_insert BEFORE INSERT ON jobs BEGIN "
	       "SELECT RAISE(ABORT, 'injected'); END;");
	jm_submit(f->jm, &s, on_answer, f);
	assert_int_equal(f->n_answers, 1);
	assert_int_equal(f->answers[0].err.status, JM_UNAVAILABLE);
	assert_non_null(strstr(f->answers[0].err.message, "cannot store the job"));
	assert_null(jm_find(f->jm, "x"));
	assert_int_equal(f->n_tasks, 0);
	assert_true(jm_serving(f->jm, NULL)); /* refused, nothing lost: still serving */
	sql(f, "DROP TRIGGER no_insert;");
	jm_submit(f->jm, &s, on_answer, f);
	run_plans(f);
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(job(f, "x")->state, JM_ACTIVE);
}

static void test_store_write_fails_mid_flight(void **state)
{
	struct fx *f = *state;
	struct jm_spec later = spec_of("later", NULL, small_demand, 1);
	const char *why = NULL;

	submit_to_txn(f, "m");
	sql(f, "CREATE TRIGGER no_update BEFORE UPDATE ON jobs BEGIN "
	       "SELECT RAISE(ABORT, 'injected'); END;");
	/* the devices changed: the job becomes ACTIVE, the store cannot say so */
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(job(f, "m")->state, JM_ACTIVE);
	assert_int_equal(f->answers[0].err.status, JM_OK);
	assert_false(jm_serving(f->jm, &why));
	assert_non_null(strstr(why, "cannot store state ACTIVE"));
	assert_true(f->store_failed_seen);
	/* no further writes, each refused with the reason */
	jm_submit(f->jm, &later, on_answer, f);
	assert_int_equal(f->answers[1].err.status, JM_UNAVAILABLE);
	assert_non_null(strstr(f->answers[1].err.message, "serves no writes"));
	jm_release(f->jm, "m", on_answer, f);
	assert_int_equal(f->answers[2].err.status, JM_UNAVAILABLE);
	assert_null(jm_find(f->jm, "later"));
	/* reads and dry runs still work */
	jm_plan(f->jm, &later, on_answer, f);
	run_plans(f);
	assert_int_equal(f->answers[3].err.status, JM_OK);
	sql(f, "DROP TRIGGER no_update;");
}

static void test_outcome_not_stored_stops_writes(void **state)
{
	struct fx *f = *state;

	submit_to_txn(f, "o");
	finish_txn(f, TXN_CONFIRMED, true);
	assert_false(jm_serving(f->jm, NULL));
	assert_true(f->store_failed_seen);
}

static void test_planner_queue_full(void **state)
{
	struct fx *f = *state;
	struct jm_spec s = spec_of("qf", NULL, small_demand, 1);

	f->pool_refuses = EAGAIN;
	jm_submit(f->jm, &s, on_answer, f);
	assert_int_equal(job(f, "qf")->state, JM_FAILED);
	assert_int_equal(f->answers[0].err.status, JM_EXHAUSTED);
	assert_non_null(strstr(f->answers[0].err.message, "planner queue is full"));
	jm_plan(f->jm, &s, on_answer, f);
	assert_int_equal(f->answers[1].err.status, JM_EXHAUSTED);
}

/* A client that went away: its answer still comes exactly once, others are unaffected. */
struct gone {
	int answered;
};

static void on_gone_answer(void *ctx, const struct jm_error *err, const struct jm_job *job,
			   bool created, const struct ocs_xc *plan_xcs, size_t n_plan_xcs)
{
	(void)err, (void)job, (void)created, (void)plan_xcs, (void)n_plan_xcs;
	((struct gone *)ctx)->answered++;
}

static void test_client_gone(void **state)
{
	struct fx *f = *state;
	struct jm_spec s = spec_of("cg", NULL, small_demand, 1);
	struct gone g = {0};

	jm_submit(f->jm, &s, on_gone_answer, &g);
	jm_submit(f->jm, &s, on_answer, f);
	run_plans(f);
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(g.answered, 1);
	assert_int_equal(f->n_answers, 1);
	assert_int_equal(job(f, "cg")->state, JM_ACTIVE);
}

static void test_shutdown_mid_plan_resumes(void **state)
{
	struct fx *f = *state;
	struct jm_spec s = spec_of("sd", NULL, small_demand, 1);

	jm_submit(f->jm, &s, on_answer, f);
	jm_stop(f->jm); /* shutdown while the plan runs */
	run_plans(f);
	assert_int_equal(job(f, "sd")->state, JM_PROGRAMMING);
	assert_false(f->txn_open); /* no transaction starts while stopping */
	jm_free(f->jm);
	assert_int_equal(f->n_answers, 1);
	/* stored and resumed at the next start: not UNAVAILABLE (issue 14 #7) */
	assert_int_equal(f->answers[0].err.status, JM_ABORTED);
	assert_non_null(strstr(f->answers[0].err.message, "carried out when ocsd starts again"));
	assert_int_equal(stored_state(f, "sd"), JM_PROGRAMMING);
	/* the next run plans it again and takes it to ACTIVE */
	open_jm(f);
	assert_int_equal(jm_set_demand(f->jm, "sd", "", false, small_demand, 1, NULL), 0);
	assert_int_equal(jm_recover(f->jm), 0);
	assert_int_equal(job(f, "sd")->state, JM_PLANNING);
	run_plans(f);
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(job(f, "sd")->state, JM_ACTIVE);
	assert_int_equal(stored_state(f, "sd"), JM_ACTIVE);
}

static void test_restart_resumes_release(void **state)
{
	struct fx *f = *state;

	submit_to_txn(f, "rr");
	finish_txn(f, TXN_CONFIRMED, false);
	jm_release(f->jm, "rr", on_answer, f);
	assert_true(f->txn_open);
	/* the daemon dies with the release's transaction open: recovery (not
	 * under test here) finds it rolled back */
	assert_int_equal(st_intent_finish(f->store, f->txn_id, ST_INTENT_ROLLED_BACK, "",
					  clk_wall_ms(&f->clock.clk)),
			 0);
	f->txn_open = false;
	jm_stop(f->jm);
	jm_free(f->jm);
	open_jm(f);
	assert_int_equal(jm_set_demand(f->jm, "rr", "", false, small_demand, 1, NULL), 0);
	assert_int_equal(jm_recover(f->jm), 0);
	assert_true(f->txn_open); /* the release resumes */
	assert_true(f->change.release);
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(job(f, "rr")->state, JM_RELEASED);
}

/* The oldest failed intent (rollback not proven), copied into *in (st_intent_clear it). */
static int copy_failed(void *ctx, const struct st_intent *got)
{
	struct st_intent *in = ctx;

	if (in->txn_id)
		return 0;
	*in = *got;
	in->removals = malloc((got->n_removals + 1) * sizeof(*got->removals));
	in->additions = malloc((got->n_additions + 1) * sizeof(*got->additions));
	assert_non_null(in->removals);
	assert_non_null(in->additions);
	if (got->n_removals)
		memcpy(in->removals, got->removals, got->n_removals * sizeof(*got->removals));
	if (got->n_additions)
		memcpy(in->additions, got->additions, got->n_additions * sizeof(*got->additions));
	in->rings = NULL;
	in->bundles = NULL;
	return 0;
}

/*
 * What the keepalive does once the devices answer again (keepalive.h): the
 * oldest failed intent settled at the target (applied to the circuit table)
 * or at the pre-image, and the job manager told.
 */
static void settle_failed(struct fx *f, bool at_target)
{
	struct st_intent in = {0};

	assert_int_equal(st_intent_list_failed(f->store, copy_failed, &in), 0);
	assert_true(in.txn_id != 0);
	if (at_target) {
		assert_true(jm_may_take_effect(f->jm, &in));
		assert_int_equal(st_intent_settle(f->store, in.txn_id, ST_INTENT_CONFIRMED, "", 1),
				 0);
		assert_int_equal(
			fs_apply(f->fs, in.removals, in.n_removals, in.additions, in.n_additions),
			0);
	} else {
		assert_int_equal(
			st_intent_settle(f->store, in.txn_id, ST_INTENT_ROLLED_BACK, "", 1), 0);
	}
	jm_unproven_settled(f->jm, &in, at_target);
	st_intent_clear(&in);
}

/*
 * A release whose rollback was not proven (hardening H2): the job stays
 * FAILED holding its circuits and its GPUs (not run again, not forgotten);
 * settled at the pre-image it still holds them; a second release is a
 * real transaction; a restart finds it holding; settled at the target it
 * is RELEASED and its circuits and GPUs are free.
 */
static void test_release_not_proven(void **state)
{
	struct fx *f = *state;
	static const int64_t gpus[] = {0, 1};
	struct jm_spec s = spec_of("u", NULL, small_demand, 1);
	struct jm_spec other = spec_of("v", NULL, small_demand, 1);

	s.gpus = other.gpus = gpus;
	s.n_gpus = other.n_gpus = 2;
	jm_submit(f->jm, &s, on_answer, f);
	run_plans(f);
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(job(f, "u")->state, JM_ACTIVE);
	assert_int_equal(fs_count(f->fs), 4);

	jm_release(f->jm, "u", on_answer, f);
	finish_txn(f, TXN_FAILED, false);
	assert_int_equal(job(f, "u")->state, JM_FAILED);
	assert_true(job(f, "u")->holding);
	assert_int_equal(stored_state(f, "u"), JM_FAILED);
	assert_non_null(strstr(job(f, "u")->reason, "still holds its 4 cross-connect(s)"));
	assert_non_null(strstr(f->answers[f->n_answers - 1].err.message, "release it again"));
	assert_int_equal(fs_count(f->fs), 4);
	jm_submit(f->jm, &other, on_answer, f);
	check_refusal(f, JM_PRECONDITION, "placement.gpus[0].gpu", "held by job u (FAILED)");
	jm_submit(f->jm, &s, on_answer, f);
	check_refusal(f, JM_PRECONDITION, "id", "release it first");
	assert_int_equal(jm_forget(f->jm, "u"), -EBUSY);

	/* the devices came back at the pre-image: it still holds them */
	settle_failed(f, false);
	assert_int_equal(job(f, "u")->state, JM_FAILED);
	assert_true(job(f, "u")->holding);
	assert_non_null(strstr(job(f, "u")->reason, "release it again"));
	assert_int_equal(fs_count(f->fs), 4);

	/* a second release is a real one (unproven again here) */
	jm_release(f->jm, "u", on_answer, f);
	assert_int_equal(job(f, "u")->state, JM_RELEASING);
	assert_true(f->txn_open);
	assert_true(f->change.release);
	assert_int_equal(f->change.n_removals, 4);
	finish_txn(f, TXN_FAILED, false);
	assert_true(job(f, "u")->holding);

	/* a restart: holding again, from the circuit table */
	jm_stop(f->jm);
	jm_free(f->jm);
	open_jm(f);
	assert_int_equal(jm_set_demand(f->jm, "u", "", false, small_demand, 1, NULL), 0);
	assert_int_equal(jm_set_gpus(f->jm, "u", gpus, 2), 0);
	assert_int_equal(jm_recover(f->jm), 0);
	assert_false(f->txn_open);
	assert_int_equal(job(f, "u")->state, JM_FAILED);
	assert_true(job(f, "u")->holding);
	jm_submit(f->jm, &other, on_answer, f);
	check_refusal(f, JM_PRECONDITION, "placement.gpus[0].gpu", "held by job u (FAILED)");

	/* the devices came back at the target: the release took effect */
	settle_failed(f, true);
	assert_int_equal(job(f, "u")->state, JM_RELEASED);
	assert_false(job(f, "u")->holding);
	assert_int_equal(stored_state(f, "u"), JM_RELEASED);
	assert_int_equal(fs_count(f->fs), 0);
	jm_submit(f->jm, &other, on_answer, f);
	run_plans(f);
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(job(f, "v")->state, JM_ACTIVE);
	assert_int_equal(fs_count(f->fs), 4);
}

/*
 * A submission whose rollback was not proven: FAILED holding nothing
 * (released at once); found at its target it becomes ACTIVE with the
 * circuits it added, and its release is a real one; unless its GPUs went
 * to another job meanwhile.
 */
static void test_submit_not_proven(void **state)
{
	struct fx *f = *state;
	static const int64_t gpus[] = {4};
	static const struct lc_demand other_leaves[] = {{4, 6, 2}};
	struct jm_spec g1 = spec_of("g1", NULL, small_demand, 1);
	struct jm_spec g2 = spec_of("g2", NULL, other_leaves, 1);
	struct st_intent in = {0};

	g1.gpus = g2.gpus = gpus;
	g1.n_gpus = g2.n_gpus = 1;

	submit_to_txn(f, "w");
	finish_txn(f, TXN_FAILED, false);
	assert_int_equal(job(f, "w")->state, JM_FAILED);
	assert_false(job(f, "w")->holding);
	submit_to_txn(f, "x");
	finish_txn(f, TXN_FAILED, false);
	assert_int_equal(fs_count(f->fs), 0);

	settle_failed(f, true); /* w's: its circuits are on the devices */
	assert_int_equal(job(f, "w")->state, JM_ACTIVE);
	assert_int_equal(stored_state(f, "w"), JM_ACTIVE);
	assert_int_equal(fs_count(f->fs), 4);
	settle_failed(f, false); /* x's: rolled back after all */
	assert_int_equal(job(f, "x")->state, JM_FAILED);
	assert_non_null(strstr(job(f, "x")->reason, "rolled back, proven"));
	jm_release(f->jm, "x", on_answer, f);
	assert_int_equal(job(f, "x")->state, JM_RELEASED);
	assert_false(f->txn_open);

	jm_release(f->jm, "w", on_answer, f);
	assert_true(f->txn_open);
	assert_int_equal(f->change.n_removals, 4);
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(job(f, "w")->state, JM_RELEASED);
	assert_int_equal(fs_count(f->fs), 0);

	/* its GPUs went to another job meanwhile: found at its target, not entered */
	jm_submit(f->jm, &g1, on_answer, f);
	run_plans(f);
	finish_txn(f, TXN_FAILED, false);
	jm_submit(f->jm, &g2, on_answer, f);
	run_plans(f);
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(job(f, "g2")->state, JM_ACTIVE);
	assert_int_equal(st_intent_list_failed(f->store, copy_failed, &in), 0);
	assert_string_equal(in.job_id, "g1");
	assert_false(jm_may_take_effect(f->jm, &in));
	st_intent_clear(&in);
}

static void test_forget(void **state)
{
	struct fx *f = *state;
	struct jm_spec s = spec_of("fg", "key-fg", small_demand, 1);

	submit_to_txn(f, "live");
	assert_int_equal(jm_forget(f->jm, "live"), -EBUSY);
	assert_int_equal(jm_forget(f->jm, "nope"), -ENOENT);
	finish_txn(f, TXN_CONFIRMED, false);
	jm_submit(f->jm, &s, on_answer, f);
	jm_release(f->jm, "fg", on_answer, f);
	run_plans(f);
	assert_int_equal(job(f, "fg")->state, JM_RELEASED);
	assert_int_equal(prune(f, "fg"), 0);
	assert_null(jm_find(f->jm, "fg"));
	assert_int_equal(jm_count(f->jm), 1);
	assert_string_equal(jm_at(f->jm, 0)->id, "live");
	/* its idempotency key is free again */
	s.id = "fg2";
	jm_submit(f->jm, &s, on_answer, f);
	assert_non_null(jm_find(f->jm, "fg2"));
}

/* Many jobs: lookups stay right across index growth and deletions. */
static void test_many_jobs_index(void **state)
{
	struct fx *f = *state;
	char ids[300][16], keys[300][16];

	for (int i = 0; i < 300; i++) {
		struct jm_spec s;

		snprintf(ids[i], sizeof(ids[i]), "job-%d", i);
		snprintf(keys[i], sizeof(keys[i]), "k-%d", i);
		s = spec_of(ids[i], keys[i], small_demand, 1);
		jm_submit(f->jm, &s, on_answer, f);
		jm_release(f->jm, ids[i], on_answer, f);
		f->n_answers = 0;
	}
	run_plans(f);
	for (int i = 0; i < 300; i += 2)
		assert_int_equal(prune(f, ids[i]), 0);
	assert_int_equal(jm_count(f->jm), 150);
	for (int i = 0; i < 300; i++) {
		struct jm_spec s = spec_of("other", keys[i], small_demand, 1);

		assert_true((jm_find(f->jm, ids[i]) != NULL) == (i % 2 == 1));
		jm_submit(f->jm, &s, on_answer, f);
		if (i % 2) {
			assert_int_equal(f->answers[0].err.status, JM_EXISTS);
			f->n_answers = 0;
		} else {
			jm_release(f->jm, "other", on_answer, f);
			assert_int_equal(prune(f, "other"), 0);
			f->n_answers = 0;
		}
	}
}

/* ---- ring jobs (OCSTrx ring domains) ---- */

static int collect_faults(void *ctx, int node, const char *source, int64_t since_ms)
{
	char *out = ctx;

	(void)since_ms;
	snprintf(out + strlen(out), 64 - strlen(out), "%d:%s;", node, source);
	return 0;
}

static struct jm_spec ring_spec(const char *id, const struct jm_ring_request *r)
{
	return (struct jm_spec){.id = id, .ring = r, .raw = id, .raw_len = strlen(id)};
}

/*
 * Independent check of a ring change against the physical model: every
 * bundle of every node of every ring is in the change, bundle 0 (down)
 * reaches the node before, bundle 1 (up) the node after, the ends loop
 * back; and no setting touches a node outside the rings.
 */
static void check_ring_bundles(const struct fx *f)
{
	size_t seen = 0;

	for (size_t r = 0; r < f->n_ring_copy; r++) {
		const struct rg_ring *g = &f->ring_copy[r];

		for (int k = 0; k < g->m; k++) {
			int want[2] = {k > 0 ? g->nodes[k - 1] : -1,
				       k + 1 < g->m ? g->nodes[k + 1] : -1};

			for (int b = 0; b < 2; b++) {
				bool found = false;

				for (size_t i = 0; i < f->n_bundle_copy; i++) {
					const struct hbd_bundle *x = &f->bundle_copy[i];

					if (x->node != g->nodes[k] || x->bundle != b)
						continue;
					found = true;
					assert_int_equal(x->peer, want[b]);
					assert_int_equal(x->path, want[b] < 0 ? HBD_PATH_LOOPBACK
									      : HBD_PATH_EXTERNAL);
				}
				assert_true(found);
				seen++;
			}
		}
	}
	assert_int_equal(seen, f->n_bundle_copy);
}

/* Submit -> a ring transaction (rings and every bundle) -> ACTIVE; release: loopback, no ring. */
static void test_ring_submit_release(void **state)
{
	struct fx *f = *state;
	struct jm_ring_request r = {.tp = 16, .rings = 3};
	struct jm_spec s = ring_spec("r1", &r);
	size_t n = 0;

	jm_submit(f->jm, &s, on_answer, f);
	assert_int_equal(run_plans(f), 1);
	assert_true(f->txn_open);
	assert_true(f->change.ring);
	assert_int_equal(f->n_ring_copy, 3);
	assert_int_equal(f->n_bundle_copy, 3 * 4 * 2);
	check_ring_bundles(f);
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(f->n_answers, 1);
	assert_int_equal(f->answers[0].state, JM_ACTIVE);
	assert_true(job(f, "r1")->figures.has_ring);
	assert_int_equal(job(f, "r1")->figures.ring.gpus_placed, 48);
	assert_non_null(rg_job_rings(f->rings, "r1", &n));
	assert_int_equal(n, 3);
	assert_int_equal(f->n_events, 3);
	assert_int_equal(f->events[0], RG_PLACED);
	/* a leaf demand on a ring domain is refused, naming the kind */
	{
		struct jm_spec leaf = {.id = "leaf",
				       .demand = small_demand,
				       .n_demand = 1,
				       .raw = "leaf",
				       .raw_len = 4};

		jm_submit(f->jm, &leaf, on_answer, f);
		assert_int_equal(f->answers[1].err.status, JM_PRECONDITION);
	}
	/* more rings than the domain has nodes: RESOURCE_EXHAUSTED, nothing touched */
	{
		struct jm_ring_request big = {.tp = 16, .rings = 14};
		struct jm_spec b = ring_spec("big", &big);

		jm_submit(f->jm, &b, on_answer, f);
		run_plans(f);
		assert_false(f->txn_open);
		assert_int_equal(f->answers[2].err.status, JM_EXHAUSTED);
		assert_string_equal(f->answers[2].err.field, "ring.rings");
	}
	jm_release(f->jm, "r1", on_answer, f);
	assert_true(f->txn_open);
	assert_int_equal(f->n_ring_copy, 0);
	assert_int_equal(f->n_bundle_copy, 12 * 2);
	for (size_t i = 0; i < f->n_bundle_copy; i++)
		assert_int_equal(f->bundle_copy[i].path, HBD_PATH_LOOPBACK);
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(job(f, "r1")->state, JM_RELEASED);
	assert_null(rg_job_rings(f->rings, "r1", &n));
	assert_int_equal(f->events[f->n_events - 1], RG_RELEASED);
}

/*
 * A node of a placed ring fails: stored faulty first, then a repair of
 * that ring (bypass: only its two neighbours programmed, never the faulty
 * node) runs ahead of queued work while the job stays ACTIVE; its event
 * carries the reaction time. A rolled-back repair is tried again by
 * jm_retry_repairs; a faulty node is out of the next plans; a restart with
 * the fault stored and the repair undone repairs the ring.
 */
static void test_ring_fault_repair(void **state)
{
	struct fx *f = *state;
	struct jm_ring_request r = {.tp = 16, .rings = 2};
	struct jm_spec s1 = ring_spec("a", &r), s2 = ring_spec("b", &r);
	struct jm_error err = {0};
	const char *affected = NULL;
	const struct rg_ring *ring;
	int victim, before[4];
	size_t n = 0;
	char faults[64] = "";

	jm_submit(f->jm, &s1, on_answer, f);
	run_plans(f);
	finish_txn(f, TXN_CONFIRMED, false);
	ring = rg_job_rings(f->rings, "a", &n);
	memcpy(before, ring[0].nodes, sizeof(before));
	victim = before[1];
	/* b is being programmed when the fault arrives */
	jm_submit(f->jm, &s2, on_answer, f);
	run_plans(f);
	assert_true(f->txn_open);
	assert_string_equal(f->job_id, "b");
	assert_int_equal(jm_mark_node(f->jm, victim, true, "device", 1000, &affected, &err), 0);
	assert_string_equal(affected, "a");
	assert_int_equal(f->node_events, 1);
	assert_int_equal(st_fault_list(f->store, collect_faults, faults), 0);
	{
		char want[32];

		snprintf(want, sizeof(want), "%d:device;", victim);
		assert_string_equal(faults, want); /* stored before anything else */
	}
	finish_txn(f, TXN_CONFIRMED, false);
	/* next: the repair of a, not anything queued */
	assert_true(f->txn_open);
	assert_string_equal(f->job_id, "a");
	assert_int_equal(job(f, "a")->state, JM_ACTIVE);
	assert_int_equal(f->ring_copy[0].m, 3);
	assert_int_equal(f->ring_copy[0].last_change, RG_BYPASSED);
	assert_int_equal(f->ring_copy[0].failed_node, victim);
	for (size_t i = 0; i < f->n_bundle_copy; i++) {
		assert_int_not_equal(f->bundle_copy[i].node, victim);
		assert_true(f->bundle_copy[i].node == before[0] ||
			    f->bundle_copy[i].node == before[2]);
	}
	/* rolled back: tried again by the retry, then confirmed */
	finish_txn(f, TXN_ROLLED_BACK, false);
	assert_false(f->txn_open);
	jm_retry_repairs(f->jm);
	assert_true(f->txn_open);
	assert_string_equal(f->job_id, "a");
	f->n_events = 0;
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(f->n_events, 1);
	assert_int_equal(f->events[0], RG_BYPASSED);
	assert_int_equal(f->reactions[0], 5000 - 1000);
	ring = rg_job_rings(f->rings, "a", &n);
	assert_int_equal(ring[0].m, 3);
	assert_int_equal(ring[0].nodes[0], before[0]);
	assert_int_equal(ring[0].nodes[1], before[2]);
	/* the faulty node is out of every plan */
	{
		uint8_t *use = rg_use_snapshot(f->rings, NULL);

		assert_int_equal(use[victim], HBD_NODE_FAULTY);
		free(use);
	}
	/* healed: it is in no ring, so it is set back to loopback */
	assert_int_equal(jm_mark_node(f->jm, victim, false, "operator", 0, &affected, &err), 0);
	assert_null(affected);
	assert_true(f->txn_open);
	assert_int_equal(f->n_bundle_copy, 2);
	assert_int_equal(f->bundle_copy[0].node, victim);
	assert_int_equal(f->bundle_copy[0].path, HBD_PATH_LOOPBACK);
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(rg_faulty(f->rings, victim), false);
	/* out of range */
	assert_int_equal(jm_mark_node(f->jm, 64, true, "operator", 0, &affected, &err), -1);
	assert_int_equal(err.status, JM_INVALID);
}

/* A drained node gets no new ring: the plan goes around it. */
static void test_ring_drained_node(void **state)
{
	struct fx *f = *state;
	struct jm_ring_request r = {.tp = 16, .rings = 1};
	struct jm_spec s = ring_spec("d", &r);

	assert_int_equal(dev_set_drained(f->devs, 0, true), 0);
	jm_submit(f->jm, &s, on_answer, f);
	run_plans(f);
	assert_true(f->txn_open);
	assert_int_equal(f->n_ring_copy, 1);
	for (int k = 0; k < f->ring_copy[0].m; k++)
		assert_int_not_equal(f->ring_copy[0].nodes[k], 0);
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(job(f, "d")->state, JM_ACTIVE);
}

/* A fault stored while its repair never ran (ocsd died) is repaired at the next start. */
static void test_ring_restart_repairs(void **state)
{
	struct fx *f = *state;
	struct jm_ring_request r = {.tp = 16, .rings = 1};
	struct jm_spec s = ring_spec("c", &r);
	struct jm_error err = {0};
	const char *affected = NULL;
	const struct rg_ring *ring;
	int victim;
	size_t n = 0;

	jm_submit(f->jm, &s, on_answer, f);
	run_plans(f);
	finish_txn(f, TXN_CONFIRMED, false);
	ring = rg_job_rings(f->rings, "c", &n);
	victim = ring[0].nodes[2];
	assert_int_equal(jm_mark_node(f->jm, victim, true, "device", 1, &affected, &err), 0);
	assert_true(f->txn_open);
	/* the daemon dies with the repair open: the devices reverted (recovery) */
	assert_int_equal(st_intent_finish(f->store, f->txn_id, ST_INTENT_ROLLED_BACK, "",
					  clk_wall_ms(&f->clock.clk)),
			 0);
	f->txn_open = false;
	jm_stop(f->jm);
	jm_free(f->jm);
	rg_free(f->rings);
	f->rings = rg_new(&f->cfg->ring);
	assert_int_equal(rg_load(f->rings, f->store), 0);
	assert_true(rg_faulty(f->rings, victim));
	open_jm(f);
	assert_int_equal(jm_set_ring(f->jm, "c", &r), 0);
	assert_int_equal(jm_recover(f->jm), 0);
	assert_true(f->txn_open);
	assert_int_equal(f->ring_copy[0].last_change, RG_BYPASSED);
	finish_txn(f, TXN_CONFIRMED, false);
	ring = rg_job_rings(f->rings, "c", &n);
	assert_int_equal(ring[0].m, 3);
	assert_int_equal(job(f, "c")->state, JM_ACTIVE);
}

/* ---- rail-OCS jobs (kind_rail.c) ---- */

static struct jm_spec rail_spec(const char *id, const int64_t *gpus, size_t n)
{
	return (struct jm_spec){.id = id,
				.rail = true,
				.raw = id,
				.raw_len = strlen(id),
				.gpus = gpus,
				.n_gpus = n};
}

/*
 * A rail job is its GPUs: no plan, an empty change set, ACTIVE; a GPU held
 * by another live job, a spare's, a faulty one and a leaf demand are
 * refused creating nothing; a release frees the GPUs; a job left
 * PROGRAMMING by a restart is programmed again.
 */
static void test_rail_jobs(void **state)
{
	struct fx *f = *state;
	static const int64_t g01[] = {0, 1}, g12[] = {1, 2}, g8[] = {8}, g3[] = {3}, g1[] = {1},
			     g5[] = {5};
	struct jm_spec s = rail_spec("r1", g01, 2);
	size_t circuits = fs_count(f->fs);

	jm_submit(f->jm, &s, on_answer, f);
	assert_int_equal(run_plans(f), 0); /* nothing to plan */
	assert_int_equal(job(f, "r1")->state, JM_PROGRAMMING);
	assert_true(f->txn_open);
	assert_int_equal(f->change.n_additions + f->change.n_removals, 0);
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(job(f, "r1")->state, JM_ACTIVE);
	assert_int_equal(stored_state(f, "r1"), JM_ACTIVE);
	assert_int_equal(f->answers[0].state, JM_ACTIVE);
	assert_int_equal(fs_count(f->fs), circuits); /* the port map is untouched */

	s = rail_spec("r2", g12, 2);
	jm_submit(f->jm, &s, on_answer, f);
	check_refusal(f, JM_PRECONDITION, "placement.gpus[0].gpu", "held by job r1");
	s = rail_spec("r2", g8, 1);
	jm_submit(f->jm, &s, on_answer, f);
	check_refusal(f, JM_PRECONDITION, "placement.gpus[0].gpu", "spare");
	rl_set_faulty(f->rl, 3, true, "operator", 7);
	s = rail_spec("r2", g3, 1);
	jm_submit(f->jm, &s, on_answer, f);
	check_refusal(f, JM_PRECONDITION, "placement.gpus[0].gpu", "faulty");
	s = spec_of("r2", NULL, small_demand, 1);
	jm_submit(f->jm, &s, on_answer, f);
	check_refusal(f, JM_PRECONDITION, "leaf_demand", "rail-ocs");
	assert_null(jm_find(f->jm, "r2"));
	assert_false(f->txn_open);

	jm_release(f->jm, "r1", on_answer, f);
	assert_true(f->txn_open);
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(job(f, "r1")->state, JM_RELEASED);
	s = rail_spec("r2", g1, 1);
	jm_submit(f->jm, &s, on_answer, f);
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(job(f, "r2")->state, JM_ACTIVE);

	/* a restart while r3 is PROGRAMMING: programmed again, then ACTIVE */
	s = rail_spec("r3", g5, 1);
	jm_submit(f->jm, &s, on_answer, f);
	assert_int_equal(stored_state(f, "r3"), JM_PROGRAMMING);
	f->txn_open = false;
	jm_stop(f->jm);
	jm_free(f->jm);
	f->n_answers = 0;
	open_jm(f);
	assert_int_equal(jm_set_gpus(f->jm, "r3", g5, 1), 0);
	assert_int_equal(jm_recover(f->jm), 0);
	assert_true(f->txn_open);
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(job(f, "r3")->state, JM_ACTIVE);
	assert_int_equal(job(f, "r2")->state, JM_ACTIVE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_submit_to_active, setup, teardown),
		cmocka_unit_test_setup_teardown(test_idempotency, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_input_creates_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_does_not_fit_fails_untouched, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dry_run, setup, teardown),
		cmocka_unit_test_setup_teardown(test_drained_devices, setup, teardown),
		cmocka_unit_test_setup_teardown(test_drain_holds_when_moving_other_jobs, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_stale_snapshot_replans, setup, teardown),
		cmocka_unit_test_setup_teardown(test_engine_outcomes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_release, setup, teardown),
		cmocka_unit_test_setup_teardown(test_release_before_and_during_programming, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_store_write_refused_creates_nothing, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_store_write_fails_mid_flight, setup, teardown),
		cmocka_unit_test_setup_teardown(test_outcome_not_stored_stops_writes, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_planner_queue_full, setup, teardown),
		cmocka_unit_test_setup_teardown(test_client_gone, setup, teardown),
		cmocka_unit_test_setup_teardown(test_shutdown_mid_plan_resumes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_restart_resumes_release, setup, teardown),
		cmocka_unit_test_setup_teardown(test_release_not_proven, setup, teardown),
		cmocka_unit_test_setup_teardown(test_submit_not_proven, setup, teardown),
		cmocka_unit_test_setup_teardown(test_forget, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_jobs_index, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ring_submit_release, setup_ring, teardown),
		cmocka_unit_test_setup_teardown(test_ring_fault_repair, setup_ring, teardown),
		cmocka_unit_test_setup_teardown(test_ring_restart_repairs, setup_ring, teardown),
		cmocka_unit_test_setup_teardown(test_ring_drained_node, setup_ring, teardown),
		cmocka_unit_test_setup_teardown(test_rail_jobs, setup_rail, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
