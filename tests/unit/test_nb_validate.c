/*
 * test_nb_validate.c - table-driven tests of the northbound's request
 * decoding and validation (nb_decode_request): every malformed or
 * out-of-range request must be refused with the expected status and the
 * path of the offending field, and valid requests must pass.
 *
 * Each case starts from a valid request, breaks one thing, packs it to wire
 * bytes and decodes it the way the gRPC thread does. Two tables: one on a
 * leaf-spine fabric, one on an OCSTrx ring domain (ring requests, MarkNode,
 * ListRings, and the requests that need the other kind of fabric).
 * test_nb_validate_random.c holds the property tests: random requests
 * against independent checkers.
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

/* 4 pods x 1024 leaves = 4096 leaves, 8 GPUs per leaf, 4 OCS groups. */
static const struct nb_limits limits = {
	.pods = 4,
	.leaves_per_pod = 1024,
	.gpus_per_leaf = 8,
	.groups = 4,
};

/* An OCSTrx ring domain: 64 nodes x 4 GPUs = 256 GPUs, no device groups. */
static const struct nb_limits ring_limits = {
	.kind = NB_FABRIC_OCSTRX_RING,
	.ring = {.nodes = 64, .gpus_per_node = 4},
};

/* A valid job: GPUs 0,1 on leaf 0 and 8,9 on leaf 1 (pod 0), GPU 8192 on
 * leaf 1024 (pod 1); demand leaf 0 <-> leaf 1 (2 links), 0 <-> 1024 (1). */
struct fx {
	Ocs__V1__JobSpec job;
	Ocs__V1__Placement placement;
	Ocs__V1__GpuPlacement gpu[70];
	Ocs__V1__GpuPlacement *gpu_ptr[70];
	Ocs__V1__LeafDemand demand;
	Ocs__V1__LeafPair pair[8];
	Ocs__V1__LeafPair *pair_ptr[8];
	Ocs__V1__JobOptions options;
	Ocs__V1__ParallelismSpec par; /* set by m_par() */
	Ocs__V1__RingRequest ring;    /* set by m_ring() */
	char text[200];
	/* other requests */
	Ocs__V1__ListDevicesRequest list_devices;
	Ocs__V1__ListCircuitsRequest list_circuits;
	Ocs__V1__DrainDeviceRequest drain;
	Ocs__V1__UndrainDeviceRequest undrain;
	Ocs__V1__ReleaseJobRequest release;
	Ocs__V1__GetJobRequest get;
	Ocs__V1__ListJobsRequest list_jobs;
	Ocs__V1__MarkNodeRequest mark;
	Ocs__V1__ListRingsRequest list_rings;
	Ocs__V1__ListDriftRequest list_drift;
	Ocs__V1__DriftScope scope;
	Ocs__V1__AdoptCrossConnectsRequest adopt;
	Ocs__V1__ClearCrossConnectsRequest clear;
	Ocs__V1__ListCablingRequest list_cabling;
	Ocs__V1__ClearCablingRequest clear_cabling;
	Grpc__Health__V1__HealthCheckRequest health;
};

static void fx_init(struct fx *f)
{
	static const int64_t gpus[] = {0, 1, 8, 9, 8192};

	memset(f, 0, sizeof(*f));
	ocs__v1__job_spec__init(&f->job);
	ocs__v1__placement__init(&f->placement);
	ocs__v1__leaf_demand__init(&f->demand);
	ocs__v1__job_options__init(&f->options);
	f->job.id = "job-1";
	f->job.idempotency_key = "retry key 1";
	f->job.placement = &f->placement;
	f->placement.gpus = f->gpu_ptr;
	f->placement.n_gpus = 5;
	for (size_t i = 0; i < 70; i++) {
		ocs__v1__gpu_placement__init(&f->gpu[i]);
		f->gpu_ptr[i] = &f->gpu[i];
	}
	for (size_t i = 0; i < 5; i++) {
		f->gpu[i].gpu = gpus[i];
		f->gpu[i].leaf = (int32_t)(gpus[i] / 8);
		f->gpu[i].pod = f->gpu[i].leaf / 1024;
	}
	f->job.demand_case = OCS__V1__JOB_SPEC__DEMAND_LEAF_DEMAND;
	f->job.leaf_demand = &f->demand;
	f->demand.pairs = f->pair_ptr;
	f->demand.n_pairs = 2;
	for (size_t i = 0; i < 8; i++) {
		ocs__v1__leaf_pair__init(&f->pair[i]);
		f->pair_ptr[i] = &f->pair[i];
	}
	f->pair[0] = (Ocs__V1__LeafPair){f->pair[0].base, 0, 1, 2};
	f->pair[1] = (Ocs__V1__LeafPair){f->pair[1].base, 0, 1024, 1};
	f->job.options = &f->options;
	f->options.planner = "pod-centric";
	ocs__v1__list_devices_request__init(&f->list_devices);
	ocs__v1__list_circuits_request__init(&f->list_circuits);
	ocs__v1__drain_device_request__init(&f->drain);
	f->drain.device = "ocs-g0-d1";
	ocs__v1__undrain_device_request__init(&f->undrain);
	f->undrain.device = "ocs-g0-d1";
	ocs__v1__release_job_request__init(&f->release);
	f->release.id = "job-1";
	ocs__v1__get_job_request__init(&f->get);
	f->get.id = "job-1";
	ocs__v1__list_jobs_request__init(&f->list_jobs);
	ocs__v1__mark_node_request__init(&f->mark);
	f->mark.node = 63;
	f->mark.condition = OCS__V1__NODE_CONDITION__NODE_CONDITION_FAULTY;
	ocs__v1__list_rings_request__init(&f->list_rings);
	ocs__v1__list_drift_request__init(&f->list_drift);
	ocs__v1__drift_scope__init(&f->scope);
	f->scope.device = "ocs-g0-d1";
	f->scope.has_ports = true;
	f->scope.in_port = 3;
	f->scope.out_port = 5;
	ocs__v1__adopt_cross_connects_request__init(&f->adopt);
	f->adopt.scope = &f->scope;
	f->adopt.job_id = "adopted-1";
	ocs__v1__clear_cross_connects_request__init(&f->clear);
	f->clear.scope = &f->scope;
	ocs__v1__list_cabling_request__init(&f->list_cabling);
	ocs__v1__clear_cabling_request__init(&f->clear_cabling);
	f->clear_cabling.device = "ocs-g1-d0";
	f->clear_cabling.port = 1;
	grpc__health__v1__health_check_request__init(&f->health);
}

static const ProtobufCMessage *fx_request(struct fx *f, enum nb_method m)
{
	switch (m) {
	case NB_FABRIC_LIST_DEVICES:
		return &f->list_devices.base;
	case NB_FABRIC_LIST_CIRCUITS:
		return &f->list_circuits.base;
	case NB_FABRIC_DRAIN_DEVICE:
		return &f->drain.base;
	case NB_FABRIC_UNDRAIN_DEVICE:
		return &f->undrain.base;
	case NB_JOBS_RELEASE_JOB:
		return &f->release.base;
	case NB_JOBS_GET_JOB:
		return &f->get.base;
	case NB_JOBS_LIST_JOBS:
		return &f->list_jobs.base;
	case NB_FABRIC_MARK_NODE:
		return &f->mark.base;
	case NB_FABRIC_LIST_RINGS:
		return &f->list_rings.base;
	case NB_FABRIC_LIST_DRIFT:
		return &f->list_drift.base;
	case NB_FABRIC_ADOPT_CROSS_CONNECTS:
		return &f->adopt.base;
	case NB_FABRIC_CLEAR_CROSS_CONNECTS:
		return &f->clear.base;
	case NB_FABRIC_LIST_CABLING:
		return &f->list_cabling.base;
	case NB_FABRIC_CLEAR_CABLING:
		return &f->clear_cabling.base;
	case NB_HEALTH_CHECK:
		return &f->health.base;
	default:
		return &f->job.base;
	}
}

