/*
 * sb_reply.h - the scanner of NETCONF replies on the sessions whose RPC
 * traffic ocsd owns (sb_wire.h): it reads what the driver needs straight
 * from the reply's XML, without libyang: <ok/>, the <rpc-error>s (tag,
 * message, path), the message-id, and from <data> the cross-connects with
 * their status or a transceiver node's bundles with peer-node and path
 * state, into the structs of sb_device.h that the transaction engine's
 * verify uses.
 *
 * It is a scanner, not a validator: element names are compared by local
 * name (prefixes dropped), unknown elements are skipped, numbers must be
 * plain decimals in range. What it cannot read safely (unbalanced tags, a
 * DOCTYPE, a bad entity, a malformed number) makes it return -EPROTO, never
 * guess. It never reads outside the given bytes and never recurses, so any
 * input is safe (tests/fuzz/fuzz_sb_reply.c). Pure functions, no state:
 * callable from any thread.
 */
#ifndef OCS_SB_REPLY_H
#define OCS_SB_REPLY_H

#include "sb_device.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum sb_reply_kind {
	SB_REPLY_EMPTY = 0,    /* <rpc-reply> with neither <ok/>, <data> nor <rpc-error> */
	SB_REPLY_OK,	       /* <ok/> */
	SB_REPLY_DATA,	       /* <data>: data/data_len */
	SB_REPLY_ERROR,	       /* one or more <rpc-error>: error */
	SB_REPLY_NOTIFICATION, /* a <notification>, not a reply at all */
};

struct sb_reply {
	enum sb_reply_kind kind;
	const char *data; /* inside the scanned message: the content of <data> */
	size_t data_len;
	/* "error-tag: error-message at error-path" for each <rpc-error>, "; " between */
	char error[300];
	/* the first <error-info>/<session-id> of the errors (lock-denied: the
	 * session holding the lock, RFC 6241 appendix A); 0 when none */
	uint32_t session_id;
};

/*
 * Scans one NETCONF message (len bytes; need not be NUL-terminated). When
 * msgid is not NULL a reply must carry exactly that message-id. Returns 0
 * with *out filled, or -EPROTO (out->error says why: not XML this scanner
 * reads, not a reply, another message-id).
 */
int sb_reply_scan(const char *msg, size_t len, const char *msgid, struct sb_reply *out);

/*
 * The cross-connects in a reply's <data> content (sb_reply.data): every
 * <cross-connects>/<connection> with input and output (an entry without
 * either is skipped), status when there is one. *out is malloc'ed and sorted
 * by input, then output (caller frees; NULL when none). 0, -EPROTO (a value
 * that is not a port number), -ENOMEM.
 */
int sb_reply_xcs(const char *data, size_t len, struct sb_xc_state **out, size_t *n);

/*
 * The bundles of transceiver node `node` in a reply's <data> content: each
 * <bundle> of <transceivers>/<node> whose id is `node`, with its setting,
 * peer-node (-1 without) and the status of the path-status entry that
 * matches the selected path; *faulty (when not NULL) gets the node's
 * <faulty>. *out is malloc'ed and sorted by bundle (caller frees). 0,
 * -EPROTO, -ENOMEM.
 */
int sb_reply_bundles(const char *data, size_t len, uint32_t node, struct sb_bundle_state **out,
		     size_t *n, bool *faulty);

/* ---- Polatis optical-switch (the device's own port ids, 1..65535) -------- */

/* One <cross-connects>/<pair>: light entering `ingress` leaves at `egress`. */
struct sb_pair {
	uint32_t ingress;
	uint32_t egress;
};

/* A <port-config>/<port> (status: enum sb_port_status of sb_device.h). */
struct sb_port_state {
	uint32_t id;
	enum sb_port_status status;
	char peer[SB_PEER_MAX + 1]; /* its peer-port, "" when absent */
};

/*
 * The pairs of every <cross-connects> in a reply's <data> content (other
 * containers, <port-config> too, skipped): pairs without ingress or egress
 * are skipped. *pairs is malloc'ed and sorted by ingress (caller frees;
 * NULL when none). 0, -EPROTO (a port id that is not a number in
 * 1..65535, an ingress listed twice), -ENOMEM.
 */
int sb_reply_pairs(const char *data, size_t len, struct sb_pair **pairs, size_t *n_pairs);

/*
 * The <product-information> leaves (into *prod, "" for a leaf absent, text
 * cut to fit) and the <port-config> ports of a reply's <data> content:
 * ports without port-id are skipped, *ports (sorted by id) is malloc'ed
 * (caller frees; NULL when none). 0, -EPROTO (a port id that is not a
 * number in 1..65535, an unknown status, a port-id listed twice), -ENOMEM.
 */
int sb_reply_product(const char *data, size_t len, struct sb_product *prod,
		     struct sb_port_state **ports, size_t *n_ports);

#endif
