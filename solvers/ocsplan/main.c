/*
 * main.c - ocsplan, the offline front end of the solvers: one subcommand
 * per planner, JSON request in, JSON answer out (see solvers/README.md for
 * every subcommand, option, field and exit code).
 *
 * The subcommands come from families.def; each family lives in its own file
 * (leaf.c: leaf-centric and pod-centric) and shares the I/O helpers of io.h.
 */
#include <stdio.h>
#include <string.h>

#include "io.h"

#define OCSPLAN_SUB(name, fn, help) int fn(const char *sub, int argc, char **argv);
#include "families.def"
#undef OCSPLAN_SUB

struct subcommand {
	const char *name;
	int (*run)(const char *sub, int argc, char **argv);
	const char *help;
};

static const struct subcommand subcommands[] = {
#define OCSPLAN_SUB(name, fn, help) {name, fn, help},
#include "families.def"
#undef OCSPLAN_SUB
};

static void usage(FILE *fp)
{
	fprintf(fp, "usage: ocsplan SUBCOMMAND [options] [--in FILE] [--out FILE] [--pretty]\n"
		    "subcommands:\n");
	for (size_t i = 0; i < sizeof(subcommands) / sizeof(subcommands[0]); i++)
		fprintf(fp, "  %-14s %s\n", subcommands[i].name, subcommands[i].help);
	fprintf(fp, "exit codes: 0 ok, 1 I/O or memory failure, 2 bad usage or invalid input\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return OCSPLAN_EXIT_INVALID;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(stdout);
		return OCSPLAN_EXIT_OK;
	}
	for (size_t i = 0; i < sizeof(subcommands) / sizeof(subcommands[0]); i++)
		if (strcmp(argv[1], subcommands[i].name) == 0)
			return subcommands[i].run(argv[1], argc - 1, argv + 1);
	fprintf(stderr, "ocsplan: unknown subcommand \"%s\"\n", argv[1]);
	usage(stderr);
	return OCSPLAN_EXIT_INVALID;
}
