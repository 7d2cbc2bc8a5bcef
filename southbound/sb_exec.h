/*
 * sb_exec.h - where the transaction engine runs its work: the caller's
 * executor, the way hiredis takes the caller's event loop. southbound never
 * depends on daemon/, so it declares this small interface; the daemon
 * passes an adapter over its one executor (daemon/exec_sb.c), and tools and
 * tests that have no executor use the small pool below.
 *
 * A task is embedded in the submitter's struct (the engine's per-device
 * context); the executor links it through `next` while it is queued and
 * never touches it once run was called. submit must not fail and must be
 * callable from any thread, tasks included. The engine never blocks a
 * task waiting for another task (each step's last task starts the next),
 * so any number of threads, one included, is enough.
 */
#ifndef OCS_SB_EXEC_H
#define OCS_SB_EXEC_H

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

#endif
