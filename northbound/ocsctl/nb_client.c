/*
 * nb_client.c - the blocking gRPC C-core client behind ocsctl (see
 * nb_client.h). Every operation is one batch plucked from a private
 * completion queue, so the client has no threads of its own.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include "nb_client.h"

struct nb_client {
	grpc_channel *channel;
	grpc_completion_queue *cq;
	int timeout_ms;
	bool insecure; /* plaintext: a failed connection is not about TLS files */
	/* the open stream, if any */
	grpc_call *stream;
	grpc_metadata_array stream_md, stream_trailing;
	grpc_status_code stream_status;
	grpc_slice stream_details;
	bool stream_status_started;
};

static char *slurp(const char *path, char *err, size_t err_len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f) {
		snprintf(err, err_len, "%s: %s", path, strerror(errno));
		return NULL;
	}
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && n < 1 << 20 &&
	    fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)n + 1);
		if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n)
			buf[n] = '\0';
		else {
			free(buf);
			buf = NULL;
		}
	}
	fclose(f);
	if (!buf)
		snprintf(err, err_len, "%s: unreadable or over 1 MiB", path);
	return buf;
}

static gpr_timespec deadline_after(int ms)
{
	return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(ms, GPR_TIMESPAN));
}

struct nb_client *nb_client_new(const struct nb_client_opts *o, char *err, size_t err_len)
{
	struct nb_client *c;
	grpc_channel_credentials *creds;
	grpc_arg args[2];
	grpc_channel_args channel_args = {2, args};
	char recv_key[] = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
	char send_key[] = GRPC_ARG_MAX_SEND_MESSAGE_LENGTH;
	int max_bytes = o->max_message_bytes ? (int)o->max_message_bytes : 4 << 20;

	grpc_init();
	if (o->insecure) {
		creds = grpc_insecure_credentials_create();
	} else {
		char *ca = slurp(o->ca_file, err, err_len), *cert = NULL, *key = NULL;
		grpc_ssl_pem_key_cert_pair pair;

		if (!ca) {
			grpc_shutdown();
			return NULL;
		}
		if (o->cert_file) {
			cert = slurp(o->cert_file, err, err_len);
			key = cert ? slurp(o->key_file, err, err_len) : NULL;
			if (!key) {
				free(ca);
				free(cert);
				grpc_shutdown();
				return NULL;
			}
			pair.cert_chain = cert;
			pair.private_key = key;
		}
		creds = grpc_ssl_credentials_create(ca, o->cert_file ? &pair : NULL, NULL, NULL);
		free(ca);
		free(cert);
		free(key);
	}
	if (!creds) {
		snprintf(err, err_len, "gRPC refused the credentials");
		grpc_shutdown();
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		grpc_channel_credentials_release(creds);
		grpc_shutdown();
		snprintf(err, err_len, "out of memory");
		return NULL;
	}
	args[0].type = GRPC_ARG_INTEGER;
	args[0].key = recv_key;
	args[0].value.integer = max_bytes;
	args[1].type = GRPC_ARG_INTEGER;
	args[1].key = send_key;
	args[1].value.integer = max_bytes;
	c->channel = grpc_channel_create(o->target, creds, &channel_args);
	grpc_channel_credentials_release(creds);
	c->cq = grpc_completion_queue_create_for_pluck(NULL);
	c->timeout_ms = o->timeout_ms;
	c->insecure = o->insecure;
	return c;
}

void nb_client_free(struct nb_client *c)
{
	if (!c)
		return;
	nb_client_stream_close(c);
	grpc_channel_destroy(c->channel);
	grpc_completion_queue_shutdown(c->cq);
	while (grpc_completion_queue_pluck(c->cq, NULL, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL)
		       .type != GRPC_QUEUE_SHUTDOWN)
		;
	grpc_completion_queue_destroy(c->cq);
	free(c);
	grpc_shutdown();
}

void nb_client_set_timeout(struct nb_client *c, int timeout_ms)
{
	c->timeout_ms = timeout_ms;
}

