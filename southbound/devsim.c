/*
 * devsim.c - ocs-devsim, the ocsd device simulator: a real NETCONF server
 * (libnetconf2 server API over SSH or TLS, libyang datastores) behaving like an
 * optical circuit switch (model ocs-switch) or a node's OCS transceivers
 * (model ocs-transceiver). With --count N one process serves N independent
 * devices on consecutive TCP ports.
 *
 * Per device: running and candidate datastores, locks, edit-config
 * (merge/replace/create/delete/remove, rollback-on-error), validate, commit,
 * confirmed-commit 1.1 (timeout revert, persist/persist-id, revert when the
 * issuing session dies without persist), cancel-commit, discard-changes,
 * get/get-config with subtree filters, get-schema (the loaded modules, and
 * other IETF modules from --ietf-dir), create-subscription and
 * notifications, and the fault knobs of
 * devsim_fault.h (settable at start and through ocs-devsim:set-faults).
 *
 * State data behaves like hardware: a connection whose output changed is
 * `pending` for --switch-ms after the commit, then `connected`. In
 * bidirectional mode (default for ocs-switch) a validate or commit that
 * would leave a one-way circuit (A->B without B->A) is refused.
 *
 * Threads: ACCEPT_THREADS threads accept sessions (nc_accept does the SSH
 * handshake, so one slow client must not stall the rest) and hand each
 * session to --workers threads, which sleep in epoll_wait(2) on the
 * sessions' sockets and run the RPC callback (see "Workers"); one timer thread
 * reverts expired confirmed commits. Every device has one mutex that guards
 * all of its state; a thread holds at most one device mutex at a time, so
 * there is no lock order to respect. libnetconf2's server keeps its own
 * process-global state (one context, one RPC callback), which is why the
 * simulator state lives in the single static `sim` below.
 */
#define _GNU_SOURCE /* POLLRDHUP */
#include "devsim_auth.h"
#include "devsim_fault.h"
#include "devsim_store.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <glob.h>
#include <limits.h>
#include <libyang/libyang.h>
#include <nc_server.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

extern const char sb_yang_ocs_switch[];
extern const char sb_yang_ocs_transceiver[];
extern const char sb_yang_ocs_devsim[];

enum devsim_model { MODEL_SWITCH, MODEL_TRANSCEIVER };

#define MAX_SUBSCRIBERS 8
#define ACCEPT_THREADS 4
#define MAX_WORKERS 64
#define WORKER_POLL_MS 100 /* how often an idle worker looks at sim.stop */
#define MAX_FDS 65536
#define AUTH_TIMEOUT_S 5
#define DEFAULT_CONFIRM_TIMEOUT_S 600
#define MAX_SCHEMA_BYTES (1 << 20) /* a module file served by get-schema */

struct device {
	int index;
	uint16_t port;
	pthread_mutex_t mu; /* guards every field below */
	struct lyd_node *running;
	struct lyd_node *candidate;
	bool candidate_dirty; /* false: candidate is a copy of running */
	bool candidate_valid; /* candidate passed <validate> since its last edit */
	uint32_t lock_running_sid; /* 0 = unlocked */
	uint32_t lock_candidate_sid;
	/* pending confirmed commit */
	bool cc_active;
	struct lyd_node *cc_backup; /* running before the confirmed commit */
	uint32_t cc_sid;
	char *cc_persist; /* persist id, NULL when not persistent */
	int64_t cc_deadline_ms;
	/* per input port: current output (-1 none) and when it was set */
	int *cur_out;
	int64_t *since_ms;
	int64_t last_change_ms;
	struct devsim_faults faults;
	struct nc_session *subscribers[MAX_SUBSCRIBERS];
	int n_subscribers;
};

struct session_data {
	struct device *dev;
	int fd;
};

static struct {
	struct ly_ctx *ctx;
	enum devsim_model model;
	int ports;
	int switch_ms;
	bool bidirectional;
	bool confirmed_commit;
	struct device *devs;
	int count;
	uint16_t base_port;
	struct devsim_auth auth; /* TLS instead of SSH when auth.tls_* are set */
	const char *ietf_dir; /* IETF modules: loaded, and served by get-schema */
	int epfd;	     /* epoll set of the sessions' sockets (see "Workers") */
	struct conn *conns; /* every live session, guarded by conns_mu */
	volatile sig_atomic_t stop;
} sim;

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *model_module(void)
{
	return sim.model == MODEL_SWITCH ? "ocs-switch" : "ocs-transceiver";
}

/* ---- replies ------------------------------------------------------------ */

static struct nc_server_reply *reply_err(NC_ERR tag, const char *msg, const char *path)
{
	struct lyd_node *e;
	switch (tag) {
	case NC_ERR_DATA_EXISTS:
	case NC_ERR_DATA_MISSING:
	case NC_ERR_MALFORMED_MSG:
		e = nc_err(sim.ctx, tag);
		break;
	case NC_ERR_LOCK_DENIED:
		e = nc_err(sim.ctx, tag, (uint32_t)0);
		break;
	default:
		e = nc_err(sim.ctx, tag, NC_ERR_TYPE_APP);
		break;
	}
	if (msg)
		nc_err_set_msg(e, msg, "en");
	if (path && *path)
		nc_err_set_path(e, path);
	return nc_server_reply_err(e);
}

static struct nc_server_reply *reply_lock_denied(uint32_t holder)
{
	struct lyd_node *e = nc_err(sim.ctx, NC_ERR_LOCK_DENIED, holder);
	char msg[96];
	if (holder)
		snprintf(msg, sizeof(msg), "the datastore is locked by session %u", holder);
	else
		snprintf(msg, sizeof(msg), "the candidate holds uncommitted changes");
	nc_err_set_msg(e, msg, "en");
	return nc_server_reply_err(e);
}

/* ---- device state ------------------------------------------------------- */

/* Reads the ocs-switch connections of a tree into out[input] (-1 = none). */
static void read_connections(const struct lyd_node *tree, int *out)
{
	for (int i = 0; i < sim.ports; i++)
		out[i] = -1;
	struct ly_set *set = NULL;
	if (!tree || lyd_find_xpath(tree, "/ocs-switch:cross-connects/connection", &set))
		return;
	for (uint32_t i = 0; i < set->count; i++) {
		int in = -1, o = -1;
		for (struct lyd_node *c = lyd_child(set->dnodes[i]); c; c = c->next) {
			if (!strcmp(LYD_NAME(c), "input"))
				in = atoi(lyd_get_value(c));
			else if (!strcmp(LYD_NAME(c), "output"))
				o = atoi(lyd_get_value(c));
		}
		if (in >= 0 && in < sim.ports)
			out[in] = o;
	}
	ly_set_free(set, NULL);
}

