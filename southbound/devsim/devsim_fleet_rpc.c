/*
 * devsim_fleet_rpc.c - what each NETCONF operation does to a simulated
 * device of ocs-devsim (devsim_fleet.h): lock and unlock, edit-config,
 * validate, commit and confirmed commit, cancel-commit, discard-changes,
 * get and get-config, get-schema, kill-session, create-subscription and
 * the ocs-devsim control RPCs (set-faults, emit-notification); and, around
 * each, the fault knobs of its step (hang, drop, refuse, no effect, and
 * what garble, trickle and endless do to the reply). The handlers run with
 * the device mutex held and work on the state devsim_fleet.c keeps. The
 * state knob refuse-port is checked by edit-config itself, on the edit's
 * result. A polatis device has no candidate: edit-config writes running,
 * after validating the whole result (all or nothing), and the model's RPC
 * port-set-state is served too.
 */
#define _GNU_SOURCE /* POLLRDHUP */
#include "devsim_fleet.h"

#include "devsim_fleet_internal.h"
#include "devsim_store.h"

#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define DEFAULT_CONFIRM_TIMEOUT_S 600
#define MAX_SCHEMA_BYTES	  (1 << 20) /* a module file served by get-schema */

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

static struct nc_server_reply *rpc_lock(struct devsim_device *d, const struct lyd_node *rpc,
					uint32_t sid, bool lock)
{
	const struct devsim_fleet *f = d->fleet;
	NC_DATASTORE ds = datastore_of(rpc, "target");
	uint32_t *holder = ds == NC_DATASTORE_RUNNING	  ? &d->lock_running_sid
			   : ds == NC_DATASTORE_CANDIDATE ? &d->lock_candidate_sid
							  : NULL;
	if (!holder)
		return fleet_reply_err(f, NC_ERR_INVALID_VALUE,
				       "target must be running or candidate", NULL);
	if (!lock) {
		if (*holder != sid)
			return fleet_reply_err(f, NC_ERR_OP_FAILED,
					       "the datastore is not locked by this session", NULL);
		*holder = 0;
		return nc_server_reply_ok();
	}
	if (*holder)
		return fleet_reply_lock_denied(f, *holder);
	if (ds == NC_DATASTORE_CANDIDATE && d->candidate_dirty)
		return fleet_reply_lock_denied(f, 0);
	*holder = sid;
	return nc_server_reply_ok();
}

/*
 * edit-config: into the candidate (ocs-switch, ocs-transceiver; checked at
 * validate and commit), or straight into running (polatis: the result is
 * validated here, and a refused edit changes nothing).
 */
