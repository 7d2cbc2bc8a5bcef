/*
 * devsim_opts.c - ocs-devsim's options (devsim_opts.h). The table below is
 * the only place an option is described: getopt_long(3)'s option array is
 * built from it, defaults are applied by running each default through the
 * option's own parser, and --help is printed from it. Checks that involve
 * several options (SSH or TLS credentials, the port range) run once argv is
 * read, in check_combination().
 */
#define _GNU_SOURCE /* strndup */
#include "devsim_opts.h"

#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_WORKERS  64 /* devsim_server keeps no per-worker state; a sane bound */
#define ERR_LEN	     256
#define HELP_COLUMNS 80

struct devsim_opt;

/* Parses arg into opts; 0, or -EINVAL with the reason (without the option's name) in err. */
typedef int (*devsim_opt_set_fn)(struct devsim_opts *opts, const struct devsim_opt *opt,
				 const char *arg, char *err, size_t err_len);

struct devsim_opt {
	const char *name; /* --name */
	const char *arg;  /* the argument's name in --help; NULL: a flag */
	/* applied through set() before argv is read; NULL: the field keeps the
	 * value devsim_opts_parse() starts from */
	const char *dflt;
	const char *dflt_help; /* the default as --help shows it; NULL: dflt */
	const char *help;
	devsim_opt_set_fn set;
	size_t field; /* the member of struct devsim_opts that set_int/str/flag write */
	int min, max; /* set_int's range */
};

static int *int_field(struct devsim_opts *o, const struct devsim_opt *opt)
{
	return (int *)(void *)((char *)o + opt->field);
}

static int parse_int(const char *s, int min, int max, int *out, char *err, size_t err_len)
{
	char *end = NULL;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (!*s || *end || errno || v < min || v > max) {
		snprintf(err, err_len, "expected an integer in %d..%d, got '%s'", min, max, s);
		return -EINVAL;
	}
	*out = (int)v;
	return 0;
}

static int set_int(struct devsim_opts *o, const struct devsim_opt *opt, const char *arg, char *err,
		   size_t err_len)
{
	return parse_int(arg, opt->min, opt->max, int_field(o, opt), err, err_len);
}

static int set_str(struct devsim_opts *o, const struct devsim_opt *opt, const char *arg, char *err,
		   size_t err_len)
{
	*(const char **)(void *)((char *)o + opt->field) = arg;
	return 0;
}

/* A flag: turns a setting that is off by default on. */
static int set_on(struct devsim_opts *o, const struct devsim_opt *opt, const char *arg, char *err,
		  size_t err_len)
{
	*(bool *)(void *)((char *)o + opt->field) = true;
	return 0;
}

/* A flag: turns a setting that is on by default off. */
static int set_off(struct devsim_opts *o, const struct devsim_opt *opt, const char *arg, char *err,
		   size_t err_len)
{
	*(bool *)(void *)((char *)o + opt->field) = false;
	return 0;
}

static int set_listen(struct devsim_opts *o, const struct devsim_opt *opt, const char *arg,
		      char *err, size_t err_len)
{
	const char *colon = strrchr(arg, ':');
	int port = 0;
	if (!colon || colon == arg || parse_int(colon + 1, 1, 65535, &port, err, err_len)) {
		snprintf(err, err_len, "expected ADDR:PORT with PORT in 1..65535, got '%s'", arg);
		return -EINVAL;
	}
	char *addr = strndup(arg, (size_t)(colon - arg));
	if (!addr)
		return -ENOMEM;
	free(o->listen_addr); /* the last --listen wins */
	o->listen_addr = addr;
	o->port = port;
	return 0;
}

static int set_model(struct devsim_opts *o, const struct devsim_opt *opt, const char *arg,
		     char *err, size_t err_len)
{
	if (!strcmp(arg, devsim_model_name(DEVSIM_MODEL_SWITCH))) {
		o->model = DEVSIM_MODEL_SWITCH;
	} else if (!strcmp(arg, devsim_model_name(DEVSIM_MODEL_TRANSCEIVER))) {
		o->model = DEVSIM_MODEL_TRANSCEIVER;
	} else if (!strcmp(arg, devsim_model_name(DEVSIM_MODEL_POLATIS))) {
		o->model = DEVSIM_MODEL_POLATIS;
	} else {
		snprintf(err, err_len,
			 "expected ocs-switch or ocs-transceiver (or polatis), got '%s'", arg);
		return -EINVAL;
	}
	return 0;
}

