/*
 * ocsctl.c - the command-line client of ocsd: a thin client over the same
 * ocs.v1 gRPC API that schedulers use (no private control path).
 *
 * Every command is one RPC (status: two) whose answer is printed as an
 * aligned table or key/value block for people, or as JSON with --json
 * (the response message itself, field names as in the proto). With
 * several --server addresses (ocsd replicas) ocsctl_servers.c picks the
 * replica that answers and follows a follower's redirect to the leader.
 * Exit codes:
 * 0 ok, 1 the server refused (any non-OK status), 2 usage or input error,
 * 3 the server could not be reached. northbound/README.md documents every
 * command and flag.
 */
#define _GNU_SOURCE /* vasprintf */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "nb_client.h"
#include "nb_internal.h"
#include "ocs_json.h"
#include "ocsctl_rail.h"
#include "ocsctl_servers.h"
#include "pbjson.h"

enum exit_code {
	EXIT_OK = 0,
	EXIT_REFUSED = 1,
	EXIT_USAGE = 2,
	EXIT_UNREACHABLE = 3,
	EXIT_IN_PROGRESS = 4, /* submit: ocsctl stopped waiting, the job goes on */
};

#define DEFAULT_SERVER	   "127.0.0.1:50051"
#define DEFAULT_TIMEOUT_MS 5000
/* submit --wait: how long ocsctl waits for the job's outcome. */
#define DEFAULT_WAIT_TIMEOUT_S 900
/* submit --no-wait: how long SubmitJob may answer by itself before ocsctl
 * looks for the accepted job instead. */
#define NO_WAIT_GRACE_MS 300
#define NO_WAIT_POLL_MS	 100

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
};

struct ctx {
	struct opts o;
	struct ocsctl_servers *servers; /* the --server list, one of them in use */
};

static const char usage_text[] =
	"usage: ocsctl [options] COMMAND [ARGS]\n"
	"\n"
	"commands:\n"
	"  status                     server health and a fabric summary\n"
	"  fabric                     the fabric's size, wiring and usage\n"
	"  devices [--group N]        OCS devices with session and health state\n"
	"  circuits [--job ID] [--device NAME] [--pod N]\n"
	"                             circuits in place\n"
	"  jobs [--state STATE]       jobs with their state (STATE: pending, planning,\n"
	"                             programming, active, releasing, released, failed)\n"
	"  job submit FILE [--wait | --no-wait] [--wait-timeout-s N]\n"
	"                             submit the job in a JSON file (a JobSpec: a leaf_demand,\n"
	"                             parallelism or ring request); --wait (the default) waits\n"
	"                             for its outcome (ACTIVE or the refusal) up to\n"
	"                             --wait-timeout-s (default 900); --no-wait returns once\n"
	"                             the job is accepted\n"
	"  job plan FILE              dry run: the plan and its figures, nothing changes\n"
	"  job release ID             remove a job's circuits or rings\n"
	"  job show ID                a job, its plan figures and circuits or rings\n"
	"  rings [--job ID] [--node N]\n"
	"                             TP rings in place on an OCSTrx ring domain\n"
	"  node fail NODE             mark a ring-domain node faulty: it leaves every plan and\n"
	"                             its ring is bypassed or re-placed at once\n"
	"  node heal NODE             mark a faulty node healthy again (free for new rings)\n"
	"  gpu replace GPU            rail-OCS: swap GPU out of its rail port (an idle GPU of\n"
	"                             its server, else a spare server takes over)\n"
	"  gpu fail GPU               rail-OCS: mark GPU faulty (swapped out if on a rail port)\n"
	"  gpu heal GPU               rail-OCS: mark a faulty GPU healthy again\n"
	"  rail-ports [--hb S] [--rail R] [--job ID]\n"
	"                             rail-OCS: every rail port and its GPU (--hb: the ports\n"
	"                             of server, i.e. HB domain, S)\n"
	"  drain DEVICE [--force]     no new circuits on DEVICE (--force: even if running\n"
	"                             jobs hold circuits on it)\n"
	"  undrain DEVICE             make a drained device available again\n"
	"  drift [--device NAME]      cross-connects on the devices that no job owns\n"
	"                             (unowned: planners keep off their ports) or that a\n"
	"                             job owns and its device lacks (missing)\n"
	"  adopt [--device NAME [--ports IN:OUT]] [--job ID]\n"
	"                             record unowned two-way circuits as job ID (default\n"
	"                             adopted-<unix time>); job release ID frees them\n"
	"  clear [--device NAME [--ports IN:OUT]]\n"
	"                             remove unowned cross-connects from the devices, whole\n"
	"                             circuits, in one transaction\n"
	"  watch [--count N]          stream events: jobs, devices, transactions, drift, rings\n"
	"                             and nodes (stop after N with --count)\n"
	"\n"
	"options:\n"
	"  --server HOST:PORT[,HOST:PORT..]\n"
	"                       server address, or the addresses of ocsd replicas: calls go\n"
	"                       to the first that answers, writes follow a follower's\n"
	"                       redirect to the leader (default $OCSD_SERVER, else\n"
	"                       " DEFAULT_SERVER ")\n"
	"  --ca FILE            CA certificate (PEM) that signed the server certificate\n"
	"                       (default $OCSCTL_CA)\n"
	"  --cert FILE          client certificate (PEM); its OU is the role ($OCSCTL_CERT)\n"
	"  --key FILE           client key (PEM) ($OCSCTL_KEY)\n"
	"  --insecure           plaintext, for a server started insecure on loopback\n"
	"  --json               print JSON instead of tables\n"
	"  --timeout-ms N       connect and call deadline (default 5000)\n"
	"  -h, --help           this text\n"
	"\n"
	"exit codes: 0 ok, 1 the server refused, 2 usage or input error, 3 unreachable,\n"
	"            4 job submit stopped waiting (or --no-wait found no accepted job\n"
	"            within --timeout-ms): the job may still go on\n";

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("ocsctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\n(ocsctl --help for usage)\n", stderr);
	return EXIT_USAGE;
}

/* ---- output helpers ----------------------------------------------------- */

struct table {
	int cols;
	char **cells; /* rows * cols, malloc'd strings */
	size_t rows, cap;
};

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...)
{
	va_list ap;
	char *s;

	va_start(ap, f);
	if (vasprintf(&s, f, ap) < 0)
		s = NULL;
	va_end(ap);
	if (!s) {
		fputs("ocsctl: out of memory\n", stderr);
		exit(EXIT_USAGE);
	}
	return s;
}

/* Adds a row of t->cols strings (takes ownership). */
static void table_add(struct table *t, char **row)
{
	if (t->rows == t->cap) {
		t->cap = t->cap ? 2 * t->cap : 16;
		t->cells = realloc(t->cells, t->cap * (size_t)t->cols * sizeof(char *));
		if (!t->cells) {
			fputs("ocsctl: out of memory\n", stderr);
			exit(EXIT_USAGE);
		}
	}
	memcpy(&t->cells[t->rows * (size_t)t->cols], row, (size_t)t->cols * sizeof(char *));
	t->rows++;
}

static void table_print(struct table *t)
{
	size_t width[16] = {0};

	for (size_t r = 0; r < t->rows; r++)
		for (int c = 0; c < t->cols; c++) {
			size_t n = strlen(t->cells[r * (size_t)t->cols + (size_t)c]);

			if (n > width[c])
				width[c] = n;
		}
	for (size_t r = 0; r < t->rows; r++) {
		for (int c = 0; c < t->cols; c++) {
			const char *s = t->cells[r * (size_t)t->cols + (size_t)c];

			if (c == t->cols - 1)
				printf("%s\n", s);
			else
				printf("%-*s  ", (int)width[c], s);
		}
	}
	for (size_t i = 0; i < t->rows * (size_t)t->cols; i++)
		free(t->cells[i]);
	free(t->cells);
	t->cells = NULL;
	t->rows = t->cap = 0;
}

/* "JOB_STATE_ACTIVE" -> "active": the enum's prefix is its value 0's name
 * minus "UNSPECIFIED". */
