/*
 * test_sb_reconnect.c - connects to and disconnects from one ocs-devsim
 * device N times (argument, default 300; the bench label runs 10,000) and
 * checks that no file descriptor leaks (the count in /proc/self/fd is the
 * same before and after) and, under the sanitizer build, no memory
 * (LeakSanitizer at exit). Every tenth round also runs an RPC, and every
 * 50th drops the session on the device side first, so reconnecting after
 * a lost session is covered too.
 */
#include "sb_testlib.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	while (d && readdir(d))
		n++;
	if (d)
		closedir(d);
	return n;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 300;
	struct tl_fleet fleet;
	struct sb_driver *drv = NULL;
	if (rounds < 1 || tl_fleet_start(&fleet, 1, NULL) || sb_driver_new(NULL, &drv))
		return 1;
	struct sb_device **devs = tl_devices(drv, &fleet, 0, 1, 2000);
	struct sb_device *d = devs[0];
	struct sb_error err;
	int rc = 0;
	/* warm up once so lazily created library state is not counted */
	if (sb_device_connect(d, &err))
		rc = 1;
	sb_device_disconnect(d);
	int fds_before = count_fds();
	int64_t t0 = sb_now_ms();
	for (int i = 0; i < rounds && !rc; i++) {
		if (sb_device_connect_until(d, sb_now_ms() + 3000, &err)) {
			fprintf(stderr, "round %d: %s: %s\n", i, err.operation, err.message);
			rc = 1;
			break;
		}
		if (i % 50 == 25) {
			/* the device drops the session at the next lock */
			sb_device_rpc_xml(d,
					  "<set-faults xmlns=\"urn:ocsd:yang:ocs-devsim\">"
					  "<spec>drop@lock</spec></set-faults>",
					  &err);
			if (sb_device_lock(d, SB_DS_CANDIDATE, &err) != -ECONNRESET) {
				fprintf(stderr, "round %d: expected a dropped session\n", i);
				rc = 1;
			}
			continue;
		}
		if (i % 10 == 0) {
			struct sb_xc_state *s = NULL;
			size_t n = 0;
			if (sb_device_read_xcs(d, true, SB_DS_RUNNING, &s, &n, &err))
				rc = 1;
			free(s);
		}
		sb_device_disconnect(d);
	}
	sb_device_disconnect(d);
	int64_t took = sb_now_ms() - t0;
	int fds_after = count_fds();
	const struct sb_driver_counters *c = sb_driver_counters(drv);
	printf("%d reconnects in %lld ms (%.2f ms each), fds before %d after %d, connects %llu\n",
	       rounds, (long long)took, (double)took / rounds, fds_before, fds_after,
	       (unsigned long long)atomic_load(&c->connects));
	if (fds_after != fds_before) {
		fprintf(stderr, "file descriptors leaked: %d -> %d\n", fds_before, fds_after);
		rc = 1;
	}
	if (atomic_load(&c->connects) != (uint64_t)rounds + 1) {
		fprintf(stderr, "expected %d connects\n", rounds + 1);
		rc = 1;
	}
	tl_devices_free(devs, 1);
	sb_driver_free(drv);
	if (tl_fleet_stop(&fleet))
		rc = 1;
	return rc;
}
