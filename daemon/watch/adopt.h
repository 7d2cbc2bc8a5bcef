/*
 * adopt.h - the start-up check of issue 14 #2 (fail static on an empty or
 * lost store): on an empty store (no job, no circuit) every device is read;
 * if any holds cross-connects, ocsd refuses to start unless the operator
 * says to adopt them (recorded as circuits of a pseudo-job, ACTIVE and
 * releasable like any job, so that releasing it frees the ports) or to
 * clear them (one all-or-nothing transaction). What the read finds goes
 * into the drift table (drift.h) either way.
 *
 * On a running ocsd the operator decides the same (AdoptCrossConnects,
 * ClearCrossConnects): adopt_select() picks the unowned cross-connects a
 * scope names, as whole circuits, and says why not when it cannot.
 *
 * Threading: the loop thread; adopt_start_check() at start-up, before the
 * loop runs (it blocks).
 */
#ifndef OCSD_ADOPT_H
#define OCSD_ADOPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fabric.h"
#include "jobs.h"

struct devices;
struct dr_table;
struct fs_state;
struct loop;
struct ocs_fabric;
struct st_store;
struct txn_driver;

enum adopt_mode {
	ADOPT_START_REFUSE, /* the default: refuse to start */
	ADOPT_START_ADOPT,  /* --adopt-existing */
	ADOPT_START_CLEAR,  /* --clear-existing */
};

/* The job the start-up adoption records the cross-connects under. */
#define ADOPT_START_JOB "adopted-at-start"

struct adopt_deps {
	const struct ocs_fabric *fabric;
	struct st_store *store;
	struct fs_state *fs;
	struct devices *devs; /* read through their transaction handles */
	struct loop *loop;    /* the clear's outcome is posted to it */
	struct txn_driver *txn;
	struct dr_table *drift; /* filled with what was read */
	int64_t now_ms;
	/* ADOPT_START_ADOPT: the request GetJob hands back for ADOPT_START_JOB
	 * (api_adopted_request; NULL: out of memory). */
	const void *request;
	size_t request_len;
	/* How long the devices not connected yet are tried, all in parallel;
	 * 0: not at all (the warm start tried already). */
	int connect_ms;
};

/*
 * The start-up check, before the job manager loads the jobs. On a store
 * that is not empty it does nothing. Otherwise every device is read:
 * those not connected after connect_ms and unreadable ones are unverified (no new circuits until a
 * reconciliation pass reads them; logged); when devices hold cross-connects, mode says what
 * happens: REFUSE returns -EEXIST with why naming both flags; ADOPT stores every two-way circuit as
 * circuits of job ADOPT_START_JOB (ACTIVE, releasable) and leaves the rest (one-way) as drift;
 * CLEAR removes them all in one all-or-nothing transaction (-EIO with why when it did not go
 * through: the devices are as they were). 0, or -errno with why.
 */
int adopt_start_check(const struct adopt_deps *d, enum adopt_mode mode, char *why, size_t why_len);

/* Which unowned cross-connects (AdoptCrossConnects / ClearCrossConnects' scope). */
struct adopt_scope {
	int device; /* device id, -1: every device */
	bool has_ports;
	int in, out; /* with has_ports: this cross-connect of device */
};

/*
 * The unowned cross-connects scope selects, as whole circuits: each with
 * the other half of its two-way circuit (on whatever device), sorted, no
 * duplicates (*out malloc'd, caller frees). To adopt (clear false) every
 * one needs its other half unowned too and no port of theirs may carry a
 * stored cross-connect. To clear, one-way cross-connects are fine, but
 * not one whose other half a job owns, nor one on an input a job's
 * cross-connect holds. 0, or -1 with err naming the field (scope.device,
 * scope.in_port) and saying what to do instead.
 */
int adopt_select(const struct dr_table *t, const struct fs_state *fs, const struct devices *devs,
		 const struct ocs_fabric *f, const struct adopt_scope *scope, bool clear,
		 struct ocs_xc **out, size_t *n, struct err_info *err);

#endif
