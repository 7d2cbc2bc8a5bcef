/*
 * daemon.h - the running ocsd: owns the event loop and everything on it
 * (config, state store, solver pool, metrics endpoint), talks to systemd
 * (READY, STATUS, WATCHDOG, RELOADING, STOPPING) and handles signals:
 *   SIGTERM, SIGINT  drain in-flight work, close the store, exit 0
 *   SIGHUP           re-read and validate the fabric file: how devices are
 *                    reached (addresses, ports, host keys, credentials,
 *                    rpc-timeout) applies live ("applied"); a change of the
 *                    fabric itself is "restart_needed" and nothing of it is
 *                    applied; "invalid" and "unchanged" change nothing.
 *
 * Lifecycle (all on the loop thread):
 *
 *   od_run:  load config -> open store -> pool, devices, transaction engine
 *            -> recovery (resolve open transactions) -> on an empty store,
 *            the devices read (refuse, adopt or clear: adopt.h) -> job manager
 *            (resume jobs)
 *            -> gRPC server, metrics -> READY=1 -> reconciliation pass
 *            -> loop (a reconciliation pass every reconcile_interval_s,
 *               a retention pass every minute) ...
 *   SIGTERM: STOPPING=1 -> refuse new requests -> wait for the running
 *            transaction -> pool drained -> waiting callers answered -> exit
 *
 * od_run is in daemon_phases.c; the files it calls, daemon.c first, are
 * drawn in daemon_internal.h.
 */
#ifndef OCSD_DAEMON_H
#define OCSD_DAEMON_H

#include <stdbool.h>
#include <stddef.h>

#include "replica.h"

struct od_options {
	const char *config_path;
	const char *state_dir;	    /* holds ocsd.lock, and ocsd.db on --store sqlite */
	const char *metrics_listen; /* HOST:PORT */
	unsigned solver_threads;    /* 0 = one per core */
	const char *listen;	    /* gRPC HOST:PORT */
	bool insecure;		    /* plaintext gRPC, loopback only */
	const char *tls_ca;	    /* CA of client certificates */
	const char *tls_cert;
	const char *tls_key;
	unsigned reconcile_interval_s; /* 0 = no periodic reconciliation */
	/* Finished jobs and intents are deleted past either limit (0 = no such limit). */
	unsigned retention_days;
	size_t retention_jobs;
	/* Before READY, every device's transaction session is connected in
	 * parallel for at most this long (0 = connect lazily, at first use). */
	unsigned warm_start_ms;
	/* Every this many ms the transaction sessions are checked in the
	 * background and dead ones replaced (keepalive.h; 0 = never). */
	unsigned keepalive_interval_ms;
	/* Starting on an empty store while the devices hold cross-connects
	 * (adopt.h): adopt them, or clear them; neither: refuse to start. */
	bool adopt_existing;
	bool clear_existing;
	/* at most this many jobs in one wave's device transaction (0: the
	 * job manager's default, JM_MAX_WAVE_JOBS) */
	size_t max_wave_jobs;
	struct rp_opts replica; /* the store backend (--store, --etcd-*) */
};

/* Runs the daemon until SIGTERM/SIGINT. Returns the process exit code. */
int od_run(const struct od_options *opts);

#endif
