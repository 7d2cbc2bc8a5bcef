/*
 * log.h - ocsd's one logger: every line ocsd writes, and the messages of the
 * libraries it uses (gRPC core, libnetconf2, libevent), in one format.
 *
 * Under journald (JOURNAL_STREAM names ocsd's stderr and journald's socket
 * is there) a line is a journal
 * entry with PRIORITY, MESSAGE and structured fields: OCSD_SOURCE (ocsd,
 * grpc, libnetconf2, libevent), and where a line concerns a job or a client,
 * OCSD_JOB_ID and OCSD_CLIENT_CN. Anywhere else it is one line on stderr:
 *
 *   2026-11-24T13:42:36.123Z ocsd[1234] <4> warning: grpc: message
 *
 * (UTC time with milliseconds, the pid, the syslog priority in the <N> form
 * journald and syslog understand, its name, the source for library lines).
 *
 * Thread-safety: every call is thread-safe (one write(2) per line, or one
 * sd_journal_send); log_init() and log_route_libraries() are called once at
 * start, before other threads run.
 */
#ifndef OCSD_LOG_H
#define OCSD_LOG_H

#include <stdbool.h>
#include <syslog.h> /* LOG_ERR, LOG_WARNING, LOG_NOTICE, LOG_INFO, LOG_DEBUG */

/* Decides journald or stderr once (JOURNAL_STREAM against stderr's device
 * and inode, and journald's socket). */
void log_init(void);

/* True when lines go to the journal. */
bool log_to_journal(void);

/* One line at syslog priority prio (LOG_ERR .. LOG_DEBUG). */
__attribute__((format(printf, 2, 3))) void log_msg(int prio, const char *fmt, ...);

/*
 * One line about a job and the client that asked (job_id, client_cn may be
 * NULL or ""): under journald they are also the OCSD_JOB_ID and
 * OCSD_CLIENT_CN fields; on stderr the message carries them itself.
 */
__attribute__((format(printf, 4, 5))) void log_job(int prio, const char *job_id,
						   const char *client_cn, const char *fmt, ...);

/*
 * Routes gRPC core (gpr_set_log_function), libnetconf2
 * (nc_set_print_clb_session) and libevent (event_set_log_callback) messages
 * through log_msg's format, each with its source name.
 */
void log_route_libraries(void);

#endif
