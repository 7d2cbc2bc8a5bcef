/*
 * test_gpu_swaps.c - GPU swaps on a rail-OCS fabric (daemon/watch/gpu_swaps.c) with
 * the real rail state, the real job manager and a real SQLite store, on a
 * fake transaction engine: txn_start keeps the change set until the test
 * says how it ended, and a confirmed one is stored and applied as txn_driver.c
 * does (st_intent_finish, fs_apply). The fabric: 6 servers of 4 GPUs, 3 per
 * OCS group, the last of each group a spare.
 *
 * After every swap an independent check reads the port map back from the
 * circuit table (rail_port_map_from_xcs, not gpu_swaps.c's bookkeeping): every
 * rail port joined to at most one GPU, no GPU on two ports, no faulty GPU
 * on a port the swap was for, and the jobs' GPUs are exactly the GPUs on
 * their ports. Checked: refusals change nothing (store rows, circuits, GPU
 * conditions); case 1 and case 2 move the jobs' GPUs and store the moves
 * with the outcome; a rolled-back swap changes nothing; a fault whose swap
 * is refused stays faulty and is swapped by the retry once a job released
 * its GPUs; a restart gives the jobs their moved GPUs back from the store;
 * a GPU marked faulty while the swap in flight moves a job onto it waits
 * for that swap, then is swapped out at once (no swap confirms onto a GPU
 * marked faulty).
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
#include "gpu_swaps.h"
#include "store.h"
#include "txn_driver.h"

static const char rail_json[] =
	"{\"ocsd-fabric:fabric\": {\"name\": \"rails\", \"rail-ocs\": {\"servers\": 6,"
	" \"rails\": 4, \"servers-per-ocs\": 3, \"spare-servers-per-ocs\": 1,"
	" \"devices\": {\"address\": \"127.0.0.1\", \"port-base\": 18600,"
	" \"password-file\": \"/etc/ocsd/device-password\", \"accept-any-host-key\": true}}}}";

struct fx {
	char dir[64], path[96];
	struct ocsd_config *cfg;
	struct st_store *store;
	struct fs_state *fs;
	struct devices *devs;
	struct rl_state *rl;
	struct jm *jm;
	struct rsw *rsw;
	/* the fake engine (swaps and jobs alike) */
	bool open;
	int64_t txn_id;
	struct ocs_xc *removals;
	size_t n_removals;
	struct st_circuit *additions;
	size_t n_additions;
	txn_done_fn done;
	void *done_arg;
	/* the last swap answer */
	int answers;
	struct err_info err;
	bool has_err;
	enum rail_swap_kind kind;
	int swapped_events, gpu_events;
	int landed_on_faulty; /* confirmed swaps that put a faulty GPU on a rail port */
};

static int fake_txn_start(void *ctx, const struct txn_change *c, txn_done_fn done, void *arg,
			  char *why, size_t why_len)
{
	struct fx *f = ctx;
	struct txn_outcome o = {.result = TXN_CONFIRMED, .message = ""};
	int rc;

	(void)why;
	(void)why_len;
	assert_false(f->open);
	if (c->n_removals + c->n_additions == 0) { /* a rail job: nothing on devices */
		done(arg, &o);
		return 0;
	}
	rc = c->kind_change
		     ? st_rail_intent_begin(f->store, c->removals, c->n_removals, c->additions,
					    c->n_additions, c->kind_change, 1, &f->txn_id)
		     : st_intent_begin(f->store, c->job_id, c->removals, c->n_removals,
				       c->additions, c->n_additions, NULL, 0, 1, &f->txn_id);
	assert_int_equal(rc, 0);
	f->removals = malloc((c->n_removals + 1) * sizeof(*f->removals));
	f->additions = malloc((c->n_additions + 1) * sizeof(*f->additions));
	memcpy(f->removals, c->removals, c->n_removals * sizeof(*f->removals));
	memcpy(f->additions, c->additions, c->n_additions * sizeof(*f->additions));
	f->n_removals = c->n_removals;
	f->n_additions = c->n_additions;
	f->done = done;
	f->done_arg = arg;
	f->open = true;
	return 0;
}

