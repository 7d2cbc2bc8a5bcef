/*
 * metrics_http.h - the `GET /metrics` endpoint: libevent's HTTP server on
 * the daemon's event loop, rendering a metric registry the loop owns.
 *
 * Read-only (GET and HEAD; anything else gets 405), small bounded requests,
 * no TLS: it can change no state (the gRPC API, which can, has TLS).
 * Other read-only pages (the status page, daemon/status/) hang on the same
 * listener through mh_route(); every other path answers 404.
 *
 * Thread-safety: loop thread only.
 */
#ifndef OCSD_METRICS_HTTP_H
#define OCSD_METRICS_HTTP_H

#include <stddef.h>

struct evbuffer;
struct event_base;
struct mx_registry;
struct mh_server;

/*
 * A routed path's handler: appends the reply's body to out and sets
 * *content_type (a static string). 0, or a negative errno-style code (the
 * client then gets 500). Runs on the loop thread for GET and HEAD only.
 */
typedef int (*mh_handler)(void *ctx, struct evbuffer *out, const char **content_type);

/*
 * Listens on `listen` ("HOST:PORT", "[V6]:PORT"; port 0 picks a free one)
 * and serves reg. Before each scrape refresh(ctx) runs on the loop so that
 * gauges reflect the current state (refresh may be NULL). Returns NULL with
 * a message in err on failure. Caller stops with mh_stop() (accepts NULL).
 */
struct mh_server *mh_start(struct event_base *base, const char *listen, struct mx_registry *reg,
			   void (*refresh)(void *ctx), void *ctx, char *err, size_t err_len);
void mh_stop(struct mh_server *srv);
/*
 * Serves path (exact match, e.g. "/state.json"; not "/metrics") with
 * handler(ctx) from now on. Routed replies carry the security headers
 * (Content-Security-Policy allowing only 'self', X-Content-Type-Options
 * nosniff, Cache-Control no-store). 0, -EEXIST, -ENOSPC past
 * MH_MAX_ROUTES or -EINVAL.
 */
#define MH_MAX_ROUTES 8
int mh_route(struct mh_server *srv, const char *path, mh_handler handler, void *ctx);
/* The port actually bound. */
int mh_port(const struct mh_server *srv);

/* Splits "HOST:PORT" / "[V6]:PORT" into host (size host_len) and port. 0 or -EINVAL. */
int mh_parse_listen(const char *listen, char *host, size_t host_len, int *port);

#endif