/* The mutations, one per case. */
static void m_none(struct fx *f)
{
	(void)f;
}

/* A valid parallelism job: tp 2, pp 2 over the same 5 GPUs' pods. */
static void m_par(struct fx *f)
{
	ocs__v1__parallelism_spec__init(&f->par);
	f->par.layers = 8;
	f->par.hidden = 1024;
	f->par.ffn = 4096;
	f->par.heads = 16;
	f->par.vocab = 32000;
	f->par.tp = 2;
	f->par.pp = 2;
	f->par.seq_len = 2048;
	f->par.micro_batches = 8;
	f->par.bandwidth_gbps = 400;
	f->par.gpus_per_pod_per_replica = 2;
	f->job.demand_case = OCS__V1__JOB_SPEC__DEMAND_PARALLELISM;
	f->job.parallelism = &f->par;
	f->options.planner = "delta-fast";
}
static void m_par_default_planner(struct fx *f)
{
	m_par(f);
	f->options.planner = "";
}
static void m_par_baseline(struct fx *f)
{
	m_par(f);
	f->options.planner = "iter-halve";
	f->par.seed = UINT64_MAX;
	f->par.time_budget_ms = 5000;
	f->par.experts = 8;
	f->par.top_k = 2;
	f->par.ep = 2;
	f->par.ffn_matrices = 3;
	f->par.efficiency = 1;
}
static void m_par_leaf_planner(struct fx *f)
{
	m_par(f);
	f->options.planner = "leaf-centric";
}
static void m_leaf_delta_planner(struct fx *f)
{
	f->options.planner = "delta-fast";
}
static void m_par_tp_zero(struct fx *f)
{
	m_par(f);
	f->par.tp = 0;
}
static void m_par_pp_high(struct fx *f)
{
	m_par(f);
	f->par.pp = 2000;
}
static void m_par_layers_zero(struct fx *f)
{
	m_par(f);
	f->par.layers = 0;
}
static void m_par_bw_zero(struct fx *f)
{
	m_par(f);
	f->par.bandwidth_gbps = 0;
}
static void m_par_bw_nan(struct fx *f)
{
	m_par(f);
	f->par.bandwidth_gbps = 0.0 / 0.0;
}
static void m_par_efficiency(struct fx *f)
{
	m_par(f);
	f->par.efficiency = 1.5;
}
static void m_par_tflops_negative(struct fx *f)
{
	m_par(f);
	f->par.gpu_tflops = -1;
}
static void m_par_gpp_high(struct fx *f)
{
	m_par(f);
	f->par.gpus_per_pod_per_replica = 8193;
}
static void m_par_first_pod(struct fx *f)
{
	m_par(f);
	f->par.first_pod = 4;
}
static void m_par_mb_zero(struct fx *f)
{
	m_par(f);
	f->par.micro_batches = 0;
}
static void m_par_mb_high(struct fx *f)
{
	m_par(f);
	f->par.micro_batches = 16385;
}
static void m_par_ffn_matrices(struct fx *f)
{
	m_par(f);
	f->par.ffn_matrices = 1;
}
static void m_par_dense_top_k(struct fx *f)
{
	m_par(f);
	f->par.top_k = 2;
}
static void m_par_moe_top_k(struct fx *f)
{
	m_par(f);
	f->par.experts = 8;
	f->par.top_k = 9;
}
static void m_par_budget(struct fx *f)
{
	m_par(f);
	f->par.time_budget_ms = 5001;
}
/* issue 14 #8: the searches that held a solver thread for 15 s */
static void m_par_million_generations(struct fx *f)
{
	m_par(f);
	f->par.max_generations = 1000000;
}
static void m_par_stall(struct fx *f)
{
	m_par(f);
	f->par.stall_generations = 1000000;
}
static void m_par_generations(struct fx *f)
{
	m_par(f);
	f->par.max_generations = -1;
}
static void m_par_replicas(struct fx *f)
{
	m_par(f);
	f->par.replicas_per_pod_set = -2;
}
static void m_id_empty(struct fx *f)
{
	f->job.id = "";
}
static void m_id_long(struct fx *f)
{
	memset(f->text, 'x', 65);
	f->job.id = f->text;
}
static void m_id_slash(struct fx *f)
{
	f->job.id = "job/1";
}
static void m_id_nonascii(struct fx *f)
{
	f->job.id = "j\xc3\xa9";
}
static void m_key_long(struct fx *f)
{
	memset(f->text, 'k', 129);
	f->job.idempotency_key = f->text;
}
static void m_key_ctrl(struct fx *f)
{
	f->job.idempotency_key = "a\tb";
}
static void m_no_placement(struct fx *f)
{
	f->job.placement = NULL;
}
static void m_no_gpus(struct fx *f)
{
	f->placement.n_gpus = 0;
}
static void m_gpu_negative(struct fx *f)
{
	f->gpu[3].gpu = -1;
}
static void m_gpu_high(struct fx *f)
{
	f->gpu[2].gpu = 32768;
}
static void m_leaf_high(struct fx *f)
{
	/* 13 GPUs so that the broken one is gpus[12], as in the API docs. */
	f->placement.n_gpus = 13;
	for (int i = 5; i < 13; i++) {
		f->gpu[i].gpu = 16 + i;
		f->gpu[i].leaf = (16 + i) / 8;
	}
	f->gpu[12].leaf = 4100;
}
static void m_leaf_negative(struct fx *f)
{
	f->gpu[0].leaf = -5;
}
static void m_leaf_wrong(struct fx *f)
{
	f->gpu[2].leaf = 0;
}
static void m_pod_high(struct fx *f)
{
	f->gpu[4].pod = 4;
}
static void m_pod_wrong(struct fx *f)
{
	f->gpu[4].pod = 0;
}
static void m_gpu_twice(struct fx *f)
{
	f->gpu[3] = f->gpu[1];
}
static void m_too_many_gpus(struct fx *f)
{
	/* Placed by the table's own limits (max_gpus_per_job = 64). */
	f->placement.n_gpus = 65;
	for (int i = 0; i < 65; i++) {
		f->gpu[i].gpu = i;
		f->gpu[i].leaf = i / 8;
		f->gpu[i].pod = 0;
	}
}
static void m_no_demand(struct fx *f)
{
	f->job.demand_case = OCS__V1__JOB_SPEC__DEMAND__NOT_SET;
}
static void m_no_pairs(struct fx *f)
{
	f->demand.n_pairs = 0;
}
static void m_pair_a_high(struct fx *f)
{
	f->pair[1].a = 9000;
}
static void m_pair_b_negative(struct fx *f)
{
	f->pair[0].b = -1;
}
static void m_pair_self(struct fx *f)
{
	f->pair[0].b = 0;
}
static void m_pair_links_zero(struct fx *f)
{
	f->pair[0].links = 0;
}
static void m_pair_links_high(struct fx *f)
{
	f->pair[0].links = 9;
}
static void m_pair_foreign_leaf(struct fx *f)
{
	f->pair[1].b = 7;
}
static void m_pair_twice(struct fx *f)
{
	f->demand.n_pairs = 3;
	f->pair[2] = (Ocs__V1__LeafPair){f->pair[2].base, 1, 0, 1};
}
static void m_leaf_oversubscribed(struct fx *f)
{
	f->pair[0].links = 6;
	f->pair[1].links = 3; /* leaf 0: 6 + 3 > 8 */
}
static void m_planner_unknown(struct fx *f)
{
	f->options.planner = "delta-slow";
}
static void m_planner_ctrl(struct fx *f)
{
	f->options.planner = "x\n";
}
static void m_group_no_flag(struct fx *f)
{
	f->list_devices.group = 2;
}
static void m_group_high(struct fx *f)
{
	f->list_devices.has_group = true;
	f->list_devices.group = 4;
}
static void m_circuits_job(struct fx *f)
{
	f->list_circuits.job_id = "a b";
}
static void m_circuits_device(struct fx *f)
{
	f->list_circuits.device = "ocs/1";
}
static void m_circuits_pod(struct fx *f)
{
	f->list_circuits.has_pod = true;
	f->list_circuits.pod = -1;
}
static void m_circuits_pod_no_flag(struct fx *f)
{
	f->list_circuits.pod = 3;
}
static void m_drain_empty(struct fx *f)
{
	f->drain.device = "";
}
static void m_drain_long(struct fx *f)
{
	memset(f->text, 'd', 65);
	f->drain.device = f->text;
}
static void m_undrain_bad(struct fx *f)
{
	f->undrain.device = "ocs g0";
}
static void m_cabling_device_bad(struct fx *f)
{
	f->list_cabling.device = "ocs/g0";
}
static void m_cabling_clear_no_device(struct fx *f)
{
	f->clear_cabling.device = "";
}
static void m_cabling_clear_port(struct fx *f)
{
	f->clear_cabling.port = 65536;
}
static void m_cabling_clear_port_negative(struct fx *f)
{
	f->clear_cabling.port = -1;
}
static void m_release_empty(struct fx *f)
{
	f->release.id = "";
}
static void m_get_bad(struct fx *f)
{
	f->get.id = "../etc";
}
static void m_list_state(struct fx *f)
{
	f->list_jobs.state = (Ocs__V1__JobState)42;
}
static void m_health_long(struct fx *f)
{
	memset(f->text, 's', 129);
	f->health.service = f->text;
}
static void m_valid_filters(struct fx *f)
{
	f->list_circuits.job_id = "job-1";
	f->list_circuits.device = "ocs-g1-d2:a";
	f->list_circuits.has_pod = true;
	f->list_circuits.pod = 3;
}

