/*
 * pbjson.c - protobuf-c <-> JSON through the descriptors (see pbjson.h).
 */
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ocs_json.h"
#include "pbjson.h"

#define MEMBER(type, msg, offset) (*(type *)((char *)(msg) + (offset)))

/* One value of field f stored at p: a new reference, NULL when out of memory or not UTF-8. */
static json_t *write_value(const ProtobufCFieldDescriptor *f, const void *p)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		return json_integer(*(const int32_t *)p);
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		return json_integer(*(const uint32_t *)p);
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		return json_integer(*(const int64_t *)p);
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		return json_integer((json_int_t) * (const uint64_t *)p);
	case PROTOBUF_C_TYPE_FLOAT:
		return ocs_json_number(*(const float *)p);
	case PROTOBUF_C_TYPE_DOUBLE:
		return ocs_json_number(*(const double *)p);
	case PROTOBUF_C_TYPE_BOOL:
		return json_boolean(*(const protobuf_c_boolean *)p);
	case PROTOBUF_C_TYPE_ENUM: {
		const ProtobufCEnumValue *ev =
			protobuf_c_enum_descriptor_get_value(f->descriptor, *(const int *)p);

		return ev ? json_string(ev->name) : json_integer(*(const int *)p);
	}
	case PROTOBUF_C_TYPE_STRING:
		return json_string(*(char *const *)p ? *(char *const *)p : "");
	case PROTOBUF_C_TYPE_BYTES:
		return json_null(); /* no bytes fields in the ocs.v1 API */
	case PROTOBUF_C_TYPE_MESSAGE:
		if (*(const ProtobufCMessage *const *)p)
			return pbjson_write(*(const ProtobufCMessage *const *)p);
		return json_null();
	}
	return json_null();
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

json_t *pbjson_write(const ProtobufCMessage *m)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;
	json_t *obj = json_object();
	bool ok = obj != NULL;

	for (unsigned i = 0; ok && i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		json_t *value;

		if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
			if (MEMBER(uint32_t, m, f->quantifier_offset) != f->id)
				continue;
		} else if (f->type == PROTOBUF_C_TYPE_MESSAGE &&
			   f->label != PROTOBUF_C_LABEL_REPEATED && !MEMBER(void *, m, f->offset)) {
			continue;
		}
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = MEMBER(size_t, m, f->quantifier_offset);
			const char *arr = MEMBER(const char *, m, f->offset);

			value = json_array();
			for (size_t k = 0; value && k < n; k++) {
				if (json_array_append_new(
					    value,
					    write_value(f, arr + k * element_size(f->type)))) {
					json_decref(value);
					value = NULL;
				}
			}
		} else {
			value = write_value(f, (const char *)m + f->offset);
		}
		/* json_object_set_new() refuses a NULL value (a failure below). */
		ok = json_object_set_new(obj, f->name, value) == 0;
	}
	if (!ok) {
		json_decref(obj);
		return NULL;
	}
	return obj;
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

static ProtobufCMessage *read_message(struct reader *r, const json_t *v,
				      const ProtobufCMessageDescriptor *d);

static bool read_int(struct reader *r, const json_t *v, int64_t lo, int64_t hi, int64_t *out)
{
	char range[64];

	if (!json_is_integer(v))
		return fail(r, "expected an integer, got %s",
			    json_is_real(v) ? "a fraction" : ocs_json_type_name(v));
	*out = json_integer_value(v);
	if (*out < lo || *out > hi) {
		snprintf(range, sizeof(range), "%lld..%lld", (long long)lo, (long long)hi);
		return fail(r, "out of range %s", range);
	}
	return true;
}

