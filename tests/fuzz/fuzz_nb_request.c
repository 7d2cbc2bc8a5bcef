/*
 * fuzz_nb_request.c - libFuzzer harness: the northbound's decoding and
 * validation of every request type (nb_decode_request: the wire check for
 * NUL bytes, protobuf-c unpacking, nb_validate_request against lab-fabric
 * limits with the daemon's planner list). The first byte picks the method,
 * the rest is the request message as it would arrive from gRPC. A decoded
 * request must pack again to exactly its computed size, and a refusal must
 * carry a gRPC code and no message.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nb_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct nb_limits lab_limits = {
	.pods = 4,
	.leaves_per_pod = 2,
	.gpus_per_leaf = 8,
	.groups = 4,
	.planners = {{"leaf-centric", false},
		     {"pod-centric", false},
		     {"delta-fast", true},
		     {"prop-alloc", true}},
	.n_planners = 4,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	ProtobufCMessage *msg = NULL;
	struct nb_error err;
	enum nb_method m;
	int rc;

	if (size < 1)
		return 0;
	m = (enum nb_method)(data[0] % NB_METHOD_COUNT);
	memset(&err, 0, sizeof(err));
	rc = nb_decode_request(m, data + 1, size - 1, &lab_limits, 0, &msg, &err);
	if (rc == 0) {
		size_t n = protobuf_c_message_get_packed_size(msg);
		uint8_t *buf = malloc(n ? n : 1);

		if (!buf || protobuf_c_message_pack(msg, buf) != n)
			abort();
		free(buf);
		protobuf_c_message_free_unpacked(msg, NULL);
	} else if (err.code == NB_OK || msg != NULL) {
		abort(); /* a refusal always carries a status, and nothing to free */
	}
	return 0;
}
