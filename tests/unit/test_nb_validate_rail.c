/*
 * test_nb_validate_rail.c - table-driven tests of the northbound's
 * validation on a rail-OCS fabric (issue 12): ReplaceGpu, MarkGpu,
 * ListRailPorts (filters and page tokens) and rail jobs (placement only),
 * and the requests that need another kind of fabric. Each case builds a
 * request, packs it to wire bytes and decodes it the way the gRPC thread
 * does (nb_decode_request); the expected status, field and a word of the
 * message are checked. (test_nb_validate.c and test_nb_validate_random.c
 * cover the leaf-spine and ring kinds.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nb.h"

/* 6 servers x 4 GPUs (24 GPUs), 2 OCS groups. */
static const struct nb_limits rail_limits = {
	.kind = NB_FABRIC_RAIL_OCS,
	.groups = 2,
	.rail = {.servers = 6, .rails = 4},
};

/* A leaf-spine fabric, for the requests that need a rail-OCS one. */
static const struct nb_limits leaf_limits = {
	.pods = 2,
	.leaves_per_pod = 4,
	.gpus_per_leaf = 8,
	.groups = 2,
};

struct req {
	Ocs__V1__ReplaceGpuRequest replace;
	Ocs__V1__MarkGpuRequest mark;
	Ocs__V1__ListRailPortsRequest ports;
	Ocs__V1__ListCircuitsRequest circuits;
	Ocs__V1__JobSpec job;
	Ocs__V1__Placement placement;
	Ocs__V1__GpuPlacement gpu[4];
	Ocs__V1__GpuPlacement *gpu_ptr[4];
	Ocs__V1__LeafDemand demand;
	Ocs__V1__JobOptions options;
};

/* A valid rail job: GPUs 0, 1, 5. */
static void rail_job(struct req *r, const int64_t *gpus, size_t n)
{
	ocs__v1__job_spec__init(&r->job);
	ocs__v1__placement__init(&r->placement);
	r->job.id = "job-a";
	r->job.placement = &r->placement;
	for (size_t i = 0; i < n; i++) {
		ocs__v1__gpu_placement__init(&r->gpu[i]);
		r->gpu[i].gpu = gpus[i];
		r->gpu_ptr[i] = &r->gpu[i];
	}
	r->placement.gpus = r->gpu_ptr;
	r->placement.n_gpus = n;
}

struct rail_case {
	const char *name;
	enum nb_method method;
	int variant;
	const struct nb_limits *limits;
	enum nb_code code;
	const char *field;
	const char *word; /* in the message */
};

/* The request of case c (variants per method). */
static const ProtobufCMessage *build(struct req *r, const struct rail_case *c)
{
	static const int64_t ok[] = {0, 1, 5}, twice[] = {3, 1, 3}, big[] = {0, 24}, neg[] = {-1};

	switch (c->method) {
	case NB_FABRIC_REPLACE_GPU:
		ocs__v1__replace_gpu_request__init(&r->replace);
		r->replace.gpu = c->variant == 1 ? 24 : c->variant == 2 ? -1 : 23;
		return &r->replace.base;
	case NB_FABRIC_MARK_GPU:
		ocs__v1__mark_gpu_request__init(&r->mark);
		r->mark.gpu = c->variant == 3 ? 99 : 4;
		r->mark.condition =
			c->variant == 1	  ? OCS__V1__GPU_CONDITION__GPU_CONDITION_UNSPECIFIED
			: c->variant == 2 ? (Ocs__V1__GpuCondition)7
					  : OCS__V1__GPU_CONDITION__GPU_CONDITION_FAULTY;
		return &r->mark.base;
	case NB_FABRIC_LIST_RAIL_PORTS:
		ocs__v1__list_rail_ports_request__init(&r->ports);
		r->ports.has_server = c->variant == 0 || c->variant == 1;
		r->ports.server = c->variant == 1   ? 6
				  : c->variant == 2 ? 2
				  : c->variant == 0 ? 5
						    : 0;
		r->ports.has_rail = c->variant == 3;
		r->ports.rail = c->variant == 3 ? 4 : 0;
		r->ports.job_id = c->variant == 4 ? "a b" : "";
		r->ports.page_size = c->variant == 5 ? 5001 : 0;
		r->ports.page_token = c->variant == 6	? "rail-ports-after:x"
				      : c->variant == 7 ? "rail-ports-after:12"
							: "";
		return &r->ports.base;
	case NB_FABRIC_LIST_CIRCUITS:
		ocs__v1__list_circuits_request__init(&r->circuits);
		r->circuits.has_pod = true;
		return &r->circuits.base;
	default: /* NB_JOBS_SUBMIT_JOB */
		switch (c->variant) {
		case 1:
			rail_job(r, NULL, 0);
			break;
		case 2:
			rail_job(r, twice, 3);
			break;
		case 3:
			rail_job(r, big, 2);
			break;
		case 4:
			rail_job(r, neg, 1);
			break;
		case 5:
			rail_job(r, ok, 3);
			r->gpu[1].leaf = 2;
			break;
		case 6:
			rail_job(r, ok, 3);
			ocs__v1__leaf_demand__init(&r->demand);
			r->job.demand_case = OCS__V1__JOB_SPEC__DEMAND_LEAF_DEMAND;
			r->job.leaf_demand = &r->demand;
			break;
		case 7:
			rail_job(r, ok, 3);
			ocs__v1__job_options__init(&r->options);
			r->options.planner = "leaf-centric";
			r->job.options = &r->options;
			break;
		default:
			rail_job(r, ok, 3);
			break;
		}
		return &r->job.base;
	}
}

