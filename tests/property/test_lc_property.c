/*
 * test_lc_property.c - property tests of the leaf-centric planner, the
 * pod-centric baseline and the realization over thousands of generated
 * instances (solvers/leafcentric.c, realize.c).
 *
 * For H in {2, 3, 4, 5, 6, 8, 16}, tau 1 and 2, all three wirings and the
 * four demand shapes of lc_gen.h, every plan is re-checked here from its
 * outputs alone, with an independent recount:
 *   - constraint (1): placed + unplaced links of every pair = its demand,
 *     nothing unplaced when no port is pinned and tau = 2
 *   - max_contention and contended_leaves equal the recount; tau = 2 gives
 *     contention <= 1; tau = 1 with every leaf at most half loaded too
 *   - the logical topology is the sum of the assignment and no spine carries
 *     more circuits than its free ports
 *   - realization: complete for cross and dual, and the cross-connects
 *     carry exactly the realized circuits
 *   - every configuration passes the independent L2 checker, and mutating
 *     any one cross-connect of it makes the checker fail
 *   - incremental planning keeps every pinned cross-connect, whether a
 *     plan or a random pattern of circuits pinned the ports; a re-plan
 *     lists exactly the existing cross-connects it drops, and re-planning
 *     the same demand over its own complete configuration drops none.
 *
 * The plans are the heuristic's alone (lc_options.heuristic_only): where
 * it does not fit, the exact search of fit.h takes over in lc_plan(), and
 * test_fit_property checks that, with an exact checker of its own.
 *
 * Usage: test_lc_property [seed] [instances-per-config]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "l2check.h"
#include "lc_gen.h"
#include "leafcentric.h"

static int failures;
static char current[256];

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			if (failures++ < 20) {                                                     \
				fprintf(stderr, "FAIL %s: %s: ", current, #cond);                  \
				fprintf(stderr, __VA_ARGS__);                                      \
				fputc('\n', stderr);                                               \
			}                                                                          \
		}                                                                                  \
	} while (0)

struct stats {
	long plans, straight_circuits, straight_unrealized, straight_before;
	long tau1_contended_plans, pod_contended;
};

/* Links of pair (a, b) in a demand list, 0 when absent. */
static int demand_of(const struct lc_demand *d, size_t n, int a, int b)
{
	for (size_t i = 0; i < n; i++)
		if ((d[i].a == a && d[i].b == b) || (d[i].a == b && d[i].b == a))
			return d[i].links;
	return 0;
}

/* Circuits realized per (group, pod i < pod j), recounted from cross-connects. */
static long *count_circuits(const struct ocs_fabric *f, const struct ocs_xc *xcs, size_t n)
{
	int P = f->pods, H = ocs_fabric_groups(f);
	long *c = calloc((size_t)H * P * P, sizeof(*c));

	for (size_t i = 0; c && i < n; i++) {
		struct ocs_spine_port a, b;

		if (ocs_fabric_input_owner(f, xcs[i].group,
					   (struct ocs_device_port){xcs[i].device, xcs[i].in},
					   &a) ||
		    ocs_fabric_output_owner(f, xcs[i].group,
					    (struct ocs_device_port){xcs[i].device, xcs[i].out},
					    &b))
			continue;
		if (a.pod < b.pod) /* each circuit has one cross-connect each way */
			c[((size_t)xcs[i].group * P + a.pod) * P + b.pod]++;
	}
	return c;
}

