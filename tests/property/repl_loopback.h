/*
 * repl_loopback.h - a replicated store without etcd, for tests and
 * benchmarks of a follower's view: every write on the leader store goes,
 * as its changeset, to the follower's copy (st_apply_changeset) before it
 * commits, as store_etcd.c delivers it once its log entry is stored.
 */
#ifndef OCSD_REPL_LOOPBACK_H
#define OCSD_REPL_LOOPBACK_H

struct st_store;

/* Makes leader's writes reach copy (both from st_open_memory); copy must outlive leader. */
void repl_loopback(struct st_store *leader, struct st_store *copy);

#endif
