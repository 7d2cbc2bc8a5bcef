/*
 * sb_reply.c - the NETCONF reply scanner (API in sb_reply.h).
 *
 * A cursor walks the XML one element at a time: next_child() finds the
 * next start tag among the children of the element being read (or its end
 * tag), leaf_text() reads a leaf's text with entities decoded, and
 * skip_element() jumps over an element's content by counting depth, so no
 * nesting of the input can make the walk recurse. The readers of replies,
 * cross-connects and bundles are fixed-depth walks on top of these three.
 */
#include "sb_reply.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cur {
	const char *p, *end;
};

/* A start tag: its local name (prefix dropped), its attributes, and whether it is <x/>. */
struct el {
	const char *name;
	size_t name_len;
	const char *attrs;
	size_t attrs_len;
	bool empty;
};

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static bool starts(const struct cur *c, const char *s)
{
	size_t n = strlen(s);
	return (size_t)(c->end - c->p) >= n && !memcmp(c->p, s, n);
}

/* Moves past the first `s` at or after the cursor; -EPROTO when there is none. */
static int skip_past(struct cur *c, const char *s)
{
	size_t n = strlen(s);
	for (const char *q = c->p; (size_t)(c->end - q) >= n; q++)
		if (!memcmp(q, s, n)) {
			c->p = q + n;
			return 0;
		}
	return -EPROTO;
}

static bool el_is(const struct el *e, const char *name)
{
	return strlen(name) == e->name_len && !memcmp(e->name, name, e->name_len);
}

/*
 * At "<" of something that is not an element: a comment, a processing
 * instruction or CDATA (skipped; CDATA only where text may be). DOCTYPE
 * and other declarations are refused. Returns 1 when the cursor is at an
 * element's start or end tag instead, 0 after skipping, -EPROTO.
 */
static int skip_markup(struct cur *c)
{
	if (starts(c, "<!--"))
		return skip_past(c, "-->");
	if (starts(c, "<?"))
		return skip_past(c, "?>");
	if (starts(c, "<![CDATA["))
		return skip_past(c, "]]>");
	if (starts(c, "<!"))
		return -EPROTO;
	return 1;
}

/* Reads a start tag at "<" into *e and moves past it. */
static int read_start(struct cur *c, struct el *e)
{
	const char *q = c->p + 1, *name = q;
	while (q < c->end && !is_space(*q) && *q != '>' && *q != '/')
		if (*q++ == ':')
			name = q;
	if (q == name)
		return -EPROTO;
	e->name = name;
	e->name_len = (size_t)(q - name);
	e->attrs = q;
	char quote = 0;
	for (; q < c->end; q++) {
		if (*q == '<') /* not even in an attribute value */
			return -EPROTO;
		if (quote) {
			if (*q == quote)
				quote = 0;
		} else if (*q == '"' || *q == '\'') {
			quote = *q;
		} else if (*q == '>') {
			e->empty = q > e->attrs && q[-1] == '/';
			e->attrs_len = (size_t)(q - e->attrs) - (e->empty ? 1 : 0);
			c->p = q + 1;
			return 0;
		}
	}
	return -EPROTO;
}

/* Reads an end tag at "</" and moves past it; its local name must be `parent`'s. */
static int read_end(struct cur *c, const struct el *parent)
{
	const char *q = c->p + 2, *name = q;
	while (q < c->end && !is_space(*q) && *q != '>')
		if (*q++ == ':')
			name = q;
	size_t len = (size_t)(q - name);
	while (q < c->end && is_space(*q))
		q++;
	if (q >= c->end || *q != '>' || !parent || len != parent->name_len ||
	    memcmp(name, parent->name, len))
		return -EPROTO;
	c->p = q + 1;
	return 0;
}

/*
 * The next child element of `parent` (NULL: the top level, which ends with
 * the input): 0 with *e and the cursor past its start tag, 1 when parent
 * ended (its end tag consumed; at the top level, the end of the input),
 * -EPROTO. Text between elements is skipped. An empty parent (<x/>) has no
 * children: 1 at once.
 */
static int next_child(struct cur *c, const struct el *parent, struct el *e)
{
	if (parent && parent->empty)
		return 1;
	for (;;) {
		while (c->p < c->end && *c->p != '<')
			c->p++;
		if (c->p >= c->end)
			return parent ? -EPROTO : 1;
		int rc = skip_markup(c);
		if (rc < 0)
			return rc;
		if (rc == 0)
			continue;
		if (starts(c, "</"))
			return parent ? (read_end(c, parent) ? -EPROTO : 1) : -EPROTO;
		*e = (struct el){0};
		return read_start(c, e);
	}
}

