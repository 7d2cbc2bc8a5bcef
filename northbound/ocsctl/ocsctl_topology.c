/*
 * ocsctl_topology.c - `ocsctl topology` (issue 27): the fabric drawn as
 * Graphviz DOT text, or as SVG through graphviz's `dot -Tsvg`, for reports
 * and tickets. Read-only: GetFabric, ListDevices, ListCircuits, ListRings
 * or ListRailPorts (and GetJob to refuse an unknown --job), nothing else.
 *
 * What is drawn, by the fabric's kind:
 *   - leaf-spine-ocs: one node per pod; the OCS devices in one cluster per
 *     OCS group, filled by session, health and drain; one edge per circuit
 *     (pod_a -- pod_b) in its job's colour, labelled with the job, group,
 *     device and ports; a legend of the jobs. Above --max-edges circuits
 *     the edges aggregate (one per job and pod pair with a count, then one
 *     per pod pair, then per pod block pair), and above --max-edges devices
 *     one node per group stands for its devices (docs/man/ocsctl.1.scd).
 *   - ocstrx-ring: one node per ring-domain node (its agent's state as
 *     the fill), the deployment line in grey, each ring's links in its
 *     job's colour, a repaired ring's failed node in red (above
 *     --max-edges ring links: only the failed nodes, joined to their job).
 *   - rail-ocs: one box per OCS group with its device and servers; one
 *     edge per rail port from the server whose GPU it joins to the group,
 *     in the GPU's job's colour (grey idle), bold and dashed when a swap
 *     put another GPU there (above --max-edges ports: idle ones left out).
 * The text is sorted (the server's orders, jobs by id), so two drawings of
 * one state diff clean. Every id is quoted and every label escaped
 * (ocsctl_dot.c).
 */
#define _GNU_SOURCE /* open_memstream */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ocsctl_dot.h"
#include "ocsctl_internal.h"

/* The fills of a device's state; a job's colour is never one of them. */
#define FILL_OK		"#c7e9c0"
#define FILL_CONNECTING "#fff7bc"
#define FILL_DEGRADED	"#fdd49e"
#define FILL_DOWN	"#f4a3a3"
#define FILL_DRAINED	"#d9d9d9"
#define FILL_POD	"#ffffff"

/* ---- dot on PATH, and the SVG it makes ------------------------------------ */

bool topo_dot_on_path(void)
{
	const char *path = getenv("PATH");

	while (path && *path) {
		size_t n = strcspn(path, ":");
		char *file = out_fmt("%.*s/dot", (int)n, path);
		bool found = n && access(file, X_OK) == 0;

		free(file);
		if (found)
			return true;
		path += n + (path[n] == ':');
	}
	return false;
}

/* Feeds text to `dot -Tsvg`, whose SVG goes to ocsctl's stdout. */
static int run_dot(const char *text, size_t len)
{
	int fds[2], status;
	pid_t pid;
	size_t done = 0;

	fflush(stdout);
	if (pipe(fds) != 0) {
		fprintf(stderr, "ocsctl: pipe: %s\n", strerror(errno));
		return EXIT_REFUSED;
	}
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "ocsctl: fork: %s\n", strerror(errno));
		close(fds[0]);
		close(fds[1]);
		return EXIT_REFUSED;
	}
	if (pid == 0) {
		signal(SIGPIPE, SIG_DFL);
		dup2(fds[0], STDIN_FILENO);
		close(fds[0]);
		close(fds[1]);
		execlp("dot", "dot", "-Tsvg", (char *)NULL);
		fprintf(stderr, "ocsctl: cannot run graphviz's dot: %s\n", strerror(errno));
		_exit(127);
	}
	close(fds[0]);
	while (done < len) {
		ssize_t w = write(fds[1], text + done, len - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break; /* dot went away: its exit status says why */
		done += (size_t)w;
	}
	close(fds[1]);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			fprintf(stderr, "ocsctl: waitpid: %s\n", strerror(errno));
			return EXIT_REFUSED;
		}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "ocsctl: graphviz's dot -Tsvg failed (%s %d)\n",
			WIFEXITED(status) ? "exit status" : "signal",
			WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
		return EXIT_REFUSED;
	}
	return EXIT_OK;
}

/* ---- the pieces of the drawing -------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * The jobs of a drawing: their ids sorted, each once (a job's colour is
 * its place here), and how many items (circuits, rings, GPUs) each holds.
 */
struct job_set {
	const char **ids; /* pointers into the answers */
	size_t n;
	size_t *counts;
};

