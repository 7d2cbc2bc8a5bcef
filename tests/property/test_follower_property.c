/*
 * test_follower_property.c - issue 31: a follower's view kept up to date by
 * the changes it receives (daemon/follower.c applies each touched circuit
 * and job) equals a view built whole from the same store contents, after
 * every step of random change sequences.
 *
 * A leader store (SQLite in memory, replicated through store_repl.h's
 * publish hook) sends each write's changeset to the follower's copy
 * (st_apply_changeset), as the etcd backend does once its log entry is
 * stored. Each step writes a random batch: jobs submitted (real JobSpec
 * requests on the lab fabric, some with an idempotency key, some whose
 * request the API cannot use), state changes, jobs stored again with a new
 * request, plan figures (valid and garbage), transactions that add and
 * remove circuits, retention deleting finished jobs, and now and then a
 * drain (which the follower answers with a rebuild). Then the follower
 * refreshes, and the oracle is independent of it: the copy's image
 * (st_image_save) loaded into a third store, and a new follower view built
 * whole there (fw_new). Compared: every circuit with its owner, and every
 * job in table order: id, key, state, reason, times, request bytes,
 * figures, planner, decoded demand and GPUs, and the counts per state.
 * The incremental path must have been taken on most steps (fw_counts).
 *
 * usage: test_follower_property FABRIC_JSON [INSTANCES [SEED]]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "config.h"
#include "fabric_state.h"
#include "follower.h"
#include "jobs.h"
#include "jobs_util.h"
#include "loop.h"
#include "metrics.h"
#include "ocs/v1/jobs.pb-c.h"
#include "store.h"
#include "repl_loopback.h"
#include "store_repl.h"

#define STEPS	      40
#define LEAVES	      8 /* the lab fabric: 8 leaves, 2 per pod, 8 GPUs each */
#define GPUS_PER_LEAF 8

static unsigned long long rng_state;

static unsigned rnd(unsigned n)
{
	rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
	return (unsigned)((rng_state >> 33) % n);
}

static int failures;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                       \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			failures++;                                                                \
		}                                                                                  \
	} while (0)

/* ---- random writes ---- */

static const char *const states[] = {"PENDING",	  "PLANNING", "PROGRAMMING", "ACTIVE",
				     "RELEASING", "RELEASED", "FAILED"};

struct world {
	struct st_store *leader;
	int n_jobs; /* ids j0 .. j<n_jobs-1> were made (some deleted since) */
	int64_t now;
};

/* A JobSpec for job id: GPUs on two leaves of different pods, one leaf pair. */
static void *job_request(const char *id, bool usable, size_t *len)
{
	Ocs__V1__JobSpec spec = OCS__V1__JOB_SPEC__INIT;
	Ocs__V1__Placement pl = OCS__V1__PLACEMENT__INIT;
	Ocs__V1__LeafDemand ld = OCS__V1__LEAF_DEMAND__INIT;
	Ocs__V1__LeafPair pair = OCS__V1__LEAF_PAIR__INIT, *pairs[1] = {&pair};
	Ocs__V1__GpuPlacement g[4], *gp[4];
	int a = (int)rnd(LEAVES), b = (a + 2 + 2 * (int)rnd(LEAVES / 2 - 1)) % LEAVES;
	void *buf;

	for (int i = 0; i < 4; i++) {
		int leaf = i < 2 ? a : b;

		ocs__v1__gpu_placement__init(&g[i]);
		g[i].gpu = GPUS_PER_LEAF * leaf + (int)rnd(GPUS_PER_LEAF);
		g[i].leaf = leaf;
		g[i].pod = leaf / 2;
		gp[i] = &g[i];
	}
	pl.n_gpus = 4;
	pl.gpus = gp;
	pair.a = a;
	pair.b = usable ? b : LEAVES + 5; /* a leaf the fabric lacks: refused */
	pair.links = 1 + (int)rnd(2);
	ld.n_pairs = 1;
	ld.pairs = pairs;
	spec.id = (char *)id;
	spec.placement = &pl;
	spec.demand_case = OCS__V1__JOB_SPEC__DEMAND_LEAF_DEMAND;
	spec.leaf_demand = &ld;
	*len = ocs__v1__job_spec__get_packed_size(&spec);
	buf = malloc(*len ? *len : 1);
	if (buf)
		ocs__v1__job_spec__pack(&spec, buf);
	return buf;
}

