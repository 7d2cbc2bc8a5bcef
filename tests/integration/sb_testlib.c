/*
 * sb_testlib.c - helpers of the southbound integration tests (sb_testlib.h).
 */
#include "sb_testlib.h"

#include "l2check.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/*
 * Runs tests/integration/testports.py (OCSD_TESTPORTS_PY) with the arguments
 * after the script; returns the number it printed (0 when it prints nothing)
 * or -1 when it fails (it said why on stderr).
 */
static int run_testports(const char *args)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s %s", OCSD_TESTPORTS_PY, args);
	FILE *p = popen(cmd, "r");
	if (!p)
		return -1;
	int value = 0;
	if (fscanf(p, "%d", &value) != 1)
		value = 0;
	int status = pclose(p);
	if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return -1;
	return value;
}

/* atexit: drops this process's reservations (a later reservation would
 * reclaim them anyway, once it sees the process gone). */
static void release_ports(void)
{
	char args[64];
	snprintf(args, sizeof(args), "release --owner %d", (int)getpid());
	if (run_testports(args) < 0)
		fprintf(stderr, "tl_ports_reserve: could not release this process's test ports\n");
}

int tl_ports_reserve(int count)
{
	static bool release_registered;
	char args[64];
	snprintf(args, sizeof(args), "reserve --count %d --owner %d", count, (int)getpid());
	int base = run_testports(args);
	if (base > 0 && !release_registered)
		release_registered = atexit(release_ports) == 0;
	return base > 0 ? base : -1;
}

int tl_wait_listening(int port, int count, const char *name, pid_t pid, int timeout_s)
{
	char args[128];
	snprintf(args, sizeof(args), "wait --name %s --pid %d --timeout %d 127.0.0.1 %d %d", name,
		 (int)pid, timeout_s, port, count);
	return run_testports(args) < 0 ? -1 : 0;
}

static pid_t spawn_devsim(int count, int base, const char *const *extra, char *hostkey,
			  size_t hostkey_len)
{
	int pipefd[2];
	if (pipe(pipefd))
		return -1;
	char listen[64], count_s[16];
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", base);
	snprintf(count_s, sizeof(count_s), "%d", count);
	const char *argv[64] = {OCS_DEVSIM_PATH, "--listen", listen,	"--count", count_s,
				"--user",	 TL_USER,    "--ports", "16"};
	int argc = 9;
	bool key_only = false;
	for (int i = 0; extra && extra[i]; i++)
		key_only |= !strcmp(extra[i], "--authorized-key");
	if (!key_only) {
		argv[argc++] = "--password";
		argv[argc++] = TL_PASSWORD;
	}
	for (int i = 0; extra && extra[i] && argc < 62; i++)
		argv[argc++] = extra[i];
	argv[argc] = NULL;
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		/* the simulator dies with the test, even when the test is killed */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		dup2(pipefd[1], STDOUT_FILENO);
		close(pipefd[0]);
		close(pipefd[1]);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(pipefd[1]);
	FILE *in = fdopen(pipefd[0], "r");
	char line[256];
	bool ready = false;
	hostkey[0] = '\0';
	/* ocs-devsim prints "ready" or exits: a blocking read cannot hang */
	while (fgets(line, sizeof(line), in)) {
		if (!strncmp(line, "hostkey ", 8)) {
			snprintf(hostkey, hostkey_len, "%.120s", line + 8);
			hostkey[strcspn(hostkey, "\n")] = '\0';
		} else if (!strncmp(line, "ready ", 6)) {
			ready = true;
			break;
		}
	}
	fclose(in);
	if (ready && tl_wait_listening(base, count, "ocs-devsim", pid, 30) == 0)
		return pid;
	if (!ready)
		fprintf(stderr, "tl_fleet_start: ocs-devsim exited before \"ready\"\n");
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return -1;
}

int tl_fleet_start(struct tl_fleet *f, int count, const char *const *extra)
{
	int base = tl_ports_reserve(count);
	if (base < 0) {
		fprintf(stderr, "tl_fleet_start: no test ports for %d devices\n", count);
		return -1;
	}
	pid_t pid = spawn_devsim(count, base, extra, f->hostkey, sizeof(f->hostkey));
	if (pid < 0) {
		fprintf(stderr,
			"tl_fleet_start: ocs-devsim did not start (%d devices on port %d)\n", count,
			base);
		return -1;
	}
	f->pid = pid;
	f->count = count;
	f->base_port = base;
	return 0;
}