/* [I/]SPEC: the knobs of devsim_fault.h, for device I or every device. */
static int set_fault(struct devsim_opts *o, const struct devsim_opt *opt, const char *arg,
		     char *err, size_t err_len)
{
	struct devsim_start_fault f = {.device = -1};
	const char *spec = arg;
	const char *slash = strchr(arg, '/');
	if (slash && slash < arg + strcspn(arg, "@=")) {
		char index[16];
		snprintf(index, sizeof(index), "%.*s", (int)(slash - arg), arg);
		if (slash - arg >= (ptrdiff_t)sizeof(index) ||
		    parse_int(index, 0, INT32_MAX, &f.device, err, err_len)) {
			snprintf(err, err_len, "expected I/SPEC with a device index I, got '%s'",
				 arg);
			return -EINVAL;
		}
		spec = slash + 1;
	}
	if (devsim_faults_parse(spec, &f.faults, err, err_len))
		return -EINVAL;
	struct devsim_start_fault *grown =
		realloc(o->faults, sizeof(*o->faults) * (size_t)(o->n_faults + 1));
	if (!grown)
		return -ENOMEM;
	o->faults = grown;
	o->faults[o->n_faults++] = f;
	return 0;
}

#define FIELD(member) offsetof(struct devsim_opts, member)

