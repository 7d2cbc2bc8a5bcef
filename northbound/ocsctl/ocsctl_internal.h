/*
 * ocsctl_internal.h - what the files of ocsctl share: the exit codes, the
 * parsed command line (struct opts) and the call context (struct ctx), and
 * the functions each file offers the others. Not for use outside ocsctl;
 * ocsctl is single-threaded but for the progress line's thread
 * (ocsctl_progress.h), which has its own client and shares nothing here.
 *
 * Call graph (no file calls back into one that calls it):
 *
 *   ocsctl.c (usage, options, main) --> ocsctl_jobs.c, ocsctl_fabric.c,
 *                                        ocsctl_rail.c, ocsctl_topology.c
 *   ocsctl_jobs.c, ocsctl_fabric.c, ocsctl_topology.c --> ocsctl_rpc.c,
 *                                                          ocsctl_out.c
 *   ocsctl_topology.c --> ocsctl_dot.c
 *   ocsctl_rpc.c --> ocsctl_servers.c, ocsctl_progress.c;  ocsctl_out.c --> ocsctl_rail.c
 *   ocsctl.c, ocsctl_jobs.c --> ocsctl_progress.c
 *
 * Every command function returns ocsctl's exit code after printing the
 * answer, or why there is none.
 */
#ifndef OCSCTL_INTERNAL_H
#define OCSCTL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nb.h"
#include "nb_client.h"
#include "ocs_json.h"
#include "ocsctl_progress.h"
#include "ocsctl_servers.h"

enum exit_code {
	EXIT_OK = 0,
	EXIT_REFUSED = 1,
	EXIT_USAGE = 2,
	EXIT_UNREACHABLE = 3,
	EXIT_IN_PROGRESS = 4, /* submit: ocsctl stopped waiting, the job goes on */
};

/* The command line as main() parsed it; the strings are argv's, the
 * environment's or DEFAULT_SERVER (none is freed). */
struct opts {
	const char *server;
	bool insecure;
	const char *ca, *cert, *key;
	bool json;
	int timeout_ms;
	const char *job, *device;
	int pod, group, node; /* -1: no filter */
	int hb, rail;	      /* rail-ports: server and rail filters, -1: none */
	bool force;
	long count;	     /* watch: stop after this many events; 0 = forever */
	int state;	     /* jobs: JobState filter; 0 = every state */
	bool no_wait;	     /* job submit: return once the job is accepted */
	long wait_timeout_s; /* job submit: how long to wait for the outcome */
	bool has_ports;	     /* adopt, clear: one cross-connect of --device */
	int in_port, out_port;
	bool quiet;	/* no progress line on stderr (ocsctl_progress.h) */
	bool svg;	/* topology: SVG through graphviz's dot, not DOT text */
	long max_edges; /* topology: above this many, edges and devices aggregate */
};

/* What every command gets; main() owns it and frees the server list. */
struct ctx {
	struct opts o;
	struct ocsctl_servers *servers; /* the --server list, one of them in use */
	/* the progress line of a waiting command (NULL: none); stopped by
	 * rpc_call() and job submit once the RPC it follows returned */
	struct prog *progress;
};

/* ---- ocsctl_out.c: output, as tables, key/value blocks or JSON ---------- */

struct out_table {
	int cols;
	char **cells; /* rows * cols, malloc'd strings */
	size_t rows, cap;
	bool header; /* row 0 names the columns (out_table_header) */
};

/* printf into a new string (caller frees); exits on out of memory. */
char *out_fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
/* Adds a row of t->cols strings (takes ownership). */
void out_table_add(struct out_table *t, char **row);
/* Adds t's header row (takes ownership): the names -o picks columns by. */
void out_table_header(struct out_table *t, char **row);
/* Prints t with its columns aligned and empties it; for a table with a
 * header, only the -o columns (in their order) and no header with
 * --no-headers. An -o name the table lacks is said on stderr and the
 * table (and every later one) left out: out_failed() turns ocsctl's exit
 * status to 2. */
void out_table_print(struct out_table *t);
/* An -o name was missing from a table printed so far. */
bool out_failed(void);
/* -o COLS (comma-separated header names, any case; NULL: all) and
 * --no-headers, for every table printed after. */
