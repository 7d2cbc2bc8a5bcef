/*
 * pbjson.h - protobuf-c messages to and from JSON (solvers/json.h), driven
 * by the message descriptors, for ocsctl's --json output and job files.
 *
 * Field names are the proto names (snake_case); enums are written as their
 * names and read as names or numbers; int64 values are plain JSON numbers.
 * Output lists every field of a message (zero values included) and only
 * the member of a oneof that is set. Input refuses unknown fields, wrong
 * types, out-of-range numbers and two members of one oneof, naming the
 * field path ("placement.gpus[3].leaf: expected an integer, got string").
 *
 * Pure; thread-safe.
 */
#ifndef OCS_PBJSON_H
#define OCS_PBJSON_H

#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

#include "json.h"

void pbjson_write(struct json_writer *w, const ProtobufCMessage *m);
/*
 * Builds a message of type desc from a JSON object. Returns it (caller frees
 * with protobuf_c_message_free_unpacked(m, NULL)) or NULL with the field
 * path and problem in err.
 */
ProtobufCMessage *pbjson_read(const struct json_value *v, const ProtobufCMessageDescriptor *desc,
			      char *err, size_t err_len);

#endif
