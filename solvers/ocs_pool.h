/*
 * ocs_pool.h - the one way a solver runs work in parallel: the caller passes
 * a pool, the solver hands it a function and a count. Solvers never create
 * threads themselves; a NULL pool runs everything serially in the caller's
 * thread, and a solver's result must not depend on which one it got.
 *
 * run(ctx, fn, arg, n) calls fn(arg, i) exactly once for each i in 0..n-1,
 * possibly from several threads at once, and returns when all calls are
 * done. fn must only write to slots of its own i.
 *
 * ocs_pool_pthread.h provides an implementation on POSIX threads for the
 * ocsplan tool, the benchmarks and the daemon's solver workers.
 */
#ifndef OCS_POOL_H
#define OCS_POOL_H

#include <stddef.h>

struct ocs_pool {
	void (*run)(void *ctx, void (*fn)(void *arg, size_t i), void *arg, size_t n);
	void *ctx;
};

/* Runs fn over 0..n-1 on pool, or serially when pool is NULL. */
static inline void ocs_pool_run(const struct ocs_pool *pool, void (*fn)(void *arg, size_t i),
				void *arg, size_t n)
{
	if (pool && pool->run) {
		pool->run(pool->ctx, fn, arg, n);
		return;
	}
	for (size_t i = 0; i < n; i++)
		fn(arg, i);
}

#endif
