/*
 * devsim_wire.c - the reply faults garble, trickle and endless of
 * ocs-devsim (devsim_wire.h): ssh_channel_write() and SSL_write() as this
 * executable defines them, handing every write to libssh or OpenSSL except
 * those of a reply this thread armed.
 *
 * A fault that cannot go on (the transport failed, the peer closed, the
 * server stops) shuts the socket down and fails the write: libnetconf2 then
 * sees a dead transport and ends the session, whatever it retries.
 */
#define _GNU_SOURCE /* RTLD_NEXT, POLLRDHUP */
#include "devsim_wire.h"

#include <dlfcn.h>
#include <libssh/libssh.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* chunk size "12abc" is not a number (RFC 6242 section 4.2: 1*DIGIT) */
static const char garble_chunked[] = "\n#12abc\n<rpc-reply/>\n##\n";
/* not XML: a start tag that never closes */
static const char garble_eom[] = "<rpc-reply <<garbled]]>]]>";
static const char endless_header[] = "\n#4294967295\n";

/* The reply this thread is writing, as armed by the RPC callback. */
struct armed {
	enum devsim_wire_kind kind;
	int ms;
	int fd;
	bool chunked;
	const atomic_bool *stop;
	bool started; /* the reply's first piece went (or was replaced) */
	bool failed;  /* the fault ended the session: every later write fails */
};

static _Thread_local struct armed tl;

typedef int (*ssl_write_fn)(SSL *, const void *, int);
typedef int (*ssh_write_fn)(ssh_channel, const void *, uint32_t);

static ssl_write_fn real_ssl_write;
static ssh_write_fn real_ssh_write;
static pthread_once_t resolve_once = PTHREAD_ONCE_INIT;

static void resolve(void)
{
	real_ssl_write = (ssl_write_fn)dlsym(RTLD_NEXT, "SSL_write");
	real_ssh_write = (ssh_write_fn)dlsym(RTLD_NEXT, "ssh_channel_write");
}

void devsim_wire_arm(const struct devsim_wire_fault *f, int fd, bool chunked,
		     const atomic_bool *stop)
{
	tl = (struct armed){
		.kind = f->kind, .ms = f->ms, .fd = fd, .chunked = chunked, .stop = stop};
}

void devsim_wire_disarm(void)
{
	tl = (struct armed){.kind = DEVSIM_WIRE_NORMAL};
}

/* Whether the fault must stop: the server stops or the peer closed. */
static bool must_stop(int wait_ms)
{
	if (tl.stop && atomic_load(tl.stop))
		return true;
	struct pollfd p = {tl.fd, POLLRDHUP, 0};
	return poll(&p, 1, wait_ms) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* Sleeps ms milliseconds in slices; true when the fault must stop instead. */
static bool sleep_or_stop(int ms)
{
	for (int left = ms; left > 0; left -= 50)
		if (must_stop(left < 50 ? left : 50))
			return true;
	return must_stop(0);
}

/* One transport: the SSH channel or the TLS connection of the reply. */
struct sink {
	SSL *tls;
	ssh_channel ch;
};

/* Writes all of buf through the real transport; 0, or -1 when the fault must stop. */
static int put_all(const struct sink *k, const char *buf, size_t len)
{
	size_t done = 0;
	while (done < len) {
		if (must_stop(0))
			return -1;
		int n;
		if (k->tls) {
			n = real_ssl_write(k->tls, buf + done, (int)(len - done));
			if (n <= 0) {
				int e = SSL_get_error(k->tls, n);
				if (e != SSL_ERROR_WANT_WRITE && e != SSL_ERROR_WANT_READ)
					return -1;
				n = 0;
			}
		} else {
			n = real_ssh_write(k->ch, buf + done, (uint32_t)(len - done));
			if (n < 0)
				return -1;
		}
		if (n == 0 && sleep_or_stop(10)) /* window or buffer full */
			return -1;
		done += (size_t)n;
	}
	return 0;
}

/* Small pieces leave at once, not when the cork or Nagle lets them. */
static void unbuffer(int fd)
{
	int off = 0, on = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_CORK, &off, sizeof(off));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
}

/* One piece of the armed reply; 0 when it counts as written, -1 when the session must end. */
static int write_armed(const struct sink *k, const char *buf, size_t len)
{
	bool first = !tl.started;
	tl.started = true;
	switch (tl.kind) {
	case DEVSIM_WIRE_GARBLE:
		if (!first)
			return 0; /* the rest of the real reply is swallowed */
		return tl.chunked ? put_all(k, garble_chunked, sizeof(garble_chunked) - 1)
				  : put_all(k, garble_eom, sizeof(garble_eom) - 1);
	case DEVSIM_WIRE_TRICKLE:
		if (first)
			unbuffer(tl.fd);
		for (size_t i = 0; i < len; i++)
			if (sleep_or_stop(tl.ms) || put_all(k, buf + i, 1))
				return -1;
		return 0;
	case DEVSIM_WIRE_ENDLESS: {
		unbuffer(tl.fd);
		char junk[DEVSIM_WIRE_ENDLESS_BYTES];
		for (size_t i = 0; i < sizeof(junk); i++)
			junk[i] = (char)('a' + i % 26);
		if (put_all(k, endless_header, sizeof(endless_header) - 1))
			return -1;
		while (!sleep_or_stop(DEVSIM_WIRE_ENDLESS_MS))
			if (put_all(k, junk, sizeof(junk)))
				break;
		return -1; /* the session ends here */
	}
	case DEVSIM_WIRE_NORMAL:
		break;
	}
	return put_all(k, buf, len);
}

/* 0: the piece counts as written; -1: the session ends (socket shut down). */
static int armed_write(const struct sink *k, const void *buf, size_t len)
{
	if (!tl.failed && write_armed(k, buf, len) == 0)
		return 0;
	tl.failed = true;
	shutdown(tl.fd, SHUT_RDWR);
	return -1;
}

int SSL_write(SSL *ssl, const void *buf, int num)
{
	pthread_once(&resolve_once, resolve);
	if (tl.kind == DEVSIM_WIRE_NORMAL || num <= 0)
		return real_ssl_write(ssl, buf, num);
	struct sink k = {.tls = ssl};
	return armed_write(&k, buf, (size_t)num) ? -1 : num;
}

int ssh_channel_write(ssh_channel channel, const void *data, uint32_t len)
{
	pthread_once(&resolve_once, resolve);
	if (tl.kind == DEVSIM_WIRE_NORMAL || !len)
		return real_ssh_write(channel, data, len);
	struct sink k = {.ch = channel};
	return armed_write(&k, data, len) ? SSH_ERROR : (int)len;
}
