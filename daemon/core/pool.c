/*
 * pool.c - implementation of pool.h.
 *
 * A submitted task either starts at once (fewer than max_running are
 * running, and for a heavy task fewer than max_heavy heavy ones: it goes
 * to the executor) or waits in one of two FIFOs (light, heavy) of at most
 * queue_max together. A task that finishes its work posts its done to the
 * loop and hands its turn to the first waiting light task, else to the
 * first waiting heavy one if max_heavy allows.
 *
 * Lock: `mu` guards the FIFOs, n_waiting, n_running, n_heavy and stopping;
 * `idle_cv` tells pool_free() that n_running dropped to 0. Lock order:
 * pool->mu is never held while calling exec_submit() or loop_post() (they
 * take the executor's and the loop's locks).
 */
#include "pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

struct pool {
	struct loop *loop;
	struct exec *exec;
	unsigned max_running;
	size_t queue_max;
	struct ocs_pool solver_pool;
	pthread_mutex_t mu;
	pthread_cond_t idle_cv;
	unsigned max_heavy; /* heavy tasks running at once */
	struct fifo {
		struct pool_task *head, *tail;
	} light, heavy;	    /* guarded by mu */
	size_t n_waiting;   /* guarded by mu: in both FIFOs */
	unsigned n_running; /* guarded by mu: taken, done not posted */
	unsigned n_heavy;   /* guarded by mu: heavy among n_running */
	bool stopping;	    /* guarded by mu */
};

static void fifo_push(struct fifo *q, struct pool_task *t)
{
	t->next_waiting = NULL;
	if (q->tail)
		q->tail->next_waiting = t;
	else
		q->head = t;
	q->tail = t;
}

static struct pool_task *fifo_pop(struct fifo *q)
{
	struct pool_task *t = q->head;

	if (t) {
		q->head = t->next_waiting;
		if (!q->head)
			q->tail = NULL;
	}
	return t;
}

/* Whether t may start now (called with mu held). */
static bool may_start(const struct pool *pool, const struct pool_task *t)
{
	return pool->n_running < pool->max_running &&
	       (!t->heavy || pool->n_heavy < pool->max_heavy);
}

/* Takes the next waiting task that may start, counted as running (mu held). */
static struct pool_task *take_next(struct pool *pool)
{
	struct pool_task *t = NULL;

	if (pool->light.head && may_start(pool, pool->light.head))
		t = fifo_pop(&pool->light);
	else if (pool->heavy.head && may_start(pool, pool->heavy.head))
		t = fifo_pop(&pool->heavy);
	if (t) {
		pool->n_waiting--;
		pool->n_running++;
		pool->n_heavy += t->heavy;
	}
	return t;
}

static void deliver(struct loop_node *n)
{
	struct pool_task *t = OCSD_CONTAINER_OF(n, struct pool_task, node);

	t->done(t);
}

static void run_task(struct exec_task *x)
{
	struct pool_task *t = OCSD_CONTAINER_OF(x, struct pool_task, exec);
	struct pool *pool = t->pool;
	struct pool_task *next;
	bool heavy = t->heavy; /* t belongs to the loop once posted */

	t->work(t);
	/* Post first, then give the turn away: once n_running drops to 0,
	 * pool_free() may return, and every done must be on the loop by then. */
	loop_post(pool->loop, &t->node, deliver);
	pthread_mutex_lock(&pool->mu);
	pool->n_running--;
	pool->n_heavy -= heavy;
	next = take_next(pool);
	if (!next && pool->n_running == 0)
		pthread_cond_broadcast(&pool->idle_cv);
	pthread_mutex_unlock(&pool->mu);
	if (next)
		exec_submit(pool->exec, &next->exec);
}

static void solver_run(void *ctx, void (*fn)(void *arg, size_t i), void *arg, size_t n)
{
	const struct pool *pool = ctx;

	exec_parallel_for(pool->exec, pool->max_running, fn, arg, n);
}

struct pool *pool_new(struct loop *loop, struct exec *exec, unsigned max_running, size_t queue_max)
{
	struct pool *pool = calloc(1, sizeof(*pool));

	if (!pool)
		return NULL;
	if (max_running == 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		max_running = n > 0 ? (unsigned)n : 1;
	}
	pool->loop = loop;
	pool->exec = exec;
	pool->max_running = max_running;
	pool->max_heavy = max_running > 1 ? max_running - 1 : 1;
	pool->queue_max = queue_max;
	pool->solver_pool = (struct ocs_pool){.run = solver_run, .ctx = pool};
	pthread_mutex_init(&pool->mu, NULL);
	pthread_cond_init(&pool->idle_cv, NULL);
	return pool;
}

void pool_stop(struct pool *pool)
{
	pthread_mutex_lock(&pool->mu);
	pool->stopping = true;
	while (pool->n_running)
		pthread_cond_wait(&pool->idle_cv, &pool->mu);
	pthread_mutex_unlock(&pool->mu);
}

void pool_free(struct pool *pool)
{
	if (!pool)
		return;
	pool_stop(pool);
	pthread_cond_destroy(&pool->idle_cv);
	pthread_mutex_destroy(&pool->mu);
	free(pool);
}

int pool_submit(struct pool *pool, struct pool_task *t)
{
	bool start = false;
	int rc = 0;

	t->pool = pool;
	t->next_waiting = NULL;
	t->exec.run = run_task;
	pthread_mutex_lock(&pool->mu);
	if (pool->stopping) {
		rc = -ESHUTDOWN;
	} else if (may_start(pool, t)) {
		pool->n_running++;
		pool->n_heavy += t->heavy;
		start = true;
	} else if (pool->n_waiting >= pool->queue_max) {
		rc = -EBUSY;
	} else {
		fifo_push(t->heavy ? &pool->heavy : &pool->light, t);
		pool->n_waiting++;
	}
	pthread_mutex_unlock(&pool->mu);
	if (start)
		exec_submit(pool->exec, &t->exec);
	return rc;
}

unsigned pool_workers(const struct pool *pool)
{
	return pool->max_running;
}

size_t pool_queued(struct pool *pool)
{
	size_t n;

	pthread_mutex_lock(&pool->mu);
	n = pool->n_waiting;
	pthread_mutex_unlock(&pool->mu);
	return n;
}

const struct ocs_pool *pool_solver_pool(const struct pool *pool)
{
	return &pool->solver_pool;
}
