/*
 * test_sb_txn_faults.c - the fault matrix of the transaction engine: every
 * ocs-devsim fault knob (refuse, drop the session, hang past the deadline)
 * at every RPC the transaction sends (lock, discard, get, edit, validate,
 * commit, confirm, unlock, cancel), plus a commit without effect and a
 * failed port, once on 1 of 4 devices and once on all of 16 devices.
 *
 * The RPCs map onto the transaction steps as: prepare = lock,
 * get (pre-image), edit, validate; commit = commit; verify = get;
 * confirm = confirm (a commit on the committing session), unlock; rollback = cancel,
 * discard, get, edit, commit. One-shot knobs fire at the first RPC of
 * their kind, so `get` faults hit prepare. The edit and the validate of
 * prepare leave in one write (pipelined, sb_txn.c P1), so every edit and
 * validate knob here also checks that a pair whose first or second RPC
 * fails ends as before. A hung RPC lands after the
 * driver gave up on it: the rollback must wait for that stale session.
 *
 * Every case asserts all-or-nothing: the outcome is COMMITTED with every
 * device at its target, or ROLLED_BACK with every device at its pre-image,
 * never FAILED; and reading every device afterwards finds no one-way
 * circuit (independent L2 check over the fabric model). A session dropped
 * in prepare (drop@lock, drop@edit, drop@validate: one-shot knobs) is
 * retried once on a fresh session (sb_txn.c R1): those cases must commit,
 * with prepare_retried on every faulted device; the same knobs kept on
 * (`+`) must roll back, the retry having failed too.
 * SB_FAULT_ONLY="<knob> <knob>..." in the environment runs those knobs only.
 * --hung-commit runs only the case of a hung commit on the device without
 * :confirmed-commit (test_no_confirmed_commit_hung_commit).
 */
#include "sb_testlib.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#define FLEET 20
/* the deadline leaves room for a loaded sanitizer run (a drop must be seen
 * as a drop, not as a timeout): with three sanitizer tests at once on 2
 * cores, a validate retried after all 16 devices' sessions dropped (16 SSH
 * handshakes at once) went unanswered for 1 s; a hang outlasts it */
#define RPC_TIMEOUT_MS 2000
#define HANG_MS	       2800

static const struct ocs_fabric lab = {
	.pods = 4, .k_leaf = 8, .k_spine = 8, .tau = 2, .k_ocs = 16, .wiring = OCS_WIRING_STRAIGHT};

static struct tl_fleet fleet;
static struct tl_fleet nocc_fleet; /* one device without :confirmed-commit */
static struct sb_driver *drv;
static struct sb_engine *eng;
static struct sb_device **devs;
static struct sb_device **nocc;
static int round_no;

static int setup(void **state)
{
	const char *extra[] = {"--workers", "24", NULL};
	const char *nocc_extra[] = {"--no-confirmed-commit", NULL};
	if (tl_fleet_start(&fleet, FLEET, extra) || tl_fleet_start(&nocc_fleet, 1, nocc_extra) ||
	    sb_driver_new(NULL, &drv) || sb_engine_new(16, &eng))
		return -1;
	devs = tl_devices(drv, &fleet, 0, FLEET, RPC_TIMEOUT_MS);
	nocc = tl_devices(drv, &nocc_fleet, 0, 1, RPC_TIMEOUT_MS);
	return 0;
}

static int teardown(void **state)
{
	tl_devices_free(devs, FLEET);
	tl_devices_free(nocc, 1);
	sb_engine_free(eng);
	sb_driver_free(drv);
	int rc = tl_fleet_stop(&nocc_fleet);
	return tl_fleet_stop(&fleet) || rc;
}

static void set_faults(struct sb_device *d, const char *spec)
{
	struct sb_error err;

	if (tl_set_faults(d, spec, &err))
		fail_msg("set-faults on %s: %s", sb_device_name(d), err.message);
}

/*
 * After a hang, the RPC the driver gave up on still runs on the device, and
 * the session it came on ends only then: wait until every device grants
 * the candidate lock again (bounded), so the next case starts clean.
 */
static void wait_stale_sessions(struct sb_device **d, int n)
{
	int64_t deadline = sb_now_ms() + HANG_MS + 5000;
	for (int i = 0; i < n; i++) {
		struct sb_error err;
		for (;;) {
			if (!sb_device_connect_until(d[i], sb_now_ms() + 2000, &err) &&
			    !sb_device_lock(d[i], SB_DS_CANDIDATE, &err)) {
				assert_int_equal(sb_device_unlock(d[i], SB_DS_CANDIDATE, &err), 0);
				break;
			}
			if (sb_now_ms() > deadline)
				fail_msg("%s still locked after a hang: %s", sb_device_name(d[i]),
					 err.message);
			nanosleep(&(struct timespec){0, 50 * 1000000L}, NULL);
		}
	}
}

