/*
 * test_nb_validate_random.c - property tests of the northbound's request
 * validation (nb_validate_request): random leaf-demand jobs near every
 * boundary and random ring requests on random ring domains, each checked
 * against an independent checker written here from the rules in
 * northbound/README.md. The validator must accept exactly what the
 * checker accepts, and name a field when it refuses. (The table-driven
 * cases are in test_nb_validate.c.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nb.h"

/*
 * Random jobs near every boundary: the validator must accept exactly the
 * jobs an independent checker (written here from the rules in
 * northbound/README.md) accepts, and name a field when it refuses.
 * Small fabric: 2 pods x 2 leaves x 4 GPUs, leaf_links_max 4.
 */
struct small_job {
	Ocs__V1__JobSpec job;
	Ocs__V1__Placement placement;
	Ocs__V1__GpuPlacement gpu[8];
	Ocs__V1__GpuPlacement *gpu_ptr[8];
	Ocs__V1__LeafDemand demand;
	Ocs__V1__LeafPair pair[6];
	Ocs__V1__LeafPair *pair_ptr[6];
};

static int pick(int lo, int hi) /* inclusive */
{
	return lo + (int)(lrand48() % (hi - lo + 1));
}

/* A valid job, then (half the time) one or two random breakages. */
static void random_job(struct small_job *j)
{
	int leaves[4], n_leaves = 0;

	memset(j, 0, sizeof(*j));
	ocs__v1__job_spec__init(&j->job);
	ocs__v1__placement__init(&j->placement);
	ocs__v1__leaf_demand__init(&j->demand);
	j->job.id = "r";
	j->job.placement = &j->placement;
	j->placement.gpus = j->gpu_ptr;
	j->placement.n_gpus = (size_t)pick(1, 8);
	for (size_t i = 0; i < 8; i++) {
		int gpu = (int)((i * 2 + (size_t)pick(0, 1)) % 16); /* distinct in the first 8 */

		ocs__v1__gpu_placement__init(&j->gpu[i]);
		j->gpu_ptr[i] = &j->gpu[i];
		j->gpu[i].gpu = gpu;
		j->gpu[i].leaf = gpu / 4;
		j->gpu[i].pod = gpu / 8;
	}
	for (size_t i = 0; i < j->placement.n_gpus; i++) {
		bool seen = false;

		for (int k = 0; k < n_leaves; k++)
			seen |= leaves[k] == j->gpu[i].leaf;
		if (!seen)
			leaves[n_leaves++] = j->gpu[i].leaf;
	}
	j->job.demand_case = OCS__V1__JOB_SPEC__DEMAND_LEAF_DEMAND;
	j->job.leaf_demand = &j->demand;
	j->demand.pairs = j->pair_ptr;
	for (size_t i = 0; i < 6; i++) {
		ocs__v1__leaf_pair__init(&j->pair[i]);
		j->pair_ptr[i] = &j->pair[i];
	}
	/* every pair of used leaves once, 1 link each (at most 3 per leaf) */
	for (int x = 0; x < n_leaves; x++)
		for (int y = x + 1; y < n_leaves; y++) {
			Ocs__V1__LeafPair *q = &j->pair[j->demand.n_pairs++];

			q->a = lrand48() % 2 ? leaves[x] : leaves[y];
			q->b = q->a == leaves[x] ? leaves[y] : leaves[x];
			q->links = 1;
		}
	if (j->demand.n_pairs == 0) { /* one leaf only: no pair possible */
		j->demand.n_pairs = 1;
		j->pair[0].a = leaves[0];
		j->pair[0].b = (leaves[0] + 1) % 4;
		j->pair[0].links = 1;
		return; /* invalid: the other leaf holds no GPU (unless broken more) */
	}
	for (int breakages = lrand48() % 2 ? pick(1, 2) : 0; breakages > 0; breakages--) {
		size_t g = j->placement.n_gpus ? (size_t)pick(0, (int)j->placement.n_gpus - 1) : 0;
		size_t q = j->demand.n_pairs ? (size_t)pick(0, (int)j->demand.n_pairs - 1) : 0;

		switch (pick(0, 12)) {
		case 0:
			j->gpu[g].gpu = lrand48() % 2 ? -1 : 16;
			break;
		case 1:
			j->gpu[g].leaf = pick(-1, 4);
			break;
		case 2:
			j->gpu[g].pod = pick(-1, 2);
			break;
		case 3:
			if (g > 0)
				j->gpu[g] = j->gpu[g - 1];
			break;
		case 4:
			j->placement.n_gpus = 0;
			break;
		case 5:
			j->job.demand_case = OCS__V1__JOB_SPEC__DEMAND__NOT_SET;
			break;
		case 6:
			j->demand.n_pairs = 0;
			break;
		case 7:
			j->pair[q].a = pick(-1, 4);
			break;
		case 8:
			j->pair[q].b = j->pair[q].a;
			break;
		case 9:
			j->pair[q].links = pick(-1, 5);
			break;
		case 10:
			if (j->demand.n_pairs < 6) {
				j->pair[j->demand.n_pairs] = j->pair[q];
				j->demand.n_pairs++;
			}
			break;
		case 11:
			j->pair[q].links = pick(2, 4); /* may exceed a leaf's 4 links */
			break;
		default:
			j->placement.n_gpus = (size_t)pick(1, 8); /* leaves may vanish */
			break;
		}
	}
}

