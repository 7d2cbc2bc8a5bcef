/*
 * test_leaf_share_property.c - property test of jobs sharing leaves
 * (solvers/leafcentric.h: lc_options.usage, lc_usage_from_assignment).
 *
 * Random sequences of 2..6 jobs on leaf sets that overlap are planned one
 * after the other, as the daemon does: each job with the cross-connects of
 * the configuration so far pinned and the leaf-spine usage of the jobs
 * before it (lc_usage_from_assignment over their assignments). For
 * H in {2, 3, 4, 5, 6, 8}, tau 1 and 2 and the three wirings, a checker that
 * shares nothing with the planner but fabric.h and l2check.h verifies after
 * every job, from the plans' outputs alone:
 *   - every pair of the job: placed + unplaced links = its demand;
 *   - the load of every (leaf, spine), summed over the assignments of all
 *     jobs so far, gives the reported max_contention and contended_leaves,
 *     and stays <= tau wherever the plan claims contention_free;
 *   - no leaf uses more than its k_leaf uplinks over all jobs;
 *   - unplaced links are justified: one of their leaves has all its
 *     uplinks in use, or every spine is out of OCS ports at one of the two
 *     pods (ports counted from the cross-connects);
 *   - the previous configuration is kept, first and unchanged, and the
 *     complete configuration passes the L2 checker and carries exactly the
 *     realized circuits of all jobs.
 * It also counts how many sequences end contention-free, and how often a
 * plan that ignored the usage would have been contended on the same
 * instance (the polarization the usage input prevents).
 *
 * Usage: test_leaf_share_property [seed] [sequences-per-config]
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
	long sequences, jobs, contention_free_jobs, jobs_with_unplaced, unplaced_links;
	/* Per tau (index tau - 1), jobs planned on a contention-free load: */
	long clean_before[2], aware_contended[2], blind_contended[2];
};

struct seq {
	const struct ocs_fabric *f;
	int N, H, P;
	long *load;		    /* [leaf * H + h], every job so far */
	long *circuits;		    /* realized, [(h * P + i) * P + j], i < j, every job so far */
	struct lc_spine_links *all; /* the assignments of every job so far */
	size_t n_all;
	struct ocs_xc *xcs; /* the configuration so far */
	size_t n_xcs;
};

/* Spine ports in use per (pod, group), traced from cross-connects. */
static int *busy_ports(const struct ocs_fabric *f, const struct ocs_xc *x, size_t n)
{
	int P = f->pods, H = ocs_fabric_groups(f), K = f->k_spine;
	unsigned char *port = calloc((size_t)P * H * K, 1);
	int *busy = calloc((size_t)P * H, sizeof(int));

	for (size_t i = 0; port && busy && i < n; i++) {
		struct ocs_spine_port s[2];

		if (ocs_fabric_input_owner(f, x[i].group,
					   (struct ocs_device_port){x[i].device, x[i].in}, &s[0]) ||
		    ocs_fabric_output_owner(f, x[i].group,
					    (struct ocs_device_port){x[i].device, x[i].out}, &s[1]))
			continue;
		for (int e = 0; e < 2; e++) {
			unsigned char *m = &port[((size_t)s[e].pod * H + s[e].h) * K + s[e].k];

			if (!*m)
				busy[s[e].pod * H + s[e].h]++;
			*m = 1;
		}
	}
	free(port);
	return busy;
}

/* Adds the circuits the cross-connects carry, per (group, pod i < pod j). */
static void count_circuits(const struct ocs_fabric *f, const struct ocs_xc *x, size_t n, long *c,
			   long sign)
{
	int P = f->pods;

	for (size_t i = 0; i < n; i++) {
		struct ocs_spine_port a, b;

		if (ocs_fabric_input_owner(f, x[i].group,
					   (struct ocs_device_port){x[i].device, x[i].in}, &a) ||
		    ocs_fabric_output_owner(f, x[i].group,
					    (struct ocs_device_port){x[i].device, x[i].out}, &b))
			continue;
		if (a.pod < b.pod) /* each circuit has one cross-connect each way */
			c[((size_t)x[i].group * P + a.pod) * P + b.pod] += sign;
	}
}

