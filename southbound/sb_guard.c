/*
 * sb_guard.c - the deadline of a session's NETCONF setup (sb_guard.h).
 *
 * The guard's thread, drawn:
 *
 *   disarmed --arm--> armed --deadline passes--> fired (socket shut down)
 *      ^                |                          |
 *      +----disarm------+-----------disarm---------+
 *
 * Lock rule: every field is guarded by mu; the thread shuts sockets down
 * with mu held, so a disarm that returns has seen the outcome and the
 * guard touches nothing of that connect afterwards.
 */
#define _GNU_SOURCE /* F_DUPFD_CLOEXEC */
#include "sb_guard.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define GUARD_MAX_PEERS	  8  /* addresses of one host name that are watched */
#define GUARD_MAX_SOCKETS 64 /* sockets to one device that predate an arm */

/* One address of the device, as /proc/net/tcp{,6} prints it: the raw
 * address words and the port in host order. */
struct guard_peer {
	int family;
	uint32_t addr[4];
	unsigned port;
};

struct sb_guard {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t thread;
	bool stop;
	bool armed;
	bool fired;
	int64_t deadline_ms;
	int fd; /* SSH: a dup of the session's socket; -1 for TLS */
	/* TLS: the device's addresses, and the inodes of the sockets to them
	 * that existed when the guard was armed */
	struct guard_peer peers[GUARD_MAX_PEERS];
	size_t n_peers;
	unsigned long before[GUARD_MAX_SOCKETS];
	size_t n_before;
};

static bool peer_match(const struct sb_guard *g, int family, const uint32_t *addr, unsigned port)
{
	size_t words = family == AF_INET ? 1 : 4;
	for (size_t i = 0; i < g->n_peers; i++)
		if (g->peers[i].family == family && g->peers[i].port == port &&
		    !memcmp(g->peers[i].addr, addr, words * sizeof(uint32_t)))
			return true;
	return false;
}

/*
 * The inodes of the TCP sockets (any state, SYN_SENT included: a connect
 * that waits for a silent host) whose remote end is one of g's peers, read
 * from /proc/net/tcp and tcp6. Returns how many were written to out
 * (at most cap).
 */
static size_t peer_inodes(const struct sb_guard *g, unsigned long *out, size_t cap)
{
	static const struct {
		const char *path;
		int family;
	} tables[] = {{"/proc/net/tcp", AF_INET}, {"/proc/net/tcp6", AF_INET6}};
	size_t n = 0;
	for (size_t t = 0; t < 2; t++) {
		FILE *f = fopen(tables[t].path, "re");
		if (!f)
			continue;
		char line[512];
		if (!fgets(line, sizeof(line), f)) { /* the heading */
			fclose(f);
			continue;
		}
		while (n < cap && fgets(line, sizeof(line), f)) {
			char local[64], remote[64];
			unsigned long inode;
			unsigned port;
			/* sl local rem st tx:rx tr:when retrnsmt uid timeout inode */
			if (sscanf(line, "%*s %63s %63s %*s %*s %*s %*s %*s %*s %lu", local, remote,
				   &inode) != 3)
				continue;
			char *colon = strchr(remote, ':');
			size_t words = tables[t].family == AF_INET ? 1 : 4;
			if (!colon || (size_t)(colon - remote) != words * 8 ||
			    sscanf(colon + 1, "%x", &port) != 1)
				continue;
			uint32_t addr[4] = {0};
			for (size_t w = 0; w < words; w++) {
				char word[9];
				memcpy(word, remote + 8 * w, 8);
				word[8] = '\0';
				addr[w] = (uint32_t)strtoul(word, NULL, 16);
			}
			if (inode && peer_match(g, tables[t].family, addr, port))
				out[n++] = inode;
		}
		fclose(f);
	}
	return n;
}

static bool holds(const unsigned long *inodes, size_t n, unsigned long inode)
{
	for (size_t i = 0; i < n; i++)
		if (inodes[i] == inode)
			return true;
	return false;
}

/* Shuts down this process's sockets to g's peers that were not there at
 * the arm: the TLS connect's own. */
