/*
 * devsim.c - ocs-devsim, the ocsd device simulator: a real NETCONF server
 * (libnetconf2 server API over SSH or TLS, libyang datastores) behaving like
 * an optical circuit switch (model ocs-switch, or polatis: the Polatis
 * optical-switch model) or a node's OCS transceivers (model
 * ocs-transceiver). With --count N one process serves N independent
 * devices on consecutive TCP ports.
 *
 * This file wires the parts together for one run: the options
 * (devsim_opts.c), the libyang context (devsim_fleet_context_model()) and
 * libnetconf2's server with one
 * endpoint per device, the credentials (devsim_auth.c), the devices and
 * their NETCONF semantics (devsim_fleet.c), and the threads that serve the
 * sessions (devsim_server.c). main() owns one struct devsim and passes it
 * down; there is no file-scope state. SIGINT and SIGTERM are taken with
 * sigwait(2) on the main thread (every thread blocks them), so no handler
 * and no global flag are needed to stop cleanly.
 *
 * Exit status: 0 after a clean stop, 1 setup failure, 2 bad option (the
 * message names the option), 3 a port is in use.
 */
#include "devsim_auth.h"
#include "devsim_fleet.h"
#include "devsim_opts.h"
#include "devsim_server.h"
#include "ocs_version.h"

#include <errno.h>
#include <libssh/libssh.h>
#include <libyang/libyang.h>
#include <nc_server.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AUTH_TIMEOUT_S 5

enum devsim_exit {
	DEVSIM_EXIT_OK = 0,
	DEVSIM_EXIT_SETUP = 1,
	DEVSIM_EXIT_OPTION = 2,
	DEVSIM_EXIT_PORT = 3,
};

/* One run of ocs-devsim: everything it builds from its options, all owned. */
struct devsim {
	struct devsim_opts opts;
	struct ly_ctx *ctx; /* also libnetconf2's server context */
	struct devsim_auth auth;
	char *ca_fingerprint; /* TLS: of --tls-ca */
	bool nc_server_up;    /* nc_server_init() succeeded */
	struct devsim_fleet *fleet;
	struct devsim_server *server;
};

static bool devsim_tls(const struct devsim *ds)
{
	return ds->opts.tls_cert != NULL; /* devsim_opts_parse: all three TLS files, or none */
}

/* The credentials of the options: the CA's fingerprint (TLS) or the host key (SSH). */
static int devsim_setup_auth(struct devsim *ds)
{
	const struct devsim_opts *o = &ds->opts;
	ds->auth = (struct devsim_auth){
		.user = o->user,
		.password = o->password,
		.tls_cert = o->tls_cert,
		.tls_key = o->tls_key,
		.tls_ca = o->tls_ca,
	};
	if (devsim_tls(ds)) {
		ds->ca_fingerprint = devsim_auth_ca_fingerprint(o->tls_ca);
		if (!ds->ca_fingerprint) {
			fprintf(stderr,
				"ocs-devsim: --tls-ca: cannot read a PEM certificate from %s\n",
				o->tls_ca);
			return -EINVAL;
		}
		return 0;
	}
	if (o->hostkey) {
		ds->auth.hostkey_path = strdup(o->hostkey);
		return ds->auth.hostkey_path ? 0 : -ENOMEM;
	}
	int rc = devsim_auth_generate_hostkey(&ds->auth);
	if (rc)
		fprintf(stderr, "ocs-devsim: cannot generate an SSH host key: %s\n", strerror(-rc));
	return rc;
}

/* libnetconf2's server with one endpoint per device. Returns an enum devsim_exit. */
static int devsim_listen(struct devsim *ds)
{
	const struct devsim_opts *o = &ds->opts;
	if (nc_server_init(ds->ctx)) {
		fprintf(stderr, "ocs-devsim: nc_server_init failed\n");
		return DEVSIM_EXIT_SETUP;
	}
	ds->nc_server_up = true;
	nc_server_set_capability("urn:ietf:params:netconf:capability:notification:1.0");
	/* libnetconf2's own get-schema reply ends in a NUL byte that strict XML
	 * parsers (ncclient/lxml) reject; route it to the RPC callback instead */
	const struct lysc_node *gs =
		lys_find_path(ds->ctx, NULL, "/ietf-netconf-monitoring:get-schema", 0);
	if (gs)
		((struct lysc_node *)gs)->priv = NULL;
	devsim_auth_register(&ds->auth);
	if (o->authorized_key && nc_server_ssh_add_authkey_path(o->authorized_key, o->user)) {
		fprintf(stderr, "ocs-devsim: --authorized-key: cannot read %s\n",
			o->authorized_key);
		return DEVSIM_EXIT_SETUP;
	}
	int ssh_methods = (o->password ? NC_SSH_AUTH_PASSWORD : 0) |
			  (o->authorized_key ? NC_SSH_AUTH_PUBLICKEY : 0);
	for (int i = 0; i < o->count; i++) {
		char name[32];
		snprintf(name, sizeof(name), "dev%d", i);
		int setup =
			devsim_tls(ds)
				? devsim_auth_add_tls_endpoint(&ds->auth, name, ds->ca_fingerprint)
				: (nc_server_add_endpt(name, NC_TI_LIBSSH) ||
				   nc_server_ssh_endpt_add_hostkey(name, "hostkey", -1) ||
				   nc_server_ssh_endpt_set_auth_methods(name, ssh_methods) ||
				   nc_server_ssh_endpt_set_auth_timeout(name, AUTH_TIMEOUT_S));
		if (setup || nc_server_endpt_set_address(name, o->listen_addr) ||
		    nc_server_endpt_set_port(name, (uint16_t)(o->port + i))) {
			fprintf(stderr, "ocs-devsim: cannot listen on %s:%d (in use?)\n",
				o->listen_addr, o->port + i);
			return DEVSIM_EXIT_PORT;
		}
	}
	return DEVSIM_EXIT_OK;
}

