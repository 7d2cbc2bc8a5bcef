/*
 * test_status.c - the status page's renderers (daemon/status/) on
 * hand-made snapshots: the JSON read back with jansson names jobs,
 * circuits, devices, rings and faulty GPUs as given; the SVG has one
 * circuit path per circuit titled with its job, escapes names, colours
 * devices by state, aggregates per pod pair above SP_MAX_CIRCUIT_PATHS
 * (and the JSON above SP_MAX_JSON_CIRCUITS)
 * and blocks above SP_MAX_MARKS; a ring domain's bypassed ring and
 * faulty node are drawn, and its bundle drift is listed in the JSON and
 * marks its nodes; an empty fabric renders.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "status.h"

static struct sp_device devices[] = {
	{"ocs-0", 0, "connected", "healthy", "", false, 0},
	{"ocs-1", 0, "disconnected", "unreachable", "connection refused", false, 0},
	{"ocs-2", 1, "connected", "healthy", "", true, 3},
};

static struct sp_circuit circuits[] = {{0, 1, 2, 0, 1}, {2, 3, 0, 1, 0}};

static struct sp_job jobs[] = {
	{"job<&\"'>", "ACTIVE", "", 8, circuits, 2},
	{"idle", "RELEASED", "released", 0, NULL, 0},
};

static struct sp_snapshot leaf(void)
{
	return (struct sp_snapshot){.kind = SP_LEAF_SPINE,
				    .name = "lab",
				    .role = "follower",
				    .leader = "r1 127.0.0.1:9000",
				    .now_ms = 1000,
				    .pods = 2,
				    .groups = 2,
				    .jobs = jobs,
				    .n_jobs = 2,
				    .devices = devices,
				    .n_devices = 3};
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

static void test_json_leaf(void **state)
{
	struct sp_snapshot s = leaf();
	size_t len;
	char *text = sp_state_json(&s, &len);
	json_error_t e;
	json_t *root, *job, *c;

	(void)state;
	assert_non_null(text);
	assert_int_equal(len, strlen(text));
	root = json_loads(text, 0, &e);
	assert_non_null(root);
	assert_string_equal(json_string_value(json_object_get(root, "role")), "follower");
	assert_string_equal(json_string_value(json_object_get(root, "leader")),
			    "r1 127.0.0.1:9000");
	assert_string_equal(
		json_string_value(json_object_get(json_object_get(root, "fabric"), "kind")),
		"leaf-spine-ocs");
	assert_int_equal(json_array_size(json_object_get(root, "jobs")), 2);
	job = json_array_get(json_object_get(root, "jobs"), 0);
	assert_string_equal(json_string_value(json_object_get(job, "id")), "job<&\"'>");
	assert_int_equal(json_array_size(json_object_get(job, "circuits")), 2);
	c = json_array_get(json_object_get(job, "circuits"), 1);
	assert_string_equal(json_string_value(json_object_get(c, "device")), "ocs-2");
	assert_int_equal(json_integer_value(json_object_get(c, "in")), 3);
	assert_int_equal(json_integer_value(json_object_get(c, "out")), 0);
	assert_int_equal(json_integer_value(json_array_get(json_object_get(c, "pods"), 0)), 1);
	c = json_array_get(json_object_get(root, "devices"), 1);
	assert_string_equal(json_string_value(json_object_get(c, "session")), "disconnected");
	assert_string_equal(json_string_value(json_object_get(c, "error")), "connection refused");
	assert_true(json_is_true(
		json_object_get(json_array_get(json_object_get(root, "devices"), 2), "drained")));
	assert_int_equal(json_integer_value(json_object_get(root, "drift_total")), 3);
	json_decref(root);
	free(text);
}

static void test_svg_leaf(void **state)
{
	struct sp_snapshot s = leaf();
	char *svg = sp_topology_svg(&s, NULL);

	(void)state;
	assert_non_null(svg);
	assert_int_equal(count(svg, "class=\"circuit\""), 2);
	assert_int_equal(count(svg, "<title>job job&lt;&amp;&quot;&apos;&gt;: "), 2);
	assert_non_null(strstr(svg, "job job&lt;&amp;&quot;&apos;&gt;: ocs-0 in 1 -> out 2 "
				    "(pod 0 -> pod 1)</title>"));
	assert_null(strstr(svg, "job<")); /* never raw */
	assert_int_equal(count(svg, "class=\"device\""), 3);
	assert_int_equal(count(svg, "class=\"pod\""), 2);
	assert_int_equal(count(svg, "fill=\"#d33\""), 1);   /* ocs-1 down */
	assert_int_equal(count(svg, "fill=\"#999\""), 1);   /* ocs-2 drained */
	assert_int_equal(count(svg, "stroke=\"#f80\""), 1); /* ocs-2 drifted */
	free(svg);
}

