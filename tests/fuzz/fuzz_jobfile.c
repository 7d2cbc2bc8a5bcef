/*
 * fuzz_jobfile.c - libFuzzer harness: ocsctl's job files. The text goes
 * through what `ocsctl job submit FILE` does before anything is sent:
 * ocs_json_parse (duplicate keys refused) and pbjson_read into an
 * ocs.v1.JobSpec. A job read is written back to JSON (pbjson_write) and
 * read again: it must give the same packed message (the round trip of job
 * files and --json output agrees).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ocs/v1/jobs.pb-c.h"
#include "ocs_json.h"
#include "pbjson.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Packs m into a new buffer (caller frees); *n its size. */
static uint8_t *pack(const ProtobufCMessage *m, size_t *n)
{
	uint8_t *buf;

	*n = protobuf_c_message_get_packed_size(m);
	buf = malloc(*n ? *n : 1);
	if (!buf)
		abort();
	protobuf_c_message_pack(m, buf);
	return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const ProtobufCMessageDescriptor *d = &ocs__v1__job_spec__descriptor;
	struct ocs_json_error jerr;
	ProtobufCMessage *m, *again;
	json_t *v, *w;
	char err[512];
	uint8_t *a, *b;
	size_t na, nb;

	v = ocs_json_parse((const char *)data, size, &jerr);
	if (!v)
		return 0;
	m = pbjson_read(v, d, err, sizeof(err));
	json_decref(v);
	if (!m) {
		if (!err[0])
			abort(); /* a refusal names the field and the problem */
		return 0;
	}
	w = pbjson_write(m);
	if (w) { /* NULL only for strings that are not UTF-8 */
		again = pbjson_read(w, d, err, sizeof(err));
		if (!again)
			abort(); /* what ocsctl writes, it reads */
		a = pack(m, &na);
		b = pack(again, &nb);
		if (na != nb || memcmp(a, b, na) != 0)
			abort();
		free(a);
		free(b);
		protobuf_c_message_free_unpacked(again, NULL);
		json_decref(w);
	}
	protobuf_c_message_free_unpacked(m, NULL);
	return 0;
}
