/*
 * nb_server.c - the gRPC C-core server of the northbound: completion-queue
 * threads, one small state machine per call, the hand-off to the daemon's
 * handlers, Events.Watch fan-out and the Health service.
 *
 * Every call goes through this state machine (one struct nb_call each):
 *
 *   REQUESTED --new call--> RECEIVING   batch {SEND_INITIAL_METADATA,
 *       |                      |         RECV_MESSAGE} + batch {RECV_CLOSE}
 *       | role too low /       |
 *       | unknown method       +-- bad bytes / invalid field --------+
 *       v                      |                                    |
 *   FINISHING <----------------+-- Health.Check (answered here) ----+
 *       ^                      |                                    |
 *       |                      +-- daemon method --> DISPATCHED     |
 *       |                      |     handler(ctx, call, req);       |
 *       |                      |     nb_call_reply/fail (any thread)+
 *       |                      |                                    |
 *       |                      +-- Watch --> STREAMING              |
 *       |                             publish -> queue -> one write |
 *       |                             at a time; client gone,       |
 *       |                             overflow, shutdown -----------+
 *       |
 *   FINISHING: batch {SEND_MESSAGE?, SEND_STATUS}; the call is freed when
 *   no batch is outstanding and the daemon no longer holds it.
 *
 * Invariants:
 *  1. One mutex (server->mu) guards every call's state, the watcher list
 *     and the health table; grpc_call_start_batch is called under it, and
 *     handlers and call_done are called without it (serving_now, which
 *     never blocks nor calls the server, with it).
 *  2. A call is freed exactly once: when ops_pending == 0, held == false
 *     and state is FINISHING (or the REQUESTED slot was cancelled).
 *  3. At most one SEND_MESSAGE is outstanding per call; SEND_STATUS is
 *     started only when no SEND_MESSAGE is (finish_pending defers it).
 *  4. nb_code -> grpc_status_code happens in start_finish() only.
 *
 * The server's start and end (configuration, credentials, threads, the
 * shutdown with its grace period) are in nb_server_life.c; the structs
 * both files use are in nb_server_internal.h.
 */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/log.h>
#include <grpc/support/time.h>

#include "nb_internal.h"
#include "nb_server_internal.h"

#define NB_STREAM_QUEUE_FIRST 8	 /* first ring size; doubles up to the bound */
#define NB_TRIM_MIN_STREAMS   64 /* see call_free() */

uint64_t nbs_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int64_t now_unix_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- call allocation and the request slots ---------------------------- */

void nbs_request_new_call(struct nb_server *s)
{
	struct nb_call *c = calloc(1, sizeof(*c));

	if (!c)
		return; /* one slot fewer; the others keep serving */
	c->srv = s;
	c->state = ST_REQUESTED;
	c->method = NB_METHOD_COUNT;
	c->tag_new = (struct nb_tag){c, OP_NEW_CALL};
	c->tag_recv = (struct nb_tag){c, OP_RECV};
	c->tag_close = (struct nb_tag){c, OP_CLOSE};
	c->tag_write = (struct nb_tag){c, OP_WRITE};
	c->tag_finish = (struct nb_tag){c, OP_FINISH};
	grpc_call_details_init(&c->details);
	grpc_metadata_array_init(&c->request_md);
	c->ops_pending = 1;
	s->live_calls++;
	if (grpc_server_request_call(s->server, &c->call, &c->details, &c->request_md, s->cq, s->cq,
				     &c->tag_new) != GRPC_CALL_OK) {
		grpc_call_details_destroy(&c->details);
		grpc_metadata_array_destroy(&c->request_md);
		free(c);
		s->live_calls--;
	}
}

/* Drops a stream's queued messages and its ring (mu held, or the call is
 * no longer reachable). */
static void stream_queue_clear(struct nb_call *c)
{
	for (int i = 0; i < c->queue_len; i++)
		grpc_slice_unref(c->queue[(c->queue_head + i) % c->queue_cap]);
	free(c->queue);
	c->queue = NULL;
	c->queue_cap = c->queue_head = c->queue_len = 0;
}

