/*
 * main.c - the ocsd command line: check a fabric file, or run the daemon
 * (daemon.h: od_run) on one.
 *
 * Exit codes: 0 success, 1 runtime failure, 2 invalid configuration or usage.
 */
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <event2/event.h>
#include <grpc/grpc.h>
#include <jansson.h>
#include <libssh/libssh.h>
#include <openssl/crypto.h>
#include <sqlite3.h>

#include "config.h"
#include "daemon.h"
#include "log.h"
#include "nb.h"
#include "ocs_version.h"

#define OCSD_EXIT_OK	0
#define OCSD_EXIT_USAGE 2
/* Retention of finished jobs: defaults, and the largest values accepted. */
#define OCSD_RETENTION_DAYS	7
#define OCSD_RETENTION_JOBS	10000
#define OCSD_RETENTION_DAYS_MAX 36500
#define OCSD_RETENTION_JOBS_MAX 100000000
/* The largest wave (--max-wave-jobs): a bound on one transaction's size. */
#define OCSD_MAX_WAVE_JOBS_MAX 4096

/* Long options without a short letter. */
enum {
	OPT_STORE = 256,
	OPT_ETCD_ENDPOINTS,
	OPT_ETCD_PREFIX,
	OPT_ETCD_CA,
	OPT_ETCD_CERT,
	OPT_ETCD_KEY,
	OPT_REPLICA_ID,
	OPT_ADVERTISE,
	OPT_LEADER_TTL,
	OPT_MAX_WAVE_JOBS,
};

static void usage(FILE *out)
{
	fprintf(out,
		"usage: ocsd --config FILE [--state-dir DIR] [--metrics-listen HOST:PORT]\n"
		"            [--solver-threads N]        run the daemon on a fabric\n"
		"       ocsd --check-config FILE         validate a fabric file, print its "
		"summary\n"
		"       ocsd --version | --help\n"
		"\n"
		"  --state-dir DIR          where ocsd.db lives (default $STATE_DIRECTORY, else\n"
		"                           /var/lib/ocsd)\n"
		"  --metrics-listen ADDR    Prometheus endpoint (default 127.0.0.1:9464)\n"
		"  --solver-threads N       planner threads (default: one per core)\n"
		"  --listen ADDR            gRPC API (default 127.0.0.1:50051)\n"
		"  --tls-ca FILE            CA that signs client certificates (mTLS)\n"
		"  --tls-cert FILE          server certificate\n"
		"  --tls-key FILE           server key\n"
		"  --insecure               plaintext gRPC without client certificates;\n"
		"                           refused unless --listen is a loopback address\n"
		"  --reconcile-interval-s N compare devices with the store every N s\n"
		"                           (default 60, 0 = only at start)\n"
		"  --retention-days N       delete released and failed jobs N days after they\n"
		"                           finished (default 7, 0 = no age limit)\n"
		"  --retention-jobs N       keep at most the N newest released and failed\n"
		"                           jobs (default 10000, 0 = no count limit)\n"
		"  --warm-start-ms N        before reporting READY, connect every device in\n"
		"                           parallel for at most N ms (default 2000, 0 = connect\n"
		"                           each device when first used)\n"
		"  --keepalive-interval-ms N check the devices' sessions every N ms in the\n"
		"                           background and replace dead ones (default 5000,\n"
		"                           100..600000, 0 = off)\n"
		"  --max-wave-jobs N        at most N waiting jobs programmed in one device\n"
		"                           transaction (a wave; default 64, 1..4096; 1 =\n"
		"                           one job per transaction)\n"
		"  --adopt-existing         on an empty state store, record the circuits the\n"
		"                           devices hold as job adopted-at-start\n"
		"  --clear-existing         on an empty state store, remove the cross-connects\n"
		"                           the devices hold (one transaction)\n"
		"  --store sqlite|etcd      where the state lives: one SQLite file in the\n"
		"                           state directory (default), or etcd, replicated\n"
		"  --etcd-endpoints URLS    http(s)://HOST:PORT[,...], tried in turn\n"
		"  --etcd-prefix P          key prefix (default /ocsd/<fabric name>/)\n"
		"  --etcd-ca FILE           CA that signs etcd's certificate (https)\n"
		"  --etcd-cert FILE         client certificate for etcd\n"
		"  --etcd-key FILE          its key\n"
		"  --replica-id NAME        with --advertise: one of several replicas on\n"
		"                           the prefix; waits as a standby until it leads\n"
		"  --advertise HOST:PORT    where clients reach this replica\n"
		"  --leader-ttl-s N         leader lease TTL (default 1, 1..60)\n");
}

