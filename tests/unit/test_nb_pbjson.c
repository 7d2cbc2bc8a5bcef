/*
 * test_nb_pbjson.c - tests of ocsctl's protobuf-c <-> JSON conversion
 * (northbound/ocsctl/pbjson.c): job files become the JobSpec they describe,
 * output reads back to the same message, and every kind of bad input is
 * refused with the path of the field, repeated keys included (refused by
 * ocs_json_parse() before pbjson sees the tree, as ocsctl loads job files).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ocs/v1/jobs.pb-c.h"
#include "ocs/v1/events.pb-c.h"
#include "ocs/v1/fabric.pb-c.h"
#include "ocs_json.h"
#include "pbjson.h"

static ProtobufCMessage *read_text(const char *text, const ProtobufCMessageDescriptor *d, char *err,
				   size_t err_len)
{
	struct ocs_json_error jerr;
	json_t *v = ocs_json_parse(text, strlen(text), &jerr);
	ProtobufCMessage *m;

	if (!v)
		fail_msg("%s: %s", jerr.path, jerr.message);
	m = pbjson_read(v, d, err, err_len);
	json_decref(v);
	return m;
}

/* The text pbjson_write() makes of m, compact; caller frees. */
static char *write_text(const ProtobufCMessage *m)
{
	json_t *v = pbjson_write(m);
	char *text;

	assert_non_null(v);
	text = ocs_json_dumps(v, false);
	json_decref(v);
	assert_non_null(text);
	return text;
}

static const char job_text[] =
	"{\"id\": \"train-1\", \"idempotency_key\": \"k\","
	" \"placement\": {\"gpus\": [{\"gpu\": 0, \"leaf\": 0, \"pod\": 0},"
	"                            {\"gpu\": 8589934592, \"leaf\": 5, \"pod\": 1}]},"
	" \"leaf_demand\": {\"pairs\": [{\"a\": 0, \"b\": 5, \"links\": 2}]},"
	" \"options\": {\"planner\": \"pod-centric\", \"allow_moving_other_jobs\": true}}";

static void test_job_file(void **state)
{
	char err[256] = "";
	Ocs__V1__JobSpec *j;

	(void)state;
	j = (Ocs__V1__JobSpec *)read_text(job_text, &ocs__v1__job_spec__descriptor, err,
					  sizeof(err));
	if (!j)
		fail_msg("%s", err);
	assert_string_equal(j->id, "train-1");
	assert_string_equal(j->idempotency_key, "k");
	assert_int_equal(j->placement->n_gpus, 2);
	assert_int_equal(j->placement->gpus[1]->gpu, 8589934592LL);
	assert_int_equal(j->placement->gpus[1]->leaf, 5);
	assert_int_equal(j->placement->gpus[1]->pod, 1);
	assert_int_equal(j->demand_case, OCS__V1__JOB_SPEC__DEMAND_LEAF_DEMAND);
	assert_int_equal(j->leaf_demand->n_pairs, 1);
	assert_int_equal(j->leaf_demand->pairs[0]->links, 2);
	assert_string_equal(j->options->planner, "pod-centric");
	assert_true(j->options->allow_moving_other_jobs);
	ocs__v1__job_spec__free_unpacked(j, NULL);
}

static const char par_text[] =
	"{\"id\": \"d-1\", \"placement\": {\"gpus\": [{\"gpu\": 0, \"leaf\": 0, \"pod\": 0}]},"
	" \"parallelism\": {\"layers\": 8, \"hidden\": 2048, \"ffn\": 8192, \"heads\": 16,"
	"   \"vocab\": 32000, \"experts\": 8, \"top_k\": 2, \"tp\": 2, \"pp\": 2, \"ep\": 2,"
	"   \"seq_len\": 2048, \"micro_batches\": 8, \"bandwidth_gbps\": 400,"
	"   \"efficiency\": 0.45, \"gpus_per_pod_per_replica\": 2,"
	"   \"replicas_per_pod_set\": 2, \"first_pod\": 1, \"seed\": 9007199254740993,"
	"   \"max_generations\": 500, \"time_budget_ms\": 250},"
	" \"options\": {\"planner\": \"delta-fast\"}}";