static void check_mutations(const struct ocs_fabric *f, const struct lc_plan *p, uint64_t *seed)
{
	struct ocs_xc *m;
	size_t k;
	int used = ocs_fabric_device_ports_used(f);

	if (p->n_xcs == 0)
		return;
	m = malloc(p->n_xcs * sizeof(*m));
	k = lc_gen_next(seed) % p->n_xcs;
	/* Drop one cross-connect: its partner turns one-way. */
	memcpy(m, p->xcs, p->n_xcs * sizeof(*m));
	m[k] = m[p->n_xcs - 1];
	CHECK(l2_check(f, m, p->n_xcs - 1, NULL, 0) > 0, "dropping xc %zu went unnoticed", k);
	/* Send one elsewhere on its device. */
	memcpy(m, p->xcs, p->n_xcs * sizeof(*m));
	m[k].out = (m[k].out + 1 + lc_gen_below(seed, used - 1 > 0 ? used - 1 : 1)) % used;
	if (m[k].out != p->xcs[k].out)
		CHECK(l2_check(f, m, p->n_xcs, NULL, 0) > 0, "rerouting xc %zu went unnoticed", k);
	/* Move one to another device of the group. */
	memcpy(m, p->xcs, p->n_xcs * sizeof(*m));
	if (ocs_fabric_devices_per_group(f) > 1) {
		m[k].device = (m[k].device + 1) % ocs_fabric_devices_per_group(f);
		CHECK(l2_check(f, m, p->n_xcs, NULL, 0) > 0, "moving xc %zu went unnoticed", k);
	}
	free(m);
}

