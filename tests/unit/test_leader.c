/*
 * test_leader.c - leader election with an etcd lease (daemon/replica/leader.c)
 * against a real etcd (etcd_harness.h): exactly one of two candidates
 * leads while the leader's keep-alive runs (several TTLs), the other takes
 * over within TTL + TTL/3 (+ slack) once the leader stops renewing, the
 * deposed leader learns it (on_lost) and its fenced store writes are
 * refused (-EPERM) while the new leader's go through; a resign hands over
 * at once; a stop flag ends a campaign; a single try (ld_try) never
 * waits, and a replica whose term ended leads again with a new revision
 * that fences out the old term's writes; a try whose answer is lost on the
 * way (sent again by the client, refused by the compare) still leads.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "etcd_harness.h"
#include "leader.h"
#include "store.h"
#include "store_etcd.h"

static struct eh_etcd etcd;

static int group_setup(void **state)
{
	(void)state;
	return eh_start(&etcd, false) == 0 ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	eh_stop(&etcd);
	return 0;
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static struct leader *candidate(const char *prefix, const char *id, const char *addr)
{
	struct etcd_opts eo = {.endpoints = etcd.endpoint, .timeout_ms = 1000};
	struct ld_opts lo = {.replica_id = id, .advertise = addr, .prefix = prefix, .ttl_s = 1};
	struct leader *ld = NULL;
	char err[256];

	assert_int_equal(ld_new(&eo, &lo, &ld, err, sizeof(err)), 0);
	return ld;
}

static volatile int lost_calls;
static char lost_why[128];

static void on_lost(void *ctx, const char *why)
{
	(void)ctx;
	snprintf(lost_why, sizeof(lost_why), "%s", why);
	lost_calls++;
}

static struct st_store *store(const char *prefix, struct st_etcd **se)
{
	struct st_etcd_opts o = {.etcd = {.endpoints = etcd.endpoint}, .prefix = prefix};
	struct st_store *st;
	char err[256];

	assert_int_equal(st_etcd_open(&o, &st, se, err, sizeof(err)), 0);
	return st;
}

static int put(struct st_store *st, const char *id)
{
	struct st_job j = {.id = (char *)id, .state = "PENDING"};

	return st_job_put(st, &j);
}

static void test_one_leader_and_failover(void **state)
{
	const char *prefix = "/ocsd/leader-test/";
	struct leader *a = candidate(prefix, "a", "10.0.0.1:50051");
	struct leader *b = candidate(prefix, "b", "10.0.0.2:50051");
	struct st_etcd *a_se, *b_se;
	struct st_store *a_st = store(prefix, &a_se), *b_st = store(prefix, &b_se);
	char who[128];
	double t0, took;

	(void)state;
	lost_calls = 0;
	assert_int_equal(ld_campaign(a, 2000, NULL, on_lost, NULL), 0);
	assert_int_equal(ld_current(b, who, sizeof(who)), 0);
	assert_string_equal(who, "a 10.0.0.1:50051");
	assert_int_equal(st_etcd_set_fence(a_se, ld_key(a), strlen(ld_key(a)), ld_revision(a)), 0);
	assert_int_equal(put(a_st, "j1"), 0);
	/* a keeps its lease over several TTLs: b cannot lead meanwhile */
	assert_int_equal(ld_campaign(b, 3000, NULL, on_lost, NULL), -ETIMEDOUT);
	assert_int_equal(lost_calls, 0);
	assert_int_equal(put(a_st, "j2"), 0);

	/* a stops renewing (as if paused or killed): b leads within a TTL and
	 * its own poll period */
	ld_free(a); /* the keep-alive stops; the lease is not revoked */
	t0 = mono_s();
	assert_int_equal(ld_campaign(b, 5000, NULL, on_lost, NULL), 0);
	took = mono_s() - t0;
	printf("takeover after the leader stopped renewing: %.3f s\n", took);
	assert_true(took < 2.0);
	assert_int_equal(ld_current(b, who, sizeof(who)), 0);
	assert_string_equal(who, "b 10.0.0.2:50051");
	assert_true(ld_revision(b) > 0);
	/* a's writes are fenced out; b's go in after catching up */
	assert_int_equal(put(a_st, "j3"), -EPERM);
	assert_int_equal(st_etcd_set_fence(b_se, ld_key(b), strlen(ld_key(b)), ld_revision(b)), 0);
	assert_int_equal(st_etcd_sync(b_se), 0);
	assert_int_equal(put(b_st, "j3"), 0);

	/* b resigns: the key goes at once, a new candidate leads at once */
	assert_int_equal(ld_resign(b), 0);
	assert_int_equal(lost_calls, 0); /* a resign is not a loss */
	a = candidate(prefix, "a", "10.0.0.1:50051");
	t0 = mono_s();
	assert_int_equal(ld_campaign(a, 1000, NULL, on_lost, NULL), 0);
	assert_true(mono_s() - t0 < 0.5);
	assert_int_equal(put(b_st, "j4"), -EPERM);
	ld_free(b);
	ld_free(a);
	st_close(a_st);
	st_close(b_st);
}