/* Above SP_MAX_CIRCUIT_PATHS circuits: pod-pair edges with counts. */
static void test_svg_aggregates(void **state)
{
	size_t n = SP_MAX_CIRCUIT_PATHS + 1;
	struct sp_circuit *many = calloc(n, sizeof(*many));
	struct sp_job job = {"big", "ACTIVE", "", 0, many, n};
	struct sp_snapshot s = leaf();
	char *svg, want[80];

	(void)state;
	assert_non_null(many);
	for (size_t i = 0; i < n; i++)
		many[i] = (struct sp_circuit){0, (int)i, (int)i, (int)(i % 2), 1};
	s.jobs = &job;
	s.n_jobs = 1;
	svg = sp_topology_svg(&s, NULL);
	assert_non_null(svg);
	assert_int_equal(count(svg, "class=\"circuit\""), 0);
	assert_int_equal(count(svg, "class=\"pod-pair\""), 2);
	snprintf(want, sizeof(want), "%zu circuits between pods 0 and 1", (n + 1) / 2);
	assert_non_null(strstr(svg, want));
	free(svg);
	free(many);
}

/* Above SP_MAX_JSON_CIRCUITS: counts per job, circuits per pod pair. */
static void test_json_omits(void **state)
{
	size_t n = SP_MAX_JSON_CIRCUITS + 1;
	struct sp_circuit *many = calloc(n, sizeof(*many));
	struct sp_job job = {"big", "ACTIVE", "", 0, many, n};
	struct sp_snapshot s = leaf();
	json_t *root, *pairs;
	char *text;

	(void)state;
	assert_non_null(many);
	for (size_t i = 0; i < n; i++)
		many[i] = (struct sp_circuit){0, 1, 2, i % 3 ? 2 : 0, 1};
	s.jobs = &job;
	s.n_jobs = 1;
	text = sp_state_json(&s, NULL);
	assert_non_null(text);
	root = json_loads(text, 0, NULL);
	assert_non_null(root);
	assert_true(json_is_false(json_object_get(root, "circuits_listed")));
	assert_null(json_object_get(json_array_get(json_object_get(root, "jobs"), 0), "circuits"));
	assert_int_equal(json_integer_value(json_object_get(
				 json_array_get(json_object_get(root, "jobs"), 0), "n_circuits")),
			 n);
	pairs = json_object_get(root, "pod_pairs");
	assert_int_equal(json_array_size(pairs), 2);
	/* (0, 1) from i % 3 == 0, (1, 2) from the rest */
	assert_int_equal(json_integer_value(json_array_get(json_array_get(pairs, 0), 2)),
			 (n + 2) / 3);
	assert_int_equal(json_integer_value(json_array_get(json_array_get(pairs, 1), 0)), 1);
	assert_int_equal(json_integer_value(json_array_get(json_array_get(pairs, 1), 2)),
			 n - (n + 2) / 3);
	json_decref(root);
	free(text);
	free(many);
}

/* Above SP_MAX_MARKS devices: one mark per block. */
static void test_svg_blocks(void **state)
{
	size_t n = SP_MAX_MARKS * 3;
	struct sp_device *many = calloc(n, sizeof(*many));
	struct sp_snapshot s = {.kind = SP_LEAF_SPINE, .name = "big", .role = "leader"};
	char *svg;

	(void)state;
	assert_non_null(many);
	for (size_t i = 0; i < n; i++)
		many[i] = (struct sp_device){"d", 0, "connected", "healthy", "", false, 0};
	many[n - 1].health = "unreachable";
	s.devices = many;
	s.n_devices = n;
	svg = sp_topology_svg(&s, NULL);
	assert_non_null(svg);
	assert_int_equal(count(svg, "class=\"device\""), SP_MAX_MARKS);
	assert_int_equal(count(svg, "some down"), 1);
	free(svg);
	free(many);
}

/* A ring domain of 8 nodes with one ring and one faulty node. */
static struct sp_snapshot ring_domain(struct sp_ring *ring, const int *faulty)
{
	return (struct sp_snapshot){.kind = SP_RING,
				    .name = "pod",
				    .role = "leader",
				    .nodes = 8,
				    .rings = ring,
				    .n_rings = 1,
				    .faulty_nodes = faulty,
				    .n_faulty_nodes = 1};
}

