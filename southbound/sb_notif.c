/*
 * sb_notif.c - the notification listener (API and threading in sb_notif.h).
 *
 * One thread runs listen_loop(): it keeps a device handle (sb_device.h) per
 * source, each with its own NETCONF session, and poll()s the sessions'
 * sockets together with a wake-up pipe. A readable socket is drained with
 * nc_recv_notif(timeout 0) until nothing complete is left (libssh may hold
 * several notifications read in one go). Sessions without a socket to poll
 * (TLS: libnetconf2 keeps the socket to itself) are tried on every tick
 * (TICK_MS). A source without a session is connected when its backoff
 * allows (sb_device_connect() keeps the backoff), then subscribed, at most
 * CONNECTS_PER_PASS of them between two polls so that a mass (re)connect
 * does not hold back the notifications of sessions already up; a connect
 * blocks this thread for at most the device's rpc_timeout_ms (a refused
 * connection on a live host returns at once).
 */
#define _GNU_SOURCE /* pipe2 */
#include "sb_notif.h"

#include "sb_model.h"

#include <errno.h>
#include <fcntl.h>
#include <libyang/libyang.h>
#include <nc_client.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TICK_MS 20 /* reconnects and fd-less sessions are looked at this often */
/* Connection attempts between two polls: at start, or after a devsim restart,
 * hundreds of sources connect (one SSH handshake each, about 10-25 ms); the
 * subscribed ones must not wait for all of them before their notifications
 * are read. */
#define CONNECTS_PER_PASS 4

struct source {
	struct sb_device *dev; /* owned: the listener's own session to the device */
	size_t id;	       /* the caller's number */
	bool subscribed;
};

struct sb_listener {
	struct sb_driver *drv; /* borrowed */
	sb_notif_fn fn;
	void *arg;
	struct source *src;
	size_t n, cap;
	pthread_t thread;
	bool started;
	atomic_bool stop;
	int wake[2]; /* pipe: free() writes to end the poll */
};

static int64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int sb_listener_new(struct sb_driver *drv, sb_notif_fn fn, void *arg, struct sb_listener **out)
{
	if (!drv || !fn)
		return -EINVAL;
	struct sb_listener *l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	if (pipe2(l->wake, O_CLOEXEC | O_NONBLOCK)) {
		int rc = -errno;
		free(l);
		return rc;
	}
	l->drv = drv;
	l->fn = fn;
	l->arg = arg;
	*out = l;
	return 0;
}

int sb_listener_add(struct sb_listener *l, const struct sb_device_config *cfg, size_t source)
{
	if (l->started)
		return -EBUSY;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		struct source *g = realloc(l->src, cap * sizeof(*g));
		if (!g)
			return -ENOMEM;
		l->src = g;
		l->cap = cap;
	}
	struct source *s = &l->src[l->n];
	*s = (struct source){.id = source};
	int rc = sb_device_new(l->drv, cfg, &s->dev);
	if (rc)
		return rc;
	l->n++;
	return 0;
}

static void deliver(struct sb_listener *l, struct source *s, enum sb_notif_kind kind)
{
	struct sb_notif n = {.source = s->id, .kind = kind, .received_us = now_us()};
	l->fn(l->arg, &n);
}

static const char *leaf_value(const struct lyd_node *parent, const char *name)
{
	for (const struct lyd_node *c = lyd_child(parent); c; c = c->next)
		if (!strcmp(LYD_NAME(c), name))
			return lyd_get_value(c);
	return NULL;
}

/* sb_leaf_fn over a notification's libyang data. */
static const char *notif_leaf(const void *op, const char *name)
{
	return leaf_value(op, name);
}

/* Parses one received notification (op: its data) by the device's model and delivers it. */
static void deliver_notification(struct sb_listener *l, struct source *s, const struct lyd_node *op)
{
	struct sb_notif n = {.source = s->id, .kind = SB_NOTIF_OTHER, .name = LYD_NAME(op)};
	sb_model(sb_device_model(s->dev))
		->notif(n.name, notif_leaf, op, sb_device_ports(s->dev), &n);
	n.received_us = now_us();
	l->fn(l->arg, &n);
}