/* Everything job k's plan must satisfy, given the jobs before it (in sq). */
static void check_job(struct seq *sq, const struct lc_demand *d, size_t n, const struct lc_plan *p,
		      struct stats *st)
{
	const struct ocs_fabric *f = sq->f;
	int N = sq->N, H = sq->H, P = sq->P;
	long *total = calloc((size_t)N, sizeof(long));
	long *own_spine = calloc((size_t)P * H, sizeof(long));
	int *busy_before = busy_ports(f, sq->xcs, sq->n_xcs);
	long max_load = 0, unplaced = 0;
	size_t contended = 0;

	/* (1) for the job: placed + unplaced = demand, pair by pair. */
	for (size_t i = 0; i < n; i++) {
		int a = d[i].a < d[i].b ? d[i].a : d[i].b, b = d[i].a < d[i].b ? d[i].b : d[i].a;
		long placed = 0, lost = 0;

		for (size_t j = 0; j < p->n_assignment; j++)
			if (p->assignment[j].a == a && p->assignment[j].b == b)
				placed += p->assignment[j].links;
		for (size_t j = 0; j < p->n_unplaced; j++)
			if (p->unplaced[j].a == a && p->unplaced[j].b == b)
				lost += p->unplaced[j].links;
		CHECK(placed + lost == d[i].links, "pair %d-%d: %ld placed + %ld unplaced != %d", a,
		      b, placed, lost, d[i].links);
	}
	/* Combined load: every job so far, this one included. */
	for (size_t j = 0; j < p->n_assignment; j++) {
		const struct lc_spine_links *s = &p->assignment[j];

		CHECK(s->a < s->b && s->h >= 0 && s->h < H && s->links > 0, "bad entry %zu", j);
		sq->load[(size_t)s->a * H + s->h] += s->links;
		sq->load[(size_t)s->b * H + s->h] += s->links;
		own_spine[ocs_fabric_leaf_pod(f, s->a) * H + s->h] += s->links;
		own_spine[ocs_fabric_leaf_pod(f, s->b) * H + s->h] += s->links;
	}
	for (int a = 0; a < N; a++) {
		bool over = false;

		for (int h = 0; h < H; h++) {
			long l = sq->load[(size_t)a * H + h];

			total[a] += l;
			max_load = l > max_load ? l : max_load;
			over |= l > f->tau;
		}
		contended += over;
		CHECK(total[a] <= f->k_leaf, "leaf %d uses %ld uplinks over all jobs", a, total[a]);
	}
	for (size_t j = 0; j < p->n_unplaced; j++)
		unplaced += p->unplaced[j].links;
	CHECK(p->max_contention == (double)max_load / f->tau, "max_contention %g, recount %g",
	      p->max_contention, (double)max_load / f->tau);
	CHECK(p->contended_leaves == contended, "contended %zu, recount %zu", p->contended_leaves,
	      contended);
	CHECK(p->contention_free == (max_load <= f->tau && unplaced == 0), "contention_free %d",
	      p->contention_free);
	CHECK(!p->contention_free || max_load <= f->tau,
	      "claims contention-free, but a (leaf, spine) carries %ld links over all jobs",
	      max_load);
	/* Spine ports: the job's circuits fit beside the ones already there. */
	for (int q = 0; q < P * H; q++)
		CHECK(busy_before[q] + own_spine[q] <= f->k_spine, "spine %d/%d: %d + %ld ports",
		      q / H, q % H, busy_before[q], own_spine[q]);
	/* Unplaced links need a reason. */
	for (size_t j = 0; j < p->n_unplaced; j++) {
		int a = p->unplaced[j].a, b = p->unplaced[j].b;
		int pa = ocs_fabric_leaf_pod(f, a), pb = ocs_fabric_leaf_pod(f, b);
		bool ports_out = true;

		for (int h = 0; h < H; h++)
			ports_out &=
				busy_before[pa * H + h] + own_spine[pa * H + h] >= f->k_spine ||
				busy_before[pb * H + h] + own_spine[pb * H + h] >= f->k_spine;
		CHECK(total[a] == f->k_leaf || total[b] == f->k_leaf || ports_out,
		      "pair %d-%d unplaced with uplinks (%ld, %ld) and ports left", a, b, total[a],
		      total[b]);
	}
	/* The configuration: previous one kept first, L2-clean, carrying every job's circuits. */
	CHECK(p->changed_existing == 0 && p->n_xcs >= sq->n_xcs &&
		      (sq->n_xcs == 0 ||
		       memcmp(p->xcs, sq->xcs, sq->n_xcs * sizeof(*sq->xcs)) == 0),
	      "previous configuration not kept");
	{
		int bad = l2_check(f, p->xcs, p->n_xcs, NULL, 0);
		long *now = calloc((size_t)H * P * P, sizeof(long));

		CHECK(bad == 0, "%d L2 violations in the combined configuration", bad);
		for (size_t t = 0; t < p->n_topology; t++)
			sq->circuits[((size_t)p->topology[t].h * P + p->topology[t].i) * P +
				     p->topology[t].j] += p->topology[t].circuits;
		for (size_t t = 0; t < p->n_unrealized; t++)
			sq->circuits[((size_t)p->unrealized[t].h * P + p->unrealized[t].i) * P +
				     p->unrealized[t].j] -= p->unrealized[t].circuits;
		count_circuits(f, p->xcs, p->n_xcs, now, 1);
		for (size_t t = 0; t < (size_t)H * P * P; t++)
			CHECK(now[t] == sq->circuits[t], "xcs carry %ld circuits, jobs %ld at %zu",
			      now[t], sq->circuits[t], t);
		free(now);
	}
	st->jobs++;
	st->contention_free_jobs += p->contention_free;
	st->jobs_with_unplaced += unplaced > 0;
	st->unplaced_links += unplaced;
	free(total);
	free(own_spine);
	free(busy_before);
}

