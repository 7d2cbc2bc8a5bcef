/*
 * sb_device.c - the NETCONF device driver (see sb_device.h for the API,
 * threading and error rules).
 *
 * Quirks handled here, found by interop testing against servers nobody in
 * this project wrote (../shared/design/TOOLCHAIN.md):
 *   - netconfd (yuma123) answers <ok/> to a <commit> that follows a
 *     <validate> of the candidate without changing running. With
 *     SB_VALIDATE_AUTO the driver does not send <validate> to a yuma server
 *     (the commit validates anyway); the transaction engine's read-back
 *     catches the defect when validation is forced.
 *   - netconfd never rolls back a confirmed commit while the session holds
 *     a lock on running: the driver only ever locks the candidate around a
 *     confirmed commit.
 *
 * libnetconf2 sets sessions up (transport, <hello>, capabilities); the RPCs
 * themselves go over the session's transport in ocsd's own framing and
 * their replies are scanned without libyang (sb_wire.h, sb_reply.h).
 */
#define _GNU_SOURCE /* POLLRDHUP */
#include "sb_device.h"

#include "sb_reply.h"
#include "sb_wire.h"

#include <errno.h>
#include <libssh/libssh.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <libyang/libyang.h>
#include <nc_client.h>
#include <nc_server.h> /* nc_session_set_status() */
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern const char sb_yang_ocs_switch[];
extern const char sb_yang_ocs_transceiver[];
extern const char sb_yang_ocs_devsim[];

#define OCS_NS	   "urn:ocsd:yang:ocs-switch"
#define NC_NS	   "urn:ietf:params:xml:ns:netconf:base:1.0"
#define TRX_NS	   "urn:ocsd:yang:ocs-transceiver"
#define XC_FILTER  "<cross-connects xmlns=\"" OCS_NS "\"/>"
#define TRX_FILTER "<transceivers xmlns=\"" TRX_NS "\"/>"

struct sb_driver {
	struct ly_ctx *ctx;
	pthread_mutex_t connect_mu; /* serializes session setup (may extend ctx) */
	struct sb_driver_counters counters;
};

struct sb_device {
	struct sb_driver *drv;
	struct sb_device_config cfg;
	struct nc_session *session;
	struct sb_wire *wire; /* ocsd's RPC traffic on the session (sb_wire.h), made at first use */
	struct sb_capabilities caps;
	enum sb_strategy strategy;
	int backoff_ms;		 /* current reconnect delay, 0 after a success */
	int64_t next_attempt_ms; /* no connect before this time */
	char hostkey_error[320];
	int fd; /* the SSH session's socket, -1 otherwise */
	/* settings staged by sb_device_set_config() from any thread, taken by
	 * the device's next connect (guarded by staged_mu) */
	pthread_mutex_t staged_mu;
	bool staged;
	struct sb_device_config staged_cfg;
	/* who uses the device (sb_device_claim): a transaction, or a keepalive pass */
	pthread_mutex_t claim_mu;
	pthread_cond_t claim_cv;
	bool claimed; /* guarded by claim_mu */
	bool ever_connected;
	atomic_uint_least64_t reconnects; /* sessions opened after the first */
	/* the last verified image of running in this session (sb_device.h) */
	bool image_known;
	atomic_bool image_forget;  /* set by sb_device_forget_image() from any thread */
	struct sb_xc *image;	   /* switch: cross-connects, sorted */
	struct sb_bundle *image_b; /* transceiver: bundles, sorted */
	size_t n_image;
};

int64_t sb_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int set_err(struct sb_error *err, const struct sb_device *dev, const char *op, int code,
		   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int set_err(struct sb_error *err, const struct sb_device *dev, const char *op, int code,
		   const char *fmt, ...)
{
	if (err) {
		err->code = code;
		err->session_id = 0;
		snprintf(err->device, sizeof(err->device), "%s", dev->cfg.name);
		snprintf(err->operation, sizeof(err->operation), "%s", op);
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err->message, sizeof(err->message), fmt, ap);
		va_end(ap);
	}
	return code;
}

/* ---- driver ------------------------------------------------------------- */

int sb_driver_new(const char *ietf_dir, struct sb_driver **out)
{
	struct sb_driver *drv = calloc(1, sizeof(*drv));
	if (!drv)
		return -ENOMEM;
	if (!ietf_dir)
		ietf_dir = "/usr/share/yuma/modules/ietf";
	ly_log_options(LY_LOSTORE);
	nc_verbosity(getenv("SB_NC_DEBUG") ? NC_VERB_DEBUG : NC_VERB_ERROR);
	if (ly_ctx_new(ietf_dir, 0, &drv->ctx)) {
		free(drv);
		return -EINVAL;
	}
	/* everything ocs-devsim advertises, so that connecting never has to
	 * add a module while other threads parse replies */
	ly_ctx_set_searchdir(drv->ctx, "/usr/share/yuma/modules/ietf-derived");
	ly_ctx_set_searchdir(drv->ctx, "/usr/share/yuma/modules/netconfcentral");
	const char *all[] = {"*", NULL};
	int rc = 0;
	if (!ly_ctx_load_module(drv->ctx, "ietf-netconf", "2011-06-01", all) ||
	    !ly_ctx_load_module(drv->ctx, "ietf-netconf-monitoring", NULL, NULL) ||
	    !ly_ctx_load_module(drv->ctx, "notifications", NULL, NULL) ||
	    !ly_ctx_load_module(drv->ctx, "nc-notifications", NULL, NULL) ||
	    !ly_ctx_load_module(drv->ctx, "ietf-netconf-with-defaults", NULL, NULL) ||
	    !ly_ctx_load_module(drv->ctx, "ietf-datastores", NULL, NULL) ||
	    !ly_ctx_load_module(drv->ctx, "ietf-netconf-nmda", NULL, all))
		rc = -ENOENT;
	const char *mods[] = {sb_yang_ocs_switch, sb_yang_ocs_transceiver, sb_yang_ocs_devsim};
	for (size_t i = 0; i < 3 && !rc; i++)
		if (lys_parse_mem(drv->ctx, mods[i], LYS_IN_YANG, NULL))
			rc = -EINVAL;
	if (rc) {
		ly_ctx_destroy(drv->ctx);
		free(drv);
		return rc;
	}
	/* Freeze the compiled context. libnetconf2's check at every connect
	 * loads each module the server advertises with the server's features,
	 * which would recompile this shared context (under other threads'
	 * parsers) to the last server's feature set: after a device without
	 * :confirmed-commit connected, every other device's <commit><confirmed/>
	 * failed to build. With explicit compilation such changes never reach
	 * the compiled schema, which already holds every feature. */
	ly_ctx_set_options(drv->ctx, LY_CTX_EXPLICIT_COMPILE);
	pthread_mutex_init(&drv->connect_mu, NULL);
	nc_client_init();
	*out = drv;
	return 0;
}

