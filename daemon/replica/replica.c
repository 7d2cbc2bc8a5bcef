/*
 * replica.c - the store backend and its metrics, and the replica's role
 * among the replicas on one etcd prefix (replica.h, docs/replicas.md).
 *
 * Roles (rp_role). The replica's thread (watch_main) moves between the
 * first three, the loop thread (daemon_phases.c, through rp_take_lead, rp_leading
 * and rp_follow) runs the phase each role calls for:
 *
 *          start                      another replica's key appears
 *            |                     +-------------------------------+
 *            v                     |                               |
 *   +--> FOLLOWER --no leader key, etcd answers--> CAMPAIGNING ----+
 *   |    (follower phase: the copy                     |
 *   |     follows the log, reads served,               | leader key created (ld_try)
 *   |     writes refused, no device touched)          v
 *   |                                             RECOVERING  (loop: rp_take_lead, the
 *   |                                                  |       leader phase starts as after
 *   |                                                  |       a crash: state loaded, every
 *   |                                                  |       device read back, open intents
 *   |                                                  |       finished or rolled back)
 *   |                                                  v
 *   +--- lease lost / key not ours / start failed -- LEADER (writes served, devices programmed)
 *
 * Invariants:
 *  1. Only RECOVERING and LEADER write to the store or touch a device, and
 *     every store write is fenced with the leader key's create revision of
 *     the current term (st_etcd_set_fence in rp_take_lead), and every
 *     confirm waits for such a write (the intent's decision, txn_driver.c): a
 *     deposed replica that still runs its leader phase for a moment can
 *     neither write nor confirm.
 *  2. The thread leaves RECOVERING or LEADER only for FOLLOWER (on_lost,
 *     or the leader key seen as not this term's); the loop then ends the
 *     leader phase and starts the follower phase (daemon_phases.c).
 *  3. Without --replica-id the replica is LEADER for good; the thread
 *     only probes etcd, and writes are refused while it cannot be reached.
 *  4. A replica campaigns only while its follower phase runs
 *     (rp_set_campaign): the teardown of a leader phase waits for its
 *     running transaction, so that transaction's decision is written (or
 *     refused) against its own term's revision before a new term can
 *     replace the fence.
 *  5. A replica campaigns only while its loop runs (rp_beat within
 *     RP_LOOP_STALL_MS), and a LEADER whose loop stopped resigns: leading
 *     takes the thread and the loop both. RECOVERING gets
 *     RP_RECOVERY_STALL_MS: the end of the follower phase and the start of
 *     the leader phase (recovery reading every device back) run before
 *     the loop does, bounded by the devices' own timeouts.
 */
#include "replica.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "leader.h"
#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "store.h"
#include "store_etcd.h"

struct replica {
	struct st_store *store;
	struct st_etcd *se; /* etcd only; owned by store */
	struct leader *leader;
	struct rp_opts opts;
	char prefix[512];
	bool etcd;
	struct mx_family *m_store_errors, *m_etcd_seconds, *m_etcd_failures;
	struct mx_family *m_leader, *m_leader_changes, *m_store_seconds, *m_late_beats;
	char describe[1024];
	int ttl_s;
	char leader_key[600], member_key[700], members_prefix[600];
	/* the replica's thread (rp_start) and its own etcd client */
	pthread_t thread;
	bool thread_running;
	struct etcd_client *wc;
	int64_t member_lease, member_renewed_ms; /* the thread's */
	struct loop *loop;
	struct loop_node node; /* on_change's post */
	pthread_mutex_t mu;    /* guards the fields below */
	pthread_cond_t cv;
	bool stop, campaign, posted;
	int64_t beat_ms; /* the loop's last rp_beat (mono_ms) */
	enum rp_role role;
	char leader_value[600]; /* "ID ADVERTISE" of the leader key; "" none known */
	struct rp_member members[RP_MAX_REPLICAS];
	int n_members;
	char problem[700]; /* "" while etcd answers */
	void (*on_change)(void *ctx);
	void *on_change_ctx;
};

