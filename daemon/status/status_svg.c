/*
 * status_svg.c - /topology.svg from a snapshot (status.h): the fabric
 * drawn by kind, as one SVG document with no external references.
 *
 *   leaf-spine-OCS: pods along the top, OCS devices along the bottom in
 *     group order, coloured by state; each circuit a path pod -> device ->
 *     pod in its job's colour, its <title> naming job, device and ports
 *     (above SP_MAX_CIRCUIT_PATHS circuits: one edge per pod pair, its
 *     title the circuit count);
 *   OCSTrx ring: the nodes on a line (closed: a note says so), faulty ones
 *     red and crossed, those with a bundle drifted ringed in orange (class
 *     "drift", titled so); each ring a polyline over its nodes in its job's
 *     colour with a dot per member, its title naming job, nodes and the
 *     bypassed node, which a dashed hop on the ring's lane and a dashed
 *     drop from the node mark (class "bypass"); the
 *     devices (the nodes' transceivers) below, coloured by state;
 *   rail-OCS: a grid of servers (columns) by rails (rows), faulty GPUs
 *     red; the devices below.
 *
 * Marks above SP_MAX_MARKS stand for blocks of consecutive items. Text
 * is escaped for XML; bytes of names that are not UTF-8 and control
 * characters go out as '?'.
 */
#include "status.h"
#include "status_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SP_WIDTH      1200
#define SP_MARGIN     20
#define SP_TOP_Y      40  /* pods, nodes, the rail grid */
#define SP_BOTTOM_Y   420 /* devices */
#define SP_MARK_H     24
#define SP_HEIGHT     480
#define SP_RING_LANES 12 /* ring polylines are spread over this many lanes */

size_t sp_utf8_len(const unsigned char *s)
{
	size_t n;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0 && s[0] >= 0xc2)
		n = 2;
	else if ((s[0] & 0xf0) == 0xe0)
		n = 3;
	else if ((s[0] & 0xf8) == 0xf0 && s[0] <= 0xf4)
		n = 4;
	else
		return 0;
	for (size_t i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	/* overlong forms, UTF-16 surrogates and code points above U+10FFFF */
	if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0) ||
	    (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))
		return 0;
	return n;
}

/* Writes s as XML character data or attribute text. */
static void xml(FILE *out, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");

	while (*p) {
		size_t n = sp_utf8_len(p);

		switch (*p) {
		case '<':
			fputs("&lt;", out);
			break;
		case '>':
			fputs("&gt;", out);
			break;
		case '&':
			fputs("&amp;", out);
			break;
		case '"':
			fputs("&quot;", out);
			break;
		case '\'':
			fputs("&apos;", out);
			break;
		default:
			if (n == 0 || (*p < 0x20 && *p != '\t' && *p != '\n'))
				fputc('?', out);
			else
				fwrite(p, 1, n, out);
		}
		p += n ? n : 1;
	}
}

/* How many items one mark stands for when n are drawn. */
static size_t block_of(size_t n)
{
	return n <= SP_MAX_MARKS ? 1 : (n + SP_MAX_MARKS - 1) / SP_MAX_MARKS;
}

/* The x of the centre of mark i of n marks across the drawing. */
static double mark_x(size_t i, size_t n)
{
	double step = (double)(SP_WIDTH - 2 * SP_MARGIN) / (double)(n ? n : 1);

	return SP_MARGIN + step * ((double)i + 0.5);
}

static double mark_w(size_t n)
{
	double w = (double)(SP_WIDTH - 2 * SP_MARGIN) / (double)(n ? n : 1) - 2;

	return w < 1 ? 1 : w;
}

/* A job's colour: hues spread by the golden angle. */
static void job_colour(char *buf, size_t len, size_t job)
{
	snprintf(buf, len, "hsl(%u,70%%,45%%)", (unsigned)((job * 137) % 360));
}

/* 0 ok, 1 unknown or connecting, 2 down; drained is drawn apart. */
static int device_badness(const struct sp_device *d)
{
	if (d->health && strcmp(d->health, "unreachable") == 0)
		return 2;
	if (d->session && strcmp(d->session, "disconnected") == 0)
		return 2;
	if (d->health && strcmp(d->health, "healthy") == 0 && d->session &&
	    strcmp(d->session, "connected") == 0)
		return 0;
	return 1;
}

