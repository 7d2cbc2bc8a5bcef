#!/usr/bin/python3
"""test_daemon_stuck_setup.py - a device that never finishes its NETCONF
session setup, under the real ocsd on the lab fleet (16 ocs-devsim devices).

Device 5 answers the <get-schema> that libnetconf2 sends while it connects
only after 8 s, every time (fault hang@schema=8000+: netconfd 2.13 leaves
such an RPC unanswered for good, southbound/README.md). With
rpc-timeout-ms 1000 the session setup's deadline is 4 s (sb_guard.h), so:
  1. the warm start connects the 15 other devices (before the deadline
     existed, the stuck setup held the driver's only connect mutex for
     libnetconf2's 300 s and the warm start connected at most one);
  2. ListDevices shows those 15 CONNECTED and device 5 not connected, its
     session error naming the deadline ("no NETCONF session within 4000
     ms"), and ocsd logged "device ocs-g1-d1 unreachable: ..." once, not at
     every reconciliation pass;
  3. once the device answers again (set-faults ""), all 16 are connected
     and ocsd logged "device ocs-g1-d1 reachable again" once;
  4. ocsd stops on SIGTERM within 10 s, exit code 0 (before, the stop
     waited for the stuck connect).

usage: test_daemon_stuck_setup.py BUILD_DIR SOURCE_DIR
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ocsd_fleet  # noqa: E402

BUILD, SRC = sys.argv[1], sys.argv[2]
STUCK = 5

fleet = ocsd_fleet.Fleet(BUILD, SRC, prefix="ocsd-stuck-setup-", rpc_timeout_ms=1000)
script = ocsd_fleet.Script("daemon_stuck_setup", fleet)
check = script.check


def devices():
    r = fleet.ocsctl("--json", "devices")
    if r.returncode != 0:
        return {}
    return {d["name"]: d for d in json.loads(r.stdout).get("devices", [])}


def main():
    # 16 workers: every attempt's hang holds one for 8 s, and ocsd tries
    # again after its backoff
    fleet.start_devices(1, "--fault", f"{STUCK}/hang@schema=8000+", "--workers", "16")
    fleet.start_ocsd("--warm-start-ms", "3000", reconcile_s=1)
    stuck = fleet.device_name(STUCK)
    warm = [line for line in fleet.log().splitlines() if "warm start:" in line]
    check(warm and "warm start: 15 of 16 devices connected" in warm[-1],
          f"warm start: {warm}")

    deadline = time.time() + 30
    while True:
        devs = devices()
        others = [d for n, d in devs.items() if n != stuck]
        up = sum(d.get("session") == "SESSION_STATE_CONNECTED" for d in others)
        err = devs.get(stuck, {}).get("session_error", "")
        if (len(devs) == 16 and up == 15 and "no NETCONF session within 4000 ms" in err) or \
                time.time() > deadline:
            break
        time.sleep(0.5)
    check(len(devs) == 16 and up == 15, f"{up} of the 15 other devices connected: {devs}")
    others_up = up
    check(devs.get(stuck, {}).get("session") != "SESSION_STATE_CONNECTED",
          f"{stuck} connected: {devs.get(stuck)}")
    check("no NETCONF session within 4000 ms" in err,
          f"{stuck}'s session error does not name the setup's deadline: {err!r}")
    # the journal says it once, not at every reconciliation pass
    said = [line for line in fleet.log().splitlines() if " unreachable: " in line]
    check(len(said) == 1 and f"device {stuck} unreachable: " in said[0] and
          "no NETCONF session within 4000 ms" in said[0],
          f"ocsd's log about unreachable devices: {said}")

    # the device answers again: it connects at a later pass, and the
    # journal says so once
    fleet.set_faults(STUCK, "")
    deadline = time.time() + 40
    while True:
        devs = devices()
        up = sum(d.get("session") == "SESSION_STATE_CONNECTED" for d in devs.values())
        if up == 16 or time.time() > deadline:
            break
        time.sleep(0.5)
    check(up == 16, f"{up} of 16 devices connected once {stuck} answers: {devs.get(stuck)}")
    again = [line for line in fleet.log().splitlines() if "reachable again" in line]
    check(len(again) == 1 and f"device {stuck} reachable again" in again[0],
          f"ocsd's log about devices reachable again: {again}")

    t0 = time.time()
    code = fleet.stop_ocsd(timeout_s=30)
    took = time.time() - t0
    check(code == 0 and took < 10, f"SIGTERM: exit code {code} after {took:.1f} s")
    print(f"stuck setup: {others_up} of 15 devices connected, {stuck}: {err}; then {up} of 16; "
          f"stopped in {took:.1f} s", flush=True)


sys.exit(script.run(main))
