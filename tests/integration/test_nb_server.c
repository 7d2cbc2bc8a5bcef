/*
 * test_nb_server.c - the northbound library's contract with the daemon,
 * checked through a real server on loopback and the real client
 * (ocsctl's nb_client): answers from other threads, answers after the
 * client gave up, wrong response types, oversized responses, missing
 * handlers, call_done reports, health changes and event
 * sequence numbers, a destroy that drains calls posted late to the
 * thread destroying the server. The handlers here are test-only.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "nb.h"
#include "nb_client.h"

#define MAX_MESSAGE_BYTES (64 * 1024)

struct fixture {
	struct nb_server *server;
	struct nb_client *client;
	pthread_mutex_t mu;
	/* What answers returned; handlers run on gRPC threads, so they record
	 * and the test thread asserts. */
	int first_reply_rc, big_reply_rc, thread_rc;
	int handled;	 /* handlers that finished recording */
	bool saw_cancel; /* list_circuits saw nb_call_cancelled() */
	int done[NB_METHOD_COUNT];
	enum nb_code done_code[NB_METHOD_COUNT];
	char peer[64];
};

static struct fixture fx;

/* GetFabric answered with the wrong message type (which answers the call:
 * it must not be touched again). */
static void h_get_fabric(void *ctx, struct nb_call *call, const Ocs__V1__GetFabricRequest *req)
{
	Ocs__V1__ListJobsResponse wrong = OCS__V1__LIST_JOBS_RESPONSE__INIT;
	int first = nb_call_reply(call, &wrong.base);

	pthread_mutex_lock(&fx.mu);
	fx.first_reply_rc = first;
	fx.handled++;
	pthread_mutex_unlock(&fx.mu);
}

/* ListJobs answered with a response over max_message_bytes. */
static void h_list_jobs(void *ctx, struct nb_call *call, const Ocs__V1__ListJobsRequest *req)
{
	Ocs__V1__ListJobsResponse r = OCS__V1__LIST_JOBS_RESPONSE__INIT;
	Ocs__V1__Job job = OCS__V1__JOB__INIT;
	static char reason[MAX_MESSAGE_BYTES + 1];

	memset(reason, 'r', MAX_MESSAGE_BYTES);
	reason[MAX_MESSAGE_BYTES] = '\0';
	job.reason = reason;
	r.jobs = (Ocs__V1__Job *[]){&job};
	r.n_jobs = 1;
	int rc = nb_call_reply(call, &r.base);

	pthread_mutex_lock(&fx.mu);
	fx.big_reply_rc = rc;
	fx.handled++;
	pthread_mutex_unlock(&fx.mu);
}

/* ListDevices answered 50 ms later from a thread of its own. */
static void *late_reply(void *arg)
{
	struct nb_call *call = arg;
	Ocs__V1__ListDevicesResponse r = OCS__V1__LIST_DEVICES_RESPONSE__INIT;
	Ocs__V1__Device d = OCS__V1__DEVICE__INIT;

	usleep(50 * 1000);
	d.name = "ocs-g0-d0";
	r.devices = (Ocs__V1__Device *[]){&d};
	r.n_devices = 1;
	nb_call_reply(call, &r.base);
	return NULL;
}

static void h_list_devices(void *ctx, struct nb_call *call, const Ocs__V1__ListDevicesRequest *req)
{
	pthread_t t;

	pthread_mutex_lock(&fx.mu);
	snprintf(fx.peer, sizeof(fx.peer), "%s/%s", nb_role_name(nb_call_role(call)),
		 nb_call_peer(call));
	pthread_mutex_unlock(&fx.mu);
	fx.thread_rc |= pthread_create(&t, NULL, late_reply, call);
	pthread_detach(t);
}

