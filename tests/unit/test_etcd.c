/*
 * test_etcd.c - the etcd client (daemon/replica/etcd.c) against a real single-member
 * etcd started by the test (etcd_harness.h): keys with every byte value,
 * ranges with limits and revisions, deletes, transactions whose compare
 * holds or fails, leases that are kept alive and then expire, watches that
 * see every change in order and resume after a compaction, endpoints tried
 * in turn, timeouts on a paused etcd, the answer-size bound, and TLS with
 * client certificates (made at test time).
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
#include <event2/event.h>

#include "etcd.h"
#include "etcd_harness.h"

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

static struct etcd_client *client_for(const char *endpoints, int timeout_ms)
{
	struct etcd_opts o = {.endpoints = endpoints, .timeout_ms = timeout_ms};
	struct etcd_client *c = NULL;
	char err[256];

	assert_int_equal(etcd_client_new(&o, &c, err, sizeof(err)), 0);
	return c;
}

static struct etcd_client *client(void)
{
	return client_for(etcd.endpoint, 2000);
}

static int64_t put(struct etcd_client *c, const char *k, const char *v)
{
	int64_t rev = 0;

	assert_int_equal(etcd_put(c, k, strlen(k), v, strlen(v), 0, &rev), 0);
	assert_true(rev > 0);
	return rev;
}

static void test_kv(void **state)
{
	struct etcd_client *c = client();
	/* every byte value, NUL and 0xff included, in keys and values */
	uint8_t key[256], value[300];
	struct etcd_kvs r;
	int64_t rev1, rev2, deleted;
	uint8_t *end;
	size_t end_len;

	(void)state;
	for (int i = 0; i < 256; i++)
		key[i] = (uint8_t)i;
	for (int i = 0; i < 300; i++)
		value[i] = (uint8_t)(255 - i % 256);
	assert_int_equal(etcd_put(c, key, sizeof(key), value, sizeof(value), 0, &rev1), 0);
	assert_int_equal(etcd_range(c, key, sizeof(key), NULL, 0, 0, 0, &r), 0);
	assert_int_equal(r.n, 1);
	assert_int_equal(r.kvs[0].key_len, sizeof(key));
	assert_memory_equal(r.kvs[0].key, key, sizeof(key));
	assert_int_equal(r.kvs[0].value_len, sizeof(value));
	assert_memory_equal(r.kvs[0].value, value, sizeof(value));
	assert_int_equal(r.kvs[0].mod_revision, rev1);
	assert_int_equal(r.kvs[0].create_revision, rev1);
	assert_int_equal(r.kvs[0].version, 1);
	etcd_kvs_clear(&r);

	/* an empty value is a value */
	rev2 = put(c, "kv/empty", "");
	assert_true(rev2 > rev1);
	assert_int_equal(etcd_range(c, "kv/empty", 8, NULL, 0, 0, 0, &r), 0);
	assert_int_equal(r.n, 1);
	assert_int_equal(r.kvs[0].value_len, 0);
	etcd_kvs_clear(&r);

	/* a prefix range in key order, with a limit */
	put(c, "kv/b", "2");
	put(c, "kv/a", "1");
	put(c, "kv/c", "3");
	put(c, "kv0", "not in the prefix");
	end = etcd_prefix_end("kv/", 3, &end_len);
	assert_non_null(end);
	assert_int_equal(etcd_range(c, "kv/", 3, end, end_len, 0, 0, &r), 0);
	assert_int_equal(r.n, 4);
	assert_memory_equal(r.kvs[0].key, "kv/a", 4);
	assert_memory_equal(r.kvs[1].key, "kv/b", 4);
	assert_memory_equal(r.kvs[2].key, "kv/c", 4);
	assert_memory_equal(r.kvs[3].key, "kv/empty", 8);
	assert_false(r.more);
	etcd_kvs_clear(&r);
	assert_int_equal(etcd_range(c, "kv/", 3, end, end_len, 2, 0, &r), 0);
	assert_int_equal(r.n, 2);
	assert_true(r.more);
	etcd_kvs_clear(&r);

	/* a past revision: kv/empty was there, kv/a was not */
	assert_int_equal(etcd_range(c, "kv/", 3, end, end_len, 0, rev2, &r), 0);
	assert_int_equal(r.n, 1);
	assert_memory_equal(r.kvs[0].key, "kv/empty", 8);
	etcd_kvs_clear(&r);

	/* an absent key is no error, and no row */
	assert_int_equal(etcd_range(c, "kv/none", 7, NULL, 0, 0, 0, &r), 0);
	assert_int_equal(r.n, 0);
	assert_true(r.revision > rev2);
	etcd_kvs_clear(&r);

	assert_int_equal(etcd_delete(c, "kv/", 3, end, end_len, &deleted), 0);
	assert_int_equal(deleted, 4);
	assert_int_equal(etcd_range(c, "kv/", 3, end, end_len, 0, 0, &r), 0);
	assert_int_equal(r.n, 0);
	etcd_kvs_clear(&r);
	assert_int_equal(etcd_range(c, "kv0", 3, NULL, 0, 0, 0, &r), 0);
	assert_int_equal(r.n, 1);
	etcd_kvs_clear(&r);
	free(end);

	/* the prefix end of 0xff bytes is the end of the keyspace */
	end = etcd_prefix_end("\xff\xff", 2, &end_len);
	assert_int_equal(end_len, 1);
	assert_int_equal(end[0], 0);
	free(end);
	end = etcd_prefix_end("a\xff", 2, &end_len);
	assert_int_equal(end_len, 1);
	assert_int_equal(end[0], 'b');
	free(end);
	assert_string_equal(etcd_last_error(c), "");
	etcd_client_free(c);
}

