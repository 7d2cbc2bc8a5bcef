/*
 * pbjson.c - protobuf-c <-> JSON through the descriptors (see pbjson.h).
 */
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pbjson.h"

#define MEMBER(type, msg, offset) (*(type *)((char *)(msg) + (offset)))

static void write_value(struct json_writer *w, const ProtobufCFieldDescriptor *f, const void *p)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		json_w_int(w, *(const int32_t *)p);
		break;
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		json_w_int(w, *(const uint32_t *)p);
		break;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		json_w_int(w, *(const int64_t *)p);
		break;
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		json_w_int(w, (int64_t) * (const uint64_t *)p);
		break;
	case PROTOBUF_C_TYPE_FLOAT:
		json_w_double(w, *(const float *)p);
		break;
	case PROTOBUF_C_TYPE_DOUBLE:
		json_w_double(w, *(const double *)p);
		break;
	case PROTOBUF_C_TYPE_BOOL:
		json_w_bool(w, *(const protobuf_c_boolean *)p);
		break;
	case PROTOBUF_C_TYPE_ENUM: {
		const ProtobufCEnumValue *ev =
			protobuf_c_enum_descriptor_get_value(f->descriptor, *(const int *)p);

		if (ev)
			json_w_string(w, ev->name);
		else
			json_w_int(w, *(const int *)p);
		break;
	}
	case PROTOBUF_C_TYPE_STRING:
		json_w_string(w, *(char *const *)p ? *(char *const *)p : "");
		break;
	case PROTOBUF_C_TYPE_BYTES:
		json_w_null(w); /* no bytes fields in the ocs.v1 API */
		break;
	case PROTOBUF_C_TYPE_MESSAGE:
		if (*(const ProtobufCMessage *const *)p)
			pbjson_write(w, *(const ProtobufCMessage *const *)p);
		else
			json_w_null(w);
		break;
	}
}

static size_t element_size(ProtobufCType t)
{
	switch (t) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
	case PROTOBUF_C_TYPE_ENUM:
		return 4;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		return 8;
	case PROTOBUF_C_TYPE_FLOAT:
		return sizeof(float);
	case PROTOBUF_C_TYPE_DOUBLE:
		return sizeof(double);
	case PROTOBUF_C_TYPE_BOOL:
		return sizeof(protobuf_c_boolean);
	case PROTOBUF_C_TYPE_STRING:
	case PROTOBUF_C_TYPE_MESSAGE:
		return sizeof(void *);
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	}
	return 0;
}

void pbjson_write(struct json_writer *w, const ProtobufCMessage *m)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;

	json_w_object_begin(w);
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];

		if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
			if (MEMBER(uint32_t, m, f->quantifier_offset) != f->id)
				continue;
		} else if (f->type == PROTOBUF_C_TYPE_MESSAGE &&
			   f->label != PROTOBUF_C_LABEL_REPEATED && !MEMBER(void *, m, f->offset)) {
			continue;
		}
		json_w_key(w, f->name);
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = MEMBER(size_t, m, f->quantifier_offset);
			const char *arr = MEMBER(const char *, m, f->offset);

			json_w_array_begin(w);
			for (size_t k = 0; k < n; k++)
				write_value(w, f, arr + k * element_size(f->type));
			json_w_array_end(w);
		} else {
			write_value(w, f, (const char *)m + f->offset);
		}
	}
	json_w_object_end(w);
}

struct reader {
	char *err;
	size_t err_len;
	char path[256];
};

static bool fail(struct reader *r, const char *fmt, const char *detail)
{
	char msg[200];

	snprintf(msg, sizeof(msg), fmt, detail);
	snprintf(r->err, r->err_len, "%s: %s", r->path[0] ? r->path : "(top level)", msg);
	return false;
}

static ProtobufCMessage *read_message(struct reader *r, const struct json_value *v,
				      const ProtobufCMessageDescriptor *d);

static bool read_int(struct reader *r, const struct json_value *v, int64_t lo, int64_t hi,
		     int64_t *out)
{
	char range[64];

	if (!json_integer(v, out))
		return fail(r, "expected an integer, got %s",
			    json_type(v) == JSON_NUMBER ? "a fraction"
							: json_type_name(json_type(v)));
	if (*out < lo || *out > hi) {
		snprintf(range, sizeof(range), "%lld..%lld", (long long)lo, (long long)hi);
		return fail(r, "out of range %s", range);
	}
	return true;
}