static struct nc_server_reply *rpc_edit(struct devsim_device *d, const struct lyd_node *rpc,
					uint32_t sid)
{
	const struct devsim_fleet *f = d->fleet;
	bool to_running = f->model == DEVSIM_MODEL_POLATIS;
	if (datastore_of(rpc, "target") !=
	    (to_running ? NC_DATASTORE_RUNNING : NC_DATASTORE_CANDIDATE))
		return fleet_reply_err(
			f, NC_ERR_OP_NOT_SUPPORTED,
			to_running
				? "only the running datastore is writable (no :candidate)"
				: "only the candidate datastore is writable (no :writable-running)",
			NULL);
	uint32_t holder = to_running ? d->lock_running_sid : d->lock_candidate_sid;
	if (holder && holder != sid)
		return fleet_reply_err(f, NC_ERR_IN_USE,
				       to_running ? "running is locked by another session"
						  : "the candidate is locked by another session",
				       NULL);
	int dflt = DS_OP_MERGE;
	const char *dop = child_value(rpc, "default-operation");
	if (dop && (dflt = ds_op_parse(dop)) < 0)
		return fleet_reply_err(f, NC_ERR_INVALID_VALUE, "bad default-operation", NULL);
	struct lyd_node *config = NULL, *edit = NULL;
	char msg[512] = "", path[512] = "";
	if (lyd_find_path(rpc, "config", 0, &config))
		return fleet_reply_err(f, NC_ERR_MISSING_ELEM, "edit-config without <config>",
				       NULL);
	if (ds_parse_any(f->ctx, config, 0, &edit, msg, sizeof(msg)))
		return fleet_reply_err(f, NC_ERR_INVALID_VALUE, msg, NULL);
	const struct lyd_node *base = to_running ? d->running : d->candidate;
	struct lyd_node *work = fleet_dup_tree(base);
	enum ds_error e =
		ds_apply_edit(&work, edit, (enum ds_op)dflt, msg, sizeof(msg), path, sizeof(path));
	lyd_free_all(edit);
	if (e != DS_ERR_OK) {
		lyd_free_all(work);
		NC_ERR tag = e == DS_ERR_DATA_EXISTS	? NC_ERR_DATA_EXISTS
			     : e == DS_ERR_DATA_MISSING ? NC_ERR_DATA_MISSING
							: NC_ERR_INVALID_VALUE;
		return fleet_reply_err(f, tag, msg, path);
	}
	int rc =
		to_running ? fleet_validate_tree(d, work, msg, sizeof(msg), path, sizeof(path)) : 0;
	if (rc) {
		lyd_free_all(work);
		return fleet_reply_err(f, rc == -EEXIST ? NC_ERR_DATA_EXISTS : NC_ERR_INVALID_VALUE,
				       msg, path);
	}
	if (fleet_refused_edit(d, base, work, msg, sizeof(msg))) {
		lyd_free_all(work);
		return fleet_reply_err(f, NC_ERR_OP_FAILED, msg, NULL);
	}
	if (to_running) {
		fleet_set_running(d, work);
		return nc_server_reply_ok();
	}
	lyd_free_all(d->candidate);
	d->candidate = work;
	d->candidate_dirty = true;
	d->candidate_valid = false;
	return nc_server_reply_ok();
}

static struct nc_server_reply *rpc_validate(struct devsim_device *d, const struct lyd_node *rpc)
{
	const struct devsim_fleet *f = d->fleet;
	NC_DATASTORE ds = datastore_of(rpc, "source");
	char msg[512] = "", path[512] = "";
	const struct lyd_node *tree = ds == NC_DATASTORE_RUNNING ? d->running : d->candidate;
	if (ds != NC_DATASTORE_RUNNING && ds != NC_DATASTORE_CANDIDATE)
		return fleet_reply_err(f, NC_ERR_INVALID_VALUE,
				       "validate source must be running or candidate", NULL);
	if (fleet_validate_tree(d, tree, msg, sizeof(msg), path, sizeof(path)))
		return fleet_reply_err(f, NC_ERR_INVALID_VALUE, msg, path);
	if (ds == NC_DATASTORE_CANDIDATE)
		d->candidate_valid = true;
	return nc_server_reply_ok();
}