/* A valid ring job: 4 rings of TP 8 (2 nodes each), fat-tree. */
static void m_ring(struct fx *f)
{
	ocs__v1__ring_request__init(&f->ring);
	f->ring.tp = 8;
	f->ring.gpus = 32;
	f->ring.orchestration = "fat-tree";
	f->job.placement = NULL;
	f->options.planner = "";
	f->job.demand_case = OCS__V1__JOB_SPEC__DEMAND_RING;
	f->job.ring = &f->ring;
}
static void m_ring_whole_domain(struct fx *f)
{
	m_ring(f);
	f->ring.tp = 4;
	f->ring.gpus = 0;
	f->ring.orchestration = "";
	f->job.options = NULL;
}
static void m_ring_by_rings(struct fx *f)
{
	m_ring(f);
	f->ring.gpus = 0;
	f->ring.rings = 32; /* 32 x 8 = every GPU */
	f->ring.orchestration = "greedy";
	f->ring.seed = UINT64_MAX;
}
static void m_ring_tp_zero(struct fx *f)
{
	m_ring(f);
	f->ring.tp = 0;
}
static void m_ring_tp_negative(struct fx *f)
{
	m_ring(f);
	f->ring.tp = -8;
}
static void m_ring_tp_odd(struct fx *f)
{
	m_ring(f);
	f->ring.tp = 6;
	f->ring.gpus = 0;
}
static void m_ring_tp_high(struct fx *f)
{
	m_ring(f);
	f->ring.tp = 260;
	f->ring.gpus = 0;
}
static void m_ring_gpus_negative(struct fx *f)
{
	m_ring(f);
	f->ring.gpus = -8;
}
static void m_ring_gpus_odd(struct fx *f)
{
	m_ring(f);
	f->ring.gpus = 12;
}
static void m_ring_gpus_high(struct fx *f)
{
	m_ring(f);
	f->ring.gpus = 264;
}
static void m_ring_rings_negative(struct fx *f)
{
	m_ring(f);
	f->ring.gpus = 0;
	f->ring.rings = -1;
}
static void m_ring_rings_and_gpus(struct fx *f)
{
	m_ring(f);
	f->ring.rings = 2;
}
static void m_ring_rings_high(struct fx *f)
{
	m_ring(f);
	f->ring.gpus = 0;
	f->ring.rings = 33;
}
static void m_ring_orch_unknown(struct fx *f)
{
	m_ring(f);
	f->ring.orchestration = "best-fit";
}
static void m_ring_orch_ctrl(struct fx *f)
{
	m_ring(f);
	f->ring.orchestration = "greedy\n";
}
static void m_ring_placement(struct fx *f)
{
	m_ring(f);
	f->job.placement = &f->placement;
}
static void m_ring_planner(struct fx *f)
{
	m_ring(f);
	f->options.planner = "leaf-centric";
}
static void m_ring_moving(struct fx *f)
{
	m_ring(f);
	f->options.allow_moving_other_jobs = true;
}
static void m_ring_on_leaf_spine(struct fx *f)
{
	m_ring(f);
	f->job.placement = &f->placement; /* the kind is refused before the placement */
}
/* drift scopes (issue 14 #2) */
static void m_scope_ports_without_device(struct fx *f)
{
	f->scope.device = "";
}
static void m_scope_ports_unflagged(struct fx *f)
{
	f->scope.has_ports = false;
}
static void m_scope_port_high(struct fx *f)
{
	f->scope.out_port = 70000;
}
static void m_scope_bad_device(struct fx *f)
{
	f->scope.device = "ocs/g0";
}
static void m_scope_all(struct fx *f)
{
	f->adopt.scope = NULL;
	f->adopt.job_id = "";
}
static void m_adopt_bad_job(struct fx *f)
{
	f->adopt.job_id = "a b";
}

static void m_mark_low(struct fx *f)
{
	f->mark.node = -1;
}
static void m_mark_high(struct fx *f)
{
	f->mark.node = 64;
}
static void m_mark_healthy(struct fx *f)
{
	f->mark.node = 0;
	f->mark.condition = OCS__V1__NODE_CONDITION__NODE_CONDITION_HEALTHY;
}
static void m_mark_no_condition(struct fx *f)
{
	f->mark.condition = OCS__V1__NODE_CONDITION__NODE_CONDITION_UNSPECIFIED;
}
static void m_mark_bad_condition(struct fx *f)
{
	f->mark.condition = (Ocs__V1__NodeCondition)7;
}
static void m_rings_filters(struct fx *f)
{
	f->list_rings.job_id = "job-1";
	f->list_rings.has_node = true;
	f->list_rings.node = 63;
}
static void m_rings_node_high(struct fx *f)
{
	f->list_rings.has_node = true;
	f->list_rings.node = 64;
}
static void m_rings_node_no_flag(struct fx *f)
{
	f->list_rings.node = 3;
}
static void m_rings_job(struct fx *f)
{
	f->list_rings.job_id = "job 1";
}
static void m_group_any(struct fx *f)
{
	f->list_devices.has_group = true;
	f->list_devices.group = 0;
}
static void m_circuits_pod_zero(struct fx *f)
{
	f->list_circuits.has_pod = true;
	f->list_circuits.pod = 0;
}

struct vcase {
	const char *name;
	enum nb_method method;
	void (*mutate)(struct fx *f);
	enum nb_code code;
	const char *field;
	const char *message; /* substring of the message */
};

