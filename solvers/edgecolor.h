/*
 * edgecolor.h - the combinatorial engine under the planners and the
 * realization: balanced orientation of a multigraph (Euler trails) and
 * edge colouring with "slots" (one edge per vertex and colour) repaired by
 * Kempe chains.
 *
 * Model: vertices 0..nv-1, colours 0..nc-1, slot (v, c) holds at most one
 * edge. A slot may be BLOCKED (a port that is already in use and must not be
 * touched). Colouring edge (u, v) with c needs slots (u, c) and (v, c) free.
 * Bipartite graphs are expressed by numbering the two sides apart; then a
 * graph of maximum degree <= nc with no blocked slots always colours
 * completely (Konig), and ec_color() with Kempe repair finds it.
 *
 * Pure C, no globals; a graph is used by one thread at a time.
 */
#ifndef OCS_EDGECOLOR_H
#define OCS_EDGECOLOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EC_FREE	   (-1)
#define EC_BLOCKED (-2)

struct ec_graph {
	int nv, nc;
	int *slot;    /* nv * nc: edge id, EC_FREE or EC_BLOCKED */
	int *eu, *ev; /* endpoints of each edge */
	int *color;   /* colour of each edge, -1 when uncoloured */
	int ne, cap_edges;
	int *path; /* scratch for Kempe chains, cap_edges long */
};

/* Allocates an empty graph able to hold max_edges edges; 0 or -ENOMEM. */
int ec_init(struct ec_graph *g, int nv, int nc, int max_edges);
/* Frees what ec_init allocated; accepts a zeroed or NULL graph. */
void ec_release(struct ec_graph *g);
/* Marks slot (v, c) unusable. It must be free. */
void ec_block(struct ec_graph *g, int v, int c);
/* Adds an uncoloured edge and returns its id (edges are numbered 0, 1, ...). */
int ec_add_edge(struct ec_graph *g, int u, int v);
/* Colours edge e with c when both slots are free; returns whether it did. */
bool ec_set(struct ec_graph *g, int e, int c);
/* Removes the colour of edge e (no-op when uncoloured). */
void ec_unset(struct ec_graph *g, int e);
/*
 * Colours edge e: the first colour free at both ends, else (when kempe is
 * true) swaps an alternating two-colour chain to free one, trying up to
 * max_pairs colour pairs (0 = all). Blocked slots are never moved. Returns
 * whether the edge got a colour.
 */
bool ec_color(struct ec_graph *g, int e, bool kempe, int max_pairs);

/*
 * Colours edge e like ec_color(), and when that fails moves the defect
 * instead of giving up: e takes a colour free at one end, the edge holding
 * that colour at the other end loses it and becomes the one to colour, up
 * to max_steps times (a random walk driven by *rng, deterministic for a
 * seed). Returns true when the walk ends with every edge it touched
 * coloured; false leaves exactly one of them uncoloured (maybe not e), so
 * the number of uncoloured edges never grows.
 */
bool ec_color_walk(struct ec_graph *g, int e, int max_steps, uint64_t *rng);

/*
 * Balanced orientation of an undirected multigraph on nv vertices given as
 * n pairs (u[i], v[i]) with multiplicity cnt[i] (u != v). Writes fwd[i], how
 * many of the cnt[i] parallel edges point u -> v (the rest point v -> u),
 * such that every vertex's out-degree and in-degree are within floor/ceil of
 * half its degree. Pairs of parallel edges are split evenly and what is left
 * is oriented along Euler trails (odd vertices joined through a dummy
 * vertex). Returns 0 or -ENOMEM.
 */
int ec_orient_balanced(int nv, size_t n, const int *u, const int *v, const int *cnt, int *fwd);

#endif
