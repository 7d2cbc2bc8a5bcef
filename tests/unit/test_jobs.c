/*
 * test_jobs.c - the job manager (daemon/jobs/jobs.c) on a fake transaction
 * engine, a fake planner pool and virtual time, over a real SQLite store
 * (the fixture and its fakes: test_jobs_fixture.c; releases and
 * submissions whose rollback was not proven: test_jobs_unproven.c).
 *
 * Every transition of the state machine drawn in jobs.c is driven at least
 * once, with what the caller is answered and what the store holds checked
 * after each. Ring jobs run on an OCSTrx ring domain (setup_ring: the ring
 * state instead of circuits): placement and release with every bundle
 * checked against the physical model independently, a node fault stored
 * first and repaired ahead of queued work (re-placed: no free node extends
 * the ring), a rolled-back repair retried, a healed node reset, and a
 * stored fault repaired after a restart (bypass-extend); a ring keeps its
 * 4 nodes. Rail
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
#include <sqlite3.h>
#include <string.h>

#include <cmocka.h>

#include "test_jobs_fixture.h"

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
	assert_int_equal(f->answers[0].err.status, ERR_OK);
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
	assert_int_equal(f->answers[3].err.status, ERR_EXISTS);
	assert_string_equal(f->answers[3].err.field, "idempotency_key");
	changed.raw = "j1 changed";
	changed.raw_len = strlen(changed.raw);
	jm_submit(f->jm, &changed, on_answer, f);
	assert_int_equal(f->answers[4].err.status, ERR_EXISTS);
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
	assert_int_equal(f->answers[0].err.status, ERR_INVALID);
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
	assert_int_equal(f->answers[0].err.status, ERR_EXHAUSTED);
	assert_string_equal(f->answers[0].err.field, "leaf_demand");
	assert_int_equal(f->n_txns, 0);
	assert_int_equal(fs_count(f->fs), 16); /* full's circuits only */
}

/*
 * A refusal that moving other jobs' circuits would lift names those jobs
 * (issue 30). Eighteen one-link jobs (a sequence found by searching random
 * ones) leave leaves 1 and 4 room at spine 0 only, where pod 0's free
 * ports sit on device pair 1 and pod 2's on pair 0: no placement exists.
 * Each job named must hold a port the placement would need: pod 0's pair
 * 0 or pod 2's pair 1 in group 0.
 */