void sb_driver_free(struct sb_driver *drv)
{
	if (!drv)
		return;
	nc_client_destroy();
	pthread_mutex_destroy(&drv->connect_mu);
	ly_ctx_destroy(drv->ctx);
	free(drv);
}

const struct sb_driver_counters *sb_driver_counters(const struct sb_driver *drv)
{
	return &drv->counters;
}

/* ---- device ------------------------------------------------------------- */

/* Copies cfg with the defaults of sb_device_config filled in. */
static void fill_config(struct sb_device_config *dst, const struct sb_device_config *cfg)
{
	*dst = *cfg;
	if (!dst->name[0]) {
		char name[96];
		snprintf(name, sizeof(name), "%.60s:%u", cfg->host, cfg->port);
		memcpy(dst->name, name, sizeof(dst->name) - 1);
	}
	if (dst->rpc_timeout_ms <= 0)
		dst->rpc_timeout_ms = 5000;
	if (dst->backoff_min_ms <= 0)
		dst->backoff_min_ms = 50;
	if (dst->backoff_max_ms <= 0)
		dst->backoff_max_ms = 5000;
}

int sb_device_new(struct sb_driver *drv, const struct sb_device_config *cfg, struct sb_device **out)
{
	if (!cfg->host[0] || !cfg->port)
		return -EINVAL;
	struct sb_device *dev = calloc(1, sizeof(*dev));
	if (!dev)
		return -ENOMEM;
	dev->drv = drv;
	dev->fd = -1;
	pthread_mutex_init(&dev->staged_mu, NULL);
	pthread_mutex_init(&dev->claim_mu, NULL);
	pthread_cond_init(&dev->claim_cv, NULL);
	fill_config(&dev->cfg, cfg);
	*out = dev;
	return 0;
}

int sb_device_set_config(struct sb_device *dev, const struct sb_device_config *cfg)
{
	if (!cfg->host[0] || !cfg->port)
		return -EINVAL;
	pthread_mutex_lock(&dev->staged_mu);
	fill_config(&dev->staged_cfg, cfg);
	/* the name identifies the device in errors and logs: it stays */
	memcpy(dev->staged_cfg.name, dev->cfg.name, sizeof(dev->cfg.name));
	dev->staged = true;
	pthread_mutex_unlock(&dev->staged_mu);
	return 0;
}

/* Takes staged settings (if any): closes a session made with the old ones. */
static void take_staged(struct sb_device *dev)
{
	pthread_mutex_lock(&dev->staged_mu);
	if (dev->staged) {
		sb_device_disconnect(dev);
		dev->cfg = dev->staged_cfg;
		dev->staged = false;
		dev->backoff_ms = 0;
		dev->next_attempt_ms = 0;
	}
	pthread_mutex_unlock(&dev->staged_mu);
}

void sb_device_free(struct sb_device *dev)
{
	if (!dev)
		return;
	sb_device_disconnect(dev);
	pthread_mutex_destroy(&dev->staged_mu);
	pthread_cond_destroy(&dev->claim_cv);
	pthread_mutex_destroy(&dev->claim_mu);
	free(dev);
}

const char *sb_device_name(const struct sb_device *dev)
{
	return dev->cfg.name;
}

enum sb_model sb_device_model(const struct sb_device *dev)
{
	return dev->cfg.model;
}

int sb_device_switch_us(const struct sb_device *dev)
{
	return dev->cfg.switch_us > 0 ? dev->cfg.switch_us : 0;
}

bool sb_device_connected(const struct sb_device *dev)
{
	return dev->session && nc_session_get_status(dev->session) == NC_STATUS_RUNNING;
}

const struct sb_capabilities *sb_device_capabilities(const struct sb_device *dev)
{
	return &dev->caps;
}

enum sb_strategy sb_device_strategy(const struct sb_device *dev)
{
	return dev->strategy;
}

bool sb_device_should_validate(const struct sb_device *dev)
{
	switch (dev->cfg.validate) {
	case SB_VALIDATE_NEVER:
		return false;
	case SB_VALIDATE_ALWAYS:
		return dev->caps.validate;
	default:
		return dev->caps.validate && !dev->caps.yuma;
	}
}

static void drop_image(struct sb_device *dev)
{
	free(dev->image);
	free(dev->image_b);
	dev->image = NULL;
	dev->image_b = NULL;
	dev->n_image = 0;
	dev->image_known = false;
}

/* Whether an image is known (and not forgotten by another thread since). */
static bool image_valid(struct sb_device *dev)
{
	if (atomic_exchange(&dev->image_forget, false))
		drop_image(dev);
	return dev->image_known && sb_device_connected(dev);
}