static void *must_alloc(size_t n, size_t size)
{
	void *p = calloc(n + 1, size);

	if (!p) {
		fprintf(stderr, "ocsctl: out of memory\n");
		exit(EXIT_REFUSED);
	}
	return p;
}

static size_t job_index(const struct job_set *js, const char *id)
{
	const char **hit = bsearch(&id, js->ids, js->n, sizeof(*js->ids), cmp_str);

	return hit ? (size_t)(hit - js->ids) : 0;
}

static const char *job_colour(const struct job_set *js, const char *id)
{
	return dot_job_colour(job_index(js, id));
}

/* The jobs of items[0..n), whose job job_of() reads ("": none, left out).
 * job_set_free() frees it. */
static void job_set_make(struct job_set *js, void *const *items, size_t n,
			 const char *(*job_of)(const void *item))
{
	size_t k = 0;

	js->ids = must_alloc(n, sizeof(*js->ids));
	js->counts = must_alloc(n, sizeof(*js->counts));
	for (size_t i = 0; i < n; i++)
		if (job_of(items[i])[0])
			js->ids[k++] = job_of(items[i]);
	qsort(js->ids, k, sizeof(*js->ids), cmp_str);
	js->n = 0;
	for (size_t i = 0; i < k; i++)
		if (js->n == 0 || strcmp(js->ids[js->n - 1], js->ids[i]))
			js->ids[js->n++] = js->ids[i];
	for (size_t i = 0; i < n; i++)
		if (job_of(items[i])[0])
			js->counts[job_index(js, job_of(items[i]))]++;
}

static void job_set_free(struct job_set *js)
{
	free(js->ids);
	free(js->counts);
}

static const char *circuit_job(const void *c)
{
	return ((const Ocs__V1__Circuit *)c)->job_id;
}

static const char *ring_job(const void *r)
{
	return ((const Ocs__V1__Ring *)r)->job_id;
}

static const char *port_job(const void *p)
{
	return ((const Ocs__V1__RailPort *)p)->job_id;
}

/*
 * Ends the graph. A big one (hundreds of nodes or edges) asks for
 * graphviz's sfdp layout: dot's layered layout takes minutes on 256 pods
 * and 1,000 labelled edges, sfdp about a second.
 */
static void graph_close(FILE *f, bool big)
{
	if (big)
		fputs("\tgraph [layout=\"sfdp\"];\n", f);
	fputs("}\n", f);
}

static void graph_open(FILE *f, const char *title)
{
	fputs("graph \"ocsd\" {\n\tgraph [labelloc=\"t\", fontname=\"Helvetica\", label=", f);
	dot_quoted(f, title);
	fputs("];\n\tnode [shape=\"box\", style=\"filled\", fontname=\"Helvetica\", "
	      "fontsize=\"10\", fillcolor=\"" FILL_POD "\"];\n"
	      "\tedge [fontname=\"Helvetica\", fontsize=\"8\"];\n",
	      f);
}

/* One node: "id" [label="...", fillcolor="...", extra]. */
static void node_line(FILE *f, const char *indent, const char *id, const char *label,
		      const char *fill, const char *extra)
{
	fputs(indent, f);
	dot_quoted(f, id);
	fputs(" [label=", f);
	dot_quoted(f, label);
	fprintf(f, ", fillcolor=\"%s\"%s%s];\n", fill, extra ? ", " : "", extra ? extra : "");
}

/* One edge: "a" -- "b" [color="...", label="...", tooltip="...", extra]. */
static void edge_line(FILE *f, const char *a, const char *b, const char *colour, const char *label,
		      const char *extra)
{
	fputc('\t', f);
	dot_quoted(f, a);
	fputs(" -- ", f);
	dot_quoted(f, b);
	fprintf(f, " [color=\"%s\", fontcolor=\"%s\", label=", colour, colour);
	dot_quoted(f, label);
	fputs(", tooltip=", f);
	dot_quoted(f, label);
	fprintf(f, "%s%s];\n", extra ? ", " : "", extra ? extra : "");
}

/* A device's (or ring node's agent's) fill: drained first, then down,
 * degraded, connecting, else fine. */
static const char *device_fill(const Ocs__V1__Device *d)
{
	if (d->drained)
		return FILL_DRAINED;
	if (d->session == OCS__V1__SESSION_STATE__SESSION_STATE_DISCONNECTED ||
	    d->health == OCS__V1__DEVICE_HEALTH__DEVICE_HEALTH_UNREACHABLE)
		return FILL_DOWN;
	if (d->health == OCS__V1__DEVICE_HEALTH__DEVICE_HEALTH_DEGRADED)
		return FILL_DEGRADED;
	if (d->session != OCS__V1__SESSION_STATE__SESSION_STATE_CONNECTED)
		return FILL_CONNECTING;
	return FILL_OK;
}

