/*
 * test_rail_swap_property.c - property tests of the rail-OCS GPU swap
 * (solvers/rail_swap.c) over random fabrics (groups, servers per OCS,
 * spares, rails), random jobs holding GPUs, faults and heals.
 *
 * The test keeps its own model of every device: the output each input is
 * cross-connected to. It starts from the initial cross-connects, applies
 * each swap's removals (which must be there) and additions (whose ports
 * must be free), and derives from the devices alone which GPU each rail
 * port reaches, with its own port arithmetic (not fabric.h's). Checked
 * after every fault:
 *   - the initial map joins GPU r of every active server to its own rail
 *     port r, two one-way cross-connects per join;
 *   - the kind is the expected one, computed here: nothing to move when the
 *     failed GPU serves no rail port, else case 1 whenever an idle GPU exists
 *     in the server (and the GPU that takes over is one), else case 2
 *     whenever an idle spare exists in the group, else a refusal;
 *   - every swap keeps each rail port that carried a healthy job GPU or the
 *     failed GPU joined to exactly one GPU, a healthy one (the rail port an
 *     idle GPU leaves in case 1 carried no job: it may go dark);
 *   - the failed GPU is joined to nothing;
 *   - no GPU serves two rail ports, and every circuit is two-way (traced
 *     here, and rail_check_xcs() agrees);
 *   - case 2 moves all of the server's rail ports (GPU r of the spare on
 *     rail port r of the set) or none of them: no GPU of the failed server
 *     is joined afterwards;
 *   - a refusal changes nothing and names the server and the group;
 *   - the devices equal rail_port_map_xcs() of the applied map, and
 *     rail_port_map_from_xcs() reads the same map back;
 *   - removing one cross-connect of a join makes rail_check_xcs() report a
 *     one-way circuit.
 *
 * Usage: test_rail_swap_property [seed] [instances]
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rail_swap.h"

static int failures;
static char current[160];

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

static uint64_t next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static int below(uint64_t *s, int n)
{
	return (int)(next(s) % (uint64_t)n);
}

/* The test's own view of the fabric: sizes and port arithmetic. */
struct world {
	int groups, S, A, R; /* servers per group, active per group, rails */
	int ports;	     /* per device: S*R GPU side + A*R switch side */
	int *out;	     /* out[group*ports + input] = output, or -1 */
	uint8_t *flags;	     /* per GPU */
};

static int gpu_count(const struct world *w)
{
	return w->groups * w->S * w->R;
}

static int rail_ports(const struct world *w)
{
	return w->groups * w->A * w->R;
}

/* Rail port q: group q / (A*R), active server i = (q % (A*R)) / R, rail q % R. */
static int port_group(const struct world *w, int q)
{
	return q / (w->A * w->R);
}

static int port_switch_side(const struct world *w, int q)
{
	return w->S * w->R + q % (w->A * w->R);
}

static int port_server(const struct world *w, int q)
{
	return port_group(w, q) * w->S + (q % (w->A * w->R)) / w->R;
}

/* The GPU rail port q reaches through a clean two-way join, or -1. */
static int traced_gpu(const struct world *w, int q)
{
	int g = port_group(w, q), sw = port_switch_side(w, q);
	int gp = w->out[g * w->ports + sw];

	if (gp < 0 || gp >= w->S * w->R || w->out[g * w->ports + gp] != sw)
		return -1;
	return (g * w->S + gp / w->R) * w->R + gp % w->R;
}

/* Every input's output leads back to it, and links GPU side to switch side. */
static bool all_two_way(const struct world *w)
{
	for (int g = 0; g < w->groups; g++)
		for (int in = 0; in < w->ports; in++) {
			int o = w->out[g * w->ports + in];

			if (o < 0)
				continue;
			if (w->out[g * w->ports + o] != in)
				return false;
			if ((in < w->S * w->R) == (o < w->S * w->R))
				return false;
		}
	return true;
}

static int *trace_all(const struct world *w)
{
	int *by_port = malloc(sizeof(int) * (size_t)rail_ports(w));

	for (int q = 0; q < rail_ports(w); q++)
		by_port[q] = traced_gpu(w, q);
	return by_port;
}

/* The rail port GPU x is joined to (from a trace), -1 none; counts joins. */
static int port_of(const struct world *w, const int *trace, int x, int *joins)
{
	int found = -1;

	*joins = 0;
	for (int q = 0; q < rail_ports(w); q++)
		if (trace[q] == x) {
			found = q;
			(*joins)++;
		}
	return found;
}

static bool idle(const struct world *w, int x)
{
	return !(w->flags[x] & (RAIL_GPU_FAULTY | RAIL_GPU_HELD));
}

