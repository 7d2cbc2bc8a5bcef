/*
 * nb_client.h - a small blocking gRPC C-core client for ocsctl: one channel
 * (TLS with an optional client certificate, or plaintext), unary calls and
 * one server stream, each message a protobuf-c message.
 *
 * Not thread-safe: one client per thread (nb_client_stream_cancel() is
 * the one exception).
 */
#ifndef OCS_NB_CLIENT_H
#define OCS_NB_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

struct nb_client;

struct nb_client_opts {
	const char *target; /* "host:port" */
	bool insecure;
	const char *ca_file;	  /* PEM CA that signed the server's certificate */
	const char *cert_file;	  /* PEM client certificate (optional) */
	const char *key_file;	  /* its key */
	int timeout_ms;		  /* connect and per-call deadline */
	size_t max_message_bytes; /* both directions; 0: 4 MiB */
};

/* The outcome of a call: gRPC status code and message (owned by the
 * client, valid until the next call). */
struct nb_client_status {
	int code;
	char message[512];
	bool unreachable; /* the server could not be reached (or was lost) */
};

/* Returns the client or NULL with a message in err (bad files, ...). */
struct nb_client *nb_client_new(const struct nb_client_opts *o, char *err, size_t err_len);
void nb_client_free(struct nb_client *c);
/* Sets the deadline of the calls that follow (connect too), in ms. */
void nb_client_set_timeout(struct nb_client *c, int timeout_ms);
/* Waits up to timeout_ms for a ready connection; 0 or -1 (unreachable). */
int nb_client_connect(struct nb_client *c, struct nb_client_status *st);
/*
 * Unary call of `path` ("/ocs.v1.Jobs/GetJob"). On status OK returns 0 and
 * *resp (free with protobuf_c_message_free_unpacked(*resp, NULL)); else -1
 * with st filled in.
 */
int nb_client_unary(struct nb_client *c, const char *path, const ProtobufCMessage *req,
		    const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
		    struct nb_client_status *st);
/* Server stream: open, then next until it returns 1 (ended; st holds the
 * final status) or -1 (error). No deadline on streams. */
int nb_client_stream_open(struct nb_client *c, const char *path, const ProtobufCMessage *req,
			  struct nb_client_status *st);
int nb_client_stream_next(struct nb_client *c, const ProtobufCMessageDescriptor *desc,
			  ProtobufCMessage **msg, struct nb_client_status *st);
void nb_client_stream_close(struct nb_client *c);
/*
 * Ends the open stream from another thread: the one call of this client
 * that may be made while the client's own thread is in
 * nb_client_stream_next(), which then returns -1 (CANCELLED). The caller
 * guarantees the stream is open (nb_client_stream_open() returned 0 and
 * nb_client_stream_close() has not been called yet): grpc_call_cancel()
 * is thread-safe in gRPC core.
 */
void nb_client_stream_cancel(struct nb_client *c);

#endif