/* Frees a call (server->mu not held). */
static void call_free(struct nb_call *c)
{
	struct nb_server *s = c->srv;
	bool trim = false;

	if (c->call && s->handlers.call_done && c->method != NB_METHOD_COUNT)
		s->handlers.call_done(s->handlers.ctx, c->method, c->final_code,
				      (nbs_now_ns() - c->start_ns) / 1000);
	if (c->call)
		grpc_call_unref(c->call);
	grpc_call_details_destroy(&c->details);
	grpc_metadata_array_destroy(&c->request_md);
	if (c->recv_buf)
		grpc_byte_buffer_destroy(c->recv_buf);
	if (c->request)
		protobuf_c_message_free_unpacked(c->request, NULL);
	if (c->status_details_set)
		grpc_slice_unref(c->status_details);
	if (c->finish_buf)
		grpc_byte_buffer_destroy(c->finish_buf);
	if (c->write_buf)
		grpc_byte_buffer_destroy(c->write_buf);
	stream_queue_clear(c);
	if (c->watch)
		ocs__v1__watch_request__free_unpacked(c->watch, NULL);
	free(c->health_service);
	pthread_mutex_lock(&s->mu);
	s->live_calls--;
	if (c->stream_counted) {
		s->stream_calls--;
		/*
		 * Many streams ended (a crowd of watchers left): gRPC freed their
		 * calls and transport buffers into malloc's arenas, which keep the
		 * pages. Hand them back to the system each time the streams have
		 * halved, so memory returns to its baseline after a flood of
		 * watchers (issue 14 #4) at a cost that is logarithmic in it.
		 */
		trim = s->stream_calls_peak >= NB_TRIM_MIN_STREAMS &&
		       s->stream_calls <= s->stream_calls_peak / 2;
		if (trim)
			s->stream_calls_peak = s->stream_calls;
	}
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	free(c);
	if (trim)
		malloc_trim(0);
}

/* Under mu: whether the call can be freed now (invariant 2). */
static bool call_done_locked(const struct nb_call *c)
{
	return c->ops_pending == 0 && !c->held && c->state == ST_FINISHING;
}

static void unlink_watcher(struct nb_call *c)
{
	struct nb_server *s = c->srv;

	if (!c->prev_watcher && s->watchers != c)
		return;
	s->n_watchers--;
	if (c->prev_watcher)
		c->prev_watcher->next_watcher = c->next_watcher;
	else
		s->watchers = c->next_watcher;
	if (c->next_watcher)
		c->next_watcher->prev_watcher = c->prev_watcher;
	c->next_watcher = c->prev_watcher = NULL;
}

static void link_watcher(struct nb_call *c)
{
	struct nb_server *s = c->srv;

	s->n_watchers++;
	c->prev_watcher = NULL;
	c->next_watcher = s->watchers;
	if (s->watchers)
		s->watchers->prev_watcher = c;
	s->watchers = c;
}

/* ---- finishing (invariant 4: the one place a status is made) --------- */

static grpc_status_code grpc_status_of(enum nb_code code)
{
	return (grpc_status_code)code; /* nb_code values are gRPC's */
}

/*
 * Under mu. Starts the final batch: initial metadata if not sent yet, the
 * response if any (takes ownership of `response`), and the status with
 * message "field: message". The call moves to FINISHING.
 */
static void start_finish(struct nb_call *c, enum nb_code code, const char *message,
			 grpc_byte_buffer *response)
{
	grpc_op ops[3];
	size_t n = 0;

	memset(ops, 0, sizeof(ops));
	c->state = ST_FINISHING;
	c->final_code = code;
	unlink_watcher(c);
	if (!c->initial_md_sent) {
		ops[n].op = GRPC_OP_SEND_INITIAL_METADATA;
		n++;
		c->initial_md_sent = true;
	}
	if (response) {
		c->finish_buf = response;
		ops[n].op = GRPC_OP_SEND_MESSAGE;
		ops[n].data.send_message.send_message = response;
		n++;
	}
	c->status_details = grpc_slice_from_copied_string(message ? message : "");
	c->status_details_set = true;
	ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
	ops[n].data.send_status_from_server.status = grpc_status_of(code);
	ops[n].data.send_status_from_server.status_details = &c->status_details;
	n++;
	if (grpc_call_start_batch(c->call, ops, n, &c->tag_finish, NULL) == GRPC_CALL_OK)
		c->ops_pending++;
}