static char *enum_short(const ProtobufCEnumDescriptor *d, int value)
{
	const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(d, value);
	const ProtobufCEnumValue *zero = protobuf_c_enum_descriptor_get_value(d, 0);
	size_t prefix = 0;
	char *s;

	if (!v)
		return fmt("%d", value);
	if (zero && strlen(zero->name) > 11 &&
	    strcmp(zero->name + strlen(zero->name) - 11, "UNSPECIFIED") == 0 &&
	    strncmp(v->name, zero->name, strlen(zero->name) - 11) == 0)
		prefix = strlen(zero->name) - 11;
	s = fmt("%s", v->name + prefix);
	for (char *p = s; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	return s;
}

static char *time_text(int64_t unix_ms)
{
	time_t t = (time_t)(unix_ms / 1000);
	struct tm tm;
	char buf[32];

	if (unix_ms <= 0)
		return fmt("-");
	gmtime_r(&t, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
	return fmt("%s.%03dZ", buf, (int)(unix_ms % 1000));
}

/* Prints v (NULL: building it failed) and a newline; returns an exit code. */
static int print_json_value(const json_t *v, bool pretty)
{
	char *text = v ? ocs_json_dumps(v, pretty) : NULL;

	if (!text) {
		fprintf(stderr, "ocsctl: cannot print the answer as JSON (out of memory, or "
				"a string that is not UTF-8)\n");
		return EXIT_REFUSED;
	}
	printf("%s\n", text);
	free(text);
	return EXIT_OK;
}

static int print_json(const ProtobufCMessage *m, bool pretty)
{
	json_t *v = pbjson_write(m);
	int rc = print_json_value(v, pretty);

	json_decref(v);
	return rc;
}

/* Adds to t a "name value" row for each scalar field of m whose number n
 * has bit n set in want (fields numbered 64 and up: always). */
static void kv_rows(struct table *t, const ProtobufCMessage *m, uint64_t want)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;

	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		const void *p = (const char *)m + f->offset;
		char *row[2];

		if (f->label == PROTOBUF_C_LABEL_REPEATED || f->type == PROTOBUF_C_TYPE_MESSAGE ||
		    (f->id < 64 && !(want >> f->id & 1)))
			continue;
		row[0] = fmt("%s", f->name);
		switch (f->type) {
		case PROTOBUF_C_TYPE_INT32:
			row[1] = fmt("%d", *(const int32_t *)p);
			break;
		case PROTOBUF_C_TYPE_INT64:
			row[1] = fmt("%lld", (long long)*(const int64_t *)p);
			break;
		case PROTOBUF_C_TYPE_UINT64:
			row[1] = fmt("%llu", (unsigned long long)*(const uint64_t *)p);
			break;
		case PROTOBUF_C_TYPE_DOUBLE:
			row[1] = fmt("%g", *(const double *)p);
			break;
		case PROTOBUF_C_TYPE_BOOL:
			row[1] = fmt("%s", *(const protobuf_c_boolean *)p ? "yes" : "no");
			break;
		case PROTOBUF_C_TYPE_ENUM:
			row[1] = enum_short(f->descriptor, *(const int *)p);
			break;
		case PROTOBUF_C_TYPE_STRING:
			row[1] = fmt("%s", *(char *const *)p);
			break;
		default:
			row[1] = fmt("?");
			break;
		}
		table_add(t, row);
	}
}

static void print_kv_pick(const ProtobufCMessage *m, uint64_t want)
{
	struct table t = {.cols = 2};

	kv_rows(&t, m, want);
	table_print(&t);
}

/* Bits lo..hi (field numbers) set. */
static uint64_t ids(unsigned lo, unsigned hi)
{
	return (hi >= 63 ? ~(uint64_t)0 : ((uint64_t)1 << (hi + 1)) - 1) &
	       ~(((uint64_t)1 << lo) - 1);
}

/* ---- calls -------------------------------------------------------------- */

/* Prints why a call failed; when no server of the --server list took it,
 * every server tried and why. */
static int report_failure(const struct ctx *x, const struct nb_client_status *st)
{
	const char *trail = ocsctl_servers_trail(x->servers);

	if (trail[0]) {
		fprintf(stderr, "ocsctl: %s:\n%s", st->message, trail);
		return st->unreachable ? EXIT_UNREACHABLE : EXIT_REFUSED;
	}
	if (st->unreachable) {
		fprintf(stderr, "ocsctl: cannot reach %s: %s\n", ocsctl_servers_current(x->servers),
			st->message);
		return EXIT_UNREACHABLE;
	}
	fprintf(stderr, "ocsctl: %s: %s\n", nb_code_name((enum nb_code)st->code), st->message);
	return EXIT_REFUSED;
}

/* One RPC; on failure prints why and returns the exit code. */
static int call(struct ctx *x, enum nb_method m, const ProtobufCMessage *req, void *resp_out)
{
	const struct nb_method_info *info = nb_method_info(m);
	struct nb_client_status st;

	if (ocsctl_servers_unary(x->servers, info->path, req, info->response,
				 (ProtobufCMessage **)resp_out, &st))
		return report_failure(x, &st);
	return EXIT_OK;
}

static void free_msg(void *m)
{
	protobuf_c_message_free_unpacked(m, NULL);
}

