/*
 * adopt.h - the start-up check of issue 14 #2 (fail static on an empty or
 * lost store): on an empty store (no job, no circuit) every device is read;
 * if any holds cross-connects, ocsd refuses to start unless the operator
 * says to adopt them (recorded as circuits of a pseudo-job, ACTIVE and
 * releasable like any job, so that releasing it frees the ports) or to
 * clear them (one all-or-nothing transaction). What the read finds goes
 * into the drift table (drift.h) either way.
 *
 * Threading: start-up, on the loop thread before the loop runs; blocks.
 */
#ifndef OCSD_ADOPT_H
#define OCSD_ADOPT_H

#include <stddef.h>
#include <stdint.h>

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

#endif