/* Every option of ocs-devsim, in the order --help lists them. */
static const struct devsim_opt opt_table[] = {
	{.name = "listen",
	 .arg = "ADDR:PORT",
	 .dflt_help = "required",
	 .set = set_listen,
	 .help = "first device's address; with --count N, devices listen on PORT..PORT+N-1"},
	{.name = "model",
	 .arg = "MODEL",
	 .dflt = "ocs-switch",
	 .set = set_model,
	 .help = "ocs-switch, ocs-transceiver or polatis (N x N, optical-switch)"},
	{.name = "ports",
	 .arg = "N",
	 .dflt = "64",
	 .set = set_int,
	 .field = FIELD(ports),
	 .min = 1,
	 .max = 4096,
	 .help = "ports per device (polatis: N of N x N), 1..4096"},
	{.name = "user",
	 .arg = "U",
	 .dflt_help = "required",
	 .set = set_str,
	 .field = FIELD(user),
	 .help = "the user clients log in as (TLS: the user client certificates map to)"},
	{.name = "password",
	 .arg = "P",
	 .dflt_help = "none",
	 .set = set_str,
	 .field = FIELD(password),
	 .help = "SSH password authentication with this password (every user sees it in ps: "
		 "prefer --password-file)"},
	{.name = "password-file",
	 .arg = "FILE",
	 .dflt_help = "none",
	 .set = set_str,
	 .field = FIELD(password_file),
	 .help = "SSH password authentication with the first line of FILE (a warning when "
		 "other users may read FILE)"},
	{.name = "authorized-key",
	 .arg = "FILE",
	 .dflt_help = "none",
	 .set = set_str,
	 .field = FIELD(authorized_key),
	 .help = "SSH public key authentication with this OpenSSH public key file"},
	{.name = "hostkey",
	 .arg = "FILE",
	 .set = set_str,
	 .field = FIELD(hostkey),
	 .dflt_help = "a fresh ECDSA key in /tmp, removed at exit",
	 .help = "SSH host key"},
	{.name = "tls-cert",
	 .arg = "FILE",
	 .dflt_help = "none: SSH",
	 .set = set_str,
	 .field = FIELD(tls_cert),
	 .help = "NETCONF over TLS instead of SSH: the server certificate (PEM)"},
	{.name = "tls-key",
	 .arg = "FILE",
	 .dflt_help = "none: SSH",
	 .set = set_str,
	 .field = FIELD(tls_key),
	 .help = "TLS: the server certificate's key (PEM)"},
	{.name = "tls-ca",
	 .arg = "FILE",
	 .dflt_help = "none: SSH",
	 .set = set_str,
	 .field = FIELD(tls_ca),
	 .help = "TLS: the CA whose client certificates are accepted (as --user)"},
	{.name = "switch-ms",
	 .arg = "MS",
	 .set = set_int,
	 .field = FIELD(switch_ms),
	 .min = 0,
	 .max = 600000,
	 .dflt_help = "25 for ocs-switch; ocs-transceiver: see --switch-us",
	 .help = "time a changed connection stays pending, 0..600000"},
	{.name = "switch-us",
	 .arg = "US",
	 .set = set_int,
	 .field = FIELD(switch_us),
	 .min = 0,
	 .max = 600000000,
	 .dflt_help = "200 for ocs-transceiver; ocs-switch: see --switch-ms",
	 .help = "the same in microseconds (not with --switch-ms): a transceiver switches "
		 "in under 1 ms"},
	{.name = "node-base",
	 .arg = "N",
	 .set = set_int,
	 .field = FIELD(node_base),
	 .min = 0,
	 .max = 1 << 20,
	 .dflt_help = "0",
	 .help = "ocs-transceiver: device I serves node N+I of the ring domain"},
	{.name = "ring-tors",
	 .arg = "N",
	 .set = set_int,
	 .field = FIELD(ring_tors),
	 .min = 1,
	 .max = 1 << 20,
	 .dflt_help = "enough for node-base + count nodes",
	 .help = "ocs-transceiver: ToRs of the ring domain"},
	{.name = "ring-nodes-per-tor",
	 .arg = "N",
	 .set = set_int,
	 .field = FIELD(ring_nodes_per_tor),
	 .min = 1,
	 .max = 1 << 20,
	 .dflt_help = "1",
	 .help = "ocs-transceiver: nodes under each ToR (node n: ToR n / N, index n % N; "
		 "position index x tors + ToR)"},
	{.name = "ring-k",
	 .arg = "K",
	 .set = set_int,
	 .field = FIELD(ring_k),
	 .min = 1,
	 .max = 16,
	 .dflt_help = "2, or 1 in a domain of 2 nodes or fewer",
	 .help = "ocs-transceiver: external paths reach 1..K positions each way, 1..16"},
	{.name = "ring-closed",
	 .dflt_help = "off: an open line",
	 .set = set_on,
	 .field = FIELD(ring_closed),
	 .help = "ocs-transceiver: the line is closed into a ring (the first node joins the "
		 "last)"},
	{.name = "bundles",
	 .arg = "N",
	 .set = set_int,
	 .field = FIELD(bundles),
	 .min = 1,
	 .max = 64,
	 .dflt_help = "2",
	 .help = "ocs-transceiver: bundles per node, 1..64 (0 faces lower positions, 1 higher "
		 "ones, the rest stay on loopback)"},
	{.name = "fault",
	 .arg = "[I/]SPEC",
	 .dflt_help = "none",
	 .set = set_fault,
	 .help = "fault knobs at start, for device I or every device; repeatable"},
	{.name = "count",
	 .arg = "N",
	 .dflt = "1",
	 .set = set_int,
	 .field = FIELD(count),
	 .min = 1,
	 .max = 4096,
	 .help = "independent devices in one process, 1..4096"},
	{.name = "unidirectional",
	 .dflt_help = "off: ocs-switch devices are bidirectional",
	 .set = set_off,
	 .field = FIELD(bidirectional),
	 .help = "accept one-way connections (the reverse is on another device)"},
	{.name = "no-confirmed-commit",
	 .dflt_help = "off",
	 .set = set_off,
	 .field = FIELD(confirmed_commit),
	 .help = "do not offer :confirmed-commit (tests the compensating-edit strategy)"},
	{.name = "workers",
	 .arg = "N",
	 .dflt = "4",
	 .set = set_int,
	 .field = FIELD(workers),
	 .min = 1,
	 .max = MAX_WORKERS,
	 .help = "threads serving RPCs, 1..64; a hung RPC holds one"},
	{.name = "ietf-dir",
	 .arg = "DIR",
	 .dflt = "/usr/share/yuma/modules/ietf",
	 .set = set_str,
	 .field = FIELD(ietf_dir),
	 .help = "the IETF YANG modules: loaded, and served by get-schema"},
	{.name = "help", .dflt_help = "off", .help = "print this help and exit (also -h)"},
	{.name = "version",
	 .dflt_help = "off",
	 .help = "print the version, git describe and libraries, and exit"},
};