static void test_txn(void **state)
{
	struct etcd_client *c = client();
	int64_t rev = put(c, "txn/head", "1"), rev2;
	struct etcd_cmp cmp = {.key = "txn/head",
			       .key_len = 8,
			       .target = ETCD_CMP_MOD,
			       .result = ETCD_CMP_EQUAL,
			       .number = rev};
	struct etcd_op ok[] = {
		{.kind = ETCD_OP_PUT,
		 .key = "txn/head",
		 .key_len = 8,
		 .value = "2",
		 .value_len = 1},
		{.kind = ETCD_OP_PUT,
		 .key = "txn/log/2",
		 .key_len = 9,
		 .value = "e",
		 .value_len = 1},
	};
	struct etcd_op bad[] = {
		{.kind = ETCD_OP_PUT,
		 .key = "txn/lost",
		 .key_len = 8,
		 .value = "x",
		 .value_len = 1},
	};
	struct etcd_kvs r;
	bool succeeded;

	(void)state;
	/* the compare holds: both puts, in one revision */
	assert_int_equal(etcd_txn(c, &cmp, 1, ok, 2, bad, 1, &succeeded, &rev2), 0);
	assert_true(succeeded);
	assert_int_equal(rev2, rev + 1);
	assert_int_equal(etcd_range(c, "txn/log/2", 9, NULL, 0, 0, 0, &r), 0);
	assert_int_equal(r.n, 1);
	assert_int_equal(r.kvs[0].mod_revision, rev2);
	etcd_kvs_clear(&r);

	/* the same compare again fails: the head moved; only the failure branch ran */
	assert_int_equal(etcd_txn(c, &cmp, 1, ok, 1, bad, 1, &succeeded, NULL), 0);
	assert_false(succeeded);
	assert_int_equal(etcd_range(c, "txn/head", 8, NULL, 0, 0, 0, &r), 0);
	assert_memory_equal(r.kvs[0].value, "2", 1);
	assert_int_equal(r.kvs[0].mod_revision, rev2);
	etcd_kvs_clear(&r);
	assert_int_equal(etcd_range(c, "txn/lost", 8, NULL, 0, 0, 0, &r), 0);
	assert_int_equal(r.n, 1);
	etcd_kvs_clear(&r);

	/* an absent key: CREATE == 0 holds; VALUE compares and delete ops */
	struct etcd_cmp cmps[] = {
		{.key = "txn/none", .key_len = 8, .target = ETCD_CMP_CREATE, .number = 0},
		{.key = "txn/head",
		 .key_len = 8,
		 .target = ETCD_CMP_VALUE,
		 .value = "2",
		 .value_len = 1},
	};
	struct etcd_op del = {.kind = ETCD_OP_DELETE, .key = "txn/lost", .key_len = 8};

	assert_int_equal(etcd_txn(c, cmps, 2, &del, 1, NULL, 0, &succeeded, NULL), 0);
	assert_true(succeeded);
	assert_int_equal(etcd_range(c, "txn/lost", 8, NULL, 0, 0, 0, &r), 0);
	assert_int_equal(r.n, 0);
	etcd_kvs_clear(&r);
	cmps[1].value = "3";
	assert_int_equal(etcd_txn(c, cmps, 2, ok, 1, NULL, 0, &succeeded, NULL), 0);
	assert_false(succeeded);
	etcd_client_free(c);
}