/* The parallelism form of a job file (deploy/jobs/lab-delta.json's shape). */
static void test_parallelism_file(void **state)
{
	char err[256] = "";
	Ocs__V1__JobSpec *j;
	const Ocs__V1__ParallelismSpec *q;

	(void)state;
	j = (Ocs__V1__JobSpec *)read_text(par_text, &ocs__v1__job_spec__descriptor, err,
					  sizeof(err));
	if (!j)
		fail_msg("%s", err);
	assert_int_equal(j->demand_case, OCS__V1__JOB_SPEC__DEMAND_PARALLELISM);
	q = j->parallelism;
	assert_int_equal(q->layers, 8);
	assert_int_equal(q->experts, 8);
	assert_int_equal(q->top_k, 2);
	assert_int_equal(q->tp, 2);
	assert_int_equal(q->ep, 2);
	assert_int_equal(q->dp, 0);
	assert_int_equal(q->micro_batches, 8);
	assert_true(q->bandwidth_gbps == 400.0);
	assert_true(q->efficiency == 0.45);
	assert_int_equal(q->replicas_per_pod_set, 2);
	assert_int_equal(q->first_pod, 1);
	assert_true(q->seed == 9007199254740993ULL);
	assert_int_equal(q->max_generations, 500);
	assert_int_equal(q->time_budget_ms, 250);
	assert_string_equal(j->options->planner, "delta-fast");
	ocs__v1__job_spec__free_unpacked(j, NULL);
	/* Both demands: refused by the oneof; unknown fields by name. */
	assert_null(read_text("{\"leaf_demand\": {}, \"parallelism\": {}}",
			      &ocs__v1__job_spec__descriptor, err, sizeof(err)));
	assert_string_equal(err, "parallelism: only one member of its oneof may be set");
	assert_null(read_text("{\"parallelism\": {\"tp\": 2, \"tensor\": 2}}",
			      &ocs__v1__job_spec__descriptor, err, sizeof(err)));
	assert_string_equal(err, "parallelism.tensor: unknown field of ocs.v1.ParallelismSpec");
	assert_null(read_text("{\"parallelism\": {\"bandwidth_gbps\": \"fast\"}}",
			      &ocs__v1__job_spec__descriptor, err, sizeof(err)));
	assert_string_equal(err, "parallelism.bandwidth_gbps: expected a number, got string");
}

/* A ring job file (deploy/jobs/hbd-tp16.json has this shape). */
static const char ring_text[] = "{\"id\": \"hbd-1\", \"idempotency_key\": \"k\","
				" \"ring\": {\"tp\": 16, \"gpus\": 128, \"orchestration\": "
				"\"greedy\", \"seed\": 9007199254740993}}";