static void format_error(char *buf, size_t len, const struct nb_error *err)
{
	if (err->field[0])
		snprintf(buf, len, "%s: %s", err->field, err->message);
	else
		snprintf(buf, len, "%s", err->message);
}

/* Under mu: finish a stream now, or after the write in flight. */
void nbs_finish_stream(struct nb_call *c, enum nb_code code, const char *message)
{
	if (c->state != ST_STREAMING)
		return;
	unlink_watcher(c);
	stream_queue_clear(c);
	if (c->writing) {
		c->finish_pending = true;
		c->pending_code = code;
		snprintf(c->pending_msg, sizeof(c->pending_msg), "%s", message);
		return;
	}
	start_finish(c, code, message, NULL);
}

/* ---- streams ----------------------------------------------------------- */

/* Under mu: start the next write of a stream if none is in flight. */
static void stream_pump(struct nb_call *c)
{
	grpc_op op;

	if (c->writing || c->queue_len == 0 || c->state != ST_STREAMING)
		return;
	c->write_buf = grpc_raw_byte_buffer_create(&c->queue[c->queue_head], 1);
	grpc_slice_unref(c->queue[c->queue_head]);
	c->queue_head = (c->queue_head + 1) % c->queue_cap;
	c->queue_len--;
	memset(&op, 0, sizeof(op));
	op.op = GRPC_OP_SEND_MESSAGE;
	op.data.send_message.send_message = c->write_buf;
	if (grpc_call_start_batch(c->call, &op, 1, &c->tag_write, NULL) == GRPC_CALL_OK) {
		c->writing = true;
		c->ops_pending++;
	} else {
		grpc_byte_buffer_destroy(c->write_buf);
		c->write_buf = NULL;
		nbs_finish_stream(c, NB_INTERNAL, "stream: write refused");
	}
}

/* Under mu: makes room for one more message; false when the stream is at
 * its bound (stream_queue_max). */
static bool stream_queue_room(struct nb_call *c)
{
	int max = c->srv->stream_queue_max, cap;
	grpc_slice *q;

	if (c->queue_len < c->queue_cap)
		return true;
	if (c->queue_cap >= max)
		return false;
	cap = c->queue_cap ? c->queue_cap * 2 : NB_STREAM_QUEUE_FIRST;
	if (cap > max)
		cap = max;
	q = malloc((size_t)cap * sizeof(*q));
	if (!q)
		return false;
	for (int i = 0; i < c->queue_len; i++)
		q[i] = c->queue[(c->queue_head + i) % c->queue_cap];
	free(c->queue);
	c->queue = q;
	c->queue_cap = cap;
	c->queue_head = 0;
	return true;
}

/*
 * Under mu: a stream that fell stream_queue_max messages behind is ended at
 * once. Its queue is dropped, and the call is cancelled with the status:
 * gRPC sends the status (trailers are not flow-controlled) and fails the
 * write a client that does not read would otherwise hold forever, so the
 * stream's memory and its place under max_streams come back now.
 */
static void stream_overflow(struct nb_call *c)
{
	char msg[160];

	stream_queue_clear(c);
	snprintf(msg, sizeof(msg),
		 "watch: client too slow: it fell %d messages behind; watch again",
		 c->srv->stream_queue_max);
	if (c->writing)
		grpc_call_cancel_with_status(c->call, GRPC_STATUS_RESOURCE_EXHAUSTED, msg, NULL);
	nbs_finish_stream(c, NB_RESOURCE_EXHAUSTED, msg);
}

/* Under mu: queue a packed message (takes a new reference on it). */
static void stream_push(struct nb_call *c, grpc_slice packed)
{
	if (c->state != ST_STREAMING)
		return;
	if (!stream_queue_room(c)) {
		stream_overflow(c);
		return;
	}
	c->queue[(c->queue_head + c->queue_len) % c->queue_cap] = grpc_slice_ref(packed);
	c->queue_len++;
	stream_pump(c);
}

static grpc_slice pack_slice(const ProtobufCMessage *m)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	grpc_slice slice = grpc_slice_malloc(n);

	protobuf_c_message_pack(m, GRPC_SLICE_START_PTR(slice));
	return slice;
}

static struct health_entry *health_find(struct nb_server *s, const char *service)
{
	for (struct health_entry *h = s->health; h; h = h->next)
		if (strcmp(h->service, service) == 0)
			return h;
	return NULL;
}

