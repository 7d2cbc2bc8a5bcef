/*
 * devsim_wire.h - what the fault knobs garble, trickle and endless
 * (devsim_fault.h) do to a reply of ocs-devsim on its way out.
 *
 * libnetconf2 prints a reply and writes it to the session's transport
 * (ssh_channel_write() or SSL_write(), in several pieces) after the RPC
 * callback returned, and offers no hook in between. So ocs-devsim defines
 * those two functions itself (devsim_wire.c): its definitions come first
 * in the process's symbol lookup, pass every write on to libssh or OpenSSL
 * unchanged, except the writes of the one reply that the RPC callback armed
 * on this thread (devsim_wire_arm()) until the server disarms it
 * (devsim_wire_disarm(), after the RPC's nc_ps_poll() returned). Only the
 * ocs-devsim executable links devsim_wire.c.
 *
 * Armed kinds:
 *   GARBLE   the reply's first piece is replaced by broken framing
 *            (NETCONF 1.1: "\n#12abc\n<rpc-reply/>\n##\n"; 1.0: a message
 *            that is not XML, then "]]>]]>"), its other pieces are
 *            swallowed; the session stays open.
 *   TRICKLE  every piece of the reply leaves one byte at a time, ms
 *            milliseconds apart (TCP_CORK off, TCP_NODELAY on).
 *   ENDLESS  the reply's first piece is replaced by "\n#4294967295\n" and
 *            then 64 junk bytes every 50 ms until a write fails, the peer
 *            closes or the server stops; the write then fails, so
 *            libnetconf2 ends the session.
 * Like hang@STEP, TRICKLE and ENDLESS hold the worker thread serving the
 * session, and only it: the other workers serve the other devices.
 */
#ifndef OCS_DEVSIM_WIRE_H
#define OCS_DEVSIM_WIRE_H

#include <stdatomic.h>
#include <stdbool.h>

enum devsim_wire_kind {
	DEVSIM_WIRE_NORMAL = 0,
	DEVSIM_WIRE_GARBLE,
	DEVSIM_WIRE_TRICKLE,
	DEVSIM_WIRE_ENDLESS,
};

struct devsim_wire_fault {
	enum devsim_wire_kind kind;
	int ms; /* TRICKLE: delay between two bytes */
};

#define DEVSIM_WIRE_ENDLESS_BYTES 64 /* junk per ENDLESS step */
#define DEVSIM_WIRE_ENDLESS_MS	  50 /* ... and the time between two */

/*
 * Arms fault f for the next reply written by this thread: the session's
 * socket fd, chunked (NETCONF 1.1) or not, and the server's stop flag,
 * which ends an ENDLESS reply. A NORMAL fault disarms.
 */
void devsim_wire_arm(const struct devsim_wire_fault *f, int fd, bool chunked,
		     const atomic_bool *stop);
/* Whatever was armed on this thread is done. */
void devsim_wire_disarm(void);

#endif
