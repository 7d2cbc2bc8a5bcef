/*
 * test_sb_frame.c - RFC 6242 framing of southbound/sb_frame.c: the head and
 * tail ocsd writes, the de-framer on chunked and end-of-message streams
 * (split anywhere, several messages back to back, never read past a
 * message's end), its refusals (bad chunk headers, empty messages, leading
 * zeros, oversize before the buffer grows), and a property test against an
 * independent encoder written here.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>

#include "sb_frame.h"

/* Feeds all of s in pieces of at most `piece` bytes, each also bounded by want(). */
static ssize_t feed_bounded(struct sb_deframer *d, const char *s, size_t n, size_t piece)
{
	size_t used = 0;
	while (used < n && !sb_deframer_done(d)) {
		size_t want = sb_deframer_want(d);
		if (!want)
			return d->error;
		size_t k = want < piece ? want : piece;
		if (k > n - used)
			k = n - used;
		ssize_t r = sb_deframer_feed(d, s + used, k);
		if (r < 0)
			return r;
		assert_int_equal(r, k); /* bounded by want: everything is taken */
		used += (size_t)r;
	}
	return (ssize_t)used;
}

static void test_head_tail(void **state)
{
	(void)state;
	char head[SB_FRAME_HEAD_MAX];
	size_t len;
	assert_int_equal(sb_frame_head(SB_FRAME_CHUNKED, 123, head), 6);
	assert_memory_equal(head, "\n#123\n", 6);
	assert_int_equal(sb_frame_head(SB_FRAME_CHUNKED, 4294967295u, head), 13);
	assert_int_equal(sb_frame_head(SB_FRAME_CHUNKED, 0, head), -EMSGSIZE);
	assert_int_equal(sb_frame_head(SB_FRAME_EOM, 10, head), 0);
	assert_string_equal(sb_frame_tail(SB_FRAME_CHUNKED, &len), "\n##\n");
	assert_int_equal(len, 4);
	assert_string_equal(sb_frame_tail(SB_FRAME_EOM, &len), "]]>]]>");
}

static void test_chunked_two_messages(void **state)
{
	(void)state;
	const char *s = "\n#4\n<a/>\n#3\nxyz\n##\n\n#2\nok\n##\n";
	struct sb_deframer d;
	sb_deframer_init(&d, SB_FRAME_CHUNKED, 0);
	for (size_t piece = 1; piece <= 64; piece++) {
		sb_deframer_reset(&d);
		ssize_t used = feed_bounded(&d, s, strlen(s), piece);
		assert_true(sb_deframer_done(&d));
		size_t len;
		assert_string_equal(sb_deframer_msg(&d, &len), "<a/>xyz");
		assert_int_equal(len, 7);
		assert_int_equal(used, 19); /* stopped at the first message's end */
		sb_deframer_reset(&d);
		assert_int_equal(feed_bounded(&d, s + used, strlen(s) - (size_t)used, piece), 10);
		assert_string_equal(sb_deframer_msg(&d, NULL), "ok");
	}
	/* unbounded feeding stops at the end of the message too */
	sb_deframer_reset(&d);
	assert_int_equal(sb_deframer_feed(&d, s, strlen(s)), 19);
	assert_int_equal(sb_deframer_want(&d), 0);
	sb_deframer_clear(&d);
	sb_deframer_clear(NULL);
}

static void expect_refused(enum sb_frame_mode mode, const char *s, size_t max, int code)
{
	struct sb_deframer d;
	sb_deframer_init(&d, mode, max);
	ssize_t r = sb_deframer_feed(&d, s, strlen(s));
	assert_int_equal(r, code);
	assert_false(sb_deframer_done(&d));
	assert_int_equal(sb_deframer_want(&d), 0);
	assert_int_equal(sb_deframer_feed(&d, "x", 1), code); /* sticky */
	assert_null(sb_deframer_msg(&d, NULL));
	sb_deframer_clear(&d);
}

