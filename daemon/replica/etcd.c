/*
 * etcd.c - the etcd v3 JSON gateway client of etcd.h.
 *
 * A blocking call builds the gateway's JSON (keys and values in base64,
 * 64-bit numbers as strings, which the gateway accepts and uses itself),
 * then for each endpoint in turn: sends it over the client's one kept-alive
 * connection on the private base, runs that base until the answer or the
 * deadline timer, and maps the answer. Connections are only freed after
 * the base returned (never inside libevent's callbacks), and a connection
 * that failed or timed out is never reused: a TLS bufferevent cannot be
 * reconnected, and an HTTP/1.1 connection with a request in flight is in
 * an unknown state. A request on a reused connection that breaks before any
 * answer is sent once more on a fresh one (etcd closes idle connections).
 *
 * A streamed answer (lease keepalive, watch) is read with libevent's
 * chunked callback: the bytes are gathered and cut into the gateway's
 * messages, one JSON object each, as they complete; a message is bounded
 * by max_event_bytes.
 *
 * The watches, which live on the caller's base instead, are in
 * etcd_watch.c; what the two files share is etcd_internal.h.
 */
#include "etcd.h"
#include "etcd_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#define ETCD_DEFAULT_TIMEOUT_MS	  2000
#define ETCD_DEFAULT_MAX_RESPONSE (64u << 20)
#define ETCD_DEFAULT_MAX_EVENT	  (8u << 20)

static void set_error(struct etcd_client *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void set_error(struct etcd_client *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->error, sizeof(c->error), fmt, ap);
	va_end(ap);
}

const char *etcd_last_error(const struct etcd_client *c)
{
	return c->error;
}

void etcd_set_observer(struct etcd_client *c,
		       void (*fn)(void *ctx, const char *op, double seconds, int rc), void *ctx)
{
	c->observe = fn;
	c->observe_ctx = ctx;
}

/* ---- base64 and JSON helpers ---- */

static char *b64_encode(const void *data, size_t len)
{
	char *out = malloc(4 * ((len + 2) / 3) + 1);

	if (out)
		EVP_EncodeBlock((unsigned char *)out, data, (int)len);
	return out;
}

/* Decodes text into *out (caller frees; NUL-terminated for convenience). */
static int b64_decode(const char *text, uint8_t **out, size_t *len)
{
	size_t n = strlen(text);
	uint8_t *buf;
	int got;

	if (n % 4)
		return -EPROTO;
	buf = malloc(n / 4 * 3 + 1);
	if (!buf)
		return -ENOMEM;
	got = n ? EVP_DecodeBlock(buf, (const unsigned char *)text, (int)n) : 0;
	if (got < 0) {
		free(buf);
		return -EPROTO;
	}
	/* EVP_DecodeBlock counts the padding as zero bytes */
	if (n && text[n - 1] == '=')
		got--;
	if (n > 1 && text[n - 2] == '=')
		got--;
	buf[got] = 0;
	*out = buf;
	*len = (size_t)got;
	return 0;
}

static int set_b64(json_t *obj, const char *name, const void *data, size_t len)
{
	char *text = b64_encode(data, len);

	if (!text || json_object_set_new(obj, name, json_string(text))) {
		free(text);
		return -ENOMEM;
	}
	free(text);
	return 0;
}

int etcd_set_i64(json_t *obj, const char *name, int64_t v)
{
	char text[32];

	snprintf(text, sizeof(text), "%lld", (long long)v);
	return json_object_set_new(obj, name, json_string(text)) ? -ENOMEM : 0;
}

/* A 64-bit number the gateway sends as a string (or a plain number); 0 if absent. */
int64_t etcd_get_i64(const json_t *obj, const char *name)
{
	const json_t *v = json_object_get(obj, name);

	if (json_is_string(v))
		return strtoll(json_string_value(v), NULL, 10);
	if (json_is_integer(v))
		return (int64_t)json_integer_value(v);
	return 0;
}

