/*
 * test_metrics.c - unit tests of the metric registry (daemon/core/metrics.c):
 * naming rules, counter/gauge/histogram semantics, exact exposition text,
 * and acceptance of a realistic registry by Prometheus' own `promtool
 * check metrics` (a checker nobody here wrote).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "metrics.h"

static void test_naming_rules(void **state)
{
	struct mx_registry *reg = mx_registry_new();
	const char *const bad_label[] = {"le", NULL};
	const char *const ok_label[] = {"method", NULL};
	const double b[] = {1, 2}, unsorted[] = {2, 1};

	assert_null(mx_counter(reg, "ocsd_requests", "no _total suffix", NULL));
	assert_null(mx_gauge(reg, "ocsd_things_total", "gauge with _total", NULL));
	assert_null(mx_gauge(reg, "9lives", "starts with a digit", NULL));
	assert_null(mx_gauge(reg, "has-dash", "bad character", NULL));
	assert_null(mx_gauge(reg, "x", "reserved label", bad_label));
	assert_null(mx_histogram(reg, "h_seconds", "unsorted", NULL, unsorted, 2));
	assert_null(mx_histogram(reg, "h_seconds", "no buckets", NULL, b, 0));
	assert_non_null(mx_counter(reg, "ocsd_rpc_total", "ok", ok_label));
	assert_null(mx_counter(reg, "ocsd_rpc_total", "duplicate", ok_label));
	mx_registry_free(reg);
	mx_registry_free(NULL);
}

static void test_exact_text(void **state)
{
	struct mx_registry *reg = mx_registry_new();
	const char *const labels[] = {"method", "code", NULL};
	const double bounds[] = {0.001, 0.01};
	struct mx_family *c = mx_counter(reg, "rpc_total", "RPCs by method and code.", labels);
	struct mx_family *g = mx_gauge(reg, "devices", "Devices \\ \"quoted\"\nline.", NULL);
	struct mx_family *h = mx_histogram(reg, "plan_seconds", "Plan time.", NULL, bounds, 2);
	const char *submit_ok[] = {"SubmitJob", "OK"}, *odd[] = {"a\"b\\c\nd", "X"};
	char *text;

	assert_int_equal(mx_add(c, submit_ok, 1), 0);
	assert_int_equal(mx_add(c, submit_ok, 2), 0);
	assert_int_equal(mx_add(c, submit_ok, -5), 0); /* counters never go down */
	assert_int_equal(mx_add(c, odd, 1), 0);
	assert_int_equal(mx_set(c, submit_ok, 1), -EINVAL);
	assert_int_equal(mx_set(g, NULL, 3.5), 0);
	assert_int_equal(mx_observe(g, NULL, 1), -EINVAL);
	assert_int_equal(mx_observe(h, NULL, 0.0005), 0);
	assert_int_equal(mx_observe(h, NULL, 0.001), 0); /* le is inclusive */
	assert_int_equal(mx_observe(h, NULL, 0.005), 0);
	assert_int_equal(mx_observe(h, NULL, 7), 0);
	text = mx_render(reg, NULL);
	assert_string_equal(text, "# HELP rpc_total RPCs by method and code.\n"
				  "# TYPE rpc_total counter\n"
				  "rpc_total{method=\"SubmitJob\",code=\"OK\"} 3\n"
				  "rpc_total{method=\"a\\\"b\\\\c\\nd\",code=\"X\"} 1\n"
				  "# HELP devices Devices \\\\ \"quoted\"\\nline.\n"
				  "# TYPE devices gauge\n"
				  "devices 3.5\n"
				  "# HELP plan_seconds Plan time.\n"
				  "# TYPE plan_seconds histogram\n"
				  "plan_seconds_bucket{le=\"0.001\"} 2\n"
				  "plan_seconds_bucket{le=\"0.01\"} 3\n"
				  "plan_seconds_bucket{le=\"+Inf\"} 4\n"
				  "plan_seconds_sum 7.0065\n"
				  "plan_seconds_count 4\n");
	free(text);
	mx_clear(g);
	text = mx_render(reg, NULL);
	assert_null(strstr(text, "devices 3.5"));
	assert_non_null(strstr(text, "# TYPE devices gauge\n# HELP plan_seconds"));
	free(text);
	mx_registry_free(reg);
}

static void test_promtool_accepts(void **state)
{
	struct mx_registry *reg = mx_registry_new();
	const char *const rpc_labels[] = {"method", "code", NULL};
	const char *const planner[] = {"planner", NULL};
	struct mx_family *rpc =
		mx_counter(reg, "ocsd_rpc_requests_total", "RPCs handled.", rpc_labels);
	struct mx_family *lat =
		mx_histogram(reg, "ocsd_rpc_duration_seconds", "RPC latency.", rpc_labels,
			     mx_latency_buckets_s, mx_latency_buckets_n);
	struct mx_family *plan = mx_histogram(reg, "ocsd_plan_duration_seconds", "Plan time.",
					      planner, mx_latency_buckets_s, mx_latency_buckets_n);
	struct mx_family *up = mx_gauge(reg, "ocsd_devices", "Devices by state.",
					(const char *const[]){"state", NULL});
	char path[] = "/tmp/ocsd-metrics-XXXXXX";
	char cmd[256];
	char *text;
	size_t len;
	int fd, rc;

	for (int i = 0; i < 100; i++) {
		const char *v[] = {i % 3 ? "SubmitJob" : "GetJob", i % 7 ? "OK" : "NOT_FOUND"};
		const char *p[] = {i % 2 ? "leaf-centric" : "pod-centric"};

		mx_add(rpc, v, 1);
		mx_observe(lat, v, i * 0.0007);
		mx_observe(plan, p, i * 0.01);
	}
	mx_set(up, (const char *[]){"connected"}, 15);
	mx_set(up, (const char *[]){"unreachable"}, 1);
	text = mx_render(reg, &len);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	close(fd);
	snprintf(cmd, sizeof(cmd), "promtool check metrics < %s", path);
	rc = system(cmd);
	unlink(path);
	if (rc != 0)
		fail_msg("promtool rejected the exposition text (status %d):\n%s", rc, text);
	free(text);
	mx_registry_free(reg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_naming_rules),
		cmocka_unit_test(test_exact_text),
		cmocka_unit_test(test_promtool_accepts),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
