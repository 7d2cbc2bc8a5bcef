/*
 * ocsctl.c - the command-line client of ocsd: a thin client over the same
 * ocs.v1 gRPC API that schedulers use (no private control path).
 *
 * Every command is one RPC (status: two) whose answer is printed as an
 * aligned table or key/value block for people, or as JSON with --json
 * (the response message itself, field names as in the proto); topology
 * reads a few and prints a drawing (DOT or SVG) instead. With
 * several --server addresses (ocsd replicas) ocsctl_servers.c picks the
 * replica that answers and follows a follower's redirect to the leader.
 * Exit codes:
 * 0 ok, 1 the server refused (any non-OK status), 2 usage or input error,
 * 3 the server could not be reached. northbound/README.md documents every
 * command and flag.
 *
 * This file parses the command line and runs the command: ocsctl_jobs.c
 * and ocsctl_fabric.c (and ocsctl_rail.c, ocsctl_topology.c) hold the commands,
 * ocsctl_rpc.c the calls, ocsctl_out.c the tables and JSON
 * (ocsctl_internal.h draws how they call each other).
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <grpc/grpc.h>
#include <jansson.h>
#include <protobuf-c/protobuf-c.h>

#include "ocsctl_internal.h"
#include "ocsctl_rail.h"
#include "ocs_version.h"

#define DEFAULT_SERVER	   "127.0.0.1:50051"
#define DEFAULT_TIMEOUT_MS 5000
/* submit --wait: how long ocsctl waits for the job's outcome. */
#define DEFAULT_WAIT_TIMEOUT_S 900
/* topology: edges (and devices) drawn one by one up to this many. */
#define DEFAULT_MAX_EDGES 1000

static const char usage_text[] =
	"usage: ocsctl [options] COMMAND [ARGS]\n"
	"\n"
	"commands:\n"
	"  status                     server health and a fabric summary\n"
	"  fabric                     the fabric's size, wiring and usage\n"
	"  devices [--group N]        OCS devices with session and health state, the ports\n"
	"                             they report down and what they say they are (vendor,\n"
	"                             model, serial, software)\n"
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
	"  job release ID             remove a job's circuits or rings (again when a\n"
	"                             FAILED job still lists circuits)\n"
	"  job show ID                a job, its plan figures and circuits or rings\n"
	"  rings [--job ID] [--node N]\n"
	"                             TP rings in place on an OCSTrx ring domain\n"
	"  node fail NODE             mark a ring-domain node faulty: it leaves every plan and\n"
	"                             its ring is extended or re-placed at once\n"
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
	"  drift [--device NAME]      cross-connects no job owns (unowned: planners keep\n"
	"                             off their ports) or that a job owns and its device\n"
	"                             lacks (missing); ring domains: bundles that differ\n"
	"                             from the ring state\n"
	"  adopt [--device NAME [--ports IN:OUT]] [--job ID]\n"
	"                             record unowned two-way circuits as job ID (default\n"
	"                             adopted-<unix time>); job release ID frees them\n"
	"  clear [--device NAME [--ports IN:OUT]]\n"
	"                             remove unowned cross-connects from the devices, whole\n"
	"                             circuits, in one transaction\n"
	"  cabling [--device NAME]    ports whose device reports the far end of their fibre\n"
	"                             other than the fabric file's wiring (miswired: no\n"
	"                             circuit is placed on them until cleared or fixed)\n"
	"  cabling clear DEVICE PORT  an operator's word that the port's fibre is right:\n"
	"                             planners use it again\n"
	"  topology [--format F] [--job ID] [--pod N] [--device NAME] [--max-edges N]\n"
	"                             the fabric drawn: Graphviz DOT (F: dot, the default)\n"
	"                             or SVG (F: svg, through graphviz's dot); pods, devices\n"
	"                             by state and circuits per job, ring-domain nodes and\n"
	"                             rings, or rail ports and swapped GPUs; above\n"
	"                             --max-edges (default 1000) edges it aggregates\n"
	"                             (ocsctl(1) says how)\n"
	"  watch [--count N]          stream events: jobs, devices, transactions, drift, rings\n"
	"                             nodes and cabling (stop after N with --count, or when\n"
	"                             the reader of stdout goes away)\n"
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
	"  -o, --columns COLS   tables: only these columns, in this order (header names,\n"
	"                       comma-separated, any case: -o id,state)\n"
	"  --no-headers         tables: no header row\n"
	"  --timeout-ms N       connect and call deadline (default 5000)\n"
	"  -q, --quiet          no progress line: job submit (waiting), job release, node\n"
	"                       fail and gpu replace show their job's phases and devices\n"
	"                       programmed on stderr when it is a terminal\n"
	"  -h, --help           this text\n"
	"  --version            ocsctl's version, git describe and libraries\n"
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