static struct nc_server_reply *rpc_commit(struct devsim_device *d, const struct lyd_node *rpc,
					  uint32_t sid, bool noeffect)
{
	const struct devsim_fleet *f = d->fleet;
	struct lyd_node *n = NULL;
	bool confirmed = !lyd_find_path(rpc, "confirmed", 0, &n);
	const char *timeout_s = child_value(rpc, "confirm-timeout");
	const char *persist = child_value(rpc, "persist");
	const char *persist_id = child_value(rpc, "persist-id");
	if (d->lock_candidate_sid && d->lock_candidate_sid != sid)
		return fleet_reply_err(f, NC_ERR_IN_USE,
				       "the candidate is locked by another session", NULL);
	if (d->lock_running_sid && d->lock_running_sid != sid)
		return fleet_reply_err(f, NC_ERR_IN_USE, "running is locked by another session",
				       NULL);
	if (d->cc_active) {
		/* confirming (or extending) commit: must come from the owner */
		if (d->cc_persist ? (!persist_id || strcmp(persist_id, d->cc_persist))
				  : (d->cc_sid != sid))
			return fleet_reply_err(
				f, NC_ERR_INVALID_VALUE,
				"a confirmed commit is pending; the confirming commit must "
				"come from its session or carry its persist-id",
				NULL);
	} else if (persist_id) {
		return fleet_reply_err(f, NC_ERR_INVALID_VALUE,
				       "no confirmed commit is pending for this persist-id",
				       "/ietf-netconf:commit/persist-id");
	}
	/* a clean candidate is a copy of running (valid when it was committed),
	 * and one validated since its last edit need not be validated again:
	 * a confirming commit costs no tree work, as on real devices */
	bool changes = d->candidate_dirty;
	char msg[512] = "", path[512] = "";
	if (changes && !d->candidate_valid &&
	    fleet_validate_tree(d, d->candidate, msg, sizeof(msg), path, sizeof(path)))
		return fleet_reply_err(f, NC_ERR_INVALID_VALUE, msg, path);
	if (noeffect)
		return nc_server_reply_ok(); /* the faulty device pretends */
	if (confirmed) {
		if (!d->cc_active) {
			d->cc_backup = fleet_dup_tree(d->running);
			d->cc_active = true;
		}
		d->cc_sid = sid;
		free(d->cc_persist);
		d->cc_persist = persist ? strdup(persist) : NULL;
		long t = timeout_s ? atol(timeout_s) : DEFAULT_CONFIRM_TIMEOUT_S;
		d->cc_deadline_ms = fleet_now_ms() + t * 1000;
	} else if (d->cc_active) {
		lyd_free_all(d->cc_backup);
		d->cc_backup = NULL;
		d->cc_active = false;
		free(d->cc_persist);
		d->cc_persist = NULL;
	}
	if (changes)
		fleet_set_running(d, fleet_dup_tree(d->candidate));
	d->candidate_dirty = false;
	return nc_server_reply_ok();
}

static struct nc_server_reply *rpc_cancel(struct devsim_device *d, const struct lyd_node *rpc,
					  uint32_t sid)
{
	const struct devsim_fleet *f = d->fleet;
	const char *persist_id = child_value(rpc, "persist-id");
	if (!d->cc_active)
		return fleet_reply_err(f, NC_ERR_OP_FAILED, "no confirmed commit is pending", NULL);
	if (d->cc_persist ? (!persist_id || strcmp(persist_id, d->cc_persist)) : d->cc_sid != sid)
		return fleet_reply_err(
			f, NC_ERR_INVALID_VALUE,
			"cancel-commit must come from the committing session or carry "
			"its persist-id",
			NULL);
	fleet_revert_confirmed_commit(d);
	return nc_server_reply_ok();
}

static struct nc_server_reply *rpc_get(struct devsim_device *d, const struct lyd_node *rpc,
				       bool config_only)
{
	const struct devsim_fleet *f = d->fleet;
	struct lyd_node *fnode = NULL, *filter = NULL, *selected = NULL, *full = NULL;
	char msg[256] = "";
	bool has_filter = !lyd_find_path(rpc, "filter", 0, &fnode);
	if (has_filter && ds_parse_any(f->ctx, fnode, 1, &filter, msg, sizeof(msg)))
		return fleet_reply_err(f, NC_ERR_INVALID_VALUE, msg, NULL);
	bool with_ports = !has_filter;
	for (const struct lyd_node *sel = filter; sel; sel = sel->next)
		with_ports |= strcmp(LYD_NAME(sel), "cross-connects") != 0;
	if (config_only) {
		NC_DATASTORE ds = datastore_of(rpc, "source");
		if (ds != NC_DATASTORE_RUNNING && ds != NC_DATASTORE_CANDIDATE) {
			lyd_free_all(filter);
			return fleet_reply_err(f, NC_ERR_INVALID_VALUE,
					       "source must be running or candidate", NULL);
		}
		full = fleet_dup_tree(ds == NC_DATASTORE_RUNNING ? d->running : d->candidate);
	} else if (!has_filter || filter) { /* an empty filter selects nothing */
		full = f->model == DEVSIM_MODEL_SWITCH	  ? fleet_switch_state(d, with_ports)
		       : f->model == DEVSIM_MODEL_POLATIS ? fleet_polatis_state(d, with_ports)
							  : fleet_transceiver_state(d);
	}
	if (has_filter && !filter) {
		lyd_free_all(full);
		full = NULL;
	}
	int rc = ds_subtree_filter(f->ctx, full, filter, &selected);
	lyd_free_all(full);
	lyd_free_all(filter);
	if (rc)
		return fleet_reply_err(f, NC_ERR_INVALID_VALUE, "unsupported subtree filter", NULL);
	struct lyd_node *output = NULL;
	if (lyd_dup_single(rpc, NULL, 0, &output) ||
	    lyd_new_any(output, NULL, "data", selected, 1, LYD_ANYDATA_DATATREE, 1, NULL)) {
		lyd_free_all(selected);
		lyd_free_all(output);
		return fleet_reply_err(f, NC_ERR_OP_FAILED, "cannot build the reply", NULL);
	}
	return nc_server_reply_data(output, NC_WD_EXPLICIT, NC_PARAMTYPE_FREE);
}