#define N_OPTS	(sizeof(opt_table) / sizeof(opt_table[0]))
#define OPT_VAL 256 /* getopt_long's val of opt_table[i] is OPT_VAL + i */

const char *devsim_model_name(enum devsim_model model)
{
	return model == DEVSIM_MODEL_SWITCH	   ? "ocs-switch"
	       : model == DEVSIM_MODEL_TRANSCEIVER ? "ocs-transceiver"
						   : "polatis";
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: ocs-devsim --listen ADDR:PORT --user U --password-file FILE [OPTION]...\n"
		"       ocs-devsim --listen ADDR:PORT --user U --authorized-key FILE [OPTION]...\n"
		"       ocs-devsim --listen ADDR:PORT --user U --tls-cert FILE --tls-key FILE\n"
		"                  --tls-ca FILE [OPTION]...\n");
}

/* Writes text from column `indent` on, wrapped at HELP_COLUMNS, and ends the line. */
static void print_wrapped(FILE *out, const char *text, int indent)
{
	int col = indent;
	while (*text) {
		size_t word = strcspn(text, " ");
		if (col > indent && col + 1 + (int)word > HELP_COLUMNS) {
			fprintf(out, "\n%*s", indent, "");
			col = indent;
		} else if (col > indent) {
			fputc(' ', out);
			col++;
		}
		fprintf(out, "%.*s", (int)word, text);
		col += (int)word;
		text += word;
		text += strspn(text, " ");
	}
	fputc('\n', out);
}

void devsim_opts_help(FILE *out)
{
	usage(out);
	fprintf(out,
		"A NETCONF device simulator: optical circuit switches (ocs-switch, or polatis:\n"
		"the optical-switch model) or a node's OCS transceivers (ocs-transceiver).\n"
		"Options, with their defaults in brackets:\n");
	int width = 0;
	for (size_t i = 0; i < N_OPTS; i++) {
		const struct devsim_opt *opt = &opt_table[i];
		int w = (int)strlen(opt->name) + (opt->arg ? 1 + (int)strlen(opt->arg) : 0);
		if (w > width)
			width = w;
	}
	for (size_t i = 0; i < N_OPTS; i++) {
		const struct devsim_opt *opt = &opt_table[i];
		char synopsis[64], text[512];
		snprintf(synopsis, sizeof(synopsis), "%s%s%s", opt->name, opt->arg ? " " : "",
			 opt->arg ? opt->arg : "");
		snprintf(text, sizeof(text), "%s [%s]", opt->help,
			 opt->dflt_help ? opt->dflt_help : opt->dflt);
		fprintf(out, "  --%-*s  ", width, synopsis);
		print_wrapped(out, text, width + 6);
	}
	fprintf(out, "Fault SPEC: refuse@STEP, drop@STEP, hang@STEP=MS, noeffect@commit, "
		     "garble@STEP,\ntrickle@STEP=MS, endless@STEP, fail-port=P, refuse-port=P, "
		     "peer-port=P:TEXT,\nnode-fault, comma-separated;\nSTEP+ makes a step's knobs "
		     "sticky (southbound/devsim/README.md).\n");
}

/* An ocs-switch takes no ring geometry: a ring option there is a mistake. */
static int check_no_ring(const struct devsim_opts *o, FILE *err)
{
	const char *given = o->node_base >= 0		 ? "node-base"
			    : o->ring_tors >= 0		 ? "ring-tors"
			    : o->ring_nodes_per_tor >= 0 ? "ring-nodes-per-tor"
			    : o->ring_k >= 0		 ? "ring-k"
			    : o->bundles >= 0		 ? "bundles"
			    : o->ring_closed		 ? "ring-closed"
							 : NULL;
	if (!given)
		return 0;
	fprintf(err, "ocs-devsim: --%s: only for --model ocs-transceiver\n", given);
	return -EINVAL;
}