static void test_lost_and_stop(void **state)
{
	const char *prefix = "/ocsd/leader-lost/";
	struct leader *a = candidate(prefix, "a", "h:1"), *b = candidate(prefix, "b", "h:2");
	struct etcd_opts eo = {.endpoints = etcd.endpoint};
	struct etcd_client *c;
	char err[256];
	volatile sig_atomic_t stop = 1;

	(void)state;
	lost_calls = 0;
	assert_int_equal(ld_campaign(a, 2000, NULL, on_lost, NULL), 0);
	/* someone ends a's lease (an operator, or etcd expiring it while a
	 * was paused): a's next keep-alive finds it gone */
	assert_int_equal(etcd_client_new(&eo, &c, err, sizeof(err)), 0);
	assert_int_equal(etcd_lease_revoke(c, ld_lease(a)), 0);
	for (int i = 0; i < 20 && lost_calls == 0; i++)
		usleep(100000);
	assert_int_equal(lost_calls, 1);
	assert_string_equal(lost_why, "the leader lease expired");
	lost_calls = 0;

	/* etcd paused under a leader: no keep-alive answers within the TTL */
	assert_int_equal(ld_campaign(b, 2000, NULL, on_lost, NULL), 0);
	assert_int_equal(eh_pause(&etcd), 0);
	for (int i = 0; i < 40 && lost_calls == 0; i++)
		usleep(100000);
	eh_resume(&etcd);
	assert_int_equal(lost_calls, 1);
	assert_non_null(strstr(lost_why, "within the TTL"));

	/* a stop flag already set ends a campaign at once */
	ld_free(a);
	a = candidate(prefix, "a", "h:1");
	assert_int_equal(ld_campaign(a, -1, &stop, on_lost, NULL), -EINTR);
	ld_free(a);
	ld_free(b);
	etcd_client_free(c);
}

/*
 * ld_try, the replica thread's single attempt (replica.c): it never waits
 * for a leader to go, and a replica that lost its term can lead again with
 * a new revision, which fences out every write of the old term.
 */
