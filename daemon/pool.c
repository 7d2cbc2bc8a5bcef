/*
 * pool.c - implementation of pool.h.
 *
 * Lock: `mu` guards head, tail, queued and stopping; `cv` signals workers
 * that a job arrived or that the pool is stopping. Lock order: pool->mu is
 * never held while calling into the loop (loop_post takes the loop's lock).
 */
#include "pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "loop.h"

struct job {
	void (*work)(void *arg);
	void (*done)(void *arg);
	void *arg;
	struct job *next;
};

struct pool {
	struct loop *loop;
	pthread_t *threads;
	unsigned n_threads;
	size_t queue_max;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct job *head, *tail; /* guarded by mu */
	size_t queued;           /* guarded by mu */
	bool stopping;           /* guarded by mu */
};

static void *worker_main(void *arg)
{
	struct pool *pool = arg;

	for (;;) {
		struct job *j;

		pthread_mutex_lock(&pool->mu);
		while (!pool->head && !pool->stopping)
			pthread_cond_wait(&pool->cv, &pool->mu);
		j = pool->head;
		if (!j) { /* stopping and drained */
			pthread_mutex_unlock(&pool->mu);
			return NULL;
		}
		pool->head = j->next;
		if (!pool->head)
			pool->tail = NULL;
		pool->queued--;
		pthread_mutex_unlock(&pool->mu);

		j->work(j->arg);
		/* The loop runs posted tasks even while it is being freed. */
		while (loop_post(pool->loop, j->done, j->arg) == -ENOMEM)
			usleep(1000);
		free(j);
	}
}

struct pool *pool_new(struct loop *loop, unsigned workers, size_t queue_max)
{
	struct pool *pool = calloc(1, sizeof(*pool));

	if (!pool)
		return NULL;
	if (workers == 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		workers = n > 0 ? (unsigned)n : 1;
	}
	pool->loop = loop;
	pool->queue_max = queue_max;
	pthread_mutex_init(&pool->mu, NULL);
	pthread_cond_init(&pool->cv, NULL);
	pool->threads = calloc(workers, sizeof(*pool->threads));
	if (!pool->threads)
		goto fail;
	for (; pool->n_threads < workers; pool->n_threads++)
		if (pthread_create(&pool->threads[pool->n_threads], NULL, worker_main, pool) != 0)
			goto fail;
	return pool;
fail:
	pool_free(pool);
	return NULL;
}

void pool_free(struct pool *pool)
{
	if (!pool)
		return;
	pthread_mutex_lock(&pool->mu);
	pool->stopping = true;
	pthread_cond_broadcast(&pool->cv);
	pthread_mutex_unlock(&pool->mu);
	for (unsigned i = 0; i < pool->n_threads; i++)
		pthread_join(pool->threads[i], NULL);
	free(pool->threads);
	pthread_cond_destroy(&pool->cv);
	pthread_mutex_destroy(&pool->mu);
	free(pool);
}

int pool_submit(struct pool *pool, void (*work)(void *arg), void (*done)(void *arg), void *arg)
{
	struct job *j = malloc(sizeof(*j));
	int rc = 0;

	if (!j)
		return -ENOMEM;
	*j = (struct job){ work, done, arg, NULL };
	pthread_mutex_lock(&pool->mu);
	if (pool->stopping) {
		rc = -ESHUTDOWN;
	} else if (pool->queued >= pool->queue_max) {
		rc = -EAGAIN;
	} else {
		if (pool->tail)
			pool->tail->next = j;
		else
			pool->head = j;
		pool->tail = j;
		pool->queued++;
		pthread_cond_signal(&pool->cv);
	}
	pthread_mutex_unlock(&pool->mu);
	if (rc)
		free(j);
	return rc;
}

static void task_work(void *arg)
{
	struct pool_task *t = arg;

	t->work(t);
}

static void task_done(void *arg)
{
	struct pool_task *t = arg;

	t->done(t);
}

int pool_submit_task(void *pool, struct pool_task *t)
{
	return pool_submit(pool, task_work, task_done, t);
}

unsigned pool_workers(const struct pool *pool)
{
	return pool->n_threads;
}

size_t pool_queued(struct pool *pool)
{
	size_t n;

	pthread_mutex_lock(&pool->mu);
	n = pool->queued;
	pthread_mutex_unlock(&pool->mu);
	return n;
}