#define MAX_SKIP_DEPTH 128 /* deepest nesting skip_element() reads */

/*
 * Skips the content of e (its start tag read) and its end tag; *content_end
 * (when not NULL) gets where the content stops. Depth is counted on a
 * bounded stack of names, not recursed: every end tag must match its start
 * tag, and nesting deeper than MAX_SKIP_DEPTH is refused.
 */
static int skip_element(struct cur *c, const struct el *e, const char **content_end)
{
	if (e->empty) {
		if (content_end)
			*content_end = c->p;
		return 0;
	}
	struct el open[MAX_SKIP_DEPTH];
	size_t depth = 1;
	open[0] = *e;
	for (;;) {
		while (c->p < c->end && *c->p != '<')
			c->p++;
		if (c->p >= c->end)
			return -EPROTO;
		int rc = skip_markup(c);
		if (rc < 0)
			return rc;
		if (rc == 0)
			continue;
		if (starts(c, "</")) {
			const char *at = c->p;
			if (read_end(c, &open[depth - 1]))
				return -EPROTO;
			if (--depth == 0) {
				if (content_end)
					*content_end = at;
				return 0;
			}
			continue;
		}
		struct el inner = {0};
		if (read_start(c, &inner))
			return -EPROTO;
		if (inner.empty)
			continue;
		if (depth == MAX_SKIP_DEPTH)
			return -EPROTO;
		open[depth++] = inner;
	}
}

