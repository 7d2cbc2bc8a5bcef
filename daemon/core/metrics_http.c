/*
 * metrics_http.c - implementation of metrics_http.h on evhttp.
 *
 * Out of descriptors: libevent's listener reports an accept() error to the
 * error callback and, level-triggered, would be called again at once for
 * the connection still waiting (a busy loop logging "Error from accept()
 * call"). on_accept_error() instead pauses the listener for a back-off that
 * grows from MH_BACKOFF_MIN_MS to MH_BACKOFF_MAX_MS while errors go on,
 * logs once per MH_LOG_INTERVAL_S with the count, and resumes it: the
 * endpoint serves again at most MH_BACKOFF_MAX_MS after descriptors are free.
 *
 * evhttp_add_header()'s result is not checked: it fails only when a header
 * cannot be allocated, and the reply then goes out without it.
 */
#include "metrics_http.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <netinet/in.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>

#include "log.h"
#include "metrics.h"

/* Requests are a request line and a few headers; nothing larger is needed. */
#define MH_MAX_HEADERS_BYTES 8192
#define MH_TIMEOUT_S	     10
/* A request body is never used; a small one is read so that any method is
 * answered 405 rather than 413. */
#define MH_MAX_BODY_BYTES 4096
#define MH_BACKOFF_MIN_MS 10
#define MH_BACKOFF_MAX_MS 250
#define MH_LOG_INTERVAL_S 10

struct mh_route {
	const char *path; /* static: the caller's */
	mh_handler handler;
	void *ctx;
};

struct mh_server {
	struct evhttp *http;
	struct mh_route routes[MH_MAX_ROUTES];
	int n_routes;
	struct evhttp_bound_socket *sock;
	struct mx_registry *reg;
	void (*refresh)(void *ctx);
	void *ctx;
	int port;
	struct event *resume; /* re-enables the listener after an accept error */
	int backoff_ms;
	time_t last_error_s, last_log_s;
	long errors; /* accept errors since the last log line */
	struct mh_server *next;
};

/*
 * libevent hands the listener's error callback the evhttp (evhttp sets
 * itself as the listener's argument), not our context: servers are found
 * by their evhttp in this list. Used on the loop thread only.
 */
static struct mh_server *servers;

static struct mh_server *server_of(const struct evhttp *http)
{
	for (struct mh_server *s = servers; s; s = s->next)
		if (s->http == http)
			return s;
	return NULL;
}

int mh_parse_listen(const char *listen, char *host, size_t host_len, int *port)
{
	const char *colon, *h = listen;
	size_t n;
	char *end;
	long p;

	if (!listen)
		return -EINVAL;
	if (*listen == '[') {
		const char *close = strchr(listen, ']');

		if (!close || close[1] != ':')
			return -EINVAL;
		h = listen + 1;
		n = (size_t)(close - h);
		colon = close + 1;
	} else {
		colon = strrchr(listen, ':');
		if (!colon || strchr(listen, ':') != colon)
			return -EINVAL;
		n = (size_t)(colon - listen);
	}
	if (n == 0 || n >= host_len)
		return -EINVAL;
	errno = 0;
	p = strtol(colon + 1, &end, 10);
	if (errno || *end || end == colon + 1 || p < 0 || p > 65535)
		return -EINVAL;
	memcpy(host, h, n);
	host[n] = '\0';
	*port = (int)p;
	return 0;
}

/* 405 with the Allow header RFC 9110 asks for (evhttp_send_error() would drop it). */
static void send_bad_method(struct evhttp_request *req)
{
	evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET, HEAD");
	evhttp_send_reply(req, HTTP_BADMETHOD, "Method Not Allowed", NULL);
}

static const struct mh_route *route_of(const struct mh_server *srv, const char *path)
{
	for (int i = 0; i < srv->n_routes; i++)
		if (strcmp(srv->routes[i].path, path) == 0)
			return &srv->routes[i];
	return NULL;
}

static void serve_route(struct evhttp_request *req, const struct mh_route *r)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	struct evbuffer *body = evbuffer_new();
	const char *type = "text/plain; charset=utf-8";

	if (!body || r->handler(r->ctx, body, &type) != 0) {
		if (body)
			evbuffer_free(body);
		evhttp_send_error(req, HTTP_INTERNAL, "cannot render the page");
		return;
	}
	evhttp_add_header(h, "Content-Type", type);
	evhttp_add_header(
		h, "Content-Security-Policy",
		"default-src 'self'; img-src 'self'; style-src 'self'; script-src 'self'; "
		"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
		"form-action 'none'");
	evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
	evhttp_add_header(h, "Cache-Control", "no-store");
	evhttp_send_reply(req, HTTP_OK, "OK", body);
	evbuffer_free(body);
}

static void on_request(struct evhttp_request *req, void *arg)
{
	struct mh_server *srv = arg;
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
	const struct mh_route *route = path ? route_of(srv, path) : NULL;
	struct evbuffer *body;
	char *text;
	size_t len;

	if (!route && (!path || strcmp(path, "/metrics") != 0)) {
		evhttp_send_error(req, HTTP_NOTFOUND, "not served here");
		return;
	}
	if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
		send_bad_method(req);
		return;
	}
	if (route) {
		serve_route(req, route);
		return;
	}
	if (srv->refresh)
		srv->refresh(srv->ctx);
	text = mx_render(srv->reg, &len);
	body = evbuffer_new();
	if (!text || !body || evbuffer_add(body, text, len) != 0) {
		free(text);
		if (body)
			evbuffer_free(body);
		evhttp_send_error(req, HTTP_INTERNAL, "out of memory");
		return;
	}
	free(text);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
			  "text/plain; version=0.0.4; charset=utf-8");
	evhttp_send_reply(req, HTTP_OK, "OK", body);
	evbuffer_free(body);
}

