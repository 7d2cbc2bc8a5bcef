/*
 * nb_server_life.c - the start and end of the northbound gRPC server
 * (nb.h): the configuration checked, TLS credentials from PEM files
 * (insecure only on loopback), the server bound and started with its
 * Health table and completion-queue threads; the shutdown (NOT_SERVING,
 * streams ended, listening sockets unguarded) and the destroy, which waits
 * for the calls out with the daemon within the grace period, then cancels
 * what is left. The calls themselves are nb_server.c's.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/log.h>
#include <grpc/support/time.h>

#include "nb_internal.h"
#include "nb_server_internal.h"

#define NB_REQUEST_SLOTS	       16 /* new-call requests kept outstanding */
#define NB_DEFAULT_THREADS	       2
#define NB_DEFAULT_STREAM_QUEUE	       1024
#define NB_DEFAULT_MAX_STREAMS	       1000
#define NB_DEFAULT_SHUTDOWN_GRACE_MS   2000
#define NB_DEFAULT_MAX_CALLS_IN_FLIGHT 4096
#define NB_DRAIN_MS		       20 /* nb_server_config.drain's period */

static bool is_loopback(const char *addr)
{
	if (strncmp(addr, "127.", 4) == 0 || strncmp(addr, "localhost:", 10) == 0 ||
	    strncmp(addr, "[::1]:", 6) == 0 || strncmp(addr, "ipv4:127.", 9) == 0 ||
	    strncmp(addr, "ipv6:[::1]:", 11) == 0 || strncmp(addr, "unix:", 5) == 0)
		return true;
	return false;
}

static char *read_file(const char *path, const char *field, struct nb_error *err)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	if (!f) {
		nb_error_set(err, NB_INVALID_ARGUMENT, field, "%s: %s", path, strerror(errno));
		return NULL;
	}
	if (fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || n > 1 << 20 || fseek(f, 0, SEEK_SET)) {
		fclose(f);
		nb_error_set(err, NB_INVALID_ARGUMENT, field, "%s: unreadable or over 1 MiB", path);
		return NULL;
	}
	buf = malloc((size_t)n + 1);
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	if (!buf) {
		nb_error_set(err, NB_INVALID_ARGUMENT, field, "%s: read failed", path);
		return NULL;
	}
	buf[n] = '\0';
	return buf;
}

static grpc_server_credentials *make_credentials(const struct nb_server_config *cfg,
						 struct nb_error *err)
{
	grpc_ssl_pem_key_cert_pair pair;
	grpc_server_credentials *creds = NULL;
	char *ca, *cert = NULL, *key = NULL;

	if (cfg->insecure)
		return grpc_insecure_server_credentials_create();
	if (!cfg->tls_ca_file || !cfg->tls_cert_file || !cfg->tls_key_file) {
		nb_error_set(err, NB_INVALID_ARGUMENT,
			     !cfg->tls_ca_file	   ? "tls_ca_file"
			     : !cfg->tls_cert_file ? "tls_cert_file"
						   : "tls_key_file",
			     "required unless insecure is set");
		return NULL;
	}
	ca = read_file(cfg->tls_ca_file, "tls_ca_file", err);
	if (ca)
		cert = read_file(cfg->tls_cert_file, "tls_cert_file", err);
	if (cert)
		key = read_file(cfg->tls_key_file, "tls_key_file", err);
	if (key) {
		pair.private_key = key;
		pair.cert_chain = cert;
		creds = grpc_ssl_server_credentials_create_ex(
			ca, &pair, 1, GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY,
			NULL);
		if (!creds)
			nb_error_set(err, NB_INVALID_ARGUMENT, "tls_cert_file",
				     "gRPC refused the TLS credentials");
	}
	free(ca);
	free(cert);
	free(key);
	return creds;
}

static const char *const served_services[] = {"", "ocs.v1.Fabric", "ocs.v1.Jobs", "ocs.v1.Events"};

int nb_server_create(const struct nb_server_config *cfg, struct nb_server **out,
		     struct nb_error *err)
{
	struct nb_server *s;
	grpc_server_credentials *creds;
	grpc_arg args[3];
	grpc_channel_args channel_args = {3, args};
	char recv_key[] = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
	char send_key[] = GRPC_ARG_MAX_SEND_MESSAGE_LENGTH;
	char reuse_key[] = GRPC_ARG_ALLOW_REUSEPORT;
	int threads;

