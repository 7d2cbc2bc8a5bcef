/*
 * test_jobs_fixture.c - what the job manager's tests (test_jobs.c,
 * test_jobs_unproven.c, property/test_wave_property.c) share
 * (test_jobs_fixture.h): the three fabrics they run on (or one given as
 * JSON), the fake planner pool, the fake transaction engine, the
 * event collectors, the setup and teardown of a job manager over a real
 * SQLite store, and the helpers every test uses.
 *
 * The fakes are the two function pointers of struct jm_deps: plan_submit
 * keeps the planning tasks until the test runs them (work, then done, as
 * the pool and the loop would), and txn_start keeps the change set until
 * the test says how the transaction ended. The fake engine does on its
 * side what the real driver (txn_driver.c) does: it stores the intent and the
 * outcome, and applies a confirmed change to the circuit table. Store
 * failures are real: a trigger added through a second SQLite connection
 * (sql) makes the chosen writes fail.
 */
#include "test_jobs_fixture.h"

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

/* ---- fakes ---- */

static int fake_plan_submit(void *ctx, struct pool_task *t)
{
	struct fx *f = ctx;

	if (f->pool_refuses)
		return -f->pool_refuses;
	assert_true(f->n_tasks < MAX_TASKS);
	f->tasks[f->n_tasks++] = t;
	if (f->plan_submitted)
		f->plan_submitted(f, t);
	return 0;
}

/* Runs the oldest planning task only; false when none is queued. */
bool run_first_plan(struct fx *f)
{
	struct pool_task *t;

	if (!f->n_tasks)
		return false;
	t = f->tasks[0];
	memmove(f->tasks, f->tasks + 1, (f->n_tasks - 1) * sizeof(*f->tasks));
	f->n_tasks--;
	t->work(t);
	t->done(t);
	return true;
}