static struct nc_server_reply *rpc_emit(struct devsim_device *d, const struct lyd_node *rpc)
{
	const struct devsim_fleet *f = d->fleet;
	const char *kind = child_value(rpc, "kind");
	const char *port = child_value(rpc, "port");
	struct lyd_node *ev = NULL;
	bool trx_kind = !strcmp(kind, "node-fault") || !strcmp(kind, "loss-of-light");
	bool polatis = f->model == DEVSIM_MODEL_POLATIS;
	if (trx_kind != (f->model == DEVSIM_MODEL_TRANSCEIVER) ||
	    (polatis && strcmp(kind, "port-state-change")))
		return fleet_reply_err(f, NC_ERR_OP_NOT_SUPPORTED,
				       trx_kind	 ? "only ocs-transceiver devices emit this kind"
				       : polatis ? "a polatis device emits port-state-change only "
						   "(as port-power-alarm or port-power-clear)"
						 : "only ocs-switch devices emit this kind",
				       "/ocs-devsim:emit-notification/kind");
	if (trx_kind) {
		const char *bundle = child_value(rpc, "bundle");
		int b = bundle ? atoi(bundle) : 0;
		if (!strcmp(kind, "node-fault")) {
			fleet_notify_node_fault(d);
		} else if (b >= f->bundles) {
			return fleet_reply_err(f, NC_ERR_INVALID_VALUE,
					       "no such bundle on this node",
					       "/ocs-devsim:emit-notification/bundle");
		} else {
			fleet_notify_loss_of_light(d, b);
		}
		return nc_server_reply_ok();
	}
	if (!port)
		return fleet_reply_err(f, NC_ERR_MISSING_ELEM, "this kind needs a port",
				       "/ocs-devsim:emit-notification/port");
	if (!strcmp(kind, "port-state-change")) {
		if (polatis && atoi(port) >= f->ports)
			return fleet_reply_err(f, NC_ERR_INVALID_VALUE,
					       "port: ocsd's ports of this device are 0..N-1",
					       "/ocs-devsim:emit-notification/port");
		/* polatis: port-power-alarm or port-power-clear of ingress 1+port */
		fleet_notify_port_state(d, atoi(port), fleet_port_failed(d, atoi(port)));
		return nc_server_reply_ok();
	}
	int in = atoi(port);
	int o = (in >= 0 && in < f->ports) ? d->cur_out[in] : -1;
	char ob[16];
	snprintf(ob, sizeof(ob), "%d", o < 0 ? 0 : o);
	lyd_new_path(NULL, f->ctx, "/ocs-switch:connection-failed/input", port, 0, &ev);
	lyd_new_path(ev, f->ctx, "/ocs-switch:connection-failed/output", ob, 0, NULL);
	lyd_new_path(ev, f->ctx, "/ocs-switch:connection-failed/reason",
		     "injected by emit-notification", 0, NULL);
	if (!ev)
		return fleet_reply_err(f, NC_ERR_INVALID_VALUE, "cannot build the notification",
				       NULL);
	fleet_notify_subscribers(d, ev);
	return nc_server_reply_ok();
}

