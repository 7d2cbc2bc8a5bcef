/*
 * main.c - the ocsd command line. Today it offers the configuration check
 * (`--check-config FILE`): the daemon's event loop, northbound and
 * southbound attach here as they land (issue 5), and until then ocsd says
 * so instead of pretending to run.
 *
 * Exit codes: 0 success, 2 invalid configuration or usage.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

#define OCSD_EXIT_OK 0
#define OCSD_EXIT_USAGE 2

static void usage(FILE *out)
{
	fprintf(out,
		"usage: ocsd --check-config FILE   validate a fabric file and print its summary\n"
		"       ocsd --version\n"
		"       ocsd --help\n");
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
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *check = NULL;
	int opt;

	while ((opt = getopt_long(argc, argv, "c:Vh", options, NULL)) != -1) {
		switch (opt) {
		case 'c':
			check = optarg;
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
	fprintf(stderr, "ocsd: running the daemon is not available in this build yet; "
			"only --check-config is\n");
	usage(stderr);
	return OCSD_EXIT_USAGE;
}
