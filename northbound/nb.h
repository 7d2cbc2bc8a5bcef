/*
 * nb.h - the northbound of ocsd: the gRPC C-core server that serves the
 * ocs.v1 API (Fabric, Jobs, Events) and grpc.health.v1.Health, with TLS,
 * client-certificate roles, request decoding and validation.
 *
 * The library owns the gRPC side only. The daemon owns all state on its own
 * event-loop thread; the library never touches it. The hand-off:
 *
 *   client --gRPC--> completion-queue thread (this library)
 *                      role check, decode, validate against nb_limits
 *                      invalid -> INVALID_ARGUMENT "field.path: reason"
 *                      valid   -> handlers.<method>(ctx, call, request)
 *   daemon handler:  posts (call, request) to its loop and returns at once
 *   daemon, later, from any thread:
 *                    nb_call_reply(call, response)   or
 *                    nb_call_fail(call, code, field, fmt, ...)
 *   daemon events:   nb_server_publish(server, event) from any thread,
 *                    fanned out to every Events.Watch stream
 *
 * Events.Watch and Health are served by the library itself: the daemon only
 * publishes events and sets health.
 *
 * Thread-safety:
 * - nb_call_reply(), nb_call_fail(), nb_call_fail_error(), the nb_call_*
 *   accessors, nb_server_publish(), nb_server_set_health() and
 *   nb_server_port() are thread-safe and never block on the network.
 * - nb_server_create(), nb_server_shutdown() and nb_server_destroy() are
 *   called by the owner (one thread).
 * - Handlers run on a completion-queue thread and must not block: post and
 *   return. They may also answer at once from inside the handler.
 *
 * Ownership and call lifetime:
 * - A call handed to a handler must be answered exactly once, with
 *   nb_call_reply() or nb_call_fail*(). The call and its request are freed
 *   by that answer (possibly before it returns): do not touch either after
 *   answering. Answering a call that the client cancelled is fine (the
 *   answer is dropped); nb_call_cancelled() lets the daemon skip work.
 * - nb_server_destroy() blocks until every handed-out call was answered
 *   (running nb_server_config.drain meanwhile). A call whose request is
 *   read after nb_server_shutdown() is answered UNAVAILABLE by the server
 *   itself, never handed out.
 *
 * Roles (from the client certificate's subject OU, exactly one of):
 *   viewer     reads: GetFabric, ListDevices, ListCircuits, ListRings, ListDrift,
 *              ListRailPorts, ListCabling, GetJob, ListJobs, Events.Watch
 *   scheduler  viewer + SubmitJob, PlanJob, ReleaseJob, ReplaceGpu
 *   operator   scheduler + DrainDevice, UndrainDevice, MarkNode, MarkGpu,
 *              AdoptCrossConnects, ClearCrossConnects, ClearCabling
 * A certificate with no role OU (or several) gets PERMISSION_DENIED on
 * everything but Health. Insecure servers (loopback only) give every caller
 * config.insecure_role.
 */
#ifndef OCS_NB_H
#define OCS_NB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grpc/health/v1/health.pb-c.h"
#include "ocs/v1/events.pb-c.h"
#include "ocs/v1/fabric.pb-c.h"
#include "ocs/v1/jobs.pb-c.h"

/* Every RPC the server knows. */
enum nb_method {
	NB_FABRIC_GET_FABRIC,
	NB_FABRIC_LIST_DEVICES,
	NB_FABRIC_LIST_CIRCUITS,
	NB_FABRIC_DRAIN_DEVICE,
	NB_FABRIC_UNDRAIN_DEVICE,
	NB_FABRIC_MARK_NODE,
	NB_FABRIC_LIST_RINGS,
	NB_FABRIC_LIST_DRIFT,
	NB_FABRIC_ADOPT_CROSS_CONNECTS,
	NB_FABRIC_CLEAR_CROSS_CONNECTS,
	NB_FABRIC_REPLACE_GPU,
	NB_FABRIC_MARK_GPU,
	NB_FABRIC_LIST_RAIL_PORTS,
	NB_FABRIC_LIST_CABLING,
	NB_FABRIC_CLEAR_CABLING,
	NB_JOBS_SUBMIT_JOB,
	NB_JOBS_PLAN_JOB,
	NB_JOBS_RELEASE_JOB,
	NB_JOBS_GET_JOB,
	NB_JOBS_LIST_JOBS,
	NB_EVENTS_WATCH,
	NB_HEALTH_CHECK,
	NB_HEALTH_WATCH,
	NB_METHOD_COUNT
};

