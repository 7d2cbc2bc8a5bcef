/*
 * daemon.h - the running ocsd: owns the event loop and everything on it
 * (config, state store, solver pool, metrics endpoint), talks to systemd
 * (READY, STATUS, WATCHDOG, RELOADING, STOPPING) and handles signals:
 *   SIGTERM, SIGINT  drain in-flight work, close the store, exit 0
 *   SIGHUP           re-read the fabric file; a file that is invalid, or
 *                    that changes the fabric's shape (devices and ports that
 *                    live circuits depend on), is refused and the running
 *                    config kept; device access settings are applied.
 *
 * Lifecycle (all on the loop thread):
 *
 *   od_run:  load config -> open store -> start pool, metrics -> READY=1
 *              -> loop ... SIGTERM -> STOPPING=1 -> pool drained -> exit
 */
#ifndef OCSD_DAEMON_H
#define OCSD_DAEMON_H

struct od_options {
	const char *config_path;
	const char *state_dir;      /* holds ocsd.db */
	const char *metrics_listen; /* HOST:PORT */
	unsigned solver_threads;    /* 0 = one per core */
};

/* Runs the daemon until SIGTERM/SIGINT. Returns the process exit code. */
int od_run(const struct od_options *opts);

#endif
