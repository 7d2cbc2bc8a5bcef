/*
 * fuzz_devsim_edit.c - libFuzzer harness: ocs-devsim's handling of
 * edit-config content. The input (after its first byte) is the content of
 * <config>; it is wrapped in a NETCONF <rpc><edit-config> envelope, parsed
 * the way libnetconf2's server parses an RPC (lyd_parse_op,
 * LYD_TYPE_RPC_NETCONF), and handed to a simulated device through
 * devsim_fleet_rpc_sid(): the edit engine (devsim_store.c), then validate,
 * commit (the device's own rules: port range and one-way circuits on a
 * switch, node, bundle, K and open-line ends on a transceiver), get (the
 * state data built from what was committed) and get-config.
 *
 * The first byte picks the device and the edit's default-operation:
 *   bits 0-1  0 ocs-switch (8 ports, bidirectional), 1 ocs-switch
 *             unidirectional, 2 ocs-transceiver agent of node 1 in an open
 *             line of 3 nodes (K 2, 2 bundles), 3 the same line closed
 *   bits 2-4  default-operation: absent, merge, replace, none, create (not
 *             an allowed value), or absent again (5..7)
 *   bit 5     start from an empty device instead of the base configuration
 *             (switch: joins 0 <-> 1 and 2 <-> 3; transceiver: bundle 0 one
 *             position down, bundle 1 on loopback)
 *
 * Checks beyond "no crash, no leak, no UB", each independent of devsim's
 * code: a refused edit leaves the candidate as it was (rollback-on-error); a
 * refused commit leaves running as it was; what a commit accepted on a
 * bidirectional switch holds only ports 0..7 and no one-way circuit, and on
 * a transceiver agent only its own node with bundles 0..1 and distances
 * 1..2; a merge of what running holds is accepted and leaves the candidate
 * as it was; and libyang keeps one message at most (ocs-devsim's setting,
 * made by devsim_fleet_context(): more would grow with every refusal).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devsim_fleet.h"
#include "devsim_store.h"

#define PORTS	 8
#define MAX_EDIT 16384

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const default_ops[8] = {NULL, "merge", "replace", "none", "create", NULL};

static const char base_switch[] =
	"<cross-connects xmlns=\"urn:ocsd:yang:ocs-switch\">"
	"<connection><input>0</input><output>1</output></connection>"
	"<connection><input>1</input><output>0</output></connection>"
	"<connection><input>2</input><output>3</output></connection>"
	"<connection><input>3</input><output>2</output></connection></cross-connects>";
static const char base_transceiver[] =
	"<transceivers xmlns=\"urn:ocsd:yang:ocs-transceiver\"><node><id>1</id>"
	"<bundle><id>0</id><path>external</path><external><distance>1</distance>"
	"<direction>down</direction></external></bundle>"
	"<bundle><id>1</id><path>loopback</path></bundle></node></transceivers>";

/* libnetconf2 logs an error when asked for the error of an ok reply: the question is the point */
static void quiet(const struct nc_session *session, NC_VERB_LEVEL level, const char *msg)
{
}

static struct ly_ctx *context(void)
{
	static struct ly_ctx *ctx;
	if (!ctx) {
		nc_set_print_clb_session(quiet);
		if (devsim_fleet_context("/usr/share/yuma/modules/ietf", true, &ctx, stderr))
			abort();
	}
	return ctx;
}

/* Parses one whole <rpc> as libnetconf2's server does and runs it on d; whether it answered ok. */
static bool run_rpc(struct devsim_device *d, const char *xml)
{
	struct ly_ctx *ctx = context();
	struct ly_in *in = NULL;
	struct lyd_node *envp = NULL, *op = NULL;
	bool ok = false;
	if (ly_in_new_memory(xml, &in))
		abort();
	if (!lyd_parse_op(ctx, NULL, in, LYD_XML, LYD_TYPE_RPC_NETCONF, &envp, &op) && op) {
		struct nc_server_reply *reply = devsim_fleet_rpc_sid(d, op, 1);
		if (!reply)
			abort(); /* every RPC gets an answer */
		ok = !nc_server_reply_get_last_err(reply);
		nc_server_reply_free(reply);
	}
	lyd_free_all(envp);
	lyd_free_all(op);
	ly_in_free(in, 0);
	return ok;
}