int tl_fleet_restart(struct tl_fleet *f, const char *const *extra)
{
	pid_t pid = spawn_devsim(f->count, f->base_port, extra, f->hostkey, sizeof(f->hostkey));
	if (pid < 0)
		return -1;
	f->pid = pid;
	return 0;
}

int tl_fleet_stop(struct tl_fleet *f)
{
	int status = 0;
	if (f->pid <= 0)
		return 0;
	kill(f->pid, SIGTERM);
	waitpid(f->pid, &status, 0);
	f->pid = 0;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int tl_make_cert(const char *dir, const char *name, const char *cn, const char *ca)
{
	char cmd[1024];
	if (!ca) {
		snprintf(cmd, sizeof(cmd),
			 "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
			 "-keyout %s/%s.key -out %s/%s.pem -subj /CN=%s -days 1 2>/dev/null",
			 dir, name, dir, name, cn);
	} else {
		snprintf(cmd, sizeof(cmd),
			 "printf 'subjectAltName=IP:127.0.0.1\\nbasicConstraints=CA:FALSE\\n' "
			 "> %s/%s.ext && "
			 "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
			 "-keyout %s/%s.key -out %s/%s.csr -subj /CN=%s 2>/dev/null && "
			 "openssl x509 -req -in %s/%s.csr -CA %s/%s.pem -CAkey %s/%s.key "
			 "-CAcreateserial -extfile %s/%s.ext -out %s/%s.pem -days 1 2>/dev/null",
			 dir, name, dir, name, dir, name, cn, dir, name, dir, ca, dir, ca, dir,
			 name, dir, name);
	}
	return system(cmd) == 0 ? 0 : -1;
}

struct sb_device_config tl_device_config(const struct tl_fleet *f, int i)
{
	struct sb_device_config c = {0};
	snprintf(c.name, sizeof(c.name), "devsim%d", i);
	snprintf(c.host, sizeof(c.host), "127.0.0.1");
	c.port = (uint16_t)(f->base_port + i);
	snprintf(c.username, sizeof(c.username), TL_USER);
	snprintf(c.password, sizeof(c.password), TL_PASSWORD);
	c.hostkey_policy = SB_HOSTKEY_PINNED;
	snprintf(c.hostkey_sha256, sizeof(c.hostkey_sha256), "%s", f->hostkey);
	return c;
}

struct sb_device **tl_devices(struct sb_driver *drv, const struct tl_fleet *f, int first, int n,
			      int rpc_timeout_ms)
{
	return tl_devices_model(drv, f, first, n, rpc_timeout_ms, SB_MODEL_SWITCH, 0);
}

struct sb_device **tl_devices_model(struct sb_driver *drv, const struct tl_fleet *f, int first,
				    int n, int rpc_timeout_ms, enum sb_model m, uint32_t ports)
{
	struct sb_device **devs = calloc((size_t)n, sizeof(*devs));
	for (int i = 0; i < n; i++) {
		struct sb_device_config c = tl_device_config(f, first + i);
		c.rpc_timeout_ms = rpc_timeout_ms;
		c.backoff_min_ms = 10;
		c.backoff_max_ms = 200;
		c.model = m;
		c.ports.n = ports;
		if (sb_device_new(drv, &c, &devs[i]))
			abort();
	}
	return devs;
}

void tl_devices_free(struct sb_device **devs, int n)
{
	for (int i = 0; devs && i < n; i++)
		sb_device_free(devs[i]);
	free(devs);
}

/* Symmetric matchings of pods for round r (pods even): pod p <-> partner. */
static int partner(int pods, int p, int r)
{
	/* round-robin tournament schedule: pod pods-1 fixed, others rotate */
	int m = pods - 1;
	int k = r % m;
	if (p == m)
		return k;
	if (p == k)
		return m;
	int q = (2 * k - p) % m;
	return q < 0 ? q + m : q;
}

size_t tl_fabric_device_xcs(const struct ocs_fabric *f, int group, int device, int round,
			    struct sb_xc *out, size_t cap)
{
	size_t n = 0;
	int pods = f->pods;
	int r = round + group + device;
	if (f->wiring == OCS_WIRING_CROSS) {
		/* device 2m: in p -> out perm(p); device 2m+1 the inverse */
		int shift = 1 + (round + group + device / 2) % (pods - 1);
		for (int p = 0; p < pods && n < cap; p++) {
			int q = (device % 2 == 0) ? (p + shift) % pods : (p - shift + pods) % pods;
			out[n++] = (struct sb_xc){(uint16_t)p, (uint16_t)q};
		}
		return n;
	}
	int ppp = ocs_fabric_ports_per_pod(f);
	for (int p = 0; p < pods; p++) {
		int q = partner(pods, p, r);
		for (int j = 0; j < ppp && n < cap; j++)
			out[n++] = (struct sb_xc){(uint16_t)(p * ppp + j), (uint16_t)(q * ppp + j)};
	}
	return n;
}

int tl_l2_violations(const struct ocs_fabric *f, const int *group, const int *device,
		     const struct sb_xc *const *xcs, const size_t *n, size_t n_devices, char *why,
		     size_t why_len)
{
	size_t total = 0;
	for (size_t i = 0; i < n_devices; i++)
		total += n[i];
	struct ocs_xc *all = malloc((total ? total : 1) * sizeof(*all));
	size_t k = 0;
	for (size_t i = 0; i < n_devices; i++)
		for (size_t j = 0; j < n[i]; j++)
			all[k++] =
				(struct ocs_xc){group[i], device[i], xcs[i][j].in, xcs[i][j].out};
	struct l2_violation v[1];
	int bad = l2_check(f, all, total, v, 1);
	if (bad > 0 && why)
		snprintf(why, why_len, "%d violation(s), first: group %d device %d %d->%d: %s", bad,
			 v[0].xc.group, v[0].xc.device, v[0].xc.in, v[0].xc.out, v[0].reason);
	free(all);
	return bad;
}

int tl_verify(void *arg, enum sb_verify_phase phase, const struct sb_device_xcs *devs, size_t n,
	      char *why, size_t why_len)
{
	struct tl_verify_ctx *v = arg;
	if (phase == SB_VERIFY_PLAN)
		v->plan_calls++;
	else
		v->readback_calls++;
	int *g = malloc(n * sizeof(int)), *d = malloc(n * sizeof(int));
	const struct sb_xc **x = malloc(n * sizeof(*x));
	size_t *c = malloc(n * sizeof(size_t));
	for (size_t i = 0; i < n; i++) {
		g[i] = v->group[devs[i].index];
		d[i] = v->device[devs[i].index];
		x[i] = devs[i].xcs;
		c[i] = devs[i].n;
	}
	int bad = tl_l2_violations(v->fabric, g, d, x, c, n, why, why_len);
	free(g);
	free(d);
	free(x);
	free(c);
	return bad;
}

int tl_read_running(struct sb_device *dev, struct sb_xc **out, size_t *n)
{
	struct sb_error err;
	struct sb_xc_state *s = NULL;
	int rc = sb_device_connect_until(dev, sb_now_ms() + 3000, &err);
	if (!rc)
		rc = sb_device_read_xcs(dev, false, SB_DS_RUNNING, &s, n, &err);
	if (rc) {
		fprintf(stderr, "read %s: %s: %s\n", sb_device_name(dev), err.operation,
			err.message);
		return rc;
	}
	*out = malloc((*n ? *n : 1) * sizeof(**out));
	for (size_t i = 0; i < *n; i++)
		(*out)[i] = (struct sb_xc){s[i].in, s[i].out};
	free(s);
	return 0;
}

bool tl_same(const struct sb_xc *a, size_t na, const struct sb_xc *b, size_t nb)
{
	if (na != nb)
		return false;
	struct sb_xc *x = malloc((na ? na : 1) * sizeof(*x)),
		     *y = malloc((nb ? nb : 1) * sizeof(*y));
	memcpy(x, a, na * sizeof(*x));
	memcpy(y, b, nb * sizeof(*y));
	qsort(x, na, sizeof(*x), sb_xc_cmp);
	qsort(y, nb, sizeof(*y), sb_xc_cmp);
	bool same = !memcmp(x, y, na * sizeof(*x));
	free(x);
	free(y);
	return same;
}

int tl_set_faults(struct sb_device *d, const char *spec, struct sb_error *err)
{
	char xml[256];
	int rc = -EINVAL;

	*err = (struct sb_error){0};
	if (snprintf(xml, sizeof(xml),
		     "<set-faults xmlns=\"urn:ocsd:yang:ocs-devsim\"><spec>%s</spec></set-faults>",
		     spec) >= (int)sizeof(xml))
		return rc;
	for (int attempt = 0; attempt < 5; attempt++) {
		rc = sb_device_connect_until(d, sb_now_ms() + 3000, err);
		if (rc == 0)
			rc = sb_device_rpc_xml(d, xml, err);
		if (rc == 0)
			return 0;
	}
	return rc;
}