/* Serves until SIGINT or SIGTERM. Returns an enum devsim_exit. */
static int devsim_serve(struct devsim *ds)
{
	const struct devsim_opts *o = &ds->opts;
	sigset_t stop_signals;
	sigemptyset(&stop_signals);
	sigaddset(&stop_signals, SIGINT);
	sigaddset(&stop_signals, SIGTERM);
	/* blocked before any thread starts, so every thread inherits the mask
	 * and only sigwait() below receives them */
	pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
	signal(SIGPIPE, SIG_IGN);
	ds->server = devsim_server_new(ds->fleet, (uint16_t)o->port, o->workers);
	int rc = ds->server ? devsim_server_start(ds->server) : -ENOMEM;
	if (rc) {
		fprintf(stderr, "ocs-devsim: cannot start the server threads: %s\n", strerror(-rc));
		return DEVSIM_EXIT_SETUP;
	}
	if (!devsim_tls(ds))
		devsim_auth_print_hostkey(&ds->auth);
	printf("ready %d device%s on %s:%d-%d model %s", o->count, o->count == 1 ? "" : "s",
	       o->listen_addr, o->port, o->port + o->count - 1, devsim_model_name(o->model));
	if (o->model != DEVSIM_MODEL_TRANSCEIVER)
		printf(" ports %d\n", o->ports);
	else
		printf(" nodes %d-%d bundles %d\n", o->node_base, o->node_base + o->count - 1,
		       o->bundles);
	fflush(stdout);
	int sig;
	while (sigwait(&stop_signals, &sig))
		; /* only fails for an invalid set */
	devsim_server_stop(ds->server);
	return DEVSIM_EXIT_OK;
}

/* Frees everything ds owns, in the reverse order of setup; ds may be partly set up. */
static void devsim_teardown(struct devsim *ds)
{
	devsim_server_free(ds->server); /* ends every session first */
	if (ds->nc_server_up)
		nc_server_destroy();
	devsim_fleet_free(ds->fleet);
	ly_ctx_destroy(ds->ctx);
	devsim_auth_clear(&ds->auth);
	free(ds->ca_fingerprint);
	devsim_opts_clear(&ds->opts);
}

int main(int argc, char **argv)
{
	struct devsim ds = {0};
	int rc = devsim_opts_parse(&ds.opts, argc, argv, stderr);
	if (rc == DEVSIM_OPTS_HELP)
		devsim_opts_help(stdout);
	if (rc == DEVSIM_OPTS_VERSION) {
		char libs[256];

		snprintf(libs, sizeof(libs), "libyang %s, libnetconf2 %s, libssh %s, %s",
			 DEVSIM_LIBYANG_VERSION, DEVSIM_NETCONF2_VERSION, ssh_version(0),
			 OpenSSL_version(OPENSSL_VERSION));
		ocs_version_print(stdout, "ocs-devsim", libs);
	}
	if (rc) {
		devsim_opts_clear(&ds.opts);
		return rc == DEVSIM_OPTS_HELP || rc == DEVSIM_OPTS_VERSION ? DEVSIM_EXIT_OK
		       : rc == -EINVAL					   ? DEVSIM_EXIT_OPTION
									   : DEVSIM_EXIT_SETUP;
	}
	nc_verbosity(NC_VERB_ERROR);
	if (devsim_fleet_context_model(ds.opts.ietf_dir, ds.opts.model, ds.opts.confirmed_commit,
				       &ds.ctx, stderr) ||
	    devsim_setup_auth(&ds)) {
		rc = DEVSIM_EXIT_SETUP;
	} else if (!(ds.fleet = devsim_fleet_new(ds.ctx, &ds.opts))) {
		fprintf(stderr, "ocs-devsim: out of memory for %d devices\n", ds.opts.count);
		rc = DEVSIM_EXIT_SETUP;
	} else {
		rc = devsim_listen(&ds);
		if (rc == DEVSIM_EXIT_OK)
			rc = devsim_serve(&ds);
	}
	devsim_teardown(&ds);
	return rc;
}