/* The thread's period: it notices a lost leader within it (plus the lease). */
#define RP_POLL_MS 100
/* The membership lease is renewed this many times per TTL. */
#define RP_RENEWALS_PER_TTL 3

/* etcd request latencies: loopback answers in about a millisecond, a
 * cluster under load or a failover in hundreds. */
static const double etcd_bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
				     0.05,   0.1,   0.25,   0.5,   1,	 2.5};

int rp_check(const struct rp_opts *o, char *err, size_t err_len)
{
	bool etcd = o->store && strcmp(o->store, "etcd") == 0;

	if (o->store && !etcd && strcmp(o->store, "sqlite") != 0) {
		snprintf(err, err_len, "--store: '%s' is not sqlite or etcd", o->store);
		return -EINVAL;
	}
	if (etcd && !o->etcd_endpoints) {
		snprintf(err, err_len, "--store etcd needs --etcd-endpoints URL[,URL..]");
		return -EINVAL;
	}
	if (!etcd &&
	    (o->etcd_endpoints || o->etcd_prefix || o->etcd_ca || o->etcd_cert || o->etcd_key)) {
		snprintf(err, err_len, "--etcd-* options need --store etcd");
		return -EINVAL;
	}
	if ((o->replica_id || o->advertise) && (!etcd || !o->replica_id || !o->advertise)) {
		snprintf(err, err_len,
			 "--replica-id and --advertise go together, with --store etcd");
		return -EINVAL;
	}
	if (o->leader_ttl_s < 0 || o->leader_ttl_s > 60) {
		snprintf(err, err_len, "--leader-ttl-s: %d is not 1..60", o->leader_ttl_s);
		return -EINVAL;
	}
	return 0;
}

static void on_store_error(void *ctx, int rc)
{
	struct replica *rp = ctx;

	(void)rc;
	/* out of memory loses one count, nothing else */
	(void)mx_add(rp->m_store_errors, (const char *[]){rp->etcd ? "etcd" : "sqlite"}, 1);
}

static void on_store_commit(void *ctx, double seconds)
{
	struct replica *rp = ctx;

	(void)mx_observe(rp->m_store_seconds, (const char *[]){rp->etcd ? "etcd" : "sqlite"},
			 seconds);
}

static void on_etcd_request(void *ctx, const char *op, double seconds, int rc)
{
	struct replica *rp = ctx;

	(void)mx_observe(rp->m_etcd_seconds, (const char *[]){op}, seconds);
	if (rc)
		(void)mx_add(rp->m_etcd_failures, (const char *[]){op}, 1);
}

static int register_metrics(struct replica *rp, struct mx_registry *reg)
{
	const char *const backend[] = {"backend", NULL};
	const char *const op[] = {"op", NULL};

	rp->m_store_errors = mx_counter(reg, "ocsd_store_errors_total",
					"State store writes that failed to begin or commit (the "
					"disk, a lock or etcd refused them).",
					backend);
	rp->m_etcd_seconds =
		mx_histogram(reg, "ocsd_etcd_request_duration_seconds",
			     "etcd requests of the etcd store by operation, "
			     "endpoints tried in turn included.",
			     op, etcd_bounds, sizeof(etcd_bounds) / sizeof(etcd_bounds[0]));
	rp->m_etcd_failures = mx_counter(reg, "ocsd_etcd_request_failures_total",
					 "etcd requests that no endpoint answered or that "
					 "etcd refused, by operation.",
					 op);
	rp->m_leader =
		mx_gauge(reg, "ocsd_leader",
			 "1 while this replica leads (always 1 without --replica-id).", NULL);
	rp->m_leader_changes = mx_counter(reg, "ocsd_leader_changes_total",
					  "Times this replica became the leader.", NULL);
	rp->m_store_seconds =
		mx_histogram(reg, "ocsd_store_commit_duration_seconds",
			     "State store write transactions that committed, from their begin to "
			     "the end of their commit (an etcd store's publish included).",
			     backend, mx_latency_buckets_s, mx_latency_buckets_n);
	rp->m_late_beats = mx_counter(reg, "ocsd_loop_late_beats_total",
				      "Beats of the event loop (due every 100 ms) that came 1 s or "
				      "more after the one before: the loop did not run meanwhile.",
				      NULL);
	if (!rp->m_store_errors || !rp->m_etcd_seconds || !rp->m_etcd_failures || !rp->m_leader ||
	    !rp->m_leader_changes || !rp->m_store_seconds || !rp->m_late_beats ||
	    mx_set(rp->m_leader, NULL, rp->opts.replica_id ? 0 : 1) != 0 ||
	    mx_add(rp->m_leader_changes, NULL, 0) != 0 || mx_add(rp->m_late_beats, NULL, 0) != 0)
		return -ENOMEM;
	/* the series exists from the start (rate() needs its zero) */
	return mx_add(rp->m_store_errors, (const char *[]){rp->etcd ? "etcd" : "sqlite"}, 0);
}