/* Appends the character (code point) cp to buf as UTF-8. */
static void put_utf8(char *buf, size_t cap, size_t *len, unsigned long cp)
{
	char tmp[4];
	size_t n;
	if (cp < 0x80) {
		tmp[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		tmp[0] = (char)(0xc0 | (cp >> 6));
		tmp[1] = (char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		tmp[0] = (char)(0xe0 | (cp >> 12));
		tmp[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		tmp[2] = (char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		tmp[0] = (char)(0xf0 | (cp >> 18));
		tmp[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		tmp[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		tmp[3] = (char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	for (size_t i = 0; i < n && *len + 1 < cap; i++)
		buf[(*len)++] = tmp[i];
}

/* Decodes the entity at "&" into buf and moves past it. */
static int entity(struct cur *c, char *buf, size_t cap, size_t *len)
{
	static const struct {
		const char *name;
		char ch;
	} named[] = {
		{"&lt;", '<'}, {"&gt;", '>'}, {"&amp;", '&'}, {"&quot;", '"'}, {"&apos;", '\''}};
	for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++)
		if (starts(c, named[i].name)) {
			put_utf8(buf, cap, len, (unsigned char)named[i].ch);
			c->p += strlen(named[i].name);
			return 0;
		}
	if (!starts(c, "&#"))
		return -EPROTO;
	const char *q = c->p + 2;
	int base = 10;
	if (q < c->end && *q == 'x') {
		base = 16;
		q++;
	}
	unsigned long cp = 0;
	size_t digits = 0;
	for (; q < c->end && *q != ';'; q++, digits++) {
		int v = *q >= '0' && *q <= '9'		       ? *q - '0'
			: base == 16 && *q >= 'a' && *q <= 'f' ? *q - 'a' + 10
			: base == 16 && *q >= 'A' && *q <= 'F' ? *q - 'A' + 10
							       : -1;
		if (v < 0 || digits >= 8)
			return -EPROTO;
		cp = cp * (unsigned long)base + (unsigned long)v;
	}
	if (q >= c->end || !digits || !cp || cp > 0x10ffff)
		return -EPROTO;
	put_utf8(buf, cap, len, cp);
	c->p = q + 1;
	return 0;
}

/*
 * The text of leaf e (its start tag read) into buf (cap bytes with the
 * NUL; longer text is cut), whitespace trimmed at both ends; moves past the
 * end tag. Child elements in it are skipped.
 */
static int leaf_text(struct cur *c, const struct el *e, char *buf, size_t cap)
{
	size_t len = 0;
	buf[0] = '\0';
	if (e->empty)
		return 0;
	for (;;) {
		if (c->p >= c->end)
			return -EPROTO;
		char ch = *c->p;
		if (ch == '&') {
			if (entity(c, buf, cap, &len))
				return -EPROTO;
			continue;
		}
		if (ch != '<') {
			if (len + 1 < cap)
				buf[len++] = ch;
			c->p++;
			continue;
		}
		if (starts(c, "<![CDATA[")) {
			const char *from = c->p + 9;
			if (skip_past(c, "]]>"))
				return -EPROTO;
			for (const char *q = from; q < c->p - 3 && len + 1 < cap; q++)
				buf[len++] = *q;
			continue;
		}
		int rc = skip_markup(c);
		if (rc < 0)
			return rc;
		if (rc == 0)
			continue;
		if (starts(c, "</")) {
			if (read_end(c, e))
				return -EPROTO;
			break;
		}
		struct el inner = {0};
		if (read_start(c, &inner) || skip_element(c, &inner, NULL))
			return -EPROTO;
	}
	buf[len] = '\0';
	size_t start = 0;
	while (start < len && is_space(buf[start]))
		start++;
	while (len > start && is_space(buf[len - 1]))
		len--;
	memmove(buf, buf + start, len - start);
	buf[len - start] = '\0';
	return 0;
}

/* The value of attribute `name` (local name compared) of e, raw; NULL when absent. */
static const char *attr_value(const struct el *e, const char *name, size_t *len)
{
	const char *q = e->attrs, *end = e->attrs + e->attrs_len;
	while (q < end) {
		while (q < end && is_space(*q))
			q++;
		const char *an = q, *local = q;
		while (q < end && *q != '=' && !is_space(*q))
			if (*q++ == ':')
				local = q;
		size_t an_len = (size_t)(q - local);
		while (q < end && is_space(*q))
			q++;
		if (q >= end || *q != '=' || an == q)
			return NULL;
		q++;
		while (q < end && is_space(*q))
			q++;
		if (q >= end || (*q != '"' && *q != '\''))
			return NULL;
		char quote = *q++;
		const char *v = q;
		while (q < end && *q != quote)
			q++;
		if (q >= end)
			return NULL;
		if (local == an && an_len == strlen(name) && !memcmp(an, name, an_len)) {
			*len = (size_t)(q - v);
			return v;
		}
		q++;
	}
	return NULL;
}

/* An <error-info> (its start tag read): its <session-id>, when out has none yet. */
static int error_info(struct cur *c, const struct el *e, struct sb_reply *out)
{
	struct el ch;
	char text[16];
	int rc;
	while (!(rc = next_child(c, e, &ch))) {
		if (!el_is(&ch, "session-id")) {
			rc = skip_element(c, &ch, NULL);
		} else if (!(rc = leaf_text(c, &ch, text, sizeof(text))) && !out->session_id) {
			char *end = NULL;
			unsigned long v = strtoul(text, &end, 10);
			out->session_id = end != text && !*end && v <= UINT32_MAX ? (uint32_t)v : 0;
		}
		if (rc)
			return -EPROTO;
	}
	return rc < 0 ? rc : 0;
}

/* Appends one <rpc-error> (its start tag read) to out->error. */
static int rpc_error(struct cur *c, const struct el *e, struct sb_reply *out)
{
	char tag[64] = "", msg[200] = "", path[200] = "";
	struct el ch;
	int rc;
	while (!(rc = next_child(c, e, &ch))) {
		if (el_is(&ch, "error-tag"))
			rc = leaf_text(c, &ch, tag, sizeof(tag));
		else if (el_is(&ch, "error-message"))
			rc = leaf_text(c, &ch, msg, sizeof(msg));
		else if (el_is(&ch, "error-path"))
			rc = leaf_text(c, &ch, path, sizeof(path));
		else if (el_is(&ch, "error-info"))
			rc = error_info(c, &ch, out);
		else
			rc = skip_element(c, &ch, NULL);
		if (rc)
			return -EPROTO;
	}
	if (rc < 0)
		return rc;
	size_t used = strlen(out->error);
	/* a long list of errors is cut at the end of the string */
	if (used + 1 < sizeof(out->error) &&
	    snprintf(out->error + used, sizeof(out->error) - used, "%s%s: %s%s%s", used ? "; " : "",
		     tag, msg, *path ? " at " : "", path) < 0)
		return -EPROTO;
	return 0;
}

static int scan_fail(struct sb_reply *out, const char *why)
{
	out->kind = SB_REPLY_EMPTY;
	snprintf(out->error, sizeof(out->error), "%s", why);
	return -EPROTO;
}

int sb_reply_scan(const char *msg, size_t len, const char *msgid, struct sb_reply *out)
{
	*out = (struct sb_reply){0};
	struct cur c = {msg, msg + len};
	struct el root, ch;
	if (memchr(msg, '\0', len)) /* XML has no NUL character */
		return scan_fail(out, "NUL byte in the message");
	if (next_child(&c, NULL, &root))
		return scan_fail(out, "not an XML message");
	if (el_is(&root, "notification")) {
		out->kind = SB_REPLY_NOTIFICATION;
		return 0;
	}
	if (!el_is(&root, "rpc-reply"))
		return scan_fail(out, "not an <rpc-reply>");
	if (msgid) {
		size_t id_len = 0;
		const char *id = attr_value(&root, "message-id", &id_len);
		if (!id || id_len != strlen(msgid) || memcmp(id, msgid, id_len)) {
			snprintf(out->error, sizeof(out->error),
				 "reply to message-id \"%.*s\", not \"%s\"",
				 id ? (int)(id_len > 64 ? 64 : id_len) : 0, id ? id : "", msgid);
			out->kind = SB_REPLY_EMPTY;
			return -EPROTO;
		}
	}
	bool ok = false, data = false, error = false;
	int rc;
	while (!(rc = next_child(&c, &root, &ch))) {
		if (el_is(&ch, "ok")) {
			ok = true;
			rc = skip_element(&c, &ch, NULL);
		} else if (el_is(&ch, "rpc-error")) {
			error = true;
			rc = rpc_error(&c, &ch, out);
		} else if (el_is(&ch, "data")) {
			const char *end = NULL;
			data = true;
			out->data = c.p;
			rc = skip_element(&c, &ch, &end);
			out->data_len = end ? (size_t)(end - out->data) : 0;
		} else {
			rc = skip_element(&c, &ch, NULL);
		}
		if (rc)
			return scan_fail(out, "malformed <rpc-reply>");
	}
	/* after the root: only comments, processing instructions and blanks */
	struct el extra;
	if (rc < 0 || next_child(&c, NULL, &extra) != 1)
		return scan_fail(out, "malformed <rpc-reply>");
	out->kind = error  ? SB_REPLY_ERROR
		    : data ? SB_REPLY_DATA
		    : ok   ? SB_REPLY_OK
			   : SB_REPLY_EMPTY;
	return 0;
}

/* A decimal without sign or blanks, at most max. */
static int parse_uint(const char *s, unsigned long max, unsigned long *v)
{
	if (!*s || strlen(s) > 10)
		return -EPROTO;
	unsigned long long x = 0;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EPROTO;
		x = x * 10 + (unsigned long long)(*s - '0');
	}
	if (x > max)
		return -EPROTO;
	*v = (unsigned long)x;
	return 0;
}

/*
 * A status leaf's value as its enum: the enums of sb_device.h number their
 * states from 1 in the order of names (n of them) and keep 0 for unknown.
 */
static int status_value(const char *s, const char *const *names, int n)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(s, names[i]))
			return i + 1;
	return 0;
}

static enum sb_xc_status xc_status(const char *s)
{
	/* SB_XC_STATUS_CONNECTED .. SB_XC_STATUS_INVALID */
	static const char *const names[] = {"connected", "pending", "failed", "invalid"};
	return (enum sb_xc_status)status_value(s, names, 4);
}

static int cmp_xc_state(const void *a, const void *b)
{
	const struct sb_xc_state *x = a, *y = b;
	return x->in != y->in ? (int)x->in - (int)y->in : (int)x->out - (int)y->out;
}

/* Grows *v (of elements of size sz) to hold one more than n; -ENOMEM. */
static int grow(void **v, size_t *cap, size_t n, size_t sz)
{
	if (n < *cap)
		return 0;
	size_t c = *cap ? *cap * 2 : 64;
	void *g = realloc(*v, c * sz);
	if (!g)
		return -ENOMEM;
	*v = g;
	*cap = c;
	return 0;
}

/*
 * The next top-level element of <data> named `name` (start tag read into
 * *top), skipping the others: 0, 1 at the end of <data>, or a negative
 * errno (or skip_element's answer) when the data is malformed.
 */
static int next_top(struct cur *c, const char *name, struct el *top)
{
	int rc;
	while (!(rc = next_child(c, NULL, top))) {
		if (el_is(top, name))
			return 0;
		if ((rc = skip_element(c, top, NULL)))
			return rc;
	}
	return rc;
}

/* Frees a list being read into *out (n entries) and leaves none; returns rc. */
static int drop_list(void **out, size_t *n, int rc)
{
	free(*out);
	*out = NULL;
	*n = 0;
	return rc;
}

/* One <connection> (start tag read): *have says whether it had input and output. */
static int read_connection(struct cur *c, const struct el *e, struct sb_xc_state *x, bool *have)
{
	struct el ch;
	char v[32];
	bool in = false, out = false;
	int rc;
	*x = (struct sb_xc_state){0};
	while (!(rc = next_child(c, e, &ch))) {
		unsigned long u;
		if (el_is(&ch, "input") || el_is(&ch, "output")) {
			bool is_in = el_is(&ch, "input");
			if (leaf_text(c, &ch, v, sizeof(v)) || parse_uint(v, 65535, &u))
				return -EPROTO;
			if (is_in)
				x->in = (uint16_t)u;
			else
				x->out = (uint16_t)u;
			in |= is_in;
			out |= !is_in;
		} else if (el_is(&ch, "status")) {
			if (leaf_text(c, &ch, v, sizeof(v)))
				return -EPROTO;
			x->status = xc_status(v);
		} else if (skip_element(c, &ch, NULL)) {
			return -EPROTO;
		}
	}
	*have = in && out;
	return rc < 0 ? rc : 0;
}

int sb_reply_xcs(const char *data, size_t len, struct sb_xc_state **out, size_t *n)
{
	struct cur c = {data, data + len};
	struct el top, conn;
	size_t cap = 0;
	int rc;
	*out = NULL;
	*n = 0;
	while (!(rc = next_top(&c, "cross-connects", &top))) {
		while (!(rc = next_child(&c, &top, &conn))) {
			if (!el_is(&conn, "connection")) {
				if ((rc = skip_element(&c, &conn, NULL)))
					break;
				continue;
			}
			struct sb_xc_state x;
			bool have = false;
			if ((rc = read_connection(&c, &conn, &x, &have)))
				break;
			if (!have)
				continue;
			if ((rc = grow((void **)out, &cap, *n, sizeof(**out))))
				break;
			(*out)[(*n)++] = x;
		}
		if (rc < 0)
			break;
	}
	if (rc < 0)
		return drop_list((void **)out, n, rc);
	if (*n)
		qsort(*out, *n, sizeof(**out), cmp_xc_state);
	return 0;
}

/* ---- ocs-transceiver ---------------------------------------------------- */

static enum sb_path_status path_status(const char *s)
{
	/* SB_PATH_ACTIVE .. SB_PATH_FAILED */
	static const char *const names[] = {"active", "pending", "failed"};
	return (enum sb_path_status)status_value(s, names, 3);
}

/* A path as named in <external> or <path-status>: kind, distance, direction. */
struct path_ref {
	bool external;
	unsigned long distance;
	bool down;
	bool has_distance, has_dir;
};

/* Reads the distance and direction leaves of an <external> or <path-status> child. */
static int path_leaf(struct cur *c, const struct el *ch, struct path_ref *p, char *v, size_t cap)
{
	if (leaf_text(c, ch, v, cap))
		return -EPROTO;
	if (el_is(ch, "distance")) {
		p->has_distance = true;
		return parse_uint(v, 255, &p->distance);
	}
	p->has_dir = true;
	p->down = !strcmp(v, "down");
	return 0;
}

/* One <path-status> entry: its path and status. */
static int read_path_status(struct cur *c, const struct el *e, struct path_ref *p,
			    enum sb_path_status *st)
{
	struct el ch;
	char v[32];
	int rc;
	*p = (struct path_ref){0};
	*st = SB_PATH_UNKNOWN;
	while (!(rc = next_child(c, e, &ch))) {
		if (el_is(&ch, "path")) {
			if (leaf_text(c, &ch, v, sizeof(v)))
				return -EPROTO;
			p->external = !strcmp(v, "external");
		} else if (el_is(&ch, "distance") || el_is(&ch, "direction")) {
			if (path_leaf(c, &ch, p, v, sizeof(v)))
				return -EPROTO;
		} else if (el_is(&ch, "status")) {
			if (leaf_text(c, &ch, v, sizeof(v)))
				return -EPROTO;
			*st = path_status(v);
		} else if (skip_element(c, &ch, NULL)) {
			return -EPROTO;
		}
	}
	return rc < 0 ? rc : 0;
}

#define MAX_PATH_STATUS 64 /* path-status entries remembered per bundle */

/* One <bundle> (start tag read) into *b; *have says whether it had an id. */
static int read_bundle(struct cur *c, const struct el *e, struct sb_bundle_state *b, bool *have)
{
	struct el ch, gc;
	char v[32];
	struct path_ref ext = {0}, ps[MAX_PATH_STATUS];
	enum sb_path_status pst[MAX_PATH_STATUS];
	size_t n_ps = 0;
	unsigned long u;
	int rc;
	*b = (struct sb_bundle_state){.peer_node = -1};
	*have = false;
	while (!(rc = next_child(c, e, &ch))) {
		if (el_is(&ch, "id")) {
			if (leaf_text(c, &ch, v, sizeof(v)) || parse_uint(v, 255, &u))
				return -EPROTO;
			b->set.bundle = (uint8_t)u;
			*have = true;
		} else if (el_is(&ch, "path")) {
			if (leaf_text(c, &ch, v, sizeof(v)))
				return -EPROTO;
			b->set.path = !strcmp(v, "external");
		} else if (el_is(&ch, "peer-node")) {
			if (leaf_text(c, &ch, v, sizeof(v)) || parse_uint(v, INT32_MAX, &u))
				return -EPROTO;
			b->peer_node = (int32_t)u;
		} else if (el_is(&ch, "external")) {
			while (!(rc = next_child(c, &ch, &gc))) {
				if (el_is(&gc, "distance") || el_is(&gc, "direction"))
					rc = path_leaf(c, &gc, &ext, v, sizeof(v));
				else
					rc = skip_element(c, &gc, NULL);
				if (rc)
					return -EPROTO;
			}
			if (rc < 0)
				return rc;
		} else if (el_is(&ch, "path-status")) {
			struct path_ref p;
			enum sb_path_status st;
			if (read_path_status(c, &ch, &p, &st))
				return -EPROTO;
			if (n_ps < MAX_PATH_STATUS) {
				ps[n_ps] = p;
				pst[n_ps++] = st;
			}
		} else if (skip_element(c, &ch, NULL)) {
			return -EPROTO;
		}
	}
	if (rc < 0)
		return rc;
	if (b->set.path) {
		b->set.distance = (uint8_t)ext.distance;
		b->set.dir = ext.down;
	}
	/* the status of the selected path: the path-status entry that names it */
	for (size_t i = 0; i < n_ps; i++) {
		if (ps[i].external != (b->set.path == 1))
			continue;
		if (ps[i].external && (!ps[i].has_distance || ps[i].distance != b->set.distance ||
				       !ps[i].has_dir || ps[i].down != b->set.dir))
			continue;
		b->status = pst[i];
	}
	return 0;
}

/* The bundles of one <node> entry (start tag read) when its id is `node`. */
static int read_node(struct cur *c, const struct el *e, uint32_t node, struct sb_bundle_state **out,
		     size_t *n, size_t *cap, bool *faulty)
{
	struct el ch;
	char v[32];
	unsigned long u;
	bool mine = false, is_faulty = false;
	size_t first = *n;
	int rc;
	while (!(rc = next_child(c, e, &ch))) {
		if (el_is(&ch, "id")) {
			if (leaf_text(c, &ch, v, sizeof(v)) || parse_uint(v, UINT32_MAX, &u))
				return -EPROTO;
			mine = u == node;
		} else if (el_is(&ch, "faulty")) {
			if (leaf_text(c, &ch, v, sizeof(v)))
				return -EPROTO;
			is_faulty = !strcmp(v, "true");
		} else if (el_is(&ch, "bundle")) {
			struct sb_bundle_state b;
			bool have = false;
			if (read_bundle(c, &ch, &b, &have))
				return -EPROTO;
			if (!have)
				continue;
			if (grow((void **)out, cap, *n, sizeof(**out)))
				return -ENOMEM;
			(*out)[(*n)++] = b;
		} else if (skip_element(c, &ch, NULL)) {
			return -EPROTO;
		}
	}
	if (rc < 0)
		return rc;
	if (!mine)
		*n = first; /* another node's entry: its bundles are not ours */
	else if (faulty)
		*faulty = is_faulty;
	return 0;
}

static int cmp_bundle_state(const void *a, const void *b)
{
	const struct sb_bundle_state *x = a, *y = b;
	return (int)x->set.bundle - (int)y->set.bundle;
}

int sb_reply_bundles(const char *data, size_t len, uint32_t node, struct sb_bundle_state **out,
		     size_t *n, bool *faulty)
{
	struct cur c = {data, data + len};
	struct el top, ch;
	size_t cap = 0;
	int rc;
	*out = NULL;
	*n = 0;
	if (faulty)
		*faulty = false;
	while (!(rc = next_top(&c, "transceivers", &top))) {
		while (!(rc = next_child(&c, &top, &ch))) {
			rc = el_is(&ch, "node") ? read_node(&c, &ch, node, out, n, &cap, faulty)
						: skip_element(&c, &ch, NULL);
			if (rc)
				break;
		}
		if (rc < 0)
			break;
	}
	if (rc < 0)
		return drop_list((void **)out, n, rc);
	if (!*n) /* entries of other nodes were read and dropped */
		return drop_list((void **)out, n, 0);
	qsort(*out, *n, sizeof(**out), cmp_bundle_state);
	return 0;
}

/* ---- Polatis optical-switch ---------------------------------------------- */

static int cmp_pair(const void *a, const void *b)
{
	const struct sb_pair *x = a, *y = b;
	return x->ingress != y->ingress ? (x->ingress < y->ingress ? -1 : 1)
					: (x->egress > y->egress) - (x->egress < y->egress);
}

static int cmp_port_state(const void *a, const void *b)
{
	const struct sb_port_state *x = a, *y = b;
	return (x->id > y->id) - (x->id < y->id);
}

/* A port id leaf (start tag read) of the model: a decimal in 1..65535. */
static int port_id_leaf(struct cur *c, const struct el *e, uint32_t *id)
{
	char v[32];
	unsigned long u;
	if (leaf_text(c, e, v, sizeof(v)) || parse_uint(v, 65535, &u) || u == 0)
		return -EPROTO;
	*id = (uint32_t)u;
	return 0;
}

/* One <pair> (start tag read); *have: it had both ports. */
static int read_pair(struct cur *c, const struct el *e, struct sb_pair *p, bool *have)
{
	struct el ch;
	bool in = false, out = false;
	int rc;
	*p = (struct sb_pair){0};
	while (!(rc = next_child(c, e, &ch))) {
		if (el_is(&ch, "ingress")) {
			if (port_id_leaf(c, &ch, &p->ingress))
				return -EPROTO;
			in = true;
		} else if (el_is(&ch, "egress")) {
			if (port_id_leaf(c, &ch, &p->egress))
				return -EPROTO;
			out = true;
		} else if (skip_element(c, &ch, NULL)) {
			return -EPROTO;
		}
	}
	*have = in && out;
	return rc < 0 ? rc : 0;
}

/* One <port-config>/<port> (start tag read); *have: it had a port-id. */
static int read_port_state(struct cur *c, const struct el *e, struct sb_port_state *p, bool *have)
{
	/* SB_PORT_STATUS_ENABLED .. SB_PORT_STATUS_UNSUPPORTED */
	static const char *const names[] = {"ENABLED", "DISABLED", "FAILED", "UNSUPPORTED"};
	struct el ch;
	char v[32];
	int rc;
	*p = (struct sb_port_state){0};
	*have = false;
	while (!(rc = next_child(c, e, &ch))) {
		if (el_is(&ch, "port-id")) {
			if (port_id_leaf(c, &ch, &p->id))
				return -EPROTO;
			*have = true;
		} else if (el_is(&ch, "status")) {
			if (leaf_text(c, &ch, v, sizeof(v)) ||
			    !(p->status = (enum sb_port_status)status_value(v, names, 4)))
				return -EPROTO;
		} else if (el_is(&ch, "peer-port")) {
			if (leaf_text(c, &ch, p->peer, sizeof(p->peer)))
				return -EPROTO;
		} else if (skip_element(c, &ch, NULL)) {
			return -EPROTO;
		}
	}
	return rc < 0 ? rc : 0;
}

/* Reads one list entry (its start tag read) into entry; *have: it had its key. */
typedef int (*entry_fn)(struct cur *c, const struct el *e, void *entry, bool *have);

static int pair_entry(struct cur *c, const struct el *e, void *entry, bool *have)
{
	return read_pair(c, e, entry, have);
}

static int port_entry(struct cur *c, const struct el *e, void *entry, bool *have)
{
	return read_port_state(c, e, entry, have);
}

/*
 * The entries named `name` of a list container (start tag read), each read
 * by fn and appended to *out (elements of size sz; out NULL: skipped).
 */
static int read_list(struct cur *c, const struct el *top, const char *name, entry_fn fn, size_t sz,
		     void **out, size_t *n, size_t *cap)
{
	struct el ch;
	int rc;
	union {
		struct sb_pair pair;
		struct sb_port_state port;
	} entry; /* any entry fn reads */
	while (!(rc = next_child(c, top, &ch))) {
		if (!el_is(&ch, name) || !out) {
			if ((rc = skip_element(c, &ch, NULL)))
				return rc;
			continue;
		}
		bool have;
		if ((rc = fn(c, &ch, &entry, &have)))
			return rc;
		if (have && (rc = grow(out, cap, *n, sz)))
			return rc;
		if (have)
			memcpy((char *)*out + sz * (*n)++, &entry, sz);
	}
	return rc < 0 ? rc : 0;
}

/* The leaves of <product-information> (start tag read) into *prod. */
static int read_product(struct cur *c, const struct el *top, struct sb_product *prod)
{
	struct el ch;
	int rc;
	while (!(rc = next_child(c, top, &ch))) {
		char *to = el_is(&ch, "manufacturer")	    ? prod->manufacturer
			   : el_is(&ch, "serial-number")    ? prod->serial
			   : el_is(&ch, "model-name")	    ? prod->model
			   : el_is(&ch, "software-version") ? prod->software
							    : NULL;
		if (to ? leaf_text(c, &ch, to, sizeof(prod->model)) : skip_element(c, &ch, NULL))
			return -EPROTO;
	}
	return rc < 0 ? rc : 0;
}

/*
 * One pass over a Polatis reply's top-level containers: pairs, ports and
 * product information, each into its output when that is not NULL.
 */
static int scan_polatis(const char *data, size_t len, struct sb_pair **pairs, size_t *n_pairs,
			struct sb_port_state **ports, size_t *n_ports, struct sb_product *prod)
{
	struct cur c = {data, data + len};
	struct el top;
	size_t cap_pairs = 0, cap_ports = 0, n_ignored = 0;
	int rc;
	if (pairs) {
		*pairs = NULL;
		*n_pairs = 0;
	}
	if (ports) {
		*ports = NULL;
		*n_ports = 0;
	}
	if (prod)
		*prod = (struct sb_product){0};
	while (!(rc = next_child(&c, NULL, &top))) {
		if (el_is(&top, "cross-connects"))
			rc = read_list(&c, &top, "pair", pair_entry, sizeof(struct sb_pair),
				       (void **)pairs, pairs ? n_pairs : &n_ignored, &cap_pairs);
		else if (el_is(&top, "port-config"))
			rc = read_list(&c, &top, "port", port_entry, sizeof(struct sb_port_state),
				       (void **)ports, ports ? n_ports : &n_ignored, &cap_ports);
		else if (el_is(&top, "product-information") && prod)
			rc = read_product(&c, &top, prod);
		else
			rc = skip_element(&c, &top, NULL);
		if (rc)
			break;
	}
	if (rc >= 0 && pairs && *n_pairs)
		qsort(*pairs, *n_pairs, sizeof(**pairs), cmp_pair);
	if (rc >= 0 && ports && *n_ports)
		qsort(*ports, *n_ports, sizeof(**ports), cmp_port_state);
	/* a list key twice ("1" and "01" alike) is not data the model allows */
	for (size_t i = 1; rc >= 0 && pairs && i < *n_pairs; i++)
		if ((*pairs)[i - 1].ingress == (*pairs)[i].ingress)
			rc = -EPROTO;
	for (size_t i = 1; rc >= 0 && ports && i < *n_ports; i++)
		if ((*ports)[i - 1].id == (*ports)[i].id)
			rc = -EPROTO;
	if (rc < 0) {
		if (ports)
			drop_list((void **)ports, n_ports, rc);
		if (pairs)
			drop_list((void **)pairs, n_pairs, rc);
		return rc;
	}
	return 0;
}

int sb_reply_pairs(const char *data, size_t len, struct sb_pair **pairs, size_t *n_pairs)
{
	return scan_polatis(data, len, pairs, n_pairs, NULL, NULL, NULL);
}

int sb_reply_product(const char *data, size_t len, struct sb_product *prod,
		     struct sb_port_state **ports, size_t *n_ports)
{
	return scan_polatis(data, len, NULL, NULL, ports, n_ports, prod);
}
