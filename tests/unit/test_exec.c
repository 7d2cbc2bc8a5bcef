/*
 * test_exec.c - unit tests of the daemon's one executor (daemon/core/executor.c)
 * and its adapter for the transaction engine (daemon/core/executor_sb.c): tasks
 * submitted from many threads all run exactly once, submitting has no
 * failure path, nested waits and parallel loops on a 1-thread executor do
 * not deadlock (helping), exec_free() drains what is queued and what
 * draining tasks submit, and the adapter never runs more engine tasks at
 * once than its cap.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "executor.h"
#include "executor_sb.h"
#include "loop.h"

/* Submitting cannot fail: exec_submit() returns nothing to check. */
_Static_assert(__builtin_types_compatible_p(__typeof__(&exec_submit),
					    void (*)(struct exec *, struct exec_task *)),
	       "exec_submit has no failure path");

#define SUBMITTERS   4
#define SUBMITS_EACH 5000

static void sleep_us(long us)
{
	struct timespec ts = {0, us * 1000};

	nanosleep(&ts, NULL);
}

struct counted_task {
	struct exec_task task;
	atomic_int *ran;
	int runs; /* this task's own count: must end at exactly 1 */
};

static void count_run(struct exec_task *t)
{
	struct counted_task *c = OCSD_CONTAINER_OF(t, struct counted_task, task);

	c->runs++;
	atomic_fetch_add(c->ran, 1);
}

struct submitter {
	struct exec *e;
	struct counted_task *tasks;
	atomic_int *ran;
};

static void *submit_many(void *arg)
{
	struct submitter *s = arg;

	for (int i = 0; i < SUBMITS_EACH; i++) {
		s->tasks[i] = (struct counted_task){.task.run = count_run, .ran = s->ran};
		exec_submit(s->e, &s->tasks[i].task);
	}
	return NULL;
}

static void test_submits_from_threads(void **state)
{
	struct exec *e = exec_new(3);
	struct counted_task *tasks = calloc(SUBMITTERS * SUBMITS_EACH, sizeof(*tasks));
	struct submitter sub[SUBMITTERS];
	pthread_t th[SUBMITTERS];
	atomic_int ran = 0;

	assert_non_null(e);
	assert_non_null(tasks);
	assert_int_equal(exec_threads(e), 3);
	for (int i = 0; i < SUBMITTERS; i++) {
		sub[i] = (struct submitter){e, tasks + i * SUBMITS_EACH, &ran};
		assert_int_equal(pthread_create(&th[i], NULL, submit_many, &sub[i]), 0);
	}
	for (int i = 0; i < SUBMITTERS; i++)
		pthread_join(th[i], NULL);
	exec_free(e); /* drains */
	assert_int_equal(atomic_load(&ran), SUBMITTERS * SUBMITS_EACH);
	for (int i = 0; i < SUBMITTERS * SUBMITS_EACH; i++)
		assert_int_equal(tasks[i].runs, 1);
	free(tasks);
	exec_free(NULL);
}

/*
 * A tree of tasks: each node submits `fanout` children and waits for them
 * with exec_wait() before it counts itself, down to `depth` levels.
 */
struct tree_task {
	struct exec_task task;
	struct exec *e;
	int depth;
	atomic_int *finished;
	struct exec_wait *parent; /* NULL for the root */
};

enum { FANOUT = 3, DEPTH = 4 };

static void tree_run(struct exec_task *t)
{
	struct tree_task *n = OCSD_CONTAINER_OF(t, struct tree_task, task);

	if (n->depth > 0) {
		struct tree_task kids[FANOUT];
		struct exec_wait w;

		exec_wait_init(&w, FANOUT);
		for (int i = 0; i < FANOUT; i++) {
			kids[i] = (struct tree_task){.task.run = tree_run,
						     .e = n->e,
						     .depth = n->depth - 1,
						     .finished = n->finished,
						     .parent = &w};
			exec_submit(n->e, &kids[i].task);
		}
		exec_wait(n->e, &w);
	}
	atomic_fetch_add(n->finished, 1);
	if (n->parent)
		exec_wait_done(n->e, n->parent);
}

static void run_tree(unsigned threads)
{
	struct exec *e = exec_new(threads);
	atomic_int finished = 0;
	struct exec_wait root_done;
	struct tree_task root;
	int expected = 0;

	assert_non_null(e);
	for (int d = 0, level = 1; d <= DEPTH; d++, level *= FANOUT)
		expected += level;
	alarm(20); /* a deadlock fails the test instead of hanging it */
	exec_wait_init(&root_done, 1);
	root = (struct tree_task){.task.run = tree_run,
				  .e = e,
				  .depth = DEPTH,
				  .finished = &finished,
				  .parent = &root_done};
	exec_submit(e, &root.task);
	/* The test thread waits (and helps) like any task would. */
	exec_wait(e, &root_done);
	alarm(0);
	assert_int_equal(atomic_load(&finished), expected);
	exec_free(e);
}

