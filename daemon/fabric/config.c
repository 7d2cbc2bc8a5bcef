/*
 * config.c - loads a fabric file: libyang parses the JSON against the
 * embedded `ocsd-fabric` module, then the semantic checks of fabric.h and
 * the device address rules run, and only a fully valid file becomes a
 * struct ocsd_config.
 *
 * Finding every error, not just the first: libyang stops at the first type
 * error when it stores values, so the file is parsed with LYD_PARSE_OPAQ,
 * which keeps every member it cannot store (unknown member, wrong type, out
 * of range) as an opaque node. Each opaque node becomes one error, its
 * reason obtained by asking libyang to validate the value against the
 * schema node it should have matched. Only a tree without opaque nodes is
 * then validated (mandatory members, choice) and checked semantically.
 */
#define _GNU_SOURCE /* vasprintf */
#include "config.h"
#include "rail_layout.h"
#include "sb_model.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libyang/libyang.h>

/* Generated from daemon/yang/ocsd-fabric.yang by cmake/embed.cmake. */
extern const char ocsd_fabric_yang[];

#define FABRIC_PATH "/ocsd-fabric:fabric"

__attribute__((format(printf, 3, 4))) static void add_error(struct cfg_errors *errs,
							    const char *path, const char *fmt, ...)
{
	va_list ap;
	char *msg = NULL;
	int n;

	if (errs->count == errs->cap) {
		int ncap = errs->cap ? errs->cap * 2 : 8;
		struct cfg_error *items = realloc(errs->items, (size_t)ncap * sizeof(*items));

		if (!items)
			return;
		errs->items = items;
		errs->cap = ncap;
	}
	va_start(ap, fmt);
	n = vasprintf(&msg, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	for (char *c = msg; *c; c++)
		if ((unsigned char)*c < 0x20)
			*c = ' '; /* one error, one line */
	errs->items[errs->count].path = strdup(path ? path : "");
	errs->items[errs->count].message = msg;
	errs->count++;
}

void cfg_errors_clear(struct cfg_errors *errs)
{
	if (!errs)
		return;
	for (int i = 0; i < errs->count; i++) {
		free(errs->items[i].path);
		free(errs->items[i].message);
	}
	free(errs->items);
	memset(errs, 0, sizeof(*errs));
}

void cfg_free(struct ocsd_config *cfg)
{
	if (!cfg)
		return;
	free(cfg->access.password_file);
	free(cfg->access.private_key_file);
	free(cfg->access.certificate_file);
	free(cfg->access.ca_file);
	free(cfg->devices);
	free(cfg);
}

const char *cfg_kind_name(enum cfg_kind kind)
{
	switch (kind) {
	case CFG_LEAF_SPINE_OCS:
		return "leaf-spine-ocs";
	case CFG_OCSTRX_RING:
		return "ocstrx-ring";
	case CFG_RAIL_OCS:
		return "rail-ocs";
	}
	return "unknown";
}

/* Copies the quoted text after `label` in libyang's location string. */
static bool quoted_after(const char *where, const char *label, char *buf, size_t size)
{
	const char *start = strstr(where, label);
	const char *end;
	size_t n;

	if (!start)
		return false;
	start += strlen(label);
	end = strchr(start, '"');
	n = end ? (size_t)(end - start) : strlen(start);
	if (n >= size)
		n = size - 1;
	memcpy(buf, start, n);
	buf[n] = '\0';
	return true;
}

/*
 * Rewrites a schema path ("/m:a/choice/case/b") as the data path users see
 * ("/m:a/b"): segments that are not data nodes (choices, cases) are dropped.
 */
static void schema_to_data_path(const struct ly_ctx *ctx, char *path, size_t size)
{
	const struct lys_module *mod = ly_ctx_get_module_implemented(ctx, "ocsd-fabric");
	const struct lysc_node *cur = NULL;
	char out[512] = "", *save = NULL, *seg;
	char *copy = strdup(path);

	if (!copy || !mod) {
		free(copy);
		return;
	}
	for (seg = strtok_r(copy, "/", &save); seg; seg = strtok_r(NULL, "/", &save)) {
		const char *name = strchr(seg, ':') ? strchr(seg, ':') + 1 : seg;
		const struct lysc_node *next = lys_find_child(cur, mod, name, 0, 0, 0);

		if (!next)
			continue;
		cur = next;
		snprintf(out + strlen(out), sizeof(out) - strlen(out), "/%s", seg);
	}
	free(copy);
	snprintf(path, size, "%s", out);
}

/*
 * One libyang error as (path, message). libyang puts the location in a
 * sentence ("Data location \"/a/b\", line number 7." or "Schema location
 * ..."): the most precise data path becomes the error path and the line
 * number goes into the message. A schema location names the node that is
 * missing, so it wins over the data location of its parent.
 */
static void add_ly_error(const struct ly_ctx *ctx, struct cfg_errors *errs, const char *dflt)
{
	const struct ly_err_item *e = ly_err_last(ctx);
	const char *msg = e && e->msg ? e->msg : "invalid data";
	const char *where = e && e->path ? e->path : "";
	const char *line = strstr(where, "line number ");
	char path[512], msg_only[512];
	const char *paren;
	bool schema = false;

	/* Some messages repeat the location in parentheses at their end. */
	snprintf(msg_only, sizeof(msg_only), "%s", msg);
	paren = strstr(msg_only, " (Schema location \"");
	if (paren) {
		quoted_after(paren, "(Schema location \"", path, sizeof(path));
		msg_only[paren - msg_only] = '\0';
		schema = true;
	} else if (quoted_after(where, "Schema location \"", path, sizeof(path))) {
		schema = true;
	} else if (!quoted_after(where, "Data location \"", path, sizeof(path))) {
		snprintf(path, sizeof(path), "%s", dflt);
	}
	if (schema)
		schema_to_data_path(ctx, path, sizeof(path));
	if (line)
		add_error(errs, path, "line %ld: %s", strtol(line + 12, NULL, 10), msg_only);
	else
		add_error(errs, path, "%s", msg_only);
}

/* Why libyang kept `node` opaque: the reason for one error. */
static void explain_opaque(struct ly_ctx *ctx, struct lyd_node *node, struct cfg_errors *errs)
{
	struct lyd_node_opaq *o = (struct lyd_node_opaq *)node;
	const struct lysc_node *parent = node->parent ? node->parent->schema : NULL;
	const struct lysc_node *snode = NULL;
	char *path = lyd_path(node, LYD_PATH_STD, NULL, 0);
	const char *value = o->value ? o->value : "";

	if (!node->parent) {
		if (strcmp(o->name.name, "fabric") == 0 &&
		    (!o->name.module_name || strcmp(o->name.module_name, "ocsd-fabric") != 0))
			add_error(errs, path, "top-level member must be \"ocsd-fabric:fabric\"");
		else
			add_error(errs, path,
				  "unknown member; the file holds only \"ocsd-fabric:fabric\"");
		free(path);
		return;
	}
	if (parent)
		snode = lys_find_child(parent, parent->module, o->name.name, 0, 0, 0);
	if (!snode) {
		add_error(errs, path, "unknown member \"%s\"", o->name.name);
	} else if (snode->nodetype & (LYS_CONTAINER | LYS_LIST)) {
		add_error(errs, path, "must be %s",
			  snode->nodetype == LYS_LIST ? "an array of objects" : "an object");
	} else if (o->child || (o->hints & LYD_NODEHINT_LIST) ||
		   (o->hints & LYD_NODEHINT_LEAFLIST)) {
		add_error(errs, path, "must be a single value, not an object or array");
	} else {
		ly_err_clean(ctx, NULL);
		if (lyd_value_validate(ctx, snode, value, strlen(value), NULL, NULL, NULL) !=
		    LY_SUCCESS) {
			const struct ly_err_item *e = ly_err_last(ctx);

			add_error(errs, path, "%s", e && e->msg ? e->msg : "invalid value");
		} else {
			/* The text is fine but the JSON type is not (e.g. "8" for a number). */
			add_error(errs, path, "\"%s\" has the wrong JSON type (%s expected)", value,
				  (o->hints & LYD_VALHINT_STRING) ? "a number or boolean"
								  : "a string");
		}
	}
	free(path);
}

static bool collect_opaque(struct ly_ctx *ctx, struct lyd_node *tree, struct cfg_errors *errs)
{
	bool found = false;

	for (struct lyd_node *top = tree; top; top = top->next) {
		struct lyd_node *n;

		LYD_TREE_DFS_BEGIN(top, n)
		{
			if (!n->schema) {
				explain_opaque(ctx, n, errs);
				found = true;
				LYD_TREE_DFS_continue = 1; /* its children add nothing */
			}
			LYD_TREE_DFS_END(top, n);
		}
	}
	return found;
}

/* ---- reading the validated tree ---- */

static const char *leaf_value(const struct lyd_node *parent, const char *path)
{
	struct lyd_node *node = NULL;

	if (!parent || lyd_find_path(parent, path, 0, &node) != LY_SUCCESS || !node)
		return NULL;
	return lyd_get_value(node);
}

static int leaf_int(const struct lyd_node *parent, const char *path, int dflt)
{
	const char *v = leaf_value(parent, path);

	return v ? (int)strtol(v, NULL, 10) : dflt;
}

static char *leaf_dup(const struct lyd_node *parent, const char *path)
{
	const char *v = leaf_value(parent, path);

	return v ? strdup(v) : NULL;
}

static void copy_str(char *dst, size_t size, const char *src)
{
	snprintf(dst, size, "%s", src ? src : "");
}

static void read_access(const struct lyd_node *devices, struct cfg_access *a)
{
	const char *transport = leaf_value(devices, "transport");

	a->transport =
		transport && strcmp(transport, "tls") == 0 ? CFG_TRANSPORT_TLS : CFG_TRANSPORT_SSH;
	copy_str(a->username, sizeof(a->username), leaf_value(devices, "username"));
	if (!a->username[0])
		copy_str(a->username, sizeof(a->username), "ocsd");
	a->password_file = leaf_dup(devices, "password-file");
	a->private_key_file = leaf_dup(devices, "private-key-file");
	a->certificate_file = leaf_dup(devices, "certificate-file");
	a->ca_file = leaf_dup(devices, "ca-file");
	a->accept_any_host_key = leaf_value(devices, "accept-any-host-key") &&
				 strcmp(leaf_value(devices, "accept-any-host-key"), "true") == 0;
	a->rpc_timeout_ms = (uint32_t)leaf_int(devices, "rpc-timeout-ms", 5000);
	a->confirm_timeout_s = (uint32_t)leaf_int(devices, "confirm-timeout-s", 60);
	a->rollback_timeout_ms = (uint32_t)leaf_int(devices, "rollback-timeout-ms", 10000);
	a->switch_time_us = (uint32_t)leaf_int(devices, "switch-time-us", 0);
}

static void default_device_name(const struct ocsd_config *cfg, int id, char *buf, size_t size)
{
	switch (cfg->kind) {
	case CFG_LEAF_SPINE_OCS:
		snprintf(buf, size, "ocs-g%d-d%d", ocs_fabric_device_group(&cfg->fabric, id),
			 ocs_fabric_device_in_group(&cfg->fabric, id));
		break;
	case CFG_OCSTRX_RING:
		snprintf(buf, size, "trx-n%d", id);
		break;
	case CFG_RAIL_OCS:
		snprintf(buf, size, "rail-ocs-g%d", id);
		break;
	}
}

static int device_cmp(const void *a, const void *b)
{
	const struct cfg_device *x = *(const struct cfg_device *const *)a;
	const struct cfg_device *y = *(const struct cfg_device *const *)b;
	int c = strcmp(x->address, y->address);

	if (c)
		return c;
	if (x->port != y->port)
		return x->port < y->port ? -1 : 1;
	return x->id - y->id;
}

static int name_cmp(const void *a, const void *b)
{
	const struct cfg_device *x = *(const struct cfg_device *const *)a;
	const struct cfg_device *y = *(const struct cfg_device *const *)b;
	int c = strcmp(x->name, y->name);

	return c ? c : x->id - y->id;
}

/*
 * Resolves every device's name and address from the defaults and the
 * per-device overrides, and checks that ids exist, ports fit and no two
 * devices share an address or a name.
 */
static int resolve_devices(struct ocsd_config *cfg, const struct lyd_node *devices,
			   const char *devices_path, struct cfg_errors *errs)
{
	const char *address = leaf_value(devices, "address");
	int port_base = leaf_int(devices, "port-base", 830);
	int before = errs->count;
	struct lyd_node *node;
	struct cfg_device **sorted;
	char path[512];

	cfg->devices = calloc((size_t)cfg->n_devices, sizeof(*cfg->devices));
	sorted = calloc((size_t)cfg->n_devices, sizeof(*sorted));
	if (!cfg->devices || !sorted) {
		free(sorted);
		return -ENOMEM;
	}
	for (int i = 0; i < cfg->n_devices; i++) {
		struct cfg_device *d = &cfg->devices[i];

		d->id = i;
		default_device_name(cfg, i, d->name, sizeof(d->name));
		copy_str(d->address, sizeof(d->address), address ? address : "127.0.0.1");
		d->port = (uint16_t)(port_base + i <= 65535 ? port_base + i : 0);
	}

	for (node = lyd_child(devices); node; node = node->next) {
		long id;
		const char *v;

		if (!node->schema || strcmp(node->schema->name, "device") != 0)
			continue;
		id = strtol(leaf_value(node, "id"), NULL, 10);
		snprintf(path, sizeof(path), "%s/device[id='%ld']/id", devices_path, id);
		if (id >= cfg->n_devices) {
			add_error(errs, path,
				  "device %ld does not exist: the fabric has devices 0..%d", id,
				  cfg->n_devices - 1);
			continue;
		}
		if ((v = leaf_value(node, "name")))
			copy_str(cfg->devices[id].name, sizeof(cfg->devices[id].name), v);
		if ((v = leaf_value(node, "address")))
			copy_str(cfg->devices[id].address, sizeof(cfg->devices[id].address), v);
		if ((v = leaf_value(node, "port")))
			cfg->devices[id].port = (uint16_t)strtol(v, NULL, 10);
		if ((v = leaf_value(node, "host-key-sha256")))
			copy_str(cfg->devices[id].host_key_sha256,
				 sizeof(cfg->devices[id].host_key_sha256), v);
	}
	/* SSH host keys are verified unless the file says otherwise. */
	if (cfg->access.transport == CFG_TRANSPORT_SSH && !cfg->access.accept_any_host_key) {
		for (int i = 0; i < cfg->n_devices; i++) {
			if (cfg->devices[i].host_key_sha256[0])
				continue;
			snprintf(path, sizeof(path), "%s/device[id='%d']/host-key-sha256",
				 devices_path, i);
			add_error(
				errs, path,
				"device %d (%s) has no SSH host key fingerprint; give one, or set "
				"accept-any-host-key for a trusted lab",
				i, cfg->devices[i].name);
			if (errs->count - before >= 8) {
				add_error(errs, devices_path,
					  "(further devices without a host key "
					  "not listed)");
				break;
			}
		}
	}

	for (int i = 0; i < cfg->n_devices; i++) {
		if (cfg->devices[i].port == 0) {
			snprintf(path, sizeof(path), "%s/port-base", devices_path);
			add_error(errs, path,
				  "device %d (%s) would listen on port %d, above 65535: lower "
				  "port-base "
				  "or give the device a port",
				  i, cfg->devices[i].name, port_base + i);
			break;
		}
	}
	for (int i = 0; i < cfg->n_devices; i++) {
		if (strlen(cfg->devices[i].address) > CFG_MAX_ADDRESS_LEN) {
			snprintf(path, sizeof(path), "%s/device[id='%d']/address", devices_path, i);
			add_error(errs, path, "address of device %d is longer than %d characters",
				  i, CFG_MAX_ADDRESS_LEN);
			break;
		}
	}
	if (errs->count == before) {
		for (int i = 0; i < cfg->n_devices; i++)
			sorted[i] = &cfg->devices[i];
		qsort(sorted, (size_t)cfg->n_devices, sizeof(*sorted), device_cmp);
		for (int i = 1; i < cfg->n_devices; i++) {
			if (strcmp(sorted[i]->address, sorted[i - 1]->address) == 0 &&
			    sorted[i]->port == sorted[i - 1]->port) {
				snprintf(path, sizeof(path), "%s/device[id='%d']", devices_path,
					 sorted[i]->id);
				add_error(errs, path,
					  "address %s:%u is already used by device %d (%s)",
					  sorted[i]->address, sorted[i]->port, sorted[i - 1]->id,
					  sorted[i - 1]->name);
			}
		}
		qsort(sorted, (size_t)cfg->n_devices, sizeof(*sorted), name_cmp);
		for (int i = 1; i < cfg->n_devices; i++) {
			if (strcmp(sorted[i]->name, sorted[i - 1]->name) == 0) {
				snprintf(path, sizeof(path), "%s/device[id='%d']/name",
					 devices_path, sorted[i]->id);
				add_error(errs, path, "name \"%s\" is already used by device %d",
					  sorted[i]->name, sorted[i - 1]->id);
			}
		}
	}
	free(sorted);
	return errs->count == before ? 0 : -EINVAL;
}

/* ---- device models and port maps ---- */

/* The largest port id a polatis device has (optical-switch's portFormat). */
#define CFG_MAX_PORT_ID 65535u

/* A level of the fabric file that may give a model and a port map. */
struct model_level {
	const struct lyd_node *node; /* NULL: not in the file */
	char path[192];		     /* its data path */
	enum sb_model model;	     /* the model in force here (given or inherited) */
	char model_path[224];	     /* where that model was given (or would be) */
};

static bool has_error(const struct cfg_errors *errs, const char *path)
{
	for (int i = 0; i < errs->count; i++)
		if (strcmp(errs->items[i].path, path) == 0)
			return true;
	return false;
}

/* A model that numbers its ports its own way, and so takes a port-map (polatis). */
static bool takes_port_map(enum sb_model m)
{
	struct sb_port_map pm = sb_model_default_ports(m, 1);

	return pm.in_first || pm.out_first;
}

/*
 * The model in force at `lv`: its own, when given and allowed in a fabric
 * of this kind (an error at its path otherwise), or up's.
 */
static void level_model(const struct ocsd_config *cfg, struct model_level *lv,
			const struct model_level *up, enum sb_model own, struct cfg_errors *errs)
{
	const char *v = leaf_value(lv->node, "model");
	enum sb_model m;

	lv->model = up ? up->model : own;
	if (up)
		copy_str(lv->model_path, sizeof(lv->model_path), up->model_path);
	else
		snprintf(lv->model_path, sizeof(lv->model_path), "%s/model", lv->path);
	if (!v || sb_model_from_name(v, &m) != 0)
		return;
	snprintf(lv->model_path, sizeof(lv->model_path), "%s/model", lv->path);
	if (cfg->kind == CFG_OCSTRX_RING && !sb_model(m)->bundles)
		add_error(errs, lv->model_path,
			  "an OCSTrx ring domain's devices are its nodes' transceiver agents: "
			  "model ocs-transceiver, not %s",
			  v);
	else if (cfg->kind != CFG_OCSTRX_RING && sb_model(m)->bundles)
		add_error(errs, lv->model_path,
			  "ocs-transceiver is the model of a ring domain's node agents: an OCS "
			  "device is ocs-switch or polatis");
	else
		lv->model = m;
}

/* One direction's ids first..first+n-1 must stay within 1..limit. */
static void check_range(const char *path, const char *what, uint32_t first, uint32_t n,
			uint32_t limit, const char *limit_name, struct cfg_errors *errs)
{
	uint64_t last = (uint64_t)first + n - 1;

	if (last <= limit)
		return;
	add_error(errs, path,
		  "%s ids %u..%llu of ocsd's %u ports run past %s (%u): ocsd's ports %llu..%u "
		  "would have no %s port",
		  what, first, (unsigned long long)last, n, limit_name, limit,
		  (unsigned long long)(limit >= first ? limit - first + 1 : 0), n - 1, what);
}

/*
 * The port map a polatis level gives (pm_path: its port-map; given: whether
 * it has one, else the defaults), checked for ocsd's n ports: every port
 * has an ingress and an egress id within the switch, and no id is both.
 */
static struct sb_port_map level_ports(const struct lyd_node *node, bool given, const char *pm_path,
				      uint32_t n, struct cfg_errors *errs)
{
	uint32_t sw = (uint32_t)leaf_int(given ? node : NULL, "port-map/switch-ports", 0);
	uint32_t limit = sw ? sw : CFG_MAX_PORT_ID;
	const char *limit_name = sw ? "switch-ports" : "the largest port id";
	struct sb_port_map pm = {
		.in_first = (uint32_t)leaf_int(given ? node : NULL, "port-map/ingress-first", 1),
		.out_first = (uint32_t)leaf_int(given ? node : NULL, "port-map/egress-first",
						(int)(sw ? sw / 2 + 1 : n + 1)),
		.n = n,
	};
	uint64_t in_last = (uint64_t)pm.in_first + n - 1, out_last = (uint64_t)pm.out_first + n - 1;
	char path[256];

	if (!given) {
		/* the default (1, n + 1): only a fabric of more than 32767 ports overflows it */
		if (out_last > CFG_MAX_PORT_ID)
			add_error(errs, pm_path,
				  "polatis by default numbers ocsd's %u ports ingress 1..%u and "
				  "egress %u..%llu, past %u: give a port-map",
				  n, n, n + 1, (unsigned long long)out_last, CFG_MAX_PORT_ID);
		return pm;
	}
	snprintf(path, sizeof(path), "%s/ingress-first", pm_path);
	check_range(path, "ingress", pm.in_first, n, limit, limit_name, errs);
	snprintf(path, sizeof(path), "%s/egress-first", pm_path);
	check_range(path, "egress", pm.out_first, n, limit, limit_name, errs);
	if (pm.in_first <= out_last && pm.out_first <= in_last) {
		uint32_t lo = pm.in_first > pm.out_first ? pm.in_first : pm.out_first;
		uint64_t hi = in_last < out_last ? in_last : out_last;

		add_error(errs, path,
			  "egress ids %u..%llu overlap ingress ids %u..%llu: ids %u..%llu would "
			  "each be the ingress of one of ocsd's ports and the egress of another",
			  pm.out_first, (unsigned long long)out_last, pm.in_first,
			  (unsigned long long)in_last, lo, (unsigned long long)hi);
	}
	return pm;
}

static bool has_port_map(const struct lyd_node *node)
{
	return leaf_value(node, "port-map/ingress-first") ||
	       leaf_value(node, "port-map/egress-first") ||
	       leaf_value(node, "port-map/switch-ports");
}

/*
 * A level's port map when it gives one: refused unless its model is
 * polatis; *pm filled and true when it is usable.
 */
static bool given_ports(const struct model_level *lv, uint32_t n, struct sb_port_map *pm,
			struct cfg_errors *errs)
{
	char path[256];

	if (!has_port_map(lv->node))
		return false;
	snprintf(path, sizeof(path), "%s/port-map", lv->path);
	if (!takes_port_map(lv->model)) {
		add_error(errs, path,
			  "a port-map is for model polatis; the model here is %s, which numbers "
			  "its ports as ocsd does",
			  sb_model(lv->model)->name);
		return false;
	}
	*pm = level_ports(lv->node, true, path, n, errs);
	return true;
}

/*
 * Every device's model and port map: a device entry over its OCS group,
 * a group over the devices container (ocsd-fabric.yang, grouping
 * model-and-ports). Refuses a model the fabric's kind cannot take, a group
 * that does not exist (or in a fabric without OCS groups), a port-map on
 * a model other than polatis, and a port map that leaves one of ocsd's
 * ports without an id or gives one id twice.
 */
static int resolve_models(struct ocsd_config *cfg, const struct lyd_node *devices,
			  const char *devices_path, struct cfg_errors *errs)
{
	enum sb_model own = cfg->kind == CFG_OCSTRX_RING ? SB_MODEL_TRANSCEIVER : SB_MODEL_SWITCH;
	uint32_t n = cfg->kind == CFG_OCSTRX_RING ? 0 : (uint32_t)cfg->fabric.k_ocs;
	int n_groups = cfg->kind == CFG_LEAF_SPINE_OCS ? ocs_fabric_groups(&cfg->fabric) : 0;
	struct model_level top = {.node = devices}, *groups, lv;
	struct sb_port_map top_pm = {0}, *group_pm;
	bool top_has, *group_has;
	const struct lyd_node **dev_node;
	int before = errs->count;
	struct lyd_node *node;

	groups = calloc((size_t)n_groups + 1, sizeof(*groups));
	group_pm = calloc((size_t)n_groups + 1, sizeof(*group_pm));
	group_has = calloc((size_t)n_groups + 1, sizeof(*group_has));
	dev_node = calloc((size_t)cfg->n_devices, sizeof(*dev_node));
	if (!groups || !group_pm || !group_has || !dev_node) {
		free(groups);
		free(group_pm);
		free(group_has);
		free(dev_node);
		return -ENOMEM;
	}
	copy_str(top.path, sizeof(top.path), devices_path);
	level_model(cfg, &top, NULL, own, errs);
	top_has = given_ports(&top, n, &top_pm, errs);

	for (node = lyd_child(devices); node; node = node->next) {
		long id;

		if (!node->schema || !leaf_value(node, "id"))
			continue;
		id = strtol(leaf_value(node, "id"), NULL, 10);
		if (strcmp(node->schema->name, "device") == 0) {
			if (id < cfg->n_devices) /* resolve_devices reports the others */
				dev_node[id] = node;
			continue;
		}
		if (strcmp(node->schema->name, "group") != 0)
			continue;
		snprintf(lv.path, sizeof(lv.path), "%s/group[id='%ld']/id", devices_path, id);
		if (cfg->kind != CFG_LEAF_SPINE_OCS) {
			add_error(errs, lv.path,
				  "groups are the OCS groups of a leaf-spine-OCS fabric: give a %s "
				  "device's model in its device entry",
				  cfg_kind_name(cfg->kind));
			continue;
		}
		if (id >= n_groups) {
			add_error(errs, lv.path,
				  "group %ld does not exist: the fabric has OCS groups 0..%d", id,
				  n_groups - 1);
			continue;
		}
		groups[id].node = node;
		snprintf(groups[id].path, sizeof(groups[id].path), "%s/group[id='%ld']",
			 devices_path, id);
		level_model(cfg, &groups[id], &top, own, errs);
		group_has[id] = given_ports(&groups[id], n, &group_pm[id], errs);
	}

	for (int i = 0; i < cfg->n_devices; i++) {
		struct cfg_device *d = &cfg->devices[i];
		int g = n_groups ? ocs_fabric_device_group(&cfg->fabric, i) : -1;
		const struct model_level *up = g >= 0 && groups[g].node ? &groups[g] : &top;
		bool has = false;

		lv = (struct model_level){.node = dev_node[i]};
		snprintf(lv.path, sizeof(lv.path), "%s/device[id='%d']", devices_path, i);
		level_model(cfg, &lv, up, own, errs);
		d->model = lv.model;
		if (!takes_port_map(d->model)) {
			(void)given_ports(&lv, n, &d->ports, errs); /* refused if given */
			memset(&d->ports, 0, sizeof(d->ports));
			continue;
		}
		if (given_ports(&lv, n, &d->ports, errs))
			has = true;
		else if (up != &top && group_has[g])
			d->ports = group_pm[g], has = true;
		else if (top_has)
			d->ports = top_pm, has = true;
		if (!has && !has_error(errs, lv.model_path))
			d->ports = level_ports(NULL, false, lv.model_path, n, errs);
		else if (!has)
			d->ports = sb_model_default_ports(d->model, n);
	}
	free(groups);
	free(group_pm);
	free(group_has);
	free(dev_node);
	return errs->count == before ? 0 : -EINVAL;
}

static void add_problems(struct cfg_errors *errs, const char *base,
			 const struct ocs_fabric_problem *p, int n, int total)
{
	char path[256];

	for (int i = 0; i < n && i < total; i++) {
		snprintf(path, sizeof(path), "%s/%s", base, p[i].field);
		add_error(errs, path, "%s", p[i].reason);
	}
}

/* Reads the validated tree into cfg and runs the semantic checks. */
static int build_config(const struct lyd_node *fabric, struct ocsd_config *cfg,
			struct cfg_errors *errs)
{
	struct ocs_fabric_problem problems[16];
	const struct lyd_node *scope = fabric, *devices = NULL;
	char base[128];
	int n = 0, rc, models_rc;
	struct lyd_node *node = NULL;

	copy_str(cfg->name, sizeof(cfg->name), leaf_value(fabric, "name"));
	if (lyd_find_path(fabric, "ocstrx-ring", 0, &node) == LY_SUCCESS && node) {
		struct ocs_ring_domain *r = &cfg->ring;

		cfg->kind = CFG_OCSTRX_RING;
		scope = node;
		r->tors = leaf_int(node, "tors", 0);
		r->nodes_per_tor = leaf_int(node, "nodes-per-tor", 0);
		r->gpus_per_node = leaf_int(node, "gpus-per-node", 0);
		r->k_hops = leaf_int(node, "k-hops", 0);
		r->bundles = leaf_int(node, "bundles", 0);
		r->tors_per_agg = leaf_int(node, "tors-per-agg", 1);
		r->closed = leaf_value(node, "closed") &&
			    strcmp(leaf_value(node, "closed"), "true") == 0;
		n = ocs_ring_validate(r, problems, 16);
		snprintf(base, sizeof(base), FABRIC_PATH "/ocstrx-ring");
		if (n == 0)
			cfg->n_devices = ocs_ring_nodes(r);
	} else if (lyd_find_path(fabric, "rail-ocs", 0, &node) == LY_SUCCESS && node) {
		struct ocs_rail_fabric *r = &cfg->rail;

		cfg->kind = CFG_RAIL_OCS;
		scope = node;
		r->servers = leaf_int(node, "servers", 0);
		r->rails = leaf_int(node, "rails", 0);
		r->servers_per_ocs = leaf_int(node, "servers-per-ocs", 0);
		r->spare_servers_per_ocs = leaf_int(node, "spare-servers-per-ocs", 0);
		n = ocs_rail_validate(r, problems, 16);
		snprintf(base, sizeof(base), FABRIC_PATH "/rail-ocs");
		if (n == 0) {
			cfg->n_devices = ocs_rail_groups(r);
			/* how the circuit table, transactions and recovery number its devices */
			rail_layout_devices(r, &cfg->fabric);
		}
	} else {
		struct ocs_fabric *f = &cfg->fabric;
		const char *wiring = leaf_value(fabric, "wiring");

		cfg->kind = CFG_LEAF_SPINE_OCS;
		f->pods = leaf_int(fabric, "pods", 0);
		f->k_leaf = leaf_int(fabric, "k-leaf", 0);
		f->k_spine = leaf_int(fabric, "k-spine", 0);
		f->tau = leaf_int(fabric, "tau", 2);
		f->k_ocs = leaf_int(fabric, "k-ocs", 0);
		if (ocs_wiring_parse(wiring, &f->wiring) != 0)
			f->wiring = (enum ocs_wiring) - 1;
		n = ocs_fabric_validate(f, problems, 16);
		snprintf(base, sizeof(base), FABRIC_PATH);
		if (n == 0)
			cfg->n_devices = ocs_fabric_devices(f);
	}
	add_problems(errs, base, problems, 16, n);
	if (n)
		return -EINVAL;

	node = NULL;
	if (lyd_find_path(scope, "devices", 0, &node) == LY_SUCCESS)
		devices = node;
	read_access(devices, &cfg->access);
	snprintf(base + strlen(base), sizeof(base) - strlen(base), "/devices");
	rc = resolve_devices(cfg, devices, base, errs);
	if (rc == -ENOMEM)
		return rc;
	models_rc = resolve_models(cfg, devices, base, errs);
	return rc ? rc : models_rc;
}

static int load_tree(const char *text, size_t len, struct ocsd_config **out,
		     struct cfg_errors *errs)
{
	struct ly_ctx *ctx = NULL;
	struct lyd_node *tree = NULL, *fabric = NULL;
	struct ocsd_config *cfg = NULL;
	char *copy;
	int rc = -EINVAL;

	if (ly_ctx_new(NULL, LY_CTX_NO_YANGLIBRARY, &ctx) != LY_SUCCESS)
		return -ENOMEM;
	if (lys_parse_mem(ctx, ocsd_fabric_yang, LYS_IN_YANG, NULL) != LY_SUCCESS) {
		add_ly_error(ctx, errs, "ocsd-fabric.yang");
		rc = -ENOMEM;
		goto out;
	}
	/* libyang wants NUL-terminated input. */
	copy = malloc(len + 1);
	if (!copy) {
		rc = -ENOMEM;
		goto out;
	}
	memcpy(copy, text, len);
	copy[len] = '\0';
	if (len == 0 || strspn(copy, " \t\r\n") == len) {
		add_error(errs, "/",
			  "the file is empty: it must hold a JSON object with "
			  "\"ocsd-fabric:fabric\"");
		free(copy);
		goto out;
	}
	if (strlen(copy) != len) {
		add_error(errs, "/", "the file contains a NUL byte at offset %zu", strlen(copy));
		free(copy);
		goto out;
	}
	if (lyd_parse_data_mem(ctx, copy, LYD_JSON, LYD_PARSE_ONLY | LYD_PARSE_OPAQ, 0, &tree) !=
	    LY_SUCCESS) {
		add_ly_error(ctx, errs, "/");
		free(copy);
		goto out;
	}
	free(copy);
	if (collect_opaque(ctx, tree, errs))
		goto out;
	if (lyd_validate_all(&tree, ctx, 0, NULL) != LY_SUCCESS) {
		add_ly_error(ctx, errs, FABRIC_PATH);
		goto out;
	}
	if (lyd_find_path(tree, FABRIC_PATH, 0, &fabric) != LY_SUCCESS || !fabric) {
		add_error(errs, FABRIC_PATH, "missing: the file must hold \"ocsd-fabric:fabric\"");
		goto out;
	}
	cfg = calloc(1, sizeof(*cfg));
	if (!cfg) {
		rc = -ENOMEM;
		goto out;
	}
	rc = build_config(fabric, cfg, errs);
	if (rc == 0) {
		*out = cfg;
		cfg = NULL;
	}
out:
	cfg_free(cfg);
	lyd_free_all(tree);
	ly_ctx_destroy(ctx);
	return rc;
}

int cfg_load_mem(const char *text, size_t len, struct ocsd_config **out, struct cfg_errors *errs)
{
	uint32_t saved = ly_log_options(LY_LOSTORE);
	int rc;

	*out = NULL;
	if (len > CFG_MAX_FILE_BYTES) {
		add_error(errs, "/", "the file has %zu bytes, more than the limit of %u", len,
			  CFG_MAX_FILE_BYTES);
		ly_log_options(saved);
		return -EFBIG;
	}
	rc = load_tree(text, len, out, errs);
	if (rc != 0 && errs->count == 0)
		add_error(errs, "/", "%s", strerror(-rc));
	ly_log_options(saved);
	return rc;
}

int cfg_load_file(const char *path, struct ocsd_config **out, struct cfg_errors *errs)
{
	struct stat st;
	char *buf;
	size_t got = 0;
	int fd, rc;

	*out = NULL;
	/* O_NONBLOCK: opening a FIFO for reading would wait for a writer, and
	 * SIGHUP reads this file on the event loop. Only a regular file passes
	 * the check below, where O_NONBLOCK changes nothing. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0 || fstat(fd, &st) != 0) {
		rc = -errno;
		add_error(errs, "/", "cannot read %s: %s", path, strerror(errno));
		if (fd >= 0)
			(void)close(fd); /* read-only: nothing to flush */
		return rc;
	}
	if (!S_ISREG(st.st_mode)) {
		add_error(errs, "/", "%s is not a regular file", path);
		(void)close(fd); /* read-only: nothing to flush */
		return -EINVAL;
	}
	if ((uint64_t)st.st_size > CFG_MAX_FILE_BYTES) {
		add_error(errs, "/", "%s has %lld bytes, more than the limit of %u", path,
			  (long long)st.st_size, CFG_MAX_FILE_BYTES);
		(void)close(fd); /* read-only: nothing to flush */
		return -EFBIG;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		(void)close(fd); /* read-only: nothing to flush */
		return -ENOMEM;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : -EIO;
			add_error(errs, "/", "cannot read %s: %s", path, strerror(-rc));
			free(buf);
			(void)close(fd); /* read-only: nothing to flush */
			return rc;
		}
		got += (size_t)n;
	}
	close(fd);
	rc = cfg_load_mem(buf, got, out, errs);
	free(buf);
	return rc;
}