/* Roles, ordered: each one has every right of the ones before it. */
enum nb_role {
	NB_ROLE_NONE = 0,
	NB_ROLE_VIEWER,
	NB_ROLE_SCHEDULER,
	NB_ROLE_OPERATOR,
};

/*
 * Status codes of the structured errors (the values are gRPC's). They are
 * turned into a gRPC status in one place, when the call is finished.
 */
enum nb_code {
	NB_OK = 0,
	NB_CANCELLED = 1,
	NB_INVALID_ARGUMENT = 3,
	NB_DEADLINE_EXCEEDED = 4,
	NB_NOT_FOUND = 5,
	NB_ALREADY_EXISTS = 6,
	NB_PERMISSION_DENIED = 7,
	NB_RESOURCE_EXHAUSTED = 8,
	NB_FAILED_PRECONDITION = 9,
	NB_ABORTED = 10,
	NB_UNIMPLEMENTED = 12,
	NB_INTERNAL = 13,
	NB_UNAVAILABLE = 14,
};

/*
 * A structured error: code, the request field it concerns (a path such as
 * "placement.gpus[12].leaf", or "" for the request as a whole) and a
 * message. The status message a client sees is "field: message".
 */
struct nb_error {
	enum nb_code code;
	char field[128];
	char message[512];
};

/*
 * A planner JobSpec.options.planner may name. The northbound knows no
 * planner itself: the daemon passes them from the solvers' catalogue.
 */
struct nb_planner {
	const char *name;	/* must outlive the server (static storage) */
	bool takes_parallelism; /* plans JobSpec.parallelism; else JobSpec.leaf_demand */
};

#define NB_PLANNERS_MAX 16

/* The kind of fabric the daemon controls: it decides which demands and
 * filters make sense. Names as in the fabric file (nb_fabric_kind_name). */
enum nb_fabric_kind {
	NB_FABRIC_LEAF_SPINE_OCS = 0, /* leaf_demand and parallelism jobs on circuits */
	NB_FABRIC_OCSTRX_RING,	      /* ring jobs (JobSpec.ring) on transceiver nodes */
	NB_FABRIC_RAIL_OCS,	      /* jobs are their GPUs (placement only); GPU swaps */
};

/*
 * A rail-OCS fabric's size (nb_limits.kind = NB_FABRIC_RAIL_OCS): GPU ids
 * are 0 .. servers * rails - 1 (server * rails + rail).
 */
struct nb_rail_limits {
	int servers; /* > 0, spares included */
	int rails;   /* > 0: GPUs per server */
};

/*
 * An OCSTrx ring domain's size, as far as requests are checked against it
 * (nb_limits.kind = NB_FABRIC_OCSTRX_RING).
 */
struct nb_ring_limits {
	int nodes;	   /* > 0: node ids are 0 .. nodes - 1 */
	int gpus_per_node; /* > 0: ring.tp is a multiple of it */
};

/*
 * Fabric limits the daemon provides; every request field is checked
 * against them before a handler sees the request. Zero means "default"
 * where a default is given. Copied by value (nb_server_create).
 *
 * A leaf-spine fabric (kind NB_FABRIC_LEAF_SPINE_OCS) fills pods ..
 * groups; `ring` stays zero. A ring domain (NB_FABRIC_OCSTRX_RING) fills
 * `ring`; pods, leaves_per_pod, gpus_per_leaf and leaf_links_max stay 0,
 * and groups is the number of device groups ListDevices may filter on (0:
 * none). Requests that only make sense on the other kind (a ring request
 * on a leaf-spine fabric, MarkNode or ListRings there, a leaf_demand or
 * parallelism spec or a pod filter on a ring domain) get
 * FAILED_PRECONDITION naming the field and the fabric kind.
 */
