/*
 * metrics_http.c - implementation of metrics_http.h on evhttp.
 *
 * evhttp_add_header()'s result is not checked: it fails only when a header
 * cannot be allocated, and the reply then goes out without it.
 */
#include "metrics_http.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "metrics.h"

/* Requests are a request line and a few headers; nothing larger is needed. */
#define MH_MAX_HEADERS_BYTES 8192
#define MH_TIMEOUT_S	     10

struct mh_server {
	struct evhttp *http;
	struct evhttp_bound_socket *sock;
	struct mx_registry *reg;
	void (*refresh)(void *ctx);
	void *ctx;
	int port;
};

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

static void on_request(struct evhttp_request *req, void *arg)
{
	struct mh_server *srv = arg;
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
	struct evbuffer *body;
	char *text;
	size_t len;

	if (!path || strcmp(path, "/metrics") != 0) {
		evhttp_send_error(req, HTTP_NOTFOUND, "only /metrics is served here");
		return;
	}
	if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET, HEAD");
		evhttp_send_error(req, HTTP_BADMETHOD, NULL);
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
	evhttp_set_max_body_size(srv->http, 0);
	evhttp_set_timeout(srv->http, MH_TIMEOUT_S);
	evhttp_set_allowed_methods(srv->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST |
						      EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE);
	evhttp_set_gencb(srv->http, on_request, srv);
	srv->sock = evhttp_bind_socket_with_handle(srv->http, host, (ev_uint16_t)port);
	if (!srv->sock) {
		snprintf(err, err_len, "cannot listen on %s: %s", listen, strerror(errno));
		goto fail;
	}
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
	if (srv->http)
		evhttp_free(srv->http);
	free(srv);
}

int mh_port(const struct mh_server *srv)
{
	return srv->port;
}
