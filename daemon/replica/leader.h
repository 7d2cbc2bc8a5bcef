/*
 * leader.h - leader election among ocsd replicas with an etcd lease
 * (--replica-id, --advertise): the leader key P "leader" holds
 * "REPLICA-ID ADVERTISE" under the leader's lease; a replica leads from the
 * etcd transaction that created the key (its create revision is the fence
 * of every store write, st_etcd_set_fence) until its lease ends.
 *
 * The lease (TTL default 1 s) is kept alive at TTL/3 by a thread of its own
 * with its own etcd client, so a long store write or a busy loop never lets
 * it lapse. When a keep-alive finds the lease gone, or none succeeded for a
 * TTL counted from when the last good one was sent (so never later than
 * etcd's own count), on_lost is called on that thread: the replica no
 * longer leads and must stop touching devices at once.
 *
 * Threading: ld_new, ld_campaign, ld_try, ld_current, ld_revision,
 * ld_resign, ld_free on one thread; on_lost runs on the keep-alive thread;
 * ld_lease_age_ms and ld_ttl_ms from any thread.
 */
#ifndef OCSD_LEADER_H
#define OCSD_LEADER_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "etcd.h"

struct leader;

struct ld_opts {
	const char *replica_id; /* this replica's name */
	const char *advertise;	/* HOST:PORT clients reach it on */
	const char *prefix;	/* the store's key prefix; the key is prefix "leader" */
	int ttl_s;		/* lease TTL; 0: 1 */
};

/*
 * A candidate with its own etcd client (etcd: the endpoints and TLS files;
 * its timeout is cut to TTL/3). Nothing is sent yet. 0 or a negative code
 * with a message in err. Caller frees with ld_free() (accepts NULL).
 */
int ld_new(const struct etcd_opts *etcd, const struct ld_opts *opts, struct leader **out, char *err,
	   size_t err_len);

/*
 * Blocks until this replica leads: grants a lease, creates the leader key
 * in a transaction that requires it absent, and starts the keep-alive
 * thread. While another replica leads, tries again every TTL/3. Returns 0
 * (leading), -ETIMEDOUT after timeout_ms (< 0: no limit), -EINTR once
 * *stop is set (a signal handler's flag; may be NULL), or an etcd error
 * that is not "unreachable" (those are retried).
 */
int ld_campaign(struct leader *ld, int timeout_ms, volatile sig_atomic_t *stop,
		void (*on_lost)(void *ctx, const char *why), void *ctx);

/*
 * One try of the campaign (never blocks for longer than its two or three
 * etcd requests): 1 leading (the keep-alive thread runs; on_lost as for
 * ld_campaign), 0 another replica leads, or an etcd error. May be called
 * again after on_lost or ld_resign (a new term, a new revision).
 */
int ld_try(struct leader *ld, void (*on_lost)(void *ctx, const char *why), void *ctx);

/* The leader key and its create revision (the fence), and the lease, once leading. */
const char *ld_key(const struct leader *ld);
int64_t ld_revision(const struct leader *ld);
int64_t ld_lease(const struct leader *ld);

/*
 * How long ago (ms, CLOCK_MONOTONIC) the last lease request etcd answered
 * (the grant or a keep-alive) was sent. From ld_ttl_ms() on, etcd may have
 * ended the lease: a replica awake again after a pause (SIGSTOP, a stalled
 * VM) knows at once that it may not lead any more, before the keep-alive
 * thread has asked etcd.
 */
int64_t ld_lease_age_ms(struct leader *ld);
int ld_ttl_ms(const struct leader *ld);

/*
 * The current leader's "REPLICA-ID ADVERTISE" into buf ("" when none);
 * 0 or an etcd error.
 */
int ld_current(struct leader *ld, char *buf, size_t len);

/* Stops the keep-alive and revokes the lease (the key goes at once). */
int ld_resign(struct leader *ld);
/* Stops the keep-alive thread without revoking (the lease then expires). */
void ld_free(struct leader *ld);

#endif