static const struct rail_case cases[] = {
	{"replace ok", NB_FABRIC_REPLACE_GPU, 0, &rail_limits, NB_OK, "", ""},
	{"replace past the GPUs", NB_FABRIC_REPLACE_GPU, 1, &rail_limits, NB_INVALID_ARGUMENT,
	 "gpu", "outside 0..23"},
	{"replace negative", NB_FABRIC_REPLACE_GPU, 2, &rail_limits, NB_INVALID_ARGUMENT, "gpu",
	 "outside 0..23"},
	{"replace on leaf-spine", NB_FABRIC_REPLACE_GPU, 0, &leaf_limits, NB_FAILED_PRECONDITION,
	 "gpu", "rail-ocs"},
	{"mark ok", NB_FABRIC_MARK_GPU, 0, &rail_limits, NB_OK, "", ""},
	{"mark no condition", NB_FABRIC_MARK_GPU, 1, &rail_limits, NB_INVALID_ARGUMENT, "condition",
	 "required"},
	{"mark bad condition", NB_FABRIC_MARK_GPU, 2, &rail_limits, NB_INVALID_ARGUMENT,
	 "condition", "not a GpuCondition"},
	{"mark past the GPUs", NB_FABRIC_MARK_GPU, 3, &rail_limits, NB_INVALID_ARGUMENT, "gpu",
	 "outside"},
	{"mark on leaf-spine", NB_FABRIC_MARK_GPU, 0, &leaf_limits, NB_FAILED_PRECONDITION, "gpu",
	 "leaf-spine-ocs"},
	{"ports by server", NB_FABRIC_LIST_RAIL_PORTS, 0, &rail_limits, NB_OK, "", ""},
	{"ports server out of range", NB_FABRIC_LIST_RAIL_PORTS, 1, &rail_limits,
	 NB_INVALID_ARGUMENT, "server", "outside 0..5"},
	{"ports server without has_server", NB_FABRIC_LIST_RAIL_PORTS, 2, &rail_limits,
	 NB_INVALID_ARGUMENT, "server", "has_server is false"},
	{"ports rail out of range", NB_FABRIC_LIST_RAIL_PORTS, 3, &rail_limits, NB_INVALID_ARGUMENT,
	 "rail", "outside 0..3"},
	{"ports bad job id", NB_FABRIC_LIST_RAIL_PORTS, 4, &rail_limits, NB_INVALID_ARGUMENT,
	 "job_id", "not allowed"},
	{"ports page too big", NB_FABRIC_LIST_RAIL_PORTS, 5, &rail_limits, NB_INVALID_ARGUMENT,
	 "page_size", "out of range"},
	{"ports bad token", NB_FABRIC_LIST_RAIL_PORTS, 6, &rail_limits, NB_INVALID_ARGUMENT,
	 "page_token", "next_page_token"},
	{"ports good token", NB_FABRIC_LIST_RAIL_PORTS, 7, &rail_limits, NB_OK, "", ""},
	{"ports on leaf-spine", NB_FABRIC_LIST_RAIL_PORTS, 0, &leaf_limits, NB_FAILED_PRECONDITION,
	 "", "rail-ocs"},
	{"circuits by pod", NB_FABRIC_LIST_CIRCUITS, 0, &rail_limits, NB_FAILED_PRECONDITION, "pod",
	 "no pods"},
	{"rail job ok", NB_JOBS_SUBMIT_JOB, 0, &rail_limits, NB_OK, "", ""},
	{"rail job without GPUs", NB_JOBS_SUBMIT_JOB, 1, &rail_limits, NB_INVALID_ARGUMENT,
	 "placement.gpus", "required"},
	{"rail job GPU twice", NB_JOBS_SUBMIT_JOB, 2, &rail_limits, NB_INVALID_ARGUMENT,
	 "placement.gpus[2].gpu", "given twice"},
	{"rail job GPU past the fabric", NB_JOBS_SUBMIT_JOB, 3, &rail_limits, NB_INVALID_ARGUMENT,
	 "placement.gpus[1].gpu", "outside 0..23"},
	{"rail job negative GPU", NB_JOBS_SUBMIT_JOB, 4, &rail_limits, NB_INVALID_ARGUMENT,
	 "placement.gpus[0].gpu", "outside"},
	{"rail job with a leaf", NB_JOBS_SUBMIT_JOB, 5, &rail_limits, NB_INVALID_ARGUMENT,
	 "placement.gpus[1].leaf", "no leaves"},
	{"rail job with a demand", NB_JOBS_SUBMIT_JOB, 6, &rail_limits, NB_FAILED_PRECONDITION,
	 "leaf_demand", "takes no demand"},
	{"rail job with a planner", NB_JOBS_SUBMIT_JOB, 7, &rail_limits, NB_INVALID_ARGUMENT,
	 "options", "no planner"},
};

