/*
 * sb_model.c - the table of device models (API and what an entry says in
 * sb_model.h): ocs-switch and ocs-transceiver, ocsd's own modules, and
 * polatis, the public Polatis optical-switch model.
 *
 * Facts the polatis entry rests on (from the public module
 * optical-switch@2018-03-22 and the public polatis-switch module, both in
 * ONOS's repository, and from what ONOS's Polatis driver does with a real
 * switch; southbound/README.md lists them):
 *   - a cross-connect is a one-way <cross-connects>/<pair> keyed by
 *     <ingress>, with a mandatory <egress>; port ids are 1..65535; an N x N
 *     switch numbers its ingress ports and its egress ports apart;
 *   - a peer controller adds a pair with a merge and takes it away with a
 *     delete, in running, and reads pairs with a <get> filtered to
 *     <cross-connects>;
 *   - a port's health is <port-config>/<port>/<status> (ENABLED, DISABLED,
 *     FAILED, UNSUPPORTED); a pair has no status of its own, so a pair read
 *     back reads `connected` (the <get> asks for the pairs alone, as ONOS's
 *     driver reads its flow rules) and port health reaches ocsd through the
 *     device's own reports instead: the info read (polatis_info, which
 *     ocsd's reconciliation turns into ports out of service) and the
 *     alarms below;
 *   - port power alarms come as polatis-switch notifications
 *     port-power-alarm and port-power-clear, naming the port by port-id.
 */
#include "sb_model.h"

#include "sb_reply.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NC_NS	   "urn:ietf:params:xml:ns:netconf:base:1.0"
#define OCS_NS	   "urn:ocsd:yang:ocs-switch"
#define TRX_NS	   "urn:ocsd:yang:ocs-transceiver"
#define OPSW_NS	   "http://www.polatis.com/yang/optical-switch"
#define POLATIS_NS "http://www.polatis.com/yang/polatis-switch"

void sb_buf_printf(struct sb_buf *b, const char *fmt, ...)
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

void sb_buf_leaf(struct sb_buf *b, const char *name, const char *s)
{
	sb_buf_printf(b, "<%s>", name);
	for (; *s; s++) {
		const char *e = *s == '<'   ? "&lt;"
				: *s == '>' ? "&gt;"
				: *s == '&' ? "&amp;"
					    : NULL;
		if (e)
			sb_buf_printf(b, "%s", e);
		else
			sb_buf_printf(b, "%c", *s);
	}
	sb_buf_printf(b, "</%s>", name);
}

/* The entry of xcs (n, sorted by input) with input `in`, or NULL. */
static const struct sb_xc *find_xc(const struct sb_xc *xcs, size_t n, uint16_t in)
{
	struct sb_xc key = {.in = in};
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (xcs[mid].in < key.in)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && xcs[lo].in == in ? &xcs[lo] : NULL;
}

/*
 * How a cross-connect model writes its container: the container's
 * namespace, one removal (by input) and one cross-connect (in -> out), both
 * in the device's port ids.
 */
struct xc_syntax {
	const char *ns;
	void (*removal)(struct sb_buf *b, const struct sb_port_map *pm, const struct sb_xc *x);
	void (*change)(struct sb_buf *b, const struct sb_port_map *pm, const struct sb_xc *x);
};

/*
 * The edit from current to target: removal() for each input of current
 * absent from target, then change() for each target entry current lacks or
 * maps elsewhere (removals free outputs first), in the model's container.
 */
static void xc_edit(struct sb_buf *b, const struct xc_syntax *sx, const struct sb_port_map *pm,
		    const struct sb_xc *current, size_t n_current, const struct sb_xc *target,
		    size_t n_target)
{
	sb_buf_printf(b, "<cross-connects xmlns=\"%s\" xmlns:nc=\"%s\">", sx->ns, NC_NS);
	for (size_t i = 0; i < n_current; i++)
		if (!find_xc(target, n_target, current[i].in))
			sx->removal(b, pm, &current[i]);
	for (size_t i = 0; i < n_target; i++) {
		const struct sb_xc *c = find_xc(current, n_current, target[i].in);
		if (!c || c->out != target[i].out)
			sx->change(b, pm, &target[i]);
	}
	sb_buf_printf(b, "</cross-connects>");
}

