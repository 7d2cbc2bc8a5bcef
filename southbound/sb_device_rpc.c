/*
 * sb_device_rpc.c - the RPCs of the NETCONF device driver (API in
 * sb_device.h): lock, unlock, discard, validate, (confirmed) commit and
 * cancel-commit, edit-config of cross-connects or transceiver bundles
 * (removals first, optionally pipelined with <validate>), and the reads of
 * running or candidate. Each is built here as XML and run on the device's
 * session with ocsd's own framing (sb_wire.h); its reply is scanned
 * without libyang (sb_reply.h). A session that missed its deadline or
 * broke the protocol is dropped through sb_device.c, which owns sessions.
 */
#include "sb_device.h"

#include "sb_device_internal.h"
#include "sb_model.h"
#include "sb_reply.h"
#include "sb_wire.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NC_NS	   "urn:ietf:params:xml:ns:netconf:base:1.0"
#define TRX_NS	   "urn:ocsd:yang:ocs-transceiver"
#define TRX_FILTER "<transceivers xmlns=\"" TRX_NS "\"/>"

/* The session is out of step after a failed send or receive: drop it and say why. */
static int wire_failed(struct sb_device *dev, const char *opname, int rc, const struct sb_reply *r,
		       struct sb_error *err)
{
	struct sb_driver *drv = dev->drv;
	sbd_drop_session(dev, true);
	if (rc == -ETIMEDOUT) {
		atomic_fetch_add(&drv->counters.rpc_timeouts, 1);
		return sbd_set_err(err, dev, opname, rc, "no reply within %d ms",
				   dev->cfg.rpc_timeout_ms);
	}
	atomic_fetch_add(&drv->counters.sessions_lost, 1);
	if (rc == -ECONNRESET)
		return sbd_set_err(err, dev, opname, rc, "session lost");
	return sbd_set_err(err, dev, opname, rc == -ENOMEM ? -ENOMEM : -EPROTO,
			   "unexpected reply: %s", r->error);
}

/*
 * Runs n RPCs on the session's transport (sb_wire.h) with the device's
 * deadline: all of them sent in one write (pipelined when n > 1: the caller
 * has argued that the later ones are safe to send before the earlier ones
 * are answered), then every reply read in order, so that the session stays
 * in step whatever they say. ops[i] is an operation's XML (NULL: out of
 * memory building it), opnames[i] its name for errors. A reply that is not
 * <ok/> is an error, except the last one when `reply` takes it (then the
 * caller checks its kind; it points into the wire's buffer until the next
 * RPC). Returns the first error in sending order: the later replies are
 * read and ignored. A session that missed its deadline or broke the
 * protocol is out of step and dropped.
 */
static int do_ops(struct sb_device *dev, const char *const *ops, const char *const *opnames,
		  size_t n, struct sb_reply *reply, struct sb_error *err)
{
	struct sb_driver *drv = dev->drv;
	for (size_t i = 0; i < n; i++)
		if (!ops[i])
			return sbd_set_err(err, dev, opnames[i], -ENOMEM, "cannot build the RPC");
	if (!sb_device_connected(dev)) {
		sb_device_disconnect(dev);
		return sbd_set_err(err, dev, opnames[0], -ECONNRESET, "no session");
	}
	if (!dev->wire) {
		int rc = sb_wire_open(dev->session, dev->fd, &dev->wire);
		if (rc)
			return sbd_set_err(err, dev, opnames[0], rc, "%s",
					   rc == -ENOMEM
						   ? "out of memory"
						   : "cannot take over the session's transport "
						     "(not a libnetconf2 2.0 SSH or TLS session)");
	}
	atomic_fetch_add(&drv->counters.rpcs, n);
	int64_t deadline = sb_now_ms() + dev->cfg.rpc_timeout_ms;
	struct sb_reply r = {0};
	int rc = sb_wire_send(dev->wire, ops, n, deadline);
	if (rc)
		return wire_failed(dev, opnames[0], rc, &r, err);
	int first = 0;
	for (size_t i = 0; i < n; i++) {
		if ((rc = sb_wire_recv(dev->wire, deadline, &r)))
			return wire_failed(dev, opnames[i], rc, &r, err);
		if (r.kind == SB_REPLY_ERROR) {
			atomic_fetch_add(&drv->counters.rpc_errors, 1);
			if (!first &&
			    (first = sbd_set_err(err, dev, opnames[i], -EREMOTEIO, "%s",
						 r.error)) &&
			    err)
				err->session_id = r.session_id;
		} else if (r.kind != SB_REPLY_OK && !(reply && i == n - 1) && !first) {
			first = sbd_set_err(err, dev, opnames[i], -EPROTO,
					    "unexpected reply: no <ok/>");
		}
	}
	if (!first && reply)
		*reply = r;
	return first;
}