static int check_config(const char *path)
{
	struct cfg_errors errs = {0};
	struct ocsd_config *cfg = NULL;

	if (cfg_load_file(path, &cfg, &errs) != 0) {
		fprintf(stderr, "%s: invalid fabric file (%d error%s)\n", path, errs.count,
			errs.count == 1 ? "" : "s");
		for (int i = 0; i < errs.count; i++)
			fprintf(stderr, "%s: %s\n", errs.items[i].path, errs.items[i].message);
		cfg_errors_clear(&errs);
		return OCSD_EXIT_USAGE;
	}
	cfg_print_summary(cfg, stdout);
	cfg_print_warnings(cfg, stderr);
	printf("%s: OK\n", path);
	cfg_free(cfg);
	return OCSD_EXIT_OK;
}

/*
 * Raises the soft limit on open files to the hard one: every gRPC and
 * metrics connection, device session and store file is a descriptor, and
 * Debian's default soft limit (1024) is low for a controller. The gRPC
 * server keeps its connections below the limit (nb_server.c). A failure
 * only leaves the limit as it was.
 */
static void raise_nofile_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= rl.rlim_max)
		return;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
		log_msg(LOG_WARNING, "cannot raise the open-file limit to %llu",
			(unsigned long long)rl.rlim_max);
}

/*
 * SIGPIPE is ignored, process-wide and before any thread exists (every
 * thread inherits the disposition): a peer that resets its connection - a
 * device, a gRPC client, a metrics scraper, etcd - then makes the next
 * write on that socket fail with EPIPE, which each caller handles, instead
 * of killing ocsd. OpenSSL and libssh write to their sockets without
 * MSG_NOSIGNAL (an SSL_read that answers a reset with an alert is enough:
 * issue H1).
 */
static void ignore_sigpipe(void)
{
	struct sigaction sa = {.sa_handler = SIG_IGN};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGPIPE, &sa, NULL);
}

/* --version: ocsd's version and git describe, and the libraries it runs on
 * (run-time versions where the library gives one, else those built against). */
