/*
 * sb_device.h - the ocsd NETCONF device driver: one session per OCS device,
 * over SSH (password or key, explicit host-key policy) or TLS
 * (certificates), with capability detection, a strategy per device, a
 * deadline on every RPC and reconnection with exponential backoff.
 * libnetconf2 sets sessions up; ocsd frames the RPCs and scans the replies
 * itself on the session's transport (sb_wire.h).
 *
 * The driver speaks two models, one per device (sb_device_config.model):
 *   - ocs-switch (southbound/yang/ocs-switch.yang): it reads the
 *     cross-connects of a device (configuration and state) and writes them
 *     with ONE edit-config per call (removals before additions), never one
 *     RPC per cross-connect;
 *   - ocs-transceiver (southbound/yang/ocs-transceiver.yang): the device is
 *     the transceiver agent of one node (sb_device_config.node); it reads
 *     and writes that node's bundles, again with one edit-config per call.
 * The transaction engine (sb_txn.h) builds all-or-nothing changes across
 * many devices on top of these calls. Notifications are received by a
 * separate listener (sb_notif.h) on sessions of its own.
 *
 * Threads and locks:
 *   - struct sb_driver is shared by every device and thread-safe. It owns
 *     the libyang context (read-only once built: it is preloaded with every
 *     module a device is expected to advertise) and a mutex that serializes
 *     session setup, the only step that may add a module to the context.
 *   - struct sb_device is NOT thread-safe: one thread at a time may call
 *     functions on a given device (the transaction engine runs each device
 *     on one pool thread per step). Different devices may be used from
 *     different threads at the same time: that is how I/O runs in parallel.
 *   - libnetconf2 keeps client settings (username, callbacks, keys) per
 *     thread; sb_device_connect() sets them in the calling thread every
 *     time, so any thread may (re)connect any device.
 *   - sb_device_set_config() is the exception: any thread may call it at
 *     any time (the daemon does on SIGHUP while a transaction may be using
 *     the device); the settings wait for the device's own thread.
 *   - Counters are atomics, readable from any thread.
 *
 * Errors: functions return 0 or a negative errno (-ETIMEDOUT deadline
 * passed, -ECONNRESET session lost, -EREMOTEIO the device answered with an
 * <rpc-error>, -EAGAIN still backing off, -EPROTO unexpected reply,
 * -ENOTSUP the device lacks what the call needs) and fill a struct
 * sb_error when one is given.
 */
#ifndef OCS_SB_DEVICE_H
#define OCS_SB_DEVICE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum sb_transport {
	SB_TRANSPORT_SSH = 0,
	SB_TRANSPORT_TLS,
};

enum sb_hostkey_policy {
	SB_HOSTKEY_ACCEPT_ANY = 0, /* explicit opt-in: labs and tests only */
	SB_HOSTKEY_PINNED,	   /* the host key's "SHA256:..." must match */
};

/* Whether to send <validate> before <commit> (see quirks in sb_device.c). */
enum sb_validate_policy {
	SB_VALIDATE_AUTO = 0, /* when offered, except on servers known to mishandle it */
	SB_VALIDATE_ALWAYS,   /* when offered */
	SB_VALIDATE_NEVER,
};

/* Which YANG model a device speaks (the table of models: sb_model.h). */
enum sb_model {
	SB_MODEL_SWITCH = 0,  /* ocs-switch: cross-connects */
	SB_MODEL_TRANSCEIVER, /* ocs-transceiver: the bundles of one node */
	SB_MODEL_POLATIS,     /* Polatis optical-switch: ingress -> egress pairs */
};
#define SB_MODEL_COUNT 3

/*
 * How ocsd's port k of a cross-connect device is numbered on the device:
 * light enters at in_first + k and leaves at out_first + k. ocs-switch
 * numbers both directions of one duplex port alike from 0 (0, 0); an N x N
 * Polatis switch numbers its ingress ports 1..N and its egress ports
 * N+1..2N (1, N+1). n: how many ports ocsd uses (0: not bounded).
 */
