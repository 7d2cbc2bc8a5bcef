/*
 * rail_only.c - the rail-only what-if model declared in rail_only.h: tier
 * counts, switch and transceiver counts, cost, power and the all-to-all
 * slow-down (formulas in solvers/README.md).
 */
#include "rail_only.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

void rail_only_default_prices(struct rail_only_input *in)
{
	in->price_transceiver_usd = RAIL_ONLY_PRICE_TRANSCEIVER_USD;
	in->price_switch_port_usd = RAIL_ONLY_PRICE_SWITCH_PORT_USD;
	in->power_transceiver_w = RAIL_ONLY_POWER_TRANSCEIVER_W;
	in->power_switch_port_w = RAIL_ONLY_POWER_SWITCH_PORT_W;
}

struct problems {
	struct rail_only_problem *items;
	int max;
	int count;
};

__attribute__((format(printf, 3, 4))) static void problem(struct problems *pl, const char *field,
							  const char *fmt, ...)
{
	if (pl->count < pl->max) {
		va_list ap;

		pl->items[pl->count].field = field;
		va_start(ap, fmt);
		vsnprintf(pl->items[pl->count].reason, sizeof(pl->items[pl->count].reason), fmt,
			  ap);
		va_end(ap);
	}
	pl->count++;
}

static void positive(struct problems *pl, const char *field, double v)
{
	if (!(v > 0) || !isfinite(v))
		problem(pl, field, "must be a positive number of Gb/s");
}

static void non_negative(struct problems *pl, const char *field, double v)
{
	if (!(v >= 0) || !isfinite(v))
		problem(pl, field, "must be zero or more");
}

int rail_only_validate(const struct rail_only_input *in, struct rail_only_problem *problems,
		       int max_problems)
{
	struct problems pl = {problems, max_problems, 0};

	if (in->gpus < 1)
		problem(&pl, "gpus", "must be at least 1 (got %lld)", (long long)in->gpus);
	if (in->radix < 4 || (in->radix & (in->radix - 1)) != 0)
		problem(&pl, "radix", "must be a power of two of at least 4 (got %d)", in->radix);
	if (in->hb_domain < 1)
		problem(&pl, "hb_domain", "must be at least 1 (got %d)", in->hb_domain);
	else if (in->gpus >= 1 && in->gpus % in->hb_domain != 0)
		problem(&pl, "hb_domain", "must divide gpus (%lld GPUs, HB domain of %d)",
			(long long)in->gpus, in->hb_domain);
	positive(&pl, "hb_gbps", in->hb_gbps);
	positive(&pl, "nic_gbps", in->nic_gbps);
	non_negative(&pl, "price_transceiver_usd", in->price_transceiver_usd);
	non_negative(&pl, "price_switch_port_usd", in->price_switch_port_usd);
	non_negative(&pl, "power_transceiver_w", in->power_transceiver_w);
	non_negative(&pl, "power_switch_port_w", in->power_switch_port_w);
	return pl.count;
}

int64_t rail_only_clos_capacity(int radix, int tiers)
{
	int64_t cap = radix;

	for (int t = 1; t < tiers; t++) {
		if (cap > INT64_MAX / (radix / 2))
			return INT64_MAX;
		cap *= radix / 2;
	}
	return cap;
}

int rail_only_clos_tiers(int radix, int64_t endpoints)
{
	int tiers = 1;

	while (rail_only_clos_capacity(radix, tiers) < endpoints)
		tiers++;
	return tiers;
}

/*
 * A design of `tiers` tiers over all N GPUs: every GPU has one link into
 * the bottom tier and each of the tiers-1 tiers above it one link per GPU;
 * a link has a transceiver at each end and takes a switch port at each
 * switch end.
 */
static void design(const struct rail_only_input *in, int tiers, struct rail_only_design *d)
{
	int64_t ports = (2 * (int64_t)tiers - 1) * in->gpus;

	d->tiers = tiers;
	d->switches = (ports + in->radix - 1) / in->radix;
	d->transceivers = 2 * (int64_t)tiers * in->gpus;
	d->cost_usd = in->price_switch_port_usd * (double)(d->switches * in->radix) +
		      in->price_transceiver_usd * (double)d->transceivers;
	d->power_w = in->power_switch_port_w * (double)(d->switches * in->radix) +
		     in->power_transceiver_w * (double)d->transceivers;
}

static double saving(double before, double after)
{
	return before > 0 ? 1.0 - after / before : 0.0;
}

int rail_only_evaluate(const struct rail_only_input *in, struct rail_only_result *out)
{
	struct rail_only_problem ignored;
	double x, y;

	if (rail_only_validate(in, &ignored, 1) != 0)
		return -EINVAL;
	x = in->hb_domain;
	y = (double)(in->gpus / in->hb_domain);
	design(in, rail_only_clos_tiers(in->radix, in->gpus), &out->rail_optimized);
	design(in, rail_only_clos_tiers(in->radix, in->gpus / in->hb_domain), &out->rail_only);
	out->savings_cost = saving(out->rail_optimized.cost_usd, out->rail_only.cost_usd);
	out->savings_power = saving(out->rail_optimized.power_w, out->rail_only.power_w);
	out->t_rail_optimized = fmax((x - 1) / in->hb_gbps, x * (y - 1) / in->nic_gbps);
	out->t_rail_only = y * (x - 1) / in->hb_gbps + x * (y - 1) / in->nic_gbps;
	out->slowdown =
		out->t_rail_optimized > 0 ? out->t_rail_only / out->t_rail_optimized - 1 : 0.0;
	return 0;
}
