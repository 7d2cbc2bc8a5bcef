/*
 * lc_gen.h - instance generators for the planner's property tests and
 * benchmarks: leaf demand on a leaf-spine-OCS fabric, in four shapes
 * (random, saturated = every leaf uses all k_leaf uplinks, few heavy pairs,
 * skewed = a few hot leaves), deterministic for a seed.
 */
#ifndef OCS_LC_GEN_H
#define OCS_LC_GEN_H

#include <stddef.h>
#include <stdint.h>

#include "leafcentric.h"

enum lc_gen_shape { LC_GEN_RANDOM, LC_GEN_SATURATED, LC_GEN_HEAVY, LC_GEN_SKEWED, LC_GEN_SHAPES };

const char *lc_gen_shape_name(enum lc_gen_shape s);

/* splitmix64 */
uint64_t lc_gen_next(uint64_t *state);
/* Uniform in 0..n-1 (n >= 1). */
int lc_gen_below(uint64_t *state, int n);

/*
 * Generates demand for fabric f restricted to the leaves with allowed[leaf]
 * != 0 (allowed may be NULL = all), each leaf using at most k_leaf uplinks
 * (max_fill of them when 0 < max_fill < k_leaf). Returns a malloc'ed array
 * (caller frees) of *n entries with a < b, each pair once; NULL on ENOMEM.
 */
struct lc_demand *lc_gen_demand(const struct ocs_fabric *f, enum lc_gen_shape shape,
				const unsigned char *allowed, int max_fill, uint64_t *seed,
				size_t *n);

#endif
