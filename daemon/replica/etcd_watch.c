/*
 * etcd_watch.c - the watches of etcd.h (etcd_watch_new): a stream of
 * changes to a key range on the caller's event base, reported through a
 * callback, that reconnects (next endpoint) from the revision after the last
 * event when it breaks and stops on a compaction until resumed. The
 * blocking requests are etcd.c's; this file uses its JSON and connection
 * helpers (etcd_internal.h) and nothing in etcd.c calls back here.
 *
 * A watch owns its connection on the caller's base. Every restart
 * (reconnect after a broken stream, resume after a compaction) goes through
 * a zero-delay timer, so that the old connection is freed outside its own
 * callbacks. Its answer is read with libevent's chunked callback and cut
 * into the gateway's messages as etcd.c cuts a streamed answer, each
 * bounded by max_event_bytes.
 */
#include "etcd.h"
#include "etcd_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <jansson.h>

/* A watch stream is re-opened after this long without a byte (a silent peer). */
#define ETCD_WATCH_IDLE_S 60
/* Delay before a broken watch reconnects (to the next endpoint). */
#define ETCD_WATCH_RETRY_MS 200

struct etcd_watch {
	struct etcd_client *c;
	struct event_base *base;
	uint8_t *key, *range_end;
	size_t key_len, range_end_len;
	int64_t next_rev; /* where a (re)opened stream starts; 0: now */
	etcd_watch_fn fn;
	void *ctx;
	size_t ep;
	struct evhttp_connection *conn;
	struct evbuffer *pending;
	struct event *restart; /* zero-delay or backoff timer */
	bool stopped;	       /* after COMPACTED, until etcd_watch_resume */
	bool broken;	       /* the stream ended: reconnect on the next endpoint */
};

static void watch_schedule(struct etcd_watch *w, int delay_ms)
{
	struct timeval tv = {delay_ms / 1000, (delay_ms % 1000) * 1000};

	evtimer_add(w->restart, &tv);
}

static void watch_broken(struct etcd_watch *w)
{
	if (w->broken || w->stopped || evtimer_pending(w->restart, NULL))
		return;
	w->broken = true;
	w->fn(w->ctx, ETCD_WATCH_DOWN, NULL, 0, w->next_rev);
	watch_schedule(w, ETCD_WATCH_RETRY_MS);
}

static void watch_events(struct etcd_watch *w, const json_t *events)
{
	size_t n = json_array_size(events), got = 0;
	struct etcd_event *evs = n ? calloc(n, sizeof(*evs)) : NULL;

	if (n && !evs) {
		watch_broken(w); /* out of memory: re-read these events later */
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const json_t *e = json_array_get(events, i);

		evs[got].is_delete =
			json_is_string(json_object_get(e, "type")) &&
			strcmp(json_string_value(json_object_get(e, "type")), "DELETE") == 0;
		if (etcd_kv_from_json(json_object_get(e, "kv"), &evs[got].kv) != 0)
			break;
		got++;
	}
	if (got < n) {
		for (size_t i = 0; i < got; i++)
			etcd_kv_clear(&evs[i].kv);
		free(evs);
		watch_broken(w);
		return;
	}
	if (n) {
		w->next_rev = evs[n - 1].kv.mod_revision + 1;
		w->fn(w->ctx, ETCD_WATCH_EVENTS, evs, n, evs[n - 1].kv.mod_revision);
	}
	for (size_t i = 0; i < n; i++)
		etcd_kv_clear(&evs[i].kv);
	free(evs);
}

static void watch_message(struct etcd_watch *w, const json_t *m)
{
	const json_t *r = json_object_get(m, "result");
	int64_t compact;

	if (!json_is_object(r)) {
		watch_broken(w);
		return;
	}
	compact = etcd_get_i64(r, "compact_revision");
	if (json_is_true(json_object_get(r, "created")) && w->next_rev == 0)
		w->next_rev = etcd_header_revision(r) + 1;
	if (compact > 0) {
		w->stopped = true;
		w->fn(w->ctx, ETCD_WATCH_COMPACTED, NULL, 0, compact);
		if (!w->stopped) /* resumed from the callback: restart runs */
			return;
		watch_schedule(w, 0); /* frees the canceled stream */
		return;
	}
	if (json_is_true(json_object_get(r, "canceled"))) {
		watch_broken(w);
		return;
	}
	watch_events(w, json_object_get(r, "events"));
}