static void test_try_and_new_term(void **state)
{
	const char *prefix = "/ocsd/leader-try/";
	struct leader *a = candidate(prefix, "a", "h:1"), *b = candidate(prefix, "b", "h:2");
	struct etcd_opts eo = {.endpoints = etcd.endpoint};
	struct etcd_client *c;
	struct st_etcd *se;
	struct st_store *st = store(prefix, &se);
	char err[256], who[64];
	int64_t first;
	double t0;

	(void)state;
	lost_calls = 0;
	assert_int_equal(ld_try(a, on_lost, NULL), 1);
	first = ld_revision(a);
	t0 = mono_s();
	assert_int_equal(ld_try(b, on_lost, NULL), 0); /* a leads: no wait */
	assert_true(mono_s() - t0 < 0.5);
	assert_int_equal(st_etcd_set_fence(se, ld_key(a), strlen(ld_key(a)), first), 0);
	assert_int_equal(put(st, "t1"), 0);

	/* a's term ends (its lease revoked): on_lost, then a new term for a */
	assert_int_equal(etcd_client_new(&eo, &c, err, sizeof(err)), 0);
	assert_int_equal(etcd_lease_revoke(c, ld_lease(a)), 0);
	for (int i = 0; i < 20 && lost_calls == 0; i++)
		usleep(100000);
	assert_int_equal(lost_calls, 1);
	assert_int_equal(ld_try(a, on_lost, NULL), 1);
	assert_true(ld_revision(a) > first);
	assert_int_equal(ld_current(b, who, sizeof(who)), 0);
	assert_string_equal(who, "a h:1");
	/* the old term's fence refuses; the new term's takes writes */
	assert_int_equal(put(st, "t2"), -EPERM);
	assert_int_equal(st_etcd_set_fence(se, ld_key(a), strlen(ld_key(a)), ld_revision(a)), 0);
	assert_int_equal(st_etcd_sync(se), 0);
	assert_int_equal(put(st, "t2"), 0);
	/* a resigns: b's next try leads */
	assert_int_equal(ld_resign(a), 0);
	assert_int_equal(ld_try(b, on_lost, NULL), 1);
	assert_int_equal(lost_calls, 1);
	ld_free(a);
	ld_free(b);
	etcd_client_free(c);
	st_close(st);
}

/*
 * The key-creating transaction's answer is lost: the client sends it
 * again, whose compare fails on the key the first attempt created. The key
 * is under this try's lease, so the try leads (a replica that did not know
 * would hold the key for as long as etcd kept the lease, with nobody
 * leading), and its revision is the key's.
 */
static void test_try_answer_lost(void **state)
{
	const char *prefix = "/ocsd/leader-lost/";
	char relayed[64], endpoints[200], err[256], who[64];
	struct eh_proxy *relay;
	struct etcd_opts eo = {.endpoints = endpoints, .timeout_ms = 1000};
	struct ld_opts lo = {.replica_id = "a", .advertise = "h:1", .prefix = prefix, .ttl_s = 1};
	struct leader *a, *b = candidate(prefix, "b", "h:2");
	struct etcd_client *c;
	struct etcd_kvs r;

	(void)state;
	assert_int_equal(eh_proxy_start(etcd.client_port, relayed, sizeof(relayed), &relay), 0);
	snprintf(endpoints, sizeof(endpoints), "%s,%s", relayed, etcd.endpoint);
	assert_int_equal(ld_new(&eo, &lo, &a, err, sizeof(err)), 0);
	/* a try is a lease grant, then the transaction: lose the second answer */
	eh_proxy_lose_answer(relay, 2);
	assert_int_equal(ld_try(a, on_lost, NULL), 1);
	assert_int_equal(eh_proxy_lost(relay), 1);
	assert_int_equal(ld_current(b, who, sizeof(who)), 0);
	assert_string_equal(who, "a h:1");
	eo.endpoints = etcd.endpoint;
	assert_int_equal(etcd_client_new(&eo, &c, err, sizeof(err)), 0);
	assert_int_equal(etcd_range(c, ld_key(a), strlen(ld_key(a)), NULL, 0, 0, 0, &r), 0);
	assert_int_equal(r.n, 1);
	assert_int_equal(r.kvs[0].create_revision, ld_revision(a));
	assert_int_equal(r.kvs[0].lease, ld_lease(a));
	etcd_kvs_clear(&r);
	/* it is a real term: b cannot lead until a resigns */
	assert_int_equal(ld_try(b, on_lost, NULL), 0);
	assert_int_equal(ld_resign(a), 0);
	assert_int_equal(ld_try(b, on_lost, NULL), 1);
	ld_free(a);
	ld_free(b);
	etcd_client_free(c);
	eh_proxy_stop(relay);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_leader_and_failover),
		cmocka_unit_test(test_lost_and_stop),
		cmocka_unit_test(test_try_and_new_term),
		cmocka_unit_test(test_try_answer_lost),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