/* "NAME\nconnected, healthy[\ndrained]"; caller frees. */
static char *device_label(const Ocs__V1__Device *d, const char *name)
{
	char *s = out_enum_short(&ocs__v1__session_state__descriptor, d->session);
	char *h = out_enum_short(&ocs__v1__device_health__descriptor, d->health);
	char *l = out_fmt("%s\n%s, %s%s", name, s, h, d->drained ? "\ndrained" : "");

	free(s);
	free(h);
	return l;
}

/* The legend: one node per job in its colour, "JOB (N circuits|rings)". */
static void legend(FILE *f, const struct job_set *js, const char *what)
{
	if (!js->n)
		return;
	fputs("\tsubgraph \"cluster_jobs\" {\n\t\tlabel=\"jobs\";\n", f);
	for (size_t j = 0; j < js->n; j++) {
		char *id = out_fmt("job %s", js->ids[j]);
		char *label = out_fmt("%s\n%zu %s", js->ids[j], js->counts[j], what);
		char *extra = out_fmt("fontcolor=\"#ffffff\", tooltip=\"job\"");

		node_line(f, "\t\t", id, label, dot_job_colour(j), extra);
		free(id);
		free(label);
		free(extra);
	}
	fputs("\t}\n", f);
}

/* ---- leaf-spine-ocs --------------------------------------------------------- */

/* An aggregated edge: a job (or NULL) and the pod blocks it joins. */
struct agg_edge {
	const char *job;
	int a, b;
	size_t circuits;
};

static int cmp_agg(const void *pa, const void *pb)
{
	const struct agg_edge *a = pa, *b = pb;
	int c = a->job && b->job ? strcmp(a->job, b->job) : (a->job != NULL) - (b->job != NULL);

	if (c)
		return c;
	if (a->a != b->a)
		return a->a < b->a ? -1 : 1;
	return a->b < b->b ? -1 : a->b > b->b;
}

/* The circuits merged into edges per (job if by_job, pod / block pair),
 * sorted; returns how many (e has n_cs slots). */
static size_t aggregate(Ocs__V1__Circuit **cs, size_t n_cs, bool by_job, int block,
			struct agg_edge *e)
{
	size_t k = 0;

	for (size_t i = 0; i < n_cs; i++) {
		int a = cs[i]->pod_a / block, b = cs[i]->pod_b / block;

		e[i] = (struct agg_edge){by_job ? cs[i]->job_id : NULL, a < b ? a : b,
					 a < b ? b : a, 1};
	}
	qsort(e, n_cs, sizeof(*e), cmp_agg);
	for (size_t i = 0; i < n_cs; i++) {
		if (k && cmp_agg(&e[k - 1], &e[i]) == 0)
			e[k - 1].circuits++;
		else
			e[k++] = e[i];
	}
	return k;
}

/* "pod 3", or "pods 0-7" for a block; caller frees. */
static char *pod_id(int block_index, int block, int pods)
{
	int last = (block_index + 1) * block - 1;

	if (block == 1)
		return out_fmt("pod %d", block_index);
	return out_fmt("pods %d-%d", block_index * block, last < pods ? last : pods - 1);
}

static void draw_devices(FILE *f, Ocs__V1__Device **ds, size_t n, const struct opts *o)
{
	int group = -1;

	for (size_t i = 0; i < n; i++) {
		const Ocs__V1__Device *d = ds[i];
		char *label;

		if (o->device && strcmp(o->device, d->name))
			continue;
		if (d->group != group) {
			if (group >= 0)
				fputs("\t}\n", f);
			group = d->group;
			fprintf(f,
				"\tsubgraph \"cluster_group_%d\" {\n\t\tlabel=\"OCS group %d\";\n",
				group, group);
		}
		label = device_label(d, d->name);
		node_line(f, "\t\t", d->name, label, device_fill(d),
			  d->drained ? "style=\"filled,dashed\"" : NULL);
		free(label);
	}
	if (group >= 0)
		fputs("\t}\n", f);
}

/* Above max devices: one node per OCS group, "group G\nN devices, ...",
 * filled by its worst device. */
