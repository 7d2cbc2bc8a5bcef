/*
 * executor.c - implementation of executor.h.
 *
 * Lock: `mu` guards the queue (head, tail), stopping, n_helpers_asleep and
 * every exec_wait's pending count. `work_cv` wakes workers (a task arrived,
 * or stopping); `help_cv` wakes threads asleep in exec_wait() (a task
 * arrived, or a group finished). A submit wakes both kinds: on a 1-thread
 * executor the only worker may be the one asleep in exec_wait(), and it
 * must run the task that finishes its group. No lock is held while a task
 * runs, and the executor never touches a task once its run was called.
 */
#include "executor.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

/* Parallel loops use at most this many threads (bounded stack use). */
#define EXEC_PFOR_MAX 64

struct exec {
	pthread_mutex_t mu;
	pthread_cond_t work_cv;
	pthread_cond_t help_cv;
	struct exec_task *head, *tail; /* guarded by mu */
	bool stopping;		       /* guarded by mu */
	unsigned n_helpers_asleep;     /* guarded by mu */
	pthread_t *threads;
	unsigned n_threads;
};

/* Takes the first task; mu held. */
static struct exec_task *pop_locked(struct exec *e)
{
	struct exec_task *t = e->head;

	if (t) {
		e->head = t->next;
		if (!e->head)
			e->tail = NULL;
	}
	return t;
}

static void *worker_main(void *arg)
{
	struct exec *e = arg;
	struct exec_task *t;

	pthread_mutex_lock(&e->mu);
	for (;;) {
		while (!e->head && !e->stopping)
			pthread_cond_wait(&e->work_cv, &e->mu);
		t = pop_locked(e);
		if (!t) /* stopping and drained */
			break;
		pthread_mutex_unlock(&e->mu);
		t->run(t);
		pthread_mutex_lock(&e->mu);
	}
	pthread_mutex_unlock(&e->mu);
	return NULL;
}

struct exec *exec_new(unsigned threads)
{
	struct exec *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	if (threads == 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		threads = n > 2 ? (unsigned)n : 2;
	}
	pthread_mutex_init(&e->mu, NULL);
	pthread_cond_init(&e->work_cv, NULL);
	pthread_cond_init(&e->help_cv, NULL);
	e->threads = calloc(threads, sizeof(*e->threads));
	if (!e->threads)
		goto fail;
	for (; e->n_threads < threads; e->n_threads++)
		if (pthread_create(&e->threads[e->n_threads], NULL, worker_main, e) != 0)
			goto fail;
	return e;
fail:
	exec_free(e);
	return NULL;
}

void exec_free(struct exec *e)
{
	struct exec_task *t;

	if (!e)
		return;
	pthread_mutex_lock(&e->mu);
	e->stopping = true;
	pthread_cond_broadcast(&e->work_cv);
	pthread_mutex_unlock(&e->mu);
	for (unsigned i = 0; i < e->n_threads; i++)
		(void)pthread_join(e->threads[i], NULL); /* joinable threads we started */
	/* A task another thread submitted after the workers left (or an
	 * executor whose threads failed to start) still runs. */
	for (;;) {
		pthread_mutex_lock(&e->mu);
		t = pop_locked(e);
		pthread_mutex_unlock(&e->mu);
		if (!t)
			break;
		t->run(t);
	}
	free(e->threads);
	pthread_cond_destroy(&e->help_cv);
	pthread_cond_destroy(&e->work_cv);
	pthread_mutex_destroy(&e->mu);
	free(e);
}

unsigned exec_threads(const struct exec *e)
{
	return e->n_threads;
}

void exec_submit(struct exec *e, struct exec_task *t)
{
	t->next = NULL;
	pthread_mutex_lock(&e->mu);
	if (e->tail)
		e->tail->next = t;
	else
		e->head = t;
	e->tail = t;
	pthread_cond_signal(&e->work_cv);
	if (e->n_helpers_asleep)
		pthread_cond_broadcast(&e->help_cv);
	pthread_mutex_unlock(&e->mu);
}

void exec_wait_init(struct exec_wait *w, size_t n)
{
	w->pending = n;
}

void exec_wait_done(struct exec *e, struct exec_wait *w)
{
	pthread_mutex_lock(&e->mu);
	if (--w->pending == 0 && e->n_helpers_asleep)
		pthread_cond_broadcast(&e->help_cv);
	pthread_mutex_unlock(&e->mu);
}

void exec_wait(struct exec *e, struct exec_wait *w)
{
	pthread_mutex_lock(&e->mu);
	while (w->pending) {
		struct exec_task *t = pop_locked(e);

		if (t) {
			pthread_mutex_unlock(&e->mu);
			t->run(t);
			pthread_mutex_lock(&e->mu);
			continue;
		}
		e->n_helpers_asleep++;
		pthread_cond_wait(&e->help_cv, &e->mu);
		e->n_helpers_asleep--;
	}
	pthread_mutex_unlock(&e->mu);
}

/* ---- parallel loops ---- */

struct pfor;

struct pfor_task {
	struct exec_task task;
	struct pfor *p;
};

struct pfor {
	struct exec *e;
	void (*fn)(void *arg, size_t i);
	void *arg;
	size_t n;
	atomic_size_t next; /* next index to claim */
	struct exec_wait helpers;
	struct pfor_task tasks[EXEC_PFOR_MAX - 1];
};

static void pfor_claim(struct pfor *p)
{
	size_t i;

	while ((i = atomic_fetch_add(&p->next, 1)) < p->n)
		p->fn(p->arg, i);
}

static void pfor_run(struct exec_task *t)
{
	struct pfor_task *pt = (struct pfor_task *)t;
	struct pfor *p = pt->p;

	pfor_claim(p);
	exec_wait_done(p->e, &p->helpers);
}

void exec_parallel_for(struct exec *e, unsigned max_tasks, void (*fn)(void *arg, size_t i),
		       void *arg, size_t n)
{
	struct pfor p = {.e = e, .fn = fn, .arg = arg, .n = n};
	size_t k = max_tasks ? max_tasks : e->n_threads;

	if (k > EXEC_PFOR_MAX)
		k = EXEC_PFOR_MAX;
	if (k > n)
		k = n;
	atomic_init(&p.next, 0);
	/* k - 1 helpers; the caller is the k-th. */
	exec_wait_init(&p.helpers, k ? k - 1 : 0);
	for (size_t h = 0; h + 1 < k; h++) {
		p.tasks[h] = (struct pfor_task){.task.run = pfor_run, .p = &p};
		exec_submit(e, &p.tasks[h].task);
	}
	pfor_claim(&p);
	exec_wait(e, &p.helpers);
}
