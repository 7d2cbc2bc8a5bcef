/*
 * etcd_harness.c - starts and stops a real etcd for tests, and relays to it
 * through a relay that can lose an answer (etcd_harness.h).
 */
#define _GNU_SOURCE /* memmem */
#include "etcd_harness.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include "etcd.h"
#include "sb_testlib.h"

#ifndef OCSD_ETCD_PATH
#define OCSD_ETCD_PATH "/usr/bin/etcd"
#endif

static pid_t spawn(struct eh_etcd *e)
{
	char peer[64], cluster[96], data[300], log[300];
	const char *argv[40] = {OCSD_ETCD_PATH, "--name", "default", "--data-dir", data,
				"--listen-client-urls", e->endpoint, "--advertise-client-urls",
				e->endpoint, "--listen-peer-urls", peer,
				"--initial-advertise-peer-urls", peer, "--initial-cluster", cluster,
				/* etcd grants at least 1.5 election timeouts'
				 * worth of lease TTL, in whole seconds: with
				 * the default 1 s a 1 s lease lasts 2 s */
				"--heartbeat-interval", "50", "--election-timeout", "500"};
	int argc = 19;
	pid_t pid;

	snprintf(peer, sizeof(peer), "http://127.0.0.1:%d", e->peer_port);
	snprintf(cluster, sizeof(cluster), "default=%s", peer);
	snprintf(data, sizeof(data), "%s/data", e->dir);
	snprintf(log, sizeof(log), "%s/etcd.log", e->dir);
	if (e->tls) {
		snprintf(e->server_cert, sizeof(e->server_cert), "%s/certs/etcd.pem", e->dir);
		snprintf(e->server_key, sizeof(e->server_key), "%s/certs/etcd.key", e->dir);
		argv[argc++] = "--cert-file";
		argv[argc++] = e->server_cert;
		argv[argc++] = "--key-file";
		argv[argc++] = e->server_key;
		argv[argc++] = "--trusted-ca-file";
		argv[argc++] = e->ca;
		argv[argc++] = "--client-cert-auth";
	}
	argv[argc] = NULL;
	pid = fork();
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	return pid;
}

/* Waits until a range answers (etcd listens before it has elected itself). */
static int wait_serving(struct eh_etcd *e)
{
	struct etcd_opts o = {.endpoints = e->endpoint, .timeout_ms = 500};
	struct etcd_client *c;
	char err[256];
	int rc = -1;

	if (e->tls) {
		o.ca_file = e->ca;
		o.cert_file = e->cert;
		o.key_file = e->key;
	}
	if (tl_wait_listening(e->client_port, 1, "etcd", e->pid, 30) != 0)
		return -1;
	if (etcd_client_new(&o, &c, err, sizeof(err)) != 0) {
		fprintf(stderr, "eh_start: %s\n", err);
		return -1;
	}
	for (int i = 0; i < 200 && rc != 0; i++) {
		struct etcd_kvs r;

		rc = etcd_range(c, "x", 1, NULL, 0, 0, 0, &r);
		etcd_kvs_clear(&r);
		if (rc)
			usleep(50000);
	}
	if (rc)
		fprintf(stderr, "eh_start: etcd on %s does not serve: %s\n", e->endpoint,
			etcd_last_error(c));
	etcd_client_free(c);
	return rc ? -1 : 0;
}

