/*
 * test_sb_model.c - the table of device models (southbound/sb_model.c),
 * without a device: names, default port maps and the maps refused; the
 * edit each cross-connect model writes (removals first, only what
 * differs, the device's port ids); reads back through the port map with
 * a pair's status from its ports' health; what a Polatis switch says of
 * itself and of ocsd's ports (product, status, peer-port); the notifications each model
 * maps to faults; and a property: for random sets on random maps, the
 * replace content a model writes reads back through the same model as the
 * same set.
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

#include "sb_model.h"

static void test_names_and_maps(void **state)
{
	(void)state;
	enum sb_model m;
	const char *names[] = {"ocs-switch", "ocs-transceiver", "polatis"};
	for (int i = 0; i < SB_MODEL_COUNT; i++) {
		assert_int_equal(sb_model_from_name(names[i], &m), 0);
		assert_int_equal(m, i);
		assert_string_equal(sb_model(m)->name, names[i]);
	}
	assert_int_equal(sb_model_from_name("Polatis", &m), -ENOENT);
	assert_true(sb_model(SB_MODEL_TRANSCEIVER)->bundles);
	assert_false(sb_model(SB_MODEL_POLATIS)->bundles);
	assert_string_equal(sb_model(SB_MODEL_POLATIS)->ns,
			    "http://www.polatis.com/yang/optical-switch");

	struct sb_port_map pm = sb_model_default_ports(SB_MODEL_POLATIS, 48);
	assert_int_equal(pm.in_first, 1);
	assert_int_equal(pm.out_first, 49);
	assert_int_equal(pm.n, 48);
	pm = sb_model_default_ports(SB_MODEL_SWITCH, 48);
	assert_int_equal(pm.in_first, 0);
	assert_int_equal(pm.out_first, 0);

	char why[160];
	pm = sb_model_default_ports(SB_MODEL_POLATIS, 48);
	assert_int_equal(sb_model_check_ports(SB_MODEL_POLATIS, &pm, why, sizeof(why)), 0);
	/* overlapping ingress and egress ids */
	pm = (struct sb_port_map){1, 40, 48};
	assert_int_equal(sb_model_check_ports(SB_MODEL_POLATIS, &pm, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "overlap"));
	/* past the model's 65535 */
	pm = (struct sb_port_map){1, 65500, 48};
	assert_int_equal(sb_model_check_ports(SB_MODEL_POLATIS, &pm, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "65535"));
	/* port id 0 does not exist on a Polatis switch */
	pm = (struct sb_port_map){0, 100, 48};
	assert_int_equal(sb_model_check_ports(SB_MODEL_POLATIS, &pm, why, sizeof(why)), -EINVAL);
	/* a Polatis device needs to know how many ports ocsd uses */
	pm = sb_model_default_ports(SB_MODEL_POLATIS, 0);
	assert_int_equal(sb_model_check_ports(SB_MODEL_POLATIS, &pm, why, sizeof(why)), -EINVAL);
	/* ocs-switch: duplex ports share ids; unbounded is fine */
	pm = sb_model_default_ports(SB_MODEL_SWITCH, 0);
	assert_int_equal(sb_model_check_ports(SB_MODEL_SWITCH, &pm, why, sizeof(why)), 0);
	pm = sb_model_default_ports(SB_MODEL_SWITCH, 4096);
	assert_int_equal(sb_model_check_ports(SB_MODEL_SWITCH, &pm, why, sizeof(why)), 0);
	pm = sb_model_default_ports(SB_MODEL_SWITCH, 4097);
	assert_int_equal(sb_model_check_ports(SB_MODEL_SWITCH, &pm, why, sizeof(why)), -EINVAL);
}

/* The edit content model m writes from current to target. */
static char *edit(enum sb_model m, const struct sb_port_map *pm, const struct sb_xc *cur,
		  size_t n_cur, const struct sb_xc *tgt, size_t n_tgt)
{
	struct sb_buf b = {0};
	sb_model(m)->xc_edit(&b, pm, cur, n_cur, tgt, n_tgt);
	assert_false(b.oom);
	return b.s;
}

