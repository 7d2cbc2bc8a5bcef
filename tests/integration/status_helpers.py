"""status_helpers.py - shared by test_status_page.py and test_status_browser.py
(the status page, issue 27): reading /state.json, timing when a change
first shows in each of several places (after the devices are killed, after
a ring node fails), and a ring domain's job submitted on a RingFleet.
Not a test itself."""
import json
import os
import signal
import time
import urllib.request

RING_JOB = "r1"


def state(port):
    """/state.json of the metrics listener on port, parsed."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/state.json", timeout=10) as r:
        return json.loads(r.read())


def any_device_down(port):
    return any(d["session"] == "disconnected" or d["health"] == "unreachable"
               for d in state(port)["devices"])


def time_probes(what, probes, check, later, earlier, within_s, limit_s):
    """Polls probes ({name: callable}) from now until each has returned true
    once or limit_s passed; checks that every probe fired and that probe
    `later` fired at most within_s after `earlier` (what: the change, for
    the messages). Returns {name: seconds from now}."""
    start, seen = time.monotonic(), {}
    while time.monotonic() - start < limit_s and len(seen) < len(probes):
        now = time.monotonic() - start
        for name, probe in probes.items():
            if name not in seen and probe():
                seen[name] = now
        time.sleep(0.05)
    print(f"{what}; shown after (s): {seen}", flush=True)
    check(len(seen) == len(probes), f"{what}: not all shown within {limit_s} s: {seen}")
    if len(seen) == len(probes):
        check(seen[later] - seen[earlier] <= within_s,
              f"{what}: {later} showed it {seen[later] - seen[earlier]:.2f} s after "
              f"{earlier}, want <= {within_s}")
    return seen


def kill_devices_and_time(fleet, probes, check, later, earlier, within_s, limit_s=15):
    """Kills ocs-devsim (SIGKILL), then time_probes(); returns {name: seconds
    after the kill}."""
    fleet.devsim_proc.send_signal(signal.SIGKILL)
    fleet.devsim_proc.wait()
    return time_probes("devices killed", probes, check, later, earlier, within_s, limit_s)


def start_ring_job(fleet, check, reconcile_s=0):
    """On a RingFleet: the devices and ocsd started (reconciling every
    reconcile_s seconds; 0: never), RING_JOB submitted with `ocsctl job
    submit` (TP-16, 3 rings of 4 nodes), listed with its 48 GPUs; returns
    its rings as /state.json lists them ([] when the submit or the listing is wrong, after a check)."""
    spec = os.path.join(fleet.work, "ring-job.json")
    with open(spec, "w") as f:
        json.dump({"id": RING_JOB, "ring": {"tp": 16, "rings": 3}}, f)
    fleet.start_devices()
    fleet.start_ocsd(reconcile_s=reconcile_s)
    r = fleet.ocsctl("job", "submit", spec)
    check(r.returncode == 0, f"ring job submit: {r.stdout} {r.stderr}")
    s = state(fleet.metrics_port)
    check([j["state"] for j in s["jobs"] if j["id"] == RING_JOB] == ["ACTIVE"],
          f"/state.json jobs: {s['jobs']}")
    # a ring job has no placement: its GPUs are its 3 rings' (TP-16 each)
    check([j["gpus"] for j in s["jobs"] if j["id"] == RING_JOB] == [48],
          f"/state.json: {RING_JOB}'s GPUs, 3 rings of 16: {s['jobs']}")
    check(s["fabric"]["kind"] == "ocstrx-ring" and s["fabric"]["nodes"] == fleet.N_DEV,
          f"fabric {s['fabric']}")
    rings = [r for r in s["rings"] if r["job"] == RING_JOB]
    ok = len(rings) == 3 and all(len(r["nodes"]) == 4 for r in rings)
    check(ok, f"/state.json rings of {RING_JOB}: {rings}")
    return rings if ok else []


def ring_to_fail(fleet, rings):
    """(ring, node): the middle node of the ring reaching highest on the line,
    just below free nodes, so that ocsd bypasses it and extends the ring
    with a free node (bypass-extended) rather than replacing the ring."""
    ring = max(rings, key=lambda r: max(fleet.position(n) for n in r["nodes"]))
    return ring, ring["nodes"][len(ring["nodes"]) // 2]


def ring_bypassed(s, index, victim):
    """RING_JOB's ring `index` in /state.json s once node victim is faulty and
    the ring goes around it (failed_node names it); else None."""
    return next((r for r in s["rings"] if r["job"] == RING_JOB and r["index"] == index and
                 r["failed_node"] == victim and victim not in r["nodes"] and
                 victim in s["faulty_nodes"]), None)