int eh_start(struct eh_etcd *e, bool tls)
{
	int base = tl_ports_reserve(2);

	memset(e, 0, sizeof(*e));
	if (base < 0)
		return -1;
	if (access(OCSD_ETCD_PATH, X_OK) != 0) {
		fprintf(stderr,
			"eh_start: %s missing: install etcd-server (deploy/install-deps.sh)\n",
			OCSD_ETCD_PATH);
		return -1;
	}
	e->client_port = base;
	e->peer_port = base + 1;
	e->tls = tls;
	/* on tmpfs when there is one: on the disk, etcd's fsyncs wait behind
	 * whatever else writes to it (ocsd_replicas.etcd_data_dir) */
	snprintf(e->dir, sizeof(e->dir), "%s/ocsd-etcd-test-XXXXXX",
		 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
	if (!mkdtemp(e->dir))
		return -1;
	snprintf(e->endpoint, sizeof(e->endpoint), "%s://127.0.0.1:%d", tls ? "https" : "http",
		 e->client_port);
	if (tls) {
		char cmd[2048];

		/* etcd's gateway dials etcd's own gRPC port with the server
		 * certificate as its client certificate, so with
		 * --client-cert-auth that certificate needs clientAuth too */
		snprintf(cmd, sizeof(cmd),
			 "set -e; bash %s %s/certs; cd %s/certs;"
			 " openssl ecparam -name prime256v1 -genkey -noout -out etcd.key;"
			 " openssl req -new -key etcd.key -subj /O=ocsd-test/CN=etcd -out etcd.csr;"
			 " printf 'subjectAltName=IP:127.0.0.1\\nextendedKeyUsage=serverAuth,"
			 "clientAuth\\n' > etcd.ext;"
			 " openssl x509 -req -in etcd.csr -CA ca.pem -CAkey ca.key -CAcreateserial"
			 " -days 2 -extfile etcd.ext -out etcd.pem 2>/dev/null",
			 OCSD_MAKE_CERTS, e->dir, e->dir);
		if (system(cmd) != 0) {
			fprintf(stderr, "eh_start: making test certificates failed\n");
			return -1;
		}
		snprintf(e->ca, sizeof(e->ca), "%s/certs/ca.pem", e->dir);
		snprintf(e->cert, sizeof(e->cert), "%s/certs/scheduler.pem", e->dir);
		snprintf(e->key, sizeof(e->key), "%s/certs/scheduler.key", e->dir);
	}
	return eh_restart(e);
}

int eh_restart(struct eh_etcd *e)
{
	e->pid = spawn(e);
	if (e->pid < 0) {
		e->pid = 0;
		return -1;
	}
	if (wait_serving(e) != 0) {
		eh_kill(e);
		return -1;
	}
	return 0;
}

void eh_kill(struct eh_etcd *e)
{
	if (e->pid <= 0)
		return;
	kill(e->pid, SIGCONT);
	kill(e->pid, SIGTERM);
	waitpid(e->pid, NULL, 0);
	e->pid = 0;
}

void eh_stop(struct eh_etcd *e)
{
	char cmd[300];

	eh_kill(e);
	if (!e->dir[0])
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", e->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "eh_stop: could not remove %s\n", e->dir);
	e->dir[0] = 0;
}

int eh_dead_port(void)
{
	return tl_ports_reserve(1);
}

/* ---- the relay ---- */

#define EH_PAIRS 8

struct eh_proxy {
	int listen_fd, target_port, wake[2];
	pthread_t thread;
	pthread_mutex_t mu; /* guards arm, lost, cuts */
	pthread_cond_t cut_done;
	int arm; /* > 0: the answer to the arm-th request from now is lost */
	int lost;
	int cuts;		    /* eh_proxy_cut() calls not carried out yet */
	void (*on_lost)(void *ctx); /* set before the answer is armed: the relay's own */
	void *on_lost_ctx;
	struct {
		int client, server; /* -1: free */
		bool doomed;	    /* its answer is lost */
	} pairs[EH_PAIRS];
};

static void pair_close(struct eh_proxy *p, int i)
{
	close(p->pairs[i].client);
	close(p->pairs[i].server);
	p->pairs[i].client = p->pairs[i].server = -1;
	p->pairs[i].doomed = false;
}

static void proxy_accept(struct eh_proxy *p)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)p->target_port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int c = accept(p->listen_fd, NULL, NULL), s, i;

	if (c < 0)
		return;
	for (i = 0; i < EH_PAIRS && p->pairs[i].client >= 0; i++)
		;
	s = i < EH_PAIRS ? socket(AF_INET, SOCK_STREAM, 0) : -1;
	if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		if (s >= 0)
			close(s);
		close(c);
		return;
	}
	p->pairs[i].client = c;
	p->pairs[i].server = s;
}

/* Relays what fd has; false when the pair is done. */
static bool relay(struct eh_proxy *p, int i, bool from_client)
{
	char buf[16384];
	int from = from_client ? p->pairs[i].client : p->pairs[i].server;
	int to = from_client ? p->pairs[i].server : p->pairs[i].client;
	ssize_t n = read(from, buf, sizeof(buf));

	if (n <= 0)
		return false;
	pthread_mutex_lock(&p->mu);
	/* each request starts with its request line (the client writes a
	 * request in one go and waits for its answer) */
	for (const char *at = buf;
	     from_client && p->arm > 0 && (at = memmem(at, (size_t)(buf + n - at), "POST /", 6));
	     at += 6)
		if (--p->arm == 0)
			p->pairs[i].doomed = true;
	if (!from_client && p->pairs[i].doomed) {
		p->lost++;
		pthread_mutex_unlock(&p->mu);
		if (p->on_lost)
			p->on_lost(p->on_lost_ctx);
		return false; /* etcd answered: the client never hears it */
	}
	pthread_mutex_unlock(&p->mu);
	return write(to, buf, (size_t)n) == n;
}