/*
 * The text of a module the simulator does not load, from the IETF module
 * directory (libnetconf2 clients ask every server for the NMDA modules they
 * use themselves): the revision asked for, else the newest file. NULL when
 * there is none, or when the name or revision from the network could be
 * anything but a module file name. Caller frees.
 */
static char *schema_from_dir(const struct devsim_fleet *f, const char *id, const char *rev)
{
	char pattern[PATH_MAX];
	glob_t g = {0};
	char *text = NULL;
	size_t n_id =
		strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.");
	if (!*id || id[0] == '.' || id[n_id] || strlen(id) > 64 ||
	    (rev && *rev && (strlen(rev) != 10 || rev[strspn(rev, "0123456789-")])))
		return NULL;
	snprintf(pattern, sizeof(pattern), "%s/%s@%s.yang", f->ietf_dir, id,
		 rev && *rev ? rev : "[0-9]*");
	if (glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc > 0) {
		/* sorted: the last name is the newest revision */
		FILE *file = fopen(g.gl_pathv[g.gl_pathc - 1], "re");
		text = file ? calloc(1, MAX_SCHEMA_BYTES + 2) : NULL;
		size_t n = text ? fread(text, 1, MAX_SCHEMA_BYTES + 1, file) : 0;
		if (text && (n == 0 || n > MAX_SCHEMA_BYTES)) { /* empty, or not a module */
			free(text);
			text = NULL;
		}
		if (file)
			fclose(file);
	}
	globfree(&g);
	return text;
}

/* get-schema (RFC 6022): the module text as libyang prints it. */
static struct nc_server_reply *rpc_get_schema(const struct devsim_device *d,
					      const struct lyd_node *rpc)
{
	const struct devsim_fleet *f = d->fleet;
	const char *id = child_value(rpc, "identifier");
	const char *rev = child_value(rpc, "version");
	const char *fmt = child_value(rpc, "format");
	if (fmt && !strstr(fmt, "yang"))
		return fleet_reply_err(f, NC_ERR_INVALID_VALUE, "only the yang format is served",
				       "/ietf-netconf-monitoring:get-schema/format");
	const struct lys_module *mod = rev && *rev ? ly_ctx_get_module(f->ctx, id, rev)
						   : ly_ctx_get_module_latest(f->ctx, id);
	char *text = mod ? NULL : schema_from_dir(f, id ? id : "", rev);
	if (!mod && !text)
		return fleet_reply_err(f, NC_ERR_INVALID_VALUE, "no such schema",
				       "/ietf-netconf-monitoring:get-schema/identifier");
	struct lyd_node *output = NULL;
	if ((mod && lys_print_mem(&text, mod, LYS_OUT_YANG, 0)) ||
	    lyd_dup_single(rpc, NULL, 0, &output) ||
	    lyd_new_any(output, NULL, "data", text, 1, LYD_ANYDATA_STRING, 1, NULL)) {
		free(text);
		lyd_free_all(output);
		return fleet_reply_err(f, NC_ERR_OP_FAILED, "cannot print the schema", NULL);
	}
	return nc_server_reply_data(output, NC_WD_EXPLICIT, NC_PARAMTYPE_FREE);
}

/* Classifies an RPC into the fault steps; -1 for RPCs faults never touch. */
static int step_of(struct devsim_device *d, const struct lyd_node *rpc)
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
	if (!strcmp(n, "get-schema"))
		return DEVSIM_STEP_SCHEMA;
	return -1;
}

