/*
 * store_etcd.h - the etcd backend of the state store (--store etcd): etcd is
 * the authority, every replica keeps a local in-memory SQLite copy that
 * serves the store.h API, and every write transaction is one entry of a
 * replicated log of SQLite changesets in etcd (docs/replicas.md).
 *
 * Keys under the prefix P (e.g. "/ocsd/lab/"):
 *   P "head"                 the sequence number of the last entry (decimal)
 *   P "log/" %016x seq       one entry: the changeset of one write (deflated
 *                            when that is smaller: "#z bytes\n" and a zlib
 *                            stream), or for an entry larger than
 *                            chunk_bytes the record
 *                            "#chunked chunks bytes tag" of its chunks:
 *   P "chunk/" %016x seq "-" %016x tag "/" %08x i   staged before the entry
 *   P "snap"                 the last snapshot: "seq chunks bytes tag"
 *   P "snap/" %016x seq "-" %016x tag "/" %08x i   its chunks (sqlite3_serialize image)
 *
 * A write (any st_* write of store.h) commits locally only after ONE etcd
 * transaction that compares the head's mod revision with the one this copy
 * last saw (so two writers never fork the log) and, once a fence is set,
 * the leader key's create revision (the proof of leadership), and puts the
 * entry and the new head: a write of any size within etcd's default limits
 * (--max-request-bytes 1.5 MiB, --max-txn-ops 128), since a large one's
 * chunks are staged by plain puts before that transaction and no reader
 * looks at them until it lands. Failures, on top of store.h's codes:
 *   -EBUSY   another writer moved the log: this copy catches up before its
 *            next write (nothing was written),
 *   -EPERM   the fence failed: this replica no longer leads,
 *   -EIO     etcd could not be reached or answered an error before the
 *            write was sent (nothing was written),
 *   -EINPROGRESS  the write was sent and its answer lost, and its entry
 *            could not be read back (etcd gone, or the entry folded into
 *            a successor's snapshot): it may be in the log or still land;
 *            the copy catches up before its next write (store.h).
 * st_etcd_last_error() says which. Every snapshot_every entries a snapshot
 * replaces the log before it but its last entries (store_etcd.c, invariant
 * 4), so a new or lagging replica loads the snapshot and the entries after
 * it. The image is taken on the store's thread before the write that finds
 * it due; a thread of the backend's own writes it to etcd meanwhile, with a
 * client of its own (not seen by etcd_set_observer on st_etcd_client()).
 *
 * Threading: as store.h; st_etcd_follow's watch runs on the caller's base,
 * on the store's thread.
 */
#ifndef OCSD_STORE_ETCD_H
#define OCSD_STORE_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etcd.h"
#include "store.h"

struct event_base;
struct st_etcd;

struct st_etcd_opts {
	struct etcd_opts etcd;	 /* endpoints, TLS, timeout, bounds */
	const char *prefix;	 /* e.g. "/ocsd/lab/"; must end with '/' */
	unsigned snapshot_every; /* entries between snapshots; 0: 1000 */
	/* bytes per chunk of a snapshot, and the largest log entry written
	 * whole (a larger one is chunked); 0: 1 MiB (etcd's request limit is
	 * 1.5 MiB) */
	size_t chunk_bytes;
	/* etcd unreachable at open: an empty copy marked stale instead of an
	 * error (a follower that starts while etcd is down; st_etcd_sync later) */
	bool offline_ok;
};

/*
 * Connects, loads the newest snapshot and the log after it into a new local
 * copy, and returns the store (*st, closed with st_close(), which frees the
 * backend too) and its backend (*se, owned by *st). 0, or a negative code
 * with a message in err naming etcd or the option.
 */
int st_etcd_open(const struct st_etcd_opts *opts, struct st_store **st, struct st_etcd **se,
		 char *err, size_t err_len);

/*
 * Waits for the snapshot being written, if any, and takes its outcome (a
 * snapshot is written on a thread of its own, store_etcd.c: tests, and a
 * caller that wants etcd to hold it before it goes on; st_close waits too).
 */
void st_etcd_snapshot_wait(struct st_etcd *se);

/* Catches the copy up with etcd now. 0 or a negative code (see above). */
int st_etcd_sync(struct st_etcd *se);

/*
 * Keeps the copy current from now on through a watch on base: entries other
 * replicas write are applied as they come (a gap or a compaction: re-read
 * the snapshot and the log). on_change (may be NULL) is called after the
 * copy changed. Replaces an earlier follow.
 */
int st_etcd_follow(struct st_etcd *se, struct event_base *base, void (*on_change)(void *ctx),
		   void *ctx);

/* Stops following (the watch ends; on_change is not called any more). */
void st_etcd_unfollow(struct st_etcd *se);
/* True while the copy may be behind etcd by more than the watch brings
 * (opened offline, or a write's outcome unknown): st_etcd_sync. */
bool st_etcd_stale(const struct st_etcd *se);

/*
 * The fence of every later write: key's create revision must be
 * create_revision (the leader key this replica created). key NULL clears it.
 */
int st_etcd_set_fence(struct st_etcd *se, const void *key, size_t key_len, int64_t create_revision);

/* The client (for leases, the observer of request latencies). */
struct etcd_client *st_etcd_client(struct st_etcd *se);
/* The sequence number of the last entry in the copy. */
uint64_t st_etcd_seq(const struct st_etcd *se);
/* Why the last failed call failed (names etcd and the endpoint). */
const char *st_etcd_last_error(const struct st_etcd *se);

#endif