static void finish(struct fx *f, enum txn_result result)
{
	struct txn_outcome o = {.result = result,
				.txn_id = (uint64_t)f->txn_id,
				.message = result == TXN_CONFIRMED ? "" : "device said no",
				.finished_us = 9000,
				.engine_us = 1000};

	assert_true(f->open);
	assert_int_equal(st_intent_finish(f->store, f->txn_id,
					  result == TXN_CONFIRMED ? ST_INTENT_CONFIRMED
								  : ST_INTENT_ROLLED_BACK,
					  "", 2),
			 0);
	if (result == TXN_CONFIRMED)
		assert_int_equal(
			fs_apply(f->fs, f->removals, f->n_removals, f->additions, f->n_additions),
			0);
	f->open = false;
	free(f->removals);
	free(f->additions);
	f->removals = NULL;
	f->additions = NULL;
	f->done(f->done_arg, &o);
}

static int no_plans(void *ctx, struct pool_task *t)
{
	(void)ctx;
	(void)t;
	fail_msg("a rail job was planned");
	return -EINVAL;
}

static void on_swap(void *ctx, const struct err_info *err, const struct gsw_report *rep)
{
	struct fx *f = ctx;

	f->answers++;
	f->has_err = err != NULL;
	if (err)
		f->err = *err;
	f->kind = rep ? rep->res->kind : RAIL_SWAP_NONE;
}

static void ev_swapped(void *ctx, const struct gsw_report *rep)
{
	struct fx *f = ctx;

	f->swapped_events++;
	for (size_t i = 0; i < rep->n_moves; i++)
		if (rep->moves[i].new_gpu >= 0 && rl_faulty(f->rl, rep->moves[i].new_gpu))
			f->landed_on_faulty++;
}

static void ev_gpu(void *ctx, int64_t gpu, bool faulty, const char *source)
{
	(void)gpu;
	(void)faulty;
	(void)source;
	((struct fx *)ctx)->gpu_events++;
}

static void on_job_answer(void *ctx, const struct err_info *err, const struct jm_job *job,
			  bool created, const struct ocs_xc *xcs, size_t n)
{
	(void)ctx;
	(void)created;
	(void)xcs;
	(void)n;
	assert_null(err);
	assert_int_equal(job->state, JM_ACTIVE);
}

static void on_job_released(void *ctx, const struct err_info *err, const struct jm_job *job,
			    bool created, const struct ocs_xc *xcs, size_t n)
{
	(void)ctx;
	(void)created;
	(void)xcs;
	(void)n;
	assert_null(err);
	assert_int_equal(job->state, JM_RELEASED);
}