static int load_job_file(const char *path, Ocs__V1__JobSpec **out)
{
	FILE *f = fopen(path, "rb");
	char *text = NULL, err[320];
	struct ocs_json_error jerr;
	size_t len = 0;
	json_t *v;

	*out = NULL;
	if (!f) {
		fprintf(stderr, "ocsctl: %s: %s\n", path, strerror(errno));
		return EXIT_USAGE;
	}
	if (fseek(f, 0, SEEK_END) == 0) {
		long n = ftell(f);

		if (n >= 0 && n <= 64 << 20 && fseek(f, 0, SEEK_SET) == 0) {
			text = malloc((size_t)n + 1);
			if (text && fread(text, 1, (size_t)n, f) == (size_t)n)
				len = (size_t)n;
			else {
				free(text);
				text = NULL;
			}
		}
	}
	fclose(f);
	if (!text) {
		fprintf(stderr, "ocsctl: %s: unreadable or over 64 MiB\n", path);
		return EXIT_USAGE;
	}
	v = ocs_json_parse(text, len, &jerr);
	free(text);
	if (!v) {
		/* "job.json: placement: duplicate key "gpus"", "job.json: line 1, ..." */
		fprintf(stderr, "ocsctl: %s: %s%s%s\n", path, jerr.path, jerr.path[0] ? ": " : "",
			jerr.message);
		return EXIT_USAGE;
	}
	*out = (Ocs__V1__JobSpec *)pbjson_read(v, &ocs__v1__job_spec__descriptor, err, sizeof(err));
	json_decref(v);
	if (!*out) {
		fprintf(stderr, "ocsctl: %s: %s\n", path, err);
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

static void circuits_table(Ocs__V1__Circuit **cs, size_t n)
{
	struct table t = {.cols = 5};
	char *head[5] = {fmt("JOB"), fmt("GROUP"), fmt("A (POD:PORT)"), fmt("B (POD:PORT)"),
			 fmt("CROSS-CONNECTS")};

	table_add(&t, head);
	for (size_t i = 0; i < n; i++) {
		const Ocs__V1__Circuit *c = cs[i];
		char *xcs = fmt("%s", "");
		char *row[5];

		for (size_t k = 0; k < c->n_cross_connects; k++) {
			char *next = fmt(
				"%s%s%s %d->%d", xcs, k ? ", " : "", c->cross_connects[k]->device,
				c->cross_connects[k]->in_port, c->cross_connects[k]->out_port);

			free(xcs);
			xcs = next;
		}
		row[0] = fmt("%s", c->job_id);
		row[1] = fmt("%d", c->group);
		row[2] = fmt("%d:%d", c->pod_a, c->port_a);
		row[3] = fmt("%d:%d", c->pod_b, c->port_b);
		row[4] = xcs;
		table_add(&t, row);
	}
	table_print(&t);
}

static void print_figures(const Ocs__V1__PlanFigures *fig)
{
	if (!fig)
		return;
	/* The DELTA figures (fields 10 on) only for DAG-aware plans. */
	if (fig->ring) { /* a ring plan: its own figures and how long planning took */
		struct table t = {.cols = 2};

		kv_rows(&t, &fig->ring->base, ~(uint64_t)0);
		kv_rows(&t, &fig->base, ids(7, 7));
		table_print(&t);
	} else if (fig->makespan_ms > 0 || fig->ports_used > 0) {
		print_kv_pick(&fig->base, ids(1, 15));
	} else {
		print_kv_pick(&fig->base, ids(1, 9));
	}
	for (size_t i = 0; i < fig->n_unplaced; i++)
		printf("unplaced               leaves %d-%d: %d links\n", fig->unplaced[i]->a,
		       fig->unplaced[i]->b, fig->unplaced[i]->links);
	for (size_t i = 0; i < fig->n_moved_jobs; i++)
		printf("moved job              %s\n", fig->moved_jobs[i]);
}

/* "3,4,5" (or "-" when empty); caller frees. */
static char *nodes_text(const int32_t *nodes, size_t n)
{
	char *s = fmt("%s", n ? "" : "-");

	for (size_t i = 0; i < n; i++) {
		char *next = fmt("%s%s%d", s, i ? "," : "", nodes[i]);

		free(s);
		s = next;
	}
	return s;
}

/* Whether the ring's last change was a node failure (failed_node is set). */
static bool ring_failed(const Ocs__V1__Ring *r)
{
	return r->last_change == OCS__V1__RING_CHANGE__RING_CHANGE_BYPASSED ||
	       r->last_change == OCS__V1__RING_CHANGE__RING_CHANGE_REPLACED ||
	       r->last_change == OCS__V1__RING_CHANGE__RING_CHANGE_LOST;
}

static void rings_table(Ocs__V1__Ring **rs, size_t n)
{
	struct table t = {.cols = 6};
	char *head[6] = {fmt("JOB"),	fmt("RING"),   fmt("NODES"),
			 fmt("CHANGE"), fmt("FAILED"), fmt("REASON")};

	table_add(&t, head);
	for (size_t i = 0; i < n; i++) {
		const Ocs__V1__Ring *r = rs[i];
		char *row[6] = {fmt("%s", r->job_id),
				fmt("%d", r->index),
				nodes_text(r->nodes, r->n_nodes),
				enum_short(&ocs__v1__ring_change__descriptor, r->last_change),
				ring_failed(r) ? fmt("%d", r->failed_node) : fmt("-"),
				fmt("%s", r->reason[0] ? r->reason : "-")};

		table_add(&t, row);
	}
	table_print(&t);
}

/* A ring request in words: "tp 8, 32 GPUs, fat-tree". Caller frees. */
static char *ring_request_text(const Ocs__V1__RingRequest *q)
{
	const char *orch = q->orchestration[0] ? q->orchestration : "dcn-free";

	if (q->gpus > 0)
		return fmt("tp %d, %lld GPUs, %s", q->tp, (long long)q->gpus, orch);
	if (q->rings > 0)
		return fmt("tp %d, %d rings, %s", q->tp, q->rings, orch);
	return fmt("tp %d, the whole domain, %s", q->tp, orch);
}

/* The GPUs a job holds: its placement's, or for a ring job what its rings
 * hold (the request's until it is planned). */
static long long job_gpus(const Ocs__V1__Job *j)
{
	const Ocs__V1__JobSpec *s = j->spec;

	if (s && s->demand_case == OCS__V1__JOB_SPEC__DEMAND_RING && s->ring) {
		if (j->figures && j->figures->ring)
			return j->figures->ring->gpus_placed;
		return s->ring->gpus > 0 ? s->ring->gpus : (long long)s->ring->rings * s->ring->tp;
	}
	return s && s->placement ? (long long)s->placement->n_gpus : 0;
}

static void print_job(const Ocs__V1__Job *job)
{
	const Ocs__V1__JobSpec *s = job->spec;
	struct table t = {.cols = 2};
	char *row[2];

	row[0] = fmt("id");
	row[1] = fmt("%s", s ? s->id : "");
	table_add(&t, row);
	row[0] = fmt("state");
	row[1] = enum_short(&ocs__v1__job_state__descriptor, job->state);
	table_add(&t, row);
	if (job->reason[0]) {
		row[0] = fmt("reason");
		row[1] = fmt("%s", job->reason);
		table_add(&t, row);
	}
	row[0] = fmt("gpus");
	row[1] = fmt("%lld", job_gpus(job));
	table_add(&t, row);
	if (s && s->demand_case == OCS__V1__JOB_SPEC__DEMAND_RING && s->ring) {
		row[0] = fmt("ring");
		row[1] = ring_request_text(s->ring);
	} else if (s && s->demand_case == OCS__V1__JOB_SPEC__DEMAND_PARALLELISM && s->parallelism) {
		const Ocs__V1__ParallelismSpec *q = s->parallelism;

		row[0] = fmt("parallelism");
		row[1] =
			fmt("tp %d, pp %d, dp %d%s, %d micro-batches, %g Gb/s", q->tp, q->pp, q->dp,
			    q->dp ? "" : " (from the GPUs)", q->micro_batches, q->bandwidth_gbps);
	} else {
		row[0] = fmt("leaf pairs");
		row[1] = fmt("%zu", s && s->demand_case == OCS__V1__JOB_SPEC__DEMAND_LEAF_DEMAND &&
						    s->leaf_demand
					    ? s->leaf_demand->n_pairs
					    : 0);
	}
	table_add(&t, row);
	row[0] = fmt("created");
	row[1] = time_text(job->created_unix_ms);
	table_add(&t, row);
	row[0] = fmt("updated");
	row[1] = time_text(job->updated_unix_ms);
	table_add(&t, row);
	table_print(&t);
	if (job->figures) {
		printf("\n");
		print_figures(job->figures);
	}
	if (job->n_circuits) {
		printf("\n");
		circuits_table(job->circuits, job->n_circuits);
	}
	if (job->n_rings) {
		printf("\n");
		rings_table(job->rings, job->n_rings);
	}
}

/* ---- commands ------------------------------------------------------------ */

static bool ring_domain(const Ocs__V1__FabricSummary *f)
{
	return strcmp(f->kind, "ocstrx-ring") == 0;
}

/*
 * status's replica rows (issue 15 #6), none when ocsd runs alone (no
 * replica id): "replica a (follower)", "leader b at HOST:PORT" and
 * "replicas a HOST:PORT, b HOST:PORT (leader)"; then "store problem" when
 * the store refuses writes.
 */
static void replica_rows(struct table *t, const Ocs__V1__FabricSummary *f)
{
	char *row[2];

	if (f->replica_id[0]) {
		char *list = fmt("%s", f->n_replicas ? "" : "-");

		row[0] = fmt("replica");
		row[1] = fmt("%s (%s)", f->replica_id, f->role[0] ? f->role : "unknown role");
		table_add(t, row);
		row[0] = fmt("leader");
		if (f->leader_id[0] || f->leader_address[0])
			row[1] = fmt("%s at %s", f->leader_id[0] ? f->leader_id : "?",
				     f->leader_address[0] ? f->leader_address : "?");
		else
			row[1] = fmt("none known");
		table_add(t, row);
		for (size_t i = 0; i < f->n_replicas; i++) {
			const Ocs__V1__Replica *r = f->replicas[i];
			char *next = fmt("%s%s%s %s%s", list, i ? ", " : "", r->id, r->address,
					 r->leader ? " (leader)" : "");

			free(list);
			list = next;
		}
		row[0] = fmt("replicas");
		row[1] = list;
		table_add(t, row);
	}
	if (f->store_problem[0]) {
		row[0] = fmt("store problem");
		row[1] = fmt("%s", f->store_problem);
		table_add(t, row);
	}
}

static int cmd_status(struct ctx *x)
{
	Grpc__Health__V1__HealthCheckRequest hreq = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
	Ocs__V1__GetFabricRequest freq = OCS__V1__GET_FABRIC_REQUEST__INIT;
	Grpc__Health__V1__HealthCheckResponse *health = NULL;
	Ocs__V1__FabricSummary *f = NULL;
	int rc = call(x, NB_HEALTH_CHECK, &hreq.base, &health);

	if (rc == EXIT_OK)
		rc = call(x, NB_FABRIC_GET_FABRIC, &freq.base, &f);
	if (rc != EXIT_OK) {
		free_msg(health);
		return rc;
	}
	if (x->o.json) {
		json_t *v = json_pack(
			"{s:s, s:o, s:o}", "server", ocsctl_servers_current(x->servers), "health",
			pbjson_write(&health->base), "fabric", pbjson_write(&f->base));

		rc = print_json_value(v, true);
		json_decref(v);
	} else {
		struct table t = {.cols = 2};
		char *row[2];

		row[0] = fmt("server"); /* the one that answered */
		row[1] = fmt("%s", ocsctl_servers_current(x->servers));
		table_add(&t, row);
		row[0] = fmt("health");
		row[1] = enum_short(
			&grpc__health__v1__health_check_response__serving_status__descriptor,
			health->status);
		table_add(&t, row);
		row[0] = fmt("version");
		row[1] = fmt("%s", f->version);
		table_add(&t, row);
		row[0] = fmt("store");
		row[1] = fmt("%s", f->store);
		table_add(&t, row);
		replica_rows(&t, f);
		row[0] = fmt("fabric");
		if (ring_domain(f))
			row[1] =
				fmt("ocstrx-ring, %d nodes (%d ToRs x %d), %lld GPUs, K=%d, %s, "
				    "%d devices",
				    f->nodes, f->tors, f->nodes_per_tor, (long long)f->gpus,
				    f->k_hops, f->closed ? "closed ring" : "open line", f->devices);
		else
			row[1] = fmt("%d pods, %d leaves, %lld GPUs, %s wiring, %d OCS groups, "
				     "%d devices",
				     f->pods, f->leaves, (long long)f->gpus, f->wiring, f->groups,
				     f->devices);
		table_add(&t, row);
		row[0] = fmt("devices");
		row[1] = fmt("%d connected, %d drained", f->devices_connected, f->devices_drained);
		table_add(&t, row);
		row[0] = fmt("jobs");
		row[1] = fmt("%d active", f->jobs_active);
		table_add(&t, row);
		if (ring_domain(f)) {
			row[0] = fmt("rings");
			row[1] = fmt("%d active", f->rings_active);
			table_add(&t, row);
			row[0] = fmt("nodes");
			row[1] = fmt("%d busy, %d faulty, %d free", f->nodes_busy, f->nodes_faulty,
				     f->nodes - f->nodes_busy - f->nodes_faulty);
			table_add(&t, row);
		} else {
			row[0] = fmt("circuits");
			row[1] = fmt("%d active", f->circuits_active);
			table_add(&t, row);
			row[0] = fmt("ocs ports");
			row[1] = fmt("%lld used, %lld free", (long long)f->ocs_ports_used,
				     (long long)f->ocs_ports_free);
			table_add(&t, row);
		}
		table_print(&t);
	}
	free_msg(health);
	free_msg(f);
	return rc;
}

static int cmd_fabric(struct ctx *x)
{
	Ocs__V1__GetFabricRequest req = OCS__V1__GET_FABRIC_REQUEST__INIT;
	Ocs__V1__FabricSummary *f;
	int rc = call(x, NB_FABRIC_GET_FABRIC, &req.base, &f);

	if (rc)
		return rc;
	if (x->o.json)
		rc = print_json(&f->base, true);
	else if (ring_domain(f)) /* kind, the ring domain's fields and those of both kinds */
		print_kv_pick(&f->base, ids(9, 12) | ids(14, 14) | ids(17, 28));
	else if (strcmp(f->kind, "rail-ocs") == 0) /* sizes, usage, then the rail fields */
		print_kv_pick(&f->base, ids(6, 7) | ids(9, 18) | ids(29, 34));
	else /* a leaf-spine fabric, or a server that predates kind */
		print_kv_pick(&f->base, ids(1, 18));
	free_msg(f);
	return rc;
}

static int cmd_devices(struct ctx *x)
{
	Ocs__V1__ListDevicesRequest req = OCS__V1__LIST_DEVICES_REQUEST__INIT;
	Ocs__V1__ListDevicesResponse *r;
	struct table t = {.cols = 11};
	char *head[11] = {fmt("NAME"),	  fmt("GROUP"),	   fmt("INDEX"),     fmt("ADDRESS"),
			  fmt("SESSION"), fmt("SINCE"),	   fmt("HEALTH"),    fmt("DRAINED"),
			  fmt("PORTS"),	  fmt("CIRCUITS"), fmt("LAST ERROR")};
	int rc;

	if (x->o.group >= 0) {
		req.has_group = true;
		req.group = x->o.group;
	}
	rc = call(x, NB_FABRIC_LIST_DEVICES, &req.base, &r);
	if (rc) {
		for (int i = 0; i < 11; i++)
			free(head[i]);
		return rc;
	}
	if (x->o.json) {
		for (int i = 0; i < 11; i++)
			free(head[i]);
		rc = print_json(&r->base, true);
		free_msg(r);
		return rc;
	}
	table_add(&t, head);
	for (size_t i = 0; i < r->n_devices; i++) {
		const Ocs__V1__Device *d = r->devices[i];
		char *row[11] = {fmt("%s", d->name),
				 fmt("%d", d->group),
				 fmt("%d", d->index),
				 fmt("%s", d->address),
				 enum_short(&ocs__v1__session_state__descriptor, d->session),
				 time_text(d->session_since_unix_ms),
				 enum_short(&ocs__v1__device_health__descriptor, d->health),
				 fmt("%s", d->drained ? "yes" : "no"),
				 fmt("%d/%d", d->ports_used, d->ports_total),
				 fmt("%d", d->circuits),
				 fmt("%s", d->session_error[0] ? d->session_error : "-")};

		table_add(&t, row);
	}
	table_print(&t);
	free_msg(r);
	return EXIT_OK;
}

/*
 * Every page of a ListJobs or ListCircuits answer (issue 14 #5): the page
 * messages are kept (the items point into them) until pages_free().
 */
struct pages {
	ProtobufCMessage **msgs;
	size_t n_msgs;
	void **items; /* Ocs__V1__Job * or Ocs__V1__Circuit * */
	size_t n_items;
};

static void pages_free(struct pages *pg)
{
	for (size_t i = 0; i < pg->n_msgs; i++)
		free_msg(pg->msgs[i]);
	free(pg->msgs);
	free(pg->items);
}

/* Calls m until the last page; *token is the request's page_token field. */
static int follow_pages(struct ctx *x, enum nb_method m, const ProtobufCMessage *req, char **token,
			struct pages *pg)
{
	for (;;) {
		ProtobufCMessage *r, **msgs;
		void **items, **page;
		size_t n;
		char *next;
		int rc = call(x, m, req, &r);

		if (rc)
			return rc;
		if (m == NB_JOBS_LIST_JOBS) {
			Ocs__V1__ListJobsResponse *j = (void *)r;

			page = (void **)j->jobs;
			n = j->n_jobs;
			next = j->next_page_token;
		} else {
			Ocs__V1__ListCircuitsResponse *c = (void *)r;

			page = (void **)c->circuits;
			n = c->n_circuits;
			next = c->next_page_token;
		}
		msgs = realloc(pg->msgs, (pg->n_msgs + 1) * sizeof(*msgs));
		items = msgs ? realloc(pg->items, (pg->n_items + n + 1) * sizeof(*items)) : NULL;
		if (msgs)
			pg->msgs = msgs;
		if (items)
			pg->items = items;
		if (!msgs || !items) {
			free_msg(r);
			fprintf(stderr, "ocsctl: out of memory\n");
			return EXIT_REFUSED;
		}
		pg->msgs[pg->n_msgs++] = r;
		if (n)
			memcpy(pg->items + pg->n_items, page, n * sizeof(*page));
		pg->n_items += n;
		if (!next || !*next)
			return EXIT_OK;
		*token = next; /* lives in the page kept above */
	}
}

static int cmd_circuits(struct ctx *x)
{
	Ocs__V1__ListCircuitsRequest req = OCS__V1__LIST_CIRCUITS_REQUEST__INIT;
	Ocs__V1__ListCircuitsResponse all = OCS__V1__LIST_CIRCUITS_RESPONSE__INIT, *r = &all;
	struct pages pg = {0};
	int rc;

	if (x->o.job)
		req.job_id = (char *)x->o.job;
	if (x->o.device)
		req.device = (char *)x->o.device;
	if (x->o.pod >= 0) {
		req.has_pod = true;
		req.pod = x->o.pod;
	}
	rc = follow_pages(x, NB_FABRIC_LIST_CIRCUITS, &req.base, &req.page_token, &pg);
	if (rc) {
		pages_free(&pg);
		return rc;
	}
	all.circuits = (Ocs__V1__Circuit **)pg.items;
	all.n_circuits = pg.n_items;
	if (x->o.json)
		rc = print_json(&r->base, true);
	else
		circuits_table(r->circuits, r->n_circuits);
	pages_free(&pg);
	return rc;
}

static int cmd_jobs(struct ctx *x)
{
	Ocs__V1__ListJobsRequest req = OCS__V1__LIST_JOBS_REQUEST__INIT;
	Ocs__V1__ListJobsResponse all = OCS__V1__LIST_JOBS_RESPONSE__INIT, *r = &all;
	struct table t = {.cols = 7};
	struct pages pg = {0};
	int rc;

	req.state = (Ocs__V1__JobState)x->o.state;
	rc = follow_pages(x, NB_JOBS_LIST_JOBS, &req.base, &req.page_token, &pg);
	all.jobs = (Ocs__V1__Job **)pg.items;
	all.n_jobs = pg.n_items;
	if (rc) {
		pages_free(&pg);
		return rc;
	}
	if (x->o.json) {
		rc = print_json(&r->base, true);
		pages_free(&pg);
		return rc;
	}
	{
		char *head[7] = {fmt("ID"),    fmt("STATE"), fmt("PLANNER"), fmt("GPUS"),
				 fmt("PAIRS"), fmt("LINKS"), fmt("REASON")};

		table_add(&t, head);
	}
	for (size_t i = 0; i < r->n_jobs; i++) {
		const Ocs__V1__Job *j = r->jobs[i];
		const Ocs__V1__JobSpec *s = j->spec;
		bool ring = s && s->demand_case == OCS__V1__JOB_SPEC__DEMAND_RING;
		char *row[7] = {
			fmt("%s", s ? s->id : ""),
			enum_short(&ocs__v1__job_state__descriptor, j->state),
			fmt("%s", j->figures ? j->figures->planner : ""),
			fmt("%lld", job_gpus(j)),
			s && s->demand_case == OCS__V1__JOB_SPEC__DEMAND_LEAF_DEMAND &&
					s->leaf_demand
				? fmt("%zu", s->leaf_demand->n_pairs)
				: fmt("-"),
			/* a ring job has rings, not links */
			ring ? fmt("%zu rings", j->n_rings)
			     : fmt("%d/%d", j->figures ? j->figures->links_placed : 0,
				   j->figures ? j->figures->links_requested : 0),
			fmt("%s", j->reason[0] ? j->reason : "-"),
		};

		table_add(&t, row);
	}
	table_print(&t);
	pages_free(&pg);
	return EXIT_OK;
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * The submitted job as it stands, for a submission whose answer ocsctl did
 * not wait for: looked up until found or until --timeout-ms (it may not
 * exist yet while a parallelism spec is searched). EXIT_OK and printed,
 * or EXIT_IN_PROGRESS with the reason.
 */
static int report_unanswered(struct ctx *x, const char *id, const char *why)
{
	Ocs__V1__GetJobRequest req = OCS__V1__GET_JOB_REQUEST__INIT;
	int64_t until = mono_ms() + x->o.timeout_ms;
	struct nb_client_status st;

	req.id = (char *)id;
	ocsctl_servers_set_timeout(x->servers, x->o.timeout_ms);
	for (;;) {
		Ocs__V1__GetJobResponse *r;
		const struct nb_method_info *info = nb_method_info(NB_JOBS_GET_JOB);

		if (ocsctl_servers_unary(x->servers, info->path, &req.base, info->response,
					 (ProtobufCMessage **)&r, &st) == 0) {
			char *state = enum_short(&ocs__v1__job_state__descriptor,
						 r->job ? r->job->state : 0);

			if (x->o.no_wait) {
				if (x->o.json)
					print_json(&r->base, true);
				else
					printf("job %s: %s (submitted; not waiting for the "
					       "outcome: ocsctl job show %s)\n",
					       id, state, id);
			} else {
				fprintf(stderr,
					"ocsctl: job %s: still %s %s; ocsctl stopped waiting and "
					"the job goes on (follow it with ocsctl job show %s or "
					"ocsctl watch)\n",
					id, state, why, id);
			}
			free(state);
			free_msg(r);
			return x->o.no_wait ? EXIT_OK : EXIT_IN_PROGRESS;
		}
		if (st.code != NB_NOT_FOUND || mono_ms() >= until)
			break;
		usleep(NO_WAIT_POLL_MS * 1000);
	}
	if (st.code == NB_NOT_FOUND)
		fprintf(stderr,
			"ocsctl: job %s: not accepted yet %s (a parallelism spec may still be "
			"searched); look again with ocsctl job show %s\n",
			id, why, id);
	else
		report_failure(x, &st);
	return EXIT_IN_PROGRESS;
}

/*
 * SubmitJob answers when the job settles (ACTIVE, or refused). --wait
 * gives it --wait-timeout-s; --no-wait gives it a moment, then reports the
 * accepted job as it stands. A deadline is never reported as an error
 * while the job goes on (issue 14 #15).
 */
static int submit(struct ctx *x, Ocs__V1__JobSpec *spec, Ocs__V1__SubmitJobResponse **r)
{
	const struct nb_method_info *info = nb_method_info(NB_JOBS_SUBMIT_JOB);
	struct nb_client_status st;
	char why[64];
	int rc;

	ocsctl_servers_set_timeout(x->servers, x->o.no_wait ? NO_WAIT_GRACE_MS
							    : (int)(x->o.wait_timeout_s * 1000));
	rc = ocsctl_servers_unary(x->servers, info->path, &spec->base, info->response,
				  (ProtobufCMessage **)r, &st);
	ocsctl_servers_set_timeout(x->servers, x->o.timeout_ms);
	if (rc == 0)
		return EXIT_OK;
	if (st.code != NB_DEADLINE_EXCEEDED || st.unreachable)
		return report_failure(x, &st);
	if (x->o.no_wait)
		snprintf(why, sizeof(why), "after --timeout-ms %d", x->o.timeout_ms);
	else
		snprintf(why, sizeof(why), "after --wait-timeout-s %ld", x->o.wait_timeout_s);
	return report_unanswered(x, spec->id, why);
}

static int cmd_job_file(struct ctx *x, Ocs__V1__JobSpec *spec, bool submit_it)
{
	int rc;

	if (submit_it) {
		Ocs__V1__SubmitJobResponse *r = NULL;

		rc = submit(x, spec, &r);
		if (rc == EXIT_OK && r) {
			if (x->o.json) {
				rc = print_json(&r->base, true);
			} else {
				char *state = enum_short(&ocs__v1__job_state__descriptor,
							 r->job ? r->job->state : 0);

				printf("job %s: %s (%s)\n\n", spec->id, state,
				       r->created ? "submitted" : "already submitted");
				free(state);
				if (r->job)
					print_job(r->job);
			}
			free_msg(r);
		}
	} else {
		Ocs__V1__PlanJobResponse *r;

		rc = call(x, NB_JOBS_PLAN_JOB, &spec->base, &r);
		if (rc == EXIT_OK) {
			if (x->o.json) {
				rc = print_json(&r->base, true);
			} else {
				printf("plan for job %s (dry run, nothing changed)\n\n", spec->id);
				print_figures(r->figures);
				printf("\n");
				if (spec->demand_case == OCS__V1__JOB_SPEC__DEMAND_RING)
					rings_table(r->rings, r->n_rings);
				else
					circuits_table(r->circuits, r->n_circuits);
			}
			free_msg(r);
		}
	}
	return rc;
}

static int cmd_job_id(struct ctx *x, const char *id, bool release)
{
	int rc;

	if (release) {
		Ocs__V1__ReleaseJobRequest req = OCS__V1__RELEASE_JOB_REQUEST__INIT;
		Ocs__V1__ReleaseJobResponse *r;

		req.id = (char *)id;
		rc = call(x, NB_JOBS_RELEASE_JOB, &req.base, &r);
		if (rc)
			return rc;
		if (x->o.json) {
			rc = print_json(&r->base, true);
		} else {
			char *state = enum_short(&ocs__v1__job_state__descriptor,
						 r->job ? r->job->state : 0);

			printf("job %s: %s\n", id, state);
			free(state);
		}
		free_msg(r);
	} else {
		Ocs__V1__GetJobRequest req = OCS__V1__GET_JOB_REQUEST__INIT;
		Ocs__V1__GetJobResponse *r;

		req.id = (char *)id;
		rc = call(x, NB_JOBS_GET_JOB, &req.base, &r);
		if (rc)
			return rc;
		if (x->o.json)
			rc = print_json(&r->base, true);
		else if (r->job)
			print_job(r->job);
		free_msg(r);
	}
	return rc;
}

static int cmd_drain(struct ctx *x, const char *device, bool drain)
{
	int rc;

	if (drain) {
		Ocs__V1__DrainDeviceRequest req = OCS__V1__DRAIN_DEVICE_REQUEST__INIT;
		Ocs__V1__DrainDeviceResponse *r;

		req.device = (char *)device;
		req.force = x->o.force;
		rc = call(x, NB_FABRIC_DRAIN_DEVICE, &req.base, &r);
		if (rc)
			return rc;
		if (x->o.json) {
			rc = print_json(&r->base, true);
		} else {
			printf("device %s: drained\n", device);
			for (size_t i = 0; i < r->n_affected_jobs; i++)
				printf("running job with circuits on it: %s\n",
				       r->affected_jobs[i]);
		}
		free_msg(r);
	} else {
		Ocs__V1__UndrainDeviceRequest req = OCS__V1__UNDRAIN_DEVICE_REQUEST__INIT;
		Ocs__V1__UndrainDeviceResponse *r;

		req.device = (char *)device;
		rc = call(x, NB_FABRIC_UNDRAIN_DEVICE, &req.base, &r);
		if (rc)
			return rc;
		if (x->o.json)
			rc = print_json(&r->base, true);
		else
			printf("device %s: undrained\n", device);
		free_msg(r);
	}
	return rc;
}

/*
 * rings --json: {"rings": [{"job_id", "ring", "nodes": [..], ...}]}, the
 * ring number under "ring" (the proto's Ring.index), then every other
 * field of Ring as pbjson writes it.
 */
static json_t *rings_json(const Ocs__V1__ListRingsResponse *r)
{
	json_t *list = json_array(), *top = json_object();

	if (!list || !top || json_object_set_new(top, "rings", list)) {
		json_decref(list);
		json_decref(top);
		return NULL;
	}
	for (size_t i = 0; i < r->n_rings; i++) {
		json_t *all = pbjson_write(&r->rings[i]->base), *ring = json_object();
		const char *key;
		json_t *value;
		bool ok = all && ring &&
			  !json_object_set(ring, "job_id", json_object_get(all, "job_id")) &&
			  !json_object_set_new(ring, "ring", json_integer(r->rings[i]->index)) &&
			  !json_object_set(ring, "nodes", json_object_get(all, "nodes"));

		json_object_foreach(all, key, value)
		{
			if (ok && !json_object_get(ring, key) && strcmp(key, "index") != 0)
				ok = !json_object_set(ring, key, value);
		}
		json_decref(all);
		if (!ok || json_array_append_new(list, ring)) {
			json_decref(ring);
			json_decref(top);
			return NULL;
		}
	}
	return top;
}

/* ---- drift (issue 14 #2) ---- */

static int cmd_drift(struct ctx *x)
{
	Ocs__V1__ListDriftRequest req = OCS__V1__LIST_DRIFT_REQUEST__INIT;
	Ocs__V1__ListDriftResponse *r;
	struct table t = {.cols = 4};
	char *head[4] = {fmt("DEVICE"), fmt("IN"), fmt("OUT"), fmt("DRIFT")};
	int rc;

	if (x->o.device)
		req.device = (char *)x->o.device;
	rc = call(x, NB_FABRIC_LIST_DRIFT, &req.base, &r);
	if (rc) {
		for (int i = 0; i < 4; i++)
			free(head[i]);
		return rc;
	}
	if (x->o.json) {
		for (int i = 0; i < 4; i++)
			free(head[i]);
		rc = print_json(&r->base, true);
		free_msg(r);
		return rc;
	}
	table_add(&t, head);
	for (size_t i = 0; i < r->n_cross_connects; i++) {
		const Ocs__V1__DriftCrossConnect *c = r->cross_connects[i];
		char *row[4] = {fmt("%s", c->device), fmt("%d", c->in_port), fmt("%d", c->out_port),
				fmt("%s", c->missing ? "missing" : "unowned")};

		table_add(&t, row);
	}
	table_print(&t);
	for (size_t i = 0; i < r->n_unverified_devices; i++)
		printf("not verified since an empty-store start (no new circuits): %s\n",
		       r->unverified_devices[i]);
	free_msg(r);
	return rc;
}

static Ocs__V1__DriftScope *drift_scope(const struct ctx *x, Ocs__V1__DriftScope *s)
{
	ocs__v1__drift_scope__init(s);
	if (x->o.device)
		s->device = (char *)x->o.device;
	s->has_ports = x->o.has_ports;
	s->in_port = x->o.in_port;
	s->out_port = x->o.out_port;
	return s;
}

static int cmd_adopt(struct ctx *x)
{
	Ocs__V1__AdoptCrossConnectsRequest req = OCS__V1__ADOPT_CROSS_CONNECTS_REQUEST__INIT;
	Ocs__V1__AdoptCrossConnectsResponse *r;
	Ocs__V1__DriftScope scope;
	int rc;

	req.scope = drift_scope(x, &scope);
	if (x->o.job)
		req.job_id = (char *)x->o.job;
	rc = call(x, NB_FABRIC_ADOPT_CROSS_CONNECTS, &req.base, &r);
	if (rc)
		return rc;
	if (x->o.json) {
		rc = print_json(&r->base, true);
	} else {
		printf("adopted %zu circuit(s) as job %s (job release %s frees them)\n",
		       r->n_circuits, r->job_id, r->job_id);
		circuits_table(r->circuits, r->n_circuits);
	}
	free_msg(r);
	return rc;
}

static int cmd_clear(struct ctx *x)
{
	Ocs__V1__ClearCrossConnectsRequest req = OCS__V1__CLEAR_CROSS_CONNECTS_REQUEST__INIT;
	Ocs__V1__ClearCrossConnectsResponse *r;
	Ocs__V1__DriftScope scope;
	int rc;

	req.scope = drift_scope(x, &scope);
	rc = call(x, NB_FABRIC_CLEAR_CROSS_CONNECTS, &req.base, &r);
	if (rc)
		return rc;
	if (x->o.json) {
		rc = print_json(&r->base, true);
	} else {
		printf("cleared %zu cross-connect(s)\n", r->n_cross_connects);
		for (size_t i = 0; i < r->n_cross_connects; i++)
			printf("%s %d->%d\n", r->cross_connects[i]->device,
			       r->cross_connects[i]->in_port, r->cross_connects[i]->out_port);
	}
	free_msg(r);
	return rc;
}

static int cmd_rings(struct ctx *x)
{
	Ocs__V1__ListRingsRequest req = OCS__V1__LIST_RINGS_REQUEST__INIT;
	Ocs__V1__ListRingsResponse *r;
	int rc;

	if (x->o.job)
		req.job_id = (char *)x->o.job;
	if (x->o.node >= 0) {
		req.has_node = true;
		req.node = x->o.node;
	}
	rc = call(x, NB_FABRIC_LIST_RINGS, &req.base, &r);
	if (rc)
		return rc;
	if (x->o.json) {
		json_t *v = rings_json(r);

		rc = print_json_value(v, true);
		json_decref(v);
	} else {
		rings_table(r->rings, r->n_rings);
	}
	free_msg(r);
	return rc;
}

static int cmd_node(struct ctx *x, long node, bool fail)
{
	Ocs__V1__MarkNodeRequest req = OCS__V1__MARK_NODE_REQUEST__INIT;
	Ocs__V1__MarkNodeResponse *r;
	int rc;

	req.node = (int32_t)node;
	req.condition = fail ? OCS__V1__NODE_CONDITION__NODE_CONDITION_FAULTY
			     : OCS__V1__NODE_CONDITION__NODE_CONDITION_HEALTHY;
	rc = call(x, NB_FABRIC_MARK_NODE, &req.base, &r);
	if (rc)
		return rc;
	if (x->o.json) {
		rc = print_json(&r->base, true);
	} else {
		char *cond = enum_short(&ocs__v1__node_condition__descriptor, r->condition);

		printf("node %d: %s\n", r->node, cond);
		for (size_t i = 0; i < r->n_affected_jobs; i++)
			printf("ring repaired for job %s\n", r->affected_jobs[i]);
		free(cond);
	}
	free_msg(r);
	return rc;
}

/* "ring JOB#K bypassed nodes=1,3 was=1,2,3 failed=2 reaction_us=.. devices_us=.." */
static void print_ring_event(const Ocs__V1__RingEvent *ev)
{
	const Ocs__V1__Ring *r = ev->ring;
	char *change, *nodes, *old;

	if (!r) {
		printf("ring (no ring)\n");
		return;
	}
	change = enum_short(&ocs__v1__ring_change__descriptor, r->last_change);
	nodes = nodes_text(r->nodes, r->n_nodes);
	old = nodes_text(ev->old_nodes, ev->n_old_nodes);
	printf("ring %s#%d %s nodes=%s", r->job_id, r->index, change, nodes);
	if (ev->n_old_nodes)
		printf(" was=%s", old);
	if (ring_failed(r))
		printf(" failed=%d", r->failed_node);
	if (ev->reaction_us || ev->devices_us)
		printf(" reaction_us=%lld devices_us=%lld", (long long)ev->reaction_us,
		       (long long)ev->devices_us);
	printf("%s%s\n", r->reason[0] ? ": " : "", r->reason);
	free(change);
	free(nodes);
	free(old);
}

static void print_event(const Ocs__V1__Event *e)
{
	char *when = time_text(e->time_unix_ms), *a = NULL, *b = NULL;

	printf("%llu  %s  ", (unsigned long long)e->seq, when);
	switch (e->kind_case) {
	case OCS__V1__EVENT__KIND_JOB:
		a = enum_short(&ocs__v1__job_state__descriptor, e->job->state);
		printf("job %s %s%s%s\n", e->job->job_id, a, e->job->reason[0] ? ": " : "",
		       e->job->reason);
		break;
	case OCS__V1__EVENT__KIND_DEVICE:
		a = enum_short(&ocs__v1__session_state__descriptor, e->device->session);
		b = enum_short(&ocs__v1__device_health__descriptor, e->device->health);
		printf("device %s session=%s health=%s drained=%s%s%s\n", e->device->device, a, b,
		       e->device->drained ? "yes" : "no",
		       e->device->session_error[0] ? " error=" : "", e->device->session_error);
		break;
	case OCS__V1__EVENT__KIND_TRANSACTION:
		a = enum_short(&ocs__v1__transaction_outcome__descriptor, e->transaction->outcome);
		printf("transaction %llu job %s %s (%zu devices)%s%s\n",
		       (unsigned long long)e->transaction->transaction_id, e->transaction->job_id,
		       a, e->transaction->n_devices, e->transaction->reason[0] ? ": " : "",
		       e->transaction->reason);
		break;
	case OCS__V1__EVENT__KIND_DRIFT:
		printf("drift %s %d->%d %s\n", e->drift->device, e->drift->in_port,
		       e->drift->out_port, e->drift->missing ? "missing" : "not owned by any job");
		break;
	case OCS__V1__EVENT__KIND_RING:
		print_ring_event(e->ring);
		break;
	case OCS__V1__EVENT__KIND_NODE:
		a = enum_short(&ocs__v1__node_condition__descriptor, e->node->condition);
		printf("node %d %s%s%s\n", e->node->node, a, e->node->source[0] ? " source=" : "",
		       e->node->source);
		break;
	case OCS__V1__EVENT__KIND_RAIL:
		ocsctl_rail_event(e->rail);
		break;
	case OCS__V1__EVENT__KIND_GPU:
		a = enum_short(&ocs__v1__gpu_condition__descriptor, e->gpu->condition);
		printf("gpu %lld %s%s%s\n", (long long)e->gpu->gpu, a,
		       e->gpu->source[0] ? " source=" : "", e->gpu->source);
		break;
	default:
		printf("(unknown event)\n");
		break;
	}
	free(when);
	free(a);
	free(b);
}

static int cmd_watch(struct ctx *x)
{
	Ocs__V1__WatchRequest req = OCS__V1__WATCH_REQUEST__INIT;
	/* Any replica serves Watch: the one connected to. */
	struct nb_client *client = ocsctl_servers_client(x->servers);
	struct nb_client_status st;
	long seen = 0;

	if (nb_client_stream_open(client, nb_method_path(NB_EVENTS_WATCH), &req.base, &st))
		return report_failure(x, &st);
	for (;;) {
		Ocs__V1__Event *e;
		int rc = nb_client_stream_next(client, &ocs__v1__event__descriptor,
					       (ProtobufCMessage **)&e, &st);

		if (rc != 0) {
			nb_client_stream_close(client);
			return report_failure(x, &st);
		}
		if (x->o.json && print_json(&e->base, false) != EXIT_OK) {
			free_msg(e);
			nb_client_stream_close(client);
			return EXIT_REFUSED;
		}
		if (!x->o.json)
			print_event(e);
		fflush(stdout);
		free_msg(e);
		if (x->o.count && ++seen >= x->o.count)
			break;
	}
	nb_client_stream_close(client);
	return EXIT_OK;
}

/* ---- main ----------------------------------------------------------------- */

static bool parse_int(const char *s, long lo, long hi, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

/* "active" or "JOB_STATE_ACTIVE" -> its value; -1 when unknown. */
static int job_state_from_name(const char *name)
{
	const ProtobufCEnumDescriptor *d = &ocs__v1__job_state__descriptor;

	for (unsigned i = 0; i < d->n_values; i++) {
		char *short_name = enum_short(d, d->values[i].value);
		/* any case: ACTIVE, active, JOB_STATE_ACTIVE */
		bool match = strcasecmp(name, short_name) == 0 ||
			     strcasecmp(name, d->values[i].name) == 0;

		free(short_name);
		if (match && d->values[i].value != 0)
			return d->values[i].value;
	}
	return -1;
}

static const char *env_or_null(const char *name)
{
	const char *v = getenv(name);

	return v && v[0] ? v : NULL;
}

enum opt_id {
	OPT_SERVER = 256,
	OPT_CA,
	OPT_CERT,
	OPT_KEY,
	OPT_INSECURE,
	OPT_JSON,
	OPT_TIMEOUT,
	OPT_JOB,
	OPT_DEVICE,
	OPT_POD,
	OPT_GROUP,
	OPT_FORCE,
	OPT_COUNT,
	OPT_STATE,
	OPT_NODE,
	OPT_WAIT,
	OPT_NO_WAIT,
	OPT_WAIT_TIMEOUT,
	OPT_PORTS,
	OPT_HB,
	OPT_RAIL,
};

/* ocsctl_rail.h's RPC routine: call() on the ctx. */
static int rail_call(void *x, enum nb_method m, const ProtobufCMessage *req, void *resp_out)
{
	return call(x, m, req, resp_out);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"server", required_argument, NULL, OPT_SERVER},
		{"ca", required_argument, NULL, OPT_CA},
		{"cert", required_argument, NULL, OPT_CERT},
		{"key", required_argument, NULL, OPT_KEY},
		{"insecure", no_argument, NULL, OPT_INSECURE},
		{"json", no_argument, NULL, OPT_JSON},
		{"timeout-ms", required_argument, NULL, OPT_TIMEOUT},
		{"job", required_argument, NULL, OPT_JOB},
		{"device", required_argument, NULL, OPT_DEVICE},
		{"pod", required_argument, NULL, OPT_POD},
		{"group", required_argument, NULL, OPT_GROUP},
		{"force", no_argument, NULL, OPT_FORCE},
		{"count", required_argument, NULL, OPT_COUNT},
		{"state", required_argument, NULL, OPT_STATE},
		{"node", required_argument, NULL, OPT_NODE},
		{"wait", no_argument, NULL, OPT_WAIT},
		{"no-wait", no_argument, NULL, OPT_NO_WAIT},
		{"wait-timeout-s", required_argument, NULL, OPT_WAIT_TIMEOUT},
		{"ports", required_argument, NULL, OPT_PORTS},
		{"hb", required_argument, NULL, OPT_HB},
		{"rail", required_argument, NULL, OPT_RAIL},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct ctx x = {.o = {.timeout_ms = DEFAULT_TIMEOUT_MS,
			      .pod = -1,
			      .group = -1,
			      .node = -1,
			      .hb = -1,
			      .rail = -1,
			      .wait_timeout_s = DEFAULT_WAIT_TIMEOUT_S}};
	struct nb_client_opts co = {0};
	struct nb_client_status st;
	Ocs__V1__JobSpec *spec = NULL;
	const char *cmd, *sub = NULL, *arg = NULL;
	bool used_job = false, used_device = false, used_pod = false, used_group = false,
	     used_force = false, used_count = false, used_state = false, used_node = false,
	     used_wait = false, used_no_wait = false, used_wait_timeout = false, used_ports = false,
	     used_rail = false;
	char err[320];
	long v, node = -1;
	int c, rc, nargs;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_SERVER:
			x.o.server = optarg;
			break;
		case OPT_CA:
			x.o.ca = optarg;
			break;
		case OPT_CERT:
			x.o.cert = optarg;
			break;
		case OPT_KEY:
			x.o.key = optarg;
			break;
		case OPT_INSECURE:
			x.o.insecure = true;
			break;
		case OPT_JSON:
			x.o.json = true;
			break;
		case OPT_TIMEOUT:
			if (!parse_int(optarg, 1, 3600000, &v))
				return usage_error(
					"--timeout-ms: '%s' is not a number in 1..3600000", optarg);
			x.o.timeout_ms = (int)v;
			break;
		case OPT_JOB:
			x.o.job = optarg;
			used_job = true;
			break;
		case OPT_DEVICE:
			x.o.device = optarg;
			used_device = true;
			break;
		case OPT_POD:
			if (!parse_int(optarg, 0, 1 << 30, &v))
				return usage_error("--pod: '%s' is not a pod number", optarg);
			x.o.pod = (int)v;
			used_pod = true;
			break;
		case OPT_GROUP:
			if (!parse_int(optarg, 0, 1 << 30, &v))
				return usage_error("--group: '%s' is not a group number", optarg);
			x.o.group = (int)v;
			used_group = true;
			break;
		case OPT_FORCE:
			x.o.force = true;
			used_force = true;
			break;
		case OPT_COUNT:
			if (!parse_int(optarg, 1, 1L << 40, &v))
				return usage_error("--count: '%s' is not a positive number",
						   optarg);
			x.o.count = v;
			used_count = true;
			break;
		case OPT_STATE:
			x.o.state = job_state_from_name(optarg);
			if (x.o.state <= 0)
				return usage_error(
					"--state: '%s' is not one of pending, planning, "
					"programming, active, releasing, released, failed",
					optarg);
			used_state = true;
			break;
		case OPT_NODE:
			if (!parse_int(optarg, 0, 1 << 30, &v))
				return usage_error("--node: '%s' is not a node number", optarg);
			x.o.node = (int)v;
			used_node = true;
			break;
		case OPT_WAIT:
			used_wait = true;
			break;
		case OPT_HB:
		case OPT_RAIL:
			if (!parse_int(optarg, 0, 1 << 30, &v))
				return usage_error("--%s: '%s' is not a %s number",
						   c == OPT_HB ? "hb" : "rail", optarg,
						   c == OPT_HB ? "server" : "rail");
			*(c == OPT_HB ? &x.o.hb : &x.o.rail) = (int)v;
			used_rail = true;
			break;
		case OPT_NO_WAIT:
			x.o.no_wait = true;
			used_no_wait = true;
			break;
		case OPT_WAIT_TIMEOUT:
			if (!parse_int(optarg, 1, 86400, &v))
				return usage_error("--wait-timeout-s: '%s' is not a number in "
						   "1..86400",
						   optarg);
			x.o.wait_timeout_s = v;
			used_wait_timeout = true;
			break;
		case OPT_PORTS: {
			int in, out, end = 0;

			if (sscanf(optarg, "%d:%d%n", &in, &out, &end) != 2 || optarg[end] ||
			    in < 0 || out < 0 || in > 65535 || out > 65535)
				return usage_error(
					"--ports: '%s' is not IN:OUT (two ports 0..65535)", optarg);
			x.o.has_ports = true;
			x.o.in_port = in;
			x.o.out_port = out;
			used_ports = true;
			break;
		}
		case 'h':
			fputs(usage_text, stdout);
			return EXIT_OK;
		case ':':
			return usage_error("option '%s' needs a value", argv[optind - 1]);
		default:
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	nargs = argc - optind;
	if (nargs < 1)
		return usage_error("a command is required");
	cmd = argv[optind];
	if (nargs > 1)
		sub = argv[optind + 1];
	if (nargs > 2)
		arg = argv[optind + 2];

	/* Which command, and does it get the arguments and flags it takes? */
	{
		int want_args = 1;

		if (strcmp(cmd, "job") == 0) {
			if (!sub || (strcmp(sub, "submit") && strcmp(sub, "plan") &&
				     strcmp(sub, "release") && strcmp(sub, "show")))
				return usage_error("job needs one of: submit FILE, plan FILE, "
						   "release ID, show ID");
			if (!arg)
				return usage_error("job %s needs %s", sub,
						   strcmp(sub, "submit") && strcmp(sub, "plan")
							   ? "a job ID"
							   : "a FILE");
			want_args = 3;
		} else if (strcmp(cmd, "node") == 0) {
			if (!sub || (strcmp(sub, "fail") && strcmp(sub, "heal")))
				return usage_error("node needs one of: fail NODE, heal NODE");
			if (!arg)
				return usage_error("node %s needs a NODE number", sub);
			if (!parse_int(arg, 0, 1 << 30, &node))
				return usage_error("node %s: '%s' is not a node number", sub, arg);
			want_args = 3;
		} else if (strcmp(cmd, "gpu") == 0) {
			if (!sub ||
			    (strcmp(sub, "replace") && strcmp(sub, "fail") && strcmp(sub, "heal")))
				return usage_error(
					"gpu needs one of: replace GPU, fail GPU, heal GPU");
			if (!arg || !parse_int(arg, 0, 1L << 40, &v))
				return usage_error("gpu %s needs a GPU number", sub);
			node = v;
			want_args = 3;
		} else if (strcmp(cmd, "drain") == 0 || strcmp(cmd, "undrain") == 0) {
			if (!sub)
				return usage_error("%s needs a DEVICE", cmd);
			want_args = 2;
		} else if (strcmp(cmd, "status") && strcmp(cmd, "fabric") &&
			   strcmp(cmd, "devices") && strcmp(cmd, "circuits") &&
			   strcmp(cmd, "jobs") && strcmp(cmd, "watch") && strcmp(cmd, "rings") &&
			   strcmp(cmd, "drift") && strcmp(cmd, "adopt") && strcmp(cmd, "clear") &&
			   strcmp(cmd, "rail-ports")) {
			return usage_error("unknown command '%s'", cmd);
		}
		if (nargs > want_args)
			return usage_error("unexpected argument '%s'", argv[optind + want_args]);
		if (used_job && strcmp(cmd, "circuits") && strcmp(cmd, "rings") &&
		    strcmp(cmd, "adopt") && strcmp(cmd, "rail-ports"))
			return usage_error("--job goes with circuits, rings, adopt and rail-ports");
		if (used_rail && strcmp(cmd, "rail-ports"))
			return usage_error("--hb and --rail go with rail-ports");
		if (used_pod && strcmp(cmd, "circuits"))
			return usage_error("--pod goes with circuits");
		if (used_device && strcmp(cmd, "circuits") && strcmp(cmd, "drift") &&
		    strcmp(cmd, "adopt") && strcmp(cmd, "clear"))
			return usage_error("--device goes with circuits, drift, adopt and clear");
		if (used_ports && strcmp(cmd, "adopt") && strcmp(cmd, "clear"))
			return usage_error("--ports goes with adopt and clear");
		if (used_ports && !used_device)
			return usage_error("--ports needs --device");
		if (used_node && strcmp(cmd, "rings"))
			return usage_error("--node goes with rings");
		if (used_group && strcmp(cmd, "devices"))
			return usage_error("--group goes with devices");
		if (used_force && strcmp(cmd, "drain"))
			return usage_error("--force goes with drain");
		if (used_state && strcmp(cmd, "jobs"))
			return usage_error("--state goes with jobs");
		if (used_count && strcmp(cmd, "watch"))
			return usage_error("--count goes with watch");
		if ((used_wait || used_no_wait || used_wait_timeout) &&
		    (strcmp(cmd, "job") || strcmp(sub, "submit")))
			return usage_error(
				"--wait, --no-wait and --wait-timeout-s go with job submit");
		if (used_no_wait && (used_wait || used_wait_timeout))
			return usage_error("--no-wait does not go with --wait or --wait-timeout-s");
	}

	if (!x.o.server)
		x.o.server = getenv("OCSD_SERVER");
	if (!x.o.insecure) { /* TLS files from the environment unless given */
		if (!x.o.ca)
			x.o.ca = env_or_null("OCSCTL_CA");
		if (!x.o.cert && !x.o.key) {
			x.o.cert = env_or_null("OCSCTL_CERT");
			x.o.key = env_or_null("OCSCTL_KEY");
		}
	}
	if (!x.o.server || !x.o.server[0])
		x.o.server = DEFAULT_SERVER;
	if (x.o.insecure && (x.o.ca || x.o.cert || x.o.key))
		return usage_error("--insecure does not go with --ca, --cert or --key");
	if (!x.o.insecure && !x.o.ca)
		return usage_error("TLS needs --ca FILE (or --insecure for a plaintext loopback "
				   "server)");
	if (!x.o.cert != !x.o.key)
		return usage_error("--cert and --key go together");

	/* Input errors (exit 2) before any network problem (exit 3). */
	if (strcmp(cmd, "job") == 0 && (strcmp(sub, "submit") == 0 || strcmp(sub, "plan") == 0)) {
		rc = load_job_file(arg, &spec);
		if (rc)
			return rc;
	}
	co.insecure = x.o.insecure;
	co.ca_file = x.o.ca;
	co.cert_file = x.o.cert;
	co.key_file = x.o.key;
	co.timeout_ms = x.o.timeout_ms;
	co.max_message_bytes = 64u << 20;
	x.servers = ocsctl_servers_new(x.o.server, &co, err, sizeof(err));
	if (!x.servers) {
		free_msg(spec);
		return usage_error("%s", err);
	}
	if (ocsctl_servers_connect(x.servers, &st)) {
		if (!st.unreachable) /* the TLS files: the same for every server */
			fprintf(stderr, "ocsctl: %s\n", st.message);
		else if (ocsctl_servers_listed(x.servers) == 1)
			fprintf(stderr, "ocsctl: cannot reach %s: %s\n", x.o.server, st.message);
		else
			fprintf(stderr, "ocsctl: cannot reach any of the %zu servers:\n%s",
				ocsctl_servers_listed(x.servers), ocsctl_servers_trail(x.servers));
		ocsctl_servers_free(x.servers);
		free_msg(spec);
		return st.unreachable ? EXIT_UNREACHABLE : EXIT_USAGE;
	}
	if (strcmp(cmd, "status") == 0)
		rc = cmd_status(&x);
	else if (strcmp(cmd, "fabric") == 0)
		rc = cmd_fabric(&x);
	else if (strcmp(cmd, "devices") == 0)
		rc = cmd_devices(&x);
	else if (strcmp(cmd, "circuits") == 0)
		rc = cmd_circuits(&x);
	else if (strcmp(cmd, "jobs") == 0)
		rc = cmd_jobs(&x);
	else if (strcmp(cmd, "watch") == 0)
		rc = cmd_watch(&x);
	else if (strcmp(cmd, "rings") == 0)
		rc = cmd_rings(&x);
	else if (strcmp(cmd, "node") == 0)
		rc = cmd_node(&x, node, strcmp(sub, "fail") == 0);
	else if (strcmp(cmd, "gpu") == 0)
		rc = ocsctl_gpu(&(struct ocsctl_rail){x.o.json, rail_call, &x}, sub, node);
	else if (strcmp(cmd, "rail-ports") == 0)
		rc = ocsctl_rail_ports(&(struct ocsctl_rail){x.o.json, rail_call, &x}, x.o.hb,
				       x.o.rail, x.o.job);
	else if (strcmp(cmd, "drain") == 0)
		rc = cmd_drain(&x, sub, true);
	else if (strcmp(cmd, "undrain") == 0)
		rc = cmd_drain(&x, sub, false);
	else if (strcmp(cmd, "drift") == 0)
		rc = cmd_drift(&x);
	else if (strcmp(cmd, "adopt") == 0)
		rc = cmd_adopt(&x);
	else if (strcmp(cmd, "clear") == 0)
		rc = cmd_clear(&x);
	else if (spec)
		rc = cmd_job_file(&x, spec, strcmp(sub, "submit") == 0);
	else
		rc = cmd_job_id(&x, arg, strcmp(sub, "release") == 0);
	ocsctl_servers_free(x.servers);
	free_msg(spec);
	return rc;
}