static void test_polatis_edit(void **state)
{
	(void)state;
	struct sb_port_map pm = sb_model_default_ports(SB_MODEL_POLATIS, 8);
	struct sb_xc cur[] = {{0, 1}, {1, 0}, {2, 3}};
	struct sb_xc tgt[] = {{0, 1}, {2, 4}, {5, 6}};
	char *s = edit(SB_MODEL_POLATIS, &pm, cur, 3, tgt, 3);
	const char *want = "<cross-connects xmlns=\"http://www.polatis.com/yang/optical-switch\" "
			   "xmlns:nc=\"urn:ietf:params:xml:ns:netconf:base:1.0\">"
			   /* ocsd port 1 -> ingress 2: removed first */
			   "<pair nc:operation=\"delete\"><ingress>2</ingress></pair>"
			   /* 2 -> 4 changed: ingress 3, egress 9 + 4 */
			   "<pair><ingress>3</ingress><egress>13</egress></pair>"
			   "<pair><ingress>6</ingress><egress>15</egress></pair>"
			   "</cross-connects>";
	assert_string_equal(s, want);
	free(s);
	/* nothing differs: an empty container */
	s = edit(SB_MODEL_POLATIS, &pm, tgt, 3, tgt, 3);
	assert_null(strstr(s, "<pair"));
	free(s);
	/* ocs-switch: the same diff in its own nodes, ids as ocsd numbers them */
	struct sb_port_map sw = sb_model_default_ports(SB_MODEL_SWITCH, 8);
	s = edit(SB_MODEL_SWITCH, &sw, cur, 3, tgt, 3);
	assert_string_equal(s, "<cross-connects xmlns=\"urn:ocsd:yang:ocs-switch\" "
			       "xmlns:nc=\"urn:ietf:params:xml:ns:netconf:base:1.0\">"
			       "<connection nc:operation=\"remove\"><input>1</input></connection>"
			       "<connection><input>2</input><output>4</output></connection>"
			       "<connection><input>5</input><output>6</output></connection>"
			       "</cross-connects>");
	free(s);
}

static int parse(enum sb_model m, const struct sb_port_map *pm, const char *data, bool with_state,
		 struct sb_xc_state **out, size_t *n, char *why)
{
	return sb_model(m)->xc_parse(data, strlen(data), pm, with_state, out, n, why, 160);
}

