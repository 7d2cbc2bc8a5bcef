/*
 * bench_nb_latency.c - per-call latency of the northbound library from a C
 * client (ocsctl's nb_client), sequential calls on loopback, side by side:
 *   GetJob            plaintext and mTLS (role parsed from the certificate)
 *   PlanJob, 16 GPUs  mTLS: small request
 *   PlanJob, 4096 GPUs, 511 leaf pairs   mTLS: validation of a large job
 * The handler answers inside the gRPC thread (no daemon), so the figures
 * are what the gRPC side costs. Prints medians and p99 of 5 rounds.
 *
 * usage: bench_nb_latency MAKE_CERTS_SCRIPT [CALLS_PER_ROUND]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nb.h"
#include "nb_client.h"
#include "bench_clock.h"

#define ROUNDS 5

static void h_get_job(void *ctx, struct nb_call *call, const Ocs__V1__GetJobRequest *req)
{
	Ocs__V1__GetJobResponse r = OCS__V1__GET_JOB_RESPONSE__INIT;

	nb_call_reply(call, &r.base);
}

static void h_plan_job(void *ctx, struct nb_call *call, const Ocs__V1__JobSpec *req)
{
	Ocs__V1__PlanJobResponse r = OCS__V1__PLAN_JOB_RESPONSE__INIT;

	nb_call_reply(call, &r.base);
}

/* A job of n_gpus GPUs on n_gpus/8 leaves, pairs between neighbours. */
static Ocs__V1__JobSpec *make_job(int n_gpus)
{
	Ocs__V1__JobSpec *j = calloc(1, sizeof(*j));
	Ocs__V1__Placement *p = calloc(1, sizeof(*p));
	Ocs__V1__LeafDemand *d = calloc(1, sizeof(*d));
	int leaves = n_gpus / 8;

	ocs__v1__job_spec__init(j);
	ocs__v1__placement__init(p);
	ocs__v1__leaf_demand__init(d);
	j->id = strdup("bench");
	j->placement = p;
	p->n_gpus = (size_t)n_gpus;
	p->gpus = calloc((size_t)n_gpus, sizeof(*p->gpus));
	for (int i = 0; i < n_gpus; i++) {
		p->gpus[i] = calloc(1, sizeof(**p->gpus));
		ocs__v1__gpu_placement__init(p->gpus[i]);
		p->gpus[i]->gpu = i;
		p->gpus[i]->leaf = i / 8;
		p->gpus[i]->pod = i / 8 / 64;
	}
	j->demand_case = OCS__V1__JOB_SPEC__DEMAND_LEAF_DEMAND;
	j->leaf_demand = d;
	d->n_pairs = (size_t)(leaves - 1);
	d->pairs = calloc(d->n_pairs, sizeof(*d->pairs));
	for (size_t i = 0; i < d->n_pairs; i++) {
		d->pairs[i] = calloc(1, sizeof(**d->pairs));
		ocs__v1__leaf_pair__init(d->pairs[i]);
		d->pairs[i]->a = (int)i;
		d->pairs[i]->b = (int)i + 1;
		d->pairs[i]->links = 1;
	}
	return j;
}

/* Median and p99 of sequential calls over ROUNDS rounds; -1 on failure. */
static int measure(struct nb_client *c, enum nb_method m, const ProtobufCMessage *req,
		   const ProtobufCMessageDescriptor *resp_desc, int calls, double *p50, double *p99)
{
	double *lat = malloc((size_t)calls * sizeof(*lat)), med[ROUNDS], tail[ROUNDS];

	for (int r = 0; r < ROUNDS; r++) {
		for (int i = 0; i < calls; i++) {
			struct nb_client_status st;
			ProtobufCMessage *resp;
			double t0 = bench_now_us();

			if (nb_client_unary(c, nb_method_path(m), req, resp_desc, &resp, &st)) {
				fprintf(stderr, "%s: %d %s\n", nb_method_name(m), st.code,
					st.message);
				free(lat);
				return -1;
			}
			lat[i] = bench_now_us() - t0;
			protobuf_c_message_free_unpacked(resp, NULL);
		}
		qsort(lat, (size_t)calls, sizeof(*lat), bench_cmp_double);
		med[r] = lat[calls / 2];
		tail[r] = lat[calls * 99 / 100];
	}
	qsort(med, ROUNDS, sizeof(double), bench_cmp_double);
	qsort(tail, ROUNDS, sizeof(double), bench_cmp_double);
	*p50 = med[ROUNDS / 2];
	*p99 = tail[ROUNDS / 2];
	free(lat);
	return 0;
}