/*
 * The same job planned blind to the usage: its load added to the jobs'
 * before it is contended where the aware plan's may not be.
 */
static void compare_blind(const struct seq *sq, const struct lc_demand *d, size_t n,
			  const struct lc_plan *aware, struct stats *st)
{
	struct lc_plan *blind = NULL;
	long *load;
	bool over = false, before = false;
	int t = sq->f->tau - 1;

	if (lc_plan(sq->f, d, n, sq->xcs, sq->n_xcs, NULL, &blind) != 0)
		return;
	load = malloc((size_t)sq->N * sq->H * sizeof(long));
	/* sq->load already holds the aware plan: take it out, put the blind one in. */
	memcpy(load, sq->load, (size_t)sq->N * sq->H * sizeof(long));
	for (size_t j = 0; j < aware->n_assignment; j++) {
		load[(size_t)aware->assignment[j].a * sq->H + aware->assignment[j].h] -=
			aware->assignment[j].links;
		load[(size_t)aware->assignment[j].b * sq->H + aware->assignment[j].h] -=
			aware->assignment[j].links;
	}
	for (size_t i = 0; i < (size_t)sq->N * sq->H; i++)
		before |= load[i] > sq->f->tau;
	for (size_t j = 0; j < blind->n_assignment; j++) {
		load[(size_t)blind->assignment[j].a * sq->H + blind->assignment[j].h] +=
			blind->assignment[j].links;
		load[(size_t)blind->assignment[j].b * sq->H + blind->assignment[j].h] +=
			blind->assignment[j].links;
	}
	for (size_t i = 0; i < (size_t)sq->N * sq->H; i++)
		over |= load[i] > sq->f->tau;
	if (!before) {
		st->clean_before[t]++;
		st->blind_contended[t] += over;
		st->aware_contended[t] += aware->max_contention > 1.0;
	}
	free(load);
	lc_plan_free(blind);
}

static struct ocs_fabric make_fabric(int H, int tau, enum ocs_wiring w, uint64_t *seed)
{
	struct ocs_fabric f = {.pods = 2 + lc_gen_below(seed, 4),
			       .k_leaf = H * tau,
			       .k_spine = 2 * (1 + lc_gen_below(seed, 3)),
			       .tau = tau,
			       .wiring = w};

	if (tau == 2 && f.k_spine % 4) /* k_spine/tau leaves per pod; keep it even for dual */
		f.k_spine += 2;
	f.k_ocs = f.pods * ocs_fabric_ports_per_pod(&f) + lc_gen_below(seed, 3);
	return f;
}

