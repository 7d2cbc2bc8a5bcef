/*
 * sb_exec.c - the default executor of sb_exec.h: fixed POSIX threads taking
 * tasks from one intrusive FIFO; and the loop of coroutines (below).
 *
 * Lock: `mu` guards head, tail and stop; `cv` wakes the threads for a new
 * task or for stopping. It is never held while a task runs.
 */
#define _GNU_SOURCE /* epoll_pwait2, MAP_STACK */
#include "sb_exec.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define ASAN_FIBERS 1
#else
#define ASAN_FIBERS 0
#endif

struct sb_exec_pool {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct sb_exec_task *head, *tail; /* guarded by mu */
	bool stop;			  /* guarded by mu */
	pthread_t *threads;
	int n_threads;
};

static void *pool_main(void *arg)
{
	struct sb_exec_pool *p = arg;

	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->head && !p->stop)
			pthread_cond_wait(&p->cv, &p->mu);
		struct sb_exec_task *t = p->head;
		if (!t) /* stopping and drained */
			break;
		p->head = t->next;
		if (!p->head)
			p->tail = NULL;
		pthread_mutex_unlock(&p->mu);
		t->run(t);
		pthread_mutex_lock(&p->mu);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

static void pool_submit(void *ctx, struct sb_exec_task *t)
{
	struct sb_exec_pool *p = ctx;

	t->next = NULL;
	pthread_mutex_lock(&p->mu);
	if (p->tail)
		p->tail->next = t;
	else
		p->head = t;
	p->tail = t;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

int sb_exec_pool_new(int threads, struct sb_exec_pool **out)
{
	if (threads < 1 || threads > 1024)
		return -EINVAL;
	struct sb_exec_pool *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	p->threads = calloc((size_t)threads, sizeof(pthread_t));
	for (int i = 0; p->threads && i < threads; i++) {
		if (pthread_create(&p->threads[i], NULL, pool_main, p))
			break;
		p->n_threads++;
	}
	if (p->n_threads == 0) {
		int rc = p->threads ? -EAGAIN : -ENOMEM;

		sb_exec_pool_free(p);
		return rc;
	}
	*out = p;
	return 0;
}

void sb_exec_pool_free(struct sb_exec_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	for (int i = 0; i < p->n_threads; i++)
		pthread_join(p->threads[i], NULL);
	free(p->threads);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	free(p);
}

struct sb_executor sb_exec_pool_executor(struct sb_exec_pool *p)
{
	return (struct sb_executor){.ctx = p, .submit = pool_submit};
}

/* ---- the loop: coroutines waiting through one epoll ---------------------- */

/*
 * Each coroutine runs on its own mmap'd stack (a guard page below it) with
 * ucontext; the loop's thread switches to a coroutine until it waits
 * (sb_exec_wait_fd: an EPOLLONESHOT registration of its fd, re-armed at
 * each wait, so a closed and reused fd number never carries a stale one;
 * sb_exec_sleep_until_us: a timer) or returns. The loop then sleeps in
 * epoll_pwait2() until the first socket is ready or the nearest deadline,
 * and resumes every coroutine that became runnable in one pass.
 * AddressSanitizer is told about each stack switch.
 */

enum coro_state { CORO_READY, CORO_WAIT_FD, CORO_SLEEP, CORO_DONE };

struct coro {
	ucontext_t ctx;
	char *stack; /* SB_EXEC_STACK bytes above a guard page, or NULL until first run */
	void (*fn)(void *arg);
	void *arg;
	enum coro_state state;
	int fd;		 /* CORO_WAIT_FD: the socket */
	int64_t wake_us; /* CORO_WAIT_FD: deadline; CORO_SLEEP: end of the sleep */
	int result;	 /* how the wait ended: 1 ready, 0 deadline */
	void *asan_fake; /* ASan's fake stack of the coroutine while switched away */
};

struct sb_exec_loop {
	int epfd;
	struct coro *coros; /* [0, n) added for this run; [n, cap) keep their stacks */
	size_t n, cap;
	size_t *ready; /* runnable coroutines, a FIFO of cap entries */
	size_t n_ready;
	bool running;
	struct coro *current; /* the coroutine running now, or NULL (the loop itself) */
	ucontext_t main;
	const void *main_stack; /* ASan: the loop's own stack */
	size_t main_stack_size;
	void *main_fake;
};

static __thread struct sb_exec_loop *tl_loop; /* the loop running on this thread */

static int64_t mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int sb_exec_loop_new(struct sb_exec_loop **out)
{
	struct sb_exec_loop *l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0) {
		int rc = -errno;
		free(l);
		return rc;
	}
	*out = l;
	return 0;
}

