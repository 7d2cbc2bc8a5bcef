/*
 * delta_sim.c - event-driven simulation of a DELTA plan (contract in
 * delta_sim.h).
 *
 * Per direction d = 2 * link + (src is the link's pod b), all active flows
 * get the same rate r_d = B * min(1, x / active flows). Instead of updating
 * every active task at each event, a direction keeps S_d, the bytes one
 * flow has moved since the direction became busy; a task starting when S_d
 * = s finishes when S_d reaches s + V / F. Its finish threshold goes into
 * the direction's min-heap, so an event touches only the direction whose
 * rate changes. Pending starts wait in a global min-heap keyed by time.
 * Ties in both heaps break on the task index, which keeps the run
 * deterministic.
 *
 * delta_problem_new() lives here too: it compiles the DAG (delta_dag.c) and
 * stores the critical time of the ideal schedule, the divisor of every nct,
 * so that delta_dag.c never calls the simulator.
 */
#include "delta_sim.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

struct heap_item {
	double key;
	int task;
};

struct heap {
	struct heap_item *v;
	int n, cap;
};

static int item_less(struct heap_item a, struct heap_item b)
{
	return a.key < b.key || (a.key == b.key && a.task < b.task);
}

static int heap_push(struct heap *h, double key, int task)
{
	if (h->n == h->cap) {
		int cap = h->cap ? 2 * h->cap : 8;
		struct heap_item *v = realloc(h->v, (size_t)cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		h->v = v;
		h->cap = cap;
	}
	int i = h->n++;
	h->v[i] = (struct heap_item){key, task};
	while (i > 0) {
		int up = (i - 1) / 2;
		if (!item_less(h->v[i], h->v[up]))
			break;
		struct heap_item s = h->v[i];
		h->v[i] = h->v[up];
		h->v[up] = s;
		i = up;
	}
	return 0;
}

static struct heap_item heap_pop(struct heap *h)
{
	struct heap_item top = h->v[0];
	h->v[0] = h->v[--h->n];
	int i = 0;
	for (;;) {
		int l = 2 * i + 1, r = l + 1, m = i;
		if (l < h->n && item_less(h->v[l], h->v[m]))
			m = l;
		if (r < h->n && item_less(h->v[r], h->v[m]))
			m = r;
		if (m == i)
			break;
		struct heap_item s = h->v[i];
		h->v[i] = h->v[m];
		h->v[m] = s;
		i = m;
	}
	return top;
}

static int near_equal(double a, double b)
{
	double scale = fmax(1.0, fmax(fabs(a), fabs(b)));
	return fabs(a - b) <= 1e-9 * scale;
}

/* Start-time bookkeeping shared by both schedules. */
static void consider_pred(double *ready, int *det, double cand, int pre)
{
	if (near_equal(cand, *ready)) {
		if (*det < 0 || pre < *det)
			*det = pre;
		if (cand > *ready)
			*ready = cand;
	} else if (cand > *ready) {
		*ready = cand;
		*det = pre;
	}
}

static void trace_critical(const struct delta_problem *p, const double *start, const double *finish,
			   const int *det, struct delta_sim_result *out)
{
	int n = delta_problem_n_tasks(p), last = 0;
	for (int t = 1; t < n; t++)
		if (finish[t] > finish[last] && !near_equal(finish[t], finish[last]))
			last = t;
	out->makespan_ms = finish[last];
	out->critical_comm_ms = 0;
	out->critical_tasks = 0;
	for (int t = last; t >= 0; t = det[t]) {
		out->critical_comm_ms += finish[t] - start[t];
		out->critical_tasks++;
	}
}

struct direction {
	struct heap thresholds; /* per-flow bytes at which each task finishes */
	long active_flows;
	double served;	   /* S_d, bytes per flow since the direction got busy */
	double updated_ms; /* time S_d was last brought up to date */
	double rate;	   /* bytes per ms per flow */
	int active_pos;	   /* index in the active list, -1 if idle */
};

struct sim {
	const struct delta_problem *p;
	const int *x;
	double bpms;
	struct direction *dirs;
	int *active;
	int n_active;
	struct heap starts;
	double *ready, *start, *finish;
	int *det, *pending;
	int finished;
};

static void dir_advance(struct direction *d, double t)
{
	d->served += d->rate * (t - d->updated_ms);
	d->updated_ms = t;
}

static void dir_set_rate(struct sim *s, struct direction *d, int x)
{
	d->rate = d->active_flows > 0 ? s->bpms * fmin(1.0, (double)x / (double)d->active_flows)
				      : 0.0;
}

static int finish_task(struct sim *s, int t, double now)
{
	const struct delta_dep *deps = delta_problem_deps(s->p);
	const struct delta_task *tasks = delta_problem_tasks(s->p);
	int n_out;
	const int *out = delta_problem_out_deps(s->p, t, &n_out);

	s->finish[t] = now;
	s->finished++;
	for (int k = 0; k < n_out; k++) {
		const struct delta_dep *e = &deps[out[k]];
		consider_pred(&s->ready[e->post], &s->det[e->post], now + e->delay_ms, t);
		if (--s->pending[e->post] == 0) {
			double at = s->ready[e->post];
			if (tasks[e->post].release_ms > at &&
			    !near_equal(tasks[e->post].release_ms, at)) {
				at = tasks[e->post].release_ms;
				s->det[e->post] = -1;
			}
			if (heap_push(&s->starts, at, e->post))
				return -ENOMEM;
		}
	}
	return 0;
}

static int start_task(struct sim *s, int t, double now)
{
	const struct delta_task *m = &delta_problem_tasks(s->p)[t];
	int l = delta_problem_task_link(s->p, t);
	int d_idx = 2 * l + (m->src_pod == delta_problem_links(s->p)[l].a ? 0 : 1);
	struct direction *d = &s->dirs[d_idx];

	s->start[t] = now;
	if (m->volume_bytes == 0)
		return finish_task(s, t, now);
	if (s->x[l] <= 0)
		return -EDOM;
	if (d->active_pos < 0) {
		d->served = 0;
		d->updated_ms = now;
		d->active_pos = s->n_active;
		s->active[s->n_active++] = d_idx;
	} else {
		dir_advance(d, now);
	}
	if (heap_push(&d->thresholds, d->served + m->volume_bytes / m->flows, t))
		return -ENOMEM;
	d->active_flows += m->flows;
	dir_set_rate(s, d, s->x[l]);
	return 0;
}

/* Finishes the task(s) at the head of direction d_idx at time now. */
static int finish_in_direction(struct sim *s, int d_idx, double now)
{
	struct direction *d = &s->dirs[d_idx];
	const struct delta_task *tasks = delta_problem_tasks(s->p);

	dir_advance(d, now);
	do {
		struct heap_item top = heap_pop(&d->thresholds);
		if (top.key > d->served)
			d->served = top.key;
		d->active_flows -= tasks[top.task].flows;
		int rc = finish_task(s, top.task, now);
		if (rc)
			return rc;
	} while (d->thresholds.n > 0 &&
		 d->thresholds.v[0].key <= d->served + 1e-9 * fmax(1.0, d->served));
	if (d->thresholds.n == 0) {
		int pos = d->active_pos;
		s->active[pos] = s->active[--s->n_active];
		s->dirs[s->active[pos]].active_pos = pos;
		d->active_pos = -1;
		d->active_flows = 0;
		d->rate = 0;
	} else {
		dir_set_rate(s, d, s->x[d_idx / 2]);
	}
	return 0;
}

static int run(struct sim *s)
{
	const struct delta_task *tasks = delta_problem_tasks(s->p);
	int n = delta_problem_n_tasks(s->p);

	for (int t = 0; t < n; t++) {
		int n_in;
		delta_problem_in_deps(s->p, t, &n_in);
		s->pending[t] = n_in;
		s->ready[t] = tasks[t].release_ms;
		s->det[t] = -1;
		if (n_in == 0 && heap_push(&s->starts, tasks[t].release_ms, t))
			return -ENOMEM;
	}
	for (;;) {
		double next_start = s->starts.n ? s->starts.v[0].key : INFINITY;
		double next_finish = INFINITY;
		int fin_dir = -1;
		for (int k = 0; k < s->n_active; k++) {
			struct direction *d = &s->dirs[s->active[k]];
			double at = d->updated_ms + (d->thresholds.v[0].key - d->served) / d->rate;
			if (at < next_finish || (at == next_finish && s->active[k] < fin_dir)) {
				next_finish = at;
				fin_dir = s->active[k];
			}
		}
		int rc;
		if (fin_dir < 0 && s->starts.n == 0)
			break;
		if (next_start <= next_finish) {
			struct heap_item it = heap_pop(&s->starts);
			rc = start_task(s, it.task, it.key);
		} else {
			rc = finish_in_direction(s, fin_dir, next_finish);
		}
		if (rc)
			return rc;
	}
	return s->finished == n ? 0 : -EDOM;
}

int delta_simulate(const struct delta_problem *p, const int *x, struct delta_sim_result *out,
		   double *start_ms, double *finish_ms)
{
	int n = delta_problem_n_tasks(p), n_dirs = 2 * delta_problem_n_links(p);
	struct sim s = {.p = p, .x = x, .bpms = delta_problem_bytes_per_ms(p)};
	int rc = -ENOMEM;

	s.dirs = calloc((size_t)n_dirs, sizeof(*s.dirs));
	s.active = malloc((size_t)n_dirs * sizeof(int));
	s.ready = malloc((size_t)n * sizeof(double));
	s.start = start_ms ? start_ms : malloc((size_t)n * sizeof(double));
	s.finish = finish_ms ? finish_ms : malloc((size_t)n * sizeof(double));
	s.det = malloc((size_t)n * sizeof(int));
	s.pending = malloc((size_t)n * sizeof(int));
	if (s.dirs && s.active && s.ready && s.start && s.finish && s.det && s.pending) {
		for (int d = 0; d < n_dirs; d++)
			s.dirs[d].active_pos = -1;
		rc = run(&s);
	}
	if (rc == 0) {
		double ideal_ms = delta_problem_ideal_critical_ms(p);
		trace_critical(p, s.start, s.finish, s.det, out);
		out->nct = ideal_ms > 0 ? out->critical_comm_ms / ideal_ms : 1.0;
	}
	if (s.dirs)
		for (int d = 0; d < n_dirs; d++)
			free(s.dirs[d].thresholds.v);
	free(s.dirs);
	free(s.active);
	free(s.ready);
	if (!start_ms)
		free(s.start);
	if (!finish_ms)
		free(s.finish);
	free(s.det);
	free(s.pending);
	free(s.starts.v);
	return rc;
}

int delta_simulate_ideal(const struct delta_problem *p, struct delta_sim_result *out,
			 double *start_ms, double *finish_ms)
{
	int n = delta_problem_n_tasks(p);
	const struct delta_task *tasks = delta_problem_tasks(p);
	const struct delta_dep *deps = delta_problem_deps(p);
	const int *topo = delta_problem_topo_order(p);
	double bpms = delta_problem_bytes_per_ms(p);
	double *start = start_ms ? start_ms : malloc((size_t)n * sizeof(double));
	double *finish = finish_ms ? finish_ms : malloc((size_t)n * sizeof(double));
	int *det = malloc((size_t)n * sizeof(int));
	int rc = -ENOMEM;

	if (start && finish && det) {
		for (int k = 0; k < n; k++) {
			int t = topo[k], n_in;
			const int *in = delta_problem_in_deps(p, t, &n_in);
			double ready = 0;
			det[t] = -1;
			for (int j = 0; j < n_in; j++) {
				const struct delta_dep *e = &deps[in[j]];
				consider_pred(&ready, &det[t], finish[e->pre] + e->delay_ms,
					      e->pre);
			}
			if (n_in == 0 || (tasks[t].release_ms > ready &&
					  !near_equal(tasks[t].release_ms, ready))) {
				ready = fmax(ready, tasks[t].release_ms);
				det[t] = -1;
			}
			start[t] = ready;
			finish[t] = ready + tasks[t].volume_bytes / (tasks[t].flows * bpms);
		}
		trace_critical(p, start, finish, det, out);
		out->nct = 1.0;
		rc = 0;
	}
	if (!start_ms)
		free(start);
	if (!finish_ms)
		free(finish);
	free(det);
	return rc;
}

struct delta_problem *delta_problem_new(const struct delta_dag *dag, struct delta_error *err)
{
	struct delta_problem *p = delta_problem_compile(dag, err);
	struct delta_sim_result ideal;

	if (!p)
		return NULL;
	if (delta_simulate_ideal(p, &ideal, NULL, NULL)) {
		delta_error_set(err, "memory", "out of memory");
		delta_problem_free(p);
		return NULL;
	}
	delta_problem_set_ideal_critical_ms(p, ideal.critical_comm_ms);
	return p;
}