static void put_job(struct world *w, int k)
{
	char id[32], key[32];
	size_t len = 0;
	void *req;
	struct st_job job;

	snprintf(id, sizeof(id), "j%d", k);
	snprintf(key, sizeof(key), "key-%d", k);
	req = job_request(id, rnd(8) != 0, &len);
	job = (struct st_job){.id = id,
			      .idempotency_key = rnd(3) == 0 ? key : NULL,
			      .state = (char *)states[rnd(7)],
			      .reason = rnd(2) ? "a reason" : NULL,
			      .request = req,
			      .request_len = len,
			      .created_ms = w->now,
			      .updated_ms = w->now};
	CHECK(st_job_put(w->leader, &job) == 0, "st_job_put %s", id);
	free(req);
}

static void random_circuits(struct world *w, const struct ocs_fabric *f, struct st_store *copy)
{
	struct ocs_xc rem[4];
	struct st_circuit add[4];
	size_t n_rem = 0, n_add = 0;
	int64_t txn = 0;
	int n_dev = ocs_fabric_devices(f);
	char job[32];
	struct fs_state *now = fs_new(f);

	if (!now || fs_load(now, copy) != 0) {
		fs_free(now);
		return;
	}
	snprintf(job, sizeof(job), "j%d", w->n_jobs ? (int)rnd((unsigned)w->n_jobs) : 0);
	for (size_t i = 0; i < fs_count(now) && n_rem < 4; i++)
		if (rnd(4) == 0)
			rem[n_rem++] = fs_at(now, i)->xc;
	for (int tries = 0; tries < 8 && n_add < 4; tries++) {
		int d = (int)rnd((unsigned)n_dev);
		struct ocs_xc x = {ocs_fabric_device_group(f, d), ocs_fabric_device_in_group(f, d),
				   (int)rnd(8), (int)rnd(8)};
		bool taken = false;

		for (size_t i = 0; i < fs_count(now) && !taken; i++)
			taken = !ocs_xc_cmp_in(&fs_at(now, i)->xc, &x);
		for (size_t i = 0; i < n_add && !taken; i++)
			taken = !ocs_xc_cmp_in(&add[i].xc, &x);
		for (size_t i = 0; i < n_rem && !taken; i++)
			taken = !ocs_xc_cmp_in(&rem[i], &x);
		if (taken)
			continue;
		add[n_add].xc = x;
		snprintf(add[n_add].job_id, sizeof(add[n_add].job_id), "%s", job);
		n_add++;
	}
	fs_free(now);
	if (st_intent_begin(w->leader, job, rem, n_rem, add, n_add, NULL, 0, w->now, &txn) == 0)
		CHECK(st_intent_finish(w->leader, txn,
				       rnd(4) ? ST_INTENT_CONFIRMED : ST_INTENT_ROLLED_BACK, "",
				       w->now) == 0,
		      "st_intent_finish");
}

static void random_write(struct world *w, const struct ocsd_config *cfg, struct st_store *copy)
{
	char id[32];
	int k = w->n_jobs ? (int)rnd((unsigned)w->n_jobs) : 0;
	unsigned what = rnd(100);

	snprintf(id, sizeof(id), "j%d", k);
	w->now += 1 + rnd(1000);
	if (what < 25 || !w->n_jobs) {
		put_job(w, w->n_jobs++);
	} else if (what < 45) {
		(void)st_job_set_state(w->leader, id, states[rnd(7)], rnd(2) ? "changed" : NULL,
				       w->now);
	} else if (what < 52) {
		put_job(w, k); /* stored again: a new request, state, key */
	} else if (what < 62) {
		struct jm_figures fig = {0};
		char *text;

		fig.max_contention = rnd(100) / 10.0;
		text = rnd(5) ? jm_figures_encode(&fig) : strdup("not figures");
		if (text)
			(void)st_figures_put(w->leader, id, text);
		free(text);
	} else if (what < 92) {
		random_circuits(w, &cfg->fabric, copy);
	} else if (what < 96) {
		size_t n = 0;

		(void)st_prune(w->leader, w->now, rnd(3000), rnd(4), 1 + rnd(3), &n, NULL, NULL);
	} else {
		(void)st_drain_set(w->leader, cfg->devices[rnd((unsigned)cfg->n_devices)].name,
				   rnd(2));
	}
}

