/*
 * main.c - the ocsd command line: check a fabric file, or run the daemon
 * (daemon.c) on one.
 *
 * Exit codes: 0 success, 1 runtime failure, 2 invalid configuration or usage.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "daemon.h"

#define OCSD_EXIT_OK 0
#define OCSD_EXIT_USAGE 2

static void usage(FILE *out)
{
	fprintf(out,
		"usage: ocsd --config FILE [--state-dir DIR] [--metrics-listen HOST:PORT]\n"
		"            [--solver-threads N]        run the daemon on a fabric\n"
		"       ocsd --check-config FILE         validate a fabric file, print its summary\n"
		"       ocsd --version | --help\n"
		"\n"
		"  --state-dir DIR          where ocsd.db lives (default $STATE_DIRECTORY, else\n"
		"                           /var/lib/ocsd)\n"
		"  --metrics-listen ADDR    Prometheus endpoint (default 127.0.0.1:9464)\n"
		"  --solver-threads N       planner threads (default: one per core)\n");
}

static int check_config(const char *path)
{
	struct cfg_errors errs = { 0 };
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
	printf("%s: OK\n", path);
	cfg_free(cfg);
	return OCSD_EXIT_OK;
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "check-config", required_argument, NULL, 'c' },
		{ "config", required_argument, NULL, 'f' },
		{ "state-dir", required_argument, NULL, 's' },
		{ "metrics-listen", required_argument, NULL, 'm' },
		{ "solver-threads", required_argument, NULL, 't' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct od_options run = { .metrics_listen = "127.0.0.1:9464" };
	const char *check = NULL;
	char *end;
	long n;
	int opt;

	run.state_dir = getenv("STATE_DIRECTORY") ? getenv("STATE_DIRECTORY") : "/var/lib/ocsd";
	while ((opt = getopt_long(argc, argv, "c:f:s:m:t:Vh", options, NULL)) != -1) {
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
		case 'V':
			printf("ocsd %s\n", OCSD_VERSION);
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
	if (check)
		return check_config(check);
	if (!run.config_path) {
		fprintf(stderr, "ocsd: --config FILE or --check-config FILE is required\n");
		usage(stderr);
		return OCSD_EXIT_USAGE;
	}
	return od_run(&run);
}
