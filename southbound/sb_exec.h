/*
 * sb_exec.h - where the transaction engine runs its work: the caller's
 * executor, the way hiredis takes the caller's event loop. southbound never
 * depends on daemon/, so it declares this small interface; the daemon
 * passes an adapter over its one executor (daemon/core/executor_sb.c), and tools and
 * tests that have no executor use the small pool below.
 *
 * A task is embedded in the submitter's struct (the engine's per-device
 * context); the executor links it through `next` while it is queued and
 * never touches it once run was called. submit must not fail and must be
 * callable from any thread, tasks included. The engine never blocks a
 * task waiting for another task (each step's last task starts the next),
 * so any number of threads, one included, is enough.
 *
 * The loop (issue 13, fourth pass): coroutines on the calling thread that
 * wait for their sockets through one epoll instead of each blocking a
 * thread. The engine runs a step's device work as one coroutine per device
 * inside one executor task: every device sends its RPC, then the replies
 * are read as their sockets become readable, with no thread hand-off. Code
 * running in a coroutine is ordinary blocking code that waits only through
 * sb_exec_wait_fd() / sb_exec_sleep_until_us(), which yield to the loop
 * there and simply poll / sleep anywhere else; anything else that blocks
 * (a connect) blocks the whole loop for that long.
 */
#ifndef OCS_SB_EXEC_H
#define OCS_SB_EXEC_H

#include <stdint.h>

struct sb_exec_task {
	void (*run)(struct sb_exec_task *t);
	struct sb_exec_task *next; /* the executor's, while queued */
};

struct sb_executor {
	void *ctx;
	void (*submit)(void *ctx, struct sb_exec_task *t);
};

/*
 * The default adapter: `threads` POSIX threads (1..1024) and a FIFO. Free
 * with sb_exec_pool_free() (accepts NULL): it runs every task queued so far
 * (and those they submit), then joins the threads.
 * Thread-safety: the executor's submit from any thread; new/free by the owner.
 */
struct sb_exec_pool;

int sb_exec_pool_new(int threads, struct sb_exec_pool **out);
void sb_exec_pool_free(struct sb_exec_pool *p);
/* The interface to hand to sb_engine_new_on() (valid until the pool is freed). */
struct sb_executor sb_exec_pool_executor(struct sb_exec_pool *p);

/*
 * A loop of coroutines (each on its own stack of SB_EXEC_STACK bytes, kept
 * for the next run). Not thread-safe: one thread at a time uses a loop;
 * new/free from any thread while it does not run.
 */
struct sb_exec_loop;

#define SB_EXEC_STACK (256u << 10)

/* 0, -ENOMEM, or the negative errno of epoll_create1(). */
int sb_exec_loop_new(struct sb_exec_loop **out);
/* Frees the loop and its stacks; NULL is fine. Not while it runs. */
void sb_exec_loop_free(struct sb_exec_loop *l);
/* Adds a coroutine that runs fn(arg) at the next sb_exec_loop_run(): 0, -ENOMEM, -EBUSY (running).
 */
int sb_exec_loop_add(struct sb_exec_loop *l, void (*fn)(void *arg), void *arg);
/*
 * Runs every coroutine added on the calling thread until each one has
 * returned, then forgets them (their stacks stay). Called inside a
 * coroutine of another loop, it blocks that loop until it returns. 0, or
 * -ENOMEM (a stack could not be mapped: nothing ran, the coroutines are
 * forgotten).
 */
int sb_exec_loop_run(struct sb_exec_loop *l);

/*
 * Waits until fd is ready for `events` (POLLIN and/or POLLOUT; an error or
 * hang-up counts as ready) or deadline_ms (CLOCK_MONOTONIC ms, sb_now_ms())
 * passes: 1 ready (possibly spuriously: try the I/O again), 0 deadline
 * passed, negative errno. In a coroutine it yields to its loop; elsewhere
 * it poll()s.
 */
int sb_exec_wait_fd(int fd, short events, int64_t deadline_ms);
/* Sleeps until when_us (CLOCK_MONOTONIC us); in a coroutine, yields until then. */
void sb_exec_sleep_until_us(int64_t when_us);

#endif
