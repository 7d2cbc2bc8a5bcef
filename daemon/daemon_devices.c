/*
 * daemon_devices.c - the daemon's device handles (daemon_internal.h): each
 * device's southbound settings from the fabric file, the handles opened
 * for devices.c, the transaction engine over the executor, and the warm
 * starts (a leader's before recovery, a follower's for a takeover).
 *
 * fclose() of a file opened for reading is left unchecked.
 */
#include "daemon_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "devices.h"
#include "executor_sb.h"
#include "log.h"
#include "sb_model.h"
#include "sb_txn.h"

/* Reads the first line of a secret file (password). 0 or -errno. */
int od_read_secret(const char *path, char *out, size_t size)
{
	/* Not blocking (a FIFO would wait for a writer, on the event loop when
	 * SIGHUP reads it): only a regular file is read. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	struct stat st;
	FILE *f;
	size_t n;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		(void)close(fd); /* read-only: nothing to flush */
		return -EINVAL;
	}
	f = fdopen(fd, "r");
	if (!f) {
		(void)close(fd); /* read-only: nothing to flush */
		return -ENOMEM;
	}
	if (!fgets(out, (int)size, f)) {
		fclose(f);
		return -EINVAL;
	}
	fclose(f);
	n = strcspn(out, "\r\n");
	out[n] = '\0';
	return n ? 0 : -EINVAL;
}

/* Copies src when it fits (with its NUL); false otherwise. */
static bool copy_fits(char *dst, size_t size, const char *src)
{
	size_t n = strlen(src);

	if (n >= size)
		return false;
	memcpy(dst, src, n + 1);
	return true;
}

/* The southbound settings of device i of cfg; password: the password-file's secret. */
int od_device_settings(const struct ocsd_config *cfg, int i, const char *password,
		       struct sb_device_config *dc)
{
	const struct cfg_access *a = &cfg->access;
	const struct cfg_device *d = &cfg->devices[i];

	memset(dc, 0, sizeof(*dc));
	/* config.c bounds names, addresses and user names to these sizes. */
	if (!copy_fits(dc->name, sizeof(dc->name), d->name) ||
	    !copy_fits(dc->host, sizeof(dc->host), d->address) ||
	    !copy_fits(dc->username, sizeof(dc->username), a->username) ||
	    !copy_fits(dc->password, sizeof(dc->password), password)) {
		log_msg(LOG_ERR, "device %s: a name, address, user or password is too long",
			d->name);
		return -ENAMETOOLONG;
	}
	dc->port = d->port;
	dc->transport = a->transport == CFG_TRANSPORT_TLS ? SB_TRANSPORT_TLS : SB_TRANSPORT_SSH;
	if (a->private_key_file && dc->transport == SB_TRANSPORT_SSH) {
		snprintf(dc->privkey_path, sizeof(dc->privkey_path), "%s", a->private_key_file);
		snprintf(dc->pubkey_path, sizeof(dc->pubkey_path), "%s.pub", a->private_key_file);
	}
	dc->hostkey_policy = a->accept_any_host_key ? SB_HOSTKEY_ACCEPT_ANY : SB_HOSTKEY_PINNED;
	snprintf(dc->hostkey_sha256, sizeof(dc->hostkey_sha256), "%s", d->host_key_sha256);
	if (dc->transport == SB_TRANSPORT_TLS) {
		snprintf(dc->tls_cert, sizeof(dc->tls_cert), "%s",
			 a->certificate_file ? a->certificate_file : "");
		snprintf(dc->tls_key, sizeof(dc->tls_key), "%s",
			 a->private_key_file ? a->private_key_file : "");
		snprintf(dc->tls_ca, sizeof(dc->tls_ca), "%s", a->ca_file ? a->ca_file : "");
	}
	dc->rpc_timeout_ms = (int)a->rpc_timeout_ms;
	dc->switch_us = (int)a->switch_time_us;
	/* config.c resolved every device's model and checked its port map */
	dc->model = d->model;
	dc->ports = d->ports; /* all 0 for a model that numbers ports as ocsd does */
	if (sb_model(d->model)->bundles)
		dc->node = (uint32_t)d->id; /* a ring domain: device i is node i's agent */
	return 0;
}