static int open_etcd(struct replica *rp, const struct rp_opts *o, const char *fabric_name,
		     char *err, size_t err_len)
{
	struct st_etcd_opts eo = {.etcd = {.endpoints = o->etcd_endpoints,
					   .ca_file = o->etcd_ca,
					   .cert_file = o->etcd_cert,
					   .key_file = o->etcd_key,
					   .timeout_ms = o->etcd_timeout_ms},
				  .prefix = o->etcd_prefix,
				  /* a follower starts while etcd is down, and waits */
				  .offline_ok = o->replica_id != NULL};
	int rc;

	if (o->etcd_prefix)
		snprintf(rp->prefix, sizeof(rp->prefix), "%s", o->etcd_prefix);
	else
		snprintf(rp->prefix, sizeof(rp->prefix), "/ocsd/%s/", fabric_name);
	eo.prefix = rp->prefix;
	snprintf(rp->leader_key, sizeof(rp->leader_key), "%sleader", rp->prefix);
	snprintf(rp->members_prefix, sizeof(rp->members_prefix), "%sreplicas/", rp->prefix);
	snprintf(rp->member_key, sizeof(rp->member_key), "%s%s", rp->members_prefix,
		 o->replica_id ? o->replica_id : "");
	rc = st_etcd_open(&eo, &rp->store, &rp->se, err, err_len);
	if (rc)
		return rc;
	etcd_set_observer(st_etcd_client(rp->se), on_etcd_request, rp);
	snprintf(rp->describe, sizeof(rp->describe), "etcd %s prefix %s (entry %llu%s)",
		 o->etcd_endpoints, eo.prefix, (unsigned long long)st_etcd_seq(rp->se),
		 st_etcd_stale(rp->se) ? ", etcd unreachable: loaded once it answers" : "");
	return 0;
}

int rp_open(const struct rp_opts *o, const char *state_dir, const char *fabric_name,
	    struct mx_registry *reg, struct replica **out, char *err, size_t err_len)
{
	struct replica *rp;
	int rc = rp_check(o, err, err_len);

	*out = NULL;
	if (rc)
		return rc;
	rp = calloc(1, sizeof(*rp));
	if (!rp)
		return -ENOMEM;
	rp->etcd = o->store && strcmp(o->store, "etcd") == 0;
	rp->opts = *o;
	rp->ttl_s = o->leader_ttl_s > 0 ? o->leader_ttl_s : 1;
	rp->role = o->replica_id ? RP_FOLLOWER : RP_LEADER;
	pthread_mutex_init(&rp->mu, NULL);
	pthread_cond_init(&rp->cv, NULL);
	rc = register_metrics(rp, reg);
	if (rc) {
		snprintf(err, err_len, "out of memory");
	} else if (rp->etcd) {
		rc = open_etcd(rp, o, fabric_name, err, err_len);
	} else {
		char path[900];

		snprintf(path, sizeof(path), "%s/ocsd.db", state_dir);
		snprintf(rp->describe, sizeof(rp->describe), "sqlite %s", path);
		rc = st_open(path, &rp->store, err, err_len);
	}
	if (rc) {
		rp_free(rp);
		return rc;
	}
	st_set_error_observer(rp->store, on_store_error, rp);
	st_set_commit_observer(rp->store, on_store_commit, rp);
	*out = rp;
	return 0;
}