static void shut_new_sockets(const struct sb_guard *g)
{
	unsigned long now[GUARD_MAX_SOCKETS];
	size_t n_now = peer_inodes(g, now, GUARD_MAX_SOCKETS);
	DIR *dir = opendir("/proc/self/fd");
	if (!dir)
		return;
	struct dirent *e;
	while ((e = readdir(dir))) {
		char *end;
		long num = strtol(e->d_name, &end, 10);
		if (end == e->d_name || *end || num == dirfd(dir))
			continue;
		/* a dup: the number may be closed and reused meanwhile, the dup
		 * is checked for what it is */
		int d = fcntl((int)num, F_DUPFD_CLOEXEC, 0);
		if (d < 0)
			continue;
		struct stat st;
		if (!fstat(d, &st) && S_ISSOCK(st.st_mode) && holds(now, n_now, st.st_ino) &&
		    !holds(g->before, g->n_before, st.st_ino))
			shutdown(d, SHUT_RDWR);
		close(d);
	}
	closedir(dir);
}

/* CLOCK_MONOTONIC in milliseconds, sb_now_ms()'s clock (not called: the
 * driver calls this file, never the other way) */
static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct timespec ms_to_ts(int64_t ms)
{
	return (struct timespec){.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
}

static void *guard_main(void *arg)
{
	struct sb_guard *g = arg;
	pthread_mutex_lock(&g->mu);
	while (!g->stop) {
		if (!g->armed || g->fired) {
			pthread_cond_wait(&g->cv, &g->mu);
		} else if (now_ms() < g->deadline_ms) {
			struct timespec ts = ms_to_ts(g->deadline_ms);
			pthread_cond_timedwait(&g->cv, &g->mu, &ts);
		} else {
			g->fired = true;
			if (g->fd >= 0)
				shutdown(g->fd, SHUT_RDWR);
			else
				shut_new_sockets(g);
		}
	}
	pthread_mutex_unlock(&g->mu);
	return NULL;
}

int sb_guard_new(struct sb_guard **out)
{
	struct sb_guard *g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->fd = -1;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* now_ms()'s clock */
	pthread_cond_init(&g->cv, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&g->mu, NULL);
	int rc = pthread_create(&g->thread, NULL, guard_main, g);
	if (rc) {
		pthread_cond_destroy(&g->cv);
		pthread_mutex_destroy(&g->mu);
		free(g);
		return -rc;
	}
	*out = g;
	return 0;
}

void sb_guard_free(struct sb_guard *g)
{
	if (!g)
		return;
	pthread_mutex_lock(&g->mu);
	g->stop = true;
	pthread_cond_signal(&g->cv);
	pthread_mutex_unlock(&g->mu);
	pthread_join(g->thread, NULL);
	if (g->fd >= 0)
		close(g->fd);
	pthread_cond_destroy(&g->cv);
	pthread_mutex_destroy(&g->mu);
	free(g);
}

static void arm_locked(struct sb_guard *g, int fd, int64_t deadline_ms)
{
	g->fd = fd;
	g->deadline_ms = deadline_ms;
	g->armed = true;
	g->fired = false;
	pthread_cond_signal(&g->cv);
}

int sb_guard_arm(struct sb_guard *g, int fd, int64_t deadline_ms)
{
	int d = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (d < 0)
		return -errno;
	pthread_mutex_lock(&g->mu);
	arm_locked(g, d, deadline_ms);
	pthread_mutex_unlock(&g->mu);
	return 0;
}

int sb_guard_arm_tls(struct sb_guard *g, const char *host, unsigned port, int64_t deadline_ms)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
	struct addrinfo *res = NULL;
	if (getaddrinfo(host, NULL, &hints, &res) || !res)
		return -ENOENT;
	pthread_mutex_lock(&g->mu);
	g->n_peers = 0;
	for (struct addrinfo *a = res; a && g->n_peers < GUARD_MAX_PEERS; a = a->ai_next) {
		struct guard_peer *p = &g->peers[g->n_peers];
		memset(p, 0, sizeof(*p));
		p->family = a->ai_family;
		p->port = port;
		if (a->ai_family == AF_INET)
			memcpy(p->addr, &((struct sockaddr_in *)a->ai_addr)->sin_addr, 4);
		else if (a->ai_family == AF_INET6)
			memcpy(p->addr, &((struct sockaddr_in6 *)a->ai_addr)->sin6_addr, 16);
		else
			continue;
		g->n_peers++;
	}
	freeaddrinfo(res);
	g->n_before = peer_inodes(g, g->before, GUARD_MAX_SOCKETS);
	arm_locked(g, -1, deadline_ms);
	pthread_mutex_unlock(&g->mu);
	return 0;
}

bool sb_guard_disarm(struct sb_guard *g)
{
	pthread_mutex_lock(&g->mu);
	bool fired = g->fired;
	int fd = g->fd;
	g->armed = false;
	g->fired = false;
	g->fd = -1;
	pthread_mutex_unlock(&g->mu);
	if (fd >= 0)
		close(fd);
	return fired;
}