static void draw_groups(FILE *f, Ocs__V1__Device **ds, size_t n)
{
	static const char *const worst_first[] = {FILL_DOWN, FILL_DEGRADED, FILL_CONNECTING,
						  FILL_DRAINED, FILL_OK};

	for (size_t i = 0; i < n;) {
		int group = ds[i]->group;
		size_t j = i, down = 0, drained = 0, worst = 4;

		for (; j < n && ds[j]->group == group; j++) {
			const char *fill = device_fill(ds[j]);

			down += strcmp(fill, FILL_DOWN) == 0;
			drained += ds[j]->drained;
			for (size_t w = 0; w < worst; w++)
				if (strcmp(fill, worst_first[w]) == 0)
					worst = w;
		}
		char *id = out_fmt("OCS group %d", group);
		char *label = out_fmt("OCS group %d\n%zu devices, %zu down, %zu drained", group,
				      j - i, down, drained);

		node_line(f, "\t", id, label, worst_first[worst], NULL);
		free(id);
		free(label);
		i = j;
	}
}

static int cmp_device(const void *pa, const void *pb)
{
	const Ocs__V1__Device *a = *(Ocs__V1__Device *const *)pa,
			      *b = *(Ocs__V1__Device *const *)pb;

	if (a->group != b->group)
		return a->group < b->group ? -1 : 1;
	return strcmp(a->name, b->name);
}

/* The devices a circuit's cross-connects are on, in their order, each once:
 * "ocs-g0-d1" or, across a device pair, "ocs-g0-d1+ocs-g0-d0"; caller frees. */
static char *circuit_devices(const Ocs__V1__Circuit *c)
{
	char *s = out_fmt("%s", c->n_cross_connects ? "" : "?");

	for (size_t i = 0; i < c->n_cross_connects; i++) {
		const char *d = c->cross_connects[i]->device;
		bool seen = false;

		for (size_t j = 0; j < i && !seen; j++)
			seen = strcmp(c->cross_connects[j]->device, d) == 0;
		if (!seen) {
			char *t = out_fmt("%s%s%s", s, s[0] ? "+" : "", d);

			free(s);
			s = t;
		}
	}
	return s;
}

static void draw_circuit_edges(FILE *f, Ocs__V1__Circuit **cs, size_t n, const struct job_set *js)
{
	for (size_t i = 0; i < n; i++) {
		const Ocs__V1__Circuit *c = cs[i];
		char *dev = circuit_devices(c);
		char *a = out_fmt("pod %d", c->pod_a), *b = out_fmt("pod %d", c->pod_b);
		char *label = out_fmt("%s\ng%d %s %d:%d-%d:%d", c->job_id, c->group, dev, c->pod_a,
				      c->port_a, c->pod_b, c->port_b);

		edge_line(f, a, b, job_colour(js, c->job_id), label, NULL);
		free(dev);
		free(a);
		free(b);
		free(label);
	}
}

/*
 * Above max circuits: per job and pod pair; if that is still above, per
 * pod pair and then per pod block pair (blocks of 2, 4, ... pods) until
 * at most max edges remain. Returns the pod block size drawn.
 */
static int draw_aggregated(FILE *f, Ocs__V1__Circuit **cs, size_t n, const struct job_set *js,
			   long max, int pods, char **how)
{
	struct agg_edge *e = must_alloc(n, sizeof(*e));
	size_t k;
	int block = 1;

	k = aggregate(cs, n, true, 1, e);
	if ((long)k <= max) {
		*how = out_fmt("one edge per job and pod pair");
	} else {
		while ((k = aggregate(cs, n, false, block, e)) > (size_t)max && block < pods)
			block *= 2;
		*how = block == 1 ? out_fmt("one edge per pod pair")
				  : out_fmt("one edge per pair of %d-pod blocks", block);
	}
	for (size_t i = 0; i < k; i++) {
		char *a = pod_id(e[i].a, block, pods), *b = pod_id(e[i].b, block, pods);
		char *label = e[i].job ? out_fmt("%s\n%zu circuits", e[i].job, e[i].circuits)
				       : out_fmt("%zu circuits", e[i].circuits);
		char *pen = out_fmt("penwidth=\"%d\"", e[i].circuits >= 64  ? 4
						       : e[i].circuits >= 8 ? 2
									    : 1);

		edge_line(f, a, b, e[i].job ? job_colour(js, e[i].job) : "#555555", label, pen);
		free(a);
		free(b);
		free(label);
		free(pen);
	}
	free(e);
	return block;
}

