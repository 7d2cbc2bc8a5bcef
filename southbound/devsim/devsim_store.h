/*
 * devsim_store.h - the generic datastore operations of ocs-devsim: the
 * NETCONF edit-config engine (merge, replace, create, delete, remove, none)
 * and subtree filtering, both over libyang data trees.
 *
 * Nothing here knows about sessions, devices or cross-connects: the
 * simulator (devsim.c) calls these on the trees it owns, under the lock of
 * the device the trees belong to. The functions only read the libyang
 * context, so they are thread-safe on distinct trees.
 */
#ifndef OCS_DEVSIM_STORE_H
#define OCS_DEVSIM_STORE_H

#include <libyang/libyang.h>
#include <stddef.h>

enum ds_op {
	DS_OP_MERGE = 0,
	DS_OP_REPLACE,
	DS_OP_CREATE,
	DS_OP_DELETE,
	DS_OP_REMOVE,
	DS_OP_NONE,
};

/* Maps "merge", "replace", "none", ... to the operation; -1 if unknown. */
int ds_op_parse(const char *name);

/* Why an edit was refused. */
enum ds_error {
	DS_ERR_OK = 0,
	DS_ERR_INVALID,	     /* malformed edit, unknown operation */
	DS_ERR_DATA_EXISTS,  /* create on an existing node */
	DS_ERR_DATA_MISSING, /* delete on a missing node */
	DS_ERR_INTERNAL,
};

/*
 * Applies the edit tree `edit` (siblings, as parsed from <config>, with
 * ietf-netconf:operation metadata) to *target in place. On failure *target
 * may be partly changed: callers edit a copy and keep it only on success
 * (that is what makes every edit rollback-on-error). `msg` receives a
 * human reason and `path` the data path of the offending node (when known).
 */
enum ds_error ds_apply_edit(struct lyd_node **target, const struct lyd_node *edit,
			    enum ds_op default_op, char *msg, size_t msg_len, char *path,
			    size_t path_len);

/*
 * Subtree filtering (RFC 6241 section 6): returns in *out a new tree with
 * the parts of `data` (siblings) the filter tree selects. `filter` may mix
 * schema and opaque nodes (selection nodes parse as opaque); NULL means
 * "everything". Caller frees *out with lyd_free_all(). Returns 0 or -EINVAL.
 */
int ds_subtree_filter(const struct ly_ctx *ctx, const struct lyd_node *data,
		      const struct lyd_node *filter, struct lyd_node **out);

/*
 * Turns an anydata/anyxml node's content (<config>, <filter>) into a data
 * tree of ctx; opaque nodes are allowed when `allow_opaque`. Caller frees.
 * Returns 0, or -EINVAL with a message from libyang in msg.
 */
int ds_parse_any(const struct ly_ctx *ctx, const struct lyd_node *any, int allow_opaque,
		 struct lyd_node **out, char *msg, size_t msg_len);

#endif
