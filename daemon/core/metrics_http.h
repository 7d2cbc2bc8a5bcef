/*
 * metrics_http.h - the `GET /metrics` endpoint: libevent's HTTP server on
 * the daemon's event loop, rendering a metric registry the loop owns.
 *
 * Read-only (GET and HEAD; anything else gets 405), small bounded requests,
 * no TLS: it can change no state (the gRPC API, which can, has TLS).
 *
 * Thread-safety: loop thread only.
 */
#ifndef OCSD_METRICS_HTTP_H
#define OCSD_METRICS_HTTP_H

#include <stddef.h>

struct event_base;
struct mx_registry;
struct mh_server;

/*
 * Listens on `listen` ("HOST:PORT", "[V6]:PORT"; port 0 picks a free one)
 * and serves reg. Before each scrape refresh(ctx) runs on the loop so that
 * gauges reflect the current state (refresh may be NULL). Returns NULL with
 * a message in err on failure. Caller stops with mh_stop() (accepts NULL).
 */
struct mh_server *mh_start(struct event_base *base, const char *listen, struct mx_registry *reg,
			   void (*refresh)(void *ctx), void *ctx, char *err, size_t err_len);
void mh_stop(struct mh_server *srv);
/* The port actually bound. */
int mh_port(const struct mh_server *srv);

/* Splits "HOST:PORT" / "[V6]:PORT" into host (size host_len) and port. 0 or -EINVAL. */
int mh_parse_listen(const char *listen, char *host, size_t host_len, int *port);

#endif