static void test_lease_expires(void **state)
{
	struct etcd_client *c = client();
	int64_t id, ttl, ttl2;
	struct etcd_kvs r;

	(void)state;
	assert_int_equal(etcd_lease_grant(c, 2, &id, &ttl), 0);
	assert_true(id != 0);
	assert_true(ttl >= 2);
	assert_int_equal(etcd_put(c, "lease/k", 7, "v", 1, id, NULL), 0);
	/* kept alive past its TTL, the key stays */
	for (int i = 0; i < 6; i++) {
		usleep(500000);
		assert_int_equal(etcd_lease_keepalive(c, id, &ttl2), 0);
		assert_int_equal(ttl2, ttl);
	}
	assert_int_equal(etcd_range(c, "lease/k", 7, NULL, 0, 0, 0, &r), 0);
	assert_int_equal(r.n, 1);
	assert_int_equal(r.kvs[0].lease, id);
	etcd_kvs_clear(&r);
	assert_int_equal(etcd_lease_ttl(c, id, &ttl2), 0);
	assert_true(ttl2 > 0 && ttl2 <= ttl);
	/* left alone, it expires and takes its key with it */
	usleep((useconds_t)(ttl + 1) * 1000000);
	for (int i = 0; i < 40; i++) {
		assert_int_equal(etcd_range(c, "lease/k", 7, NULL, 0, 0, 0, &r), 0);
		size_t n = r.n;

		etcd_kvs_clear(&r);
		if (n == 0)
			break;
		usleep(100000);
	}
	assert_int_equal(etcd_range(c, "lease/k", 7, NULL, 0, 0, 0, &r), 0);
	assert_int_equal(r.n, 0);
	etcd_kvs_clear(&r);
	assert_int_equal(etcd_lease_keepalive(c, id, &ttl2), -ENOENT);
	assert_int_equal(etcd_lease_ttl(c, id, &ttl2), -ENOENT);
	/* a put on an expired lease is refused */
	assert_int_equal(etcd_put(c, "lease/k", 7, "v", 1, id, NULL), -ENOENT);
	assert_non_null(strstr(etcd_last_error(c), "lease not found"));

	/* revoke ends a lease at once */
	assert_int_equal(etcd_lease_grant(c, 30, &id, NULL), 0);
	assert_int_equal(etcd_put(c, "lease/r", 7, "v", 1, id, NULL), 0);
	assert_int_equal(etcd_lease_revoke(c, id), 0);
	assert_int_equal(etcd_range(c, "lease/r", 7, NULL, 0, 0, 0, &r), 0);
	assert_int_equal(r.n, 0);
	etcd_kvs_clear(&r);
	etcd_client_free(c);
}

/* What a watch callback saw. */
struct seen {
	struct etcd_watch *w;
	char keys[64][32];
	bool deletes[64];
	int64_t revs[64];
	int n;
	int compacted, down;
	int64_t compact_rev;
	int64_t resume_at; /* > 0: resume there on COMPACTED */
};

static void on_watch(void *ctx, enum etcd_watch_status status, const struct etcd_event *evs,
		     size_t n, int64_t revision)
{
	struct seen *s = ctx;

	if (status == ETCD_WATCH_DOWN) {
		s->down++;
		return;
	}
	if (status == ETCD_WATCH_COMPACTED) {
		s->compacted++;
		s->compact_rev = revision;
		if (s->resume_at > 0)
			etcd_watch_resume(s->w, s->resume_at);
		return;
	}
	for (size_t i = 0; i < n && s->n < 64; i++) {
		snprintf(s->keys[s->n], sizeof(s->keys[0]), "%.*s", (int)evs[i].kv.key_len,
			 (const char *)evs[i].kv.key);
		s->deletes[s->n] = evs[i].is_delete;
		s->revs[s->n] = evs[i].kv.mod_revision;
		s->n++;
	}
	assert_int_equal(revision, evs[n - 1].kv.mod_revision);
}

/* Runs base until cond holds or 5 s pass. */
static void run_until(struct event_base *base, const int *counter, int want)
{
	struct timeval tick = {0, 20000};

	for (int i = 0; i < 250 && *counter < want; i++) {
		event_base_loopexit(base, &tick);
		event_base_dispatch(base);
	}
}