struct nb_limits {
	enum nb_fabric_kind kind;
	int pods;	      /* > 0 (leaf-spine) */
	int leaves_per_pod;   /* > 0 (leaf-spine) */
	int gpus_per_leaf;    /* > 0 (k_leaf; leaf-spine) */
	int groups;	      /* > 0: OCS groups (leaf-spine); >= 0: device groups (ring) */
	int leaf_links_max;   /* links one leaf may ask for in total; 0: gpus_per_leaf */
	int max_gpus_per_job; /* 0: every GPU of the fabric */
	int max_leaf_pairs;   /* 0: 65536 */
	/*
	 * The planners options.planner may name (an empty name leaves the choice
	 * to the daemon), and whether each takes a parallelism spec: a named
	 * planner must take the job's kind of demand. n_planners = 0: names are
	 * only checked to be printable, the daemon checks them (tests of the
	 * northbound alone).
	 */
	struct nb_planner planners[NB_PLANNERS_MAX];
	size_t n_planners;
	struct nb_ring_limits ring; /* ring domain only */
	struct nb_rail_limits rail; /* rail-OCS fabric only (groups: its OCS groups) */
};

/* Bounds on strings, shared with ocsctl's help text. */
#define NB_ID_MAX_LEN		     64
#define NB_IDEMPOTENCY_KEY_MAX_LEN   128
#define NB_DEVICE_NAME_MAX_LEN	     64
#define NB_HEALTH_SERVICE_MAX_LEN    128
#define NB_DEFAULT_MAX_MESSAGE_BYTES (4u * 1024u * 1024u)
#define NB_DEFAULT_MAX_LEAF_PAIRS    65536
/*
 * Bounds of a parallelism spec's search and size (JobSpec.parallelism).
 * The search bounds keep one plan within a few seconds (issue 14 #8): a
 * 256-task DAG takes 3.2 s for 20,000 generations on one core of the lab
 * machine, and the daemon stops every search at the time budget, which is
 * NB_PARALLELISM_MAX_TIME_BUDGET_MS when the spec gives none.
 */
#define NB_PARALLELISM_MAX_MICRO_BATCHES  16384
#define NB_PARALLELISM_MAX_GENERATIONS	  100000 /* the default max_generations */
#define NB_PARALLELISM_MAX_STALL	  10000
#define NB_PARALLELISM_MAX_TIME_BUDGET_MS 5000

struct nb_server;
struct nb_call;

/*
 * The daemon's callback table. Each handler gets a decoded, validated
 * request (owned by the call: valid until the call is answered). A NULL
 * handler answers UNIMPLEMENTED.
 */