/* The operation itself, device mutex held. s: the session (NULL: none), sid its id. */
static struct nc_server_reply *dispatch(struct devsim_device *d, const struct lyd_node *rpc,
					struct nc_session *s, uint32_t sid, bool noeffect)
{
	const struct devsim_fleet *f = d->fleet;
	const char *name = LYD_NAME(rpc);
	for (int i = 0; sid && i < MAX_KILLED; i++)
		if (d->killed[i] == sid)
			return fleet_reply_err(f, NC_ERR_OP_FAILED, "the session was killed", NULL);
	if (!strcmp(name, "lock") || !strcmp(name, "unlock"))
		return rpc_lock(d, rpc, sid, !strcmp(name, "lock"));
	if (!strcmp(name, "edit-config"))
		return rpc_edit(d, rpc, sid);
	if (!strcmp(name, "validate"))
		return rpc_validate(d, rpc);
	if (!strcmp(name, "commit"))
		return rpc_commit(d, rpc, sid, noeffect);
	if (!strcmp(name, "cancel-commit"))
		return rpc_cancel(d, rpc, sid);
	if (!strcmp(name, "discard-changes")) {
		if (d->lock_candidate_sid && d->lock_candidate_sid != sid)
			return fleet_reply_err(f, NC_ERR_IN_USE,
					       "the candidate is locked by another session", NULL);
		lyd_free_all(d->candidate);
		d->candidate = fleet_dup_tree(d->running);
		d->candidate_dirty = false;
		return nc_server_reply_ok();
	}
	if (!strcmp(name, "get"))
		return rpc_get(d, rpc, false);
	if (!strcmp(name, "get-config"))
		return rpc_get(d, rpc, true);
	if (!strcmp(name, "create-subscription")) {
		if (!s)
			return fleet_reply_err(f, NC_ERR_OP_NOT_SUPPORTED,
					       "create-subscription needs a NETCONF session", NULL);
		if (d->n_subscribers >= MAX_SUBSCRIBERS)
			return fleet_reply_err(f, NC_ERR_RES_DENIED, "too many subscribers", NULL);
		d->subscribers[d->n_subscribers++] = s;
		nc_session_inc_notif_status(s);
		return nc_server_reply_ok();
	}
	if (!strcmp(name, "set-faults")) {
		char err[256];
		struct devsim_faults nf;
		if (devsim_faults_parse(child_value(rpc, "spec"), &nf, err, sizeof(err)))
			return fleet_reply_err(f, NC_ERR_INVALID_VALUE, err,
					       "/ocs-devsim:set-faults/spec");
		if (nf.node_fault && f->model != DEVSIM_MODEL_TRANSCEIVER)
			return fleet_reply_err(
				f, NC_ERR_INVALID_VALUE,
				"node-fault: only ocs-transceiver devices have a node",
				"/ocs-devsim:set-faults/spec");
		if (nf.n_peer_ports && f->model != DEVSIM_MODEL_POLATIS)
			return fleet_reply_err(f, NC_ERR_INVALID_VALUE,
					       "peer-port: only polatis devices report peer-port",
					       "/ocs-devsim:set-faults/spec");
		int n_ports = nf.n_failed_ports + nf.n_refused_ports;
		for (int i = 0; i < n_ports + nf.n_peer_ports; i++) {
			const char *knob = i < nf.n_failed_ports ? "fail-port"
					   : i < n_ports	 ? "refuse-port"
								 : "peer-port";
			int p = i < nf.n_failed_ports ? nf.failed_ports[i]
				: i < n_ports	      ? nf.refused_ports[i - nf.n_failed_ports]
						      : nf.peer_ports[i - n_ports].port;
			if (f->model != DEVSIM_MODEL_TRANSCEIVER && p >= f->ports) {
				snprintf(err, sizeof(err), "%s=%d: the device has ports 0..%d",
					 knob, p, f->ports - 1);
				return fleet_reply_err(f, NC_ERR_INVALID_VALUE, err,
						       "/ocs-devsim:set-faults/spec");
			}
		}
		struct devsim_faults before = d->faults;
		d->faults = nf;
		if (f->model != DEVSIM_MODEL_TRANSCEIVER)
			fleet_notify_failed_ports(d, &before);
		if (f->model == DEVSIM_MODEL_TRANSCEIVER &&
		    atomic_exchange(&f->faulty[d->index], nf.node_fault) != nf.node_fault) {
			fleet_notify_node_fault(d);
			/* the peers lose light after this mutex is released */
			d->fault_spread = nf.node_fault;
		}
		return nc_server_reply_ok();
	}
	if (!strcmp(name, "get-schema"))
		return rpc_get_schema(d, rpc);
	if (!strcmp(name, "emit-notification"))
		return rpc_emit(d, rpc);
	if (!strcmp(name, "port-set-state") && f->model == DEVSIM_MODEL_POLATIS)
		return fleet_port_set_state(d, rpc);
	return fleet_reply_err(f, NC_ERR_OP_NOT_SUPPORTED, "operation not supported by ocs-devsim",
			       NULL);
}

