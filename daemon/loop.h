/*
 * loop.h - the daemon's event loop: a libevent base owned by one thread,
 * plus the one way other threads talk to it, loop_post().
 *
 * Every piece of mutable daemon state (fabric, jobs, circuits, transactions,
 * metrics) is touched only by callbacks running on the loop thread. gRPC
 * threads, solver workers and device sessions hand their results over with
 * loop_post(): tasks queue under one mutex and a single eventfd wake-up
 * (written only when the queue goes from empty to non-empty) makes the loop
 * run them, in posting order.
 *
 * Thread-safety: loop_post() and loop_stop() may be called from any thread;
 * everything else only from the thread that runs loop_run().
 */
#ifndef OCSD_LOOP_H
#define OCSD_LOOP_H

struct event_base;
struct loop;

/* Caller frees with loop_free() (accepts NULL) after loop_run() returned. */
struct loop *loop_new(void);
void loop_free(struct loop *loop);
struct event_base *loop_base(struct loop *loop);

/*
 * Queues fn(arg) to run on the loop thread. Returns 0, -ENOMEM, or
 * -ESHUTDOWN once loop_free() has begun (then fn is not called and the
 * caller still owns arg). Tasks still queued when the loop is freed are run
 * by loop_free() itself, so no posted work is lost silently.
 */
int loop_post(struct loop *loop, void (*fn)(void *arg), void *arg);

/* Runs until loop_stop(); returns 0, or -EIO if libevent failed. */
int loop_run(struct loop *loop);
void loop_stop(struct loop *loop);

#endif