struct nb_handlers {
	void *ctx;
	void (*get_fabric)(void *ctx, struct nb_call *call, const Ocs__V1__GetFabricRequest *req);
	void (*list_devices)(void *ctx, struct nb_call *call,
			     const Ocs__V1__ListDevicesRequest *req);
	void (*list_circuits)(void *ctx, struct nb_call *call,
			      const Ocs__V1__ListCircuitsRequest *req);
	void (*drain_device)(void *ctx, struct nb_call *call,
			     const Ocs__V1__DrainDeviceRequest *req);
	void (*undrain_device)(void *ctx, struct nb_call *call,
			       const Ocs__V1__UndrainDeviceRequest *req);
	/* Ring domains only (the library refuses both on a leaf-spine fabric):
	 * req->node is within 0..nodes-1 and req->condition is HEALTHY or
	 * FAULTY; ListRings' job_id is a valid id or "" and its node filter is
	 * in range. */
	void (*mark_node)(void *ctx, struct nb_call *call, const Ocs__V1__MarkNodeRequest *req);
	void (*list_rings)(void *ctx, struct nb_call *call, const Ocs__V1__ListRingsRequest *req);
	/* Leaf-spine fabrics only (refused on a ring domain); names and ports checked. */
	void (*list_drift)(void *ctx, struct nb_call *call, const Ocs__V1__ListDriftRequest *req);
	void (*adopt_cross_connects)(void *ctx, struct nb_call *call,
				     const Ocs__V1__AdoptCrossConnectsRequest *req);
	void (*clear_cross_connects)(void *ctx, struct nb_call *call,
				     const Ocs__V1__ClearCrossConnectsRequest *req);
	/*
	 * Rail-OCS fabrics: gpu is within the fabric's GPUs; MarkGpu's condition
	 * is HEALTHY or FAULTY; ListRailPorts' filters are in range, its job_id
	 * a valid id or "", its page a size within bounds and a token of
	 * nb_rail_ports_token().
	 */
	void (*replace_gpu)(void *ctx, struct nb_call *call, const Ocs__V1__ReplaceGpuRequest *req);
	void (*mark_gpu)(void *ctx, struct nb_call *call, const Ocs__V1__MarkGpuRequest *req);
	void (*list_rail_ports)(void *ctx, struct nb_call *call,
				const Ocs__V1__ListRailPortsRequest *req);
	/* The cabling check (any fabric kind): device names checked, and
	 * ClearCabling's device given and its port within 0..65535. */
	void (*list_cabling)(void *ctx, struct nb_call *call,
			     const Ocs__V1__ListCablingRequest *req);
	void (*clear_cabling)(void *ctx, struct nb_call *call,
			      const Ocs__V1__ClearCablingRequest *req);
	void (*submit_job)(void *ctx, struct nb_call *call, const Ocs__V1__JobSpec *req);
	void (*plan_job)(void *ctx, struct nb_call *call, const Ocs__V1__JobSpec *req);
	void (*release_job)(void *ctx, struct nb_call *call, const Ocs__V1__ReleaseJobRequest *req);
	void (*get_job)(void *ctx, struct nb_call *call, const Ocs__V1__GetJobRequest *req);
	void (*list_jobs)(void *ctx, struct nb_call *call, const Ocs__V1__ListJobsRequest *req);
	/*
	 * Optional, for metrics: called once per finished call (every method,
	 * refused ones included) with its final status and duration, from
	 * whichever thread finished it. Must not block.
	 */
	void (*call_done)(void *ctx, enum nb_method method, enum nb_code code,
			  uint64_t duration_us);
	/*
	 * Optional: whether a service set SERVING (nb_server_set_health) still
	 * serves at this instant; false answers NOT_SERVING to Health.Check and
	 * to a new Health.Watch's first message (the daemon then sets the
	 * health itself, which Watch streams get). For what can go stale
	 * before the daemon's own threads notice, e.g. a leader's lease after a
	 * pause. Called with the server's lock held, from gRPC's threads: must
	 * not block and must not call the server.
	 */
	bool (*serving_now)(void *ctx, const char *service);
};

struct nb_server_config {
	/* "127.0.0.1:50051", "[::1]:0", "0.0.0.0:50051"; port 0 picks one. */
	const char *listen_addr;
	/* Plaintext without client certificates. Refused unless listen_addr is
	 * a loopback address (127.0.0.0/8, ::1, localhost) or a unix: socket. */
	bool insecure;
	enum nb_role insecure_role; /* role of insecure callers; NONE: operator */
	/* PEM files for TLS: CA that signs client certificates, server
	 * certificate and key. Required unless insecure. */
	const char *tls_ca_file;
	const char *tls_cert_file;
	const char *tls_key_file;
	size_t max_message_bytes; /* both directions; 0: 4 MiB */
	int threads;		  /* completion-queue threads; 0: 2 */
	/* Events.Watch and Health.Watch streams. A stream holds at most one
	 * message in gRPC (the write in flight) and queues at most
	 * stream_queue_max more (0: 1024); one that falls further behind is
	 * ended at once with RESOURCE_EXHAUSTED "watch: client too slow: ...".
	 * At most max_streams (0: 1000) are open; beyond that a new Watch is
	 * refused with RESOURCE_EXHAUSTED "watch: N streams open, ...". */
	int stream_queue_max;
	int max_streams;
	/* Calls handed to the daemon and not answered yet; beyond this, new
	 * calls get RESOURCE_EXHAUSTED "server: N calls in flight, ..." at once
	 * (so a stuck loop cannot pile up work). 0: 4096. */
	int max_calls_in_flight;
	/* nb_server_destroy(): how long calls may take to end by themselves
	 * before the rest are cancelled; 0: 2000 ms. */
	int shutdown_grace_ms;
	/* Run by nb_server_destroy(), outside its lock, every NB_DRAIN_MS while
	 * it waits for handed-out calls to be answered (NULL: not at all):
	 * when the thread that destroys the server is the one that answers
	 * (the daemon's loop), this runs what handlers posted to it, which
	 * would otherwise wait for that thread forever. */
	void (*drain)(void *ctx);
	void *drain_ctx;
	struct nb_limits limits;
	struct nb_handlers handlers;
};

