/*
 * sb_model.h - the table of device models: one entry per YANG model a
 * device may speak, saying everything that differs between models and
 * nothing else (issue 23). The driver (sb_device*.c), the notification
 * listener (sb_notif.c) and the transaction engine (sb_txn*.c) look a
 * device's model up here; none of them names a model's nodes.
 *
 * An entry says:
 *   - which module and namespace the device speaks, and whether it holds
 *     cross-connects (ocs-switch, polatis) or a transceiver node's bundles
 *     (ocs-transceiver);
 *   - how a target set of cross-connects is written as the content of one
 *     edit-config (removals before additions), and how a whole set replaces
 *     what the device holds (the compensating edit from a pre-image);
 *   - how the device's cross-connects are read back into ocsd's (in, out)
 *     pairs with a status, through the device's port numbering
 *     (struct sb_port_map, sb_device.h);
 *   - what the device says about itself and about ocsd's ports (product,
 *     port status, the peer-port an operator recorded: sb_device_read_info);
 *   - which notifications mean a port fault (and its end) or a node fault.
 * Which datastores and commit the engine uses is NOT here: capabilities
 * decide that (sb_device.c, strategy from <hello>), never the model.
 *
 * Adding a model is one entry here and its tests (southbound/README.md,
 * "Adding a device model"). Everything in this file is pure: no I/O, no
 * state, safe from any thread.
 */
#ifndef OCS_SB_MODEL_H
#define OCS_SB_MODEL_H

#include "sb_device.h"
#include "sb_notif.h"

#include <stdbool.h>
#include <stddef.h>

/* A growing string for RPC XML; oom is set (and sticks) when it cannot grow. */
struct sb_buf {
	char *s;
	size_t len, cap;
	bool oom;
};
void sb_buf_printf(struct sb_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends <name>s</name>, s escaped as XML character data. */
void sb_buf_leaf(struct sb_buf *b, const char *name, const char *s);

/* A notification's leaves, for an entry's notif(): the value of leaf `name` or NULL. */
typedef const char *(*sb_leaf_fn)(const void *ctx, const char *name);

struct sb_model_ops {
	const char *name;   /* as the fabric file names it: "ocs-switch", "polatis", ... */
	const char *module; /* the YANG module it speaks */
	const char *ns;	    /* ... and its namespace */
	bool bundles;	    /* a transceiver node's bundles, not cross-connects */

	/* Cross-connect models only (NULL for bundles). */
	/* The subtree filter of a read: with_state, the <get> one (status too, if the model has
	 * one). */
	const char *(*xc_filter)(bool with_state);
	/*
	 * Appends to b the <config> content that makes the device's
	 * cross-connects `target` when it holds `current` (ocsd ports; both
	 * sorted by input): removals first, then additions and changes; only
	 * what differs.
	 */
	void (*xc_edit)(struct sb_buf *b, const struct sb_port_map *pm, const struct sb_xc *current,
			size_t n_current, const struct sb_xc *target, size_t n_target);
	/* Appends the <config> content that replaces every cross-connect with xcs. */
	void (*xc_replace)(struct sb_buf *b, const struct sb_port_map *pm, const struct sb_xc *xcs,
			   size_t n);
	/*
	 * The cross-connects in a reply's <data> content, in ocsd's ports,
	 * sorted by input, *out malloc'ed (caller frees). with_state: the reply
	 * of xc_filter(true), whose status it fills (a model without a status
	 * per cross-connect, polatis, says CONNECTED for each one present);
	 * otherwise status UNKNOWN.
	 * 0, -EPROTO (why says what: unreadable, or a port outside the map),
	 * -ENOMEM.
	 */
	int (*xc_parse)(const char *data, size_t len, const struct sb_port_map *pm, bool with_state,
			struct sb_xc_state **out, size_t *n, char *why, size_t why_len);

	/*
	 * What the device says about itself and ocsd's ports
	 * (sb_device_read_info): the subtree filter of one <get> (NULL: the
	 * model says nothing), and its reply into *out, ports outside the map
	 * left out. 0, -EPROTO (why says what), -ENOMEM.
	 */
	const char *info_filter;
	int (*info_parse)(const char *data, size_t len, const struct sb_port_map *pm,
			  struct sb_device_info *out, char *why, size_t why_len);

	/*
	 * Fills n's kind and fields from a notification named `name` whose
	 * leaves leaf(ctx, ...) gives, when it is one this model knows (a port
	 * fault or its end, a node fault, loss of light); returns false and
	 * leaves n alone otherwise (it is delivered as SB_NOTIF_OTHER).
	 */
	bool (*notif)(const char *name, sb_leaf_fn leaf, const void *ctx,
		      const struct sb_port_map *pm, struct sb_notif *n);
};

/* The entry of model m (never NULL for a valid m). */
const struct sb_model_ops *sb_model(enum sb_model m);
/* The model named `name` ("ocs-switch", "ocs-transceiver", "polatis"): 0 or -ENOENT. */
int sb_model_from_name(const char *name, enum sb_model *out);
/*
 * The port map of a device of model m using n ports when the config gives
 * none (all 0): ocs-switch (0, 0, n), polatis (1, n + 1, n).
 */
struct sb_port_map sb_model_default_ports(enum sb_model m, uint32_t n);
/*
 * Checks a port map: -EINVAL with why filled when the device's port ids of
 * ocsd's n ports leave the model's range (polatis: 1..65535) or an ingress
 * and an egress range share an id on a model that numbers them apart.
 */
int sb_model_check_ports(enum sb_model m, const struct sb_port_map *pm, char *why, size_t why_len);

#endif
