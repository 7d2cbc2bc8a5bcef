/*
 * devsim_store.c - edit-config and subtree filtering over libyang trees for
 * ocs-devsim (see devsim_store.h). libyang 2 parses the ietf-netconf
 * "operation" attribute of an edit as metadata; this file walks the edit
 * tree and applies each operation to the target tree the way RFC 6241
 * section 7.2 describes.
 */
#include "devsim_store.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const op_names[] = {"merge", "replace", "create", "delete", "remove", "none"};

int ds_op_parse(const char *name)
{
	for (size_t i = 0; i < sizeof(op_names) / sizeof(op_names[0]); i++)
		if (name && !strcmp(name, op_names[i]))
			return (int)i;
	return -1;
}

struct edit_err {
	char *msg;
	size_t msg_len;
	char *path;
	size_t path_len;
};

static enum ds_error fail(struct edit_err *ee, enum ds_error code, const struct lyd_node *n,
			  const char *why)
{
	snprintf(ee->msg, ee->msg_len, "%s", why);
	if (n && ee->path_len) {
		char *p = lyd_path(n, LYD_PATH_STD, NULL, 0);
		snprintf(ee->path, ee->path_len, "%s", p ? p : "");
		free(p);
	}
	return code;
}

/* Inserts a copy (without metadata) of edit node e under parent / into *first. */
static enum ds_error insert_copy(struct lyd_node **first, struct lyd_node *parent,
				 const struct lyd_node *e, uint32_t dup_opts,
				 struct lyd_node **made, struct edit_err *ee)
{
	struct lyd_node *dup = NULL;
	if (lyd_dup_single(e, NULL, dup_opts | LYD_DUP_NO_META, &dup))
		return fail(ee, DS_ERR_INTERNAL, e, "cannot copy the edit node");
	if (!(dup_opts & LYD_DUP_RECURSIVE) && e->schema && e->schema->nodetype == LYS_LIST &&
	    !lyd_child(dup)) {
		/* a shallow copy of a list entry still needs its keys */
		for (const struct lyd_node *c = lyd_child(e); c; c = c->next)
			if (c->schema && lysc_is_key(c->schema) &&
			    lyd_dup_single(c, (struct lyd_node_inner *)dup, LYD_DUP_NO_META,
					   NULL)) {
				lyd_free_tree(dup);
				return fail(ee, DS_ERR_INTERNAL, e, "cannot copy a list key");
			}
	}
	LY_ERR r = parent ? lyd_insert_child(parent, dup) : lyd_insert_sibling(*first, dup, first);
	if (r) {
		lyd_free_tree(dup);
		return fail(ee, DS_ERR_INVALID, e, "cannot insert the node here");
	}
	if (made)
		*made = dup;
	return DS_ERR_OK;
}

static void remove_node(struct lyd_node **first, struct lyd_node *parent, struct lyd_node *n)
{
	if (!parent && *first == n)
		*first = n->next;
	lyd_free_tree(n);
}

static bool has_non_key_child(const struct lyd_node *n)
{
	for (const struct lyd_node *c = lyd_child(n); c; c = c->next)
		if (!c->schema || !lysc_is_key(c->schema))
			return true;
	return false;
}