/* A copy of the image of cross-connects or bundles (elements of size sz); caller frees. */
static int copy_image(struct sb_device *dev, bool bundles, size_t sz, void **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	if (!image_valid(dev)) /* may drop the image: read it after */
		return -ENOENT;
	const void *image = bundles ? (const void *)dev->image_b : (const void *)dev->image;
	if (!image)
		return -ENOENT;
	if (!(*out = malloc((dev->n_image ? dev->n_image : 1) * sz)))
		return -ENOMEM;
	memcpy(*out, image, dev->n_image * sz);
	*n = dev->n_image;
	return 0;
}

int sb_device_image_xcs(struct sb_device *dev, struct sb_xc **out, size_t *n)
{
	return copy_image(dev, false, sizeof(**out), (void **)out, n);
}

int sb_device_image_bundles(struct sb_device *dev, struct sb_bundle **out, size_t *n)
{
	return copy_image(dev, true, sizeof(**out), (void **)out, n);
}

/* Records an image of n elements of size sz (xcs or bundles); forgets it without memory. */
static void set_image(struct sb_device *dev, const void *v, size_t n, size_t sz, bool bundles)
{
	atomic_store(&dev->image_forget, false);
	drop_image(dev);
	if (!sb_device_connected(dev))
		return;
	void *copy = malloc((n ? n : 1) * sz);
	if (!copy)
		return;
	if (n)
		memcpy(copy, v, n * sz);
	if (bundles)
		dev->image_b = copy;
	else
		dev->image = copy;
	dev->n_image = n;
	dev->image_known = true;
}

void sb_device_set_image_xcs(struct sb_device *dev, const struct sb_xc *xcs, size_t n)
{
	set_image(dev, xcs, n, sizeof(*xcs), false);
}

void sb_device_set_image_bundles(struct sb_device *dev, const struct sb_bundle *b, size_t n)
{
	set_image(dev, b, n, sizeof(*b), true);
}

void sb_device_forget_image(struct sb_device *dev)
{
	if (dev)
		atomic_store(&dev->image_forget, true);
}

/*
 * nc_session_free() with SIGPIPE held off this thread: OpenSSL writes its
 * close_notify (and libnetconf2 its <close-session>) with write(2) on a
 * socket that may be reset or shut down, and a library must not count on
 * its process ignoring SIGPIPE (ocsd does). A SIGPIPE raised meanwhile is
 * taken off the thread before the mask is restored.
 */
static void free_session(struct nc_session *s)
{
	sigset_t pipe_set, old, pending;
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	bool was_pending = !sigpending(&pending) && sigismember(&pending, SIGPIPE);
	nc_session_free(s, NULL);
	if (!was_pending && !sigpending(&pending) && sigismember(&pending, SIGPIPE))
		sigtimedwait(&pipe_set, NULL, &(struct timespec){0, 0});
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/*
 * Ends the session. One out of step (an RPC timed out or broke the
 * protocol) or whose peer is gone is not asked to close: libnetconf2's
 * <close-session> would first read what is left of a late reply, without
 * a deadline of ours (issue H M1: a trickled reply held a release for 70 s,
 * an endless chunk for 67 s). Its socket is shut down and the session
 * marked invalid, so that freeing it reads nothing and writes nothing that
 * could wait. A session in step gets its <close-session>.
 */
static void drop_session(struct sb_device *dev, bool out_of_step)
{
	drop_image(dev); /* the image is the session's */
	if (out_of_step && dev->session) {
		sb_wire_shutdown(dev->wire);
		if (dev->fd >= 0)
			shutdown(dev->fd, SHUT_RDWR);
		nc_session_set_status(dev->session, NC_STATUS_INVALID);
	}
	sb_wire_free(dev->wire); /* before the session whose transport it uses */
	dev->wire = NULL;
	if (dev->session) {
		free_session(dev->session);
		dev->session = NULL;
	}
	dev->fd = -1;
}

void sb_device_disconnect(struct sb_device *dev)
{
	drop_session(dev, false);
}

/* Applies the host-key policy to a connected libssh session. */
static int hostkey_check(struct sb_device *dev, ssh_session session)
{
	if (dev->cfg.hostkey_policy == SB_HOSTKEY_ACCEPT_ANY)
		return 0;
	ssh_key key = NULL;
	unsigned char *hash = NULL;
	size_t len = 0;
	int rc = -1;
	if (ssh_get_server_publickey(session, &key) == SSH_OK &&
	    ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &hash, &len) == 0) {
		char *fp = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, len);
		if (fp && !strcmp(fp, dev->cfg.hostkey_sha256))
			rc = 0;
		else
			snprintf(dev->hostkey_error, sizeof(dev->hostkey_error),
				 "host key %s does not match the pinned %s", fp ? fp : "?",
				 dev->cfg.hostkey_sha256);
		ssh_string_free_char(fp);
		ssh_clean_pubkey_hash(&hash);
	}
	ssh_key_free(key);
	return rc;
}

/*
 * Opens and authenticates the SSH transport with libssh directly, then
 * hands it to libnetconf2 (nc_connect_libssh takes ownership). Doing it
 * here rather than through nc_connect_ssh() keeps the socket owned by
 * libssh, which closes it when the session is freed (libnetconf2 2.0 with
 * libssh 0.10 leaks the socket it opens itself), and bounds the connect by
 * the device's deadline. Returns the session, or NULL with the reason in
 * dev->hostkey_error.
 */