/* ---- the replica's thread: membership, who leads, etcd's health, campaign ---- */

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* With rp->mu held: on_change runs once on the loop for any number of changes. */
static void on_posted(struct loop_node *node)
{
	struct replica *rp = OCSD_CONTAINER_OF(node, struct replica, node);
	void (*cb)(void *ctx);
	void *ctx;

	pthread_mutex_lock(&rp->mu);
	rp->posted = false;
	cb = rp->on_change;
	ctx = rp->on_change_ctx;
	pthread_mutex_unlock(&rp->mu);
	if (cb)
		cb(ctx);
}

static void post_locked(struct replica *rp)
{
	if (rp->posted || !rp->loop || !rp->on_change)
		return;
	rp->posted = true;
	loop_post(rp->loop, &rp->node, on_posted);
}

/*
 * On the keep-alive thread (leader.h) or the replica's: this replica may no
 * longer touch a device. Both may find the loss (the lease gone, the key
 * another's): logged by the first only.
 */
static void on_lost(void *ctx, const char *why)
{
	struct replica *rp = ctx;
	bool was_leading;

	pthread_mutex_lock(&rp->mu);
	was_leading = rp->role == RP_RECOVERING || rp->role == RP_LEADER;
	if (was_leading) {
		size_t n = strlen(rp->opts.replica_id);

		rp->role = RP_FOLLOWER;
		/* not the leader any more: who is, the thread reads from etcd */
		if (strncmp(rp->leader_value, rp->opts.replica_id, n) == 0 &&
		    rp->leader_value[n] == ' ')
			rp->leader_value[0] = '\0';
	}
	post_locked(rp);
	pthread_mutex_unlock(&rp->mu);
	if (was_leading)
		log_msg(LOG_CRIT,
			"replica %s: leadership lost (%s): back to follower; unconfirmed device "
			"commits revert by themselves and the new leader recovers",
			rp->opts.replica_id, why);
}

/*
 * With rp->mu held: a LEADER whose lease was last renewed a TTL ago or more
 * may have been deposed already (a pause: its threads all stopped); it says
 * it leads only while the lease is surely its own. Writes stay fenced either
 * way (invariant 1); this keeps GetFabric, health and refusals true in the
 * moment before its threads notice.
 */
static bool leads_surely_locked(struct replica *rp)
{
	return rp->role == RP_LEADER &&
	       (!rp->leader || ld_lease_age_ms(rp->leader) < ld_ttl_ms(rp->leader));
}

/* Keeps P "replicas/<id>" under this replica's own lease. 0 or an etcd error. */
static int keep_member(struct replica *rp)
{
	const struct rp_opts *o = &rp->opts;
	int64_t now = mono_ms(), ttl;
	int rc;

	if (rp->member_lease &&
	    now - rp->member_renewed_ms < (int64_t)rp->ttl_s * 1000 / RP_RENEWALS_PER_TTL)
		return 0;
	if (rp->member_lease) {
		rc = etcd_lease_keepalive(rp->wc, rp->member_lease, &ttl);
		if (rc == 0) {
			rp->member_renewed_ms = now;
			return 0;
		}
		if (rc != -ENOENT)
			return rc;
		rp->member_lease = 0; /* expired: register again */
	}
	rc = etcd_lease_grant(rp->wc, rp->ttl_s, &rp->member_lease, NULL);
	if (rc == 0)
		rc = etcd_put(rp->wc, rp->member_key, strlen(rp->member_key), o->advertise,
			      strlen(o->advertise), rp->member_lease, NULL);
	if (rc == 0)
		rp->member_renewed_ms = now;
	else
		rp->member_lease = 0;
	return rc;
}