static void test_watch(void **state)
{
	struct etcd_client *c = client();
	struct event_base *base = event_base_new();
	struct seen s = {0};
	int64_t r1, r2, r3;
	uint8_t *end;
	size_t end_len;

	(void)state;
	end = etcd_prefix_end("w/", 2, &end_len);
	r1 = put(c, "w/a", "1");
	r2 = put(c, "w/b", "2");
	put(c, "x/other", "not watched");
	assert_int_equal(etcd_delete(c, "w/a", 3, NULL, 0, NULL), 0);
	/* from r1: the history first, then live changes */
	assert_int_equal(etcd_watch_new(c, base, "w/", 2, end, end_len, r1, on_watch, &s, &s.w), 0);
	run_until(base, &s.n, 3);
	assert_int_equal(s.n, 3);
	assert_string_equal(s.keys[0], "w/a");
	assert_int_equal(s.revs[0], r1);
	assert_string_equal(s.keys[1], "w/b");
	assert_int_equal(s.revs[1], r2);
	assert_string_equal(s.keys[2], "w/a");
	assert_true(s.deletes[2]);
	r3 = put(c, "w/c", "3");
	run_until(base, &s.n, 4);
	assert_int_equal(s.n, 4);
	assert_string_equal(s.keys[3], "w/c");
	assert_int_equal(s.revs[3], r3);
	assert_int_equal(s.compacted, 0);
	etcd_watch_free(s.w);

	/* compacted past the start: the watch says so with the compact
	 * revision; re-read at the newest revision, resume after it, and the
	 * changes after the re-read still arrive, once each */
	memset(&s, 0, sizeof(s));
	assert_int_equal(etcd_compact(c, r3), 0);
	struct etcd_kvs r;

	assert_int_equal(etcd_range(c, "w/", 2, end, end_len, 0, 0, &r), 0);
	assert_int_equal(r.n, 2); /* w/b, w/c */
	s.resume_at = r.revision + 1;
	etcd_kvs_clear(&r);
	assert_int_equal(etcd_watch_new(c, base, "w/", 2, end, end_len, r1, on_watch, &s, &s.w), 0);
	run_until(base, &s.compacted, 1);
	assert_int_equal(s.compacted, 1);
	assert_int_equal(s.compact_rev, r3);
	int64_t r4 = put(c, "w/d", "4");

	run_until(base, &s.n, 1);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.keys[0], "w/d");
	assert_int_equal(s.revs[0], r4);
	/* a range at a compacted revision is refused as such */
	assert_int_equal(etcd_range(c, "w/", 2, end, end_len, 0, r1, &r), -ERANGE);
	etcd_watch_free(s.w);

	/* etcd restarts under a live watch: it reconnects and loses nothing */
	memset(&s, 0, sizeof(s));
	assert_int_equal(etcd_watch_new(c, base, "w/", 2, end, end_len, r4 + 1, on_watch, &s, &s.w),
			 0);
	run_until(base, &s.n, 1); /* opens the stream (nothing to see yet) */
	eh_kill(&etcd);
	run_until(base, &s.down, 1);
	assert_true(s.down >= 1);
	assert_int_equal(eh_restart(&etcd), 0);
	int64_t r5 = put(c, "w/e", "5");

	run_until(base, &s.n, 1);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.keys[0], "w/e");
	assert_int_equal(s.revs[0], r5);
	etcd_watch_free(s.w);
	free(end);
	event_base_free(base);
	etcd_client_free(c);
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_endpoints_and_timeouts(void **state)
{
	char list[300];
	struct etcd_client *c;
	struct etcd_kvs r;
	int dead = eh_dead_port();
	double t0;

	(void)state;
	assert_true(dead > 0);
	/* nobody listens: refused at once, naming the endpoint */
	snprintf(list, sizeof(list), "http://127.0.0.1:%d", dead);
	c = client_for(list, 1000);
	t0 = mono_s();
	assert_int_equal(etcd_range(c, "k", 1, NULL, 0, 0, 0, &r), -ECONNREFUSED);
	assert_true(mono_s() - t0 < 1.0);
	assert_non_null(strstr(etcd_last_error(c), "127.0.0.1"));
	etcd_client_free(c);

	/* the first endpoint is dead: the second serves */
	snprintf(list, sizeof(list), "http://127.0.0.1:%d,%s", dead, etcd.endpoint);
	c = client_for(list, 1000);
	assert_int_equal(etcd_put(c, "ep/k", 4, "v", 1, 0, NULL), 0);
	assert_int_equal(etcd_range(c, "ep/k", 4, NULL, 0, 0, 0, &r), 0);
	assert_int_equal(r.n, 1);
	etcd_kvs_clear(&r);

	/* a paused etcd: the request times out (once per endpoint tried) */
	assert_int_equal(eh_pause(&etcd), 0);
	t0 = mono_s();
	assert_int_equal(etcd_range(c, "ep/k", 4, NULL, 0, 0, 0, &r), -ETIMEDOUT);
	double took = mono_s() - t0;

	eh_resume(&etcd);
	assert_true(took >= 0.9 && took < 3.0);
	assert_non_null(strstr(etcd_last_error(c), "no answer within 1000 ms"));
	/* and serves again once etcd does (a resumed etcd on a loaded machine
	 * may take more than one timeout to answer: up to ten tries) */
	int rc = -ETIMEDOUT;

	for (int i = 0; i < 10 && rc == -ETIMEDOUT; i++)
		rc = etcd_range(c, "ep/k", 4, NULL, 0, 0, 0, &r);
	assert_int_equal(rc, 0);
	assert_int_equal(r.n, 1);
	etcd_kvs_clear(&r);
	etcd_client_free(c);

	/* bad options name the option */
	struct etcd_opts o = {.endpoints = "ftp://x:1"};
	char err[256];

	assert_int_equal(etcd_client_new(&o, &c, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "--etcd-endpoints"));
	o.endpoints = "https://127.0.0.1:1";
	assert_int_equal(etcd_client_new(&o, &c, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "--etcd-ca"));
}