/* Under mu: h's status at this instant (nb_handlers.serving_now). */
static Grpc__Health__V1__HealthCheckResponse__ServingStatus health_now(struct nb_server *s,
								       const struct health_entry *h)
{
	if (h->status == GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING &&
	    s->handlers.serving_now && !s->handlers.serving_now(s->handlers.ctx, h->service))
		return GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING;
	return h->status;
}

static grpc_slice pack_health(Grpc__Health__V1__HealthCheckResponse__ServingStatus status)
{
	Grpc__Health__V1__HealthCheckResponse r = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;

	r.status = status;
	return pack_slice(&r.base);
}

static bool event_wanted(const Ocs__V1__WatchRequest *w, const Ocs__V1__Event *ev)
{
	/* progress only when asked for: not one of "all false = every kind" */
	if (ev->kind_case == OCS__V1__EVENT__KIND_PROGRESS)
		return w->progress;
	if (!w->jobs && !w->devices && !w->transactions && !w->drift && !w->rings && !w->cabling &&
	    !w->progress)
		return true;
	switch (ev->kind_case) {
	case OCS__V1__EVENT__KIND_JOB:
		return w->jobs;
	case OCS__V1__EVENT__KIND_DEVICE:
		return w->devices;
	case OCS__V1__EVENT__KIND_TRANSACTION:
		return w->transactions;
	case OCS__V1__EVENT__KIND_DRIFT:
		return w->drift;
	case OCS__V1__EVENT__KIND_CABLING:
		return w->cabling;
	case OCS__V1__EVENT__KIND_RING:
	case OCS__V1__EVENT__KIND_NODE:
		return w->rings;
	default:
		return true;
	}
}

uint64_t nb_server_publish(struct nb_server *s, const Ocs__V1__Event *event)
{
	Ocs__V1__Event copy = *event;
	grpc_slice packed;
	uint64_t seq;

	pthread_mutex_lock(&s->mu);
	seq = ++s->event_seq;
	copy.seq = seq;
	if (copy.time_unix_ms == 0)
		copy.time_unix_ms = now_unix_ms();
	packed = pack_slice(&copy.base);
	for (struct nb_call *c = s->watchers, *next; c; c = next) {
		next = c->next_watcher; /* stream_push may unlink c */
		if (c->method == NB_EVENTS_WATCH && event_wanted(c->watch, &copy))
			stream_push(c, packed);
	}
	pthread_mutex_unlock(&s->mu);
	grpc_slice_unref(packed);
	return seq;
}

/* Under mu. */
void nbs_set_health_locked(struct nb_server *s, const char *service,
			   Grpc__Health__V1__HealthCheckResponse__ServingStatus status)
{
	struct health_entry *h = health_find(s, service);
	grpc_slice packed;

	if (!h) {
		h = calloc(1, sizeof(*h));
		if (!h)
			return;
		h->service = strdup(service);
		if (!h->service) {
			free(h);
			return;
		}
		h->next = s->health;
		s->health = h;
	} else if (h->status == status) {
		return;
	}
	h->status = status;
	packed = pack_health(status);
	for (struct nb_call *c = s->watchers, *next; c; c = next) {
		next = c->next_watcher;
		if (c->method == NB_HEALTH_WATCH && strcmp(c->health_service, service) == 0)
			stream_push(c, packed);
	}
	grpc_slice_unref(packed);
}

void nb_server_set_health(struct nb_server *s, const char *service,
			  Grpc__Health__V1__HealthCheckResponse__ServingStatus status)
{
	pthread_mutex_lock(&s->mu);
	nbs_set_health_locked(s, service ? service : "", status);
	pthread_mutex_unlock(&s->mu);
}

/* ---- receiving a call ---------------------------------------------------- */

static enum nb_role peer_role(struct nb_server *s, grpc_call *call, char *cn, size_t cn_len)
{
	grpc_auth_context *ctx;
	grpc_auth_property_iterator it;
	const grpc_auth_property *p;
	enum nb_role role = NB_ROLE_NONE;

