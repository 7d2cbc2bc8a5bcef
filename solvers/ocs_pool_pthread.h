/*
 * ocs_pool_pthread.h - a struct ocs_pool backed by POSIX threads. This is
 * the only code under solvers/ that creates threads, and only when a caller
 * (ocsplan, a benchmark, the daemon) asks for a pool.
 *
 * Thread-safety: one run at a time per pool (runs from different threads
 * are serialized by the pool's lock). Destroy only when no run is active.
 */
#ifndef OCS_POOL_PTHREAD_H
#define OCS_POOL_PTHREAD_H

#include "ocs_pool.h"

struct ocs_pool_pthread;

/*
 * Starts threads - 1 worker threads (the calling thread works too during a
 * run). threads <= 1 gives a pool that runs serially. Returns NULL on
 * failure. Caller frees with ocs_pool_pthread_free().
 */
struct ocs_pool_pthread *ocs_pool_pthread_new(int threads);
/* Stops and joins the workers; accepts NULL. */
void ocs_pool_pthread_free(struct ocs_pool_pthread *pp);
/* The pool interface to hand to solvers (valid until the pool is freed). */
const struct ocs_pool *ocs_pool_pthread_pool(const struct ocs_pool_pthread *pp);

#endif