/* ---- "did you mean" -------------------------------------------------------- */

/* The commands, for suggestions only: main() below is what dispatches them. */
static const char *const commands[] = {
	"status", "fabric", "devices", "circuits",   "jobs",  "job",
	"rings",  "node",   "gpu",     "rail-ports", "drain", "undrain",
	"drift",  "adopt",  "clear",   "cabling",    "watch", "topology",
};

/* The edit distance of a and b (insertions, deletions, substitutions and
 * swaps of two neighbours), or 99 when a word is longer than 31 bytes. */
static int edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	int d[32][32];

	if (la > 31 || lb > 31)
		return 99;
	for (size_t i = 0; i <= la; i++)
		d[i][0] = (int)i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = (int)j;
	for (size_t i = 1; i <= la; i++)
		for (size_t j = 1; j <= lb; j++) {
			int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);

			if (d[i - 1][j] + 1 < best)
				best = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < best)
				best = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    d[i - 2][j - 2] + 1 < best)
				best = d[i - 2][j - 2] + 1;
			d[i][j] = best;
		}
	return d[la][lb];
}

/* The one candidate within 2 edits of word (1 for words of up to 4 bytes);
 * NULL when there is none, or two are as close. */
static const char *did_you_mean(const char *word, const char *const *cands, size_t n)
{
	int limit = strlen(word) <= 4 ? 1 : 2, best = limit + 1;
	const char *pick = NULL;

	for (size_t i = 0; i < n; i++) {
		int d = edit_distance(word, cands[i]);

		if (d < best) {
			best = d;
			pick = cands[i];
		} else if (d == best) {
			pick = NULL; /* a tie suggests nothing */
		}
	}
	return pick;
}

/* The message of an unknown long option: its name, and the closest one. */
static int unknown_option(const char *arg, const struct option *longopts)
{
	const char *names[64];
	char word[32];
	size_t n = 0;
	const char *hint;

	for (; longopts[n].name && n < sizeof(names) / sizeof(names[0]); n++)
		names[n] = longopts[n].name;
	snprintf(word, sizeof(word), "%s", arg + strspn(arg, "-"));
	word[strcspn(word, "=")] = '\0';
	hint = strncmp(arg, "--", 2) == 0 ? did_you_mean(word, names, n) : NULL;
	if (hint)
		return usage_error("unknown option '%s' (did you mean '--%s'?)", arg, hint);
	return usage_error("unknown option '%s'", arg);
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
		char *short_name = out_enum_short(d, d->values[i].value);
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
	OPT_NO_HEADERS,
	OPT_FORMAT,
	OPT_MAX_EDGES,
};

/* ocsctl_rail.h's RPC routine: rpc_call() on the ctx. */
static int rail_call(void *x, enum nb_method m, const ProtobufCMessage *req, void *resp_out)
{
	return rpc_call(x, m, req, resp_out);
}

/* Commands that wait for a job's transaction show a progress line on stderr
 * (ocsctl_progress.h): job submit (waiting), job release, node fail, gpu replace. */