	cn[0] = '\0';
	if (s->insecure)
		return s->insecure_role;
	ctx = grpc_call_auth_context(call);
	if (!ctx)
		return NB_ROLE_NONE;
	it = grpc_auth_context_find_properties_by_name(ctx, GRPC_X509_PEM_CERT_PROPERTY_NAME);
	p = grpc_auth_property_iterator_next(&it);
	if (p)
		role = nb_role_from_cert_pem(p->value, p->value_length, cn, cn_len);
	grpc_auth_context_release(ctx);
	return role;
}

/* Under mu: a new call arrived in slot c. */
static void on_new_call(struct nb_call *c)
{
	struct nb_server *s = c->srv;
	const grpc_slice *path = &c->details.method;
	grpc_op ops[2];
	char msg[256];

	c->start_ns = nbs_now_ns();
	c->state = ST_RECEIVING;
	c->method = nb_method_from_path((const char *)GRPC_SLICE_START_PTR(*path),
					GRPC_SLICE_LENGTH(*path));
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
	ops[0].data.recv_close_on_server.cancelled = &c->close_cancelled;
	if (grpc_call_start_batch(c->call, ops, 1, &c->tag_close, NULL) == GRPC_CALL_OK)
		c->ops_pending++;
	if (c->method == NB_METHOD_COUNT) {
		snprintf(msg, sizeof(msg), "method %.*s is not served",
			 (int)GRPC_SLICE_LENGTH(*path), (const char *)GRPC_SLICE_START_PTR(*path));
		start_finish(c, NB_UNIMPLEMENTED, msg, NULL);
		return;
	}
	c->role = peer_role(s, c->call, c->peer, sizeof(c->peer));
	if (c->role < nb_method_min_role(c->method)) {
		if (c->role == NB_ROLE_NONE)
			snprintf(msg, sizeof(msg),
				 "client certificate has no role (its subject needs exactly one "
				 "OU of scheduler, operator, viewer)");
		else
			snprintf(msg, sizeof(msg), "role %s may not call %s (needs %s)",
				 nb_role_name(c->role), nb_method_name(c->method),
				 nb_role_name(nb_method_min_role(c->method)));
		start_finish(c, NB_PERMISSION_DENIED, msg, NULL);
		return;
	}
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[1].op = GRPC_OP_RECV_MESSAGE;
	ops[1].data.recv_message.recv_message = &c->recv_buf;
	if (grpc_call_start_batch(c->call, ops, 2, &c->tag_recv, NULL) == GRPC_CALL_OK) {
		c->initial_md_sent = true;
		c->ops_pending++;
	} else {
		start_finish(c, NB_INTERNAL, "server: could not read the request", NULL);
	}
}

/*
 * Under mu: refuses a new call while the server shuts down, or when n of
 * max are taken ("WHO: N WHAT, at most MAX; ADVICE"). True when refused.
 */
static bool refuse_new(struct nb_call *c, int n, int max, const char *who, const char *what,
		       const char *advice)
{
	if (c->srv->shutting_down) {
		start_finish(c, NB_UNAVAILABLE, "server: shutting down", NULL);
		return true;
	}
	if (n >= max) {
		char msg[160];

		snprintf(msg, sizeof(msg), "%s: %d %s, at most %d; %s", who, n, what, max, advice);
		start_finish(c, NB_RESOURCE_EXHAUSTED, msg, NULL);
		return true;
	}
	return false;
}

/*
 * Under mu: a Watch that asks for progress first gets an empty
 * ProgressEvent (transaction_id 0, seq the last one published): from then
 * on it receives every event published, so a client may start the work
 * it watches (ocsctl's progress line) without missing its first events.
 */
static void push_watch_in_place(struct nb_call *c)
{
	Ocs__V1__Event ev = OCS__V1__EVENT__INIT;
	Ocs__V1__ProgressEvent pe = OCS__V1__PROGRESS_EVENT__INIT;
	grpc_slice packed;

	ev.seq = c->srv->event_seq;
	ev.time_unix_ms = now_unix_ms();
	ev.kind_case = OCS__V1__EVENT__KIND_PROGRESS;
	ev.progress = &pe;
	packed = pack_slice(&ev.base);
	stream_push(c, packed);
	grpc_slice_unref(packed);
}

/* Under mu: the request has been decoded and validated; serve it. Returns
 * true when a daemon handler must be called (after unlocking). */