static void test_refusal_names_movers(void **state)
{
	static const int seq[][2] = {{2, 6}, {4, 7}, {1, 3}, {3, 6}, {4, 7}, {5, 7},
				     {1, 6}, {1, 3}, {2, 4}, {2, 5}, {1, 5}, {1, 6},
				     {2, 4}, {0, 6}, {2, 5}, {1, 5}, {4, 7}, {1, 3}};
	const struct ocs_fabric *fab = &((struct fx *)*state)->cfg->fabric;
	struct fx *f = *state;
	struct lc_demand d[19];
	char ids[19][16], *at, *end;
	int named = 0;

	for (int k = 0; k < 19; k++) {
		struct jm_spec s;

		d[k] = k < 18 ? (struct lc_demand){seq[k][0], seq[k][1], 1}
			      : (struct lc_demand){1, 4, 1};
		snprintf(ids[k], sizeof(ids[k]), "m%d", k);
		s = spec_of(ids[k], NULL, &d[k], 1);
		f->n_answers = 0;
		jm_submit(f->jm, &s, on_answer, f);
		run_plans(f);
		if (k == 18)
			break;
		finish_txn(f, TXN_CONFIRMED, false);
		assert_int_equal(job(f, ids[k])->state, JM_ACTIVE);
	}
	assert_int_equal(job(f, "m18")->state, JM_FAILED);
	check_refusal(f, ERR_EXHAUSTED, "leaf_demand", "the ports of each device pair");
	at = strstr(f->answers[0].err.message, "the circuits of job");
	assert_non_null(at);
	assert_non_null(strstr(at, "allow_moving_other_jobs"));
	at = strchr(at + strlen("the circuits of job"), ' ') + 1;
	end = strstr(at, " hold");
	assert_non_null(end);
	*end = '\0';
	for (char *name = strtok(at, ", "); name; name = strtok(NULL, ", ")) {
		bool holds = false;

		for (size_t c = 0; c < fs_count(f->fs); c++) {
			const struct st_circuit *x = fs_at(f->fs, c);
			struct ocs_spine_port sp[2];

			if (strcmp(x->job_id, name) || x->xc.group != 0 ||
			    ocs_fabric_input_owner(fab, 0,
						   (struct ocs_device_port){x->xc.device, x->xc.in},
						   &sp[0]) ||
			    ocs_fabric_output_owner(
				    fab, 0, (struct ocs_device_port){x->xc.device, x->xc.out},
				    &sp[1]))
				continue;
			for (int e = 0; e < 2; e++)
				holds |= (sp[e].pod == 0 && sp[e].k < 2) ||
					 (sp[e].pod == 2 && sp[e].k >= 2);
		}
		assert_true(holds);
		named++;
	}
	assert_true(named > 0);
	assert_int_equal(fs_count(f->fs), 18 * 2); /* two cross-connects per link */
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
	assert_int_equal(f->answers[0].err.status, ERR_EXHAUSTED);
	assert_non_null(strstr(f->answers[0].err.message, "drained devices count as taken"));
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
		assert_int_equal(f->answers[1].err.status, ERR_EXHAUSTED);
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
	assert_int_equal(f->answers[0].err.status, ERR_OK);
	assert_int_equal(f->answers[0].n_plan_xcs, 4);
	assert_null(jm_find(f->jm, "dry"));
	assert_int_equal(f->n_txns, 0);
}

/* The one number a query of the store file answers. */
static long raw_count(const struct fx *f, const char *sql)
{
	sqlite3 *db;
	sqlite3_stmt *q;
	long n;

	assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &q, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(q), SQLITE_ROW);
	n = sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	sqlite3_close(db);
	return n;
}

/* Whether any addition of the open transaction owned by job id is on device dev. */
static bool touches(const struct fx *f, const char *id, int dev)
{
	for (size_t i = 0; i < f->change.n_additions; i++) {
		const struct ocs_xc *xc = &f->change.additions[i].xc;

		if (!strcmp(f->change.additions[i].job_id, id) &&
		    ocs_fabric_device_id(&f->cfg->fabric, xc->group, xc->device) == dev)
			return true;
	}
	return false;
}

/* No two jobs of the open transaction share an input or an output port. */
static void assert_no_shared_port(const struct fx *f)
{
	for (size_t i = 0; i < f->change.n_additions; i++)
		for (size_t k = i + 1; k < f->change.n_additions; k++) {
			const struct ocs_xc *a = &f->change.additions[i].xc;
			const struct ocs_xc *b = &f->change.additions[k].xc;

			if (a->group != b->group || a->device != b->device)
				continue;
			assert_false(a->in == b->in || a->out == b->out);
		}
}

/* Submits a, b, c (disjoint leaf pairs) while x's transaction is open. */
static void wave_behind_x(struct fx *f)
{
	static const struct lc_demand da[] = {{1, 3, 2}}, db[] = {{4, 6, 2}}, dc[] = {{5, 7, 2}};
	struct jm_spec a = spec_of("a", NULL, da, 1), b = spec_of("b", NULL, db, 1),
		       c = spec_of("c", NULL, dc, 1);

	submit_to_txn(f, "x");
	jm_submit(f->jm, &a, on_answer, f);
	jm_submit(f->jm, &b, on_answer, f);
	jm_submit(f->jm, &c, on_answer, f);
	assert_int_equal(run_plans(f), 3); /* one at a time, each admitted in turn */
	assert_int_equal(job(f, "a")->state, JM_PROGRAMMING);
	assert_int_equal(job(f, "c")->state, JM_PROGRAMMING);
	assert_int_equal(f->n_txns, 1);
	finish_txn(f, TXN_CONFIRMED, false);
	/* one transaction for the three, none planned again */
	assert_true(f->txn_open);
	assert_int_equal(f->n_txns, 2);
	assert_int_equal(f->n_wave_jobs, 3);
	assert_string_equal(f->wave_jobs[0], "a");
	assert_string_equal(f->wave_jobs[2], "c");
	assert_int_equal(f->change.n_additions, 12);
	assert_no_shared_port(f);
}

