/*
 * sb_wire.c - ocsd's RPCs on the transport of a libnetconf2 session (API
 * and the reasons it is safe in sb_wire.h).
 *
 * Sending: each <rpc> is printed into the send buffer as chunk header,
 * element and end-of-chunks marker, and the buffer - one RPC, or several
 * pipelined ones (sb_wire_send) - leaves in one ssh_channel_write() /
 * SSL_write() (libnetconf2 writes 3 to 7 pieces per RPC, each one SSH
 * packet or TLS record). Message-ids are ocsd-1, ocsd-2, ... in sending
 * order, so the reply awaited next is always the one to the oldest RPC not
 * yet answered (`answered` + 1). Each reply is read no further than its
 * end (sb_deframer_want()) and scanned by sb_reply_scan().
 */
#define _GNU_SOURCE
#include "sb_wire.h"

#include "sb_exec.h"
#include "sb_frame.h"

#include <errno.h>
#include <fcntl.h>
#include <libssh/libssh.h>
#include <nc_client.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>

#define NC_BASE_NS "urn:ietf:params:xml:ns:netconf:base:1.0"
#define READ_PIECE 16384 /* largest read from the transport at once */

/*
 * The leading members of libnetconf2 2.0's struct nc_session, up to its
 * transport (a mirror of the ABI, checked by probe() before use): status,
 * termination reason, killed-by, side (client 0), session id, version
 * (1.0 = 0, 1.1 = 1), transport kind, I/O lock, then the transport union
 * whose SSH member starts with the channel and the SSH session and whose
 * TLS member is the SSL object.
 */
struct nc2_session_head {
	NC_STATUS status;
	NC_SESSION_TERM_REASON term_reason;
	uint32_t killed_by;
	int side;
	uint32_t id;
	int version;
	NC_TRANSPORT_IMPL ti_type;
	pthread_mutex_t *io_lock;
	union {
		struct {
			ssh_channel channel;
			ssh_session session;
		} libssh;
		SSL *tls;
	} ti;
};

struct sb_wire {
	int fd;		     /* the transport's socket */
	ssh_channel channel; /* SSH, or NULL */
	SSL *tls;	     /* TLS, or NULL */
	enum sb_frame_mode mode;
	uint64_t sent;	   /* message-id of the last RPC sent (ocsd-N) */
	uint64_t answered; /* ... and of the last one answered: replies come in order */
	bool trace;	   /* SB_NC_DEBUG: every message to stderr */
	char *out;	   /* send buffer */
	size_t out_len, out_cap;
	struct sb_deframer in;
	bool late;	  /* this sb_wire_recv() is past its deadline */
	size_t late_left; /* ... and may still read this much (recv_msg) */
};

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Proves the layout and the transport; fills the wire's transport. */
static int probe(struct nc_session *ns, int ssh_fd, struct sb_wire *w)
{
	const struct nc2_session_head *h = (const struct nc2_session_head *)ns;
	if (nc_session_get_status(ns) != NC_STATUS_RUNNING || h->status != NC_STATUS_RUNNING ||
	    h->side != 0 || h->id != nc_session_get_id(ns) ||
	    h->version != nc_session_get_version(ns) || h->ti_type != nc_session_get_ti(ns))
		return -ENOTSUP;
	if (h->ti_type == NC_TI_LIBSSH) {
		ssh_channel ch = h->ti.libssh.channel;
		ssh_session s = h->ti.libssh.session;
		if (!ch || !s || ssh_fd < 0 || ssh_get_fd(s) != ssh_fd ||
		    ssh_channel_get_session(ch) != s || !ssh_channel_is_open(ch))
			return -ENOTSUP;
		w->channel = ch;
		w->fd = ssh_fd;
	} else if (h->ti_type == NC_TI_OPENSSL) {
		if (!h->ti.tls || !SSL_is_init_finished(h->ti.tls))
			return -ENOTSUP;
		w->tls = h->ti.tls;
		w->fd = SSL_get_fd(w->tls);
		/* SSL_read must return WANT_READ rather than block in recv() */
		int fl = w->fd < 0 ? -1 : fcntl(w->fd, F_GETFL);
		if (fl < 0 || !(fl & O_NONBLOCK))
			return -ENOTSUP;
	} else {
		return -ENOTSUP;
	}
	w->mode = h->version ? SB_FRAME_CHUNKED : SB_FRAME_EOM;
	return 0;
}

int sb_wire_fd(const struct sb_wire *w)
{
	return w->fd;
}

int sb_wire_open(struct nc_session *ns, int ssh_fd, struct sb_wire **out)
{
	*out = NULL;
	if (!ns)
		return -ENOTSUP;
	struct sb_wire *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	int rc = probe(ns, ssh_fd, w);
	if (rc) {
		free(w);
		return rc;
	}
	sb_deframer_init(&w->in, w->mode, SB_WIRE_MAX_REPLY);
	w->trace = getenv("SB_NC_DEBUG") != NULL;
	*out = w;
	return 0;
}

