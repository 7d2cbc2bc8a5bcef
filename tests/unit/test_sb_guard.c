/*
 * test_sb_guard.c - the deadline of a session's setup (southbound/sb_guard.h)
 * on real sockets, without NETCONF: a wait on an armed socket ends at the
 * deadline; a guard disarmed in time leaves the socket alone; a socket the
 * caller closed while armed is never confused with a later one of the
 * same number; for TLS, the sockets to the address that appeared after the
 * arm are shut down, connected or still in SYN_SENT (a listener whose
 * accept queue is full drops their SYNs, as a silent host would), and the
 * ones from before are left alone.
 */
#include "sb_guard.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* Whether fd reads end of file (shut down) within ms. */
static bool reads_eof(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char c;
	return poll(&p, 1, ms) == 1 && recv(fd, &c, 1, MSG_DONTWAIT) == 0;
}

/* Whether a byte sent from `from` arrives on `to`. */
static bool carries(int from, int to)
{
	char c = 'x';
	struct pollfd p = {.fd = to, .events = POLLIN};
	return send(from, &c, 1, MSG_NOSIGNAL) == 1 && poll(&p, 1, 2000) == 1 &&
	       recv(to, &c, 1, 0) == 1 && c == 'x';
}

static void test_fires(void **state)
{
	struct sb_guard *g;
	int sv[2];
	assert_int_equal(sb_guard_new(&g), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	int64_t t0 = now_ms();
	assert_int_equal(sb_guard_arm(g, sv[0], t0 + 150), 0);
	assert_true(reads_eof(sv[0], 5000)); /* the wait ends at the deadline */
	int64_t took = now_ms() - t0;
	assert_true(took >= 140 && took < 3000);
	assert_true(sb_guard_disarm(g));
	close(sv[0]);
	close(sv[1]);
	sb_guard_free(g);
}

static void test_disarmed_in_time(void **state)
{
	struct sb_guard *g;
	int sv[2];
	assert_int_equal(sb_guard_new(&g), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(sb_guard_arm(g, sv[0], now_ms() + 200), 0);
	assert_false(sb_guard_disarm(g));
	sleep_ms(400);
	assert_true(carries(sv[1], sv[0]));
	assert_true(carries(sv[0], sv[1]));
	/* armed again, it fires again */
	assert_int_equal(sb_guard_arm(g, sv[0], now_ms() + 50), 0);
	assert_true(reads_eof(sv[0], 5000));
	assert_true(sb_guard_disarm(g));
	close(sv[0]);
	close(sv[1]);
	sb_guard_free(g);
}

/* The caller's socket closed while armed (libnetconf2 frees a failed
 * session) and its number reused: the guard shuts down its own dup, which
 * is the old socket, never the new one. */
static void test_number_reused(void **state)
{
	struct sb_guard *g;
	int a[2], b[2];
	assert_int_equal(sb_guard_new(&g), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, a), 0);
	int number = a[0];
	assert_int_equal(sb_guard_arm(g, a[0], now_ms() + 150), 0);
	close(a[0]);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, b), 0);
	assert_true(b[0] == number || b[1] == number); /* the lowest free number */
	sleep_ms(400);
	assert_true(sb_guard_disarm(g));
	assert_true(carries(b[1], b[0]));
	assert_true(carries(b[0], b[1]));
	assert_true(reads_eof(a[1], 1000)); /* the old socket was the one shut down */
	close(a[1]);
	close(b[0]);
	close(b[1]);
	sb_guard_free(g);
}

static int listener(int backlog, unsigned *port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, backlog), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	*port = ntohs(sa.sin_port);
	return fd;
}

/* A non-blocking connect to 127.0.0.1:port; *up: it completed within ms. */
static int connect_to(unsigned port, int ms, bool *up)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				 .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	assert_true(fd >= 0);
	int rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	assert_true(rc == 0 || errno == EINPROGRESS);
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	int err = 0;
	socklen_t len = sizeof(err);
	*up = rc == 0 || (poll(&p, 1, ms) == 1 &&
			  !getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) && err == 0);
	return fd;
}

static bool syn_sent(int fd)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	return !getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) && ti.tcpi_state == 2;
}

static void test_tls_connected(void **state)
{
	struct sb_guard *g;
	unsigned port;
	bool up;
	int l = listener(8, &port);
	int old = connect_to(port, 2000, &up);
	assert_true(up);
	int old_peer = accept(l, NULL, NULL);
	assert_true(old_peer >= 0);
	assert_int_equal(sb_guard_new(&g), 0);
	int64_t t0 = now_ms();
	assert_int_equal(sb_guard_arm_tls(g, "127.0.0.1", port, t0 + 200), 0);
	int fresh = connect_to(port, 2000, &up); /* what nc_connect_tls() would make */
	assert_true(up);
	assert_true(reads_eof(fresh, 5000));
	assert_true(now_ms() - t0 >= 190);
	assert_true(sb_guard_disarm(g));
	assert_true(carries(old_peer, old)); /* there before the arm: left alone */
	assert_true(carries(old, old_peer));
	sb_guard_free(g);
	close(fresh);
	close(old);
	close(old_peer);
	close(l);
}

static void test_tls_syn_sent(void **state)
{
	struct sb_guard *g;
	unsigned port;
	bool up = true;
	int l = listener(0, &port); /* never accepted: its queue fills */
	int fds[8], n = 0;
	while (up && n < 8)
		fds[n++] = connect_to(port, 300, &up);
	assert_false(up); /* the last one's SYN is dropped: SYN_SENT */
	int before = fds[n - 1];
	assert_true(syn_sent(before));
	assert_int_equal(sb_guard_new(&g), 0);
	int64_t t0 = now_ms();
	assert_int_equal(sb_guard_arm_tls(g, "127.0.0.1", port, t0 + 300), 0);
	int fresh = connect_to(port, 100, &up);
	assert_false(up);
	assert_true(syn_sent(fresh));
	struct pollfd p = {.fd = fresh, .events = POLLOUT};
	assert_int_equal(poll(&p, 1, 5000), 1); /* the connect ends at the deadline */
	int64_t took = now_ms() - t0;
	assert_true(took >= 290 && took < 3000);
	assert_false(syn_sent(fresh));
	assert_true(sb_guard_disarm(g));
	assert_true(syn_sent(before)); /* there before the arm: left alone */
	sb_guard_free(g);
	close(fresh);
	for (int i = 0; i < n; i++)
		close(fds[i]);
	close(l);
}

static void test_tls_unresolvable(void **state)
{
	struct sb_guard *g;
	assert_int_equal(sb_guard_new(&g), 0);
	assert_int_equal(sb_guard_arm_tls(g, "no-such-host.invalid", 830, now_ms() + 100), -ENOENT);
	assert_false(sb_guard_disarm(g)); /* never armed */
	sb_guard_free(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fires),	      cmocka_unit_test(test_disarmed_in_time),
		cmocka_unit_test(test_number_reused), cmocka_unit_test(test_tls_connected),
		cmocka_unit_test(test_tls_syn_sent),  cmocka_unit_test(test_tls_unresolvable),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