/*
 * jm_state_age_ms (ocsd_jobs_oldest_seconds): how long the job longest in
 * PROGRAMMING has been there, by the job manager's clock; 0 once none is.
 */
static void test_state_age(void **state)
{
	struct fx *f = *state;
	const struct lc_demand d2[] = {{1, 3, 2}};
	struct jm_spec a = spec_of("a", NULL, small_demand, 1);
	struct jm_spec b = spec_of("b", NULL, d2, 1);

	assert_int_equal(jm_state_age_ms(f->jm, JM_PROGRAMMING), 0);
	jm_submit(f->jm, &a, on_answer, f);
	assert_int_equal(run_plans(f), 1);
	assert_int_equal(job(f, "a")->state, JM_PROGRAMMING);
	clk_fake_advance_ms(&f->clock, 4000);
	jm_submit(f->jm, &b, on_answer, f);
	assert_int_equal(run_plans(f), 1);
	assert_int_equal(job(f, "b")->state, JM_PROGRAMMING);
	clk_fake_advance_ms(&f->clock, 1000);
	assert_int_equal(jm_state_age_ms(f->jm, JM_PROGRAMMING), 5000); /* a, the older */
	assert_int_equal(jm_state_age_ms(f->jm, JM_ACTIVE), 0);
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(job(f, "a")->state, JM_ACTIVE);
	assert_int_equal(jm_state_age_ms(f->jm, JM_PROGRAMMING), 1000); /* b */
	clk_fake_advance_ms(&f->clock, 250);
	assert_int_equal(jm_state_age_ms(f->jm, JM_ACTIVE), 250);
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(job(f, "b")->state, JM_ACTIVE);
	assert_int_equal(jm_state_age_ms(f->jm, JM_PROGRAMMING), 0);
}

static void test_admitted_plans_keep_clear(void **state)
{
	struct fx *f = *state;
	const struct lc_demand d2[] = {{1, 3, 2}};
	struct jm_spec a = spec_of("a", NULL, small_demand, 1);
	struct jm_spec b = spec_of("b", NULL, d2, 1);

	jm_submit(f->jm, &a, on_answer, f);
	assert_int_equal(run_plans(f), 1);
	assert_true(f->txn_open); /* a lone job's wave waits for nothing */
	assert_string_equal(f->change.job_id, "a");
	/* b plans around a's circuits while a's transaction runs */
	jm_submit(f->jm, &b, on_answer, f);
	assert_int_equal(run_plans(f), 1);
	assert_int_equal(job(f, "b")->state, JM_PROGRAMMING);
	finish_txn(f, TXN_CONFIRMED, false);
	/* b's plan still holds: its transaction starts at once, moving nothing */
	assert_true(f->txn_open);
	assert_string_equal(f->change.job_id, "b");
	assert_int_equal(f->change.n_removals, 0);
	assert_int_equal(f->n_txns, 2);
	for (size_t i = 0; i < f->change.n_additions; i++)
		assert_false(fs_contains(f->fs, &f->change.additions[i].xc));
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(job(f, "b")->state, JM_ACTIVE);
	assert_int_equal(fs_count(f->fs), 8);
}

