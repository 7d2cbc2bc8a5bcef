/*
 * nb_accept.c - keeps gRPC core 1.51's TCP listeners alive when the process
 * runs out of file descriptors, and caps the descriptors its connections
 * take.
 *
 * Why this exists: gRPC core 1.51 (iomgr tcp_server_posix.cc, on_read)
 * treats every accept4() error but EINTR, EAGAIN and ECONNABORTED as the end
 * of that listener: it logs "Failed accept4: Too many open files" and never
 * polls the socket again (grpc/grpc#20418; 1.57 changed this, #33656). 1.51
 * has no channel argument that caps incoming connections (a connection cap
 * in the resource quota came in a later release), and
 * grpc_server_add_channel_from_fd(), which would let an accept loop of our
 * own hand connections to gRPC, accepts insecure credentials only, so it
 * cannot serve mTLS. Designs tried: (1) a reserve descriptor alone does not
 * help, since gRPC gives up on the first EMFILE; (2) an accept loop of our
 * own fails for TLS as said; (3) this one works.
 *
 * How: the program that links this file defines accept4() itself. The
 * dynamic linker binds libgrpc's (and any library's) accept4@GLIBC_2.10
 * reference to the executable's definition, which makes the real call with
 * syscall(SYS_accept4). For the listening sockets registered here, and only
 * for them:
 *  - a connection whose new descriptor is at or above the cap (descriptors
 *    are allocated lowest first, so the process then holds at least that
 *    many) is closed at once: gRPC connections never use the last
 *    descriptors, which stay for device sessions, the store and metrics;
 *  - on EMFILE or ENFILE a reserve descriptor is given up to accept and close
 *    what waits in the backlog, then taken again, and EAGAIN is returned,
 *    which gRPC answers by polling the socket again: the listener lives, and
 *    serves as soon as descriptors are free;
 *  - each is logged at most once per NB_ACCEPT_LOG_INTERVAL_S through
 *    gpr_log (the daemon routes gRPC's log to its own), with the count.
 * Every other accept4() is the plain system call.
 *
 * Thread-safety: nb_accept_guard()/nb_accept_unguard() take guard_mu;
 * accept4() reads the table with atomic loads only (it runs on gRPC's
 * threads, libevent's and any other).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>
#include <netinet/in.h>

#include <grpc/support/log.h>

#include "nb_internal.h"

#define NB_ACCEPT_SLOTS		 8
#define NB_ACCEPT_LOG_INTERVAL_S 10
#define NB_ACCEPT_MIN_HEADROOM	 64

/* Process-wide by nature (accept4 is one symbol): the guarded listening
 * descriptors plus one (0: free slot), the cap and the reserve descriptor. */
static _Atomic int guarded[NB_ACCEPT_SLOTS];
static _Atomic int fd_cap = INT32_MAX;
static _Atomic int reserve_fd = -1;
/* Why a connection was closed at accept; each is logged once per interval. */
enum shed_reason { SHED_CAP, SHED_EMFILE, SHED_REASONS };
static const char *const shed_why[SHED_REASONS] = {
	"the process holds more descriptors than the gRPC cap",
	"the process is out of file descriptors (EMFILE)",
};
static _Atomic long shed_count[SHED_REASONS];	 /* closed since that reason's last line */
static _Atomic int64_t last_log_s[SHED_REASONS]; /* CLOCK_MONOTONIC s of that line */
static pthread_mutex_t guard_mu = PTHREAD_MUTEX_INITIALIZER; /* guards changes of the above */

static int real_accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	return (int)syscall(SYS_accept4, fd, addr, len, flags);
}

static bool is_guarded(int fd)
{
	for (int i = 0; i < NB_ACCEPT_SLOTS; i++)
		if (atomic_load(&guarded[i]) == fd + 1)
			return true;
	return false;
}