struct fault_case {
	const char *spec;
	bool must_roll_back; /* the knob necessarily breaks the transaction */
	bool must_retry;     /* prepare loses the session once: retried, then committed */
};

/*
 * Runs one case on devices d[0..n) (device i of the plan is device i % 8 of
 * group i / 8 of the lab fabric), faulting d[ff..ff+nf). Returns the result
 * (caller clears it).
 */
/* Whether a device holding `have` already holds the target `want` (as sets). */
static bool same_xcs(const struct sb_xc *have, size_t n_have, const struct sb_xc *want,
		     size_t n_want)
{
	struct sb_xc a[16], b[16];

	if (n_have != n_want || n_want > 16)
		return false;
	if (!n_want)
		return true;
	memcpy(a, have, n_have * sizeof(*a));
	memcpy(b, want, n_want * sizeof(*b));
	qsort(a, n_have, sizeof(*a), sb_xc_cmp);
	qsort(b, n_want, sizeof(*b), sb_xc_cmp);
	return !memcmp(a, b, n_want * sizeof(*a));
}

static struct sb_txn_result run_case_on(const struct fault_case *fc, struct sb_device **d, int n,
					int ff, int nf)
{
	struct sb_txn_device pd[16];
	struct sb_xc xcs[16][16], *pre[16] = {0}, *got[16] = {0};
	size_t n_pre[16] = {0}, n_got[16] = {0};
	int group[16], device[16];
	for (int i = 0; i < n; i++)
		set_faults(d[i], "");
	for (int i = 0; i < n; i++) {
		group[i] = i / 8;
		device[i] = i % 8;
		assert_int_equal(tl_read_running(d[i], &pre[i], &n_pre[i]), 0);
	}
	/* a target no faulted device holds already: a commit without effect
	 * must show (the targets repeat every few rounds, and which round a
	 * device last committed depends on the cases before) */
	for (bool held = true; held; round_no++) {
		held = false;
		for (int i = 0; i < n; i++) {
			pd[i] = (struct sb_txn_device){
				.dev = d[i],
				.target = xcs[i],
				.n_target = tl_fabric_device_xcs(&lab, group[i], device[i],
								 round_no, xcs[i], 16)};
			if (i >= ff && i < ff + nf)
				held |= same_xcs(pre[i], n_pre[i], xcs[i], pd[i].n_target);
		}
	}
	for (int i = ff; i < ff + nf; i++)
		set_faults(d[i], fc->spec);
	struct tl_verify_ctx v = {.fabric = &lab, .group = group, .device = device};
	struct sb_txn_hooks hooks = {.verify = tl_verify, .arg = &v};
	struct sb_txn_plan plan = {.id = (uint64_t)round_no, .devices = pd, .n_devices = (size_t)n};
	struct sb_txn_options opts = {
		.confirm_timeout_s = 20, .verify_timeout_ms = 1000, .connect_timeout_ms = 2000};
	struct sb_txn_result r;
	assert_int_equal(sb_engine_run(eng, &plan, &hooks, &opts, &r), 0);
	printf("  %-22s on %2d/%2d: %-11s %5lld ms %s\n", fc->spec, nf, n,
	       sb_txn_outcome_name(r.outcome), (long long)r.total_ms,
	       r.outcome == SB_TXN_COMMITTED ? "" : r.message);
	if (strstr(fc->spec, "hang@"))
		wait_stale_sessions(d, n);
	for (int i = 0; i < n; i++)
		set_faults(d[i], "");
	assert_int_not_equal(r.outcome, SB_TXN_FAILED);
	assert_int_not_equal(r.outcome, SB_TXN_REFUSED);
	if (fc->must_roll_back)
		assert_int_equal(r.outcome, SB_TXN_ROLLED_BACK);
	if (fc->must_retry) {
		assert_int_equal(r.outcome, SB_TXN_COMMITTED);
		for (int i = ff; i < ff + nf; i++)
			assert_true(r.devices[i].prepare_retried);
	}
	if (r.outcome == SB_TXN_ROLLED_BACK) {
		assert_true(r.n_failed_devices >= 1);
		assert_int_equal(r.n_rollback_failures, 0);
		/* the failure is reported against a faulted device (or the checker) */
		bool blamed = false;
		for (int i = 0; i < n; i++)
			if (r.devices[i].failed_step != SB_STEP_NONE)
				blamed |= (i >= ff && i < ff + nf);
		assert_true(blamed);
	}
	for (int i = 0; i < n; i++) {
		assert_int_equal(tl_read_running(d[i], &got[i], &n_got[i]), 0);
		if (r.outcome == SB_TXN_COMMITTED)
			assert_true(tl_same(got[i], n_got[i], pd[i].target, pd[i].n_target));
		else
			assert_true(tl_same(got[i], n_got[i], pre[i], n_pre[i]));
	}
	char why[256] = "";
	int bad = tl_l2_violations(&lab, group, device, (const struct sb_xc *const *)got, n_got,
				   (size_t)n, why, sizeof(why));
	if (bad)
		fprintf(stderr, "%s\n", why);
	assert_int_equal(bad, 0);
	for (int i = 0; i < n; i++) {
		free(pre[i]);
		free(got[i]);
	}
	return r;
}

