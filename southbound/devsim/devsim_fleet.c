/*
 * devsim_fleet.c - the simulated devices of ocs-devsim (devsim_fleet.h): an
 * optical circuit switch (model ocs-switch) or a node's OCS transceivers
 * (model ocs-transceiver), each with its own datastores.
 *
 * Per device: running and candidate datastores, locks, edit-config
 * (merge/replace/create/delete/remove, rollback-on-error), validate, commit,
 * confirmed-commit 1.1 (timeout revert, persist/persist-id, revert when the
 * issuing session dies without persist), cancel-commit, discard-changes,
 * kill-session (with devsim_server.c, which ends the session),
 * get/get-config with subtree filters, get-schema (the loaded modules, and
 * other IETF modules from --ietf-dir), create-subscription and
 * notifications, and the fault knobs of devsim_fault.h (settable at start
 * and through ocs-devsim:set-faults).
 *
 * State data behaves like hardware: a connection whose output changed is
 * `pending` for --switch-ms after the commit, then `connected`. In
 * bidirectional mode (default for ocs-switch) a validate or commit that
 * would leave a one-way circuit (A->B without B->A) is refused.
 *
 * ocs-transceiver: device i is the agent of node node_base + i of one ring
 * domain (the geometry of the --ring-* options; the physical model is in
 * ocs-transceiver.yang). It accepts its own node only, and refuses at
 * validate/commit a bundle it lacks, a distance beyond K and a peer past
 * either end of an open line. A bundle whose selected path changed is
 * `pending` for the switching time (microseconds), then `active`, or
 * `failed` while its own node or the peer it reaches is faulty
 * (knob node-fault). Light is modelled per end: a path does not wait for
 * the peer's bundle to point back.
 *
 * ocs-switch: the fail-port knob fails a port (oper-state failed, its
 * connections failed); set-faults sends port-state-change `failed` for each
 * port it newly fails and `up` for each port it no longer fails, to every
 * subscriber (a rail OCS reporting a GPU fault on its GPU-side port). The
 * refuse-port knob makes edit-config refuse any edit that sets a
 * connection on a port (fleet_refused_edit()): one client's edit fails
 * while others' go through.
 *
 * polatis: an N x N switch of the optical-switch model (a Polatis switch's
 * node names, ../yang/optical-switch.yang): ingress ports 1..N, egress
 * ports N+1..2N, one-way pairs ingress -> egress written straight into
 * running (:writable-running, no candidate, no confirmed commit). An edit
 * whose result has an ingress or egress outside its range, or two pairs
 * onto one egress, is refused whole. ocsd's port k is the fibre on ingress
 * 1+k and egress N+1+k, and the port knobs name k: fail-port=k fails
 * ingress 1+k (status FAILED, no light; port-power-alarm, and
 * port-power-clear when it is repaired), refuse-port=k refuses pairs
 * touching either port, peer-port=k:TEXT is what both ports report as
 * their peer-port unless running configures one. port-set-state disables
 * and enables ports. State: product-information that says it is
 * ocs-devsim, port-config/port status for every port, opm-power per port.
 *
 * A node fault concerns other devices of the fleet (the peers that lose
 * light). Devices keep the one-mutex rule: the faulty flags live in an
 * atomic array every device reads without a lock, and the loss-of-light
 * notifications are sent after the faulty device's mutex is released,
 * visiting the other devices one at a time (fleet_node_fault_spread()).
 *
 * This file holds the fleet, its devices' state, the rules they check and
 * the notifications they send; what each RPC does to a device is in
 * devsim_fleet_rpc.c (the structs both files use: devsim_fleet_internal.h).
 */
#define _GNU_SOURCE /* POLLRDHUP */
#include "devsim_fleet.h"

#include "devsim_fleet_internal.h"
#include "devsim_store.h"

#include <errno.h>
#include <stdatomic.h>
#include <glob.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

extern const char sb_yang_ocs_switch[];
extern const char sb_yang_ocs_transceiver[];
extern const char sb_yang_ocs_devsim[];
extern const char sb_yang_optical_switch[];
extern const char sb_yang_polatis_switch[];

static int64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t fleet_now_ms(void)
{
	return now_us() / 1000;
}

/* ---- ring domain geometry (fabric.h's numbering) ---------------------------- */

static int ring_nodes(const struct devsim_fleet *f)
{
	return f->ring_tors * f->ring_nodes_per_tor;
}

static int ring_position(const struct devsim_fleet *f, int node)
{
	return (node % f->ring_nodes_per_tor) * f->ring_tors + node / f->ring_nodes_per_tor;
}

static int ring_node_at(const struct devsim_fleet *f, int position)
{
	return (position % f->ring_tors) * f->ring_nodes_per_tor + position / f->ring_tors;
}

/* The node `distance` positions from node in direction down (or up); -1 past an open end. */
static int ring_peer(const struct devsim_fleet *f, int node, int distance, bool down)
{
	int n = ring_nodes(f);
	int q = ring_position(f, node) + (down ? -distance : distance);
	if (f->ring_closed)
		q = ((q % n) + n) % n;
	else if (q < 0 || q >= n)
		return -1;
	return ring_node_at(f, q);
}

/* Whether node is faulty (false for a node this process does not serve). */
static bool node_faulty(const struct devsim_fleet *f, int node)
{
	int i = node - f->node_base;
	return i >= 0 && i < f->count && atomic_load(&f->faulty[i]);
}

/* A bundle's selected path as one number: 0 loopback, else 1 + 2 * distance + down. */
static int path_code(const struct lyd_node *bundle, int *distance, bool *down)
{
	struct lyd_node *ext = NULL, *dist = NULL, *dir = NULL;
	*distance = 0;
	*down = false;
	if (lyd_find_path(bundle, "external", 0, &ext) ||
	    lyd_find_path(ext, "distance", 0, &dist) || lyd_find_path(ext, "direction", 0, &dir))
		return 0;
	*distance = atoi(lyd_get_value(dist));
	*down = !strcmp(lyd_get_value(dir), "down");
	return 1 + 2 * *distance + *down;
}