	*out = NULL;
	if (!cfg->listen_addr || !cfg->listen_addr[0])
		return nb_error_set(err, NB_INVALID_ARGUMENT, "listen_addr", "required");
	if (cfg->insecure && !is_loopback(cfg->listen_addr))
		return nb_error_set(err, NB_INVALID_ARGUMENT, "listen_addr",
				    "%s is not a loopback address; insecure serving is only "
				    "allowed on 127.0.0.0/8, [::1] or localhost",
				    cfg->listen_addr);
	if (nb_limits_check(&cfg->limits, err))
		return -EINVAL;
	if (cfg->max_message_bytes > (size_t)1 << 30)
		return nb_error_set(err, NB_INVALID_ARGUMENT, "max_message_bytes",
				    "%zu is over 1 GiB", cfg->max_message_bytes);
	threads = cfg->threads ? cfg->threads : NB_DEFAULT_THREADS;
	if (threads < 1 || threads > NB_MAX_THREADS)
		return nb_error_set(err, NB_INVALID_ARGUMENT, "threads", "%d is outside 1..%d",
				    cfg->threads, NB_MAX_THREADS);
	if (cfg->max_calls_in_flight < 0)
		return nb_error_set(err, NB_INVALID_ARGUMENT, "max_calls_in_flight", "negative");
	if (cfg->shutdown_grace_ms < 0)
		return nb_error_set(err, NB_INVALID_ARGUMENT, "shutdown_grace_ms", "negative");
	if (cfg->stream_queue_max < 0)
		return nb_error_set(err, NB_INVALID_ARGUMENT, "stream_queue_max", "negative");
	if (cfg->max_streams < 0)
		return nb_error_set(err, NB_INVALID_ARGUMENT, "max_streams", "negative");

	s = calloc(1, sizeof(*s));
	if (!s)
		return nb_error_set(err, NB_RESOURCE_EXHAUSTED, "", "out of memory");
	s->max_message_bytes =
		cfg->max_message_bytes ? cfg->max_message_bytes : NB_DEFAULT_MAX_MESSAGE_BYTES;
	s->stream_queue_max =
		cfg->stream_queue_max ? cfg->stream_queue_max : NB_DEFAULT_STREAM_QUEUE;
	s->max_streams = cfg->max_streams ? cfg->max_streams : NB_DEFAULT_MAX_STREAMS;
	s->shutdown_grace_ms =
		cfg->shutdown_grace_ms ? cfg->shutdown_grace_ms : NB_DEFAULT_SHUTDOWN_GRACE_MS;
	s->drain = cfg->drain;
	s->drain_ctx = cfg->drain_ctx;
	s->max_calls_in_flight = cfg->max_calls_in_flight ? cfg->max_calls_in_flight
							  : NB_DEFAULT_MAX_CALLS_IN_FLIGHT;
	s->insecure = cfg->insecure;
	s->insecure_role = cfg->insecure_role ? cfg->insecure_role : NB_ROLE_OPERATOR;
	s->limits = cfg->limits;
	s->handlers = cfg->handlers;
	s->tag_shutdown = (struct nb_tag){NULL, OP_SERVER_SHUTDOWN};
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);

	grpc_init();
	creds = make_credentials(cfg, err);
	if (!creds) {
		grpc_shutdown();
		pthread_cond_destroy(&s->cv);
		pthread_mutex_destroy(&s->mu);
		free(s);
		return -EINVAL;
	}
	args[0].type = GRPC_ARG_INTEGER;
	args[0].key = recv_key;
	args[0].value.integer = (int)s->max_message_bytes;
	args[1].type = GRPC_ARG_INTEGER;
	args[1].key = send_key;
	args[1].value.integer = (int)s->max_message_bytes;
	/* gRPC sets SO_REUSEPORT by default: a second server could then bind the
	 * same address and take half the calls. An address in use is refused. */
	args[2].type = GRPC_ARG_INTEGER;
	args[2].key = reuse_key;
	args[2].value.integer = 0;
	s->cq = grpc_completion_queue_create_for_next(NULL);
	s->server = grpc_server_create(&channel_args, NULL);
	grpc_server_register_completion_queue(s->server, s->cq, NULL);
	s->port = grpc_server_add_http2_port(s->server, cfg->listen_addr, creds);
	grpc_server_credentials_release(creds);
	if (s->port <= 0) {
		nb_error_set(err, NB_UNAVAILABLE, "listen_addr",
			     "cannot listen on %s (address in use by another process, or not "
			     "a local address)",
			     cfg->listen_addr);
		grpc_server_destroy(s->server);
		grpc_completion_queue_shutdown(s->cq);
		while (grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL)
			       .type != GRPC_QUEUE_SHUTDOWN)
			;
		grpc_completion_queue_destroy(s->cq);
		grpc_shutdown();
		pthread_cond_destroy(&s->cv);
		pthread_mutex_destroy(&s->mu);
		free(s);
		return -EADDRINUSE;
	}
	if (strncmp(cfg->listen_addr, "unix:", 5) != 0) {
		int n = nb_accept_guard(s->port, s->guarded_fds,
					(int)(sizeof(s->guarded_fds) / sizeof(s->guarded_fds[0])));

		s->n_guarded = n > 0 ? n : 0;
		if (n <= 0)
			gpr_log(GPR_ERROR,
				"gRPC listener on port %d is not guarded against descriptor "
				"exhaustion (%d)",
				s->port, n);
	}
	grpc_server_start(s->server);
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < sizeof(served_services) / sizeof(served_services[0]); i++)
		nbs_set_health_locked(
			s, served_services[i],
			GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING);
	for (int i = 0; i < NB_REQUEST_SLOTS; i++)
		nbs_request_new_call(s);
	pthread_mutex_unlock(&s->mu);
	for (s->n_threads = 0; s->n_threads < threads; s->n_threads++)
		if (pthread_create(&s->threads[s->n_threads], NULL, nbs_cq_thread, s))
			break;
	if (s->n_threads == 0) {
		nb_server_destroy(s);
		return nb_error_set(err, NB_RESOURCE_EXHAUSTED, "threads",
				    "cannot start a completion-queue thread");
	}
	*out = s;
	return 0;
}