static void draw_devices(FILE *out, const struct sp_snapshot *s)
{
	static const char *const fill[] = {"#3a3", "#db3", "#d33"};
	size_t block = block_of(s->n_devices), marks = (s->n_devices + block - 1) / block;

	fprintf(out, "<g class=\"devices\">\n");
	for (size_t m = 0; m < marks; m++) {
		int worst = 0;
		bool drained = false;
		size_t drift = 0, first = m * block, last = first + block;

		if (last > s->n_devices)
			last = s->n_devices;
		for (size_t i = first; i < last; i++) {
			int b = device_badness(&s->devices[i]);

			worst = b > worst ? b : worst;
			drained = drained || s->devices[i].drained;
			drift += s->devices[i].drift;
		}
		fprintf(out,
			"<rect class=\"device\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" "
			"fill=\"%s\" stroke=\"%s\" stroke-width=\"%d\"%s><title>",
			mark_x(m, marks) - mark_w(marks) / 2, SP_BOTTOM_Y, mark_w(marks), SP_MARK_H,
			drained ? "#999" : fill[worst], drift ? "#f80" : "#333", drift ? 3 : 1,
			drained ? " stroke-dasharray=\"3,2\"" : "");
		if (block == 1) {
			const struct sp_device *d = &s->devices[first];

			xml(out, d->name);
			fprintf(out, " (group %d): ", d->group);
			xml(out, d->session);
			fputs(", ", out);
			xml(out, d->health);
			fprintf(out, "%s, drift %zu", d->drained ? ", drained" : "", d->drift);
		} else {
			fprintf(out, "devices %zu-%zu: %s%s, drift %zu", first, last - 1,
				worst == 2 ? "some down"
				: worst	   ? "some not up yet"
					   : "all up",
				drained ? ", some drained" : "", drift);
		}
		fputs("</title></rect>\n", out);
	}
	fputs("</g>\n", out);
}

static void draw_pods(FILE *out, const struct sp_snapshot *s, size_t block, size_t marks)
{
	fprintf(out, "<g class=\"pods\">\n");
	for (size_t m = 0; m < marks; m++) {
		fprintf(out,
			"<rect class=\"pod\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" "
			"fill=\"#cde\" stroke=\"#333\"><title>",
			mark_x(m, marks) - mark_w(marks) / 2, SP_TOP_Y, mark_w(marks), SP_MARK_H);
		if (block == 1)
			fprintf(out, "pod %zu", m);
		else
			fprintf(out, "pods %zu-%zu", m * block, m * block + block - 1);
		fputs("</title></rect>\n", out);
	}
	fputs("</g>\n", out);
}

static size_t total_circuits(const struct sp_snapshot *s)
{
	size_t n = 0;

	for (size_t j = 0; j < s->n_jobs; j++)
		n += s->jobs[j].n_circuits;
	return n;
}

/* One path per circuit: pod_in -> device -> pod_out. */
static void draw_circuits(FILE *out, const struct sp_snapshot *s, size_t pod_block,
			  size_t pod_marks)
{
	size_t dev_block = block_of(s->n_devices);
	size_t dev_marks = (s->n_devices + dev_block - 1) / dev_block;

	fputs("<g class=\"circuits\" fill=\"none\" stroke-width=\"2\">\n", out);
	for (size_t j = 0; j < s->n_jobs; j++) {
		const struct sp_job *job = &s->jobs[j];
		char colour[32];

		job_colour(colour, sizeof(colour), j);
		for (size_t i = 0; i < job->n_circuits; i++) {
			const struct sp_circuit *c = &job->circuits[i];
			bool known = c->device >= 0 && (size_t)c->device < s->n_devices;
			double dx = known ? mark_x((size_t)c->device / dev_block, dev_marks)
					  : SP_WIDTH / 2.0;
			double ax = c->pod_in >= 0
					    ? mark_x((size_t)c->pod_in / pod_block, pod_marks)
					    : dx;
			double bx = c->pod_out >= 0
					    ? mark_x((size_t)c->pod_out / pod_block, pod_marks)
					    : dx;

			fprintf(out,
				"<path class=\"circuit\" stroke=\"%s\" d=\"M%.1f %d L%.1f %d "
				"L%.1f %d\"><title>job ",
				colour, ax, SP_TOP_Y + SP_MARK_H, dx, SP_BOTTOM_Y, bx,
				SP_TOP_Y + SP_MARK_H);
			xml(out, job->id);
			fputs(": ", out);
			xml(out, known ? s->devices[c->device].name : "?");
			fprintf(out, " in %d -> out %d", c->in, c->out);
			if (c->pod_in >= 0 && c->pod_out >= 0)
				fprintf(out, " (pod %d -> pod %d)", c->pod_in, c->pod_out);
			fputs("</title></path>\n", out);
		}
	}
	fputs("</g>\n", out);
}