static void open_all(struct fx *f)
{
	struct jm_deps jd = {.cfg = f->cfg,
			     .store = f->store,
			     .fs = f->fs,
			     .plan_submit = no_plans,
			     .txn_start = fake_txn_start,
			     .txn_ctx = f,
			     .devs = f->devs,
			     .gpus_check = rl_check_job_gpus,
			     .gpus_check_ctx = f->rl};
	struct gsw_deps sd = {.cfg = f->cfg,
			      .store = f->store,
			      .fs = f->fs,
			      .rl = f->rl,
			      .devs = f->devs,
			      .txn_start = fake_txn_start,
			      .txn_ctx = f,
			      .events = {f, ev_swapped, ev_gpu}};
	char err[256];

	assert_int_equal(jm_new(&jd, &f->jm, err, sizeof(err)), 0);
	f->rsw = gsw_new(&sd);
	assert_non_null(f->rsw);
	gsw_attach(f->rsw, f->jm);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct cfg_errors errs = {0};
	const char *names[2];
	char err[256];

	snprintf(f->dir, sizeof(f->dir), "/tmp/ocsd-gpu-swaps-XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->path, sizeof(f->path), "%s/state.db", f->dir);
	if (cfg_load_mem(rail_json, strlen(rail_json), &f->cfg, &errs) != 0 ||
	    st_open(f->path, &f->store, err, sizeof(err)) != 0)
		return -1;
	f->fs = fs_new(&f->cfg->fabric);
	f->rl = rl_new(&f->cfg->rail);
	for (int i = 0; i < 2; i++)
		names[i] = f->cfg->devices[i].name;
	f->devs = dev_new(&(struct dev_deps){&f->cfg->fabric, f->fs, f->store, names, 2, 1000, 0});
	if (!f->fs || !f->rl || !f->devs)
		return -1;
	open_all(f);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	char cmd[128];

	gsw_free(f->rsw);
	jm_free(f->jm);
	free(f->removals);
	free(f->additions);
	dev_free(f->devs);
	rl_free(f->rl);
	fs_free(f->fs);
	st_close(f->store);
	cfg_free(f->cfg);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	if (system(cmd) != 0)
		return -1;
	free(f);
	return 0;
}

/* The initial map, stored as an adopted intent (gsw_start then finds it). */
static void store_initial_map(struct fx *f)
{
	struct rail_port_map m = {0};
	struct ocs_xc *xcs = NULL;
	struct st_circuit *adds;
	size_t n = 0;
	int64_t txn;

	assert_int_equal(rail_port_map_init(&m, &f->cfg->rail), 0);
	assert_int_equal(rail_port_map_xcs(&f->cfg->rail, &m, &xcs, &n), 0);
	rail_port_map_clear(&m);
	adds = calloc(n, sizeof(*adds));
	for (size_t i = 0; i < n; i++) {
		adds[i].xc = xcs[i];
		snprintf(adds[i].job_id, sizeof(adds[i].job_id), "%s", ST_RAIL_OWNER);
	}
	assert_int_equal(
		st_intent_begin(f->store, ST_RAIL_OWNER, NULL, 0, adds, n, NULL, 0, 1, &txn), 0);
	assert_int_equal(st_intent_finish(f->store, txn, ST_INTENT_CONFIRMED, "", 1), 0);
	assert_int_equal(fs_apply(f->fs, NULL, 0, adds, n), 0);
	free(adds);
	free(xcs);
	assert_int_equal(gsw_start(f->rsw), 0);
	assert_true(gsw_ready(f->rsw, NULL));
}

static void submit(struct fx *f, const char *id, const int64_t *gpus, size_t n)
{
	struct jm_spec s = {.id = id,
			    .rail = true,
			    .raw = id,
			    .raw_len = strlen(id),
			    .gpus = gpus,
			    .n_gpus = n};

	jm_submit(f->jm, &s, on_job_answer, f);
	assert_int_equal(jm_find(f->jm, id)->state, JM_ACTIVE);
}

static long rows(struct fx *f, const char *sql)
{
	sqlite3 *db;
	sqlite3_stmt *s;
	long v;

	assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(s), SQLITE_ROW);
	v = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	sqlite3_close(db);
	return v;
}

/*
 * The independent check: the map as the circuit table says, each port on
 * at most one GPU and each GPU on at most one port, `out` (an array of
 * 16 ports) filled; every live job's GPUs are on ports.
 */
static void check_map(struct fx *f, int64_t *out)
{
	struct rail_port_map m = {0};
	struct ocs_xc xcs[64];
	size_t k = 0;
	int on_port[24] = {0};

	for (size_t i = 0; i < fs_count(f->fs); i++) {
		assert_string_equal(fs_at(f->fs, i)->job_id, ST_RAIL_OWNER);
		xcs[k++] = fs_at(f->fs, i)->xc;
	}
	assert_int_equal(rail_check_xcs(&f->cfg->rail, xcs, k, NULL, 0), 0);
	assert_int_equal(rail_port_map_init(&m, &f->cfg->rail), 0);
	assert_int_equal(rail_port_map_from_xcs(&f->cfg->rail, xcs, k, &m), 0);
	for (int64_t p = 0; p < m.n_ports; p++) {
		out[p] = m.gpu[p];
		if (m.gpu[p] >= 0)
			assert_int_equal(++on_port[m.gpu[p]], 1);
	}
	rail_port_map_clear(&m);
	for (size_t i = 0; i < jm_count(f->jm); i++) {
		const struct jm_job *j = jm_at(f->jm, i);

		if (j->state != JM_ACTIVE)
			continue;
		for (size_t g = 0; g < j->n_gpus; g++)
			assert_int_equal(on_port[j->gpus[g]], 1);
	}
}