int nb_server_port(const struct nb_server *s)
{
	return s->port;
}

void nb_server_shutdown(struct nb_server *s)
{
	pthread_mutex_lock(&s->mu);
	if (s->shutting_down) {
		pthread_mutex_unlock(&s->mu);
		return;
	}
	s->shutting_down = true;
	for (struct health_entry *h = s->health; h; h = h->next)
		nbs_set_health_locked(
			s, h->service,
			GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING);
	while (s->watchers)
		nbs_finish_stream(s->watchers, NB_UNAVAILABLE, "server: shutting down");
	pthread_mutex_unlock(&s->mu);
	nb_accept_unguard(s->guarded_fds, s->n_guarded); /* before gRPC closes them */
	grpc_server_shutdown_and_notify(s->server, s->cq, &s->tag_shutdown);
}

void nb_server_destroy(struct nb_server *s)
{
	if (!s)
		return;
	nb_server_shutdown(s);
	if (s->n_threads == 0) {
		/* Only when create failed to start a thread: drain here. */
		while (!s->shutdown_done || s->live_calls > 0) {
			grpc_event ev = grpc_completion_queue_next(
				s->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);

			if (ev.type == GRPC_OP_COMPLETE)
				nbs_handle_event(s, ev.tag, ev.success != 0);
		}
	}
	/* Grace period: streams end with their status and the daemon answers;
	 * then whatever is left (a client that stopped reading) is cancelled.
	 * A call handed out stays until the daemon answers it: drain runs what
	 * the handlers posted meanwhile. */
	pthread_mutex_lock(&s->mu);
	{
		uint64_t grace_end = nbs_now_ns() + (uint64_t)s->shutdown_grace_ms * 1000000u;
		bool cancelled = false;

		while (!s->shutdown_done || s->live_calls > 0) {
			uint64_t now = nbs_now_ns(), wait_ns = UINT64_MAX;
			struct timespec until;

			if (!cancelled && now >= grace_end) {
				cancelled = true;
				pthread_mutex_unlock(&s->mu);
				grpc_server_cancel_all_calls(s->server);
				pthread_mutex_lock(&s->mu);
				continue;
			}
			if (s->drain) {
				pthread_mutex_unlock(&s->mu);
				s->drain(s->drain_ctx);
				pthread_mutex_lock(&s->mu);
				if (s->shutdown_done && s->live_calls == 0)
					break;
				wait_ns = (uint64_t)NB_DRAIN_MS * 1000000u;
			}
			if (!cancelled && grace_end - now < wait_ns)
				wait_ns = grace_end - now;
			if (wait_ns == UINT64_MAX) {
				pthread_cond_wait(&s->cv, &s->mu);
				continue;
			}
			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_sec += (time_t)(wait_ns / 1000000000u);
			until.tv_nsec += (long)(wait_ns % 1000000000u);
			if (until.tv_nsec >= 1000000000L) {
				until.tv_sec++;
				until.tv_nsec -= 1000000000L;
			}
			(void)pthread_cond_timedwait(&s->cv, &s->mu, &until);
		}
	}
	pthread_mutex_unlock(&s->mu);
	grpc_completion_queue_shutdown(s->cq);
	for (int i = 0; i < s->n_threads; i++)
		pthread_join(s->threads[i], NULL);
	grpc_server_destroy(s->server);
	grpc_completion_queue_destroy(s->cq);
	while (s->health) {
		struct health_entry *h = s->health;

		s->health = h->next;
		free(h->service);
		free(h);
	}
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	free(s);
	grpc_shutdown();
}

/* Threads of this process; -1 if /proc/self/task cannot be read. */
static int thread_count(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

bool nb_grpc_settle(int timeout_ms)
{
	uint64_t end = nbs_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000u;

	for (;;) {
		int n;

		/* grpc_is_initialized() takes the lock a cleanup thread holds */
		if (!grpc_is_initialized() && ((n = thread_count()) == 1 || n < 0))
			return true;
		if (nbs_now_ns() >= end)
			return false;
		nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
	}
}