int etcd_kv_from_json(const json_t *o, struct etcd_kv *kv)
{
	const json_t *k = json_object_get(o, "key"), *v = json_object_get(o, "value");
	int rc;

	memset(kv, 0, sizeof(*kv));
	if (!json_is_string(k))
		return -EPROTO;
	rc = b64_decode(json_string_value(k), &kv->key, &kv->key_len);
	if (rc == 0)
		rc = b64_decode(json_is_string(v) ? json_string_value(v) : "", &kv->value,
				&kv->value_len);
	if (rc) {
		free(kv->key);
		memset(kv, 0, sizeof(*kv));
		return rc;
	}
	kv->create_revision = etcd_get_i64(o, "create_revision");
	kv->mod_revision = etcd_get_i64(o, "mod_revision");
	kv->version = etcd_get_i64(o, "version");
	kv->lease = etcd_get_i64(o, "lease");
	return 0;
}

void etcd_kv_clear(struct etcd_kv *kv)
{
	free(kv->key);
	free(kv->value);
	memset(kv, 0, sizeof(*kv));
}

void etcd_kvs_clear(struct etcd_kvs *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++)
		etcd_kv_clear(&r->kvs[i]);
	free(r->kvs);
	memset(r, 0, sizeof(*r));
}

uint8_t *etcd_prefix_end(const void *prefix, size_t len, size_t *end_len)
{
	uint8_t *end = malloc(len ? len : 1);

	if (!end)
		return NULL;
	memcpy(end, prefix, len);
	/* the first key after every key that starts with prefix: the prefix
	 * with its last byte below 0xff incremented and the rest cut */
	for (size_t i = len; i-- > 0;) {
		if (end[i] < 0xff) {
			end[i]++;
			*end_len = i + 1;
			return end;
		}
	}
	end[0] = 0; /* all 0xff (or empty): to the end of the keyspace */
	*end_len = 1;
	return end;
}

/* ---- endpoints, TLS, connections ---- */

static int parse_endpoint(const char *text, struct etcd_endpoint *ep, char *err, size_t err_len)
{
	struct evhttp_uri *uri = evhttp_uri_parse(text);
	const char *scheme = uri ? evhttp_uri_get_scheme(uri) : NULL;
	const char *host = uri ? evhttp_uri_get_host(uri) : NULL;
	int port = uri ? evhttp_uri_get_port(uri) : -1;
	size_t n;

	if (!scheme || !host || !*host || port <= 0 || port > 65535 ||
	    (strcmp(scheme, "http") && strcmp(scheme, "https"))) {
		snprintf(err, err_len,
			 "--etcd-endpoints: '%s' is not http://HOST:PORT or https://HOST:PORT",
			 text);
		if (uri)
			evhttp_uri_free(uri);
		return -EINVAL;
	}
	ep->tls = strcmp(scheme, "https") == 0;
	ep->port = port;
	n = strlen(host);
	if (n > 2 && host[0] == '[' && host[n - 1] == ']')
		ep->host = strndup(host + 1, n - 2);
	else
		ep->host = strdup(host);
	evhttp_uri_free(uri);
	return ep->host ? 0 : -ENOMEM;
}

static int ssl_setup(struct etcd_client *c, const struct etcd_opts *o, char *err, size_t err_len)
{
	if (!o->ca_file) {
		snprintf(err, err_len, "--etcd-ca: required with https endpoints");
		return -EINVAL;
	}
	if (!o->cert_file != !o->key_file) {
		snprintf(err, err_len, "--etcd-cert and --etcd-key: give both or neither");
		return -EINVAL;
	}
	c->ssl = SSL_CTX_new(TLS_client_method());
	if (!c->ssl)
		return -ENOMEM;
	SSL_CTX_set_min_proto_version(c->ssl, TLS1_2_VERSION);
	SSL_CTX_set_verify(c->ssl, SSL_VERIFY_PEER, NULL);
	if (SSL_CTX_load_verify_locations(c->ssl, o->ca_file, NULL) != 1) {
		snprintf(err, err_len, "--etcd-ca: cannot load %s", o->ca_file);
		return -EINVAL;
	}
	if (o->cert_file && SSL_CTX_use_certificate_chain_file(c->ssl, o->cert_file) != 1) {
		snprintf(err, err_len, "--etcd-cert: cannot load %s", o->cert_file);
		return -EINVAL;
	}
	if (o->key_file &&
	    (SSL_CTX_use_PrivateKey_file(c->ssl, o->key_file, SSL_FILETYPE_PEM) != 1 ||
	     SSL_CTX_check_private_key(c->ssl) != 1)) {
		snprintf(err, err_len,
			 "--etcd-key: cannot load %s or it does not match --etcd-cert",
			 o->key_file);
		return -EINVAL;
	}
	return 0;
}