static bool read_value(struct reader *r, const ProtobufCFieldDescriptor *f,
		       const struct json_value *v, void *p)
{
	int64_t i;

	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		if (!read_int(r, v, INT32_MIN, INT32_MAX, &i))
			return false;
		*(int32_t *)p = (int32_t)i;
		return true;
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		if (!read_int(r, v, 0, UINT32_MAX, &i))
			return false;
		*(uint32_t *)p = (uint32_t)i;
		return true;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		if (!read_int(r, v, INT64_MIN, INT64_MAX, &i))
			return false;
		*(int64_t *)p = i;
		return true;
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		if (!read_int(r, v, 0, INT64_MAX, &i))
			return false;
		*(uint64_t *)p = (uint64_t)i;
		return true;
	case PROTOBUF_C_TYPE_FLOAT:
	case PROTOBUF_C_TYPE_DOUBLE:
		if (json_type(v) != JSON_NUMBER)
			return fail(r, "expected a number, got %s", json_type_name(json_type(v)));
		if (f->type == PROTOBUF_C_TYPE_FLOAT)
			*(float *)p = (float)json_number(v);
		else
			*(double *)p = json_number(v);
		return true;
	case PROTOBUF_C_TYPE_BOOL:
		if (json_type(v) != JSON_BOOL)
			return fail(r, "expected true or false, got %s",
				    json_type_name(json_type(v)));
		*(protobuf_c_boolean *)p = json_bool(v);
		return true;
	case PROTOBUF_C_TYPE_ENUM: {
		const ProtobufCEnumDescriptor *ed = f->descriptor;
		const ProtobufCEnumValue *ev = NULL;

		if (json_type(v) == JSON_STRING)
			ev = protobuf_c_enum_descriptor_get_value_by_name(ed, json_string(v));
		else if (json_integer(v, &i) && i >= INT32_MIN && i <= INT32_MAX)
			ev = protobuf_c_enum_descriptor_get_value(ed, (int)i);
		if (!ev)
			return fail(r, "not a value of %s", ed->name);
		*(int *)p = ev->value;
		return true;
	}
	case PROTOBUF_C_TYPE_STRING:
		if (json_type(v) != JSON_STRING)
			return fail(r, "expected a string, got %s", json_type_name(json_type(v)));
		*(char **)p = strdup(json_string(v));
		return *(char **)p != NULL || fail(r, "%s", "out of memory");
	case PROTOBUF_C_TYPE_MESSAGE:
		*(ProtobufCMessage **)p = read_message(r, v, f->descriptor);
		return *(ProtobufCMessage **)p != NULL;
	case PROTOBUF_C_TYPE_BYTES:
		break;
	}
	return fail(r, "%s", "bytes fields are not supported");
}

static bool read_field(struct reader *r, ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
		       const struct json_value *v)
{
	size_t base = strlen(r->path);
	bool ok = true;

	if (f->label != PROTOBUF_C_LABEL_REPEATED) {
		void *p = (char *)m + f->offset;

		if (f->type == PROTOBUF_C_TYPE_STRING && *(char **)p != (char *)f->default_value) {
			/* a duplicate key: replace the earlier value */
			free(*(char **)p);
			*(char **)p = (char *)f->default_value;
		}
		return read_value(r, f, v, p);
	}
	if (json_type(v) != JSON_ARRAY)
		return fail(r, "expected an array, got %s", json_type_name(json_type(v)));
	{
		size_t n = json_len(v), size = element_size(f->type);
		char *arr = calloc(n ? n : 1, size);

		if (!arr)
			return fail(r, "%s", "out of memory");
		/* Attach first so that free_unpacked frees what was read. */
		MEMBER(size_t, m, f->quantifier_offset) = 0;
		MEMBER(char *, m, f->offset) = arr;
		for (size_t k = 0; k < n && ok; k++) {
			snprintf(r->path + base, sizeof(r->path) - base, "[%zu]", k);
			ok = read_value(r, f, json_at(v, k), arr + k * size);
			if (ok)
				MEMBER(size_t, m, f->quantifier_offset) = k + 1;
		}
		r->path[base] = '\0';
	}
	return ok;
}

static ProtobufCMessage *read_message(struct reader *r, const struct json_value *v,
				      const ProtobufCMessageDescriptor *d)
{
	ProtobufCMessage *m;
	size_t base = strlen(r->path);

	if (json_type(v) != JSON_OBJECT) {
		fail(r, "expected an object, got %s", json_type_name(json_type(v)));
		return NULL;
	}
	m = calloc(1, d->sizeof_message);
	if (!m) {
		fail(r, "%s", "out of memory");
		return NULL;
	}
	d->message_init(m);
	for (size_t i = 0; i < json_len(v); i++) {
		const char *key = json_key_at(v, i);
		const ProtobufCFieldDescriptor *f =
			protobuf_c_message_descriptor_get_field_by_name(d, key);

		snprintf(r->path + base, sizeof(r->path) - base, "%s%s", base ? "." : "", key);
		if (!f) {
			fail(r, "unknown field of %s", d->name);
			goto error;
		}
		if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
			uint32_t *which = &MEMBER(uint32_t, m, f->quantifier_offset);

			if (*which == f->id) {
				fail(r, "%s", "given twice");
				goto error;
			}
			if (*which != 0) {
				fail(r, "%s", "only one member of its oneof may be set");
				goto error;
			}
			*which = f->id;
		} else if ((f->label == PROTOBUF_C_LABEL_REPEATED ||
			    f->type == PROTOBUF_C_TYPE_MESSAGE) &&
			   MEMBER(void *, m, f->offset)) {
			fail(r, "%s", "given twice");
			goto error;
		}
		if (!read_field(r, m, f, json_at(v, i)))
			goto error;
	}
	r->path[base] = '\0';
	return m;
error:
	protobuf_c_message_free_unpacked(m, NULL);
	return NULL;
}

ProtobufCMessage *pbjson_read(const struct json_value *v, const ProtobufCMessageDescriptor *desc,
			      char *err, size_t err_len)
{
	struct reader r = {err, err_len, ""};

	return read_message(&r, v, desc);
}