/* ---- the comparison ---- */

static void compare_jobs(const struct jm *a, const struct jm *b, int step)
{
	CHECK(jm_count(a) == jm_count(b), "step %d: %zu jobs applied, %zu rebuilt", step,
	      jm_count(a), jm_count(b));
	for (int s = JM_PENDING; s <= JM_FAILED; s++)
		CHECK(jm_count_state(a, s) == jm_count_state(b, s), "step %d: state %d: %zu / %zu",
		      step, s, jm_count_state(a, s), jm_count_state(b, s));
	for (size_t i = 0; i < jm_count(a) && i < jm_count(b); i++) {
		const struct jm_job *x = jm_at(a, i), *y = jm_at(b, i);
		char *fx = jm_figures_encode(&x->figures), *fy = jm_figures_encode(&y->figures);

		CHECK(!strcmp(x->id, y->id), "step %d: job %zu is %s applied, %s rebuilt", step, i,
		      x->id, y->id);
		CHECK(!strcmp(x->key, y->key) && x->state == y->state &&
			      !strcmp(x->reason, y->reason) && x->created_ms == y->created_ms &&
			      x->updated_ms == y->updated_ms,
		      "step %d: job %s: key/state/reason/times differ (%d \"%s\" / %d \"%s\")",
		      step, x->id, x->state, x->reason, y->state, y->reason);
		CHECK(x->raw_len == y->raw_len &&
			      (!x->raw_len || !memcmp(x->raw, y->raw, x->raw_len)),
		      "step %d: job %s: request differs", step, x->id);
		CHECK(fx && fy && !strcmp(fx, fy), "step %d: job %s: figures differ", step, x->id);
		CHECK(!strcmp(x->planner, y->planner) && x->n_demand == y->n_demand &&
			      (!x->n_demand ||
			       !memcmp(x->demand, y->demand, x->n_demand * sizeof(*x->demand))),
		      "step %d: job %s: decoded demand differs", step, x->id);
		CHECK(x->n_gpus == y->n_gpus &&
			      (!x->n_gpus ||
			       !memcmp(x->gpus, y->gpus, x->n_gpus * sizeof(*x->gpus))),
		      "step %d: job %s: GPUs differ", step, x->id);
		CHECK(jm_find(a, x->id) == x, "step %d: job %s: not found by id", step, x->id);
		free(fx);
		free(fy);
	}
}

static void compare_circuits(const struct fs_state *a, const struct fs_state *b, int step)
{
	CHECK(fs_count(a) == fs_count(b), "step %d: %zu circuits applied, %zu rebuilt", step,
	      fs_count(a), fs_count(b));
	for (size_t i = 0; i < fs_count(a) && i < fs_count(b); i++)
		CHECK(!ocs_xc_cmp_in_out(&fs_at(a, i)->xc, &fs_at(b, i)->xc) &&
			      !strcmp(fs_at(a, i)->job_id, fs_at(b, i)->job_id),
		      "step %d: circuit %zu differs", step, i);
}