static int do_op(struct sb_device *dev, const char *op, const char *opname, struct sb_reply *reply,
		 struct sb_error *err)
{
	return do_ops(dev, &op, &opname, 1, reply, err);
}

static const char *ds_name(enum sb_datastore ds)
{
	return ds == SB_DS_CANDIDATE ? "candidate" : "running";
}

int sb_device_lock(struct sb_device *dev, enum sb_datastore ds, struct sb_error *err)
{
	char op[64];
	snprintf(op, sizeof(op), "<lock><target><%s/></target></lock>", ds_name(ds));
	return do_op(dev, op, "lock", NULL, err);
}

int sb_device_kill_session(struct sb_device *dev, uint32_t sid, struct sb_error *err)
{
	char op[96];
	snprintf(op, sizeof(op), "<kill-session><session-id>%u</session-id></kill-session>", sid);
	return do_op(dev, op, "kill-session", NULL, err);
}

int sb_device_unlock(struct sb_device *dev, enum sb_datastore ds, struct sb_error *err)
{
	char op[64];
	snprintf(op, sizeof(op), "<unlock><target><%s/></target></unlock>", ds_name(ds));
	return do_op(dev, op, "unlock", NULL, err);
}

int sb_device_discard(struct sb_device *dev, struct sb_error *err)
{
	return do_op(dev, "<discard-changes/>", "discard-changes", NULL, err);
}

#define VALIDATE_OP "<validate><source><candidate/></source></validate>"

int sb_device_validate(struct sb_device *dev, struct sb_error *err)
{
	return do_op(dev, VALIDATE_OP, "validate", NULL, err);
}

/* Runs the operation built in b (freed here). */
static int do_built(struct sb_device *dev, struct sb_buf *b, const char *opname,
		    struct sb_error *err)
{
	int rc = do_op(dev, b->oom ? NULL : b->s, opname, NULL, err);
	free(b->s);
	return rc;
}

int sb_device_commit(struct sb_device *dev, int confirm_timeout_s, const char *persist,
		     const char *persist_id, struct sb_error *err)
{
	struct sb_buf b = {0};
	sb_buf_printf(&b, "<commit>");
	if (confirm_timeout_s > 0) {
		sb_buf_printf(&b, "<confirmed/><confirm-timeout>%d</confirm-timeout>",
			      confirm_timeout_s);
		if (persist)
			sb_buf_leaf(&b, "persist", persist);
	}
	if (persist_id)
		sb_buf_leaf(&b, "persist-id", persist_id);
	sb_buf_printf(&b, "</commit>");
	return do_built(dev, &b, confirm_timeout_s > 0 ? "commit-confirmed" : "commit", err);
}

int sb_device_cancel_commit(struct sb_device *dev, const char *persist_id, struct sb_error *err)
{
	struct sb_buf b = {0};
	sb_buf_printf(&b, "<cancel-commit>");
	if (persist_id)
		sb_buf_leaf(&b, "persist-id", persist_id);
	sb_buf_printf(&b, "</cancel-commit>");
	return do_built(dev, &b, "cancel-commit", err);
}