static int draw_leaf_spine(struct ctx *x, FILE *f, const Ocs__V1__FabricSummary *fab,
			   Ocs__V1__ListDevicesResponse *dr)
{
	Ocs__V1__ListCircuitsRequest creq = OCS__V1__LIST_CIRCUITS_REQUEST__INIT;
	struct rpc_pages pg = {0};
	struct job_set js;
	Ocs__V1__Circuit **cs;
	size_t n;
	int rc, block = 1;
	char *title, *how = NULL;
	bool found = !x->o.device;

	if (x->o.pod >= fab->pods) {
		fprintf(stderr, "ocsctl: no pod %d: the fabric has pods 0..%d\n", x->o.pod,
			fab->pods - 1);
		return EXIT_REFUSED;
	}
	for (size_t i = 0; i < dr->n_devices && !found; i++)
		found = strcmp(dr->devices[i]->name, x->o.device) == 0;
	if (!found) {
		fprintf(stderr, "ocsctl: no device '%s' in the fabric\n", x->o.device);
		return EXIT_REFUSED;
	}
	qsort(dr->devices, dr->n_devices, sizeof(*dr->devices), cmp_device);
	creq.job_id = (char *)(x->o.job ? x->o.job : "");
	creq.device = (char *)(x->o.device ? x->o.device : "");
	if (x->o.pod >= 0) {
		creq.has_pod = true;
		creq.pod = x->o.pod;
	}
	rc = rpc_follow_pages(x, NB_FABRIC_LIST_CIRCUITS, &creq.base, &creq.page_token, &pg);
	if (rc) {
		rpc_pages_free(&pg);
		return rc;
	}
	cs = (Ocs__V1__Circuit **)pg.items;
	n = pg.n_items;
	job_set_make(&js, pg.items, n, circuit_job);

	title = out_fmt("%s fabric, %d pods, %d OCS groups, %zu devices: %zu circuits%s%s%s%s%s",
			fab->kind[0] ? fab->kind : "leaf-spine-ocs", fab->pods, fab->groups,
			dr->n_devices, n, x->o.job ? " of job " : "", x->o.job ? x->o.job : "",
			x->o.device ? " on " : "", x->o.device ? x->o.device : "",
			x->o.pod >= 0 ? " at a pod" : "");
	graph_open(f, title);
	free(title);
	if ((long)dr->n_devices <= x->o.max_edges || x->o.device)
		draw_devices(f, dr->devices, dr->n_devices, &x->o);
	else
		draw_groups(f, dr->devices, dr->n_devices);
	if ((long)n <= x->o.max_edges) {
		/* every pod, or with a filter the pods its circuits join */
		for (int p = 0; p < fab->pods; p++) {
			bool shown = !x->o.job && !x->o.device && x->o.pod < 0;
			char *id = out_fmt("pod %d", p);

			for (size_t i = 0; i < n && !shown; i++)
				shown = cs[i]->pod_a == p || cs[i]->pod_b == p;
			if (shown || p == x->o.pod)
				node_line(f, "\t", id, id, FILL_POD, "shape=\"ellipse\"");
			free(id);
		}
		draw_circuit_edges(f, cs, n, &js);
	} else {
		block = draw_aggregated(f, cs, n, &js, x->o.max_edges, fab->pods, &how);
		for (int p = 0; p * block < fab->pods; p++) {
			char *id = pod_id(p, block, fab->pods);

			node_line(f, "\t", id, id, FILL_POD, "shape=\"ellipse\"");
			free(id);
		}
		fputs("\t\"aggregated\" [shape=\"note\", label=", f);
		{
			char *note = out_fmt("%zu circuits > --max-edges %ld:\n%s", n,
					     x->o.max_edges, how);

			dot_quoted(f, note);
			free(note);
		}
		fputs("];\n", f);
		free(how);
	}
	legend(f, &js, "circuits");
	graph_close(f, fab->pods > 64 || n > 200 ||
			       (dr->n_devices > 100 && (long)dr->n_devices <= x->o.max_edges));
	job_set_free(&js);
	rpc_pages_free(&pg);
	return EXIT_OK;
}

/* ---- ocstrx-ring -------------------------------------------------------------- */

static bool repaired(const Ocs__V1__Ring *r)
{
	return r->failed_node >= 0 && r->last_change != OCS__V1__RING_CHANGE__RING_CHANGE_PLACED &&
	       r->last_change != OCS__V1__RING_CHANGE__RING_CHANGE_UNSPECIFIED;
}

