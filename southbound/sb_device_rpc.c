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
#include "sb_reply.h"
#include "sb_wire.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OCS_NS	   "urn:ocsd:yang:ocs-switch"
#define NC_NS	   "urn:ietf:params:xml:ns:netconf:base:1.0"
#define TRX_NS	   "urn:ocsd:yang:ocs-transceiver"
#define XC_FILTER  "<cross-connects xmlns=\"" OCS_NS "\"/>"
#define TRX_FILTER "<transceivers xmlns=\"" TRX_NS "\"/>"

/* A growing string buffer for RPC XML. */
struct strbuf {
	char *s;
	size_t len, cap;
	bool oom;
};

static void sb_append(struct strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_append(struct strbuf *b, const char *fmt, ...)
{
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0 || b->oom) {
			b->oom = true;
			return;
		}
		if (b->s && b->len + (size_t)n < b->cap) {
			b->len += (size_t)n;
			return;
		}
		size_t cap = (b->cap ? b->cap * 2 : 4096) + (size_t)n;
		char *s = realloc(b->s, cap);
		if (!s) {
			b->oom = true;
			return;
		}
		b->s = s;
		b->cap = cap;
	}
}

/* Appends the leaf <name>s</name>, s as XML character data. */
static void sb_append_leaf(struct strbuf *b, const char *name, const char *s)
{
	sb_append(b, "<%s>", name);
	for (; *s; s++) {
		const char *e = *s == '<'   ? "&lt;"
				: *s == '>' ? "&gt;"
				: *s == '&' ? "&amp;"
					    : NULL;
		if (e)
			sb_append(b, "%s", e);
		else
			sb_append(b, "%c", *s);
	}
	sb_append(b, "</%s>", name);
}

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
static int do_built(struct sb_device *dev, struct strbuf *b, const char *opname,
		    struct sb_error *err)
{
	int rc = do_op(dev, b->oom ? NULL : b->s, opname, NULL, err);
	free(b->s);
	return rc;
}

int sb_device_commit(struct sb_device *dev, int confirm_timeout_s, const char *persist,
		     const char *persist_id, struct sb_error *err)
{
	struct strbuf b = {0};
	sb_append(&b, "<commit>");
	if (confirm_timeout_s > 0) {
		sb_append(&b, "<confirmed/><confirm-timeout>%d</confirm-timeout>",
			  confirm_timeout_s);
		if (persist)
			sb_append_leaf(&b, "persist", persist);
	}
	if (persist_id)
		sb_append_leaf(&b, "persist-id", persist_id);
	sb_append(&b, "</commit>");
	return do_built(dev, &b, confirm_timeout_s > 0 ? "commit-confirmed" : "commit", err);
}

int sb_device_cancel_commit(struct sb_device *dev, const char *persist_id, struct sb_error *err)
{
	struct strbuf b = {0};
	sb_append(&b, "<cancel-commit>");
	if (persist_id)
		sb_append_leaf(&b, "persist-id", persist_id);
	sb_append(&b, "</cancel-commit>");
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
static void edit_begin(struct sb_device *dev, enum sb_datastore ds, struct strbuf *b)
{
	sb_append(b,
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
static int edit_rpc(struct sb_device *dev, enum sb_datastore ds, struct strbuf *b,
		    bool then_validate, struct sb_error *err)
{
	if (ds == SB_DS_RUNNING && !dev->caps.writable_running) {
		free(b->s);
		return sbd_set_err(err, dev, "edit-config", -ENOTSUP, "running is not writable");
	}
	sb_append(b, "</config></edit-config>");
	atomic_fetch_add(&dev->drv->counters.edits, 1);
	if (!then_validate)
		return do_built(dev, b, "edit-config", err);
	const char *ops[] = {b->oom ? NULL : b->s, VALIDATE_OP};
	const char *names[] = {"edit-config", "validate"};
	int rc = do_ops(dev, ops, names, 2, NULL, err);
	free(b->s);
	return rc;
}

static int find_xc(const struct sb_xc *xcs, size_t n, uint16_t in)
{
	for (size_t i = 0; i < n; i++)
		if (xcs[i].in == in)
			return (int)i;
	return -1;
}

static int edit_xcs(struct sb_device *dev, enum sb_datastore ds, const struct sb_xc *current,
		    size_t n_current, const struct sb_xc *target, size_t n_target,
		    bool then_validate, struct sb_error *err)
{
	struct strbuf b = {0};
	edit_begin(dev, ds, &b);
	sb_append(&b, "<cross-connects xmlns=\"%s\" xmlns:nc=\"%s\">", OCS_NS, NC_NS);
	/* removals first: inputs the target no longer uses */
	for (size_t i = 0; i < n_current; i++)
		if (find_xc(target, n_target, current[i].in) < 0)
			sb_append(&b,
				  "<connection "
				  "nc:operation=\"remove\"><input>%u</input></connection>",
				  current[i].in);
	/* then additions and changed outputs */
	for (size_t i = 0; i < n_target; i++) {
		int c = find_xc(current, n_current, target[i].in);
		if (c >= 0 && current[c].out == target[i].out)
			continue;
		sb_append(&b, "<connection><input>%u</input><output>%u</output></connection>",
			  target[i].in, target[i].out);
	}
	sb_append(&b, "</cross-connects>");
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
	struct strbuf b = {0};
	edit_begin(dev, ds, &b);
	sb_append(&b, "<cross-connects xmlns=\"%s\" xmlns:nc=\"%s\" nc:operation=\"replace\">",
		  OCS_NS, NC_NS);
	for (size_t i = 0; i < n; i++)
		sb_append(&b, "<connection><input>%u</input><output>%u</output></connection>",
			  xcs[i].in, xcs[i].out);
	sb_append(&b, "</cross-connects>");
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
	char op[256];
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
	int rc = read_data(dev, with_state, ds, XC_FILTER, opname, &r, err);
	if (rc)
		return rc;
	rc = sb_reply_xcs(r.data, r.data_len, out, n);
	if (rc)
		return sbd_set_err(err, dev, opname, rc, "%s",
				   rc == -ENOMEM ? "out of memory"
						 : "unexpected reply: cross-connects not readable");
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
	if (dev->cfg.model != SB_MODEL_TRANSCEIVER)
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
	if (dev->cfg.model != SB_MODEL_TRANSCEIVER)
		return sbd_set_err(err, dev, "edit-config", -ENOTSUP,
				   "not an ocs-transceiver device");
	struct strbuf b = {0};
	edit_begin(dev, ds, &b);
	/* replace the node's entry: the bundles it holds are exactly target */
	sb_append(&b,
		  "<transceivers xmlns=\"%s\" xmlns:nc=\"%s\"><node "
		  "nc:operation=\"replace\"><id>%u</id>",
		  TRX_NS, NC_NS, dev->cfg.node);
	for (size_t i = 0; i < n; i++) {
		const struct sb_bundle *t = &target[i];
		if (t->path)
			sb_append(&b,
				  "<bundle><id>%u</id><path>external</path><external><distance>%u"
				  "</distance><direction>%s</direction></external></bundle>",
				  t->bundle, t->distance, t->dir ? "down" : "up");
		else
			sb_append(&b, "<bundle><id>%u</id><path>loopback</path></bundle>",
				  t->bundle);
	}
	sb_append(&b, "</node></transceivers>");
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