static void test_stale_snapshot_replans(void **state)
{
	struct fx *f = *state;
	const struct lc_demand d2[] = {{1, 3, 2}};
	struct jm_spec a = spec_of("a", NULL, small_demand, 1);
	struct jm_spec b = spec_of("b", NULL, d2, 1);

	jm_submit(f->jm, &a, on_answer, f);
	assert_int_equal(run_plans(f), 1);
	jm_submit(f->jm, &b, on_answer, f);
	assert_int_equal(run_plans(f), 1);
	/* the circuit table changes behind the waves' back (as an adoption
	 * would): b's plan is stale once a's transaction ends */
	assert_int_equal(fs_load(f->fs, f->store), 0);
	finish_txn(f, TXN_CONFIRMED, false);
	assert_false(f->txn_open);
	assert_int_equal(job(f, "b")->state, JM_PLANNING);
	assert_int_equal(run_plans(f), 1);
	assert_true(f->txn_open);
	assert_int_equal(f->change.n_removals, 0); /* a's circuits stay where they are */
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(job(f, "b")->state, JM_ACTIVE);
	assert_int_equal(fs_count(f->fs), 8);
}

/* Jobs submitted together: the first one's wave waits for the others' plans. */
static void test_burst_one_wave(void **state)
{
	struct fx *f = *state;
	const struct lc_demand d2[] = {{1, 3, 2}}, d3[] = {{4, 6, 2}};
	struct jm_spec a = spec_of("a", NULL, small_demand, 1);
	struct jm_spec b = spec_of("b", NULL, d2, 1), c = spec_of("c", NULL, d3, 1);

	jm_submit(f->jm, &a, on_answer, f);
	jm_submit(f->jm, &b, on_answer, f);
	jm_submit(f->jm, &c, on_answer, f);
	assert_int_equal(run_plans(f), 3);
	assert_true(f->txn_open);
	assert_int_equal(f->n_txns, 1);
	assert_int_equal(f->n_wave_jobs, 3);
	assert_no_shared_port(f);
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(job(f, "c")->state, JM_ACTIVE);
	assert_int_equal(fs_count(f->fs), 12);
}

static void test_wave_confirmed(void **state)
{
	struct fx *f = *state;

	wave_behind_x(f);
	assert_int_equal(raw_count(f, "SELECT COUNT(*) FROM intent_jobs"), 3);
	finish_txn(f, TXN_CONFIRMED, false);
	assert_false(f->txn_open);
	assert_int_equal(job(f, "a")->state, JM_ACTIVE);
	assert_int_equal(job(f, "b")->state, JM_ACTIVE);
	assert_int_equal(job(f, "c")->state, JM_ACTIVE);
	assert_int_equal(fs_count(f->fs), 16);
	/* x, then a, b and c: each answered once, with its own outcome */
	assert_int_equal(f->n_answers, 4);
	for (size_t i = 0; i < 4; i++)
		assert_int_equal(f->answers[i].state, JM_ACTIVE);
	/* a wave of releases is one transaction too */
	jm_release(f->jm, "a", on_answer, f);
	jm_release(f->jm, "b", on_answer, f);
	assert_int_equal(f->n_wave_jobs, 1); /* a's release started at once */
	jm_release(f->jm, "c", on_answer, f);
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(f->n_wave_jobs, 2);
	assert_int_equal(f->change.n_removals, 8);
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(job(f, "c")->state, JM_RELEASED);
	assert_int_equal(fs_count(f->fs), 4); /* x's */
}

