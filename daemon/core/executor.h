/*
 * executor.h - the daemon's one executor: a fixed set of worker threads and an
 * intrusive FIFO of tasks. Everything that runs off the loop thread runs
 * here: planner tasks (pool.c, capped at --solver-threads at a time, and
 * their parallel loops through exec_parallel_for), transaction steps and
 * device I/O (executor_sb.c adapts it for southbound/sb_txn) and
 * reconciliation reads (reconcile.c). No module creates threads of its own.
 *
 * Tasks are embedded in the caller's struct (OCSD_CONTAINER_OF from loop.h
 * gets the struct back in run), so submitting never allocates and cannot
 * fail. Results go back to the loop with loop_post().
 *
 * The waiting rule. A task must never block waiting for other tasks of the
 * same executor except through exec_wait(): while the group it waits for
 * is unfinished, exec_wait() runs queued tasks itself ("helping"), so a
 * task waiting for its sub-tasks cannot deadlock the executor, whatever the
 * thread count, 1 included. Blocking on I/O or on a device deadline is
 * fine (it only occupies a thread); blocking on a condition that another
 * task of this executor must signal, other than through exec_wait(), is
 * not. A helper runs whatever task is first in the queue, so long tasks
 * resubmit themselves per unit of work (one device read, one engine step)
 * rather than loop, and a wait is held up by one unit at most. Callers that
 * prefer not to wait at all chain continuations: the last sub-task to
 * finish submits the next step (sb_txn.c does this).
 *
 * Shutdown: exec_free() drains. Every task submitted before it returns
 * runs, including tasks that running tasks submit while it drains; then the
 * threads are joined. Submitting after exec_free() returned is a caller bug.
 *
 * Thread-safety: exec_submit(), exec_wait*() and exec_parallel_for() from
 * any thread (tasks included); exec_new()/exec_free() from the owner.
 */
#ifndef OCSD_EXEC_H
#define OCSD_EXEC_H

#include <stddef.h>

struct exec;

struct exec_task {
	void (*run)(struct exec_task *t);
	struct exec_task *next; /* private: the executor's queue link */
};

/*
 * Starts `threads` workers (0 = one per online core, at least 2). NULL on
 * failure. Caller frees with exec_free() (accepts NULL; drains, see above).
 */
struct exec *exec_new(unsigned threads);
void exec_free(struct exec *e);
unsigned exec_threads(const struct exec *e);

/*
 * Queues t; t->run(t) runs once on a worker (or on a thread helping in
 * exec_wait). Cannot fail. t belongs to the executor until run is called;
 * the executor never touches it afterwards, so run may free or resubmit t.
 */
void exec_submit(struct exec *e, struct exec_task *t);

/*
 * A wait group: a count of unfinished tasks that exec_wait() waits for,
 * helping meanwhile. Typically on the waiter's stack. Guarded by the
 * executor's lock, so it belongs to one executor.
 */
struct exec_wait {
	size_t pending;
};

/* Sets the count to n before the n tasks are submitted. */
void exec_wait_init(struct exec_wait *w, size_t n);
/* One task of the group finished (its last touch of shared data is before). */
void exec_wait_done(struct exec *e, struct exec_wait *w);
/* Returns when the count is 0, running queued tasks of e meanwhile. */
void exec_wait(struct exec *e, struct exec_wait *w);

/*
 * Calls fn(arg, i) once for each i in 0..n-1 using at most max_tasks
 * threads at once (the caller among them; 0 = every worker), and returns
 * when all calls are done. Waits by helping, so a task may call it. This is
 * struct ocs_pool's run for the solvers (see pool_solver_pool()).
 */
void exec_parallel_for(struct exec *e, unsigned max_tasks, void (*fn)(void *arg, size_t i),
		       void *arg, size_t n);

#endif
