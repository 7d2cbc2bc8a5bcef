/*
 * loop.c - implementation of loop.h: libevent base with pthread support,
 * a mutex-guarded FIFO of posted tasks and an eventfd as the wake-up.
 *
 * Lock: `mu` guards head, tail and closed. It is never held while a task
 * runs, so tasks may post further tasks.
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

struct task {
	void (*fn)(void *arg);
	void *arg;
	struct task *next;
};

struct loop {
	struct event_base *base;
	struct event *wake_ev;
	int wake_fd;
	pthread_mutex_t mu;
	struct task *head, *tail; /* guarded by mu */
	bool closed;              /* guarded by mu */
};

static pthread_once_t threads_once = PTHREAD_ONCE_INIT;

static void enable_threads(void)
{
	evthread_use_pthreads();
}

/* Takes the whole queue under the lock, then runs it in order without it. */
static void run_posted(struct loop *loop)
{
	struct task *t;

	pthread_mutex_lock(&loop->mu);
	t = loop->head;
	loop->head = loop->tail = NULL;
	pthread_mutex_unlock(&loop->mu);
	while (t) {
		struct task *next = t->next;

		t->fn(t->arg);
		free(t);
		t = next;
	}
}

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
	uint64_t n;

	if (read(fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		return;
	run_posted(arg);
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
	pthread_mutex_lock(&loop->mu);
	loop->closed = true;
	pthread_mutex_unlock(&loop->mu);
	run_posted(loop);
	if (loop->wake_ev)
		event_free(loop->wake_ev);
	if (loop->base)
		event_base_free(loop->base);
	if (loop->wake_fd >= 0)
		close(loop->wake_fd);
	pthread_mutex_destroy(&loop->mu);
	free(loop);
}

struct event_base *loop_base(struct loop *loop)
{
	return loop->base;
}

int loop_post(struct loop *loop, void (*fn)(void *arg), void *arg)
{
	struct task *t = malloc(sizeof(*t));
	bool was_empty;

	if (!t)
		return -ENOMEM;
	t->fn = fn;
	t->arg = arg;
	t->next = NULL;
	pthread_mutex_lock(&loop->mu);
	if (loop->closed) {
		pthread_mutex_unlock(&loop->mu);
		free(t);
		return -ESHUTDOWN;
	}
	was_empty = !loop->head;
	if (loop->tail)
		loop->tail->next = t;
	else
		loop->head = t;
	loop->tail = t;
	pthread_mutex_unlock(&loop->mu);
	if (was_empty) {
		uint64_t one = 1;

		/* Cannot fail short of a counter overflow; the loop drains it. */
		if (write(loop->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
			return -errno;
	}
	return 0;
}

int loop_run(struct loop *loop)
{
	return event_base_dispatch(loop->base) < 0 ? -EIO : 0;
}

void loop_stop(struct loop *loop)
{
	event_base_loopbreak(loop->base);
}