/* A device only b touches refused: a and c go again at once, b alone. */
static void test_wave_split_refused(void **state)
{
	struct fx *f = *state;
	struct txn_device_fault fault = {.dev = -1, .answered = true};

	wave_behind_x(f);
	for (size_t i = 0; i < f->change.n_additions && fault.dev < 0; i++) {
		const struct ocs_xc *xc = &f->change.additions[i].xc;
		int dev = ocs_fabric_device_id(&f->cfg->fabric, xc->group, xc->device);

		if (touches(f, "b", dev) && !touches(f, "a", dev) && !touches(f, "c", dev))
			fault.dev = dev;
	}
	assert_true(fault.dev >= 0);
	finish_txn_faults(f, TXN_ROLLED_BACK, false, &fault, 1);
	assert_true(f->txn_open);
	assert_int_equal(f->n_wave_jobs, 2);
	assert_string_equal(f->wave_jobs[0], "a");
	assert_string_equal(f->wave_jobs[1], "c");
	assert_int_equal(f->n_answers, 1); /* x's: nobody else's outcome is known yet */
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(job(f, "a")->state, JM_ACTIVE);
	assert_int_equal(job(f, "c")->state, JM_ACTIVE);
	assert_true(f->txn_open); /* b, alone */
	assert_int_equal(f->n_wave_jobs, 1);
	assert_string_equal(f->wave_jobs[0], "b");
	finish_txn(f, TXN_ROLLED_BACK, false);
	assert_int_equal(job(f, "b")->state, JM_FAILED);
	assert_int_equal(f->n_answers, 4);
	assert_int_equal(f->answers[3].err.status, ERR_UNAVAILABLE);
	assert_int_equal(fs_count(f->fs), 12);
}

/* A device that did not answer: the jobs on it fail with the wave, the others go again. */
static void test_wave_split_unreachable(void **state)
{
	struct fx *f = *state;
	struct txn_device_fault fault = {.dev = -1, .answered = false};
	const char *ids[] = {"a", "b", "c"};
	bool on[3];
	size_t n_on = 0;

	wave_behind_x(f);
	fault.dev = ocs_fabric_device_id(&f->cfg->fabric, f->change.additions[0].xc.group,
					 f->change.additions[0].xc.device);
	for (size_t k = 0; k < 3; k++)
		n_on += on[k] = touches(f, ids[k], fault.dev);
	finish_txn_faults(f, TXN_ROLLED_BACK, false, &fault, 1);
	for (size_t k = 0; k < 3; k++)
		assert_int_equal(job(f, ids[k])->state, on[k] ? JM_FAILED : JM_PROGRAMMING);
	assert_int_equal(f->n_answers, 1 + n_on);
	if (n_on < 3) {
		assert_true(f->txn_open);
		assert_int_equal(f->n_wave_jobs, 3 - n_on);
		finish_txn(f, TXN_CONFIRMED, false);
	}
	for (size_t k = 0; k < 3; k++)
		assert_int_equal(job(f, ids[k])->state, on[k] ? JM_FAILED : JM_ACTIVE);
	assert_int_equal(fs_count(f->fs), 4 + 4 * (3 - n_on));
}

/* --max-wave-jobs bounds a wave: past it, the next wave forms. */
static void test_wave_bound(void **state)
{
	struct fx *f = *state;

	static const struct lc_demand da[] = {{1, 3, 2}}, db[] = {{4, 6, 2}}, dc[] = {{5, 7, 2}};
	struct jm_spec a = spec_of("a", NULL, da, 1), b = spec_of("b", NULL, db, 1),
		       c = spec_of("c", NULL, dc, 1);

	jm_free(f->jm);
	f->max_wave_jobs = 2;
	open_jm(f);
	submit_to_txn(f, "x");
	jm_submit(f->jm, &a, on_answer, f);
	jm_submit(f->jm, &b, on_answer, f);
	jm_submit(f->jm, &c, on_answer, f);
	assert_int_equal(run_plans(f), 3);
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(f->n_wave_jobs, 2);
	assert_string_equal(f->wave_jobs[1], "b");
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(f->n_wave_jobs, 1);
	assert_string_equal(f->wave_jobs[0], "c");
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(job(f, "c")->state, JM_ACTIVE);
	assert_int_equal(f->n_txns, 3);
}

