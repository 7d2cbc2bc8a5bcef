/*
 * sb_wire.h - ocsd's own RPC traffic on a NETCONF session that libnetconf2
 * set up (issue 13): one write per RPC, or per group of pipelined RPCs,
 * with RFC 6242 framing (sb_frame.h), each reply read into one buffer and
 * scanned without libyang (sb_reply.h).
 *
 * Design (southbound/README.md, "Southbound cost"): libnetconf2 connects,
 * authenticates, exchanges <hello> and keeps the capabilities; ocsd then
 * writes and reads the session's own transport - the SSH channel, or the
 * TLS connection - while libnetconf2 does not use it. That works for SSH
 * and TLS alike (a second SSH channel would not exist over TLS, and
 * ocs-devsim, like many servers, serves one channel per SSH connection).
 * It is safe because:
 *   - libnetconf2 2.0 reads a message exactly to its end (byte counts from
 *     the chunk headers), and so does sb_wire (sb_deframer_want()): between
 *     two messages the stream is at a boundary whoever reads next, so the
 *     notification listener may subscribe through sb_wire and then receive
 *     with nc_recv_notif();
 *   - ocsd's message-ids are "ocsd-N", which never equal libnetconf2's
 *     decimal ones; a reply with another message-id ends the session;
 *   - nothing else calls libnetconf2 on the session while an RPC runs (one
 *     thread per device, sb_device.h).
 * libnetconf2 2.0 has no getter for a session's SSH channel or SSL object;
 * sb_wire_open() reads them from the leading members of its struct
 * nc_session (2.0.x layout, required by southbound/CMakeLists.txt) after
 * proving the layout with the public getters (session id, version,
 * transport) and the transport itself (the channel belongs to the SSH
 * session on the expected socket; the TLS handshake is finished); if the
 * proof fails it refuses (-ENOTSUP) instead of guessing.
 *
 * Waiting: every wait for the socket goes through sb_exec_wait_fd()
 * (sb_exec.h), so a wire used from a coroutine of the engine's loop yields
 * to the loop instead of blocking its thread; what has arrived is read
 * without waiting. TLS sessions must be non-blocking (libnetconf2 2.0 makes
 * them so; sb_wire_open() refuses others).
 *
 * Not thread-safe: a wire is used by its device's thread (or coroutine) only.
 */
#ifndef OCS_SB_WIRE_H
#define OCS_SB_WIRE_H

#include "sb_reply.h"

#include <stddef.h>
#include <stdint.h>

struct nc_session;
struct sb_wire;

/* Largest reply accepted (a get of 4,096 cross-connects with status is about 400 KB). */
#define SB_WIRE_MAX_REPLY (16u << 20)

/*
 * Takes over the RPC traffic of the running session ns (SSH: its socket is
 * ssh_fd; TLS: ssh_fd is ignored). The session stays libnetconf2's: free the
 * wire before nc_session_free(). 0, -ENOTSUP (not a libnetconf2 2.0 SSH or
 * TLS session this code can prove), -ENOMEM.
 */
int sb_wire_open(struct nc_session *ns, int ssh_fd, struct sb_wire **out);
/* The transport's socket (the SSH socket, or the TLS connection's). */
int sb_wire_fd(const struct sb_wire *w);
/* Frees the wire (not the session). NULL is fine. */
void sb_wire_free(struct sb_wire *w);
/*
 * Shuts the transport's socket down (both ways): for a session out of step,
 * so that nothing - libnetconf2's <close-session> when the session is
 * freed - reads what is left of a late reply. NULL is fine.
 */
void sb_wire_shutdown(struct sb_wire *w);

/* Most RPCs outstanding at once on a wire (sb_wire_send). */
#define SB_WIRE_MAX_PIPELINE 4

/*
 * Sends the n operations ops[] (XML of one element each, e.g.
 * "<lock>...</lock>"), each in an <rpc> with the next message-id, all in ONE
 * write, without waiting for any reply: pipelining (RFC 6241 section 4.1:
 * the server answers in order). Whether the later RPCs are safe to send
 * before the earlier ones are answered is the caller's argument (sb_txn.c).
 * Each one is then answered by one sb_wire_recv(). 0, -EINVAL (n is 0 or
 * more than SB_WIRE_MAX_PIPELINE would be outstanding), -ETIMEDOUT,
 * -ECONNRESET, -EMSGSIZE (an <rpc> larger than one chunk), -ENOMEM.
 */
int sb_wire_send(struct sb_wire *w, const char *const *ops, size_t n, int64_t deadline_ms);

/*
 * Waits until deadline_ms (sb_now_ms() clock) for the reply to the oldest
 * RPC sent and not yet answered, skipping notifications; its message-id
 * must be that RPC's. The deadline bounds the whole reply: past it, only
 * what had arrived by then is read (no wait), and a reply that is still
 * not complete is -ETIMEDOUT, however fast the device keeps sending. *reply points into the wire's
 * buffer, valid until the next call. 0 (reply->kind says what came: OK, DATA, ERROR or EMPTY),
 * -EINVAL (no RPC outstanding), -ETIMEDOUT, -ECONNRESET (transport closed
 * or failed), -EPROTO (broken framing, a reply the scanner cannot read or
 * with another message-id: reply->error says which), -EMSGSIZE (reply
 * over SB_WIRE_MAX_REPLY), -ENOMEM.
 */
int sb_wire_recv(struct sb_wire *w, int64_t deadline_ms, struct sb_reply *reply);

#endif