int etcd_client_new(const struct etcd_opts *opts, struct etcd_client **out, char *err,
		    size_t err_len)
{
	struct etcd_client *c = calloc(1, sizeof(*c));
	char *list = opts->endpoints ? strdup(opts->endpoints) : NULL;
	char *save = NULL;
	bool any_tls = false;
	int rc = 0;

	*out = NULL;
	if (!c || !list) {
		snprintf(err, err_len,
			 opts->endpoints ? "out of memory" : "--etcd-endpoints: missing");
		rc = opts->endpoints ? -ENOMEM : -EINVAL;
		goto fail;
	}
	for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		struct etcd_endpoint *eps = realloc(c->eps, (c->n_eps + 1) * sizeof(*eps));

		if (!eps) {
			rc = -ENOMEM;
			goto fail;
		}
		c->eps = eps;
		rc = parse_endpoint(tok, &c->eps[c->n_eps], err, err_len);
		if (rc)
			goto fail;
		any_tls |= c->eps[c->n_eps++].tls;
	}
	if (c->n_eps == 0) {
		snprintf(err, err_len, "--etcd-endpoints: no endpoint");
		rc = -EINVAL;
		goto fail;
	}
	if (any_tls && (rc = ssl_setup(c, opts, err, err_len)) != 0)
		goto fail;
	c->base = event_base_new();
	if (!c->base) {
		rc = -ENOMEM;
		goto fail;
	}
	c->timeout_ms = opts->timeout_ms > 0 ? opts->timeout_ms : ETCD_DEFAULT_TIMEOUT_MS;
	c->max_response_bytes =
		opts->max_response_bytes ? opts->max_response_bytes : ETCD_DEFAULT_MAX_RESPONSE;
	c->max_event_bytes = opts->max_event_bytes ? opts->max_event_bytes : ETCD_DEFAULT_MAX_EVENT;
	free(list);
	*out = c;
	return 0;
fail:
	free(list);
	etcd_client_free(c);
	return rc;
}

static void conn_drop(struct etcd_client *c)
{
	if (c->conn)
		evhttp_connection_free(c->conn);
	c->conn = NULL;
	c->conn_uses = 0;
}

void etcd_client_free(struct etcd_client *c)
{
	if (!c)
		return;
	conn_drop(c);
	for (size_t i = 0; i < c->n_eps; i++)
		free(c->eps[i].host);
	free(c->eps);
	if (c->ssl)
		SSL_CTX_free(c->ssl);
	if (c->base)
		event_base_free(c->base);
	free(c);
}

/* A new connection to ep on base (TLS with host or IP verification when https). */
struct evhttp_connection *etcd_conn_new(struct etcd_client *c, struct event_base *base,
					const struct etcd_endpoint *ep)
{
	struct bufferevent *bev = NULL;
	struct evhttp_connection *conn;

	if (ep->tls) {
		SSL *ssl = SSL_new(c->ssl);
		X509_VERIFY_PARAM *param = ssl ? SSL_get0_param(ssl) : NULL;
		unsigned char ip[16];
		bool is_ip = inet_pton(AF_INET, ep->host, ip) == 1 ||
			     inet_pton(AF_INET6, ep->host, ip) == 1;

		if (!ssl)
			return NULL;
		if ((is_ip ? X509_VERIFY_PARAM_set1_ip_asc(param, ep->host)
			   : X509_VERIFY_PARAM_set1_host(param, ep->host, 0)) != 1 ||
		    (!is_ip && SSL_set_tlsext_host_name(ssl, ep->host) != 1)) {
			SSL_free(ssl);
			return NULL;
		}
		/* takes ownership of ssl, even on failure */
		bev = bufferevent_openssl_socket_new(base, -1, ssl, BUFFEREVENT_SSL_CONNECTING,
						     BEV_OPT_CLOSE_ON_FREE);
		if (!bev)
			return NULL;
		bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	}
	conn = evhttp_connection_base_bufferevent_new(base, NULL, bev, ep->host,
						      (unsigned short)ep->port);
	if (!conn) {
		if (bev)
			bufferevent_free(bev);
		return NULL;
	}
	evhttp_connection_set_retries(conn, 0);
	return conn;
}

