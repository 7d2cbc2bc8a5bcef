/*
 * main.c - ocsplan, the offline front end of the solvers: one subcommand
 * per planner of the catalogue (solvers/planners.h), JSON request in, JSON
 * answer out (see solvers/README.md for every subcommand, option, field
 * and exit code).
 *
 * Each kind of demand has its family (families.def), in its own file
 * (leaf.c: leaf demands, delta.c: parallelism specs and DAGs), sharing the
 * I/O helpers of io.h. The what-if models (models.def; rail.c: rail-only) and
 * hbd-ring (hbd.c) are subcommands outside the planner catalogue.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "io.h"
#include "ocs_version.h"
#include "planners.h"

#define OCSPLAN_FAMILY(kind, fn, options)                                                          \
	int fn(const struct ocs_planner *planner, int argc, char **argv);
#include "families.def"
#undef OCSPLAN_FAMILY

#define OCSPLAN_MODEL(name, fn, options, summary) int fn(int argc, char **argv);
#include "models.def"
#undef OCSPLAN_MODEL

static const struct model {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *options;
	const char *summary;
} models[] = {
#define OCSPLAN_MODEL(name, fn, options, summary) {name, fn, options, summary},
#include "models.def"
#undef OCSPLAN_MODEL
};

struct family {
	int (*run)(const struct ocs_planner *planner, int argc, char **argv);
	const char *options;
};

/* Indexed by enum ocs_planner_demand; a kind without a family has run = NULL. */
static const struct family families[] = {
#define OCSPLAN_FAMILY(kind, fn, options) [kind] = {fn, options},
#include "families.def"
#undef OCSPLAN_FAMILY
};

static const struct family *family_of(const struct ocs_planner *p)
{
	if ((size_t)p->demand >= sizeof(families) / sizeof(families[0]) || !families[p->demand].run)
		return NULL;
	return &families[p->demand];
}

static void usage(FILE *fp)
{
	const struct ocs_planner *p;

	fprintf(fp, "usage: ocsplan SUBCOMMAND [options] [--in FILE] [--out FILE] [--pretty]\n"
		    "       ocsplan --version | --help | -h\n"
		    "subcommands:\n");
	for (size_t i = 0; (p = ocs_planner_at(i)) != NULL; i++)
		if (family_of(p))
			fprintf(fp, "  %-14s %s%s\n", p->name, family_of(p)->options, p->summary);
	for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++)
		fprintf(fp, "  %-14s %s%s\n", models[i].name, models[i].options, models[i].summary);
	fprintf(fp, "exit codes: 0 ok, 1 I/O or memory failure, 2 bad usage or invalid input\n");
}

int main(int argc, char **argv)
{
	const struct ocs_planner *p;

	/* a reader of --out or stdout that goes away fails the write (exit 1)
	 * instead of killing ocsplan unannounced */
	signal(SIGPIPE, SIG_IGN);
	if (argc < 2) {
		usage(stderr);
		return OCSPLAN_EXIT_INVALID;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(stdout);
		return OCSPLAN_EXIT_OK;
	}
	if (strcmp(argv[1], "--version") == 0) {
		ocs_version_print(stdout, "ocsplan", "jansson " JANSSON_VERSION);
		return OCSPLAN_EXIT_OK;
	}
	for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++)
		if (strcmp(argv[1], models[i].name) == 0)
			return models[i].run(argc - 1, argv + 1);
	p = ocs_planner_find(argv[1]);
	if (p && family_of(p))
		return family_of(p)->run(p, argc - 1, argv + 1);
	fprintf(stderr, "ocsplan: unknown subcommand \"%s\"\n", argv[1]);
	usage(stderr);
	return OCSPLAN_EXIT_INVALID;
}