static void test_polatis_read(void **state)
{
	(void)state;
	struct sb_port_map pm = sb_model_default_ports(SB_MODEL_POLATIS, 8);
	/*
	 * port-config first (a reply may carry it; the model's <get> no longer
	 * asks for it), prefixes, a pair on a failed egress, one on a disabled
	 * ingress: a pair present reads connected, port health is not the
	 * read-back's (the info read reports it)
	 */
	const char *data = "<p:port-config xmlns:p=\"http://www.polatis.com/yang/optical-switch\">"
			   "<p:port><p:port-id>3</p:port-id><p:status>ENABLED</p:status></p:port>"
			   "<p:port><p:port-id>14</p:port-id><p:status>FAILED</p:status></p:port>"
			   "<p:port><p:port-id>7</p:port-id><p:status>DISABLED</p:status></p:port>"
			   "</p:port-config>"
			   "<cross-connects xmlns=\"http://www.polatis.com/yang/optical-switch\">"
			   "<pair><ingress>7</ingress><egress>10</egress></pair>"
			   "<pair><ingress>3</ingress><egress>14</egress></pair>"
			   "<pair><ingress>1</ingress><egress>11</egress></pair>"
			   "</cross-connects>";
	struct sb_xc_state *x;
	size_t n;
	char why[160];
	/* the <get>'s filter asks for the pairs alone */
	assert_string_equal(
		sb_model(SB_MODEL_POLATIS)->xc_filter(true),
		"<cross-connects xmlns=\"http://www.polatis.com/yang/optical-switch\"/>");
	assert_int_equal(parse(SB_MODEL_POLATIS, &pm, data, true, &x, &n, why), 0);
	assert_int_equal(n, 3);
	/* sorted by ocsd input; egress ids start at 9: 1 -> 11 is ocsd 0 -> 2 */
	assert_int_equal(x[0].in, 0);
	assert_int_equal(x[0].out, 2);
	assert_int_equal(x[0].status, SB_XC_STATUS_CONNECTED);
	assert_int_equal(x[1].in, 2);
	assert_int_equal(x[1].out, 5);
	assert_int_equal(x[1].status, SB_XC_STATUS_CONNECTED); /* egress 14 FAILED: not its say */
	assert_int_equal(x[2].in, 6);
	assert_int_equal(x[2].out, 1);
	assert_int_equal(x[2].status, SB_XC_STATUS_CONNECTED); /* ingress 7 DISABLED: likewise */
	free(x);
	/* without state: configuration only */
	assert_int_equal(parse(SB_MODEL_POLATIS, &pm, data, false, &x, &n, why), 0);
	assert_int_equal(n, 3);
	assert_int_equal(x[1].status, SB_XC_STATUS_UNKNOWN);
	free(x);
	/* a pair ocsd cannot account for is refused, never dropped */
	const char *foreign =
		"<cross-connects xmlns=\"http://www.polatis.com/yang/optical-switch\">"
		"<pair><ingress>1</ingress><egress>11</egress></pair>"
		"<pair><ingress>30</ingress><egress>40</egress></pair>"
		"</cross-connects>";
	assert_int_equal(parse(SB_MODEL_POLATIS, &pm, foreign, true, &x, &n, why), -EPROTO);
	assert_null(x);
	assert_non_null(strstr(why, "pair 30 -> 40"));
	/* an egress id in the ingress range is outside too */
	const char *swapped =
		"<cross-connects xmlns=\"http://www.polatis.com/yang/optical-switch\">"
		"<pair><ingress>1</ingress><egress>2</egress></pair></cross-connects>";
	assert_int_equal(parse(SB_MODEL_POLATIS, &pm, swapped, true, &x, &n, why), -EPROTO);
	/* port 0, an unknown status: unreadable */
	const char *zero = "<cross-connects xmlns=\"http://www.polatis.com/yang/optical-switch\">"
			   "<pair><ingress>0</ingress><egress>10</egress></pair></cross-connects>";
	assert_int_equal(parse(SB_MODEL_POLATIS, &pm, zero, true, &x, &n, why), -EPROTO);
	/* port-config is skipped whatever it holds (the info read refuses this one) */
	const char *status = "<port-config><port><port-id>3</port-id><status>BROKEN</status></port>"
			     "</port-config>";
	assert_int_equal(parse(SB_MODEL_POLATIS, &pm, status, true, &x, &n, why), 0);
	assert_int_equal(n, 0);
	/* a list key twice ("3" and "03" are one port) is refused (fuzz_sb_polatis found it) */
	const char *twice =
		"<cross-connects xmlns=\"http://www.polatis.com/yang/optical-switch\">"
		"<pair><ingress>3</ingress><egress>10</egress></pair>"
		"<pair><ingress>03</ingress><egress>11</egress></pair></cross-connects>";
	assert_int_equal(parse(SB_MODEL_POLATIS, &pm, twice, false, &x, &n, why), -EPROTO);
	/* empty data: no cross-connects */
	assert_int_equal(parse(SB_MODEL_POLATIS, &pm, "", true, &x, &n, why), 0);
	assert_int_equal(n, 0);
}

