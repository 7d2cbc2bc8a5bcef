/*
 * strmap.h - a string-keyed hash index (open addressing, linear probing,
 * tombstones): the job manager's index of jobs by id and by idempotency
 * key, so lookups stay O(1) however many jobs the store keeps.
 *
 * Keys are not copied: each key must stay valid (and unchanged) while it is
 * in the map; typically it points into the value it maps to. Not
 * thread-safe (the loop thread owns the maps that use it).
 */
#ifndef OCSD_STRMAP_H
#define OCSD_STRMAP_H

#include <stddef.h>

struct strmap_slot {
	const char *key; /* NULL: empty; strmap_tomb: deleted */
	void *value;
};

struct strmap {
	struct strmap_slot *slots;
	size_t cap;  /* a power of two, or 0 */
	size_t used; /* live entries plus tombstones */
	size_t live;
};

/* Empty map: {0}. Free with strmap_clear() (accepts an empty map). */
void strmap_clear(struct strmap *m);
/* The value of key, or NULL. */
void *strmap_get(const struct strmap *m, const char *key);
/* Maps key to value (replacing a previous value). 0 or -ENOMEM (map unchanged). */
int strmap_put(struct strmap *m, const char *key, void *value);
/* Removes key if present. Never fails. */
void strmap_del(struct strmap *m, const char *key);

#endif