static void test_ring_and_rail(void **state)
{
	const int nodes[] = {0, 1, 3, 4}, faulty[] = {2};
	const int64_t gpus[] = {5};
	struct sp_ring ring = {"tp", 0, nodes, 4, "bypass-extended", 2};
	struct sp_snapshot s = ring_domain(&ring, faulty);
	char *svg = sp_topology_svg(&s, NULL), *json;

	(void)state;
	assert_non_null(svg);
	assert_int_equal(count(svg, "<circle class=\"node"), 8);
	assert_int_equal(count(svg, "class=\"node faulty\""), 1);
	assert_non_null(
		strstr(svg, "job tp ring 0 (bypass-extended): 0 1 3 4; node 2 failed, bypassed"));
	assert_int_equal(count(svg, " drift\""), 0);
	/* a dot per member, and the bypass drawn over node 2 */
	assert_int_equal(count(svg, "<circle class=\"member\""), 4);
	assert_int_equal(count(svg, "<path class=\"bypass\""), 1);
	assert_non_null(strstr(svg, "ring 0 bypasses node 2</title>"));
	free(svg);
	ring.failed_node = -1; /* re-placed: nothing bypassed */
	svg = sp_topology_svg(&s, NULL);
	assert_non_null(svg);
	assert_int_equal(count(svg, "class=\"bypass\""), 0);
	free(svg);
	s = (struct sp_snapshot){.kind = SP_RAIL,
				 .name = "rail",
				 .role = "leader",
				 .servers = 3,
				 .rails = 4,
				 .faulty_gpus = gpus,
				 .n_faulty_gpus = 1};
	svg = sp_topology_svg(&s, NULL);
	json = sp_state_json(&s, NULL);
	assert_non_null(svg);
	assert_non_null(json);
	assert_int_equal(count(svg, "<rect class=\"gpu"), 12);
	assert_non_null(strstr(svg, "server 1 rail 1: swapped"));
	assert_non_null(strstr(json, "\"faulty_gpus\":[5]"));
	free(svg);
	free(json);
}

/* A ring domain's bundles that differ from its rings: listed, their nodes marked. */
static void test_ring_drift(void **state)
{
	const int nodes[] = {0, 1, 3, 4}, faulty[] = {3};
	struct sp_ring ring = {"tp", 0, nodes, 4, "placed", -1};
	const struct sp_bundle_drift drift[] = {
		{3, 1, "tp", "external 1 up", "external 2 up", 5},
		{6, 1, "", "loopback", "external 1 up", 7},
	};
	struct sp_snapshot s = ring_domain(&ring, faulty);
	char *svg, *text;
	json_t *root, *list, *b;

	(void)state;
	s.bundle_drift = drift;
	s.n_bundle_drift = 2;
	svg = sp_topology_svg(&s, NULL);
	text = sp_state_json(&s, NULL);
	assert_non_null(svg);
	assert_non_null(text);
	assert_int_equal(count(svg, " drift\""), 2);
	assert_int_equal(count(svg, "class=\"node faulty drift\""), 1);
	assert_non_null(strstr(svg, "<title>node 6, bundle drift</title>"));
	assert_non_null(strstr(svg, "<title>node 3: faulty, bundle drift</title>"));
	root = json_loads(text, 0, NULL);
	assert_non_null(root);
	list = json_object_get(root, "bundle_drift");
	assert_int_equal(json_array_size(list), 2);
	b = json_array_get(list, 0);
	assert_int_equal(json_integer_value(json_object_get(b, "node")), 3);
	assert_int_equal(json_integer_value(json_object_get(b, "bundle")), 1);
	assert_string_equal(json_string_value(json_object_get(b, "job")), "tp");
	assert_string_equal(json_string_value(json_object_get(b, "expected")), "external 1 up");
	assert_string_equal(json_string_value(json_object_get(b, "found")), "external 2 up");
	assert_int_equal(json_integer_value(json_object_get(b, "found_peer")), 5);
	b = json_array_get(list, 1);
	assert_string_equal(json_string_value(json_object_get(b, "job")), "");
	assert_string_equal(json_string_value(json_object_get(b, "expected")), "loopback");
	json_decref(root);
	free(text);
	free(svg);
	/* above SP_MAX_MARKS nodes the block holding node 6 says so */
	s.nodes = SP_MAX_MARKS * 2;
	svg = sp_topology_svg(&s, NULL);
	assert_non_null(svg);
	assert_int_equal(count(svg, " drift\""), 2);
	assert_int_equal(count(svg, "some with bundle drift"), 2);
	free(svg);
}

static void test_empty(void **state)
{
	struct sp_snapshot s = {.kind = SP_LEAF_SPINE};
	char *svg = sp_topology_svg(&s, NULL), *json = sp_state_json(&s, NULL);

	(void)state;
	assert_non_null(svg);
	assert_non_null(json);
	assert_non_null(strstr(svg, "an empty fabric"));
	assert_non_null(strstr(json, "\"jobs\":[]"));
	free(svg);
	free(json);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_json_leaf),      cmocka_unit_test(test_svg_leaf),
		cmocka_unit_test(test_svg_aggregates), cmocka_unit_test(test_json_omits),
		cmocka_unit_test(test_svg_blocks),     cmocka_unit_test(test_ring_and_rail),
		cmocka_unit_test(test_ring_drift),     cmocka_unit_test(test_empty),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