/* The replacement of the whole container by xcs. */
static void xc_replace(struct sb_buf *b, const struct xc_syntax *sx, const struct sb_port_map *pm,
		       const struct sb_xc *xcs, size_t n)
{
	sb_buf_printf(b, "<cross-connects xmlns=\"%s\" xmlns:nc=\"%s\" nc:operation=\"replace\">",
		      sx->ns, NC_NS);
	for (size_t i = 0; i < n; i++)
		sx->change(b, pm, &xcs[i]);
	sb_buf_printf(b, "</cross-connects>");
}

/* Device port id -> ocsd port (first..first+n-1 -> 0..n-1); -1 outside. */
static long map_back(uint32_t id, uint32_t first, uint32_t n)
{
	if (id < first || (n && id - first >= n) || id - first > UINT16_MAX)
		return -1;
	return (long)(id - first);
}

/* ---- ocs-switch ------------------------------------------------------------ */

static const char *switch_filter(bool with_state)
{
	(void)with_state; /* one container holds configuration and status */
	return "<cross-connects xmlns=\"" OCS_NS "\"/>";
}

static void switch_removal(struct sb_buf *b, const struct sb_port_map *pm, const struct sb_xc *x)
{
	sb_buf_printf(b, "<connection nc:operation=\"remove\"><input>%u</input></connection>",
		      pm->in_first + x->in);
}

static void switch_change(struct sb_buf *b, const struct sb_port_map *pm, const struct sb_xc *x)
{
	sb_buf_printf(b, "<connection><input>%u</input><output>%u</output></connection>",
		      pm->in_first + x->in, pm->out_first + x->out);
}

static const struct xc_syntax switch_syntax = {OCS_NS, switch_removal, switch_change};

static void switch_edit(struct sb_buf *b, const struct sb_port_map *pm, const struct sb_xc *current,
			size_t n_current, const struct sb_xc *target, size_t n_target)
{
	xc_edit(b, &switch_syntax, pm, current, n_current, target, n_target);
}

static void switch_replace(struct sb_buf *b, const struct sb_port_map *pm, const struct sb_xc *xcs,
			   size_t n)
{
	xc_replace(b, &switch_syntax, pm, xcs, n);
}

/* Maps the entries of xs (device ids) to ocsd ports in place; -EPROTO outside the map. */
static int map_xcs(struct sb_xc_state *xs, size_t n, const struct sb_port_map *pm, char *why,
		   size_t why_len)
{
	for (size_t i = 0; i < n; i++) {
		long in = map_back(xs[i].in, pm->in_first, pm->n);
		long out = map_back(xs[i].out, pm->out_first, pm->n);
		if (in < 0 || out < 0) {
			snprintf(why, why_len, "cross-connect %u -> %u is outside ocsd's ports",
				 xs[i].in, xs[i].out);
			return -EPROTO;
		}
		xs[i].in = (uint16_t)in;
		xs[i].out = (uint16_t)out;
	}
	return 0;
}

static int switch_parse(const char *data, size_t len, const struct sb_port_map *pm, bool with_state,
			struct sb_xc_state **out, size_t *n, char *why, size_t why_len)
{
	int rc = sb_reply_xcs(data, len, out, n);
	if (rc) {
		snprintf(why, why_len, "%s",
			 rc == -ENOMEM ? "out of memory" : "cross-connects not readable");
		return rc;
	}
	if (!with_state)
		for (size_t i = 0; i < *n; i++)
			(*out)[i].status = SB_XC_STATUS_UNKNOWN;
	if (pm->in_first || pm->out_first) {
		/* sorted by device id, and so by ocsd port: the map is a shift */
		if ((rc = map_xcs(*out, *n, pm, why, why_len))) {
			free(*out);
			*out = NULL;
			*n = 0;
		}
	}
	return rc;
}