void sb_wire_shutdown(struct sb_wire *w)
{
	if (w && w->fd >= 0)
		shutdown(w->fd, SHUT_RDWR);
}

void sb_wire_free(struct sb_wire *w)
{
	if (!w)
		return;
	sb_deframer_clear(&w->in);
	free(w->out);
	free(w);
}

/*
 * Waits for the transport's socket until deadline (sb_exec_wait_fd: in a
 * coroutine of the engine's loop this yields to the loop): 0 (try again),
 * -ETIMEDOUT, -ECONNRESET.
 */
static int wait_socket(struct sb_wire *w, short events, int64_t deadline_ms)
{
	int r = sb_exec_wait_fd(w->fd, events, deadline_ms);
	return r > 0 ? 0 : r == 0 ? -ETIMEDOUT : -ECONNRESET;
}

/* What SSL_read/SSL_write's failure r asks for: a wait (0 after it), or the end. */
static int tls_retry(struct sb_wire *w, int r, int64_t deadline_ms)
{
	switch (SSL_get_error(w->tls, r)) {
	case SSL_ERROR_WANT_READ:
		return wait_socket(w, POLLIN, deadline_ms);
	case SSL_ERROR_WANT_WRITE:
		return wait_socket(w, POLLOUT, deadline_ms);
	default:
		return -ECONNRESET;
	}
}

static int write_all(struct sb_wire *w, const char *p, size_t n, int64_t deadline_ms)
{
	while (n) {
		if (w->channel) {
			if (!ssh_channel_is_open(w->channel) || ssh_channel_is_eof(w->channel))
				return -ECONNRESET;
			int r = ssh_channel_write(w->channel, p, (uint32_t)n);
			if (r < 0)
				return -ECONNRESET;
			p += r;
			n -= (size_t)r;
		} else {
			ERR_clear_error();
			int r = SSL_write(w->tls, p, n > INT32_MAX ? INT32_MAX : (int)n);
			if (r > 0) {
				p += r;
				n -= (size_t)r;
			} else {
				int rc = tls_retry(w, r, deadline_ms);
				if (rc)
					return rc;
			}
		}
		if (n && mono_ms() >= deadline_ms)
			return -ETIMEDOUT;
	}
	return 0;
}

/*
 * Reads at most `want` bytes into buf: how many (> 0), or a negative errno.
 * What already arrived is read without waiting, even past the deadline (no
 * reply that came in time is lost to a late look; recv_msg() bounds how
 * much that is); only a wait can time out. libssh reads the socket itself: ssh_channel_poll() takes
 * in what the socket holds without blocking, and the wait on the socket comes only when that found
 * nothing (the channel's buffer and the socket empty, or a packet not complete yet). A TLS socket
 * is non-blocking (checked at open): SSL_read() says when it needs the socket.
 */
static int read_some(struct sb_wire *w, char *buf, size_t want, int64_t deadline_ms)
{
	for (;;) {
		int rc;
		if (w->channel) {
			int avail = ssh_channel_poll(w->channel, 0);
			if (avail == SSH_ERROR || avail == SSH_EOF)
				return -ECONNRESET;
			if (avail > 0) {
				if ((size_t)avail < want)
					want = (size_t)avail;
				int r = ssh_channel_read_nonblocking(w->channel, buf,
								     (uint32_t)want, 0);
				if (r == SSH_ERROR || r == SSH_EOF)
					return -ECONNRESET;
				if (r > 0)
					return r;
			}
			rc = wait_socket(w, POLLIN, deadline_ms);
		} else {
			ERR_clear_error();
			int r = SSL_read(w->tls, buf, (int)want);
			if (r > 0)
				return r;
			rc = tls_retry(w, r, deadline_ms);
		}
		if (rc)
			return rc;
	}
}

/*
 * What had arrived for this wire when it is asked: the plaintext the
 * transport holds (the SSH channel's buffer, which ssh_channel_poll() first
 * fills from the socket, or TLS's decrypted record) plus the bytes the
 * socket holds still encrypted (an upper bound of the plaintext they carry).
 */
static size_t arrived(struct sb_wire *w)
{
	size_t n = 0;
	if (w->channel) {
		int avail = ssh_channel_poll(w->channel, 0);
		n += avail > 0 ? (size_t)avail : 0;
	} else {
		int pending = SSL_pending(w->tls);
		n += pending > 0 ? (size_t)pending : 0;
	}
	int sock = 0;
	if (ioctl(w->fd, FIONREAD, &sock) == 0 && sock > 0)
		n += (size_t)sock;
	return n;
}

/*
 * Receives one whole message into w->in. The deadline bounds the whole
 * reply, notifications before it included (issue H M1: a device that trickles its reply, or sends a
 * chunk that never ends, kept a reader that read whatever had arrived going far past it): once it
 * has passed, only what had arrived by then is read, without waiting (w->late_left, counted from
 * the first look past the deadline in this sb_wire_recv()); a reply it does not complete is a
 * timeout.
 */