static int draw_rings(struct ctx *x, FILE *f, const Ocs__V1__FabricSummary *fab,
		      Ocs__V1__ListDevicesResponse *dr)
{
	Ocs__V1__ListRingsRequest rreq = OCS__V1__LIST_RINGS_REQUEST__INIT;
	Ocs__V1__ListRingsResponse *rr;
	struct job_set js;
	/* per node: 1 in a drawn ring, 2 failed (a repair left it) */
	unsigned char *mark;
	bool all_nodes = fab->nodes <= x->o.max_edges, per_ring;
	size_t links = 0;
	char *title;
	int rc;

	rreq.job_id = (char *)(x->o.job ? x->o.job : "");
	rc = rpc_call(x, NB_FABRIC_LIST_RINGS, &rreq.base, &rr);
	if (rc)
		return rc;
	mark = must_alloc((size_t)(fab->nodes > 0 ? fab->nodes : 0), 1);
	for (size_t i = 0; i < rr->n_rings; i++) {
		const Ocs__V1__Ring *r = rr->rings[i];

		for (size_t k = 0; k < r->n_nodes; k++)
			if (r->nodes[k] >= 0 && r->nodes[k] < fab->nodes)
				mark[r->nodes[k]] |= 1;
		if (repaired(r) && r->failed_node < fab->nodes)
			mark[r->failed_node] |= 2;
		links += r->n_nodes ? r->n_nodes - 1 : 0;
	}
	job_set_make(&js, (void *const *)rr->rings, rr->n_rings, ring_job);
	/* above --max-edges ring links: the legend counts the rings, and only
	 * the failed nodes are drawn, each joined to its ring's job */
	per_ring = (long)links <= x->o.max_edges;
	all_nodes = all_nodes && per_ring;

	title = out_fmt("ocstrx-ring domain, %d nodes (%d ToRs x %d), %s, %d faulty: %zu "
			"rings%s%s%s",
			fab->nodes, fab->tors, fab->nodes_per_tor,
			fab->closed ? "closed ring" : "open line", fab->nodes_faulty, rr->n_rings,
			x->o.job ? " of job " : "", x->o.job ? x->o.job : "",
			per_ring
				? (all_nodes ? "" : " (nodes in no ring not drawn)")
				: " (> --max-edges ring links: rings counted per job, failed nodes "
				  "drawn)");
	graph_open(f, title);
	free(title);
	/* the line left to right, small nodes: 64 of them still fit a page */
	fputs("\tgraph [rankdir=\"LR\"];\n\tnode [shape=\"box\", style=\"rounded,filled\"];\n", f);
	for (int node = 0; node < fab->nodes; node++) {
		const Ocs__V1__Device *d = NULL;
		char *id, *label;
		const char *fill;

		if (!all_nodes && !(mark[node] & (per_ring ? 3 : 2)))
			continue;
		for (size_t i = 0; i < dr->n_devices && !d; i++)
			if (dr->devices[i]->index == node)
				d = dr->devices[i];
		id = out_fmt("node %d", node);
		if (mark[node] & 2) {
			label = out_fmt("%d\nfailed", node);
			fill = FILL_DOWN;
		} else {
			char *name = out_fmt("%d", node);

			label = d ? device_label(d, name) : out_fmt("%d", node);
			fill = d ? device_fill(d) : FILL_POD;
			free(name);
		}
		node_line(f, "\t", id, label, fill, NULL);
		free(id);
		free(label);
	}
	if (all_nodes && fab->tors > 0) {
		/* the deployment line, in position order: position p is node
		 * (p % tors) * nodes_per_tor + p / tors (solvers/fabric.h) */
		for (int p = 0; p + 1 < fab->nodes + (fab->closed ? 1 : 0); p++) {
			int q = (p + 1) % fab->nodes;
			char *a = out_fmt("node %d",
					  (p % fab->tors) * fab->nodes_per_tor + p / fab->tors);
			char *b = out_fmt("node %d",
					  (q % fab->tors) * fab->nodes_per_tor + q / fab->tors);

			edge_line(f, a, b, "#bbbbbb", "", "style=\"dotted\"");
			free(a);
			free(b);
		}
	}
	for (size_t i = 0; i < rr->n_rings; i++) {
		const Ocs__V1__Ring *r = rr->rings[i];
		char *change = out_enum_short(&ocs__v1__ring_change__descriptor, r->last_change);
		char *label = repaired(r) ? out_fmt("%s ring %d\n%s, node %d failed", r->job_id,
						    r->index, change, r->failed_node)
					  : out_fmt("%s ring %d", r->job_id, r->index);
		const char *colour = job_colour(&js, r->job_id);

		if (!per_ring && repaired(r)) {
			char *a = out_fmt("node %d", r->failed_node),
			     *b = out_fmt("job %s", r->job_id);

			edge_line(f, a, b, colour, label, "style=\"dashed\"");
			free(a);
			free(b);
		}
		for (size_t k = 0; per_ring && k + 1 < r->n_nodes; k++) {
			char *a = out_fmt("node %d", r->nodes[k]);
			char *b = out_fmt("node %d", r->nodes[k + 1]);

			edge_line(f, a, b, colour, label, "penwidth=\"3\"");
			free(a);
			free(b);
		}
		free(change);
		free(label);
	}
	legend(f, &js, "rings");
	graph_close(f, rr->n_rings > 50 || fab->nodes > 256);
	free(mark);
	job_set_free(&js);
	rpc_free_msg(rr);
	return EXIT_OK;
}

