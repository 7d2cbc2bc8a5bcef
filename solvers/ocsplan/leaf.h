/*
 * leaf.h - the leaf-centric answer format of ocsplan, shared by the
 * families that end in a leaf-centric plan (leaf-centric, pod-centric and
 * delta-fast --leaf-centric), so the contract is written in one place.
 */
#ifndef OCSPLAN_LEAF_H
#define OCSPLAN_LEAF_H

#include "leafcentric.h"
#include "ocs_json.h"

/*
 * The plan as one JSON object (issue 3's output contract): a new reference,
 * NULL when out of memory.
 */
json_t *ocsplan_lc_plan_json(const struct lc_plan *pl, const struct lc_options *opt);

#endif
