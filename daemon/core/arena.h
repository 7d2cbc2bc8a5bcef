/*
 * arena.h - a per-request allocation arena: many small allocations (the
 * nested protobuf messages of one reply), one free. Aborting on exhaustion
 * is not an option in a daemon, so every allocation can fail: the arena
 * then remembers it (ar_failed) and the caller answers with an error.
 *
 * Not thread-safe; one arena per request.
 */
#ifndef OCSD_ARENA_H
#define OCSD_ARENA_H

#include <stdbool.h>
#include <stddef.h>

struct arena {
	struct ar_block *blocks;
	bool failed;
};

/* Zeroed memory owned by the arena; NULL (and ar->failed set) on failure. */
void *ar_alloc(struct arena *ar, size_t size);
char *ar_strdup(struct arena *ar, const char *s);
/* Frees everything the arena handed out; the arena can be reused. */
void ar_free_all(struct arena *ar);

#endif
