/*
 * ocsctl_jobs.c - ocsctl's job commands (the Jobs service): jobs, job
 * submit FILE (waiting for the outcome, or --no-wait), job plan FILE, job
 * release ID and job show ID, and the JSON job file they read.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nb_internal.h"
#include "ocsctl_internal.h"
#include "pbjson.h"

/* submit --no-wait: how long SubmitJob may answer by itself before ocsctl
 * looks for the accepted job instead. */
#define NO_WAIT_GRACE_MS 300
#define NO_WAIT_POLL_MS	 100

int jobs_load_job_file(const char *path, Ocs__V1__JobSpec **out)
{
	FILE *f = fopen(path, "rb");
	char *text = NULL, err[320];
	struct ocs_json_error jerr;
	size_t len = 0;
	json_t *v;

	*out = NULL;
	if (!f) {
		fprintf(stderr, "ocsctl: %s: %s\n", path, strerror(errno));
		return EXIT_USAGE;
	}
	if (fseek(f, 0, SEEK_END) == 0) {
		long n = ftell(f);

		if (n >= 0 && n <= 64 << 20 && fseek(f, 0, SEEK_SET) == 0) {
			text = malloc((size_t)n + 1);
			if (text && fread(text, 1, (size_t)n, f) == (size_t)n)
				len = (size_t)n;
			else {
				free(text);
				text = NULL;
			}
		}
	}
	fclose(f);
	if (!text) {
		fprintf(stderr, "ocsctl: %s: unreadable or over 64 MiB\n", path);
		return EXIT_USAGE;
	}
	v = ocs_json_parse(text, len, &jerr);
	free(text);
	if (!v) {
		/* "job.json: placement: duplicate key "gpus"", "job.json: line 1, ..." */
		fprintf(stderr, "ocsctl: %s: %s%s%s\n", path, jerr.path, jerr.path[0] ? ": " : "",
			jerr.message);
		return EXIT_USAGE;
	}
	*out = (Ocs__V1__JobSpec *)pbjson_read(v, &ocs__v1__job_spec__descriptor, err, sizeof(err));
	json_decref(v);
	if (!*out) {
		fprintf(stderr, "ocsctl: %s: %s\n", path, err);
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

int jobs_cmd_jobs(struct ctx *x)
{
	Ocs__V1__ListJobsRequest req = OCS__V1__LIST_JOBS_REQUEST__INIT;
	Ocs__V1__ListJobsResponse all = OCS__V1__LIST_JOBS_RESPONSE__INIT, *r = &all;
	struct out_table t = {.cols = 7};
	struct rpc_pages pg = {0};
	int rc;

	req.state = (Ocs__V1__JobState)x->o.state;
	rc = rpc_follow_pages(x, NB_JOBS_LIST_JOBS, &req.base, &req.page_token, &pg);
	all.jobs = (Ocs__V1__Job **)pg.items;
	all.n_jobs = pg.n_items;
	if (rc) {
		rpc_pages_free(&pg);
		return rc;
	}
	if (x->o.json) {
		rc = out_print_json(&r->base, true);
		rpc_pages_free(&pg);
		return rc;
	}
	{
		char *head[7] = {out_fmt("ID"),	   out_fmt("STATE"), out_fmt("PLANNER"),
				 out_fmt("GPUS"),  out_fmt("PAIRS"), out_fmt("LINKS"),
				 out_fmt("REASON")};

		out_table_header(&t, head);
	}
	for (size_t i = 0; i < r->n_jobs; i++) {
		const Ocs__V1__Job *j = r->jobs[i];
		const Ocs__V1__JobSpec *s = j->spec;
		bool ring = s && s->demand_case == OCS__V1__JOB_SPEC__DEMAND_RING;
		char *row[7] = {
			out_fmt("%s", s ? s->id : ""),
			out_enum_short(&ocs__v1__job_state__descriptor, j->state),
			out_fmt("%s", j->figures ? j->figures->planner : ""),
			out_fmt("%lld", out_job_gpus(j)),
			s && s->demand_case == OCS__V1__JOB_SPEC__DEMAND_LEAF_DEMAND &&
					s->leaf_demand
				? out_fmt("%zu", s->leaf_demand->n_pairs)
				: out_fmt("-"),
			/* a ring job has rings, not links */
			ring ? out_fmt("%zu rings", j->n_rings)
			     : out_fmt("%d/%d", j->figures ? j->figures->links_placed : 0,
				       j->figures ? j->figures->links_requested : 0),
			out_fmt("%s", j->reason[0] ? j->reason : "-"),
		};

		out_table_add(&t, row);
	}
	out_table_print(&t);
	rpc_pages_free(&pg);
	return EXIT_OK;
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * The submitted job as it stands, for a submission whose answer ocsctl did
 * not wait for: looked up until found or until --timeout-ms (it may not
 * exist yet while a parallelism spec is searched). EXIT_OK and printed,
 * or EXIT_IN_PROGRESS with the reason.
 */
static int report_unanswered(struct ctx *x, const char *id, const char *why)
{
	Ocs__V1__GetJobRequest req = OCS__V1__GET_JOB_REQUEST__INIT;
	int64_t until = mono_ms() + x->o.timeout_ms;
	struct nb_client_status st;

	req.id = (char *)id;
	ocsctl_servers_set_timeout(x->servers, x->o.timeout_ms);
	for (;;) {
		Ocs__V1__GetJobResponse *r;
		const struct nb_method_info *info = nb_method_info(NB_JOBS_GET_JOB);

		if (ocsctl_servers_unary(x->servers, info->path, &req.base, info->response,
					 (ProtobufCMessage **)&r, &st) == 0) {
			char *state = out_enum_short(&ocs__v1__job_state__descriptor,
						     r->job ? r->job->state : 0);

			if (x->o.no_wait) {
				if (x->o.json)
					out_print_json(&r->base, true);
				else
					printf("job %s: %s (submitted; not waiting for the "
					       "outcome: ocsctl job show %s)\n",
					       id, state, id);
			} else {
				fprintf(stderr,
					"ocsctl: job %s: still %s %s; ocsctl stopped waiting and "
					"the job goes on (follow it with ocsctl job show %s or "
					"ocsctl watch)\n",
					id, state, why, id);
			}
			free(state);
			rpc_free_msg(r);
			return x->o.no_wait ? EXIT_OK : EXIT_IN_PROGRESS;
		}
		if (st.code != NB_NOT_FOUND || mono_ms() >= until)
			break;
		usleep(NO_WAIT_POLL_MS * 1000);
	}
	if (st.code == NB_NOT_FOUND)
		fprintf(stderr,
			"ocsctl: job %s: not accepted yet %s (a parallelism spec may still be "
			"searched); look again with ocsctl job show %s\n",
			id, why, id);
	else
		rpc_report_failure(x, &st);
	return EXIT_IN_PROGRESS;
}

/*
 * SubmitJob answers when the job settles (ACTIVE, or refused). --wait
 * gives it --wait-timeout-s; --no-wait gives it a moment, then reports the
 * accepted job as it stands. A deadline is never reported as an error
 * while the job goes on (issue 14 #15).
 */
static int submit(struct ctx *x, Ocs__V1__JobSpec *spec, Ocs__V1__SubmitJobResponse **r)
{
	const struct nb_method_info *info = nb_method_info(NB_JOBS_SUBMIT_JOB);
	struct nb_client_status st;
	char why[64];
	int rc;

	ocsctl_servers_set_timeout(x->servers, x->o.no_wait ? NO_WAIT_GRACE_MS
							    : (int)(x->o.wait_timeout_s * 1000));
	rc = ocsctl_servers_unary(x->servers, info->path, &spec->base, info->response,
				  (ProtobufCMessage **)r, &st);
	/* the progress line goes before the answer (a job already there: no wait) */
	prog_stop(x->progress, rc == 0 && *r && (*r)->created);
	x->progress = NULL;
	ocsctl_servers_set_timeout(x->servers, x->o.timeout_ms);
	if (rc == 0)
		return EXIT_OK;
	if (st.code != NB_DEADLINE_EXCEEDED || st.unreachable)
		return rpc_report_failure(x, &st);
	if (x->o.no_wait)
		snprintf(why, sizeof(why), "after --timeout-ms %d", x->o.timeout_ms);
	else
		snprintf(why, sizeof(why), "after --wait-timeout-s %ld", x->o.wait_timeout_s);
	return report_unanswered(x, spec->id, why);
}

int jobs_cmd_job_file(struct ctx *x, Ocs__V1__JobSpec *spec, bool submit_it)
{
	int rc;

	if (submit_it) {
		Ocs__V1__SubmitJobResponse *r = NULL;

		rc = submit(x, spec, &r);
		if (rc == EXIT_OK && r) {
			if (x->o.json) {
				rc = out_print_json(&r->base, true);
			} else {
				char *state = out_enum_short(&ocs__v1__job_state__descriptor,
							     r->job ? r->job->state : 0);

				printf("job %s: %s (%s)\n\n", spec->id, state,
				       r->created ? "submitted" : "already submitted");
				free(state);
				if (r->job)
					out_print_job(r->job);
			}
			rpc_free_msg(r);
		}
	} else {
		Ocs__V1__PlanJobResponse *r;

		rc = rpc_call(x, NB_JOBS_PLAN_JOB, &spec->base, &r);
		if (rc == EXIT_OK) {
			if (x->o.json) {
				rc = out_print_json(&r->base, true);
			} else {
				printf("plan for job %s (dry run, nothing changed)\n\n", spec->id);
				out_print_figures(r->figures);
				printf("\n");
				if (spec->demand_case == OCS__V1__JOB_SPEC__DEMAND_RING)
					out_rings_table(r->rings, r->n_rings);
				else
					out_circuits_table(r->circuits, r->n_circuits);
			}
			rpc_free_msg(r);
		}
	}
	return rc;
}

int jobs_cmd_job_id(struct ctx *x, const char *id, bool release)
{
	int rc;

	if (release) {
		Ocs__V1__ReleaseJobRequest req = OCS__V1__RELEASE_JOB_REQUEST__INIT;
		Ocs__V1__ReleaseJobResponse *r;

		req.id = (char *)id;
		rc = rpc_call(x, NB_JOBS_RELEASE_JOB, &req.base, &r);
		if (rc)
			return rc;
		if (x->o.json) {
			rc = out_print_json(&r->base, true);
		} else {
			char *state = out_enum_short(&ocs__v1__job_state__descriptor,
						     r->job ? r->job->state : 0);

			printf("job %s: %s\n", id, state);
			free(state);
		}
		rpc_free_msg(r);
	} else {
		Ocs__V1__GetJobRequest req = OCS__V1__GET_JOB_REQUEST__INIT;
		Ocs__V1__GetJobResponse *r;

		req.id = (char *)id;
		rc = rpc_call(x, NB_JOBS_GET_JOB, &req.base, &r);
		if (rc)
			return rc;
		if (x->o.json)
			rc = out_print_json(&r->base, true);
		else if (r->job)
			out_print_job(r->job);
		rpc_free_msg(r);
	}
	return rc;
}