static void check_gpus(struct fx *f, const char *id, const int64_t *want, size_t n)
{
	const struct jm_job *j = jm_find(f->jm, id);

	assert_non_null(j);
	assert_int_equal(j->n_gpus, n);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(j->gpus[i], want[i]);
}

static void test_swaps(void **state)
{
	struct fx *f = *state;
	static const int64_t a[] = {0, 1, 2}, b[] = {4, 5, 6, 7};
	int64_t map[16], before[16];
	long intents;

	store_initial_map(f);
	check_map(f, map);
	submit(f, "a", a, 3);
	submit(f, "b", b, 4);

	/* case 1: idle GPU 3 takes rail port 1 */
	gsw_replace(f->rsw, 1, "scheduler", on_swap, f);
	assert_int_equal(f->answers, 0); /* waits for the devices */
	finish(f, TXN_CONFIRMED);
	assert_int_equal(f->answers, 1);
	assert_false(f->has_err);
	assert_int_equal(f->kind, RAIL_SWAP_IDLE_GPU);
	check_map(f, map);
	assert_int_equal(map[1], 3);
	assert_int_equal(map[3], -1);
	assert_true(rl_faulty(f->rl, 1));
	check_gpus(f, "a", (const int64_t[]){0, 3, 2}, 3);

	/* case 2: server 1 onto spare server 2, the moves stored with the outcome */
	gsw_replace(f->rsw, 6, "scheduler", on_swap, f);
	finish(f, TXN_CONFIRMED);
	assert_int_equal(f->kind, RAIL_SWAP_SPARE_SERVER);
	check_map(f, map);
	check_gpus(f, "b", (const int64_t[]){8, 9, 10, 11}, 4);
	assert_int_equal(rows(f, "SELECT COUNT(*) FROM rail_job_moves WHERE job_id = 'b'"), 4);
	assert_int_equal(f->swapped_events, 2);

	/* a refusal changes nothing */
	memcpy(before, map, sizeof(map));
	intents = rows(f, "SELECT COUNT(*) FROM intents");
	gsw_replace(f->rsw, 0, "scheduler", on_swap, f);
	assert_false(f->open);
	assert_true(f->has_err);
	assert_int_equal(f->err.status, ERR_EXHAUSTED);
	assert_non_null(strstr(f->err.message, "no idle GPU in server 0"));
	assert_false(rl_faulty(f->rl, 0));
	assert_int_equal(rows(f, "SELECT COUNT(*) FROM intents"), intents);
	assert_int_equal(rows(f, "SELECT COUNT(*) FROM rail_gpu_faults"), 2);
	check_map(f, map);
	assert_memory_equal(map, before, sizeof(map));

	/* rolled back: nothing changes, the GPU stays healthy */
	gsw_replace(f->rsw, 13, "scheduler", on_swap, f);
	finish(f, TXN_ROLLED_BACK);
	assert_true(f->has_err);
	assert_int_equal(f->err.status, ERR_UNAVAILABLE);
	assert_false(rl_faulty(f->rl, 13));
	check_map(f, map);
	assert_memory_equal(map, before, sizeof(map));

	/* a fault refused stays faulty on its port; the retry swaps it once a is gone */
	gsw_mark(f->rsw, 0, true, "device", 0, on_swap, f);
	assert_false(f->has_err);
	assert_int_equal(f->kind, RAIL_SWAP_REFUSED);
	assert_true(rl_faulty(f->rl, 0));
	assert_int_equal(rl_gpu_port(f->rl, 0), 0);
	gsw_retry(f->rsw);
	assert_false(f->open); /* still no way */
	jm_release(f->jm, "a", on_job_released, f);
	gsw_retry(f->rsw);
	assert_true(f->open); /* a's GPUs 2 and 3 of server 0 are idle now: case 1 */
	finish(f, TXN_CONFIRMED);
	check_map(f, map);
	assert_int_equal(rl_gpu_port(f->rl, 0), RAIL_NONE);
	assert_true(map[0] == 2 || map[0] == 3);

	/* a restart: the jobs' moved GPUs come back from the store */
	gsw_free(f->rsw);
	jm_free(f->jm);
	rl_free(f->rl);
	f->rl = rl_new(&f->cfg->rail);
	open_all(f);
	assert_int_equal(jm_set_gpus(f->jm, "b", b, 4), 0); /* as api_restore_jobs does */
	assert_int_equal(gsw_start(f->rsw), 0);
	assert_int_equal(jm_recover(f->jm), 0);
	check_gpus(f, "b", (const int64_t[]){8, 9, 10, 11}, 4);
	assert_true(rl_faulty(f->rl, 0) && rl_faulty(f->rl, 1) && rl_faulty(f->rl, 6));
	check_map(f, map);
}

