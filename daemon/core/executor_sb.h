/*
 * executor_sb.h - the adapter that runs the transaction engine's tasks
 * (southbound/sb_exec.h) on the daemon's executor (executor.h), at most
 * `max_running` at once so that device I/O, which blocks a thread for up
 * to an RPC deadline, never occupies every executor thread.
 *
 * Engine tasks queue here (intrusive, no allocation) and up to max_running
 * "pump" tasks on the executor run them in FIFO order.
 *
 * Thread-safety: the executor's submit from any thread; new/free by the
 * owner. exec_sb_free() drains: it returns once every engine task ran,
 * including those running tasks submit meanwhile (the rest of a
 * transaction in progress, rollback included); nothing else may submit
 * once it has begun (the job manager starts no transaction once stopped).
 */
#ifndef OCSD_EXEC_SB_H
#define OCSD_EXEC_SB_H

#include "executor.h"
#include "sb_exec.h"

struct exec_sb;

/* NULL on failure. Caller frees with exec_sb_free() (accepts NULL, drains). */
struct exec_sb *exec_sb_new(struct exec *exec, unsigned max_running);
void exec_sb_free(struct exec_sb *a);
/* The interface for sb_engine_new_on() (valid until exec_sb_free()). */
struct sb_executor exec_sb_executor(struct exec_sb *a);

#endif