static enum ds_error edit_siblings(struct lyd_node **first, struct lyd_node *parent,
				   const struct lyd_node *edit, enum ds_op inherited,
				   struct edit_err *ee)
{
	for (const struct lyd_node *e = edit; e; e = e->next) {
		enum ds_op op = inherited;
		if (!e->schema)
			return fail(ee, DS_ERR_INVALID, e, "unknown element in the edit");
		struct lyd_meta *m = lyd_find_meta(e->meta, NULL, "ietf-netconf:operation");
		if (m) {
			int parsed = ds_op_parse(lyd_get_meta_value(m));
			if (parsed < 0)
				return fail(ee, DS_ERR_INVALID, e, "unknown operation");
			op = (enum ds_op)parsed;
		}
		if (lysc_is_key(e->schema))
			continue; /* keys were matched with their list entry */
		struct lyd_node *siblings = parent ? lyd_child(parent) : *first;
		struct lyd_node *match = NULL;
		if (siblings && (e->schema->nodetype & (LYS_LIST | LYS_LEAFLIST)))
			lyd_find_sibling_first(siblings, e, &match); /* by keys / value */
		else if (siblings)
			lyd_find_sibling_val(siblings, e->schema, NULL, 0, &match); /* by schema */
		enum ds_error r = DS_ERR_OK;
		switch (op) {
		case DS_OP_CREATE:
			if (match)
				return fail(ee, DS_ERR_DATA_EXISTS, e, "data already exists");
			r = insert_copy(first, parent, e, LYD_DUP_RECURSIVE, NULL, ee);
			break;
		case DS_OP_DELETE:
			if (!match)
				return fail(ee, DS_ERR_DATA_MISSING, e,
					    "data to delete is missing");
			remove_node(first, parent, match);
			break;
		case DS_OP_REMOVE:
			if (match)
				remove_node(first, parent, match);
			break;
		case DS_OP_REPLACE:
			if (match)
				remove_node(first, parent, match);
			r = insert_copy(first, parent, e, LYD_DUP_RECURSIVE, NULL, ee);
			break;
		case DS_OP_MERGE:
		case DS_OP_NONE:
			if (e->schema->nodetype & LYD_NODE_TERM) {
				if (op == DS_OP_NONE)
					break;
				if (!match) {
					r = insert_copy(first, parent, e, LYD_DUP_RECURSIVE, NULL,
							ee);
					break;
				}
				/* LY_EEXIST: the same value, a default made explicit;
				 * LY_ENOT: the same value: a merge that changes nothing */
				LY_ERR changed = lyd_change_term(match, lyd_get_value(e));
				if (changed && changed != LY_EEXIST && changed != LY_ENOT)
					return fail(ee, DS_ERR_INVALID, e, "invalid value");
				break;
			}
			bool made_here = false;
			if (!match) {
				r = insert_copy(first, parent, e, 0, &match, ee);
				made_here = true;
			}
			if (r == DS_ERR_OK) {
				struct lyd_node *child_first = lyd_child(match);
				r = edit_siblings(&child_first, match, lyd_child(e), op, ee);
			}
			if (r == DS_ERR_OK && made_here && op == DS_OP_NONE &&
			    !has_non_key_child(match))
				remove_node(first, parent, match);
			break;
		}
		if (r != DS_ERR_OK)
			return r;
	}
	return DS_ERR_OK;
}

enum ds_error ds_apply_edit(struct lyd_node **target, const struct lyd_node *edit,
			    enum ds_op default_op, char *msg, size_t msg_len, char *path,
			    size_t path_len)
{
	struct edit_err ee = {msg, msg_len, path, path_len};
	if (msg_len)
		msg[0] = '\0';
	if (path_len)
		path[0] = '\0';
	return edit_siblings(target, NULL, edit, default_op, &ee);
}

/* ---- subtree filter ---------------------------------------------------- */

static const char *filter_module(const struct ly_ctx *ctx, const struct lyd_node *n)
{
	if (n->schema)
		return n->schema->module->name;
	const struct lyd_node_opaq *o = (const struct lyd_node_opaq *)n;
	if (o->format == LY_VALUE_XML) {
		const struct lys_module *mod =
			o->name.module_ns ? ly_ctx_get_module_implemented_ns(ctx, o->name.module_ns)
					  : NULL;
		return mod ? mod->name : NULL;
	}
	return o->name.module_name;
}

static const char *filter_value(const struct lyd_node *n)
{
	if (n->schema)
		return (n->schema->nodetype & LYD_NODE_TERM) ? lyd_get_value(n) : NULL;
	const struct lyd_node_opaq *o = (const struct lyd_node_opaq *)n;
	if (o->child || !o->value)
		return NULL;
	for (const char *p = o->value; *p; p++)
		if (*p != ' ' && *p != '\n' && *p != '\t' && *p != '\r')
			return o->value;
	return NULL;
}

static int select_path(const struct lyd_node *data, const char *xpath, struct lyd_node **out)
{
	struct ly_set *set = NULL;
	if (!data)
		return 0;
	if (lyd_find_xpath(data, xpath, &set))
		return -EINVAL;
	int rc = 0;
	for (uint32_t i = 0; i < set->count && !rc; i++) {
		struct lyd_node *dup = NULL;
		if (lyd_dup_single(set->dnodes[i], NULL, LYD_DUP_RECURSIVE | LYD_DUP_WITH_PARENTS,
				   &dup)) {
			rc = -ENOMEM;
			break;
		}
		while (dup->parent)
			dup = (struct lyd_node *)dup->parent;
		if (lyd_merge_siblings(out, dup, LYD_MERGE_DESTRUCT)) {
			lyd_free_tree(dup);
			rc = -EINVAL;
		}
	}
	ly_set_free(set, NULL);
	return rc;
}