static void test_nested_waits_one_thread(void **state)
{
	run_tree(1);
}

static void test_nested_waits_two_threads(void **state)
{
	run_tree(2);
}

/* A parallel loop from inside a task, itself running a parallel loop. */
struct pfor_outer {
	struct exec_task task;
	struct exec *e;
	atomic_int hits[64][64];
	struct exec_wait done;
};

struct pfor_row {
	struct pfor_outer *o;
	size_t row;
};

static void inner_cell(void *arg, size_t i)
{
	struct pfor_row *r = arg;

	atomic_fetch_add(&r->o->hits[r->row][i], 1);
}

static void outer_row(void *arg, size_t i)
{
	struct pfor_outer *o = arg;
	struct pfor_row r = {o, i};

	exec_parallel_for(o->e, 0, inner_cell, &r, 64);
}

static void outer_run(struct exec_task *t)
{
	struct pfor_outer *o = OCSD_CONTAINER_OF(t, struct pfor_outer, task);

	exec_parallel_for(o->e, 0, outer_row, o, 64);
	exec_wait_done(o->e, &o->done);
}

static void test_parallel_for_nested_one_thread(void **state)
{
	struct pfor_outer *o = calloc(1, sizeof(*o));

	assert_non_null(o);
	o->e = exec_new(1);
	assert_non_null(o->e);
	alarm(20);
	o->task.run = outer_run;
	exec_wait_init(&o->done, 1);
	exec_submit(o->e, &o->task);
	exec_wait(o->e, &o->done);
	alarm(0);
	for (int r = 0; r < 64; r++)
		for (int c = 0; c < 64; c++)
			assert_int_equal(atomic_load(&o->hits[r][c]), 1);
	/* n = 0 calls nothing and returns. */
	exec_parallel_for(o->e, 4, inner_cell, NULL, 0);
	exec_free(o->e);
	free(o);
}

/* Tasks that submit a follow-up while exec_free() drains. */
struct chain_task {
	struct exec_task task;
	struct exec *e;
	int left; /* follow-ups still to submit */
	atomic_int *ran;
};

static void chain_run(struct exec_task *t)
{
	struct chain_task *c = OCSD_CONTAINER_OF(t, struct chain_task, task);

	sleep_us(200);
	atomic_fetch_add(c->ran, 1);
	if (c->left-- > 0)
		exec_submit(c->e, &c->task); /* the same node, run again */
}

static void test_free_drains(void **state)
{
	struct exec *e = exec_new(2);
	struct chain_task c[20];
	atomic_int ran = 0;

	assert_non_null(e);
	for (int i = 0; i < 20; i++) {
		c[i] = (struct chain_task){.task.run = chain_run, .e = e, .left = 4, .ran = &ran};
		exec_submit(e, &c[i].task);
	}
	exec_free(e);
	assert_int_equal(atomic_load(&ran), 20 * 5);
}

/* The engine adapter: every task runs, never more than the cap at once. */
struct sb_probe {
	struct sb_exec_task task;
	atomic_int *running, *max_seen, *ran;
};

static void probe_run(struct sb_exec_task *t)
{
	struct sb_probe *p = OCSD_CONTAINER_OF(t, struct sb_probe, task);
	int now = atomic_fetch_add(p->running, 1) + 1;
	int seen = atomic_load(p->max_seen);

	while (now > seen && !atomic_compare_exchange_weak(p->max_seen, &seen, now))
		;
	sleep_us(300);
	atomic_fetch_sub(p->running, 1);
	atomic_fetch_add(p->ran, 1);
}

static void test_sb_adapter_cap(void **state)
{
	struct exec *e = exec_new(6);
	struct exec_sb *a = exec_sb_new(e, 2);
	struct sb_probe p[60];
	atomic_int running = 0, max_seen = 0, ran = 0;

	assert_non_null(a);
	struct sb_executor x = exec_sb_executor(a);

	for (int i = 0; i < 60; i++) {
		p[i] = (struct sb_probe){.task.run = probe_run,
					 .running = &running,
					 .max_seen = &max_seen,
					 .ran = &ran};
		x.submit(x.ctx, &p[i].task);
	}
	while (atomic_load(&ran) < 60)
		sleep_us(1000);
	exec_sb_free(a); /* waits for the pumps still finishing */
	exec_free(e);
	assert_true(atomic_load(&max_seen) >= 1 && atomic_load(&max_seen) <= 2);
	exec_sb_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_submits_from_threads),
		cmocka_unit_test(test_nested_waits_one_thread),
		cmocka_unit_test(test_nested_waits_two_threads),
		cmocka_unit_test(test_parallel_for_nested_one_thread),
		cmocka_unit_test(test_free_drains),
		cmocka_unit_test(test_sb_adapter_cap),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
