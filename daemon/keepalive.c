/*
 * keepalive.c - implementation of keepalive.h.
 *
 * The timer (loop thread) starts a pass unless one runs. The pass (one
 * executor task) visits devices from where the previous pass stopped and
 * stops after a full round or once it spent interval_ms (connects to
 * unreachable devices may each take their RPC deadline), then posts
 * done_node. On the loop each visited device's finding goes to
 * events.device_read and the reconnects it made to the counter.
 *
 * Ownership: `found` (one entry per device) belongs to the pass from
 * pass_start until pass_done runs on the loop; `running` is the loop's.
 */
#include "keepalive.h"

#include <errno.h>
#include <event2/event.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "devices.h"
#include "exec.h"
#include "loop.h"
#include "metrics.h"
#include "sb_device.h"

struct ka_found {
	bool visited;
	int rc; /* sb_device_keepalive(): 0 up, -EBUSY in use, else down */
	uint64_t reconnects;
	char error[sizeof(((struct sb_error *)0)->message) + 32];
};

struct ka {
	struct ka_deps d;
	struct event *timer;
	struct mx_family *m_reconnects;
	struct exec_task task;
	struct loop_node done_node;
	struct ka_found *found; /* by device id */
	int n_devices;
	int next;	  /* the device the next pass starts with (pass only) */
	bool running;	  /* loop thread only */
	atomic_bool stop; /* shutting down: visit no further device */
};

static void pass_done(struct loop_node *n)
{
	struct ka *k = OCSD_CONTAINER_OF(n, struct ka, done_node);

	for (int i = 0; i < k->n_devices && !atomic_load(&k->stop); i++) {
		struct ka_found *f = &k->found[i];
		const char *name = dev_name(k->d.devs, i);

		if (!f->visited || f->rc == -EBUSY)
			continue;
		if (f->reconnects && k->m_reconnects)
			(void)mx_add(k->m_reconnects, &name, (double)f->reconnects);
		if (k->d.events.device_read)
			k->d.events.device_read(k->d.events.ctx, i, f->rc == 0, f->rc == 0,
						f->error);
	}
	k->running = false;
}

static void pass_run(struct exec_task *t)
{
	struct ka *k = OCSD_CONTAINER_OF(t, struct ka, task);
	int64_t until = sb_now_ms() + (int64_t)k->d.interval_ms;

	for (int seen = 0; seen < k->n_devices && !atomic_load(&k->stop); seen++) {
		int i = k->next;
		struct sb_device *h = dev_handle(k->d.devs, i, DEV_ROLE_TXN);
		struct ka_found *f = &k->found[i];
		struct sb_error err = {0};

		k->next = (k->next + 1) % k->n_devices;
		if (!h)
			continue;
		uint64_t before = sb_device_reconnects(h);

		f->rc = sb_device_keepalive(h, &err);
		f->visited = true;
		f->reconnects = sb_device_reconnects(h) - before;
		snprintf(f->error, sizeof(f->error), "%s%s%s", err.operation,
			 err.operation[0] ? ": " : "", f->rc ? err.message : "");
		if (f->rc == 0)
			f->error[0] = '\0';
		if (sb_now_ms() >= until)
			break;
	}
	loop_post(k->d.loop, &k->done_node, pass_done);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct ka *k = arg;

	(void)fd;
	(void)what;
	if (k->running || k->n_devices == 0)
		return;
	for (int i = 0; i < k->n_devices; i++)
		k->found[i] = (struct ka_found){0};
	k->running = true;
	k->task.run = pass_run;
	exec_submit(k->d.exec, &k->task);
}

struct ka *ka_new(const struct ka_deps *deps)
{
	static const char *const device_label[] = {"device", NULL};
	struct ka *k = calloc(1, sizeof(*k));
	struct timeval tv;

	if (!k)
		return NULL;
	k->d = *deps;
	k->n_devices = dev_count(deps->devs);
	k->found = calloc((size_t)k->n_devices + 1, sizeof(*k->found));
	if (deps->reg)
		k->m_reconnects = mx_counter(
			deps->reg, "ocsd_device_reconnects_total",
			"Sessions to a device opened again after its first one (transaction "
			"sessions replaced by the keepalive).",
			device_label);
	k->timer = event_new(loop_base(deps->loop), -1, EV_PERSIST, on_timer, k);
	tv = (struct timeval){(time_t)(deps->interval_ms / 1000),
			      (suseconds_t)(deps->interval_ms % 1000) * 1000};
	if (!k->found || !k->timer || event_add(k->timer, &tv) != 0) {
		ka_free(k);
		return NULL;
	}
	return k;
}

void ka_free(struct ka *k)
{
	if (!k)
		return;
	if (k->timer)
		event_free(k->timer);
	if (k->running) {
		/* The pass posts pass_done to the loop; run it here. */
		struct timespec ms = {0, 1000000};

		atomic_store(&k->stop, true);
		while (k->running) {
			nanosleep(&ms, NULL);
			loop_run_posted(k->d.loop);
		}
	}
	free(k->found);
	free(k);
}