/* The password-file's secret into od->password, unless read already. 0 or -errno. */
static int load_password(struct od *od)
{
	const char *path = od->cfg->access.password_file;

	return path && !od->password[0] ? od_read_secret(path, od->password, sizeof(od->password))
					: 0;
}

/* Connects the n sessions h in parallel (32 at a time) for at most --warm-start-ms. */
static size_t connect_all(const struct od *od, struct sb_device **h, int n, int64_t t0)
{
	return sb_device_connect_many(h, (size_t)n, n < 32 ? n : 32,
				      t0 + (int64_t)od->opts->warm_start_ms, NULL);
}

/* One southbound handle per configured device for role (no I/O yet). */
static int open_devices(struct od *od, enum dev_role role)
{
	int rc;

	od_warm_join(od); /* the leader phase takes the follower's sessions over */
	rc = load_password(od);
	if (rc) {
		log_msg(LOG_ERR,
			"devices: cannot read password-file %s: %s (it must be a regular file "
			"whose first line is the password)",
			od->cfg->access.password_file, strerror(-rc));
		return rc;
	}
	for (int i = 0; i < od->cfg->n_devices; i++) {
		struct sb_device_config dc;
		struct sb_device *h = NULL;

		rc = od_device_settings(od->cfg, i, od->password, &dc);
		if (!rc && role == DEV_ROLE_TXN && od->warm && od->warm[i]) {
			h = od->warm[i]; /* connected while following: the devices take it over */
			od->warm[i] = NULL;
		} else if (!rc) {
			rc = sb_device_new(od->driver, &dc, &h);
		}
		memset(dc.password, 0, sizeof(dc.password));
		if (!rc)
			dev_set_handle(od->devs, i, role, h);
		if (rc) {
			log_msg(LOG_ERR, "device %s: %s", od->cfg->devices[i].name, strerror(-rc));
			return rc;
		}
	}
	return 0;
}

/*
 * Sizing the one executor: room for the planner tasks (--solver-threads,
 * default one per core) plus the device I/O tasks (one per device, at most
 * 64; reconciliation reads share them), so that neither kind waits for
 * threads the other blocks.
 */
unsigned od_solver_tasks(const struct od_options *opts)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	if (opts->solver_threads)
		return opts->solver_threads;
	return n > 0 ? (unsigned)n : 1;
}

unsigned od_io_tasks(const struct od *od)
{
	return od->cfg->n_devices < 64 ? (unsigned)od->cfg->n_devices : 64;
}

/* The NETCONF driver, two sets of device handles and the transaction engine. */
int od_start_southbound(struct od *od)
{
	/* one driver for the process (libnetconf2's client state), kept across phases */
	int rc = od->driver ? 0 : sb_driver_new(NULL, &od->driver);

	if (rc) {
		log_msg(LOG_ERR, "devices: cannot set up the NETCONF driver: %s", strerror(-rc));
		return rc;
	}
	if ((rc = open_devices(od, DEV_ROLE_TXN)) != 0 ||
	    (rc = open_devices(od, DEV_ROLE_RECON)) != 0)
		return rc;
	od->exec_sb = exec_sb_new(od->exec, od_io_tasks(od));
	if (!od->exec_sb)
		return -ENOMEM;
	struct sb_executor x = exec_sb_executor(od->exec_sb);

	rc = sb_engine_new_on(&x, &od->engine);
	if (rc)
		log_msg(LOG_ERR, "cannot start the transaction engine: %s", strerror(-rc));
	return rc;
}

/*
 * Warm start (issue 13): connects every device's transaction session in
 * parallel, for at most --warm-start-ms, before recovery and READY, so that
 * neither recovery nor the first transaction pays for the handshakes. A
 * device still down afterwards is connected at first use, as before.
 */