void sb_exec_loop_free(struct sb_exec_loop *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->cap; i++)
		if (l->coros[i].stack)
			munmap(l->coros[i].stack - getpagesize(), SB_EXEC_STACK + getpagesize());
	free(l->coros);
	free(l->ready);
	close(l->epfd);
	free(l);
}

int sb_exec_loop_add(struct sb_exec_loop *l, void (*fn)(void *arg), void *arg)
{
	if (l->running)
		return -EBUSY;
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 16;
		struct coro *c = realloc(l->coros, cap * sizeof(*c));
		if (!c)
			return -ENOMEM;
		memset(c + l->cap, 0, (cap - l->cap) * sizeof(*c));
		l->coros = c;
		size_t *r = realloc(l->ready, cap * sizeof(*r));
		if (!r)
			return -ENOMEM;
		l->ready = r;
		l->cap = cap;
	}
	struct coro *c = &l->coros[l->n++];
	c->fn = fn;
	c->arg = arg;
	return 0;
}

/* The loop switches to c until c waits or returns. */
static void switch_to_coro(struct sb_exec_loop *l, struct coro *c)
{
	l->current = c;
#if ASAN_FIBERS
	__sanitizer_start_switch_fiber(&l->main_fake, c->stack, SB_EXEC_STACK);
#endif
	swapcontext(&l->main, &c->ctx);
#if ASAN_FIBERS
	__sanitizer_finish_switch_fiber(l->main_fake, NULL, NULL);
#endif
	l->current = NULL;
}

/* c (running) switches back to its loop: it waits, or has returned (never resumed then). */
static void switch_to_loop(struct sb_exec_loop *l, struct coro *c)
{
#if ASAN_FIBERS
	__sanitizer_start_switch_fiber(c->state == CORO_DONE ? NULL : &c->asan_fake, l->main_stack,
				       l->main_stack_size);
#endif
	swapcontext(&c->ctx, &l->main);
#if ASAN_FIBERS
	__sanitizer_finish_switch_fiber(c->asan_fake, &l->main_stack, &l->main_stack_size);
#endif
}

static void coro_entry(void)
{
	struct sb_exec_loop *l = tl_loop;
	struct coro *c = l->current;
#if ASAN_FIBERS
	__sanitizer_finish_switch_fiber(NULL, &l->main_stack, &l->main_stack_size);
#endif
	c->fn(c->arg);
	c->state = CORO_DONE;
	switch_to_loop(l, c);
}

