/*
 * test_loop_pool.c - unit tests of the event loop hand-off (daemon/core/loop.c)
 * and the solver pool (daemon/core/pool.c): posts from many threads all run on
 * the loop thread in per-thread order, posting has no failure path and
 * nothing posted is lost at shutdown (nodes posted while loop_free drains
 * included), pool back-pressure with -EBUSY at exactly max_running +
 * queue_max, every pool task's completion runs on the loop, pool_free
 * drains and refuses new tasks (-ESHUTDOWN) meanwhile, and a planner's parallel loop inside a pool
 * task on a 1-thread executor does not deadlock. Fairness (issue 14 #8):
 * heavy tasks (DELTA searches) leave a slot to a light one, and a waiting
 * light task starts before waiting heavy ones.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "executor.h"
#include "loop.h"
#include "pool.h"

#define POSTERS	   4
#define POSTS_EACH 5000

struct shared {
	struct loop *loop;
	pthread_t loop_thread;
	int last_seen[POSTERS]; /* loop thread only */
	int total;		/* loop thread only */
	int out_of_order;
	int wrong_thread;
};

/* Posting cannot fail: loop_post() returns nothing to check. */
_Static_assert(__builtin_types_compatible_p(__typeof__(&loop_post),
					    void (*)(struct loop *, struct loop_node *,
						     void (*)(struct loop_node *))),
	       "loop_post has no failure path");

struct msg {
	struct shared *s;
	int poster;
	int seq;
	struct loop_node node;
};

static void on_msg(struct loop_node *n)
{
	struct msg *m = OCSD_CONTAINER_OF(n, struct msg, node);
	struct shared *s = m->s;

	if (!pthread_equal(pthread_self(), s->loop_thread))
		s->wrong_thread++;
	if (m->seq != s->last_seen[m->poster] + 1)
		s->out_of_order++;
	s->last_seen[m->poster] = m->seq;
	if (++s->total == POSTERS * POSTS_EACH)
		loop_stop(s->loop);
	free(m);
}

struct poster_arg {
	struct shared *s;
	int id;
};

static void *poster(void *arg)
{
	struct poster_arg *p = arg;

	for (int i = 1; i <= POSTS_EACH; i++) {
		struct msg *m = malloc(sizeof(*m));

		if (!m)
			abort();
		*m = (struct msg){p->s, p->id, i, {0}};
		loop_post(p->s->loop, &m->node, on_msg);
	}
	return NULL;
}