/* At most one line per interval and reason, with what was shed since the last one. */
static void note_shed(enum shed_reason r)
{
	struct timespec ts;
	int64_t last = atomic_load(&last_log_s[r]);

	atomic_fetch_add(&shed_count[r], 1);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	if (last != 0 && ts.tv_sec - last < NB_ACCEPT_LOG_INTERVAL_S)
		return;
	if (!atomic_compare_exchange_strong(&last_log_s[r], &last, (int64_t)ts.tv_sec))
		return;
	gpr_log(GPR_ERROR, "gRPC listener: %ld connection(s) closed at accept: %s",
		atomic_exchange(&shed_count[r], 0), shed_why[r]);
}

/* Out of descriptors: close what waits in fd's backlog using the reserve. */
static void shed_backlog(int fd)
{
	int r = atomic_exchange(&reserve_fd, -1);
	int c;

	if (r >= 0)
		close(r);
	while ((c = real_accept4(fd, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
		close(c);
		note_shed(SHED_EMFILE);
	}
	r = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (r >= 0 && (r = atomic_exchange(&reserve_fd, r)) >= 0)
		close(r); /* another thread took one meanwhile */
}

int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	int c;

	if (!is_guarded(fd))
		return real_accept4(fd, addr, len, flags);
	for (;;) {
		c = real_accept4(fd, addr, len, flags);
		if (c >= 0 && c < atomic_load(&fd_cap))
			return c;
		if (c >= 0) {
			close(c);
			note_shed(SHED_CAP);
			continue;
		}
		if (errno != EMFILE && errno != ENFILE)
			return c;
		shed_backlog(fd);
		errno = EAGAIN;
		return -1;
	}
}

/* The cap: the soft limit minus max(NB_ACCEPT_MIN_HEADROOM, a quarter). */
static int compute_cap(void)
{
	struct rlimit rl;
	rlim_t headroom;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur > INT32_MAX)
		return INT32_MAX;
	headroom =
		rl.rlim_cur / 4 > NB_ACCEPT_MIN_HEADROOM ? rl.rlim_cur / 4 : NB_ACCEPT_MIN_HEADROOM;
	return rl.rlim_cur > headroom ? (int)(rl.rlim_cur - headroom) : (int)rl.rlim_cur / 2;
}

static int bound_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t n = sizeof(ss);
	int listening = 0;
	socklen_t ln = sizeof(listening);

	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &ln) != 0 || !listening ||
	    getsockname(fd, (struct sockaddr *)&ss, &n) != 0)
		return -1;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return -1;
}

int nb_accept_guard(int port, int *fds, int max_fds)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0, r;

	if (!d)
		return -errno;
	pthread_mutex_lock(&guard_mu);
	atomic_store(&fd_cap, compute_cap());
	if (atomic_load(&reserve_fd) < 0 && (r = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)
		atomic_store(&reserve_fd, r);
	while ((e = readdir(d)) != NULL && n < max_fds) {
		int fd = e->d_name[0] >= '0' && e->d_name[0] <= '9' ? atoi(e->d_name) : -1;
		int slot = -1;

		if (fd < 0 || fd == dirfd(d) || is_guarded(fd) || bound_port(fd) != port)
			continue;
		for (int i = 0; i < NB_ACCEPT_SLOTS && slot < 0; i++)
			if (atomic_load(&guarded[i]) == 0)
				slot = i;
		if (slot < 0)
			break;
		atomic_store(&guarded[slot], fd + 1);
		fds[n++] = fd;
	}
	pthread_mutex_unlock(&guard_mu);
	closedir(d);
	return n;
}

void nb_accept_unguard(const int *fds, int n_fds)
{
	pthread_mutex_lock(&guard_mu);
	for (int k = 0; k < n_fds; k++)
		for (int i = 0; i < NB_ACCEPT_SLOTS; i++)
			if (atomic_load(&guarded[i]) == fds[k] + 1)
				atomic_store(&guarded[i], 0);
	pthread_mutex_unlock(&guard_mu);
}