void etcd_request_body(struct evhttp_request *req, const struct etcd_endpoint *ep, const char *body)
{
	char host[300];

	snprintf(host, sizeof(host), strchr(ep->host, ':') ? "[%s]:%d" : "%s:%d", ep->host,
		 ep->port);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Host", host);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
			  "application/json");
	evbuffer_add(evhttp_request_get_output_buffer(req), body, strlen(body));
}

/*
 * The request goes out at once, its last partial segment included: with
 * Nagle's algorithm that segment waited for the gateway's delayed ACK of the
 * ones before (about 40 ms on a 120 KB body). The socket exists once
 * evhttp_make_request has started connecting or reuses the connection.
 */
static void nodelay(struct evhttp_connection *conn)
{
	int fd = bufferevent_getfd(evhttp_connection_get_bufferevent(conn)), on = 1;

	if (fd >= 0)
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
}

/* ---- one blocking request ---- */

struct call {
	struct etcd_client *c;
	bool done, timed_out, too_big, stream;
	int http_code; /* 0: no answer (transport failure) */
	struct evbuffer *body;
	json_t *message; /* stream: the first message */
};

/* The first complete JSON object at the start of buf, if any (removed from buf). */
int etcd_take_message(struct evbuffer *buf, size_t max, json_t **msg)
{
	size_t len, skip = 0;
	const char *data;
	json_error_t jerr;
	json_t *m;

	*msg = NULL;
	len = evbuffer_get_length(buf);
	data = (const char *)evbuffer_pullup(buf, -1);
	while (skip < len && strchr(" \t\r\n", data[skip]))
		skip++;
	evbuffer_drain(buf, skip);
	len -= skip;
	data += skip;
	if (len == 0)
		return 0;
	m = json_loadb(data, len, JSON_DISABLE_EOF_CHECK, &jerr);
	if (!m) {
		if (json_error_code(&jerr) == json_error_premature_end_of_input)
			return len > max ? -E2BIG : 0;
		return -EPROTO;
	}
	evbuffer_drain(buf, jerr.position);
	*msg = m;
	return 0;
}

static void call_chunk(struct evhttp_request *req, void *arg)
{
	struct call *call = arg;
	int rc;

	if (call->done)
		return;
	evbuffer_add_buffer(call->body, evhttp_request_get_input_buffer(req));
	if (!call->stream) {
		if (evbuffer_get_length(call->body) > call->c->max_response_bytes) {
			call->too_big = call->done = true;
			event_base_loopbreak(call->c->base);
		}
		return;
	}
	rc = etcd_take_message(call->body, call->c->max_event_bytes, &call->message);
	if (rc || call->message) {
		call->too_big = rc == -E2BIG;
		call->http_code = rc ? 0 : evhttp_request_get_response_code(req);
		call->done = true;
		event_base_loopbreak(call->c->base);
	}
}

static void call_done(struct evhttp_request *req, void *arg)
{
	struct call *call = arg;

	if (call->done)
		return;
	call->done = true;
	call->http_code = req ? evhttp_request_get_response_code(req) : 0;
	if (req)
		evbuffer_add_buffer(call->body, evhttp_request_get_input_buffer(req));
	event_base_loopbreak(call->c->base);
}

static void call_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct call *call = arg;

	(void)fd;
	(void)what;
	call->timed_out = call->done = true;
	event_base_loopbreak(call->c->base);
}

