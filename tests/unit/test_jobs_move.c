/*
 * test_jobs_move.c - property test of jm_attribute_owners() (daemon/
 * jobs_move.c), which says which job owns each cross-connect of a global
 * re-plan (allow_moving_other_jobs).
 *
 * Generated instances: random fabrics, 2 to 5 jobs on disjoint leaves; all
 * but the last are planned one after the other with the earlier ones'
 * cross-connects pinned (which gives the configured cross-connects and
 * their owners), then the whole demand is planned again globally (nothing
 * pinned) and attributed. Checked independently of the attribution's own
 * bookkeeping: every cross-connect gets exactly one owner; each job owns
 * two one-way cross-connects per link it asked for; in every OCS group and
 * direction between two pods a job owns as many as its leaf pairs route
 * through that group; a kept cross-connect that is not re-owned keeps its
 * owner; and a plan whose leaf owners clash is refused.
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

#include "jobs_internal.h"
#include "leafcentric.h"

static uint64_t rng_state;

static uint32_t rnd(uint32_t n)
{
	rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
	return (uint32_t)((rng_state >> 33) % n);
}

struct job {
	struct lc_demand d[4];
	size_t n;
};

static bool xc_eq(const struct ocs_xc *a, const struct ocs_xc *b)
{
	return a->group == b->group && a->device == b->device && a->in == b->in && a->out == b->out;
}

/* Pods (from, to) of a one-way cross-connect, by the fabric's wiring. */
static void xc_dir(const struct ocs_fabric *f, const struct ocs_xc *xc, int *from, int *to)
{
	struct ocs_spine_port a, b;

	assert_int_equal(ocs_fabric_input_owner(f, xc->group,
						(struct ocs_device_port){xc->device, xc->in}, &a),
			 0);
	assert_int_equal(ocs_fabric_output_owner(f, xc->group,
						 (struct ocs_device_port){xc->device, xc->out}, &b),
			 0);
	*from = a.pod;
	*to = b.pod;
}

/* Random jobs on disjoint leaves, each leaf within its k_leaf uplinks. */
static size_t make_jobs(const struct ocs_fabric *f, struct job *jobs, size_t want)
{
	int leaves = ocs_fabric_leaves(f);
	bool *used = calloc((size_t)leaves, sizeof(*used));
	size_t n = 0;

	assert_non_null(used);
	for (size_t j = 0; j < want; j++) {
		int pick[3], k = 0;

		for (int tries = 0; tries < 50 && k < 3; tries++) {
			int l = (int)rnd((uint32_t)leaves);
			bool ok = !used[l];

			for (int q = 0; q < k && ok; q++)
				ok = ocs_fabric_leaf_pod(f, pick[q]) != ocs_fabric_leaf_pod(f, l);
			if (ok)
				pick[k++] = l;
		}
		if (k < 2)
			break;
		for (int q = 0; q < k; q++)
			used[pick[q]] = true;
		jobs[n].n = 0;
		for (int a = 0; a < k; a++)
			for (int b = a + 1; b < k; b++) {
				int links = 1 + (int)rnd((uint32_t)(f->k_leaf / 2));

				jobs[n].d[jobs[n].n++] =
					(struct lc_demand){pick[a], pick[b], links};
			}
		n++;
	}
	free(used);
	return n;
}