#define RPC_HEAD "<rpc message-id=\"1\" xmlns=\"urn:ietf:params:xml:ns:netconf:base:1.0\">"

/* edit-config of the candidate with content (len bytes); whether the device took it. */
static bool edit(struct devsim_device *d, const char *dflt, const char *content, size_t len)
{
	static char xml[MAX_EDIT + 512];
	int n = snprintf(xml, sizeof(xml),
			 RPC_HEAD "<edit-config><target><candidate/></target>%s%s%s<config>",
			 dflt ? "<default-operation>" : "", dflt ? dflt : "",
			 dflt ? "</default-operation>" : "");
	memcpy(xml + n, content, len);
	snprintf(xml + n + len, sizeof(xml) - (size_t)n - len, "</config></edit-config></rpc>");
	return run_rpc(d, xml);
}

static bool simple_rpc(struct devsim_device *d, const char *body)
{
	char xml[512];
	snprintf(xml, sizeof(xml), RPC_HEAD "%s</rpc>", body);
	return run_rpc(d, xml);
}

static char *datastore(struct devsim_device *d, bool candidate)
{
	char *xml = devsim_fleet_datastore_xml(d, candidate);
	if (!xml)
		abort();
	return xml;
}

/* An unsigned leaf's value under n, or -1. */
static long leaf(const struct lyd_node *n, const char *path)
{
	struct lyd_node *c = NULL;
	if (lyd_find_path(n, path, 0, &c))
		return -1;
	return strtol(lyd_get_value(c), NULL, 10);
}

/* The checker of committed content, written from the YANG models and the option values above. */
static void check_committed(const char *xml, bool switch_model, bool bidirectional)
{
	struct lyd_node *tree = NULL;
	struct ly_set *set = NULL;
	if (!*xml)
		return;
	if (lyd_parse_data_mem(context(), xml, LYD_XML, LYD_PARSE_ONLY | LYD_PARSE_STRICT, 0,
			       &tree))
		abort(); /* the device holds something its own model cannot read back */
	if (switch_model) {
		long out[PORTS];
		for (int i = 0; i < PORTS; i++)
			out[i] = -1;
		if (lyd_find_xpath(tree, "/ocs-switch:cross-connects/connection", &set))
			abort();
		for (uint32_t i = 0; i < set->count; i++) {
			long in = leaf(set->dnodes[i], "input"), o = leaf(set->dnodes[i], "output");
			if (in < 0 || in >= PORTS || o < 0 || o >= PORTS)
				abort(); /* a port the device lacks was committed */
			out[in] = o;
		}
		for (int i = 0; bidirectional && i < PORTS; i++)
			if (out[i] >= 0 && out[out[i]] != i)
				abort(); /* a one-way circuit on a bidirectional device */
	} else {
		if (lyd_find_xpath(tree, "/ocs-transceiver:transceivers/node", &set))
			abort();
		for (uint32_t i = 0; i < set->count; i++) {
			struct ly_set *bundles = NULL;
			if (leaf(set->dnodes[i], "id") != 1 ||
			    lyd_find_xpath(set->dnodes[i], "bundle", &bundles))
				abort(); /* another node's configuration was committed */
			for (uint32_t b = 0; b < bundles->count; b++) {
				long id = leaf(bundles->dnodes[b], "id");
				long dist = leaf(bundles->dnodes[b], "external/distance");
				if (id < 0 || id > 1 || dist == 0 || dist > 2)
					abort(); /* a bundle or a distance the node lacks */
			}
			ly_set_free(bundles, NULL);
		}
	}
	ly_set_free(set, NULL);
	lyd_free_all(tree);
}

