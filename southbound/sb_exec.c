/*
 * sb_exec.c - the default executor of sb_exec.h: fixed POSIX threads taking
 * tasks from one intrusive FIFO.
 *
 * Lock: `mu` guards head, tail and stop; `cv` wakes the threads for a new
 * task or for stopping. It is never held while a task runs.
 */
#include "sb_exec.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

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
