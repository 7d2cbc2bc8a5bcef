/*
 * pool.h - the solver pool: planner tasks run on the daemon's executor
 * (executor.h), at most `max_running` at a time, behind a bounded queue, and
 * each result is handed back to the event loop (nginx-style: a bounded task
 * queue, workers, completion delivered on the loop).
 *
 * A task is a pair of callbacks embedded in the caller's struct (get it
 * back with OCSD_CONTAINER_OF): work(t) runs on an executor thread and must
 * touch nothing but the caller's struct (a snapshot the loop copied for
 * it); done(t) then runs on the loop thread, where the result may be
 * applied to daemon state. The struct belongs to the pool from a
 * successful pool_submit() until done is called; done may free it.
 *
 * Fairness (issue 14 #8): a task marked `heavy` (a DELTA search, which
 * may run for seconds) takes at most max_running - 1 of the running slots
 * (1 when max_running is 1), and a waiting light task (a leaf plan) always
 * starts before a waiting heavy one: a cheap plan waits for at most one
 * task's end, never behind a queue of expensive searches.
 *
 * Thread-safety: pool_submit() and pool_queued() from any thread (the
 * daemon calls them from the loop); pool_solver_pool() may be used from
 * work. The pool's lock (`mu`) is never held while work runs.
 */
#ifndef OCSD_POOL_H
#define OCSD_POOL_H

#include <stdbool.h>
#include <stddef.h>

#include "executor.h"
#include "loop.h"
#include "ocs_pool.h"

struct pool;

struct pool_task {
	void (*work)(struct pool_task *t);
	void (*done)(struct pool_task *t);
	bool heavy; /* may run long: see "Fairness" above */
	/* private: */
	struct pool *pool;
	struct pool_task *next_waiting;
	struct exec_task exec;
	struct loop_node node;
};

/*
 * Runs at most `max_running` tasks at once on exec (0 = one per online
 * core) with room for `queue_max` tasks waiting for a turn. exec and loop
 * must outlive the pool. Caller frees with pool_free() (accepts NULL).
 */
struct pool *pool_new(struct loop *loop, struct exec *exec, unsigned max_running, size_t queue_max);
/*
 * Stops taking tasks (pool_submit() returns -ESHUTDOWN from now on) and
 * waits (called from the loop thread, not from a task) until every task
 * taken ran its work and posted its done to the loop; the caller then runs
 * the loop's posted nodes to deliver them. The pool stays valid, so a done
 * callback may still call pool_submit() and be refused.
 */
void pool_stop(struct pool *pool);
/* pool_stop(), then frees the pool. */
void pool_free(struct pool *pool);

/*
 * Queues t (the caller sets work and done). Returns 0, -EBUSY when
 * queue_max tasks are already waiting (back-pressure: the caller refuses
 * the request), or -ESHUTDOWN while the pool is being freed. On error
 * neither callback runs and the caller keeps t.
 */
int pool_submit(struct pool *pool, struct pool_task *t);

/* The cap of tasks running at once. */
unsigned pool_workers(const struct pool *pool);
/* Tasks waiting for a turn (not counting those running). */
size_t pool_queued(struct pool *pool);

/*
 * The parallel-for that planners get (solvers/ocs_pool.h): it runs on the
 * same executor, at most pool_workers() threads wide, and helps while it
 * waits, so a planner task may use it without deadlocking the executor.
 * Valid until pool_free().
 */
const struct ocs_pool *pool_solver_pool(const struct pool *pool);

#endif