static void lose(struct sb_listener *l, struct source *s)
{
	sb_device_disconnect(s->dev);
	if (s->subscribed) {
		s->subscribed = false;
		deliver(l, s, SB_NOTIF_LOST);
	}
}

/* Receives everything complete on s's session; drops the session when it ended. */
static void drain(struct sb_listener *l, struct source *s)
{
	for (;;) {
		struct nc_session *ns = sb_device_nc_session(s->dev);
		if (!ns || nc_session_get_status(ns) != NC_STATUS_RUNNING)
			return lose(l, s);
		struct lyd_node *envp = NULL, *op = NULL;
		NC_MSG_TYPE m = nc_recv_notif(ns, 0, &envp, &op);
		if (m == NC_MSG_NOTIF && op)
			deliver_notification(l, s, op);
		lyd_free_all(envp);
		lyd_free_all(op);
		if (m == NC_MSG_WOULDBLOCK)
			return;
		if (m == NC_MSG_ERROR)
			return lose(l, s);
	}
}

/* Connects and subscribes s when its backoff allows. Returns whether it tried. */
static bool try_subscribe(struct sb_listener *l, struct source *s)
{
	struct sb_error err = {0};
	int rc = sb_device_connect(s->dev, &err);
	if (rc)
		return rc != -EAGAIN; /* -EAGAIN: still backing off, nothing was tried */
	if (sb_device_subscribe(s->dev, &err)) {
		/* a device that refuses the subscription is retried like a lost one */
		sb_device_disconnect(s->dev);
		return true;
	}
	s->subscribed = true;
	deliver(l, s, SB_NOTIF_SUBSCRIBED);
	return true;
}

static void *listen_loop(void *arg)
{
	struct sb_listener *l = arg;
	struct pollfd *pfd = calloc(l->n + 1, sizeof(*pfd));
	size_t *who = calloc(l->n + 1, sizeof(*who));
	if (!pfd || !who) {
		free(pfd);
		free(who);
		return NULL;
	}
	while (!atomic_load(&l->stop)) {
		size_t np = 0, attempts = 0;
		bool fdless = false, more = false;
		pfd[np++] = (struct pollfd){.fd = l->wake[0], .events = POLLIN};
		for (size_t i = 0; i < l->n && !atomic_load(&l->stop); i++) {
			struct source *s = &l->src[i];
			if (!s->subscribed && attempts < CONNECTS_PER_PASS)
				attempts += try_subscribe(l, s);
			else if (!s->subscribed)
				more = true; /* its turn comes after this poll */
			if (!s->subscribed)
				continue;
			int fd = sb_device_poll_fd(s->dev);
			if (fd < 0) {
				fdless = true;
				continue;
			}
			who[np] = i;
			pfd[np++] = (struct pollfd){.fd = fd, .events = POLLIN};
		}
		bool waiting = false;
		for (size_t i = 0; i < l->n; i++)
			waiting |= !l->src[i].subscribed;
		int rc = poll(pfd, np, more ? 0 : (waiting || fdless) ? TICK_MS : -1);
		if (rc < 0 && errno != EINTR)
			break;
		for (size_t k = 1; rc > 0 && k < np; k++)
			if (pfd[k].revents)
				drain(l, &l->src[who[k]]);
		for (size_t i = 0; fdless && i < l->n; i++)
			if (l->src[i].subscribed && sb_device_poll_fd(l->src[i].dev) < 0)
				drain(l, &l->src[i]);
	}
	free(pfd);
	free(who);
	nc_thread_destroy(); /* libnetconf2's per-thread client settings */
	return NULL;
}

int sb_listener_start(struct sb_listener *l)
{
	if (l->started)
		return -EALREADY;
	int rc = pthread_create(&l->thread, NULL, listen_loop, l);
	if (rc)
		return -rc;
	l->started = true;
	return 0;
}

void sb_listener_free(struct sb_listener *l)
{
	if (!l)
		return;
	if (l->started) {
		atomic_store(&l->stop, true);
		char c = 1;
		if (write(l->wake[1], &c, 1) < 0) {
			/* the pipe is full: a wake-up is pending already */
		}
		pthread_join(l->thread, NULL);
	}
	for (size_t i = 0; i < l->n; i++)
		sb_device_free(l->src[i].dev);
	free(l->src);
	close(l->wake[0]);
	close(l->wake[1]);
	free(l);
}