static void test_engine_outcomes(void **state)
{
	struct fx *f = *state;

	submit_to_txn(f, "rb");
	finish_txn(f, TXN_ROLLED_BACK, false);
	assert_int_equal(job(f, "rb")->state, JM_FAILED);
	assert_int_equal(f->answers[0].err.status, ERR_UNAVAILABLE);
	assert_non_null(strstr(f->answers[0].err.message, "rolled back"));
	submit_to_txn(f, "fl");
	finish_txn(f, TXN_FAILED, false);
	assert_int_equal(job(f, "fl")->state, JM_FAILED);
	assert_int_equal(f->answers[1].err.status, ERR_INTERNAL);
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
	assert_int_equal(f->answers[2].err.status, ERR_UNAVAILABLE);
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
	assert_int_equal(f->answers[3].err.status, ERR_OK);
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
	assert_int_equal(f->answers[1].err.status, ERR_UNAVAILABLE);
	jm_release(f->jm, "r", on_answer, f);
	finish_txn(f, TXN_CONFIRMED, false);
	assert_int_equal(job(f, "r")->state, JM_RELEASED);
	assert_int_equal(stored_state(f, "r"), JM_RELEASED);
	assert_int_equal(f->answers[2].err.status, ERR_OK);
	assert_int_equal(fs_count(f->fs), 0);
	/* again: answered at once */
	jm_release(f->jm, "r", on_answer, f);
	assert_int_equal(f->answers[3].state, JM_RELEASED);
	jm_release(f->jm, "nope", on_answer, f);
	assert_int_equal(f->answers[4].err.status, ERR_NOT_FOUND);
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
		assert_int_equal(f->answers[i].err.status, ERR_OK);
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
	assert_int_equal(f->answers[4].err.status, ERR_UNAVAILABLE);
	assert_int_equal(f->answers[5].err.status, ERR_OK);
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
	assert_int_equal(f->answers[0].err.status, ERR_UNAVAILABLE);
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
	assert_int_equal(f->answers[0].err.status, ERR_OK);
	assert_false(jm_serving(f->jm, &why));
	assert_non_null(strstr(why, "cannot store state ACTIVE"));
	assert_true(f->store_failed_seen);
	/* no further writes, each refused with the reason */
	jm_submit(f->jm, &later, on_answer, f);
	assert_int_equal(f->answers[1].err.status, ERR_UNAVAILABLE);
	assert_non_null(strstr(f->answers[1].err.message, "serves no writes"));
	jm_release(f->jm, "m", on_answer, f);
	assert_int_equal(f->answers[2].err.status, ERR_UNAVAILABLE);
	assert_null(jm_find(f->jm, "later"));
	/* reads and dry runs still work */
	jm_plan(f->jm, &later, on_answer, f);
	run_plans(f);
	assert_int_equal(f->answers[3].err.status, ERR_OK);
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
	assert_int_equal(f->answers[0].err.status, ERR_EXHAUSTED);
	assert_non_null(strstr(f->answers[0].err.message, "planner queue is full"));
	jm_plan(f->jm, &s, on_answer, f);
	assert_int_equal(f->answers[1].err.status, ERR_EXHAUSTED);
}

/* A client that went away: its answer still comes exactly once, others are unaffected. */
struct gone {
	int answered;
};