int nb_client_connect(struct nb_client *c, struct nb_client_status *st)
{
	gpr_timespec deadline = deadline_after(c->timeout_ms);
	grpc_connectivity_state s = grpc_channel_check_connectivity_state(c->channel, 1);
	int tag;

	memset(st, 0, sizeof(*st));
	while (s != GRPC_CHANNEL_READY) {
		grpc_event ev;

		if (s == GRPC_CHANNEL_TRANSIENT_FAILURE || s == GRPC_CHANNEL_SHUTDOWN) {
			snprintf(st->message, sizeof(st->message), "%s",
				 c->insecure ? "connection failed (server down, wrong address, or "
					       "the server wants TLS: drop --insecure and give "
					       "--ca, --cert and --key)"
					     : "connection failed (server down, wrong address, or "
					       "TLS refused: check --ca, --cert and --key)");
			st->code = GRPC_STATUS_UNAVAILABLE;
			st->unreachable = true;
			return -1;
		}
		grpc_channel_watch_connectivity_state(c->channel, s, deadline, c->cq, &tag);
		ev = grpc_completion_queue_pluck(c->cq, &tag, gpr_inf_future(GPR_CLOCK_MONOTONIC),
						 NULL);
		if (!ev.success) {
			snprintf(st->message, sizeof(st->message), "no connection within %d ms",
				 c->timeout_ms);
			st->code = GRPC_STATUS_DEADLINE_EXCEEDED;
			st->unreachable = true;
			return -1;
		}
		s = grpc_channel_check_connectivity_state(c->channel, 0);
	}
	return 0;
}

static void set_status(struct nb_client *c, struct nb_client_status *st, grpc_status_code code,
		       grpc_slice details)
{
	size_t n = GRPC_SLICE_LENGTH(details);

	st->code = code;
	if (n >= sizeof(st->message))
		n = sizeof(st->message) - 1;
	memcpy(st->message, GRPC_SLICE_START_PTR(details), n);
	st->message[n] = '\0';
	/* Lost on the way (connection dropped): not the server's answer. */
	st->unreachable =
		code == GRPC_STATUS_UNAVAILABLE &&
		grpc_channel_check_connectivity_state(c->channel, 0) != GRPC_CHANNEL_READY;
}

static grpc_byte_buffer *pack(const ProtobufCMessage *m)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	grpc_slice s = grpc_slice_malloc(n);
	grpc_byte_buffer *b;

	protobuf_c_message_pack(m, GRPC_SLICE_START_PTR(s));
	b = grpc_raw_byte_buffer_create(&s, 1);
	grpc_slice_unref(s);
	return b;
}

static ProtobufCMessage *unpack(grpc_byte_buffer *b, const ProtobufCMessageDescriptor *desc)
{
	grpc_byte_buffer_reader r;
	grpc_slice s;
	ProtobufCMessage *m;

	if (!grpc_byte_buffer_reader_init(&r, b))
		return NULL;
	s = grpc_byte_buffer_reader_readall(&r);
	grpc_byte_buffer_reader_destroy(&r);
	m = protobuf_c_message_unpack(desc, NULL, GRPC_SLICE_LENGTH(s), GRPC_SLICE_START_PTR(s));
	grpc_slice_unref(s);
	return m;
}

/*
 * The first four ops of a call with one request: initial metadata, the
 * request (out), close, and the server's initial metadata into md.
 */
static void send_request_ops(grpc_op ops[4], grpc_byte_buffer *out, grpc_metadata_array *md)
{
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = out;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = md;
}

int nb_client_unary(struct nb_client *c, const char *path, const ProtobufCMessage *req,
		    const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
		    struct nb_client_status *st)
{
	grpc_slice method = grpc_slice_from_static_string(path);
	grpc_call *call;
	grpc_op ops[6];
	grpc_metadata_array md, trailing;
	grpc_byte_buffer *out = pack(req), *in = NULL;
	grpc_status_code code = GRPC_STATUS_UNKNOWN;
	grpc_slice details = grpc_empty_slice();
	int tag, rc = -1;