/* The rules, checked naively (quadratic loops, no early structure). */
static bool independent_ok(const struct small_job *j)
{
	const Ocs__V1__Placement *p = &j->placement;
	bool used[4] = {false};
	int total[4] = {0};

	if (p->n_gpus < 1 || p->n_gpus > 16)
		return false;
	for (size_t i = 0; i < p->n_gpus; i++) {
		const Ocs__V1__GpuPlacement *g = p->gpus[i];

		if (g->gpu < 0 || g->gpu > 15 || g->leaf != g->gpu / 4 || g->pod != g->leaf / 2)
			return false;
		for (size_t k = 0; k < i; k++)
			if (p->gpus[k]->gpu == g->gpu)
				return false;
		used[g->leaf] = true;
	}
	if (j->job.demand_case != OCS__V1__JOB_SPEC__DEMAND_LEAF_DEMAND || j->demand.n_pairs == 0)
		return false;
	for (size_t i = 0; i < j->demand.n_pairs; i++) {
		const Ocs__V1__LeafPair *q = j->demand.pairs[i];

		if (q->a < 0 || q->a > 3 || q->b < 0 || q->b > 3 || q->a == q->b || !used[q->a] ||
		    !used[q->b] || q->links < 1 || q->links > 4)
			return false;
		for (size_t k = 0; k < i; k++) {
			const Ocs__V1__LeafPair *r = j->demand.pairs[k];

			if ((r->a == q->a && r->b == q->b) || (r->a == q->b && r->b == q->a))
				return false;
		}
		total[q->a] += q->links;
		total[q->b] += q->links;
	}
	for (int l = 0; l < 4; l++)
		if (total[l] > 4)
			return false;
	return true;
}

static void test_random_jobs_agree_with_checker(void **state)
{
	const struct nb_limits small = {
		.pods = 2, .leaves_per_pod = 2, .gpus_per_leaf = 4, .groups = 2};
	struct small_job j;
	int accepted = 0, refused = 0;

	(void)state;
	srand48(20261122);
	for (int n = 0; n < 20000; n++) {
		struct nb_error err = {0};
		bool want, got;

		random_job(&j);
		want = independent_ok(&j);
		got = nb_validate_request(NB_JOBS_SUBMIT_JOB, &j.job.base, &small, &err) == 0;
		if (want != got)
			fail_msg("instance %d: checker says %s, validator says %s (%s: %s)", n,
				 want ? "valid" : "invalid", got ? "valid" : "invalid", err.field,
				 err.message);
		if (got) {
			accepted++;
		} else {
			refused++;
			assert_int_equal(err.code, NB_INVALID_ARGUMENT);
			assert_true(strncmp(err.field, "placement", 9) == 0 ||
				    strncmp(err.field, "leaf_demand", 11) == 0 ||
				    strcmp(err.field, "demand") == 0);
		}
	}
	print_message("random jobs: %d accepted, %d refused\n", accepted, refused);
	/* both outcomes are well represented */
	assert_true(accepted > 500 && refused > 500);
}

/*
 * Random ring requests on random ring domains: the validator accepts exactly
 * what a checker written from the rules in northbound/README.md accepts,
 * and a refusal names a ring field (or placement/options) with
 * INVALID_ARGUMENT.
 */