static void apply_to_devices(struct world *w, const struct rail_swap_result *res)
{
	for (size_t i = 0; i < res->n_removals; i++) {
		const struct ocs_xc *x = &res->removals[i];
		int *slot = &w->out[x->group * w->ports + x->in];

		CHECK(x->device == 0 && *slot == x->out, "removal %d:%d->%d is not on the device",
		      x->group, x->in, x->out);
		*slot = -1;
	}
	for (size_t i = 0; i < res->n_additions; i++) {
		const struct ocs_xc *x = &res->additions[i];
		int *slot = &w->out[x->group * w->ports + x->in];
		bool out_free = true;

		for (int in = 0; in < w->ports; in++)
			out_free &= w->out[x->group * w->ports + in] != x->out;
		CHECK(*slot == -1 && out_free, "addition %d:%d->%d on a busy port", x->group, x->in,
		      x->out);
		*slot = x->out;
	}
}

/* Devices as a sorted cross-connect list, to compare with the solver's. */
static struct ocs_xc *device_xcs(const struct world *w, size_t *n)
{
	struct ocs_xc *xcs = malloc(sizeof(*xcs) * (size_t)(w->groups * w->ports + 1));

	*n = 0;
	for (int g = 0; g < w->groups; g++)
		for (int in = 0; in < w->ports; in++)
			if (w->out[g * w->ports + in] >= 0)
				xcs[(*n)++] = (struct ocs_xc){g, 0, in, w->out[g * w->ports + in]};
	return xcs;
}

static void check_devices_match(const struct world *w, const struct ocs_rail_fabric *f,
				const struct rail_port_map *m)
{
	size_t n_dev, n_map;
	struct ocs_xc *dev = device_xcs(w, &n_dev), *mine;
	struct rail_port_map back;
	struct rail_violation v[4];

	CHECK(rail_port_map_xcs(f, m, &mine, &n_map) == 0, "map does not fit");
	CHECK(n_dev == n_map && (n_dev == 0 || memcmp(dev, mine, n_dev * sizeof(*dev)) == 0),
	      "devices hold %zu cross-connects, the map realizes %zu", n_dev, n_map);
	CHECK(rail_check_xcs(f, dev, n_dev, v, 4) == 0, "L2 check: %s", v[0].reason);
	if (rail_port_map_init(&back, f) == 0) {
		CHECK(rail_port_map_from_xcs(f, dev, n_dev, &back) == 0, "read back");
		CHECK(memcmp(back.gpu, m->gpu, sizeof(int64_t) * (size_t)m->n_ports) == 0,
		      "map read back from the devices differs");
		rail_port_map_clear(&back);
	}
	/* One cross-connect of a join removed: a one-way circuit. */
	if (n_dev > 0) {
		size_t drop = n_dev / 2;
		int bad;

		memmove(&dev[drop], &dev[drop + 1], (n_dev - drop - 1) * sizeof(*dev));
		bad = rail_check_xcs(f, dev, n_dev - 1, v, 4);
		CHECK(bad == 1 && strstr(v[0].reason, "one-way"), "mutation not caught (%d)", bad);
	}
	free(dev);
	free(mine);
}

struct stats {
	long swaps, none, case1, case2, refused;
};

/* One fault of GPU x: the swap, checked against the devices. */
static void fault(struct world *w, const struct ocs_rail_fabric *f, struct rail_port_map *m, int x,
		  struct stats *st)
{
	int n_ports = rail_ports(w), joins;
	int *before = trace_all(w), *after;
	int server = x / w->R, group = server / w->S;
	int failed_port = port_of(w, before, x, &joins);
	bool idle_in_server = false, spare_in_group = false;
	bool *must_serve = calloc((size_t)n_ports, sizeof(bool));
	uint8_t *flags_before = malloc((size_t)gpu_count(w));
	enum rail_swap_kind want;
	struct rail_swap_result res;

	w->flags[x] |= RAIL_GPU_FAULTY;
	memcpy(flags_before, w->flags, (size_t)gpu_count(w));
	for (int r = 0; r < w->R; r++)
		idle_in_server |= server * w->R + r != x && idle(w, server * w->R + r);
	for (int i = 0; i < w->S; i++) {
		int s = group * w->S + i, ok = s != server;

		for (int r = 0; ok && r < w->R; r++)
			ok = idle(w, s * w->R + r) && port_of(w, before, s * w->R + r, &joins) < 0;
		spare_in_group |= ok;
	}
	want = failed_port < 0	? RAIL_SWAP_NONE
	       : idle_in_server ? RAIL_SWAP_IDLE_GPU
	       : spare_in_group ? RAIL_SWAP_SPARE_SERVER
				: RAIL_SWAP_REFUSED;
	for (int q = 0; q < n_ports; q++)
		must_serve[q] = before[q] == x ||
				(before[q] >= 0 && (w->flags[before[q]] & RAIL_GPU_HELD) &&
				 !(w->flags[before[q]] & RAIL_GPU_FAULTY));

