/*
 * etcd_harness.c - starts and stops a real etcd for tests (etcd_harness.h).
 */
#include "etcd_harness.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
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
	snprintf(e->dir, sizeof(e->dir), "/tmp/ocsd-etcd-test-XXXXXX");
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