struct sb_port_map {
	uint32_t in_first;
	uint32_t out_first;
	uint32_t n;
};

struct sb_device_config {
	char name[64]; /* for errors and logs */
	char host[64]; /* loopback in tests: "127.0.0.1" */
	uint16_t port;
	enum sb_transport transport;
	/* SSH */
	char username[64];
	char password[128];	/* password authentication when non-empty */
	char privkey_path[256]; /* public-key authentication when non-empty */
	char pubkey_path[256];
	enum sb_hostkey_policy hostkey_policy;
	char hostkey_sha256[128]; /* "SHA256:<base64>" for SB_HOSTKEY_PINNED */
	/* TLS */
	char tls_cert[256];
	char tls_key[256];
	char tls_ca[256];
	/* timing; 0 picks the default in brackets */
	int rpc_timeout_ms; /* deadline of every RPC, and of each step of the SSH
			     * handshake; a session's NETCONF setup gets 4 x it,
			     * at least 1 s [5000] */
	int backoff_min_ms; /* first reconnect delay [50] */
	int backoff_max_ms; /* cap of the doubling delay [5000] */
	enum sb_validate_policy validate;
	enum sb_model model;	  /* [SB_MODEL_SWITCH] */
	uint32_t node;		  /* SB_MODEL_TRANSCEIVER: the node this agent serves */
	struct sb_port_map ports; /* cross-connect models [all 0: the model's default,
				   * sb_model_default_ports()] */
	/* The device's switching time from its datasheet, in microseconds: the
	 * transaction engine's first read-back after a commit waits this long
	 * (polls before it would only see `pending`) [0: read back at once] */
	int switch_us;
};

/* What the device offered in its <hello>. */
struct sb_capabilities {
	bool base11;
	bool candidate;
	bool confirmed_commit; /* :confirmed-commit:1.1 */
	bool validate;
	bool rollback_on_error;
	bool writable_running;
	bool yuma; /* netconfd (yuma123): see the quirks */
};

/*
 * How the transaction engine programs the device, from its capabilities:
 *   CONFIRMED  candidate + confirmed-commit: the dead-man switch protects it
 *   CANDIDATE  candidate without confirmed-commit: plain commit, rollback
 *              by a compensating edit from the saved pre-image
 *   RUNNING    writable-running only: edit running at commit time,
 *              rollback by a compensating edit
 */
enum sb_strategy {
	SB_STRATEGY_NONE = 0, /* not connected yet, or nothing usable */
	SB_STRATEGY_CONFIRMED,
	SB_STRATEGY_CANDIDATE,
	SB_STRATEGY_RUNNING,
};

/* A structured error: which device, which operation, what the device said. */
struct sb_error {
	int code; /* negative errno, 0 = none */
	char device[64];
	char operation[24]; /* "connect", "lock", "edit-config", ... */
	char message[320];
	/* an <rpc-error>'s error-info session-id: for a refused lock, the
	 * session that holds it (0: none given) */
	uint32_t session_id;
};

/* One one-way cross-connect of an ocs-switch device. */
struct sb_xc {
	uint16_t in;
	uint16_t out;
};
/* qsort/bsearch comparator of struct sb_xc: by input port, then output port. */
int sb_xc_cmp(const void *a, const void *b);

enum sb_xc_status {
	SB_XC_STATUS_UNKNOWN = 0, /* read from configuration only */
	SB_XC_STATUS_CONNECTED,
	SB_XC_STATUS_PENDING,
	SB_XC_STATUS_FAILED,
	SB_XC_STATUS_INVALID,
};

struct sb_xc_state {
	uint16_t in;
	uint16_t out;
	enum sb_xc_status status;
};

/*
 * One transceiver bundle's selected path (ocs-transceiver; values of
 * solvers/hbd_ring.h: bundle 0 faces lower positions, bundle 1 higher ones,
 * bundles 2.. stay on loopback).
 */