	CHECK(rail_swap(f, m, w->flags, x, &res) == 0, "rail_swap failed for GPU %d", x);
	st->swaps++;
	CHECK(res.kind == want, "GPU %d: kind %s, expected %s", x, rail_swap_kind_name(res.kind),
	      rail_swap_kind_name(want));
	apply_to_devices(w, &res);
	rail_swap_apply(m, &res);
	after = trace_all(w);
	CHECK(all_two_way(w), "a one-way circuit after GPU %d's swap", x);
	for (int g = 0; g < gpu_count(w); g++) {
		port_of(w, after, g, &joins);
		CHECK(joins <= 1, "GPU %d serves %d rail ports", g, joins);
	}
	switch (res.kind) {
	case RAIL_SWAP_NONE:
		st->none++;
		CHECK(res.n_changes == 0 && res.n_removals == 0 && res.n_additions == 0,
		      "nothing to move, yet changes");
		break;
	case RAIL_SWAP_IDLE_GPU:
		st->case1++;
		CHECK(res.idle_gpu / w->R == server && res.idle_gpu != x && idle(w, res.idle_gpu),
		      "GPU %" PRId64 " is not an idle GPU of server %d", res.idle_gpu, server);
		CHECK(after[failed_port] == res.idle_gpu, "the failed GPU's port reaches %d",
		      after[failed_port]);
		break;
	case RAIL_SWAP_SPARE_SERVER: {
		int set = port_server(w, failed_port);
		int sp = res.spare_server;

		st->case2++;
		CHECK(sp / w->S == group && sp != server, "spare %d not in group %d", sp, group);
		for (int q = 0; q < n_ports; q++) {
			if (port_server(w, q) == set)
				CHECK(after[q] == sp * w->R + q % w->R,
				      "rail port %d of the set reaches %d, not GPU %d of spare %d",
				      q, after[q], q % w->R, sp);
			else
				CHECK(after[q] == before[q], "rail port %d outside the set changed",
				      q);
			CHECK(after[q] < 0 || after[q] / w->R != server,
			      "GPU %d of the failed server still on rail port %d", after[q], q);
		}
		break;
	}
	case RAIL_SWAP_REFUSED: {
		char want_s[32], want_g[32];

		st->refused++;
		snprintf(want_s, sizeof(want_s), "server %d ", server);
		snprintf(want_g, sizeof(want_g), "group %d", group);
		CHECK(res.n_changes == 0 && res.n_removals == 0 && res.n_additions == 0,
		      "a refusal changed something");
		CHECK(memcmp(before, after, sizeof(int) * (size_t)n_ports) == 0,
		      "devices changed on a refusal");
		CHECK(strstr(res.reason, want_s) && strstr(res.reason, want_g), "reason \"%s\"",
		      res.reason);
		break;
	}
	}
	if (res.kind == RAIL_SWAP_IDLE_GPU || res.kind == RAIL_SWAP_SPARE_SERVER) {
		port_of(w, after, x, &joins);
		CHECK(joins == 0, "the failed GPU %d is still joined", x);
		for (int q = 0; q < n_ports; q++)
			if (must_serve[q])
				CHECK(after[q] >= 0 && !(w->flags[after[q]] & RAIL_GPU_FAULTY),
				      "rail port %d (GPU %d before) reaches %d after GPU %d's swap",
				      q, before[q], after[q], x);
	}
	/* Jobs follow their GPUs: the new GPU of every held old one. */
	for (size_t i = 0; i < res.n_changes; i++) {
		const struct rail_port_change *c = &res.changes[i];

		CHECK(c->old_gpu == before[c->rail_port],
		      "change of port %" PRId64 " names old GPU %" PRId64 ", the devices had %d",
		      c->rail_port, c->old_gpu, before[c->rail_port]);
		if (c->new_gpu >= 0)
			CHECK(!(flags_before[c->new_gpu] & (RAIL_GPU_HELD | RAIL_GPU_FAULTY)),
			      "new GPU %" PRId64 " was not idle", c->new_gpu);
		if (c->old_gpu >= 0 && c->new_gpu >= 0 && (w->flags[c->old_gpu] & RAIL_GPU_HELD)) {
			w->flags[c->old_gpu] &= (uint8_t)~RAIL_GPU_HELD;
			w->flags[c->new_gpu] |= RAIL_GPU_HELD;
		}
	}
	check_devices_match(w, f, m);
	rail_swap_result_clear(&res);
	free(before);
	free(after);
	free(must_serve);
	free(flags_before);
}

