/*
 * daemon_reload.c - SIGHUP (daemon.h): the fabric file read again and
 * compared with the running one; how devices are reached applies live,
 * a change of the fabric itself waits for the next start.
 *
 * sd_notify()'s and mx_add()'s results are left unchecked (daemon.c says why).
 */
#include "daemon_internal.h"

#include <stdbool.h>
#include <string.h>

#include <systemd/sd-daemon.h>

#include "devices.h"
#include "log.h"
#include "metrics.h"
#include "sb_device.h"

void od_log_config_errors(const char *path, const struct cfg_errors *errs)
{
	log_msg(LOG_ERR, "%s: invalid fabric file (%d error%s)", path, errs->count,
		errs->count == 1 ? "" : "s");
	for (int i = 0; i < errs->count; i++)
		log_msg(LOG_ERR, "%s: %s", errs->items[i].path, errs->items[i].message);
}

static bool same_str(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* What a re-read fabric file changes. */
enum cfg_change {
	CHANGE_NONE,
	CHANGE_ACCESS,	/* only how devices are reached: applied live */
	CHANGE_RESTART, /* the fabric itself: takes effect at the next start */
};

static enum cfg_change config_change(const struct ocsd_config *a, const struct ocsd_config *b)
{
	const struct cfg_access *x = &a->access, *y = &b->access;
	bool access = false;

	/* planners, stored circuits and the transaction engine depend on these */
	if (a->kind != b->kind || a->n_devices != b->n_devices || strcmp(a->name, b->name) != 0 ||
	    memcmp(&a->fabric, &b->fabric, sizeof(a->fabric)) != 0 ||
	    memcmp(&a->ring, &b->ring, sizeof(a->ring)) != 0 ||
	    memcmp(&a->rail, &b->rail, sizeof(a->rail)) != 0 ||
	    x->confirm_timeout_s != y->confirm_timeout_s ||
	    x->rollback_timeout_ms != y->rollback_timeout_ms)
		return CHANGE_RESTART;
	for (int i = 0; i < a->n_devices; i++) {
		const struct cfg_device *p = &a->devices[i], *q = &b->devices[i];

		/* a model or port map changes what the stored circuits mean on the device */
		if (p->id != q->id || strcmp(p->name, q->name) != 0 || p->model != q->model ||
		    memcmp(&p->ports, &q->ports, sizeof(p->ports)) != 0)
			return CHANGE_RESTART;
		access |= strcmp(p->address, q->address) != 0 || p->port != q->port ||
			  strcmp(p->host_key_sha256, q->host_key_sha256) != 0;
	}
	access |= x->transport != y->transport || strcmp(x->username, y->username) != 0 ||
		  !same_str(x->password_file, y->password_file) ||
		  !same_str(x->private_key_file, y->private_key_file) ||
		  !same_str(x->certificate_file, y->certificate_file) ||
		  !same_str(x->ca_file, y->ca_file) ||
		  x->accept_any_host_key != y->accept_any_host_key ||
		  x->rpc_timeout_ms != y->rpc_timeout_ms || x->switch_time_us != y->switch_time_us;
	return access ? CHANGE_ACCESS : CHANGE_NONE;
}

/*
 * Applies new device access settings (addresses, ports, host keys,
 * credentials, rpc-timeout, switch time) of next, whose fabric equals the running one:
 * every device handle stages them (sb_device_set_config: a transaction in
 * progress keeps its sessions; each device reconnects with the new settings
 * when it is next used), then the running configuration takes them over.
 */
static int apply_access(struct od *od, struct ocsd_config *next, const char *password)
{
	struct cfg_access old = od->cfg->access;
	int rc = 0;

	for (int i = 0; (od->devs || od->warm) && i < next->n_devices && !rc; i++) {
		struct sb_device_config dc;

		rc = od_device_settings(next, i, password, &dc);
		if (!rc && od->warm && od->warm[i])
			rc = sb_device_set_config(od->warm[i], &dc);
		if (!rc && od->devs)
			rc = sb_device_set_config(dev_handle(od->devs, i, DEV_ROLE_TXN), &dc);
		if (!rc && od->devs)
			rc = sb_device_set_config(dev_handle(od->devs, i, DEV_ROLE_RECON), &dc);
		memset(dc.password, 0, sizeof(dc.password));
	}
	if (rc)
		return rc;
	/* the running configuration owns the new file names; next frees the old */
	od->cfg->access = next->access;
	next->access = old;
	memcpy(od->cfg->devices, next->devices, (size_t)next->n_devices * sizeof(*next->devices));
	memcpy(od->password, password, sizeof(od->password));
	return 0;
}

/*
 * SIGHUP: re-reads and validates the fabric file. How devices are reached
 * (addresses, ports, host keys, credentials, including a changed password
 * file content, rpc-timeout) is applied at once; anything else (the fabric's
 * shape, device names, confirm-timeout) takes effect at the next start,
 * since the planners, the stored circuits and the transactions depend on it.
 */
void od_on_reload(evutil_socket_t sig, short what, void *arg)
{
	struct od *od = arg;
	struct cfg_errors errs = {0};
	struct ocsd_config *next = NULL;
	const char *result = "unchanged";
	char password[sizeof(od->password)] = "";
	enum cfg_change change = CHANGE_NONE;
	int rc = 0;

	sd_notify(0, "RELOADING=1\nSTATUS=re-reading the fabric file");
	if (cfg_load_file(od->opts->config_path, &next, &errs) != 0) {
		od_log_config_errors(od->opts->config_path, &errs);
		log_msg(LOG_WARNING, "%s is invalid: the running configuration stays",
			od->opts->config_path);
		result = "invalid";
	} else if ((change = config_change(od->cfg, next)) == CHANGE_RESTART) {
		log_msg(LOG_WARNING,
			"%s changes the fabric, a device name, model or port map, or "
			"confirm-timeout-s: the change takes effect when ocsd restarts (nothing "
			"was applied)",
			od->opts->config_path);
		result = "restart_needed";
	} else if (next->access.password_file &&
		   (rc = od_read_secret(next->access.password_file, password, sizeof(password))) !=
			   0) {
		log_msg(LOG_WARNING,
			"devices: cannot read password-file %s (%s; it must be a regular "
			"file whose first line is the password): the running configuration "
			"stays",
			next->access.password_file, strerror(-rc));
		result = "invalid";
	} else if (change == CHANGE_NONE && (!od->devs || strcmp(password, od->password) == 0)) {
		log_msg(LOG_NOTICE, "%s is unchanged", od->opts->config_path);
	} else if ((rc = apply_access(od, next, password)) != 0) {
		log_msg(LOG_WARNING,
			"devices: cannot apply the new access settings (%s): the "
			"running configuration stays",
			strerror(-rc));
		result = "invalid";
	} else {
		log_msg(LOG_NOTICE,
			"%s: new device access settings applied; each device "
			"reconnects with them when it is next used",
			od->opts->config_path);
		result = "applied";
	}
	memset(password, 0, sizeof(password));
	mx_add(od->m_reloads, &result, 1);
	cfg_free(next);
	cfg_errors_clear(&errs);
	sd_notify(0, "READY=1\nSTATUS=running");
}
