/*
 * replica.h - how this ocsd keeps its state: the store backend chosen on
 * the command line (--store sqlite, the default: one SQLite file in the
 * state directory; --store etcd: the replicated log in etcd of
 * store_etcd.h, with its TLS files and key prefix), leadership among
 * replicas on one prefix (leader.h), and the metrics of those:
 * ocsd_store_errors_total (writes the disk or etcd refused), on etcd
 * ocsd_etcd_request_duration_seconds and ocsd_etcd_request_failures_total
 * by operation, ocsd_leader and ocsd_leader_changes_total. docs/replicas.md.
 *
 * Threading: the loop thread only, as the store.
 */
#ifndef OCSD_REPLICA_H
#define OCSD_REPLICA_H

#include <stddef.h>

struct mx_registry;
struct st_store;
struct replica;

struct rp_opts {
	const char *store; /* "sqlite" (NULL: the same) or "etcd" */
	const char *etcd_endpoints;
	const char *etcd_prefix; /* NULL: "/ocsd/<fabric name>/" */
	const char *etcd_ca, *etcd_cert, *etcd_key;
	int etcd_timeout_ms; /* per request and endpoint; 0: 2000 */
	/* replicas (--store etcd): this one's name and address; NULL: ocsd
	 * runs alone on its prefix and does not campaign */
	const char *replica_id, *advertise;
	int leader_ttl_s; /* 0: 1 */
};

/*
 * Checks the options alone (which flags go together); 0 or -EINVAL with a
 * message naming the flag in err. rp_open checks them too.
 */
int rp_check(const struct rp_opts *o, char *err, size_t err_len);
/*
 * Opens the store: sqlite: state_dir/ocsd.db; etcd: connects and loads the
 * copy. Registers the metrics in reg. 0, or a negative code with a message
 * in err. Caller frees with rp_free() (accepts NULL), which closes the store.
 */
int rp_open(const struct rp_opts *o, const char *state_dir, const char *fabric_name,
	    struct mx_registry *reg, struct replica **out, char *err, size_t err_len);
void rp_free(struct replica *rp);

/*
 * With --replica-id: blocks until this replica leads (a standby waits;
 * SIGTERM ends it as any process), then fences every store write with the
 * leader key and catches the copy up, so that the start that follows
 * (recovery included) runs exactly as a restart does. If the lease is lost
 * later, the process exits at once (status 1): the devices revert an
 * unconfirmed commit by themselves, and only the new leader touches them.
 * Without --replica-id: 0 at once. 0 or a negative code with err.
 */
int rp_lead(struct replica *rp, char *err, size_t err_len);

/*
 * txn_deps.fence: 0 without --replica-id; else one etcd transaction that
 * proves the leader key is still this replica's, -EPERM (not the leader)
 * or -EIO (etcd did not answer: no proof, no confirm), with why set.
 * Thread-safe (an engine thread calls it).
 */
int rp_fence(void *rp, char *why, size_t why_len);

struct st_store *rp_store(struct replica *rp);
/* "sqlite" or "etcd" (GetFabric's store field). */
const char *rp_store_name(const struct replica *rp);
/* For the log: "sqlite FILE" or "etcd ENDPOINTS prefix PREFIX". */
const char *rp_describe(const struct replica *rp);

#endif