/* The errno-style code of a gateway error answer (its gRPC code), and its message. */
static int gateway_error(struct etcd_client *c, const struct etcd_endpoint *ep, const json_t *j,
			 int http_code)
{
	const json_t *e = json_object_get(j, "error");
	const char *msg = json_string_value(json_object_get(j, "message"));
	int64_t code = etcd_get_i64(j, "code");

	if (json_is_object(e)) { /* a streamed error: {"error": {"grpc_code", "message"}} */
		msg = json_string_value(json_object_get(e, "message"));
		code = etcd_get_i64(e, "grpc_code");
	} else if (!msg) {
		msg = json_string_value(e);
	}
	set_error(c, "etcd %s:%d: %s (HTTP %d)", ep->host, ep->port, msg ? msg : "error",
		  http_code);
	switch (code) {
	case 3: /* INVALID_ARGUMENT */
		return msg && strstr(msg, "too large") ? -E2BIG : -EINVAL;
	case 4: /* DEADLINE_EXCEEDED */
		return -ETIMEDOUT;
	case 5: /* NOT_FOUND */
		return -ENOENT;
	case 8: /* RESOURCE_EXHAUSTED */
		return -E2BIG;
	case 11: /* OUT_OF_RANGE: compacted */
		return -ERANGE;
	case 14: /* UNAVAILABLE: no leader, stopping; the next endpoint may serve */
		return -EAGAIN;
	default:
		return -EIO;
	}
}

/*
 * Sends body to path on endpoint i once. Returns 0 with *reply, -EAGAIN for
 * "try the next endpoint" (unreachable, broken, UNAVAILABLE), -ETIMEDOUT,
 * or the gateway's error.
 */