static void on_gone_answer(void *ctx, const struct err_info *err, const struct jm_job *job,
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
	assert_int_equal(f->answers[0].err.status, ERR_ABORTED);
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
			assert_int_equal(f->answers[0].err.status, ERR_EXISTS);
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
	assert_ptr_equal(f->change.kind, &krt_ops);
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
		assert_int_equal(f->answers[1].err.status, ERR_PRECONDITION);
	}
	/* more rings than the domain has nodes: RESOURCE_EXHAUSTED, nothing touched */
	{
		struct jm_ring_request big = {.tp = 16, .rings = 14};
		struct jm_spec b = ring_spec("big", &big);

		jm_submit(f->jm, &b, on_answer, f);
		run_plans(f);
		assert_false(f->txn_open);
		assert_int_equal(f->answers[2].err.status, ERR_EXHAUSTED);
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
	struct err_info err = {0};
	const char *affected = NULL;
	const struct rg_ring *ring;
	int victim, before[4], after[4];
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
	/*
	 * the nodes within K of ring 0 are a's other ring's and b's: no free
	 * node extends ring 0, so it is re-placed, still 4 nodes; only its old and
	 * new nodes change, never the failed one.
	 */
	assert_int_equal(f->ring_copy[0].m, 4);
	assert_int_equal(f->ring_copy[0].last_change, RG_REPLACED);
	assert_int_equal(f->ring_copy[0].failed_node, victim);
	memcpy(after, f->ring_copy[0].nodes, sizeof(after));
	for (size_t i = 0; i < f->n_bundle_copy; i++) {
		bool mine = false;

		for (int k = 0; k < 4; k++)
			mine |= f->bundle_copy[i].node == before[k] ||
				f->bundle_copy[i].node == after[k];
		assert_int_not_equal(f->bundle_copy[i].node, victim);
		assert_true(mine);
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
	assert_int_equal(f->events[0], RG_REPLACED);
	assert_int_equal(f->reactions[0], 5000 - 1000);
	ring = rg_job_rings(f->rings, "a", &n);
	assert_int_equal(ring[0].m, 4); /* the retry plans again: the ring may differ */
	for (int k = 0; k < 4; k++)
		assert_int_not_equal(ring[0].nodes[k], victim);
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
	assert_int_equal(err.status, ERR_INVALID);
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
	struct err_info err = {0};
	const char *affected = NULL;
	const struct rg_ring *ring;
	int victim, before[4];
	size_t n = 0;

	jm_submit(f->jm, &s, on_answer, f);
	run_plans(f);
	finish_txn(f, TXN_CONFIRMED, false);
	ring = rg_job_rings(f->rings, "c", &n);
	memcpy(before, ring[0].nodes, sizeof(before));
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
	/* rank 2 of positions 0..3 fails: position 4 (free) extends the ring at its end */
	assert_int_equal(f->ring_copy[0].last_change, RG_EXTENDED);
	finish_txn(f, TXN_CONFIRMED, false);
	ring = rg_job_rings(f->rings, "c", &n);
	assert_int_equal(ring[0].m, 4);
	assert_int_equal(ring[0].nodes[0], before[0]);
	assert_int_equal(ring[0].nodes[1], before[1]);
	assert_int_equal(ring[0].nodes[2], before[3]);
	assert_int_equal(ring[0].nodes[3], 16); /* position 4: ToR 4, index 0 */
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
	check_refusal(f, ERR_PRECONDITION, "placement.gpus[0].gpu", "held by job r1");
	s = rail_spec("r2", g8, 1);
	jm_submit(f->jm, &s, on_answer, f);
	check_refusal(f, ERR_PRECONDITION, "placement.gpus[0].gpu", "spare");
	rl_set_faulty(f->rl, 3, true, "operator", 7);
	s = rail_spec("r2", g3, 1);
	jm_submit(f->jm, &s, on_answer, f);
	check_refusal(f, ERR_PRECONDITION, "placement.gpus[0].gpu", "faulty");
	s = spec_of("r2", NULL, small_demand, 1);
	jm_submit(f->jm, &s, on_answer, f);
	check_refusal(f, ERR_PRECONDITION, "leaf_demand", "rail-ocs");
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
		cmocka_unit_test_setup_teardown(test_refusal_names_movers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_drain_holds_when_moving_other_jobs, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_admitted_plans_keep_clear, setup, teardown),
		cmocka_unit_test_setup_teardown(test_state_age, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stale_snapshot_replans, setup, teardown),
		cmocka_unit_test_setup_teardown(test_burst_one_wave, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wave_confirmed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wave_split_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wave_split_unreachable, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wave_bound, setup, teardown),
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