static void run_sequence(const struct ocs_fabric *f, uint64_t *seed, struct stats *st)
{
	struct seq sq = {
		.f = f, .N = ocs_fabric_leaves(f), .H = ocs_fabric_groups(f), .P = f->pods};
	int jobs = 2 + lc_gen_below(seed, 5);
	bool small = lc_gen_below(seed, 2);
	unsigned char *allowed = malloc((size_t)sq.N);

	sq.load = calloc((size_t)sq.N * sq.H, sizeof(long));
	sq.circuits = calloc((size_t)sq.H * sq.P * sq.P, sizeof(long));
	sq.all = malloc(sizeof(*sq.all));
	for (int k = 0; k < jobs; k++) {
		/*
		 * Leaves in 1 of 1, 2 or 3 draws: later jobs overlap earlier ones.
		 * Half the sequences fill at most half a leaf per job, so that
		 * contention rather than full leaves decides more of them.
		 */
		int odds = 1 + lc_gen_below(seed, 3);
		int fill = 1 + lc_gen_below(seed, small ? f->k_leaf / 2 : f->k_leaf);
		enum lc_gen_shape shape = (enum lc_gen_shape)lc_gen_below(seed, LC_GEN_SHAPES);
		struct lc_options opt = {.realize = true};
		struct lc_leaf_usage *u = NULL;
		struct lc_plan *p = NULL;
		size_t n, n_u = 0;
		struct lc_demand *d;

		for (int l = 0; l < sq.N; l++)
			allowed[l] = lc_gen_below(seed, odds) == 0;
		d = lc_gen_demand(f, shape, allowed, fill, seed, &n);
		CHECK(d && lc_validate(f, d, n, NULL, 0, NULL, 0) == 0, "generated demand");
		CHECK(lc_usage_from_assignment(sq.all, sq.n_all, &u, &n_u) == 0, "usage");
		opt.usage = u;
		opt.n_usage = n_u;
		CHECK(lc_plan(f, d, n, sq.xcs, sq.n_xcs, &opt, &p) == 0, "job %d", k);
		if (p) {
			check_job(&sq, d, n, p, st);
			compare_blind(&sq, d, n, p, st);
			sq.all =
				realloc(sq.all, (sq.n_all + p->n_assignment + 1) * sizeof(*sq.all));
			memcpy(sq.all + sq.n_all, p->assignment,
			       p->n_assignment * sizeof(*p->assignment));
			sq.n_all += p->n_assignment;
			free(sq.xcs);
			sq.xcs = p->xcs;
			sq.n_xcs = p->n_xcs;
			p->xcs = NULL;
		}
		lc_plan_free(p);
		free(u);
		free(d);
	}
	st->sequences++;
	free(allowed);
	free(sq.load);
	free(sq.circuits);
	free(sq.all);
	free(sq.xcs);
}

int main(int argc, char **argv)
{
	static const int Hs[] = {2, 3, 4, 5, 6, 8};
	static const enum ocs_wiring wirings[] = {OCS_WIRING_CROSS, OCS_WIRING_DUAL,
						  OCS_WIRING_STRAIGHT};
	uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 0) : 20261122;
	int per = argc > 2 ? atoi(argv[2]) : 60;
	struct stats st = {0};

	for (size_t hi = 0; hi < sizeof(Hs) / sizeof(Hs[0]); hi++)
		for (int tau = 1; tau <= 2; tau++)
			for (size_t wi = 0; wi < 3; wi++)
				for (int k = 0; k < per; k++) {
					uint64_t at = seed;
					struct ocs_fabric f =
						make_fabric(Hs[hi], tau, wirings[wi], &seed);

					snprintf(current, sizeof(current),
						 "seed %llu H %d tau %d %s P %d k_spine %d",
						 (unsigned long long)at, Hs[hi], tau,
						 ocs_wiring_name(wirings[wi]), f.pods, f.k_spine);
					run_sequence(&f, &seed, &st);
				}
	printf("%ld sequences, %ld jobs checked: %ld contention-free, %ld with unplaced links "
	       "(%ld links)\n",
	       st.sequences, st.jobs, st.contention_free_jobs, st.jobs_with_unplaced,
	       st.unplaced_links);
	for (int t = 0; t < 2; t++)
		printf("tau %d: %ld jobs planned on a contention-free load end contended: %ld with "
		       "the usage, %ld planned blind to it\n",
		       t + 1, st.clean_before[t], st.aware_contended[t], st.blind_contended[t]);
	if (failures)
		fprintf(stderr, "%d checks failed\n", failures);
	return failures ? 1 : 0;
}