/* Above SP_MAX_CIRCUIT_PATHS: one edge per pair of pod marks, with a count. */
static int draw_pod_pairs(FILE *out, const struct sp_snapshot *s, size_t pod_block,
			  size_t pod_marks)
{
	size_t *count = calloc(pod_marks * pod_marks, sizeof(*count));

	if (!count)
		return -1;
	for (size_t j = 0; j < s->n_jobs; j++)
		for (size_t i = 0; i < s->jobs[j].n_circuits; i++) {
			const struct sp_circuit *c = &s->jobs[j].circuits[i];
			size_t a, b;

			if (c->pod_in < 0 || c->pod_out < 0 ||
			    (size_t)c->pod_in / pod_block >= pod_marks ||
			    (size_t)c->pod_out / pod_block >= pod_marks)
				continue;
			a = (size_t)c->pod_in / pod_block;
			b = (size_t)c->pod_out / pod_block;
			count[(a < b ? a : b) * pod_marks + (a < b ? b : a)]++;
		}
	fputs("<g class=\"pod-pairs\" fill=\"none\" stroke=\"#36c\">\n", out);
	for (size_t a = 0; a < pod_marks; a++)
		for (size_t b = a; b < pod_marks; b++) {
			size_t n = count[a * pod_marks + b];
			double ax = mark_x(a, pod_marks), bx = mark_x(b, pod_marks);
			double mid = (ax + bx) / 2,
			       bend = SP_TOP_Y + SP_MARK_H + 40 + (bx - ax) / 4;

			if (!n)
				continue;
			fprintf(out,
				"<path class=\"pod-pair\" stroke-width=\"%d\" d=\"M%.1f %d Q%.1f "
				"%.1f "
				"%.1f %d\"><title>%zu circuits between pod%s %zu and "
				"%zu</title></path>\n",
				n > 1000  ? 6
				: n > 100 ? 4
				: n > 10  ? 2
					  : 1,
				ax, SP_TOP_Y + SP_MARK_H, mid, bend, bx, SP_TOP_Y + SP_MARK_H, n,
				pod_block > 1 ? " blocks" : "s", a, b);
		}
	fputs("</g>\n", out);
	free(count);
	return 0;
}

static int draw_leaf_spine(FILE *out, const struct sp_snapshot *s)
{
	size_t pods = s->pods > 0 ? (size_t)s->pods : 0;
	size_t block = block_of(pods), marks = (pods + block - 1) / block;

	draw_pods(out, s, block, marks);
	if (total_circuits(s) <= SP_MAX_CIRCUIT_PATHS)
		draw_circuits(out, s, block, marks);
	else if (draw_pod_pairs(out, s, block, marks) != 0)
		return -1;
	draw_devices(out, s);
	return 0;
}

static bool node_faulty(const struct sp_snapshot *s, size_t first, size_t last)
{
	for (size_t i = 0; i < s->n_faulty_nodes; i++)
		if (s->faulty_nodes[i] >= 0 && (size_t)s->faulty_nodes[i] >= first &&
		    (size_t)s->faulty_nodes[i] < last)
			return true;
	return false;
}

static bool node_drifted(const struct sp_snapshot *s, size_t first, size_t last)
{
	for (size_t i = 0; i < s->n_bundle_drift; i++)
		if (s->bundle_drift[i].node >= 0 && (size_t)s->bundle_drift[i].node >= first &&
		    (size_t)s->bundle_drift[i].node < last)
			return true;
	return false;
}

/*
 * A ring's members as dots on its lane, and its bypass: a dashed hop over
 * the failed node's place on the lane and a dashed drop from the node, so
 * the detour shows without hovering.
 */