static void test_posts_from_threads(void **state)
{
	struct shared s = {.loop = loop_new()};
	struct poster_arg args[POSTERS];
	pthread_t th[POSTERS];

	assert_non_null(s.loop);
	s.loop_thread = pthread_self();
	for (int i = 0; i < POSTERS; i++) {
		args[i] = (struct poster_arg){&s, i};
		pthread_create(&th[i], NULL, poster, &args[i]);
	}
	assert_int_equal(loop_run(s.loop), 0);
	for (int i = 0; i < POSTERS; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(s.total, POSTERS * POSTS_EACH);
	assert_int_equal(s.out_of_order, 0);
	assert_int_equal(s.wrong_thread, 0);
	loop_free(s.loop);
}

struct counted {
	struct loop *loop;
	int *ran;
	int repost; /* times to post itself again from its callback */
	struct loop_node node;
};

static void count_up(struct loop_node *n)
{
	struct counted *c = OCSD_CONTAINER_OF(n, struct counted, node);

	(*c->ran)++;
	if (c->repost-- > 0)
		loop_post(c->loop, &c->node, count_up);
}

static void test_nothing_lost_at_free(void **state)
{
	struct loop *loop = loop_new();
	struct counted c[10];
	int ran = 0;

	assert_non_null(loop);
	for (int i = 0; i < 10; i++) {
		c[i] = (struct counted){loop, &ran, i == 0 ? 3 : 0, {0}};
		loop_post(loop, &c[i].node, count_up);
	}
	/* Never ran: loop_free runs what was queued, and what that posts. */
	loop_free(loop);
	assert_int_equal(ran, 13);
	loop_free(NULL);
}

struct pool_test {
	struct loop *loop;
	pthread_t loop_thread;
	int done;
	int expected;
	int work_on_loop_thread;
	int done_off_loop_thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int gate_open;
};

struct pool_job {
	struct pool_task task;
	struct pool_test *t;
	uint64_t n;
	uint64_t result;
};

static void gate_wait(struct pool_test *t)
{
	pthread_mutex_lock(&t->mu);
	while (!t->gate_open)
		pthread_cond_wait(&t->cv, &t->mu);
	pthread_mutex_unlock(&t->mu);
}

static void work_sum(struct pool_task *pt)
{
	struct pool_job *j = OCSD_CONTAINER_OF(pt, struct pool_job, task);

	if (pthread_equal(pthread_self(), j->t->loop_thread))
		j->t->work_on_loop_thread++;
	gate_wait(j->t);
	for (uint64_t i = 1; i <= j->n; i++)
		j->result += i;
}

static void done_sum(struct pool_task *pt)
{
	struct pool_job *j = OCSD_CONTAINER_OF(pt, struct pool_job, task);
	struct pool_test *t = j->t;

	if (!pthread_equal(pthread_self(), t->loop_thread))
		t->done_off_loop_thread++;
	if (j->result == j->n * (j->n + 1) / 2)
		t->done++;
	free(j);
	if (t->done == t->expected)
		loop_stop(t->loop);
}

static void test_pool_backpressure_and_completion(void **state)
{
	struct pool_test t = {.loop = loop_new(), .loop_thread = pthread_self()};
	struct exec *exec = exec_new(4);
	struct pool *pool;
	int accepted = 0, refused = 0;

	pthread_mutex_init(&t.mu, NULL);
	pthread_cond_init(&t.cv, NULL);
	assert_non_null(exec);
	pool = pool_new(t.loop, exec, 2, 8);
	assert_non_null(pool);
	assert_int_equal(pool_workers(pool), 2);
	/* Tasks block on the gate: exactly 2 running + 8 queued are accepted,
	 * although the executor has threads to spare. */
	for (int i = 0; i < 20; i++) {
		struct pool_job *j = calloc(1, sizeof(*j));
		int rc;

		assert_non_null(j);
		*j = (struct pool_job){
			{.work = work_sum, .done = done_sum}, &t, 1000 + (uint64_t)i, 0};
		rc = pool_submit(pool, &j->task);
		if (rc == 0) {
			accepted++;
		} else {
			assert_int_equal(rc, -EBUSY);
			refused++;
			free(j);
		}
	}
	assert_int_equal(accepted, 10);
	assert_int_equal(refused, 10);
	assert_int_equal(pool_queued(pool), 8);
	t.expected = accepted;
	pthread_mutex_lock(&t.mu);
	t.gate_open = 1;
	pthread_cond_broadcast(&t.cv);
	pthread_mutex_unlock(&t.mu);
	assert_int_equal(loop_run(t.loop), 0);
	assert_int_equal(t.done, accepted);
	assert_int_equal(t.work_on_loop_thread, 0);
	assert_int_equal(t.done_off_loop_thread, 0);
	assert_int_equal(pool_queued(pool), 0);
	pool_free(pool);
	loop_free(t.loop);
	exec_free(exec);
	pthread_cond_destroy(&t.cv);
	pthread_mutex_destroy(&t.mu);
	pool_free(NULL);
}

static void test_pool_free_drains(void **state)
{
	struct pool_test t = {
		.loop = loop_new(), .loop_thread = pthread_self(), .gate_open = 1, .expected = -1};
	struct exec *exec = exec_new(2);
	struct pool *pool = pool_new(t.loop, exec, 1, 100);

	pthread_mutex_init(&t.mu, NULL);
	pthread_cond_init(&t.cv, NULL);
	assert_non_null(pool);
	for (int i = 0; i < 50; i++) {
		struct pool_job *j = calloc(1, sizeof(*j));

		assert_non_null(j);
		*j = (struct pool_job){{.work = work_sum, .done = done_sum}, &t, 10000, 0};
		assert_int_equal(pool_submit(pool, &j->task), 0);
	}
	pool_free(pool);   /* every queued task's work runs ... */
	loop_free(t.loop); /* ... and every completion is delivered */
	assert_int_equal(t.done, 50);
	exec_free(exec);
	pthread_cond_destroy(&t.cv);
	pthread_mutex_destroy(&t.mu);
}

static void *free_pool(void *arg)
{
	pool_free(arg);
	return NULL;
}

/* While pool_free() waits for a running task, new tasks are refused. */
static void test_pool_refuses_while_freed(void **state)
{
	struct pool_test t = {.loop = loop_new(), .loop_thread = pthread_self(), .expected = -1};
	struct exec *exec = exec_new(2);
	struct pool *pool = pool_new(t.loop, exec, 1, 0);
	struct pool_job *running = calloc(1, sizeof(*running));
	struct pool_job late = {.task = {.work = work_sum, .done = done_sum}, .t = &t};
	pthread_t freer;
	int rc = 0;

	pthread_mutex_init(&t.mu, NULL);
	pthread_cond_init(&t.cv, NULL);
	assert_non_null(pool);
	assert_non_null(running);
	*running =
		(struct pool_job){.task = {.work = work_sum, .done = done_sum}, .t = &t, .n = 10};
	assert_int_equal(pool_submit(pool, &running->task), 0);	 /* blocks on the gate */
	assert_int_equal(pool_submit(pool, &late.task), -EBUSY); /* queue_max 0 */
	assert_int_equal(pthread_create(&freer, NULL, free_pool, pool), 0);
	for (int i = 0; i < 5000 && rc != -ESHUTDOWN; i++) {
		rc = pool_submit(pool, &late.task);
		assert_true(rc == -EBUSY || rc == -ESHUTDOWN);
		if (rc != -ESHUTDOWN)
			usleep(1000);
	}
	assert_int_equal(rc, -ESHUTDOWN);
	pthread_mutex_lock(&t.mu);
	t.gate_open = 1;
	pthread_cond_broadcast(&t.cv);
	pthread_mutex_unlock(&t.mu);
	pthread_join(freer, NULL); /* the running task finished and posted */
	loop_free(t.loop);
	assert_int_equal(t.done, 1); /* the running one only */
	exec_free(exec);
	pthread_cond_destroy(&t.cv);
	pthread_mutex_destroy(&t.mu);
}

/* A planner task whose parallel loop runs on the same 1-thread executor. */
struct pfor_job {
	struct pool_task task;
	const struct ocs_pool *solver_pool;
	int hits[1000];
	int done;
};

static void square(void *arg, size_t i)
{
	struct pfor_job *j = arg;

	j->hits[i]++;
}

static void work_pfor(struct pool_task *pt)
{
	struct pfor_job *j = OCSD_CONTAINER_OF(pt, struct pfor_job, task);

	ocs_pool_run(j->solver_pool, square, j, 1000);
}

static void done_pfor(struct pool_task *pt)
{
	OCSD_CONTAINER_OF(pt, struct pfor_job, task)->done = 1;
}

static void test_pool_parallel_loop_one_thread(void **state)
{
	struct loop *loop = loop_new();
	struct exec *exec = exec_new(1);
	struct pool *pool = pool_new(loop, exec, 4, 4);
	struct pfor_job *j = calloc(1, sizeof(*j));

	assert_non_null(pool);
	assert_non_null(j);
	alarm(20); /* a deadlock fails the test instead of hanging it */
	j->task = (struct pool_task){.work = work_pfor, .done = done_pfor};
	j->solver_pool = pool_solver_pool(pool);
	assert_int_equal(pool_submit(pool, &j->task), 0);
	pool_free(pool);
	loop_free(loop);
	alarm(0);
	assert_int_equal(j->done, 1);
	for (int i = 0; i < 1000; i++)
		assert_int_equal(j->hits[i], 1);
	exec_free(exec);
	free(j);
}

/* ---- fairness: heavy tasks block until released, in order of start ---- */

struct fair {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int heavy_running; /* heavy tasks in work now */
	int release;	   /* heavy tasks allowed to finish */
	char order[16];	   /* 'H'/'L' in order of start */
	int n_started;
	int n_done;
	struct loop *loop;
};

struct fair_task {
	struct pool_task task;
	struct fair *f;
};

static void fair_work(struct pool_task *pt)
{
	struct fair *f = OCSD_CONTAINER_OF(pt, struct fair_task, task)->f;

	pthread_mutex_lock(&f->mu);
	f->order[f->n_started++] = pt->heavy ? 'H' : 'L';
	if (pt->heavy) {
		f->heavy_running++;
		pthread_cond_broadcast(&f->cv);
		while (f->release == 0)
			pthread_cond_wait(&f->cv, &f->mu);
		f->release--;
		f->heavy_running--;
	}
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&f->mu);
}