/*
 * A GPU marked faulty while the swap in flight moves a job onto it: the
 * swap never confirms onto a GPU already marked faulty on the loop; the
 * mark waits for it, then the GPU is swapped out at once (not a second
 * later by the retry). Case 1 (idle GPU 7 of server 1, then spare server
 * 2 takes over) and case 2 (spare server 5's GPU 21, whose own swap has
 * no way left: refused, it stays faulty on its port as any refused fault).
 */
static void test_mark_during_swap(void **state)
{
	struct fx *f = *state;
	static const int64_t b[] = {4, 5, 6}, c[] = {12, 13, 14, 15};
	int64_t map[16];

	store_initial_map(f);
	submit(f, "b", b, 3);
	gsw_replace(f->rsw, 6, "scheduler", on_swap, f); /* case 1: idle GPU 7 */
	assert_true(f->open);
	gsw_mark(f->rsw, 7, true, "operator", 0, on_swap, f);
	finish(f, TXN_CONFIRMED);
	assert_int_equal(f->landed_on_faulty, 0);
	assert_int_equal(f->answers, 1); /* ReplaceGpu's; MarkGpu's waits for its swap */
	check_gpus(f, "b", (const int64_t[]){4, 5, 7}, 3);
	assert_true(rl_faulty(f->rl, 7));
	assert_true(f->open); /* GPU 7's swap, right away */
	finish(f, TXN_CONFIRMED);
	assert_int_equal(f->answers, 2);
	assert_false(f->has_err);
	assert_int_equal(f->kind, RAIL_SWAP_SPARE_SERVER);
	assert_int_equal(f->landed_on_faulty, 0);
	check_map(f, map);
	for (int64_t p = 0; p < 16; p++)
		assert_true(map[p] < 0 || !rl_faulty(f->rl, map[p]));
	check_gpus(f, "b", (const int64_t[]){8, 9, 10}, 3);

	submit(f, "c", c, 4);
	gsw_replace(f->rsw, 14, "scheduler", on_swap, f); /* case 2: spare server 5 */
	assert_true(f->open);
	gsw_mark(f->rsw, 21, true, "device", 0, on_swap, f);
	assert_false(rl_faulty(f->rl, 21));
	finish(f, TXN_CONFIRMED);
	assert_int_equal(f->landed_on_faulty, 0);
	assert_int_equal(f->answers, 4);
	assert_int_equal(f->kind, RAIL_SWAP_REFUSED);
	assert_true(rl_faulty(f->rl, 21));
	assert_false(f->open);
	check_gpus(f, "c", (const int64_t[]){20, 21, 22, 23}, 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_swaps, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mark_during_swap, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
