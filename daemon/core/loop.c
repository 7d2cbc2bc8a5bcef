/*
 * loop.c - implementation of loop.h: libevent base with pthread support,
 * an intrusive mutex-guarded FIFO of the callers' nodes and an eventfd as
 * the wake-up.
 *
 * Lock: `mu` guards head and tail. It is never held while a node's
 * callback runs, so callbacks may post further nodes.
 */
#include "loop.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/thread.h>

struct loop {
	struct event_base *base;
	struct event *wake_ev;
	int wake_fd;
	pthread_mutex_t mu;
	struct loop_node *head, *tail; /* guarded by mu */
};

static pthread_once_t threads_once = PTHREAD_ONCE_INIT;

static void enable_threads(void)
{
	evthread_use_pthreads();
}

/*
 * Takes the whole queue under the lock, then runs it in order without it.
 * Returns whether it ran anything. A node's next is read before its
 * callback runs: the callback may free or re-post the node.
 */
static bool run_queue(struct loop *loop)
{
	struct loop_node *n;

	pthread_mutex_lock(&loop->mu);
	n = loop->head;
	loop->head = loop->tail = NULL;
	pthread_mutex_unlock(&loop->mu);
	if (!n)
		return false;
	while (n) {
		struct loop_node *next = n->next;

		n->fn(n);
		n = next;
	}
	return true;
}

void loop_run_posted(struct loop *loop)
{
	run_queue(loop);
}

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
	uint64_t n;

	if (read(fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		return;
	loop_run_posted(arg);
}

struct loop *loop_new(void)
{
	struct loop *loop = calloc(1, sizeof(*loop));

	if (!loop)
		return NULL;
	pthread_once(&threads_once, enable_threads);
	pthread_mutex_init(&loop->mu, NULL);
	loop->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	loop->base = event_base_new();
	if (loop->wake_fd < 0 || !loop->base)
		goto fail;
	loop->wake_ev = event_new(loop->base, loop->wake_fd, EV_READ | EV_PERSIST, on_wake, loop);
	if (!loop->wake_ev || event_add(loop->wake_ev, NULL) != 0)
		goto fail;
	return loop;
fail:
	loop_free(loop);
	return NULL;
}

void loop_free(struct loop *loop)
{
	if (!loop)
		return;
	/* Callbacks run here may post again: run until nothing is left. */
	while (run_queue(loop))
		;
	if (loop->wake_ev)
		event_free(loop->wake_ev);
	if (loop->base)
		event_base_free(loop->base);
	if (loop->wake_fd >= 0)
		(void)close(loop->wake_fd); /* an eventfd: nothing to flush */
	pthread_mutex_destroy(&loop->mu);
	free(loop);
}

struct event_base *loop_base(struct loop *loop)
{
	return loop->base;
}

void loop_post(struct loop *loop, struct loop_node *node, void (*fn)(struct loop_node *node))
{
	bool was_empty;

	node->fn = fn;
	node->next = NULL;
	pthread_mutex_lock(&loop->mu);
	was_empty = !loop->head;
	if (loop->tail)
		loop->tail->next = node;
	else
		loop->head = node;
	loop->tail = node;
	pthread_mutex_unlock(&loop->mu);
	if (was_empty) {
		uint64_t one = 1;

		/*
		 * Safe to ignore: an eventfd write fails only with EAGAIN when
		 * the counter would overflow, and then the loop has a wake-up
		 * pending already, which runs this node too.
		 */
		(void)!write(loop->wake_fd, &one, sizeof(one));
	}
}

int loop_run(struct loop *loop)
{
	return event_base_dispatch(loop->base) < 0 ? -EIO : 0;
}

void loop_stop(struct loop *loop)
{
	event_base_loopbreak(loop->base);
}
