/*
 * strmap.c - implementation of strmap.h. FNV-1a hashing; the table doubles
 * when live entries plus tombstones reach 3/4 of it, and is rebuilt (which
 * drops the tombstones) on every growth.
 */
#include "strmap.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char tomb_key[] = "";
#define TOMB tomb_key

static uint64_t hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

void strmap_clear(struct strmap *m)
{
	free(m->slots);
	*m = (struct strmap){0};
}

/* The slot holding key, or NULL. */
static struct strmap_slot *find(const struct strmap *m, const char *key)
{
	if (!m->cap)
		return NULL;
	for (size_t i = hash(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		struct strmap_slot *s = &m->slots[i];

		if (!s->key)
			return NULL;
		if (s->key != TOMB && strcmp(s->key, key) == 0)
			return s;
	}
}

void *strmap_get(const struct strmap *m, const char *key)
{
	struct strmap_slot *s = find(m, key);

	return s ? s->value : NULL;
}

static int grow(struct strmap *m)
{
	size_t cap = m->cap ? m->cap * 2 : 64;
	struct strmap_slot *slots;

	while (m->live * 2 >= cap)
		cap *= 2;
	slots = calloc(cap, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < m->cap; i++) {
		const struct strmap_slot *s = &m->slots[i];
		size_t k;

		if (!s->key || s->key == TOMB)
			continue;
		for (k = hash(s->key) & (cap - 1); slots[k].key; k = (k + 1) & (cap - 1))
			;
		slots[k] = *s;
	}
	free(m->slots);
	m->slots = slots;
	m->cap = cap;
	m->used = m->live;
	return 0;
}

int strmap_put(struct strmap *m, const char *key, void *value)
{
	struct strmap_slot *s = find(m, key);
	size_t i;

	if (s) {
		s->key = key;
		s->value = value;
		return 0;
	}
	if ((m->used + 1) * 4 >= m->cap * 3 && grow(m) != 0)
		return -ENOMEM;
	for (i = hash(key) & (m->cap - 1); m->slots[i].key && m->slots[i].key != TOMB;
	     i = (i + 1) & (m->cap - 1))
		;
	if (!m->slots[i].key)
		m->used++;
	m->slots[i] = (struct strmap_slot){key, value};
	m->live++;
	return 0;
}

void strmap_del(struct strmap *m, const char *key)
{
	struct strmap_slot *s = find(m, key);

	if (!s)
		return;
	s->key = TOMB;
	s->value = NULL;
	m->live--;
}