/* Runs one case on devices [first, first+n), faulting devices [ff, ff+nf). */
static void run_case(const struct fault_case *fc, int first, int n, int ff, int nf)
{
	const char *only = getenv("SB_FAULT_ONLY"); /* debugging: run some knobs */
	if (only && !strstr(only, fc->spec))
		return;
	struct sb_txn_result r = run_case_on(fc, devs + first, n, ff - first, nf);
	sb_txn_result_clear(&r);
}

static const char *const steps[] = {"lock",   "discard", "get",	   "edit",  "validate",
				    "commit", "confirm", "unlock", "cancel"};
/* a session dropped at these prepare RPCs is retried once (R1) */
static bool retried(const char *action, const char *step)
{
	return !strcmp(action, "drop") &&
	       (!strcmp(step, "lock") || !strcmp(step, "edit") || !strcmp(step, "validate"));
}

/* steps whose failure necessarily breaks the transaction (discard, unlock
 * and cancel only run on rollback or after the confirm; a dropped session
 * at get may be retried, when the pre-image is read in prepare) */
static bool breaks(const char *action, const char *step)
{
	bool prepare_or_commit = strcmp(step, "confirm") && strcmp(step, "unlock") &&
				 strcmp(step, "cancel") && strcmp(step, "discard");
	if (retried(action, step) || (!strcmp(action, "drop") && !strcmp(step, "get")))
		return false;
	if (prepare_or_commit)
		return true;
	/* a failed confirm is final: only the committing session may confirm */
	return !strcmp(step, "confirm");
}

static void run_matrix(int first, int n, int ff, int nf)
{
	static const char *const actions[] = {"refuse", "drop", "hang"};
	char spec[64];
	for (size_t a = 0; a < 3; a++) {
		for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
			if (!strcmp(actions[a], "hang"))
				snprintf(spec, sizeof(spec), "hang@%s=%d", steps[s], HANG_MS);
			else
				snprintf(spec, sizeof(spec), "%s@%s", actions[a], steps[s]);
			struct fault_case fc = {spec, breaks(actions[a], steps[s]),
						retried(actions[a], steps[s])};
			run_case(&fc, first, n, ff, nf);
		}
	}
	struct fault_case extra[] = {{"noeffect@commit", true, false},
				     {"fail-port=0", true, false},
				     {"drop@lock+", true, false},
				     {"drop@edit+", true, false}};
	for (size_t i = 0; i < sizeof(extra) / sizeof(extra[0]); i++)
		run_case(&extra[i], first, n, ff, nf);
}

static void test_one_of_four(void **state)
{
	run_matrix(0, 4, 2, 1);
}

static void test_all_of_sixteen(void **state)
{
	run_matrix(4, 16, 4, 16);
}

/*
 * Issue 13: a device without :confirmed-commit (ocs-devsim
 * --no-confirmed-commit: the capability is not offered and a confirmed
 * commit is refused) in a transaction with confirmed-commit devices. It
 * commits plainly, so when another device fails after it committed (a
 * refused or dropped confirm, a commit without effect, a failed port) only
 * the compensating edit from its pre-image can undo it. Every case must end
 * ROLLED_BACK with every device read back at its pre-image (run_case_on)
 * and no one-way circuit, and without the engine's pre-image path the
 * device would keep the target. Faults on the device itself too. The
 * drop@lock case on it found a driver bug: when it reconnected (the
 * prepare retry), libnetconf2 loaded its feature set into the driver's
 * shared context, and the other devices' confirmed commits could no
 * longer be built ("session lost", the transaction rolled back); fixed in
 * sb_driver_new() by freezing the compiled context.
 */