static struct nc_session *ssh_open(struct sb_device *dev)
{
	ssh_session s = ssh_new();
	if (!s)
		return NULL;
	unsigned int port = dev->cfg.port;
	long timeout_s = (dev->cfg.rpc_timeout_ms + 999) / 1000;
	int yes = 1, no = 0;
	ssh_options_set(s, SSH_OPTIONS_HOST, dev->cfg.host);
	ssh_options_set(s, SSH_OPTIONS_PORT, &port);
	ssh_options_set(s, SSH_OPTIONS_USER, dev->cfg.username);
	ssh_options_set(s, SSH_OPTIONS_TIMEOUT, &timeout_s);
	ssh_options_set(s, SSH_OPTIONS_NODELAY, &yes);
	ssh_options_set(s, SSH_OPTIONS_PROCESS_CONFIG, &no); /* no ~/.ssh/config surprises */
	const char *why = NULL;
	if (ssh_connect(s) != SSH_OK) {
		why = ssh_get_error(s);
	} else if (hostkey_check(dev, s)) {
		why = dev->hostkey_error;
	} else if (dev->cfg.privkey_path[0]) {
		ssh_key key = NULL;
		if (ssh_pki_import_privkey_file(dev->cfg.privkey_path, NULL, NULL, NULL, &key) !=
		    SSH_OK)
			why = "cannot read the private key";
		else if (ssh_userauth_publickey(s, NULL, key) != SSH_AUTH_SUCCESS)
			why = "public-key authentication refused";
		ssh_key_free(key);
	} else if (ssh_userauth_password(s, NULL, dev->cfg.password) != SSH_AUTH_SUCCESS) {
		why = "password authentication refused";
	}
	if (why) {
		if (why != dev->hostkey_error)
			snprintf(dev->hostkey_error, sizeof(dev->hostkey_error), "%s", why);
		ssh_disconnect(s);
		ssh_free(s);
		return NULL;
	}
	int fd = ssh_get_fd(s);
	/* TCP keepalive: a peer that dies silently (power, cable) fails the
	 * socket within about 10 s of idleness, which the next connect sees */
	int idle = 5, intvl = 2, cnt = 3;
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &yes, sizeof(yes));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
	/* only the NETCONF <hello> and the context check are serialized: the
	 * SSH handshake above, most of a connect's CPU, runs in parallel */
	pthread_mutex_lock(&dev->drv->connect_mu);
	struct nc_session *ns = nc_connect_libssh(s, dev->drv->ctx);
	pthread_mutex_unlock(&dev->drv->connect_mu);
	if (!ns)
		snprintf(dev->hostkey_error, sizeof(dev->hostkey_error), "NETCONF <hello> failed");
	else
		dev->fd = fd;
	return ns;
}

static void detect_capabilities(struct sb_device *dev)
{
	struct sb_capabilities *c = &dev->caps;
	memset(c, 0, sizeof(*c));
	const char *const *cap = nc_session_get_cpblts(dev->session);
	for (; cap && *cap; cap++) {
		const char *s = *cap;
		if (!strncmp(s, "urn:ietf:params:netconf:base:1.1", 32))
			c->base11 = true;
		else if (!strncmp(s, "urn:ietf:params:netconf:capability:candidate:1.0", 48))
			c->candidate = true;
		else if (!strncmp(s, "urn:ietf:params:netconf:capability:confirmed-commit:1.1", 55))
			c->confirmed_commit = true;
		else if (!strncmp(s, "urn:ietf:params:netconf:capability:validate:1.", 46))
			c->validate = true;
		else if (!strncmp(s, "urn:ietf:params:netconf:capability:rollback-on-error:1.0",
				  56))
			c->rollback_on_error = true;
		else if (!strncmp(s, "urn:ietf:params:netconf:capability:writable-running:1.0", 55))
			c->writable_running = true;
		if (strstr(s, "module=yuma123-") || strstr(s, "module=yuma-app-common") ||
		    strstr(s, "module=yuma-system"))
			c->yuma = true;
	}
	if (c->candidate && c->confirmed_commit)
		dev->strategy = SB_STRATEGY_CONFIRMED;
	else if (c->candidate)
		dev->strategy = SB_STRATEGY_CANDIDATE;
	else if (c->writable_running)
		dev->strategy = SB_STRATEGY_RUNNING;
	else
		dev->strategy = SB_STRATEGY_NONE;
}

/*
 * Whether an idle session's socket says the peer is gone: closed (EOF) or
 * failed (TCP keepalive gave up on a silent peer, a reset). One poll and
 * at most one peek, no RPC; a socket with only SSH traffic waiting is alive.
 */