static bool switch_notif(const char *name, sb_leaf_fn leaf, const void *ctx,
			 const struct sb_port_map *pm, struct sb_notif *n)
{
	const char *port = leaf(ctx, "port");
	if (strcmp(name, "port-state-change") || !port)
		return false;
	/* a rail OCS's GPU-side port: failed or down is a GPU fault, up its end */
	long k = map_back((uint32_t)strtoul(port, NULL, 10), pm->in_first, pm->n);
	if (k < 0)
		return false;
	const char *state = leaf(ctx, "oper-state");
	n->kind = SB_NOTIF_PORT_STATE;
	n->port = (uint16_t)k;
	n->port_up = state && !strcmp(state, "up");
	return true;
}

/* ---- ocs-transceiver ----------------------------------------------------- */

static bool trx_notif(const char *name, sb_leaf_fn leaf, const void *ctx,
		      const struct sb_port_map *pm, struct sb_notif *n)
{
	(void)pm;
	const char *node = leaf(ctx, "node");
	if (!node)
		return false;
	if (!strcmp(name, "node-fault")) {
		const char *faulty = leaf(ctx, "faulty");
		n->kind = SB_NOTIF_NODE_FAULT;
		n->node = (uint32_t)strtoul(node, NULL, 10);
		n->faulty = faulty && !strcmp(faulty, "true");
		return true;
	}
	if (!strcmp(name, "loss-of-light")) {
		const char *bundle = leaf(ctx, "bundle");
		n->kind = SB_NOTIF_LOSS_OF_LIGHT;
		n->node = (uint32_t)strtoul(node, NULL, 10);
		n->bundle = bundle ? (uint8_t)strtoul(bundle, NULL, 10) : 0;
		return true;
	}
	return false;
}

/* ---- polatis --------------------------------------------------------------- */

static const char *polatis_filter(bool with_state)
{
	/*
	 * The pairs alone, for <get> and <get-config> alike: a pair has no
	 * status, and the health of 2N ports would cost the verify read more
	 * than the pairs themselves (tests/bench/README.md, issue 23)
	 */
	(void)with_state;
	return "<cross-connects xmlns=\"" OPSW_NS "\"/>";
}

static void polatis_removal(struct sb_buf *b, const struct sb_port_map *pm, const struct sb_xc *x)
{
	sb_buf_printf(b, "<pair nc:operation=\"delete\"><ingress>%u</ingress></pair>",
		      pm->in_first + x->in);
}

static void polatis_change(struct sb_buf *b, const struct sb_port_map *pm, const struct sb_xc *x)
{
	sb_buf_printf(b, "<pair><ingress>%u</ingress><egress>%u</egress></pair>",
		      pm->in_first + x->in, pm->out_first + x->out);
}

static const struct xc_syntax polatis_syntax = {OPSW_NS, polatis_removal, polatis_change};

static void polatis_edit(struct sb_buf *b, const struct sb_port_map *pm,
			 const struct sb_xc *current, size_t n_current, const struct sb_xc *target,
			 size_t n_target)
{
	xc_edit(b, &polatis_syntax, pm, current, n_current, target, n_target);
}

static void polatis_replace(struct sb_buf *b, const struct sb_port_map *pm, const struct sb_xc *xcs,
			    size_t n)
{
	xc_replace(b, &polatis_syntax, pm, xcs, n);
}

