/*
 * etcd_harness.h - a real single-member etcd (Debian's etcd-server) for the
 * tests of the etcd client and store: started on reserved loopback ports
 * (tests/integration/testports.py through sb_testlib) with a fresh data
 * directory, optionally serving TLS with certificates made at test time
 * (tests/integration/nb_make_certs.sh), and stopped, paused or restarted by
 * the test.
 *
 * Single-threaded helpers for test programs; not part of any library.
 */
#ifndef OCSD_ETCD_HARNESS_H
#define OCSD_ETCD_HARNESS_H

#include <stdbool.h>
#include <sys/types.h>

struct eh_etcd {
	pid_t pid; /* 0 while stopped */
	int client_port, peer_port;
	bool tls;
	char dir[256];			   /* data directory, certificates in dir/certs */
	char endpoint[128];		   /* http(s)://127.0.0.1:client_port */
	char ca[300], cert[300], key[300]; /* TLS: a client certificate of the CA */
	char server_cert[300], server_key[300];
};

/* Starts etcd and waits until it serves (a range answers). 0 or -1 (printed why). */
int eh_start(struct eh_etcd *e, bool tls);
/* Stops it (SIGTERM, wait) and keeps the data directory; eh_restart starts it again. */
void eh_kill(struct eh_etcd *e);
int eh_restart(struct eh_etcd *e);
/* Stops it and deletes the data directory (accepts a stopped one). */
void eh_stop(struct eh_etcd *e);
/*
 * Pauses etcd (SIGSTOP) and returns once every thread of it is stopped:
 * kill() returns before a thread running on another CPU has stopped, and
 * on a loaded machine such a thread answered a request sent after it.
 * 0, or -1 when it did not stop within 5 s (printed). eh_resume: SIGCONT
 * (harmless when not paused).
 */
int eh_pause(struct eh_etcd *e);
void eh_resume(struct eh_etcd *e);
/* A port with no listener (reserved, so nobody else takes it). */
int eh_dead_port(void);

/*
 * A loopback TCP relay to etcd (a thread) that can lose one answer: armed
 * with eh_proxy_lose_answer(p, n), it relays the n-th request from now
 * (1: the next) to etcd and, when etcd's answer arrives, closes the
 * client's connection instead of relaying it, as a network that fails at
 * that moment would. The client then cannot know whether that request
 * took effect. eh_proxy_on_lost(p, fn, ctx) has fn(ctx) run on the
 * relay's thread when it drops an answer, before it closes the client's
 * connection: while the client still waits, as a writer paused at that
 * moment would (the test then acts as another replica meanwhile).
 */
struct eh_proxy;

/* Relays 127.0.0.1:<new port> to 127.0.0.1:target_port; endpoint gets
 * "http://127.0.0.1:<port>". 0 or -1. */
int eh_proxy_start(int target_port, char *endpoint, size_t len, struct eh_proxy **out);
void eh_proxy_lose_answer(struct eh_proxy *p, int nth);
void eh_proxy_on_lost(struct eh_proxy *p, void (*fn)(void *ctx), void *ctx);
/* The answers lost so far. */
int eh_proxy_lost(struct eh_proxy *p);
/* Closes every connection the relay holds now, as a network blip would,
 * and keeps accepting new ones; returns once they are closed. */
void eh_proxy_cut(struct eh_proxy *p);
void eh_proxy_stop(struct eh_proxy *p);

#endif
