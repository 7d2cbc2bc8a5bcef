/*
 * sb_frame.h - NETCONF message framing (RFC 6242) as ocsd does it on the
 * sessions it owns the RPC traffic of (sb_wire.h): chunked framing for
 * base:1.1 peers, end-of-message (]]>]]>) for base:1.0 ones. Pure code, no
 * I/O, so that the de-framer can be fuzzed on any byte stream
 * (tests/fuzz/fuzz_sb_frame.c).
 *
 * Sending: a message goes out as sb_frame_head() + body + sb_frame_tail(),
 * in ONE write (the caller leaves room for the head in front of the body).
 *
 * Receiving: a struct sb_deframer takes bytes of the stream and rebuilds one
 * message at a time. sb_deframer_want() says how many bytes the caller may
 * read from the transport without reading past the end of the message, so
 * that a transport shared with libnetconf2 is left exactly at a message
 * boundary (bytes past it would be lost to libnetconf2). Every size read from
 * the network is bounded: a message larger than max_bytes is refused
 * (-EMSGSIZE) before its buffer grows, and a chunk header is at most 13 bytes.
 *
 * A struct sb_deframer belongs to one thread at a time. Its members are
 * private to sb_frame.c (the struct is public only so that it can be
 * embedded).
 */
#ifndef OCS_SB_FRAME_H
#define OCS_SB_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum sb_frame_mode {
	SB_FRAME_CHUNKED = 0, /* base:1.1, RFC 6242 section 4.2 */
	SB_FRAME_EOM,	      /* base:1.0, the ]]>]]> end-of-message marker */
};

/* Longest head sb_frame_head() writes ("\n#4294967295\n"), with room to spare. */
#define SB_FRAME_HEAD_MAX 16

/*
 * Writes the bytes that go before a body of body_len bytes into head and
 * returns how many (0 for end-of-message framing, which has no head).
 * -EMSGSIZE (as a negative ssize_t) when a chunked body is larger than one
 * chunk may be (4294967295 bytes).
 */
ssize_t sb_frame_head(enum sb_frame_mode mode, size_t body_len, char head[SB_FRAME_HEAD_MAX]);
/* The bytes that end a message ("\n##\n" or "]]>]]>"); *len gets their length. */
const char *sb_frame_tail(enum sb_frame_mode mode, size_t *len);

struct sb_deframer {
	enum sb_frame_mode mode;
	size_t max_bytes; /* largest message accepted */
	char *msg;	  /* the message so far, NUL-terminated; owned */
	size_t len, cap;
	int state;	     /* see sb_frame.c */
	uint64_t chunk_left; /* chunked: bytes of the current chunk still to come */
	char head[SB_FRAME_HEAD_MAX];
	size_t head_len;
	size_t eom_match; /* end-of-message: how much of ]]>]]> the message ends with */
	int error;	  /* sticky: the first error */
};

/* Starts a de-framer (no allocation yet). max_bytes 0: 16 MiB. */
void sb_deframer_init(struct sb_deframer *d, enum sb_frame_mode mode, size_t max_bytes);
/* Forgets the current message (and any error) to take the next one; keeps the buffer. */
void sb_deframer_reset(struct sb_deframer *d);
/* Frees the buffer; d may be reused after sb_deframer_init(). NULL is fine. */
void sb_deframer_clear(struct sb_deframer *d);

/*
 * How many bytes the stream may be read up to without passing the end of
 * the current message: at least 1 while a message is being received, 0 once
 * it is complete or after an error.
 */
size_t sb_deframer_want(const struct sb_deframer *d);

/*
 * Takes up to n bytes of the stream and returns how many it used: all of
 * them, or fewer when the message ended inside them (the rest belongs to the
 * next message). A negative errno instead: -EPROTO the framing is broken
 * (bad chunk header, an empty message), -EMSGSIZE the message is larger than
 * max_bytes, -ENOMEM. Errors are sticky until sb_deframer_reset().
 */
ssize_t sb_deframer_feed(struct sb_deframer *d, const char *p, size_t n);

/* Whether a whole message is there. */
bool sb_deframer_done(const struct sb_deframer *d);
/* The complete message (NUL-terminated, without framing) and its length; NULL until done. */
const char *sb_deframer_msg(const struct sb_deframer *d, size_t *len);

#endif
