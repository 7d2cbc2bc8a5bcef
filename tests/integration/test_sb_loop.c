/*
 * test_sb_loop.c - the loop of coroutines (southbound/sb_exec.h) on which
 * the transaction engine runs each step's device work (issue 13, fourth
 * pass), and the engine's three ways of running a step.
 *
 * The loop on socket pairs: coroutines that each wait for their own socket
 * all wait at once on the calling thread (a writer fills the sockets in the
 * reverse order, each only after the previous reader finished: a loop that
 * ran the coroutines one after the other would time out on the first);
 * deadlines end a wait with 0 while another coroutine's socket becomes
 * ready; sleeps end in the order of their ends, not of their starts; a
 * coroutine cannot add to the loop that runs it; a second run reuses the
 * stacks and a closed fd number reused by a new socket is waited on anew;
 * outside a loop the same calls poll and sleep.
 * The engine against 5 ocs-devsim devices: the same plan committed and
 * read back with every device in one loop, in loops of 2 devices, and with
 * a task per device; a device whose session was closed before the
 * transaction is handed from the loop to a task of its own (its connect)
 * and commits with the others.
 */
#include "sb_testlib.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#define K 32 /* coroutines of the concurrency case */

static int64_t mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ---- the loop on socket pairs ------------------------------------------- */

struct reader {
	int fd;
	int64_t deadline_ms;
	int waited; /* what sb_exec_wait_fd returned */
	char byte;
	int order; /* place among the finished readers */
	pthread_t thread;
	atomic_int *finished;
};

static void read_one(void *arg)
{
	struct reader *r = arg;
	r->thread = pthread_self();
	r->waited = sb_exec_wait_fd(r->fd, POLLIN, r->deadline_ms);
	if (r->waited == 1 && read(r->fd, &r->byte, 1) != 1)
		r->waited = -EIO;
	r->order = atomic_fetch_add(r->finished, 1);
}

struct writer {
	int fds[K];
	atomic_int *finished;
};

/* Writes to reader K-1 first, then to each reader only once the one after it has finished. */
static void *write_reverse(void *arg)
{
	struct writer *w = arg;
	for (int i = K - 1; i >= 0; i--) {
		int64_t give_up = mono_us() + 5000000;
		while (atomic_load(w->finished) < K - 1 - i && mono_us() < give_up)
			usleep(200);
		char c = (char)('a' + i % 26);
		if (write(w->fds[i], &c, 1) != 1)
			break;
	}
	return NULL;
}

static void test_waits_run_at_once_on_one_thread(void **state)
{
	struct sb_exec_loop *l;
	assert_int_equal(sb_exec_loop_new(&l), 0);
	int sp[K][2];
	struct reader r[K];
	struct writer w;
	atomic_int finished = 0;
	w.finished = &finished;
	for (int i = 0; i < K; i++) {
		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp[i]), 0);
		r[i] = (struct reader){
			.fd = sp[i][0], .deadline_ms = sb_now_ms() + 5000, .finished = &finished};
		w.fds[i] = sp[i][1];
		assert_int_equal(sb_exec_loop_add(l, read_one, &r[i]), 0);
	}
	pthread_t wt;
	assert_int_equal(pthread_create(&wt, NULL, write_reverse, &w), 0);
	assert_int_equal(sb_exec_loop_run(l), 0);
	pthread_join(wt, NULL);
	for (int i = 0; i < K; i++) {
		assert_int_equal(r[i].waited, 1);
		assert_int_equal(r[i].byte, 'a' + i % 26);
		assert_int_equal(r[i].order, K - 1 - i); /* the reverse of their start */
		assert_true(pthread_equal(r[i].thread, pthread_self()));
		close(sp[i][0]);
		close(sp[i][1]);
	}
	sb_exec_loop_free(l);
}

struct poke {
	int fd;
	int64_t after_us;
};

static void sleep_then_write(void *arg)
{
	struct poke *p = arg;
	sb_exec_sleep_until_us(mono_us() + p->after_us);
	assert_int_equal(write(p->fd, "x", 1), 1);
}