int sb_device_rpc_xml(struct sb_device *dev, const char *xml, struct sb_error *err)
{
	return do_op(dev, xml, "rpc", NULL, err);
}

int sb_device_subscribe(struct sb_device *dev, struct sb_error *err)
{
	return do_op(dev,
		     "<create-subscription "
		     "xmlns=\"urn:ietf:params:xml:ns:netconf:notification:1.0\"/>",
		     "create-subscription", NULL, err);
}

/* Starts an edit-config of ds in b; the caller appends the <config> content. */
static void edit_begin(struct sb_device *dev, enum sb_datastore ds, struct sb_buf *b)
{
	sb_buf_printf(b,
		      "<edit-config><target><%s/></target><default-operation>merge</"
		      "default-operation>%s<config>",
		      ds_name(ds),
		      dev->caps.rollback_on_error ? "<error-option>rollback-on-error</error-option>"
						  : "");
}

/*
 * Ends and runs the edit-config begun in b (freed here); then_validate:
 * a <validate> of the candidate pipelined behind it (sb_device_edit_*_validate).
 */
static int edit_rpc(struct sb_device *dev, enum sb_datastore ds, struct sb_buf *b,
		    bool then_validate, struct sb_error *err)
{
	if (ds == SB_DS_RUNNING && !dev->caps.writable_running) {
		free(b->s);
		return sbd_set_err(err, dev, "edit-config", -ENOTSUP, "running is not writable");
	}
	sb_buf_printf(b, "</config></edit-config>");
	atomic_fetch_add(&dev->drv->counters.edits, 1);
	if (!then_validate)
		return do_built(dev, b, "edit-config", err);
	const char *ops[] = {b->oom ? NULL : b->s, VALIDATE_OP};
	const char *names[] = {"edit-config", "validate"};
	int rc = do_ops(dev, ops, names, 2, NULL, err);
	free(b->s);
	return rc;
}

/*
 * xcs sorted by input, as a model's edit wants them: xcs itself when it
 * is, else a sorted copy in *copy (caller frees; -ENOMEM).
 */
static int sorted_xcs(const struct sb_xc *xcs, size_t n, const struct sb_xc **view,
		      struct sb_xc **copy)
{
	*view = xcs;
	*copy = NULL;
	for (size_t i = 1; i < n; i++)
		if (xcs[i - 1].in > xcs[i].in) {
			if (!(*copy = malloc(n * sizeof(**copy))))
				return -ENOMEM;
			memcpy(*copy, xcs, n * sizeof(**copy));
			qsort(*copy, n, sizeof(**copy), sb_xc_cmp);
			*view = *copy;
			break;
		}
	return 0;
}

/* A cross-connect model's entry, or an error for a transceiver agent. */
static const struct sb_model_ops *xc_model(struct sb_device *dev, const char *opname,
					   struct sb_error *err)
{
	const struct sb_model_ops *m = sb_model(dev->cfg.model);
	if (m->bundles)
		sbd_set_err(err, dev, opname, -ENOTSUP, "a %s device has no cross-connects",
			    m->name);
	return m->bundles ? NULL : m;
}

static int edit_xcs(struct sb_device *dev, enum sb_datastore ds, const struct sb_xc *current,
		    size_t n_current, const struct sb_xc *target, size_t n_target,
		    bool then_validate, struct sb_error *err)
{
	const struct sb_model_ops *m = xc_model(dev, "edit-config", err);
	if (!m)
		return -ENOTSUP;
	const struct sb_xc *cur, *tgt;
	struct sb_xc *cur_copy, *tgt_copy = NULL;
	if (sorted_xcs(current, n_current, &cur, &cur_copy) ||
	    sorted_xcs(target, n_target, &tgt, &tgt_copy)) {
		free(cur_copy);
		return sbd_set_err(err, dev, "edit-config", -ENOMEM, "out of memory");
	}
	struct sb_buf b = {0};
	edit_begin(dev, ds, &b);
	m->xc_edit(&b, &dev->cfg.ports, cur, n_current, tgt, n_target);
	free(cur_copy);
	free(tgt_copy);
	return edit_rpc(dev, ds, &b, then_validate, err);
}