static void watch_chunk(struct evhttp_request *req, void *arg)
{
	struct etcd_watch *w = arg;

	/* a restart is due (broken, compacted, resumed): this stream is done */
	if (w->broken || w->stopped || evtimer_pending(w->restart, NULL))
		return;
	evbuffer_add_buffer(w->pending, evhttp_request_get_input_buffer(req));
	for (;;) {
		json_t *m;
		int rc = etcd_take_message(w->pending, w->c->max_event_bytes, &m);

		if (rc) {
			watch_broken(w);
			return;
		}
		if (!m)
			return;
		watch_message(w, m);
		json_decref(m);
		if (w->broken || w->stopped || evtimer_pending(w->restart, NULL))
			return;
	}
}

static void watch_done(struct evhttp_request *req, void *arg)
{
	struct etcd_watch *w = arg;

	(void)req;
	watch_broken(w);
}

static int watch_open(struct etcd_watch *w)
{
	const struct etcd_endpoint *ep = &w->c->eps[w->ep];
	json_t *body = json_object(), *create = json_object();
	struct evhttp_request *req;
	struct timeval idle = {ETCD_WATCH_IDLE_S, 0};
	char *text = NULL;
	int rc = body && create ? etcd_range_body(create, w->key, w->key_len, w->range_end,
						  w->range_end_len)
				: -ENOMEM;

	if (rc == 0 && w->next_rev > 0)
		rc = etcd_set_i64(create, "start_revision", w->next_rev);
	if (rc == 0 && json_object_set_new(body, "create_request", create) != 0)
		rc = -ENOMEM;
	create = NULL;
	if (rc == 0 && !(text = json_dumps(body, JSON_COMPACT)))
		rc = -ENOMEM;
	json_decref(body);
	json_decref(create);
	if (rc)
		return rc;
	w->conn = etcd_conn_new(w->c, w->base, ep);
	req = w->conn ? evhttp_request_new(watch_done, w) : NULL;
	if (!req) {
		free(text);
		return -ENOMEM;
	}
	evhttp_connection_set_timeout_tv(w->conn, &idle);
	evhttp_request_set_chunked_cb(req, watch_chunk);
	etcd_request_body(req, ep, text);
	free(text);
	evbuffer_drain(w->pending, evbuffer_get_length(w->pending));
	w->broken = false;
	if (evhttp_make_request(w->conn, req, EVHTTP_REQ_POST, "/v3/watch") != 0)
		return -EIO;
	return 0;
}

static void watch_restart(evutil_socket_t fd, short what, void *arg)
{
	struct etcd_watch *w = arg;

	(void)fd;
	(void)what;
	if (w->conn)
		evhttp_connection_free(w->conn);
	w->conn = NULL;
	if (w->stopped)
		return;
	if (w->broken)
		w->ep = (w->ep + 1) % w->c->n_eps;
	if (watch_open(w) != 0) {
		w->broken = false;
		watch_broken(w);
	}
}

int etcd_watch_new(struct etcd_client *c, struct event_base *base, const void *key, size_t key_len,
		   const void *range_end, size_t range_end_len, int64_t start_revision,
		   etcd_watch_fn fn, void *ctx, struct etcd_watch **out)
{
	struct etcd_watch *w = calloc(1, sizeof(*w));

	*out = NULL;
	if (!w)
		return -ENOMEM;
	w->c = c;
	w->base = base;
	w->fn = fn;
	w->ctx = ctx;
	w->ep = c->cur;
	w->next_rev = start_revision;
	w->key = malloc(key_len ? key_len : 1);
	w->key_len = key_len;
	if (range_end) {
		w->range_end = malloc(range_end_len ? range_end_len : 1);
		w->range_end_len = range_end_len;
	}
	w->pending = evbuffer_new();
	w->restart = evtimer_new(base, watch_restart, w);
	if (!w->key || (range_end && !w->range_end) || !w->pending || !w->restart) {
		etcd_watch_free(w);
		return -ENOMEM;
	}
	memcpy(w->key, key, key_len);
	if (range_end)
		memcpy(w->range_end, range_end, range_end_len);
	watch_schedule(w, 0);
	*out = w;
	return 0;
}

int etcd_watch_resume(struct etcd_watch *w, int64_t start_revision)
{
	w->next_rev = start_revision;
	w->stopped = false;
	w->broken = false;
	watch_schedule(w, 0);
	return 0;
}

void etcd_watch_free(struct etcd_watch *w)
{
	if (!w)
		return;
	if (w->restart)
		event_free(w->restart);
	if (w->conn)
		evhttp_connection_free(w->conn);
	if (w->pending)
		evbuffer_free(w->pending);
	free(w->key);
	free(w->range_end);
	free(w);
}