static void test_ring_file(void **state)
{
	char err[256] = "";
	Ocs__V1__JobSpec *j;
	Ocs__V1__ListRingsResponse *rings;
	char *text;

	(void)state;
	j = (Ocs__V1__JobSpec *)read_text(ring_text, &ocs__v1__job_spec__descriptor, err,
					  sizeof(err));
	if (!j)
		fail_msg("%s", err);
	assert_int_equal(j->demand_case, OCS__V1__JOB_SPEC__DEMAND_RING);
	assert_null(j->placement);
	assert_int_equal(j->ring->tp, 16);
	assert_int_equal(j->ring->gpus, 128);
	assert_int_equal(j->ring->rings, 0);
	assert_string_equal(j->ring->orchestration, "greedy");
	assert_true(j->ring->seed == 9007199254740993ULL);
	ocs__v1__job_spec__free_unpacked(j, NULL);
	/* rings instead of gpus; the other demands are the oneof's other members */
	j = (Ocs__V1__JobSpec *)read_text("{\"id\": \"r\", \"ring\": {\"tp\": 8, \"rings\": 3}}",
					  &ocs__v1__job_spec__descriptor, err, sizeof(err));
	if (!j)
		fail_msg("%s", err);
	assert_int_equal(j->ring->rings, 3);
	assert_int_equal(j->ring->gpus, 0);
	ocs__v1__job_spec__free_unpacked(j, NULL);
	assert_null(read_text("{\"leaf_demand\": {}, \"ring\": {\"tp\": 8}}",
			      &ocs__v1__job_spec__descriptor, err, sizeof(err)));
	assert_string_equal(err, "ring: only one member of its oneof may be set");
	assert_null(read_text("{\"ring\": {\"tp\": 8, \"nodes\": [1, 2]}}",
			      &ocs__v1__job_spec__descriptor, err, sizeof(err)));
	assert_string_equal(err, "ring.nodes: unknown field of ocs.v1.RingRequest");
	assert_null(read_text("{\"ring\": {\"tp\": \"8\"}}", &ocs__v1__job_spec__descriptor, err,
			      sizeof(err)));
	assert_string_equal(err, "ring.tp: expected an integer, got string");
	assert_null(read_text("{\"ring\": {\"seed\": -1}}", &ocs__v1__job_spec__descriptor, err,
			      sizeof(err)));
	assert_string_equal(err, "ring.seed: out of range 0..9223372036854775807");
	/* ListRings answers as ocsctl reads them: enums by name, -1 kept */
	rings = (Ocs__V1__ListRingsResponse *)read_text(
		"{\"rings\": [{\"job_id\": \"a\", \"index\": 1, \"nodes\": [4, 5, 7],"
		" \"last_change\": \"RING_CHANGE_BYPASSED\", \"failed_node\": 6}]}",
		&ocs__v1__list_rings_response__descriptor, err, sizeof(err));
	if (!rings)
		fail_msg("%s", err);
	assert_int_equal(rings->n_rings, 1);
	assert_int_equal(rings->rings[0]->n_nodes, 3);
	assert_int_equal(rings->rings[0]->nodes[2], 7);
	assert_int_equal(rings->rings[0]->last_change, OCS__V1__RING_CHANGE__RING_CHANGE_BYPASSED);
	text = write_text(&rings->base);
	assert_string_equal(text, "{\"rings\":[{\"job_id\":\"a\",\"index\":1,\"nodes\":[4,5,7],"
				  "\"last_change\":\"RING_CHANGE_BYPASSED\",\"failed_node\":6,"
				  "\"reason\":\"\"}]}");
	free(text);
	protobuf_c_message_free_unpacked(&rings->base, NULL);
}

/* write -> read gives the same message (compared on the wire). */
static void test_round_trip(void **state)
{
	char err[256] = "";
	const ProtobufCMessageDescriptor *descs[] = {
		&ocs__v1__job_spec__descriptor, &ocs__v1__event__descriptor,
		&ocs__v1__job_spec__descriptor, &ocs__v1__job_spec__descriptor};
	const char *texts[] = {
		job_text,
		"{\"seq\": 7, \"time_unix_ms\": 1700000000000,"
		" \"device\": {\"device\": \"ocs-g0-d1\", \"session\": \"SESSION_STATE_CONNECTED\","
		" \"health\": 3, \"drained\": true}}",
		par_text,
		ring_text,
	};

	(void)state;
	for (int i = 0; i < 4; i++) {
		ProtobufCMessage *a = read_text(texts[i], descs[i], err, sizeof(err)), *b;
		uint8_t wa[512], wb[512];
		char *text;
		size_t na, nb;

		if (!a)
			fail_msg("%s", err);
		text = write_text(a);
		b = read_text(text, descs[i], err, sizeof(err));
		if (!b)
			fail_msg("%s: %s", text, err);
		na = protobuf_c_message_get_packed_size(a);
		nb = protobuf_c_message_get_packed_size(b);
		assert_true(na <= sizeof(wa) && nb <= sizeof(wb));
		protobuf_c_message_pack(a, wa);
		protobuf_c_message_pack(b, wb);
		assert_int_equal(na, nb);
		assert_memory_equal(wa, wb, na);
		if (i == 1) /* enums are written by name */
			assert_non_null(strstr(text, "\"health\":\"DEVICE_HEALTH_UNREACHABLE\""));
		if (i == 2) /* doubles at 6 decimals, whole ones as integers */
			assert_non_null(
				strstr(text, "\"efficiency\":0.45,\"bandwidth_gbps\":400,"));
		free(text);
		protobuf_c_message_free_unpacked(a, NULL);
		protobuf_c_message_free_unpacked(b, NULL);
	}
}

