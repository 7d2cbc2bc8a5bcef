/*
 * test_cabling.c - the cabling check (daemon/fabric/cabling.c, issue 23)
 * and the planner's ports out of service (lc_options.out_of_service,
 * solvers/leafcentric.c):
 *   - the expected far end of a device port from the wiring, for the three
 *     wirings, against the wiring's own forward map (ocs_fabric_tx_port,
 *     ocs_fabric_rx_port);
 *   - a swapped peer-port is reported, an empty one is not checked, a
 *     fixed one is reported fixed; a clearance holds while the device
 *     reports the same text and ends when it reports another;
 *   - property: on random fabrics (three wirings) with random ports out of
 *     service, no plan of random demands puts a cross-connect on the input
 *     or the output of a port out of service; a port out of range is
 *     refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>

#include "cabling.h"
#include "leafcentric.h"

static const struct ocs_fabric lab = {
	.pods = 4, .k_leaf = 8, .k_spine = 4, .tau = 2, .k_ocs = 8, .wiring = OCS_WIRING_CROSS};

static void test_expected_names(void **state)
{
	(void)state;
	enum ocs_wiring w[] = {OCS_WIRING_STRAIGHT, OCS_WIRING_DUAL, OCS_WIRING_CROSS};
	for (int wi = 0; wi < 3; wi++) {
		struct ocs_fabric f = lab;
		f.wiring = w[wi];
		/* every spine port, forward: its tx feeds one input, its rx one output */
		for (int h = 0; h < ocs_fabric_groups(&f); h++)
			for (int p = 0; p < f.pods; p++)
				for (int k = 0; k < f.k_spine; k++) {
					struct ocs_spine_port sp = {p, h, k};
					char want[CAB_NAME_MAX], got[CAB_NAME_MAX];
					snprintf(want, sizeof(want), "pod%d-spine%d-port%d", p, h,
						 k);
					struct ocs_device_port tx = ocs_fabric_tx_port(&f, sp);
					struct ocs_device_port rx = ocs_fabric_rx_port(&f, sp);
					int per_group =
						ocs_fabric_devices(&f) / ocs_fabric_groups(&f);
					cab_expected(&f, h * per_group + tx.device,
						     (uint16_t)tx.port, false, got, sizeof(got));
					assert_string_equal(got, want);
					cab_expected(&f, h * per_group + rx.device,
						     (uint16_t)rx.port, true, got, sizeof(got));
					assert_string_equal(got, want);
				}
	}
	/* a port beyond what the pods use: not cabled */
	char got[CAB_NAME_MAX];
	cab_expected(&lab, 0, 7, false, got, sizeof(got));
	assert_string_equal(got, "");
}

struct seen {
	int found, fixed;
	struct cab_entry last;
};

static void on_change(void *ctx, const struct cab_entry *e, bool miswired)
{
	struct seen *s = ctx;
	if (miswired)
		s->found++;
	else
		s->fixed++;
	s->last = *e;
}

/* device 0 of lab (cross wiring) reporting its ports' far ends as `peer` says */
static void report(struct cab_table *t, int id, const char *const *in_peer,
		   const char *const *out_peer, struct seen *s)
{
	struct sb_port_info ports[16];
	struct sb_device_info info = {.ports = ports};
	for (int k = 0; k < 8; k++)
		for (int e = 0; e < 2; e++) {
			const char *p = (e ? out_peer : in_peer)[k];
			if (!p)
				continue;
			struct sb_port_info *pi = &ports[info.n_ports++];
			*pi = (struct sb_port_info){.port = (uint16_t)k, .egress = e};
			snprintf(pi->peer, sizeof(pi->peer), "%s", p);
		}
	assert_int_equal(cab_set(t, id, &info, on_change, s), 0);
}