static int call_once(struct etcd_client *c, size_t i, const char *path, const char *body,
		     bool stream, json_t **reply)
{
	const struct etcd_endpoint *ep = &c->eps[i];
	struct call call = {.c = c, .stream = stream};
	struct evhttp_connection *conn;
	struct evhttp_request *req;
	struct event *timer;
	struct timeval tv = {c->timeout_ms / 1000, (c->timeout_ms % 1000) * 1000};
	json_error_t jerr;
	json_t *j;
	int rc;

	if (stream) {
		conn = etcd_conn_new(c, c->base, ep); /* a stream's connection is not reusable */
	} else {
		if (c->conn && c->conn_ep != i)
			conn_drop(c);
		if (!c->conn) {
			c->conn = etcd_conn_new(c, c->base, ep);
			c->conn_ep = i;
		}
		conn = c->conn;
	}
	call.body = evbuffer_new();
	timer = evtimer_new(c->base, call_timeout, &call);
	req = conn ? evhttp_request_new(call_done, &call) : NULL;
	if (!call.body || !timer || !req) {
		rc = -ENOMEM;
		set_error(c, "etcd: out of memory");
		if (req)
			evhttp_request_free(req);
		goto out;
	}
	evhttp_request_set_chunked_cb(req, call_chunk);
	etcd_request_body(req, ep, body);
	/* evhttp frees req, whatever happens, from here on */
	if (evhttp_make_request(conn, req, EVHTTP_REQ_POST, path) != 0) {
		set_error(c, "etcd %s:%d: cannot send", ep->host, ep->port);
		rc = -EAGAIN;
		goto out;
	}
	nodelay(conn);
	if (!stream)
		c->conn_uses++;
	evtimer_add(timer, &tv);
	while (!call.done)
		if (event_base_dispatch(c->base) < 0)
			break;
	if (!call.done || call.timed_out) {
		set_error(c, "etcd %s:%d: no answer within %d ms", ep->host, ep->port,
			  c->timeout_ms);
		rc = -ETIMEDOUT;
		goto out;
	}
	if (call.too_big) {
		set_error(c, "etcd %s:%d: answer larger than %zu bytes", ep->host, ep->port,
			  stream ? c->max_event_bytes : c->max_response_bytes);
		rc = -E2BIG;
		goto out;
	}
	if (call.http_code == 0) {
		set_error(c, "etcd %s:%d: cannot connect or connection lost", ep->host, ep->port);
		rc = -EAGAIN;
		goto out;
	}
	if (call.message) {
		j = call.message;
		call.message = NULL;
	} else {
		j = json_loadb((const char *)evbuffer_pullup(call.body, -1),
			       evbuffer_get_length(call.body), 0, &jerr);
	}
	if (!j || !json_is_object(j)) {
		set_error(c, "etcd %s:%d: answer (HTTP %d) is not JSON", ep->host, ep->port,
			  call.http_code);
		json_decref(j);
		rc = -EPROTO;
		goto out;
	}
	if (stream && json_is_object(json_object_get(j, "result"))) {
		json_t *r = json_incref(json_object_get(j, "result"));

		json_decref(j);
		j = r;
	}
	if (call.http_code != 200 || json_object_get(j, "error")) {
		rc = gateway_error(c, ep, j, call.http_code);
		json_decref(j);
		goto out;
	}
	*reply = j;
	rc = 0;
out:
	if (timer)
		event_free(timer);
	/* a stream, a failure or a timeout leave the connection unusable */
	if (stream) {
		if (conn)
			evhttp_connection_free(conn);
	} else if (rc == -EAGAIN || rc == -ETIMEDOUT || rc == -E2BIG || rc == -EPROTO ||
		   rc == -ENOMEM) {
		conn_drop(c);
	}
	json_decref(call.message);
	if (call.body)
		evbuffer_free(call.body);
	return rc;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * Posts the JSON body to path, on each endpoint in turn. Takes ownership of
 * body. On 0, *reply is the answer (caller decrefs).
 */
static int request(struct etcd_client *c, const char *op, const char *path, json_t *body,
		   bool stream, json_t **reply)
{
	double start = now_s();
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	bool timed_out = false;
	char why[sizeof(c->error)] = "";
	int rc = -ENOMEM;

	json_decref(body);
	*reply = NULL;
	if (!text) {
		set_error(c, "etcd: out of memory");
		goto out;
	}
	for (size_t k = 0; k < c->n_eps; k++) {
		size_t i = (c->cur + k) % c->n_eps;
		bool reused = !stream && c->conn && c->conn_ep == i && c->conn_uses > 0;

		rc = call_once(c, i, path, text, stream, reply);
		if (rc == -EAGAIN && reused) /* etcd may have closed the idle connection */
			rc = call_once(c, i, path, text, stream, reply);
		if (rc == 0)
			c->cur = i;
		timed_out |= rc == -ETIMEDOUT;
		if (rc != -EAGAIN && rc != -ETIMEDOUT)
			break;
		/* every endpoint's failure goes into the message, cut where it is full
		 * (appended by hand: gcc's fortified strncat and snprintf warn) */
		size_t len = strlen(why), n;

		if (len && sizeof(why) - len > 3) {
			memcpy(why + len, "; ", 2);
			len += 2;
		}
		n = strnlen(c->error, sizeof(why) - 1 - len);
		memcpy(why + len, c->error, n);
		why[len + n] = '\0';
	}
	if (rc == -EAGAIN || rc == -ETIMEDOUT) { /* no endpoint answered */
		rc = timed_out ? -ETIMEDOUT : -ECONNREFUSED;
		snprintf(c->error, sizeof(c->error), "%s", why);
	}
	if (rc == 0)
		c->error[0] = 0;
out:
	free(text);
	if (c->observe)
		c->observe(c->observe_ctx, op, now_s() - start, rc);
	return rc;
}

/* ---- KV ---- */

int etcd_range_body(json_t *o, const void *key, size_t key_len, const void *range_end,
		    size_t range_end_len)
{
	int rc = set_b64(o, "key", key, key_len);

	if (rc == 0 && range_end)
		rc = set_b64(o, "range_end", range_end, range_end_len);
	return rc;
}

static int kvs_from_json(const json_t *j, struct etcd_kvs *out)
{
	const json_t *arr = json_object_get(j, "kvs");
	size_t n = json_array_size(arr);

	memset(out, 0, sizeof(*out));
	out->revision = etcd_get_i64(json_object_get(j, "header"), "revision");
	out->more = json_is_true(json_object_get(j, "more"));
	if (n == 0)
		return 0;
	out->kvs = calloc(n, sizeof(*out->kvs));
	if (!out->kvs)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		int rc = etcd_kv_from_json(json_array_get(arr, i), &out->kvs[i]);

		if (rc) {
			etcd_kvs_clear(out);
			return rc;
		}
		out->n++;
	}
	return 0;
}

