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
 * With --ring it plays an OCSTrx ring domain instead (32 nodes under 8
 * ToRs, 4 GPUs per node): ring jobs get made-up rings (the first free
 * healthy nodes in id order, m = tp / 4 per ring; no K-hop rule), MarkNode
 * faulty bypasses the node's ring (the node is dropped from it, as a
 * bypass does) and publishes a node and a ring event, MarkNode healthy
 * frees the node, ListRings answers from the node table.
 *
 * With --replica-id ID it plays one ocsd replica on etcd (issue 15), so
 * that ocsctl's leader finding is tested without etcd: GetFabric names the
 * replica, its role, the leader and the live replicas, and
 * Check("ocs.v1.Jobs") is SERVING on the leader only. With --leader
 * ID@HOST:PORT it is a follower: it answers the reads a follower serves
 * (GetJob, ListJobs, ListCircuits, ListDevices, GetFabric, Watch) and
 * refuses every other call "UNAVAILABLE: not the leader; leader is
 * HOST:PORT" (HOST:PORT "self": its own address, a redirect loop). Without
 * --leader it leads. --peer ID@HOST:PORT (up to 4) adds a live follower to
 * the replica list. --store-problem TEXT (with or without a replica id)
 * fills GetFabric's store_problem.
 *
 * Usage: nb_test_server [--listen ADDR] [--insecure] [--ca F --cert F --key F]
 *                       [--max-message-bytes N] [--queue N] [--max-streams N]
 *                       [--ring] [--jobs N] [--replica-id ID [--leader ID@ADDR]
 *                       [--peer ID@ADDR]..] [--store-problem TEXT]
 * Prints "port N" on stdout once serving; SIGTERM/SIGINT shut it down.
 * Magic job ids: "unavailable-*" fail with UNAVAILABLE, "full-*" with
 * RESOURCE_EXHAUSTED (to test how clients report refusals); PlanJob of
 * "flood-N" first publishes N job events (to test slow watchers);
 * SubmitJob of "slow-MS-*" keeps the job PROGRAMMING for MS milliseconds
 * and answers then (a slow transaction, for ocsctl's waiting). --jobs N
 * starts with N FAILED jobs "bulk-00000".. (refused submissions, as a busy
 * ocsd keeps them) so that ListJobs must page. ListJobs and ListCircuits
 * page as ocsd does (id order; circuit key order).
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
#define MAX_JOBS	  32768
/* --ring: the fake ring domain */
#define RING_TORS	   8
#define RING_NODES_PER_TOR 4
#define RING_NODES	   (RING_TORS * RING_NODES_PER_TOR)
#define RING_GPUS_PER_NODE 4
#define RING_K_HOPS	   2
#define MAX_PEERS	   4

struct work {
	struct nb_call *call;
	const void *req;
	struct work *next;
};

/* One ring of a ring job: nodes in ring order. */
struct fake_ring {
	int32_t nodes[RING_NODES];
	size_t n;
	Ocs__V1__RingChange last_change;
	int32_t failed_node; /* -1 unless bypassed */
};

/* The rings of a ring job (planned or held). */
struct ring_set {
	struct fake_ring ring[RING_NODES];
	int n;
	int m;		     /* nodes per ring as planned */
	int64_t gpus_wasted; /* whole-domain requests */
};

struct job_row {
	Ocs__V1__JobSpec *spec; /* deep copy (unpacked) */
	struct ring_set *rings; /* ring jobs: owned; NULL otherwise */
	uint8_t *wire;		/* packed spec, to compare resubmissions */
	size_t wire_len;
	Ocs__V1__JobState state;
	int64_t created_ms, updated_ms;
	/* a "slow-MS-*" submission: answered at ready_ms (PROGRAMMING until then) */
	struct nb_call *slow_call;
	int64_t ready_ms;
};

struct fake {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct work *head, *tail;
	bool stop;
	struct nb_server *server;
	/* owned by the worker thread only */
	struct job_row *jobs; /* MAX_JOBS */
	int n_jobs;
	bool drained[GROUPS * DEVICES_PER_GROUP];
	bool ring; /* --ring: an OCSTrx ring domain */
	/* --ring: per node, the job row holding it (-1: none) and whether it failed */
	int node_job[RING_NODES];
	bool node_faulty[RING_NODES];
	/* --replica-id: set before serving, read-only after */
	const char *replica_id;			 /* NULL: ocsd alone */
	char self_address[64];			 /* 127.0.0.1:PORT */
	const char *leader_id;			 /* NULL: this replica leads */
	char leader_address[64];		 /* a follower's leader ("self" resolved) */
	Ocs__V1__Replica replica[2 + MAX_PEERS]; /* self, leader, peers */
	Ocs__V1__Replica *replicas[2 + MAX_PEERS];
	size_t n_replicas;
	const char *store_problem;
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

/* "ocs-gG-dI" for any int G and I, with its NUL */
#define DEVICE_NAME_MAX 32

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

/* The job's leaf demand; NULL for the other kinds (the demand is a oneof). */
static const Ocs__V1__LeafDemand *leaf_demand_of(const Ocs__V1__JobSpec *spec)
{
	return spec->demand_case == OCS__V1__JOB_SPEC__DEMAND_LEAF_DEMAND ? spec->leaf_demand
									  : NULL;
}

/* ---- the fake ring domain (--ring) ---- */

static bool is_ring_job(const Ocs__V1__JobSpec *spec)
{
	return spec->demand_case == OCS__V1__JOB_SPEC__DEMAND_RING && spec->ring;
}

/*
 * Plans a ring job on the free healthy nodes, in id order: 0 and rs
 * filled, or the call failed (RESOURCE_EXHAUSTED, as the daemon answers
 * when too few rings exist) and -1.
 */
static int plan_rings(struct fake *f, struct nb_call *call, const Ocs__V1__RingRequest *q,
		      struct ring_set *rs)
{
	int m = q->tp / RING_GPUS_PER_NODE, free_nodes[RING_NODES], n_free = 0, want;

	memset(rs, 0, sizeof(*rs));
	for (int n = 0; n < RING_NODES; n++)
		if (f->node_job[n] < 0 && !f->node_faulty[n])
			free_nodes[n_free++] = n;
	want = q->gpus > 0 ? (int)(q->gpus / q->tp) : q->rings > 0 ? q->rings : n_free / m;
	if (want == 0 || want * m > n_free) {
		nb_call_fail(call, NB_RESOURCE_EXHAUSTED, "ring",
			     "the job needs %d rings of %d nodes; the healthy free nodes give %d",
			     want ? want : 1, m, n_free / m);
		return -1;
	}
	rs->m = m;
	rs->n = want;
	for (int k = 0; k < want; k++) {
		struct fake_ring *r = &rs->ring[k];

		r->n = (size_t)m;
		for (int i = 0; i < m; i++)
			r->nodes[i] = free_nodes[k * m + i];
		r->last_change = OCS__V1__RING_CHANGE__RING_CHANGE_PLACED;
		r->failed_node = -1;
	}
	if (q->gpus == 0 && q->rings == 0)
		rs->gpus_wasted = (int64_t)(n_free - want * m) * RING_GPUS_PER_NODE;
	return 0;
}

/* The definition: node i of ring k and of ring k+1 under different ToRs. */
static double cross_tor_share(const struct ring_set *rs)
{
	int pairs = 0, cross = 0;

	for (int k = 0; k + 1 < rs->n; k++)
		for (size_t i = 0; i < rs->ring[k].n && i < rs->ring[k + 1].n; i++) {
			pairs++;
			cross += rs->ring[k].nodes[i] / RING_NODES_PER_TOR !=
				 rs->ring[k + 1].nodes[i] / RING_NODES_PER_TOR;
		}
	return pairs ? (double)cross / pairs : 0;
}

/* Ring messages of a ring set (pointing into it) and its figures. */
struct fake_rings {
	Ocs__V1__Ring r[RING_NODES];
	Ocs__V1__Ring *rp[RING_NODES];
	Ocs__V1__RingFigures fig;
	size_t n;
};

static void fill_rings(const Ocs__V1__JobSpec *spec, const struct ring_set *rs,
		       struct fake_rings *fr)
{
	const char *orch = spec->ring->orchestration[0] ? spec->ring->orchestration : "dcn-free";

	fr->n = 0;
	for (int k = 0; k < rs->n; k++) {
		Ocs__V1__Ring *r = &fr->r[fr->n];

		ocs__v1__ring__init(r);
		r->job_id = spec->id;
		r->index = k;
		r->nodes = (int32_t *)rs->ring[k].nodes;
		r->n_nodes = rs->ring[k].n;
		r->last_change = rs->ring[k].last_change;
		r->failed_node = rs->ring[k].failed_node;
		if (r->last_change == OCS__V1__RING_CHANGE__RING_CHANGE_LOST)
			r->reason = "no bypass: the ring had one node, and no free node is left";
		fr->rp[fr->n++] = r;
	}
	ocs__v1__ring_figures__init(&fr->fig);
	fr->fig.orchestration = (char *)orch;
	fr->fig.rings = rs->n;
	fr->fig.nodes_per_ring = rs->m;
	fr->fig.gpus_placed = (int64_t)rs->n * rs->m * RING_GPUS_PER_NODE;
	fr->fig.gpus_wasted = rs->gpus_wasted;
	fr->fig.cross_tor_share = cross_tor_share(rs);
	if (strcmp(orch, "fat-tree") == 0) {
		fr->fig.constraints_kept = 2;
		fr->fig.constraints_total = 3;
	}
}

static void publish_ring(struct fake *f, const Ocs__V1__Ring *ring, const int32_t *old,
			 size_t n_old, bool fault)
{
	Ocs__V1__Event ev = OCS__V1__EVENT__INIT;
	Ocs__V1__RingEvent re = OCS__V1__RING_EVENT__INIT;

	re.ring = (Ocs__V1__Ring *)ring;
	re.old_nodes = (int32_t *)old;
	re.n_old_nodes = n_old;
	if (fault) { /* made-up figures, as the daemon measures them */
		re.reaction_us = 1500;
		re.devices_us = 900;
	}
	ev.kind_case = OCS__V1__EVENT__KIND_RING;
	ev.ring = &re;
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
	char dev[64][DEVICE_NAME_MAX];
	size_t n;
};

static void make_circuits(const Ocs__V1__JobSpec *spec, struct fake_circuits *fc)
{
	const Ocs__V1__LeafDemand *d = leaf_demand_of(spec);

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
			 const struct fake_circuits *fc, struct fake_rings *fr)
{
	const Ocs__V1__LeafDemand *d = leaf_demand_of(spec);
	int links = 0;

	if (is_ring_job(spec)) {
		fig->planner = fr->fig.orchestration;
		fig->plan_duration_us = 42;
		fig->ring = &fr->fig;
		return;
	}
	for (size_t i = 0; d && i < d->n_pairs; i++)
		links += d->pairs[i]->links;
	fig->planner = spec->options && spec->options->planner[0] ? spec->options->planner
								  : "leaf-centric";
	fig->links_requested = links;
	fig->links_placed = links;
	fig->circuits_new = (int32_t)fc->n;
	fig->max_contention = 1.0;
}

/* Fills a Job message from a row; circuits go into fc, rings into fr. */
static void fill_job(struct job_row *r, Ocs__V1__Job *job, Ocs__V1__PlanFigures *fig,
		     struct fake_circuits *fc, struct fake_rings *fr)
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
	if (r->rings) {
		fill_rings(r->spec, r->rings, fr);
		job->rings = fr->rp;
		job->n_rings = fr->n;
	}
	fill_figures(r->spec, fig, fc, fr);
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
	struct fake_rings *fr;
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
		struct ring_set *rs = is_ring_job(spec) ? malloc(sizeof(*rs)) : NULL;

		if (is_ring_job(spec) && (!rs || plan_rings(f, call, spec->ring, rs))) {
			if (!rs)
				nb_call_fail(call, NB_RESOURCE_EXHAUSTED, "", "out of memory");
			free(rs);
			free(wire);
			return;
		}
		r = f->n_jobs < MAX_JOBS ? &f->jobs[f->n_jobs++] : NULL;
		for (int i = 0; !r && i < MAX_JOBS; i++) /* forget a released job */
			if (f->jobs[i].state == OCS__V1__JOB_STATE__JOB_STATE_RELEASED) {
				r = &f->jobs[i];
				ocs__v1__job_spec__free_unpacked(r->spec, NULL);
				free(r->wire);
				free(r->rings);
			}
		if (!r) {
			free(wire);
			free(rs);
			nb_call_fail(call, NB_RESOURCE_EXHAUSTED, "", "test server holds %d jobs",
				     MAX_JOBS);
			return;
		}
		r->spec = ocs__v1__job_spec__unpack(NULL, len, wire);
		r->wire = wire;
		r->wire_len = len;
		r->rings = rs;
		r->created_ms = r->updated_ms = now_ms();
		publish_job(f, spec->id, OCS__V1__JOB_STATE__JOB_STATE_PENDING);
		for (int k = 0; rs && k < rs->n; k++)
			for (size_t i = 0; i < rs->ring[k].n; i++)
				f->node_job[rs->ring[k].nodes[i]] = (int)(r - f->jobs);
		r->state = OCS__V1__JOB_STATE__JOB_STATE_ACTIVE;
		resp.created = true;
		if (strncmp(spec->id, "slow-", 5) == 0) {
			r->state = OCS__V1__JOB_STATE__JOB_STATE_PROGRAMMING;
			r->slow_call = call;
			r->ready_ms = now_ms() + strtol(spec->id + 5, NULL, 10);
			return; /* answered by finish_slow() */
		}
	}
	fc = malloc(sizeof(*fc));
	fr = malloc(sizeof(*fr));
	if (!fc || !fr) {
		nb_call_fail(call, NB_RESOURCE_EXHAUSTED, "", "out of memory");
		free(fc);
		free(fr);
		return;
	}
	fill_job(r, &job, &fig, fc, fr);
	if (resp.created) {
		for (size_t k = 0; k < job.n_rings; k++)
			publish_ring(f, job.rings[k], NULL, 0, false);
		publish_job(f, spec->id, OCS__V1__JOB_STATE__JOB_STATE_ACTIVE);
	}
	resp.job = &job;
	nb_call_reply(call, &resp.base);
	free(fc);
	free(fr);
}

