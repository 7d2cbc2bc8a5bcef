/*
 * fuzz_sb_frame.c - libFuzzer harness: the southbound's RFC 6242 de-framer
 * (southbound/sb_frame.c) on arbitrary byte streams, the way sb_wire feeds
 * it from a device: the first byte picks the framing (chunked or
 * end-of-message), the largest message accepted and the size of the reads;
 * the rest is the stream, taken message after message.
 *
 * Checks beyond "no crash, no leak, no UB": reads bounded by
 * sb_deframer_want() are always taken whole and never pass a message's end
 * (the stream is then re-fed unbounded from the same place and must end at
 * the same byte); a message is never larger than the bound; and a chunked
 * message framed again with sb_frame_head()/sb_frame_tail() de-frames to
 * the same bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sb_frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Re-frames a chunked message in one chunk and checks it comes back whole. */
static void round_trip(const char *msg, size_t len)
{
	char head[SB_FRAME_HEAD_MAX];
	size_t tail_len;
	ssize_t h = sb_frame_head(SB_FRAME_CHUNKED, len, head);
	if (h <= 0)
		abort();
	const char *tail = sb_frame_tail(SB_FRAME_CHUNKED, &tail_len);
	size_t n = (size_t)h + len + tail_len;
	char *s = malloc(n);
	if (!s)
		abort();
	memcpy(s, head, (size_t)h);
	memcpy(s + h, msg, len);
	memcpy(s + (size_t)h + len, tail, tail_len);
	struct sb_deframer d;
	sb_deframer_init(&d, SB_FRAME_CHUNKED, len);
	size_t got_len = 0;
	const char *got = NULL;
	if (sb_deframer_feed(&d, s, n) != (ssize_t)n || !(got = sb_deframer_msg(&d, &got_len)) ||
	    got_len != len || memcmp(got, msg, len))
		abort();
	sb_deframer_clear(&d);
	free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	enum sb_frame_mode mode = data[0] & 1 ? SB_FRAME_EOM : SB_FRAME_CHUNKED;
	size_t max_bytes = (data[0] & 2) ? 64 : 4096;
	size_t piece = 1 + (size_t)(data[0] >> 2) * 3;
	const char *s = (const char *)data + 1;
	size_t n = size - 1, at = 0;
	struct sb_deframer d, u;
	sb_deframer_init(&d, mode, max_bytes);
	sb_deframer_init(&u, mode, max_bytes);
	while (at < n) {
		sb_deframer_reset(&d);
		size_t start = at;
		int err = 0;
		while (at < n && !sb_deframer_done(&d)) {
			size_t want = sb_deframer_want(&d);
			if (!want)
				abort(); /* want is 0 only when done or failed */
			size_t k = want < piece ? want : piece;
			if (k > n - at)
				k = n - at;
			ssize_t r = sb_deframer_feed(&d, s + at, k);
			if (r < 0) {
				err = (int)r;
				break;
			}
			if ((size_t)r != k)
				abort(); /* a bounded read is taken whole */
			at += k;
		}
		/* the same bytes fed at once stop at the same place, with the same verdict */
		sb_deframer_reset(&u);
		ssize_t r = sb_deframer_feed(&u, s + start, n - start);
		if (err) {
			if (r != err)
				abort();
			break;
		}
		if (r < 0 || start + (size_t)r != at ||
		    sb_deframer_done(&u) != sb_deframer_done(&d))
			abort();
		if (!sb_deframer_done(&d))
			break; /* the stream ended inside a message */
		size_t len;
		const char *msg = sb_deframer_msg(&d, &len);
		if (!msg || len > max_bytes || msg[len] != '\0' || sb_deframer_want(&d))
			abort();
		if (mode == SB_FRAME_CHUNKED)
			round_trip(msg, len);
	}
	sb_deframer_clear(&d);
	sb_deframer_clear(&u);
	return 0;
}
