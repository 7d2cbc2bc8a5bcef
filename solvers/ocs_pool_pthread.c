/*
 * ocs_pool_pthread.c - worker threads for struct ocs_pool (see
 * ocs_pool_pthread.h).
 *
 * A run publishes (fn, arg, n) under the lock, bumps a generation counter
 * and wakes the workers; every participant (workers and the caller) claims
 * indices from a shared counter until none are left; the caller waits until
 * `busy` (participants still working on this generation) drops to zero.
 * Lock order: run_lock (serializes runs) before lock (guards the job).
 */
#include "ocs_pool_pthread.h"

#include <pthread.h>
#include <stdlib.h>

struct ocs_pool_pthread {
	struct ocs_pool pool;
	pthread_mutex_t run_lock;
	pthread_mutex_t lock; /* guards everything below */
	pthread_cond_t wake;
	pthread_cond_t done;
	pthread_t *threads;
	int n_threads;
	unsigned long generation;
	int busy;
	int stop;
	void (*fn)(void *arg, size_t i);
	void *arg;
	size_t n, next;
};

static void work(struct ocs_pool_pthread *pp)
{
	for (;;) {
		pthread_mutex_lock(&pp->lock);
		size_t i = pp->next < pp->n ? pp->next++ : pp->n;
		void (*fn)(void *, size_t) = pp->fn;
		void *arg = pp->arg;
		int more = i < pp->n;
		pthread_mutex_unlock(&pp->lock);
		if (!more)
			return;
		fn(arg, i);
	}
}

static void *worker_main(void *opaque)
{
	struct ocs_pool_pthread *pp = opaque;
	unsigned long seen = 0;

	pthread_mutex_lock(&pp->lock);
	for (;;) {
		while (!pp->stop && pp->generation == seen)
			pthread_cond_wait(&pp->wake, &pp->lock);
		if (pp->stop)
			break;
		seen = pp->generation;
		pp->busy++;
		pthread_mutex_unlock(&pp->lock);
		work(pp);
		pthread_mutex_lock(&pp->lock);
		if (--pp->busy == 0)
			pthread_cond_broadcast(&pp->done);
	}
	pthread_mutex_unlock(&pp->lock);
	return NULL;
}

static void pool_run(void *ctx, void (*fn)(void *arg, size_t i), void *arg, size_t n)
{
	struct ocs_pool_pthread *pp = ctx;

	pthread_mutex_lock(&pp->run_lock);
	pthread_mutex_lock(&pp->lock);
	pp->fn = fn;
	pp->arg = arg;
	pp->n = n;
	pp->next = 0;
	pp->generation++;
	pp->busy++; /* the caller */
	pthread_cond_broadcast(&pp->wake);
	pthread_mutex_unlock(&pp->lock);
	work(pp);
	pthread_mutex_lock(&pp->lock);
	pp->busy--;
	while (pp->busy > 0)
		pthread_cond_wait(&pp->done, &pp->lock);
	pthread_mutex_unlock(&pp->lock);
	pthread_mutex_unlock(&pp->run_lock);
}

struct ocs_pool_pthread *ocs_pool_pthread_new(int threads)
{
	struct ocs_pool_pthread *pp = calloc(1, sizeof(*pp));
	if (!pp)
		return NULL;
	pthread_mutex_init(&pp->run_lock, NULL);
	pthread_mutex_init(&pp->lock, NULL);
	pthread_cond_init(&pp->wake, NULL);
	pthread_cond_init(&pp->done, NULL);
	pp->pool.run = pool_run;
	pp->pool.ctx = pp;
	if (threads > 1) {
		pp->threads = calloc((size_t)threads - 1, sizeof(pthread_t));
		if (!pp->threads) {
			ocs_pool_pthread_free(pp);
			return NULL;
		}
		for (int t = 0; t < threads - 1; t++) {
			if (pthread_create(&pp->threads[t], NULL, worker_main, pp)) {
				ocs_pool_pthread_free(pp);
				return NULL;
			}
			pp->n_threads++;
		}
	}
	return pp;
}

void ocs_pool_pthread_free(struct ocs_pool_pthread *pp)
{
	if (!pp)
		return;
	pthread_mutex_lock(&pp->lock);
	pp->stop = 1;
	pthread_cond_broadcast(&pp->wake);
	pthread_mutex_unlock(&pp->lock);
	for (int t = 0; t < pp->n_threads; t++)
		pthread_join(pp->threads[t], NULL);
	free(pp->threads);
	pthread_mutex_destroy(&pp->run_lock);
	pthread_mutex_destroy(&pp->lock);
	pthread_cond_destroy(&pp->wake);
	pthread_cond_destroy(&pp->done);
	free(pp);
}

const struct ocs_pool *ocs_pool_pthread_pool(const struct ocs_pool_pthread *pp)
{
	return &pp->pool;
}