static void test_deadline_and_ready(void **state)
{
	struct sb_exec_loop *l;
	assert_int_equal(sb_exec_loop_new(&l), 0);
	int a[2], b[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, a), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, b), 0);
	atomic_int finished = 0;
	/* woken by the poke long before its deadline */
	struct reader ra = {.fd = a[0], .deadline_ms = sb_now_ms() + 10000, .finished = &finished};
	/* nobody writes: its deadline ends it */
	struct reader rb = {.fd = b[0], .deadline_ms = sb_now_ms() + 60, .finished = &finished};
	struct poke p = {.fd = a[1], .after_us = 20000};
	assert_int_equal(sb_exec_loop_add(l, read_one, &ra), 0);
	assert_int_equal(sb_exec_loop_add(l, read_one, &rb), 0);
	assert_int_equal(sb_exec_loop_add(l, sleep_then_write, &p), 0);
	int64_t t0 = sb_now_ms();
	assert_int_equal(sb_exec_loop_run(l), 0);
	assert_int_equal(ra.waited, 1);
	assert_int_equal(ra.byte, 'x');
	assert_int_equal(rb.waited, 0);
	/* not before the deadline itself: the clock ran between setting it and t0 */
	assert_true(sb_now_ms() >= rb.deadline_ms);
	assert_true(sb_now_ms() - t0 < 10000);
	/* a deadline already passed: 0 at once, even with data waiting (the caller reads first) */
	assert_int_equal(write(b[1], "y", 1), 1);
	assert_int_equal(sb_exec_wait_fd(b[0], POLLIN, sb_now_ms() - 1), 0);
	for (int i = 0; i < 2; i++) {
		close(a[i]);
		close(b[i]);
	}
	sb_exec_loop_free(l);
}

struct sleeper {
	int64_t ms;
	int order;
	atomic_int *finished;
};

static void sleep_some(void *arg)
{
	struct sleeper *s = arg;
	sb_exec_sleep_until_us(mono_us() + s->ms * 1000);
	s->order = atomic_fetch_add(s->finished, 1);
}

static struct sb_exec_loop *busy_loop;
static int add_inside;

static void add_from_inside(void *arg)
{
	add_inside = sb_exec_loop_add(busy_loop, sleep_some, arg);
}

static void test_sleeps_end_in_order_and_stacks_are_reused(void **state)
{
	struct sb_exec_loop *l;
	assert_int_equal(sb_exec_loop_new(&l), 0);
	for (int round = 0; round < 2; round++) {
		atomic_int finished = 0;
		struct sleeper s[3] = {{.ms = 250, .finished = &finished},
				       {.ms = 10, .finished = &finished},
				       {.ms = 100, .finished = &finished}};
		for (int i = 0; i < 3; i++)
			assert_int_equal(sb_exec_loop_add(l, sleep_some, &s[i]), 0);
		busy_loop = l;
		assert_int_equal(sb_exec_loop_add(l, add_from_inside, &s[0]), 0);
		assert_int_equal(sb_exec_loop_run(l), 0);
		assert_int_equal(add_inside, -EBUSY);
		assert_int_equal(s[1].order, 0);
		assert_int_equal(s[2].order, 1);
		assert_int_equal(s[0].order, 2);
	}
	sb_exec_loop_free(l);
}

struct late_writer {
	int fd;
	int64_t delay_us;
};

static void *write_late(void *arg)
{
	struct late_writer *w = arg;
	usleep((useconds_t)w->delay_us);
	if (write(w->fd, "z", 1) != 1)
		return (void *)1;
	return NULL;
}

/* A socket closed after a run and a new one under the same fd number: its waits still wake. */
static void test_reused_fd_number(void **state)
{
	struct sb_exec_loop *l;
	assert_int_equal(sb_exec_loop_new(&l), 0);
	int first_fd = -1;
	for (int round = 0; round < 2; round++) {
		int sp[2];
		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
		if (round == 0)
			first_fd = sp[0];
		else
			assert_int_equal(sp[0], first_fd); /* the lowest free number again */
		atomic_int finished = 0;
		struct reader r = {
			.fd = sp[0], .deadline_ms = sb_now_ms() + 5000, .finished = &finished};
		struct late_writer w = {.fd = sp[1], .delay_us = 20000};
		pthread_t wt;
		assert_int_equal(sb_exec_loop_add(l, read_one, &r), 0);
		assert_int_equal(pthread_create(&wt, NULL, write_late, &w), 0);
		assert_int_equal(sb_exec_loop_run(l), 0);
		pthread_join(wt, NULL);
		assert_int_equal(r.waited, 1);
		assert_int_equal(r.byte, 'z');
		close(sp[0]);
		close(sp[1]);
	}
	sb_exec_loop_free(l);
	sb_exec_loop_free(NULL);
}

