/*
 * test_jobs_unproven.c - the job manager (daemon/jobs/jobs.c) with releases and
 * submissions whose rollback was not proven (hardening H2), on the fake
 * engine, pool and clock of test_jobs_fixture.c over a real SQLite store:
 * the engine ends the transaction FAILED (rollback failures), and the
 * failed intent is settled later, as the keepalive does once the devices
 * answer again, at the target or at the pre-image. A release not proven
 * keeps its job FAILED holding its circuits and GPUs (also across a
 * restart) until it is settled; a submission not proven holds nothing
 * until it is found at its target, then becomes ACTIVE, unless its GPUs
 * went to another job meanwhile.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_jobs_fixture.h"

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
	check_refusal(f, ERR_PRECONDITION, "placement.gpus[0].gpu", "held by job u (FAILED)");
	jm_submit(f->jm, &s, on_answer, f);
	check_refusal(f, ERR_PRECONDITION, "id", "release it first");
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
	check_refusal(f, ERR_PRECONDITION, "placement.gpus[0].gpu", "held by job u (FAILED)");

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_release_not_proven, setup, teardown),
		cmocka_unit_test_setup_teardown(test_submit_not_proven, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