static bool serve_request(struct nb_call *c)
{
	struct nb_server *s = c->srv;
	struct health_entry *h;

	switch (c->method) {
	case NB_HEALTH_CHECK: {
		const Grpc__Health__V1__HealthCheckRequest *r = (const void *)c->request;
		grpc_slice packed;
		char msg[200];

		h = health_find(s, r->service);
		if (!h) {
			snprintf(msg, sizeof(msg), "service: \"%s\" is not known", r->service);
			start_finish(c, NB_NOT_FOUND, msg, NULL);
			return false;
		}
		packed = pack_health(health_now(s, h));
		start_finish(c, NB_OK, "", grpc_raw_byte_buffer_create(&packed, 1));
		grpc_slice_unref(packed);
		return false;
	}
	case NB_HEALTH_WATCH:
	case NB_EVENTS_WATCH:
		if (refuse_new(c, s->n_watchers, s->max_streams, "watch", "streams open",
			       "close one or retry later"))
			return false;
		c->state = ST_STREAMING;
		link_watcher(c);
		c->stream_counted = true;
		s->stream_calls++;
		if (s->stream_calls > s->stream_calls_peak)
			s->stream_calls_peak = s->stream_calls;
		if (c->method == NB_EVENTS_WATCH) {
			c->watch = (Ocs__V1__WatchRequest *)c->request;
			c->request = NULL;
			if (c->watch->progress)
				push_watch_in_place(c);
		} else {
			const Grpc__Health__V1__HealthCheckRequest *r = (const void *)c->request;
			grpc_slice packed;

			c->health_service = strdup(r->service);
			if (!c->health_service) {
				start_finish(c, NB_RESOURCE_EXHAUSTED, "stream: out of memory",
					     NULL);
				return false;
			}
			h = health_find(s, r->service);
			packed = pack_health(
				h ? health_now(s, h)
				  : GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVICE_UNKNOWN);
			stream_push(c, packed);
			grpc_slice_unref(packed);
		}
		return false;
	default:
		/* nb_server_destroy may be waiting already: hand out nothing new */
		if (refuse_new(c, s->calls_held, s->max_calls_in_flight, "server",
			       "calls in flight", "retry later"))
			return false;
		c->state = ST_DISPATCHED;
		c->held = true;
		s->calls_held++;
		return true;
	}
}

/* Without mu: hand a dispatched call to the daemon. */
static void dispatch(struct nb_call *c)
{
	const struct nb_handlers *h = &c->srv->handlers;
	const void *r = c->request;

	switch (c->method) {
#define NB_DISPATCH(method, fn, type)                                                              \
	case method:                                                                               \
		if (h->fn) {                                                                       \
			h->fn(h->ctx, c, (const type *)r);                                         \
			return;                                                                    \
		}                                                                                  \
		break;
		NB_DISPATCH(NB_FABRIC_GET_FABRIC, get_fabric, Ocs__V1__GetFabricRequest)
		NB_DISPATCH(NB_FABRIC_LIST_DEVICES, list_devices, Ocs__V1__ListDevicesRequest)
		NB_DISPATCH(NB_FABRIC_LIST_CIRCUITS, list_circuits, Ocs__V1__ListCircuitsRequest)
		NB_DISPATCH(NB_FABRIC_DRAIN_DEVICE, drain_device, Ocs__V1__DrainDeviceRequest)
		NB_DISPATCH(NB_FABRIC_UNDRAIN_DEVICE, undrain_device, Ocs__V1__UndrainDeviceRequest)
		NB_DISPATCH(NB_FABRIC_MARK_NODE, mark_node, Ocs__V1__MarkNodeRequest)
		NB_DISPATCH(NB_FABRIC_LIST_RINGS, list_rings, Ocs__V1__ListRingsRequest)
		NB_DISPATCH(NB_FABRIC_LIST_DRIFT, list_drift, Ocs__V1__ListDriftRequest)
		NB_DISPATCH(NB_FABRIC_ADOPT_CROSS_CONNECTS, adopt_cross_connects,
			    Ocs__V1__AdoptCrossConnectsRequest)
		NB_DISPATCH(NB_FABRIC_CLEAR_CROSS_CONNECTS, clear_cross_connects,
			    Ocs__V1__ClearCrossConnectsRequest)
		NB_DISPATCH(NB_FABRIC_REPLACE_GPU, replace_gpu, Ocs__V1__ReplaceGpuRequest)
		NB_DISPATCH(NB_FABRIC_MARK_GPU, mark_gpu, Ocs__V1__MarkGpuRequest)
		NB_DISPATCH(NB_FABRIC_LIST_RAIL_PORTS, list_rail_ports,
			    Ocs__V1__ListRailPortsRequest)
		NB_DISPATCH(NB_FABRIC_LIST_CABLING, list_cabling, Ocs__V1__ListCablingRequest)
		NB_DISPATCH(NB_FABRIC_CLEAR_CABLING, clear_cabling, Ocs__V1__ClearCablingRequest)
		NB_DISPATCH(NB_JOBS_SUBMIT_JOB, submit_job, Ocs__V1__JobSpec)
		NB_DISPATCH(NB_JOBS_PLAN_JOB, plan_job, Ocs__V1__JobSpec)
		NB_DISPATCH(NB_JOBS_RELEASE_JOB, release_job, Ocs__V1__ReleaseJobRequest)
		NB_DISPATCH(NB_JOBS_GET_JOB, get_job, Ocs__V1__GetJobRequest)
		NB_DISPATCH(NB_JOBS_LIST_JOBS, list_jobs, Ocs__V1__ListJobsRequest)
#undef NB_DISPATCH
	default:
		break;
	}
	nb_call_fail(c, NB_UNIMPLEMENTED, "", "%s is not implemented by this server",
		     nb_method_name(c->method));
}