/* Slow jobs whose time came: ACTIVE, and their submitter answered. Returns
 * the ms until the next is due (-1: none waits). */
static int64_t finish_slow(struct fake *f)
{
	int64_t now = now_ms(), next = -1;

	for (int i = 0; i < f->n_jobs; i++) {
		struct job_row *r = &f->jobs[i];
		Ocs__V1__SubmitJobResponse resp = OCS__V1__SUBMIT_JOB_RESPONSE__INIT;
		Ocs__V1__Job job;
		Ocs__V1__PlanFigures fig;
		struct fake_circuits *fc;
		struct fake_rings *fr;

		if (!r->slow_call)
			continue;
		if (r->ready_ms > now) {
			if (next < 0 || r->ready_ms - now < next)
				next = r->ready_ms - now;
			continue;
		}
		if (r->state == OCS__V1__JOB_STATE__JOB_STATE_PROGRAMMING)
			r->state = OCS__V1__JOB_STATE__JOB_STATE_ACTIVE;
		r->updated_ms = now;
		publish_job(f, r->spec->id, r->state);
		fc = malloc(sizeof(*fc));
		fr = malloc(sizeof(*fr));
		if (fc && fr) {
			fill_job(r, &job, &fig, fc, fr);
			resp.job = &job;
			resp.created = true;
			nb_call_reply(r->slow_call, &resp.base);
		} else {
			nb_call_fail(r->slow_call, NB_RESOURCE_EXHAUSTED, "", "out of memory");
		}
		r->slow_call = NULL;
		free(fc);
		free(fr);
	}
	return next;
}