static int polatis_parse(const char *data, size_t len, const struct sb_port_map *pm,
			 bool with_state, struct sb_xc_state **out, size_t *n, char *why,
			 size_t why_len)
{
	struct sb_pair *pairs;
	size_t n_pairs;
	*out = NULL;
	*n = 0;
	int rc = sb_reply_pairs(data, len, &pairs, &n_pairs);
	if (rc) {
		snprintf(why, why_len, "%s",
			 rc == -ENOMEM ? "out of memory" : "cross-connects not readable");
		return rc;
	}
	struct sb_xc_state *xs = n_pairs ? calloc(n_pairs, sizeof(*xs)) : NULL;
	if (n_pairs && !xs) {
		snprintf(why, why_len, "out of memory");
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n_pairs; i++) {
		long in = map_back(pairs[i].ingress, pm->in_first, pm->n);
		long eg = map_back(pairs[i].egress, pm->out_first, pm->n);
		if (in < 0 || eg < 0) {
			snprintf(
				why, why_len,
				"pair %u -> %u is outside ocsd's ports (ingress %u.., egress %u..)",
				pairs[i].ingress, pairs[i].egress, pm->in_first, pm->out_first);
			free(xs);
			rc = -EPROTO;
			goto out;
		}
		/* a pair present is a pair made: the model has no per-pair status */
		xs[i] = (struct sb_xc_state){.in = (uint16_t)in,
					     .out = (uint16_t)eg,
					     .status = with_state ? SB_XC_STATUS_CONNECTED
								  : SB_XC_STATUS_UNKNOWN};
	}
	/* ingress order is ocsd's input order: the map is a shift */
	*out = xs;
	*n = n_pairs;
out:
	free(pairs);
	return rc;
}

static int cmp_port_info(const void *a, const void *b)
{
	const struct sb_port_info *x = a, *y = b;
	return x->port != y->port ? x->port - y->port : (int)x->egress - (int)y->egress;
}