static void test_no_confirmed_commit(void **state)
{
	struct sb_device *d[4] = {nocc[0], devs[1], devs[2], devs[3]};
	struct sb_error err = {0};
	assert_int_equal(sb_device_connect_until(d[0], sb_now_ms() + 3000, &err), 0);
	assert_false(sb_device_capabilities(d[0])->confirmed_commit);
	assert_int_equal(sb_device_strategy(d[0]), SB_STRATEGY_CANDIDATE);
	/* and a confirmed commit sent anyway is refused */
	assert_int_equal(sb_device_lock(d[0], SB_DS_CANDIDATE, &err), 0);
	assert_int_equal(sb_device_commit(d[0], 30, NULL, NULL, &err), -EREMOTEIO);
	assert_int_equal(sb_device_unlock(d[0], SB_DS_CANDIDATE, &err), 0);
	const struct fault_case later[] = {
		{"refuse@confirm", true, false},  {"drop@confirm", true, false},
		{"noeffect@commit", true, false}, {"fail-port=0", true, false},
		{"refuse@commit", true, false},
	};
	for (size_t k = 0; k < sizeof(later) / sizeof(later[0]); k++) {
		struct sb_txn_result r = run_case_on(&later[k], d, 4, 2, 1);
		assert_int_equal(r.outcome, SB_TXN_ROLLED_BACK);
		assert_int_equal(r.devices[0].strategy, SB_STRATEGY_CANDIDATE);
		assert_int_equal(r.devices[0].outcome, SB_DEV_ROLLED_BACK);
		sb_txn_result_clear(&r);
	}
	const struct fault_case own[] = {
		{"fail-port=0", true, false},
		{"refuse@commit", true, false},
		{"drop@commit", true, false},
		{"drop@lock", false, true},
	};
	for (size_t k = 0; k < sizeof(own) / sizeof(own[0]); k++) {
		struct sb_txn_result r = run_case_on(&own[k], d, 4, 0, 1);
		assert_int_equal(r.devices[0].strategy, SB_STRATEGY_CANDIDATE);
		sb_txn_result_clear(&r);
	}
	/* and without a fault it commits like the others */
	const struct fault_case none = {"", false, false};
	struct sb_txn_result r = run_case_on(&none, d, 4, 0, 0);
	assert_int_equal(r.outcome, SB_TXN_COMMITTED);
	sb_txn_result_clear(&r);
}

/*
 * A commit on the device without :confirmed-commit that answers only after
 * the driver gave up on it (hang@commit past the RPC deadline): the commit
 * still lands, on the stale session, when the hang ends: 4 s here, well
 * after the rollback's first read (about 1 s), even on a slow sanitizer run. The
 * rollback must not prove the pre-image before it lands; the stale session
 * holds the candidate lock until then. Issue 23 found the engine reading
 * running at once on a fresh session (the pre-image, at 1 s), calling the
 * device rolled back, and the late commit then putting the target in
 * running: outcome ROLLED_BACK, device at its target. The same on a
 * writable-running device's edit: test_sb_txn_polatis --hung-edit. Run with
 * --hung-commit (ctest test_sb_txn_faults_hung_commit, DISABLED until the
 * engine takes the lock before its proof, tests/README.md).
 */
static void test_no_confirmed_commit_hung_commit(void **state)
{
	struct sb_device *d[4] = {nocc[0], devs[1], devs[2], devs[3]};
	const struct fault_case hung = {"hang@commit=4000", true, false};
	struct sb_txn_result r = run_case_on(&hung, d, 4, 0, 1);
	assert_int_equal(r.devices[0].strategy, SB_STRATEGY_CANDIDATE);
	sb_txn_result_clear(&r);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_of_four),
		cmocka_unit_test(test_all_of_sixteen),
		cmocka_unit_test(test_no_confirmed_commit),
	};
	const struct CMUnitTest hung[] = {
		cmocka_unit_test(test_no_confirmed_commit_hung_commit),
	};
	if (argc > 1 && !strcmp(argv[1], "--hung-commit"))
		return cmocka_run_group_tests(hung, setup, teardown);
	return cmocka_run_group_tests(tests, setup, teardown);
}
