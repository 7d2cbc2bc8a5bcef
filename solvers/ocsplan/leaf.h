/*
 * leaf.h - the leaf-centric answer format of ocsplan, shared by the
 * families that end in a leaf-centric plan (leaf-centric, pod-centric and
 * delta-fast --leaf-centric), so the contract is written in one place.
 */
#ifndef OCSPLAN_LEAF_H
#define OCSPLAN_LEAF_H

#include "json.h"
#include "leafcentric.h"

/* Writes the plan as one JSON object (issue 3's output contract). */
void ocsplan_write_lc_plan(struct json_writer *w, const struct lc_plan *pl,
			   const struct lc_options *opt);

#endif