/* --jobs N: N FAILED jobs, as refused submissions leave them. 0 or -1. */
static int add_bulk_jobs(struct fake *f, int n)
{
	for (int i = 0; i < n && f->n_jobs < MAX_JOBS; i++) {
		Ocs__V1__JobSpec spec = OCS__V1__JOB_SPEC__INIT;
		Ocs__V1__LeafDemand d = OCS__V1__LEAF_DEMAND__INIT;
		Ocs__V1__LeafPair pair = OCS__V1__LEAF_PAIR__INIT, *pp = &pair;
		struct job_row *r = &f->jobs[f->n_jobs];
		char id[32];

		snprintf(id, sizeof(id), "bulk-%05d", i);
		pair.a = 0;
		pair.b = 4;
		pair.links = 1;
		d.pairs = &pp;
		d.n_pairs = 1;
		spec.id = id;
		spec.demand_case = OCS__V1__JOB_SPEC__DEMAND_LEAF_DEMAND;
		spec.leaf_demand = &d;
		r->wire_len = ocs__v1__job_spec__get_packed_size(&spec);
		r->wire = malloc(r->wire_len);
		if (!r->wire)
			return -1;
		ocs__v1__job_spec__pack(&spec, r->wire);
		r->spec = ocs__v1__job_spec__unpack(NULL, r->wire_len, r->wire);
		if (!r->spec)
			return -1;
		r->state = OCS__V1__JOB_STATE__JOB_STATE_FAILED;
		r->created_ms = r->updated_ms = now_ms();
		f->n_jobs++;
	}
	return 0;
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
	struct fake_rings *fr = malloc(sizeof(*fr));
	struct ring_set *rs = malloc(sizeof(*rs));

	if (!fc || !fr || !rs || magic_refusal(call, spec->id)) {
		if (!fc || !fr || !rs)
			nb_call_fail(call, NB_RESOURCE_EXHAUSTED, "", "out of memory");
		goto out;
	}
	flood(f, spec->id);
	if (is_ring_job(spec)) { /* a dry run: the node table does not change */
		if (plan_rings(f, call, spec->ring, rs))
			goto out;
		fill_rings(spec, rs, fr);
		resp.rings = fr->rp;
		resp.n_rings = fr->n;
	}
	make_circuits(spec, fc);
	fill_figures(spec, &fig, fc, fr);
	resp.figures = &fig;
	resp.circuits = fc->cp;
	resp.n_circuits = fc->n;
	nb_call_reply(call, &resp.base);
out:
	free(fc);
	free(fr);
	free(rs);
}