static const struct vcase cases[] = {
	{"valid job", NB_JOBS_SUBMIT_JOB, m_none, NB_OK, "", ""},
	{"valid plan", NB_JOBS_PLAN_JOB, m_none, NB_OK, "", ""},
	{"valid filters", NB_FABRIC_LIST_CIRCUITS, m_valid_filters, NB_OK, "", ""},
	{"id empty", NB_JOBS_SUBMIT_JOB, m_id_empty, NB_INVALID_ARGUMENT, "id", "required"},
	{"id too long", NB_JOBS_SUBMIT_JOB, m_id_long, NB_INVALID_ARGUMENT, "id",
	 "65 characters, at most 64"},
	{"id slash", NB_JOBS_PLAN_JOB, m_id_slash, NB_INVALID_ARGUMENT, "id",
	 "character '/' at offset 3"},
	{"id non-ascii", NB_JOBS_SUBMIT_JOB, m_id_nonascii, NB_INVALID_ARGUMENT, "id",
	 "byte 0xc3 at offset 1"},
	{"key too long", NB_JOBS_SUBMIT_JOB, m_key_long, NB_INVALID_ARGUMENT, "idempotency_key",
	 "129 characters, at most 128"},
	{"key control char", NB_JOBS_SUBMIT_JOB, m_key_ctrl, NB_INVALID_ARGUMENT, "idempotency_key",
	 "byte 0x09 at offset 1"},
	{"no placement", NB_JOBS_SUBMIT_JOB, m_no_placement, NB_INVALID_ARGUMENT, "placement",
	 "required"},
	{"no gpus", NB_JOBS_SUBMIT_JOB, m_no_gpus, NB_INVALID_ARGUMENT, "placement.gpus", "empty"},
	{"gpu negative", NB_JOBS_SUBMIT_JOB, m_gpu_negative, NB_INVALID_ARGUMENT,
	 "placement.gpus[3].gpu", "-1 is outside 0..32767"},
	{"gpu too high", NB_JOBS_PLAN_JOB, m_gpu_high, NB_INVALID_ARGUMENT, "placement.gpus[2].gpu",
	 "32768 is outside 0..32767"},
	{"leaf too high", NB_JOBS_SUBMIT_JOB, m_leaf_high, NB_INVALID_ARGUMENT,
	 "placement.gpus[12].leaf", "4100 is outside 0..4095"},
	{"leaf negative", NB_JOBS_SUBMIT_JOB, m_leaf_negative, NB_INVALID_ARGUMENT,
	 "placement.gpus[0].leaf", "-5 is outside 0..4095"},
	{"leaf does not hold gpu", NB_JOBS_SUBMIT_JOB, m_leaf_wrong, NB_INVALID_ARGUMENT,
	 "placement.gpus[2].leaf", "leaf 0 does not hold gpu 8 (leaf 1 does)"},
	{"pod too high", NB_JOBS_SUBMIT_JOB, m_pod_high, NB_INVALID_ARGUMENT,
	 "placement.gpus[4].pod", "4 is outside 0..3"},
	{"pod does not hold leaf", NB_JOBS_SUBMIT_JOB, m_pod_wrong, NB_INVALID_ARGUMENT,
	 "placement.gpus[4].pod", "pod 0 does not hold leaf 1024 (pod 1 does)"},
	{"gpu twice", NB_JOBS_SUBMIT_JOB, m_gpu_twice, NB_INVALID_ARGUMENT, "placement.gpus[3].gpu",
	 "1 is listed twice (first at gpus[1])"},
	{"too many gpus", NB_JOBS_SUBMIT_JOB, m_too_many_gpus, NB_INVALID_ARGUMENT,
	 "placement.gpus", "65 GPUs, at most 64"},
	{"no demand", NB_JOBS_SUBMIT_JOB, m_no_demand, NB_INVALID_ARGUMENT, "demand",
	 "set leaf_demand"},
	{"no pairs", NB_JOBS_SUBMIT_JOB, m_no_pairs, NB_INVALID_ARGUMENT, "leaf_demand.pairs",
	 "empty"},
	{"pair a too high", NB_JOBS_SUBMIT_JOB, m_pair_a_high, NB_INVALID_ARGUMENT,
	 "leaf_demand.pairs[1].a", "9000 is outside 0..4095"},
	{"pair b negative", NB_JOBS_PLAN_JOB, m_pair_b_negative, NB_INVALID_ARGUMENT,
	 "leaf_demand.pairs[0].b", "-1 is outside 0..4095"},
	{"pair to itself", NB_JOBS_SUBMIT_JOB, m_pair_self, NB_INVALID_ARGUMENT,
	 "leaf_demand.pairs[0].b", "equals a (0)"},
	{"pair zero links", NB_JOBS_SUBMIT_JOB, m_pair_links_zero, NB_INVALID_ARGUMENT,
	 "leaf_demand.pairs[0].links", "0 is outside 1..8"},
	{"pair too many links", NB_JOBS_SUBMIT_JOB, m_pair_links_high, NB_INVALID_ARGUMENT,
	 "leaf_demand.pairs[0].links", "9 is outside 1..8"},
	{"pair leaf without gpus", NB_JOBS_SUBMIT_JOB, m_pair_foreign_leaf, NB_INVALID_ARGUMENT,
	 "leaf_demand.pairs[1].b", "leaf 7 holds none of the job's GPUs"},
	{"pair listed twice", NB_JOBS_SUBMIT_JOB, m_pair_twice, NB_INVALID_ARGUMENT,
	 "leaf_demand.pairs[2]", "leaves 0 and 1 are listed twice (first at pairs[0])"},
	{"leaf oversubscribed", NB_JOBS_SUBMIT_JOB, m_leaf_oversubscribed, NB_INVALID_ARGUMENT,
	 "leaf_demand.pairs[1].links", "leaf 0 would need 9 links in total, it has 8"},
	{"planner unknown", NB_JOBS_PLAN_JOB, m_planner_unknown, NB_INVALID_ARGUMENT,
	 "options.planner",
	 "\"delta-slow\" is not a known planner (leaf-centric, pod-centric, "
	 "delta-fast, prop-alloc, sqrt-alloc, iter-halve)"},
	{"valid parallelism", NB_JOBS_SUBMIT_JOB, m_par, NB_OK, "", ""},
	{"parallelism default planner", NB_JOBS_PLAN_JOB, m_par_default_planner, NB_OK, "", ""},
	{"parallelism baseline, MoE", NB_JOBS_PLAN_JOB, m_par_baseline, NB_OK, "", ""},
	{"parallelism with leaf planner", NB_JOBS_SUBMIT_JOB, m_par_leaf_planner,
	 NB_INVALID_ARGUMENT, "options.planner",
	 "\"leaf-centric\" plans a leaf_demand, not a parallelism spec"},
	{"leaf demand with delta planner", NB_JOBS_PLAN_JOB, m_leaf_delta_planner,
	 NB_INVALID_ARGUMENT, "options.planner",
	 "\"delta-fast\" plans a parallelism spec, not a leaf_demand"},
	{"parallelism tp 0", NB_JOBS_SUBMIT_JOB, m_par_tp_zero, NB_INVALID_ARGUMENT,
	 "parallelism.tp", "0 is outside 1..1024"},
	{"parallelism pp too high", NB_JOBS_SUBMIT_JOB, m_par_pp_high, NB_INVALID_ARGUMENT,
	 "parallelism.pp", "2000 is outside 1..1024"},
	{"parallelism no layers", NB_JOBS_SUBMIT_JOB, m_par_layers_zero, NB_INVALID_ARGUMENT,
	 "parallelism.layers", "0 is outside 1..100000"},
	{"parallelism zero bandwidth", NB_JOBS_SUBMIT_JOB, m_par_bw_zero, NB_INVALID_ARGUMENT,
	 "parallelism.bandwidth_gbps", "0 is outside (0, 1e+06]"},
	{"parallelism NaN bandwidth", NB_JOBS_PLAN_JOB, m_par_bw_nan, NB_INVALID_ARGUMENT,
	 "parallelism.bandwidth_gbps", "nan is outside"},
	{"parallelism efficiency", NB_JOBS_SUBMIT_JOB, m_par_efficiency, NB_INVALID_ARGUMENT,
	 "parallelism.efficiency", "1.5 is outside 0..1"},
	{"parallelism negative tflops", NB_JOBS_SUBMIT_JOB, m_par_tflops_negative,
	 NB_INVALID_ARGUMENT, "parallelism.gpu_tflops", "-1 is outside 0..1e+06"},
	{"parallelism g above a pod", NB_JOBS_SUBMIT_JOB, m_par_gpp_high, NB_INVALID_ARGUMENT,
	 "parallelism.gpus_per_pod_per_replica", "8193 is outside 1..8192"},
	{"parallelism first pod", NB_JOBS_SUBMIT_JOB, m_par_first_pod, NB_INVALID_ARGUMENT,
	 "parallelism.first_pod", "4 is outside 0..3"},
	{"parallelism no micro-batches", NB_JOBS_SUBMIT_JOB, m_par_mb_zero, NB_INVALID_ARGUMENT,
	 "parallelism.micro_batches", "0 is outside 1..16384"},
	{"parallelism too many micro-batches", NB_JOBS_SUBMIT_JOB, m_par_mb_high,
	 NB_INVALID_ARGUMENT, "parallelism.micro_batches", "16385 is outside 1..16384"},
	{"parallelism ffn matrices", NB_JOBS_SUBMIT_JOB, m_par_ffn_matrices, NB_INVALID_ARGUMENT,
	 "parallelism.ffn_matrices", "1 is not 0 (default), 2 or 3"},
	{"parallelism dense top_k", NB_JOBS_SUBMIT_JOB, m_par_dense_top_k, NB_INVALID_ARGUMENT,
	 "parallelism.top_k", "2 given for a dense model"},
	{"parallelism MoE top_k", NB_JOBS_SUBMIT_JOB, m_par_moe_top_k, NB_INVALID_ARGUMENT,
	 "parallelism.top_k", "9 is outside 1..8 (experts)"},
	{"parallelism time budget", NB_JOBS_SUBMIT_JOB, m_par_budget, NB_INVALID_ARGUMENT,
	 "parallelism.time_budget_ms", "5001 is outside 0..5000"},
	{"parallelism generations", NB_JOBS_SUBMIT_JOB, m_par_generations, NB_INVALID_ARGUMENT,
	 "parallelism.max_generations", "-1 is outside 0..100000"},
	{"parallelism 1e6 generations", NB_JOBS_PLAN_JOB, m_par_million_generations,
	 NB_INVALID_ARGUMENT, "parallelism.max_generations", "1000000 is outside 0..100000"},
	{"parallelism 1e6 stall generations", NB_JOBS_PLAN_JOB, m_par_stall, NB_INVALID_ARGUMENT,
	 "parallelism.stall_generations", "1000000 is outside 0..10000"},
	{"parallelism replicas", NB_JOBS_SUBMIT_JOB, m_par_replicas, NB_INVALID_ARGUMENT,
	 "parallelism.replicas_per_pod_set", "-2 is outside 0..8192"},
	{"planner control char", NB_JOBS_PLAN_JOB, m_planner_ctrl, NB_INVALID_ARGUMENT,
	 "options.planner", "byte 0x0a at offset 1"},
	{"group without flag", NB_FABRIC_LIST_DEVICES, m_group_no_flag, NB_INVALID_ARGUMENT,
	 "group", "2 given but has_group is false"},
	{"group too high", NB_FABRIC_LIST_DEVICES, m_group_high, NB_INVALID_ARGUMENT, "group",
	 "4 is outside 0..3"},
	{"circuits job id", NB_FABRIC_LIST_CIRCUITS, m_circuits_job, NB_INVALID_ARGUMENT, "job_id",
	 "character ' ' at offset 1"},
	{"circuits device", NB_FABRIC_LIST_CIRCUITS, m_circuits_device, NB_INVALID_ARGUMENT,
	 "device", "character '/' at offset 3"},
	{"circuits pod negative", NB_FABRIC_LIST_CIRCUITS, m_circuits_pod, NB_INVALID_ARGUMENT,
	 "pod", "-1 is outside 0..3"},
	{"circuits pod without flag", NB_FABRIC_LIST_CIRCUITS, m_circuits_pod_no_flag,
	 NB_INVALID_ARGUMENT, "pod", "3 given but has_pod is false"},
	{"drain no device", NB_FABRIC_DRAIN_DEVICE, m_drain_empty, NB_INVALID_ARGUMENT, "device",
	 "required"},
	{"drain long device", NB_FABRIC_DRAIN_DEVICE, m_drain_long, NB_INVALID_ARGUMENT, "device",
	 "65 characters, at most 64"},
	{"undrain bad device", NB_FABRIC_UNDRAIN_DEVICE, m_undrain_bad, NB_INVALID_ARGUMENT,
	 "device", "character ' ' at offset 3"},
	{"release no id", NB_JOBS_RELEASE_JOB, m_release_empty, NB_INVALID_ARGUMENT, "id",
	 "required"},
	{"get bad id", NB_JOBS_GET_JOB, m_get_bad, NB_INVALID_ARGUMENT, "id",
	 "character '/' at offset 2"},
	{"list bad state", NB_JOBS_LIST_JOBS, m_list_state, NB_INVALID_ARGUMENT, "state",
	 "42 is not a JobState"},
	{"health long service", NB_HEALTH_CHECK, m_health_long, NB_INVALID_ARGUMENT, "service",
	 "129 characters, at most 128"},
	{"ring job on leaf-spine", NB_JOBS_SUBMIT_JOB, m_ring_on_leaf_spine, NB_FAILED_PRECONDITION,
	 "ring", "a ring request needs an ocstrx-ring domain; this fabric is leaf-spine-ocs"},
	{"mark node on leaf-spine", NB_FABRIC_MARK_NODE, m_none, NB_FAILED_PRECONDITION, "node",
	 "this fabric is leaf-spine-ocs"},
	{"list rings on leaf-spine", NB_FABRIC_LIST_RINGS, m_none, NB_FAILED_PRECONDITION, "",
	 "rings exist only on an ocstrx-ring domain; this fabric is leaf-spine-ocs"},
	{"list drift", NB_FABRIC_LIST_DRIFT, m_none, NB_OK, "", ""},
	{"list cabling", NB_FABRIC_LIST_CABLING, m_none, NB_OK, "", ""},
	{"list cabling bad device", NB_FABRIC_LIST_CABLING, m_cabling_device_bad,
	 NB_INVALID_ARGUMENT, "device", "character '/' at offset 3"},
	{"clear cabling", NB_FABRIC_CLEAR_CABLING, m_none, NB_OK, "", ""},
	{"clear cabling no device", NB_FABRIC_CLEAR_CABLING, m_cabling_clear_no_device,
	 NB_INVALID_ARGUMENT, "device", "required"},
	{"clear cabling port too big", NB_FABRIC_CLEAR_CABLING, m_cabling_clear_port,
	 NB_INVALID_ARGUMENT, "port", "65536 is outside 0..65535"},
	{"clear cabling port negative", NB_FABRIC_CLEAR_CABLING, m_cabling_clear_port_negative,
	 NB_INVALID_ARGUMENT, "port", "-1 is outside 0..65535"},
	{"adopt one cross-connect", NB_FABRIC_ADOPT_CROSS_CONNECTS, m_none, NB_OK, "", ""},
	{"adopt everything", NB_FABRIC_ADOPT_CROSS_CONNECTS, m_scope_all, NB_OK, "", ""},
	{"clear one cross-connect", NB_FABRIC_CLEAR_CROSS_CONNECTS, m_none, NB_OK, "", ""},
	{"clear ports without device", NB_FABRIC_CLEAR_CROSS_CONNECTS, m_scope_ports_without_device,
	 NB_INVALID_ARGUMENT, "scope.device", "required"},
	{"adopt ports unflagged", NB_FABRIC_ADOPT_CROSS_CONNECTS, m_scope_ports_unflagged,
	 NB_INVALID_ARGUMENT, "scope.has_ports", "set has_ports"},
	{"clear port too high", NB_FABRIC_CLEAR_CROSS_CONNECTS, m_scope_port_high,
	 NB_INVALID_ARGUMENT, "scope.out_port", "70000 is outside 0..65535"},
	{"adopt bad device", NB_FABRIC_ADOPT_CROSS_CONNECTS, m_scope_bad_device,
	 NB_INVALID_ARGUMENT, "scope.device", "character '/' at offset 3"},
	{"adopt bad job id", NB_FABRIC_ADOPT_CROSS_CONNECTS, m_adopt_bad_job, NB_INVALID_ARGUMENT,
	 "job_id", "character ' ' at offset 1"},
};