static bool ring_independent_ok(const Ocs__V1__JobSpec *j, long long domain_gpus, int per_node,
				long long job_max)
{
	const Ocs__V1__RingRequest *r = j->ring;
	const char *o = r->orchestration;
	long long bound = job_max && job_max < domain_gpus ? job_max : domain_gpus;

	if (j->placement ||
	    (j->options && (j->options->planner[0] || j->options->allow_moving_other_jobs)))
		return false;
	if (r->tp < 1 || r->tp % per_node != 0 || r->tp > bound)
		return false;
	if (r->gpus < 0 || r->gpus % r->tp != 0 || r->gpus > bound)
		return false;
	if (r->rings < 0 || (r->rings > 0 && r->gpus > 0) || (long long)r->rings * r->tp > bound)
		return false;
	return strcmp(o, "") == 0 || strcmp(o, "dcn-free") == 0 || strcmp(o, "fat-tree") == 0 ||
	       strcmp(o, "greedy") == 0;
}

static void test_random_ring_requests(void **state)
{
	static const int per_node[] = {1, 2, 4, 8};
	static const char *const orch[] = {"", "dcn-free", "fat-tree", "greedy", "Greedy", "dcn"};
	Ocs__V1__JobSpec job;
	Ocs__V1__RingRequest ring;
	Ocs__V1__JobOptions options;
	Ocs__V1__Placement placement;
	int accepted = 0, refused = 0;

	(void)state;
	srand48(11);
	for (int n = 0; n < 20000; n++) {
		struct nb_limits lim = {.kind = NB_FABRIC_OCSTRX_RING};
		struct nb_error err = {0};
		long long gpus;
		int m;
		bool want, got;

		lim.ring.nodes = pick(1, 64);
		lim.ring.gpus_per_node = per_node[pick(0, 3)];
		lim.max_gpus_per_job = lrand48() % 4 ? 0 : pick(1, 300);
		gpus = (long long)lim.ring.nodes * lim.ring.gpus_per_node;
		ocs__v1__job_spec__init(&job);
		ocs__v1__ring_request__init(&ring);
		ocs__v1__job_options__init(&options);
		ocs__v1__placement__init(&placement);
		job.id = "r";
		job.demand_case = OCS__V1__JOB_SPEC__DEMAND_RING;
		job.ring = &ring;
		/* mostly well-formed multiples, sometimes anything */
		m = pick(1, 8);
		ring.tp = lrand48() % 5 ? m * lim.ring.gpus_per_node : pick(-4, 70);
		if (lrand48() % 2)
			ring.gpus =
				lrand48() % 4 ? (long long)ring.tp * pick(0, 40) : pick(-9, 600);
		else
			ring.rings = lrand48() % 4 ? pick(0, 40) : pick(-3, 3);
		if (lrand48() % 20 == 0)
			ring.rings = pick(1, 4); /* maybe together with gpus */
		ring.orchestration = (char *)orch[pick(0, 5)];
		ring.seed = (uint64_t)lrand48();
		if (lrand48() % 30 == 0)
			job.placement = &placement;
		if (lrand48() % 3 == 0) {
			job.options = &options;
			options.planner = lrand48() % 10 ? "" : "leaf-centric";
			options.allow_moving_other_jobs = lrand48() % 10 == 0;
		}
		want = ring_independent_ok(&job, gpus, lim.ring.gpus_per_node,
					   lim.max_gpus_per_job);
		got = nb_validate_request(NB_JOBS_SUBMIT_JOB, &job.base, &lim, &err) == 0;
		if (want != got)
			fail_msg("instance %d (tp %d gpus %lld rings %d '%s', domain %lld GPUs, "
				 "%d per node, job max %d): checker says %s, validator says %s "
				 "(%s: %s)",
				 n, ring.tp, (long long)ring.gpus, ring.rings, ring.orchestration,
				 gpus, lim.ring.gpus_per_node, lim.max_gpus_per_job,
				 want ? "valid" : "invalid", got ? "valid" : "invalid", err.field,
				 err.message);
		if (got) {
			accepted++;
			continue;
		}
		refused++;
		assert_int_equal(err.code, NB_INVALID_ARGUMENT);
		assert_true(strncmp(err.field, "ring.", 5) == 0 ||
			    strcmp(err.field, "placement") == 0 ||
			    strncmp(err.field, "options.", 8) == 0);
	}
	print_message("random ring requests: %d accepted, %d refused\n", accepted, refused);
	assert_true(accepted > 2000 && refused > 2000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_random_jobs_agree_with_checker),
		cmocka_unit_test(test_random_ring_requests),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