static void test_report_and_clear(void **state)
{
	(void)state;
	struct cab_table *t = cab_new(&lab);
	struct seen s = {0};
	/* device 0 = group 0 device 0; cross wiring: input p <- pod p spine 0 port 0,
	 * output p -> pod p spine 0 port 1 */
	const char *in_ok[8] = {"pod0-spine0-port0", "pod1-spine0-port0", "pod2-spine0-port0",
				"pod3-spine0-port0"};
	const char *out_ok[8] = {"pod0-spine0-port1", "pod1-spine0-port1", "pod2-spine0-port1",
				 "pod3-spine0-port1"};
	report(t, 0, in_ok, out_ok, &s);
	size_t n;
	cab_list(t, &n);
	assert_int_equal(n, 0);
	assert_int_equal(s.found, 0);
	/* two fibres swapped between pods 1 and 2 on the input side */
	const char *in_swapped[8] = {"pod0-spine0-port0", "pod2-spine0-port0", "pod1-spine0-port0",
				     "pod3-spine0-port0"};
	report(t, 0, in_swapped, out_ok, &s);
	const struct cab_entry *e = cab_list(t, &n);
	assert_int_equal(n, 2);
	assert_int_equal(s.found, 2);
	assert_int_equal(e[0].port, 1);
	assert_false(e[0].egress);
	assert_string_equal(e[0].expected, "pod1-spine0-port0");
	assert_string_equal(e[0].reported, "pod2-spine0-port0");
	assert_int_equal(cab_miswired(t), 2);
	/* the same again: no new event */
	report(t, 0, in_swapped, out_ok, &s);
	assert_int_equal(s.found, 2);
	/* ports 1 and 2 out of service for the planner */
	struct ocs_xc *oos;
	assert_int_equal(cab_out_of_service(t, &oos, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(oos[0].group, 0);
	assert_int_equal(oos[0].device, 0);
	assert_int_equal(oos[0].in, 1);
	assert_int_equal(oos[1].in, 2);
	free(oos);
	/* an operator clears port 1: listed as cleared, back in service */
	assert_int_equal(cab_clear(t, 0, 1), 0);
	assert_int_equal(cab_clear(t, 0, 5), -ENOENT);
	assert_int_equal(cab_clear(t, 3, 1), -ENOENT);
	assert_int_equal(cab_miswired(t), 1);
	assert_int_equal(cab_out_of_service(t, &oos, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(oos[0].in, 2);
	free(oos);
	/* the clearance holds while the text is the same... */
	report(t, 0, in_swapped, out_ok, &s);
	assert_int_equal(cab_miswired(t), 1);
	e = cab_list(t, &n);
	assert_true(e[0].cleared);
	/* ...and ends when the device reports another */
	const char *in_other[8] = {"pod0-spine0-port0", "pod3-spine0-port0", "pod1-spine0-port0",
				   "pod1-spine0-port0"};
	report(t, 0, in_other, out_ok, &s);
	assert_int_equal(cab_miswired(t), 3);
	assert_int_equal(s.found, 4); /* ports 1 and 3 newly reported */
	/* an empty peer-port is not checked; fixing everything reports each fixed */
	const char *none[8] = {""};
	report(t, 0, none, out_ok, &s);
	cab_list(t, &n);
	assert_int_equal(n, 0);
	assert_int_equal(s.fixed, 3);
	/* a port the wiring leaves uncabled expects nothing */
	const char *stray[8] = {[7] = "pod0-spine0-port0"};
	report(t, 0, stray, out_ok, &s);
	e = cab_list(t, &n);
	assert_int_equal(n, 1);
	assert_string_equal(e[0].expected, "");
	cab_free(t);
	/* no fabric: nothing is checked */
	t = cab_new(NULL);
	report(t, 0, in_swapped, out_ok, &s);
	cab_list(t, &n);
	assert_int_equal(n, 0);
	cab_free(t);
}

/* Property: no new cross-connect uses an input or an output of a port out of service. */
static void test_planner_keeps_off(void **state)
{
	(void)state;
	srand(23);
	enum ocs_wiring w[] = {OCS_WIRING_STRAIGHT, OCS_WIRING_DUAL, OCS_WIRING_CROSS};
	int plans = 0, placed_links = 0;
	for (int round = 0; round < 300; round++) {
		struct ocs_fabric f = {.pods = 2 + rand() % 5,
				       .k_leaf = 4,
				       .k_spine = 4,
				       .tau = 1 + rand() % 2,
				       .k_ocs = 8,
				       .wiring = w[rand() % 3]};
		f.k_ocs = f.wiring == OCS_WIRING_DUAL ? 2 * f.pods : f.pods;
		if (ocs_fabric_validate(&f, NULL, 0))
			continue;
		int groups = ocs_fabric_groups(&f), per = ocs_fabric_devices(&f) / groups;
		struct ocs_xc oos[8];
		size_t n_oos = (size_t)(1 + rand() % 8);
		for (size_t i = 0; i < n_oos; i++)
			oos[i] =
				(struct ocs_xc){rand() % groups, rand() % per, rand() % f.k_ocs, 0};
		int leaves = ocs_fabric_leaves(&f);
		struct lc_demand d[12];
		size_t n_d = 0;
		for (int i = 0; i < 12; i++) {
			int a = rand() % leaves, b = rand() % leaves;
			if (a / (leaves / f.pods) == b / (leaves / f.pods))
				continue; /* same pod: the leaf fabric's, not the OCS's */
			d[n_d++] = (struct lc_demand){a < b ? a : b, a < b ? b : a, 1};
		}
		struct lc_options opt = {
			.realize = true, .out_of_service = oos, .n_out_of_service = n_oos};
		struct lc_plan *p;
		if (lc_plan(&f, d, n_d, NULL, 0, &opt, &p))
			continue; /* a demand lc_validate refuses (duplicates): not this test's */
		plans++;
		for (size_t x = 0; x < p->n_xcs; x++) {
			const struct ocs_xc *c = &p->xcs[x];
			for (size_t i = 0; i < n_oos; i++)
				if (c->group == oos[i].group && c->device == oos[i].device &&
				    (c->in == oos[i].in || c->out == oos[i].in))
					fail_msg("round %d: xc g%d d%d %d->%d uses port %d out of "
						 "service",
						 round, c->group, c->device, c->in, c->out,
						 oos[i].in);
		}
		placed_links += (int)p->n_xcs;
		lc_plan_free(p);
	}
	assert_true(plans > 100);
	assert_true(placed_links > 0);
	printf("planner_keeps_off: %d plans, %d cross-connects, none on a port out of service\n",
	       plans, placed_links);
	/* a port out of range is refused */
	struct ocs_xc bad = {0, 0, 99, 0};
	struct lc_options opt = {.realize = true, .out_of_service = &bad, .n_out_of_service = 1};
	struct lc_demand d = {0, 2, 1};
	struct lc_plan *p;
	assert_int_equal(lc_plan(&lab, &d, 1, NULL, 0, &opt, &p), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_expected_names),
		cmocka_unit_test(test_report_and_clear),
		cmocka_unit_test(test_planner_keeps_off),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
