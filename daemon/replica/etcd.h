/*
 * etcd.h - a small client of etcd v3 through its JSON gateway (HTTP/1.1,
 * optionally TLS): key ranges, puts, deletes, transactions with compares,
 * leases and watches. It is what the etcd store backend (store_etcd.c) and
 * the leader lease are built on; docs/replicas.md says why the gateway and
 * not generated gRPC.
 *
 * Keys and values are byte strings (the gateway carries them in base64).
 * Every revision, lease id and count is an int64_t.
 *
 * Blocking calls (etcd_range .. etcd_lease_*) run a private libevent base
 * until the answer, a failure or the client's timeout: they never run the
 * caller's loop. Several endpoints are tried in turn, starting with the
 * last one that answered; an endpoint that cannot be reached or answers
 * UNAVAILABLE passes the request to the next one. A watch instead lives on
 * the caller's event base (etcd_watch_new) and reports through a callback.
 *
 * Errors: 0, or a negative errno-style code, with a message naming the
 * endpoint in etcd_last_error():
 *   -ETIMEDOUT  no endpoint answered within the timeout (outcome unknown for
 *               a write: it may have been applied),
 *   -ECONNREFUSED  no endpoint could be reached (nothing was sent),
 *   -ENOENT     etcd's NOT_FOUND (e.g. an expired or unknown lease),
 *   -ERANGE     the revision asked for was compacted,
 *   -E2BIG      an answer larger than the client's bound, or a request etcd
 *               refused as too large,
 *   -EINVAL     etcd refused the request as invalid,
 *   -EPROTO     an answer that is not the gateway's JSON,
 *   -ENOMEM, -EIO (anything else).
 *
 * Bounds: an answer body is at most max_response_bytes (default 64 MiB), one
 * watch message at most max_event_bytes (default 8 MiB); larger ones fail
 * the request (-E2BIG) or restart the watch.
 *
 * Threading: a client belongs to one thread (the daemon's loop thread),
 * and so does every watch made from it.
 */
#ifndef OCSD_ETCD_H
#define OCSD_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct etcd_client;

struct etcd_opts {
	/* "http://host:port" or "https://host:port", comma-separated */
	const char *endpoints;
	/* TLS (https endpoints): CA bundle to verify etcd with (required for
	 * https), and a client certificate and key (both or neither) */
	const char *ca_file, *cert_file, *key_file;
	int timeout_ms;		   /* per request and endpoint; 0: 2000 */
	size_t max_response_bytes; /* 0: 64 MiB */
	size_t max_event_bytes;	   /* 0: 8 MiB */
};

/*
 * Checks the options (endpoint syntax, TLS files) without contacting etcd.
 * Returns 0, or a negative code with a message naming the option in err.
 * Caller frees with etcd_client_free() (accepts NULL).
 */
int etcd_client_new(const struct etcd_opts *opts, struct etcd_client **out, char *err,
		    size_t err_len);
void etcd_client_free(struct etcd_client *c);

/* The last failure's message (endpoint and etcd's words); "" after success. */
const char *etcd_last_error(const struct etcd_client *c);

/*
 * Called after every blocking request with the operation ("range", "put",
 * "delete", "txn", "lease_grant", ...), its duration and its result: the
 * daemon's latency histogram and error counter hang here. NULL removes it.
 */
void etcd_set_observer(struct etcd_client *c,
		       void (*fn)(void *ctx, const char *op, double seconds, int rc), void *ctx);

/* A key-value pair as etcd returns it. */
struct etcd_kv {
	uint8_t *key;
	size_t key_len;
	uint8_t *value;
	size_t value_len;
	int64_t create_revision, mod_revision, version, lease;
};

/* A range's answer: caller frees with etcd_kvs_clear(). */
struct etcd_kvs {
	struct etcd_kv *kvs;
	size_t n;
	int64_t revision; /* the store's revision the answer is at */
	bool more;	  /* a limit cut the answer short */
};

void etcd_kvs_clear(struct etcd_kvs *r);

/*
 * The keys [key, range_end) (range_end NULL: key alone; "\0" of length 1:
 * every key >= key), sorted by key, at most limit (0: no limit), read at
 * revision (0: the newest). etcd_prefix_end() makes the range_end of a
 * prefix.
 */
int etcd_range(struct etcd_client *c, const void *key, size_t key_len, const void *range_end,
	       size_t range_end_len, int64_t limit, int64_t revision, struct etcd_kvs *out);
/* The end of the range of every key starting with prefix; caller frees. NULL: no memory. */
uint8_t *etcd_prefix_end(const void *prefix, size_t len, size_t *end_len);