int mh_route(struct mh_server *srv, const char *path, mh_handler handler, void *ctx)
{
	if (!srv || !path || path[0] != '/' || !handler || strcmp(path, "/metrics") == 0)
		return -EINVAL;
	if (route_of(srv, path))
		return -EEXIST;
	if (srv->n_routes >= MH_MAX_ROUTES)
		return -ENOSPC;
	srv->routes[srv->n_routes++] = (struct mh_route){path, handler, ctx};
	return 0;
}

static void on_resume(evutil_socket_t fd, short what, void *arg)
{
	struct mh_server *srv = arg;

	evconnlistener_enable(evhttp_bound_socket_get_listener(srv->sock));
}

/* An accept() failed (EMFILE, ENFILE, ENOBUFS...): pause, then listen again. */
static void on_accept_error(struct evconnlistener *lev, void *arg)
{
	struct mh_server *srv = server_of(arg);
	int err = EVUTIL_SOCKET_ERROR();
	time_t now = time(NULL);
	struct timeval tv;

	if (!srv)
		return;
	srv->errors++;
	if (now - srv->last_error_s > 1)
		srv->backoff_ms = MH_BACKOFF_MIN_MS;
	else if (srv->backoff_ms < MH_BACKOFF_MAX_MS)
		srv->backoff_ms = srv->backoff_ms * 2 < MH_BACKOFF_MAX_MS ? srv->backoff_ms * 2
									  : MH_BACKOFF_MAX_MS;
	srv->last_error_s = now;
	if (now - srv->last_log_s >= MH_LOG_INTERVAL_S) {
		log_msg(LOG_WARNING,
			"metrics endpoint: %ld accept error(s), last: %s; pausing the listener "
			"%d ms at a time",
			srv->errors, evutil_socket_error_to_string(err), srv->backoff_ms);
		srv->last_log_s = now;
		srv->errors = 0;
	}
	evconnlistener_disable(lev);
	tv.tv_sec = 0;
	tv.tv_usec = srv->backoff_ms * 1000;
	if (event_add(srv->resume, &tv) != 0)
		evconnlistener_enable(lev); /* no timer: better busy than deaf */
}

struct mh_server *mh_start(struct event_base *base, const char *listen, struct mx_registry *reg,
			   void (*refresh)(void *ctx), void *ctx, char *err, size_t err_len)
{
	struct mh_server *srv = calloc(1, sizeof(*srv));
	struct sockaddr_storage ss;
	socklen_t ss_len = sizeof(ss);
	char host[256];
	int port;

	if (!srv) {
		snprintf(err, err_len, "out of memory");
		return NULL;
	}
	if (mh_parse_listen(listen, host, sizeof(host), &port) != 0) {
		snprintf(err, err_len, "metrics listen address '%s' is not HOST:PORT", listen);
		goto fail;
	}
	srv->reg = reg;
	srv->refresh = refresh;
	srv->ctx = ctx;
	srv->http = evhttp_new(base);
	if (!srv->http) {
		snprintf(err, err_len, "cannot create the HTTP server");
		goto fail;
	}
	evhttp_set_max_headers_size(srv->http, MH_MAX_HEADERS_BYTES);
	evhttp_set_max_body_size(srv->http, MH_MAX_BODY_BYTES);
	evhttp_set_timeout(srv->http, MH_TIMEOUT_S);
	evhttp_set_allowed_methods(srv->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST |
						      EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE);
	evhttp_set_gencb(srv->http, on_request, srv);
	srv->sock = evhttp_bind_socket_with_handle(srv->http, host, (ev_uint16_t)port);
	if (!srv->sock) {
		snprintf(err, err_len, "cannot listen on %s: %s", listen, strerror(errno));
		goto fail;
	}
	srv->resume = evtimer_new(base, on_resume, srv);
	if (!srv->resume) {
		snprintf(err, err_len, "out of memory");
		goto fail;
	}
	evconnlistener_set_error_cb(evhttp_bound_socket_get_listener(srv->sock), on_accept_error);
	srv->next = servers;
	servers = srv;
	if (getsockname(evhttp_bound_socket_get_fd(srv->sock), (struct sockaddr *)&ss, &ss_len) ==
	    0)
		srv->port = ss.ss_family == AF_INET6
				    ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
				    : ntohs(((struct sockaddr_in *)&ss)->sin_port);
	return srv;
fail:
	mh_stop(srv);
	return NULL;
}

void mh_stop(struct mh_server *srv)
{
	if (!srv)
		return;
	for (struct mh_server **p = &servers; *p; p = &(*p)->next)
		if (*p == srv) {
			*p = srv->next;
			break;
		}
	if (srv->resume)
		event_free(srv->resume);
	if (srv->http)
		evhttp_free(srv->http);
	free(srv);
}

int mh_port(const struct mh_server *srv)
{
	return srv->port;
}