/* The ring domain of ocs-transceiver devices: defaults, then every node served must exist. */
static int check_ring(struct devsim_opts *o, FILE *err)
{
	if (o->node_base < 0)
		o->node_base = 0;
	if (o->ring_nodes_per_tor < 0)
		o->ring_nodes_per_tor = 1;
	long served = (long)o->node_base + o->count;
	if (o->ring_tors < 0)
		o->ring_tors = (int)((served + o->ring_nodes_per_tor - 1) / o->ring_nodes_per_tor);
	bool k_given = o->ring_k >= 0;
	if (o->bundles < 0)
		o->bundles = 2;
	long nodes = (long)o->ring_tors * o->ring_nodes_per_tor;
	if (nodes > (1L << 20) || nodes < served) {
		fprintf(err,
			"ocs-devsim: --ring-tors: the domain has %ld nodes (--ring-tors x "
			"--ring-nodes-per-tor, at most %d), the devices serve nodes %d..%ld\n",
			nodes, 1 << 20, o->node_base, served - 1);
		return -EINVAL;
	}
	if (!k_given) /* 2, or less in a domain too small for it */
		o->ring_k = nodes > 2 ? 2 : 1;
	if (k_given && nodes > 1 && o->ring_k >= nodes) {
		fprintf(err, "ocs-devsim: --ring-k: %d reaches beyond the domain's %ld nodes\n",
			o->ring_k, nodes);
		return -EINVAL;
	}
	return 0;
}

/*
 * --password-file: the password is the file's first line without its line
 * end; a missing, unreadable or empty file, or a NUL byte in the line, is
 * refused. A file other users may read is accepted with a warning (the
 * simulator is a test tool; ocsd's own password file is checked the same
 * way by the operator's umask).
 */
static int read_password_file(struct devsim_opts *o, FILE *err)
{
	const char *path = o->password_file;
	FILE *f = fopen(path, "re");
	struct stat st;
	if (!f || fstat(fileno(f), &st)) {
		fprintf(err, "ocs-devsim: --password-file: cannot read %s: %s\n", path,
			strerror(errno));
		if (f)
			fclose(f);
		return -EINVAL;
	}
	char *line = NULL;
	size_t cap = 0;
	ssize_t len = getline(&line, &cap, f);
	int read_errno = errno;
	bool failed = ferror(f);
	fclose(f);
	size_t n = len < 0 ? 0 : (size_t)len;
	while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		n--;
	const char *why = failed ? strerror(read_errno)
			  : !n	 ? "the first line is empty (it must hold the password)"
			  : memchr(line, '\0', n) ? "the first line holds a NUL byte"
						  : NULL;
	if (why) {
		fprintf(err, "ocs-devsim: --password-file: %s%s: %s\n",
			failed ? "cannot read " : "", path, why);
		if (line) /* getline's buffer may hold part of the file: no copy stays behind */
			explicit_bzero(line, cap);
		free(line);
		return -EINVAL;
	}
	line[n] = '\0';
	if (S_ISREG(st.st_mode) && (st.st_mode & S_IROTH))
		fprintf(err,
			"ocs-devsim: warning: --password-file: %s is readable by every user "
			"(mode %04o): chmod o-r it\n",
			path, (unsigned)(st.st_mode & 07777));
	o->password_secret = line;
	o->password = line;
	return 0;
}

/* Cross-option checks and the defaults that depend on other options. */
static int check_combination(struct devsim_opts *o, FILE *err)
{
	if (!o->listen_addr) {
		fprintf(err, "ocs-devsim: --listen ADDR:PORT is required\n");
		usage(err);
		return -EINVAL;
	}
	bool tls = o->tls_cert || o->tls_key || o->tls_ca;
	if (tls && !(o->tls_cert && o->tls_key && o->tls_ca && o->user)) {
		fprintf(err,
			"ocs-devsim: TLS needs --tls-cert, --tls-key, --tls-ca and --user (the "
			"name clients signed by the CA are mapped to)\n");
		return -EINVAL;
	}
	if (o->password && o->password_file) {
		fprintf(err, "ocs-devsim: --password-file: give --password or --password-file, "
			     "not both\n");
		return -EINVAL;
	}
	if (o->password_file && read_password_file(o, err))
		return -EINVAL;
	if (!tls && (!o->user || (!o->password && !o->authorized_key))) {
		fprintf(err, "ocs-devsim: --user and --password (or --password-file) and/or "
			     "--authorized-key are required\n");
		return -EINVAL;
	}
	if (o->port + o->count - 1 > 65535) {
		fprintf(err, "ocs-devsim: --count %d does not fit above port %d\n", o->count,
			o->port);
		return -EINVAL;
	}
	if (o->switch_ms >= 0 && o->switch_us >= 0) {
		fprintf(err,
			"ocs-devsim: --switch-us: give --switch-ms or --switch-us, not both\n");
		return -EINVAL;
	}
	bool trx = o->model == DEVSIM_MODEL_TRANSCEIVER;
	if (o->switch_us < 0)
		o->switch_us = o->switch_ms >= 0 ? o->switch_ms * 1000 : trx ? 200 : 25000;
	if (o->switch_ms < 0)
		o->switch_ms = o->switch_us / 1000;
	if (trx || o->model == DEVSIM_MODEL_POLATIS)
		o->bidirectional = false; /* a polatis pair is one-way, as on the real switch */
	return trx ? check_ring(o, err) : check_no_ring(o, err);
}

