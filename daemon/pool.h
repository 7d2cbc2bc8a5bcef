/*
 * pool.h - the solver pool: worker threads that run planners on snapshots
 * and hand each result back to the event loop (nginx-style: a bounded task
 * queue, workers, completion delivered on the loop).
 *
 * A job is a pair of callbacks: work(arg) runs on a worker thread and must
 * touch nothing but arg (a snapshot the loop copied for it); done(arg) then
 * runs on the loop thread through loop_post(), where the result may be
 * applied to daemon state. arg's ownership passes to work, then to done.
 *
 * Thread-safety: pool_submit() is called from the loop thread; the pool's
 * own lock (`mu`) guards its queue and is never held while work runs.
 */
#ifndef OCSD_POOL_H
#define OCSD_POOL_H

#include <stddef.h>

struct loop;
struct pool;

/*
 * Starts `workers` threads (0 = one per online core) with room for
 * `queue_max` waiting jobs. Caller frees with pool_free() (accepts NULL).
 */
struct pool *pool_new(struct loop *loop, unsigned workers, size_t queue_max);
/*
 * Stops taking jobs, lets the workers finish every queued one (their done
 * callbacks are posted to the loop as usual), and joins the threads.
 */
void pool_free(struct pool *pool);

/*
 * Queues a job. Returns 0, -EAGAIN when queue_max jobs are already waiting
 * (back-pressure: the caller refuses the request), -ESHUTDOWN while the
 * pool is being freed, or -ENOMEM. On error
 * neither callback runs and the caller keeps arg.
 */
int pool_submit(struct pool *pool, void (*work)(void *arg), void (*done)(void *arg), void *arg);

/*
 * A task embedded in the caller's struct: work runs on a worker, done on
 * the loop, each given the task. pool_submit_task(pool, t) has the shape of
 * jm_deps.plan_submit: 0, -EAGAIN (queue full), -ESHUTDOWN or -ENOMEM.
 */
struct pool_task {
	void (*work)(struct pool_task *t);
	void (*done)(struct pool_task *t);
};
int pool_submit_task(void *pool, struct pool_task *t);

unsigned pool_workers(const struct pool *pool);
/* Jobs waiting for a worker (not counting those running). */
size_t pool_queued(struct pool *pool);

#endif