static int filter_visit(const struct ly_ctx *ctx, const struct lyd_node *data,
			const struct lyd_node *f, const char *parent_path, struct lyd_node **out)
{
	const char *mod = filter_module(ctx, f);
	if (!mod)
		return -EINVAL;
	size_t cap = strlen(parent_path) + strlen(mod) + strlen(LYD_NAME(f)) + 8;
	for (const struct lyd_node *c = lyd_child(f); c; c = c->next) {
		const char *v = filter_value(c);
		if (v)
			cap += strlen(LYD_NAME(c)) +
			       strlen(filter_module(ctx, c) ? filter_module(ctx, c) : "") +
			       strlen(v) + 8;
	}
	char *path = malloc(cap);
	if (!path)
		return -ENOMEM;
	int len = snprintf(path, cap, "%s/%s:%s", parent_path, mod, LYD_NAME(f));
	bool has_selection = false;
	for (const struct lyd_node *c = lyd_child(f); c; c = c->next) {
		const char *v = filter_value(c);
		const char *cmod = filter_module(ctx, c);
		if (!cmod) {
			free(path);
			return -EINVAL;
		}
		if (v && !strchr(v, '\''))
			len += snprintf(path + len, cap - (size_t)len, "[%s:%s='%s']", cmod,
					LYD_NAME(c), v);
		else
			has_selection = true;
	}
	int rc = 0;
	if (!has_selection) {
		rc = select_path(data, path, out);
	} else {
		for (const struct lyd_node *c = lyd_child(f); c && !rc; c = c->next)
			if (!filter_value(c))
				rc = filter_visit(ctx, data, c, path, out);
	}
	free(path);
	return rc;
}

int ds_subtree_filter(const struct ly_ctx *ctx, const struct lyd_node *data,
		      const struct lyd_node *filter, struct lyd_node **out)
{
	*out = NULL;
	if (!filter) {
		if (data && lyd_dup_siblings(data, NULL, LYD_DUP_RECURSIVE, out))
			return -ENOMEM;
		return 0;
	}
	for (const struct lyd_node *f = filter; f; f = f->next) {
		int rc = filter_visit(ctx, data, f, "", out);
		if (rc) {
			lyd_free_all(*out);
			*out = NULL;
			return rc;
		}
	}
	return 0;
}

/* The first node of tree that is not typed data (unknown, or a value its type refuses), or NULL. */
static const struct lyd_node *first_untyped(const struct lyd_node *tree)
{
	for (const struct lyd_node *n = tree; n; n = n->next) {
		if (!n->schema)
			return n;
		const struct lyd_node *c = first_untyped(lyd_child(n));
		if (c)
			return c;
	}
	return NULL;
}

int ds_parse_any(const struct ly_ctx *ctx, const struct lyd_node *any, int allow_opaque,
		 struct lyd_node **out, char *msg, size_t msg_len)
{
	char *str = NULL;
	*out = NULL;
	const struct lyd_node_any *a = (const struct lyd_node_any *)any;
	LY_ERR pr;
	/* an edit that libnetconf2 already parsed into typed nodes (with its
	 * operation metadata) is used as it is: printing and parsing it again
	 * cost the simulator a second parse of every edit */
	if (!allow_opaque && a->value_type == LYD_ANYDATA_DATATREE && a->value.tree &&
	    !first_untyped(a->value.tree))
		return lyd_dup_siblings(a->value.tree, NULL, LYD_DUP_RECURSIVE | LYD_DUP_WITH_FLAGS,
					out)
			       ? -ENOMEM
			       : 0;
	if (a->value_type == LYD_ANYDATA_DATATREE)
		/* keep empty containers: in a filter they are selection nodes */
		pr = a->value.tree ? lyd_print_mem(&str, a->value.tree, LYD_XML,
						   LYD_PRINT_WITHSIBLINGS | LYD_PRINT_KEEPEMPTYCONT)
				   : LY_SUCCESS;
	else
		pr = lyd_any_value_str(any, &str);
	if (pr) {
		snprintf(msg, msg_len, "cannot read the content of <%s>", LYD_NAME(any));
		return -EINVAL;
	}
	if (!str)
		return 0;
	uint32_t opts = LYD_PARSE_ONLY | (allow_opaque ? LYD_PARSE_OPAQ : LYD_PARSE_STRICT);
	LY_ERR r = lyd_parse_data_mem(ctx, str, LYD_XML, opts, 0, out);
	free(str);
	if (r) {
		const char *lm = ly_errmsg(ctx);
		snprintf(msg, msg_len, "<%s>: %s", LYD_NAME(any), lm ? lm : "parse error");
		lyd_free_all(*out);
		*out = NULL;
		return -EINVAL;
	}
	return 0;
}