/* Maps c's stack if it has none yet and points its context at coro_entry(). */
static int coro_prepare(struct coro *c)
{
	size_t page = (size_t)getpagesize();
	if (!c->stack) {
		char *m = mmap(NULL, SB_EXEC_STACK + page, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
		if (m == MAP_FAILED)
			return -ENOMEM;
		if (mprotect(m, page, PROT_NONE)) { /* the guard page: an overflow faults */
			munmap(m, SB_EXEC_STACK + page);
			return -ENOMEM;
		}
		c->stack = m + page;
	}
	getcontext(&c->ctx);
	c->ctx.uc_stack.ss_sp = c->stack;
	c->ctx.uc_stack.ss_size = SB_EXEC_STACK;
	c->ctx.uc_link = NULL; /* coro_entry() never returns */
	makecontext(&c->ctx, coro_entry, 0);
	c->state = CORO_READY;
	c->asan_fake = NULL;
	return 0;
}

static void make_ready(struct sb_exec_loop *l, struct coro *c, int result)
{
	c->state = CORO_READY;
	c->result = result;
	l->ready[l->n_ready++] = (size_t)(c - l->coros);
}

/* Sleeps in epoll until a socket is ready or the nearest deadline; queues who may go on. */
static void loop_wait(struct sb_exec_loop *l)
{
	int64_t next = INT64_MAX;
	for (size_t i = 0; i < l->n; i++) {
		struct coro *c = &l->coros[i];
		if ((c->state == CORO_WAIT_FD || c->state == CORO_SLEEP) && c->wake_us < next)
			next = c->wake_us;
	}
	struct timespec ts, *tsp = NULL;
	if (next != INT64_MAX) {
		int64_t left = next - mono_us();
		if (left < 0)
			left = 0;
		ts = (struct timespec){left / 1000000, (left % 1000000) * 1000};
		tsp = &ts;
	}
	struct epoll_event ev[64];
	int k = epoll_pwait2(l->epfd, ev, 64, tsp, NULL);
	if (k < 0 && errno == ENOSYS) /* a kernel before 5.11: millisecond timeouts */
		k = epoll_wait(l->epfd, ev, 64,
			       tsp ? (int)(ts.tv_sec * 1000 + (ts.tv_nsec + 999999) / 1000000)
				   : -1);
	for (int i = 0; i < k; i++) {
		size_t idx = (size_t)(ev[i].data.u64 >> 32);
		int fd = (int)(uint32_t)ev[i].data.u64;
		struct coro *c = idx < l->n ? &l->coros[idx] : NULL;
		if (c && c->state == CORO_WAIT_FD && c->fd == fd)
			make_ready(l, c, 1);
	}
	int64_t now = mono_us();
	for (size_t i = 0; i < l->n; i++) {
		struct coro *c = &l->coros[i];
		if ((c->state == CORO_WAIT_FD || c->state == CORO_SLEEP) && c->wake_us <= now)
			make_ready(l, c, 0);
	}
}

int sb_exec_loop_run(struct sb_exec_loop *l)
{
	int rc = 0;
	for (size_t i = 0; i < l->n && !rc; i++)
		rc = coro_prepare(&l->coros[i]);
	if (rc) {
		l->n = 0;
		return rc;
	}
	struct sb_exec_loop *outer = tl_loop;
	tl_loop = l;
	l->running = true;
	l->n_ready = 0;
	for (size_t i = 0; i < l->n; i++)
		l->ready[l->n_ready++] = i;
	size_t live = l->n;
	while (live) {
		/* a pass over what is runnable now; what it makes ready waits for the next */
		size_t n = l->n_ready, *run = l->ready;
		for (size_t i = 0; i < n; i++) {
			struct coro *c = &l->coros[run[i]];
			switch_to_coro(l, c);
			live -= c->state == CORO_DONE;
		}
		l->n_ready = 0;
		if (live)
			loop_wait(l);
	}
	l->running = false;
	l->n = 0;
	tl_loop = outer;
	return 0;
}

int sb_exec_wait_fd(int fd, short events, int64_t deadline_ms)
{
	struct sb_exec_loop *l = tl_loop;
	int64_t deadline_us = deadline_ms * 1000;
	int64_t left_us = deadline_us - mono_us();
	if (left_us <= 0)
		return 0;
	if (!l || !l->current) {
		struct pollfd p = {.fd = fd, .events = events};
		int r = poll(&p, 1, (int)((left_us + 999) / 1000));
		if (r < 0)
			return errno == EINTR ? 1 : -errno;
		return r > 0;
	}
	struct coro *c = l->current;
	struct epoll_event ev = {.events = EPOLLONESHOT | ((events & POLLIN) ? EPOLLIN : 0u) |
					   ((events & POLLOUT) ? EPOLLOUT : 0u),
				 .data.u64 = ((uint64_t)(c - l->coros) << 32) | (uint32_t)fd};
	if (epoll_ctl(l->epfd, EPOLL_CTL_MOD, fd, &ev) &&
	    (errno != ENOENT || epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev)))
		return -errno;
	c->state = CORO_WAIT_FD;
	c->fd = fd;
	c->wake_us = deadline_us;
	switch_to_loop(l, c);
	return c->result;
}

void sb_exec_sleep_until_us(int64_t when_us)
{
	struct sb_exec_loop *l = tl_loop;
	if (when_us <= mono_us())
		return;
	if (!l || !l->current) {
		struct timespec ts = {when_us / 1000000, (when_us % 1000000) * 1000};
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
		return;
	}
	struct coro *c = l->current;
	c->state = CORO_SLEEP;
	c->wake_us = when_us;
	switch_to_loop(l, c);
}