struct sb_bundle {
	uint8_t bundle;
	uint8_t path;	  /* 0 loopback, 1 external */
	uint8_t distance; /* external: 1..K; loopback: 0 */
	uint8_t dir;	  /* 0 up (towards higher positions), 1 down; loopback: 0 */
};
/* qsort/bsearch comparator of struct sb_bundle: by bundle id. */
int sb_bundle_cmp(const void *a, const void *b);
/* Same selected path (bundle, path, and for an external path distance and dir)? */
bool sb_bundle_equal(const struct sb_bundle *a, const struct sb_bundle *b);

enum sb_path_status {
	SB_PATH_UNKNOWN = 0, /* read from configuration only */
	SB_PATH_ACTIVE,
	SB_PATH_PENDING,
	SB_PATH_FAILED,
};

/* A bundle as read back: its setting, the node it reaches and its status. */
struct sb_bundle_state {
	struct sb_bundle set;
	int32_t peer_node;	    /* the node the active external path reaches; -1: none */
	enum sb_path_status status; /* of the selected path */
};

/* A port's status as a device reports it (Polatis port-config; 0 when not reported). */
enum sb_port_status {
	SB_PORT_STATUS_NONE = 0,
	SB_PORT_STATUS_ENABLED,
	SB_PORT_STATUS_DISABLED,
	SB_PORT_STATUS_FAILED,
	SB_PORT_STATUS_UNSUPPORTED,
};

/* Longest peer-port text a device may report (Polatis: 0..128 characters). */
#define SB_PEER_MAX 128

/* What a device says it is (Polatis product-information); "" when it does not say. */
struct sb_product {
	char manufacturer[96];
	char serial[96];
	char model[96];
	char software[96];
};

/* One of ocsd's ports as the device reports it (sb_device_read_info). */
struct sb_port_info {
	uint16_t port; /* ocsd's port */
	bool egress;   /* the device's egress id of the port (a model that numbers them apart) */
	enum sb_port_status status;
	char peer[SB_PEER_MAX + 1]; /* the fibre's far end as recorded on the device; "" none */
};

/* What sb_device_read_info() found. */
struct sb_device_info {
	struct sb_product product;
	struct sb_port_info *ports; /* sorted by (port, egress); malloc'ed */
	size_t n_ports;
};
void sb_device_info_clear(struct sb_device_info *info);

struct sb_driver_counters {
	atomic_uint_least64_t connects; /* sessions established */
	atomic_uint_least64_t connect_failures;
	atomic_uint_least64_t rpcs;
	atomic_uint_least64_t edits;	     /* edit-config RPCs (one per device per change) */
	atomic_uint_least64_t rpc_errors;    /* <rpc-error> replies */
	atomic_uint_least64_t rpc_timeouts;  /* deadline passed */
	atomic_uint_least64_t sessions_lost; /* dropped mid-RPC, or found dead while idle */
	atomic_uint_least64_t reconnects;    /* sessions opened after a device's first one */
};

struct sb_driver;
struct sb_device;

/*
 * Creates the shared driver state. ietf_dir: where the IETF YANG modules
 * are (NULL = /usr/share/yuma/modules/ietf). Returns 0 or -errno.
 * Free with sb_driver_free() after every device is freed. One driver per
 * process: it initializes libnetconf2's process-global client state.
 * SB_NC_DEBUG=1 in the environment turns on libnetconf2's debug log.
 */
int sb_driver_new(const char *ietf_dir, struct sb_driver **out);
void sb_driver_free(struct sb_driver *drv);
const struct sb_driver_counters *sb_driver_counters(const struct sb_driver *drv);

/* Creates a device handle (no I/O). Copies cfg. Free with sb_device_free(). */
int sb_device_new(struct sb_driver *drv, const struct sb_device_config *cfg,
		  struct sb_device **out);