/*
 * "models: ocs-switch 8, polatis 8", and where a polatis device's ports sit:
 * one line when every polatis device has the same map, else the first map
 * and how many differ.
 */
static void print_models(const struct ocsd_config *cfg, FILE *out)
{
	int count[SB_MODEL_COUNT] = {0}, other_maps = 0;
	const struct cfg_device *pol = NULL;
	const char *sep = "";

	for (int i = 0; i < cfg->n_devices; i++) {
		const struct cfg_device *d = &cfg->devices[i];

		count[d->model]++;
		if (!takes_port_map(d->model))
			continue;
		if (!pol)
			pol = d;
		else if (memcmp(&d->ports, &pol->ports, sizeof(d->ports)) != 0)
			other_maps++;
	}
	fprintf(out, "  models          ");
	for (int m = 0; m < SB_MODEL_COUNT; m++) {
		if (!count[m])
			continue;
		fprintf(out, "%s%s %d", sep, sb_model((enum sb_model)m)->name, count[m]);
		sep = ", ";
	}
	fputc('\n', out);
	if (!pol)
		return;
	fprintf(out, "  polatis ports   ingress %u..%u, egress %u..%u", pol->ports.in_first,
		pol->ports.in_first + pol->ports.n - 1, pol->ports.out_first,
		pol->ports.out_first + pol->ports.n - 1);
	if (other_maps)
		fprintf(out, " (%s; %d other device%s otherwise)\n", pol->name, other_maps,
			other_maps == 1 ? " maps" : "s map");
	else
		fputc('\n', out);
}