/* ---- replies ------------------------------------------------------------ */

struct nc_server_reply *fleet_reply_err(const struct devsim_fleet *f, NC_ERR tag, const char *msg,
					const char *path)
{
	struct lyd_node *e;
	switch (tag) {
	case NC_ERR_DATA_EXISTS:
	case NC_ERR_DATA_MISSING:
	case NC_ERR_MALFORMED_MSG:
		e = nc_err(f->ctx, tag);
		break;
	case NC_ERR_LOCK_DENIED:
		e = nc_err(f->ctx, tag, (uint32_t)0);
		break;
	default:
		e = nc_err(f->ctx, tag, NC_ERR_TYPE_APP);
		break;
	}
	if (msg)
		nc_err_set_msg(e, msg, "en");
	if (path && *path)
		nc_err_set_path(e, path);
	return nc_server_reply_err(e);
}

struct nc_server_reply *fleet_reply_lock_denied(const struct devsim_fleet *f, uint32_t holder)
{
	struct lyd_node *e = nc_err(f->ctx, NC_ERR_LOCK_DENIED, holder);
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
/* The input and output ports of one connection entry (-1 when absent). */
static void connection_ports(const struct lyd_node *conn, int *in, int *out)
{
	*in = *out = -1;
	for (struct lyd_node *c = lyd_child(conn); c; c = c->next) {
		if (!strcmp(LYD_NAME(c), "input"))
			*in = atoi(lyd_get_value(c));
		else if (!strcmp(LYD_NAME(c), "output"))
			*out = atoi(lyd_get_value(c));
	}
}

static void read_connections(const struct devsim_fleet *f, const struct lyd_node *tree, int *out)
{
	for (int i = 0; i < f->ports; i++)
		out[i] = -1;
	struct ly_set *set = NULL;
	if (!tree || lyd_find_xpath(tree, "/ocs-switch:cross-connects/connection", &set))
		return;
	for (uint32_t i = 0; i < set->count; i++) {
		int in, o;
		connection_ports(set->dnodes[i], &in, &o);
		if (in >= 0 && in < f->ports)
			out[in] = o;
	}
	ly_set_free(set, NULL);
}

/* The ingress and egress of one optical-switch pair (-1 when absent). */
static void pair_ports(const struct lyd_node *pair, int *in, int *out)
{
	*in = *out = -1;
	for (struct lyd_node *c = lyd_child(pair); c; c = c->next) {
		if (!strcmp(LYD_NAME(c), "ingress"))
			*in = atoi(lyd_get_value(c));
		else if (!strcmp(LYD_NAME(c), "egress"))
			*out = atoi(lyd_get_value(c));
	}
}

/*
 * Reads the pairs of a polatis tree in ocsd's port numbering: out[k] is
 * the k' of the pair ingress 1+k -> egress N+1+k' (-1 = none); pairs out
 * of range are skipped (validation refuses them).
 */
static void read_pairs(const struct devsim_fleet *f, const struct lyd_node *tree, int *out)
{
	int n = f->ports;
	for (int k = 0; k < n; k++)
		out[k] = -1;
	struct ly_set *set = NULL;
	if (!tree || lyd_find_xpath(tree, "/optical-switch:cross-connects/pair", &set))
		return;
	for (uint32_t i = 0; i < set->count; i++) {
		int in, e;
		pair_ports(set->dnodes[i], &in, &e);
		if (in >= 1 && in <= n && e > n && e <= 2 * n)
			out[in - 1] = e - n - 1;
	}
	ly_set_free(set, NULL);
}

/*
 * polatis checks the YANG model cannot express: ingress 1..N, egress
 * N+1..2N, each egress fed by one ingress at most. When two pairs share an
 * egress, the error names the one that is not in running (the edit's).
 */
static int check_polatis_rules(const struct devsim_device *d, const struct lyd_node *tree,
			       char *msg, size_t msg_len, char *path, size_t path_len)
{
	const struct devsim_fleet *f = d->fleet;
	int n = f->ports;
	struct ly_set *set = NULL;
	if (!tree || lyd_find_xpath(tree, "/optical-switch:cross-connects/pair", &set))
		return 0;
	int *feeder = calloc((size_t)n, sizeof(int)); /* per egress N+1+k: its ingress, 0 none */
	int rc = feeder ? 0 : -ENOMEM;
	for (uint32_t i = 0; i < set->count && !rc; i++) {
		int in, e;
		pair_ports(set->dnodes[i], &in, &e);
		const char *leaf = NULL;
		if (in < 1 || in > n) {
			snprintf(msg, msg_len,
				 "pair %d -> %d: ingress %d is not an ingress port (1..%d)", in, e,
				 in, n);
			leaf = "ingress";
		} else if (e <= n || e > 2 * n) {
			snprintf(msg, msg_len,
				 "pair %d -> %d: egress %d is not an egress port (%d..%d)", in, e,
				 e, n + 1, 2 * n);
			leaf = "egress";
		} else if (feeder[e - n - 1]) {
			int other = feeder[e - n - 1];
			/* name the pair the edit made: the one running does not hold */
			if (d->cur_out[in - 1] == e - n - 1) {
				int t = in;
				in = other;
				other = t;
			}
			snprintf(msg, msg_len,
				 "pair %d -> %d: egress %d already takes the light of ingress %d",
				 in, e, e, other);
			snprintf(path, path_len,
				 "/optical-switch:cross-connects/pair[ingress='%d']/egress", in);
			rc = -EEXIST;
		} else {
			feeder[e - n - 1] = in;
		}
		if (leaf) {
			snprintf(path, path_len,
				 "/optical-switch:cross-connects/pair[ingress='%d']/%s", in, leaf);
			rc = -EINVAL;
		}
	}
	free(feeder);
	ly_set_free(set, NULL);
	return rc;
}

/*
 * Transceiver checks the YANG model cannot express: the agent's own node
 * only, its bundles, distances within K, no peer past an open end. The
 * error path names the offending leaf.
 */
static int check_transceiver_rules(const struct devsim_device *d, const struct lyd_node *tree,
				   char *msg, size_t msg_len, char *path, size_t path_len)
{
	const struct devsim_fleet *f = d->fleet;
	struct ly_set *set = NULL;
	int rc = 0;
	if (!tree || lyd_find_xpath(tree, "/ocs-transceiver:transceivers/node", &set))
		return 0;
	for (uint32_t i = 0; i < set->count && !rc; i++) {
		struct lyd_node *n = set->dnodes[i], *b;
		const char *v = lyd_get_value(lyd_child(n));
		unsigned long id = v ? strtoul(v, NULL, 10) : 0;
		char base[96];
		snprintf(base, sizeof(base), "/ocs-transceiver:transceivers/node[id='%lu']", id);
		if (id != d->node) {
			snprintf(msg, msg_len, "this agent serves node %u only, not node %lu",
				 d->node, id);
			snprintf(path, path_len, "%s/id", base);
			rc = -EINVAL;
			break;
		}
		LY_LIST_FOR(lyd_child(n), b)
		{
			if (strcmp(LYD_NAME(b), "bundle"))
				continue;
			int bid = atoi(lyd_get_value(lyd_child(b))), distance;
			bool down;
			if (bid >= f->bundles) {
				snprintf(msg, msg_len, "node %u has bundles 0..%d, not %d", d->node,
					 f->bundles - 1, bid);
				snprintf(path, path_len, "%s/bundle[id='%d']/id", base, bid);
				rc = -EINVAL;
				break;
			}
			if (!path_code(b, &distance, &down))
				continue;
			if (distance > f->ring_k) {
				snprintf(
					msg, msg_len,
					"distance %d is beyond the domain's K = %d (external paths "
					"reach 1..%d positions)",
					distance, f->ring_k, f->ring_k);
				snprintf(path, path_len, "%s/bundle[id='%d']/external/distance",
					 base, bid);
				rc = -EINVAL;
				break;
			}
			if (ring_peer(f, (int)d->node, distance, down) < 0) {
				snprintf(
					msg, msg_len,
					"no node %d position(s) %s from node %u (position %d): the "
					"domain is an open line of %d nodes",
					distance, down ? "down" : "up", d->node,
					ring_position(f, (int)d->node), ring_nodes(f));
				snprintf(path, path_len, "%s/bundle[id='%d']/external/distance",
					 base, bid);
				rc = -EINVAL;
				break;
			}
		}
	}
	ly_set_free(set, NULL);
	return rc;
}

/* Device checks the YANG model cannot express: port ranges, L2 symmetry, polatis egresses. */
static int check_device_rules(const struct devsim_device *d, const struct lyd_node *tree, char *msg,
			      size_t msg_len, char *path, size_t path_len)
{
	const struct devsim_fleet *f = d->fleet;
	if (f->model == DEVSIM_MODEL_POLATIS)
		return check_polatis_rules(d, tree, msg, msg_len, path, path_len);
	if (f->model != DEVSIM_MODEL_SWITCH)
		return check_transceiver_rules(d, tree, msg, msg_len, path, path_len);
	struct ly_set *set = NULL;
	if (!tree || lyd_find_xpath(tree, "/ocs-switch:cross-connects/connection", &set))
		return 0;
	int *out = calloc((size_t)f->ports, sizeof(int));
	int rc = 0;
	for (int i = 0; i < f->ports; i++)
		out[i] = -1;
	for (uint32_t i = 0; i < set->count && !rc; i++) {
		int in, o;
		connection_ports(set->dnodes[i], &in, &o);
		if (in >= f->ports || o >= f->ports || o < 0) {
			snprintf(msg, msg_len, "connection %d -> %d: port out of range 0..%d", in,
				 o, f->ports - 1);
			snprintf(path, path_len,
				 "/ocs-switch:cross-connects/connection[input='%d']/output", in);
			rc = -EINVAL;
		} else {
			out[in] = o;
		}
	}
	if (!rc && f->bidirectional) {
		for (int in = 0; in < f->ports; in++) {
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
int fleet_validate_tree(const struct devsim_device *d, const struct lyd_node *tree, char *msg,
			size_t msg_len, char *path, size_t path_len)
{
	const struct devsim_fleet *f = d->fleet;
	struct lyd_node *copy = NULL;
	if (tree && lyd_dup_siblings(tree, NULL, LYD_DUP_RECURSIVE, &copy))
		return -ENOMEM;
	LY_ERR r = lyd_validate_all(&copy, f->ctx, LYD_VALIDATE_NO_STATE, NULL);
	if (r) {
		const char *m = ly_errmsg(f->ctx);
		const char *p = ly_errpath(f->ctx);
		snprintf(msg, msg_len, "%s", m ? m : "validation failed");
		snprintf(path, path_len, "%s", p ? p : "");
		lyd_free_all(copy);
		return -EINVAL;
	}
	int rc = check_device_rules(d, copy, msg, msg_len, path, path_len);
	lyd_free_all(copy);
	return rc;
}

/* A transceiver's new running: per bundle the selected path, since when, and the peer. */
static void set_running_bundles(struct devsim_device *d, int64_t t)
{
	const struct devsim_fleet *f = d->fleet;
	int code[64], peer[64];
	for (int b = 0; b < f->bundles; b++)
		code[b] = 0, peer[b] = -1;
	struct ly_set *set = NULL;
	char xpath[96];
	snprintf(xpath, sizeof(xpath), "/ocs-transceiver:transceivers/node[id='%u']/bundle",
		 d->node);
	if (d->running && !lyd_find_xpath(d->running, xpath, &set)) {
		for (uint32_t i = 0; i < set->count; i++) {
			int bid = atoi(lyd_get_value(lyd_child(set->dnodes[i]))), distance;
			bool down;
			if (bid < 0 || bid >= f->bundles)
				continue; /* validated away before commit */
			code[bid] = path_code(set->dnodes[i], &distance, &down);
			if (code[bid])
				peer[bid] = ring_peer(f, (int)d->node, distance, down);
		}
		ly_set_free(set, NULL);
	}
	for (int b = 0; b < f->bundles; b++) {
		if (code[b] != d->cur_out[b]) {
			d->cur_out[b] = code[b];
			d->since_us[b] = t;
		}
		d->peer[b] = peer[b];
	}
}

/* Installs a new running tree (takes ownership) and updates switch timing. */
void fleet_set_running(struct devsim_device *d, struct lyd_node *tree)
{
	const struct devsim_fleet *f = d->fleet;
	lyd_free_all(d->running);
	d->running = tree;
	int64_t t = now_us();
	if (f->model == DEVSIM_MODEL_TRANSCEIVER)
		return set_running_bundles(d, t);
	if (f->model == DEVSIM_MODEL_POLATIS)
		return read_pairs(f, tree, d->cur_out); /* no pending state in this model */
	int *out = malloc(sizeof(int) * (size_t)f->ports);
	if (!out) {
		/* Cannot tell which ports moved: every port switches again, which
		 * only delays `connected` by one switch time. */
		for (int i = 0; i < f->ports; i++)
			d->since_us[i] = t;
		return;
	}
	read_connections(f, tree, out);
	for (int i = 0; i < f->ports; i++) {
		if (out[i] != d->cur_out[i]) {
			d->cur_out[i] = out[i];
			d->since_us[i] = t;
		}
	}
	free(out);
}

struct lyd_node *fleet_dup_tree(const struct lyd_node *tree)
{
	struct lyd_node *copy = NULL;
	if (tree)
		lyd_dup_siblings(tree, NULL, LYD_DUP_RECURSIVE, &copy);
	return copy;
}

void fleet_revert_confirmed_commit(struct devsim_device *d)
{
	fleet_set_running(d, d->cc_backup);
	d->cc_backup = NULL;
	d->cc_active = false;
	free(d->cc_persist);
	d->cc_persist = NULL;
	lyd_free_all(d->candidate);
	d->candidate = fleet_dup_tree(d->running);
	d->candidate_dirty = false;
}

/* Whether the knobs fa hold fail-port=port. */
static bool faults_fail_port(const struct devsim_faults *fa, int port)
{
	for (int i = 0; i < fa->n_failed_ports; i++)
		if (fa->failed_ports[i] == port)
			return true;
	return false;
}

bool fleet_port_failed(const struct devsim_device *d, int port)
{
	return faults_fail_port(&d->faults, port);
}

static bool faults_refuse_port(const struct devsim_faults *fa, int port)
{
	for (int i = 0; i < fa->n_refused_ports; i++)
		if (fa->refused_ports[i] == port)
			return true;
	return false;
}

int fleet_refused_edit(const struct devsim_device *d, const struct lyd_node *before,
		       const struct lyd_node *after, char *msg, size_t msg_len)
{
	const struct devsim_fleet *f = d->fleet;
	const struct devsim_faults *fa = &d->faults;
	bool polatis = f->model == DEVSIM_MODEL_POLATIS;
	if (f->model == DEVSIM_MODEL_TRANSCEIVER || !fa->n_refused_ports)
		return 0;
	int *old = malloc(sizeof(int) * (size_t)f->ports * 2);
	if (!old) {
		snprintf(msg, msg_len, "refuse-port: out of memory");
		return -1;
	}
	int *now = old + f->ports;
	/* both in ocsd's port numbering: a polatis ingress 1+k and egress N+1+k are port k */
	(polatis ? read_pairs : read_connections)(f, before, old);
	(polatis ? read_pairs : read_connections)(f, after, now);
	int refused = 0;
	for (int in = 0; in < f->ports && !refused; in++) {
		if (now[in] < 0 || now[in] == old[in])
			continue; /* untouched, or removed */
		int p = faults_refuse_port(fa, in)	  ? in
			: faults_refuse_port(fa, now[in]) ? now[in]
			: faults_refuse_port(fa, old[in]) ? old[in] /* re-pointed away */
							  : -1;
		if (p >= 0 && polatis) {
			snprintf(msg, msg_len,
				 "refused by fault injection (refuse-port=%d): the edit sets pair "
				 "%d -> %d on port %d (ingress %d, egress %d)",
				 p, 1 + in, f->ports + 1 + now[in], p, 1 + p, f->ports + 1 + p);
			refused = -1;
		} else if (p >= 0) {
			snprintf(msg, msg_len,
				 "refused by fault injection (refuse-port=%d): the edit sets "
				 "connection %d->%d on port %d",
				 p, in, now[in], p);
			refused = -1;
		}
	}
	free(old);
	return refused;
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
struct lyd_node *fleet_switch_state(struct devsim_device *d, bool with_ports)
{
	const struct devsim_fleet *f = d->fleet;
	const struct lys_module *mod = ly_ctx_get_module_implemented(f->ctx, "ocs-switch");
	struct lyd_node *tree = fleet_dup_tree(d->running), *info = NULL, *ports = NULL, *node;
	int64_t t = now_us();
	if (!with_ports)
		goto connections; /* the filter does not look at ports: spare the work */
	lyd_new_inner(NULL, mod, "switch-info", 0, &info);
	add_leaf(info, mod, "port-count", "%d", f->ports);
	add_leaf(info, mod, "bidirectional", "%s", f->bidirectional ? "true" : "false");
	add_leaf(info, mod, "switch-time-ms", "%d", f->switch_us / 1000);
	lyd_insert_sibling(tree, info, &tree);
	if (lyd_find_path(tree, "/ocs-switch:ports", 0, &ports)) {
		lyd_new_inner(NULL, mod, "ports", 0, &ports);
		lyd_insert_sibling(tree, ports, &tree);
	}
	bool *lit = calloc((size_t)f->ports, sizeof(bool));
	for (int in = 0; in < f->ports; in++)
		if (d->cur_out[in] >= 0 && d->cur_out[in] < f->ports)
			lit[in] = lit[d->cur_out[in]] = true;
	/* a port running configures gets its state in its own entry: a list
	 * entry is found by its key predicate (a bare key value never matched,
	 * and <get> showed such a port twice) */
	const struct lysc_node *list = lys_find_path(f->ctx, NULL, "/ocs-switch:ports/port", 0);
	for (int p = 0; p < f->ports; p++) {
		char key[16], pred[32];
		snprintf(key, sizeof(key), "%d", p);
		snprintf(pred, sizeof(pred), "[id='%d']", p);
		node = NULL;
		if (lyd_find_sibling_val(lyd_child(ports), list, pred, 0, &node))
			lyd_new_list(ports, mod, "port", 0, &node, key);
		if (!node)
			continue;
		const char *st = fleet_port_failed(d, p) ? "failed" : lit[p] ? "up" : "down";
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
			int o = (in >= 0 && in < f->ports) ? d->cur_out[in] : -1;
			if (o < 0 || o >= f->ports || in >= f->ports) {
				add_leaf(c, mod, "status", "invalid");
				add_leaf(c, mod, "reason", "port out of range");
			} else if (fleet_port_failed(d, in) || fleet_port_failed(d, o)) {
				add_leaf(c, mod, "status", "failed");
				add_leaf(c, mod, "reason", "port %d failed",
					 fleet_port_failed(d, in) ? in : o);
			} else if (t < d->since_us[in] + f->switch_us) {
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
struct lyd_node *fleet_transceiver_state(struct devsim_device *d)
{
	const struct devsim_fleet *f = d->fleet;
	const struct lys_module *mod = ly_ctx_get_module_implemented(f->ctx, "ocs-transceiver");
	struct lyd_node *tree = fleet_dup_tree(d->running), *n = NULL, *b;
	int64_t t = now_us();
	bool faulty = atomic_load(&f->faulty[d->index]);
	char path[96], id[16];
	/* the node's entry is there even before any bundle was configured: its
	 * faulty flag is state */
	snprintf(id, sizeof(id), "%u", d->node);
	snprintf(path, sizeof(path), "/ocs-transceiver:transceivers/node[id='%u']", d->node);
	if (lyd_find_path(tree, path, 0, &n)) {
		struct lyd_node *top = NULL;
		if (lyd_find_path(tree, "/ocs-transceiver:transceivers", 0, &top)) {
			lyd_new_inner(NULL, mod, "transceivers", 0, &top);
			lyd_insert_sibling(tree, top, &tree);
		}
		if (top)
			lyd_new_list(top, mod, "node", 0, &n, id);
	}
	if (!n)
		return tree;
	add_leaf(n, mod, "faulty", "%s", faulty ? "true" : "false");
	LY_LIST_FOR(lyd_child(n), b)
	{
		if (strcmp(LYD_NAME(b), "bundle"))
			continue;
		int bid = atoi(lyd_get_value(lyd_child(b))), distance;
		bool down;
		int code = path_code(b, &distance, &down);
		int peer = code ? ring_peer(f, (int)d->node, distance, down) : -1;
		struct lyd_node *ps = NULL;
		const char *status = "active";
		if (faulty || (peer >= 0 && node_faulty(f, peer)))
			status = "failed";
		else if (bid < f->bundles && t < d->since_us[bid] + f->switch_us)
			status = "pending";
		if (code) {
			char dist[8];
			snprintf(dist, sizeof(dist), "%d", distance);
			if (peer >= 0)
				add_leaf(b, mod, "peer-node", "%d", peer);
			lyd_new_list(b, mod, "path-status", 0, &ps, "external", dist,
				     down ? "down" : "up");
		} else {
			lyd_new_list(b, mod, "path-status", 0, &ps, "loopback", "0", "up");
		}
		if (ps)
			add_leaf(ps, mod, "status", "%s", status);
	}
	return tree;
}

/* The value of leaf `name` of port-config/port `port_id` in running; NULL when not configured. */
static const char *running_port_leaf(const struct devsim_device *d, int port_id, const char *name)
{
	char xpath[96];
	struct lyd_node *leaf = NULL;
	snprintf(xpath, sizeof(xpath), "/optical-switch:port-config/port[port-id='%d']/%s", port_id,
		 name);
	if (!d->running || lyd_find_path(d->running, xpath, 0, &leaf))
		return NULL;
	return lyd_get_value(leaf);
}

/* The peer-port knob of port_id's ocsd port (ingress 1+k, egress N+1+k); "" when none. */
static const char *peer_port_knob(const struct devsim_device *d, int port_id)
{
	int n = d->fleet->ports, k = port_id <= n ? port_id - 1 : port_id - n - 1;
	for (int i = d->faults.n_peer_ports - 1; i >= 0; i--) /* the last one naming k wins */
		if (d->faults.peer_ports[i].port == k)
			return d->faults.peer_ports[i].text;
	return "";
}

/* The port-config/port and opm-power/port entries of every port 1..2N (fleet_polatis_state()). */
static void polatis_ports(struct devsim_device *d, const struct lys_module *mod,
			  struct lyd_node **tree)
{
	const struct devsim_fleet *f = d->fleet;
	int n = f->ports;
	struct lyd_node *pc = NULL, *opm = NULL, *port;
	if (lyd_find_path(*tree, "/optical-switch:port-config", 0, &pc)) {
		lyd_new_inner(NULL, mod, "port-config", 0, &pc);
		lyd_insert_sibling(*tree, pc, tree);
	}
	lyd_new_inner(NULL, mod, "opm-power", 0, &opm);
	lyd_insert_sibling(*tree, opm, tree);
	if (!pc || !opm)
		return;
	const struct lysc_node *list =
		lys_find_path(f->ctx, NULL, "/optical-switch:port-config/port", 0);
	/* per egress N+1+k: the ocsd port of the ingress that feeds it, -1 none */
	int *from = malloc(sizeof(int) * (size_t)n);
	if (!from)
		return;
	for (int k = 0; k < n; k++)
		from[k] = -1;
	for (int k = 0; k < n; k++)
		if (d->cur_out[k] >= 0)
			from[d->cur_out[k]] = k;
	/* light: every ingress brings it in unless failed; an egress carries it
	 * when an enabled, lit ingress is paired with it and it is enabled */
	for (int p = 1; p <= 2 * n; p++) {
		char key[16], pred[32];
		snprintf(key, sizeof(key), "%d", p);
		snprintf(pred, sizeof(pred), "[port-id='%d']", p);
		port = NULL;
		if (lyd_find_sibling_val(lyd_child(pc), list, pred, 0, &port))
			lyd_new_list(pc, mod, "port", 0, &port, key);
		if (!port)
			continue;
		bool failed = p <= n && fleet_port_failed(d, p - 1);
		bool lit;
		if (p <= n) {
			lit = !failed;
		} else {
			int k = from[p - n - 1];
			lit = k >= 0 && !fleet_port_failed(d, k) && !d->disabled[k + 1] &&
			      !d->disabled[p];
		}
		add_leaf(port, mod, "status", "%s",
			 failed		  ? "FAILED"
			 : d->disabled[p] ? "DISABLED"
					  : "ENABLED");
		/* label and peer-port: running's (in the entry already: running
		 * comes from edits, never from validation, so it holds no default
		 * nodes), else "" or the knob's */
		if (lyd_find_path(port, "label", 0, NULL))
			add_leaf(port, mod, "label", "%s", "");
		if (lyd_find_path(port, "peer-port", 0, NULL))
			add_leaf(port, mod, "peer-port", "%s", peer_port_knob(d, p));
		struct lyd_node *pw = NULL;
		lyd_new_list(opm, mod, "port", 0, &pw, key);
		if (pw)
			add_leaf(pw, mod, "power", "%s", lit ? "-3.00" : "-60.00");
	}
	free(from);
}

struct lyd_node *fleet_polatis_state(struct devsim_device *d, bool with_ports)
{
	const struct devsim_fleet *f = d->fleet;
	const struct lys_module *mod = ly_ctx_get_module_implemented(f->ctx, "optical-switch");
	struct lyd_node *tree = fleet_dup_tree(d->running), *info = NULL;
	if (!with_ports)
		return tree; /* the filter selects cross-connects only: spare the work */
	lyd_new_inner(NULL, mod, "product-information", 0, &info);
	if (info) {
		add_leaf(info, mod, "manufacturer", "%s",
			 "ocs-devsim (a simulation, not a device)");
		add_leaf(info, mod, "serial-number", "ocs-devsim-%d", f->base_port + d->index);
		add_leaf(info, mod, "model-name", "ocs-devsim polatis simulation %dx%d", f->ports,
			 f->ports);
		add_leaf(info, mod, "software-version", "%s",
			 "ocs-devsim, optical-switch 2018-03-22 nodes");
		lyd_insert_sibling(tree, info, &tree);
	}
	polatis_ports(d, mod, &tree);
	return tree;
}

struct nc_server_reply *fleet_port_set_state(struct devsim_device *d, const struct lyd_node *rpc)
{
	const struct devsim_fleet *f = d->fleet;
	int n = f->ports;
	struct lyd_node *c;
	char msg[160], path[96];
	bool *want = calloc((size_t)(2 * n + 1), sizeof(bool)); /* named by port-enab */
	if (!want)
		return fleet_reply_err(f, NC_ERR_OP_FAILED, "out of memory", NULL);
	/* check every port first: a refused RPC changes nothing */
	for (int pass = 0; pass < 2; pass++) {
		LY_LIST_FOR(lyd_child(rpc), c)
		{
			bool enab = !strcmp(LYD_NAME(c), "port-enab");
			int p = atoi(lyd_get_value(c));
			if (!enab && strcmp(LYD_NAME(c), "port-disab"))
				continue;
			snprintf(path, sizeof(path), "/optical-switch:port-set-state/%s",
				 LYD_NAME(c));
			if (pass == 0 && (p < 1 || p > 2 * n)) {
				snprintf(msg, sizeof(msg), "port %d: the switch has ports 1..%d", p,
					 2 * n);
			} else if (pass == 0 && !enab && want[p]) {
				snprintf(msg, sizeof(msg), "port %d is both enabled and disabled",
					 p);
			} else {
				if (pass == 0)
					want[p] |= enab;
				else
					d->disabled[p] = !enab;
				continue;
			}
			free(want);
			return fleet_reply_err(f, NC_ERR_INVALID_VALUE, msg, path);
		}
	}
	free(want);
	return nc_server_reply_ok();
}

/* ---- notifications ------------------------------------------------------ */

void fleet_notify_subscribers(struct devsim_device *d, struct lyd_node *event)
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

/*
 * A notification of two leaves, where the first leaf makes the event; none
 * when it cannot be made (device mutex held).
 */
static void notify_two_leaves(struct devsim_device *d, const char *path_a, const char *a,
			      const char *path_b, const char *b)
{
	const struct devsim_fleet *f = d->fleet;
	struct lyd_node *ev = NULL;
	lyd_new_path(NULL, f->ctx, path_a, a, 0, &ev);
	if (!ev)
		return;
	lyd_new_path(ev, f->ctx, path_b, b, 0, NULL);
	fleet_notify_subscribers(d, ev);
}

/* node-fault for the device's node with its present state (device mutex held). */
void fleet_notify_node_fault(struct devsim_device *d)
{
	char node[16];
	snprintf(node, sizeof(node), "%u", d->node);
	notify_two_leaves(d, "/ocs-transceiver:node-fault/node", node,
			  "/ocs-transceiver:node-fault/faulty",
			  atomic_load(&d->fleet->faulty[d->index]) ? "true" : "false");
}

/* loss-of-light for a bundle of the device's node (device mutex held). */
void fleet_notify_loss_of_light(struct devsim_device *d, int bundle)
{
	char node[16], b[16];
	snprintf(node, sizeof(node), "%u", d->node);
	snprintf(b, sizeof(b), "%d", bundle);
	notify_two_leaves(d, "/ocs-transceiver:loss-of-light/node", node,
			  "/ocs-transceiver:loss-of-light/bundle", b);
}

void fleet_notify_port_state(struct devsim_device *d, int port, bool failed)
{
	char p[16];
	if (d->fleet->model != DEVSIM_MODEL_POLATIS) {
		snprintf(p, sizeof(p), "%d", port);
		notify_two_leaves(d, "/ocs-switch:port-state-change/port", p,
				  "/ocs-switch:port-state-change/oper-state",
				  failed ? "failed" : "up");
		return;
	}
	const char *label = running_port_leaf(d, 1 + port, "label");
	snprintf(p, sizeof(p), "%d", 1 + port);
	notify_two_leaves(d,
			  failed ? "/polatis-switch:port-power-alarm/port-id"
				 : "/polatis-switch:port-power-clear/port-id",
			  p,
			  failed ? "/polatis-switch:port-power-alarm/port-label"
				 : "/polatis-switch:port-power-clear/port-label",
			  label ? label : "");
}

/* The port's state (failed or not) for each port fail-port names in `in` but not in `out`, once. */
static void notify_ports_between(struct devsim_device *d, const struct devsim_faults *in,
				 const struct devsim_faults *out, bool failed)
{
	for (int i = 0; i < in->n_failed_ports; i++) {
		int p = in->failed_ports[i];
		bool seen = false;
		for (int k = 0; k < i; k++)
			seen |= in->failed_ports[k] == p;
		if (!seen && !faults_fail_port(out, p))
			fleet_notify_port_state(d, p, failed);
	}
}

/*
 * set-faults replaced the knobs `before` of an ocs-switch or polatis
 * device (device mutex held): every port that fail-port now fails sends
 * port-state-change `failed` (polatis: port-power-alarm), every port it no
 * longer fails sends `up` (port-power-clear; the light is back: how a rail
 * OCS reports a GPU fault and its end). A port named twice is reported
 * once; a port failed before and after is not reported again.
 */
void fleet_notify_failed_ports(struct devsim_device *d, const struct devsim_faults *before)
{
	notify_ports_between(d, &d->faults, before, true);
	notify_ports_between(d, before, &d->faults, false);
}

/*
 * The peers' side of a node fault: every other device whose selected path
 * reaches `node` sends loss-of-light for that bundle. Called with no device
 * mutex held; takes one at a time.
 */
void fleet_node_fault_spread(const struct devsim_fleet *f, const struct devsim_device *from)
{
	for (int i = 0; i < f->count; i++) {
		struct devsim_device *e = &f->devs[i];
		if (e == from)
			continue;
		pthread_mutex_lock(&e->mu);
		for (int b = 0; b < f->bundles; b++)
			if (e->peer[b] == (int)from->node)
				fleet_notify_loss_of_light(e, b);
		pthread_mutex_unlock(&e->mu);
	}
}

static void drop_subscriber(struct devsim_device *d, struct nc_session *s)
{
	for (int i = 0; i < d->n_subscribers; i++)
		if (d->subscribers[i] == s)
			d->subscribers[i] = d->subscribers[--d->n_subscribers];
}

char *devsim_fleet_datastore_xml(struct devsim_device *d, bool candidate)
{
	char *xml = NULL;
	pthread_mutex_lock(&d->mu);
	const struct lyd_node *tree = candidate ? d->candidate : d->running;
	LY_ERR r = tree ? lyd_print_mem(&xml, tree, LYD_XML, LYD_PRINT_WITHSIBLINGS) : LY_SUCCESS;
	pthread_mutex_unlock(&d->mu);
	if (r) {
		free(xml);
		return NULL;
	}
	return xml ? xml : strdup("");
}

/* What the end of session sid releases on d (mutex held). */
static void release_sid(struct devsim_device *d, uint32_t sid)
{
	if (d->lock_running_sid == sid)
		d->lock_running_sid = 0;
	if (d->lock_candidate_sid == sid) {
		d->lock_candidate_sid = 0;
		lyd_free_all(d->candidate);
		d->candidate = fleet_dup_tree(d->running);
		d->candidate_dirty = false;
	}
	if (d->cc_active && !d->cc_persist && d->cc_sid == sid)
		fleet_revert_confirmed_commit(d);
}

void devsim_fleet_session_ended(struct devsim_device *d, struct nc_session *s)
{
	pthread_mutex_lock(&d->mu);
	release_sid(d, nc_session_get_id(s));
	drop_subscriber(d, s);
	pthread_mutex_unlock(&d->mu);
}

void devsim_fleet_session_killed(struct devsim_device *d, uint32_t sid)
{
	pthread_mutex_lock(&d->mu);
	release_sid(d, sid);
	d->killed[d->n_killed++ % MAX_KILLED] = sid;
	pthread_mutex_unlock(&d->mu);
}

void devsim_fleet_expire_commits(struct devsim_fleet *fleet)
{
	int64_t t = fleet_now_ms();
	for (int i = 0; i < fleet->count; i++) {
		struct devsim_device *d = &fleet->devs[i];
		pthread_mutex_lock(&d->mu);
		if (d->cc_active && t >= d->cc_deadline_ms)
			fleet_revert_confirmed_commit(d);
		pthread_mutex_unlock(&d->mu);
	}
}

int devsim_fleet_context(const char *ietf_dir, bool confirmed_commit, struct ly_ctx **out,
			 FILE *err)
{
	return devsim_fleet_context_model(ietf_dir, DEVSIM_MODEL_SWITCH, confirmed_commit, out,
					  err);
}

int devsim_fleet_context_model(const char *ietf_dir, enum devsim_model model, bool confirmed_commit,
			       struct ly_ctx **out, FILE *err)
{
	struct ly_ctx *ctx = NULL;
	*out = NULL;
	/* libyang's messages are the text of rpc-errors (ly_errmsg), not
	 * printed; only the last one is kept: LY_LOSTORE keeps every message
	 * of the thread until the context goes, and a simulator that refused
	 * a few thousand edits grew by about 1 KB and slowed down with each
	 * (found by fuzz_devsim_edit) */
	ly_log_options(LY_LOSTORE_LAST);
	if (ly_ctx_new(ietf_dir, 0, &ctx)) {
		fprintf(err, "ocs-devsim: cannot create a YANG context on %s\n", ietf_dir);
		return -EINVAL;
	}
	/* RFC 5277 notifications (yuma's copy imports yuma-ncx extensions) */
	ly_ctx_set_searchdir(ctx, "/usr/share/yuma/modules/ietf-derived");
	ly_ctx_set_searchdir(ctx, "/usr/share/yuma/modules/netconfcentral");
	const char *nc_features[] = {"candidate", "validate", "rollback-on-error",
				     "confirmed-commit", NULL};
	/* a Polatis switch writes running directly: no candidate, validate or
	 * confirmed commit (libnetconf2 advertises what the features say) */
	const char *polatis_features[] = {"writable-running", "rollback-on-error", NULL};
	bool polatis = model == DEVSIM_MODEL_POLATIS;
	if (!confirmed_commit)
		nc_features[3] = NULL;
	if (!ly_ctx_load_module(ctx, "ietf-netconf", "2011-06-01",
				polatis ? polatis_features : nc_features) ||
	    !ly_ctx_load_module(ctx, "ietf-netconf-monitoring", NULL, NULL) ||
	    !ly_ctx_load_module(ctx, "notifications", NULL, NULL) ||
	    !ly_ctx_load_module(ctx, "nc-notifications", NULL, NULL)) {
		fprintf(err, "ocs-devsim: cannot load the IETF NETCONF modules from %s: %s\n",
			ietf_dir, ly_errmsg(ctx));
		ly_ctx_destroy(ctx);
		return -EINVAL;
	}
	/* a polatis device serves the vendor's modules only (its hello lists no ocs-switch) */
	const char *ocs_mods[] = {sb_yang_ocs_switch, sb_yang_ocs_transceiver, sb_yang_ocs_devsim};
	const char *polatis_mods[] = {sb_yang_optical_switch, sb_yang_polatis_switch,
				      sb_yang_ocs_devsim};
	const char **mods = polatis ? polatis_mods : ocs_mods;
	for (size_t i = 0; i < 3; i++)
		if (lys_parse_mem(ctx, mods[i], LYS_IN_YANG, NULL)) {
			fprintf(err, "ocs-devsim: cannot load built-in module %zu\n", i);
			ly_ctx_destroy(ctx);
			return -EINVAL;
		}
	*out = ctx;
	return 0;
}

int devsim_fleet_count(const struct devsim_fleet *fleet)
{
	return fleet->count;
}

struct devsim_device *devsim_fleet_device(struct devsim_fleet *fleet, int index)
{
	return &fleet->devs[index];
}

struct devsim_fleet *devsim_fleet_new(const struct ly_ctx *ctx, const struct devsim_opts *opts)
{
	struct devsim_fleet *fleet = calloc(1, sizeof(*fleet));
	if (!fleet)
		return NULL;
	*fleet = (struct devsim_fleet){
		.ctx = ctx,
		.model = opts->model,
		.ports = opts->ports,
		.base_port = opts->port,
		.switch_us = opts->switch_us,
		.bidirectional = opts->bidirectional,
		.ietf_dir = opts->ietf_dir,
		.node_base = opts->node_base,
		.ring_tors = opts->ring_tors,
		.ring_nodes_per_tor = opts->ring_nodes_per_tor,
		.ring_k = opts->ring_k,
		.bundles = opts->bundles,
		.ring_closed = opts->ring_closed,
	};
	fleet->devs = calloc((size_t)opts->count, sizeof(*fleet->devs));
	fleet->faulty = calloc((size_t)opts->count, sizeof(*fleet->faulty));
	if (!fleet->devs || !fleet->faulty) {
		free(fleet->devs);
		free(fleet->faulty);
		free(fleet);
		return NULL;
	}
	/* per device: ports of a switch (polatis: ingresses), bundles of a transceiver */
	bool polatis = opts->model == DEVSIM_MODEL_POLATIS;
	int slots = opts->model == DEVSIM_MODEL_TRANSCEIVER ? opts->bundles : opts->ports;
	/* count grows with each device set up, so that free releases exactly those */
	for (int i = 0; i < opts->count; i++) {
		struct devsim_device *d = &fleet->devs[i];
		d->fleet = fleet;
		d->index = i;
		d->node = (uint32_t)(opts->node_base + i);
		d->cur_out = malloc(sizeof(int) * (size_t)slots);
		d->since_us = calloc((size_t)slots, sizeof(int64_t));
		d->peer = malloc(sizeof(int) * (size_t)slots);
		d->disabled = polatis ? calloc((size_t)(2 * opts->ports + 1), sizeof(bool)) : NULL;
		if (!d->cur_out || !d->since_us || !d->peer || (polatis && !d->disabled) ||
		    pthread_mutex_init(&d->mu, NULL)) {
			free(d->cur_out);
			free(d->since_us);
			free(d->peer);
			free(d->disabled);
			devsim_fleet_free(fleet);
			return NULL;
		}
		fleet->count++;
		for (int p = 0; p < slots; p++) {
			/* a switch port starts unconnected, a bundle on loopback */
			d->cur_out[p] = opts->model == DEVSIM_MODEL_TRANSCEIVER ? 0 : -1;
			d->peer[p] = -1;
		}
		/* the last --fault that names this device (or every device) wins */
		for (int k = 0; k < opts->n_faults; k++)
			if (opts->faults[k].device < 0 || opts->faults[k].device == i)
				d->faults = opts->faults[k].faults;
		atomic_init(&fleet->faulty[i],
			    d->faults.node_fault && opts->model == DEVSIM_MODEL_TRANSCEIVER);
	}
	return fleet;
}

void devsim_fleet_free(struct devsim_fleet *fleet)
{
	if (!fleet)
		return;
	for (int i = 0; i < fleet->count; i++) {
		struct devsim_device *d = &fleet->devs[i];
		lyd_free_all(d->running);
		lyd_free_all(d->candidate);
		lyd_free_all(d->cc_backup);
		free(d->cc_persist);
		free(d->cur_out);
		free(d->since_us);
		free(d->peer);
		free(d->disabled);
		pthread_mutex_destroy(&d->mu);
	}
	free(fleet->devs);
	free(fleet->faulty);
	free(fleet);
}