void out_table_options(const char *cols, bool no_headers);
/* "JOB_STATE_ACTIVE" -> "active"; caller frees. */
char *out_enum_short(const ProtobufCEnumDescriptor *d, int value);
/* "2026-11-25T00:17:40.123Z" (UTC), "-" when unix_ms <= 0; caller frees. */
char *out_time_text(int64_t unix_ms);
/* Prints v (NULL: building it failed) and a newline; returns an exit code. */
int out_print_json_value(const json_t *v, bool pretty);
/* Prints m as JSON; returns an exit code. */
int out_print_json(const ProtobufCMessage *m, bool pretty);
/* "name value" rows of m's scalar fields whose number is set in want. */
void out_kv_rows(struct out_table *t, const ProtobufCMessage *m, uint64_t want);
void out_print_kv_pick(const ProtobufCMessage *m, uint64_t want);
/* Bits lo..hi (field numbers) set. */
uint64_t out_ids(unsigned lo, unsigned hi);
void out_circuits_table(Ocs__V1__Circuit **cs, size_t n);
void out_print_figures(const Ocs__V1__PlanFigures *fig);
void out_rings_table(Ocs__V1__Ring **rs, size_t n);
/* The GPUs a job holds. */
long long out_job_gpus(const Ocs__V1__Job *j);
void out_print_job(const Ocs__V1__Job *job);
/* rings --json; NULL when out of memory. Caller frees (json_decref). */
json_t *out_rings_json(const Ocs__V1__ListRingsResponse *r);
/* watch's line of an event: "SEQ TIME what". */
void out_print_event(const Ocs__V1__Event *e);

/* ---- ocsctl_rpc.c: calls to the --server list ---------------------------- */

/* Prints why a call failed; returns the exit code. */
int rpc_report_failure(const struct ctx *x, const struct nb_client_status *st);
/* One RPC: EXIT_OK and *resp_out (caller frees), or prints why and returns the exit code. */
int rpc_call(struct ctx *x, enum nb_method m, const ProtobufCMessage *req, void *resp_out);
/* protobuf_c_message_free_unpacked(); NULL is fine. */
void rpc_free_msg(void *m);

/*
 * Every page of a ListJobs, ListCircuits or ListRailPorts answer (issue 14
 * #5): the page messages are kept (the items point into them) until
 * rpc_pages_free().
 */
struct rpc_pages {
	ProtobufCMessage **msgs;
	size_t n_msgs;
	void **items; /* Ocs__V1__Job *, Ocs__V1__Circuit * or Ocs__V1__RailPort * */
	size_t n_items;
};

void rpc_pages_free(struct rpc_pages *pg);
/* Calls m (ListJobs, ListCircuits or ListRailPorts) until the last page; *token is the
 * request's page_token field. pg is freed by the caller, even on failure. */
int rpc_follow_pages(struct ctx *x, enum nb_method m, const ProtobufCMessage *req, char **token,
		     struct rpc_pages *pg);

/* ---- ocsctl_jobs.c: the job commands (the Jobs service) ------------------ */

/* Reads a JobSpec from a JSON file: EXIT_OK and *out (caller frees), or
 * EXIT_USAGE after printing why. */
int jobs_load_job_file(const char *path, Ocs__V1__JobSpec **out);
int jobs_cmd_jobs(struct ctx *x);
/* job submit FILE (submit_it) or job plan FILE. */
int jobs_cmd_job_file(struct ctx *x, Ocs__V1__JobSpec *spec, bool submit_it);
/* job release ID (release) or job show ID. */
int jobs_cmd_job_id(struct ctx *x, const char *id, bool release);

/* ---- ocsctl_fabric.c: the fabric, device, circuit, drift, cabling, ring and node
 * commands (the Fabric service), status and watch -------------------------- */

int fabric_cmd_status(struct ctx *x);
int fabric_cmd_fabric(struct ctx *x);
int fabric_cmd_devices(struct ctx *x);
int fabric_cmd_circuits(struct ctx *x);
/* drain DEVICE (drain) or undrain DEVICE. */
int fabric_cmd_drain(struct ctx *x, const char *device, bool drain);
int fabric_cmd_drift(struct ctx *x);
int fabric_cmd_adopt(struct ctx *x);
int fabric_cmd_clear(struct ctx *x);
/* cabling [--device NAME], and cabling clear DEVICE PORT (issue 23). */
int fabric_cmd_cabling(struct ctx *x);
int fabric_cmd_cabling_clear(struct ctx *x, const char *device, long port);
int fabric_cmd_rings(struct ctx *x);
/* node fail NODE (fail) or node heal NODE. */
int fabric_cmd_node(struct ctx *x, long node, bool fail);
int fabric_cmd_watch(struct ctx *x);

/* ---- ocsctl_topology.c: topology, the fabric drawn (issue 27) ------------ */

/* Is graphviz's dot an executable on $PATH? */
bool topo_dot_on_path(void);
int topo_cmd_topology(struct ctx *x);

#endif