/* ListCircuits answered only once the client has given up. */
static void *reply_after_cancel(void *arg)
{
	struct nb_call *call = arg;
	Ocs__V1__ListCircuitsResponse r = OCS__V1__LIST_CIRCUITS_RESPONSE__INIT;
	bool cancelled = false;

	for (int i = 0; i < 500 && !cancelled; i++) { /* bounded: 5 s */
		usleep(10 * 1000);
		cancelled = nb_call_cancelled(call);
	}
	pthread_mutex_lock(&fx.mu);
	fx.saw_cancel = cancelled;
	pthread_mutex_unlock(&fx.mu);
	nb_call_reply(call, &r.base); /* dropped, but frees the call */
	return NULL;
}

static void h_list_circuits(void *ctx, struct nb_call *call,
			    const Ocs__V1__ListCircuitsRequest *req)
{
	pthread_t t;

	fx.thread_rc |= pthread_create(&t, NULL, reply_after_cancel, call);
	pthread_detach(t);
}

static void h_get_job(void *ctx, struct nb_call *call, const Ocs__V1__GetJobRequest *req)
{
	nb_call_fail(call, NB_NOT_FOUND, "id", "no job %s", req->id);
}

static void call_done(void *ctx, enum nb_method m, enum nb_code code, uint64_t duration_us)
{
	pthread_mutex_lock(&fx.mu);
	fx.done[m]++;
	fx.done_code[m] = code;
	pthread_mutex_unlock(&fx.mu);
}

/* The client may see the answer before the handler returns: wait for it. */
static void wait_handled(int n)
{
	for (int i = 0; i < 500; i++) { /* bounded: 5 s */
		pthread_mutex_lock(&fx.mu);
		if (fx.handled >= n) {
			pthread_mutex_unlock(&fx.mu);
			return;
		}
		pthread_mutex_unlock(&fx.mu);
		usleep(10 * 1000);
	}
	fail_msg("handler %d did not finish", n);
}

static int setup(void **state)
{
	struct nb_server_config cfg = {0};
	struct nb_client_opts co = {0};
	struct nb_client_status st;
	struct nb_error err;
	char target[64], msg[128];

	memset(&fx, 0, sizeof(fx));
	pthread_mutex_init(&fx.mu, NULL);
	cfg.listen_addr = "127.0.0.1:0";
	cfg.insecure = true;
	cfg.insecure_role = NB_ROLE_OPERATOR;
	cfg.max_message_bytes = MAX_MESSAGE_BYTES;
	cfg.limits =
		(struct nb_limits){.pods = 2, .leaves_per_pod = 2, .gpus_per_leaf = 4, .groups = 2};
	cfg.handlers = (struct nb_handlers){
		.get_fabric = h_get_fabric,
		.list_jobs = h_list_jobs,
		.list_devices = h_list_devices,
		.list_circuits = h_list_circuits,
		.get_job = h_get_job,
		.call_done = call_done,
	};
	if (nb_server_create(&cfg, &fx.server, &err))
		fail_msg("server: %s: %s", err.field, err.message);
	snprintf(target, sizeof(target), "127.0.0.1:%d", nb_server_port(fx.server));
	co.target = target;
	co.insecure = true;
	co.timeout_ms = 3000;
	co.max_message_bytes = 4 << 20;
	fx.client = nb_client_new(&co, msg, sizeof(msg));
	assert_non_null(fx.client);
	assert_int_equal(nb_client_connect(fx.client, &st), 0);
	*state = &fx;
	return 0;
}

static int teardown(void **state)
{
	nb_client_free(fx.client);
	nb_server_destroy(fx.server);
	pthread_mutex_destroy(&fx.mu);
	return 0;
}

/* Calls method m; returns the status code and leaves the message in st. */
static int rpc(enum nb_method m, const ProtobufCMessage *req,
	       const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
	       struct nb_client_status *st)
{
	*resp = NULL;
	nb_client_unary(fx.client, nb_method_path(m), req, resp_desc, resp, st);
	return st->code;
}

