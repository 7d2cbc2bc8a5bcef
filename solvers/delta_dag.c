/*
 * delta_dag.c - validation and compilation of the reduced inter-pod
 * communication DAG (see delta_dag.h): checks every field, finds the links,
 * builds adjacency lists and a topological order (Kahn's algorithm, which
 * also detects cycles), and answers port-accounting questions.
 */
#include "delta_dag.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct delta_problem {
	int pods;
	int *port_budget;
	double bandwidth_gbps;
	int n_tasks;
	struct delta_task *tasks;
	int n_deps;
	struct delta_dep *deps;
	int n_links;
	struct delta_link *links;
	int *task_link;
	int *topo;
	int *out_start; /* CSR: out_idx[out_start[t] .. out_start[t+1]) */
	int *out_idx;
	int *in_start;
	int *in_idx;
	double ideal_critical_ms;
};

int delta_error_set(struct delta_error *err, const char *field, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		snprintf(err->field, sizeof(err->field), "%s", field);
		va_start(ap, fmt);
		vsnprintf(err->reason, sizeof(err->reason), fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

void delta_problem_free(struct delta_problem *p)
{
	if (!p)
		return;
	free(p->port_budget);
	free(p->tasks);
	free(p->deps);
	free(p->links);
	free(p->task_link);
	free(p->topo);
	free(p->out_start);
	free(p->out_idx);
	free(p->in_start);
	free(p->in_idx);
	free(p);
}

static int check_fields(const struct delta_dag *dag, struct delta_error *err)
{
	char field[64];

	if (dag->pods < 2)
		return delta_error_set(err, "pods", "need at least 2 pods, got %d", dag->pods);
	if (!(dag->bandwidth_gbps > 0) || !isfinite(dag->bandwidth_gbps))
		return delta_error_set(err, "bandwidth_gbps", "must be a positive number, got %g",
				       dag->bandwidth_gbps);
	if (!dag->port_budget)
		return delta_error_set(err, "port_budget", "missing");
	for (int p = 0; p < dag->pods; p++) {
		if (dag->port_budget[p] < 0) {
			snprintf(field, sizeof(field), "port_budget[%d]", p);
			return delta_error_set(err, field, "must be >= 0, got %d",
					       dag->port_budget[p]);
		}
	}
	if (dag->n_tasks < 1 || !dag->tasks)
		return delta_error_set(err, "tasks", "need at least one task");
	for (int t = 0; t < dag->n_tasks; t++) {
		const struct delta_task *m = &dag->tasks[t];
		if (m->src_pod < 0 || m->src_pod >= dag->pods) {
			snprintf(field, sizeof(field), "tasks[%d].src_pod", t);
			return delta_error_set(err, field, "pod %d out of range 0..%d", m->src_pod,
					       dag->pods - 1);
		}
		if (m->dst_pod < 0 || m->dst_pod >= dag->pods) {
			snprintf(field, sizeof(field), "tasks[%d].dst_pod", t);
			return delta_error_set(err, field, "pod %d out of range 0..%d", m->dst_pod,
					       dag->pods - 1);
		}
		if (m->src_pod == m->dst_pod) {
			snprintf(field, sizeof(field), "tasks[%d].dst_pod", t);
			return delta_error_set(err, field,
					       "equals src_pod %d: intra-pod traffic is not a task",
					       m->src_pod);
		}
		if (m->flows < 1) {
			snprintf(field, sizeof(field), "tasks[%d].flows", t);
			return delta_error_set(err, field, "must be >= 1, got %d", m->flows);
		}
		if (!(m->volume_bytes >= 0) || !isfinite(m->volume_bytes)) {
			snprintf(field, sizeof(field), "tasks[%d].volume_bytes", t);
			return delta_error_set(err, field, "must be a finite number >= 0");
		}
		if (!(m->release_ms >= 0) || !isfinite(m->release_ms)) {
			snprintf(field, sizeof(field), "tasks[%d].release_ms", t);
			return delta_error_set(err, field, "must be a finite number >= 0");
		}
	}
	for (int d = 0; d < dag->n_deps; d++) {
		const struct delta_dep *e = &dag->deps[d];
		if (e->pre < 0 || e->pre >= dag->n_tasks) {
			snprintf(field, sizeof(field), "deps[%d].pre", d);
			return delta_error_set(err, field, "unknown task %d", e->pre);
		}
		if (e->post < 0 || e->post >= dag->n_tasks) {
			snprintf(field, sizeof(field), "deps[%d].post", d);
			return delta_error_set(err, field, "unknown task %d", e->post);
		}
		if (e->pre == e->post) {
			snprintf(field, sizeof(field), "deps[%d]", d);
			return delta_error_set(err, field, "task %d depends on itself", e->pre);
		}
		if (!(e->delay_ms >= 0) || !isfinite(e->delay_ms)) {
			snprintf(field, sizeof(field), "deps[%d].delay_ms", d);
			return delta_error_set(err, field, "must be a finite number >= 0");
		}
	}
	return 0;
}

static int find_link(const struct delta_link *links, int n, int a, int b)
{
	for (int l = 0; l < n; l++)
		if (links[l].a == a && links[l].b == b)
			return l;
	return -1;
}

static int build_links(struct delta_problem *p, const struct delta_dag *dag,
		       struct delta_error *err)
{
	int cap = dag->n_links > 0 ? dag->n_links : 16;
	char field[64];

	p->links = calloc((size_t)cap, sizeof(*p->links));
	p->task_link = calloc((size_t)p->n_tasks, sizeof(int));
	if (!p->links || !p->task_link)
		return delta_error_set(err, "memory", "out of memory");
	if (dag->n_links > 0) {
		for (int l = 0; l < dag->n_links; l++) {
			const struct delta_link *k = &dag->links[l];
			snprintf(field, sizeof(field), "links[%d]", l);
			if (k->a < 0 || k->b >= dag->pods || k->a >= k->b)
				return delta_error_set(err, field, "needs pods 0 <= a < b < %d",
						       dag->pods);
			if (k->cost_a < 0 || k->cost_b < 0)
				return delta_error_set(err, field, "port costs must be >= 0");
			if (find_link(p->links, p->n_links, k->a, k->b) >= 0)
				return delta_error_set(err, field, "duplicate pod pair %d-%d", k->a,
						       k->b);
			p->links[p->n_links++] = *k;
		}
	}
	for (int t = 0; t < p->n_tasks; t++) {
		int a = p->tasks[t].src_pod, b = p->tasks[t].dst_pod;
		if (a > b) {
			int s = a;
			a = b;
			b = s;
		}
		int l = find_link(p->links, p->n_links, a, b);
		if (l < 0 && dag->n_links > 0) {
			snprintf(field, sizeof(field), "tasks[%d]", t);
			return delta_error_set(err, field, "pod pair %d-%d is not among the links",
					       a, b);
		}
		if (l < 0) {
			if (p->n_links == cap) {
				cap *= 2;
				struct delta_link *n = realloc(p->links, (size_t)cap * sizeof(*n));
				if (!n)
					return delta_error_set(err, "memory", "out of memory");
				p->links = n;
			}
			l = p->n_links++;
			p->links[l] = (struct delta_link){a, b, 1, 1};
		}
		p->task_link[t] = l;
	}
	return 0;
}

static int build_graph(struct delta_problem *p, struct delta_error *err)
{
	int n = p->n_tasks;
	int *indeg = calloc((size_t)n, sizeof(int));
	int *fill = calloc((size_t)n + 1, sizeof(int));

	p->out_start = calloc((size_t)n + 1, sizeof(int));
	p->in_start = calloc((size_t)n + 1, sizeof(int));
	p->out_idx = malloc(((size_t)p->n_deps + 1) * sizeof(int));
	p->in_idx = malloc(((size_t)p->n_deps + 1) * sizeof(int));
	p->topo = malloc((size_t)n * sizeof(int));
	if (!indeg || !fill || !p->out_start || !p->in_start || !p->out_idx || !p->in_idx ||
	    !p->topo) {
		free(indeg);
		free(fill);
		return delta_error_set(err, "memory", "out of memory");
	}
	for (int d = 0; d < p->n_deps; d++) {
		p->out_start[p->deps[d].pre + 1]++;
		p->in_start[p->deps[d].post + 1]++;
	}
	for (int t = 0; t < n; t++) {
		p->out_start[t + 1] += p->out_start[t];
		p->in_start[t + 1] += p->in_start[t];
	}
	for (int d = 0; d < p->n_deps; d++) {
		int u = p->deps[d].pre;
		p->out_idx[p->out_start[u] + fill[u]++] = d;
	}
	memset(fill, 0, (size_t)(n + 1) * sizeof(int));
	for (int d = 0; d < p->n_deps; d++) {
		int v = p->deps[d].post;
		p->in_idx[p->in_start[v] + fill[v]++] = d;
		indeg[v]++;
	}
	/* Kahn's algorithm with a FIFO over task indices: deterministic order. */
	int head = 0, tail = 0;
	for (int t = 0; t < n; t++)
		if (indeg[t] == 0)
			p->topo[tail++] = t;
	while (head < tail) {
		int u = p->topo[head++];
		for (int k = p->out_start[u]; k < p->out_start[u + 1]; k++) {
			int v = p->deps[p->out_idx[k]].post;
			if (--indeg[v] == 0)
				p->topo[tail++] = v;
		}
	}
	int on_cycle = -1;
	for (int t = 0; t < n && tail < n; t++)
		if (indeg[t] > 0) {
			on_cycle = t;
			break;
		}
	free(indeg);
	free(fill);
	if (tail < n)
		return delta_error_set(err, "deps",
				       "dependency cycle: task %d (and %d others) can never start",
				       on_cycle, n - tail - 1);
	return 0;
}

struct delta_problem *delta_problem_compile(const struct delta_dag *dag, struct delta_error *err)
{
	if (!dag) {
		delta_error_set(err, "dag", "missing");
		return NULL;
	}
	if (check_fields(dag, err))
		return NULL;
	struct delta_problem *p = calloc(1, sizeof(*p));
	if (!p) {
		delta_error_set(err, "memory", "out of memory");
		return NULL;
	}
	p->pods = dag->pods;
	p->bandwidth_gbps = dag->bandwidth_gbps;
	p->n_tasks = dag->n_tasks;
	p->n_deps = dag->n_deps;
	p->port_budget = malloc((size_t)dag->pods * sizeof(int));
	p->tasks = malloc((size_t)dag->n_tasks * sizeof(*p->tasks));
	p->deps = malloc(((size_t)dag->n_deps + 1) * sizeof(*p->deps));
	if (!p->port_budget || !p->tasks || !p->deps) {
		delta_error_set(err, "memory", "out of memory");
		delta_problem_free(p);
		return NULL;
	}
	memcpy(p->port_budget, dag->port_budget, (size_t)dag->pods * sizeof(int));
	memcpy(p->tasks, dag->tasks, (size_t)dag->n_tasks * sizeof(*p->tasks));
	if (dag->n_deps)
		memcpy(p->deps, dag->deps, (size_t)dag->n_deps * sizeof(*p->deps));
	if (build_links(p, dag, err) || build_graph(p, err)) {
		delta_problem_free(p);
		return NULL;
	}
	return p;
}

void delta_problem_set_ideal_critical_ms(struct delta_problem *p, double ms)
{
	p->ideal_critical_ms = ms;
}

int delta_problem_pods(const struct delta_problem *p)
{
	return p->pods;
}
int delta_problem_n_tasks(const struct delta_problem *p)
{
	return p->n_tasks;
}
const struct delta_task *delta_problem_tasks(const struct delta_problem *p)
{
	return p->tasks;
}
int delta_problem_n_deps(const struct delta_problem *p)
{
	return p->n_deps;
}
const struct delta_dep *delta_problem_deps(const struct delta_problem *p)
{
	return p->deps;
}
int delta_problem_n_links(const struct delta_problem *p)
{
	return p->n_links;
}
const struct delta_link *delta_problem_links(const struct delta_problem *p)
{
	return p->links;
}
const int *delta_problem_port_budget(const struct delta_problem *p)
{
	return p->port_budget;
}
int delta_problem_task_link(const struct delta_problem *p, int task)
{
	return p->task_link[task];
}
const int *delta_problem_topo_order(const struct delta_problem *p)
{
	return p->topo;
}

const int *delta_problem_out_deps(const struct delta_problem *p, int t, int *n)
{
	*n = p->out_start[t + 1] - p->out_start[t];
	return p->out_idx + p->out_start[t];
}

const int *delta_problem_in_deps(const struct delta_problem *p, int t, int *n)
{
	*n = p->in_start[t + 1] - p->in_start[t];
	return p->in_idx + p->in_start[t];
}

double delta_problem_ideal_critical_ms(const struct delta_problem *p)
{
	return p->ideal_critical_ms;
}

double delta_problem_bytes_per_ms(const struct delta_problem *p)
{
	return p->bandwidth_gbps * 1e9 / 8.0 / 1e3;
}

long delta_ports_used(const struct delta_problem *p, const int *x, long *used)
{
	long total = 0;
	for (int q = 0; q < p->pods; q++)
		used[q] = 0;
	for (int l = 0; l < p->n_links; l++) {
		used[p->links[l].a] += (long)x[l] * p->links[l].cost_a;
		used[p->links[l].b] += (long)x[l] * p->links[l].cost_b;
	}
	for (int q = 0; q < p->pods; q++)
		total += used[q];
	return total;
}

long delta_ports_available(const struct delta_problem *p)
{
	long total = 0;
	for (int q = 0; q < p->pods; q++)
		total += p->port_budget[q];
	return total;
}

int delta_plan_within_budget(const struct delta_problem *p, const int *x)
{
	long *used = malloc((size_t)p->pods * sizeof(long));
	int ok = used != NULL;
	if (ok) {
		delta_ports_used(p, x, used);
		for (int q = 0; q < p->pods; q++)
			if (used[q] > p->port_budget[q])
				ok = 0;
	}
	free(used);
	return ok;
}