int etcd_range(struct etcd_client *c, const void *key, size_t key_len, const void *range_end,
	       size_t range_end_len, int64_t limit, int64_t revision, struct etcd_kvs *out)
{
	json_t *body = json_object(), *reply;
	int rc = body ? etcd_range_body(body, key, key_len, range_end, range_end_len) : -ENOMEM;

	memset(out, 0, sizeof(*out));
	if (rc == 0 && limit > 0)
		rc = etcd_set_i64(body, "limit", limit);
	if (rc == 0 && revision > 0)
		rc = etcd_set_i64(body, "revision", revision);
	if (rc) {
		json_decref(body);
		return rc;
	}
	rc = request(c, "range", "/v3/kv/range", body, false, &reply);
	if (rc == 0) {
		rc = kvs_from_json(reply, out);
		json_decref(reply);
	}
	return rc;
}

int64_t etcd_header_revision(const json_t *j)
{
	return etcd_get_i64(json_object_get(j, "header"), "revision");
}

int etcd_put(struct etcd_client *c, const void *key, size_t key_len, const void *value,
	     size_t value_len, int64_t lease, int64_t *revision)
{
	json_t *body = json_object(), *reply;
	int rc = body ? set_b64(body, "key", key, key_len) : -ENOMEM;

	if (rc == 0)
		rc = set_b64(body, "value", value, value_len);
	if (rc == 0 && lease)
		rc = etcd_set_i64(body, "lease", lease);
	if (rc) {
		json_decref(body);
		return rc;
	}
	rc = request(c, "put", "/v3/kv/put", body, false, &reply);
	if (rc == 0) {
		if (revision)
			*revision = etcd_header_revision(reply);
		json_decref(reply);
	}
	return rc;
}

int etcd_delete(struct etcd_client *c, const void *key, size_t key_len, const void *range_end,
		size_t range_end_len, int64_t *deleted)
{
	json_t *body = json_object(), *reply;
	int rc = body ? etcd_range_body(body, key, key_len, range_end, range_end_len) : -ENOMEM;

	if (rc) {
		json_decref(body);
		return rc;
	}
	rc = request(c, "delete", "/v3/kv/deleterange", body, false, &reply);
	if (rc == 0) {
		if (deleted)
			*deleted = etcd_get_i64(reply, "deleted");
		json_decref(reply);
	}
	return rc;
}

static json_t *cmp_json(const struct etcd_cmp *cmp)
{
	static const char *const targets[] = {"VERSION", "CREATE", "MOD", "VALUE"};
	static const char *const fields[] = {"version", "create_revision", "mod_revision"};
	static const char *const results[] = {"EQUAL", "NOT_EQUAL", "GREATER", "LESS"};
	json_t *o = json_object();
	int rc = o ? set_b64(o, "key", cmp->key, cmp->key_len) : -ENOMEM;

	if (rc == 0 && (json_object_set_new(o, "target", json_string(targets[cmp->target])) ||
			json_object_set_new(o, "result", json_string(results[cmp->result]))))
		rc = -ENOMEM;
	if (rc == 0)
		rc = cmp->target == ETCD_CMP_VALUE
			     ? set_b64(o, "value", cmp->value, cmp->value_len)
			     : etcd_set_i64(o, fields[cmp->target], cmp->number);
	if (rc) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *op_json(const struct etcd_op *op)
{
	json_t *inner = json_object(), *o = json_object();
	int rc = inner && o ? set_b64(inner, "key", op->key, op->key_len) : -ENOMEM;

	if (rc == 0 && op->kind == ETCD_OP_PUT) {
		rc = set_b64(inner, "value", op->value, op->value_len);
		if (rc == 0 && op->lease)
			rc = etcd_set_i64(inner, "lease", op->lease);
	} else if (rc == 0 && op->range_end) {
		rc = set_b64(inner, "range_end", op->range_end, op->range_end_len);
	}
	if (rc == 0 &&
	    json_object_set_new(o, op->kind == ETCD_OP_PUT ? "request_put" : "request_delete_range",
				inner) == 0)
		return o;
	json_decref(o);
	return NULL;
}

static int add_all(json_t *body, const char *name, const void *items, size_t n, bool cmps)
{
	json_t *arr = json_array();

	if (!arr || json_object_set_new(body, name, arr))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		json_t *o = cmps ? cmp_json((const struct etcd_cmp *)items + i)
				 : op_json((const struct etcd_op *)items + i);

		if (!o || json_array_append_new(arr, o))
			return -ENOMEM;
	}
	return 0;
}