static void test_outside_a_loop(void **state)
{
	int sp[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
	assert_int_equal(sb_exec_wait_fd(sp[0], POLLIN, sb_now_ms() + 20), 0);
	assert_int_equal(write(sp[1], "q", 1), 1);
	assert_int_equal(sb_exec_wait_fd(sp[0], POLLIN, sb_now_ms() + 5000), 1);
	int64_t t0 = mono_us();
	sb_exec_sleep_until_us(t0 + 15000);
	assert_true(mono_us() - t0 >= 15000);
	close(sp[0]);
	close(sp[1]);
}

/* ---- the engine's three ways of running a step -------------------------- */

#define N 5
static const struct ocs_fabric lab = {
	.pods = 4, .k_leaf = 8, .k_spine = 8, .tau = 2, .k_ocs = 16, .wiring = OCS_WIRING_STRAIGHT};

static void test_engine_loops_slices_and_tasks(void **state)
{
	struct sb_driver *drv;
	struct sb_engine *eng;
	struct tl_fleet fleet;
	assert_int_equal(sb_driver_new(NULL, &drv), 0);
	assert_int_equal(sb_engine_new(4, &eng), 0);
	assert_int_equal(tl_fleet_start(&fleet, N, NULL), 0);
	struct sb_device **devs = tl_devices(drv, &fleet, 0, N, 2000);
	static struct sb_xc xcs[N][16];
	struct sb_txn_device pd[N];
	int group[N], device[N];
	const struct sb_txn_options ways[] = {
		{0}, {.devices_per_loop = 2}, {.thread_per_device = true}, {0}};
	for (size_t round = 0; round < sizeof(ways) / sizeof(ways[0]); round++) {
		for (int i = 0; i < N; i++) {
			group[i] = 0;
			device[i] = i;
			pd[i] = (struct sb_txn_device){
				.dev = devs[i],
				.target = xcs[i],
				.n_target = tl_fabric_device_xcs(&lab, 0, i, (int)round + 1, xcs[i],
								 16)};
		}
		if (round ==
		    3) /* a closed session: the loop hands the device's connect to a task */
			sb_device_disconnect(devs[3]);
		uint64_t connects = atomic_load(&sb_driver_counters(drv)->connects);
		struct tl_verify_ctx v = {.fabric = &lab, .group = group, .device = device};
		struct sb_txn_hooks hooks = {.verify = tl_verify, .arg = &v};
		struct sb_txn_plan plan = {.id = round + 1, .devices = pd, .n_devices = N};
		struct sb_txn_result r;
		assert_int_equal(sb_engine_run(eng, &plan, &hooks, &ways[round], &r), 0);
		if (r.outcome != SB_TXN_COMMITTED)
			fprintf(stderr, "round %zu: %s\n", round, r.message);
		assert_int_equal(r.outcome, SB_TXN_COMMITTED);
		sb_txn_result_clear(&r);
		if (round == 3)
			assert_int_equal(atomic_load(&sb_driver_counters(drv)->connects),
					 connects + 1);
		for (int i = 0; i < N; i++) {
			struct sb_xc *got = NULL;
			size_t n_got = 0;
			assert_int_equal(tl_read_running(devs[i], &got, &n_got), 0);
			assert_true(tl_same(got, n_got, pd[i].target, pd[i].n_target));
			free(got);
		}
	}
	tl_devices_free(devs, N);
	sb_engine_free(eng);
	sb_driver_free(drv);
	assert_int_equal(tl_fleet_stop(&fleet), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_waits_run_at_once_on_one_thread),
		cmocka_unit_test(test_deadline_and_ready),
		cmocka_unit_test(test_sleeps_end_in_order_and_stacks_are_reused),
		cmocka_unit_test(test_reused_fd_number),
		cmocka_unit_test(test_outside_a_loop),
		cmocka_unit_test(test_engine_loops_slices_and_tasks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