/* revision (may be NULL): the store's revision after the put. */
int etcd_put(struct etcd_client *c, const void *key, size_t key_len, const void *value,
	     size_t value_len, int64_t lease, int64_t *revision);
/* Deletes [key, range_end) as etcd_range; deleted (may be NULL): how many. */
int etcd_delete(struct etcd_client *c, const void *key, size_t key_len, const void *range_end,
		size_t range_end_len, int64_t *deleted);

enum etcd_cmp_target { ETCD_CMP_VERSION, ETCD_CMP_CREATE, ETCD_CMP_MOD, ETCD_CMP_VALUE };
enum etcd_cmp_result { ETCD_CMP_EQUAL, ETCD_CMP_NOT_EQUAL, ETCD_CMP_GREATER, ETCD_CMP_LESS };

/* One compare of a transaction: key's target against number (or value). */
struct etcd_cmp {
	const void *key;
	size_t key_len;
	enum etcd_cmp_target target;
	enum etcd_cmp_result result;
	int64_t number;	   /* VERSION, CREATE, MOD */
	const void *value; /* VALUE */
	size_t value_len;
};

enum etcd_op_kind { ETCD_OP_PUT, ETCD_OP_DELETE };

/* One operation of a transaction's branch (delete: range_end as etcd_range). */
struct etcd_op {
	enum etcd_op_kind kind;
	const void *key;
	size_t key_len;
	const void *value; /* put */
	size_t value_len;
	int64_t lease;	       /* put; 0: none */
	const void *range_end; /* delete */
	size_t range_end_len;
};

/*
 * One transaction: if every compare holds, the success operations, else the
 * failure ones, atomically. *succeeded says which; revision (may be NULL):
 * the store's revision after it. Returns 0 whichever branch ran.
 */
int etcd_txn(struct etcd_client *c, const struct etcd_cmp *cmps, size_t n_cmps,
	     const struct etcd_op *success, size_t n_success, const struct etcd_op *failure,
	     size_t n_failure, bool *succeeded, int64_t *revision);

/* Compacts the history up to revision (keys' older versions are gone). */
int etcd_compact(struct etcd_client *c, int64_t revision);

/* A lease of ttl_s seconds: *id, and the TTL etcd granted (may be NULL). */
int etcd_lease_grant(struct etcd_client *c, int64_t ttl_s, int64_t *id, int64_t *granted_ttl_s);
/* Renews the lease once: *ttl_s its new TTL. -ENOENT: it expired or is unknown. */
int etcd_lease_keepalive(struct etcd_client *c, int64_t id, int64_t *ttl_s);
/* Ends the lease and deletes its keys. */
int etcd_lease_revoke(struct etcd_client *c, int64_t id);
/* The lease's remaining TTL in seconds; -ENOENT when it expired. */
int etcd_lease_ttl(struct etcd_client *c, int64_t id, int64_t *ttl_s);

/* One change a watch saw. */
struct etcd_event {
	bool is_delete;
	struct etcd_kv kv; /* a delete carries the key and mod_revision only */
};

enum etcd_watch_status {
	ETCD_WATCH_EVENTS,    /* events, in revision order */
	ETCD_WATCH_COMPACTED, /* the start revision was compacted: revision is
				 the oldest still kept. The watch has stopped;
				 re-read and etcd_watch_resume() */
	ETCD_WATCH_DOWN,      /* the stream broke; the watch reconnects by
				 itself (next endpoint) from the revision after
				 the last event, and reports EVENTS again */
};

/*
 * Called on the base's thread. events (n of them, valid during the call
 * only) for ETCD_WATCH_EVENTS; revision: the last event's, or for
 * ETCD_WATCH_COMPACTED the compact revision. The callback may call
 * etcd_watch_resume() but not etcd_watch_free() on its own watch.
 */
typedef void (*etcd_watch_fn)(void *ctx, enum etcd_watch_status status,
			      const struct etcd_event *events, size_t n, int64_t revision);

struct etcd_watch;

/*
 * Watches [key, range_end) from start_revision (0: from now) on base. The
 * key and range are copied. Returns 0 (the stream is being opened) or a
 * negative code. Caller frees with etcd_watch_free() (accepts NULL) before
 * the client and the base.
 */
int etcd_watch_new(struct etcd_client *c, struct event_base *base, const void *key, size_t key_len,
		   const void *range_end, size_t range_end_len, int64_t start_revision,
		   etcd_watch_fn fn, void *ctx, struct etcd_watch **out);
/* Restarts the watch from start_revision (after COMPACTED, or to skip ahead). */
int etcd_watch_resume(struct etcd_watch *w, int64_t start_revision);
void etcd_watch_free(struct etcd_watch *w);

#endif