static void test_refusals(void **state)
{
	static const struct {
		const char *text;
		const char *err;
	} cases[] = {
		{"[]", "(top level): expected an object, got array"},
		{"{\"idd\": \"x\"}", "idd: unknown field of ocs.v1.JobSpec"},
		{"{\"id\": 5}", "id: expected a string, got number"},
		{"{\"placement\": {\"gpus\": {}}}",
		 "placement.gpus: expected an array, got object"},
		{"{\"placement\": {\"gpus\": [{\"leaf\": 1.5}]}}",
		 "placement.gpus[0].leaf: expected an integer, got a fraction"},
		{"{\"placement\": {\"gpus\": [{}, {\"pod\": 2147483648}]}}",
		 "placement.gpus[1].pod: out of range -2147483648..2147483647"},
		{"{\"options\": {\"allow_moving_other_jobs\": 1}}",
		 "options.allow_moving_other_jobs: expected true or false, got number"},
		{"{\"leaf_demand\": {\"pairs\": [null]}}",
		 "leaf_demand.pairs[0]: expected an object, got null"},
	};
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		err[0] = '\0';
		assert_null(
			read_text(cases[i].text, &ocs__v1__job_spec__descriptor, err, sizeof(err)));
		assert_string_equal(err, cases[i].err);
	}
	err[0] = '\0';
	assert_null(read_text("{\"job\": {}, \"device\": {}}", &ocs__v1__event__descriptor, err,
			      sizeof(err)));
	assert_string_equal(err, "device: only one member of its oneof may be set");
	assert_null(read_text("{\"device\": {\"health\": \"GOOD\"}}", &ocs__v1__event__descriptor,
			      err, sizeof(err)));
	assert_string_equal(err, "device.health: not a value of ocs.v1.DeviceHealth");
}

/*
 * A job file with a repeated key is refused before pbjson reads it, naming
 * the object that holds the key (what ocsctl prints after the file name).
 */
static void test_duplicate_keys(void **state)
{
	static const struct {
		const char *text;
		const char *path;
		const char *message;
	} cases[] = {
		{"{\"options\": {}, \"options\": {}}", "", "duplicate key \"options\""},
		{"{\"id\": \"a\", \"placement\": {\"gpus\": [], \"gpus\": []}}", "placement",
		 "duplicate key \"gpus\""},
		{"{\"placement\": {\"gpus\": [{\"gpu\": 0}, {\"gpu\": 1, \"pod\": 0, \"gpu\": "
		 "2}]}}",
		 "placement.gpus[1]", "duplicate key \"gpu\""},
		{"{\"leaf_demand\": {\"pairs\": []}, \"options\": {\"planner\": \"x\",\n"
		 " \"planner\": \"y\"}}",
		 "options", "duplicate key \"planner\""},
	};
	struct ocs_json_error err;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_null(ocs_json_parse(cases[i].text, strlen(cases[i].text), &err));
		assert_true(err.duplicate_key);
		assert_string_equal(err.path, cases[i].path);
		assert_string_equal(err.message, cases[i].message);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_job_file),       cmocka_unit_test(test_parallelism_file),
		cmocka_unit_test(test_round_trip),     cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_duplicate_keys), cmocka_unit_test(test_ring_file),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
