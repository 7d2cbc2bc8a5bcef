/*
 * sb_testlib.h - shared helpers of the southbound integration tests: start
 * and stop ocs-devsim fleets on loopback, open driver sessions to them,
 * build realistic cross-connect plans from the fabric model
 * (solvers/fabric.h) and check them with the L2 checker (solvers/l2check.h).
 *
 * Single-threaded helpers for test programs; not part of any library.
 */
#ifndef OCS_SB_TESTLIB_H
#define OCS_SB_TESTLIB_H

#include "fabric.h"
#include "sb_device.h"
#include "sb_txn.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define TL_USER	    "ocs"
#define TL_PASSWORD "optical-test"

struct tl_fleet {
	pid_t pid;
	int count;
	int base_port;
	char hostkey[128]; /* "SHA256:..." printed by ocs-devsim */
};

/*
 * Test ports, through tests/integration/testports.py (see there): reserves
 * `count` consecutive loopback ports outside the kernel's ephemeral range,
 * held by this process until it exits; returns the first or -1 (the script
 * printed why). Use it for every port a test chooses, including ports
 * nobody must listen on.
 */
int tl_ports_reserve(int count);
/*
 * Returns 0 once 127.0.0.1:port .. port+count-1 accept TCP connections, -1
 * (the script printed the server's name and the port) when timeout_s passes
 * first or process pid (0: none) is gone.
 */
int tl_wait_listening(int port, int count, const char *name, pid_t pid, int timeout_s);

/*
 * Starts `count` devices in one ocs-devsim process on reserved loopback
 * ports (tl_ports_reserve) and returns once every one of them listens.
 * extra: more arguments (NULL-terminated list, may be NULL). Returns 0 or
 * -1 (after printing why).
 */
int tl_fleet_start(struct tl_fleet *f, int count, const char *const *extra);
/* SIGTERM, wait; returns the exit status (0 = clean). */
int tl_fleet_stop(struct tl_fleet *f);
/*
 * Starts a stopped fleet again on the same ports (still reserved by this
 * process) with the given arguments; the host key is a new one (f->hostkey
 * is updated). 0 or -1.
 */
int tl_fleet_restart(struct tl_fleet *f, const char *const *extra);

/*
 * A certificate `name` (dir/name.pem, dir/name.key) for common name cn,
 * ECDSA P-256 for one day, made with the openssl CLI: self-signed when ca is
 * NULL, else signed by dir/ca.pem (with subjectAltName IP:127.0.0.1).
 * Returns 0 or -1.
 */
int tl_make_cert(const char *dir, const char *name, const char *cn, const char *ca);

/* A config for device i of the fleet (password auth, pinned host key). */
struct sb_device_config tl_device_config(const struct tl_fleet *f, int i);

/* Creates (not connects) devices [first, first+n) of the fleet. */
struct sb_device **tl_devices(struct sb_driver *drv, const struct tl_fleet *f, int first, int n,
			      int rpc_timeout_ms);
/*
 * The same for devices of model m (ocs-devsim --model ...) using `ports`
 * ports each, in the model's default port map (sb_model_default_ports).
 */
struct sb_device **tl_devices_model(struct sb_driver *drv, const struct tl_fleet *f, int first,
				    int n, int rpc_timeout_ms, enum sb_model m, uint32_t ports);
void tl_devices_free(struct sb_device **devs, int n);

/*
 * Cross-connects for one OCS device of a fabric, from a "round" r: in
 * straight and dual wiring a symmetric matching of the pods (both
 * directions on the device), in cross wiring the device pair (2m, 2m+1)
 * holds a permutation and its inverse. Writes into out (cap entries) and
 * returns the count. Different r give different configurations.
 */
size_t tl_fabric_device_xcs(const struct ocs_fabric *f, int group, int device, int round,
			    struct sb_xc *out, size_t cap);

/*
 * The independent L2 checker of solvers/ (l2_check) over a set of devices
 * of the fabric: device i is (group[i], device[i]) and holds xcs[i] (n[i]
 * entries). Returns the number of violations and describes the first.
 */
int tl_l2_violations(const struct ocs_fabric *f, const int *group, const int *device,
		     const struct sb_xc *const *xcs, const size_t *n, size_t n_devices, char *why,
		     size_t why_len);

/* Verify callback for sb_txn_hooks over plan devices mapped to (group, device). */
struct tl_verify_ctx {
	const struct ocs_fabric *fabric;
	const int *group; /* per plan device */
	const int *device;
	int plan_calls;
	int readback_calls;
};
int tl_verify(void *arg, enum sb_verify_phase phase, const struct sb_device_xcs *devs, size_t n,
	      char *why, size_t why_len);

/* Reads running of every device (connecting as needed); 0 or -errno. */
int tl_read_running(struct sb_device *dev, struct sb_xc **out, size_t *n);
bool tl_same(const struct sb_xc *a, size_t na, const struct sb_xc *b, size_t nb);
/*
 * Replaces device d's ocs-devsim fault knobs with spec (ocs-devsim:set-faults;
 * "" clears them), reconnecting first when needed; up to 5 tries, for a
 * session a previous fault left dead. 0, or the last error (in *err).
 */
int tl_set_faults(struct sb_device *d, const char *spec, struct sb_error *err);

#endif