static void print_version(void)
{
	char libs[512];

	snprintf(libs, sizeof(libs),
		 "gRPC core %s, libyang %s, libnetconf2 %s, libssh %s, %s, SQLite %s, "
		 "libevent %s, jansson %s",
		 grpc_version_string(), OCSD_LIBYANG_VERSION, OCSD_NETCONF2_VERSION, ssh_version(0),
		 OpenSSL_version(OPENSSL_VERSION), sqlite3_libversion(), event_get_version(),
		 JANSSON_VERSION);
	ocs_version_print(stdout, "ocsd", libs);
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{"check-config", required_argument, NULL, 'c'},
		{"config", required_argument, NULL, 'f'},
		{"state-dir", required_argument, NULL, 's'},
		{"metrics-listen", required_argument, NULL, 'm'},
		{"solver-threads", required_argument, NULL, 't'},
		{"listen", required_argument, NULL, 'l'},
		{"tls-ca", required_argument, NULL, 'A'},
		{"tls-cert", required_argument, NULL, 'C'},
		{"tls-key", required_argument, NULL, 'K'},
		{"insecure", no_argument, NULL, 'I'},
		{"reconcile-interval-s", required_argument, NULL, 'R'},
		{"retention-days", required_argument, NULL, 'D'},
		{"retention-jobs", required_argument, NULL, 'J'},
		{"warm-start-ms", required_argument, NULL, 'W'},
		{"keepalive-interval-ms", required_argument, NULL, 'k'},
		{"adopt-existing", no_argument, NULL, 'a'},
		{"clear-existing", no_argument, NULL, 'x'},
		{"store", required_argument, NULL, OPT_STORE},
		{"etcd-endpoints", required_argument, NULL, OPT_ETCD_ENDPOINTS},
		{"etcd-prefix", required_argument, NULL, OPT_ETCD_PREFIX},
		{"etcd-ca", required_argument, NULL, OPT_ETCD_CA},
		{"etcd-cert", required_argument, NULL, OPT_ETCD_CERT},
		{"etcd-key", required_argument, NULL, OPT_ETCD_KEY},
		{"replica-id", required_argument, NULL, OPT_REPLICA_ID},
		{"advertise", required_argument, NULL, OPT_ADVERTISE},
		{"leader-ttl-s", required_argument, NULL, OPT_LEADER_TTL},
		{"max-wave-jobs", required_argument, NULL, OPT_MAX_WAVE_JOBS},
		{"version", no_argument, NULL, 'V'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct od_options run = {.metrics_listen = "127.0.0.1:9464",
				 .listen = "127.0.0.1:50051",
				 .reconcile_interval_s = 60,
				 .retention_days = OCSD_RETENTION_DAYS,
				 .retention_jobs = OCSD_RETENTION_JOBS,
				 .warm_start_ms = 2000,
				 .keepalive_interval_ms = 5000};
	const char *check = NULL;
	char *end, err[256];
	int rc;
	long n;
	int opt;

	ignore_sigpipe();
	run.state_dir = getenv("STATE_DIRECTORY") ? getenv("STATE_DIRECTORY") : "/var/lib/ocsd";
	while ((opt = getopt_long(argc, argv, "c:f:s:m:t:l:A:C:K:IR:D:J:W:k:axVh", options,
				  NULL)) != -1) {
		switch (opt) {
		case 'c':
			check = optarg;
			break;
		case 'f':
			run.config_path = optarg;
			break;
		case 's':
			run.state_dir = optarg;
			break;
		case 'm':
			run.metrics_listen = optarg;
			break;
		case 't':
			n = strtol(optarg, &end, 10);
			if (*end || n < 0 || n > 256) {
				fprintf(stderr, "ocsd: --solver-threads: '%s' is not 0..256\n",
					optarg);
				return OCSD_EXIT_USAGE;
			}
			run.solver_threads = (unsigned)n;
			break;
		case 'l':
			run.listen = optarg;
			break;
		case 'A':
			run.tls_ca = optarg;
			break;
		case 'C':
			run.tls_cert = optarg;
			break;
		case 'K':
			run.tls_key = optarg;
			break;
		case 'I':
			run.insecure = true;
			break;
		case 'R':
			n = strtol(optarg, &end, 10);
			if (*end || n < 0 || n > 86400) {
				fprintf(stderr,
					"ocsd: --reconcile-interval-s: '%s' is not 0..86400\n",
					optarg);
				return OCSD_EXIT_USAGE;
			}
			run.reconcile_interval_s = (unsigned)n;
			break;
		case 'D':
			n = strtol(optarg, &end, 10);
			if (!*optarg || *end || n < 0 || n > OCSD_RETENTION_DAYS_MAX) {
				fprintf(stderr, "ocsd: --retention-days: '%s' is not 0..%d\n",
					optarg, OCSD_RETENTION_DAYS_MAX);
				return OCSD_EXIT_USAGE;
			}
			run.retention_days = (unsigned)n;
			break;
		case 'J':
			n = strtol(optarg, &end, 10);
			if (!*optarg || *end || n < 0 || n > OCSD_RETENTION_JOBS_MAX) {
				fprintf(stderr, "ocsd: --retention-jobs: '%s' is not 0..%d\n",
					optarg, OCSD_RETENTION_JOBS_MAX);
				return OCSD_EXIT_USAGE;
			}
			run.retention_jobs = (size_t)n;
			break;
		case 'W':
			n = strtol(optarg, &end, 10);
			if (!*optarg || *end || n < 0 || n > 600000) {
				fprintf(stderr, "ocsd: --warm-start-ms: '%s' is not 0..600000\n",
					optarg);
				return OCSD_EXIT_USAGE;
			}
			run.warm_start_ms = (unsigned)n;
			break;
		case 'k':
			n = strtol(optarg, &end, 10);
			if (!*optarg || *end || (n != 0 && (n < 100 || n > 600000))) {
				fprintf(stderr,
					"ocsd: --keepalive-interval-ms: '%s' is not 0 or "
					"100..600000\n",
					optarg);
				return OCSD_EXIT_USAGE;
			}
			run.keepalive_interval_ms = (unsigned)n;
			break;
		case 'a':
			run.adopt_existing = true;
			break;
		case 'x':
			run.clear_existing = true;
			break;
		case OPT_STORE:
			run.replica.store = optarg;
			break;
		case OPT_ETCD_ENDPOINTS:
			run.replica.etcd_endpoints = optarg;
			break;
		case OPT_ETCD_PREFIX:
			run.replica.etcd_prefix = optarg;
			break;
		case OPT_ETCD_CA:
			run.replica.etcd_ca = optarg;
			break;
		case OPT_ETCD_CERT:
			run.replica.etcd_cert = optarg;
			break;
		case OPT_ETCD_KEY:
			run.replica.etcd_key = optarg;
			break;
		case OPT_REPLICA_ID:
			run.replica.replica_id = optarg;
			break;
		case OPT_ADVERTISE:
			run.replica.advertise = optarg;
			break;
		case OPT_LEADER_TTL:
			n = strtol(optarg, &end, 10);
			if (!*optarg || *end || n < 1 || n > 60) {
				fprintf(stderr, "ocsd: --leader-ttl-s: '%s' is not 1..60\n",
					optarg);
				return OCSD_EXIT_USAGE;
			}
			run.replica.leader_ttl_s = (int)n;
			break;
		case OPT_MAX_WAVE_JOBS:
			n = strtol(optarg, &end, 10);
			if (!*optarg || *end || n < 1 || n > OCSD_MAX_WAVE_JOBS_MAX) {
				fprintf(stderr, "ocsd: --max-wave-jobs: '%s' is not 1..%d\n",
					optarg, OCSD_MAX_WAVE_JOBS_MAX);
				return OCSD_EXIT_USAGE;
			}
			run.max_wave_jobs = (size_t)n;
			break;
		case 'V':
			print_version();
			return OCSD_EXIT_OK;
		case 'h':
			usage(stdout);
			return OCSD_EXIT_OK;
		default:
			usage(stderr);
			return OCSD_EXIT_USAGE;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "ocsd: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return OCSD_EXIT_USAGE;
	}
	if (run.adopt_existing && run.clear_existing) {
		fprintf(stderr, "ocsd: --adopt-existing and --clear-existing exclude each other\n");
		return OCSD_EXIT_USAGE;
	}
	if (check)
		return check_config(check);
	if (!run.config_path) {
		fprintf(stderr, "ocsd: --config FILE or --check-config FILE is required\n");
		usage(stderr);
		return OCSD_EXIT_USAGE;
	}
	if (rp_check(&run.replica, err, sizeof(err)) != 0) {
		fprintf(stderr, "ocsd: %s\n", err);
		return OCSD_EXIT_USAGE;
	}
	log_init();
	log_route_libraries();
	raise_nofile_limit();
	rc = od_run(&run);
	if (!nb_grpc_settle(NB_SETTLE_MS))
		log_msg(LOG_WARNING, "gRPC had not ended %d ms after the stop; exiting anyway",
			NB_SETTLE_MS);
	return rc;
}