int sb_device_edit_xcs(struct sb_device *dev, enum sb_datastore ds, const struct sb_xc *current,
		       size_t n_current, const struct sb_xc *target, size_t n_target,
		       struct sb_error *err)
{
	return edit_xcs(dev, ds, current, n_current, target, n_target, false, err);
}

int sb_device_edit_xcs_validate(struct sb_device *dev, const struct sb_xc *current,
				size_t n_current, const struct sb_xc *target, size_t n_target,
				struct sb_error *err)
{
	return edit_xcs(dev, SB_DS_CANDIDATE, current, n_current, target, n_target, true, err);
}

int sb_device_replace_xcs(struct sb_device *dev, enum sb_datastore ds, const struct sb_xc *xcs,
			  size_t n, struct sb_error *err)
{
	const struct sb_model_ops *m = xc_model(dev, "edit-config", err);
	if (!m)
		return -ENOTSUP;
	struct sb_buf b = {0};
	edit_begin(dev, ds, &b);
	m->xc_replace(&b, &dev->cfg.ports, xcs, n);
	return edit_rpc(dev, ds, &b, false, err);
}

int sb_xc_cmp(const void *a, const void *b)
{
	const struct sb_xc *x = a, *y = b;
	return x->in != y->in ? (int)x->in - (int)y->in : (int)x->out - (int)y->out;
}

/*
 * <get> (with_state) or <get-config> of ds with the subtree `filter`;
 * *reply gets the reply, whose data point into the session's wire buffer
 * until the next RPC.
 */
static int read_data(struct sb_device *dev, bool with_state, enum sb_datastore ds,
		     const char *filter, const char *opname, struct sb_reply *reply,
		     struct sb_error *err)
{
	char op[512];
	if (with_state)
		snprintf(op, sizeof(op), "<get><filter type=\"subtree\">%s</filter></get>", filter);
	else
		snprintf(op, sizeof(op),
			 "<get-config><source><%s/></source><filter "
			 "type=\"subtree\">%s</filter></get-config>",
			 ds_name(ds), filter);
	int rc = do_op(dev, op, opname, reply, err);
	if (rc)
		return rc;
	if (reply->kind != SB_REPLY_DATA)
		return sbd_set_err(err, dev, opname, -EPROTO, "reply without <data>");
	return 0;
}

int sb_device_read_xcs(struct sb_device *dev, bool with_state, enum sb_datastore ds,
		       struct sb_xc_state **out, size_t *n, struct sb_error *err)
{
	const char *opname = with_state ? "get" : "get-config";
	struct sb_reply r;
	*out = NULL;
	*n = 0;
	const struct sb_model_ops *m = xc_model(dev, opname, err);
	if (!m)
		return -ENOTSUP;
	int rc = read_data(dev, with_state, ds, m->xc_filter(with_state), opname, &r, err);
	if (rc)
		return rc;
	char why[160];
	rc = m->xc_parse(r.data, r.data_len, &dev->cfg.ports, with_state, out, n, why, sizeof(why));
	if (rc)
		return sbd_set_err(err, dev, opname, rc, "unexpected reply: %s", why);
	return 0;
}

void sb_device_info_clear(struct sb_device_info *info)
{
	if (!info)
		return;
	free(info->ports);
	*info = (struct sb_device_info){0};
}