/* Everything a plan must satisfy, from its outputs alone. */
static void check_plan(const struct ocs_fabric *f, const struct lc_demand *d, size_t n,
		       const struct ocs_xc *pinned, size_t n_pinned, const struct lc_plan *p,
		       bool leaf_centric, struct stats *st)
{
	int N = ocs_fabric_leaves(f), H = ocs_fabric_groups(f), P = f->pods;
	int *load = calloc((size_t)N * H, sizeof(int));
	long *spine = calloc((size_t)P * H, sizeof(long));
	long *topo = calloc((size_t)H * P * P, sizeof(long));
	int *total = calloc((size_t)N, sizeof(int));
	int max_load = 0;
	size_t contended = 0, unplaced = 0;
	bool half = true, any_full = false;

	/* (1): placed + unplaced = demand, pair by pair. */
	for (size_t i = 0; i < p->n_assignment; i++) {
		const struct lc_spine_links *s = &p->assignment[i];

		CHECK(s->a < s->b && s->h >= 0 && s->h < H && s->links > 0, "bad entry %zu", i);
		load[(size_t)s->a * H + s->h] += s->links;
		load[(size_t)s->b * H + s->h] += s->links;
		spine[ocs_fabric_leaf_pod(f, s->a) * H + s->h] += s->links;
		spine[ocs_fabric_leaf_pod(f, s->b) * H + s->h] += s->links;
		topo[((size_t)s->h * P + ocs_fabric_leaf_pod(f, s->a)) * P +
		     ocs_fabric_leaf_pod(f, s->b)] += s->links;
	}
	for (size_t i = 0; i < n; i++) {
		int placed = 0, lost = 0;

		total[d[i].a] += d[i].links;
		total[d[i].b] += d[i].links;
		for (size_t j = 0; j < p->n_assignment; j++)
			if (p->assignment[j].a == (d[i].a < d[i].b ? d[i].a : d[i].b) &&
			    p->assignment[j].b == (d[i].a < d[i].b ? d[i].b : d[i].a))
				placed += p->assignment[j].links;
		lost = demand_of(p->unplaced, p->n_unplaced, d[i].a, d[i].b);
		CHECK(placed + lost == d[i].links, "pair %d-%d: %d placed + %d unplaced != %d",
		      d[i].a, d[i].b, placed, lost, d[i].links);
	}
	for (size_t i = 0; i < p->n_unplaced; i++)
		unplaced += (size_t)p->unplaced[i].links;
	/* Contention, recounted. */
	for (int a = 0; a < N; a++) {
		bool over = false;

		for (int h = 0; h < H; h++) {
			int l = load[(size_t)a * H + h];

			max_load = l > max_load ? l : max_load;
			over |= l > f->tau;
		}
		contended += over;
		half &= 2 * total[a] <= f->k_leaf;
	}
	CHECK(p->max_contention == (double)max_load / f->tau, "max_contention %g, recount %g",
	      p->max_contention, (double)max_load / f->tau);
	CHECK(p->contended_leaves == contended, "contended %zu, recount %zu", p->contended_leaves,
	      contended);
	CHECK(p->contention_free == (max_load <= f->tau && unplaced == 0), "contention_free");
	if (leaf_centric && f->tau == 2 && n_pinned == 0) {
		CHECK(p->max_contention <= 1.0, "tau 2 contention %g", p->max_contention);
		CHECK(unplaced == 0, "%zu links unplaced", unplaced);
	}
	if (leaf_centric && f->tau == 1 && half && n_pinned == 0)
		CHECK(p->max_contention <= 1.0, "half-loaded tau 1 contention %g",
		      p->max_contention);
	if (f->tau == 1 && max_load > 1)
		st->tau1_contended_plans += leaf_centric;
	if (!leaf_centric)
		st->pod_contended += (long)contended;
	/* Spine budgets, with pinned ports subtracted. */
	for (int h = 0; h < H; h++) {
		unsigned char *busy = calloc((size_t)P * f->k_spine, 1);

		rz_busy_spine_ports(f, h, pinned, n_pinned, busy);
		for (int q = 0; q < P; q++) {
			long free_ports = f->k_spine;

			for (int k = 0; k < f->k_spine; k++)
				free_ports -= busy[(size_t)q * f->k_spine + k];
			CHECK(spine[q * H + h] <= free_ports, "spine %d/%d carries %ld > %ld", q, h,
			      spine[q * H + h], free_ports);
			any_full |= spine[q * H + h] == free_ports;
		}
		free(busy);
	}
	/* tau = 1 falls back to the Euler method (<= 2); only full spines may force more. */
	if (leaf_centric && f->tau == 1 && n_pinned == 0 && unplaced == 0 && !any_full)
		CHECK(p->max_contention <= 2.0, "tau 1 contention %g above 2", p->max_contention);
	/* The topology is the sum of the assignment (pods i < j, as leaves a < b). */
	for (size_t t = 0; t < p->n_topology; t++) {
		const struct rz_circuits *c = &p->topology[t];

		CHECK(c->i < c->j && c->circuits > 0, "topology entry %zu", t);
		topo[((size_t)c->h * P + c->i) * P + c->j] -= c->circuits;
	}
	for (size_t t = 0; t < (size_t)H * P * P; t++)
		CHECK(topo[t] == 0, "topology differs from assignment at %zu by %ld", t, topo[t]);
	if (p->n_xcs || p->n_unrealized || p->realize_ms > 0) {
		long *real = count_circuits(f, p->xcs, p->n_xcs);
		long expect_unreal = 0;
		int bad = l2_check(f, p->xcs, p->n_xcs, NULL, 0);
		struct l2_violation v[1];

		if (bad)
			l2_check(f, p->xcs, p->n_xcs, v, 1);
		CHECK(bad == 0, "%d L2 violations, first: %s", bad, bad ? v[0].reason : "");
		/* Realized circuits = topology - unrealized (+ pinned ones). */
		memset(topo, 0, (size_t)H * P * P * sizeof(long));
		for (size_t t = 0; t < p->n_topology; t++)
			topo[((size_t)p->topology[t].h * P + p->topology[t].i) * P +
			     p->topology[t].j] += p->topology[t].circuits;
		for (size_t t = 0; t < p->n_unrealized; t++) {
			topo[((size_t)p->unrealized[t].h * P + p->unrealized[t].i) * P +
			     p->unrealized[t].j] -= p->unrealized[t].circuits;
			expect_unreal += p->unrealized[t].circuits;
		}
		if (n_pinned) {
			long *old = count_circuits(f, pinned, n_pinned);

			for (size_t t = 0; t < (size_t)H * P * P; t++)
				topo[t] += old[t];
			free(old);
		}
		for (size_t t = 0; t < (size_t)H * P * P; t++)
			CHECK(real[t] == topo[t],
			      "cross-connects carry %ld circuits, plan %ld at %zu", real[t],
			      topo[t], t);
		CHECK((long)p->unrealized_circuits == expect_unreal, "unrealized count");
		if (f->wiring != OCS_WIRING_STRAIGHT && n_pinned == 0)
			CHECK(p->n_unrealized == 0, "%zu unrealized on %s", p->n_unrealized,
			      ocs_wiring_name(f->wiring));
		if (f->wiring == OCS_WIRING_STRAIGHT && n_pinned == 0) {
			for (size_t t = 0; t < p->n_topology; t++)
				st->straight_circuits += p->topology[t].circuits;
			st->straight_unrealized += expect_unreal;
			st->straight_before += (long)p->unrealized_before_repair;
		}
		free(real);
	}
	st->plans++;
	free(load);
	free(spine);
	free(topo);
	free(total);
}