/*
 * Whether the content declares an empty default namespace (xmlns="" or
 * xmlns=''). libyang 2.1.30 (Debian 12) dereferences NULL in lyd_parse_op()
 * on malformed content that does, before any ocs-devsim code runs (inside
 * libnetconf2's reading of the RPC): `<r xmlns=""><a></a><a>` in <config>
 * or <filter> kills the simulator (tests/fuzz/README.md). Such inputs are
 * skipped so that the harness keeps looking for defects of ours.
 */
static bool empty_default_namespace(const uint8_t *s, size_t n)
{
	for (size_t i = 0; i + 5 <= n; i++) {
		if (memcmp(s + i, "xmlns", 5))
			continue;
		size_t k = i + 5;
		while (k < n && (s[k] == ' ' || s[k] == '\t' || s[k] == '\r' || s[k] == '\n'))
			k++;
		if (k >= n || s[k++] != '=')
			continue;
		while (k < n && (s[k] == ' ' || s[k] == '\t' || s[k] == '\r' || s[k] == '\n'))
			k++;
		if (k + 1 < n && (s[k] == '"' || s[k] == '\'') && s[k + 1] == s[k])
			return true;
	}
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > MAX_EDIT || empty_default_namespace(data + 1, size - 1))
		return 0;
	uint8_t flags = data[0];
	int variant = flags & 3;
	bool switch_model = variant < 2;
	struct devsim_opts opts = {
		.model = switch_model ? DEVSIM_MODEL_SWITCH : DEVSIM_MODEL_TRANSCEIVER,
		.ports = PORTS,
		.switch_us = 0,
		.bidirectional = variant == 0,
		.confirmed_commit = true,
		.count = switch_model ? 1 : 3,
		.node_base = 0,
		.ring_tors = 3,
		.ring_nodes_per_tor = 1,
		.ring_k = 2,
		.bundles = 2,
		.ring_closed = variant == 3,
		.ietf_dir = "/usr/share/yuma/modules/ietf",
	};
	struct devsim_fleet *fleet = devsim_fleet_new(context(), &opts);
	if (!fleet)
		abort();
	struct devsim_device *d = devsim_fleet_device(fleet, switch_model ? 0 : 1);
	if (!(flags & 0x20)) {
		const char *base = switch_model ? base_switch : base_transceiver;
		if (!edit(d, NULL, base, strlen(base)) || !simple_rpc(d, "<commit/>"))
			abort(); /* the base configuration is valid */
	}

	char *before = datastore(d, true);
	bool edited = edit(d, default_ops[(flags >> 2) & 7], (const char *)data + 1, size - 1);
	char *after = datastore(d, true);
	if (!edited && strcmp(before, after))
		abort(); /* a refused edit changed the candidate */
	free(before);
	free(after);

	simple_rpc(d, "<validate><source><candidate/></source></validate>");
	char *running = datastore(d, false);
	bool committed = simple_rpc(d, "<commit/>");
	char *now = datastore(d, false);
	if (!committed && strcmp(running, now))
		abort(); /* a refused commit changed running */
	if (committed && *now) {
		check_committed(now, switch_model, variant == 0);
		/* merging what running holds is accepted and changes nothing (RFC 6241 7.2) */
		char *cand = datastore(d, true);
		if (!edit(d, "merge", now, strlen(now)))
			abort();
		char *again = datastore(d, true);
		if (strcmp(cand, again))
			abort();
		free(cand);
		free(again);
	}
	free(running);
	free(now);
	simple_rpc(d, "<get/>");
	simple_rpc(d, "<get-config><source><running/></source></get-config>");
	devsim_fleet_free(fleet);
	const struct ly_err_item *e = ly_err_first(context());
	if (e && e->next)
		abort(); /* libyang keeps every message: memory grows with each refusal */
	return 0;
}
