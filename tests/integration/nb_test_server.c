/*
 * nb_test_server.c - TEST-ONLY server: the real northbound library
 * (ocs_northbound) with a fake "daemon" that answers from an in-memory
 * table. It exists so that ocsctl and a grpcio client can be tested against
 * the real gRPC server, TLS, roles and validation without the daemon.
 * Nothing here plans or programs anything: circuits are made up from the
 * leaf pairs (one per pair, group = pair index % groups).
 *
 * Like the real daemon, all state is owned by one thread (the worker);
 * handlers only queue the call, and the worker answers with
 * nb_call_reply()/nb_call_fail() from its own thread. GetFabric is answered
 * inside the handler, to cover that path too.
 *
 * Usage: nb_test_server [--listen ADDR] [--insecure] [--ca F --cert F --key F]
 *                       [--max-message-bytes N] [--queue N]
 * Prints "port N" on stdout once serving; SIGTERM/SIGINT shut it down.
 * Magic job ids: "unavailable-*" fail with UNAVAILABLE, "full-*" with
 * RESOURCE_EXHAUSTED (to test how clients report refusals); PlanJob of
 * "flood-N" first publishes N job events (to test slow watchers).
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nb.h"

#define PODS		  4
#define LEAVES_PER_POD	  4
#define GPUS_PER_LEAF	  8
#define GROUPS		  2
#define DEVICES_PER_GROUP 2
#define MAX_JOBS	  256

struct work {
	struct nb_call *call;
	const void *req;
	struct work *next;
};

struct job_row {
	Ocs__V1__JobSpec *spec; /* deep copy (unpacked) */
	uint8_t *wire;		/* packed spec, to compare resubmissions */
	size_t wire_len;
	Ocs__V1__JobState state;
	int64_t created_ms, updated_ms;
};