/* ---- rail-ocs ------------------------------------------------------------------ */

/* Is the GPU on rail port p another than the one the wiring joins to it
 * (GPU server * rails + rail, solvers/fabric.h): a swap moved it there. */
static bool swapped(const Ocs__V1__RailPort *p, int rails)
{
	return p->gpu >= 0 && p->gpu != (int64_t)p->server * rails + p->rail;
}

/* One rail port: "server S" -- "OCS group G", in its job's colour (grey
 * when idle), bold and dashed when a swap put another GPU there. */
static void rail_port_edge(FILE *f, const Ocs__V1__RailPort *p, int rails, const struct job_set *js)
{
	char *a = out_fmt("server %d", p->gpu_server), *b = out_fmt("OCS group %d", p->group);
	char *label = swapped(p, rails)
			      ? out_fmt("%s%srail %d port %lld: gpu %lld\nswapped in for gpu %lld",
					p->job_id, p->job_id[0] ? "\n" : "", p->rail,
					(long long)p->rail_port, (long long)p->gpu,
					(long long)p->server * rails + p->rail)
			      : out_fmt("%s%srail %d port %lld: gpu %lld", p->job_id,
					p->job_id[0] ? "\n" : "", p->rail, (long long)p->rail_port,
					(long long)p->gpu);

	edge_line(f, a, b, p->job_id[0] ? job_colour(js, p->job_id) : "#999999", label,
		  swapped(p, rails) ? "style=\"bold,dashed\"" : NULL);
	free(a);
	free(b);
	free(label);
}

static int draw_rail(struct ctx *x, FILE *f, const Ocs__V1__FabricSummary *fab,
		     Ocs__V1__ListDevicesResponse *dr)
{
	Ocs__V1__ListRailPortsRequest preq = OCS__V1__LIST_RAIL_PORTS_REQUEST__INIT;
	struct rpc_pages pg = {0};
	struct job_set js;
	Ocs__V1__RailPort **ps;
	size_t n, n_swapped = 0, n_drawn = 0;
	int spo = fab->servers_per_ocs > 0 ? fab->servers_per_ocs : 1, rc;
	char *title;

	preq.job_id = (char *)(x->o.job ? x->o.job : "");
	rc = rpc_follow_pages(x, NB_FABRIC_LIST_RAIL_PORTS, &preq.base, &preq.page_token, &pg);
	if (rc) {
		rpc_pages_free(&pg);
		return rc;
	}
	ps = (Ocs__V1__RailPort **)pg.items;
	n = pg.n_items;
	job_set_make(&js, pg.items, n, port_job);
	for (size_t i = 0; i < n; i++)
		n_swapped += swapped(ps[i], fab->rails);

	title = out_fmt("rail-ocs fabric, %d servers (%d per OCS group, %d spare), %d rails: "
			"%zu rail ports%s%s, %zu swapped, %d faulty GPUs",
			fab->servers, spo, fab->spare_servers_per_ocs, fab->rails, n,
			x->o.job ? " of job " : "", x->o.job ? x->o.job : "", n_swapped,
			fab->gpus_faulty);
	graph_open(f, title);
	free(title);
	/* one box per OCS group: its device and its servers (spares last) */
	for (int g = 0; g * spo < fab->servers; g++) {
		fprintf(f, "\tsubgraph \"cluster_group_%d\" {\n\t\tlabel=\"OCS group %d\";\n", g,
			g);
		for (size_t i = 0; i < dr->n_devices; i++)
			if (dr->devices[i]->group == g) {
				char *id = out_fmt("OCS group %d", g);
				char *label = device_label(dr->devices[i], dr->devices[i]->name);

				node_line(f, "\t\t", id, label, device_fill(dr->devices[i]),
					  dr->devices[i]->drained ? "style=\"filled,dashed\""
								  : NULL);
				free(id);
				free(label);
			}
		for (int s = g * spo; s < (g + 1) * spo && s < fab->servers; s++) {
			char *id = out_fmt("server %d", s);
			char *label = s % spo >= spo - fab->spare_servers_per_ocs
					      ? out_fmt("server %d\nspare", s)
					      : out_fmt("server %d", s);

			node_line(f, "\t\t", id, label, FILL_POD, "shape=\"ellipse\"");
			free(id);
			free(label);
		}
		fputs("\t}\n", f);
	}
	n_drawn = 0;
	for (size_t i = 0; i < n; i++) {
		/* above --max-edges: the ports of jobs and the swapped ones */
		if (ps[i]->gpu < 0 ||
		    ((long)n > x->o.max_edges && !ps[i]->job_id[0] && !swapped(ps[i], fab->rails)))
			continue;
		rail_port_edge(f, ps[i], fab->rails, &js);
		n_drawn++;
	}
	if (n_drawn < n) {
		char *note =
			out_fmt("%zu of %zu rail ports drawn%s", n_drawn, n,
				(long)n > x->o.max_edges ? " (> --max-edges: idle ones left out)"
							 : " (the others dark)");

		fputs("\t\"not drawn\" [shape=\"note\", label=", f);
		dot_quoted(f, note);
		fputs("];\n", f);
		free(note);
	}
	legend(f, &js, "GPUs");
	graph_close(f, n_drawn > 200);
	job_set_free(&js);
	rpc_pages_free(&pg);
	return EXIT_OK;
}