/*
 * Binds, starts the completion-queue threads and serves. Health is SERVING
 * for "", "ocs.v1.Fabric", "ocs.v1.Jobs" and "ocs.v1.Events" once this
 * returns. Returns 0 and *out (destroy with nb_server_destroy()), or a
 * negative errno with err filled in (field names the config entry).
 */
int nb_server_create(const struct nb_server_config *cfg, struct nb_server **out,
		     struct nb_error *err);
/* The bound TCP port (gRPC reports 1 for a unix: socket). */
int nb_server_port(const struct nb_server *s);
/*
 * Stops accepting calls, marks health NOT_SERVING (sent to Health.Watch
 * streams) and ends every stream with UNAVAILABLE. Calls in flight keep
 * going: handlers must still answer them. Idempotent.
 */
void nb_server_shutdown(struct nb_server *s);
/* Shuts down if needed, waits for every call to end (cancelling those
 * still open after shutdown_grace_ms) and to be answered by the daemon,
 * stops the threads and frees everything. Accepts NULL. */
void nb_server_destroy(struct nb_server *s);

/* How long a program's last step waits for gRPC to end (nb_grpc_settle). */
#define NB_SETTLE_MS 2000
/*
 * The last step of a program that used gRPC (a server or a client), once
 * every server and client is freed: waits, at most timeout_ms, until the
 * library has ended and no thread but the caller is left in the process.
 * Freeing them is not enough: a connection gRPC closes on its own thread
 * may hold the library's last reference, whose cleanup then runs on a
 * thread of gRPC's, and gRPC 1.51's event-engine threads end a little after
 * its shutdown. A process that exits meanwhile runs its exit handlers
 * (OpenSSL's cleanup, the C++ destructors of gRPC's globals) under those
 * threads' feet: a rare SIGSEGV at exit, seen once in CI. Returns false
 * if the time ran out (the caller exits anyway); true at once on a process
 * whose /proc is not mounted, once gRPC has ended.
 */
bool nb_grpc_settle(int timeout_ms);

/*
 * Publishes an event to every Events.Watch stream whose filter wants it.
 * The event is copied; seq is stamped (+1 per call, from 1) and
 * time_unix_ms too when 0. A watcher more than stream_queue_max events
 * behind is ended at once with RESOURCE_EXHAUSTED "watch: client too slow":
 * a slow reader costs the publisher at most stream_queue_max pushes, never
 * a wait. Returns the seq stamped.
 */
uint64_t nb_server_publish(struct nb_server *s, const Ocs__V1__Event *event);

/* Sets the health of a service name ("" = the whole server) and tells its
 * Health.Watch streams. Unknown names are added. */
void nb_server_set_health(struct nb_server *s, const char *service,
			  Grpc__Health__V1__HealthCheckResponse__ServingStatus status);

/*
 * Answers a call with its response message, which must be of the method's
 * response type (else the call is failed with INTERNAL and -EINVAL is
 * returned: it is answered all the same). The message is packed before
 * this returns; the caller keeps ownership of it. A response over
 * max_message_bytes fails the call with RESOURCE_EXHAUSTED (returns 0).
 * After any nb_call_reply()/nb_call_fail*() the call may already be freed:
 * answering twice is a bug (not detected reliably).
 */
int nb_call_reply(struct nb_call *call, const ProtobufCMessage *response);
/* Fails a call with a code and a message about one request field
 * (field may be "" or NULL for the request as a whole). */