static void fair_done(struct pool_task *pt)
{
	struct fair_task *t = OCSD_CONTAINER_OF(pt, struct fair_task, task);

	t->f->n_done++;
	free(t);
}

static void fair_submit(struct pool *pool, struct fair *f, bool heavy)
{
	struct fair_task *t = calloc(1, sizeof(*t));

	assert_non_null(t);
	*t = (struct fair_task){{.work = fair_work, .done = fair_done, .heavy = heavy}, f};
	assert_int_equal(pool_submit(pool, &t->task), 0);
}

/* Waits (bounded) until pred holds under f->mu. */
static bool fair_wait(struct fair *f, bool (*pred)(const struct fair *, int), int arg)
{
	struct timespec until;
	bool ok;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	pthread_mutex_lock(&f->mu);
	while (!(ok = pred(f, arg)))
		if (pthread_cond_timedwait(&f->cv, &f->mu, &until) != 0)
			break;
	ok = pred(f, arg);
	pthread_mutex_unlock(&f->mu);
	return ok;
}

static bool started(const struct fair *f, int n)
{
	return f->n_started >= n;
}

static bool heavy_running(const struct fair *f, int n)
{
	return f->heavy_running == n;
}

static void fair_finish(struct fair *f, struct pool *pool, int heavy_left)
{
	pthread_mutex_lock(&f->mu);
	f->release += heavy_left;
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&f->mu);
	pool_free(pool);
	loop_free(f->loop);
}