/* ---- the command ---------------------------------------------------------------- */

int topo_cmd_topology(struct ctx *x)
{
	Ocs__V1__GetFabricRequest freq = OCS__V1__GET_FABRIC_REQUEST__INIT;
	Ocs__V1__ListDevicesRequest dreq = OCS__V1__LIST_DEVICES_REQUEST__INIT;
	Ocs__V1__FabricSummary *fab;
	Ocs__V1__ListDevicesResponse *dr;
	char *text = NULL;
	size_t len = 0;
	bool leaf_spine;
	FILE *f;
	int rc;

	if (x->o.job) { /* an unknown job is refused, not drawn empty */
		Ocs__V1__GetJobRequest jreq = OCS__V1__GET_JOB_REQUEST__INIT;
		Ocs__V1__GetJobResponse *jr;

		jreq.id = (char *)x->o.job;
		rc = rpc_call(x, NB_JOBS_GET_JOB, &jreq.base, &jr);
		if (rc)
			return rc;
		rpc_free_msg(jr);
	}
	rc = rpc_call(x, NB_FABRIC_GET_FABRIC, &freq.base, &fab);
	if (rc)
		return rc;
	leaf_spine = strcmp(fab->kind, "ocstrx-ring") && strcmp(fab->kind, "rail-ocs");
	if (!leaf_spine && (x->o.pod >= 0 || x->o.device)) {
		fprintf(stderr,
			"ocsctl: --pod and --device draw leaf-spine fabrics; this one is "
			"%s (--job draws a job)\n",
			fab->kind);
		rpc_free_msg(fab);
		return EXIT_USAGE;
	}
	rc = rpc_call(x, NB_FABRIC_LIST_DEVICES, &dreq.base, &dr);
	if (rc) {
		rpc_free_msg(fab);
		return rc;
	}
	f = open_memstream(&text, &len);
	if (!f) {
		fprintf(stderr, "ocsctl: out of memory\n");
		exit(EXIT_REFUSED);
	}
	if (leaf_spine)
		rc = draw_leaf_spine(x, f, fab, dr);
	else if (strcmp(fab->kind, "rail-ocs") == 0)
		rc = draw_rail(x, f, fab, dr);
	else
		rc = draw_rings(x, f, fab, dr);
	rpc_free_msg(dr);
	rpc_free_msg(fab);
	if (fclose(f) != 0 && rc == EXIT_OK) {
		fprintf(stderr, "ocsctl: out of memory\n");
		rc = EXIT_REFUSED;
	}
	if (rc == EXIT_OK && x->o.svg)
		rc = run_dot(text, len);
	else if (rc == EXIT_OK && (fwrite(text, 1, len, stdout) != len || fflush(stdout) != 0)) {
		fprintf(stderr, "ocsctl: cannot write the drawing: %s\n", strerror(errno));
		rc = EXIT_REFUSED;
	}
	free(text);
	return rc;
}
