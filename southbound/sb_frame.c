/*
 * sb_frame.c - RFC 6242 framing and de-framing (API in sb_frame.h).
 *
 * De-framer states:
 *
 *   chunked:  HEAD --"\n#<size>\n"--> BODY --size bytes--> HEAD
 *             HEAD --"\n##\n" (after at least one chunk)--> DONE
 *   eom:      EOM  --bytes up to and including "]]>]]>"--> DONE
 *   any state --bad framing / too large / no memory--> error (sticky)
 *
 * A chunk header is read a few bytes at a time (sb_deframer_want() never
 * asks past its end) and checked byte by byte: "\n", "#", then either "#\n"
 * or a size of 1 to 10 digits without a leading zero, at most 4294967295,
 * ended by "\n". The end-of-message marker is found with a running match of
 * its prefix (the marker can overlap itself: "]]>]]]>]]>").
 */
#include "sb_frame.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_MAX_BYTES (16u << 20)
#define CHUNK_MAX	  4294967295ull
#define EOM_MARK	  "]]>]]>"
#define EOM_LEN		  6

enum { ST_HEAD, ST_BODY, ST_EOM, ST_DONE };

ssize_t sb_frame_head(enum sb_frame_mode mode, size_t body_len, char head[SB_FRAME_HEAD_MAX])
{
	if (mode == SB_FRAME_EOM)
		return 0;
	if (!body_len || (uint64_t)body_len > CHUNK_MAX)
		return -EMSGSIZE;
	return snprintf(head, SB_FRAME_HEAD_MAX, "\n#%zu\n", body_len);
}

const char *sb_frame_tail(enum sb_frame_mode mode, size_t *len)
{
	const char *t = mode == SB_FRAME_EOM ? EOM_MARK : "\n##\n";
	*len = strlen(t);
	return t;
}

void sb_deframer_init(struct sb_deframer *d, enum sb_frame_mode mode, size_t max_bytes)
{
	*d = (struct sb_deframer){.mode = mode,
				  .max_bytes = max_bytes ? max_bytes : DEFAULT_MAX_BYTES};
	sb_deframer_reset(d);
}

void sb_deframer_reset(struct sb_deframer *d)
{
	d->len = 0;
	if (d->msg)
		d->msg[0] = '\0';
	d->state = d->mode == SB_FRAME_EOM ? ST_EOM : ST_HEAD;
	d->chunk_left = 0;
	d->head_len = 0;
	d->eom_match = 0;
	d->error = 0;
}

void sb_deframer_clear(struct sb_deframer *d)
{
	if (!d)
		return;
	free(d->msg);
	d->msg = NULL;
	d->cap = 0;
	d->len = 0;
}

size_t sb_deframer_want(const struct sb_deframer *d)
{
	if (d->error)
		return 0;
	switch (d->state) {
	case ST_HEAD:
		return d->head_len < 4 ? 4 - d->head_len : 1;
	case ST_BODY:
		return d->chunk_left > SIZE_MAX ? SIZE_MAX : (size_t)d->chunk_left;
	case ST_EOM:
		return EOM_LEN - d->eom_match;
	default:
		return 0;
	}
}

bool sb_deframer_done(const struct sb_deframer *d)
{
	return !d->error && d->state == ST_DONE;
}

const char *sb_deframer_msg(const struct sb_deframer *d, size_t *len)
{
	if (!sb_deframer_done(d))
		return NULL;
	if (len)
		*len = d->len;
	return d->msg;
}

static ssize_t fail(struct sb_deframer *d, int code)
{
	d->error = code;
	return code;
}

/* Makes room for `more` bytes after len (plus the NUL), never past the bound `limit`. */
static int reserve(struct sb_deframer *d, size_t more, size_t limit)
{
	size_t need = d->len + more + 1;
	if (need <= d->cap)
		return 0;
	size_t cap = d->cap ? d->cap * 2 : 4096;
	if (cap < need)
		cap = need;
	if (cap > limit + 1)
		cap = limit + 1;
	if (cap < need)
		return -EMSGSIZE;
	char *m = realloc(d->msg, cap);
	if (!m)
		return -ENOMEM;
	d->msg = m;
	d->cap = cap;
	return 0;
}

/* One byte of a chunk header (or of the end-of-message "\n##\n"). */
static int head_byte(struct sb_deframer *d, char c)
{
	size_t i = d->head_len;
	if (i >= SB_FRAME_HEAD_MAX - 1)
		return -EPROTO;
	d->head[d->head_len++] = c;
	if (i == 0)
		return c == '\n' ? 0 : -EPROTO;
	if (i == 1)
		return c == '#' ? 0 : -EPROTO;
	if (i == 2)
		return c == '#' || (c >= '1' && c <= '9') ? 0 : -EPROTO;
	if (d->head[2] == '#') { /* "\n##" must end with "\n": the end of the message */
		if (c != '\n' || !d->len)
			return -EPROTO;
		d->state = ST_DONE;
		d->msg[d->len] = '\0';
		return 0;
	}
	if (c >= '0' && c <= '9')
		return i - 2 < 10 ? 0 : -EPROTO; /* at most 10 digits */
	if (c != '\n')
		return -EPROTO;
	d->head[i] = '\0';
	uint64_t size = strtoull(d->head + 2, NULL, 10);
	if (size > CHUNK_MAX)
		return -EPROTO;
	if (size > d->max_bytes - d->len)
		return -EMSGSIZE;
	int rc = reserve(d, (size_t)size, d->max_bytes);
	if (rc)
		return rc;
	d->chunk_left = size;
	d->head_len = 0;
	d->state = ST_BODY;
	return 0;
}

/* One byte of an end-of-message framed message. */
static int eom_byte(struct sb_deframer *d, char c)
{
	static const size_t back[EOM_LEN] = {0, 1, 0, 1, 2, 3}; /* prefix function of ]]>]]> */
	int rc = reserve(d, 1, d->max_bytes + EOM_LEN);
	if (rc)
		return rc;
	d->msg[d->len++] = c;
	size_t m = d->eom_match;
	while (m && EOM_MARK[m] != c)
		m = back[m - 1];
	if (EOM_MARK[m] == c)
		m++;
	d->eom_match = m;
	if (m < EOM_LEN)
		return 0;
	d->len -= EOM_LEN;
	d->msg[d->len] = '\0';
	if (!d->len)
		return -EPROTO;
	d->state = ST_DONE;
	return 0;
}

ssize_t sb_deframer_feed(struct sb_deframer *d, const char *p, size_t n)
{
	if (d->error)
		return d->error;
	size_t used = 0;
	while (used < n && d->state != ST_DONE) {
		int rc = 0;
		if (d->state == ST_BODY) {
			size_t take = n - used;
			if (take > d->chunk_left)
				take = (size_t)d->chunk_left;
			memcpy(d->msg + d->len, p + used, take);
			d->len += take;
			d->msg[d->len] = '\0';
			d->chunk_left -= take;
			used += take;
			if (!d->chunk_left)
				d->state = ST_HEAD;
			continue;
		}
		if (d->state == ST_HEAD)
			rc = head_byte(d, p[used]);
		else
			rc = eom_byte(d, p[used]);
		if (rc)
			return fail(d, rc);
		used++;
	}
	return (ssize_t)used;
}