static void run_instance(uint64_t *seed, struct stats *st)
{
	struct ocs_rail_fabric f;
	struct world w;
	struct rail_port_map m;
	struct ocs_xc *xcs;
	size_t n;
	int hold_pct = 20 + below(seed, 80);

	w.groups = 1 + below(seed, 3);
	w.S = 2 + below(seed, 5);
	w.A = w.S - below(seed, w.S);
	w.R = 1 + below(seed, 8);
	w.ports = (w.S + w.A) * w.R;
	f = (struct ocs_rail_fabric){w.groups * w.S, w.R, w.S, w.S - w.A};
	CHECK(ocs_rail_validate(&f, NULL, 0) == 0, "generated fabric invalid");
	w.out = malloc(sizeof(int) * (size_t)(w.groups * w.ports));
	w.flags = calloc((size_t)gpu_count(&w), 1);
	for (int i = 0; i < w.groups * w.ports; i++)
		w.out[i] = -1;
	CHECK(rail_port_map_init(&m, &f) == 0, "init");
	CHECK(rail_port_map_xcs(&f, &m, &xcs, &n) == 0, "initial cross-connects");
	CHECK(n == 2 * (size_t)rail_ports(&w), "%zu initial cross-connects", n);
	for (size_t i = 0; i < n; i++)
		w.out[xcs[i].group * w.ports + xcs[i].in] = xcs[i].out;
	free(xcs);
	CHECK(all_two_way(&w), "initial one-way circuit");
	for (int q = 0; q < rail_ports(&w); q++)
		CHECK(traced_gpu(&w, q) == port_server(&w, q) * w.R + q % w.R,
		      "initial rail port %d reaches %d", q, traced_gpu(&w, q));

	for (int step = 0; step < 40; step++) {
		int x = below(seed, gpu_count(&w)), joins;
		int *trace = trace_all(&w);

		switch (below(seed, 4)) {
		case 0: /* a job takes or releases a joined healthy GPU */
			if (port_of(&w, trace, x, &joins) >= 0 && !(w.flags[x] & RAIL_GPU_FAULTY) &&
			    below(seed, 100) < hold_pct)
				w.flags[x] |= RAIL_GPU_HELD;
			else
				w.flags[x] &= (uint8_t)~RAIL_GPU_HELD;
			break;
		case 1: /* an operator heals a GPU */
			w.flags[x] &= (uint8_t)~RAIL_GPU_FAULTY;
			break;
		default:
			fault(&w, &f, &m, x, st);
		}
		free(trace);
	}
	rail_port_map_clear(&m);
	free(w.out);
	free(w.flags);
}

/* Error paths: unknown GPU, a map of another fabric; clear accepts NULL. */
static void check_errors(void)
{
	struct ocs_rail_fabric f = {8, 4, 4, 1}, other = {12, 4, 4, 1};
	struct rail_port_map m, wrong;
	uint8_t flags[48] = {0};
	struct rail_swap_result res;

	snprintf(current, sizeof(current), "errors");
	rail_swap_result_clear(NULL);
	rail_port_map_clear(NULL);
	CHECK(rail_port_map_init(&m, &f) == 0 && rail_port_map_init(&wrong, &other) == 0, "init");
	CHECK(rail_swap(&f, &m, flags, 32, &res) == -EINVAL, "GPU 32 of 32 accepted");
	CHECK(rail_swap(&f, &m, flags, -1, &res) == -EINVAL, "GPU -1 accepted");
	CHECK(rail_swap(&f, &wrong, flags, 0, &res) == -EINVAL, "a map of another fabric");
	m.gpu[0] = 20; /* a GPU of group 1 on a rail port of group 0 */
	CHECK(rail_swap(&f, &m, flags, 0, &res) == -EINVAL, "a GPU of another group");
	rail_port_map_clear(&m);
	rail_port_map_clear(&wrong);
}

int main(int argc, char **argv)
{
	uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 0) : 20261124;
	int instances = argc > 2 ? atoi(argv[2]) : 2000;
	struct stats st = {0};

	if (seed == 0)
		seed = 1;
	check_errors();
	for (int i = 0; i < instances; i++) {
		snprintf(current, sizeof(current), "seed %" PRIu64 " instance %d", seed, i);
		uint64_t at = seed;
		next(&at);
		seed = at;
		run_instance(&seed, &st);
	}
	printf("rail swap property: %d instances, %ld faults: %ld none, %ld case 1, %ld case 2, "
	       "%ld refused; %d failures\n",
	       instances, st.swaps, st.none, st.case1, st.case2, st.refused, failures);
	/* Every outcome must have been exercised, or the generator is too tame. */
	if (st.none == 0 || st.case1 == 0 || st.case2 == 0 || st.refused == 0) {
		fprintf(stderr, "FAIL: an outcome was never exercised\n");
		return 1;
	}
	return failures ? 1 : 0;
}