static void test_rail_cases(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct rail_case *c = &cases[i];
		struct req r;
		const ProtobufCMessage *m = build(&r, c);
		size_t len = protobuf_c_message_get_packed_size(m);
		uint8_t *buf = malloc(len ? len : 1);
		ProtobufCMessage *out = NULL;
		struct nb_error err = {0};
		int rc;

		protobuf_c_message_pack(m, buf);
		rc = nb_decode_request(c->method, buf, len, c->limits, 1 << 20, &out, &err);
		free(buf);
		if (out)
			protobuf_c_message_free_unpacked(out, NULL);
		if ((rc == 0) != (c->code == NB_OK) ||
		    (rc && (err.code != c->code || strcmp(err.field, c->field) != 0 ||
			    !strstr(err.message, c->word))))
			fail_msg("%s: rc %d, %s %s: %s (want %d %s ... %s)", c->name, rc,
				 nb_code_name(err.code), err.field, err.message, (int)c->code,
				 c->field, c->word);
	}
}

/* Limits of a rail fabric are themselves checked. */
static void test_rail_limits(void **state)
{
	struct nb_limits l = rail_limits;
	struct nb_error err = {0};
	int64_t port = -1;

	(void)state;
	assert_int_equal(nb_limits_check(&l, &err), 0);
	l.rail.rails = 0;
	assert_int_not_equal(nb_limits_check(&l, &err), 0);
	assert_string_equal(err.field, "limits.rail.rails");
	l = rail_limits;
	l.pods = 1;
	assert_int_not_equal(nb_limits_check(&l, &err), 0);
	assert_string_equal(nb_fabric_kind_name(NB_FABRIC_RAIL_OCS), "rail-ocs");
	/* page tokens round-trip */
	{
		char token[NB_PAGE_TOKEN_MAX_LEN + 1];

		nb_rail_ports_token(1234567, token, sizeof(token));
		assert_true(nb_rail_ports_token_after(token, &port));
		assert_int_equal(port, 1234567);
		assert_false(nb_rail_ports_token_after("rail-ports-after:-3", &port));
		assert_false(nb_rail_ports_token_after("circuits-after:1.2.3.4.5", &port));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rail_cases),
		cmocka_unit_test(test_rail_limits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