static bool socket_dead(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
	if (poll(&p, 1, 0) <= 0)
		return false;
	/* RDHUP: the peer closed, even when its last words (an SSH disconnect) wait unread */
	if (p.revents & (POLLERR | POLLHUP | POLLNVAL | POLLRDHUP))
		return true;
	char c;
	ssize_t r = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

int sb_device_connect(struct sb_device *dev, struct sb_error *err)
{
	take_staged(dev);
	/* a session whose peer went away while idle is replaced now, before
	 * the caller's first RPC fails on it */
	if (dev->session && dev->fd >= 0 && socket_dead(dev->fd)) {
		atomic_fetch_add(&dev->drv->counters.sessions_lost, 1);
		drop_session(dev, true);
	}
	if (sb_device_connected(dev))
		return 0;
	sb_device_disconnect(dev);
	int64_t now = sb_now_ms();
	if (now < dev->next_attempt_ms)
		return set_err(err, dev, "connect", -EAGAIN, "backing off for %lld ms",
			       (long long)(dev->next_attempt_ms - now));
	struct sb_driver *drv = dev->drv;
	dev->hostkey_error[0] = '\0';
	if (dev->cfg.transport == SB_TRANSPORT_TLS) {
		pthread_mutex_lock(&drv->connect_mu);
		nc_client_tls_set_cert_key_paths(dev->cfg.tls_cert, dev->cfg.tls_key);
		nc_client_tls_set_trusted_ca_paths(dev->cfg.tls_ca, NULL);
		dev->session = nc_connect_tls(dev->cfg.host, dev->cfg.port, drv->ctx);
		pthread_mutex_unlock(&drv->connect_mu);
	} else {
		dev->session = ssh_open(dev);
	}
	if (!dev->session) {
		atomic_fetch_add(&drv->counters.connect_failures, 1);
		dev->backoff_ms = dev->backoff_ms ? dev->backoff_ms * 2 : dev->cfg.backoff_min_ms;
		if (dev->backoff_ms > dev->cfg.backoff_max_ms)
			dev->backoff_ms = dev->cfg.backoff_max_ms;
		dev->next_attempt_ms = sb_now_ms() + dev->backoff_ms;
		return set_err(
			err, dev, "connect", -ECONNREFUSED, "cannot open a %s session to %s:%u%s%s",
			dev->cfg.transport == SB_TRANSPORT_TLS ? "TLS" : "SSH", dev->cfg.host,
			dev->cfg.port, dev->hostkey_error[0] ? ": " : "", dev->hostkey_error);
	}
	dev->backoff_ms = 0;
	dev->next_attempt_ms = 0;
	atomic_fetch_add(&drv->counters.connects, 1);
	if (dev->ever_connected) {
		atomic_fetch_add(&dev->reconnects, 1);
		atomic_fetch_add(&drv->counters.reconnects, 1);
	}
	dev->ever_connected = true;
	detect_capabilities(dev);
	if (dev->strategy == SB_STRATEGY_NONE) {
		sb_device_disconnect(dev);
		return set_err(err, dev, "connect", -ENOTSUP,
			       "device offers neither :candidate nor :writable-running");
	}
	return 0;
}

int sb_device_connect_until(struct sb_device *dev, int64_t deadline_ms, struct sb_error *err)
{
	for (;;) {
		int rc = sb_device_connect(dev, err);
		if (rc != -EAGAIN && rc != -ECONNREFUSED)
			return rc;
		int64_t now = sb_now_ms();
		if (now >= deadline_ms)
			return rc == -EAGAIN ? set_err(err, dev, "connect", -ETIMEDOUT,
						       "no session before the deadline")
					     : rc;
		int64_t wait_ms = dev->next_attempt_ms - now;
		if (wait_ms > deadline_ms - now)
			wait_ms = deadline_ms - now;
		if (wait_ms > 0) {
			struct timespec ts = {wait_ms / 1000, (wait_ms % 1000) * 1000000};
			nanosleep(&ts, NULL);
		}
	}
}

/* ---- who uses the device, and the keepalive ---------------------------- */

void sb_device_claim(struct sb_device *dev)
{
	pthread_mutex_lock(&dev->claim_mu);
	while (dev->claimed)
		pthread_cond_wait(&dev->claim_cv, &dev->claim_mu);
	dev->claimed = true;
	pthread_mutex_unlock(&dev->claim_mu);
}

bool sb_device_try_claim(struct sb_device *dev)
{
	pthread_mutex_lock(&dev->claim_mu);
	bool got = !dev->claimed;
	dev->claimed = true;
	pthread_mutex_unlock(&dev->claim_mu);
	return got;
}

void sb_device_unclaim(struct sb_device *dev)
{
	pthread_mutex_lock(&dev->claim_mu);
	dev->claimed = false;
	pthread_cond_signal(&dev->claim_cv);
	pthread_mutex_unlock(&dev->claim_mu);
}

uint64_t sb_device_reconnects(const struct sb_device *dev)
{
	return atomic_load(&dev->reconnects);
}

int sb_device_keepalive(struct sb_device *dev, struct sb_error *err)
{
	if (!sb_device_try_claim(dev))
		return set_err(err, dev, "keepalive", -EBUSY, "in use");
	/* sb_device_connect does the work: no RPC on a live session, the dead
	 * one replaced, the backoff honoured (-EAGAIN while it runs) */
	int rc = sb_device_connect(dev, err);
	sb_device_unclaim(dev);
	return rc;
}

struct connect_many {
	struct sb_device *const *devs;
	size_t n;
	int64_t deadline_ms;
	struct sb_error *errs;
	atomic_size_t next;	 /* the next device to take */
	atomic_size_t connected; /* devices with a session */
};

static void *connect_many_thread(void *arg)
{
	struct connect_many *cm = arg;
	for (size_t i; (i = atomic_fetch_add(&cm->next, 1)) < cm->n;) {
		struct sb_error local = {0};
		struct sb_error *err = cm->errs ? &cm->errs[i] : &local;
		*err = (struct sb_error){0};
		if (!sb_device_connect_until(cm->devs[i], cm->deadline_ms, err))
			atomic_fetch_add(&cm->connected, 1);
	}
	return NULL;
}

size_t sb_device_connect_many(struct sb_device *const *devs, size_t n, int parallel,
			      int64_t deadline_ms, struct sb_error *errs)
{
	struct connect_many cm = {.devs = devs, .n = n, .deadline_ms = deadline_ms, .errs = errs};
	size_t threads = parallel < 1 ? 1 : (size_t)parallel;
	if (threads > n)
		threads = n;
	pthread_t *tid = calloc(threads ? threads : 1, sizeof(*tid));
	size_t started = 0;
	/* threads beyond the first: the calling thread is the first */
	while (tid && started + 1 < threads &&
	       !pthread_create(&tid[started], NULL, connect_many_thread, &cm))
		started++;
	connect_many_thread(&cm);
	for (size_t i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	free(tid);
	return atomic_load(&cm.connected);
}

/* ---- RPCs --------------------------------------------------------------- */

/* A growing string buffer for RPC XML. */
struct strbuf {
	char *s;
	size_t len, cap;
	bool oom;
};

static void sb_append(struct strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_append(struct strbuf *b, const char *fmt, ...)
{
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0 || b->oom) {
			b->oom = true;
			return;
		}
		if (b->s && b->len + (size_t)n < b->cap) {
			b->len += (size_t)n;
			return;
		}
		size_t cap = (b->cap ? b->cap * 2 : 4096) + (size_t)n;
		char *s = realloc(b->s, cap);
		if (!s) {
			b->oom = true;
			return;
		}
		b->s = s;
		b->cap = cap;
	}
}

/* Appends the leaf <name>s</name>, s as XML character data. */
static void sb_append_leaf(struct strbuf *b, const char *name, const char *s)
{
	sb_append(b, "<%s>", name);
	for (; *s; s++) {
		const char *e = *s == '<'   ? "&lt;"
				: *s == '>' ? "&gt;"
				: *s == '&' ? "&amp;"
					    : NULL;
		if (e)
			sb_append(b, "%s", e);
		else
			sb_append(b, "%c", *s);
	}
	sb_append(b, "</%s>", name);
}

/* The session is out of step after a failed send or receive: drop it and say why. */
static int wire_failed(struct sb_device *dev, const char *opname, int rc, const struct sb_reply *r,
		       struct sb_error *err)
{
	struct sb_driver *drv = dev->drv;
	drop_session(dev, true);
	if (rc == -ETIMEDOUT) {
		atomic_fetch_add(&drv->counters.rpc_timeouts, 1);
		return set_err(err, dev, opname, rc, "no reply within %d ms",
			       dev->cfg.rpc_timeout_ms);
	}
	atomic_fetch_add(&drv->counters.sessions_lost, 1);
	if (rc == -ECONNRESET)
		return set_err(err, dev, opname, rc, "session lost");
	return set_err(err, dev, opname, rc == -ENOMEM ? -ENOMEM : -EPROTO, "unexpected reply: %s",
		       r->error);
}

/*
 * Runs n RPCs on the session's transport (sb_wire.h) with the device's
 * deadline: all of them sent in one write (pipelined when n > 1: the caller
 * has argued that the later ones are safe to send before the earlier ones
 * are answered), then every reply read in order, so that the session stays
 * in step whatever they say. ops[i] is an operation's XML (NULL: out of
 * memory building it), opnames[i] its name for errors. A reply that is not
 * <ok/> is an error, except the last one when `reply` takes it (then the
 * caller checks its kind; it points into the wire's buffer until the next
 * RPC). Returns the first error in sending order: the later replies are
 * read and ignored. A session that missed its deadline or broke the
 * protocol is out of step and dropped.
 */
static int do_ops(struct sb_device *dev, const char *const *ops, const char *const *opnames,
		  size_t n, struct sb_reply *reply, struct sb_error *err)
{
	struct sb_driver *drv = dev->drv;
	for (size_t i = 0; i < n; i++)
		if (!ops[i])
			return set_err(err, dev, opnames[i], -ENOMEM, "cannot build the RPC");
	if (!sb_device_connected(dev)) {
		sb_device_disconnect(dev);
		return set_err(err, dev, opnames[0], -ECONNRESET, "no session");
	}
	if (!dev->wire) {
		int rc = sb_wire_open(dev->session, dev->fd, &dev->wire);
		if (rc)
			return set_err(err, dev, opnames[0], rc, "%s",
				       rc == -ENOMEM
					       ? "out of memory"
					       : "cannot take over the session's transport "
						 "(not a libnetconf2 2.0 SSH or TLS session)");
	}
	atomic_fetch_add(&drv->counters.rpcs, n);
	int64_t deadline = sb_now_ms() + dev->cfg.rpc_timeout_ms;
	struct sb_reply r = {0};
	int rc = sb_wire_send(dev->wire, ops, n, deadline);
	if (rc)
		return wire_failed(dev, opnames[0], rc, &r, err);
	int first = 0;
	for (size_t i = 0; i < n; i++) {
		if ((rc = sb_wire_recv(dev->wire, deadline, &r)))
			return wire_failed(dev, opnames[i], rc, &r, err);
		if (r.kind == SB_REPLY_ERROR) {
			atomic_fetch_add(&drv->counters.rpc_errors, 1);
			if (!first &&
			    (first = set_err(err, dev, opnames[i], -EREMOTEIO, "%s", r.error)) &&
			    err)
				err->session_id = r.session_id;
		} else if (r.kind != SB_REPLY_OK && !(reply && i == n - 1) && !first) {
			first = set_err(err, dev, opnames[i], -EPROTO,
					"unexpected reply: no <ok/>");
		}
	}
	if (!first && reply)
		*reply = r;
	return first;
}

static int do_op(struct sb_device *dev, const char *op, const char *opname, struct sb_reply *reply,
		 struct sb_error *err)
{
	return do_ops(dev, &op, &opname, 1, reply, err);
}

static const char *ds_name(enum sb_datastore ds)
{
	return ds == SB_DS_CANDIDATE ? "candidate" : "running";
}

int sb_device_lock(struct sb_device *dev, enum sb_datastore ds, struct sb_error *err)
{
	char op[64];
	snprintf(op, sizeof(op), "<lock><target><%s/></target></lock>", ds_name(ds));
	return do_op(dev, op, "lock", NULL, err);
}

int sb_device_kill_session(struct sb_device *dev, uint32_t sid, struct sb_error *err)
{
	char op[96];
	snprintf(op, sizeof(op), "<kill-session><session-id>%u</session-id></kill-session>", sid);
	return do_op(dev, op, "kill-session", NULL, err);
}

int sb_device_unlock(struct sb_device *dev, enum sb_datastore ds, struct sb_error *err)
{
	char op[64];
	snprintf(op, sizeof(op), "<unlock><target><%s/></target></unlock>", ds_name(ds));
	return do_op(dev, op, "unlock", NULL, err);
}

int sb_device_discard(struct sb_device *dev, struct sb_error *err)
{
	return do_op(dev, "<discard-changes/>", "discard-changes", NULL, err);
}

#define VALIDATE_OP "<validate><source><candidate/></source></validate>"

int sb_device_validate(struct sb_device *dev, struct sb_error *err)
{
	return do_op(dev, VALIDATE_OP, "validate", NULL, err);
}

/* Runs the operation built in b (freed here). */
static int do_built(struct sb_device *dev, struct strbuf *b, const char *opname,
		    struct sb_error *err)
{
	int rc = do_op(dev, b->oom ? NULL : b->s, opname, NULL, err);
	free(b->s);
	return rc;
}

int sb_device_commit(struct sb_device *dev, int confirm_timeout_s, const char *persist,
		     const char *persist_id, struct sb_error *err)
{
	struct strbuf b = {0};
	sb_append(&b, "<commit>");
	if (confirm_timeout_s > 0) {
		sb_append(&b, "<confirmed/><confirm-timeout>%d</confirm-timeout>",
			  confirm_timeout_s);
		if (persist)
			sb_append_leaf(&b, "persist", persist);
	}
	if (persist_id)
		sb_append_leaf(&b, "persist-id", persist_id);
	sb_append(&b, "</commit>");
	return do_built(dev, &b, confirm_timeout_s > 0 ? "commit-confirmed" : "commit", err);
}

int sb_device_cancel_commit(struct sb_device *dev, const char *persist_id, struct sb_error *err)
{
	struct strbuf b = {0};
	sb_append(&b, "<cancel-commit>");
	if (persist_id)
		sb_append_leaf(&b, "persist-id", persist_id);
	sb_append(&b, "</cancel-commit>");
	return do_built(dev, &b, "cancel-commit", err);
}

int sb_device_rpc_xml(struct sb_device *dev, const char *xml, struct sb_error *err)
{
	return do_op(dev, xml, "rpc", NULL, err);
}

int sb_device_subscribe(struct sb_device *dev, struct sb_error *err)
{
	return do_op(dev,
		     "<create-subscription "
		     "xmlns=\"urn:ietf:params:xml:ns:netconf:notification:1.0\"/>",
		     "create-subscription", NULL, err);
}

int sb_device_poll_fd(const struct sb_device *dev)
{
	return dev->session ? dev->fd : -1;
}

struct nc_session *sb_device_nc_session(struct sb_device *dev)
{
	return dev->session;
}

/* Starts an edit-config of ds in b; the caller appends the <config> content. */
static void edit_begin(struct sb_device *dev, enum sb_datastore ds, struct strbuf *b)
{
	sb_append(b,
		  "<edit-config><target><%s/></target><default-operation>merge</"
		  "default-operation>%s<config>",
		  ds_name(ds),
		  dev->caps.rollback_on_error ? "<error-option>rollback-on-error</error-option>"
					      : "");
}

/*
 * Ends and runs the edit-config begun in b (freed here); then_validate:
 * a <validate> of the candidate pipelined behind it (sb_device_edit_*_validate).
 */
static int edit_rpc(struct sb_device *dev, enum sb_datastore ds, struct strbuf *b,
		    bool then_validate, struct sb_error *err)
{
	if (ds == SB_DS_RUNNING && !dev->caps.writable_running) {
		free(b->s);
		return set_err(err, dev, "edit-config", -ENOTSUP, "running is not writable");
	}
	sb_append(b, "</config></edit-config>");
	atomic_fetch_add(&dev->drv->counters.edits, 1);
	if (!then_validate)
		return do_built(dev, b, "edit-config", err);
	const char *ops[] = {b->oom ? NULL : b->s, VALIDATE_OP};
	const char *names[] = {"edit-config", "validate"};
	int rc = do_ops(dev, ops, names, 2, NULL, err);
	free(b->s);
	return rc;
}

static int find_xc(const struct sb_xc *xcs, size_t n, uint16_t in)
{
	for (size_t i = 0; i < n; i++)
		if (xcs[i].in == in)
			return (int)i;
	return -1;
}

static int edit_xcs(struct sb_device *dev, enum sb_datastore ds, const struct sb_xc *current,
		    size_t n_current, const struct sb_xc *target, size_t n_target,
		    bool then_validate, struct sb_error *err)
{
	struct strbuf b = {0};
	edit_begin(dev, ds, &b);
	sb_append(&b, "<cross-connects xmlns=\"%s\" xmlns:nc=\"%s\">", OCS_NS, NC_NS);
	/* removals first: inputs the target no longer uses */
	for (size_t i = 0; i < n_current; i++)
		if (find_xc(target, n_target, current[i].in) < 0)
			sb_append(&b,
				  "<connection "
				  "nc:operation=\"remove\"><input>%u</input></connection>",
				  current[i].in);
	/* then additions and changed outputs */
	for (size_t i = 0; i < n_target; i++) {
		int c = find_xc(current, n_current, target[i].in);
		if (c >= 0 && current[c].out == target[i].out)
			continue;
		sb_append(&b, "<connection><input>%u</input><output>%u</output></connection>",
			  target[i].in, target[i].out);
	}
	sb_append(&b, "</cross-connects>");
	return edit_rpc(dev, ds, &b, then_validate, err);
}

int sb_device_edit_xcs(struct sb_device *dev, enum sb_datastore ds, const struct sb_xc *current,
		       size_t n_current, const struct sb_xc *target, size_t n_target,
		       struct sb_error *err)
{
	return edit_xcs(dev, ds, current, n_current, target, n_target, false, err);
}

int sb_device_edit_xcs_validate(struct sb_device *dev, const struct sb_xc *current,
				size_t n_current, const struct sb_xc *target, size_t n_target,
				struct sb_error *err)
{
	return edit_xcs(dev, SB_DS_CANDIDATE, current, n_current, target, n_target, true, err);
}

int sb_device_replace_xcs(struct sb_device *dev, enum sb_datastore ds, const struct sb_xc *xcs,
			  size_t n, struct sb_error *err)
{
	struct strbuf b = {0};
	edit_begin(dev, ds, &b);
	sb_append(&b, "<cross-connects xmlns=\"%s\" xmlns:nc=\"%s\" nc:operation=\"replace\">",
		  OCS_NS, NC_NS);
	for (size_t i = 0; i < n; i++)
		sb_append(&b, "<connection><input>%u</input><output>%u</output></connection>",
			  xcs[i].in, xcs[i].out);
	sb_append(&b, "</cross-connects>");
	return edit_rpc(dev, ds, &b, false, err);
}

int sb_xc_cmp(const void *a, const void *b)
{
	const struct sb_xc *x = a, *y = b;
	return x->in != y->in ? (int)x->in - (int)y->in : (int)x->out - (int)y->out;
}

/*
 * <get> (with_state) or <get-config> of ds with the subtree `filter`;
 * *reply gets the reply, whose data point into the session's wire buffer
 * until the next RPC.
 */
static int read_data(struct sb_device *dev, bool with_state, enum sb_datastore ds,
		     const char *filter, const char *opname, struct sb_reply *reply,
		     struct sb_error *err)
{
	char op[256];
	if (with_state)
		snprintf(op, sizeof(op), "<get><filter type=\"subtree\">%s</filter></get>", filter);
	else
		snprintf(op, sizeof(op),
			 "<get-config><source><%s/></source><filter "
			 "type=\"subtree\">%s</filter></get-config>",
			 ds_name(ds), filter);
	int rc = do_op(dev, op, opname, reply, err);
	if (rc)
		return rc;
	if (reply->kind != SB_REPLY_DATA)
		return set_err(err, dev, opname, -EPROTO, "reply without <data>");
	return 0;
}

int sb_device_read_xcs(struct sb_device *dev, bool with_state, enum sb_datastore ds,
		       struct sb_xc_state **out, size_t *n, struct sb_error *err)
{
	const char *opname = with_state ? "get" : "get-config";
	struct sb_reply r;
	*out = NULL;
	*n = 0;
	int rc = read_data(dev, with_state, ds, XC_FILTER, opname, &r, err);
	if (rc)
		return rc;
	rc = sb_reply_xcs(r.data, r.data_len, out, n);
	if (rc)
		return set_err(err, dev, opname, rc, "%s",
			       rc == -ENOMEM ? "out of memory"
					     : "unexpected reply: cross-connects not readable");
	return 0;
}

/* ---- ocs-transceiver ---------------------------------------------------- */

int sb_bundle_cmp(const void *a, const void *b)
{
	const struct sb_bundle *x = a, *y = b;
	return (int)x->bundle - (int)y->bundle;
}

bool sb_bundle_equal(const struct sb_bundle *a, const struct sb_bundle *b)
{
	if (a->bundle != b->bundle || a->path != b->path)
		return false;
	return a->path == 0 || (a->distance == b->distance && a->dir == b->dir);
}

int sb_device_read_bundles(struct sb_device *dev, bool with_state, enum sb_datastore ds,
			   struct sb_bundle_state **out, size_t *n, bool *node_faulty,
			   struct sb_error *err)
{
	const char *opname = with_state ? "get" : "get-config";
	*out = NULL;
	*n = 0;
	if (node_faulty)
		*node_faulty = false;
	if (dev->cfg.model != SB_MODEL_TRANSCEIVER)
		return set_err(err, dev, opname, -ENOTSUP, "not an ocs-transceiver device");
	struct sb_reply r;
	int rc = read_data(dev, with_state, ds, TRX_FILTER, opname, &r, err);
	if (rc)
		return rc;
	rc = sb_reply_bundles(r.data, r.data_len, dev->cfg.node, out, n, node_faulty);
	if (rc)
		return set_err(err, dev, opname, rc, "%s",
			       rc == -ENOMEM ? "out of memory"
					     : "unexpected reply: bundles not readable");
	return 0;
}

static int edit_bundles(struct sb_device *dev, enum sb_datastore ds, const struct sb_bundle *target,
			size_t n, bool then_validate, struct sb_error *err)
{
	if (dev->cfg.model != SB_MODEL_TRANSCEIVER)
		return set_err(err, dev, "edit-config", -ENOTSUP, "not an ocs-transceiver device");
	struct strbuf b = {0};
	edit_begin(dev, ds, &b);
	/* replace the node's entry: the bundles it holds are exactly target */
	sb_append(&b,
		  "<transceivers xmlns=\"%s\" xmlns:nc=\"%s\"><node "
		  "nc:operation=\"replace\"><id>%u</id>",
		  TRX_NS, NC_NS, dev->cfg.node);
	for (size_t i = 0; i < n; i++) {
		const struct sb_bundle *t = &target[i];
		if (t->path)
			sb_append(&b,
				  "<bundle><id>%u</id><path>external</path><external><distance>%u"
				  "</distance><direction>%s</direction></external></bundle>",
				  t->bundle, t->distance, t->dir ? "down" : "up");
		else
			sb_append(&b, "<bundle><id>%u</id><path>loopback</path></bundle>",
				  t->bundle);
	}
	sb_append(&b, "</node></transceivers>");
	return edit_rpc(dev, ds, &b, then_validate, err);
}

int sb_device_edit_bundles(struct sb_device *dev, enum sb_datastore ds,
			   const struct sb_bundle *target, size_t n, struct sb_error *err)
{
	return edit_bundles(dev, ds, target, n, false, err);
}

int sb_device_edit_bundles_validate(struct sb_device *dev, const struct sb_bundle *target, size_t n,
				    struct sb_error *err)
{
	return edit_bundles(dev, SB_DS_CANDIDATE, target, n, true, err);
}
