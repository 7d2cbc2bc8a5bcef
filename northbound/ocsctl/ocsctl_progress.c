/*
 * ocsctl_progress.c - the progress line (ocsctl_progress.h): a thread that
 * watches {jobs, progress} on a client of its own and redraws one line on
 * stderr ("\r", the text, erase to the end of the line) for each event of
 * the job it follows.
 *
 * The two threads share struct prog under mu: the command's thread waits
 * for the watch to be in place (state), and cancels the stream through
 * `client`, which the watching thread sets once its stream is open and
 * clears before it closes the stream (so a cancel never meets a closed
 * stream). Once the RPC succeeded, prog_stop() gives the events still on
 * their way (another connection than the answer's; a quick repair's all
 * of them) up to PROG_DRAIN_MS, until `settled`: the job's end, or a
 * repair's last confirm. The line is drawn by the watching thread only
 * (`drawn` tells prog_stop to clear it after the join).
 */
#include "ocsctl_progress.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nb.h"

enum prog_state { PROG_STARTING, PROG_WATCHING, PROG_ENDED };

struct prog {
	struct nb_client_opts co;
	char target[256];
	char job[256]; /* "" = any job the transactions name */
	pthread_t thread;
	pthread_mutex_t mu; /* guards the fields below */
	pthread_cond_t cv;  /* state left PROG_STARTING, or settled */
	enum prog_state state;
	bool stopping;
	struct nb_client *client; /* the open stream's, for the cancel; NULL: none */
	bool drawn;		  /* a line is on stderr */
	bool settled;		  /* the last event to draw came: the job's end, the last confirm */
};

/* How long prog_stop() waits for the events still on their way once the
 * RPC returned (they come on another connection than its answer). */
#define PROG_DRAIN_MS 300