static bool waits_for_outcome(const struct ctx *x, const char *cmd, const char *sub, bool job_file)
{
	if (strcmp(cmd, "job") == 0)
		return job_file ? strcmp(sub, "submit") == 0 && !x->o.no_wait
				: strcmp(sub, "release") == 0;
	if (strcmp(cmd, "node") == 0)
		return strcmp(sub, "fail") == 0;
	return strcmp(cmd, "gpu") == 0 && strcmp(sub, "replace") == 0;
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
		{"columns", required_argument, NULL, 'o'},
		{"no-headers", no_argument, NULL, OPT_NO_HEADERS},
		{"format", required_argument, NULL, OPT_FORMAT},
		{"max-edges", required_argument, NULL, OPT_MAX_EDGES},
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	struct ctx x = {.o = {.timeout_ms = DEFAULT_TIMEOUT_MS,
			      .pod = -1,
			      .group = -1,
			      .node = -1,
			      .hb = -1,
			      .rail = -1,
			      .max_edges = DEFAULT_MAX_EDGES,
			      .wait_timeout_s = DEFAULT_WAIT_TIMEOUT_S}};
	struct nb_client_opts co = {0};
	struct nb_client_status st;
	Ocs__V1__JobSpec *spec = NULL;
	const char *cmd, *sub = NULL, *arg = NULL, *arg2 = NULL;
	bool used_job = false, used_device = false, used_pod = false, used_group = false,
	     used_force = false, used_count = false, used_state = false, used_node = false,
	     used_wait = false, used_no_wait = false, used_wait_timeout = false, used_ports = false,
	     used_rail = false, no_headers = false, used_format = false, used_max_edges = false;
	const char *columns = NULL; /* -o */
	char err[320];
	long v, node = -1;
	int c, rc, nargs;

	/* a server that resets the connection, or a reader of stdout that goes
	 * away (ocsctl watch | head), fails the write with EPIPE instead of
	 * killing ocsctl unannounced (gRPC and OpenSSL write without
	 * MSG_NOSIGNAL); watch stops when stdout fails */
	signal(SIGPIPE, SIG_IGN);
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":ho:q", longopts, NULL)) != -1) {
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
		case 'o':
			if (!*optarg || strlen(optarg) > 200)
				return usage_error("-o: want column names, comma-separated "
						   "(at most 200 characters)");
			columns = optarg;
			break;
		case OPT_NO_HEADERS:
			no_headers = true;
			break;
		case 'q':
			x.o.quiet = true;
			break;
		case OPT_FORMAT:
			if (strcmp(optarg, "dot") && strcmp(optarg, "svg"))
				return usage_error("--format: '%s' is not dot or svg", optarg);
			x.o.svg = strcmp(optarg, "svg") == 0;
			used_format = true;
			break;
		case OPT_MAX_EDGES:
			if (!parse_int(optarg, 1, 1000000, &v))
				return usage_error(
					"--max-edges: '%s' is not a number in 1..1000000", optarg);
			x.o.max_edges = v;
			used_max_edges = true;
			break;
		case 'V': {
			char libs[160];

			snprintf(libs, sizeof(libs), "gRPC core %s, protobuf-c %s, jansson %s",
				 grpc_version_string(), protobuf_c_version(), JANSSON_VERSION);
			ocs_version_print(stdout, "ocsctl", libs);
			return EXIT_OK;
		}
		case ':':
			return usage_error("option '%s' needs a value", argv[optind - 1]);
		default:
			return unknown_option(argv[optind - 1], longopts);
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
	if (nargs > 3)
		arg2 = argv[optind + 3];

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
		} else if (strcmp(cmd, "cabling") == 0 && sub) {
			if (strcmp(sub, "clear"))
				return usage_error(
					"cabling takes no argument but: clear DEVICE PORT");
			if (!arg || !arg2)
				return usage_error("cabling clear needs a DEVICE and a PORT");
			if (!parse_int(arg2, 0, 65535, &v))
				return usage_error(
					"cabling clear: '%s' is not a port number 0..65535", arg2);
			node = v;
			want_args = 4;
		} else if (strcmp(cmd, "drain") == 0 || strcmp(cmd, "undrain") == 0) {
			if (!sub)
				return usage_error("%s needs a DEVICE", cmd);
			want_args = 2;
		} else if (strcmp(cmd, "status") && strcmp(cmd, "fabric") &&
			   strcmp(cmd, "devices") && strcmp(cmd, "circuits") &&
			   strcmp(cmd, "jobs") && strcmp(cmd, "watch") && strcmp(cmd, "rings") &&
			   strcmp(cmd, "drift") && strcmp(cmd, "adopt") && strcmp(cmd, "clear") &&
			   strcmp(cmd, "rail-ports") && strcmp(cmd, "cabling") &&
			   strcmp(cmd, "topology")) {
			const char *hint =
				did_you_mean(cmd, commands, sizeof(commands) / sizeof(commands[0]));

			if (hint)
				return usage_error("unknown command '%s' (did you mean '%s'?)", cmd,
						   hint);
			return usage_error("unknown command '%s'", cmd);
		}
		if (nargs > want_args)
			return usage_error("unexpected argument '%s'", argv[optind + want_args]);
		if (used_job && strcmp(cmd, "circuits") && strcmp(cmd, "rings") &&
		    strcmp(cmd, "adopt") && strcmp(cmd, "rail-ports") && strcmp(cmd, "topology"))
			return usage_error(
				"--job goes with circuits, rings, adopt, rail-ports and topology");
		if (used_rail && strcmp(cmd, "rail-ports"))
			return usage_error("--hb and --rail go with rail-ports");
		if (used_pod && strcmp(cmd, "circuits") && strcmp(cmd, "topology"))
			return usage_error("--pod goes with circuits and topology");
		if (used_device && strcmp(cmd, "circuits") && strcmp(cmd, "drift") &&
		    strcmp(cmd, "adopt") && strcmp(cmd, "clear") &&
		    (strcmp(cmd, "cabling") || sub) && strcmp(cmd, "topology"))
			return usage_error("--device goes with circuits, drift, adopt, clear, "
					   "cabling and topology");
		if ((used_format || used_max_edges) && strcmp(cmd, "topology"))
			return usage_error("--format and --max-edges go with topology");
		if (x.o.json && strcmp(cmd, "topology") == 0)
			return usage_error("topology prints DOT or SVG, not --json");
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
		if ((columns || no_headers) && x.o.json)
			return usage_error("-o and --no-headers shape tables, not --json");
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

	out_table_options(columns, no_headers);
	if (x.o.svg && !topo_dot_on_path()) {
		fprintf(stderr, "ocsctl: --format svg needs graphviz's dot on PATH (Debian "
				"package graphviz); --format dot prints the DOT text without it\n");
		return EXIT_USAGE;
	}
	/* Input errors (exit 2) before any network problem (exit 3). */
	if (strcmp(cmd, "job") == 0 && (strcmp(sub, "submit") == 0 || strcmp(sub, "plan") == 0)) {
		rc = jobs_load_job_file(arg, &spec);
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
		rpc_free_msg(spec);
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
		rpc_free_msg(spec);
		nb_grpc_settle(NB_SETTLE_MS);
		return st.unreachable ? EXIT_UNREACHABLE : EXIT_USAGE;
	}
	if (waits_for_outcome(&x, cmd, sub, spec != NULL)) {
		co.target = ocsctl_servers_current(x.servers);
		/* the job it follows: the spec's, the released one; a repair's: any */
		x.progress = prog_start(&co, co.target,
					spec			  ? spec->id
					: strcmp(cmd, "job") == 0 ? arg
								  : NULL,
					x.o.quiet, x.o.timeout_ms < 2000 ? x.o.timeout_ms : 2000);
	}
	if (strcmp(cmd, "status") == 0)
		rc = fabric_cmd_status(&x);
	else if (strcmp(cmd, "fabric") == 0)
		rc = fabric_cmd_fabric(&x);
	else if (strcmp(cmd, "devices") == 0)
		rc = fabric_cmd_devices(&x);
	else if (strcmp(cmd, "circuits") == 0)
		rc = fabric_cmd_circuits(&x);
	else if (strcmp(cmd, "jobs") == 0)
		rc = jobs_cmd_jobs(&x);
	else if (strcmp(cmd, "watch") == 0)
		rc = fabric_cmd_watch(&x);
	else if (strcmp(cmd, "rings") == 0)
		rc = fabric_cmd_rings(&x);
	else if (strcmp(cmd, "node") == 0)
		rc = fabric_cmd_node(&x, node, strcmp(sub, "fail") == 0);
	else if (strcmp(cmd, "gpu") == 0)
		rc = ocsctl_gpu(&(struct ocsctl_rail){x.o.json, rail_call, &x}, sub, node);
	else if (strcmp(cmd, "rail-ports") == 0)
		rc = ocsctl_rail_ports(&(struct ocsctl_rail){x.o.json, rail_call, &x}, x.o.hb,
				       x.o.rail, x.o.job);
	else if (strcmp(cmd, "drain") == 0)
		rc = fabric_cmd_drain(&x, sub, true);
	else if (strcmp(cmd, "undrain") == 0)
		rc = fabric_cmd_drain(&x, sub, false);
	else if (strcmp(cmd, "drift") == 0)
		rc = fabric_cmd_drift(&x);
	else if (strcmp(cmd, "adopt") == 0)
		rc = fabric_cmd_adopt(&x);
	else if (strcmp(cmd, "clear") == 0)
		rc = fabric_cmd_clear(&x);
	else if (strcmp(cmd, "cabling") == 0 && sub)
		rc = fabric_cmd_cabling_clear(&x, arg, node);
	else if (strcmp(cmd, "cabling") == 0)
		rc = fabric_cmd_cabling(&x);
	else if (strcmp(cmd, "topology") == 0)
		rc = topo_cmd_topology(&x);
	else if (spec)
		rc = jobs_cmd_job_file(&x, spec, strcmp(sub, "submit") == 0);
	else
		rc = jobs_cmd_job_id(&x, arg, strcmp(sub, "release") == 0);
	prog_stop(x.progress, false); /* a command that failed before its RPC */
	ocsctl_servers_free(x.servers);
	rpc_free_msg(spec);
	if (out_failed())
		rc = EXIT_USAGE;
	nb_grpc_settle(NB_SETTLE_MS);
	return rc;
}