void sb_device_free(struct sb_device *dev);
const char *sb_device_name(const struct sb_device *dev);
enum sb_model sb_device_model(const struct sb_device *dev);
/* How ocsd's ports are numbered on the device (the config's map, or the model's default). */
const struct sb_port_map *sb_device_ports(const struct sb_device *dev);
/* The config's switch_us: the device's switching time in microseconds (0 unknown). */
int sb_device_switch_us(const struct sb_device *dev);

/*
 * Stages new settings (address, port, credentials, host-key policy,
 * timeouts; the name stays). Thread-safe. They take effect at the device's
 * next sb_device_connect(), which closes a session opened with the old ones
 * and connects afresh (the backoff is reset), so a transaction in progress
 * keeps its session to the end: the transaction engine connects each device
 * only when it prepares it. Returns 0, or -EINVAL (no host or port).
 */
int sb_device_set_config(struct sb_device *dev, const struct sb_device_config *cfg);

/*
 * Connects unless a session is up. A session whose peer went away while it
 * was idle (closed, or failed by TCP keepalive, about 10 s after a silent
 * peer died; SSH sessions) is not up: it is replaced here, without an RPC
 * failing on it first. Honors the backoff: while backing off it returns
 * -EAGAIN at once. sb_device_connect_until() retries with the
 * backoff until deadline_ms (CLOCK_MONOTONIC milliseconds, sb_now_ms()).
 * The NETCONF setup (the <hello> and libnetconf2's context check; for TLS
 * also the TCP connect and the handshake) must end within 4 x
 * rpc_timeout_ms (at least 1 s), or the connect fails with -ECONNREFUSED, "no NETCONF
 * session within N ms" (sb_guard.h): a device that never answers cannot
 * hold its setup slot for libnetconf2's own 300 s, and while it holds one
 * the other devices connect through the driver's other slots
 * (sb_device_internal.h).
 */
int sb_device_connect(struct sb_device *dev, struct sb_error *err);
int sb_device_connect_until(struct sb_device *dev, int64_t deadline_ms, struct sb_error *err);
/*
 * Warm start: connects devs[0..n-1] in parallel, `parallel` at a time
 * (threads made for the call and joined before it returns; the caller's is
 * one of them), each retrying with its backoff until deadline_ms like
 * sb_device_connect_until(). SSH handshakes run in parallel; only the
 * NETCONF <hello> and the context check of each session are serialized.
 * errs (n entries, or NULL) gets each device's error (code 0: connected).
 * Returns how many devices have a session. No other thread may use these
 * devices during the call. The daemon calls it before it reports READY,
 * with deadline_ms = now + its configured start-up bound, so that the
 * first transaction finds its sessions up; a device still down then is
 * connected by the transaction (or its reconcile) as before.
 */
size_t sb_device_connect_many(struct sb_device *const *devs, size_t n, int parallel,
			      int64_t deadline_ms, struct sb_error *errs);
/*
 * Who uses a device. A transaction claims each device it touches for its
 * whole length (sb_txn.c) and a keepalive pass only ever tries to; the
 * claim may be released from another thread than the one that took it.
 * sb_device_claim() waits for the claim (a keepalive pass holds it for at
 * most one connect); sb_device_try_claim() takes it only when free.
 * Callers that share nothing with a keepalive (tools, tests, start-up
 * before any pass) need not claim.
 */
void sb_device_claim(struct sb_device *dev);
bool sb_device_try_claim(struct sb_device *dev);
void sb_device_unclaim(struct sb_device *dev);

/*
 * Keepalive, for a background pass over idle devices (one thread or timer
 * for all of them, never a thread per device); any thread. When nobody
 * holds the device's claim it takes it for the call and does what
 * sb_device_connect() does: a live session gets no RPC (one poll of its
 * socket), a session whose peer went away is replaced, a device without a
 * session is connected, with the backoff honoured. Returns 0 (a live
 * session, perhaps a new one), -EBUSY (claimed: a transaction is using it
 * and will find out itself), or the connect's error (-EAGAIN backing off,
 * -ECONNREFUSED, ...). TLS sessions, whose socket libnetconf2 keeps to
 * itself, cannot be checked while idle: a dead one is found by its next
 * RPC (and retried in a transaction's prepare, sb_txn.c R1).
 */