/* A follower view built whole on a store holding the copy's image. */
static void rebuilt_view(const struct ocsd_config *cfg, struct loop *loop, struct st_store *copy,
			 int step, const struct fw *applied, struct api *api_applied)
{
	struct st_store *oracle = NULL;
	struct mx_registry *reg = mx_registry_new();
	struct api_deps ad = {.cfg = cfg, .loop = loop, .reg = reg, .version = "t", .store = "t"};
	struct api *api = api_new(&ad);
	struct fw *fw = NULL;
	struct fw_parts pa, pb;
	void *image = NULL;
	size_t len = 0;
	char err[256];

	(void)api_applied;
	CHECK(api && reg, "api_new");
	CHECK(st_image_save(copy, &image, &len) == 0, "st_image_save");
	CHECK(st_open_memory(&oracle, err, sizeof(err)) == 0, "st_open_memory: %s", err);
	CHECK(st_image_load(oracle, image, len, err, sizeof(err)) == 0, "st_image_load: %s", err);
	st_image_free(image);
	CHECK(fw_new(&(struct fw_deps){cfg, oracle, NULL, loop, api}, &fw) == 0, "fw_new (oracle)");
	if (fw) {
		fw_parts(applied, &pa);
		fw_parts(fw, &pb);
		compare_circuits(pa.fs, pb.fs, step);
		compare_jobs(fw_jm((struct fw *)applied), fw_jm(fw), step);
	}
	fw_free(fw);
	api_free(api);
	mx_registry_free(reg);
	st_close(oracle);
}

static void instance(const struct ocsd_config *cfg, struct loop *loop)
{
	struct st_store *copy = NULL;
	struct mx_registry *reg = mx_registry_new();
	struct api_deps ad = {.cfg = cfg, .loop = loop, .reg = reg, .version = "t", .store = "t"};
	struct api *api = api_new(&ad);
	struct world w = {0};
	struct fw *fw = NULL;
	unsigned long applied = 0, rebuilt = 0;
	char err[256];

	w.now = 1000;
	CHECK(st_open_memory(&w.leader, err, sizeof(err)) == 0, "leader: %s", err);
	CHECK(st_open_memory(&copy, err, sizeof(err)) == 0, "copy: %s", err);
	repl_loopback(w.leader, copy);
	for (int i = 0; i < 3; i++)
		random_write(&w, cfg, copy);
	CHECK(fw_new(&(struct fw_deps){cfg, copy, NULL, loop, api}, &fw) == 0, "fw_new");
	for (int step = 0; fw && step < STEPS && failures == 0; step++) {
		int batch = 1 + (int)rnd(6);

		for (int i = 0; i < batch; i++)
			random_write(&w, cfg, copy);
		fw_refresh(fw);
		rebuilt_view(cfg, loop, copy, step, fw, api);
	}
	if (fw)
		fw_counts(fw, &applied, &rebuilt);
	CHECK(applied > STEPS / 2, "the change was applied on %lu of %d steps (rebuilt %lu)",
	      applied, STEPS, rebuilt);
	fw_free(fw);
	api_free(api);
	mx_registry_free(reg);
	st_close(w.leader);
	st_close(copy);
}

int main(int argc, char **argv)
{
	struct ocsd_config *cfg = NULL;
	struct cfg_errors errs = {0};
	struct loop *loop;
	int instances = argc > 2 ? atoi(argv[2]) : 15;
	unsigned long long seed = argc > 3 ? strtoull(argv[3], NULL, 10) : 31;

	if (argc < 2 || cfg_load_file(argv[1], &cfg, &errs) != 0) {
		fprintf(stderr, "usage: test_follower_property FABRIC_JSON [INSTANCES [SEED]]\n");
		cfg_errors_clear(&errs);
		return 2;
	}
	loop = loop_new();
	for (int i = 0; i < instances && failures == 0 && loop; i++) {
		rng_state = seed * 1000003ULL + (unsigned long long)i;
		instance(cfg, loop);
		if (failures)
			fprintf(stderr, "instance %d (seed %llu) failed\n", i, seed);
	}
	loop_free(loop);
	cfg_free(cfg);
	printf("test_follower_property: %d instances of %d steps, seed %llu: %s\n", instances,
	       STEPS, seed, failures ? "FAILED" : "passed");
	return failures ? 1 : 0;
}