/* Runs one option's parser; the error names the option. */
static int apply(struct devsim_opts *o, const struct devsim_opt *opt, const char *arg, FILE *err)
{
	char msg[ERR_LEN] = "";
	int rc = opt->set(o, opt, arg, msg, sizeof(msg));
	if (rc == -EINVAL)
		fprintf(err, "ocs-devsim: --%s: %s\n", opt->name, msg);
	else if (rc)
		fprintf(err, "ocs-devsim: --%s: %s\n", opt->name, strerror(-rc));
	return rc;
}

int devsim_opts_parse(struct devsim_opts *o, int argc, char **argv, FILE *err)
{
	*o = (struct devsim_opts){.switch_ms = -1,
				  .switch_us = -1,
				  .node_base = -1,
				  .ring_tors = -1,
				  .ring_nodes_per_tor = -1,
				  .ring_k = -1,
				  .bundles = -1,
				  .bidirectional = true,
				  .confirmed_commit = true};
	struct option longopts[N_OPTS + 1];
	for (size_t i = 0; i < N_OPTS; i++) {
		const struct devsim_opt *opt = &opt_table[i];
		longopts[i] = (struct option){opt->name, opt->arg ? required_argument : no_argument,
					      NULL, OPT_VAL + (int)i};
		if (opt->dflt && apply(o, opt, opt->dflt, err))
			return -EINVAL; /* a broken table: the test suite catches it */
	}
	longopts[N_OPTS] = (struct option){0};

	optind = 0; /* glibc: start over, parsing may run more than once */
	opterr = 0; /* the messages below name the option */
	int c;
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		const char *bad = argv[optind - 1];
		if (c == 'h')
			return DEVSIM_OPTS_HELP;
		if (c == ':' || c == '?') {
			if (c == ':')
				fprintf(err, "ocs-devsim: %s: needs an argument\n", bad);
			else if (optopt >= OPT_VAL)
				fprintf(err, "ocs-devsim: --%s: takes no argument\n",
					opt_table[optopt - OPT_VAL].name);
			else
				fprintf(err, "ocs-devsim: unknown option '%s'\n", bad);
			usage(err);
			return -EINVAL;
		}
		const struct devsim_opt *opt = &opt_table[c - OPT_VAL];
		if (!opt->set) /* --help and --version, the options without a parser */
			return strcmp(opt->name, "version") == 0 ? DEVSIM_OPTS_VERSION
								 : DEVSIM_OPTS_HELP;
		int rc = apply(o, opt, optarg, err);
		if (rc)
			return rc;
	}
	if (optind < argc) {
		fprintf(err, "ocs-devsim: unexpected argument '%s'\n", argv[optind]);
		usage(err);
		return -EINVAL;
	}
	return check_combination(o, err);
}

void devsim_opts_clear(struct devsim_opts *o)
{
	if (!o)
		return;
	free(o->listen_addr);
	free(o->faults);
	if (o->password_secret) /* no copy of the secret outlives the options */
		explicit_bzero(o->password_secret, strlen(o->password_secret));
	free(o->password_secret);
	o->listen_addr = NULL;
	o->faults = NULL;
	o->password_secret = NULL;
	o->password = NULL;
	o->n_faults = 0;
}