static void test_bounds(void **state)
{
	struct etcd_opts o = {.endpoints = etcd.endpoint, .max_response_bytes = 4096};
	struct etcd_client *c;
	char err[256], big[8192];
	struct etcd_kvs r;

	(void)state;
	assert_int_equal(etcd_client_new(&o, &c, err, sizeof(err)), 0);
	memset(big, 'v', sizeof(big));
	assert_int_equal(etcd_put(c, "big/k", 5, big, sizeof(big), 0, NULL), 0);
	assert_int_equal(etcd_range(c, "big/k", 5, NULL, 0, 0, 0, &r), -E2BIG);
	assert_non_null(strstr(etcd_last_error(c), "larger than 4096"));
	/* the client still works after a refused answer */
	assert_int_equal(etcd_range(c, "nothing", 7, NULL, 0, 0, 0, &r), 0);
	etcd_kvs_clear(&r);
	etcd_client_free(c);
}

static void test_tls(void **state)
{
	struct eh_etcd t;
	struct etcd_opts o = {.timeout_ms = 2000};
	struct etcd_client *c;
	struct etcd_kvs r;
	char err[256];
	int64_t id, ttl;

	(void)state;
	assert_int_equal(eh_start(&t, true), 0);
	o.endpoints = t.endpoint;
	o.ca_file = t.ca;
	o.cert_file = t.cert;
	o.key_file = t.key;
	assert_int_equal(etcd_client_new(&o, &c, err, sizeof(err)), 0);
	assert_int_equal(etcd_put(c, "tls/k", 5, "v", 1, 0, NULL), 0);
	assert_int_equal(etcd_range(c, "tls/k", 5, NULL, 0, 0, 0, &r), 0);
	assert_int_equal(r.n, 1);
	etcd_kvs_clear(&r);
	/* a streamed answer over TLS */
	assert_int_equal(etcd_lease_grant(c, 5, &id, NULL), 0);
	assert_int_equal(etcd_lease_keepalive(c, id, &ttl), 0);
	assert_int_equal(ttl, 5);
	etcd_client_free(c);

	/* without a client certificate etcd refuses the connection */
	o.cert_file = o.key_file = NULL;
	assert_int_equal(etcd_client_new(&o, &c, err, sizeof(err)), 0);
	assert_int_not_equal(etcd_range(c, "tls/k", 5, NULL, 0, 0, 0, &r), 0);
	etcd_client_free(c);

	/* a CA that did not sign etcd's certificate: refused by the client */
	char rogue[320];

	snprintf(rogue, sizeof(rogue), "%s/certs/rogue-ca.pem", t.dir);
	o.ca_file = rogue;
	o.cert_file = t.cert;
	o.key_file = t.key;
	assert_int_equal(etcd_client_new(&o, &c, err, sizeof(err)), 0);
	assert_int_not_equal(etcd_range(c, "tls/k", 5, NULL, 0, 0, 0, &r), 0);
	etcd_client_free(c);

	/* a key that does not match the certificate is an option error */
	o.ca_file = t.ca;
	o.key_file = rogue;
	assert_int_equal(etcd_client_new(&o, &c, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "--etcd-key"));
	eh_stop(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kv),
		cmocka_unit_test(test_txn),
		cmocka_unit_test(test_lease_expires),
		cmocka_unit_test(test_watch),
		cmocka_unit_test(test_endpoints_and_timeouts),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_tls),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
