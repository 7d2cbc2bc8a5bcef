/*
 * config.h - the fabric file: loading, validation and the summary printed by
 * `ocsd --check-config`.
 *
 * A fabric file is JSON validated by libyang against ocsd's own YANG module
 * `ocsd-fabric` (daemon/yang/ocsd-fabric.yang, embedded in the binary), then
 * by the semantic rules YANG cannot express (fabric.h validators, device
 * address uniqueness). Loading is all or nothing: either a complete config
 * comes back, or every error that could be found, each with the data path it
 * concerns, and no config.
 *
 * Not thread-safe by itself: libyang's error store is per thread and per
 * context; each call creates its own context, so concurrent calls from
 * different threads are safe.
 */
#ifndef OCSD_CONFIG_H
#define OCSD_CONFIG_H

#include <stdint.h>
#include <stdio.h>

#include "fabric.h"
#include "sb_device.h"

/* Longest device address (host name or IP literal) the NETCONF driver takes. */
#define CFG_MAX_ADDRESS_LEN 63

/* Files larger than this are refused before anything is parsed. */
#define CFG_MAX_FILE_BYTES (16u * 1024 * 1024)

enum cfg_kind {
	CFG_LEAF_SPINE_OCS,
	CFG_OCSTRX_RING,
	CFG_RAIL_OCS,
};

enum cfg_transport {
	CFG_TRANSPORT_SSH,
	CFG_TRANSPORT_TLS,
};

/* One NETCONF device of the fabric, addresses, model and port map resolved. */
struct cfg_device {
	int id;
	char name[65];
	char address[256];
	uint16_t port;
	char host_key_sha256[64]; /* "" when not given */
	/* the YANG model it speaks (southbound/sb_model.h; the fabric file's
	 * `model`) and, for a model that numbers ports its own way (polatis),
	 * where ocsd's ports 0..n-1 sit on it (port-map, defaults applied and
	 * checked; all 0 for a model that numbers them as ocsd does) */
	enum sb_model model;
	struct sb_port_map ports;
};

/* How ocsd reaches the devices (the `devices` container of the YANG module). */
struct cfg_access {
	enum cfg_transport transport;
	char username[65];
	char *password_file; /* NULL when absent; owned by the config */
	char *private_key_file;
	char *certificate_file;
	char *ca_file;
	bool accept_any_host_key;
	uint32_t rpc_timeout_ms;
	uint32_t confirm_timeout_s;
	uint32_t rollback_timeout_ms; /* a transaction's rollback per device, retries included */
	uint32_t switch_time_us;      /* 0: read back at once */
};

struct ocsd_config {
	char name[65];
	enum cfg_kind kind;
	struct ocs_fabric fabric;    /* CFG_LEAF_SPINE_OCS; CFG_RAIL_OCS: its device layout
				      * (rail_layout_devices) */
	struct ocs_ring_domain ring; /* CFG_OCSTRX_RING */
	struct ocs_rail_fabric rail; /* CFG_RAIL_OCS */
	struct cfg_access access;
	struct cfg_device *devices; /* n_devices entries, in device-number order */
	int n_devices;
};

struct cfg_error {
	char *path;    /* data path, e.g. "/ocsd-fabric:fabric/k-leaf" */
	char *message; /* reason, e.g. "must be divisible by tau (2)" */
};

/* Errors collected by a load; cfg_errors_clear() frees them (accepts NULL). */
struct cfg_errors {
	struct cfg_error *items;
	int count;
	int cap;
};

/*
 * Loads and validates the fabric file at path. On success returns 0 and
 * *out (caller frees with cfg_free()). On failure returns -EINVAL (invalid
 * content), -EFBIG (file too large), -errno of the failed read, or -ENOMEM,
 * *out is NULL and errs holds every problem found (at least one).
 */
int cfg_load_file(const char *path, struct ocsd_config **out, struct cfg_errors *errs);
/* The same for a file already in memory. */
int cfg_load_mem(const char *text, size_t len, struct ocsd_config **out, struct cfg_errors *errs);
void cfg_free(struct ocsd_config *cfg);
void cfg_errors_clear(struct cfg_errors *errs);

const char *cfg_kind_name(enum cfg_kind kind);
/* The model's name in the fabric file: "ocs-switch", "ocs-transceiver", "polatis". */
/* The one-screen summary of `ocsd --check-config`. */
void cfg_print_summary(const struct ocsd_config *cfg, FILE *out);
/*
 * --check-config's warnings about a valid file that will not work as it
 * stands (one line each, "PATH: warning: message"): a TLS transport without
 * client certificate or key, a password, key or certificate file that does
 * not exist or cannot be read. Returns how many were printed.
 */
int cfg_print_warnings(const struct ocsd_config *cfg, FILE *out);

#endif