static void reply_job(struct nb_call *call, struct job_row *r, bool release)
{
	Ocs__V1__ReleaseJobResponse rel = OCS__V1__RELEASE_JOB_RESPONSE__INIT;
	Ocs__V1__GetJobResponse get = OCS__V1__GET_JOB_RESPONSE__INIT;
	Ocs__V1__Job job;
	Ocs__V1__PlanFigures fig;
	struct fake_circuits *fc = malloc(sizeof(*fc));
	struct fake_rings *fr = malloc(sizeof(*fr));

	if (!fc || !fr) {
		nb_call_fail(call, NB_RESOURCE_EXHAUSTED, "", "out of memory");
		free(fc);
		free(fr);
		return;
	}
	fill_job(r, &job, &fig, fc, fr);
	rel.job = &job;
	get.job = &job;
	nb_call_reply(call, release ? &rel.base : &get.base);
	free(fc);
	free(fr);
}

static int cmp_row_id(const void *a, const void *b)
{
	const struct job_row *const *x = a, *const *y = b;

	return strcmp((*x)->spec->id, (*y)->spec->id);
}

/* A page of jobs in id order, after the token (as ocsd pages). */
static void do_list_jobs(struct fake *f, struct nb_call *call, const Ocs__V1__ListJobsRequest *req)
{
	Ocs__V1__ListJobsResponse resp = OCS__V1__LIST_JOBS_RESPONSE__INIT;
	size_t page = nb_page_size(NB_JOBS_LIST_JOBS, req->page_size), n_cand = 0;
	const char *after = nb_jobs_token_after(req->page_token);
	struct job_row **cand = calloc((size_t)f->n_jobs + 1, sizeof(*cand));
	Ocs__V1__Job *jobs = calloc(page, sizeof(*jobs));
	Ocs__V1__Job **jp = calloc(page, sizeof(*jp));
	Ocs__V1__PlanFigures *figs = calloc(page, sizeof(*figs));
	struct fake_circuits *fc = malloc(sizeof(*fc));
	struct fake_rings *fr = calloc(page, sizeof(*fr)); /* rings are listed */
	char token[NB_PAGE_TOKEN_MAX_LEN + 1];

	if (cand && jobs && jp && figs && fc && fr) {
		for (int i = 0; i < f->n_jobs; i++) {
			if (req->state && f->jobs[i].state != req->state)
				continue;
			if (after && strcmp(f->jobs[i].spec->id, after) <= 0)
				continue;
			cand[n_cand++] = &f->jobs[i];
		}
		qsort(cand, n_cand, sizeof(*cand), cmp_row_id);
		for (size_t i = 0; i < n_cand && i < page; i++) {
			fill_job(cand[i], &jobs[resp.n_jobs], &figs[resp.n_jobs], fc,
				 &fr[resp.n_jobs]);
			jobs[resp.n_jobs].circuits = NULL; /* lists stay short */
			jobs[resp.n_jobs].n_circuits = 0;
			jp[resp.n_jobs] = &jobs[resp.n_jobs];
			resp.n_jobs++;
		}
		if (n_cand > page) {
			nb_jobs_token(cand[page - 1]->spec->id, token, sizeof(token));
			resp.next_page_token = token;
		}
		resp.jobs = jp;
		nb_call_reply(call, &resp.base);
	} else {
		nb_call_fail(call, NB_RESOURCE_EXHAUSTED, "", "out of memory");
	}
	free(cand);
	free(jobs);
	free(jp);
	free(figs);
	free(fc);
	free(fr);
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
	if (d % 2) { /* what a vendor model says of itself (issue 23) */
		dev->vendor = "Acme";
		dev->model = "OCS-16";
		dev->serial = "S1";
		dev->software = "1.0";
		dev->ports_down = 1;
	}
}

