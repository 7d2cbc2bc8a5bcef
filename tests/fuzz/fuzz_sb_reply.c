/*
 * fuzz_sb_reply.c - libFuzzer harness: the southbound's NETCONF reply
 * scanner (southbound/sb_reply.c) on arbitrary text, as a device could send
 * it: the first byte picks the entry point (sb_reply_scan with or without
 * a message-id, then the cross-connect and bundle readers on any <data>;
 * or the readers straight on the input) and the transceiver node asked for.
 *
 * Checks beyond "no crash, no leak, no UB": a reply's kind is one of the
 * five; <data> lies inside the message; the error string is terminated
 * within its array; cross-connects and bundles come sorted, and empty
 * results come as NULL.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sb_reply.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void read_data(const char *d, size_t len, uint32_t node)
{
	struct sb_xc_state *x = NULL;
	size_t n = 0;
	if (sb_reply_xcs(d, len, &x, &n) == 0) {
		for (size_t i = 1; i < n; i++)
			if (x[i - 1].in > x[i].in ||
			    (x[i - 1].in == x[i].in && x[i - 1].out > x[i].out))
				abort();
	}
	if ((n == 0) != (x == NULL))
		abort();
	free(x);
	struct sb_bundle_state *b = NULL;
	bool faulty = false;
	n = 0;
	if (sb_reply_bundles(d, len, node, &b, &n, &faulty) == 0) {
		for (size_t i = 1; i < n; i++)
			if (b[i - 1].set.bundle > b[i].set.bundle)
				abort();
	}
	if ((n == 0) != (b == NULL))
		abort();
	free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const char *s = (const char *)data + 1;
	size_t n = size - 1;
	uint32_t node = data[0] >> 2;
	if (data[0] & 2) {
		read_data(s, n, node);
		return 0;
	}
	struct sb_reply r;
	int rc = sb_reply_scan(s, n, data[0] & 1 ? "ocsd-1" : NULL, &r);
	if (memchr(r.error, '\0', sizeof(r.error)) == NULL)
		abort();
	if (rc)
		return 0;
	if (r.kind > SB_REPLY_NOTIFICATION)
		abort();
	if (r.kind == SB_REPLY_DATA) {
		if (r.data < s || r.data + r.data_len > s + n)
			abort();
		read_data(r.data, r.data_len, node);
	}
	return 0;
}