/* Device checks the YANG model cannot express: port ranges, L2 symmetry. */
static int check_device_rules(const struct lyd_node *tree, char *msg, size_t msg_len, char *path,
			      size_t path_len)
{
	if (sim.model != MODEL_SWITCH)
		return 0;
	struct ly_set *set = NULL;
	if (!tree || lyd_find_xpath(tree, "/ocs-switch:cross-connects/connection", &set))
		return 0;
	int *out = calloc((size_t)sim.ports, sizeof(int));
	int rc = 0;
	for (int i = 0; i < sim.ports; i++)
		out[i] = -1;
	for (uint32_t i = 0; i < set->count && !rc; i++) {
		int in = -1, o = -1;
		for (struct lyd_node *c = lyd_child(set->dnodes[i]); c; c = c->next) {
			if (!strcmp(LYD_NAME(c), "input"))
				in = atoi(lyd_get_value(c));
			else if (!strcmp(LYD_NAME(c), "output"))
				o = atoi(lyd_get_value(c));
		}
		if (in >= sim.ports || o >= sim.ports || o < 0) {
			snprintf(msg, msg_len, "connection %d -> %d: port out of range 0..%d", in, o,
				 sim.ports - 1);
			snprintf(path, path_len,
				 "/ocs-switch:cross-connects/connection[input='%d']/output", in);
			rc = -EINVAL;
		} else {
			out[in] = o;
		}
	}
	if (!rc && sim.bidirectional) {
		for (int in = 0; in < sim.ports; in++) {
			int o = out[in];
			if (o >= 0 && out[o] != in) {
				snprintf(msg, msg_len,
					 "one-way circuit: connection %d -> %d has no reverse "
					 "connection %d -> %d (device is bidirectional)",
					 in, o, o, in);
				snprintf(path, path_len,
					 "/ocs-switch:cross-connects/connection[input='%d']", in);
				rc = -EINVAL;
				break;
			}
		}
	}
	free(out);
	ly_set_free(set, NULL);
	return rc;
}

/* Full validation of a datastore copy: YANG constraints, then device rules. */
static int validate_tree(const struct lyd_node *tree, char *msg, size_t msg_len, char *path,
			 size_t path_len)
{
	struct lyd_node *copy = NULL;
	if (tree && lyd_dup_siblings(tree, NULL, LYD_DUP_RECURSIVE, &copy))
		return -ENOMEM;
	LY_ERR r = lyd_validate_all(&copy, sim.ctx, LYD_VALIDATE_NO_STATE, NULL);
	if (r) {
		const char *m = ly_errmsg(sim.ctx);
		const char *p = ly_errpath(sim.ctx);
		snprintf(msg, msg_len, "%s", m ? m : "validation failed");
		snprintf(path, path_len, "%s", p ? p : "");
		lyd_free_all(copy);
		return -EINVAL;
	}
	int rc = check_device_rules(copy, msg, msg_len, path, path_len);
	lyd_free_all(copy);
	return rc;
}

/* Installs a new running tree (takes ownership) and updates switch timing. */
static void set_running(struct device *d, struct lyd_node *tree)
{
	lyd_free_all(d->running);
	d->running = tree;
	int64_t t = now_ms();
	d->last_change_ms = t;
	if (sim.model != MODEL_SWITCH)
		return;
	int *out = malloc(sizeof(int) * (size_t)sim.ports);
	read_connections(tree, out);
	for (int i = 0; i < sim.ports; i++) {
		if (out[i] != d->cur_out[i]) {
			d->cur_out[i] = out[i];
			d->since_ms[i] = t;
		}
	}
	free(out);
}

static struct lyd_node *dup_tree(const struct lyd_node *tree)
{
	struct lyd_node *copy = NULL;
	if (tree)
		lyd_dup_siblings(tree, NULL, LYD_DUP_RECURSIVE, &copy);
	return copy;
}

static void revert_confirmed_commit(struct device *d)
{
	set_running(d, d->cc_backup);
	d->cc_backup = NULL;
	d->cc_active = false;
	free(d->cc_persist);
	d->cc_persist = NULL;
	lyd_free_all(d->candidate);
	d->candidate = dup_tree(d->running);
	d->candidate_dirty = false;
}

static bool port_failed(const struct device *d, int port)
{
	for (int i = 0; i < d->faults.n_failed_ports; i++)
		if (d->faults.failed_ports[i] == port)
			return true;
	return false;
}