static void test_wrong_response_type(void **state)
{
	Ocs__V1__GetFabricRequest req = OCS__V1__GET_FABRIC_REQUEST__INIT;
	ProtobufCMessage *resp;
	struct nb_client_status st;

	assert_int_equal(rpc(NB_FABRIC_GET_FABRIC, &req.base, &ocs__v1__fabric_summary__descriptor,
			     &resp, &st),
			 NB_INTERNAL);
	assert_string_equal(st.message, "server: Fabric/GetFabric answered with a "
					"ocs.v1.ListJobsResponse, not a ocs.v1.FabricSummary");
	wait_handled(1);
	assert_int_equal(fx.first_reply_rc, -EINVAL);
}

static void test_oversized_response(void **state)
{
	Ocs__V1__ListJobsRequest req = OCS__V1__LIST_JOBS_REQUEST__INIT;
	ProtobufCMessage *resp;
	struct nb_client_status st;

	assert_int_equal(rpc(NB_JOBS_LIST_JOBS, &req.base, &ocs__v1__list_jobs_response__descriptor,
			     &resp, &st),
			 NB_RESOURCE_EXHAUSTED);
	assert_non_null(strstr(st.message, "response: "));
	assert_non_null(strstr(st.message, "exceed the limit of 65536 bytes"));
	wait_handled(2);
	assert_int_equal(fx.big_reply_rc, 0);
}

static void test_answer_from_another_thread(void **state)
{
	Ocs__V1__ListDevicesRequest req = OCS__V1__LIST_DEVICES_REQUEST__INIT;
	Ocs__V1__ListDevicesResponse *resp;
	struct nb_client_status st;

	assert_int_equal(rpc(NB_FABRIC_LIST_DEVICES, &req.base,
			     &ocs__v1__list_devices_response__descriptor,
			     (ProtobufCMessage **)&resp, &st),
			 NB_OK);
	assert_int_equal(resp->n_devices, 1);
	assert_string_equal(resp->devices[0]->name, "ocs-g0-d0");
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	pthread_mutex_lock(&fx.mu);
	assert_string_equal(fx.peer, "operator/"); /* insecure: configured role, no CN */
	pthread_mutex_unlock(&fx.mu);
}

static void test_answer_after_client_gave_up(void **state)
{
	Ocs__V1__ListCircuitsRequest req = OCS__V1__LIST_CIRCUITS_REQUEST__INIT;
	struct nb_client_opts co = {0};
	struct nb_client *impatient;
	struct nb_client_status st;
	ProtobufCMessage *resp = NULL;
	char target[64], msg[128];
	bool saw = false;

	snprintf(target, sizeof(target), "127.0.0.1:%d", nb_server_port(fx.server));
	co.target = target;
	co.insecure = true;
	co.timeout_ms = 300;
	impatient = nb_client_new(&co, msg, sizeof(msg));
	assert_non_null(impatient);
	assert_int_equal(nb_client_unary(impatient, nb_method_path(NB_FABRIC_LIST_CIRCUITS),
					 &req.base, &ocs__v1__list_circuits_response__descriptor,
					 &resp, &st),
			 -1);
	assert_int_equal(st.code, NB_DEADLINE_EXCEEDED);
	nb_client_free(impatient);
	for (int i = 0; i < 500 && !saw; i++) { /* bounded: 5 s */
		usleep(10 * 1000);
		pthread_mutex_lock(&fx.mu);
		saw = fx.saw_cancel;
		pthread_mutex_unlock(&fx.mu);
	}
	assert_true(saw);
}