static void test_polatis_info(void **state)
{
	(void)state;
	struct sb_port_map pm = sb_model_default_ports(SB_MODEL_POLATIS, 4);
	const char *data =
		"<product-information xmlns=\"http://www.polatis.com/yang/optical-switch\">"
		"<manufacturer>ACME &amp; Co</manufacturer><serial-number>S-1</serial-number>"
		"<model-name>8x8</model-name><software-version>7.1</software-version>"
		"<fan-speed>3</fan-speed></product-information>"
		"<port-config xmlns=\"http://www.polatis.com/yang/optical-switch\">"
		"<port><port-id>6</port-id><status>ENABLED</status>"
		"<peer-port>pod1-spine0-port2</peer-port></port>"
		"<port><port-id>2</port-id><status>FAILED</status><peer-port/></port>"
		"<port><port-id>9</port-id><status>ENABLED</status></port>"
		"<port><port-id>3</port-id><status>DISABLED</status>"
		"<peer-port>pod2-spine0-port2</peer-port></port>"
		"</port-config>";
	struct sb_device_info info;
	char why[160];
	const struct sb_model_ops *m = sb_model(SB_MODEL_POLATIS);
	assert_non_null(m->info_filter);
	assert_null(sb_model(SB_MODEL_SWITCH)->info_filter);
	assert_int_equal(m->info_parse(data, strlen(data), &pm, &info, why, sizeof(why)), 0);
	assert_string_equal(info.product.manufacturer, "ACME & Co");
	assert_string_equal(info.product.serial, "S-1");
	assert_string_equal(info.product.model, "8x8");
	assert_string_equal(info.product.software, "7.1");
	/* ingress 1..4, egress 5..8: port 9 is not ocsd's; sorted by (port, egress) */
	assert_int_equal(info.n_ports, 3);
	assert_int_equal(info.ports[0].port, 1);
	assert_false(info.ports[0].egress);
	assert_int_equal(info.ports[0].status, SB_PORT_STATUS_FAILED);
	assert_string_equal(info.ports[0].peer, "");
	assert_int_equal(info.ports[1].port, 1);
	assert_true(info.ports[1].egress);
	assert_string_equal(info.ports[1].peer, "pod1-spine0-port2");
	assert_int_equal(info.ports[2].port, 2);
	assert_int_equal(info.ports[2].status, SB_PORT_STATUS_DISABLED);
	free(info.ports);
	/* an unknown status and a port-id twice ("1" and "01") are unreadable here */
	const char *status = "<port-config><port><port-id>3</port-id><status>BROKEN</status></port>"
			     "</port-config>";
	assert_int_equal(m->info_parse(status, strlen(status), &pm, &info, why, sizeof(why)),
			 -EPROTO);
	assert_null(info.ports);
	const char *port_twice = "<port-config><port><port-id>1</port-id></port>"
				 "<port><port-id>01</port-id></port></port-config>";
	assert_int_equal(
		m->info_parse(port_twice, strlen(port_twice), &pm, &info, why, sizeof(why)),
		-EPROTO);
	assert_null(info.ports);
}

struct leaves {
	const char *names[3], *values[3];
};

static const char *leaf(const void *ctx, const char *name)
{
	const struct leaves *l = ctx;
	for (int i = 0; i < 3 && l->names[i]; i++)
		if (!strcmp(l->names[i], name))
			return l->values[i];
	return NULL;
}

static bool notif(enum sb_model m, const char *name, const struct leaves *l, struct sb_notif *n)
{
	struct sb_port_map pm = sb_model_default_ports(m, 8);
	*n = (struct sb_notif){.kind = SB_NOTIF_OTHER};
	return sb_model(m)->notif(name, leaf, l, &pm, n);
}