int sb_device_keepalive(struct sb_device *dev, struct sb_error *err);
/* Sessions this device opened after its first one (reconnects); any thread. */
uint64_t sb_device_reconnects(const struct sb_device *dev);

/* Closes the session (if any). The backoff is not reset. */
void sb_device_disconnect(struct sb_device *dev);
bool sb_device_connected(const struct sb_device *dev);
/* Valid after a successful connect. */
const struct sb_capabilities *sb_device_capabilities(const struct sb_device *dev);
enum sb_strategy sb_device_strategy(const struct sb_device *dev);
/* Whether <validate> should be sent before <commit> on this device. */
bool sb_device_should_validate(const struct sb_device *dev);

int64_t sb_now_ms(void);

/* Datastores the calls below accept. */
enum sb_datastore {
	SB_DS_RUNNING = 0,
	SB_DS_CANDIDATE,
};

/* A lock another session holds fails with -EREMOTEIO and err->session_id its holder. */
int sb_device_lock(struct sb_device *dev, enum sb_datastore ds, struct sb_error *err);
int sb_device_unlock(struct sb_device *dev, enum sb_datastore ds, struct sb_error *err);
int sb_device_discard(struct sb_device *dev, struct sb_error *err);
int sb_device_validate(struct sb_device *dev, struct sb_error *err);
/*
 * <commit>. confirm_timeout_s > 0 makes it a confirmed commit with that
 * timeout; persist (confirmed) / persist_id (confirming) may be NULL.
 */
int sb_device_commit(struct sb_device *dev, int confirm_timeout_s, const char *persist,
		     const char *persist_id, struct sb_error *err);
/*
 * <kill-session> of session sid (RFC 6241 7.9): the device ends it,
 * releases its locks and reverts its unconfirmed commit (one without
 * persist). Only the daemon's recovery fences a previous leader's session
 * with it (daemon/txn/recovery.c).
 */
int sb_device_kill_session(struct sb_device *dev, uint32_t sid, struct sb_error *err);
int sb_device_cancel_commit(struct sb_device *dev, const char *persist_id, struct sb_error *err);

/*
 * Makes the cross-connects of datastore ds exactly `target` with one
 * edit-config: removals (inputs of `current` absent from target) come
 * before additions and changes. `current` is what the datastore holds now.
 */
int sb_device_edit_xcs(struct sb_device *dev, enum sb_datastore ds, const struct sb_xc *current,
		       size_t n_current, const struct sb_xc *target, size_t n_target,
		       struct sb_error *err);
/*
 * Pipelining (issue 13): the edit-config of sb_device_edit_xcs() on the
 * candidate and a <validate> of the candidate, sent in one write before
 * either reply is read (sb_wire_send), both replies read in order. 0 when
 * both say <ok/>; otherwise the first failure, its operation named in err
 * ("edit-config" or "validate"): a refused edit's validate answer is read
 * and ignored. Safe only where the caller discards the candidate after any
 * failure (sb_txn.c, "Pipelined pairs").
 */
int sb_device_edit_xcs_validate(struct sb_device *dev, const struct sb_xc *current,
				size_t n_current, const struct sb_xc *target, size_t n_target,
				struct sb_error *err);
/* Replaces the whole cross-connects container (compensating edits). */
int sb_device_replace_xcs(struct sb_device *dev, enum sb_datastore ds, const struct sb_xc *xcs,
			  size_t n, struct sb_error *err);

/*
 * Reads the cross-connects. with_state: <get> (configuration + status);
 * otherwise <get-config> of ds. *out is malloc'ed, sorted by input; caller
 * frees.
 */
int sb_device_read_xcs(struct sb_device *dev, bool with_state, enum sb_datastore ds,
		       struct sb_xc_state **out, size_t *n, struct sb_error *err);