	*resp = NULL;
	memset(st, 0, sizeof(*st));
	call = grpc_channel_create_call(c->channel, NULL, GRPC_PROPAGATE_DEFAULTS, c->cq, method,
					NULL, deadline_after(c->timeout_ms), NULL);
	grpc_metadata_array_init(&md);
	grpc_metadata_array_init(&trailing);
	memset(ops, 0, sizeof(ops));
	send_request_ops(ops, out, &md);
	ops[4].op = GRPC_OP_RECV_MESSAGE;
	ops[4].data.recv_message.recv_message = &in;
	ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[5].data.recv_status_on_client.trailing_metadata = &trailing;
	ops[5].data.recv_status_on_client.status = &code;
	ops[5].data.recv_status_on_client.status_details = &details;
	if (grpc_call_start_batch(call, ops, 6, &tag, NULL) == GRPC_CALL_OK)
		grpc_completion_queue_pluck(c->cq, &tag, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
	set_status(c, st, code, details);
	if (code == GRPC_STATUS_OK) {
		*resp = in ? unpack(in, resp_desc) : NULL;
		if (*resp) {
			rc = 0;
		} else {
			st->code = GRPC_STATUS_INTERNAL;
			snprintf(st->message, sizeof(st->message), "unreadable %s response",
				 resp_desc->name);
		}
	}
	if (in)
		grpc_byte_buffer_destroy(in);
	grpc_byte_buffer_destroy(out);
	grpc_slice_unref(details);
	grpc_metadata_array_destroy(&md);
	grpc_metadata_array_destroy(&trailing);
	grpc_call_unref(call);
	return rc;
}

int nb_client_stream_open(struct nb_client *c, const char *path, const ProtobufCMessage *req,
			  struct nb_client_status *st)
{
	grpc_op ops[4];
	grpc_byte_buffer *out = pack(req);
	int tag;

	memset(st, 0, sizeof(*st));
	c->stream = grpc_channel_create_call(c->channel, NULL, GRPC_PROPAGATE_DEFAULTS, c->cq,
					     grpc_slice_from_static_string(path), NULL,
					     gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
	grpc_metadata_array_init(&c->stream_md);
	grpc_metadata_array_init(&c->stream_trailing);
	c->stream_details = grpc_empty_slice();
	memset(ops, 0, sizeof(ops));
	send_request_ops(ops, out, &c->stream_md);
	if (grpc_call_start_batch(c->stream, ops, 4, &tag, NULL) != GRPC_CALL_OK) {
		grpc_byte_buffer_destroy(out);
		st->code = GRPC_STATUS_INTERNAL;
		snprintf(st->message, sizeof(st->message), "could not start the stream");
		return -1;
	}
	grpc_completion_queue_pluck(c->cq, &tag, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
	grpc_byte_buffer_destroy(out);
	/* The status arrives whenever the stream ends. */
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[0].data.recv_status_on_client.trailing_metadata = &c->stream_trailing;
	ops[0].data.recv_status_on_client.status = &c->stream_status;
	ops[0].data.recv_status_on_client.status_details = &c->stream_details;
	if (grpc_call_start_batch(c->stream, ops, 1, &c->stream_status, NULL) == GRPC_CALL_OK)
		c->stream_status_started = true;
	return 0;
}

int nb_client_stream_next(struct nb_client *c, const ProtobufCMessageDescriptor *desc,
			  ProtobufCMessage **msg, struct nb_client_status *st)
{
	grpc_op op;
	grpc_byte_buffer *in = NULL;
	int tag;

	*msg = NULL;
	memset(&op, 0, sizeof(op));
	op.op = GRPC_OP_RECV_MESSAGE;
	op.data.recv_message.recv_message = &in;
	if (grpc_call_start_batch(c->stream, &op, 1, &tag, NULL) != GRPC_CALL_OK)
		return -1;
	grpc_completion_queue_pluck(c->cq, &tag, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
	if (!in) { /* the stream ended: collect its status */
		if (c->stream_status_started) {
			grpc_completion_queue_pluck(c->cq, &c->stream_status,
						    gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
			c->stream_status_started = false;
		}
		set_status(c, st, c->stream_status, c->stream_details);
		return 1;
	}
	*msg = unpack(in, desc);
	grpc_byte_buffer_destroy(in);
	if (!*msg) {
		st->code = GRPC_STATUS_INTERNAL;
		snprintf(st->message, sizeof(st->message), "unreadable %s message", desc->name);
		return -1;
	}
	return 0;
}

void nb_client_stream_close(struct nb_client *c)
{
	if (!c->stream)
		return;
	grpc_call_cancel(c->stream, NULL);
	if (c->stream_status_started)
		grpc_completion_queue_pluck(c->cq, &c->stream_status,
					    gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
	c->stream_status_started = false;
	grpc_slice_unref(c->stream_details);
	grpc_metadata_array_destroy(&c->stream_md);
	grpc_metadata_array_destroy(&c->stream_trailing);
	grpc_call_unref(c->stream);
	c->stream = NULL;
}

void nb_client_stream_cancel(struct nb_client *c)
{
	grpc_call_cancel(c->stream, NULL);
}