/* Active jobs with a fake circuit on device d (names into out, max n). */
static size_t jobs_on_device(struct fake *f, int d, char **out, size_t max)
{
	char name[DEVICE_NAME_MAX], *want = name;
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
	char name[32], *affected[256];
	int d = device_find(device);
	size_t n;

	if (d < 0) {
		nb_call_fail(call, NB_NOT_FOUND, "device", "no device named %s", device);
		return;
	}
	n = jobs_on_device(f, d, affected, sizeof(affected) / sizeof(affected[0]));
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

static struct nb_circuit_key fake_key(const Ocs__V1__Circuit *c)
{
	return (struct nb_circuit_key){c->group, c->pod_a, c->port_a, c->pod_b, c->port_b};
}

static int cmp_circuit(const void *a, const void *b)
{
	struct nb_circuit_key x = fake_key(*(Ocs__V1__Circuit *const *)a),
			      y = fake_key(*(Ocs__V1__Circuit *const *)b);
	int c = nb_circuit_key_cmp(&x, &y);

	/* Made-up circuits of two jobs may share a key: the job id orders them,
	 * but a page boundary between them skips the second (the token holds
	 * the key only). ocsd's circuits never share a key. */
	return c ? c
		 : strcmp((*(Ocs__V1__Circuit *const *)a)->job_id,
			  (*(Ocs__V1__Circuit *const *)b)->job_id);
}

/* A page of the active jobs' circuits in key order, after the token. */
static void do_list_circuits(struct fake *f, struct nb_call *call,
			     const Ocs__V1__ListCircuitsRequest *req)
{
	Ocs__V1__ListCircuitsResponse resp = OCS__V1__LIST_CIRCUITS_RESPONSE__INIT;
	size_t page = nb_page_size(NB_FABRIC_LIST_CIRCUITS, req->page_size), n_active = 0, n = 0;
	struct nb_circuit_key after;
	bool resume = nb_circuits_token_after(req->page_token, &after);
	struct fake_circuits *fc;
	Ocs__V1__Circuit **all;
	char token[NB_PAGE_TOKEN_MAX_LEN + 1];

	if (req->device[0] && device_find(req->device) < 0) {
		nb_call_fail(call, NB_NOT_FOUND, "device", "no device named %s", req->device);
		return;
	}
	for (int i = 0; i < f->n_jobs; i++)
		n_active += f->jobs[i].state == OCS__V1__JOB_STATE__JOB_STATE_ACTIVE;
	fc = calloc(n_active + 1, sizeof(*fc));
	all = calloc((n_active + 1) * 64, sizeof(*all));
	if (!fc || !all) {
		nb_call_fail(call, NB_RESOURCE_EXHAUSTED, "", "out of memory");
		free(fc);
		free(all);
		return;
	}
	n_active = 0;
	for (int i = 0; i < f->n_jobs; i++) {
		struct fake_circuits *mine = &fc[n_active];

		if (f->jobs[i].state != OCS__V1__JOB_STATE__JOB_STATE_ACTIVE)
			continue;
		n_active++;
		if (req->job_id[0] && strcmp(req->job_id, f->jobs[i].spec->id) != 0)
			continue;
		make_circuits(f->jobs[i].spec, mine);
		for (size_t k = 0; k < mine->n; k++) {
			Ocs__V1__Circuit *c = &mine->c[k];
			struct nb_circuit_key key = fake_key(c);

			if (req->device[0] && strcmp(req->device, mine->dev[k]) != 0)
				continue;
			if (req->has_pod && c->pod_a != req->pod && c->pod_b != req->pod)
				continue;
			if (resume && nb_circuit_key_cmp(&key, &after) <= 0)
				continue;
			all[n++] = c;
		}
	}
	qsort(all, n, sizeof(*all), cmp_circuit);
	resp.n_circuits = n < page ? n : page;
	if (n > page) {
		struct nb_circuit_key last = fake_key(all[page - 1]);

		nb_circuits_token(&last, token, sizeof(token));
		resp.next_page_token = token;
	}
	resp.circuits = all;
	nb_call_reply(call, &resp.base);
	free(fc);
	free(all);
}

/* Release of a ring job: its nodes are free again, each ring RELEASED. */
static void release_rings(struct fake *f, struct job_row *r)
{
	struct fake_rings *fr = malloc(sizeof(*fr));

	for (int k = 0; r->rings && k < r->rings->n; k++) {
		struct fake_ring *ring = &r->rings->ring[k];
		int32_t old[RING_NODES];
		size_t n_old = ring->n;

		memcpy(old, ring->nodes, n_old * sizeof(old[0]));
		for (size_t i = 0; i < ring->n; i++)
			f->node_job[ring->nodes[i]] = -1;
		ring->n = 0;
		ring->last_change = OCS__V1__RING_CHANGE__RING_CHANGE_RELEASED;
		ring->failed_node = -1;
		if (fr) {
			fill_rings(r->spec, r->rings, fr);
			publish_ring(f, &fr->r[k], old, n_old, false);
		}
	}
	free(fr);
}

/*
 * MarkNode: faulty takes the node out of its ring (a bypass: the two
 * neighbours now join; a ring of one node is LOST) and publishes the node
 * event, then the ring event; healthy frees the node. Marking a node as it
 * is changes nothing and publishes nothing.
 */
static void do_mark_node(struct fake *f, struct nb_call *call, const Ocs__V1__MarkNodeRequest *req)
{
	Ocs__V1__MarkNodeResponse resp = OCS__V1__MARK_NODE_RESPONSE__INIT;
	Ocs__V1__Event ev = OCS__V1__EVENT__INIT;
	Ocs__V1__NodeEvent ne = OCS__V1__NODE_EVENT__INIT;
	bool faulty = req->condition == OCS__V1__NODE_CONDITION__NODE_CONDITION_FAULTY;
	int node = req->node, holder = f->node_job[node];
	char *affected[1];

	resp.node = node;
	resp.condition = req->condition;
	if (f->node_faulty[node] == faulty) {
		nb_call_reply(call, &resp.base);
		return;
	}
	f->node_faulty[node] = faulty;
	ne.node = node;
	ne.condition = req->condition;
	ne.source = "operator";
	ev.kind_case = OCS__V1__EVENT__KIND_NODE;
	ev.node = &ne;
	nb_server_publish(f->server, &ev);
	if (faulty && holder >= 0) {
		struct job_row *r = &f->jobs[holder];
		struct fake_rings *fr = malloc(sizeof(*fr));

		for (int k = 0; k < r->rings->n; k++) {
			struct fake_ring *ring = &r->rings->ring[k];
			int32_t old[RING_NODES];
			size_t n_old = ring->n, at = n_old;

			for (size_t i = 0; i < ring->n; i++)
				if (ring->nodes[i] == node)
					at = i;
			if (at == n_old)
				continue;
			memcpy(old, ring->nodes, n_old * sizeof(old[0]));
			memmove(&ring->nodes[at], &ring->nodes[at + 1],
				(n_old - at - 1) * sizeof(old[0]));
			ring->n--;
			ring->last_change = ring->n ? OCS__V1__RING_CHANGE__RING_CHANGE_BYPASSED
						    : OCS__V1__RING_CHANGE__RING_CHANGE_LOST;
			ring->failed_node = node;
			if (fr) {
				fill_rings(r->spec, r->rings, fr);
				publish_ring(f, &fr->r[k], old, n_old, true);
			}
		}
		free(fr);
		f->node_job[node] = -1;
		affected[0] = r->spec->id;
		resp.affected_jobs = affected;
		resp.n_affected_jobs = 1;
	}
	nb_call_reply(call, &resp.base);
}

/* ListRings: the rings of active ring jobs, filtered by job and node. */
static void do_list_rings(struct fake *f, struct nb_call *call,
			  const Ocs__V1__ListRingsRequest *req)
{
	Ocs__V1__ListRingsResponse resp = OCS__V1__LIST_RINGS_RESPONSE__INIT;
	struct fake_rings *fr = calloc(MAX_JOBS, sizeof(*fr));
	Ocs__V1__Ring **all = calloc(MAX_JOBS * RING_NODES, sizeof(*all));

	if (!fr || !all) {
		nb_call_fail(call, NB_RESOURCE_EXHAUSTED, "", "out of memory");
		goto out;
	}
	for (int i = 0; i < f->n_jobs; i++) {
		struct job_row *r = &f->jobs[i];

		if (r->state != OCS__V1__JOB_STATE__JOB_STATE_ACTIVE || !r->rings)
			continue;
		if (req->job_id[0] && strcmp(req->job_id, r->spec->id) != 0)
			continue;
		fill_rings(r->spec, r->rings, &fr[i]);
		for (size_t k = 0; k < fr[i].n; k++) {
			bool holds = !req->has_node;

			for (size_t n = 0; n < fr[i].r[k].n_nodes; n++)
				holds = holds || fr[i].r[k].nodes[n] == req->node;
			if (holds)
				all[resp.n_rings++] = &fr[i].r[k];
		}
	}
	resp.rings = all;
	nb_call_reply(call, &resp.base);
out:
	free(fr);
	free(all);
}

/* GetFabric of the ring domain: on the worker, which owns the node table. */
/* GetFabric's replica fields (41-46): empty when ocsd runs alone. */
static void fill_replica_fields(struct fake *f, Ocs__V1__FabricSummary *s)
{
	if (f->store_problem)
		s->store_problem = (char *)f->store_problem;
	if (!f->replica_id)
		return;
	s->store = "etcd";
	s->replica_id = (char *)f->replica_id;
	s->role = f->leader_id ? "follower" : "leader";
	s->leader_id = (char *)(f->leader_id ? f->leader_id : f->replica_id);
	s->leader_address = f->leader_id ? f->leader_address : f->self_address;
	s->replicas = f->replicas;
	s->n_replicas = f->n_replicas;
}

static void do_ring_fabric(struct fake *f, struct nb_call *call)
{
	Ocs__V1__FabricSummary s = OCS__V1__FABRIC_SUMMARY__INIT;

	s.kind = "ocstrx-ring";
	s.nodes = RING_NODES;
	s.tors = RING_TORS;
	s.nodes_per_tor = RING_NODES_PER_TOR;
	s.gpus_per_node = RING_GPUS_PER_NODE;
	s.k_hops = RING_K_HOPS;
	s.bundles = 2;
	s.closed = true;
	s.gpus = RING_NODES * RING_GPUS_PER_NODE;
	s.devices = RING_NODES;
	s.devices_connected = RING_NODES;
	s.version = "nb_test_server";
	for (int n = 0; n < RING_NODES; n++) {
		s.nodes_faulty += f->node_faulty[n];
		s.nodes_busy += f->node_job[n] >= 0;
	}
	for (int i = 0; i < f->n_jobs; i++) {
		if (f->jobs[i].state != OCS__V1__JOB_STATE__JOB_STATE_ACTIVE)
			continue;
		s.jobs_active++;
		for (int k = 0; f->jobs[i].rings && k < f->jobs[i].rings->n; k++)
			s.rings_active += f->jobs[i].rings->ring[k].n > 0;
	}
	fill_replica_fields(f, &s);
	nb_call_reply(call, &s.base);
}

/* The calls a follower answers itself (issue 15 #3); the others go to the
 * leader. */
static bool follower_serves(enum nb_method m)
{
	return m == NB_JOBS_GET_JOB || m == NB_JOBS_LIST_JOBS || m == NB_FABRIC_LIST_CIRCUITS ||
	       m == NB_FABRIC_LIST_DEVICES || m == NB_FABRIC_GET_FABRIC;
}

static void serve(struct fake *f, struct work *w)
{
	struct nb_call *call = w->call;
	struct job_row *r;

	if (f->replica_id && f->leader_id && !follower_serves(nb_call_method(call))) {
		nb_call_fail(call, NB_UNAVAILABLE, "", "not the leader; leader is %s",
			     f->leader_address);
		return;
	}
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
			release_rings(f, r);
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
	case NB_FABRIC_GET_FABRIC:
		do_ring_fabric(f, call);
		break;
	case NB_FABRIC_MARK_NODE:
		do_mark_node(f, call, w->req);
		break;
	case NB_FABRIC_LIST_RINGS:
		do_list_rings(f, call, w->req);
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

		int64_t next = finish_slow(f);

		pthread_mutex_lock(&f->mu);
		if (!f->head && !f->stop && next >= 0) {
			struct timespec until;

			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_sec += next / 1000;
			until.tv_nsec += (next % 1000) * 1000000;
			if (until.tv_nsec >= 1000000000) {
				until.tv_sec++;
				until.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&f->cv, &f->mu, &until);
			pthread_mutex_unlock(&f->mu);
			continue;
		}
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

/* Answered inside the handler, on the gRPC thread: static data only. The
 * ring domain's summary counts rings and faults: the worker answers it. */
static void h_get_fabric(void *ctx, struct nb_call *call, const Ocs__V1__GetFabricRequest *req)
{
	Ocs__V1__FabricSummary s = OCS__V1__FABRIC_SUMMARY__INIT;

	if (((struct fake *)ctx)->ring) {
		enqueue(ctx, call, req);
		return;
	}
	s.kind = "leaf-spine-ocs";
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
	fill_replica_fields(ctx, &s);
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
QUEUE_HANDLER(h_mark_node, Ocs__V1__MarkNodeRequest)
QUEUE_HANDLER(h_list_rings, Ocs__V1__ListRingsRequest)

static void usage(void)
{
	fprintf(stderr, "usage: nb_test_server [--listen ADDR] [--insecure] [--ca F --cert F "
			"--key F] [--max-message-bytes N] [--queue N] [--max-streams N] [--ring] "
			"[--jobs N] [--replica-id ID [--leader ID@ADDR] [--peer ID@ADDR]..] "
			"[--store-problem TEXT]\n");
	exit(2);
}

/* "ID@ADDR" -> r (pointing into arg, which it splits); false if malformed. */
static bool parse_replica(char *arg, Ocs__V1__Replica *r)
{
	char *at = strchr(arg, '@');

	if (!at || at == arg || !at[1])
		return false;
	*at = '\0';
	ocs__v1__replica__init(r);
	r->id = arg;
	r->address = at + 1;
	return true;
}

/*
 * Once the port is known: the replica's own address, "self" resolved, the
 * replica list (self, the leader, the peers) and the health of ocs.v1.Jobs.
 */
static void replica_start(struct fake *f, const char *listen_addr, Ocs__V1__Replica *leader,
			  Ocs__V1__Replica *peers, size_t n_peers)
{
	const char *colon = strrchr(listen_addr, ':');
	int host_len = colon ? (int)(colon - listen_addr) : 0;

	snprintf(f->self_address, sizeof(f->self_address), "%.*s:%d", host_len, listen_addr,
		 nb_server_port(f->server));
	ocs__v1__replica__init(&f->replica[0]);
	f->replica[0].id = (char *)f->replica_id;
	f->replica[0].address = f->self_address;
	f->replica[0].leader = !f->leader_id;
	f->n_replicas = 1;
	if (f->leader_id) {
		snprintf(f->leader_address, sizeof(f->leader_address), "%s",
			 strcmp(leader->address, "self") ? leader->address : f->self_address);
		f->replica[1] = *leader;
		f->replica[1].address = f->leader_address;
		f->replica[1].leader = true;
		f->n_replicas = 2;
	}
	for (size_t i = 0; i < n_peers; i++)
		f->replica[f->n_replicas++] = peers[i];
	for (size_t i = 0; i < f->n_replicas; i++)
		f->replicas[i] = &f->replica[i];
	nb_server_set_health(
		f->server, "ocs.v1.Jobs",
		f->leader_id ? GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING
			     : GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING);
}

int main(int argc, char **argv)
{
	static struct fake f;
	struct nb_server_config cfg = {0};
	Ocs__V1__Replica leader, peers[MAX_PEERS];
	size_t n_peers = 0;
	int bulk = 0;
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
		if (strcmp(a, "--ring") == 0) {
			f.ring = true;
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
		else if (strcmp(a, "--max-streams") == 0)
			cfg.max_streams = atoi(v);
		else if (strcmp(a, "--jobs") == 0)
			bulk = atoi(v);
		else if (strcmp(a, "--replica-id") == 0)
			f.replica_id = v;
		else if (strcmp(a, "--leader") == 0 && parse_replica(argv[i], &leader))
			f.leader_id = leader.id;
		else if (strcmp(a, "--peer") == 0 && n_peers < MAX_PEERS &&
			 parse_replica(argv[i], &peers[n_peers]))
			n_peers++;
		else if (strcmp(a, "--store-problem") == 0)
			f.store_problem = v;
		else
			usage();
	}
	if (!f.replica_id && (f.leader_id || n_peers))
		usage();
	cfg.limits =
		(struct nb_limits){.pods = PODS,
				   .leaves_per_pod = LEAVES_PER_POD,
				   .gpus_per_leaf = GPUS_PER_LEAF,
				   .groups = GROUPS,
				   /* The northbound knows no planner: pass some, as ocsd does. */
				   .planners = {{"leaf-centric", false}, {"pod-centric", false}},
				   .n_planners = 2};
	if (f.ring)
		cfg.limits = (struct nb_limits){
			.kind = NB_FABRIC_OCSTRX_RING,
			.ring = {.nodes = RING_NODES, .gpus_per_node = RING_GPUS_PER_NODE},
		};
	for (int n = 0; n < RING_NODES; n++)
		f.node_job[n] = -1;
	f.jobs = calloc(MAX_JOBS, sizeof(*f.jobs));
	if (!f.jobs || add_bulk_jobs(&f, bulk) != 0) {
		fprintf(stderr, "nb_test_server: out of memory\n");
		return 1;
	}
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
		.mark_node = h_mark_node,
		.list_rings = h_list_rings,
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
	if (f.replica_id)
		replica_start(&f, cfg.listen_addr, &leader, peers, n_peers);
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
		free(f.jobs[i].rings);
	}
	free(f.jobs);
	if (!nb_grpc_settle(NB_SETTLE_MS))
		fprintf(stderr, "nb_test_server: gRPC had not ended after %d ms\n", NB_SETTLE_MS);
	fprintf(stderr, "nb_test_server: stopped (%s)\n", strsignal(sig));
	return 0;
}
