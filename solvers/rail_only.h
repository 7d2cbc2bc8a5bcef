/*
 * rail_only.h - the rail-only what-if model (issue 12 section 3, the
 * Rail-only paper's sections IV-B and V-E): what a rail-optimized Clos and
 * a rail-only network of the same cluster cost in switches, transceivers,
 * money and power, and how much slower all-to-all traffic gets when it is
 * forwarded through the HB domains.
 *
 * Symbols (the paper's Table I):
 *   N    GPUs of the cluster
 *   k    switch radix (ports per switch)
 *   x    HB-domain size (GPUs per server = rails)
 *   y    N / x, HB domains (= GPUs per rail)
 *   C_F  HB-domain bandwidth per GPU, C_S  NIC bandwidth per GPU (Gb/s)
 *   D    data per GPU pair in all-to-all (1 here: times are per unit)
 * Every formula and how the tier count is chosen are in solvers/README.md
 * ("rail-only what-if model").
 *
 * Pure C, no I/O, no globals: thread-safe.
 */
#ifndef OCS_RAIL_ONLY_H
#define OCS_RAIL_ONLY_H

#include <stdint.h>

/* The paper's unit prices and powers for 400 Gb/s (Table II, note 1). */
#define RAIL_ONLY_PRICE_TRANSCEIVER_USD 199.0
#define RAIL_ONLY_PRICE_SWITCH_PORT_USD 694.0
#define RAIL_ONLY_POWER_TRANSCEIVER_W	9.0
#define RAIL_ONLY_POWER_SWITCH_PORT_W	18.0

struct rail_only_input {
	int64_t gpus;	 /* N */
	int radix;	 /* k: a power of two, at least 4 */
	int hb_domain;	 /* x: divides gpus */
	double hb_gbps;	 /* C_F */
	double nic_gbps; /* C_S */
	double price_transceiver_usd;
	double price_switch_port_usd;
	double power_transceiver_w;
	double power_switch_port_w;
};

/* One network design: a minimum-tier Clos (rail-optimized) or one per rail. */
struct rail_only_design {
	int tiers;
	int64_t switches;
	int64_t transceivers;
	double cost_usd;
	double power_w;
};

struct rail_only_result {
	struct rail_only_design rail_optimized;
	struct rail_only_design rail_only;
	double savings_cost; /* fractions: 0.77 = 77 % */
	double savings_power;
	double t_rail_optimized; /* equation (2): max of its two terms, D = 1 */
	double t_rail_only;	 /* equation (3), D = 1 */
	double slowdown;	 /* t_rail_only / t_rail_optimized - 1 (0 when both are 0) */
};

/* Fills the four unit prices and powers with the paper's defaults. */
void rail_only_default_prices(struct rail_only_input *in);

/* One invalid input member: its JSON name ("radix") and why. */
struct rail_only_problem {
	const char *field;
	char reason[128];
};

/*
 * Checks the input: gpus >= 1, radix a power of two >= 4 (radix 2 cannot
 * build a Clos of more than 2 endpoints), hb_domain >= 1 dividing gpus,
 * bandwidths > 0, prices and powers >= 0 and finite. Writes up to
 * max_problems problems; returns how many rules were violated (0 = valid).
 */
int rail_only_validate(const struct rail_only_input *in, struct rail_only_problem *problems,
		       int max_problems);

/* Endpoints a t-tier Clos of radix k reaches: 2*(k/2)^t (k for t = 1); INT64_MAX on overflow. */
int64_t rail_only_clos_capacity(int radix, int tiers);
/* The fewest tiers (>= 1) whose capacity holds `endpoints`; radix a power of two >= 4. */
int rail_only_clos_tiers(int radix, int64_t endpoints);

/* Evaluates a valid input. Returns 0, or -EINVAL when the input is invalid. */
int rail_only_evaluate(const struct rail_only_input *in, struct rail_only_result *out);

#endif