/* Under mu: the request message arrived (or did not). Returns true when the
 * call must be dispatched to the daemon after unlocking. */
static bool on_recv(struct nb_call *c, bool ok)
{
	struct nb_server *s = c->srv;
	grpc_byte_buffer_reader reader;
	grpc_slice bytes;
	struct nb_error err;
	char msg[sizeof(err.field) + sizeof(err.message) + 2];
	int rc;

	if (!ok || !c->recv_buf) {
		start_finish(c, ok ? NB_INVALID_ARGUMENT : NB_CANCELLED,
			     ok ? "request: no request message was sent" : "request: not received",
			     NULL);
		return false;
	}
	if (!grpc_byte_buffer_reader_init(&reader, c->recv_buf)) {
		start_finish(c, NB_INVALID_ARGUMENT, "request: unreadable message", NULL);
		return false;
	}
	bytes = grpc_byte_buffer_reader_readall(&reader);
	grpc_byte_buffer_reader_destroy(&reader);
	grpc_byte_buffer_destroy(c->recv_buf);
	c->recv_buf = NULL;
	rc = nb_decode_request(c->method, GRPC_SLICE_START_PTR(bytes), GRPC_SLICE_LENGTH(bytes),
			       &s->limits, s->max_message_bytes, &c->request, &err);
	grpc_slice_unref(bytes);
	if (rc) {
		format_error(msg, sizeof(msg), &err);
		start_finish(c, err.code, msg, NULL);
		return false;
	}
	return serve_request(c);
}

/* Under mu: RECV_CLOSE_ON_SERVER completed: the call is over on the wire. */
static void on_close(struct nb_call *c)
{
	if (c->close_cancelled)
		c->cancelled = true;
	if (c->state == ST_STREAMING)
		nbs_finish_stream(c, NB_CANCELLED, "stream: cancelled by the client");
}

static void on_write(struct nb_call *c, bool ok)
{
	grpc_byte_buffer_destroy(c->write_buf);
	c->write_buf = NULL;
	c->writing = false;
	if (c->finish_pending) {
		c->finish_pending = false;
		start_finish(c, c->pending_code, c->pending_msg, NULL);
		return;
	}
	if (!ok) {
		nbs_finish_stream(c, NB_CANCELLED, "stream: client gone");
		return;
	}
	stream_pump(c);
}