static struct ocs_fabric make_fabric(int H, int tau, enum ocs_wiring w, uint64_t *seed)
{
	struct ocs_fabric f = {.pods = 2 + lc_gen_below(seed, 5),
			       .k_leaf = H * tau,
			       .k_spine = 2 * (1 + lc_gen_below(seed, 3)),
			       .tau = tau,
			       .wiring = w};

	if (tau == 2 && f.k_spine % 4) /* k_spine/tau leaves per pod; keep it even for dual */
		f.k_spine += 2;
	if (w == OCS_WIRING_STRAIGHT && tau == 1 && lc_gen_below(seed, 2))
		f.k_spine--; /* only straight wiring may have an odd number of spine ports */
	f.k_ocs = f.pods * ocs_fabric_ports_per_pod(&f) + lc_gen_below(seed, 3);
	return f;
}

static void run_instance(const struct ocs_fabric *f, enum lc_gen_shape shape, uint64_t *seed,
			 struct stats *st)
{
	struct lc_options opt = {.realize = true, .heuristic_only = true};
	int half_fill = lc_gen_below(seed, 4) == 0 ? f->k_leaf / 2 : 0;
	size_t n;
	struct lc_demand *d = lc_gen_demand(f, shape, NULL, half_fill, seed, &n);
	struct lc_plan *p = NULL, *q = NULL;

	CHECK(d != NULL, "generator");
	CHECK(lc_validate(f, d, n, NULL, 0, NULL, 0) == 0, "generated demand invalid");
	CHECK(lc_plan(f, d, n, NULL, 0, &opt, &p) == 0, "lc_plan failed");
	if (p) {
		check_plan(f, d, n, NULL, 0, p, true, st);
		check_mutations(f, p, seed);
	}
	CHECK(pc_plan(f, d, n, NULL, 0, &opt, &q) == 0, "pc_plan failed");
	if (q)
		check_plan(f, d, n, NULL, 0, q, false, st);
	lc_plan_free(p);
	lc_plan_free(q);
	free(d);
}

/*
 * Pinned circuits that no planner made: random spine port pairs joined as
 * the wiring allows (same port for straight, ports 2m and 2m+1 for cross
 * and dual), built from fabric.h alone, so free ports come in any pattern.
 */
static struct ocs_xc *random_pins(const struct ocs_fabric *f, uint64_t *seed, size_t *n)
{
	int P = f->pods, H = ocs_fabric_groups(f), K = f->k_spine;
	unsigned char *used = calloc((size_t)P * H * K, 1);
	struct ocs_xc *x = malloc((size_t)P * H * K * sizeof(*x) + sizeof(*x));
	int tries = lc_gen_below(seed, P * H * K / 2 + 1);

