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
 * Threading: the loop thread only, as the store, except where a call says
 * thread-safe; rp_start runs a thread of its own (replica.c).
 */
#ifndef OCSD_REPLICA_H
#define OCSD_REPLICA_H

#include <stdbool.h>
#include <stddef.h>

struct loop;
struct mx_registry;
struct st_etcd;
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
 * Roles of a replica (the state machine is drawn in replica.c). Without
 * --replica-id ocsd always leads (RP_LEADER).
 */
enum rp_role { RP_FOLLOWER, RP_CAMPAIGNING, RP_RECOVERING, RP_LEADER };

/*
 * Starts the replica's own thread (etcd only; nothing with sqlite): it
 * registers P "replicas/<id>" = advertise under a lease of its own, reads
 * who leads and which replicas live every RP_POLL_MS, probes etcd (the
 * reason it cannot be reached is the store problem), and campaigns while
 * campaigning is allowed (rp_set_campaign) and no replica leads.
 * on_change(ctx) runs on the loop thread (posted) whenever the role, the
 * leader, the replicas or the store problem changed. 0 or -errno.
 */
int rp_start(struct replica *rp, struct loop *loop, void (*on_change)(void *ctx), void *ctx);
/* Stops that thread (before the loop goes); on_change is not called any more. */
void rp_stop(struct replica *rp);

/*
 * The loop is alive: called on the loop thread every RP_BEAT_MS (daemon_phases.c's
 * tick). A replica whose loop has not beaten for RP_LOOP_STALL_MS does not
 * campaign, and a leader's gives up the lead (its lease revoked at once):
 * the keep-alive runs on its own thread, so without this a replica whose
 * loop hangs would hold the lead, serving nothing, for as long as it lives.
 * A beat RP_LATE_BEAT_MS or more after the one before (or after the start
 * of the loop: rp_start, rp_leading) counts in ocsd_loop_late_beats_total.
 */
void rp_beat(struct replica *rp);
#define RP_BEAT_MS	 100
#define RP_LATE_BEAT_MS	 1000
#define RP_LOOP_STALL_MS 5000
/* The same for RECOVERING, whose loop does not run while the follower
 * phase ends and the leader phase starts (recovery reads every device). */
#define RP_RECOVERY_STALL_MS 60000

/* The role now (thread-safe). */
enum rp_role rp_role(struct replica *rp);
/* Allows or stops campaigning (the follower phase allows it). Thread-safe. */
void rp_set_campaign(struct replica *rp, bool campaign);
/*
 * On the loop thread, once rp_role() is RP_RECOVERING: fences every store
 * write with this replica's leader key and catches the copy up, so that the
 * start that follows (recovery included) runs exactly as a restart does.
 * 0, or a negative code with err (then the replica resigns and follows).
 */
int rp_take_lead(struct replica *rp, char *err, size_t err_len);
/* The leader phase serves writes now: RP_RECOVERING -> RP_LEADER. */
void rp_leading(struct replica *rp);
/* On the loop thread, after the leader phase ended: the fence goes, ocsd_leader 0. */
void rp_follow(struct replica *rp);
/* The follower phase's copy: catches it up if it may be behind (etcd only):
 * 1 caught up, 0 nothing to do, or a negative code (etcd does not answer). */
int rp_catch_up(struct replica *rp);
/* The etcd store backend (NULL with sqlite), for st_etcd_follow. */
struct st_etcd *rp_etcd(struct replica *rp);

/*
 * Whether this replica may write now: 0, or -EAGAIN with the refusal in why
 * (exactly "not the leader; leader is HOST:PORT" or "not the leader; no
 * leader yet" on a follower; "not the leader; no leader known: this
 * replica's lease was last renewed N ms ago (TTL T ms)" on a leader whose
 * lease may have ended, e.g. awake after a pause, before its threads have
 * asked etcd; on a leader whose etcd cannot be reached, etcd's reason).
 * Thread-safe.
 */
int rp_write_refusal(struct replica *rp, char *why, size_t why_len);
/*
 * True only while this replica leads and its lease is surely its own (last
 * renewed less than a TTL ago): a leader paused past its TTL, or one whose
 * keep-alive thread has just found the lease gone (role already follower,
 * the loop thread not yet told), is not sure. Health's ocs.v1.Jobs is
 * SERVING only then. Thread-safe, never blocks on etcd.
 */
bool rp_leads_surely(struct replica *rp);

/* What GetFabric shows (fields 41-46). */
#define RP_MAX_REPLICAS 16
struct rp_member {
	char id[128], address[256];
};
struct rp_status {
	const char *replica_id; /* "" alone */
	const char *role;	/* "leader" or "follower" ("" alone) */
	char leader_id[128], leader_address[256];
	struct rp_member replicas[RP_MAX_REPLICAS]; /* the live ones, by id */
	int n_replicas;
	char store_problem[700]; /* "" or why writes are refused */
};
void rp_status(struct replica *rp, struct rp_status *out);

struct st_store *rp_store(struct replica *rp);
/* "sqlite" or "etcd" (GetFabric's store field). */
const char *rp_store_name(const struct replica *rp);
/* For the log: "sqlite FILE" or "etcd ENDPOINTS prefix PREFIX". */
const char *rp_describe(const struct replica *rp);

#endif