static int recv_msg(struct sb_wire *w, int64_t deadline_ms)
{
	char buf[READ_PIECE];
	sb_deframer_reset(&w->in);
	while (!sb_deframer_done(&w->in)) {
		size_t want = sb_deframer_want(&w->in);
		if (!want)
			return w->in.error ? w->in.error : -EPROTO;
		if (want > sizeof(buf))
			want = sizeof(buf);
		if (!w->late && mono_ms() >= deadline_ms) {
			w->late = true;
			w->late_left = arrived(w);
		}
		if (w->late && !w->late_left)
			return -ETIMEDOUT;
		if (w->late && want > w->late_left)
			want = w->late_left;
		int r = read_some(w, buf, want, deadline_ms);
		if (r < 0)
			return r;
		if (w->late)
			w->late_left -= (size_t)r < w->late_left ? (size_t)r : w->late_left;
		ssize_t used = sb_deframer_feed(&w->in, buf, (size_t)r);
		if (used < 0)
			return (int)used;
	}
	return 0;
}

/*
 * Appends the framed <rpc> of op, message-id ocsd-<id>, to w->out at
 * w->out_len (the head is printed after the body's length is known, so
 * messages can follow each other in one buffer).
 */
static int append_rpc(struct sb_wire *w, const char *op, uint64_t id)
{
	char open_tag[96];
	int open_len = snprintf(open_tag, sizeof(open_tag),
				"<rpc message-id=\"ocsd-%llu\" xmlns=\"" NC_BASE_NS "\">",
				(unsigned long long)id);
	size_t tail_len;
	const char *tail = sb_frame_tail(w->mode, &tail_len);
	size_t op_len = strlen(op);
	size_t body_len = (size_t)open_len + op_len + 6;
	size_t need = w->out_len + SB_FRAME_HEAD_MAX + body_len + tail_len;
	if (need > w->out_cap) {
		char *o = realloc(w->out, need);
		if (!o)
			return -ENOMEM;
		w->out = o;
		w->out_cap = need;
	}
	char head[SB_FRAME_HEAD_MAX];
	ssize_t head_len = sb_frame_head(w->mode, body_len, head);
	if (head_len < 0)
		return (int)head_len;
	char *p = w->out + w->out_len;
	memcpy(p, head, (size_t)head_len);
	p += head_len;
	memcpy(p, open_tag, (size_t)open_len);
	p += open_len;
	memcpy(p, op, op_len);
	p += op_len;
	memcpy(p, "</rpc>", 6);
	p += 6;
	memcpy(p, tail, tail_len);
	w->out_len += (size_t)head_len + body_len + tail_len;
	return 0;
}

int sb_wire_send(struct sb_wire *w, const char *const *ops, size_t n, int64_t deadline_ms)
{
	if (!n || n > SB_WIRE_MAX_PIPELINE || w->sent - w->answered + n > SB_WIRE_MAX_PIPELINE)
		return -EINVAL;
	w->out_len = 0;
	for (size_t i = 0; i < n; i++) {
		int rc = append_rpc(w, ops[i], w->sent + 1 + i);
		if (rc)
			return rc;
		if (w->trace)
			fprintf(stderr, "sb_wire: sent rpc ocsd-%llu: %s\n",
				(unsigned long long)(w->sent + 1 + i), ops[i]);
	}
	/* counted as sent before the write: after a failed write the session
	 * is out of step anyway (sb_wire.h) */
	w->sent += n;
	return write_all(w, w->out, w->out_len, deadline_ms);
}

int sb_wire_recv(struct sb_wire *w, int64_t deadline_ms, struct sb_reply *reply)
{
	*reply = (struct sb_reply){0};
	if (w->answered >= w->sent)
		return -EINVAL;
	char msgid[32];
	snprintf(msgid, sizeof(msgid), "ocsd-%llu", (unsigned long long)(w->answered + 1));
	w->late = false;
	int rc;
	for (;;) {
		if ((rc = recv_msg(w, deadline_ms)))
			break;
		size_t n;
		const char *msg = sb_deframer_msg(&w->in, &n);
		if (w->trace)
			fprintf(stderr, "sb_wire: received %.*s\n", (int)n, msg);
		if ((rc = sb_reply_scan(msg, n, msgid, reply)))
			break;
		if (reply->kind != SB_REPLY_NOTIFICATION) {
			w->answered++;
			return 0;
		}
	}
	if (rc == -EPROTO && !reply->error[0])
		snprintf(reply->error, sizeof(reply->error), "broken NETCONF framing");
	else if (rc == -EMSGSIZE)
		snprintf(reply->error, sizeof(reply->error), "reply larger than %u bytes",
			 SB_WIRE_MAX_REPLY);
	return rc;
}
