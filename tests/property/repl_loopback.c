/*
 * repl_loopback.c - implementation of repl_loopback.h: the store_repl.h
 * hooks of a leader whose log is the follower's copy itself.
 */
#include "repl_loopback.h"

#include "store_repl.h"

static int publish(void *ctx, const void *changeset, size_t len)
{
	return st_apply_changeset(ctx, changeset, len);
}

static int prepare(void *ctx)
{
	(void)ctx;
	return 0;
}

static void commit_failed(void *ctx)
{
	(void)ctx;
}

static const char *last_error(void *ctx)
{
	(void)ctx;
	return "";
}

static void destroy(void *ctx)
{
	(void)ctx; /* the copy is the caller's */
}

static const struct st_repl_hooks hooks = {prepare, publish, commit_failed, last_error, destroy};

void repl_loopback(struct st_store *leader, struct st_store *copy)
{
	st_set_repl(leader, &hooks, copy);
}
