/*
 * ocsctl_progress.h - the progress line of ocsctl's waiting commands
 * (issue 27): `job submit` (waiting), `job release`, `node fail` and `gpu
 * replace` show on stderr, redrawn in place on one line, the job's phases
 * and its transaction's progress as Events.Watch reports them ("job
 * lab-ring: planning", "job lab-ring: programming 3 of 8 devices"), and
 * clear the line before the answer is printed on stdout.
 *
 * A thread of its own, with its own nb_client (one client per thread),
 * watches {jobs, progress, rings} and draws; the calling thread starts it
 * before it sends the RPC (prog_start() returns once the server says the
 * watch is in place: the empty ProgressEvent a progress watch begins with)
 * and stops it when the RPC returned (prog_stop(): the stream is cancelled
 * with nb_client_stream_cancel(), the thread joined, the line cleared). A
 * watch that cannot be opened (an old server, a replica that does not
 * answer it) shows nothing; the command's output and exit code never
 * depend on it.
 *
 * Thread-safety: prog_start() and prog_stop() from the one thread that
 * runs the command.
 */
#ifndef OCSCTL_PROGRESS_H
#define OCSCTL_PROGRESS_H

#include <stdbool.h>

#include "nb_client.h"

struct prog;

/*
 * The progress line for job_id (NULL: for whatever job the transactions
 * name, as for node fail and gpu replace, whose repair's jobs are known
 * only from the events) against target, with the client options co
 * (copied; co->target ignored). NULL (no line, nothing to stop) when
 * stderr is not a terminal, when quiet, or when the thread cannot start.
 * Waits at most wait_ms for the watch to be in place.
 */
struct prog *prog_start(const struct nb_client_opts *co, const char *target, const char *job_id,
			bool quiet, int wait_ms);
/*
 * Stops the line and clears it. drain (the RPC succeeded, a transaction
 * may have run): first waits a moment (at most 300 ms) for the job's last
 * events, which come on another connection than the RPC's answer. Accepts
 * NULL.
 */
void prog_stop(struct prog *p, bool drain);

#endif