struct fake {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct work *head, *tail;
	bool stop;
	struct nb_server *server;
	/* owned by the worker thread only */
	struct job_row jobs[MAX_JOBS];
	int n_jobs;
	bool drained[GROUPS * DEVICES_PER_GROUP];
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void enqueue(void *ctx, struct nb_call *call, const void *req)
{
	struct fake *f = ctx;
	struct work *w = calloc(1, sizeof(*w));

	if (!w) {
		nb_call_fail(call, NB_RESOURCE_EXHAUSTED, "", "test server out of memory");
		return;
	}
	w->call = call;
	w->req = req;
	pthread_mutex_lock(&f->mu);
	if (f->tail)
		f->tail->next = w;
	else
		f->head = w;
	f->tail = w;
	pthread_cond_signal(&f->cv);
	pthread_mutex_unlock(&f->mu);
}

static void device_name(int d, char *buf, size_t len)
{
	snprintf(buf, len, "ocs-g%d-d%d", d / DEVICES_PER_GROUP, d % DEVICES_PER_GROUP);
}

static int device_find(const char *name)
{
	char buf[32];

	for (int d = 0; d < GROUPS * DEVICES_PER_GROUP; d++) {
		device_name(d, buf, sizeof(buf));
		if (strcmp(buf, name) == 0)
			return d;
	}
	return -1;
}

static struct job_row *job_find(struct fake *f, const char *id)
{
	for (int i = 0; i < f->n_jobs; i++)
		if (strcmp(f->jobs[i].spec->id, id) == 0)
			return &f->jobs[i];
	return NULL;
}

static void publish_job(struct fake *f, const char *id, Ocs__V1__JobState state)
{
	Ocs__V1__Event ev = OCS__V1__EVENT__INIT;
	Ocs__V1__JobEvent je = OCS__V1__JOB_EVENT__INIT;

	je.job_id = (char *)id;
	je.state = state;
	ev.kind_case = OCS__V1__EVENT__KIND_JOB;
	ev.job = &je;
	nb_server_publish(f->server, &ev);
}

/*
 * Fake circuits of a job spec: one per leaf pair. Fills arrays the caller
 * provides (max n) and returns how many.
 */
struct fake_circuits {
	Ocs__V1__Circuit c[64];
	Ocs__V1__Circuit *cp[64];
	Ocs__V1__CrossConnect x[128];
	Ocs__V1__CrossConnect *xp[128];
	char dev[64][16];
	size_t n;
};

static void make_circuits(const Ocs__V1__JobSpec *spec, struct fake_circuits *fc)
{
	const Ocs__V1__LeafDemand *d = spec->leaf_demand;

	fc->n = 0;
	for (size_t i = 0; d && i < d->n_pairs && fc->n < 64; i++) {
		Ocs__V1__Circuit *c = &fc->c[fc->n];
		int group = (int)(i % GROUPS);

		ocs__v1__circuit__init(c);
		c->job_id = spec->id;
		c->group = group;
		c->pod_a = d->pairs[i]->a / LEAVES_PER_POD;
		c->pod_b = d->pairs[i]->b / LEAVES_PER_POD;
		c->port_a = (int32_t)i;
		c->port_b = (int32_t)i;
		device_name(group * DEVICES_PER_GROUP, fc->dev[fc->n], sizeof(fc->dev[0]));
		for (int k = 0; k < 2; k++) {
			Ocs__V1__CrossConnect *x = &fc->x[2 * fc->n + k];

			ocs__v1__cross_connect__init(x);
			x->device = fc->dev[fc->n];
			x->in_port = k ? c->pod_b : c->pod_a;
			x->out_port = k ? c->pod_a : c->pod_b;
			fc->xp[2 * fc->n + k] = x;
		}
		c->cross_connects = &fc->xp[2 * fc->n];
		c->n_cross_connects = 2;
		fc->cp[fc->n] = c;
		fc->n++;
	}
}

static void fill_figures(const Ocs__V1__JobSpec *spec, Ocs__V1__PlanFigures *fig,
			 const struct fake_circuits *fc)
{
	const Ocs__V1__LeafDemand *d = spec->leaf_demand;
	int links = 0;

	for (size_t i = 0; d && i < d->n_pairs; i++)
		links += d->pairs[i]->links;
	fig->planner = spec->options && spec->options->planner[0] ? spec->options->planner
								  : "leaf-centric";
	fig->links_requested = links;
	fig->links_placed = links;
	fig->circuits_new = (int32_t)fc->n;
	fig->max_contention = 1.0;
}

/* Fills a Job message from a row; circuits go into fc. */
static void fill_job(struct job_row *r, Ocs__V1__Job *job, Ocs__V1__PlanFigures *fig,
		     struct fake_circuits *fc)
{
	ocs__v1__job__init(job);
	ocs__v1__plan_figures__init(fig);
	job->spec = r->spec;
	job->state = r->state;
	make_circuits(r->spec, fc);
	if (r->state == OCS__V1__JOB_STATE__JOB_STATE_ACTIVE) {
		job->circuits = fc->cp;
		job->n_circuits = fc->n;
	}
	fill_figures(r->spec, fig, fc);
	job->figures = fig;
	job->created_unix_ms = r->created_ms;
	job->updated_unix_ms = r->updated_ms;
}

static bool magic_refusal(struct nb_call *call, const char *id)
{
	if (strncmp(id, "unavailable-", 12) == 0) {
		nb_call_fail(call, NB_UNAVAILABLE, "",
			     "device ocs-g0-d1 is unreachable; nothing changed");
		return true;
	}
	if (strncmp(id, "full-", 5) == 0) {
		nb_call_fail(call, NB_RESOURCE_EXHAUSTED, "leaf_demand",
			     "no capacity: group 0 lacks 2 free ports in pod 1");
		return true;
	}
	return false;
}

static void do_submit(struct fake *f, struct nb_call *call, const Ocs__V1__JobSpec *spec)
{
	Ocs__V1__SubmitJobResponse resp = OCS__V1__SUBMIT_JOB_RESPONSE__INIT;
	Ocs__V1__Job job;
	Ocs__V1__PlanFigures fig;
	struct fake_circuits *fc;
	struct job_row *r;
	size_t len = ocs__v1__job_spec__get_packed_size(spec);
	uint8_t *wire = malloc(len + 1);

	if (!wire || magic_refusal(call, spec->id)) {
		if (!wire)
			nb_call_fail(call, NB_RESOURCE_EXHAUSTED, "", "out of memory");
		free(wire);
		return;
	}
	ocs__v1__job_spec__pack(spec, wire);
	r = job_find(f, spec->id);
	if (r) {
		bool same = r->wire_len == len && memcmp(r->wire, wire, len) == 0;

		free(wire);
		if (!same) {
			nb_call_fail(call, NB_ALREADY_EXISTS, "id",
				     "job %s exists with a different request", spec->id);
			return;
		}
	} else {
		r = f->n_jobs < MAX_JOBS ? &f->jobs[f->n_jobs++] : NULL;
		for (int i = 0; !r && i < MAX_JOBS; i++) /* forget a released job */
			if (f->jobs[i].state == OCS__V1__JOB_STATE__JOB_STATE_RELEASED) {
				r = &f->jobs[i];
				ocs__v1__job_spec__free_unpacked(r->spec, NULL);
				free(r->wire);
			}
		if (!r) {
			free(wire);
			nb_call_fail(call, NB_RESOURCE_EXHAUSTED, "", "test server holds %d jobs",
				     MAX_JOBS);
			return;
		}
		r->spec = ocs__v1__job_spec__unpack(NULL, len, wire);
		r->wire = wire;
		r->wire_len = len;
		r->created_ms = r->updated_ms = now_ms();
		publish_job(f, spec->id, OCS__V1__JOB_STATE__JOB_STATE_PENDING);
		r->state = OCS__V1__JOB_STATE__JOB_STATE_ACTIVE;
		publish_job(f, spec->id, OCS__V1__JOB_STATE__JOB_STATE_ACTIVE);
		resp.created = true;
	}
	fc = malloc(sizeof(*fc));
	if (!fc) {
		nb_call_fail(call, NB_RESOURCE_EXHAUSTED, "", "out of memory");
		return;
	}
	fill_job(r, &job, &fig, fc);
	resp.job = &job;
	nb_call_reply(call, &resp.base);
	free(fc);
}

/* "flood-N": publishes N job events before planning (slow-watcher tests). */
static void flood(struct fake *f, const char *id)
{
	long n = strncmp(id, "flood-", 6) == 0 ? strtol(id + 6, NULL, 10) : 0;

	for (long i = 0; i < n && i < 10000000; i++)
		publish_job(f, id, OCS__V1__JOB_STATE__JOB_STATE_PLANNING);
}

static void do_plan(struct fake *f, struct nb_call *call, const Ocs__V1__JobSpec *spec)
{
	Ocs__V1__PlanJobResponse resp = OCS__V1__PLAN_JOB_RESPONSE__INIT;
	Ocs__V1__PlanFigures fig = OCS__V1__PLAN_FIGURES__INIT;
	struct fake_circuits *fc = malloc(sizeof(*fc));

	if (!fc || magic_refusal(call, spec->id)) {
		if (!fc)
			nb_call_fail(call, NB_RESOURCE_EXHAUSTED, "", "out of memory");
		free(fc);
		return;
	}
	flood(f, spec->id);
	make_circuits(spec, fc);
	fill_figures(spec, &fig, fc);
	resp.figures = &fig;
	resp.circuits = fc->cp;
	resp.n_circuits = fc->n;
	nb_call_reply(call, &resp.base);
	free(fc);
}

static void reply_job(struct nb_call *call, struct job_row *r, bool release)
{
	Ocs__V1__ReleaseJobResponse rel = OCS__V1__RELEASE_JOB_RESPONSE__INIT;
	Ocs__V1__GetJobResponse get = OCS__V1__GET_JOB_RESPONSE__INIT;
	Ocs__V1__Job job;
	Ocs__V1__PlanFigures fig;
	struct fake_circuits *fc = malloc(sizeof(*fc));

	if (!fc) {
		nb_call_fail(call, NB_RESOURCE_EXHAUSTED, "", "out of memory");
		return;
	}
	fill_job(r, &job, &fig, fc);
	rel.job = &job;
	get.job = &job;
	nb_call_reply(call, release ? &rel.base : &get.base);
	free(fc);
}

static void do_list_jobs(struct fake *f, struct nb_call *call, const Ocs__V1__ListJobsRequest *req)
{
	Ocs__V1__ListJobsResponse resp = OCS__V1__LIST_JOBS_RESPONSE__INIT;
	Ocs__V1__Job *jobs = calloc(MAX_JOBS, sizeof(*jobs));
	Ocs__V1__Job **jp = calloc(MAX_JOBS, sizeof(*jp));
	Ocs__V1__PlanFigures *figs = calloc(MAX_JOBS, sizeof(*figs));
	struct fake_circuits *fc = malloc(sizeof(*fc));

	if (jobs && jp && figs && fc) {
		for (int i = 0; i < f->n_jobs; i++) {
			if (req->state && f->jobs[i].state != req->state)
				continue;
			fill_job(&f->jobs[i], &jobs[resp.n_jobs], &figs[resp.n_jobs], fc);
			jobs[resp.n_jobs].circuits = NULL; /* lists stay short */
			jobs[resp.n_jobs].n_circuits = 0;
			jp[resp.n_jobs] = &jobs[resp.n_jobs];
			resp.n_jobs++;
		}
		resp.jobs = jp;
		nb_call_reply(call, &resp.base);
	} else {
		nb_call_fail(call, NB_RESOURCE_EXHAUSTED, "", "out of memory");
	}
	free(jobs);
	free(jp);
	free(figs);
	free(fc);
}

static void fill_device(struct fake *f, int d, Ocs__V1__Device *dev, char *name, size_t len)
{
	ocs__v1__device__init(dev);
	device_name(d, name, len);
	dev->name = name;
	dev->group = d / DEVICES_PER_GROUP;
	dev->index = d % DEVICES_PER_GROUP;
	dev->address = "127.0.0.1:830";
	dev->session = OCS__V1__SESSION_STATE__SESSION_STATE_CONNECTED;
	dev->health = OCS__V1__DEVICE_HEALTH__DEVICE_HEALTH_HEALTHY;
	dev->drained = f->drained[d];
	dev->ports_total = 16;
}

/* Active jobs with a fake circuit on device d (names into out, max n). */
static size_t jobs_on_device(struct fake *f, int d, char **out, size_t max)
{
	char name[16], *want = name;
	size_t n = 0;
	struct fake_circuits *fc = malloc(sizeof(*fc));

	device_name(d, want, sizeof(name));
	for (int i = 0; fc && i < f->n_jobs && n < max; i++) {
		if (f->jobs[i].state != OCS__V1__JOB_STATE__JOB_STATE_ACTIVE)
			continue;
		make_circuits(f->jobs[i].spec, fc);
		for (size_t k = 0; k < fc->n; k++)
			if (strcmp(fc->dev[k], want) == 0) {
				out[n++] = f->jobs[i].spec->id;
				break;
			}
	}
	free(fc);
	return n;
}

static void do_drain(struct fake *f, struct nb_call *call, const char *device, bool force,
		     bool drain)
{
	Ocs__V1__DrainDeviceResponse dr = OCS__V1__DRAIN_DEVICE_RESPONSE__INIT;
	Ocs__V1__UndrainDeviceResponse ur = OCS__V1__UNDRAIN_DEVICE_RESPONSE__INIT;
	Ocs__V1__Event ev = OCS__V1__EVENT__INIT;
	Ocs__V1__DeviceEvent de = OCS__V1__DEVICE_EVENT__INIT;
	Ocs__V1__Device dev;
	char name[32], *affected[MAX_JOBS];
	int d = device_find(device);
	size_t n;

	if (d < 0) {
		nb_call_fail(call, NB_NOT_FOUND, "device", "no device named %s", device);
		return;
	}
	n = jobs_on_device(f, d, affected, MAX_JOBS);
	if (drain && n && !force) {
		nb_call_fail(call, NB_FAILED_PRECONDITION, "force",
			     "%s holds circuits of %zu running job(s) (first: %s); set force to "
			     "drain anyway",
			     device, n, affected[0]);
		return;
	}
	f->drained[d] = drain;
	fill_device(f, d, &dev, name, sizeof(name));
	de.device = name;
	de.session = dev.session;
	de.health = dev.health;
	de.drained = drain;
	ev.kind_case = OCS__V1__EVENT__KIND_DEVICE;
	ev.device = &de;
	nb_server_publish(f->server, &ev);
	if (drain) {
		dr.device = &dev;
		dr.affected_jobs = affected;
		dr.n_affected_jobs = n;
		nb_call_reply(call, &dr.base);
	} else {
		ur.device = &dev;
		nb_call_reply(call, &ur.base);
	}
}

static void do_list_devices(struct fake *f, struct nb_call *call,
			    const Ocs__V1__ListDevicesRequest *req)
{
	Ocs__V1__ListDevicesResponse resp = OCS__V1__LIST_DEVICES_RESPONSE__INIT;
	Ocs__V1__Device devs[GROUPS * DEVICES_PER_GROUP], *dp[GROUPS * DEVICES_PER_GROUP];
	char names[GROUPS * DEVICES_PER_GROUP][32];

	for (int d = 0; d < GROUPS * DEVICES_PER_GROUP; d++) {
		if (req->has_group && d / DEVICES_PER_GROUP != req->group)
			continue;
		fill_device(f, d, &devs[resp.n_devices], names[resp.n_devices], sizeof(names[0]));
		dp[resp.n_devices] = &devs[resp.n_devices];
		resp.n_devices++;
	}
	resp.devices = dp;
	nb_call_reply(call, &resp.base);
}

static void do_list_circuits(struct fake *f, struct nb_call *call,
			     const Ocs__V1__ListCircuitsRequest *req)
{
	Ocs__V1__ListCircuitsResponse resp = OCS__V1__LIST_CIRCUITS_RESPONSE__INIT;
	struct fake_circuits *fc = calloc((size_t)(f->n_jobs ? f->n_jobs : 1), sizeof(*fc));
	Ocs__V1__Circuit **all = calloc((size_t)(f->n_jobs ? f->n_jobs : 1) * 64, sizeof(*all));

	if (!fc || !all) {
		nb_call_fail(call, NB_RESOURCE_EXHAUSTED, "", "out of memory");
		free(fc);
		free(all);
		return;
	}
	if (req->device[0] && device_find(req->device) < 0) {
		nb_call_fail(call, NB_NOT_FOUND, "device", "no device named %s", req->device);
		free(fc);
		free(all);
		return;
	}
	for (int i = 0; i < f->n_jobs; i++) {
		if (f->jobs[i].state != OCS__V1__JOB_STATE__JOB_STATE_ACTIVE)
			continue;
		if (req->job_id[0] && strcmp(req->job_id, f->jobs[i].spec->id) != 0)
			continue;
		make_circuits(f->jobs[i].spec, &fc[i]);
		for (size_t k = 0; k < fc[i].n; k++) {
			Ocs__V1__Circuit *c = &fc[i].c[k];

			if (req->device[0] && strcmp(req->device, fc[i].dev[k]) != 0)
				continue;
			if (req->has_pod && c->pod_a != req->pod && c->pod_b != req->pod)
				continue;
			all[resp.n_circuits++] = c;
		}
	}
	resp.circuits = all;
	nb_call_reply(call, &resp.base);
	free(fc);
	free(all);
}

static void serve(struct fake *f, struct work *w)
{
	struct nb_call *call = w->call;
	struct job_row *r;

	switch (nb_call_method(call)) {
	case NB_FABRIC_LIST_DEVICES:
		do_list_devices(f, call, w->req);
		break;
	case NB_FABRIC_LIST_CIRCUITS:
		do_list_circuits(f, call, w->req);
		break;
	case NB_FABRIC_DRAIN_DEVICE: {
		const Ocs__V1__DrainDeviceRequest *req = w->req;

		do_drain(f, call, req->device, req->force, true);
		break;
	}
	case NB_FABRIC_UNDRAIN_DEVICE:
		do_drain(f, call, ((const Ocs__V1__UndrainDeviceRequest *)w->req)->device, false,
			 false);
		break;
	case NB_JOBS_SUBMIT_JOB:
		do_submit(f, call, w->req);
		break;
	case NB_JOBS_PLAN_JOB:
		do_plan(f, call, w->req);
		break;
	case NB_JOBS_RELEASE_JOB: {
		const char *id = ((const Ocs__V1__ReleaseJobRequest *)w->req)->id;

		r = job_find(f, id);
		if (!r) {
			nb_call_fail(call, NB_NOT_FOUND, "id", "no job %s", id);
			break;
		}
		if (r->state != OCS__V1__JOB_STATE__JOB_STATE_RELEASED) {
			r->state = OCS__V1__JOB_STATE__JOB_STATE_RELEASED;
			r->updated_ms = now_ms();
			publish_job(f, id, r->state);
		}
		reply_job(call, r, true);
		break;
	}
	case NB_JOBS_GET_JOB: {
		const char *id = ((const Ocs__V1__GetJobRequest *)w->req)->id;

		r = job_find(f, id);
		if (!r)
			nb_call_fail(call, NB_NOT_FOUND, "id", "no job %s", id);
		else
			reply_job(call, r, false);
		break;
	}
	case NB_JOBS_LIST_JOBS:
		do_list_jobs(f, call, w->req);
		break;
	default:
		nb_call_fail(call, NB_INTERNAL, "", "test server cannot serve %s",
			     nb_method_name(nb_call_method(call)));
		break;
	}
}

static void *worker(void *arg)
{
	struct fake *f = arg;

	for (;;) {
		struct work *w;

		pthread_mutex_lock(&f->mu);
		while (!f->head && !f->stop)
			pthread_cond_wait(&f->cv, &f->mu);
		w = f->head;
		if (w) {
			f->head = w->next;
			if (!f->head)
				f->tail = NULL;
		}
		pthread_mutex_unlock(&f->mu);
		if (!w)
			break; /* stop requested and the queue is empty */
		serve(f, w);
		free(w);
	}
	return NULL;
}

/* Answered inside the handler, on the gRPC thread: static data only. */
static void h_get_fabric(void *ctx, struct nb_call *call, const Ocs__V1__GetFabricRequest *req)
{
	Ocs__V1__FabricSummary s = OCS__V1__FABRIC_SUMMARY__INIT;

	s.wiring = "straight";
	s.pods = PODS;
	s.k_leaf = GPUS_PER_LEAF;
	s.k_spine = LEAVES_PER_POD;
	s.tau = 1;
	s.k_ocs = 16;
	s.groups = GROUPS;
	s.leaves = PODS * LEAVES_PER_POD;
	s.gpus = PODS * LEAVES_PER_POD * GPUS_PER_LEAF;
	s.devices = GROUPS * DEVICES_PER_GROUP;
	s.devices_connected = s.devices;
	s.version = "nb_test_server";
	nb_call_reply(call, &s.base);
}

#define QUEUE_HANDLER(fn, type)                                                                    \
	static void fn(void *ctx, struct nb_call *call, const type *req)                           \
	{                                                                                          \
		enqueue(ctx, call, req);                                                           \
	}
QUEUE_HANDLER(h_list_devices, Ocs__V1__ListDevicesRequest)
QUEUE_HANDLER(h_list_circuits, Ocs__V1__ListCircuitsRequest)
QUEUE_HANDLER(h_drain, Ocs__V1__DrainDeviceRequest)
QUEUE_HANDLER(h_undrain, Ocs__V1__UndrainDeviceRequest)
QUEUE_HANDLER(h_job_spec, Ocs__V1__JobSpec)
QUEUE_HANDLER(h_release, Ocs__V1__ReleaseJobRequest)
QUEUE_HANDLER(h_get_job, Ocs__V1__GetJobRequest)
QUEUE_HANDLER(h_list_jobs, Ocs__V1__ListJobsRequest)

static void usage(void)
{
	fprintf(stderr, "usage: nb_test_server [--listen ADDR] [--insecure] [--ca F --cert F "
			"--key F] [--max-message-bytes N] [--queue N]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static struct fake f;
	struct nb_server_config cfg = {0};
	struct nb_error err;
	pthread_t tid;
	sigset_t sigs;
	int sig;

	cfg.listen_addr = "127.0.0.1:0";
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(a, "--insecure") == 0) {
			cfg.insecure = true;
			continue;
		}
		if (!v)
			usage();
		i++;
		if (strcmp(a, "--listen") == 0)
			cfg.listen_addr = v;
		else if (strcmp(a, "--ca") == 0)
			cfg.tls_ca_file = v;
		else if (strcmp(a, "--cert") == 0)
			cfg.tls_cert_file = v;
		else if (strcmp(a, "--key") == 0)
			cfg.tls_key_file = v;
		else if (strcmp(a, "--max-message-bytes") == 0)
			cfg.max_message_bytes = strtoul(v, NULL, 10);
		else if (strcmp(a, "--queue") == 0)
			cfg.stream_queue_max = atoi(v);
		else
			usage();
	}
	cfg.limits =
		(struct nb_limits){.pods = PODS,
				   .leaves_per_pod = LEAVES_PER_POD,
				   .gpus_per_leaf = GPUS_PER_LEAF,
				   .groups = GROUPS,
				   /* The northbound knows no planner: pass some, as ocsd does. */
				   .planners = {{"leaf-centric", false}, {"pod-centric", false}},
				   .n_planners = 2};
	cfg.handlers = (struct nb_handlers){
		.ctx = &f,
		.get_fabric = h_get_fabric,
		.list_devices = h_list_devices,
		.list_circuits = h_list_circuits,
		.drain_device = h_drain,
		.undrain_device = h_undrain,
		.submit_job = h_job_spec,
		.plan_job = h_job_spec,
		.release_job = h_release,
		.get_job = h_get_job,
		.list_jobs = h_list_jobs,
	};
	pthread_mutex_init(&f.mu, NULL);
	pthread_cond_init(&f.cv, NULL);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL); /* every thread inherits the mask */
	if (nb_server_create(&cfg, &f.server, &err)) {
		fprintf(stderr, "nb_test_server: %s: %s\n", err.field, err.message);
		return 1;
	}
	pthread_create(&tid, NULL, worker, &f);
	printf("port %d\n", nb_server_port(f.server));
	fflush(stdout);
	sigwait(&sigs, &sig);
	/* The worker keeps answering while destroy waits for every call. */
	nb_server_destroy(f.server);
	pthread_mutex_lock(&f.mu);
	f.stop = true;
	pthread_cond_signal(&f.cv);
	pthread_mutex_unlock(&f.mu);
	pthread_join(tid, NULL);
	for (int i = 0; i < f.n_jobs; i++) {
		ocs__v1__job_spec__free_unpacked(f.jobs[i].spec, NULL);
		free(f.jobs[i].wire);
	}
	fprintf(stderr, "nb_test_server: stopped (%s)\n", strsignal(sig));
	return 0;
}
