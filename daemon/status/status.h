/*
 * status.h - the status page's renderers: a plain snapshot of what the
 * daemon holds (fabric, role, jobs and their circuits, devices, rings,
 * a ring domain's bundle drift, GPUs swapped, recent events) in, text
 * out. sp_state_json() gives /state.json, sp_topology_svg()
 * /topology.svg; both are pure (no I/O, no globals, no daemon state), so
 * tests feed them hand-made and random snapshots. The daemon fills a
 * snapshot from its state on the loop (daemon_status.c) and serves the
 * texts on the metrics listener.
 *
 * Size: the SVG draws one path per circuit up to SP_MAX_CIRCUIT_PATHS
 * circuits in all; above that it draws one edge per pod pair with the
 * count of circuits and jobs in its title. Devices, ring nodes and rail
 * servers are drawn one mark each up to SP_MAX_MARKS; above, one mark
 * stands for a block of consecutive ones (its worst state wins).
 *
 * Ownership: the snapshot's arrays belong to whoever fills it
 * (daemon_status.c frees what it allocated); the returned
 * texts are the caller's to free(). Threading: none of its own.
 */
#ifndef OCSD_STATUS_H
#define OCSD_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SP_MAX_CIRCUIT_PATHS 2000
#define SP_MAX_MARKS	     512
#define SP_MAX_EVENTS	     64
#define SP_MAX_JSON_CIRCUITS 16384

enum sp_kind { SP_LEAF_SPINE, SP_RING, SP_RAIL };

/* One cross-connect a job holds: device name, ports, and the pods its two
 * ports are cabled to (-1 where none or not a leaf-spine fabric). */
struct sp_circuit {
	int device; /* index into sp_snapshot.devices */
	int in, out;
	int pod_in, pod_out;
};

struct sp_job {
	const char *id;
	const char *state;  /* jm_state_name() */
	const char *reason; /* "" none */
	size_t n_gpus;
	struct sp_circuit *circuits;
	size_t n_circuits;
};

struct sp_device {
	const char *name;
	int group;	     /* OCS group (-1 none) */
	const char *session; /* "connecting", "connected", "disconnected", "unknown" */
	const char *health;  /* "unknown", "healthy", "unreachable" */
	const char *error;   /* the session's last error ("" none) */
	bool drained;
	size_t drift; /* cross-connects no job owns, and missing ones; ring: bundles */
};

struct sp_ring {
	const char *job;
	int index;
	const int *nodes;
	size_t n_nodes;
	const char *change; /* st_ring_change_name(): "placed", "bypass-extended", ... */
	int failed_node;    /* -1 none */
};

/* Ring domains: a transceiver bundle whose setting differs from what its
 * node should hold (drift.h's struct dr_bundle, as `ocsctl drift` lists it). */
struct sp_bundle_drift {
	int node;
	int bundle;
	const char *job;      /* the job of the node's ring ("" in no ring) */
	const char *expected; /* "loopback" or "external <distance> <up|down>" */
	const char *found;
	int found_peer; /* the node its path reaches (-1 none) */
};

struct sp_event {
	int64_t at_ms;
	const char *text;
};

struct sp_snapshot {
	enum sp_kind kind;
	const char *name;
	const char *role;   /* "leader", "follower", "standalone" */
	const char *leader; /* a follower's leader ("" unknown) */
	int64_t now_ms;
	/* leaf-spine: pods and groups; ring: nodes (closed); rail: servers x rails */
	int pods, groups;
	int nodes;
	bool closed;
	int servers, rails;
	struct sp_job *jobs;
	size_t n_jobs;
	struct sp_device *devices;
	size_t n_devices;
	struct sp_ring *rings;
	size_t n_rings;
	const int *faulty_nodes;
	size_t n_faulty_nodes;
	const struct sp_bundle_drift *bundle_drift; /* ring: by node, then bundle */
	size_t n_bundle_drift;
	const int64_t *faulty_gpus; /* rail: GPUs marked faulty (swapped or to swap) */
	size_t n_faulty_gpus;
	const struct sp_event *events; /* oldest first, at most SP_MAX_EVENTS */
	size_t n_events;
};

/* /state.json's text (NUL-terminated, *len without the NUL); NULL on allocation failure. */
char *sp_state_json(const struct sp_snapshot *s, size_t *len);
/* /topology.svg's text, the same way. */
char *sp_topology_svg(const struct sp_snapshot *s, size_t *len);
/* The page's static parts: "/", "/status.js", "/status.css" (NUL-terminated). */
extern const char sp_status_html[], sp_status_js[], sp_status_css[];

#endif
