/*
 * daemon_metrics.c - the daemon's own metric families (daemon_internal.h):
 * registered at start-up, and sampled from the in-memory state before each
 * scrape (no scrape reads the store). mx_set()'s result is left unchecked
 * (see api_events.c).
 */
#include "daemon_internal.h"

#include <errno.h>
#include <stdio.h>

#include "clock.h"
#include "devices.h"
#include "fabric_state.h"
#include "faults.h"
#include "jobs.h"
#include "metrics.h"
#include "rings.h"

/*
 * Before each scrape: job counts by state from the job manager's counters,
 * the worst contention of its live jobs and the age of the oldest one in
 * each in-flight state (walks of the live jobs), cross-connects and
 * input ports per group from the fabric state's per-device runs, devices
 * by state from devices.c.
 */
void od_sample_metrics(void *arg)
{
	struct od *od = arg;
	const struct ocs_fabric *f = &od->cfg->fabric;
	static const enum jm_state states[] = {JM_PENDING,   JM_PLANNING, JM_PROGRAMMING, JM_ACTIVE,
					       JM_RELEASING, JM_RELEASED, JM_FAILED};
	static const enum jm_state in_flight[] = {JM_PENDING, JM_PLANNING, JM_PROGRAMMING,
						  JM_RELEASING};
	enum { N_STATES = sizeof(states) / sizeof(states[0]) };
	enum { N_IN_FLIGHT = sizeof(in_flight) / sizeof(in_flight[0]) };

	mx_clear(od->m_jobs);
	for (size_t s = 0; od->jm && s < N_STATES; s++) {
		const char *label = jm_state_name(states[s]);

		mx_set(od->m_jobs, &label, (double)jm_count_state(od->jm, states[s]));
	}
	mx_clear(od->m_oldest);
	for (size_t s = 0; od->jm && s < N_IN_FLIGHT; s++) {
		const char *label = jm_state_name(in_flight[s]);

		mx_set(od->m_oldest, &label, (double)jm_state_age_ms(od->jm, in_flight[s]) / 1000);
	}
	if (od->jm)
		mx_set(od->m_contention, NULL, jm_max_contention(od->jm));
	if (od->devs) {
		int drained = dev_n_drained(od->devs);

		mx_set(od->m_devices, (const char *[]){"in_service"},
		       (double)(dev_count(od->devs) - drained));
		mx_set(od->m_devices, (const char *[]){"drained"}, (double)drained);
		mx_set(od->m_devices, (const char *[]){"unreachable"},
		       (double)dev_unreachable(od->devs));
	}
	mx_set(od->m_xcs, NULL, od->fs ? (double)fs_count(od->fs) : 0);
	if (od->rings) {
		mx_set(od->m_rings, NULL, (double)rg_active(od->rings));
		mx_set(od->m_faulty, NULL, (double)rg_n_faulty(od->rings));
		mx_set(od->m_subscribed, NULL, (double)flt_subscribed(od->faults));
	}
	if (od->fs) {
		/* Each cross-connect occupies one input and one output port. */
		long cabled =
			(long)ocs_fabric_devices_per_group(f) * ocs_fabric_device_ports_used(f);

		for (int h = 0; h < ocs_fabric_groups(f); h++) {
			char group[16];
			const char *used[] = {group, "used"}, *free_[] = {group, "free"};
			long n = (long)fs_group_xcs(od->fs, h);

			snprintf(group, sizeof(group), "%d", h);
			mx_set(od->m_ports, used, (double)n);
			mx_set(od->m_ports, free_, (double)(cabled - n));
		}
	}
}

/* A metric family od registers: where it goes, counter or gauge, name, help, labels. */
struct od_family {
	struct mx_family **to;
	bool counter;
	const char *name;
	const char *help;
	const char *const *labels;
};

int od_register_metrics(struct od *od)
{
	const char *const version_label[] = {"version", "fabric", NULL};
	const char *const state_label[] = {"state", NULL};
	const char *const port_labels[] = {"group", "state", NULL};
	const char *const result_label[] = {"result", NULL};
	struct mx_family *info, *start;
	const struct od_family fams[] = {
		{&info, false, "ocsd_build_info", "ocsd version and fabric name.", version_label},
		{&start, false, "ocsd_start_time_seconds", "Unix time ocsd started.", NULL},
		{&od->m_jobs, false, "ocsd_jobs", "Jobs by lifecycle state.", state_label},
		{&od->m_xcs, false, "ocsd_cross_connects",
		 "One-way cross-connects the state store says the devices hold.", NULL},
		{&od->m_ports, false, "ocsd_ocs_input_ports",
		 "Cabled OCS input ports per group, used and free.", port_labels},
		{&od->m_reloads, true, "ocsd_config_reloads_total",
		 "Fabric file re-reads (SIGHUP) by result.", result_label},
		{&od->m_devices, false, "ocsd_devices",
		 "Devices by state (in_service + drained = all; unreachable: "
		 "the last reconciliation could not read them).",
		 state_label},
		{&od->m_contention, false, "ocsd_active_plan_max_contention",
		 "Largest leaf-spine contention over the plans of active jobs.", NULL},
		{&od->m_pruned, true, "ocsd_jobs_pruned_total",
		 "Finished jobs deleted by the retention.", NULL},
		{&od->m_oldest, false, "ocsd_jobs_oldest_seconds",
		 "How long the job longest in each in-flight state (PENDING, PLANNING, "
		 "PROGRAMMING, RELEASING) has been in it (0: no job in that state).",
		 state_label},
		{&od->m_rings, false, "ocsd_rings_active",
		 "OCSTrx ring domains: rings holding nodes.", NULL},
		{&od->m_faulty, false, "ocsd_nodes_faulty",
		 "OCSTrx ring domains: nodes marked faulty.", NULL},
		{&od->m_subscribed, false, "ocsd_nodes_subscribed",
		 "OCSTrx ring domains: nodes whose fault notifications ocsd "
		 "receives (subscription up).",
		 NULL},
	};
	bool ok = true;

	for (size_t i = 0; i < sizeof(fams) / sizeof(fams[0]); i++) {
		const struct od_family *f = &fams[i];

		*f->to = f->counter ? mx_counter(od->reg, f->name, f->help, f->labels)
				    : mx_gauge(od->reg, f->name, f->help, f->labels);
		ok = ok && *f->to;
	}
	if (!ok)
		return -ENOMEM;
	mx_set(info, (const char *[]){OCSD_VERSION, od->cfg->name}, 1);
	mx_set(start, NULL, (double)(clk_wall_ms(NULL) / 1000));
	return 0;
}