/*
 * Reads the bundles of the device's node (SB_MODEL_TRANSCEIVER; -ENOTSUP
 * otherwise). with_state: <get> (configuration + peer-node + the selected
 * path's status, and *node_faulty); otherwise <get-config> of ds (peer_node
 * -1, status UNKNOWN, *node_faulty false). *out is malloc'ed, sorted by
 * bundle; caller frees. node_faulty may be NULL.
 */
int sb_device_read_bundles(struct sb_device *dev, bool with_state, enum sb_datastore ds,
			   struct sb_bundle_state **out, size_t *n, bool *node_faulty,
			   struct sb_error *err);
/*
 * Makes the bundles of the device's node in datastore ds exactly `target`
 * (n entries, bundle ids unique) with one edit-config that replaces the
 * node's entry: bundles absent from target are removed (a removed bundle is
 * on loopback, the model's default). Used for the edit and for the
 * compensating edit from a pre-image alike. -ENOTSUP on a switch.
 */
int sb_device_edit_bundles(struct sb_device *dev, enum sb_datastore ds,
			   const struct sb_bundle *target, size_t n, struct sb_error *err);
/* The same edit on the candidate with a <validate> pipelined behind it (as
 * sb_device_edit_xcs_validate). */
int sb_device_edit_bundles_validate(struct sb_device *dev, const struct sb_bundle *target, size_t n,
				    struct sb_error *err);

/*
 * For the notification listener (sb_notif.c), on a device handle of its
 * own: create-subscription on the NETCONF stream (RFC 5277), the socket to
 * poll (SSH sessions; -1 over TLS, whose socket libnetconf2 keeps to
 * itself, or without a session), and the libnetconf2 session to receive
 * from (NULL without a session).
 */
int sb_device_subscribe(struct sb_device *dev, struct sb_error *err);
int sb_device_poll_fd(const struct sb_device *dev);
struct nc_session;
struct nc_session *sb_device_nc_session(struct sb_device *dev);

/*
 * The device's last verified image: what running held when the transaction
 * engine last proved it by a read in this session (a pre-image it read, a
 * confirmed target, a proven rollback). The engine takes its pre-image from
 * it instead of a <get-config>. It is bound to the session: a disconnect or
 * reconnect forgets it, and so does sb_device_forget_image(), which any
 * thread may call at any time (reconciliation that saw drift, a change made
 * by another manager); the next transaction then reads running again.
 *
 * sb_device_image_xcs() / _bundles() copy the image (*out malloc'ed, sorted;
 * caller frees) and return 0, or -ENOENT when none is known (or it is of the
 * other model), -ENOMEM. sb_device_set_image_xcs() / _bundles() record one
 * (sorted as given; only the device's own thread, like every other call).
 */
int sb_device_image_xcs(struct sb_device *dev, struct sb_xc **out, size_t *n);
int sb_device_image_bundles(struct sb_device *dev, struct sb_bundle **out, size_t *n);
void sb_device_set_image_xcs(struct sb_device *dev, const struct sb_xc *xcs, size_t n);
void sb_device_set_image_bundles(struct sb_device *dev, const struct sb_bundle *b, size_t n);
void sb_device_forget_image(struct sb_device *dev);

/*
 * Reads what the device says about itself and about ocsd's ports, with one
 * <get>, when its model says anything (sb_model.h; polatis:
 * product-information and every port's status and peer-port): *out filled
 * (clear it with sb_device_info_clear()), ports outside ocsd's port map
 * left out. -ENOTSUP when the model says nothing (out empty), or the
 * errors of a read.
 */
int sb_device_read_info(struct sb_device *dev, struct sb_device_info *out, struct sb_error *err);

/* Sends any RPC given as XML (e.g. ocs-devsim:set-faults); expects <ok/>. */
int sb_device_rpc_xml(struct sb_device *dev, const char *xml, struct sb_error *err);

#endif