	*n = 0;
	for (int t = 0; t < tries; t++) {
		int h = lc_gen_below(seed, H), i = lc_gen_below(seed, P), j = lc_gen_below(seed, P);
		int ka = lc_gen_below(seed, K), kb = ka;
		struct ocs_spine_port a, b;
		struct ocs_device_port ta, rb, tb, ra;

		if (f->wiring != OCS_WIRING_STRAIGHT) {
			ka &= ~1;
			kb = ka + 1;
		}
		if (i == j || used[((size_t)i * H + h) * K + ka] ||
		    used[((size_t)j * H + h) * K + kb])
			continue;
		used[((size_t)i * H + h) * K + ka] = used[((size_t)j * H + h) * K + kb] = 1;
		a = (struct ocs_spine_port){i, h, ka};
		b = (struct ocs_spine_port){j, h, kb};
		ta = ocs_fabric_tx_port(f, a);
		rb = ocs_fabric_rx_port(f, b);
		tb = ocs_fabric_tx_port(f, b);
		ra = ocs_fabric_rx_port(f, a);
		x[(*n)++] = (struct ocs_xc){h, ta.device, ta.port, rb.port};
		x[(*n)++] = (struct ocs_xc){h, tb.device, tb.port, ra.port};
	}
	free(used);
	return x;
}

static void run_random_pins(const struct ocs_fabric *f, uint64_t *seed, struct stats *st)
{
	struct lc_options opt = {.realize = true, .heuristic_only = true};
	size_t n, n_pins;
	struct ocs_xc *pins = random_pins(f, seed, &n_pins);
	struct lc_demand *d = lc_gen_demand(f, (enum lc_gen_shape)lc_gen_below(seed, LC_GEN_SHAPES),
					    NULL, 0, seed, &n);
	struct lc_plan *p = NULL;

	CHECK(l2_check(f, pins, n_pins, NULL, 0) == 0, "random pins are not a valid configuration");
	CHECK(lc_plan(f, d, n, pins, n_pins, &opt, &p) == 0, "plan around random pins");
	if (p) {
		check_plan(f, d, n, pins, n_pins, p, true, st);
		CHECK(p->changed_existing == 0 && p->n_xcs >= n_pins &&
			      memcmp(p->xcs, pins, n_pins * sizeof(*pins)) == 0,
		      "random pins not kept");
	}
	lc_plan_free(p);
	free(pins);
	free(d);
}

/* Two jobs on disjoint leaves: the second is planned around the first's pinned ports. */
static void run_incremental(const struct ocs_fabric *f, uint64_t *seed, struct stats *st)
{
	int N = ocs_fabric_leaves(f);
	unsigned char *mine = malloc((size_t)N), *theirs = malloc((size_t)N);
	struct lc_options opt = {.realize = true, .heuristic_only = true};
	size_t n1, n2;
	struct lc_demand *d1, *d2, *all;
	struct lc_plan *p1 = NULL, *p2 = NULL, *p3 = NULL;

	for (int l = 0; l < N; l++) {
		mine[l] = (unsigned char)lc_gen_below(seed, 2);
		theirs[l] = !mine[l];
	}
	d1 = lc_gen_demand(f, (enum lc_gen_shape)lc_gen_below(seed, LC_GEN_SHAPES), mine, 0, seed,
			   &n1);
	d2 = lc_gen_demand(f, (enum lc_gen_shape)lc_gen_below(seed, LC_GEN_SHAPES), theirs, 0, seed,
			   &n2);
	CHECK(lc_plan(f, d1, n1, NULL, 0, &opt, &p1) == 0, "first job");
	if (!p1)
		goto out;
	CHECK(lc_plan(f, d2, n2, p1->xcs, p1->n_xcs, &opt, &p2) == 0, "second job");
	if (p2) {
		check_plan(f, d2, n2, p1->xcs, p1->n_xcs, p2, true, st);
		CHECK(p2->changed_existing == 0 && p2->n_moved == 0, "pinned xcs changed: %zu",
		      p2->changed_existing);
		CHECK(p2->n_xcs >= p1->n_xcs &&
			      memcmp(p2->xcs, p1->xcs, p1->n_xcs * sizeof(*p1->xcs)) == 0,
		      "pinned cross-connects not kept first and unchanged");
	}
	/*
	 * Re-planning the same demand over its own complete configuration
	 * moves nothing (with circuits left unrealized, a re-plan may move
	 * existing ones to place them: that is what it is for).
	 */
	if (p1->n_unrealized == 0) {
		struct lc_options again = {.realize = true, .replan = true};
		struct lc_plan *p4 = NULL;

		CHECK(lc_plan(f, d1, n1, p1->xcs, p1->n_xcs, &again, &p4) == 0, "replan same");
		if (p4) {
			CHECK(p4->changed_existing == 0 && p4->n_xcs == p1->n_xcs,
			      "replanning the same demand moved %zu of %zu cross-connects",
			      p4->changed_existing, p1->n_xcs);
			lc_plan_free(p4);
		}
	}
	/* Global re-plan of both jobs: moved = existing cross-connects not kept. */
	all = malloc((n1 + n2 + 1) * sizeof(*all));
	memcpy(all, d1, n1 * sizeof(*d1));
	memcpy(all + n1, d2, n2 * sizeof(*d2));
	opt.replan = true;
	CHECK(lc_plan(f, all, n1 + n2, p1->xcs, p1->n_xcs, &opt, &p3) == 0, "replan");
	if (p3) {
		size_t kept = 0;

		check_plan(f, all, n1 + n2, NULL, 0, p3, true, st);
		for (size_t i = 0; i < p1->n_xcs; i++) {
			bool in_new = false, in_moved = false;

			for (size_t j = 0; j < p3->n_xcs && !in_new; j++)
				in_new = memcmp(&p3->xcs[j], &p1->xcs[i], sizeof(p1->xcs[i])) == 0;
			for (size_t j = 0; j < p3->n_moved && !in_moved; j++)
				in_moved =
					memcmp(&p3->moved[j], &p1->xcs[i], sizeof(p1->xcs[i])) == 0;
			CHECK(in_new != in_moved, "existing xc %zu kept=%d moved=%d", i, in_new,
			      in_moved);
			kept += in_new;
		}
		CHECK(p3->changed_existing == p1->n_xcs - kept, "changed_existing %zu != %zu",
		      p3->changed_existing, p1->n_xcs - kept);
	}
	free(all);
out:
	lc_plan_free(p1);
	lc_plan_free(p2);
	lc_plan_free(p3);
	free(d1);
	free(d2);
	free(mine);
	free(theirs);
}