static void test_chunked_refusals(void **state)
{
	(void)state;
	expect_refused(SB_FRAME_CHUNKED, "\n##\n", 0, -EPROTO);	     /* no chunk */
	expect_refused(SB_FRAME_CHUNKED, "#4\n<a/>", 0, -EPROTO);    /* no LF */
	expect_refused(SB_FRAME_CHUNKED, "\n#04\n<a/>", 0, -EPROTO); /* leading zero */
	expect_refused(SB_FRAME_CHUNKED, "\n#0\n", 0, -EPROTO);
	expect_refused(SB_FRAME_CHUNKED, "\n#-1\n", 0, -EPROTO);
	expect_refused(SB_FRAME_CHUNKED, "\n#4x\n", 0, -EPROTO);
	expect_refused(SB_FRAME_CHUNKED, "\n#4 \n", 0, -EPROTO);
	expect_refused(SB_FRAME_CHUNKED, "\n#12345678901\n", 0, -EPROTO); /* 11 digits */
	expect_refused(SB_FRAME_CHUNKED, "\n#4294967296\n", 0, -EPROTO);  /* > 2^32-1 */
	expect_refused(SB_FRAME_CHUNKED, "\n#2\nab\n#x", 0, -EPROTO);
	expect_refused(SB_FRAME_CHUNKED, "\n#2\nab\n##x", 0, -EPROTO);
	/* oversize: refused at the header, before any byte of the chunk */
	expect_refused(SB_FRAME_CHUNKED, "\n#101\n", 100, -EMSGSIZE);
	expect_refused(SB_FRAME_CHUNKED, "\n#60\n", 50, -EMSGSIZE);
	expect_refused(SB_FRAME_CHUNKED, "\n#4294967295\n", 0, -EMSGSIZE);
	/* two chunks that together pass the bound */
	char s[200];
	snprintf(s, sizeof(s), "\n#60\n%060d\n#41\n", 0);
	expect_refused(SB_FRAME_CHUNKED, s, 100, -EMSGSIZE);
	/* exactly at the bound is fine */
	struct sb_deframer d;
	sb_deframer_init(&d, SB_FRAME_CHUNKED, 100);
	snprintf(s, sizeof(s), "\n#60\n%060d\n#40\n%040d\n##\n", 0, 0);
	assert_int_equal(sb_deframer_feed(&d, s, strlen(s)), strlen(s));
	assert_true(sb_deframer_done(&d));
	sb_deframer_clear(&d);
}

static void test_eom(void **state)
{
	(void)state;
	/* the marker overlaps itself: "]]]>]]>" must not end early */
	const char *s = "<a>]]</a>]]]>]]>]]>]]>next]]>]]>";
	struct sb_deframer d;
	sb_deframer_init(&d, SB_FRAME_EOM, 0);
	for (size_t piece = 1; piece <= 40; piece++) {
		sb_deframer_reset(&d);
		ssize_t used = feed_bounded(&d, s, strlen(s), piece);
		assert_true(sb_deframer_done(&d));
		assert_string_equal(sb_deframer_msg(&d, NULL), "<a>]]</a>]");
		assert_int_equal(used, 16);
		sb_deframer_reset(&d);
		assert_int_equal(feed_bounded(&d, s + used, 6, piece), -EPROTO); /* empty message */
		used += 6;
		sb_deframer_reset(&d);
		assert_int_equal(feed_bounded(&d, s + used, strlen(s) - (size_t)used, piece), 10);
		assert_string_equal(sb_deframer_msg(&d, NULL), "next");
	}
	sb_deframer_clear(&d);
	expect_refused(SB_FRAME_EOM, "0123456789abcdef]]>]]>", 10, -EMSGSIZE);
}

/* The independent encoder: msg in chunks of random sizes, as RFC 6242 says. */
static size_t encode_chunks(const char *msg, size_t len, char *out, unsigned *seed)
{
	size_t o = 0, i = 0;
	while (i < len) {
		size_t k = 1 + (size_t)rand_r(seed) % 50;
		if (k > len - i)
			k = len - i;
		o += (size_t)sprintf(out + o, "\n#%zu\n", k);
		memcpy(out + o, msg + i, k);
		o += k;
		i += k;
	}
	memcpy(out + o, "\n##\n", 4);
	return o + 4;
}

static void test_property_round_trip(void **state)
{
	(void)state;
	unsigned seed = 7;
	char msg[600], stream[4 * 600 + 64];
	struct sb_deframer d;
	sb_deframer_init(&d, SB_FRAME_CHUNKED, 0);
	for (int round = 0; round < 2000; round++) {
		size_t len = 1 + (size_t)rand_r(&seed) % (sizeof(msg) - 1);
		for (size_t i = 0; i < len; i++)
			msg[i] = (char)(rand_r(&seed) % 256); /* any byte, '\n' and '#' included */
		size_t n = encode_chunks(msg, len, stream, &seed);
		sb_deframer_reset(&d);
		size_t piece = 1 + (size_t)rand_r(&seed) % 100;
		assert_int_equal(feed_bounded(&d, stream, n, piece), n);
		size_t got_len;
		const char *got = sb_deframer_msg(&d, &got_len);
		assert_non_null(got);
		assert_int_equal(got_len, len);
		assert_memory_equal(got, msg, len);
		/* and ocsd's own head/tail frame it the same way */
		char head[SB_FRAME_HEAD_MAX];
		size_t tail_len;
		ssize_t h = sb_frame_head(SB_FRAME_CHUNKED, len, head);
		const char *tail = sb_frame_tail(SB_FRAME_CHUNKED, &tail_len);
		memcpy(stream, head, (size_t)h);
		memcpy(stream + h, msg, len);
		memcpy(stream + (size_t)h + len, tail, tail_len);
		sb_deframer_reset(&d);
		assert_int_equal(sb_deframer_feed(&d, stream, (size_t)h + len + tail_len),
				 (size_t)h + len + tail_len);
		assert_memory_equal(sb_deframer_msg(&d, NULL), msg, len);
	}
	sb_deframer_clear(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_head_tail),
		cmocka_unit_test(test_chunked_two_messages),
		cmocka_unit_test(test_chunked_refusals),
		cmocka_unit_test(test_eom),
		cmocka_unit_test(test_property_round_trip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
