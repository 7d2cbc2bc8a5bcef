/*
 * faults.c - implementation of faults.h. Every notification and every
 * read result reaches the loop in a message of its own (malloc'd on the
 * listener thread or the executor; a message that cannot be allocated is
 * logged: the fault is then caught by the read after the next
 * resubscription or by an operator's MarkNode).
 */
#include "faults.h"

#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "devices.h"
#include "executor.h"
#include "jobs.h"
#include "log.h"
#include "loop.h"
#include "sb_notif.h"

struct faults {
	struct flt_deps d;
	struct sb_listener *listener;
	bool stopped; /* messages still arriving are dropped */
	bool *up;     /* per node: its subscription is up */
	size_t n_up;
	int n_nodes;
};

struct flt_msg {
	struct loop_node node;
	struct exec_task task; /* reads only */
	struct faults *f;
	struct sb_notif n; /* name not kept */
	bool read_ok, read_faulty;
	char read_error[sizeof(((struct dev_readback *)0)->error)]; /* dev_read_bundles() error */
};

static void mark(struct faults *f, int node, int64_t received_us)
{
	struct err_info err = {0};
	const char *job = NULL;

	if (jm_mark_node(f->d.jm, node, true, "device", received_us, &job, &err) != 0)
		log_msg(LOG_ERR, "node %d reported a fault that could not be recorded: %s", node,
			err.message);
	else
		log_msg(LOG_WARNING, "node %d reported a fault%s%s", node,
			job ? "; repairing the ring of job " : "", job ? job : "");
}

static void on_read_done(struct loop_node *ln)
{
	struct flt_msg *m = OCSD_CONTAINER_OF(ln, struct flt_msg, node);

	if (m->f->stopped) {
		free(m);
		return;
	}
	/* what ListDevices reports until the next reconciliation pass reads the node */
	dev_note_read(m->f->d.devs, (int)m->n.source, m->read_ok, m->read_ok, m->read_error,
		      clk_wall_ms(NULL));
	if (m->read_ok && m->read_faulty)
		mark(m->f, (int)m->n.source, clk_mono_us(NULL));
	free(m);
}

/* Executor: reads the node's `faulty` state after a (re)subscription. */
static void read_node(struct exec_task *t)
{
	struct flt_msg *m = OCSD_CONTAINER_OF(t, struct flt_msg, task);
	struct dev_readback rb;

	(void)dev_read_bundles(m->f->d.devs, (int)m->n.source, DEV_ROLE_RECON, &rb);
	m->read_ok = rb.ok;
	m->read_faulty = rb.node_faulty;
	memcpy(m->read_error, rb.error, sizeof(m->read_error));
	dev_readback_clear(&rb);
	loop_post(m->f->d.loop, &m->node, on_read_done);
}

static void on_notif_loop(struct loop_node *ln)
{
	struct flt_msg *m = OCSD_CONTAINER_OF(ln, struct flt_msg, node);
	struct faults *f = m->f;

	if (f->stopped) {
		free(m);
		return;
	}
	switch (m->n.kind) {
	case SB_NOTIF_NODE_FAULT:
		if (!f->d.jm)
			break; /* not a ring domain */
		if (m->n.faulty)
			mark(f, (int)m->n.node, m->n.received_us);
		else
			log_msg(LOG_NOTICE,
				"node %u reports it is healthy again; it stays out of every "
				"plan until an operator marks it healthy (MarkNode)",
				m->n.node);
		break;
	case SB_NOTIF_PORT_STATE:
		if (f->d.port_state)
			f->d.port_state(f->d.port_ctx, (int)m->n.source, m->n.port, m->n.port_up,
					m->n.received_us);
		break;
	case SB_NOTIF_SUBSCRIBED:
		if ((int)m->n.source < f->n_nodes && !f->up[m->n.source]) {
			f->up[m->n.source] = true;
			f->n_up++;
		}
		if (f->d.port_state)
			break;			  /* reconciliation reads a rail OCS */
		exec_submit(f->d.exec, &m->task); /* frees m when its result is handled */
		return;
	case SB_NOTIF_LOST:
		if ((int)m->n.source < f->n_nodes && f->up[m->n.source]) {
			f->up[m->n.source] = false;
			f->n_up--;
		}
		if (!f->d.port_state)
			dev_note_read(f->d.devs, (int)m->n.source, false, false,
				      "notification session lost", clk_wall_ms(NULL));
		log_msg(LOG_WARNING, "%s %zu: notification session lost; resubscribing",
			f->d.port_state ? "device" : "node", m->n.source);
		break;
	default:
		break; /* loss-of-light: the node-fault of its peer says it all */
	}
	free(m);
}

/* Listener thread: copy and post; must not block. */
static void on_notif(void *arg, const struct sb_notif *n)
{
	struct faults *f = arg;
	struct flt_msg *m;

	if (n->kind == SB_NOTIF_OTHER || n->kind == SB_NOTIF_LOSS_OF_LIGHT)
		return;
	m = calloc(1, sizeof(*m));
	if (!m) {
		log_msg(LOG_ERR, "out of memory: a notification from node %zu was dropped",
			n->source);
		return;
	}
	m->f = f;
	m->n = *n;
	m->n.name = NULL;
	m->task.run = read_node;
	loop_post(f->d.loop, &m->node, on_notif_loop);
	/*
	 * A node's fault is the most urgent work ocsd has: give the core to the
	 * loop now, when it shares one with this thread, rather than after the
	 * notifications of the node's peers are parsed (issue 28 #5).
	 */
	if (n->kind == SB_NOTIF_NODE_FAULT && n->faulty)
		sched_yield();
}

int flt_start(const struct flt_deps *d, const struct sb_device_config *configs, int n,
	      struct faults **out)
{
	struct faults *f = calloc(1, sizeof(*f));
	int rc;

	*out = NULL;
	if (!f)
		return -ENOMEM;
	f->d = *d;
	f->n_nodes = n;
	f->up = calloc((size_t)n + 1, sizeof(*f->up));
	if (!f->up) {
		free(f);
		return -ENOMEM;
	}
	rc = sb_listener_new(d->driver, on_notif, f, &f->listener);
	for (int i = 0; rc == 0 && i < n; i++)
		rc = sb_listener_add(f->listener, &configs[i], (size_t)i);
	if (rc == 0)
		rc = sb_listener_start(f->listener);
	if (rc) {
		sb_listener_free(f->listener);
		free(f->up);
		free(f);
		return rc;
	}
	*out = f;
	return 0;
}

void flt_stop(struct faults *f)
{
	if (!f)
		return;
	sb_listener_free(f->listener);
	f->listener = NULL;
	f->stopped = true;
}

void flt_free(struct faults *f)
{
	if (!f)
		return;
	sb_listener_free(f->listener);
	free(f->up);
	free(f);
}

size_t flt_subscribed(const struct faults *f)
{
	return f ? f->n_up : 0;
}
