/*
 * devsim_opts.h - ocs-devsim's command line: one table of options (name,
 * argument, default, help text, parser) that both reads argv and prints
 * --help, and the parsed result, struct devsim_opts, from which ocs-devsim
 * builds everything else (devsim.c).
 *
 * Parsing goes through getopt_long(3), whose position in argv is
 * process-global: devsim_opts_parse() is not thread-safe. The rest is.
 */
#ifndef OCS_DEVSIM_OPTS_H
#define OCS_DEVSIM_OPTS_H

#include "devsim_fault.h"

#include <stdbool.h>
#include <stdio.h>

/* ocs-switch, ocs-transceiver, or a Polatis-like N x N switch (optical-switch). */
enum devsim_model { DEVSIM_MODEL_SWITCH, DEVSIM_MODEL_TRANSCEIVER, DEVSIM_MODEL_POLATIS };

/* A --fault given at start: the knobs of one device, or of all of them. */
struct devsim_start_fault {
	int device; /* -1: every device */
	struct devsim_faults faults;
};

/*
 * Every setting of the command line, defaults applied and cross-checked.
 * Strings are borrowed from argv (or are string literals) unless marked
 * owned; devsim_opts_clear() frees what is owned.
 */
struct devsim_opts {
	char *listen_addr; /* owned; --listen ADDR */
	int port;	   /* --listen PORT: the first device's */
	enum devsim_model model;
	int ports;     /* per device (ocs-switch); polatis: N of N x N */
	int switch_ms; /* resolved from the model when not given */
	int switch_us; /* the switching time every device uses: --switch-us, or
			  --switch-ms x 1000, or the model's default */
	/* ocs-transceiver: device i serves node node_base + i of a ring domain
	 * (solvers/fabric.h's numbering and deployment order); -1 before
	 * check_combination() resolves the defaults */
	int node_base;
	int ring_tors;
	int ring_nodes_per_tor;
	int ring_k;	  /* external paths reach 1..K positions each way */
	int bundles;	  /* transceiver bundles per node */
	bool ring_closed; /* the line is closed into a ring */
	int count;	  /* devices, on port .. port + count - 1 */
	bool bidirectional;
	bool confirmed_commit;
	int workers;
	const char *ietf_dir;
	const char *user;
	const char *password;	   /* NULL: public key authentication only; --password, or
				      password_secret read from --password-file */
	const char *password_file; /* --password-file FILE, NULL when not given */
	char *password_secret;	   /* owned; the first line of password_file */
	const char *authorized_key;
	const char *hostkey;  /* NULL: generate one */
	const char *tls_cert; /* all three set: TLS instead of SSH */
	const char *tls_key;
	const char *tls_ca;
	struct devsim_start_fault *faults; /* owned; in command-line order */
	int n_faults;
};

/* What devsim_opts_parse() found. */
enum devsim_opts_result {
	DEVSIM_OPTS_RUN = 0,	 /* *opts is complete and valid */
	DEVSIM_OPTS_HELP = 1,	 /* --help or -h: print devsim_opts_help() and exit */
	DEVSIM_OPTS_VERSION = 2, /* --version: print the version and exit */
};

/*
 * Parses argv into *opts (overwritten; call devsim_opts_clear() after any
 * return). Returns an enum devsim_opts_result, or -EINVAL after writing to
 * err a message that names the offending option, or -ENOMEM.
 */
int devsim_opts_parse(struct devsim_opts *opts, int argc, char **argv, FILE *err);

/* Prints the usage and every option with its argument, meaning and default. */
void devsim_opts_help(FILE *out);

/* Frees what opts owns; accepts NULL. */
void devsim_opts_clear(struct devsim_opts *opts);

/* "ocs-switch", "ocs-transceiver" or "polatis": the name --model takes. */
const char *devsim_model_name(enum devsim_model model);

#endif
