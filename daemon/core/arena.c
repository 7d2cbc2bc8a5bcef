/*
 * arena.c - implementation of arena.h: a list of blocks, each allocation
 * its own block (replies are small; simplicity beats packing here).
 */
#include "arena.h"

#include <stdlib.h>
#include <string.h>

struct ar_block {
	struct ar_block *next;
	max_align_t data[];
};

void *ar_alloc(struct arena *ar, size_t size)
{
	struct ar_block *b = calloc(1, sizeof(*b) + (size ? size : 1));

	if (!b) {
		ar->failed = true;
		return NULL;
	}
	b->next = ar->blocks;
	ar->blocks = b;
	return b->data;
}

char *ar_strdup(struct arena *ar, const char *s)
{
	size_t n = strlen(s ? s : "") + 1;
	char *p = ar_alloc(ar, n);

	if (p)
		memcpy(p, s ? s : "", n);
	return p;
}

void ar_free_all(struct arena *ar)
{
	while (ar->blocks) {
		struct ar_block *next = ar->blocks->next;

		free(ar->blocks);
		ar->blocks = next;
	}
	ar->failed = false;
}
