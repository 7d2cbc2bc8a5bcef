/*
 * daemon_internal.h - what daemon.c and its parts share: the running
 * daemon's state (struct od) and the calls between its files. The files
 * call one way only (tests/unit/check_layers.py):
 *
 *   daemon_phases.c   od_run: the process's start-up, the phases one after
 *        |            the other (follower, leader), the replica's role watched
 *        v
 *   daemon.c          the leader phase's start-up and every phase's
 *        |            teardown, in order; signals, watchdog, the state lock
 *        v
 *   daemon_reload.c   SIGHUP: the fabric file read again
 *        |
 *        v
 *   daemon_devices.c  the devices' southbound settings and handles, warm
 *                     starts; daemon_metrics.c the metrics and
 *                     daemon_status.c the status page (no call out)
 */
#ifndef OCSD_DAEMON_INTERNAL_H
#define OCSD_DAEMON_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include <event2/event.h>

#include "api.h"
#include "config.h"
#include "daemon.h"

struct cab_table;
struct sb_device_config;

#define OD_EXIT_OK	0
#define OD_EXIT_FAILURE 1
#define OD_EXIT_CONFIG	2
/* Planner jobs that may wait for a worker before requests are refused. */
#define OD_SOLVER_QUEUE_MAX 1024

/*
 * What runs between two role changes (replica.c draws the roles): a
 * follower serves reads from the store copy and refuses writes, a leader
 * is the whole daemon. Without --replica-id ocsd is always a leader.
 */
enum od_phase { OD_PHASE_NONE, OD_PHASE_FOLLOWER, OD_PHASE_LEADER };

struct od {
	const struct od_options *opts;
	struct ocsd_config *cfg;
	struct replica *rp; /* the store backend; owns store */
	struct st_store *store;
	struct loop *loop;
	struct exec *exec; /* the one executor: planners, device I/O, reconciliation */
	struct exec_sb *exec_sb;
	struct pool *pool;
	struct mx_registry *reg;
	struct mh_server *http;
	struct event *sig_term, *sig_int, *sig_hup, *watchdog, *drain;
	struct event *replica_tick; /* rp_beat, and on_replica_change now and then */
	unsigned ticks;
	struct sb_driver *driver;
	struct devices *devs; /* every device's handles, session, health and drain */
	struct sb_engine *engine;
	struct txn_driver *txn;
	struct fs_state *fs;
	struct dr_table *drift;	     /* cross-connects no job owns (leaf-spine fabrics) */
	struct dr_nodes *node_drift; /* ring domains: bundles that differ from the rings */
	struct cab_table *cabling;   /* miswired fibre the devices report (cabling.h) */
	struct api *api;
	struct jm *jm;
	struct nb_server *server;
	struct recon *recon;
	struct event *recon_timer;
	struct rep *repair; /* circuits of live jobs missing on the devices (leaf-spine) */
	struct ka *ka;	    /* the transaction sessions' keepalive */
	struct event *prune_timer;
	struct mx_family *m_jobs, *m_xcs, *m_ports, *m_reloads, *m_devices, *m_contention;
	struct mx_family *m_pruned, *m_oldest;
	struct mx_family *m_rings, *m_faulty, *m_subscribed;
	struct rg_state *rings;	     /* ring domains: the rings and faulty nodes */
	struct faults *faults;	     /* ring domains: the node-fault listener */
	struct event *repair_timer;  /* ring domains: repairs that did not go through, again;
				      * rail-OCS fabrics: swaps of faulty GPUs, again */
	struct rl_state *rl;	     /* rail-OCS fabrics: port map and GPU conditions */
	struct rsw *rsw;	     /* rail-OCS fabrics: the GPU swaps */
	struct ra *ra;		     /* rail-OCS fabrics: their API */
	struct txn_driver *rail_txn; /* rail-OCS fabrics: the swaps' transactions */
	char password[128];	     /* the password-file's secret the devices use ("" none) */
	int state_lock;		     /* DIR/ocsd.lock, flock()ed for ocsd's lifetime (-1 none) */
	/* replicas (docs/replicas.md): the phase running now, and why it ends */
	enum od_phase phase;
	struct fw *fw; /* the follower phase's view of the store copy */
	/* its circuits, kept for the leader phase that follows (fw_take_fs);
	 * the next start takes them, else the next teardown frees them */
	struct fs_state *fs_handover;
	bool stopping;	  /* SIGTERM/SIGINT: no further phase */
	bool restart;	  /* the leader phase starts again (its store failed, etcd is back) */
	char listen[300]; /* --listen with port 0: the port the first phase got */
	/*
	 * A follower's transaction sessions a takeover starts with. While
	 * warm_running, the warm-up thread (daemon_devices.c) connects them
	 * and nothing else touches the handles but sb_device_set_config (a
	 * reload, which stages under the handle's own lock); od_warm_join()
	 * stops and joins it first, on the loop thread.
	 */
	struct sb_device **warm;
	pthread_t warm_thread;
	bool warm_running;
	atomic_bool warm_stop; /* the loop asks the warm-up to stop early */
};

