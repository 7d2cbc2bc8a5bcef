/*
 * json.c - the JSON reader (recursive descent into an immutable tree) and
 * the JSON writer (append-only buffer) declared in json.h.
 *
 * Ownership: a parsed tree is one allocation per node; json_free() walks it.
 * The writer owns its buffer until json_writer_free().
 */
#include "json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JSON_MAX_DEPTH 256

struct json_value {
	enum json_type type;
	bool boolean;
	bool is_int;
	int64_t integer;
	double number;
	char *string;               /* JSON_STRING */
	size_t count;               /* elements or members */
	struct json_value **items;  /* JSON_ARRAY / JSON_OBJECT values */
	char **keys;                /* JSON_OBJECT keys */
};

struct parser {
	const char *text;
	size_t len;
	size_t pos;
	char *err;
	size_t err_len;
	bool failed;
};

__attribute__((format(printf, 2, 3))) static void fail(struct parser *p, const char *fmt, ...)
{
	size_t line = 1, col = 1;
	va_list ap;
	int n;

	if (p->failed)
		return;
	p->failed = true;
	if (!p->err || p->err_len == 0)
		return;
	for (size_t i = 0; i < p->pos && i < p->len; i++) {
		if (p->text[i] == '\n') {
			line++;
			col = 1;
		} else {
			col++;
		}
	}
	n = snprintf(p->err, p->err_len, "line %zu, column %zu: ", line, col);
	if (n < 0 || (size_t)n >= p->err_len)
		return;
	va_start(ap, fmt);
	vsnprintf(p->err + n, p->err_len - (size_t)n, fmt, ap);
	va_end(ap);
}

static void skip_ws(struct parser *p)
{
	while (p->pos < p->len) {
		char c = p->text[p->pos];

		if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
			break;
		p->pos++;
	}
}

static int peek(struct parser *p)
{
	return p->pos < p->len ? (unsigned char)p->text[p->pos] : -1;
}

static struct json_value *new_value(struct parser *p, enum json_type t)
{
	struct json_value *v = calloc(1, sizeof(*v));

	if (!v)
		fail(p, "out of memory");
	else
		v->type = t;
	return v;
}

static bool literal(struct parser *p, const char *word)
{
	size_t n = strlen(word);

	if (p->len - p->pos >= n && memcmp(p->text + p->pos, word, n) == 0) {
		p->pos += n;
		return true;
	}
	return false;
}