void od_warm_start(struct od *od)
{
	int n = od->cfg->n_devices;
	struct sb_device **h = calloc((size_t)n + 1, sizeof(*h));
	int64_t t0 = sb_now_ms();
	size_t up;

	if (!h || !od->opts->warm_start_ms || n == 0) {
		free(h);
		return;
	}
	for (int i = 0; i < n; i++)
		h[i] = dev_handle(od->devs, i, DEV_ROLE_TXN);
	up = connect_all(od, h, n, t0);
	log_msg(LOG_INFO, "warm start: %zu of %d devices connected in %lld ms", up, n,
		(long long)(sb_now_ms() - t0));
	free(h);
}

/* The per-device records (devices.c); their handles come with od_start_southbound(). */
int od_new_devices(struct od *od)
{
	const char **names = calloc((size_t)od->cfg->n_devices + 1, sizeof(*names));
	struct dev_deps dd;

	if (!names)
		return -ENOMEM;
	for (int i = 0; i < od->cfg->n_devices; i++)
		names[i] = od->cfg->devices[i].name;
	dd = (struct dev_deps){&od->cfg->fabric,   od->fs,
			       od->store,	   names,
			       od->cfg->n_devices, (int)od->cfg->access.rpc_timeout_ms,
			       clk_wall_ms(NULL)};
	od->devs = dev_new(&dd);
	free(names);
	return od->devs ? 0 : -ENOMEM;
}

/*
 * The follower's warm-up thread: connects od->warm in rounds of
 * WARM_ROUND devices, until every device had its attempt or the loop
 * asks it to stop (a takeover must not wait for hundreds of handshakes:
 * it waits for one round at most, and connects the rest at first use).
 */
#define WARM_ROUND 32

static void *warm_main(void *arg)
{
	struct od *od = arg;
	int n = od->cfg->n_devices; /* fixed while the phase runs: a reload keeps the fabric */
	int64_t t0 = sb_now_ms();
	size_t up = 0;
	int i = 0;

	for (; i < n && !atomic_load(&od->warm_stop); i += WARM_ROUND) {
		int k = n - i < WARM_ROUND ? n - i : WARM_ROUND;

		up += sb_device_connect_many(od->warm + i, (size_t)k, k,
					     t0 + (int64_t)od->opts->warm_start_ms, NULL);
	}
	log_msg(LOG_INFO, "follower: %zu of %d devices' sessions ready for a takeover in %lld ms%s",
		up, n, (long long)(sb_now_ms() - t0),
		i < n ? " (stopped early: the rest connect at first use)" : "");
	return NULL;
}

void od_warm_join(struct od *od)
{
	if (!od->warm_running)
		return;
	atomic_store(&od->warm_stop, true);
	pthread_join(od->warm_thread, NULL);
	od->warm_running = false;
	atomic_store(&od->warm_stop, false);
}

/*
 * A follower connects the transaction sessions a takeover starts with,
 * after its server serves reads (a new replica's catch-up does not wait
 * for them) and beside its loop: the leader phase takes them over
 * (open_devices), so the failover does not wait for the SSH handshakes.
 * Nothing is sent on them but NETCONF's hello. A failure only leaves the
 * leader phase to connect them itself.
 */
void od_warm_for_takeover(struct od *od)
{
	int n = od->cfg->n_devices;

	if (!od->opts->warm_start_ms || n == 0 || !od->opts->replica.replica_id || od->warm_running)
		return;
	if (load_password(od) != 0)
		return; /* the leader phase says why */
	if (!od->warm && !(od->warm = calloc((size_t)n, sizeof(*od->warm))))
		return;
	if (!od->driver && sb_driver_new(NULL, &od->driver) != 0)
		return;
	for (int i = 0; i < n; i++) {
		struct sb_device_config dc;

		if (!od->warm[i] && od_device_settings(od->cfg, i, od->password, &dc) == 0)
			(void)sb_device_new(od->driver, &dc, &od->warm[i]); /* NULL: made later */
		memset(dc.password, 0, sizeof(dc.password));
		if (!od->warm[i])
			return;
	}
	atomic_store(&od->warm_stop, false);
	if (pthread_create(&od->warm_thread, NULL, warm_main, od) != 0) {
		log_msg(LOG_WARNING, "follower: cannot start the devices' warm-up: a takeover "
				     "connects them");
		return;
	}
	od->warm_running = true;
}