/* On the ring domain of ring_limits (64 nodes x 4 GPUs). */
static const struct vcase ring_cases[] = {
	{"valid ring job", NB_JOBS_SUBMIT_JOB, m_ring, NB_OK, "", ""},
	{"valid ring plan", NB_JOBS_PLAN_JOB, m_ring, NB_OK, "", ""},
	{"ring whole domain", NB_JOBS_PLAN_JOB, m_ring_whole_domain, NB_OK, "", ""},
	{"ring by rings, greedy", NB_JOBS_SUBMIT_JOB, m_ring_by_rings, NB_OK, "", ""},
	{"ring tp 0", NB_JOBS_SUBMIT_JOB, m_ring_tp_zero, NB_INVALID_ARGUMENT, "ring.tp",
	 "0: give the GPUs of one TP ring, a positive multiple of the 4 GPUs per node"},
	{"ring tp negative", NB_JOBS_PLAN_JOB, m_ring_tp_negative, NB_INVALID_ARGUMENT, "ring.tp",
	 "-8: give the GPUs"},
	{"ring tp not per node", NB_JOBS_SUBMIT_JOB, m_ring_tp_odd, NB_INVALID_ARGUMENT, "ring.tp",
	 "6 is not a multiple of the 4 GPUs per node"},
	{"ring tp above domain", NB_JOBS_SUBMIT_JOB, m_ring_tp_high, NB_INVALID_ARGUMENT, "ring.tp",
	 "260 exceeds the domain's 256 GPUs"},
	{"ring gpus negative", NB_JOBS_SUBMIT_JOB, m_ring_gpus_negative, NB_INVALID_ARGUMENT,
	 "ring.gpus", "-8 is negative"},
	{"ring gpus not per tp", NB_JOBS_SUBMIT_JOB, m_ring_gpus_odd, NB_INVALID_ARGUMENT,
	 "ring.gpus", "12 is not a multiple of ring.tp (8)"},
	{"ring gpus above domain", NB_JOBS_SUBMIT_JOB, m_ring_gpus_high, NB_INVALID_ARGUMENT,
	 "ring.gpus", "264 exceeds the domain's 256 GPUs"},
	{"ring rings negative", NB_JOBS_SUBMIT_JOB, m_ring_rings_negative, NB_INVALID_ARGUMENT,
	 "ring.rings", "-1 is negative"},
	{"ring rings and gpus", NB_JOBS_SUBMIT_JOB, m_ring_rings_and_gpus, NB_INVALID_ARGUMENT,
	 "ring.rings", "2 given together with ring.gpus (32)"},
	{"ring rings above domain", NB_JOBS_SUBMIT_JOB, m_ring_rings_high, NB_INVALID_ARGUMENT,
	 "ring.rings", "33 rings of 8 GPUs need 264 GPUs, more than the domain's 256 GPUs"},
	{"ring orchestration unknown", NB_JOBS_PLAN_JOB, m_ring_orch_unknown, NB_INVALID_ARGUMENT,
	 "ring.orchestration",
	 "\"best-fit\" is not a known orchestration (dcn-free, fat-tree or greedy)"},
	{"ring orchestration control char", NB_JOBS_PLAN_JOB, m_ring_orch_ctrl, NB_INVALID_ARGUMENT,
	 "ring.orchestration", "byte 0x0a at offset 6"},
	{"ring job with placement", NB_JOBS_SUBMIT_JOB, m_ring_placement, NB_INVALID_ARGUMENT,
	 "placement", "a ring job has no placement"},
	{"ring job with planner", NB_JOBS_SUBMIT_JOB, m_ring_planner, NB_INVALID_ARGUMENT,
	 "options.planner", "a ring job takes no planner; choose ring.orchestration"},
	{"ring job moving others", NB_JOBS_SUBMIT_JOB, m_ring_moving, NB_INVALID_ARGUMENT,
	 "options.allow_moving_other_jobs", "never moves"},
	{"leaf demand on ring domain", NB_JOBS_SUBMIT_JOB, m_none, NB_FAILED_PRECONDITION,
	 "leaf_demand",
	 "an ocstrx-ring domain takes ring requests (ring), not leaf_demand; this fabric is "
	 "ocstrx-ring"},
	{"parallelism on ring domain", NB_JOBS_PLAN_JOB, m_par, NB_FAILED_PRECONDITION,
	 "parallelism", "this fabric is ocstrx-ring"},
	{"no demand on ring domain", NB_JOBS_SUBMIT_JOB, m_no_demand, NB_INVALID_ARGUMENT, "demand",
	 "required: set ring"},
	{"bad id first", NB_JOBS_SUBMIT_JOB, m_id_slash, NB_INVALID_ARGUMENT, "id",
	 "character '/'"},
	{"mark node faulty", NB_FABRIC_MARK_NODE, m_none, NB_OK, "", ""},
	{"mark node healthy", NB_FABRIC_MARK_NODE, m_mark_healthy, NB_OK, "", ""},
	{"mark node negative", NB_FABRIC_MARK_NODE, m_mark_low, NB_INVALID_ARGUMENT, "node",
	 "-1 is outside 0..63"},
	{"mark node too high", NB_FABRIC_MARK_NODE, m_mark_high, NB_INVALID_ARGUMENT, "node",
	 "64 is outside 0..63"},
	{"mark node no condition", NB_FABRIC_MARK_NODE, m_mark_no_condition, NB_INVALID_ARGUMENT,
	 "condition", "required: NODE_CONDITION_HEALTHY or NODE_CONDITION_FAULTY"},
	{"mark node bad condition", NB_FABRIC_MARK_NODE, m_mark_bad_condition, NB_INVALID_ARGUMENT,
	 "condition", "7 is not a NodeCondition"},
	{"list rings, no filter", NB_FABRIC_LIST_RINGS, m_none, NB_OK, "", ""},
	{"list rings, filters", NB_FABRIC_LIST_RINGS, m_rings_filters, NB_OK, "", ""},
	{"list rings node too high", NB_FABRIC_LIST_RINGS, m_rings_node_high, NB_INVALID_ARGUMENT,
	 "node", "64 is outside 0..63"},
	{"list rings node without flag", NB_FABRIC_LIST_RINGS, m_rings_node_no_flag,
	 NB_INVALID_ARGUMENT, "node", "3 given but has_node is false"},
	{"list rings bad job", NB_FABRIC_LIST_RINGS, m_rings_job, NB_INVALID_ARGUMENT, "job_id",
	 "character ' ' at offset 3"},
	{"list devices, no groups", NB_FABRIC_LIST_DEVICES, m_group_any, NB_FAILED_PRECONDITION,
	 "group", "no device groups; this fabric is ocstrx-ring"},
	{"list devices, no filter", NB_FABRIC_LIST_DEVICES, m_none, NB_OK, "", ""},
	{"list circuits by pod", NB_FABRIC_LIST_CIRCUITS, m_circuits_pod_zero,
	 NB_FAILED_PRECONDITION, "pod", "an ocstrx-ring domain has no pods"},
	{"list circuits by job", NB_FABRIC_LIST_CIRCUITS, m_circuits_job, NB_INVALID_ARGUMENT,
	 "job_id", "character ' '"},
	{"list drift on a ring domain (its bundles)", NB_FABRIC_LIST_DRIFT, m_none, NB_OK, "", ""},
	{"clear on a ring domain", NB_FABRIC_CLEAR_CROSS_CONNECTS, m_none, NB_FAILED_PRECONDITION,
	 "scope", "this fabric is ocstrx-ring"},
};

