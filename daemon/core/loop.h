/*
 * loop.h - the daemon's event loop: a libevent base owned by one thread,
 * plus the one way other threads talk to it, loop_post().
 *
 * Every piece of mutable daemon state (fabric, jobs, circuits, transactions,
 * metrics) is touched only by callbacks running on the loop thread. gRPC
 * threads, executor tasks and device sessions hand their results over with
 * loop_post(): the caller's node (embedded in its own struct, so posting
 * never allocates and cannot fail) is queued under one mutex, and a single
 * eventfd wake-up (written only when the queue goes from empty to
 * non-empty) makes the loop run the nodes, in posting order.
 *
 * Thread-safety: loop_post() and loop_stop() may be called from any thread;
 * everything else only from the thread that runs loop_run().
 */
#ifndef OCSD_LOOP_H
#define OCSD_LOOP_H

#include <stddef.h>

/* The struct of type `type` whose member `member` is at ptr. */
#define OCSD_CONTAINER_OF(ptr, type, member)                                                       \
	((type *)(void *)((char *)(ptr)-offsetof(type, member)))

struct event_base;
struct loop;

/*
 * A posted callback: embed one in the struct that carries the work and get
 * the struct back in fn with OCSD_CONTAINER_OF. Both fields are the loop's
 * from loop_post() until fn is called; fn may free or re-post the node.
 */
struct loop_node {
	void (*fn)(struct loop_node *n);
	struct loop_node *next;
};

/*
 * Caller frees with loop_free() (accepts NULL) after loop_run() returned
 * and after stopping every thread that may still post (gRPC server,
 * executor): loop_free() runs the nodes still queued, including nodes
 * those callbacks post, on the calling thread, so no posted work is lost.
 * A post from another thread once loop_free() has begun is a caller bug.
 */
struct loop *loop_new(void);
void loop_free(struct loop *loop);
struct event_base *loop_base(struct loop *loop);

/*
 * Queues node to run fn(node) on the loop thread. Cannot fail and never
 * allocates; node must stay valid until fn runs.
 */
void loop_post(struct loop *loop, struct loop_node *node, void (*fn)(struct loop_node *node));

/* Runs the nodes posted so far, now, on the calling (loop) thread. */
void loop_run_posted(struct loop *loop);

/* Runs until loop_stop(); returns 0, or -EIO if libevent failed. */
int loop_run(struct loop *loop);
void loop_stop(struct loop *loop);

#endif
