/*
 * sb_device.c - the NETCONF device driver (see sb_device.h for the API,
 * threading and error rules): the driver, device handles and their
 * sessions (connect over SSH or TLS, host keys, capabilities and strategy,
 * backoff, keepalive, drop), claims and the verified image. The RPCs on a
 * session are in sb_device_rpc.c; the structs both files use are in
 * sb_device_internal.h.
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
 *   - netconfd 2.13 leaves a session's first RPC unanswered when it reads
 *     it with the client's <hello> (southbound/README.md, "The setup's
 *     deadline"): the setup's deadline (sb_guard.h) ends such a connect,
 *     and the backoff makes it again.
 *
 * libnetconf2 sets sessions up (transport, <hello>, capabilities); the RPCs
 * themselves go over the session's transport in ocsd's own framing and
 * their replies are scanned without libyang (sb_device_rpc.c, sb_wire.h,
 * sb_reply.h).
 */
#define _GNU_SOURCE /* POLLRDHUP */
#include "sb_device.h"

#include "sb_device_internal.h"
#include "sb_guard.h"
#include "sb_model.h"
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
extern const char sb_yang_optical_switch[];
extern const char sb_yang_polatis_switch[];

int64_t sb_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int sbd_set_err(struct sb_error *err, const struct sb_device *dev, const char *op, int code,
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

/* One setup slot's context: every module a device may speak, compiled once
 * and frozen. 0, or -errno. */
static int driver_ctx(const char *ietf_dir, struct ly_ctx **out)
{
	struct ly_ctx *ctx = NULL;
	if (ly_ctx_new(ietf_dir, 0, &ctx))
		return -EINVAL;
	/* everything ocs-devsim advertises, so that connecting never has to
	 * add a module while other threads parse replies */
	ly_ctx_set_searchdir(ctx, "/usr/share/yuma/modules/ietf-derived");
	ly_ctx_set_searchdir(ctx, "/usr/share/yuma/modules/netconfcentral");
	const char *all[] = {"*", NULL};
	int rc = 0;
	if (!ly_ctx_load_module(ctx, "ietf-netconf", "2011-06-01", all) ||
	    !ly_ctx_load_module(ctx, "ietf-netconf-monitoring", NULL, NULL) ||
	    !ly_ctx_load_module(ctx, "notifications", NULL, NULL) ||
	    !ly_ctx_load_module(ctx, "nc-notifications", NULL, NULL) ||
	    !ly_ctx_load_module(ctx, "ietf-netconf-with-defaults", NULL, NULL) ||
	    !ly_ctx_load_module(ctx, "ietf-datastores", NULL, NULL) ||
	    !ly_ctx_load_module(ctx, "ietf-netconf-nmda", NULL, all))
		rc = -ENOENT;
	/* every model's modules (sb_model.h), and the simulator's control RPCs */
	const char *mods[] = {sb_yang_ocs_switch, sb_yang_ocs_transceiver, sb_yang_optical_switch,
			      sb_yang_polatis_switch, sb_yang_ocs_devsim};
	for (size_t i = 0; i < sizeof(mods) / sizeof(mods[0]) && !rc; i++)
		if (lys_parse_mem(ctx, mods[i], LYS_IN_YANG, NULL))
			rc = -EINVAL;
	if (rc) {
		ly_ctx_destroy(ctx);
		return rc;
	}
	/* Freeze the compiled context. libnetconf2's check at every connect
	 * loads each module the server advertises with the server's features,
	 * which would recompile the context to the last server's feature set:
	 * after a device without :confirmed-commit connected, every other
	 * device's <commit><confirmed/> failed to build. With explicit
	 * compilation such changes never reach the compiled schema, which
	 * already holds every feature. */
	ly_ctx_set_options(ctx, LY_CTX_EXPLICIT_COMPILE);
	*out = ctx;
	return 0;
}

/* Frees the first n setup slots. */
static void free_slots(struct sb_driver *drv, int n)
{
	for (int i = 0; i < n; i++) {
		sb_guard_free(drv->slots[i].guard);
		pthread_mutex_destroy(&drv->slots[i].mu);
		ly_ctx_destroy(drv->slots[i].ctx);
	}
}

int sb_driver_new(const char *ietf_dir, struct sb_driver **out)
{
	struct sb_driver *drv = calloc(1, sizeof(*drv));
	if (!drv)
		return -ENOMEM;
	if (!ietf_dir)
		ietf_dir = "/usr/share/yuma/modules/ietf";
	ly_log_options(LY_LOSTORE);
	nc_verbosity(getenv("SB_NC_DEBUG") ? NC_VERB_DEBUG : NC_VERB_ERROR);
	for (int made = 0; made < SB_SETUP_SLOTS; made++) {
		struct sb_setup_slot *sl = &drv->slots[made];
		int rc = driver_ctx(ietf_dir, &sl->ctx);
		if (!rc && (rc = sb_guard_new(&sl->guard)))
			ly_ctx_destroy(sl->ctx);
		if (rc) {
			free_slots(drv, made);
			free(drv);
			return rc;
		}
		pthread_mutex_init(&sl->mu, NULL);
	}
	pthread_mutex_init(&drv->tls_mu, NULL);
	nc_client_init();
	*out = drv;
	return 0;
}

void sb_driver_free(struct sb_driver *drv)
{
	if (!drv)
		return;
	nc_client_destroy();
	free_slots(drv, SB_SETUP_SLOTS);
	pthread_mutex_destroy(&drv->tls_mu);
	free(drv);
}

/* Takes a setup slot: the first free one from a rotating start, else waits
 * for the start's own. Released with pthread_mutex_unlock(&slot->mu). */
static struct sb_setup_slot *take_slot(struct sb_driver *drv)
{
	unsigned start = atomic_fetch_add(&drv->next_slot, 1) % SB_SETUP_SLOTS;
	for (unsigned i = 0; i < SB_SETUP_SLOTS; i++) {
		struct sb_setup_slot *sl = &drv->slots[(start + i) % SB_SETUP_SLOTS];
		if (pthread_mutex_trylock(&sl->mu) == 0)
			return sl;
	}
	pthread_mutex_lock(&drv->slots[start].mu);
	return &drv->slots[start];
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
	if (!dst->ports.in_first && !dst->ports.out_first)
		dst->ports = sb_model_default_ports(dst->model, cfg->ports.n);
}

/* A config a device can be made with: an address, a known model, a port map it allows. */
static bool config_usable(const struct sb_device_config *cfg)
{
	struct sb_device_config c;
	char why[160];
	if (!cfg->host[0] || !cfg->port || (unsigned)cfg->model >= SB_MODEL_COUNT)
		return false;
	fill_config(&c, cfg);
	return !sb_model_check_ports(c.model, &c.ports, why, sizeof(why));
}

int sb_device_new(struct sb_driver *drv, const struct sb_device_config *cfg, struct sb_device **out)
{
	if (!config_usable(cfg))
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
	if (!config_usable(cfg))
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

const struct sb_port_map *sb_device_ports(const struct sb_device *dev)
{
	return &dev->cfg.ports;
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
 * SIGPIPE held off this thread around nc_session_free() and the connects
 * (which free their session when they fail): OpenSSL writes its
 * close_notify (and libnetconf2 its <close-session>) with write(2) on a
 * socket that may be reset or shut down, and a library must not count on
 * its process ignoring SIGPIPE (ocsd does). A SIGPIPE raised meanwhile is
 * taken off the thread before the mask is restored.
 */
struct pipe_hold {
	sigset_t pipe; /* SIGPIPE alone */
	sigset_t old;
	bool was_pending;
};

static void pipe_hold(struct pipe_hold *h)
{
	sigset_t pending;
	sigemptyset(&h->pipe);
	sigaddset(&h->pipe, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &h->pipe, &h->old);
	h->was_pending = !sigpending(&pending) && sigismember(&pending, SIGPIPE);
}

static void pipe_release(const struct pipe_hold *h)
{
	sigset_t pending;
	if (!h->was_pending && !sigpending(&pending) && sigismember(&pending, SIGPIPE))
		sigtimedwait(&h->pipe, NULL, &(struct timespec){0, 0});
	pthread_sigmask(SIG_SETMASK, &h->old, NULL);
}

static void free_session(struct nc_session *s)
{
	struct pipe_hold h;
	pipe_hold(&h);
	nc_session_free(s, NULL);
	pipe_release(&h);
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
void sbd_drop_session(struct sb_device *dev, bool out_of_step)
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
	sbd_drop_session(dev, false);
}

int sb_device_poll_fd(const struct sb_device *dev)
{
	return dev->session ? dev->fd : -1;
}

struct nc_session *sb_device_nc_session(struct sb_device *dev)
{
	return dev->session;
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
 * The deadline of a session's NETCONF setup, the part under a setup slot
 * (sb_device_internal.h): the <hello> and libnetconf2's context check, up to 3 RPCs of its
 * own, each given the device's RPC deadline, and at least a second
 * (sb_guard.h says why libnetconf2 cannot be left to bound them).
 */
#define SETUP_EXCHANGES 4

#define SETUP_MIN_MS 1000 /* as SSH's own timeouts, which count whole seconds */

static int64_t setup_ms(const struct sb_device *dev)
{
	int64_t ms = (int64_t)SETUP_EXCHANGES * dev->cfg.rpc_timeout_ms;
	return ms < SETUP_MIN_MS ? SETUP_MIN_MS : ms;
}

static int64_t setup_deadline(const struct sb_device *dev)
{
	return sb_now_ms() + setup_ms(dev);
}

/* A setup that failed or passed its deadline (late): the session, if one
 * came of it, is freed without a word on its dead socket; the reason goes
 * to dev->hostkey_error. */
static void setup_failed(struct sb_device *dev, struct nc_session **ns, bool late, const char *why)
{
	if (*ns) {
		nc_session_set_status(*ns, NC_STATUS_INVALID);
		free_session(*ns);
		*ns = NULL;
	}
	if (late)
		snprintf(dev->hostkey_error, sizeof(dev->hostkey_error),
			 "no NETCONF session within %lld ms (the setup's deadline: "
			 "%d x rpc_timeout_ms, at least %d ms)",
			 (long long)setup_ms(dev), SETUP_EXCHANGES, SETUP_MIN_MS);
	else
		snprintf(dev->hostkey_error, sizeof(dev->hostkey_error), "%s", why);
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
/*
 * TCP keepalive: a peer that dies silently (power, cable) fails the socket
 * within about 10 s of idleness, which the next connect sees.
 */
static void tcp_keepalive(int fd)
{
	int yes = 1, idle = 5, intvl = 2, cnt = 3;

	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &yes, sizeof(yes));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

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
	tcp_keepalive(fd);
	/* only the NETCONF <hello> and the context check are serialized: the
	 * SSH handshake above, most of a connect's CPU, runs in parallel */
	struct sb_setup_slot *sl = take_slot(dev->drv);
	bool guarded = !sb_guard_arm(sl->guard, fd, setup_deadline(dev));
	struct pipe_hold h; /* a setup cut short frees its session on the shut socket */
	pipe_hold(&h);
	struct nc_session *ns = nc_connect_libssh(s, sl->ctx);
	pipe_release(&h);
	bool late = guarded && sb_guard_disarm(sl->guard);
	pthread_mutex_unlock(&sl->mu);
	if (late || !ns)
		setup_failed(dev, &ns, late, "NETCONF <hello> failed");
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
		sbd_drop_session(dev, true);
	}
	if (sb_device_connected(dev))
		return 0;
	sb_device_disconnect(dev);
	int64_t now = sb_now_ms();
	if (now < dev->next_attempt_ms)
		return sbd_set_err(err, dev, "connect", -EAGAIN, "backing off for %lld ms",
				   (long long)(dev->next_attempt_ms - now));
	struct sb_driver *drv = dev->drv;
	dev->hostkey_error[0] = '\0';
	if (dev->cfg.transport == SB_TRANSPORT_TLS) {
		pthread_mutex_lock(&drv->tls_mu);
		struct sb_setup_slot *sl = take_slot(drv);
		nc_client_tls_set_cert_key_paths(dev->cfg.tls_cert, dev->cfg.tls_key);
		nc_client_tls_set_trusted_ca_paths(dev->cfg.tls_ca, NULL);
		/* here the deadline also bounds the TCP connect and the TLS
		 * handshake, which nc_connect_tls() makes inside (its TCP
		 * connect has no timeout of its own) */
		bool guarded = !sb_guard_arm_tls(sl->guard, dev->cfg.host, dev->cfg.port,
						 setup_deadline(dev));
		struct pipe_hold h;
		pipe_hold(&h);
		dev->session = nc_connect_tls(dev->cfg.host, dev->cfg.port, sl->ctx);
		pipe_release(&h);
		bool late = guarded && sb_guard_disarm(sl->guard);
		pthread_mutex_unlock(&sl->mu);
		pthread_mutex_unlock(&drv->tls_mu);
		if (late)
			setup_failed(dev, &dev->session, true, NULL);
		/* the TLS socket, for the idle check above as SSH has it: without
		 * it a TLS peer that went away stayed "connected" until an RPC */
		if (dev->session && sb_wire_open(dev->session, -1, &dev->wire) == 0) {
			dev->fd = sb_wire_fd(dev->wire);
			tcp_keepalive(dev->fd);
		}
	} else {
		dev->session = ssh_open(dev);
	}
	if (!dev->session) {
		atomic_fetch_add(&drv->counters.connect_failures, 1);
		dev->backoff_ms = dev->backoff_ms ? dev->backoff_ms * 2 : dev->cfg.backoff_min_ms;
		if (dev->backoff_ms > dev->cfg.backoff_max_ms)
			dev->backoff_ms = dev->cfg.backoff_max_ms;
		dev->next_attempt_ms = sb_now_ms() + dev->backoff_ms;
		return sbd_set_err(
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
		return sbd_set_err(err, dev, "connect", -ENOTSUP,
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
			return rc == -EAGAIN ? sbd_set_err(err, dev, "connect", -ETIMEDOUT,
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
		return sbd_set_err(err, dev, "keepalive", -EBUSY, "in use");
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