void nb_call_fail(struct nb_call *call, enum nb_code code, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
void nb_call_fail_error(struct nb_call *call, const struct nb_error *err);

enum nb_method nb_call_method(const struct nb_call *call);
enum nb_role nb_call_role(const struct nb_call *call);
/* The client certificate's CN ("" when insecure). Valid until answered. */
const char *nb_call_peer(const struct nb_call *call);
/* True once the client cancelled or the server shut down. */
bool nb_call_cancelled(const struct nb_call *call);

/* Method facts. */
const char *nb_method_name(enum nb_method m); /* "Jobs/SubmitJob" */
const char *nb_method_path(enum nb_method m); /* "/ocs.v1.Jobs/SubmitJob" */
enum nb_role nb_method_min_role(enum nb_method m);
/* NB_METHOD_COUNT when the path is not served. */
enum nb_method nb_method_from_path(const char *path, size_t len);
const char *nb_role_name(enum nb_role r);		/* "viewer", ..., "none" */
const char *nb_code_name(enum nb_code c);		/* "INVALID_ARGUMENT" */
const char *nb_fabric_kind_name(enum nb_fabric_kind k); /* "leaf-spine-ocs", ..., "rail-ocs" */

/*
 * The role a PEM client certificate grants: its subject must hold exactly
 * one OU among "scheduler", "operator", "viewer". Writes the subject CN to
 * cn (may be NULL). NB_ROLE_NONE when unparsable or no single role OU, and
 * when any OU holds a NUL byte ("operator\0viewer"), which it logs.
 */
enum nb_role nb_role_from_cert_pem(const char *pem, size_t len, char *cn, size_t cn_len);

/*
 * Decodes a request of method m and validates every field against limits.
 * Returns 0 and *out (free with protobuf_c_message_free_unpacked(*out,
 * NULL)), or -EINVAL / -EMSGSIZE with err set: RESOURCE_EXHAUSTED for a
 * message over max_message_bytes, INVALID_ARGUMENT with the field path for
 * anything malformed or out of range. Pure; thread-safe.
 */
int nb_decode_request(enum nb_method m, const uint8_t *data, size_t len,
		      const struct nb_limits *limits, size_t max_message_bytes,
		      ProtobufCMessage **out, struct nb_error *err);
/* The validation half of nb_decode_request() on an already built message. */
int nb_validate_request(enum nb_method m, const ProtobufCMessage *req,
			const struct nb_limits *limits, struct nb_error *err);
/* Checks the limits themselves (the daemon's input); 0 or -EINVAL + err. */
int nb_limits_check(const struct nb_limits *limits, struct nb_error *err);

/*
 * Paging of ListJobs and ListCircuits. Page sizes are checked by
 * validation (0 .. max); a page token is checked to be one this server
 * makes, so a handler may decode it without further checks. Tokens name
 * where the last page ended (a job id; a circuit's key): pages stay right
 * while entries are added. Pure; thread-safe.
 */
#define NB_LIST_JOBS_PAGE_DEFAULT     500
#define NB_LIST_JOBS_PAGE_MAX	      1000
#define NB_LIST_CIRCUITS_PAGE_DEFAULT 1000
#define NB_LIST_CIRCUITS_PAGE_MAX     5000
#define NB_PAGE_TOKEN_MAX_LEN	      96

/* A circuit's place in ListCircuits' order. */
struct nb_circuit_key {
	int32_t group, pod_a, port_a, pod_b, port_b;
};

/* The page size to use for a validated request's page_size. */
size_t nb_page_size(enum nb_method m, int32_t page_size);
/* The job id a validated ListJobs page_token resumes after; NULL for "". */
const char *nb_jobs_token_after(const char *page_token);
/* Writes the token resuming after job id (buf of NB_PAGE_TOKEN_MAX_LEN + 1). */
void nb_jobs_token(const char *id, char *buf, size_t len);
/* The key a validated ListCircuits page_token resumes after: false for "". */
bool nb_circuits_token_after(const char *page_token, struct nb_circuit_key *key);
void nb_circuits_token(const struct nb_circuit_key *key, char *buf, size_t len);
/* <0, 0, >0 in ListCircuits' order. */
int nb_circuit_key_cmp(const struct nb_circuit_key *a, const struct nb_circuit_key *b);
/* ListRailPorts (page sizes as ListCircuits'): the rail port a validated
 * page_token resumes after, false for ""; and the token resuming after port. */
bool nb_rail_ports_token_after(const char *page_token, int64_t *port);
void nb_rail_ports_token(int64_t port, char *buf, size_t len);

#endif