static void test_notifications(void **state)
{
	(void)state;
	struct sb_notif n;
	/* polatis: an alarm on egress 13 or ingress 5 is ocsd's port 4 */
	struct leaves l = {{"port-id", "port-label"}, {"13", "to leaf 4"}};
	assert_true(notif(SB_MODEL_POLATIS, "port-power-alarm", &l, &n));
	assert_int_equal(n.kind, SB_NOTIF_PORT_STATE);
	assert_int_equal(n.port, 4);
	assert_false(n.port_up);
	l.values[0] = "5";
	assert_true(notif(SB_MODEL_POLATIS, "port-power-clear", &l, &n));
	assert_int_equal(n.port, 4);
	assert_true(n.port_up);
	/* a port ocsd does not use, another notification, a missing port-id */
	l.values[0] = "40";
	assert_false(notif(SB_MODEL_POLATIS, "port-power-alarm", &l, &n));
	l.values[0] = "5";
	assert_false(notif(SB_MODEL_POLATIS, "system-error", &l, &n));
	struct leaves none = {{NULL}, {NULL}};
	assert_false(notif(SB_MODEL_POLATIS, "port-power-alarm", &none, &n));
	/* ocs-switch: port-state-change, ids as ocsd's */
	struct leaves s = {{"port", "oper-state"}, {"3", "failed"}};
	assert_true(notif(SB_MODEL_SWITCH, "port-state-change", &s, &n));
	assert_int_equal(n.port, 3);
	assert_false(n.port_up);
	assert_false(notif(SB_MODEL_SWITCH, "port-power-alarm", &l, &n));
	/* ocs-transceiver: node-fault and loss-of-light */
	struct leaves t = {{"node", "faulty", "bundle"}, {"17", "true", "1"}};
	assert_true(notif(SB_MODEL_TRANSCEIVER, "node-fault", &t, &n));
	assert_int_equal(n.kind, SB_NOTIF_NODE_FAULT);
	assert_int_equal(n.node, 17);
	assert_true(n.faulty);
	assert_true(notif(SB_MODEL_TRANSCEIVER, "loss-of-light", &t, &n));
	assert_int_equal(n.kind, SB_NOTIF_LOSS_OF_LIGHT);
	assert_int_equal(n.bundle, 1);
	assert_false(notif(SB_MODEL_TRANSCEIVER, "port-state-change", &s, &n));
}

/* Property: replace content read back through the same model is the same set. */
static void test_property_replace_reads_back(void **state)
{
	(void)state;
	srand(23);
	enum sb_model ms[] = {SB_MODEL_SWITCH, SB_MODEL_POLATIS};
	for (int round = 0; round < 400; round++) {
		enum sb_model m = ms[round % 2];
		uint32_t ports = 1 + (uint32_t)(rand() % 300);
		struct sb_port_map pm = sb_model_default_ports(m, ports);
		if (m == SB_MODEL_POLATIS && rand() % 2) /* a map of its own, egress first */
			pm = (struct sb_port_map){.in_first = 1 + ports + (uint32_t)(rand() % 50),
						  .out_first = 1 + (uint32_t)(rand() % 3),
						  .n = ports};
		if (m == SB_MODEL_POLATIS) {
			char why[160];
			if (pm.out_first + ports > pm.in_first)
				pm.in_first = pm.out_first + ports;
			assert_int_equal(sb_model_check_ports(m, &pm, why, sizeof(why)), 0);
		}
		/* a random partial permutation: unique inputs, unique outputs */
		uint16_t *perm = malloc(ports * sizeof(*perm));
		for (uint32_t i = 0; i < ports; i++)
			perm[i] = (uint16_t)i;
		for (uint32_t i = ports - 1; i > 0; i--) {
			uint32_t j = (uint32_t)rand() % (i + 1);
			uint16_t t = perm[i];
			perm[i] = perm[j];
			perm[j] = t;
		}
		struct sb_xc *xcs = malloc(ports * sizeof(*xcs));
		size_t n = 0;
		for (uint32_t i = 0; i < ports; i++)
			if (rand() % 3)
				xcs[n++] = (struct sb_xc){(uint16_t)i, perm[i]};
		struct sb_buf b = {0};
		sb_model(m)->xc_replace(&b, &pm, xcs, n);
		assert_false(b.oom);
		struct sb_xc_state *got;
		size_t n_got;
		char why[160];
		assert_int_equal(sb_model(m)->xc_parse(b.s ? b.s : "", b.len, &pm, false, &got,
						       &n_got, why, sizeof(why)),
				 0);
		assert_int_equal(n_got, n);
		for (size_t i = 0; i < n; i++) { /* both sorted by input */
			assert_int_equal(got[i].in, xcs[i].in);
			assert_int_equal(got[i].out, xcs[i].out);
		}
		free(got);
		free(b.s);
		free(xcs);
		free(perm);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names_and_maps),
		cmocka_unit_test(test_polatis_edit),
		cmocka_unit_test(test_polatis_read),
		cmocka_unit_test(test_polatis_info),
		cmocka_unit_test(test_notifications),
		cmocka_unit_test(test_property_replace_reads_back),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