static void draw_ring_members(FILE *out, const struct sp_ring *ring, const char *colour, double y,
			      size_t block, size_t marks)
{
	for (size_t k = 0; k < ring->n_nodes; k++) {
		size_t node = ring->nodes[k] >= 0 ? (size_t)ring->nodes[k] : 0;

		fprintf(out,
			"<circle class=\"member\" cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n",
			mark_x(node / block < marks ? node / block : 0, marks), y, colour);
	}
	if (ring->failed_node < 0)
		return;
	size_t m =
		(size_t)ring->failed_node / block < marks ? (size_t)ring->failed_node / block : 0;
	double x = mark_x(m, marks), w = mark_w(marks) * 0.8 < 14 ? mark_w(marks) * 0.8 : 14;

	fprintf(out,
		"<path class=\"bypass\" stroke=\"%s\" stroke-dasharray=\"3 2\" "
		"d=\"M%.1f %.1f Q%.1f %.1f %.1f %.1f M%.1f %d L%.1f %.1f\"><title>ring %d "
		"bypasses node %d</title></path>\n",
		colour, x - w, y, x, y - 2 * w, x + w, y, x, SP_TOP_Y + SP_MARK_H, x, y - w,
		ring->index, ring->failed_node);
}

static void draw_ring_domain(FILE *out, const struct sp_snapshot *s)
{
	size_t nodes = s->nodes > 0 ? (size_t)s->nodes : 0;
	size_t block = block_of(nodes), marks = (nodes + block - 1) / block;
	double r = mark_w(marks) / 2 < 8 ? mark_w(marks) / 2 : 8;
	size_t drawn = 0;

	fprintf(out, "<g class=\"nodes\">\n");
	for (size_t m = 0; m < marks; m++) {
		size_t first = m * block, last = first + block < nodes ? first + block : nodes;
		bool bad = node_faulty(s, first, last), drift = node_drifted(s, first, last);
		double x = mark_x(m, marks);

		fprintf(out,
			"<circle class=\"node%s%s\" cx=\"%.1f\" cy=\"%d\" r=\"%.1f\" fill=\"%s\" "
			"stroke=\"%s\" stroke-width=\"%d\"><title>",
			bad ? " faulty" : "", drift ? " drift" : "", x, SP_TOP_Y + SP_MARK_H / 2, r,
			bad ? "#d33" : "#cde", drift ? "#f80" : "#333", drift ? 3 : 1);
		if (block == 1)
			fprintf(out, "node %zu%s", first, bad ? ": faulty" : "");
		else
			fprintf(out, "nodes %zu-%zu%s", first, last - 1,
				bad ? ": some faulty" : "");
		if (drift)
			fputs(block == 1 ? ", bundle drift" : ", some with bundle drift", out);
		fputs("</title></circle>\n", out);
		if (bad)
			fprintf(out,
				"<path class=\"fault\" stroke=\"#fff\" stroke-width=\"2\" "
				"d=\"M%.1f %.1f L%.1f %.1f M%.1f %.1f L%.1f %.1f\"/>\n",
				x - r / 2, SP_TOP_Y + SP_MARK_H / 2 - r / 2, x + r / 2,
				SP_TOP_Y + SP_MARK_H / 2 + r / 2, x - r / 2,
				SP_TOP_Y + SP_MARK_H / 2 + r / 2, x + r / 2,
				SP_TOP_Y + SP_MARK_H / 2 - r / 2);
	}
	fputs("</g>\n", out);
	if (s->closed)
		fprintf(out,
			"<text x=\"%d\" y=\"%d\">the line is closed: the last node joins the "
			"first</text>\n",
			SP_MARGIN, SP_TOP_Y - 8);
	fputs("<g class=\"rings\" fill=\"none\" stroke-width=\"2\">\n", out);
	for (size_t i = 0; i < s->n_rings && drawn < SP_MAX_CIRCUIT_PATHS; i++) {
		const struct sp_ring *ring = &s->rings[i];
		double y = SP_TOP_Y + SP_MARK_H + 20 + (double)(i % SP_RING_LANES) * 25;
		size_t job = 0;
		char colour[32];

		for (size_t j = 0; j < s->n_jobs; j++)
			if (s->jobs[j].id && ring->job && strcmp(s->jobs[j].id, ring->job) == 0)
				job = j;
		job_colour(colour, sizeof(colour), job);
		fprintf(out, "<path class=\"ring\" stroke=\"%s\" d=\"", colour);
		for (size_t k = 0; k < ring->n_nodes; k++) {
			size_t node = ring->nodes[k] >= 0 ? (size_t)ring->nodes[k] : 0;

			fprintf(out, "%s%.1f %.1f", k ? " L" : "M",
				mark_x(node / block < marks ? node / block : 0, marks), y);
		}
		if (ring->n_nodes == 0)
			fprintf(out, "M%d %.1f", SP_MARGIN, y);
		fputs("\"><title>job ", out);
		xml(out, ring->job);
		fprintf(out, " ring %d (", ring->index);
		xml(out, ring->change);
		fputs("):", out);
		for (size_t k = 0; k < ring->n_nodes; k++)
			fprintf(out, " %d", ring->nodes[k]);
		if (ring->failed_node >= 0)
			fprintf(out, "; node %d failed, bypassed", ring->failed_node);
		fputs("</title></path>\n", out);
		draw_ring_members(out, ring, colour, y, block, marks);
		drawn++;
	}
	if (drawn < s->n_rings)
		fprintf(out, "<text x=\"%d\" y=\"%d\">%zu more rings not drawn</text>\n", SP_MARGIN,
			SP_BOTTOM_Y - 10, s->n_rings - drawn);
	fputs("</g>\n", out);
	draw_devices(out, s);
}