void nbs_handle_event(struct nb_server *s, struct nb_tag *tag, bool ok)
{
	struct nb_call *c = tag->call;
	bool run_handler = false, free_it;

	pthread_mutex_lock(&s->mu);
	if (tag->op == OP_SERVER_SHUTDOWN) {
		s->shutdown_done = true;
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);
		return;
	}
	c->ops_pending--;
	switch (tag->op) {
	case OP_NEW_CALL:
		if (!ok) { /* slot cancelled by shutdown */
			c->state = ST_FINISHING;
			break;
		}
		if (!s->shutting_down)
			nbs_request_new_call(s);
		on_new_call(c);
		break;
	case OP_RECV:
		run_handler = on_recv(c, ok);
		break;
	case OP_CLOSE:
		on_close(c);
		break;
	case OP_WRITE:
		on_write(c, ok);
		break;
	case OP_FINISH:
	case OP_SERVER_SHUTDOWN:
		break;
	}
	free_it = call_done_locked(c);
	pthread_mutex_unlock(&s->mu);
	if (run_handler)
		dispatch(c);
	else if (free_it)
		call_free(c);
}

void *nbs_cq_thread(void *arg)
{
	struct nb_server *s = arg;

	for (;;) {
		grpc_event ev = grpc_completion_queue_next(
			s->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);

		if (ev.type == GRPC_QUEUE_SHUTDOWN)
			break;
		if (ev.type == GRPC_OP_COMPLETE)
			nbs_handle_event(s, ev.tag, ev.success != 0);
	}
	return NULL;
}

/* ---- answers from the daemon ------------------------------------------- */

/* Finishes a held call (any thread); -EALREADY when it was answered. */
static int answer(struct nb_call *c, enum nb_code code, const char *message,
		  grpc_byte_buffer *response)
{
	struct nb_server *s = c->srv;
	bool free_it;

	pthread_mutex_lock(&s->mu);
	if (!c->held || c->state != ST_DISPATCHED) {
		pthread_mutex_unlock(&s->mu);
		if (response)
			grpc_byte_buffer_destroy(response);
		return -EALREADY;
	}
	start_finish(c, code, message, response);
	c->held = false;
	s->calls_held--;
	free_it = call_done_locked(c);
	pthread_mutex_unlock(&s->mu);
	if (free_it)
		call_free(c);
	return 0;
}

int nb_call_reply(struct nb_call *c, const ProtobufCMessage *response)
{
	const struct nb_method_info *info = nb_method_info(c->method);
	size_t n;
	grpc_slice packed;
	grpc_byte_buffer *buf;
	char msg[160];

	if (!response || response->descriptor != info->response) {
		snprintf(msg, sizeof(msg), "server: %s answered with a %s, not a %s",
			 nb_method_name(c->method),
			 response ? response->descriptor->name : "null message",
			 info->response->name);
		return answer(c, NB_INTERNAL, msg, NULL) ? -EALREADY : -EINVAL;
	}
	n = protobuf_c_message_get_packed_size(response);
	if (n > c->srv->max_message_bytes) {
		snprintf(msg, sizeof(msg),
			 "response: %zu bytes exceed the limit of %zu bytes; narrow the request", n,
			 c->srv->max_message_bytes);
		return answer(c, NB_RESOURCE_EXHAUSTED, msg, NULL);
	}
	packed = pack_slice(response);
	buf = grpc_raw_byte_buffer_create(&packed, 1);
	grpc_slice_unref(packed);
	return answer(c, NB_OK, "", buf);
}

void nb_call_fail_error(struct nb_call *c, const struct nb_error *err)
{
	char msg[sizeof(err->field) + sizeof(err->message) + 2];

	format_error(msg, sizeof(msg), err);
	answer(c, err->code == NB_OK ? NB_INTERNAL : err->code, msg, NULL);
}

void nb_call_fail(struct nb_call *c, enum nb_code code, const char *field, const char *fmt, ...)
{
	struct nb_error err;
	va_list ap;

	err.code = code;
	snprintf(err.field, sizeof(err.field), "%s", field ? field : "");
	va_start(ap, fmt);
	vsnprintf(err.message, sizeof(err.message), fmt, ap);
	va_end(ap);
	nb_call_fail_error(c, &err);
}

enum nb_method nb_call_method(const struct nb_call *c)
{
	return c->method;
}

enum nb_role nb_call_role(const struct nb_call *c)
{
	return c->role;
}

const char *nb_call_peer(const struct nb_call *c)
{
	return c->peer;
}

bool nb_call_cancelled(const struct nb_call *c)
{
	bool cancelled;

	pthread_mutex_lock(&c->srv->mu);
	cancelled = c->cancelled || c->srv->shutting_down;
	pthread_mutex_unlock(&c->srv->mu);
	return cancelled;
}