/* What one poll read. */
struct rp_seen {
	char leader[600]; /* "ID ADDR" or "" */
	int64_t leader_rev;
	struct rp_member members[RP_MAX_REPLICAS];
	int n_members;
};

static int read_leader(struct replica *rp, struct rp_seen *seen)
{
	struct etcd_kvs r;
	int rc = etcd_range(rp->wc, rp->leader_key, strlen(rp->leader_key), NULL, 0, 0, 0, &r);

	if (rc == 0 && r.n == 1) {
		snprintf(seen->leader, sizeof(seen->leader), "%.*s", (int)r.kvs[0].value_len,
			 (const char *)r.kvs[0].value);
		seen->leader_rev = r.kvs[0].create_revision;
	}
	etcd_kvs_clear(&r);
	return rc;
}

static int read_members(struct replica *rp, struct rp_seen *seen)
{
	size_t plen = strlen(rp->members_prefix), end_len;
	uint8_t *end = etcd_prefix_end(rp->members_prefix, plen, &end_len);
	struct etcd_kvs r;
	int rc;

	if (!end)
		return -ENOMEM;
	rc = etcd_range(rp->wc, rp->members_prefix, plen, end, end_len, RP_MAX_REPLICAS, 0, &r);
	free(end);
	for (size_t i = 0; rc == 0 && i < r.n && seen->n_members < RP_MAX_REPLICAS; i++) {
		struct rp_member *m = &seen->members[seen->n_members++];

		snprintf(m->id, sizeof(m->id), "%.*s", (int)(r.kvs[i].key_len - plen),
			 (const char *)r.kvs[i].key + plen);
		snprintf(m->address, sizeof(m->address), "%.*s", (int)r.kvs[i].value_len,
			 (const char *)r.kvs[i].value);
	}
	etcd_kvs_clear(&r);
	return rc;
}

static bool same_members(const struct rp_seen *a, const struct replica *rp)
{
	if (a->n_members != rp->n_members)
		return false;
	for (int i = 0; i < a->n_members; i++)
		if (strcmp(a->members[i].id, rp->members[i].id) != 0 ||
		    strcmp(a->members[i].address, rp->members[i].address) != 0)
			return false;
	return true;
}

/* The leader key this replica holds or held: the current term's revision. */
static bool key_is_ours(struct replica *rp, const struct rp_seen *seen)
{
	return seen->leader[0] && seen->leader_rev == ld_revision(rp->leader);
}

