/*
 * bench_sb_txn.c - one transaction that programs 16,384 GPUs' worth of
 * cross-connects (one per GPU) on 256 ocs-devsim devices, end to end
 * through the real driver and transaction engine on loopback: prepare,
 * confirmed commit, read-back verify with the L2 checker, confirm.
 *
 * Fabric: 64 pods, k_leaf 32, k_spine 8, tau 1, 64-port devices, straight
 * wiring = 32 groups x 8 devices = 256 devices, 16,384 GPUs; every device
 * holds a symmetric matching of the 64 pods (64 cross-connects).
 * Runs 20 transactions (each one changes every cross-connect) over SSH and
 * over TLS, each with --switch-ms 0 and with 25, and prints the median and p99 of the total
 * and the controller's overhead = total - the slowest device's switch time
 * (the switch time is a property of the device, so this is what ocsd adds).
 * Target (issue 4): overhead at most 100 ms at 256 devices.
 * First it measures what each RPC costs the controller on one device (its
 * thread's CPU), which multiplied by 256 devices is the controller's CPU
 * floor for the transaction; the transactions then report the CPU both the
 * controller and the simulator spent per transaction on the same two cores.
 *   usage: bench_sb_txn [runs]
 */
#include "sb_testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define DEVICES 256
#define XCS	64