int sb_device_read_info(struct sb_device *dev, struct sb_device_info *out, struct sb_error *err)
{
	const struct sb_model_ops *m = sb_model(dev->cfg.model);
	struct sb_reply r;
	char why[160];
	*out = (struct sb_device_info){0};
	if (!m->info_filter)
		return sbd_set_err(err, dev, "get", -ENOTSUP, "a %s device says nothing of itself",
				   m->name);
	int rc = read_data(dev, true, SB_DS_RUNNING, m->info_filter, "get", &r, err);
	if (rc)
		return rc;
	rc = m->info_parse(r.data, r.data_len, &dev->cfg.ports, out, why, sizeof(why));
	if (rc)
		return sbd_set_err(err, dev, "get", rc, "unexpected reply: %s", why);
	return 0;
}

/* ---- ocs-transceiver ---------------------------------------------------- */

int sb_bundle_cmp(const void *a, const void *b)
{
	const struct sb_bundle *x = a, *y = b;
	return (int)x->bundle - (int)y->bundle;
}

bool sb_bundle_equal(const struct sb_bundle *a, const struct sb_bundle *b)
{
	if (a->bundle != b->bundle || a->path != b->path)
		return false;
	return a->path == 0 || (a->distance == b->distance && a->dir == b->dir);
}

int sb_device_read_bundles(struct sb_device *dev, bool with_state, enum sb_datastore ds,
			   struct sb_bundle_state **out, size_t *n, bool *node_faulty,
			   struct sb_error *err)
{
	const char *opname = with_state ? "get" : "get-config";
	*out = NULL;
	*n = 0;
	if (node_faulty)
		*node_faulty = false;
	if (!sb_model(dev->cfg.model)->bundles)
		return sbd_set_err(err, dev, opname, -ENOTSUP, "not an ocs-transceiver device");
	struct sb_reply r;
	int rc = read_data(dev, with_state, ds, TRX_FILTER, opname, &r, err);
	if (rc)
		return rc;
	rc = sb_reply_bundles(r.data, r.data_len, dev->cfg.node, out, n, node_faulty);
	if (rc)
		return sbd_set_err(err, dev, opname, rc, "%s",
				   rc == -ENOMEM ? "out of memory"
						 : "unexpected reply: bundles not readable");
	return 0;
}

static int edit_bundles(struct sb_device *dev, enum sb_datastore ds, const struct sb_bundle *target,
			size_t n, bool then_validate, struct sb_error *err)
{
	if (!sb_model(dev->cfg.model)->bundles)
		return sbd_set_err(err, dev, "edit-config", -ENOTSUP,
				   "not an ocs-transceiver device");
	struct sb_buf b = {0};
	edit_begin(dev, ds, &b);
	/* replace the node's entry: the bundles it holds are exactly target */
	sb_buf_printf(&b,
		      "<transceivers xmlns=\"%s\" xmlns:nc=\"%s\"><node "
		      "nc:operation=\"replace\"><id>%u</id>",
		      TRX_NS, NC_NS, dev->cfg.node);
	for (size_t i = 0; i < n; i++) {
		const struct sb_bundle *t = &target[i];
		if (t->path)
			sb_buf_printf(
				&b,
				"<bundle><id>%u</id><path>external</path><external><distance>%u"
				"</distance><direction>%s</direction></external></bundle>",
				t->bundle, t->distance, t->dir ? "down" : "up");
		else
			sb_buf_printf(&b, "<bundle><id>%u</id><path>loopback</path></bundle>",
				      t->bundle);
	}
	sb_buf_printf(&b, "</node></transceivers>");
	return edit_rpc(dev, ds, &b, then_validate, err);
}

int sb_device_edit_bundles(struct sb_device *dev, enum sb_datastore ds,
			   const struct sb_bundle *target, size_t n, struct sb_error *err)
{
	return edit_bundles(dev, ds, target, n, false, err);
}

int sb_device_edit_bundles_validate(struct sb_device *dev, const struct sb_bundle *target, size_t n,
				    struct sb_error *err)
{
	return edit_bundles(dev, SB_DS_CANDIDATE, target, n, true, err);
}