int main(int argc, char **argv)
{
	static const int Hs[] = {2, 3, 4, 5, 6, 8, 16};
	static const enum ocs_wiring wirings[] = {OCS_WIRING_CROSS, OCS_WIRING_DUAL,
						  OCS_WIRING_STRAIGHT};
	uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 0) : 20261122;
	int per = argc > 2 ? atoi(argv[2]) : 30;
	struct stats st = {0};

	for (size_t hi = 0; hi < sizeof(Hs) / sizeof(Hs[0]); hi++)
		for (int tau = 1; tau <= 2; tau++)
			for (size_t wi = 0; wi < 3; wi++)
				for (int s = 0; s < LC_GEN_SHAPES; s++)
					for (int k = 0; k < per; k++) {
						uint64_t at = seed;
						struct ocs_fabric f = make_fabric(
							Hs[hi], tau, wirings[wi], &seed);

						snprintf(current, sizeof(current),
							 "seed %llu H %d tau %d %s %s P %d k_spine "
							 "%d",
							 (unsigned long long)at, Hs[hi], tau,
							 ocs_wiring_name(wirings[wi]),
							 lc_gen_shape_name((enum lc_gen_shape)s),
							 f.pods, f.k_spine);
						run_instance(&f, (enum lc_gen_shape)s, &seed, &st);
						if (k % 4 == 0)
							run_incremental(&f, &seed, &st);
						if (k % 4 == 1)
							run_random_pins(&f, &seed, &st);
					}
	printf("%ld plans checked; straight wiring: %ld circuits, %ld unrealized before Kempe "
	       "repair, %ld after; tau 1 plans with contention: %ld; pod-centric contended "
	       "leaves: %ld\n",
	       st.plans, st.straight_circuits, st.straight_before, st.straight_unrealized,
	       st.tau1_contended_plans, st.pod_contended);
	if (failures)
		fprintf(stderr, "%d checks failed\n", failures);
	return failures ? 1 : 0;
}
