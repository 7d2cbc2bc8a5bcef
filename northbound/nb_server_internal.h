/*
 * nb_server_internal.h - what the two files of the northbound server share:
 * the server, call and tag structs, and the calls nb_server_life.c makes
 * into the call machinery. Not for use outside nb_server.c and
 * nb_server_life.c.
 *
 * Files:
 *
 *   nb_server.c       the call state machine (drawn at its top, with the
 *                     invariants both files keep), streams, Health, the
 *                     completion-queue threads' event handling
 *   nb_server_life.c  configuration, credentials, start, shutdown with its
 *                     grace period, destroy
 *
 * Calls go one way, nb_server_life.c --> nb_server.c. Prefix nbs_.
 */
#ifndef OCSD_NB_SERVER_INTERNAL_H
#define OCSD_NB_SERVER_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <grpc/grpc.h>

#include "nb_internal.h"

#define NB_MAX_THREADS 16

enum call_state { ST_REQUESTED, ST_RECEIVING, ST_DISPATCHED, ST_STREAMING, ST_FINISHING };
enum op_kind { OP_NEW_CALL, OP_RECV, OP_CLOSE, OP_WRITE, OP_FINISH, OP_SERVER_SHUTDOWN };

struct nb_tag {
	struct nb_call *call;
	enum op_kind op;
};

struct health_entry {
	char *service;
	Grpc__Health__V1__HealthCheckResponse__ServingStatus status;
	struct health_entry *next;
};

struct nb_call {
	struct nb_server *srv;
	grpc_call *call;
	grpc_call_details details;
	grpc_metadata_array request_md;
	struct nb_tag tag_new, tag_recv, tag_close, tag_write, tag_finish;
	enum call_state state;
	enum nb_method method;
	enum nb_role role;
	char peer[128];
	uint64_t start_ns;
	int ops_pending;
	bool held; /* handed to the daemon, not answered yet */
	bool initial_md_sent;
	bool cancelled;
	int close_cancelled; /* written by RECV_CLOSE_ON_SERVER */
	grpc_byte_buffer *recv_buf;
	ProtobufCMessage *request;
	/* FINISHING */
	enum nb_code final_code;
	grpc_slice status_details;
	bool status_details_set;
	grpc_byte_buffer *finish_buf;
	/* STREAMING: a ring of packed messages, one write at a time; grown on
	 * demand (doubling) up to stream_queue_max, freed when the stream ends */
	grpc_slice *queue;
	int queue_cap, queue_head, queue_len;
	bool writing;
	grpc_byte_buffer *write_buf;
	bool finish_pending;
	bool stream_counted; /* counted in server->stream_calls */
	enum nb_code pending_code;
	char pending_msg[256];
	Ocs__V1__WatchRequest *watch; /* Events.Watch filter */
	char *health_service;	      /* Health.Watch service */
	struct nb_call *next_watcher, *prev_watcher;
};

struct nb_server {
	grpc_server *server;
	grpc_completion_queue *cq;
	int port;
	size_t max_message_bytes;
	int stream_queue_max;
	int max_streams;
	int shutdown_grace_ms;
	int max_calls_in_flight;
	enum nb_role insecure_role;
	bool insecure;
	struct nb_limits limits;
	struct nb_handlers handlers;
	void (*drain)(void *ctx);
	void *drain_ctx;
	int guarded_fds[4]; /* listening sockets nb_accept.c guards */
	int n_guarded;
	pthread_t threads[NB_MAX_THREADS];
	int n_threads;

	pthread_mutex_t mu; /* guards everything below and every call's state */
	pthread_cond_t cv;  /* signalled when live_calls drops or shutdown completes */
	int live_calls;
	int calls_held; /* handed to the daemon, not answered yet */
	bool shutting_down;
	bool shutdown_done;
	struct nb_tag tag_shutdown;
	struct nb_call *watchers;
	int n_watchers; /* streams linked in watchers (max_streams caps it) */
	/* Stream calls not freed yet, and their peak since the last trim. */
	int stream_calls, stream_calls_peak;
	struct health_entry *health;
	uint64_t event_seq;
};

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t nbs_now_ns(void);

/* Under mu: keeps one more new-call request outstanding. */
void nbs_request_new_call(struct nb_server *s);

/* Under mu: finish a stream now, or after the write in flight. */
void nbs_finish_stream(struct nb_call *c, enum nb_code code, const char *message);

/* Under mu: sets a Health service's status and tells its watchers. */
void nbs_set_health_locked(struct nb_server *s, const char *service,
			   Grpc__Health__V1__HealthCheckResponse__ServingStatus status);

/* One completion-queue event (a tag of a call, or the server's shutdown). */
void nbs_handle_event(struct nb_server *s, struct nb_tag *tag, bool ok);

/* A completion-queue thread: handles events until the queue shuts down. */
void *nbs_cq_thread(void *arg);

#endif