static int polatis_info(const char *data, size_t len, const struct sb_port_map *pm,
			struct sb_device_info *out, char *why, size_t why_len)
{
	struct sb_port_state *ports;
	size_t n_ports;
	*out = (struct sb_device_info){0};
	int rc = sb_reply_product(data, len, &out->product, &ports, &n_ports);
	if (rc) {
		snprintf(why, why_len, "%s",
			 rc == -ENOMEM ? "out of memory" : "product-information not readable");
		return rc;
	}
	out->ports = n_ports ? calloc(n_ports, sizeof(*out->ports)) : NULL;
	if (n_ports && !out->ports) {
		free(ports);
		snprintf(why, why_len, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < n_ports; i++) {
		long k = map_back(ports[i].id, pm->in_first, pm->n);
		bool egress = k < 0;
		if (egress)
			k = map_back(ports[i].id, pm->out_first, pm->n);
		if (k < 0)
			continue; /* a port ocsd does not use */
		struct sb_port_info *p = &out->ports[out->n_ports++];
		*p = (struct sb_port_info){
			.port = (uint16_t)k, .egress = egress, .status = ports[i].status};
		memcpy(p->peer, ports[i].peer, sizeof(p->peer));
	}
	free(ports);
	if (!out->n_ports) {
		free(out->ports); /* none of them ocsd's */
		out->ports = NULL;
	}
	if (out->n_ports > 1)
		qsort(out->ports, out->n_ports, sizeof(*out->ports), cmp_port_info);
	return 0;
}

static bool polatis_notif(const char *name, sb_leaf_fn leaf, const void *ctx,
			  const struct sb_port_map *pm, struct sb_notif *n)
{
	bool alarm = !strcmp(name, "port-power-alarm");
	const char *id = leaf(ctx, "port-id");
	if ((!alarm && strcmp(name, "port-power-clear")) || !id)
		return false;
	uint32_t pid = (uint32_t)strtoul(id, NULL, 10);
	long k = map_back(pid, pm->in_first, pm->n);
	if (k < 0)
		k = map_back(pid, pm->out_first, pm->n);
	if (k < 0)
		return false; /* a port ocsd does not use */
	n->kind = SB_NOTIF_PORT_STATE;
	n->port = (uint16_t)k;
	n->port_up = !alarm;
	return true;
}

/* ---- the table --------------------------------------------------------------- */

static const struct sb_model_ops models[SB_MODEL_COUNT] = {
	[SB_MODEL_SWITCH] = {.name = "ocs-switch",
			     .module = "ocs-switch",
			     .ns = OCS_NS,
			     .xc_filter = switch_filter,
			     .xc_edit = switch_edit,
			     .xc_replace = switch_replace,
			     .xc_parse = switch_parse,
			     .notif = switch_notif},
	[SB_MODEL_TRANSCEIVER] = {.name = "ocs-transceiver",
				  .module = "ocs-transceiver",
				  .ns = TRX_NS,
				  .bundles = true,
				  .notif = trx_notif},
	[SB_MODEL_POLATIS] = {.name = "polatis",
			      .module = "optical-switch",
			      .ns = OPSW_NS,
			      .xc_filter = polatis_filter,
			      .xc_edit = polatis_edit,
			      .xc_replace = polatis_replace,
			      .xc_parse = polatis_parse,
			      .info_filter = "<product-information xmlns=\"" OPSW_NS "\"/>"
					     "<port-config xmlns=\"" OPSW_NS "\"><port><port-id/>"
					     "<status/><peer-port/></port></port-config>",
			      .info_parse = polatis_info,
			      .notif = polatis_notif},
};

const struct sb_model_ops *sb_model(enum sb_model m)
{
	return (unsigned)m < SB_MODEL_COUNT ? &models[m] : &models[SB_MODEL_SWITCH];
}

int sb_model_from_name(const char *name, enum sb_model *out)
{
	for (int m = 0; m < SB_MODEL_COUNT; m++)
		if (!strcmp(models[m].name, name)) {
			*out = (enum sb_model)m;
			return 0;
		}
	return -ENOENT;
}

struct sb_port_map sb_model_default_ports(enum sb_model m, uint32_t n)
{
	if (m == SB_MODEL_POLATIS)
		return (struct sb_port_map){.in_first = 1, .out_first = n + 1, .n = n};
	return (struct sb_port_map){.n = n};
}

int sb_model_check_ports(enum sb_model m, const struct sb_port_map *pm, char *why, size_t why_len)
{
	if (m == SB_MODEL_TRANSCEIVER)
		return 0; /* bundles, not ports */
	uint64_t max = m == SB_MODEL_POLATIS ? 65535 : 4095, min = m == SB_MODEL_POLATIS ? 1 : 0;
	uint64_t in_end = (uint64_t)pm->in_first + pm->n, out_end = (uint64_t)pm->out_first + pm->n;
	if (!pm->n) {
		if (m != SB_MODEL_POLATIS)
			return 0; /* ocs-switch: the device bounds its own ids */
		snprintf(why, why_len, "a polatis device needs the number of ports ocsd uses");
		return -EINVAL;
	}
	if (pm->in_first < min || pm->out_first < min || in_end - 1 > max || out_end - 1 > max ||
	    pm->n > UINT16_MAX + 1u) {
		snprintf(why, why_len,
			 "ports %u..%llu (ingress) and %u..%llu (egress) leave the model's ids "
			 "%llu..%llu",
			 pm->in_first, (unsigned long long)in_end - 1, pm->out_first,
			 (unsigned long long)out_end - 1, (unsigned long long)min,
			 (unsigned long long)max);
		return -EINVAL;
	}
	if (m == SB_MODEL_POLATIS && pm->in_first < out_end && pm->out_first < in_end) {
		snprintf(why, why_len,
			 "ingress ports %u..%llu and egress ports %u..%llu overlap: one port "
			 "would carry two of ocsd's",
			 pm->in_first, (unsigned long long)in_end - 1, pm->out_first,
			 (unsigned long long)out_end - 1);
		return -EINVAL;
	}
	return 0;
}