int main(int argc, char **argv)
{
	char dir[] = "/tmp/bench_nb_latency.XXXXXX", cmd[512], ca[300], cert[300], key[300];
	char scert[300], skey[300], target[64], err_text[256];
	struct nb_server_config cfg = {0};
	struct nb_server *plain = NULL, *tls = NULL;
	struct nb_client_opts co = {0};
	struct nb_client *pc, *tc;
	struct nb_error err = {0};
	Ocs__V1__GetJobRequest get = OCS__V1__GET_JOB_REQUEST__INIT;
	Ocs__V1__JobSpec *small, *large;
	int calls = argc > 2 ? atoi(argv[2]) : 1000, rc = 1;
	double p50, p99;

	if (argc < 2 || calls < 100 || !mkdtemp(dir)) {
		fprintf(stderr, "usage: bench_nb_latency MAKE_CERTS_SCRIPT [CALLS >= 100]\n");
		return 2;
	}
	snprintf(cmd, sizeof(cmd), "bash '%s' '%s'", argv[1], dir);
	if (system(cmd) != 0)
		return 1;
	snprintf(ca, sizeof(ca), "%s/ca.pem", dir);
	snprintf(cert, sizeof(cert), "%s/scheduler.pem", dir);
	snprintf(key, sizeof(key), "%s/scheduler.key", dir);
	snprintf(scert, sizeof(scert), "%s/server.pem", dir);
	snprintf(skey, sizeof(skey), "%s/server.key", dir);

	cfg.listen_addr = "127.0.0.1:0";
	cfg.limits = (struct nb_limits){
		.pods = 8, .leaves_per_pod = 64, .gpus_per_leaf = 8, .groups = 8};
	cfg.handlers.get_job = h_get_job;
	cfg.handlers.plan_job = h_plan_job;
	cfg.insecure = true;
	if (nb_server_create(&cfg, &plain, &err))
		goto out;
	cfg.insecure = false;
	cfg.tls_ca_file = ca;
	cfg.tls_cert_file = scert;
	cfg.tls_key_file = skey;
	if (nb_server_create(&cfg, &tls, &err))
		goto out;

	co.timeout_ms = 10000;
	snprintf(target, sizeof(target), "127.0.0.1:%d", nb_server_port(plain));
	co.target = target;
	co.insecure = true;
	pc = nb_client_new(&co, err_text, sizeof(err_text));
	snprintf(target, sizeof(target), "127.0.0.1:%d", nb_server_port(tls));
	co.insecure = false;
	co.ca_file = ca;
	co.cert_file = cert;
	co.key_file = key;
	tc = nb_client_new(&co, err_text, sizeof(err_text));
	if (!pc || !tc)
		goto out;
	get.id = "j1";
	small = make_job(16);
	large = make_job(4096);
	printf("northbound latency, sequential C client, %d calls x %d rounds (medians)\n", calls,
	       ROUNDS);
	if (measure(pc, NB_JOBS_GET_JOB, &get.base, &ocs__v1__get_job_response__descriptor, calls,
		    &p50, &p99))
		goto out;
	printf("GetJob, plaintext                 p50 %7.1f us  p99 %7.1f us\n", p50, p99);
	if (measure(tc, NB_JOBS_GET_JOB, &get.base, &ocs__v1__get_job_response__descriptor, calls,
		    &p50, &p99))
		goto out;
	printf("GetJob, mTLS                      p50 %7.1f us  p99 %7.1f us\n", p50, p99);
	if (measure(tc, NB_JOBS_PLAN_JOB, &small->base, &ocs__v1__plan_job_response__descriptor,
		    calls, &p50, &p99))
		goto out;
	printf("PlanJob 16 GPUs, mTLS             p50 %7.1f us  p99 %7.1f us\n", p50, p99);
	if (measure(tc, NB_JOBS_PLAN_JOB, &large->base, &ocs__v1__plan_job_response__descriptor,
		    calls / 10, &p50, &p99))
		goto out;
	printf("PlanJob 4096 GPUs/511 pairs, mTLS p50 %7.1f us  p99 %7.1f us\n", p50, p99);
	ocs__v1__job_spec__free_unpacked(small, NULL);
	ocs__v1__job_spec__free_unpacked(large, NULL);
	nb_client_free(pc);
	nb_client_free(tc);
	rc = 0;
out:
	if (rc)
		fprintf(stderr, "bench_nb_latency: failed (%s: %s)\n", err.field, err.message);
	nb_server_destroy(plain);
	nb_server_destroy(tls);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "bench_nb_latency: could not remove %s\n", dir);
	nb_grpc_settle(NB_SETTLE_MS);
	return rc;
}