static void add_leaf(struct lyd_node *parent, const struct lys_module *mod, const char *name,
		     const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void add_leaf(struct lyd_node *parent, const struct lys_module *mod, const char *name,
		     const char *fmt, ...)
{
	char buf[96];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	lyd_new_term(parent, mod, name, buf, 0, NULL);
}

/* Builds running + state data of an ocs-switch device. */
static struct lyd_node *switch_state(struct device *d, bool with_ports)
{
	const struct lys_module *mod = ly_ctx_get_module_implemented(sim.ctx, "ocs-switch");
	struct lyd_node *tree = dup_tree(d->running), *info = NULL, *ports = NULL, *node;
	int64_t t = now_ms();
	if (!with_ports)
		goto connections; /* the filter does not look at ports: spare the work */
	lyd_new_inner(NULL, mod, "switch-info", 0, &info);
	add_leaf(info, mod, "port-count", "%d", sim.ports);
	add_leaf(info, mod, "bidirectional", "%s", sim.bidirectional ? "true" : "false");
	add_leaf(info, mod, "switch-time-ms", "%d", sim.switch_ms);
	lyd_insert_sibling(tree, info, &tree);
	if (lyd_find_path(tree, "/ocs-switch:ports", 0, &ports)) {
		lyd_new_inner(NULL, mod, "ports", 0, &ports);
		lyd_insert_sibling(tree, ports, &tree);
	}
	bool *lit = calloc((size_t)sim.ports, sizeof(bool));
	for (int in = 0; in < sim.ports; in++)
		if (d->cur_out[in] >= 0 && d->cur_out[in] < sim.ports)
			lit[in] = lit[d->cur_out[in]] = true;
	for (int p = 0; p < sim.ports; p++) {
		char key[16];
		snprintf(key, sizeof(key), "%d", p);
		if (lyd_find_sibling_val(lyd_child(ports), NULL, key, 0, &node)) {
			const struct lysc_node *s =
				lys_find_path(sim.ctx, NULL, "/ocs-switch:ports/port", 0);
			if (lyd_find_sibling_val(lyd_child(ports), s, key, 0, &node))
				lyd_new_list(ports, mod, "port", 0, &node, key);
		}
		const char *st = port_failed(d, p) ? "failed" : lit[p] ? "up" : "down";
		add_leaf(node, mod, "oper-state", "%s", st);
		add_leaf(node, mod, "input-power", "%s", lit[p] ? "-2.50" : "-40.00");
		add_leaf(node, mod, "output-power", "%s", lit[p] ? "-3.10" : "-40.00");
	}
	free(lit);
connections:;
	struct ly_set *set = NULL;
	if (!lyd_find_xpath(tree, "/ocs-switch:cross-connects/connection", &set)) {
		for (uint32_t i = 0; i < set->count; i++) {
			struct lyd_node *c = set->dnodes[i];
			int in = atoi(lyd_get_value(lyd_child(c)));
			int o = (in >= 0 && in < sim.ports) ? d->cur_out[in] : -1;
			if (o < 0 || o >= sim.ports || in >= sim.ports) {
				add_leaf(c, mod, "status", "invalid");
				add_leaf(c, mod, "reason", "port out of range");
			} else if (port_failed(d, in) || port_failed(d, o)) {
				add_leaf(c, mod, "status", "failed");
				add_leaf(c, mod, "reason", "port %d failed", port_failed(d, in) ? in : o);
			} else if (t < d->since_ms[in] + sim.switch_ms) {
				add_leaf(c, mod, "status", "pending");
			} else {
				add_leaf(c, mod, "status", "connected");
			}
		}
		ly_set_free(set, NULL);
	}
	return tree;
}

/* Builds running + state data of an ocs-transceiver agent. */
static struct lyd_node *transceiver_state(struct device *d)
{
	const struct lys_module *mod = ly_ctx_get_module_implemented(sim.ctx, "ocs-transceiver");
	struct lyd_node *tree = dup_tree(d->running);
	bool settling = now_ms() < d->last_change_ms + sim.switch_ms;
	struct ly_set *set = NULL;
	if (!lyd_find_xpath(tree, "/ocs-transceiver:transceivers/node", &set)) {
		for (uint32_t i = 0; i < set->count; i++) {
			struct lyd_node *n = set->dnodes[i], *b;
			long node_id = atol(lyd_get_value(lyd_child(n)));
			add_leaf(n, mod, "faulty", "false");
			LY_LIST_FOR(lyd_child(n), b)
			{
				if (strcmp(LYD_NAME(b), "bundle"))
					continue;
				struct lyd_node *ext = NULL, *dist = NULL, *dir = NULL, *ps = NULL;
				lyd_find_path(b, "external", 0, &ext);
				if (ext) {
					lyd_find_path(ext, "distance", 0, &dist);
					lyd_find_path(ext, "direction", 0, &dir);
				}
				const char *status = settling ? "pending" : "active";
				if (dist && dir) {
					long dd = atol(lyd_get_value(dist));
					bool up = !strcmp(lyd_get_value(dir), "up");
					add_leaf(b, mod, "peer-node", "%ld",
						 up ? node_id + dd : node_id - dd);
					lyd_new_list(b, mod, "path-status", 0, &ps, "external",
						     lyd_get_value(dist), lyd_get_value(dir));
				} else {
					lyd_new_list(b, mod, "path-status", 0, &ps, "loopback", "0",
						     "up");
				}
				if (ps)
					add_leaf(ps, mod, "status", "%s", status);
			}
		}
		ly_set_free(set, NULL);
	}
	return tree;
}

/* ---- notifications ------------------------------------------------------ */

static void notify_subscribers(struct device *d, struct lyd_node *event)
{
	char tbuf[64];
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(tbuf, sizeof(tbuf), "%Y-%m-%dT%H:%M:%SZ", &tm);
	for (int i = 0; i < d->n_subscribers; i++) {
		struct nc_server_notif *n = nc_server_notif_new(event, tbuf, NC_PARAMTYPE_CONST);
		nc_server_notif_send(d->subscribers[i], n, 1000);
		nc_server_notif_free(n);
	}
	lyd_free_all(event);
}

static void drop_subscriber(struct device *d, struct nc_session *s)
{
	for (int i = 0; i < d->n_subscribers; i++)
		if (d->subscribers[i] == s)
			d->subscribers[i] = d->subscribers[--d->n_subscribers];
}

/* ---- RPC handlers (device mutex held) ----------------------------------- */

static NC_DATASTORE datastore_of(const struct lyd_node *rpc, const char *container)
{
	struct lyd_node *c = NULL;
	if (lyd_find_path(rpc, container, 0, &c) || !lyd_child(c))
		return NC_DATASTORE_ERROR;
	const char *n = LYD_NAME(lyd_child(c));
	if (!strcmp(n, "running"))
		return NC_DATASTORE_RUNNING;
	if (!strcmp(n, "candidate"))
		return NC_DATASTORE_CANDIDATE;
	if (!strcmp(n, "startup"))
		return NC_DATASTORE_STARTUP;
	return NC_DATASTORE_ERROR;
}

static const char *child_value(const struct lyd_node *rpc, const char *name)
{
	struct lyd_node *c = NULL;
	if (lyd_find_path(rpc, name, 0, &c))
		return NULL;
	return lyd_get_value(c);
}

static struct nc_server_reply *rpc_lock(struct device *d, const struct lyd_node *rpc, uint32_t sid,
					bool lock)
{
	NC_DATASTORE ds = datastore_of(rpc, "target");
	uint32_t *holder = ds == NC_DATASTORE_RUNNING     ? &d->lock_running_sid
			   : ds == NC_DATASTORE_CANDIDATE ? &d->lock_candidate_sid
							  : NULL;
	if (!holder)
		return reply_err(NC_ERR_INVALID_VALUE, "target must be running or candidate", NULL);
	if (!lock) {
		if (*holder != sid)
			return reply_err(NC_ERR_OP_FAILED, "the datastore is not locked by this session",
					 NULL);
		*holder = 0;
		return nc_server_reply_ok();
	}
	if (*holder)
		return reply_lock_denied(*holder);
	if (ds == NC_DATASTORE_CANDIDATE && d->candidate_dirty)
		return reply_lock_denied(0);
	*holder = sid;
	return nc_server_reply_ok();
}

static struct nc_server_reply *rpc_edit(struct device *d, const struct lyd_node *rpc, uint32_t sid)
{
	if (datastore_of(rpc, "target") != NC_DATASTORE_CANDIDATE)
		return reply_err(NC_ERR_OP_NOT_SUPPORTED,
				 "only the candidate datastore is writable (no :writable-running)",
				 NULL);
	if (d->lock_candidate_sid && d->lock_candidate_sid != sid)
		return reply_err(NC_ERR_IN_USE, "the candidate is locked by another session", NULL);
	int dflt = DS_OP_MERGE;
	const char *dop = child_value(rpc, "default-operation");
	if (dop && (dflt = ds_op_parse(dop)) < 0)
		return reply_err(NC_ERR_INVALID_VALUE, "bad default-operation", NULL);
	struct lyd_node *config = NULL, *edit = NULL;
	char msg[512] = "", path[512] = "";
	if (lyd_find_path(rpc, "config", 0, &config))
		return reply_err(NC_ERR_MISSING_ELEM, "edit-config without <config>", NULL);
	if (ds_parse_any(sim.ctx, config, 0, &edit, msg, sizeof(msg)))
		return reply_err(NC_ERR_INVALID_VALUE, msg, NULL);
	struct lyd_node *work = dup_tree(d->candidate);
	enum ds_error e = ds_apply_edit(&work, edit, (enum ds_op)dflt, msg, sizeof(msg), path,
					sizeof(path));
	lyd_free_all(edit);
	if (e != DS_ERR_OK) {
		lyd_free_all(work);
		NC_ERR tag = e == DS_ERR_DATA_EXISTS    ? NC_ERR_DATA_EXISTS
			     : e == DS_ERR_DATA_MISSING ? NC_ERR_DATA_MISSING
							: NC_ERR_INVALID_VALUE;
		return reply_err(tag, msg, path);
	}
	lyd_free_all(d->candidate);
	d->candidate = work;
	d->candidate_dirty = true;
	d->candidate_valid = false;
	return nc_server_reply_ok();
}

static struct nc_server_reply *rpc_validate(struct device *d, const struct lyd_node *rpc)
{
	NC_DATASTORE ds = datastore_of(rpc, "source");
	char msg[512] = "", path[512] = "";
	const struct lyd_node *tree = ds == NC_DATASTORE_RUNNING ? d->running : d->candidate;
	if (ds != NC_DATASTORE_RUNNING && ds != NC_DATASTORE_CANDIDATE)
		return reply_err(NC_ERR_INVALID_VALUE, "validate source must be running or candidate",
				 NULL);
	if (validate_tree(tree, msg, sizeof(msg), path, sizeof(path)))
		return reply_err(NC_ERR_INVALID_VALUE, msg, path);
	if (ds == NC_DATASTORE_CANDIDATE)
		d->candidate_valid = true;
	return nc_server_reply_ok();
}

static struct nc_server_reply *rpc_commit(struct device *d, const struct lyd_node *rpc,
					  uint32_t sid, bool noeffect)
{
	struct lyd_node *n = NULL;
	bool confirmed = !lyd_find_path(rpc, "confirmed", 0, &n);
	const char *timeout_s = child_value(rpc, "confirm-timeout");
	const char *persist = child_value(rpc, "persist");
	const char *persist_id = child_value(rpc, "persist-id");
	if (d->lock_candidate_sid && d->lock_candidate_sid != sid)
		return reply_err(NC_ERR_IN_USE, "the candidate is locked by another session", NULL);
	if (d->lock_running_sid && d->lock_running_sid != sid)
		return reply_err(NC_ERR_IN_USE, "running is locked by another session", NULL);
	if (d->cc_active) {
		/* confirming (or extending) commit: must come from the owner */
		if (d->cc_persist ? (!persist_id || strcmp(persist_id, d->cc_persist))
				  : (d->cc_sid != sid))
			return reply_err(NC_ERR_INVALID_VALUE,
					 "a confirmed commit is pending; the confirming commit must "
					 "come from its session or carry its persist-id",
					 NULL);
	} else if (persist_id) {
		return reply_err(NC_ERR_INVALID_VALUE, "no confirmed commit is pending for this persist-id",
				 "/ietf-netconf:commit/persist-id");
	}
	/* a clean candidate is a copy of running (valid when it was committed),
	 * and one validated since its last edit need not be validated again:
	 * a confirming commit costs no tree work, as on real devices */
	bool changes = d->candidate_dirty;
	char msg[512] = "", path[512] = "";
	if (changes && !d->candidate_valid &&
	    validate_tree(d->candidate, msg, sizeof(msg), path, sizeof(path)))
		return reply_err(NC_ERR_INVALID_VALUE, msg, path);
	if (noeffect)
		return nc_server_reply_ok(); /* the faulty device pretends */
	if (confirmed) {
		if (!d->cc_active) {
			d->cc_backup = dup_tree(d->running);
			d->cc_active = true;
		}
		d->cc_sid = sid;
		free(d->cc_persist);
		d->cc_persist = persist ? strdup(persist) : NULL;
		long t = timeout_s ? atol(timeout_s) : DEFAULT_CONFIRM_TIMEOUT_S;
		d->cc_deadline_ms = now_ms() + t * 1000;
	} else if (d->cc_active) {
		lyd_free_all(d->cc_backup);
		d->cc_backup = NULL;
		d->cc_active = false;
		free(d->cc_persist);
		d->cc_persist = NULL;
	}
	if (changes)
		set_running(d, dup_tree(d->candidate));
	d->candidate_dirty = false;
	return nc_server_reply_ok();
}

static struct nc_server_reply *rpc_cancel(struct device *d, const struct lyd_node *rpc,
					  uint32_t sid)
{
	const char *persist_id = child_value(rpc, "persist-id");
	if (!d->cc_active)
		return reply_err(NC_ERR_OP_FAILED, "no confirmed commit is pending", NULL);
	if (d->cc_persist ? (!persist_id || strcmp(persist_id, d->cc_persist)) : d->cc_sid != sid)
		return reply_err(NC_ERR_INVALID_VALUE,
				 "cancel-commit must come from the committing session or carry "
				 "its persist-id",
				 NULL);
	revert_confirmed_commit(d);
	return nc_server_reply_ok();
}

static struct nc_server_reply *rpc_get(struct device *d, const struct lyd_node *rpc, bool config_only)
{
	struct lyd_node *fnode = NULL, *filter = NULL, *selected = NULL, *full = NULL;
	char msg[256] = "";
	bool has_filter = !lyd_find_path(rpc, "filter", 0, &fnode);
	if (has_filter && ds_parse_any(sim.ctx, fnode, 1, &filter, msg, sizeof(msg)))
		return reply_err(NC_ERR_INVALID_VALUE, msg, NULL);
	bool with_ports = !has_filter;
	for (const struct lyd_node *f = filter; f; f = f->next)
		with_ports |= strcmp(LYD_NAME(f), "cross-connects") != 0;
	if (config_only) {
		NC_DATASTORE ds = datastore_of(rpc, "source");
		if (ds != NC_DATASTORE_RUNNING && ds != NC_DATASTORE_CANDIDATE) {
			lyd_free_all(filter);
			return reply_err(NC_ERR_INVALID_VALUE, "source must be running or candidate",
					 NULL);
		}
		full = dup_tree(ds == NC_DATASTORE_RUNNING ? d->running : d->candidate);
	} else if (!has_filter || filter) { /* an empty filter selects nothing */
		full = sim.model == MODEL_SWITCH ? switch_state(d, with_ports) : transceiver_state(d);
	}
	if (has_filter && !filter) {
		lyd_free_all(full);
		full = NULL;
	}
	int rc = ds_subtree_filter(sim.ctx, full, filter, &selected);
	lyd_free_all(full);
	lyd_free_all(filter);
	if (rc)
		return reply_err(NC_ERR_INVALID_VALUE, "unsupported subtree filter", NULL);
	struct lyd_node *output = NULL;
	if (lyd_dup_single(rpc, NULL, 0, &output) ||
	    lyd_new_any(output, NULL, "data", selected, 1, LYD_ANYDATA_DATATREE, 1, NULL)) {
		lyd_free_all(selected);
		lyd_free_all(output);
		return reply_err(NC_ERR_OP_FAILED, "cannot build the reply", NULL);
	}
	return nc_server_reply_data(output, NC_WD_EXPLICIT, NC_PARAMTYPE_FREE);
}

static struct nc_server_reply *rpc_emit(struct device *d, const struct lyd_node *rpc)
{
	const char *kind = child_value(rpc, "kind");
	const char *port = child_value(rpc, "port");
	struct lyd_node *ev = NULL;
	char path[128];
	if (sim.model != MODEL_SWITCH)
		return reply_err(NC_ERR_OP_NOT_SUPPORTED, "only ocs-switch devices emit these", NULL);
	if (!strcmp(kind, "port-state-change")) {
		snprintf(path, sizeof(path), "/ocs-switch:port-state-change/port");
		lyd_new_path(NULL, sim.ctx, path, port, 0, &ev);
		lyd_new_path(ev, sim.ctx, "/ocs-switch:port-state-change/oper-state",
			     port_failed(d, atoi(port)) ? "failed" : "up", 0, NULL);
	} else {
		int in = atoi(port);
		int o = (in >= 0 && in < sim.ports) ? d->cur_out[in] : -1;
		char ob[16];
		snprintf(ob, sizeof(ob), "%d", o < 0 ? 0 : o);
		lyd_new_path(NULL, sim.ctx, "/ocs-switch:connection-failed/input", port, 0, &ev);
		lyd_new_path(ev, sim.ctx, "/ocs-switch:connection-failed/output", ob, 0, NULL);
		lyd_new_path(ev, sim.ctx, "/ocs-switch:connection-failed/reason",
			     "injected by emit-notification", 0, NULL);
	}
	if (!ev)
		return reply_err(NC_ERR_INVALID_VALUE, "cannot build the notification", NULL);
	notify_subscribers(d, ev);
	return nc_server_reply_ok();
}

/*
 * The text of a module the simulator does not load, from the IETF module
 * directory (libnetconf2 clients ask every server for the NMDA modules they
 * use themselves): the revision asked for, else the newest file. NULL when
 * there is none, or when the name or revision from the network could be
 * anything but a module file name. Caller frees.
 */
static char *schema_from_dir(const char *id, const char *rev)
{
	char pattern[PATH_MAX];
	glob_t g = {0};
	char *text = NULL;
	size_t n_id = strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.");
	if (!*id || id[0] == '.' || id[n_id] || strlen(id) > 64 ||
	    (rev && *rev && (strlen(rev) != 10 || rev[strspn(rev, "0123456789-")])))
		return NULL;
	snprintf(pattern, sizeof(pattern), "%s/%s@%s.yang", sim.ietf_dir, id,
		 rev && *rev ? rev : "[0-9]*");
	if (glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc > 0) {
		/* sorted: the last name is the newest revision */
		FILE *f = fopen(g.gl_pathv[g.gl_pathc - 1], "re");
		text = f ? calloc(1, MAX_SCHEMA_BYTES + 2) : NULL;
		size_t n = text ? fread(text, 1, MAX_SCHEMA_BYTES + 1, f) : 0;
		if (text && (n == 0 || n > MAX_SCHEMA_BYTES)) { /* empty, or not a module */
			free(text);
			text = NULL;
		}
		if (f)
			fclose(f);
	}
	globfree(&g);
	return text;
}

/* get-schema (RFC 6022): the module text as libyang prints it. */
static struct nc_server_reply *rpc_get_schema(const struct lyd_node *rpc)
{
	const char *id = child_value(rpc, "identifier");
	const char *rev = child_value(rpc, "version");
	const char *fmt = child_value(rpc, "format");
	if (fmt && !strstr(fmt, "yang"))
		return reply_err(NC_ERR_INVALID_VALUE, "only the yang format is served",
				 "/ietf-netconf-monitoring:get-schema/format");
	const struct lys_module *mod = rev && *rev ? ly_ctx_get_module(sim.ctx, id, rev)
						   : ly_ctx_get_module_latest(sim.ctx, id);
	char *text = mod ? NULL : schema_from_dir(id ? id : "", rev);
	if (!mod && !text)
		return reply_err(NC_ERR_INVALID_VALUE, "no such schema",
				 "/ietf-netconf-monitoring:get-schema/identifier");
	struct lyd_node *output = NULL;
	if ((mod && lys_print_mem(&text, mod, LYS_OUT_YANG, 0)) ||
	    lyd_dup_single(rpc, NULL, 0, &output) ||
	    lyd_new_any(output, NULL, "data", text, 1, LYD_ANYDATA_STRING, 1, NULL)) {
		free(text);
		lyd_free_all(output);
		return reply_err(NC_ERR_OP_FAILED, "cannot print the schema", NULL);
	}
	return nc_server_reply_data(output, NC_WD_EXPLICIT, NC_PARAMTYPE_FREE);
}

/* Classifies an RPC into the fault steps; -1 for RPCs faults never touch. */
static int step_of(struct device *d, const struct lyd_node *rpc)
{
	const char *n = LYD_NAME(rpc);
	if (!strcmp(n, "lock"))
		return DEVSIM_STEP_LOCK;
	if (!strcmp(n, "unlock"))
		return DEVSIM_STEP_UNLOCK;
	if (!strcmp(n, "edit-config"))
		return DEVSIM_STEP_EDIT;
	if (!strcmp(n, "validate"))
		return DEVSIM_STEP_VALIDATE;
	if (!strcmp(n, "commit")) {
		struct lyd_node *c = NULL;
		bool confirmed = !lyd_find_path(rpc, "confirmed", 0, &c);
		return (d->cc_active && !confirmed) ? DEVSIM_STEP_CONFIRM : DEVSIM_STEP_COMMIT;
	}
	if (!strcmp(n, "cancel-commit"))
		return DEVSIM_STEP_CANCEL;
	if (!strcmp(n, "discard-changes"))
		return DEVSIM_STEP_DISCARD;
	if (!strcmp(n, "get") || !strcmp(n, "get-config"))
		return DEVSIM_STEP_GET;
	return -1;
}

static struct nc_server_reply *rpc_clb(struct lyd_node *rpc, struct nc_session *session)
{
	struct session_data *sd = nc_session_get_data(session);
	if (!sd || !sd->dev)
		return reply_err(NC_ERR_OP_FAILED, "session is not bound to a device", NULL);
	struct device *d = sd->dev;
	uint32_t sid = nc_session_get_id(session);
	const char *name = LYD_NAME(rpc);

	pthread_mutex_lock(&d->mu);
	int step = step_of(d, rpc);
	struct devsim_faults f = d->faults;
	if (step >= 0 && !(f.sticky_mask & (1u << step))) {
		/* one-shot knobs clear as they fire */
		uint32_t bit = 1u << step;
		d->faults.refuse_mask &= ~bit;
		d->faults.drop_mask &= ~bit;
		d->faults.noeffect_mask &= ~bit;
		d->faults.hang_ms[step] = 0;
	}
	pthread_mutex_unlock(&d->mu);
	if (step >= 0 && f.hang_ms[step] > 0)
		usleep((useconds_t)f.hang_ms[step] * 1000);
	if (step >= 0 && (f.drop_mask & (1u << step))) {
		shutdown(sd->fd, SHUT_RDWR);
		return reply_err(NC_ERR_OP_FAILED, "session dropped by fault injection", NULL);
	}
	if (step >= 0 && (f.refuse_mask & (1u << step))) {
		char msg[96];
		snprintf(msg, sizeof(msg), "refused by fault injection (refuse@%s)",
			 devsim_step_name((enum devsim_step)step));
		return reply_err(NC_ERR_OP_FAILED, msg, NULL);
	}

	struct nc_server_reply *reply = NULL;
	pthread_mutex_lock(&d->mu);
	if (!strcmp(name, "lock") || !strcmp(name, "unlock")) {
		reply = rpc_lock(d, rpc, sid, !strcmp(name, "lock"));
	} else if (!strcmp(name, "edit-config")) {
		reply = rpc_edit(d, rpc, sid);
	} else if (!strcmp(name, "validate")) {
		reply = rpc_validate(d, rpc);
	} else if (!strcmp(name, "commit")) {
		bool noeffect = step >= 0 && (f.noeffect_mask & (1u << DEVSIM_STEP_COMMIT)) &&
				step == DEVSIM_STEP_COMMIT;
		reply = rpc_commit(d, rpc, sid, noeffect);
	} else if (!strcmp(name, "cancel-commit")) {
		reply = rpc_cancel(d, rpc, sid);
	} else if (!strcmp(name, "discard-changes") && d->lock_candidate_sid &&
		   d->lock_candidate_sid != sid) {
		reply = reply_err(NC_ERR_IN_USE, "the candidate is locked by another session", NULL);
	} else if (!strcmp(name, "discard-changes")) {
		lyd_free_all(d->candidate);
		d->candidate = dup_tree(d->running);
		d->candidate_dirty = false;
		reply = nc_server_reply_ok();
	} else if (!strcmp(name, "get")) {
		reply = rpc_get(d, rpc, false);
	} else if (!strcmp(name, "get-config")) {
		reply = rpc_get(d, rpc, true);
	} else if (!strcmp(name, "create-subscription")) {
		if (d->n_subscribers >= MAX_SUBSCRIBERS) {
			reply = reply_err(NC_ERR_RES_DENIED, "too many subscribers", NULL);
		} else {
			d->subscribers[d->n_subscribers++] = session;
			nc_session_inc_notif_status(session);
			reply = nc_server_reply_ok();
		}
	} else if (!strcmp(name, "set-faults")) {
		char err[256];
		struct devsim_faults nf;
		if (devsim_faults_parse(child_value(rpc, "spec"), &nf, err, sizeof(err)))
			reply = reply_err(NC_ERR_INVALID_VALUE, err, "/ocs-devsim:set-faults/spec");
		else {
			d->faults = nf;
			reply = nc_server_reply_ok();
		}
	} else if (!strcmp(name, "get-schema")) {
		reply = rpc_get_schema(rpc);
	} else if (!strcmp(name, "emit-notification")) {
		reply = rpc_emit(d, rpc);
	} else {
		reply = reply_err(NC_ERR_OP_NOT_SUPPORTED, "operation not supported by ocs-devsim",
				  NULL);
	}
	pthread_mutex_unlock(&d->mu);
	if (step >= 0 && f.hang_ms[step] > 0) {
		/* after a hang the client may have given up and closed: like a
		 * device whose TCP stack notices, end the session so its locks and
		 * unconfirmed commit do not outlive it */
		struct pollfd p = {sd->fd, POLLRDHUP, 0};
		if (poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
			shutdown(sd->fd, SHUT_RDWR);
	}
	return reply;
}

/* ---- sessions ------------------------------------------------------------ */

static int bind_session_locked(struct nc_session *s, struct session_data *sd);

/* Sockets already bound to a live session (guarded by bind_mu). */
static pthread_mutex_t bind_mu = PTHREAD_MUTEX_INITIALIZER;
static bool fd_bound[MAX_FDS];

/*
 * libnetconf2 does not say which endpoint accepted a session. Find the
 * socket whose peer is the session's remote address among our own file
 * descriptors; its local port names the device. One client port may talk
 * to several of our ports at once (Linux reuses an ephemeral port for
 * different destinations), so sockets of live sessions are skipped and the
 * search runs under bind_mu. That is not enough: while another connection
 * from the same client port is still in its handshake (accepted by another
 * accept thread, not bound yet) its socket matches too, and picking it
 * would attach this session to the wrong device, so that every edit of the
 * session lands there (a circuit committed "on" one device missing from it,
 * found on another). When the unbound sockets of that peer port lead to
 * more than one device the session is refused (-EAGAIN; the client
 * reconnects) rather than guessed. Sockets leave fd_bound only once closed
 * (release_session), so a closing session's socket never matches either.
 */
static int bind_session(struct nc_session *s, struct session_data *sd)
{
	pthread_mutex_lock(&bind_mu);
	int rc = bind_session_locked(s, sd);
	pthread_mutex_unlock(&bind_mu);
	return rc;
}

/*
 * Frees session s (closing its socket) and only then marks the socket
 * unbound, both under bind_mu: an fd number is free for binding again only
 * once it no longer names this session's connection. sd (NULL for a session
 * that was never bound) is freed with s.
 */
static void release_session(struct nc_session *s, struct session_data *sd)
{
	pthread_mutex_lock(&bind_mu);
	int fd = sd && sd->dev ? sd->fd : -1;
	nc_session_free(s, NULL);
	free(sd);
	if (fd >= 0 && fd < MAX_FDS)
		fd_bound[fd] = false;
	pthread_mutex_unlock(&bind_mu);
}

static int bind_session_locked(struct nc_session *s, struct session_data *sd)
{
	uint16_t peer_port = nc_session_get_port(s);
	DIR *dir = opendir("/proc/self/fd");
	if (!dir)
		return -errno;
	struct dirent *de;
	int rc = -ENOENT;
	while ((de = readdir(dir))) {
		int fd = atoi(de->d_name);
		struct sockaddr_storage peer, local;
		socklen_t pl = sizeof(peer), ll = sizeof(local);
		if (de->d_name[0] == '.' || getpeername(fd, (struct sockaddr *)&peer, &pl))
			continue;
		uint16_t pp = peer.ss_family == AF_INET
				      ? ntohs(((struct sockaddr_in *)&peer)->sin_port)
				      : ntohs(((struct sockaddr_in6 *)&peer)->sin6_port);
		if (pp != peer_port || getsockname(fd, (struct sockaddr *)&local, &ll))
			continue;
		uint16_t lp = local.ss_family == AF_INET
				      ? ntohs(((struct sockaddr_in *)&local)->sin_port)
				      : ntohs(((struct sockaddr_in6 *)&local)->sin6_port);
		if (lp < sim.base_port || lp >= sim.base_port + sim.count || fd >= MAX_FDS ||
		    fd_bound[fd])
			continue;
		if (rc == 0 && sd->dev != &sim.devs[lp - sim.base_port]) {
			rc = -EAGAIN; /* two devices: cannot tell which one is ours */
			break;
		}
		sd->dev = &sim.devs[lp - sim.base_port];
		sd->fd = fd;
		rc = 0;
	}
	closedir(dir);
	if (rc == 0)
		fd_bound[sd->fd] = true;
	return rc;
}

/* A session ended: release its locks and revert its non-persistent commit. */
static void session_gone(struct nc_session *s)
{
	struct session_data *sd = nc_session_get_data(s);
	if (!sd)
		return;
	struct device *d = sd->dev;
	uint32_t sid = nc_session_get_id(s);
	if (getenv("DEVSIM_TRACE"))
		fprintf(stderr, "devsim: device %d session %u ended\n", d->index, sid);
	pthread_mutex_lock(&d->mu);
	if (d->lock_running_sid == sid)
		d->lock_running_sid = 0;
	if (d->lock_candidate_sid == sid) {
		d->lock_candidate_sid = 0;
		lyd_free_all(d->candidate);
		d->candidate = dup_tree(d->running);
		d->candidate_dirty = false;
	}
	if (d->cc_active && !d->cc_persist && d->cc_sid == sid)
		revert_confirmed_commit(d);
	drop_subscriber(d, s);
	pthread_mutex_unlock(&d->mu);
}

/*
 * Workers. nc_ps_poll() with a timeout waits by checking every session of
 * its pollsession in a sleep loop, which made an idle simulator of 256
 * devices burn most of a core (stolen from the controller under test on a
 * small machine). So the workers sleep in epoll_wait(2) on the sessions'
 * sockets, registered one-shot: the kernel hands a readable session to one
 * worker, which asks libnetconf2 (a one-session pollsession, timeout 0) to
 * serve it until nothing is buffered, then re-arms it. A hung RPC (fault
 * knob) blocks one worker and one device only. An accepted session is served
 * once by its accept thread before it is registered: its first RPC may have
 * been read along with its <hello>, and the socket will not tell.
 */
struct conn {
	struct nc_session *s;
	struct nc_pollsession *ps; /* this session only */
	int fd;
	struct conn *prev, *next; /* sim.conns, for the final clean-up */
};

static pthread_mutex_t conns_mu = PTHREAD_MUTEX_INITIALIZER; /* guards sim.conns links */

static void end_conn(struct conn *c)
{
	epoll_ctl(sim.epfd, EPOLL_CTL_DEL, c->fd, NULL);
	pthread_mutex_lock(&conns_mu);
	if (c->prev)
		c->prev->next = c->next;
	else
		sim.conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	pthread_mutex_unlock(&conns_mu);
	nc_ps_del_session(c->ps, c->s);
	nc_ps_free(c->ps);
	session_gone(c->s);
	release_session(c->s, nc_session_get_data(c->s));
	free(c);
}

/* Serves what the session has buffered; false when the session ended. */
static bool serve_conn(struct conn *c)
{
	for (;;) {
		struct nc_session *s = NULL;
		int r = nc_ps_poll(c->ps, 0, &s);
		/* a reply that could not be written (the client gave up on a hung
		 * RPC) leaves the session invalid without SESSION_TERM: end it too,
		 * or its locks would outlive it */
		if ((r & (NC_PSPOLL_SESSION_TERM | NC_PSPOLL_SESSION_ERROR | NC_PSPOLL_ERROR)) ||
		    nc_session_get_status(c->s) != NC_STATUS_RUNNING)
			return false;
		if (!(r & NC_PSPOLL_RPC))
			return true; /* nothing more buffered */
	}
}

static void *worker_main(void *arg)
{
	(void)arg;
	while (!sim.stop) {
		struct epoll_event ev;
		if (epoll_wait(sim.epfd, &ev, 1, WORKER_POLL_MS) != 1)
			continue;
		struct conn *c = ev.data.ptr;
		ev.events = EPOLLIN | EPOLLONESHOT;
		if (!serve_conn(c) || epoll_ctl(sim.epfd, EPOLL_CTL_MOD, c->fd, &ev))
			end_conn(c);
	}
	nc_thread_destroy();
	return NULL;
}

/* Serves an accepted, bound session once and hands it to the workers. */
static void add_conn(struct nc_session *s)
{
	struct session_data *sd = nc_session_get_data(s);
	struct conn *c = calloc(1, sizeof(*c));
	struct nc_pollsession *ps = nc_ps_new();
	if (!c || !ps || nc_ps_add_session(ps, s)) {
		free(c);
		nc_ps_free(ps);
		session_gone(s);
		release_session(s, sd);
		return;
	}
	*c = (struct conn){.s = s, .ps = ps, .fd = sd->fd};
	pthread_mutex_lock(&conns_mu);
	c->next = sim.conns;
	if (sim.conns)
		sim.conns->prev = c;
	sim.conns = c;
	pthread_mutex_unlock(&conns_mu);
	struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT, .data.ptr = c};
	if (!serve_conn(c) || epoll_ctl(sim.epfd, EPOLL_CTL_ADD, c->fd, &ev))
		end_conn(c);
}

static void *accept_main(void *arg)
{
	while (!sim.stop) {
		struct nc_session *s = NULL;
		NC_MSG_TYPE m = nc_accept(200, &s);
		if (m != NC_MSG_HELLO || !s)
			continue;
		struct session_data *sd = calloc(1, sizeof(*sd));
		if (!sd || bind_session(s, sd)) {
			if (getenv("DEVSIM_TRACE"))
				fprintf(stderr, "devsim: session %u refused: no single device owns its socket\n",
					nc_session_get_id(s));
			release_session(s, NULL);
			free(sd);
			continue;
		}
		nc_session_set_data(s, sd);
		add_conn(s);
	}
	nc_thread_destroy();
	return NULL;
}

static void *timer_main(void *arg)
{
	while (!sim.stop) {
		usleep(10000);
		int64_t t = now_ms();
		for (int i = 0; i < sim.count; i++) {
			struct device *d = &sim.devs[i];
			pthread_mutex_lock(&d->mu);
			if (d->cc_active && t >= d->cc_deadline_ms)
				revert_confirmed_commit(d);
			pthread_mutex_unlock(&d->mu);
		}
	}
	return NULL;
}

/* ---- startup ------------------------------------------------------------- */

static void usage(FILE *out)
{
	fprintf(out,
		"usage: ocs-devsim --listen ADDR:PORT [--model ocs-switch|ocs-transceiver]\n"
		"                  [--ports N] [--user U --password P] [--authorized-key FILE]\n"
		"                  [--hostkey FILE] [--tls-cert FILE --tls-key FILE --tls-ca FILE]\n"
		"                  [--switch-ms MS] [--fault SPEC]... [--count N]\n"
		"                  [--unidirectional] [--no-confirmed-commit] [--workers N]\n"
		"                  [--ietf-dir DIR]\n");
}

static int parse_int_arg(const char *opt, const char *s, int min, int max, int *out)
{
	char *end = NULL;
	long v = strtol(s, &end, 10);
	if (!*s || *end || v < min || v > max) {
		fprintf(stderr, "ocs-devsim: --%s: expected an integer in %d..%d, got '%s'\n", opt, min,
			max, s);
		return -1;
	}
	*out = (int)v;
	return 0;
}

static int load_context(const char *ietf_dir)
{
	if (ly_ctx_new(ietf_dir, 0, &sim.ctx))
		return -1;
	/* RFC 5277 notifications (yuma's copy imports yuma-ncx extensions) */
	ly_ctx_set_searchdir(sim.ctx, "/usr/share/yuma/modules/ietf-derived");
	ly_ctx_set_searchdir(sim.ctx, "/usr/share/yuma/modules/netconfcentral");
	const char *nc_features[] = {"candidate", "validate", "rollback-on-error",
				     "confirmed-commit", NULL};
	if (!sim.confirmed_commit)
		nc_features[3] = NULL;
	if (!ly_ctx_load_module(sim.ctx, "ietf-netconf", "2011-06-01", nc_features) ||
	    !ly_ctx_load_module(sim.ctx, "ietf-netconf-monitoring", NULL, NULL) ||
	    !ly_ctx_load_module(sim.ctx, "notifications", NULL, NULL) ||
	    !ly_ctx_load_module(sim.ctx, "nc-notifications", NULL, NULL)) {
		fprintf(stderr, "ocs-devsim: cannot load the IETF NETCONF modules from %s: %s\n",
			ietf_dir, ly_errmsg(sim.ctx));
		return -1;
	}
	const char *mods[] = {sb_yang_ocs_switch, sb_yang_ocs_transceiver, sb_yang_ocs_devsim};
	for (size_t i = 0; i < 3; i++)
		if (lys_parse_mem(sim.ctx, mods[i], LYS_IN_YANG, NULL)) {
			fprintf(stderr, "ocs-devsim: cannot load built-in module %zu\n", i);
			return -1;
		}
	return 0;
}

static void on_signal(int sig)
{
	sim.stop = 1;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"listen", required_argument, NULL, 'l'},
		{"model", required_argument, NULL, 'm'},
		{"ports", required_argument, NULL, 'n'},
		{"user", required_argument, NULL, 'u'},
		{"password", required_argument, NULL, 'p'},
		{"authorized-key", required_argument, NULL, 'k'},
		{"hostkey", required_argument, NULL, 'H'},
		{"tls-cert", required_argument, NULL, 'T'},
		{"tls-key", required_argument, NULL, 'K'},
		{"tls-ca", required_argument, NULL, 'A'},
		{"switch-ms", required_argument, NULL, 's'},
		{"fault", required_argument, NULL, 'f'},
		{"count", required_argument, NULL, 'c'},
		{"unidirectional", no_argument, NULL, 'U'},
		{"no-confirmed-commit", no_argument, NULL, 'C'},
		{"workers", required_argument, NULL, 'w'},
		{"ietf-dir", required_argument, NULL, 'i'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	char *listen_addr = NULL, *authkey = NULL, *faults[64];
	const char *ietf_dir = "/usr/share/yuma/modules/ietf";
	int n_faults = 0, workers = 4, port = 0, opt;
	sim.model = MODEL_SWITCH;
	sim.ports = 64;
	sim.switch_ms = -1;
	sim.count = 1;
	sim.bidirectional = true;
	sim.confirmed_commit = true;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'l': {
			char *colon = strrchr(optarg, ':');
			if (!colon || parse_int_arg("listen", colon + 1, 1, 65535, &port)) {
				fprintf(stderr, "ocs-devsim: --listen: expected ADDR:PORT\n");
				return 2;
			}
			listen_addr = strndup(optarg, (size_t)(colon - optarg));
			break;
		}
		case 'm':
			if (!strcmp(optarg, "ocs-switch"))
				sim.model = MODEL_SWITCH;
			else if (!strcmp(optarg, "ocs-transceiver"))
				sim.model = MODEL_TRANSCEIVER;
			else {
				fprintf(stderr, "ocs-devsim: --model: expected ocs-switch or "
						"ocs-transceiver, got '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'n':
			if (parse_int_arg("ports", optarg, 1, 4096, &sim.ports))
				return 2;
			break;
		case 'u':
			sim.auth.user = optarg;
			break;
		case 'p':
			sim.auth.password = optarg;
			break;
		case 'k':
			authkey = optarg;
			break;
		case 'H':
			sim.auth.hostkey_path = strdup(optarg);
			break;
		case 'T':
			sim.auth.tls_cert = optarg;
			break;
		case 'K':
			sim.auth.tls_key = optarg;
			break;
		case 'A':
			sim.auth.tls_ca = optarg;
			break;
		case 's':
			if (parse_int_arg("switch-ms", optarg, 0, 600000, &sim.switch_ms))
				return 2;
			break;
		case 'f':
			if (n_faults < 64)
				faults[n_faults++] = optarg;
			break;
		case 'c':
			if (parse_int_arg("count", optarg, 1, 4096, &sim.count))
				return 2;
			break;
		case 'U':
			sim.bidirectional = false;
			break;
		case 'C':
			sim.confirmed_commit = false;
			break;
		case 'w':
			if (parse_int_arg("workers", optarg, 1, MAX_WORKERS, &workers))
				return 2;
			break;
		case 'i':
			ietf_dir = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!listen_addr) {
		fprintf(stderr, "ocs-devsim: --listen ADDR:PORT is required\n");
		usage(stderr);
		return 2;
	}
	bool tls = sim.auth.tls_cert || sim.auth.tls_key || sim.auth.tls_ca;
	if (tls && !(sim.auth.tls_cert && sim.auth.tls_key && sim.auth.tls_ca && sim.auth.user)) {
		fprintf(stderr, "ocs-devsim: TLS needs --tls-cert, --tls-key, --tls-ca and --user (the "
				"name clients signed by the CA are mapped to)\n");
		return 2;
	}
	if (!tls && (!sim.auth.user || (!sim.auth.password && !authkey))) {
		fprintf(stderr, "ocs-devsim: --user and --password and/or --authorized-key are "
				"required\n");
		return 2;
	}
	if (port + sim.count - 1 > 65535) {
		fprintf(stderr, "ocs-devsim: --count %d does not fit above port %d\n", sim.count, port);
		return 2;
	}
	if (sim.switch_ms < 0)
		sim.switch_ms = sim.model == MODEL_SWITCH ? 25 : 1;
	if (sim.model != MODEL_SWITCH)
		sim.bidirectional = false;
	sim.base_port = (uint16_t)port;

	struct devsim_faults start_faults[64];
	int fault_dev[64];
	for (int i = 0; i < n_faults; i++) {
		char err[256];
		const char *spec = faults[i];
		char *slash = strchr(spec, '/');
		fault_dev[i] = -1;
		if (slash && slash < spec + strcspn(spec, "@=")) {
			fault_dev[i] = atoi(spec);
			spec = slash + 1;
		}
		if (devsim_faults_parse(spec, &start_faults[i], err, sizeof(err))) {
			fprintf(stderr, "ocs-devsim: --fault: %s\n", err);
			return 2;
		}
	}

	ly_log_options(LY_LOSTORE);
	nc_verbosity(NC_VERB_ERROR);
	sim.ietf_dir = ietf_dir;
	if (load_context(ietf_dir))
		return 1;
	char *ca_fp = tls ? devsim_auth_ca_fingerprint(sim.auth.tls_ca) : NULL;
	if (tls && !ca_fp) {
		fprintf(stderr, "ocs-devsim: --tls-ca: cannot read a PEM certificate from %s\n",
			sim.auth.tls_ca);
		return 1;
	}
	if (!tls && !sim.auth.hostkey_path && devsim_auth_generate_hostkey(&sim.auth)) {
		fprintf(stderr, "ocs-devsim: cannot generate an SSH host key\n");
		return 1;
	}

	sim.devs = calloc((size_t)sim.count, sizeof(*sim.devs));
	for (int i = 0; i < sim.count; i++) {
		struct device *d = &sim.devs[i];
		d->index = i;
		d->port = (uint16_t)(port + i);
		pthread_mutex_init(&d->mu, NULL);
		d->cur_out = malloc(sizeof(int) * (size_t)sim.ports);
		d->since_ms = calloc((size_t)sim.ports, sizeof(int64_t));
		for (int p = 0; p < sim.ports; p++)
			d->cur_out[p] = -1;
		for (int f = 0; f < n_faults; f++)
			if (fault_dev[f] < 0 || fault_dev[f] == i)
				d->faults = start_faults[f];
	}

	if (nc_server_init(sim.ctx)) {
		fprintf(stderr, "ocs-devsim: nc_server_init failed\n");
		return 1;
	}
	nc_set_global_rpc_clb(rpc_clb);
	nc_server_set_capability("urn:ietf:params:netconf:capability:notification:1.0");
	/* libnetconf2's own get-schema reply ends in a NUL byte that strict XML
	 * parsers (ncclient/lxml) reject; route it to rpc_get_schema instead */
	const struct lysc_node *gs =
		lys_find_path(sim.ctx, NULL, "/ietf-netconf-monitoring:get-schema", 0);
	if (gs)
		((struct lysc_node *)gs)->priv = NULL;
	devsim_auth_register(&sim.auth);
	if (authkey && nc_server_ssh_add_authkey_path(authkey, sim.auth.user)) {
		fprintf(stderr, "ocs-devsim: --authorized-key: cannot read %s\n", authkey);
		return 1;
	}
	int rc = 0;
	for (int i = 0; i < sim.count && !rc; i++) {
		char name[32];
		snprintf(name, sizeof(name), "dev%d", i);
		int setup = tls ? devsim_auth_add_tls_endpoint(&sim.auth, name, ca_fp)
				: (nc_server_add_endpt(name, NC_TI_LIBSSH) ||
				   nc_server_ssh_endpt_add_hostkey(name, "hostkey", -1) ||
				   nc_server_ssh_endpt_set_auth_methods(
					   name, (sim.auth.password ? NC_SSH_AUTH_PASSWORD : 0) |
							 (authkey ? NC_SSH_AUTH_PUBLICKEY : 0)) ||
				   nc_server_ssh_endpt_set_auth_timeout(name, AUTH_TIMEOUT_S));
		if (setup || nc_server_endpt_set_address(name, listen_addr) ||
		    nc_server_endpt_set_port(name, (uint16_t)(port + i))) {
			fprintf(stderr, "ocs-devsim: cannot listen on %s:%d (in use?)\n", listen_addr,
				port + i);
			rc = 3;
		}
	}
	if (!rc) {
		signal(SIGINT, on_signal);
		signal(SIGTERM, on_signal);
		signal(SIGPIPE, SIG_IGN);
		sim.epfd = epoll_create1(EPOLL_CLOEXEC);
		if (sim.epfd < 0) {
			perror("ocs-devsim: epoll_create1");
			exit(3);
		}
		pthread_t tids[MAX_WORKERS], timer;
		for (int i = 0; i < workers; i++)
			pthread_create(&tids[i], NULL, worker_main, NULL);
		pthread_create(&timer, NULL, timer_main, NULL);
		if (!tls)
			devsim_auth_print_hostkey(&sim.auth);
		printf("ready %d device%s on %s:%d-%d model %s ports %d\n", sim.count,
		       sim.count == 1 ? "" : "s", listen_addr, port, port + sim.count - 1,
		       model_module(), sim.ports);
		fflush(stdout);
		/* several acceptors: a client stuck in the SSH handshake must
		 * not block the other devices' connects */
		pthread_t acceptors[ACCEPT_THREADS];
		for (int i = 0; i < ACCEPT_THREADS; i++)
			pthread_create(&acceptors[i], NULL, accept_main, NULL);
		for (int i = 0; i < ACCEPT_THREADS; i++)
			pthread_join(acceptors[i], NULL);
		for (int i = 0; i < workers; i++)
			pthread_join(tids[i], NULL);
		pthread_join(timer, NULL);
		while (sim.conns)
			end_conn(sim.conns);
		close(sim.epfd);
	}
	nc_server_destroy();
	for (int i = 0; i < sim.count; i++) {
		struct device *d = &sim.devs[i];
		lyd_free_all(d->running);
		lyd_free_all(d->candidate);
		lyd_free_all(d->cc_backup);
		free(d->cc_persist);
		free(d->cur_out);
		free(d->since_ms);
		pthread_mutex_destroy(&d->mu);
	}
	free(sim.devs);
	ly_ctx_destroy(sim.ctx);
	devsim_auth_clear(&sim.auth);
	free(ca_fp);
	free(listen_addr);
	return rc;
}