/* dispatch() under the device mutex, then the node fault's spread to the peers. */
static struct nc_server_reply *dispatch_locked(struct devsim_device *d, const struct lyd_node *rpc,
					       struct nc_session *s, uint32_t sid, bool noeffect)
{
	pthread_mutex_lock(&d->mu);
	struct nc_server_reply *reply = dispatch(d, rpc, s, sid, noeffect);
	bool spread = d->fault_spread;
	d->fault_spread = false;
	pthread_mutex_unlock(&d->mu);
	if (spread) /* before the reply: the client sees every effect of set-faults */
		fleet_node_fault_spread(d->fleet, d);
	return reply;
}

struct nc_server_reply *devsim_fleet_rpc_sid(struct devsim_device *d, const struct lyd_node *rpc,
					     uint32_t sid)
{
	return dispatch_locked(d, rpc, NULL, sid, false);
}

struct nc_server_reply *devsim_fleet_rpc(struct devsim_device *d, const struct lyd_node *rpc,
					 struct nc_session *s, int fd,
					 struct devsim_wire_fault *wire)
{
	const struct devsim_fleet *f = d->fleet;
	pthread_mutex_lock(&d->mu);
	int step = step_of(d, rpc);
	struct devsim_faults faults = d->faults;
	if (step >= 0 && !(faults.sticky_mask & (1u << step))) {
		/* one-shot knobs clear as they fire */
		uint32_t bit = 1u << step;
		d->faults.refuse_mask &= ~bit;
		d->faults.drop_mask &= ~bit;
		d->faults.noeffect_mask &= ~bit;
		d->faults.garble_mask &= ~bit;
		d->faults.endless_mask &= ~bit;
		d->faults.hang_ms[step] = 0;
		d->faults.trickle_ms[step] = 0;
	}
	pthread_mutex_unlock(&d->mu);
	*wire = (struct devsim_wire_fault){.kind = DEVSIM_WIRE_NORMAL};
	if (step >= 0 && (faults.endless_mask & (1u << step)))
		wire->kind = DEVSIM_WIRE_ENDLESS;
	else if (step >= 0 && (faults.garble_mask & (1u << step)))
		wire->kind = DEVSIM_WIRE_GARBLE;
	else if (step >= 0 && faults.trickle_ms[step] > 0)
		*wire = (struct devsim_wire_fault){DEVSIM_WIRE_TRICKLE, faults.trickle_ms[step]};
	if (step >= 0 && faults.hang_ms[step] > 0)
		usleep((useconds_t)faults.hang_ms[step] * 1000);
	if (step >= 0 && (faults.drop_mask & (1u << step))) {
		shutdown(fd, SHUT_RDWR);
		return fleet_reply_err(f, NC_ERR_OP_FAILED, "session dropped by fault injection",
				       NULL);
	}
	if (step >= 0 && (faults.refuse_mask & (1u << step))) {
		char msg[96];
		snprintf(msg, sizeof(msg), "refused by fault injection (refuse@%s)",
			 devsim_step_name((enum devsim_step)step));
		return fleet_reply_err(f, NC_ERR_OP_FAILED, msg, NULL);
	}

	bool noeffect =
		step == DEVSIM_STEP_COMMIT && (faults.noeffect_mask & (1u << DEVSIM_STEP_COMMIT));
	struct nc_server_reply *reply = dispatch_locked(d, rpc, s, nc_session_get_id(s), noeffect);
	if (step >= 0 && faults.hang_ms[step] > 0) {
		/* after a hang the client may have given up and closed: like a
		 * device whose TCP stack notices, end the session so its locks and
		 * unconfirmed commit do not outlive it */
		struct pollfd p = {fd, POLLRDHUP, 0};
		if (poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
			shutdown(fd, SHUT_RDWR);
	}
	return reply;
}