static void print_devices(const struct ocsd_config *cfg, FILE *out)
{
	const struct cfg_device *first = &cfg->devices[0];
	const struct cfg_device *last = &cfg->devices[cfg->n_devices - 1];
	bool consecutive = true;

	for (int i = 1; i < cfg->n_devices; i++)
		if (strcmp(cfg->devices[i].address, first->address) != 0 ||
		    cfg->devices[i].port != first->port + i)
			consecutive = false;
	fprintf(out,
		"  management      NETCONF over %s as %s, RPC deadline %u ms, confirm %u s, "
		"switching %u us\n",
		cfg->access.transport == CFG_TRANSPORT_TLS ? "TLS" : "SSH", cfg->access.username,
		cfg->access.rpc_timeout_ms, cfg->access.confirm_timeout_s,
		cfg->access.switch_time_us);
	if (cfg->access.transport == CFG_TRANSPORT_SSH)
		fprintf(out, "  host keys       %s\n",
			cfg->access.accept_any_host_key ? "any accepted (lab only)"
							: "pinned per device");
	if (consecutive)
		fprintf(out, "  addresses       %s:%u..%u\n", first->address, first->port,
			last->port);
	else
		fprintf(out, "  addresses       %s (%s:%u) .. %s (%s:%u), per-device\n",
			first->name, first->address, first->port, last->name, last->address,
			last->port);
	print_models(cfg, out);
}