static bool read_value(struct reader *r, const ProtobufCFieldDescriptor *f, const json_t *v,
		       void *p)
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
		if (!json_is_number(v))
			return fail(r, "expected a number, got %s", ocs_json_type_name(v));
		if (f->type == PROTOBUF_C_TYPE_FLOAT)
			*(float *)p = (float)json_number_value(v);
		else
			*(double *)p = json_number_value(v);
		return true;
	case PROTOBUF_C_TYPE_BOOL:
		if (!json_is_boolean(v))
			return fail(r, "expected true or false, got %s", ocs_json_type_name(v));
		*(protobuf_c_boolean *)p = json_is_true(v);
		return true;
	case PROTOBUF_C_TYPE_ENUM: {
		const ProtobufCEnumDescriptor *ed = f->descriptor;
		const ProtobufCEnumValue *ev = NULL;

		if (json_is_string(v))
			ev = protobuf_c_enum_descriptor_get_value_by_name(ed, json_string_value(v));
		else if (json_is_integer(v) && json_integer_value(v) >= INT32_MIN &&
			 json_integer_value(v) <= INT32_MAX)
			ev = protobuf_c_enum_descriptor_get_value(ed, (int)json_integer_value(v));
		if (!ev)
			return fail(r, "not a value of %s", ed->name);
		*(int *)p = ev->value;
		return true;
	}
	case PROTOBUF_C_TYPE_STRING:
		if (!json_is_string(v))
			return fail(r, "expected a string, got %s", ocs_json_type_name(v));
		*(char **)p = strdup(json_string_value(v));
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
		       const json_t *v)
{
	size_t base = strlen(r->path);
	bool ok = true;

	if (f->label != PROTOBUF_C_LABEL_REPEATED)
		return read_value(r, f, v, (char *)m + f->offset);
	if (!json_is_array(v))
		return fail(r, "expected an array, got %s", ocs_json_type_name(v));
	{
		size_t n = json_array_size(v), size = element_size(f->type);
		char *arr = calloc(n ? n : 1, size);

		if (!arr)
			return fail(r, "%s", "out of memory");
		/* Attach first so that free_unpacked frees what was read. */
		MEMBER(size_t, m, f->quantifier_offset) = 0;
		MEMBER(char *, m, f->offset) = arr;
		for (size_t k = 0; k < n && ok; k++) {
			snprintf(r->path + base, sizeof(r->path) - base, "[%zu]", k);
			ok = read_value(r, f, json_array_get(v, k), arr + k * size);
			if (ok)
				MEMBER(size_t, m, f->quantifier_offset) = k + 1;
		}
		r->path[base] = '\0';
	}
	return ok;
}

static ProtobufCMessage *read_message(struct reader *r, const json_t *v,
				      const ProtobufCMessageDescriptor *d)
{
	ProtobufCMessage *m;
	size_t base = strlen(r->path);

	if (!json_is_object(v)) {
		fail(r, "expected an object, got %s", ocs_json_type_name(v));
		return NULL;
	}
	m = calloc(1, d->sizeof_message);
	if (!m) {
		fail(r, "%s", "out of memory");
		return NULL;
	}
	d->message_init(m);
	/* Members in document order, so the first problem is the first in the file. */
	for (void *it = json_object_iter((json_t *)v); it;
	     it = json_object_iter_next((json_t *)v, it)) {
		const char *key = json_object_iter_key(it);
		const ProtobufCFieldDescriptor *f =
			protobuf_c_message_descriptor_get_field_by_name(d, key);

		snprintf(r->path + base, sizeof(r->path) - base, "%s%s", base ? "." : "", key);
		if (!f) {
			fail(r, "unknown field of %s", d->name);
			goto error;
		}
		/* A jansson object has each key once: no field can be given twice. */
		if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
			uint32_t *which = &MEMBER(uint32_t, m, f->quantifier_offset);

			if (*which != 0) {
				fail(r, "%s", "only one member of its oneof may be set");
				goto error;
			}
			*which = f->id;
		}
		if (!read_field(r, m, f, json_object_iter_value(it)))
			goto error;
	}
	r->path[base] = '\0';
	return m;
error:
	protobuf_c_message_free_unpacked(m, NULL);
	return NULL;
}

ProtobufCMessage *pbjson_read(const json_t *v, const ProtobufCMessageDescriptor *desc, char *err,
			      size_t err_len)
{
	struct reader r = {err, err_len, ""};

	return read_message(&r, v, desc);
}