static void draw_rails(FILE *out, const struct sp_snapshot *s)
{
	size_t servers = s->servers > 0 ? (size_t)s->servers : 0;
	size_t rails = s->rails > 0 ? (size_t)s->rails : 0;
	size_t block = block_of(servers), marks = (servers + block - 1) / block;
	double h = rails ? (double)(SP_BOTTOM_Y - SP_TOP_Y - 40) / (double)rails : 0;

	fputs("<g class=\"gpus\">\n", out);
	for (size_t m = 0; m < marks; m++)
		for (size_t r = 0; r < rails; r++) {
			bool bad = false;

			for (size_t i = 0; i < s->n_faulty_gpus; i++) {
				int64_t g = s->faulty_gpus[i];

				bad = bad || (g >= 0 && (size_t)g % rails == r &&
					      (size_t)g / rails / block == m);
			}
			fprintf(out,
				"<rect class=\"gpu%s\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
				"height=\"%.1f\" fill=\"%s\"><title>",
				bad ? " faulty" : "", mark_x(m, marks) - mark_w(marks) / 2,
				SP_TOP_Y + (double)r * h, mark_w(marks), h > 2 ? h - 1 : 1,
				bad ? "#d33" : "#cde");
			if (block == 1)
				fprintf(out, "server %zu rail %zu%s", m, r, bad ? ": swapped" : "");
			else
				fprintf(out, "servers %zu-%zu rail %zu%s", m * block,
					m * block + block - 1, r, bad ? ": some swapped" : "");
			fputs("</title></rect>\n", out);
		}
	fputs("</g>\n", out);
	draw_devices(out, s);
}

char *sp_topology_svg(const struct sp_snapshot *s, size_t *len)
{
	char *text = NULL;
	size_t n = 0;
	FILE *out = open_memstream(&text, &n);
	int rc = 0;

	if (!out)
		return NULL;
	fprintf(out,
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"topology\" width=\"%d\" "
		"height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" "
		"font-size=\"12\">\n<title>",
		SP_WIDTH, SP_HEIGHT, SP_WIDTH, SP_HEIGHT);
	xml(out, s->name);
	fputs(" (", out);
	xml(out, s->role);
	fputs(")</title>\n", out);
	switch (s->kind) {
	case SP_LEAF_SPINE:
		rc = draw_leaf_spine(out, s);
		break;
	case SP_RING:
		draw_ring_domain(out, s);
		break;
	case SP_RAIL:
		draw_rails(out, s);
		break;
	}
	if (s->n_jobs == 0 && s->n_devices == 0)
		fprintf(out,
			"<text x=\"%d\" y=\"%d\">an empty fabric: no devices, no jobs</text>\n",
			SP_MARGIN, SP_HEIGHT / 2);
	fputs("</svg>\n", out);
	if (fclose(out) != 0 || rc != 0) {
		free(text);
		return NULL;
	}
	if (len)
		*len = n;
	return text;
}