void cfg_print_summary(const struct ocsd_config *cfg, FILE *out)
{
	fprintf(out, "fabric \"%s\": %s\n", cfg->name, cfg_kind_name(cfg->kind));
	switch (cfg->kind) {
	case CFG_LEAF_SPINE_OCS: {
		const struct ocs_fabric *f = &cfg->fabric;

		fprintf(out, "  GPUs            %lld\n", (long long)ocs_fabric_gpus(f));
		fprintf(out, "  pods            %d\n", f->pods);
		fprintf(out,
			"  leaves          %d (%d per pod, %d GPU ports and %d uplinks each)\n",
			ocs_fabric_leaves(f), ocs_fabric_leaves_per_pod(f), f->k_leaf, f->k_leaf);
		fprintf(out, "  spines          %d (%d per pod, %d OCS ports each)\n",
			ocs_fabric_spines(f), ocs_fabric_spines_per_pod(f), f->k_spine);
		fprintf(out, "  tau             %d link%s per leaf-spine pair\n", f->tau,
			f->tau == 1 ? "" : "s");
		fprintf(out, "  wiring          %s\n", ocs_wiring_name(f->wiring));
		fprintf(out, "  OCS groups      %d\n", ocs_fabric_groups(f));
		fprintf(out, "  OCS devices     %d (%d per group, %d ports each)\n",
			ocs_fabric_devices(f), ocs_fabric_devices_per_group(f), f->k_ocs);
		fprintf(out, "  OCS ports       %lld in total, %lld cabled to spines\n",
			(long long)ocs_fabric_ocs_ports_total(f),
			(long long)ocs_fabric_spine_ocs_ports_total(f));
		break;
	}
	case CFG_OCSTRX_RING: {
		const struct ocs_ring_domain *r = &cfg->ring;

		fprintf(out, "  GPUs            %lld\n", (long long)ocs_ring_gpus(r));
		fprintf(out, "  nodes           %d (%d ToRs x %d nodes, %d GPUs each)\n",
			ocs_ring_nodes(r), r->tors, r->nodes_per_tor, r->gpus_per_node);
		fprintf(out, "  K-hop reach     %d, %d OCSTrx bundles per node, %s\n", r->k_hops,
			r->bundles, r->closed ? "closed ring" : "open line");
		fprintf(out, "  agg domains     %d (%d ToRs each)\n", ocs_ring_agg_domains(r),
			r->tors_per_agg);
		fprintf(out, "  devices         %d (one transceiver agent per node)\n",
			cfg->n_devices);
		break;
	}
	case CFG_RAIL_OCS: {
		const struct ocs_rail_fabric *r = &cfg->rail;

		fprintf(out, "  GPUs            %lld (+%lld spare)\n",
			(long long)ocs_rail_active_gpus(r), (long long)ocs_rail_spare_gpus(r));
		fprintf(out, "  servers         %d (+%d spare)\n", ocs_rail_active_servers(r),
			ocs_rail_spare_servers(r));
		fprintf(out, "  rails           %d\n", r->rails);
		fprintf(out, "  rail ports      %lld\n", (long long)ocs_rail_rail_ports(r));
		fprintf(out,
			"  OCS devices     %d (one per %d servers, %d GPU-side + %d switch-side "
			"ports)\n",
			cfg->n_devices, r->servers_per_ocs, ocs_rail_gpu_side_ports(r),
			ocs_rail_switch_side_ports(r));
		break;
	}
	}
	print_devices(cfg, out);
}