/* The northbound knows no planner: the test passes them as the daemon does. */
static const struct nb_planner all_planners[] = {
	{"leaf-centric", false}, {"pod-centric", false}, {"delta-fast", true},
	{"prop-alloc", true},	 {"sqrt-alloc", true},	 {"iter-halve", true},
};

static void set_planners(struct nb_limits *lim)
{
	lim->n_planners = sizeof(all_planners) / sizeof(all_planners[0]);
	memcpy(lim->planners, all_planners, sizeof(all_planners));
}

/* Runs a table of cases against lim; returns how many were refused. */
static int run_cases(const struct vcase *table, size_t n, const struct nb_limits *lim)
{
	int refused = 0;

	for (size_t i = 0; i < n; i++) {
		const struct vcase *c = &table[i];
		struct fx *f = malloc(sizeof(*f));
		const ProtobufCMessage *req;
		uint8_t *wire;
		size_t len;
		ProtobufCMessage *out = NULL;
		struct nb_error err = {0};
		int rc;

		assert_non_null(f);
		fx_init(f);
		c->mutate(f);
		req = fx_request(f, c->method);
		len = protobuf_c_message_get_packed_size(req);
		wire = malloc(len + 1);
		assert_non_null(wire);
		protobuf_c_message_pack(req, wire);
		rc = nb_decode_request(c->method, wire, len, lim, 0, &out, &err);
		if (c->code == NB_OK) {
			if (rc != 0)
				fail_msg("case '%s': refused: %s: %s", c->name, err.field,
					 err.message);
			assert_non_null(out);
			protobuf_c_message_free_unpacked(out, NULL);
		} else {
			if (rc == 0)
				fail_msg("case '%s': accepted", c->name);
			assert_null(out);
			if (err.code != c->code || strcmp(err.field, c->field) != 0 ||
			    !strstr(err.message, c->message))
				fail_msg("case '%s': got %s '%s: %s', want %s '%s: ...%s...'",
					 c->name, nb_code_name(err.code), err.field, err.message,
					 nb_code_name(c->code), c->field, c->message);
			refused++;
		}
		free(wire);
		free(f);
	}
	return refused;
}