static int hex4(struct parser *p, unsigned *out)
{
	unsigned v = 0;

	if (p->len - p->pos < 4)
		return -1;
	for (int i = 0; i < 4; i++) {
		char c = p->text[p->pos++];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

static size_t put_utf8(char *dst, unsigned cp)
{
	if (cp < 0x80) {
		dst[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		dst[0] = (char)(0xC0 | (cp >> 6));
		dst[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		dst[0] = (char)(0xE0 | (cp >> 12));
		dst[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		dst[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	dst[0] = (char)(0xF0 | (cp >> 18));
	dst[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
	dst[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
	dst[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}

/* Parses a string starting at the opening quote; returns a malloc'd copy. */
static char *parse_string(struct parser *p)
{
	size_t start = ++p->pos, cap;
	char *out, *o;

	/* Escapes only shrink the text, except \u which needs at most 4 bytes for 6. */
	while (p->pos < p->len && p->text[p->pos] != '"') {
		if (p->text[p->pos] == '\\')
			p->pos++;
		p->pos++;
	}
	if (p->pos >= p->len) {
		fail(p, "unterminated string");
		return NULL;
	}
	cap = p->pos - start + 1;
	p->pos = start;
	out = malloc(cap);
	if (!out) {
		fail(p, "out of memory");
		return NULL;
	}
	o = out;
	while (p->text[p->pos] != '"') {
		unsigned char c = (unsigned char)p->text[p->pos++];

		if (c < 0x20) {
			p->pos--;
			fail(p, "control character in string");
			free(out);
			return NULL;
		}
		if (c != '\\') {
			*o++ = (char)c;
			continue;
		}
		c = (unsigned char)p->text[p->pos++];
		switch (c) {
		case '"': *o++ = '"'; break;
		case '\\': *o++ = '\\'; break;
		case '/': *o++ = '/'; break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case 'n': *o++ = '\n'; break;
		case 'r': *o++ = '\r'; break;
		case 't': *o++ = '\t'; break;
		case 'u': {
			unsigned cp, lo;

			if (hex4(p, &cp) < 0)
				goto bad_escape;
			if (cp >= 0xD800 && cp <= 0xDBFF) {
				if (!literal(p, "\\u") || hex4(p, &lo) < 0 || lo < 0xDC00 ||
				    lo > 0xDFFF)
					goto bad_escape;
				cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
			} else if (cp >= 0xDC00 && cp <= 0xDFFF) {
				goto bad_escape;
			}
			if (cp == 0)
				goto bad_escape; /* would truncate the C string */
			o += put_utf8(o, cp);
			break;
		}
		default:
			goto bad_escape;
		}
	}
	p->pos++; /* closing quote */
	*o = '\0';
	return out;

bad_escape:
	fail(p, "invalid escape in string");
	free(out);
	return NULL;
}

static struct json_value *parse_number(struct parser *p)
{
	size_t start = p->pos;
	bool is_int = true;
	char buf[64];
	struct json_value *v;
	char *end;

	if (peek(p) == '-')
		p->pos++;
	if (peek(p) == '0') {
		p->pos++;
	} else if (peek(p) >= '1' && peek(p) <= '9') {
		while (peek(p) >= '0' && peek(p) <= '9')
			p->pos++;
	} else {
		fail(p, "invalid number");
		return NULL;
	}
	if (peek(p) == '.') {
		is_int = false;
		p->pos++;
		if (!(peek(p) >= '0' && peek(p) <= '9')) {
			fail(p, "invalid number");
			return NULL;
		}
		while (peek(p) >= '0' && peek(p) <= '9')
			p->pos++;
	}
	if (peek(p) == 'e' || peek(p) == 'E') {
		is_int = false;
		p->pos++;
		if (peek(p) == '+' || peek(p) == '-')
			p->pos++;
		if (!(peek(p) >= '0' && peek(p) <= '9')) {
			fail(p, "invalid number");
			return NULL;
		}
		while (peek(p) >= '0' && peek(p) <= '9')
			p->pos++;
	}
	if (p->pos - start >= sizeof(buf)) {
		p->pos = start;
		fail(p, "number too long");
		return NULL;
	}
	memcpy(buf, p->text + start, p->pos - start);
	buf[p->pos - start] = '\0';
	v = new_value(p, JSON_NUMBER);
	if (!v)
		return NULL;
	v->number = strtod(buf, NULL);
	if (is_int) {
		errno = 0;
		v->integer = strtoll(buf, &end, 10);
		v->is_int = errno == 0;
	}
	return v;
}

static struct json_value *parse_value(struct parser *p, int depth);

static bool grow(struct parser *p, struct json_value *v, size_t *cap, bool with_keys)
{
	size_t ncap = *cap ? *cap * 2 : 4;
	struct json_value **items;

	if (v->count < *cap)
		return true;
	items = realloc(v->items, ncap * sizeof(*items));
	if (!items)
		goto oom;
	v->items = items;
	if (with_keys) {
		char **keys = realloc(v->keys, ncap * sizeof(*keys));

		if (!keys)
			goto oom;
		v->keys = keys;
	}
	*cap = ncap;
	return true;
oom:
	fail(p, "out of memory");
	return false;
}

static struct json_value *parse_container(struct parser *p, int depth, bool object)
{
	struct json_value *v = new_value(p, object ? JSON_OBJECT : JSON_ARRAY);
	char close = object ? '}' : ']';
	size_t cap = 0;

	if (!v)
		return NULL;
	p->pos++;
	skip_ws(p);
	if (peek(p) == close) {
		p->pos++;
		return v;
	}
	for (;;) {
		char *key = NULL;
		struct json_value *item;

		skip_ws(p);
		if (object) {
			if (peek(p) != '"') {
				fail(p, "expected a string key");
				break;
			}
			key = parse_string(p);
			if (!key)
				break;
			skip_ws(p);
			if (peek(p) != ':') {
				free(key);
				fail(p, "expected ':'");
				break;
			}
			p->pos++;
		}
		item = parse_value(p, depth + 1);
		if (!item || !grow(p, v, &cap, object)) {
			free(key);
			json_free(item);
			break;
		}
		if (object)
			v->keys[v->count] = key;
		v->items[v->count++] = item;
		skip_ws(p);
		if (peek(p) == ',') {
			p->pos++;
			continue;
		}
		if (peek(p) == close) {
			p->pos++;
			return v;
		}
		fail(p, object ? "expected ',' or '}'" : "expected ',' or ']'");
		break;
	}
	json_free(v);
	return NULL;
}

static struct json_value *parse_value(struct parser *p, int depth)
{
	struct json_value *v;

	if (depth > JSON_MAX_DEPTH) {
		fail(p, "nesting deeper than %d", JSON_MAX_DEPTH);
		return NULL;
	}
	skip_ws(p);
	switch (peek(p)) {
	case '{':
		return parse_container(p, depth, true);
	case '[':
		return parse_container(p, depth, false);
	case '"': {
		char *s = parse_string(p);

		if (!s)
			return NULL;
		v = new_value(p, JSON_STRING);
		if (!v)
			free(s);
		else
			v->string = s;
		return v;
	}
	case 't':
	case 'f':
	{
		bool is_true = literal(p, "true");

		if (is_true || literal(p, "false")) {
			v = new_value(p, JSON_BOOL);
			if (v)
				v->boolean = is_true;
			return v;
		}
		break;
	}
	case 'n':
		if (literal(p, "null"))
			return new_value(p, JSON_NULL);
		break;
	case -1:
		fail(p, "unexpected end of input");
		return NULL;
	default:
		if (peek(p) == '-' || (peek(p) >= '0' && peek(p) <= '9'))
			return parse_number(p);
	}
	fail(p, "unexpected character '%c'", (char)peek(p));
	return NULL;
}

struct json_value *json_parse(const char *text, size_t len, char *err, size_t err_len)
{
	struct parser p = { text, len, 0, err, err_len, false };
	struct json_value *v;

	if (err && err_len)
		err[0] = '\0';
	v = parse_value(&p, 0);
	if (!v)
		return NULL;
	skip_ws(&p);
	if (p.pos != len) {
		fail(&p, "unexpected text after the value");
		json_free(v);
		return NULL;
	}
	return v;
}

void json_free(struct json_value *v)
{
	if (!v)
		return;
	for (size_t i = 0; i < v->count; i++) {
		json_free(v->items[i]);
		if (v->keys)
			free(v->keys[i]);
	}
	free(v->items);
	free(v->keys);
	free(v->string);
	free(v);
}

enum json_type json_type(const struct json_value *v)
{
	return v ? v->type : JSON_NULL;
}

const char *json_type_name(enum json_type t)
{
	static const char *const names[] = { "null", "boolean", "number",
					     "string", "array", "object" };

	return (unsigned)t < sizeof(names) / sizeof(names[0]) ? names[t] : "unknown";
}

const struct json_value *json_get(const struct json_value *v, const char *key)
{
	if (!v || v->type != JSON_OBJECT || !key)
		return NULL;
	for (size_t i = 0; i < v->count; i++)
		if (strcmp(v->keys[i], key) == 0)
			return v->items[i];
	return NULL;
}

size_t json_len(const struct json_value *v)
{
	return v && (v->type == JSON_ARRAY || v->type == JSON_OBJECT) ? v->count : 0;
}

const struct json_value *json_at(const struct json_value *v, size_t i)
{
	return i < json_len(v) ? v->items[i] : NULL;
}

const char *json_key_at(const struct json_value *v, size_t i)
{
	return v && v->type == JSON_OBJECT && i < v->count ? v->keys[i] : NULL;
}

double json_number(const struct json_value *v)
{
	return v && v->type == JSON_NUMBER ? v->number : 0.0;
}

bool json_integer(const struct json_value *v, int64_t *out)
{
	if (!v || v->type != JSON_NUMBER || !v->is_int)
		return false;
	if (out)
		*out = v->integer;
	return true;
}

const char *json_string(const struct json_value *v)
{
	return v && v->type == JSON_STRING ? v->string : NULL;
}

bool json_bool(const struct json_value *v)
{
	return v && v->type == JSON_BOOL && v->boolean;
}

/* ---- writer ---- */

struct json_writer {
	char *buf;
	size_t len;
	size_t cap;
	bool pretty;
	bool oom;
	int depth;
	bool need_comma; /* a value was written at the current depth */
	bool after_key;  /* the next value follows a key on the same line */
};

struct json_writer *json_writer_new(bool pretty)
{
	struct json_writer *w = calloc(1, sizeof(*w));

	if (w)
		w->pretty = pretty;
	return w;
}

void json_writer_free(struct json_writer *w)
{
	if (!w)
		return;
	free(w->buf);
	free(w);
}

static void emit(struct json_writer *w, const char *s, size_t n)
{
	if (w->oom)
		return;
	if (w->len + n + 1 > w->cap) {
		size_t ncap = w->cap ? w->cap : 256;
		char *nb;

		while (w->len + n + 1 > ncap)
			ncap *= 2;
		nb = realloc(w->buf, ncap);
		if (!nb) {
			w->oom = true;
			return;
		}
		w->buf = nb;
		w->cap = ncap;
	}
	memcpy(w->buf + w->len, s, n);
	w->len += n;
	w->buf[w->len] = '\0';
}

static void emits(struct json_writer *w, const char *s)
{
	emit(w, s, strlen(s));
}

static void newline(struct json_writer *w)
{
	if (!w->pretty)
		return;
	emit(w, "\n", 1);
	for (int i = 0; i < w->depth; i++)
		emit(w, "  ", 2);
}

/* Separator and indentation before any value or key. */
static void before_item(struct json_writer *w)
{
	if (w->after_key) {
		w->after_key = false;
		return;
	}
	if (w->need_comma)
		emit(w, ",", 1);
	if (w->depth > 0)
		newline(w);
}

static void after_value(struct json_writer *w)
{
	w->need_comma = true;
}

static void open_container(struct json_writer *w, const char *c)
{
	before_item(w);
	emits(w, c);
	w->depth++;
	w->need_comma = false;
}

static void close_container(struct json_writer *w, const char *c)
{
	bool empty = !w->need_comma;

	w->depth--;
	if (!empty)
		newline(w);
	emits(w, c);
	after_value(w);
}

void json_w_object_begin(struct json_writer *w)
{
	open_container(w, "{");
}

void json_w_object_end(struct json_writer *w)
{
	close_container(w, "}");
}

void json_w_array_begin(struct json_writer *w)
{
	open_container(w, "[");
}

void json_w_array_end(struct json_writer *w)
{
	close_container(w, "]");
}

static void write_escaped(struct json_writer *w, const char *s)
{
	emit(w, "\"", 1);
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;
		char esc[8];

		switch (c) {
		case '"': emits(w, "\\\""); break;
		case '\\': emits(w, "\\\\"); break;
		case '\n': emits(w, "\\n"); break;
		case '\r': emits(w, "\\r"); break;
		case '\t': emits(w, "\\t"); break;
		default:
			if (c < 0x20) {
				snprintf(esc, sizeof(esc), "\\u%04x", c);
				emits(w, esc);
			} else {
				emit(w, (const char *)&c, 1);
			}
		}
	}
	emit(w, "\"", 1);
}

void json_w_key(struct json_writer *w, const char *key)
{
	before_item(w);
	write_escaped(w, key);
	emits(w, w->pretty ? ": " : ":");
	w->after_key = true;
}

void json_w_int(struct json_writer *w, int64_t v)
{
	char buf[32];

	before_item(w);
	snprintf(buf, sizeof(buf), "%lld", (long long)v);
	emits(w, buf);
	after_value(w);
}

void json_w_double(struct json_writer *w, double v)
{
	char buf[64];

	if (!isfinite(v)) {
		json_w_null(w);
		return;
	}
	before_item(w);
	if (fabs(v) < 1e15) {
		/* Fixed point with 6 decimals, trailing zeros trimmed: 2.5, 0.000125, 17 */
		size_t n = (size_t)snprintf(buf, sizeof(buf), "%.6f", v);

		while (n > 1 && buf[n - 1] == '0')
			buf[--n] = '\0';
		if (buf[n - 1] == '.')
			buf[--n] = '\0';
		if (strcmp(buf, "-0") == 0)
			strcpy(buf, "0");
	} else {
		snprintf(buf, sizeof(buf), "%.17g", v);
	}
	emits(w, buf);
	after_value(w);
}

void json_w_string(struct json_writer *w, const char *s)
{
	before_item(w);
	write_escaped(w, s);
	after_value(w);
}

void json_w_bool(struct json_writer *w, bool v)
{
	before_item(w);
	emits(w, v ? "true" : "false");
	after_value(w);
}

void json_w_null(struct json_writer *w)
{
	before_item(w);
	emits(w, "null");
	after_value(w);
}

const char *json_writer_text(const struct json_writer *w, size_t *len)
{
	if (!w || w->oom)
		return NULL;
	if (len)
		*len = w->len;
	return w->buf ? w->buf : "";
}
