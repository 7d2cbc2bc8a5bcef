/*
 * sb_guard.h - the deadline of a session's NETCONF setup (prefix sb_guard_).
 *
 * libnetconf2 2.0 bounds the waits of a connect by its own compiled-in
 * times: after the <hello>, its context check sends up to three RPCs
 * (<get-schema>, yang-library <get-data>) and waits for each reply for
 * NC_READ_ACT_TIMEOUT, 300 s, whatever the device's rpc_timeout_ms says.
 * A device that never answers one of them held a connect, and the driver's
 * connect mutex of then with it (every other device's connect), for five
 * minutes:
 * test_sb_netconfd caught it against netconfd. No libnetconf2 2.0 setting
 * shortens those waits.
 *
 * The guard bounds the setup from outside: the connecting thread arms it
 * with the socket and a deadline before nc_connect_*() and disarms it
 * after; if the deadline passes first, the guard's thread shuts the socket
 * down (shutdown(2), SHUT_RDWR). Every wait of libnetconf2 on that socket
 * then ends at once in an error, the connect fails, and the driver's
 * backoff retries it. The guard works on a dup(2) of the socket, so it
 * never touches a descriptor number that libnetconf2 closed and the
 * process reused meanwhile.
 *
 * A TLS connect (nc_connect_tls()) makes its socket inside libnetconf2;
 * sb_guard_arm_tls() notes the TCP sockets to the device's address that
 * exist when it is armed, and at the deadline the guard shuts down those
 * that appeared since (found in /proc/self/fd). That is exact because TLS
 * connects are made whole under the driver's TLS mutex, one at a time.
 *
 * One guard per setup slot of the driver (sb_device_internal.h), armed by
 * one connect at a time (the caller holds the slot's mutex). Its thread sleeps on a condition
 * variable while disarmed. Thread-safe: arm and disarm come from the connecting thread, the
 * shutdown from the guard's thread, all under the guard's mutex.
 */
#ifndef OCSD_SB_GUARD_H
#define OCSD_SB_GUARD_H

#include <stdbool.h>
#include <stdint.h>

struct sb_guard;

/* Starts the guard's thread. 0, or -errno. */
int sb_guard_new(struct sb_guard **out);
/* Stops the thread and frees the guard (must be disarmed); NULL is a no-op. */
void sb_guard_free(struct sb_guard *g);

/* Arms the guard: fd is shut down when deadline_ms (sb_now_ms() clock)
 * passes before sb_guard_disarm(). 0, or -errno (dup failed: not armed). */
int sb_guard_arm(struct sb_guard *g, int fd, int64_t deadline_ms);
/* Arms the guard for a TLS connect to host:port that has not made its
 * socket yet (see above). 0, or -errno (host unresolvable: not armed). */
int sb_guard_arm_tls(struct sb_guard *g, const char *host, unsigned port, int64_t deadline_ms);
/* Disarms the guard. Returns true when the deadline had passed and the
 * socket was shut down: the session, if any came of it, is unusable. */
bool sb_guard_disarm(struct sb_guard *g);

#endif /* OCSD_SB_GUARD_H */