/* Draws text as the line, in one write so that it does not tear. */
static void draw(struct prog *p, const char *text)
{
	char line[512];
	int n = snprintf(line, sizeof(line), "\r%s\033[K", text);

	if (n > 0 && write(STDERR_FILENO, line,
			   (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1) > 0) {
		pthread_mutex_lock(&p->mu);
		p->drawn = true;
		pthread_mutex_unlock(&p->mu);
	}
}

static const char *state_word(Ocs__V1__JobState s)
{
	switch (s) {
	case OCS__V1__JOB_STATE__JOB_STATE_PENDING:
		return "queued";
	case OCS__V1__JOB_STATE__JOB_STATE_PLANNING:
		return "planning";
	case OCS__V1__JOB_STATE__JOB_STATE_PROGRAMMING:
		return "programming";
	case OCS__V1__JOB_STATE__JOB_STATE_ACTIVE:
		return "active";
	case OCS__V1__JOB_STATE__JOB_STATE_RELEASING:
		return "releasing";
	case OCS__V1__JOB_STATE__JOB_STATE_RELEASED:
		return "released";
	case OCS__V1__JOB_STATE__JOB_STATE_FAILED:
		return "failed";
	default:
		return NULL;
	}
}

static const char *step_word(Ocs__V1__TransactionStep s)
{
	switch (s) {
	case OCS__V1__TRANSACTION_STEP__TRANSACTION_STEP_PREPARE:
		return "preparing";
	case OCS__V1__TRANSACTION_STEP__TRANSACTION_STEP_COMMIT:
		return "programming";
	case OCS__V1__TRANSACTION_STEP__TRANSACTION_STEP_VERIFY:
		return "verifying";
	case OCS__V1__TRANSACTION_STEP__TRANSACTION_STEP_CONFIRM:
		return "confirming";
	case OCS__V1__TRANSACTION_STEP__TRANSACTION_STEP_ROLLBACK:
		return "rolling back";
	default:
		return NULL;
	}
}

/* The job of pe that the line follows (NULL: none of them). */
static const char *followed(const struct prog *p, const Ocs__V1__ProgressEvent *pe)
{
	for (size_t i = 0; i < pe->n_job_ids; i++)
		if (!p->job[0] || strcmp(pe->job_ids[i], p->job) == 0)
			return pe->job_ids[i];
	return NULL;
}

static void set_settled(struct prog *p)
{
	pthread_mutex_lock(&p->mu);
	p->settled = true;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

/* Redraws the line for e when it concerns the job followed. */
static void show(struct prog *p, const Ocs__V1__Event *e)
{
	char text[400];
	const char *word, *id;

	if (e->kind_case == OCS__V1__EVENT__KIND_JOB && p->job[0] &&
	    strcmp(e->job->job_id, p->job) == 0 && (word = state_word(e->job->state))) {
		snprintf(text, sizeof(text), "job %s: %s", e->job->job_id, word);
		draw(p, text);
		if (e->job->state == OCS__V1__JOB_STATE__JOB_STATE_ACTIVE ||
		    e->job->state == OCS__V1__JOB_STATE__JOB_STATE_RELEASED ||
		    e->job->state == OCS__V1__JOB_STATE__JOB_STATE_FAILED)
			set_settled(p);
	} else if (e->kind_case == OCS__V1__EVENT__KIND_PROGRESS &&
		   (id = followed(p, e->progress)) && (word = step_word(e->progress->step))) {
		snprintf(text, sizeof(text), "job %s: %s %u of %u devices", id, word,
			 e->progress->devices_done, e->progress->devices_total);
		draw(p, text);
		/* a repair (no job followed): its transaction's last device */
		if (!p->job[0] && e->progress->devices_done == e->progress->devices_total &&
		    (e->progress->step == OCS__V1__TRANSACTION_STEP__TRANSACTION_STEP_CONFIRM ||
		     e->progress->step == OCS__V1__TRANSACTION_STEP__TRANSACTION_STEP_ROLLBACK))
			set_settled(p);
	}
}

static void set_state(struct prog *p, enum prog_state s)
{
	pthread_mutex_lock(&p->mu);
	p->state = s;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

/* The watching thread: open, wait for the watch in place, draw until cancelled. */
static void *prog_run(void *arg)
{
	struct prog *p = arg;
	Ocs__V1__WatchRequest req = OCS__V1__WATCH_REQUEST__INIT;
	struct nb_client_status st;
	struct nb_client *c;
	Ocs__V1__Event *e;
	char err[320];
	bool open = false;

	p->co.target = p->target;
	c = nb_client_new(&p->co, err, sizeof(err));
	req.jobs = true;
	req.progress = true;
	if (c && nb_client_connect(c, &st) == 0 &&
	    nb_client_stream_open(c, nb_method_path(NB_EVENTS_WATCH), &req.base, &st) == 0) {
		pthread_mutex_lock(&p->mu);
		open = !p->stopping;
		if (open)
			p->client = c;
		pthread_mutex_unlock(&p->mu);
	}
	while (open && nb_client_stream_next(c, &ocs__v1__event__descriptor,
					     (ProtobufCMessage **)&e, &st) == 0) {
		if (e->kind_case == OCS__V1__EVENT__KIND_PROGRESS && !e->progress->transaction_id)
			set_state(p, PROG_WATCHING); /* the watch is in place */
		else
			show(p, e);
		protobuf_c_message_free_unpacked(&e->base, NULL);
	}
	pthread_mutex_lock(&p->mu);
	p->client = NULL;
	p->state = PROG_ENDED;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	if (c) {
		nb_client_stream_close(c);
		nb_client_free(c);
	}
	return NULL;
}

/* CLOCK_MONOTONIC now + ms, for pthread_cond_timedwait on cv. */
static void deadline(struct timespec *until, int ms)
{
	long long ns;

	clock_gettime(CLOCK_MONOTONIC, until);
	ns = until->tv_nsec + (long long)ms * 1000000LL;
	until->tv_sec += (time_t)(ns / 1000000000LL);
	until->tv_nsec = (long)(ns % 1000000000LL);
}

struct prog *prog_start(const struct nb_client_opts *co, const char *target, const char *job_id,
			bool quiet, int wait_ms)
{
	struct prog *p;
	struct timespec until;
	pthread_condattr_t ca;

	if (quiet || !isatty(STDERR_FILENO))
		return NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->co = *co;
	snprintf(p->target, sizeof(p->target), "%s", target);
	snprintf(p->job, sizeof(p->job), "%s", job_id ? job_id : "");
	pthread_mutex_init(&p->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&p->thread, NULL, prog_run, p) != 0) {
		pthread_cond_destroy(&p->cv);
		pthread_mutex_destroy(&p->mu);
		free(p);
		return NULL;
	}
	deadline(&until, wait_ms);
	/* an old server never says the watch is in place: wait_ms at most */
	pthread_mutex_lock(&p->mu);
	while (p->state == PROG_STARTING) {
		if (pthread_cond_timedwait(&p->cv, &p->mu, &until) != 0)
			break;
	}
	pthread_mutex_unlock(&p->mu);
	return p;
}

void prog_stop(struct prog *p, bool drain)
{
	struct timespec until;

	if (!p)
		return;
	deadline(&until, PROG_DRAIN_MS);
	pthread_mutex_lock(&p->mu);
	/* the last events (all of a quick repair's) may still be on their way */
	while (drain && !p->settled && p->state == PROG_WATCHING) {
		if (pthread_cond_timedwait(&p->cv, &p->mu, &until) != 0)
			break;
	}
	p->stopping = true;
	if (p->client)
		nb_client_stream_cancel(p->client);
	pthread_mutex_unlock(&p->mu);
	pthread_join(p->thread, NULL);
	if (p->drawn) {
		/* nothing to be done about a terminal gone away */
		ssize_t w = write(STDERR_FILENO, "\r\033[K", 4);

		(void)w;
	}
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	free(p);
}
