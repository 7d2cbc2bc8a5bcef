/*
 * nb_decode.c - a request's bytes to its message: the size bound, a string
 * field that holds a NUL byte refused with its path (protobuf-c would cut
 * it short without a word), unpacking, then nb_validate_request()
 * (nb_validate.c) on the message. Pure functions: no globals, no I/O;
 * thread-safe.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "nb_internal.h"

#define NB_WIRE_MAX_DEPTH 16

/* Reads a base-128 varint at *p (< end); false when malformed. */
static bool wire_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	*v = 0;
	for (int shift = 0; shift < 64 && *p < end; shift += 7) {
		uint8_t b = *(*p)++;

		*v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return true;
	}
	return false;
}

/*
 * protobuf-c hands a string field over as a C string: a NUL byte inside it
 * silently cuts it ("nul\0A" and "nul\0B" would both be job "nul"). So
 * every string field is checked on the wire, before decoding, recursively
 * through sub-messages; the refusal names the field by its path
 * ("placement.gpus[2].host"). Malformed input is left to
 * protobuf_c_message_unpack, which refuses it.
 */
static int check_wire_strings(const ProtobufCMessageDescriptor *d, const uint8_t *p,
			      const uint8_t *end, const char *prefix, int depth,
			      struct nb_error *err)
{
	unsigned seen[64] = {0}; /* occurrences per field index: repeated fields' [i] */
	char path[sizeof(err->field)];

	while (p < end) {
		const ProtobufCFieldDescriptor *f;
		uint64_t key, n;

		if (!wire_varint(&p, end, &key))
			return 0;
		switch (key & 7) {
		case 0:
			if (!wire_varint(&p, end, &n))
				return 0;
			continue;
		case 1:
			p += end - p < 8 ? end - p : 8;
			continue;
		case 5:
			p += end - p < 4 ? end - p : 4;
			continue;
		case 2:
			break;
		default:
			return 0;
		}
		if (!wire_varint(&p, end, &n) || n > (uint64_t)(end - p))
			return 0;
		f = protobuf_c_message_descriptor_get_field(d, (unsigned)(key >> 3));
		if (f) {
			size_t idx = (size_t)(f - d->fields);
			unsigned i = idx < 64 ? seen[idx]++ : 0;

			if (f->label == PROTOBUF_C_LABEL_REPEATED)
				snprintf(path, sizeof(path), "%s%s[%u]", prefix, f->name, i);
			else
				snprintf(path, sizeof(path), "%s%s", prefix, f->name);
			if (f->type == PROTOBUF_C_TYPE_STRING) {
				const uint8_t *nul = memchr(p, 0, (size_t)n);

				if (nul)
					return nb_error_set(
						err, NB_INVALID_ARGUMENT, path,
						"byte 0x00 at offset %zu is not allowed "
						"(a NUL byte would cut the string short)",
						(size_t)(nul - p));
			} else if (f->type == PROTOBUF_C_TYPE_MESSAGE &&
				   depth < NB_WIRE_MAX_DEPTH) {
				char sub[sizeof(err->field) + 1]; /* path and "." */

				snprintf(sub, sizeof(sub), "%s.", path);
				if (check_wire_strings(f->descriptor, p, p + n, sub, depth + 1,
						       err))
					return -EINVAL;
			}
		}
		p += n;
	}
	return 0;
}

int nb_decode_request(enum nb_method m, const uint8_t *data, size_t len,
		      const struct nb_limits *limits, size_t max_message_bytes,
		      ProtobufCMessage **out, struct nb_error *err)
{
	const struct nb_method_info *info = nb_method_info(m);
	ProtobufCMessage *msg;

	*out = NULL;
	if (!info)
		return nb_error_set(err, NB_UNIMPLEMENTED, "", "unknown method %d", (int)m);
	if (max_message_bytes == 0)
		max_message_bytes = NB_DEFAULT_MAX_MESSAGE_BYTES;
	if (len > max_message_bytes) {
		nb_error_set(err, NB_RESOURCE_EXHAUSTED, "request",
			     "%zu bytes exceed the limit of %zu bytes", len, max_message_bytes);
		return -EMSGSIZE;
	}
	if (check_wire_strings(info->request, data, data + len, "", 0, err))
		return -EINVAL;
	msg = protobuf_c_message_unpack(info->request, NULL, len, data);
	if (!msg)
		return nb_error_set(err, NB_INVALID_ARGUMENT, "request",
				    "not a valid %s message (%zu bytes)", info->request->name, len);
	if (nb_validate_request(m, msg, limits, err)) {
		protobuf_c_message_free_unpacked(msg, NULL);
		return -EINVAL;
	}
	*out = msg;
	return 0;
}
