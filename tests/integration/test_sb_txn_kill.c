/*
 * test_sb_txn_kill.c - kill -9 of the process running a transaction
 * between commit and confirm: a child process runs a transaction over 4
 * ocs-devsim devices and, when the engine reaches verify (every device
 * committed with confirmed-commit, none confirmed), signals the parent and
 * waits. The parent checks that every device holds the new cross-connects,
 * kills the child with SIGKILL and then reads the devices until every one
 * is back at its pre-image: this must happen within the confirmed-commit
 * timeout (it happens as soon as the dead sessions close).
 * A second round freezes the child with SIGSTOP instead (a controller that
 * hangs with its sessions open): the devices must revert when the timeout
 * expires, not before.
 */
#include "sb_testlib.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define N		  4
#define CONFIRM_TIMEOUT_S 3

static const struct ocs_fabric lab = {
	.pods = 4, .k_leaf = 8, .k_spine = 8, .tau = 2, .k_ocs = 16, .wiring = OCS_WIRING_STRAIGHT};

static int signal_fd = -1;

/* verify callback of the child: at read-back, tell the parent and wait to die */
static int stall_at_readback(void *arg, enum sb_verify_phase phase,
			     const struct sb_device_xcs *devs, size_t n, char *why, size_t why_len)
{
	if (phase == SB_VERIFY_READBACK) {
		if (write(signal_fd, "C", 1) != 1)
			_exit(3);
		for (;;)
			pause();
	}
	return tl_verify(arg, phase, devs, n, why, why_len);
}

static void build(struct sb_device **devs, struct sb_txn_device *pd, struct sb_xc (*xcs)[16],
		  int *group, int *device, int round)
{
	for (int i = 0; i < N; i++) {
		group[i] = 0;
		device[i] = i;
		pd[i] = (struct sb_txn_device){
			.dev = devs[i],
			.target = xcs[i],
			.n_target = tl_fabric_device_xcs(&lab, 0, i, round, xcs[i], 16)};
	}
}

static int child_main(struct tl_fleet *fleet, int fd)
{
	signal_fd = fd;
	struct sb_driver *drv;
	struct sb_engine *eng;
	if (sb_driver_new(NULL, &drv) || sb_engine_new(4, &eng))
		return 2;
	struct sb_device **devs = tl_devices(drv, fleet, 0, N, 2000);
	struct sb_txn_device pd[N];
	struct sb_xc xcs[N][16];
	int group[N], device[N];
	build(devs, pd, xcs, group, device, 1);
	struct tl_verify_ctx v = {.fabric = &lab, .group = group, .device = device};
	struct sb_txn_hooks hooks = {.verify = stall_at_readback, .arg = &v};
	struct sb_txn_plan plan = {.id = 2, .devices = pd, .n_devices = N};
	struct sb_txn_options opts = {.confirm_timeout_s = CONFIRM_TIMEOUT_S};
	struct sb_txn_result r;
	sb_engine_run(eng, &plan, &hooks, &opts, &r);
	return 4; /* never reached: the parent kills us in verify */
}

/* One round: the child commits and stalls; `sig` ends it; the devices revert. */
static int run_round(struct tl_fleet *fleet_p, int sig)
{
	struct tl_fleet fleet = *fleet_p;
	int fds[2];
	if (pipe(fds))
		return 1;
	pid_t pid = fork();
	if (pid == 0) {
		close(fds[0]);
		_exit(child_main(&fleet, fds[1]));
	}
	close(fds[1]);
	int rc = 0;
	struct sb_driver *drv;
	if (sb_driver_new(NULL, &drv))
		return 1;
	struct sb_device **devs = tl_devices(drv, &fleet, 0, N, 2000);
	struct sb_txn_device want[N];
	struct sb_xc xcs[N][16];
	int group[N], device[N];
	build(devs, want, xcs, group, device, 1);
	char c = 0;
	int status = 0;
	if (read(fds[0], &c, 1) != 1 || c != 'C') {
		fprintf(stderr, "child did not reach verify\n");
		rc = 1;
		goto out;
	}
	/* between commit and confirm: every device holds the new circuits */
	for (int i = 0; i < N && !rc; i++) {
		struct sb_xc *got;
		size_t n;
		if (tl_read_running(devs[i], &got, &n) ||
		    !tl_same(got, n, want[i].target, want[i].n_target)) {
			fprintf(stderr, "device %d does not hold the committed circuits\n", i);
			rc = 1;
		}
		free(got);
	}
	kill(pid, sig);
	int64_t t_kill = sb_now_ms();
	if (sig == SIGKILL) {
		waitpid(pid, &status, 0);
		if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL)
			rc = 1;
	}
	/* every device reverts by itself, within the confirmed-commit timeout */
	bool reverted = false;
	int64_t took = 0;
	while (!rc && !reverted &&
	       (took = sb_now_ms() - t_kill) < CONFIRM_TIMEOUT_S * 1000 + 1000) {
		reverted = true;
		for (int i = 0; i < N; i++) {
			struct sb_xc *got = NULL;
			size_t n = 0;
			if (tl_read_running(devs[i], &got, &n) || n != 0)
				reverted = false;
			free(got);
		}
		if (!reverted)
			usleep(50000);
	}
	printf("devices reverted %s %lld ms after %s (confirm timeout %d s)\n",
	       reverted ? "in" : "NOT within", (long long)took,
	       sig == SIGKILL ? "kill -9" : "SIGSTOP", CONFIRM_TIMEOUT_S);
	if (!reverted || took > CONFIRM_TIMEOUT_S * 1000 + 100)
		rc = 1;
	/* a frozen controller keeps its sessions: only the timer can revert */
	if (sig == SIGSTOP && took < (CONFIRM_TIMEOUT_S - 1) * 1000)
		rc = 1;
out:
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	close(fds[0]);
	tl_devices_free(devs, N);
	sb_driver_free(drv);
	return rc;
}

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	struct tl_fleet fleet;
	if (tl_fleet_start(&fleet, N, NULL))
		return 1;
	int rc = run_round(&fleet, SIGKILL) || run_round(&fleet, SIGSTOP);
	if (tl_fleet_stop(&fleet))
		rc = 1;
	return rc;
}