static void test_table(void **state)
{
	struct nb_limits lim = limits;

	(void)state;
	lim.max_gpus_per_job = 64;
	set_planners(&lim);
	assert_true(run_cases(cases, sizeof(cases) / sizeof(cases[0]), &lim) >= 60);
}

/* The daemon passes its planners on a ring domain too: they change nothing. */
static void test_ring_table(void **state)
{
	struct nb_limits lim = ring_limits;

	(void)state;
	set_planners(&lim);
	assert_true(run_cases(ring_cases, sizeof(ring_cases) / sizeof(ring_cases[0]), &lim) >= 25);
}

/* Bytes that are not a protobuf message at all. */
static void test_malformed_bytes(void **state)
{
	static const uint8_t truncated_varint[] = {0x08, 0xff, 0xff};
	static const uint8_t bad_length[] = {0x0a, 0x7f, 'a'};
	static const uint8_t wrong_wire_type[] = {0x0d, 0, 0, 0, 0}; /* id as fixed32 */
	const uint8_t *inputs[] = {truncated_varint, bad_length, wrong_wire_type};
	size_t lens[] = {sizeof(truncated_varint), sizeof(bad_length), sizeof(wrong_wire_type)};
	ProtobufCMessage *out;
	struct nb_error err;

	(void)state;
	for (size_t i = 0; i < 3; i++) {
		memset(&err, 0, sizeof(err));
		assert_int_not_equal(nb_decode_request(NB_JOBS_SUBMIT_JOB, inputs[i], lens[i],
						       &limits, 0, &out, &err),
				     0);
		assert_int_equal(err.code, NB_INVALID_ARGUMENT);
		assert_string_equal(err.field, "request");
		assert_non_null(strstr(err.message, "not a valid ocs.v1.JobSpec"));
	}
}

/* A 64 MB message is refused before it is parsed. */
static void test_64mb_refused(void **state)
{
	size_t len = (size_t)64 << 20;
	uint8_t *big = calloc(len, 1);
	ProtobufCMessage *out;
	struct nb_error err = {0};

	(void)state;
	assert_non_null(big);
	assert_int_not_equal(
		nb_decode_request(NB_JOBS_SUBMIT_JOB, big, len, &limits, 0, &out, &err), 0);
	assert_int_equal(err.code, NB_RESOURCE_EXHAUSTED);
	assert_string_equal(err.field, "request");
	assert_string_equal(err.message, "67108864 bytes exceed the limit of 4194304 bytes");
	free(big);
}

/* Validation needs sane limits from the daemon, and names what is wrong. */
static void test_limits(void **state)
{
	struct nb_limits lim = limits;
	struct nb_error err = {0};

	(void)state;
	assert_int_equal(nb_limits_check(&lim, &err), 0);
	lim.gpus_per_leaf = 0;
	assert_int_not_equal(nb_limits_check(&lim, &err), 0);
	assert_string_equal(err.field, "limits.gpus_per_leaf");
	lim = limits;
	set_planners(&lim);
	assert_int_equal(nb_limits_check(&lim, &err), 0);
	lim.planners[2].name = NULL;
	assert_int_not_equal(nb_limits_check(&lim, &err), 0);
	assert_string_equal(err.field, "limits.planners");
	lim.n_planners = NB_PLANNERS_MAX + 1;
	assert_int_not_equal(nb_limits_check(&lim, &err), 0);
	assert_string_equal(err.field, "limits.n_planners");
	/* A leaf-spine fabric has no ring size; a ring domain has no pods. */
	lim = limits;
	lim.ring.nodes = 8;
	assert_int_not_equal(nb_limits_check(&lim, &err), 0);
	assert_string_equal(err.field, "limits.ring");
	lim = ring_limits;
	assert_int_equal(nb_limits_check(&lim, &err), 0);
	lim.ring.gpus_per_node = 0;
	assert_int_not_equal(nb_limits_check(&lim, &err), 0);
	assert_string_equal(err.field, "limits.ring.gpus_per_node");
	lim = ring_limits;
	lim.ring.nodes = -1;
	assert_int_not_equal(nb_limits_check(&lim, &err), 0);
	assert_string_equal(err.field, "limits.ring.nodes");
	lim = ring_limits;
	lim.pods = 2;
	assert_int_not_equal(nb_limits_check(&lim, &err), 0);
	assert_string_equal(err.field, "limits.pods");
	lim = ring_limits;
	lim.kind = (enum nb_fabric_kind)9;
	assert_int_not_equal(nb_limits_check(&lim, &err), 0);
	assert_string_equal(err.field, "limits.kind");
	/* Every request is refused while the limits are bad. */
	assert_int_not_equal(
		nb_validate_request(
			NB_FABRIC_GET_FABRIC,
			&(Ocs__V1__GetFabricRequest)OCS__V1__GET_FABRIC_REQUEST__INIT.base, &lim,
			&err),
		0);
	assert_int_equal(err.code, NB_INTERNAL);
}