/* Runs every planning task queued so far (and those they queue), as the pool would. */
size_t run_plans(struct fx *f)
{
	size_t ran = 0;

	while (run_first_plan(f))
		ran++;
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
	f->change.jobs = NULL;
	f->n_wave_jobs = c->n_jobs ? c->n_jobs : 1;
	assert_true(f->n_wave_jobs <= sizeof(f->wave_jobs) / sizeof(f->wave_jobs[0]));
	for (size_t i = 0; i < f->n_wave_jobs; i++)
		snprintf(f->wave_jobs[i], sizeof(f->wave_jobs[i]), "%s",
			 c->n_jobs ? c->jobs[i] : c->job_id);
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
	if (c->kind == &krt_ops) {
		const struct krt_change *rc = c->kind_change;
		struct st_bundle *sb = calloc(rc->n_bundles + 1, sizeof(*sb));

		rg_rings_free(f->ring_copy, f->n_ring_copy);
		free(f->bundle_copy);
		f->ring_copy = rg_rings_dup(rc->job_rings, rc->n_rings);
		f->n_ring_copy = rc->n_rings;
		f->bundle_copy = malloc((rc->n_bundles + 1) * sizeof(*f->bundle_copy));
		assert_non_null(f->ring_copy);
		assert_non_null(f->bundle_copy);
		assert_non_null(sb);
		memcpy(f->bundle_copy, rc->bundles, rc->n_bundles * sizeof(*rc->bundles));
		f->n_bundle_copy = rc->n_bundles;
		for (size_t i = 0; i < rc->n_bundles; i++)
			sb[i] = (struct st_bundle){rc->bundles[i].node, rc->bundles[i].bundle,
						   rc->bundles[i].path, rc->bundles[i].distance,
						   rc->bundles[i].dir};
		assert_int_equal(st_ring_intent_begin(f->store, c->job_id, rc->job_rings,
						      rc->n_rings, sb, rc->n_bundles, rc->fault,
						      clk_wall_ms(&f->clock.clk), &f->txn_id),
				 0);
		free(sb);
		f->done = done;
		f->done_arg = arg;
		f->txn_open = true;
		f->n_txns++;
		return 0;
	}
	assert_int_equal(st_intent_begin_wave(f->store, c->n_jobs ? c->jobs : &c->job_id,
					      c->n_jobs ? c->n_jobs : 1, c->removals, c->n_removals,
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
void finish_txn(struct fx *f, enum txn_result result, bool store_failed)
{
	finish_txn_faults(f, result, store_failed, NULL, 0);
}

void finish_txn_faults(struct fx *f, enum txn_result result, bool store_failed,
		       const struct txn_device_fault *faults, size_t n_faults)
{
	static const enum st_intent_state st[] = {[TXN_CONFIRMED] = ST_INTENT_CONFIRMED,
						  [TXN_ROLLED_BACK] = ST_INTENT_ROLLED_BACK,
						  [TXN_FAILED] = ST_INTENT_FAILED};
	struct txn_outcome o = {.result = result,
				.txn_id = (uint64_t)f->txn_id,
				.message = result == TXN_CONFIRMED ? "" : "device d0 said no",
				.rollback_failures = result == TXN_FAILED ? 1 : 0,
				.store_failed = store_failed,
				.store_error = store_failed ? "injected outcome write failure" : "",
				.faults = faults,
				.n_faults = n_faults};

	assert_true(f->txn_open);
	if (!store_failed) {
		assert_int_equal(st_intent_finish(f->store, f->txn_id, st[result], o.message,
						  clk_wall_ms(&f->clock.clk)),
				 0);
		if (result == TXN_CONFIRMED && f->change.kind == &krt_ops)
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

void on_answer(void *ctx, const struct err_info *err, const struct jm_job *job, bool created,
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

void open_jm(struct fx *f)
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
			    .max_wave_jobs = f->max_wave_jobs,
			    .events = {.ctx = f,
				       .job_changed = on_job_changed,
				       .store_failed = on_store_failed,
				       .ring_changed = on_ring_changed,
				       .node_changed = on_node_changed}};
	char err[256];

	assert_int_equal(jm_new(&d, &f->jm, err, sizeof(err)), 0);
}

/* A fabric (a leaf-spine fabric, a ring domain: ring state, no circuits, or
 * a rail fabric), its store in a new directory under parent. */
int setup_json(void **state, const char *json, const char *parent)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct cfg_errors errs = {0};
	char err[256];

	if (!f || (size_t)snprintf(f->dir, sizeof(f->dir), "%s/ocsd-jobs-XXXXXX", parent) >=
			  sizeof(f->dir))
		return -1;
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

int setup(void **state)
{
	return setup_json(state, lab_json, "/tmp");
}

int setup_ring(void **state)
{
	return setup_json(state, ring_json, "/tmp");
}

/* The rail fabric with its initial port map stored (as gpu_swaps.c adopts it). */
int setup_rail(void **state)
{
	struct fx *f;
	struct rail_port_map m = {0};
	struct ocs_xc *xcs = NULL;
	struct st_circuit *adds;
	size_t n = 0;
	int64_t txn;

	if (setup_json(state, rail_json, "/tmp") != 0)
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

int teardown(void **state)
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
void sql(struct fx *f, const char *stmt)
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
int prune(struct fx *f, const char *id)
{
	char stmt[160];

	assert_true(strlen(id) < 64);
	snprintf(stmt, sizeof(stmt), "DELETE FROM jobs WHERE id = '%.64s';", id);
	sql(f, stmt);
	return jm_forget(f->jm, id);
}

/* The state the store holds for job id. */
enum jm_state stored_state(struct fx *f, const char *id)
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
const struct lc_demand small_demand[] = {{0, 2, 2}};

struct jm_spec spec_of(const char *id, const char *key, const struct lc_demand *d, size_t n)
{
	return (struct jm_spec){.id = id,
				.idempotency_key = key,
				.planner = "",
				.demand = d,
				.n_demand = n,
				.raw = id,
				.raw_len = strlen(id)};
}

const struct jm_job *job(struct fx *f, const char *id)
{
	const struct jm_job *j = jm_find(f->jm, id);

	assert_non_null(j);
	return j;
}

/* The last answer's error: status and a word of its message, and its field. */
void check_refusal(struct fx *f, enum err_status st, const char *field, const char *word)
{
	const struct err_info *e = &f->answers[f->n_answers - 1].err;

	assert_int_equal(e->status, st);
	assert_string_equal(e->field, field);
	assert_non_null(strstr(e->message, word));
}

/* Submits id and takes it to PROGRAMMING with its transaction open. */
void submit_to_txn(struct fx *f, const char *id)
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