/* One poll: reads, then moves the role (the diagram at the top). */
static void poll_once(struct replica *rp, bool campaign)
{
	struct rp_seen seen = {.n_members = 0};
	bool changed, replica = rp->opts.replica_id != NULL;
	int64_t stalled_ms;
	enum rp_role role;
	int rc = replica ? keep_member(rp) : 0;

	if (rc == 0)
		rc = read_leader(rp, &seen);
	if (rc == 0 && replica)
		rc = read_members(rp, &seen);
	pthread_mutex_lock(&rp->mu);
	if (rc) {
		if (!rp->problem[0]) {
			char since[40];
			time_t t = time(NULL);
			struct tm tm;

			strftime(since, sizeof(since), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
			snprintf(rp->problem, sizeof(rp->problem), "etcd unreachable since %s: %s",
				 since,
				 *etcd_last_error(rp->wc) ? etcd_last_error(rp->wc)
							  : strerror(-rc));
			log_msg(LOG_ERR, "state store: %s: writes refused, no device programmed",
				rp->problem);
			post_locked(rp);
		}
		/* who leads is unknown until etcd answers */
		if (rp->leader_value[0]) {
			rp->leader_value[0] = '\0';
			post_locked(rp);
		}
		pthread_mutex_unlock(&rp->mu);
		return;
	}
	changed = rp->problem[0] || strcmp(seen.leader, rp->leader_value) != 0 ||
		  !same_members(&seen, rp);
	if (rp->problem[0])
		log_msg(LOG_NOTICE, "state store: etcd answers again");
	rp->problem[0] = '\0';
	snprintf(rp->leader_value, sizeof(rp->leader_value), "%s", seen.leader);
	memcpy(rp->members, seen.members, sizeof(seen.members));
	rp->n_members = seen.n_members;
	role = rp->role;
	stalled_ms = mono_ms() - rp->beat_ms;
	if (changed)
		post_locked(rp);
	pthread_mutex_unlock(&rp->mu);
	if (!replica)
		return;
	if ((role == RP_LEADER && stalled_ms >= RP_LOOP_STALL_MS) ||
	    (role == RP_RECOVERING && stalled_ms >= RP_RECOVERY_STALL_MS)) {
		char why[120];

		snprintf(why, sizeof(why), "the event loop has not run for %lld ms: lead given up",
			 (long long)stalled_ms);
		(void)ld_resign(rp->leader);
		on_lost(rp, why);
	} else if ((role == RP_RECOVERING || role == RP_LEADER) && !key_is_ours(rp, &seen)) {
		(void)ld_resign(rp->leader);
		on_lost(rp, "the leader key is not this replica's any more");
	} else if (role == RP_FOLLOWER && key_is_ours(rp, &seen) && ld_lease(rp->leader)) {
		/* a term that ended here: its key goes now, not at its lease's end */
		(void)ld_resign(rp->leader);
	} else if (role == RP_FOLLOWER && campaign && !seen.leader[0] &&
		   stalled_ms < RP_LOOP_STALL_MS) {
		pthread_mutex_lock(&rp->mu);
		rp->role = RP_CAMPAIGNING;
		pthread_mutex_unlock(&rp->mu);
		rc = ld_try(rp->leader, on_lost, rp);
		pthread_mutex_lock(&rp->mu);
		rp->role = rc == 1 ? RP_RECOVERING : RP_FOLLOWER;
		if (rc == 1) {
			snprintf(rp->leader_value, sizeof(rp->leader_value), "%s %s",
				 rp->opts.replica_id, rp->opts.advertise);
			post_locked(rp);
		}
		pthread_mutex_unlock(&rp->mu);
	}
}

static void *watch_main(void *arg)
{
	struct replica *rp = arg;

	for (;;) {
		struct timespec until;
		bool stop, campaign;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += RP_POLL_MS * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_mutex_lock(&rp->mu);
		while (!rp->stop && pthread_cond_timedwait(&rp->cv, &rp->mu, &until) == 0)
			;
		stop = rp->stop;
		campaign = rp->campaign;
		pthread_mutex_unlock(&rp->mu);
		if (stop)
			return NULL;
		poll_once(rp, campaign);
	}
}

int rp_start(struct replica *rp, struct loop *loop, void (*on_change)(void *ctx), void *ctx)
{
	const struct rp_opts *o = &rp->opts;
	struct etcd_opts eo = {.endpoints = o->etcd_endpoints,
			       .ca_file = o->etcd_ca,
			       .cert_file = o->etcd_cert,
			       .key_file = o->etcd_key,
			       .timeout_ms = rp->ttl_s * 1000 / RP_RENEWALS_PER_TTL};
	char err[512];
	int rc;

	if (!rp->etcd)
		return 0;
	rc = etcd_client_new(&eo, &rp->wc, err, sizeof(err));
	if (rc == 0 && o->replica_id) {
		struct ld_opts lo = {.replica_id = o->replica_id,
				     .advertise = o->advertise,
				     .prefix = rp->prefix,
				     .ttl_s = rp->ttl_s};

		eo.timeout_ms = o->etcd_timeout_ms;
		rc = ld_new(&eo, &lo, &rp->leader, err, sizeof(err));
	}
	if (rc) {
		log_msg(LOG_ERR, "replica: %s", err);
		return rc;
	}
	rp->loop = loop;
	rp->on_change = on_change;
	rp->on_change_ctx = ctx;
	rp->beat_ms = mono_ms();
	if (pthread_create(&rp->thread, NULL, watch_main, rp) != 0)
		return -EAGAIN;
	rp->thread_running = true;
	if (o->replica_id)
		log_msg(LOG_NOTICE, "replica %s (%s): follower; campaigns when no replica leads",
			o->replica_id, o->advertise);
	return 0;
}

void rp_stop(struct replica *rp)
{
	if (!rp || !rp->thread_running)
		return;
	pthread_mutex_lock(&rp->mu);
	rp->stop = true;
	pthread_cond_signal(&rp->cv);
	pthread_mutex_unlock(&rp->mu);
	pthread_join(rp->thread, NULL);
	rp->thread_running = false;
	pthread_mutex_lock(&rp->mu);
	rp->on_change = NULL;
	pthread_mutex_unlock(&rp->mu);
}

enum rp_role rp_role(struct replica *rp)
{
	enum rp_role r;

	pthread_mutex_lock(&rp->mu);
	r = rp->role;
	pthread_mutex_unlock(&rp->mu);
	return r;
}

void rp_set_campaign(struct replica *rp, bool campaign)
{
	pthread_mutex_lock(&rp->mu);
	rp->campaign = campaign;
	pthread_mutex_unlock(&rp->mu);
}

int rp_take_lead(struct replica *rp, char *err, size_t err_len)
{
	int rc;

	if (!rp->leader)
		return 0;
	rc = st_etcd_set_fence(rp->se, ld_key(rp->leader), strlen(ld_key(rp->leader)),
			       ld_revision(rp->leader));
	if (rc == 0 && (rc = st_etcd_sync(rp->se)) != 0)
		snprintf(err, err_len, "%s", st_etcd_last_error(rp->se));
	else if (rc)
		snprintf(err, err_len, "out of memory");
	if (rc) {
		/* the thread revokes the key of this term (role FOLLOWER, key ours) */
		pthread_mutex_lock(&rp->mu);
		rp->role = RP_FOLLOWER;
		pthread_mutex_unlock(&rp->mu);
		return rc;
	}
	(void)mx_set(rp->m_leader, NULL, 1);
	(void)mx_add(rp->m_leader_changes, NULL, 1);
	log_msg(LOG_NOTICE,
		"replica %s leads (leader key revision %lld, log entry %llu): recovering",
		rp->opts.replica_id, (long long)ld_revision(rp->leader),
		(unsigned long long)st_etcd_seq(rp->se));
	return 0;
}

void rp_leading(struct replica *rp)
{
	pthread_mutex_lock(&rp->mu);
	if (rp->role == RP_RECOVERING)
		rp->role = RP_LEADER;
	rp->beat_ms = mono_ms(); /* the loop runs from now on */
	pthread_mutex_unlock(&rp->mu);
}

void rp_beat(struct replica *rp)
{
	int64_t now = mono_ms();
	bool late;

	pthread_mutex_lock(&rp->mu);
	late = now - rp->beat_ms >= RP_LATE_BEAT_MS;
	rp->beat_ms = now;
	pthread_mutex_unlock(&rp->mu);
	if (late)
		(void)mx_add(rp->m_late_beats, NULL, 1);
}

void rp_follow(struct replica *rp)
{
	if (!rp->leader)
		return;
	/* the fence stays: a write of this replica fails until it leads again */
	(void)mx_set(rp->m_leader, NULL, 0);
	/* a leader phase that ended by itself (it could not start): the thread
	 * revokes this term's key (role FOLLOWER, key ours) */
	pthread_mutex_lock(&rp->mu);
	rp->role = RP_FOLLOWER;
	pthread_mutex_unlock(&rp->mu);
}

int rp_catch_up(struct replica *rp)
{
	int rc;

	if (!rp->se || !st_etcd_stale(rp->se))
		return 0;
	rc = st_etcd_sync(rp->se);
	if (rc == 0)
		log_msg(LOG_NOTICE, "state store: the copy caught up with etcd (entry %llu)",
			(unsigned long long)st_etcd_seq(rp->se));
	return rc ? rc : 1;
}

struct st_etcd *rp_etcd(struct replica *rp)
{
	return rp->se;
}

/* The address part of "ID ADDR". */
static const char *leader_address(const char *value)
{
	const char *sp = strchr(value, ' ');

	return sp ? sp + 1 : "";
}

int rp_write_refusal(struct replica *rp, char *why, size_t why_len)
{
	int rc = 0;

	if (!rp->etcd)
		return 0;
	pthread_mutex_lock(&rp->mu);
	if (rp->opts.replica_id && rp->role == RP_LEADER && !leads_surely_locked(rp)) {
		snprintf(why, why_len,
			 "not the leader; no leader known: this replica's lease was last renewed "
			 "%lld ms ago (TTL %d ms)",
			 (long long)ld_lease_age_ms(rp->leader), ld_ttl_ms(rp->leader));
		rc = -EAGAIN;
	} else if (rp->opts.replica_id && rp->role != RP_LEADER) {
		if (rp->leader_value[0] && rp->role == RP_FOLLOWER)
			snprintf(why, why_len, "not the leader; leader is %s",
				 leader_address(rp->leader_value));
		else
			snprintf(why, why_len, "not the leader; no leader yet%s%s%s",
				 rp->problem[0] ? " (" : "", rp->problem,
				 rp->problem[0] ? ")" : "");
		rc = -EAGAIN;
	} else if (rp->problem[0]) {
		snprintf(why, why_len, "the state store refuses writes (%s); nothing changed",
			 rp->problem);
		rc = -EAGAIN;
	}
	pthread_mutex_unlock(&rp->mu);
	return rc;
}

bool rp_leads_surely(struct replica *rp)
{
	bool sure;

	pthread_mutex_lock(&rp->mu);
	sure = leads_surely_locked(rp);
	pthread_mutex_unlock(&rp->mu);
	return sure;
}

void rp_status(struct replica *rp, struct rp_status *out)
{
	const char *sp;

	memset(out, 0, sizeof(*out));
	out->replica_id = rp->opts.replica_id ? rp->opts.replica_id : "";
	out->role = "";
	pthread_mutex_lock(&rp->mu);
	if (rp->opts.replica_id)
		out->role = leads_surely_locked(rp) ? "leader" : "follower";
	/* a leader not sure of its lease knows no leader: not itself, and what
	 * its thread read before may be older than the TTL too */
	sp = rp->opts.replica_id && rp->role == RP_LEADER && !leads_surely_locked(rp)
		     ? NULL
		     : strchr(rp->leader_value, ' ');
	if (sp) {
		snprintf(out->leader_id, sizeof(out->leader_id), "%.*s",
			 (int)(sp - rp->leader_value), rp->leader_value);
		snprintf(out->leader_address, sizeof(out->leader_address), "%s", sp + 1);
	}
	memcpy(out->replicas, rp->members, sizeof(out->replicas));
	out->n_replicas = rp->n_members;
	snprintf(out->store_problem, sizeof(out->store_problem), "%s", rp->problem);
	pthread_mutex_unlock(&rp->mu);
}

void rp_free(struct replica *rp)
{
	if (!rp)
		return;
	rp_stop(rp);
	/* a clean stop hands over at once instead of after the lease's TTL */
	if (rp->leader)
		(void)ld_resign(rp->leader);
	if (rp->member_lease)
		(void)etcd_lease_revoke(rp->wc, rp->member_lease);
	ld_free(rp->leader);
	etcd_client_free(rp->wc);
	st_close(rp->store);
	pthread_mutex_destroy(&rp->mu);
	pthread_cond_destroy(&rp->cv);
	free(rp);
}

struct st_store *rp_store(struct replica *rp)
{
	return rp->store;
}

const char *rp_store_name(const struct replica *rp)
{
	return rp->etcd ? "etcd" : "sqlite";
}

const char *rp_describe(const struct replica *rp)
{
	return rp->describe;
}