static void test_attribution(void **state)
{
	static const struct ocs_fabric shapes[] = {
		{4, 8, 4, 2, 8, OCS_WIRING_CROSS}, {6, 8, 8, 2, 16, OCS_WIRING_CROSS},
		{4, 8, 8, 2, 16, OCS_WIRING_DUAL}, {8, 4, 4, 2, 16, OCS_WIRING_CROSS},
		{5, 8, 4, 2, 10, OCS_WIRING_DUAL},
	};
	int checked = 0, moved = 0;

	(void)state;
	rng_state = 42;
	for (int inst = 0; inst < 400; inst++) {
		const struct ocs_fabric *f = &shapes[inst % 5];
		struct job jobs[5];
		size_t n_jobs = make_jobs(f, jobs, 2 + rnd(4));
		struct ocs_xc *conf = NULL;
		int *conf_owner = NULL, *leaf_owner, *owner;
		bool *reowned;
		size_t n_conf = 0, n_all = 0;
		struct lc_demand all[20];
		struct lc_plan *p = NULL;
		struct lc_options pinned = {.realize = true, .replan = false};
		struct lc_options global = {.realize = true, .replan = true};
		bool usable = n_jobs >= 2;

		assert_int_equal(ocs_fabric_validate(f, NULL, 0), 0);
		/* Configure all jobs but the last, one after the other. */
		for (size_t j = 0; usable && j + 1 < n_jobs; j++) {
			assert_int_equal(
				lc_plan(f, jobs[j].d, jobs[j].n, conf, n_conf, &pinned, &p), 0);
			usable = p->n_unplaced == 0 && p->unrealized_circuits == 0;
			if (usable) {
				size_t old = n_conf;

				conf = realloc(conf, p->n_xcs * sizeof(*conf));
				conf_owner = realloc(conf_owner, p->n_xcs * sizeof(*conf_owner));
				assert_non_null(conf);
				assert_non_null(conf_owner);
				/* Pinned ones come first and unchanged. */
				for (size_t x = 0; x < p->n_xcs; x++) {
					if (x < old)
						assert_true(xc_eq(&conf[x], &p->xcs[x]));
					conf[x] = p->xcs[x];
					if (x >= old)
						conf_owner[x] = (int)j;
				}
				n_conf = p->n_xcs;
			}
			lc_plan_free(p);
		}
		if (!usable) {
			free(conf);
			free(conf_owner);
			continue;
		}
		leaf_owner = malloc((size_t)ocs_fabric_leaves(f) * sizeof(*leaf_owner));
		assert_non_null(leaf_owner);
		for (int l = 0; l < ocs_fabric_leaves(f); l++)
			leaf_owner[l] = -1;
		for (size_t j = 0; j < n_jobs; j++)
			for (size_t k = 0; k < jobs[j].n; k++) {
				all[n_all++] = jobs[j].d[k];
				leaf_owner[jobs[j].d[k].a] = leaf_owner[jobs[j].d[k].b] = (int)j;
			}
		assert_int_equal(lc_plan(f, all, n_all, conf, n_conf, &global, &p), 0);
		if (p->n_unplaced || p->unrealized_circuits) {
			lc_plan_free(p);
			free(leaf_owner);
			free(conf);
			free(conf_owner);
			continue;
		}
		owner = malloc((p->n_xcs + 1) * sizeof(*owner));
		reowned = malloc((p->n_xcs + 1) * sizeof(*reowned));
		assert_non_null(owner);
		assert_non_null(reowned);
		assert_int_equal(jm_attribute_owners(f, p, leaf_owner, conf, conf_owner, n_conf,
						     owner, reowned),
				 0);
		/* Independent count: per job, group, ordered pod pair. */
		for (size_t j = 0; j < n_jobs; j++) {
			long owned = 0, asked = 0;

			for (size_t k = 0; k < jobs[j].n; k++)
				asked += 2L * jobs[j].d[k].links;
			for (size_t x = 0; x < p->n_xcs; x++)
				owned += owner[x] == (int)j;
			assert_int_equal(owned, asked);
			for (size_t s = 0; s < p->n_assignment; s++) {
				const struct lc_spine_links *l = &p->assignment[s];
				int pa = ocs_fabric_leaf_pod(f, l->a),
				    pb = ocs_fabric_leaf_pod(f, l->b);
				long want = 0, got_ab = 0, got_ba = 0;

				if (leaf_owner[l->a] != (int)j)
					continue;
				for (size_t t = 0; t < p->n_assignment; t++) {
					const struct lc_spine_links *m = &p->assignment[t];
					int qa = ocs_fabric_leaf_pod(f, m->a);
					int qb = ocs_fabric_leaf_pod(f, m->b);

					if (leaf_owner[m->a] == (int)j && m->h == l->h &&
					    ((qa == pa && qb == pb) || (qa == pb && qb == pa)))
						want += m->links;
				}
				for (size_t x = 0; x < p->n_xcs; x++) {
					int from, to;

					if (owner[x] != (int)j || p->xcs[x].group != l->h)
						continue;
					xc_dir(f, &p->xcs[x], &from, &to);
					got_ab += from == pa && to == pb;
					got_ba += from == pb && to == pa;
				}
				assert_int_equal(got_ab, want);
				assert_int_equal(got_ba, want);
			}
		}
		/* Kept and not re-owned: same owner as before. */
		for (size_t x = 0; x < p->n_xcs; x++) {
			for (size_t c = 0; c < n_conf; c++)
				if (xc_eq(&conf[c], &p->xcs[x]) && !reowned[x])
					assert_int_equal(owner[x], conf_owner[c]);
			moved += reowned[x];
		}
		moved += (int)p->n_moved;
		/* Two jobs claiming one leaf cannot be told apart. */
		leaf_owner[all[0].a] = leaf_owner[all[0].a] == 0 ? 1 : 0;
		assert_int_equal(jm_attribute_owners(f, p, leaf_owner, conf, conf_owner, n_conf,
						     owner, reowned),
				 -EINVAL);
		checked++;
		free(owner);
		free(reowned);
		lc_plan_free(p);
		free(leaf_owner);
		free(conf);
		free(conf_owner);
	}
	print_message("%d instances checked, %d cross-connects moved or re-owned\n", checked,
		      moved);
	assert_true(checked >= 200);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_attribution),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
