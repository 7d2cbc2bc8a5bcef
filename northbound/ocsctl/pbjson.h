/*
 * pbjson.h - protobuf-c messages to and from JSON trees (jansson), driven
 * by the message descriptors, for ocsctl's --json output and job files.
 *
 * Field names are the proto names (snake_case); enums are written as their
 * names and read as names or numbers; int64 values are plain JSON numbers;
 * float and double as common/ocs_json.h writes numbers (6 decimals).
 * Output lists every field of a message (zero values included) and only
 * the member of a oneof that is set. Input refuses unknown fields, wrong
 * types, out-of-range numbers and two members of one oneof, naming the
 * field path ("placement.gpus[3].leaf: expected an integer, got string").
 * Repeated keys never reach pbjson_read(): ocs_json_parse() refuses them.
 *
 * Pure; thread-safe.
 */
#ifndef OCS_PBJSON_H
#define OCS_PBJSON_H

#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

#include <jansson.h>

/*
 * The message as a JSON object: a new reference (caller json_decref()s
 * it), NULL when out of memory or a string field is not UTF-8.
 */
json_t *pbjson_write(const ProtobufCMessage *m);
/*
 * Builds a message of type desc from a JSON object. Returns it (caller frees
 * with protobuf_c_message_free_unpacked(m, NULL)) or NULL with the field
 * path and problem in err.
 */
ProtobufCMessage *pbjson_read(const json_t *v, const ProtobufCMessageDescriptor *desc, char *err,
			      size_t err_len);

#endif