/* One warning line: "PATH: warning: message". */
__attribute__((format(printf, 3, 4))) static void warn(FILE *out, const char *leaf, const char *fmt,
						       ...)
{
	va_list ap;

	fprintf(out, "/ocsd-fabric:fabric/devices/%s: warning: ", leaf);
	va_start(ap, fmt);
	vfprintf(out, fmt, ap);
	va_end(ap);
	fputc('\n', out);
}

/* Warns when path is set but cannot be read by this user; 1 if it warned. */
static int warn_unreadable(FILE *out, const char *leaf, const char *path, const char *hint)
{
	if (!path || access(path, R_OK) == 0)
		return 0;
	warn(out, leaf, "%s does not exist or is not readable here%s", path, hint);
	return 1;
}

int cfg_print_warnings(const struct ocsd_config *cfg, FILE *out)
{
	const struct cfg_access *a = &cfg->access;
	int n = 0;

	if (cfg->n_devices == 0)
		return 0;
	if (a->transport == CFG_TRANSPORT_TLS && !a->certificate_file) {
		warn(out, "certificate-file",
		     "transport tls without a client certificate: devices that verify clients "
		     "refuse ocsd; give certificate-file and private-key-file");
		n++;
	}
	if (a->transport == CFG_TRANSPORT_TLS && !a->private_key_file) {
		warn(out, "private-key-file",
		     "transport tls without a client key: give private-key-file (the key of "
		     "certificate-file)");
		n++;
	}
	n += warn_unreadable(out, "password-file", a->password_file,
			     ": ocsd will not start until it is (one line, the devices' password; "
			     "owner root, group ocsd, mode 0640)");
	n += warn_unreadable(out, "private-key-file", a->private_key_file, "");
	n += warn_unreadable(out, "certificate-file", a->certificate_file, "");
	return n;
}