/* max_gpus_per_job bounds a ring job as it bounds a placement. */
static void test_ring_job_bound(void **state)
{
	struct nb_limits lim = ring_limits;
	struct fx *f = malloc(sizeof(*f));
	struct nb_error err = {0};

	(void)state;
	assert_non_null(f);
	lim.max_gpus_per_job = 64;
	fx_init(f);
	m_ring(f);
	f->ring.gpus = 64;
	assert_int_equal(nb_validate_request(NB_JOBS_SUBMIT_JOB, &f->job.base, &lim, &err), 0);
	f->ring.gpus = 72;
	assert_int_not_equal(nb_validate_request(NB_JOBS_SUBMIT_JOB, &f->job.base, &lim, &err), 0);
	assert_string_equal(err.field, "ring.gpus");
	assert_string_equal(err.message, "72 exceeds the 64 GPUs a job may hold");
	f->ring.gpus = 0;
	f->ring.rings = 9;
	assert_int_not_equal(nb_validate_request(NB_JOBS_SUBMIT_JOB, &f->job.base, &lim, &err), 0);
	assert_string_equal(err.field, "ring.rings");
	assert_string_equal(err.message,
			    "9 rings of 8 GPUs need 72 GPUs, more than the 64 GPUs a job may hold");
	free(f);
}

/* The planner a job names, against the daemon's list or without one. */
static void check_job_planner(const struct nb_limits *lim, const char *planner, bool parallelism,
			      const char *want_message)
{
	struct fx *f = malloc(sizeof(*f));
	struct nb_error err = {0};
	int rc;

	assert_non_null(f);
	fx_init(f);
	if (parallelism)
		m_par(f);
	f->options.planner = (char *)planner;
	rc = nb_validate_request(NB_JOBS_SUBMIT_JOB, &f->job.base, lim, &err);
	if (!want_message && rc != 0)
		fail_msg("planner '%s': refused: %s: %s", planner, err.field, err.message);
	if (want_message) {
		assert_int_not_equal(rc, 0);
		assert_string_equal(err.field, "options.planner");
		assert_string_equal(err.message, want_message);
	}
	free(f);
}

static void test_planner_lists(void **state)
{
	struct nb_limits lim = limits;

	(void)state;
	/* Without the daemon's list any printable name passes: the daemon checks it. */
	check_job_planner(&lim, "some-planner", false, NULL);
	check_job_planner(&lim, "delta-fast", false, NULL);
	check_job_planner(&lim, "x\n", false, "byte 0x0a at offset 1 is not printable ASCII");
	/* With it: known names of the job's kind only, the right kind suggested. */
	set_planners(&lim);
	check_job_planner(&lim, "", false, NULL);
	check_job_planner(&lim, "", true, NULL);
	check_job_planner(&lim, "pod-centric", false, NULL);
	check_job_planner(&lim, "sqrt-alloc", true, NULL);
	check_job_planner(&lim, "some-planner", false,
			  "\"some-planner\" is not a known planner (leaf-centric, pod-centric, "
			  "delta-fast, prop-alloc, sqrt-alloc, iter-halve)");
	check_job_planner(&lim, "delta-fast", false,
			  "\"delta-fast\" plans a parallelism spec, not a leaf_demand (use "
			  "leaf-centric or pod-centric)");
	check_job_planner(&lim, "pod-centric", true,
			  "\"pod-centric\" plans a leaf_demand, not a parallelism spec (use "
			  "delta-fast, prop-alloc, sqrt-alloc or iter-halve)");
	/* A list of one kind: what the daemon passes decides, not a table in the northbound. */
	lim.n_planners = 1;
	check_job_planner(&lim, "pod-centric", false,
			  "\"pod-centric\" is not a known planner (leaf-centric)");
}

static void test_method_table(void **state)
{
	(void)state;
	assert_int_equal(nb_method_from_path("/ocs.v1.Jobs/SubmitJob", 22), NB_JOBS_SUBMIT_JOB);
	assert_int_equal(nb_method_from_path("/ocs.v1.Jobs/Nope", 17), NB_METHOD_COUNT);
	assert_string_equal(nb_method_name(NB_FABRIC_DRAIN_DEVICE), "Fabric/DrainDevice");
	assert_int_equal(nb_method_min_role(NB_FABRIC_DRAIN_DEVICE), NB_ROLE_OPERATOR);
	assert_int_equal(nb_method_min_role(NB_JOBS_SUBMIT_JOB), NB_ROLE_SCHEDULER);
	assert_int_equal(nb_method_min_role(NB_JOBS_LIST_JOBS), NB_ROLE_VIEWER);
	assert_int_equal(nb_method_min_role(NB_HEALTH_CHECK), NB_ROLE_NONE);
	assert_true(NB_ROLE_OPERATOR > NB_ROLE_SCHEDULER && NB_ROLE_SCHEDULER > NB_ROLE_VIEWER);
	assert_int_equal(nb_method_from_path("/ocs.v1.Fabric/MarkNode", 23), NB_FABRIC_MARK_NODE);
	assert_int_equal(nb_method_from_path("/ocs.v1.Fabric/ListRings", 24), NB_FABRIC_LIST_RINGS);
	assert_string_equal(nb_method_name(NB_FABRIC_MARK_NODE), "Fabric/MarkNode");
	assert_int_equal(nb_method_min_role(NB_FABRIC_MARK_NODE), NB_ROLE_OPERATOR);
	assert_int_equal(nb_method_min_role(NB_FABRIC_LIST_RINGS), NB_ROLE_VIEWER);
	assert_int_equal(nb_method_from_path("/ocs.v1.Fabric/ClearCabling", 27),
			 NB_FABRIC_CLEAR_CABLING);
	assert_int_equal(nb_method_min_role(NB_FABRIC_CLEAR_CABLING), NB_ROLE_OPERATOR);
	assert_int_equal(nb_method_min_role(NB_FABRIC_LIST_CABLING), NB_ROLE_VIEWER);
	assert_string_equal(nb_fabric_kind_name(NB_FABRIC_OCSTRX_RING), "ocstrx-ring");
	assert_string_equal(nb_fabric_kind_name(NB_FABRIC_LEAF_SPINE_OCS), "leaf-spine-ocs");
}

/* Random bytes and bit-flipped encodings never crash the decoder, and are
 * either valid or refused as a whole request or by field. */
static void test_random_bytes(void **state)
{
	struct fx *f = malloc(sizeof(*f));
	uint8_t wire[512], buf[512];
	size_t len;

	(void)state;
	assert_non_null(f);
	fx_init(f);
	len = ocs__v1__job_spec__get_packed_size(&f->job);
	assert_true(len <= sizeof(wire));
	ocs__v1__job_spec__pack(&f->job, wire);
	srand48(7);
	for (int n = 0; n < 20000; n++) {
		size_t blen = len;
		ProtobufCMessage *out = NULL;
		struct nb_error err = {0};

		memcpy(buf, wire, len);
		if (n % 2) {
			blen = (size_t)(lrand48() % 64);
			for (size_t i = 0; i < blen; i++)
				buf[i] = (uint8_t)lrand48();
		} else {
			for (int k = 0; k < 1 + n % 4; k++)
				buf[lrand48() % len] ^= (uint8_t)(1u << (lrand48() % 8));
		}
		if (nb_decode_request(NB_JOBS_SUBMIT_JOB, buf, blen, &limits, 0, &out, &err) == 0) {
			protobuf_c_message_free_unpacked(out, NULL);
			continue;
		}
		assert_null(out);
		assert_int_equal(err.code, NB_INVALID_ARGUMENT);
		assert_true(err.field[0] != '\0');
	}
	free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),	       cmocka_unit_test(test_ring_table),
		cmocka_unit_test(test_ring_job_bound), cmocka_unit_test(test_malformed_bytes),
		cmocka_unit_test(test_planner_lists),  cmocka_unit_test(test_64mb_refused),
		cmocka_unit_test(test_limits),	       cmocka_unit_test(test_method_table),
		cmocka_unit_test(test_random_bytes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