static void test_failures_and_missing_handlers(void **state)
{
	Ocs__V1__GetJobRequest get = OCS__V1__GET_JOB_REQUEST__INIT;
	Ocs__V1__ReleaseJobRequest rel = OCS__V1__RELEASE_JOB_REQUEST__INIT;
	Ocs__V1__JobSpec spec = OCS__V1__JOB_SPEC__INIT;
	ProtobufCMessage *resp;
	struct nb_client_status st;

	get.id = "j9";
	assert_int_equal(
		rpc(NB_JOBS_GET_JOB, &get.base, &ocs__v1__get_job_response__descriptor, &resp, &st),
		NB_NOT_FOUND);
	assert_string_equal(st.message, "id: no job j9");
	/* No release_job handler: UNIMPLEMENTED. */
	rel.id = "j9";
	assert_int_equal(rpc(NB_JOBS_RELEASE_JOB, &rel.base,
			     &ocs__v1__release_job_response__descriptor, &resp, &st),
			 NB_UNIMPLEMENTED);
	assert_string_equal(st.message, "Jobs/ReleaseJob is not implemented by this server");
	/* Validation comes before the handler (submit_job is missing too). */
	assert_int_equal(rpc(NB_JOBS_SUBMIT_JOB, &spec.base,
			     &ocs__v1__submit_job_response__descriptor, &resp, &st),
			 NB_INVALID_ARGUMENT);
	assert_string_equal(st.message, "id: required");
}

