/*
 * leader.c - leader election with an etcd lease (leader.h).
 *
 * States of a candidate: waiting (another replica's key exists: try again
 * every TTL/3 with a fresh lease, revoked after each failed try), leading
 * (the key is ours: the keep-alive thread renews the lease every TTL/3),
 * lost (on_lost was called once; the thread has ended). Invariant: a
 * replica considers itself leading only between the transaction that
 * created the key and the first moment its lease may have ended by etcd's
 * count, which is never later than a TTL after the last keep-alive that
 * etcd answered was sent.
 */
#include "leader.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct leader {
	struct etcd_client *c;	/* the campaigning thread's */
	struct etcd_client *ka; /* the keep-alive thread's */
	char key[600], value[600];
	int ttl_s;
	int64_t lease, revision;
	pthread_t thread;
	bool running;
	pthread_mutex_t mu; /* guards stop and renewed_ms */
	pthread_cond_t cv;
	bool stop;
	/* when the last request etcd answered for the lease (its grant, or a
	 * keep-alive) was sent, mono_ms: the lease lasts at most a TTL from it */
	int64_t renewed_ms;
	void (*on_lost)(void *ctx, const char *why);
	void *ctx;
};

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int ld_new(const struct etcd_opts *etcd, const struct ld_opts *opts, struct leader **out, char *err,
	   size_t err_len)
{
	struct leader *ld = calloc(1, sizeof(*ld));
	struct etcd_opts ko = *etcd;
	int rc;

	*out = NULL;
	if (!ld)
		return -ENOMEM;
	ld->ttl_s = opts->ttl_s > 0 ? opts->ttl_s : 1;
	/* a keep-alive that takes longer than TTL/3 is as good as lost */
	ko.timeout_ms = ld->ttl_s * 1000 / 3;
	if (!opts->replica_id || !*opts->replica_id || strchr(opts->replica_id, ' ') ||
	    !opts->advertise || !*opts->advertise) {
		snprintf(err, err_len,
			 "--replica-id NAME (no spaces) and --advertise HOST:PORT "
			 "are both required");
		free(ld);
		return -EINVAL;
	}
	snprintf(ld->key, sizeof(ld->key), "%sleader", opts->prefix);
	snprintf(ld->value, sizeof(ld->value), "%s %s", opts->replica_id, opts->advertise);
	pthread_mutex_init(&ld->mu, NULL);
	pthread_cond_init(&ld->cv, NULL);
	rc = etcd_client_new(etcd, &ld->c, err, err_len);
	if (rc == 0)
		rc = etcd_client_new(&ko, &ld->ka, err, err_len);
	if (rc) {
		ld_free(ld);
		return rc;
	}
	*out = ld;
	return 0;
}

static void lost(struct leader *ld, const char *why)
{
	ld->on_lost(ld->ctx, why);
}

static void *keepalive_main(void *arg)
{
	struct leader *ld = arg;
	int64_t period_ms = ld->ttl_s * 1000 / 3, last_ok_sent = mono_ms();

	for (;;) {
		struct timespec until;
		int64_t sent, ttl = 0;
		bool stop;
		int rc;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += period_ms / 1000;
		until.tv_nsec += (period_ms % 1000) * 1000000;
		if (until.tv_nsec >= 1000000000) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
		pthread_mutex_lock(&ld->mu);
		while (!ld->stop && pthread_cond_timedwait(&ld->cv, &ld->mu, &until) == 0)
			;
		stop = ld->stop;
		pthread_mutex_unlock(&ld->mu);
		if (stop)
			return NULL;
		sent = mono_ms();
		rc = etcd_lease_keepalive(ld->ka, ld->lease, &ttl);
		if (rc == 0) {
			last_ok_sent = sent;
			pthread_mutex_lock(&ld->mu);
			ld->renewed_ms = sent;
			pthread_mutex_unlock(&ld->mu);
		}
		if (rc == -ENOENT) {
			lost(ld, "the leader lease expired");
			return NULL;
		}
		if (mono_ms() - last_ok_sent >= ld->ttl_s * 1000) {
			lost(ld, "no lease keep-alive answered within the TTL");
			return NULL;
		}
	}
}

