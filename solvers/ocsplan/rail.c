/*
 * rail.c - `ocsplan rail-only`: the rail-only what-if model
 * (solvers/rail_only.h) on the command line. Reads
 *   {"gpus", "radix", "hb_domain", "hb_gbps", "nic_gbps",
 *    "price_transceiver_usd", "price_switch_port_usd",
 *    "power_transceiver_w", "power_switch_port_w"}   (last four optional)
 * and writes
 *   {"rail_optimized": {"tiers", "switches", "transceivers", "cost_usd",
 *    "power_w"}, "rail_only": {...}, "savings": {"cost", "power"},
 *    "a2a": {"t_rail_optimized", "t_rail_only", "slowdown"}}
 * with the request/answer contract of io.h (bad input: one "field: reason"
 * line per problem, exit 2). Documented in solvers/README.md.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "io.h"
#include "rail_only.h"

int ocsplan_rail_only_main(int argc, char **argv);

/* Number member (integer or real); *out is kept when it is absent or not a number. */
static void get_number(const json_t *top, const char *key, bool optional, double *out,
		       struct ocsplan_problems *p)
{
	const json_t *v = json_object_get(top, key);

	if (!v) {
		if (!optional)
			ocsplan_problem(p, key, "missing");
	} else if (!json_is_number(v)) {
		ocsplan_problem(p, key, "must be a number, not %s", ocs_json_type_name(v));
	} else {
		*out = json_number_value(v);
	}
}

static bool parse(const json_t *top, struct rail_only_input *in, struct ocsplan_problems *p)
{
	static const char *const known[] = {"gpus",
					    "radix",
					    "hb_domain",
					    "hb_gbps",
					    "nic_gbps",
					    "price_transceiver_usd",
					    "price_switch_port_usd",
					    "power_transceiver_w",
					    "power_switch_port_w",
					    NULL};
	struct rail_only_problem rp[16];
	int gpus = 1, n;

	if (!json_is_object(top)) {
		ocsplan_problem(p, "input", "must be an object");
		return false;
	}
	/*
	 * Members that are missing or of the wrong type keep these valid
	 * stand-ins, so that the model's own checks below report every other
	 * member without repeating a problem already printed.
	 */
	*in = (struct rail_only_input){.radix = 4, .hb_domain = 1, .hb_gbps = 1, .nic_gbps = 1};
	rail_only_default_prices(in);
	ocsplan_unknown_fields(top, "", known, p);
	bool gpus_ok = ocsplan_get_int(top, "", "gpus", INT32_MIN, INT32_MAX, &gpus, p);
	ocsplan_get_int(top, "", "radix", INT32_MIN, INT32_MAX, &in->radix, p);
	ocsplan_get_int(top, "", "hb_domain", INT32_MIN, INT32_MAX, &in->hb_domain, p);
	get_number(top, "hb_gbps", false, &in->hb_gbps, p);
	get_number(top, "nic_gbps", false, &in->nic_gbps, p);
	get_number(top, "price_transceiver_usd", true, &in->price_transceiver_usd, p);
	get_number(top, "price_switch_port_usd", true, &in->price_switch_port_usd, p);
	get_number(top, "power_transceiver_w", true, &in->power_transceiver_w, p);
	get_number(top, "power_switch_port_w", true, &in->power_switch_port_w, p);
	/* Without gpus, a stand-in that hb_domain divides. */
	in->gpus = gpus_ok ? gpus : in->hb_domain > 0 ? in->hb_domain : 1;
	n = rail_only_validate(in, rp, 16);
	for (int i = 0; i < n && i < 16; i++)
		ocsplan_problem(p, rp[i].field, "%s", rp[i].reason);
	return n == 0 && p->count == 0;
}

static json_t *design_json(const struct rail_only_design *d)
{
	json_t *o = json_object();
	bool ok = o != NULL;

	ok &= ocsplan_set(o, "tiers", json_integer(d->tiers));
	ok &= ocsplan_set(o, "switches", json_integer(d->switches));
	ok &= ocsplan_set(o, "transceivers", json_integer(d->transceivers));
	ok &= ocsplan_set(o, "cost_usd", ocs_json_number(d->cost_usd));
	ok &= ocsplan_set(o, "power_w", ocs_json_number(d->power_w));
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *answer_json(const struct rail_only_result *r)
{
	json_t *top = json_object(), *savings = json_object(), *a2a = json_object();
	bool ok = top && savings && a2a;

	ok &= ocsplan_set(savings, "cost", ocs_json_number(r->savings_cost));
	ok &= ocsplan_set(savings, "power", ocs_json_number(r->savings_power));
	ok &= ocsplan_set(a2a, "t_rail_optimized", ocs_json_number(r->t_rail_optimized));
	ok &= ocsplan_set(a2a, "t_rail_only", ocs_json_number(r->t_rail_only));
	ok &= ocsplan_set(a2a, "slowdown", ocs_json_number(r->slowdown));
	ok &= ocsplan_set(top, "rail_optimized", design_json(&r->rail_optimized));
	ok &= ocsplan_set(top, "rail_only", design_json(&r->rail_only));
	ok &= ocsplan_set(top, "savings", savings);
	savings = NULL;
	ok &= ocsplan_set(top, "a2a", a2a);
	a2a = NULL;
	if (!ok) {
		json_decref(top);
		return NULL;
	}
	return top;
}

int ocsplan_rail_only_main(int argc, char **argv)
{
	struct ocsplan_io io = {0};
	struct ocsplan_problems p = {0};
	struct rail_only_input in = {0};
	struct rail_only_result r;
	json_t *top, *answer;
	int code;

	for (int i = 1; i < argc; i++)
		if (ocsplan_io_option(&io, argc, argv, &i, &p) == 0)
			ocsplan_problem(&p, argv[i], "unknown option for rail-only");
	if (p.count)
		return OCSPLAN_EXIT_INVALID;
	top = ocsplan_read_json(&io, &p, &code);
	if (!top)
		return code;
	if (!parse(top, &in, &p)) {
		json_decref(top);
		return OCSPLAN_EXIT_INVALID;
	}
	json_decref(top);
	if (rail_only_evaluate(&in, &r) != 0)
		return OCSPLAN_EXIT_INVALID;
	answer = answer_json(&r);
	code = ocsplan_write_json(&io, answer);
	json_decref(answer);
	return code;
}
