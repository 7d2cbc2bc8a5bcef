/*
 * ocsctl_servers.c - ocsctl's --server list: finds a replica that answers
 * and follows a follower's redirect to the leader (see ocsctl_servers.h).
 *
 * One call, as a loop over attempts:
 *
 *   target = the current server if connected, else the pending redirect
 *            target, else the next listed server not tried in this call
 *   connect (if needed)  -- fails --> trail "ADDR: cannot reach it: .."
 *   call                 -- OK --> done (this server stays current)
 *                        -- connection lost --> trail, next target
 *                        -- "not the leader; leader is X" --> trail;
 *                              X new and hops left: X is the pending target
 *                              X already tried: a loop, next listed server
 *                        -- any other answer --> that is the answer
 *
 * An address is tried at most once per call, so a call makes at most
 * listed + OCSCTL_SERVERS_MAX_HOPS attempts.
 */
#define _GNU_SOURCE /* vasprintf */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/grpc.h>

#include "nb.h"
#include "ocsctl_servers.h"

#define ADDR_MAX 256 /* longest address, listed or redirected to */

struct ocsctl_servers {
	struct nb_client_opts opts; /* target unused: each attempt sets its own */
	int call_timeout_ms;
	char *listed[OCSCTL_SERVERS_MAX]; /* owned copies */
	size_t n_listed;
	struct nb_client *client; /* connected to current, or NULL */
	char current[ADDR_MAX];	  /* the server in use, or last tried */
	/* this call's attempts */
	char tried[OCSCTL_SERVERS_MAX + OCSCTL_SERVERS_MAX_HOPS + 1][ADDR_MAX];
	size_t n_tried;
	char *trail; /* malloc'd lines, or NULL */
};

static void trail_add(struct ocsctl_servers *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void trail_add(struct ocsctl_servers *s, const char *fmt, ...)
{
	char *line = NULL, *next = NULL;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&line, fmt, ap) < 0)
		line = NULL;
	va_end(ap);
	if (!line)
		return; /* out of memory: a shorter story, the call goes on */
	if (asprintf(&next, "%s  %s\n", s->trail ? s->trail : "", line) < 0)
		next = NULL;
	free(line);
	if (next) {
		free(s->trail);
		s->trail = next;
	}
}

static void trail_reset(struct ocsctl_servers *s)
{
	free(s->trail);
	s->trail = NULL;
	s->n_tried = 0;
}

struct ocsctl_servers *ocsctl_servers_new(const char *list, const struct nb_client_opts *opts,
					  char *err, size_t err_len)
{
	struct ocsctl_servers *s = calloc(1, sizeof(*s));
	const char *p = list;

	if (!s) {
		snprintf(err, err_len, "out of memory");
		return NULL;
	}
	grpc_init(); /* one reference for all the clients made one after another */
	s->opts = *opts;
	s->call_timeout_ms = opts->timeout_ms;
	for (;;) {
		const char *end = strchr(p, ',');
		size_t n = end ? (size_t)(end - p) : strlen(p);

		while (n && (*p == ' ' || *p == '\t')) {
			p++;
			n--;
		}
		while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
			n--;
		if (n == 0 || n >= ADDR_MAX) {
			snprintf(err, err_len, "--server: %s address in '%s'",
				 n ? "an over-long" : "an empty", list);
			break;
		}
		if (s->n_listed == OCSCTL_SERVERS_MAX) {
			snprintf(err, err_len, "--server: more than %d addresses in '%s'",
				 OCSCTL_SERVERS_MAX, list);
			break;
		}
		s->listed[s->n_listed] = strndup(p, n);
		if (!s->listed[s->n_listed]) {
			snprintf(err, err_len, "out of memory");
			break;
		}
		s->n_listed++;
		if (!end)
			return s;
		p = end + 1;
	}
	ocsctl_servers_free(s);
	return NULL;
}

static void drop_client(struct ocsctl_servers *s)
{
	nb_client_free(s->client);
	s->client = NULL;
}

void ocsctl_servers_free(struct ocsctl_servers *s)
{
	if (!s)
		return;
	drop_client(s);
	for (size_t i = 0; i < s->n_listed; i++)
		free(s->listed[i]);
	free(s->trail);
	free(s);
	grpc_shutdown();
}

void ocsctl_servers_set_timeout(struct ocsctl_servers *s, int timeout_ms)
{
	s->call_timeout_ms = timeout_ms;
	if (s->client)
		nb_client_set_timeout(s->client, timeout_ms);
}

static bool was_tried(const struct ocsctl_servers *s, const char *addr)
{
	for (size_t i = 0; i < s->n_tried; i++)
		if (strcmp(s->tried[i], addr) == 0)
			return true;
	return false;
}

static void mark_tried(struct ocsctl_servers *s, const char *addr)
{
	if (!was_tried(s, addr) && s->n_tried < sizeof(s->tried) / sizeof(s->tried[0]))
		snprintf(s->tried[s->n_tried++], ADDR_MAX, "%s", addr);
}

/* The next listed server not tried in this call; NULL when none is left. */
static const char *next_listed(const struct ocsctl_servers *s)
{
	for (size_t i = 0; i < s->n_listed; i++)
		if (!was_tried(s, s->listed[i]))
			return s->listed[i];
	return NULL;
}

/*
 * Makes addr the current server, connected: 0, or -1 with st filled in
 * (unreachable, or a client that cannot be built: st->unreachable false).
 */