static void test_pool_heavy_leaves_room_for_light(void **state)
{
	struct fair f = {.loop = loop_new()};
	struct exec *exec = exec_new(4);
	struct pool *pool = pool_new(f.loop, exec, 2, 16);

	pthread_mutex_init(&f.mu, NULL);
	pthread_cond_init(&f.cv, NULL);
	assert_non_null(pool);
	bool one_heavy, light_started;
	size_t queued;
	int heavies;

	/* Three searches on two slots: one runs, two wait... */
	for (int i = 0; i < 3; i++)
		fair_submit(pool, &f, true);
	one_heavy = fair_wait(&f, heavy_running, 1);
	queued = pool_queued(pool);
	/* ...and a leaf plan starts at once on the slot kept for it. */
	fair_submit(pool, &f, false);
	light_started = fair_wait(&f, started, 2);
	pthread_mutex_lock(&f.mu);
	heavies = f.heavy_running;
	pthread_mutex_unlock(&f.mu);
	fair_finish(&f, pool, 3); /* first, so that a failure does not hang */
	assert_true(one_heavy);
	assert_int_equal(queued, 2);
	assert_true(light_started);
	assert_int_equal(f.order[1], 'L');
	assert_int_equal(heavies, 1);
	assert_int_equal(f.n_done, 4);
	exec_free(exec);
	pthread_cond_destroy(&f.cv);
	pthread_mutex_destroy(&f.mu);
}

static void test_pool_light_goes_first(void **state)
{
	struct fair f = {.loop = loop_new()};
	struct exec *exec = exec_new(2);
	struct pool *pool = pool_new(f.loop, exec, 1, 16);

	pthread_mutex_init(&f.mu, NULL);
	pthread_cond_init(&f.cv, NULL);
	assert_non_null(pool);
	/* One slot: a search runs, two more wait, then a leaf plan comes. */
	bool one_heavy, three_started;

	for (int i = 0; i < 3; i++)
		fair_submit(pool, &f, true);
	one_heavy = fair_wait(&f, heavy_running, 1);
	fair_submit(pool, &f, false);
	pthread_mutex_lock(&f.mu);
	f.release = 1; /* the first search ends: the leaf plan is next */
	pthread_cond_broadcast(&f.cv);
	pthread_mutex_unlock(&f.mu);
	three_started = fair_wait(&f, started, 3);
	fair_finish(&f, pool, 2);
	assert_true(one_heavy);
	assert_true(three_started);
	assert_memory_equal(f.order, "HLH", 3);
	assert_int_equal(f.n_done, 4);
	exec_free(exec);
	pthread_cond_destroy(&f.cv);
	pthread_mutex_destroy(&f.mu);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_posts_from_threads),
		cmocka_unit_test(test_nothing_lost_at_free),
		cmocka_unit_test(test_pool_backpressure_and_completion),
		cmocka_unit_test(test_pool_free_drains),
		cmocka_unit_test(test_pool_parallel_loop_one_thread),
		cmocka_unit_test(test_pool_refuses_while_freed),
		cmocka_unit_test(test_pool_heavy_leaves_room_for_light),
		cmocka_unit_test(test_pool_light_goes_first),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
