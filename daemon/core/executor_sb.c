/*
 * executor_sb.c - implementation of executor_sb.h.
 *
 * A pump is an executor task that runs one queued engine task, then
 * resubmits itself while engine tasks are queued, or goes back on the idle
 * list. Running one task per turn keeps the executor's FIFO fair: a thread
 * that helps in exec_wait() and picks a pump up is held for one device
 * step, not for every transaction queued. A submit that finds an idle pump
 * starts it; otherwise a running pump will reach the new task.
 *
 * Lock: `mu` guards head, tail, idle (the list of pumps not on the
 * executor) and n_idle; `all_idle` tells exec_sb_free() that every pump is
 * back (a pump touches the adapter until it unlocks mu for the last time).
 * Never held while an engine task runs or across exec_submit().
 */
#include "executor_sb.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "loop.h"

struct pump {
	struct exec_task task;
	struct exec_sb *owner;
	struct pump *next_idle;
};

struct exec_sb {
	struct exec *exec;
	pthread_mutex_t mu;
	struct sb_exec_task *head, *tail; /* guarded by mu */
	struct pump *idle;		  /* guarded by mu */
	unsigned n_idle;		  /* guarded by mu */
	pthread_cond_t all_idle;
	struct pump *pumps;
	unsigned n_pumps;
};

static void pump_run(struct exec_task *x)
{
	struct pump *p = OCSD_CONTAINER_OF(x, struct pump, task);
	struct exec_sb *a = p->owner;

	struct sb_exec_task *t;
	bool more;

	pthread_mutex_lock(&a->mu);
	t = a->head;
	if (t) {
		a->head = t->next;
		if (!a->head)
			a->tail = NULL;
	}
	pthread_mutex_unlock(&a->mu);
	if (t)
		t->run(t);
	pthread_mutex_lock(&a->mu);
	more = a->head != NULL;
	if (!more) {
		p->next_idle = a->idle;
		a->idle = p;
		if (++a->n_idle == a->n_pumps)
			pthread_cond_signal(&a->all_idle);
	}
	pthread_mutex_unlock(&a->mu);
	/* Still busy, so exec_sb_free() waits: a is alive. */
	if (more)
		exec_submit(a->exec, &p->task);
}

static void adapter_submit(void *ctx, struct sb_exec_task *t)
{
	struct exec_sb *a = ctx;
	struct pump *p;

	t->next = NULL;
	pthread_mutex_lock(&a->mu);
	if (a->tail)
		a->tail->next = t;
	else
		a->head = t;
	a->tail = t;
	p = a->idle;
	if (p) {
		a->idle = p->next_idle;
		a->n_idle--;
	}
	pthread_mutex_unlock(&a->mu);
	if (p)
		exec_submit(a->exec, &p->task);
}

struct exec_sb *exec_sb_new(struct exec *exec, unsigned max_running)
{
	struct exec_sb *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	a->exec = exec;
	a->n_pumps = max_running ? max_running : 1;
	a->pumps = calloc(a->n_pumps, sizeof(*a->pumps));
	if (!a->pumps) {
		free(a);
		return NULL;
	}
	pthread_mutex_init(&a->mu, NULL);
	pthread_cond_init(&a->all_idle, NULL);
	a->n_idle = a->n_pumps;
	for (unsigned i = 0; i < a->n_pumps; i++) {
		a->pumps[i] = (struct pump){.task.run = pump_run, .owner = a, .next_idle = a->idle};
		a->idle = &a->pumps[i];
	}
	return a;
}

void exec_sb_free(struct exec_sb *a)
{
	if (!a)
		return;
	pthread_mutex_lock(&a->mu);
	while (a->n_idle < a->n_pumps)
		pthread_cond_wait(&a->all_idle, &a->mu);
	pthread_mutex_unlock(&a->mu);
	pthread_cond_destroy(&a->all_idle);
	pthread_mutex_destroy(&a->mu);
	free(a->pumps);
	free(a);
}

struct sb_executor exec_sb_executor(struct exec_sb *a)
{
	return (struct sb_executor){.ctx = a, .submit = adapter_submit};
}