static int use(struct ocsctl_servers *s, const char *addr, struct nb_client_status *st)
{
	struct nb_client_opts o = s->opts;
	struct nb_client *c;

	memset(st, 0, sizeof(*st));
	drop_client(s);
	snprintf(s->current, sizeof(s->current), "%s", addr);
	o.target = addr;
	c = nb_client_new(&o, st->message, sizeof(st->message));
	if (!c) {
		st->code = NB_INVALID_ARGUMENT;
		return -1;
	}
	/* Connecting keeps the connect deadline; calls get theirs after. */
	if (nb_client_connect(c, st)) {
		nb_client_free(c);
		return -1;
	}
	nb_client_set_timeout(c, s->call_timeout_ms);
	s->client = c;
	return 0;
}

int ocsctl_servers_connect(struct ocsctl_servers *s, struct nb_client_status *st)
{
	trail_reset(s);
	for (size_t i = 0; i < s->n_listed; i++) {
		mark_tried(s, s->listed[i]);
		if (use(s, s->listed[i], st) == 0) {
			trail_reset(s);
			return 0;
		}
		if (!st->unreachable)
			return -1; /* the client options are wrong for every server */
		trail_add(s, "%s: %s", s->listed[i], st->message);
	}
	return -1;
}

/*
 * The leader a refusal names: "not the leader; leader is HOST:PORT" (with
 * or without a field in front) -> HOST:PORT in out. True when the answer
 * is such a redirect (out "" when it names no leader: "not the leader; no
 * leader yet"). Only that refusal: "not the leader any more: job X stays
 * accepted ..." is a leader deposed while it handled the call, whose
 * answer the operator must see.
 */
static bool redirect_target(const struct nb_client_status *st, char *out, size_t len)
{
	const char *p, *q;
	size_t n;

	out[0] = '\0';
	if (st->code != NB_UNAVAILABLE || st->unreachable)
		return false;
	p = strstr(st->message, "not the leader;");
	if (!p)
		return false;
	q = strstr(p, "leader is ");
	if (!q)
		return true;
	q += strlen("leader is ");
	n = strcspn(q, " \t;,)");
	while (n && q[n - 1] == '.')
		n--;
	if (n && n < len && memchr(q, ':', n))
		snprintf(out, len, "%.*s", (int)n, q);
	return true;
}

int ocsctl_servers_unary(struct ocsctl_servers *s, const char *path, const ProtobufCMessage *req,
			 const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
			 struct nb_client_status *st)
{
	char pending[ADDR_MAX] = "", via[ADDR_MAX] = "";
	struct nb_client_status first;
	bool all_unreachable = true, loop = false;
	int hops = 0;

	*resp = NULL;
	trail_reset(s);
	memset(&first, 0, sizeof(first));
	for (;;) {
		char leader[ADDR_MAX], from[ADDR_MAX + 32] = "";

		if (!s->client) {
			const char *addr = pending[0] ? pending : next_listed(s);

			if (!addr)
				break;
			if (pending[0])
				snprintf(from, sizeof(from), " (leader according to %s)", via);
			mark_tried(s, addr);
			if (use(s, addr, st)) {
				if (!st->unreachable)
					return -1;
				trail_add(s, "%s%s: cannot reach it: %s", addr, from, st->message);
				if (s->n_tried == 1)
					first = *st;
				pending[0] = '\0';
				continue;
			}
			pending[0] = '\0';
		} else {
			mark_tried(s, s->current);
		}
		if (nb_client_unary(s->client, path, req, resp_desc, resp, st) == 0) {
			trail_reset(s);
			return 0;
		}
		if (s->n_tried == 1)
			first = *st;
		if (st->unreachable) {
			trail_add(s, "%s%s: connection lost: %s", s->current, from, st->message);
			drop_client(s);
			continue;
		}
		if (!redirect_target(st, leader, sizeof(leader))) {
			trail_reset(s); /* this server took the call: its answer stands */
			return -1;
		}
		all_unreachable = false;
		if (!leader[0]) {
			trail_add(s, "%s%s: %s: %s", s->current, from, nb_code_name(st->code),
				  st->message);
		} else if (was_tried(s, leader)) {
			loop = true;
			trail_add(s, "%s%s: %s: %s: a redirect loop (%s was tried already)",
				  s->current, from, nb_code_name(st->code), st->message, leader);
		} else if (hops == OCSCTL_SERVERS_MAX_HOPS) {
			trail_add(s, "%s%s: %s: %s: not followed (%d redirects already)",
				  s->current, from, nb_code_name(st->code), st->message, hops);
		} else {
			trail_add(s, "%s%s: %s: %s", s->current, from, nb_code_name(st->code),
				  st->message);
			snprintf(pending, sizeof(pending), "%s", leader);
			snprintf(via, sizeof(via), "%s", s->current);
			hops++;
		}
		drop_client(s);
	}
	/* No server took the call. One attempt: its own status says it all,
	 * unless it named itself as the leader. */
	if (s->n_tried == 1 && !loop) {
		*st = first;
		trail_reset(s);
		return -1;
	}
	memset(st, 0, sizeof(*st));
	st->code = NB_UNAVAILABLE;
	st->unreachable = all_unreachable;
	snprintf(st->message, sizeof(st->message), "no server took the call (%zu tried)",
		 s->n_tried);
	return -1;
}

struct nb_client *ocsctl_servers_client(struct ocsctl_servers *s)
{
	return s->client;
}

const char *ocsctl_servers_current(const struct ocsctl_servers *s)
{
	return s->current;
}

size_t ocsctl_servers_listed(const struct ocsctl_servers *s)
{
	return s->n_listed;
}

const char *ocsctl_servers_trail(const struct ocsctl_servers *s)
{
	return s->trail ? s->trail : "";
}