int etcd_txn(struct etcd_client *c, const struct etcd_cmp *cmps, size_t n_cmps,
	     const struct etcd_op *success, size_t n_success, const struct etcd_op *failure,
	     size_t n_failure, bool *succeeded, int64_t *revision)
{
	json_t *body = json_object(), *reply;
	int rc = body ? add_all(body, "compare", cmps, n_cmps, true) : -ENOMEM;

	*succeeded = false;
	if (rc == 0)
		rc = add_all(body, "success", success, n_success, false);
	if (rc == 0)
		rc = add_all(body, "failure", failure, n_failure, false);
	if (rc) {
		json_decref(body);
		return rc;
	}
	rc = request(c, "txn", "/v3/kv/txn", body, false, &reply);
	if (rc == 0) {
		*succeeded = json_is_true(json_object_get(reply, "succeeded"));
		if (revision)
			*revision = etcd_header_revision(reply);
		json_decref(reply);
	}
	return rc;
}

int etcd_compact(struct etcd_client *c, int64_t revision)
{
	json_t *body = json_object(), *reply;
	int rc = body ? etcd_set_i64(body, "revision", revision) : -ENOMEM;

	if (rc == 0 && json_object_set_new(body, "physical", json_true()))
		rc = -ENOMEM;
	if (rc) {
		json_decref(body);
		return rc;
	}
	rc = request(c, "compact", "/v3/kv/compaction", body, false, &reply);
	json_decref(reply);
	return rc;
}

/* ---- leases ---- */

static int lease_call(struct etcd_client *c, const char *op, const char *path, int64_t id,
		      bool stream, json_t **reply)
{
	json_t *body = json_object();
	int rc = body ? etcd_set_i64(body, "ID", id) : -ENOMEM;

	if (rc) {
		json_decref(body);
		return rc;
	}
	return request(c, op, path, body, stream, reply);
}

int etcd_lease_grant(struct etcd_client *c, int64_t ttl_s, int64_t *id, int64_t *granted_ttl_s)
{
	json_t *body = json_object(), *reply;
	int rc = body ? etcd_set_i64(body, "TTL", ttl_s) : -ENOMEM;

	if (rc) {
		json_decref(body);
		return rc;
	}
	rc = request(c, "lease_grant", "/v3/lease/grant", body, false, &reply);
	if (rc == 0) {
		*id = etcd_get_i64(reply, "ID");
		if (granted_ttl_s)
			*granted_ttl_s = etcd_get_i64(reply, "TTL");
		json_decref(reply);
		if (*id == 0) {
			set_error(c, "etcd: lease grant answered without an ID");
			rc = -EPROTO;
		}
	}
	return rc;
}

int etcd_lease_keepalive(struct etcd_client *c, int64_t id, int64_t *ttl_s)
{
	json_t *reply;
	int rc = lease_call(c, "lease_keepalive", "/v3/lease/keepalive", id, true, &reply);

	if (rc == 0) {
		*ttl_s = etcd_get_i64(reply, "TTL");
		json_decref(reply);
		if (*ttl_s <= 0) { /* etcd answers an expired lease with no TTL */
			set_error(c, "etcd: lease %lld expired", (long long)id);
			rc = -ENOENT;
		}
	}
	return rc;
}

int etcd_lease_revoke(struct etcd_client *c, int64_t id)
{
	json_t *reply;
	int rc = lease_call(c, "lease_revoke", "/v3/lease/revoke", id, false, &reply);

	json_decref(reply);
	return rc;
}

int etcd_lease_ttl(struct etcd_client *c, int64_t id, int64_t *ttl_s)
{
	json_t *reply;
	int rc = lease_call(c, "lease_ttl", "/v3/lease/timetolive", id, false, &reply);

	if (rc == 0) {
		*ttl_s = etcd_get_i64(reply, "TTL");
		json_decref(reply);
		if (*ttl_s < 0) { /* -1: expired or unknown */
			set_error(c, "etcd: lease %lld expired", (long long)id);
			rc = -ENOENT;
		}
	}
	return rc;
}
