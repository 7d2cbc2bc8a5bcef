/*
 * cabling.h - the cabling check (issue 23): where a device reports the far
 * end of the fibre on one of ocsd's ports (a Polatis switch's peer-port, as
 * the operator recorded it on the switch), that is compared with the
 * wiring the fabric file implies, and every disagreement is a miswired
 * fibre. A miswired port is reported (ocsctl cabling, a Watch event, the
 * gauge ocsd_cabling_miswired_ports) and kept out of every plan until an
 * operator clears it: miswired fibre is among the commonest faults of a
 * new optical fabric, and a circuit over it joins the wrong spines.
 *
 * The expected far end (leaf-spine-OCS fabrics, solvers/fabric.h): of a
 * device's input port (Polatis ingress), the spine port whose transmitter
 * feeds it; of its output port (egress), the spine port whose receiver it
 * feeds; written "pod<P>-spine<H>-port<K>", and "" for a port the wiring
 * leaves uncabled. A port whose reported peer-port is empty is not checked
 * (nothing recorded). Other fabric kinds are not checked (cab_new with no
 * fabric).
 *
 * Clearing (cab_clear): the operator says the fibre is right as it is. The
 * report stays listed as cleared and the port is planned on again, for as
 * long as the device reports the same text; another text is checked anew.
 * Reports live in memory: every reconciliation pass reads them again (a
 * restart forgets what was cleared, and reports a fibre still miswired).
 *
 * Threading: the loop thread only.
 */
#ifndef OCSD_CABLING_H
#define OCSD_CABLING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fabric.h"
#include "sb_device.h"

/* Longest expected far-end name ("pod65535-spine65535-port65535"). */
#define CAB_NAME_MAX 48

/* One miswired port: what the device reports against what the wiring says. */
struct cab_entry {
	int device; /* device id */
	uint16_t port;
	bool egress; /* the device's output (egress) side of the port, else its input */
	char expected[CAB_NAME_MAX];
	char reported[SB_PEER_MAX + 1];
	bool cleared; /* by an operator: planned on again */
};

struct cab_table;

/* f: the leaf-spine-OCS fabric, or NULL (nothing is checked). Free with cab_free. */
struct cab_table *cab_new(const struct ocs_fabric *f);
void cab_free(struct cab_table *t);

/* The far end the wiring gives device id's port (input or output side) into buf. */
void cab_expected(const struct ocs_fabric *f, int id, uint16_t port, bool egress, char *buf,
		  size_t len);

/* Called by cab_set for each change: a port found miswired (true) or no longer (false). */
typedef void (*cab_change_fn)(void *ctx, const struct cab_entry *e, bool miswired);

/*
 * What a read of device id found it reporting (info: its ports' peer-port).
 * The device's entries become exactly its miswired ports; fn (may be NULL)
 * hears of each port that became miswired or stopped being so. 0 or
 * -ENOMEM (the device's entries unchanged).
 */
int cab_set(struct cab_table *t, int id, const struct sb_device_info *info, cab_change_fn fn,
	    void *ctx);

/* Every miswired port, cleared ones too, sorted by (device, port, egress). */
const struct cab_entry *cab_list(const struct cab_table *t, size_t *n);
/* Miswired ports not cleared. */
size_t cab_miswired(const struct cab_table *t);
/*
 * An operator's word that device id's port is cabled right: its entries
 * (both sides) are cleared. 0, or -ENOENT when the port is not reported.
 */
int cab_clear(struct cab_table *t, int id, uint16_t port);

/*
 * The planner's view: the miswired ports not cleared, as ports out of
 * service (lc_options.out_of_service: group, device and the port in `in`),
 * malloc'd into *out (NULL with *n 0 when none). 0 or -ENOMEM.
 */
int cab_out_of_service(const struct cab_table *t, struct ocs_xc **out, size_t *n);

#endif