static const struct ocs_fabric fabric = {.pods = 64,
					 .k_leaf = 32,
					 .k_spine = 8,
					 .tau = 1,
					 .k_ocs = 64,
					 .wiring = OCS_WIRING_STRAIGHT};

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static int64_t pct(int64_t *v, int n, int p)
{
	qsort(v, (size_t)n, sizeof(*v), cmp64);
	int i = (p * n + 99) / 100 - 1;
	return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

/* CPU time (user + system) of another process so far, from /proc; -1 if unknown. */
static double proc_cpu_ms(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
	unsigned long long ut, st;
	if (!p ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) * 1e3 / (double)sysconf(_SC_CLK_TCK);
}

/* tls_dir: certificates made by main() (TLS transport), NULL for SSH. */
static int run(int switch_ms, const char *tls_dir, int runs)
{
	const char *tr = tls_dir ? "TLS" : "SSH";
	char sw[16], cert[160], key[160], ca[160];
	snprintf(sw, sizeof(sw), "%d", switch_ms);
	snprintf(cert, sizeof(cert), "%s/server.pem", tls_dir ? tls_dir : "");
	snprintf(key, sizeof(key), "%s/server.key", tls_dir ? tls_dir : "");
	snprintf(ca, sizeof(ca), "%s/ca.pem", tls_dir ? tls_dir : "");
	const char *extra[] = {"--ports",  "64",	 "--switch-ms", sw,	     "--workers",
			       "4",	   "--tls-cert", cert,		"--tls-key", key,
			       "--tls-ca", ca,		 NULL};
	if (!tls_dir)
		extra[6] = NULL;
	struct tl_fleet fleet;
	struct sb_driver *drv;
	struct sb_engine *eng;
	if (tl_fleet_start(&fleet, DEVICES, extra) || sb_driver_new(NULL, &drv) ||
	    sb_engine_new(64, &eng))
		return 1;
	struct sb_device **devs = tl_devices(drv, &fleet, 0, DEVICES, 10000);
	for (int i = 0; tls_dir && i < DEVICES; i++) {
		struct sb_device_config c = tl_device_config(&fleet, i);
		c.rpc_timeout_ms = 10000;
		c.transport = SB_TRANSPORT_TLS;
		snprintf(c.tls_cert, sizeof(c.tls_cert), "%s/client.pem", tls_dir);
		snprintf(c.tls_key, sizeof(c.tls_key), "%s/client.key", tls_dir);
		snprintf(c.tls_ca, sizeof(c.tls_ca), "%s", ca);
		sb_device_free(devs[i]);
		if (sb_device_new(drv, &c, &devs[i]))
			return 1;
	}
	static struct sb_xc xcs[DEVICES][XCS];
	struct sb_txn_device pd[DEVICES];
	int group[DEVICES], device[DEVICES];
	int64_t total[64], overhead[64], step[SB_STEP_COUNT][64];
	int rc = 0;
	struct rusage ru0, ru1;
	double sim0 = 0;
	for (int r = -1; r < runs && !rc; r++) {
		if (r == 0) {
			getrusage(RUSAGE_SELF, &ru0); /* r = -1: warm-up, connects all sessions */
			sim0 = proc_cpu_ms(fleet.pid);
		}
		size_t n_xc = 0;
		for (int i = 0; i < DEVICES; i++) {
			group[i] = i / 8;
			device[i] = i % 8;
			pd[i] = (struct sb_txn_device){
				.dev = devs[i],
				.target = xcs[i],
				.n_target = tl_fabric_device_xcs(&fabric, group[i], device[i],
								 r + 1, xcs[i], XCS)};
			n_xc += pd[i].n_target;
		}
		struct tl_verify_ctx v = {.fabric = &fabric, .group = group, .device = device};
		struct sb_txn_hooks hooks = {.verify = tl_verify, .arg = &v};
		struct sb_txn_plan plan = {
			.id = (uint64_t)(r + 2), .devices = pd, .n_devices = DEVICES};
		struct sb_txn_options opts = {.confirm_timeout_s = 60,
					      .verify_timeout_ms = 5000,
					      .connect_timeout_ms = 30000};
		struct sb_txn_result res;
		if (sb_engine_run(eng, &plan, &hooks, &opts, &res) ||
		    res.outcome != SB_TXN_COMMITTED) {
			fprintf(stderr, "run %d: %s\n", r, res.message);
			rc = 1;
		} else if (r == -1) {
			printf("%s switch-ms %d: %d devices, %zu cross-connects per transaction, "
			       "warm-up "
			       "(connect + commit) %lld ms\n",
			       tr, switch_ms, DEVICES, n_xc, (long long)res.total_ms);
		} else {
			total[r] = res.total_ms;
			overhead[r] = res.total_ms - switch_ms;
			for (int s = 0; s < SB_STEP_COUNT; s++)
				step[s][r] = res.step_ms[s];
		}
		sb_txn_result_clear(&res);
	}
	getrusage(RUSAGE_SELF, &ru1);
	double sim_txn_ms = (proc_cpu_ms(fleet.pid) - sim0) / runs;
	double cpu_ms = (ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) * 1e3 +
			(ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec) / 1e3 +
			(ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) * 1e3 +
			(ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec) / 1e3;
	if (!rc) {
		printf("%s switch-ms %2d: CPU per transaction: controller %.0f ms (all its "
		       "threads), "
		       "ocs-devsim %.0f ms (on the same 2 cores)\n",
		       tr, switch_ms, cpu_ms / runs, sim_txn_ms);
		printf("%s switch-ms %2d: total median %lld ms p99 %lld ms; controller overhead "
		       "median "
		       "%lld ms p99 %lld ms (target <= 100 ms)\n",
		       tr, switch_ms, (long long)pct(total, runs, 50),
		       (long long)pct(total, runs, 99), (long long)pct(overhead, runs, 50),
		       (long long)pct(overhead, runs, 99));
		printf("                  median per step: prepare %lld, commit %lld, verify %lld, "
		       "confirm %lld ms\n",
		       (long long)pct(step[SB_STEP_PREPARE], runs, 50),
		       (long long)pct(step[SB_STEP_COMMIT], runs, 50),
		       (long long)pct(step[SB_STEP_VERIFY], runs, 50),
		       (long long)pct(step[SB_STEP_CONFIRM], runs, 50));
	}
	tl_devices_free(devs, DEVICES);
	sb_engine_free(eng);
	sb_driver_free(drv);
	if (tl_fleet_stop(&fleet))
		rc = 1;
	/* who spent the CPU on these 2 cores: ocsd's side or the simulator */
	struct rusage self, children;
	getrusage(RUSAGE_SELF, &self);
	getrusage(RUSAGE_CHILDREN, &children);
	double self_ms = self.ru_utime.tv_sec * 1e3 + self.ru_utime.tv_usec / 1e3 +
			 self.ru_stime.tv_sec * 1e3 + self.ru_stime.tv_usec / 1e3;
	double sim_ms = children.ru_utime.tv_sec * 1e3 + children.ru_utime.tv_usec / 1e3 +
			children.ru_stime.tv_sec * 1e3 + children.ru_stime.tv_usec / 1e3;
	printf("                  CPU so far (cumulative, incl. warm-up): controller %.0f ms, "
	       "ocs-devsim %.0f ms\n",
	       self_ms, sim_ms);
	return rc;
}

static double thread_cpu_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/*
 * What one device costs the controller per RPC (this thread's CPU, median
 * of 200 calls; one device of 64 cross-connects, so nothing runs in
 * parallel): the floor under a 256-device transaction, which makes about
 * eight of these calls per device.
 */
static int rpc_costs(void)
{
	const char *extra[] = {"--ports", "64", "--switch-ms", "0", NULL};
	struct tl_fleet fleet;
	struct sb_driver *drv;
	struct sb_error err = {0};
	if (tl_fleet_start(&fleet, 1, extra) || sb_driver_new(NULL, &drv))
		return 1;
	struct sb_device **d = tl_devices(drv, &fleet, 0, 1, 5000);
	static struct sb_xc a[XCS], b[XCS];
	for (int i = 0; i < XCS; i++) {
		a[i] = (struct sb_xc){(uint16_t)i, (uint16_t)(i ^ 1)};
		b[i] = (struct sb_xc){(uint16_t)i, (uint16_t)(i ^ 2)};
	}
	enum { N = 200, OPS = 7 };
	static const char *const names[OPS] = {"lock",	 "unlock",     "edit-config", "validate",
					       "commit", "get-config", "get (state)"};
	static int64_t us[OPS][N];
	int rc = sb_device_connect(d[0], &err);
	for (int k = 0; k < N && !rc; k++) {
		struct sb_xc_state *st = NULL;
		size_t n = 0;
		double t0;
#define TIMED(op, call)                                                                            \
	(t0 = thread_cpu_us(), rc |= (call), us[op][k] = (int64_t)(thread_cpu_us() - t0))
		TIMED(0, sb_device_lock(d[0], SB_DS_CANDIDATE, &err));
		TIMED(1, sb_device_unlock(d[0], SB_DS_CANDIDATE, &err));
		rc |= sb_device_lock(d[0], SB_DS_CANDIDATE, &err);
		TIMED(2, sb_device_edit_xcs(d[0], SB_DS_CANDIDATE, k ? (k & 1 ? b : a) : NULL,
					    k ? XCS : 0, k & 1 ? a : b, XCS, &err));
		TIMED(3, sb_device_validate(d[0], &err));
		TIMED(4, sb_device_commit(d[0], 0, NULL, NULL, &err));
		rc |= sb_device_unlock(d[0], SB_DS_CANDIDATE, &err);
		TIMED(5, sb_device_read_xcs(d[0], false, SB_DS_RUNNING, &st, &n, &err));
		free(st);
		TIMED(6, sb_device_read_xcs(d[0], true, SB_DS_RUNNING, &st, &n, &err));
		free(st);
#undef TIMED
		rc |= n != XCS;
	}
	if (rc) {
		fprintf(stderr, "per-RPC costs: %s\n", err.message);
	} else {
		printf("controller CPU per RPC, one device, %d cross-connects (median of %d):", XCS,
		       N);
		int64_t sum = 0;
		for (int o = 0; o < OPS; o++) {
			int64_t m = pct(us[o], N, 50);
			sum += m;
			printf("%s %s %lld us", o ? "," : "", names[o], (long long)m);
		}
		int64_t dev_us = sum + pct(us[4], N, 50) + pct(us[1], N, 50);
		printf("\n  per device and transaction (these + a confirming commit + an unlock): "
		       "%lld us; x %d devices: %.0f ms of controller CPU per transaction, before "
		       "any thread or lock overhead\n",
		       (long long)dev_us, DEVICES, (double)dev_us * DEVICES / 1e3);
	}
	tl_devices_free(d, 1);
	sb_driver_free(drv);
	return tl_fleet_stop(&fleet) || rc;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	int runs = argc > 1 ? atoi(argv[1]) : 20;
	if (runs < 1 || runs > 64)
		return 2;
	char dir[] = "/tmp/bench-sb-tls-XXXXXX";
	if (!mkdtemp(dir) || tl_make_cert(dir, "ca", "ocs-bench-ca", NULL) ||
	    tl_make_cert(dir, "server", "127.0.0.1", "ca") ||
	    tl_make_cert(dir, "client", "ocs-controller", "ca"))
		return 1;
	int rc = rpc_costs() || run(0, NULL, runs) || run(25, NULL, runs) || run(0, dir, runs) ||
		 run(25, dir, runs);
	char cmd[96];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) || rc;
}