/* ---- daemon_metrics.c ---- */

/* The metric families od samples, and the build and start-time gauges. 0 or -ENOMEM. */
int od_register_metrics(struct od *od);
/* mh_start's sampler: the families from the in-memory state, before each scrape. */
void od_sample_metrics(void *arg);

/* ---- daemon_status.c ---- */

/* The status page's paths on od->http (daemon/status/). 0 or -ENOMEM. */
int od_start_status(struct od *od);

/* ---- daemon_devices.c ---- */

/* Reads the first line of a secret file (password). 0 or -errno. */
int od_read_secret(const char *path, char *out, size_t size);
/* The southbound settings of device i of cfg; password: the password-file's secret. */
int od_device_settings(const struct ocsd_config *cfg, int i, const char *password,
		       struct sb_device_config *dc);
/* The executor's planner tasks and device I/O tasks (sized together). */
unsigned od_solver_tasks(const struct od_options *opts);
unsigned od_io_tasks(const struct od *od);
/* The per-device records (devices.c); their handles come with od_start_southbound(). */
int od_new_devices(struct od *od);
/* The NETCONF driver, two sets of device handles and the transaction engine. */
int od_start_southbound(struct od *od);
/* Before recovery and READY: every transaction session connected in parallel. */
void od_warm_start(struct od *od);
/* A follower, once it serves reads: the transaction sessions a takeover
 * starts with, connected by a thread of their own. */
void od_warm_for_takeover(struct od *od);
/* Stops the warm-up (the sessions in flight finish) and joins it; no-op when none runs. */
void od_warm_join(struct od *od);

/* ---- daemon_reload.c ---- */

void od_log_config_errors(const char *path, const struct cfg_errors *errs);
/* SIGHUP's handler. */
void od_on_reload(evutil_socket_t sig, short what, void *arg);

/* ---- daemon.c ---- */

/* A new event of od's loop (its callback gets od), added with tv (NULL: no
 * timeout). 0, or -ENOMEM with *ev NULL or not added (od's teardown frees it). */
int od_add_event(struct od *od, struct event **ev, evutil_socket_t fd, short what,
		 event_callback_fn cb, const struct timeval *tv);
/* A new event of od's loop (its callback gets od), added with tv (NULL: no
 * timeout). 0, or -ENOMEM with *ev NULL or not added (od's teardown frees it). */
int od_add_event(struct od *od, struct event **ev, evutil_socket_t fd, short what,
		 event_callback_fn cb, const struct timeval *tv);
/* DIR/ocsd.lock, flock()ed for ocsd's lifetime. 0 or -errno (logged). */
int od_lock_state_dir(struct od *od, const char *dir);
/* SIGTERM, SIGINT, SIGHUP and the systemd watchdog. 0 or -ENOMEM. */
int od_start_signals(struct od *od);
/* What the API of either phase is made of (the leader's adds the fabric's parts). */
struct api_deps od_api_deps(const struct od *od);
/* The gRPC server over od->api (both phases). 0 or -errno (logged). */
int od_start_server(struct od *od);
/* The leader phase's job manager, API, gRPC server, watchers. 0 or -errno (logged). */
int od_start_jobs(struct od *od);
/* The retention passes (the first as soon as the loop runs). 0 or -ENOMEM. */
int od_start_retention(struct od *od);
/* Ends the running phase; every pointer of it NULL afterwards. */
void od_phase_teardown(struct od *od);
/* Ends the process's part: the phase, the driver, signals, loop, store, lock. */
void od_teardown(struct od *od);

#endif
