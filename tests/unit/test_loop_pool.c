/*
 * test_loop_pool.c - unit tests of the event loop hand-off (daemon/loop.c)
 * and the solver pool (daemon/pool.c): posts from many threads all run on
 * the loop thread in per-thread order, nothing posted is lost at shutdown,
 * pool back-pressure, and every pool job's completion runs on the loop.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

#include "loop.h"
#include "pool.h"

#define POSTERS 4
#define POSTS_EACH 5000

struct shared {
	struct loop *loop;
	pthread_t loop_thread;
	int last_seen[POSTERS]; /* loop thread only */
	int total;              /* loop thread only */
	int out_of_order;
	int wrong_thread;
};

struct msg {
	struct shared *s;
	int poster;
	int seq;
};

static void on_msg(void *arg)
{
	struct msg *m = arg;
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

		*m = (struct msg){ p->s, p->id, i };
		if (loop_post(p->s->loop, on_msg, m) != 0)
			abort();
	}
	return NULL;
}

static void test_posts_from_threads(void **state)
{
	struct shared s = { .loop = loop_new() };
	struct poster_arg args[POSTERS];
	pthread_t th[POSTERS];

	assert_non_null(s.loop);
	s.loop_thread = pthread_self();
	for (int i = 0; i < POSTERS; i++) {
		args[i] = (struct poster_arg){ &s, i };
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

static void count_up(void *arg)
{
	(*(int *)arg)++;
}

static void test_nothing_lost_at_free(void **state)
{
	struct loop *loop = loop_new();
	int ran = 0;

	for (int i = 0; i < 10; i++)
		assert_int_equal(loop_post(loop, count_up, &ran), 0);
	loop_free(loop); /* never ran: loop_free runs what was queued */
	assert_int_equal(ran, 10);
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

static void work_sum(void *arg)
{
	struct pool_job *j = arg;

	if (pthread_equal(pthread_self(), j->t->loop_thread))
		j->t->work_on_loop_thread++;
	gate_wait(j->t);
	for (uint64_t i = 1; i <= j->n; i++)
		j->result += i;
}

static void done_sum(void *arg)
{
	struct pool_job *j = arg;
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
	struct pool_test t = { .loop = loop_new(), .loop_thread = pthread_self() };
	struct pool *pool;
	int accepted = 0, refused = 0;

	pthread_mutex_init(&t.mu, NULL);
	pthread_cond_init(&t.cv, NULL);
	pool = pool_new(t.loop, 2, 8);
	assert_non_null(pool);
	assert_int_equal(pool_workers(pool), 2);
	/* Workers block on the gate: at most 2 running + 8 queued are accepted. */
	for (int i = 0; i < 20; i++) {
		struct pool_job *j = calloc(1, sizeof(*j));
		int rc;

		*j = (struct pool_job){ &t, 1000 + (uint64_t)i, 0 };
		rc = pool_submit(pool, work_sum, done_sum, j);
		if (rc == 0) {
			accepted++;
		} else {
			assert_int_equal(rc, -EAGAIN);
			refused++;
			free(j);
		}
		usleep(2000); /* let a worker pick the first jobs up */
	}
	assert_true(accepted >= 8 && accepted <= 10);
	assert_int_equal(accepted + refused, 20);
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
	pthread_cond_destroy(&t.cv);
	pthread_mutex_destroy(&t.mu);
	pool_free(NULL);
}

static void test_pool_free_drains(void **state)
{
	struct pool_test t = { .loop = loop_new(), .loop_thread = pthread_self(), .gate_open = 1,
			       .expected = -1 };
	struct pool *pool = pool_new(t.loop, 1, 100);

	pthread_mutex_init(&t.mu, NULL);
	pthread_cond_init(&t.cv, NULL);
	for (int i = 0; i < 50; i++) {
		struct pool_job *j = calloc(1, sizeof(*j));

		*j = (struct pool_job){ &t, 10000, 0 };
		assert_int_equal(pool_submit(pool, work_sum, done_sum, j), 0);
	}
	pool_free(pool);    /* every queued job's work runs ... */
	loop_free(t.loop);  /* ... and every completion is delivered */
	assert_int_equal(t.done, 50);
	pthread_cond_destroy(&t.cv);
	pthread_mutex_destroy(&t.mu);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_posts_from_threads),
		cmocka_unit_test(test_nothing_lost_at_free),
		cmocka_unit_test(test_pool_backpressure_and_completion),
		cmocka_unit_test(test_pool_free_drains),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
