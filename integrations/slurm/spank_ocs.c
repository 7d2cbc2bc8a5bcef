/*
 * spank_ocs: the `--ocs=REQUEST` option of sbatch, salloc and srun.
 *
 * A SPANK plugin (plugstack.conf) that says how a job communicates, for
 * ocsd: ring or all-to-all among the job's leaves with links per leaf pair,
 * a DELTA parallelism spec read from a JSON file, TP rings on an OCSTrx ring
 * domain, or none. It checks the request's form when the job is submitted,
 * so that a typo fails at sbatch and not later in the queue, and hands it
 * to the controller's ocs-slurm prolog through the job control environment
 * (SPANK_OCS, and SPANK_OCS_PARALLELISM with the spec file's text, read on
 * the submit host where the user's file is). ocs-slurm parses the request
 * again and is the authority on it; this is a courtesy check.
 *
 * Grammar (README.md beside this file):
 *   ring[,links=N] | all-to-all[,links=N] | ring,tp=N | delta=FILE | rail | none
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <slurm/spank.h>

SPANK_PLUGIN(ocs, 1);

#define OCS_REQ_MAX   256   /* bytes of the --ocs text */
#define OCS_SPEC_MAX  65536 /* bytes of a parallelism spec file */
#define OCS_LINKS_MAX 64
#define OCS_TP_MAX    4096

/* The checked request, kept between the option callback and init_post_opt. */
static char ocs_req[OCS_REQ_MAX + 1];
static char *ocs_spec; /* the delta file's text; owned here */

/* A decimal in 1..max; false otherwise. */
static bool ocs_number(const char *s, long max)
{
	char *end;
	long v;

	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	v = strtol(s, &end, 10);
	return errno == 0 && *end == '\0' && v >= 1 && v <= max;
}

/* Reads path (at most OCS_SPEC_MAX bytes) into ocs_spec. */
static int ocs_read_spec(const char *path)
{
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f) {
		slurm_error("--ocs=delta=%s: %s", path, strerror(errno));
		return -1;
	}
	free(ocs_spec);
	ocs_spec = malloc(OCS_SPEC_MAX + 1);
	if (!ocs_spec) {
		fclose(f);
		return -1;
	}
	n = fread(ocs_spec, 1, OCS_SPEC_MAX + 1, f);
	fclose(f);
	if (n == 0 || n > OCS_SPEC_MAX) {
		slurm_error("--ocs=delta=%s: %s", path,
			    n ? "larger than 64 KiB" : "empty or unreadable");
		return -1;
	}
	ocs_spec[n] = '\0';
	return 0;
}

/* One "key=value" after the pattern word. */
static int ocs_check_part(const char *word, const char *part)
{
	if (strncmp(part, "links=", 6) == 0 &&
	    (strcmp(word, "ring") == 0 || strcmp(word, "all-to-all") == 0) &&
	    ocs_number(part + 6, OCS_LINKS_MAX))
		return 0;
	if (strncmp(part, "tp=", 3) == 0 && strcmp(word, "ring") == 0 &&
	    ocs_number(part + 3, OCS_TP_MAX))
		return 0;
	slurm_error("--ocs: '%s' does not fit '%s' (links=1..%d with ring or all-to-all; "
		    "tp=1..%d with ring)",
		    part, word, OCS_LINKS_MAX, OCS_TP_MAX);
	return -1;
}

static int ocs_option(int val, const char *optarg, int remote)
{
	char buf[OCS_REQ_MAX + 1], *save = NULL, *part, *word;

	(void)val;
	if (remote)
		return 0;
	if (!optarg || !*optarg || strlen(optarg) > OCS_REQ_MAX) {
		slurm_error("--ocs: want ring[,links=N], all-to-all[,links=N], ring,tp=N, "
			    "delta=FILE, rail or none (at most %d characters)",
			    OCS_REQ_MAX);
		return -1;
	}
	snprintf(buf, sizeof(buf), "%s", optarg);
	word = strtok_r(buf, ",", &save);
	if (!word)
		return -1;
	if (strncmp(word, "delta=", 6) == 0) {
		if (ocs_read_spec(word + 6) != 0)
			return -1;
		word = "delta";
	} else if (strcmp(word, "ring") != 0 && strcmp(word, "all-to-all") != 0 &&
		   strcmp(word, "rail") != 0 && strcmp(word, "none") != 0) {
		slurm_error(
			"--ocs: unknown pattern '%s' (ring, all-to-all, delta=FILE, rail, none)",
			word);
		return -1;
	}
	while ((part = strtok_r(NULL, ",", &save)))
		if (ocs_check_part(word, part) != 0)
			return -1;
	/* the file's path means nothing on the controller: pass "delta" */
	snprintf(ocs_req, sizeof(ocs_req), "%s", strcmp(word, "delta") == 0 ? "delta" : optarg);
	return 0;
}

static struct spank_option ocs_opt = {
	.name = "ocs",
	.arginfo = "REQUEST",
	.usage = "optical circuits for the job (ocsd): ring[,links=N], all-to-all[,links=N], "
		 "ring,tp=N, delta=FILE, rail or none",
	.has_arg = 1,
	.val = 0,
	.cb = ocs_option,
};

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	if (spank_context() == S_CTX_ALLOCATOR || spank_context() == S_CTX_LOCAL ||
	    spank_context() == S_CTX_REMOTE)
		return spank_option_register(sp, &ocs_opt) == ESPANK_SUCCESS ? 0 : -1;
	return 0;
}

/* After the options: put the request where the controller's prolog reads it. */
int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	if (!ocs_req[0] || (spank_context() != S_CTX_ALLOCATOR && spank_context() != S_CTX_LOCAL))
		return 0;
	if (spank_job_control_setenv(sp, "OCS", ocs_req, 1) != ESPANK_SUCCESS ||
	    (ocs_spec &&
	     spank_job_control_setenv(sp, "OCS_PARALLELISM", ocs_spec, 1) != ESPANK_SUCCESS)) {
		slurm_error("--ocs: cannot pass the request to the controller");
		return -1;
	}
	return 0;
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
	(void)sp;
	(void)ac;
	(void)av;
	free(ocs_spec);
	ocs_spec = NULL;
	return 0;
}