/* One try: a fresh lease and the key if absent. 1 leading, 0 not, < 0 error. */
static int try_lead(struct leader *ld)
{
	struct etcd_cmp cmp = {.key = ld->key,
			       .key_len = strlen(ld->key),
			       .target = ETCD_CMP_CREATE,
			       .result = ETCD_CMP_EQUAL,
			       .number = 0};
	struct etcd_op put = {.kind = ETCD_OP_PUT,
			      .key = ld->key,
			      .key_len = strlen(ld->key),
			      .value = ld->value,
			      .value_len = strlen(ld->value)};
	bool succeeded;
	int64_t rev, sent = mono_ms();
	int rc = etcd_lease_grant(ld->c, ld->ttl_s, &ld->lease, NULL);

	if (rc)
		return rc;
	pthread_mutex_lock(&ld->mu);
	ld->renewed_ms = sent;
	pthread_mutex_unlock(&ld->mu);
	put.lease = ld->lease;
	rc = etcd_txn(ld->c, &cmp, 1, &put, 1, NULL, 0, &succeeded, &rev);
	if (rc == 0 && succeeded) {
		ld->revision = rev;
		return 1;
	}
	/* An answer lost on the way makes the client send the transaction
	 * again to the next endpoint, where the compare fails on the key its
	 * first attempt created: a key under this try's lease is ours. */
	if (rc == 0 || rc == -ETIMEDOUT) {
		struct etcd_kvs r;
		bool ours = etcd_range(ld->c, ld->key, strlen(ld->key), NULL, 0, 0, 0, &r) == 0 &&
			    r.n == 1 && r.kvs[0].lease == ld->lease;

		if (ours)
			ld->revision = r.kvs[0].create_revision;
		etcd_kvs_clear(&r);
		if (ours)
			return 1;
	}
	(void)etcd_lease_revoke(ld->c, ld->lease); /* else it expires by itself */
	ld->lease = 0;
	return rc;
}

static void stop_thread(struct leader *ld);

int ld_try(struct leader *ld, void (*on_lost)(void *ctx, const char *why), void *ctx)
{
	int rc;

	stop_thread(ld); /* the keep-alive of an earlier term, ended by on_lost */
	rc = try_lead(ld);
	if (rc != 1)
		return rc;
	ld->on_lost = on_lost;
	ld->ctx = ctx;
	ld->stop = false;
	if (pthread_create(&ld->thread, NULL, keepalive_main, ld) != 0) {
		(void)etcd_lease_revoke(ld->c, ld->lease);
		ld->lease = 0;
		return -EAGAIN;
	}
	ld->running = true;
	return 1;
}

int ld_campaign(struct leader *ld, int timeout_ms, volatile sig_atomic_t *stop,
		void (*on_lost)(void *ctx, const char *why), void *ctx)
{
	int64_t deadline = timeout_ms >= 0 ? mono_ms() + timeout_ms : INT64_MAX;

	for (;;) {
		int rc;

		if (stop && *stop)
			return -EINTR;
		rc = ld_try(ld, on_lost, ctx);
		if (rc == 1)
			return 0;
		/* unreachable or unavailable etcd: wait for it like for a leader */
		if (rc < 0 && rc != -ECONNREFUSED && rc != -ETIMEDOUT && rc != -ENOENT)
			return rc;
		if (mono_ms() >= deadline)
			return -ETIMEDOUT;
		usleep((useconds_t)ld->ttl_s * 1000000 / 3);
	}
}

const char *ld_key(const struct leader *ld)
{
	return ld->key;
}

int64_t ld_revision(const struct leader *ld)
{
	return ld->revision;
}

int64_t ld_lease(const struct leader *ld)
{
	return ld->lease;
}

int64_t ld_lease_age_ms(struct leader *ld)
{
	int64_t renewed;

	pthread_mutex_lock(&ld->mu);
	renewed = ld->renewed_ms;
	pthread_mutex_unlock(&ld->mu);
	return mono_ms() - renewed;
}

int ld_ttl_ms(const struct leader *ld)
{
	return ld->ttl_s * 1000;
}

int ld_current(struct leader *ld, char *buf, size_t len)
{
	struct etcd_kvs r;
	int rc = etcd_range(ld->c, ld->key, strlen(ld->key), NULL, 0, 0, 0, &r);

	buf[0] = 0;
	if (rc == 0 && r.n == 1)
		snprintf(buf, len, "%.*s", (int)r.kvs[0].value_len, (const char *)r.kvs[0].value);
	etcd_kvs_clear(&r);
	return rc;
}

static void stop_thread(struct leader *ld)
{
	if (!ld->running)
		return;
	pthread_mutex_lock(&ld->mu);
	ld->stop = true;
	pthread_cond_signal(&ld->cv);
	pthread_mutex_unlock(&ld->mu);
	pthread_join(ld->thread, NULL);
	ld->running = false;
}

int ld_resign(struct leader *ld)
{
	int rc = 0;

	stop_thread(ld);
	if (ld->lease)
		rc = etcd_lease_revoke(ld->c, ld->lease);
	ld->lease = 0;
	return rc;
}

void ld_free(struct leader *ld)
{
	if (!ld)
		return;
	stop_thread(ld);
	etcd_client_free(ld->c);
	etcd_client_free(ld->ka);
	pthread_mutex_destroy(&ld->mu);
	pthread_cond_destroy(&ld->cv);
	free(ld);
}
