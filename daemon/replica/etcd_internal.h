/*
 * etcd_internal.h - what the two files of the etcd client (etcd.h) share:
 * the client behind struct etcd_client, and the JSON and connection helpers
 * of etcd.c that the watches (etcd_watch.c) use. Not for use outside the
 * client; like etcd.h, one client belongs to one thread.
 *
 *   etcd.c        options, endpoints, TLS, connections; the blocking
 *                 requests (KV, transactions, compaction, leases)
 *   etcd_watch.c  watches on the caller's base
 *
 *   etcd_watch.c --> etcd.c (never the reverse)
 */
#ifndef OCSD_ETCD_INTERNAL_H
#define OCSD_ETCD_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <openssl/ssl.h>

#include "etcd.h"

struct evbuffer;
struct evhttp_connection;
struct evhttp_request;

struct etcd_endpoint {
	char *host; /* without brackets */
	int port;
	bool tls;
};

struct etcd_client {
	struct event_base *base; /* private: blocking calls only */
	SSL_CTX *ssl;		 /* NULL without https endpoints */
	struct etcd_endpoint *eps;
	size_t n_eps;
	size_t cur; /* the endpoint that answered last */
	struct evhttp_connection *conn;
	size_t conn_ep;
	unsigned conn_uses;
	int timeout_ms;
	size_t max_response_bytes, max_event_bytes;
	void (*observe)(void *ctx, const char *op, double seconds, int rc);
	void *observe_ctx;
	char error[512];
};

/* ---- JSON (the gateway's: keys and values base64, 64-bit numbers as strings) ---- */

int etcd_set_i64(json_t *obj, const char *name, int64_t v);
/* A 64-bit number the gateway sends as a string (or a plain number); 0 if absent. */
int64_t etcd_get_i64(const json_t *obj, const char *name);
/* The store's revision in an answer's header. */
int64_t etcd_header_revision(const json_t *j);
/* Fills *kv from the gateway's kv object (etcd_kv_clear frees it). 0 or -errno. */
int etcd_kv_from_json(const json_t *o, struct etcd_kv *kv);
void etcd_kv_clear(struct etcd_kv *kv);
/* Sets key and (range_end non-NULL) range_end of a range, delete or watch request. */
int etcd_range_body(json_t *o, const void *key, size_t key_len, const void *range_end,
		    size_t range_end_len);

/* ---- connections and streamed answers ---- */

/* A new connection to ep on base (TLS with host or IP verification when https). */
struct evhttp_connection *etcd_conn_new(struct etcd_client *c, struct event_base *base,
					const struct etcd_endpoint *ep);
/* The Host and Content-Type headers of a POST to ep, and its JSON body (copied). */
void etcd_request_body(struct evhttp_request *req, const struct etcd_endpoint *ep,
		       const char *body);
/*
 * The first complete JSON object at the start of buf, if any (removed from
 * buf): 0 with *msg (NULL: not complete yet), -E2BIG when an incomplete one
 * is longer than max, -EPROTO when it is not JSON.
 */
int etcd_take_message(struct evbuffer *buf, size_t max, json_t **msg);

#endif