static void test_health_and_events(void **state)
{
	Grpc__Health__V1__HealthCheckRequest req = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
	Grpc__Health__V1__HealthCheckResponse *resp;
	Ocs__V1__Event ev = OCS__V1__EVENT__INIT;
	struct nb_client_status st;

	req.service = "ocs.v1.Jobs";
	nb_server_set_health(fx.server, "ocs.v1.Jobs",
			     GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING);
	assert_int_equal(rpc(NB_HEALTH_CHECK, &req.base,
			     &grpc__health__v1__health_check_response__descriptor,
			     (ProtobufCMessage **)&resp, &st),
			 NB_OK);
	assert_int_equal(resp->status,
			 GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	req.service = "ocs.v2.New";
	assert_int_equal(rpc(NB_HEALTH_CHECK, &req.base,
			     &grpc__health__v1__health_check_response__descriptor,
			     (ProtobufCMessage **)&resp, &st),
			 NB_NOT_FOUND);
	nb_server_set_health(fx.server, "ocs.v2.New",
			     GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING);
	assert_int_equal(rpc(NB_HEALTH_CHECK, &req.base,
			     &grpc__health__v1__health_check_response__descriptor,
			     (ProtobufCMessage **)&resp, &st),
			 NB_OK);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	/* seq counts every publish, watched or not */
	assert_int_equal(nb_server_publish(fx.server, &ev), 1);
	assert_int_equal(nb_server_publish(fx.server, &ev), 2);
}

/*
 * Events.Watch filters: while a thread keeps publishing a job, a drift and
 * a transaction event, a stream that asked for transactions only (then
 * drift only) receives nothing else, in seq order.
 */
static bool publishing;

static void *publisher(void *arg)
{
	Ocs__V1__Event ev = OCS__V1__EVENT__INIT;
	Ocs__V1__JobEvent je = OCS__V1__JOB_EVENT__INIT;
	Ocs__V1__DriftEvent de = OCS__V1__DRIFT_EVENT__INIT;
	Ocs__V1__TransactionEvent te = OCS__V1__TRANSACTION_EVENT__INIT;
	bool go = true;

	je.job_id = "j";
	de.device = "ocs-g0-d0";
	te.job_id = "j";
	te.outcome = OCS__V1__TRANSACTION_OUTCOME__TRANSACTION_OUTCOME_COMMITTED;
	for (int i = 0; i < 1000 && go; i++) { /* bounded: 10 s */
		ev.kind_case = OCS__V1__EVENT__KIND_JOB;
		ev.job = &je;
		nb_server_publish(fx.server, &ev);
		ev.kind_case = OCS__V1__EVENT__KIND_DRIFT;
		ev.drift = &de;
		nb_server_publish(fx.server, &ev);
		ev.kind_case = OCS__V1__EVENT__KIND_TRANSACTION;
		ev.transaction = &te;
		nb_server_publish(fx.server, &ev);
		usleep(10 * 1000);
		pthread_mutex_lock(&fx.mu);
		go = publishing;
		pthread_mutex_unlock(&fx.mu);
	}
	return NULL;
}

static void test_event_filters(void **state)
{
	const struct {
		bool transactions, drift;
		Ocs__V1__Event__KindCase want;
	} cases[] = {
		{true, false, OCS__V1__EVENT__KIND_TRANSACTION},
		{false, true, OCS__V1__EVENT__KIND_DRIFT},
	};
	pthread_t t;

	publishing = true;
	assert_int_equal(pthread_create(&t, NULL, publisher, NULL), 0);
	for (size_t k = 0; k < 2; k++) {
		Ocs__V1__WatchRequest req = OCS__V1__WATCH_REQUEST__INIT;
		struct nb_client_status st;
		uint64_t last_seq = 0;

		req.transactions = cases[k].transactions;
		req.drift = cases[k].drift;
		assert_int_equal(nb_client_stream_open(fx.client, nb_method_path(NB_EVENTS_WATCH),
						       &req.base, &st),
				 0);
		for (int i = 0; i < 5; i++) {
			Ocs__V1__Event *e;

			assert_int_equal(nb_client_stream_next(fx.client,
							       &ocs__v1__event__descriptor,
							       (ProtobufCMessage **)&e, &st),
					 0);
			assert_int_equal(e->kind_case, cases[k].want);
			assert_true(e->seq > last_seq);
			assert_true(e->time_unix_ms > 0);
			last_seq = e->seq;
			protobuf_c_message_free_unpacked(&e->base, NULL);
		}
		nb_client_stream_close(fx.client);
	}
	pthread_mutex_lock(&fx.mu);
	publishing = false;
	pthread_mutex_unlock(&fx.mu);
	pthread_join(t, NULL);
}

/* Runs last: every call above was reported once, with its final code. */
static void test_call_done(void **state)
{
	bool all = false;

	for (int i = 0; i < 500 && !all; i++) { /* reports may trail the client */
		pthread_mutex_lock(&fx.mu);
		all = fx.done[NB_FABRIC_LIST_CIRCUITS] == 1 && fx.done[NB_HEALTH_CHECK] == 3;
		pthread_mutex_unlock(&fx.mu);
		if (!all)
			usleep(10 * 1000);
	}
	pthread_mutex_lock(&fx.mu);
	assert_int_equal(fx.thread_rc, 0);
	assert_int_equal(fx.done[NB_FABRIC_GET_FABRIC], 1);
	assert_int_equal(fx.done_code[NB_FABRIC_GET_FABRIC], NB_INTERNAL);
	assert_int_equal(fx.done[NB_JOBS_LIST_JOBS], 1);
	assert_int_equal(fx.done_code[NB_JOBS_LIST_JOBS], NB_RESOURCE_EXHAUSTED);
	assert_int_equal(fx.done[NB_FABRIC_LIST_DEVICES], 1);
	assert_int_equal(fx.done_code[NB_FABRIC_LIST_DEVICES], NB_OK);
	assert_int_equal(fx.done[NB_FABRIC_LIST_CIRCUITS], 1);
	assert_int_equal(fx.done[NB_JOBS_GET_JOB], 1);
	assert_int_equal(fx.done_code[NB_JOBS_GET_JOB], NB_NOT_FOUND);
	assert_int_equal(fx.done[NB_JOBS_RELEASE_JOB], 1);
	assert_int_equal(fx.done_code[NB_JOBS_RELEASE_JOB], NB_UNIMPLEMENTED);
	assert_int_equal(fx.done[NB_JOBS_SUBMIT_JOB], 1);
	assert_int_equal(fx.done_code[NB_JOBS_SUBMIT_JOB], NB_INVALID_ARGUMENT);
	assert_int_equal(fx.done[NB_HEALTH_CHECK], 3);
	pthread_mutex_unlock(&fx.mu);
}

/*
 * A second server that lets one call be in flight: the first UndrainDevice
 * is held until the test answers it, and a second call meanwhile is
 * refused; later calls are answered at once.
 */
static struct nb_call *held_call;

static void h_hold(void *ctx, struct nb_call *call, const Ocs__V1__UndrainDeviceRequest *req)
{
	Ocs__V1__UndrainDeviceResponse resp = OCS__V1__UNDRAIN_DEVICE_RESPONSE__INIT;
	bool first;

	pthread_mutex_lock(&fx.mu);
	first = held_call == NULL;
	if (first)
		held_call = call; /* only the first call is held */
	pthread_mutex_unlock(&fx.mu);
	if (!first)
		nb_call_reply(call, &resp.base);
}

struct bg_call {
	struct nb_client *client;
	struct nb_client_status st;
};

static void *call_in_background(void *arg)
{
	struct bg_call *b = arg;
	Ocs__V1__UndrainDeviceRequest req = OCS__V1__UNDRAIN_DEVICE_REQUEST__INIT;
	ProtobufCMessage *resp = NULL;

	req.device = "ocs-g0-d0";
	nb_client_unary(b->client, nb_method_path(NB_FABRIC_UNDRAIN_DEVICE), &req.base,
			&ocs__v1__undrain_device_response__descriptor, &resp, &b->st);
	protobuf_c_message_free_unpacked(resp, NULL);
	return NULL;
}

static void test_calls_in_flight_bounded(void **state)
{
	struct nb_server_config cfg = {0};
	struct nb_client_opts co = {0};
	struct nb_server *server;
	struct nb_error err;
	struct bg_call first = {0}, second = {0};
	Ocs__V1__UndrainDeviceResponse resp = OCS__V1__UNDRAIN_DEVICE_RESPONSE__INIT;
	pthread_t t;
	char target[64], msg[128];
	struct nb_call *call = NULL;

	cfg.listen_addr = "127.0.0.1:0";
	cfg.insecure = true;
	cfg.max_calls_in_flight = 1;
	cfg.limits =
		(struct nb_limits){.pods = 2, .leaves_per_pod = 2, .gpus_per_leaf = 4, .groups = 2};
	cfg.handlers.undrain_device = h_hold;
	assert_int_equal(nb_server_create(&cfg, &server, &err), 0);
	snprintf(target, sizeof(target), "127.0.0.1:%d", nb_server_port(server));
	co.target = target;
	co.insecure = true;
	co.timeout_ms = 5000;
	first.client = nb_client_new(&co, msg, sizeof(msg));
	second.client = nb_client_new(&co, msg, sizeof(msg));
	assert_non_null(first.client);
	assert_non_null(second.client);
	assert_int_equal(pthread_create(&t, NULL, call_in_background, &first), 0);
	for (int i = 0; i < 500 && !call; i++) { /* bounded: 5 s */
		usleep(10 * 1000);
		pthread_mutex_lock(&fx.mu);
		call = held_call;
		pthread_mutex_unlock(&fx.mu);
	}
	if (!call) {
		pthread_join(t, NULL);
		fail_msg("first call: %d %s", first.st.code, first.st.message);
	}
	call_in_background(&second);
	assert_int_equal(second.st.code, NB_RESOURCE_EXHAUSTED);
	assert_string_equal(second.st.message, "server: 1 calls in flight, at most 1; retry later");
	assert_int_equal(nb_call_reply(call, &resp.base), 0);
	pthread_join(t, NULL);
	assert_int_equal(first.st.code, NB_OK);
	call_in_background(&second); /* room again */
	assert_int_equal(second.st.code, NB_OK);
	nb_client_free(first.client);
	nb_client_free(second.client);
	nb_server_destroy(server);
}

/*
 * The daemon's loop thread destroys the server and is also the thread that
 * answers: a handler that posts its call to the loop late (its gRPC thread
 * preempted between reading the request and posting; here a 200 ms sleep)
 * posts after the loop's last run before nb_server_destroy. destroy must
 * run the config's drain while it waits, or it waits forever for a call
 * only it could answer (a replica's loop hung that way when it took the
 * lead: nothing logged, SIGTERM ignored, its lease kept alive).
 */
static struct nb_call *late_posted;
static int late_entered, late_drained;

static void h_post_late(void *ctx, struct nb_call *call, const Ocs__V1__UndrainDeviceRequest *req)
{
	pthread_mutex_lock(&fx.mu);
	late_entered = 1;
	pthread_mutex_unlock(&fx.mu);
	usleep(200 * 1000);
	pthread_mutex_lock(&fx.mu);
	late_posted = call; /* the "loop_post" */
	pthread_mutex_unlock(&fx.mu);
}

/* The owner's queue, run by the owner thread (and by destroy's drain). */
static void run_posted(void *ctx)
{
	Ocs__V1__UndrainDeviceResponse resp = OCS__V1__UNDRAIN_DEVICE_RESPONSE__INIT;
	struct nb_call *call;

	pthread_mutex_lock(&fx.mu);
	call = late_posted;
	late_posted = NULL;
	pthread_mutex_unlock(&fx.mu);
	if (call) {
		assert_int_equal(nb_call_reply(call, &resp.base), 0);
		late_drained++;
	}
}

static void test_destroy_drains_late_posts(void **state)
{
	struct nb_server_config cfg = {0};
	struct nb_client_opts co = {0};
	struct nb_server *server;
	struct nb_error err;
	struct bg_call bg = {0};
	pthread_t t;
	char target[64], msg[128];
	int entered = 0;

	cfg.listen_addr = "127.0.0.1:0";
	cfg.insecure = true;
	cfg.shutdown_grace_ms = 5000;
	cfg.limits =
		(struct nb_limits){.pods = 2, .leaves_per_pod = 2, .gpus_per_leaf = 4, .groups = 2};
	cfg.handlers.undrain_device = h_post_late;
	cfg.drain = run_posted;
	assert_int_equal(nb_server_create(&cfg, &server, &err), 0);
	snprintf(target, sizeof(target), "127.0.0.1:%d", nb_server_port(server));
	co.target = target;
	co.insecure = true;
	co.timeout_ms = 10000;
	bg.client = nb_client_new(&co, msg, sizeof(msg));
	assert_non_null(bg.client);
	assert_int_equal(pthread_create(&t, NULL, call_in_background, &bg), 0);
	for (int i = 0; i < 500 && !entered; i++) { /* bounded: 5 s */
		usleep(10 * 1000);
		pthread_mutex_lock(&fx.mu);
		entered = late_entered;
		pthread_mutex_unlock(&fx.mu);
	}
	assert_true(entered);
	/* the owner's teardown: shutdown, its last run, destroy */
	nb_server_shutdown(server);
	run_posted(NULL);
	assert_int_equal(late_drained, 0); /* not posted yet */
	nb_server_destroy(server);
	/* destroy ran the drain, which answered the call, well within the grace */
	assert_int_equal(late_drained, 1);
	pthread_join(t, NULL);
	assert_int_equal(bg.st.code, NB_OK);
	nb_client_free(bg.client);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wrong_response_type),
		cmocka_unit_test(test_oversized_response),
		cmocka_unit_test(test_answer_from_another_thread),
		cmocka_unit_test(test_answer_after_client_gave_up),
		cmocka_unit_test(test_failures_and_missing_handlers),
		cmocka_unit_test(test_health_and_events),
		cmocka_unit_test(test_event_filters),
		cmocka_unit_test(test_call_done),
		cmocka_unit_test(test_calls_in_flight_bounded),
		cmocka_unit_test(test_destroy_drains_late_posts),
	};

	int rc = cmocka_run_group_tests(tests, setup, teardown);

	/* every server and client freed: gRPC and its threads end (nb.h) */
	if (!nb_grpc_settle(NB_SETTLE_MS)) {
		fprintf(stderr, "test_nb_server: gRPC had not ended %d ms after the last server\n",
			NB_SETTLE_MS);
		rc = 1;
	}
	return rc;
}