static void *proxy_main(void *arg)
{
	struct eh_proxy *p = arg;

	for (;;) {
		struct pollfd fds[2 + 2 * EH_PAIRS];
		int n = 2;

		fds[0] = (struct pollfd){.fd = p->wake[0], .events = POLLIN};
		fds[1] = (struct pollfd){.fd = p->listen_fd, .events = POLLIN};
		for (int i = 0; i < EH_PAIRS; i++) {
			fds[n++] = (struct pollfd){.fd = p->pairs[i].client, .events = POLLIN};
			fds[n++] = (struct pollfd){.fd = p->pairs[i].server, .events = POLLIN};
		}
		if (poll(fds, (nfds_t)n, -1) < 0 && errno != EINTR)
			break;
		if (fds[0].revents) {
			char c;
			bool cut;

			if (read(p->wake[0], &c, 1) != 1 || c != 'c')
				break; /* eh_proxy_stop() */
			pthread_mutex_lock(&p->mu);
			cut = p->cuts > 0;
			for (int i = 0; cut && i < EH_PAIRS; i++)
				if (p->pairs[i].client >= 0)
					pair_close(p, i);
			p->cuts = 0;
			pthread_cond_broadcast(&p->cut_done);
			pthread_mutex_unlock(&p->mu);
			continue;
		}
		if (fds[1].revents & POLLIN)
			proxy_accept(p);
		for (int i = 0; i < EH_PAIRS; i++) {
			bool ok = true;

			if (p->pairs[i].client < 0)
				continue;
			if (fds[2 + 2 * i].revents)
				ok = relay(p, i, true);
			if (ok && fds[3 + 2 * i].revents)
				ok = relay(p, i, false);
			if (!ok)
				pair_close(p, i);
		}
	}
	for (int i = 0; i < EH_PAIRS; i++)
		if (p->pairs[i].client >= 0)
			pair_close(p, i);
	return NULL;
}

int eh_proxy_start(int target_port, char *endpoint, size_t len, struct eh_proxy **out)
{
	struct eh_proxy *p = calloc(1, sizeof(*p));
	int port = tl_ports_reserve(1), one = 1;
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};

	*out = NULL;
	if (!p || port <= 0)
		goto fail;
	p->listen_fd = p->wake[0] = p->wake[1] = -1;
	p->target_port = target_port;
	for (int i = 0; i < EH_PAIRS; i++)
		p->pairs[i].client = p->pairs[i].server = -1;
	p->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
	if (p->listen_fd < 0 ||
	    setsockopt(p->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(p->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    listen(p->listen_fd, 8) != 0 || pipe(p->wake) != 0)
		goto fail;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cut_done, NULL);
	if (pthread_create(&p->thread, NULL, proxy_main, p) != 0)
		goto fail;
	snprintf(endpoint, len, "http://127.0.0.1:%d", port);
	*out = p;
	return 0;
fail:
	fprintf(stderr, "etcd relay: cannot start: %s\n", strerror(errno));
	if (p) {
		for (int i = 0; i < 2; i++)
			if (p->wake[i] >= 0)
				close(p->wake[i]);
		if (p->listen_fd >= 0)
			close(p->listen_fd);
	}
	free(p);
	return -1;
}

void eh_proxy_lose_answer(struct eh_proxy *p, int nth)
{
	pthread_mutex_lock(&p->mu);
	p->arm = nth;
	pthread_mutex_unlock(&p->mu);
}

void eh_proxy_on_lost(struct eh_proxy *p, void (*fn)(void *ctx), void *ctx)
{
	pthread_mutex_lock(&p->mu);
	p->on_lost = fn;
	p->on_lost_ctx = ctx;
	pthread_mutex_unlock(&p->mu);
}

int eh_proxy_lost(struct eh_proxy *p)
{
	int n;

	pthread_mutex_lock(&p->mu);
	n = p->lost;
	pthread_mutex_unlock(&p->mu);
	return n;
}

void eh_proxy_cut(struct eh_proxy *p)
{
	pthread_mutex_lock(&p->mu);
	p->cuts++;
	if (write(p->wake[1], "c", 1) == 1)
		while (p->cuts > 0)
			pthread_cond_wait(&p->cut_done, &p->mu);
	pthread_mutex_unlock(&p->mu);
}

void eh_proxy_stop(struct eh_proxy *p)
{
	if (!p)
		return;
	if (write(p->wake[1], "x", 1) == 1)
		pthread_join(p->thread, NULL);
	close(p->wake[0]);
	close(p->wake[1]);
	close(p->listen_fd);
	pthread_cond_destroy(&p->cut_done);
	pthread_mutex_destroy(&p->mu);
	free(p);
}

/* Whether every thread of pid is in a stop ('T' or 't' in its stat). */
static bool all_stopped(pid_t pid)
{
	char path[64], line[512];
	struct dirent *t;
	bool stopped = true;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return false;
	while (stopped && (t = readdir(d)) != NULL) {
		const char *state;
		FILE *f;

		if (t->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%.20s/stat", (int)pid, t->d_name);
		f = fopen(path, "r");
		if (!f)
			continue; /* the thread ended */
		state = fgets(line, sizeof(line), f) ? strrchr(line, ')') : NULL;
		stopped = state && (state[2] == 'T' || state[2] == 't');
		fclose(f);
	}
	closedir(d);
	return stopped;
}

int eh_pause(struct eh_etcd *e)
{
	if (e->pid <= 0 || kill(e->pid, SIGSTOP) != 0)
		return -1;
	for (int i = 0; i < 500; i++) {
		if (all_stopped(e->pid))
			return 0;
		usleep(10000);
	}
	fprintf(stderr, "etcd_harness: etcd %d not stopped 5 s after SIGSTOP\n", (int)e->pid);
	return -1;
}

void eh_resume(struct eh_etcd *e)
{
	if (e->pid > 0)
		kill(e->pid, SIGCONT);
}
