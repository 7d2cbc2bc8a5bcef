"""test_ring_drift.py - drift on the transceivers of an OCSTrx ring domain
(issue 28 #3), with the REAL ocsd reconciling every second, its agents
served by ONE ocs-devsim (--model ocs-transceiver), and bundles changed
behind ocsd's back over NETCONF by ncclient (a client nobody here wrote).

Checks:
  - a node of a live ring has its bundle 1 moved to another peer, and a
    node in no ring has its bundle 1 put on an external path: Watch
    carries a DriftEvent for each (the first names the ring's job, the
    second none);
  - the live ring's node is programmed back at once (read back with
    ncclient: it reaches its ring neighbour again; the log says so),
    while the node in no ring keeps the change (never touched);
  - ListDrift (and `ocsctl drift`) lists the node in no ring with what
    it holds, what its ring state says and "report (no ring)", and no
    longer lists the repaired node; a device filter narrows the list to
    one node; an unknown device is NOT_FOUND;
  - ocsd_drift_bundles{node="idle"} is 1 and {node="in_ring"} 0;
  - the operator puts the idle node back on loopback: the next pass lists
    nothing and the gauge reads 0;
  - every node then holds what ListRings says;
  - two nodes of the ring changed while ocsd is down are programmed back
    by the pass at start, in one transaction of the job.

usage: test_ring_drift.py BUILD_DIR SOURCE_DIR
"""
import atexit
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ocsd_fleet  # noqa: E402

BUILD, SRC = sys.argv[1:3]
FLEET = ocsd_fleet.RingFleet(BUILD, SRC, tors=8, nodes_per_tor=4, prefix="ocsd-ring-drift-")
atexit.register(FLEET.remove)
ocsd_fleet.gen_stubs(os.path.join(SRC, "proto"), os.path.join(FLEET.work, "gen"))
import grpc  # noqa: E402
from ocs.v1 import events_pb2, events_pb2_grpc  # noqa: E402
from ocs.v1 import fabric_pb2, fabric_pb2_grpc  # noqa: E402
from ocs.v1 import jobs_pb2, jobs_pb2_grpc  # noqa: E402

TIMEOUT_S = 30
FAILURES = []
OCSCTL = os.path.join(BUILD, "northbound", "ocsctl", "ocsctl")


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILURES.append(what)
    return cond


def position(node):
    """Deployment position of a node (fabric.h: index * tors + tor)."""
    tors, per_tor = FLEET.geometry[0], FLEET.geometry[1]
    return (node % per_tor) * tors + node // per_tor


def node_at(pos):
    tors, per_tor = FLEET.geometry[0], FLEET.geometry[1]
    return (pos % tors) * per_tor + pos // tors


set_bundle = FLEET.set_bundle
expected_bundles = ocsd_fleet.ring_bundles


def peer_of(node, bundle):
    _, bundles = FLEET.read_node(node)
    return bundles.get(bundle, ("loopback", 0, None, None))[3]


def wait_for(pred, timeout=TIMEOUT_S):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.2)
    return None


def gauge(where):
    m = re.search(r'^ocsd_drift_bundles\{node="%s"\} (\S+)$' % where, FLEET.metrics(), re.M)
    return float(m.group(1)) if m else None


def main():
    FLEET.start_devices()
    FLEET.start_ocsd(reconcile_s=1)
    ch = grpc.insecure_channel(FLEET.target)
    jobs = jobs_pb2_grpc.JobsStub(ch)
    fabric = fabric_pb2_grpc.FabricStub(ch)
    w = ocsd_fleet.Watcher(events_pb2_grpc.EventsStub(ch).Watch(
        events_pb2.WatchRequest(drift=True)), TIMEOUT_S)

    sub = jobs.SubmitJob(jobs_pb2.JobSpec(id="j1", ring=jobs_pb2.RingRequest(tp=16, rings=1)),
                         timeout=TIMEOUT_S)
    check(sub.job.state == jobs_pb2.JOB_STATE_ACTIVE, "SubmitJob j1: ACTIVE")
    ring = fabric.ListRings(fabric_pb2.ListRingsRequest(job_id="j1"), timeout=TIMEOUT_S).rings[0]
    want = expected_bundles([ring])
    live = ring.nodes[1]  # bundle 1 reaches ring.nodes[2], 1..K positions above
    gap = position(ring.nodes[2]) - position(live)
    held = {n for n in ring.nodes}
    idle = next(n for n in range(FLEET.N_DEV)
                if n not in held and position(n) + 1 < FLEET.N_DEV and
                node_at(position(n) + 1) not in held)
    print(f"ring {list(ring.nodes)}; live node {live} (bundle 1 at distance {gap}), "
          f"idle node {idle}", flush=True)

    # ---- behind ocsd's back: a live ring's node reaches elsewhere, an idle node goes external
    other = 1 if gap != 1 else 2
    set_bundle(live, 1, other, "up")
    set_bundle(idle, 1, 1, "up")

    ev_live = w.wait(lambda e: e.HasField("drift") and e.drift.HasField("bundle") and
                     e.drift.bundle.node == live)
    check(ev_live is not None and ev_live.drift.bundle.job_id == "j1" and
          ev_live.drift.bundle.bundle == 1 and
          ev_live.drift.bundle.found == f"external {other} up" and
          ev_live.drift.bundle.expected == f"external {gap} up",
          f"DriftEvent for live node {live}: job j1, found/expected settings "
          f"({ev_live.drift.bundle if ev_live else None})")
    ev_idle = w.wait(lambda e: e.HasField("drift") and e.drift.HasField("bundle") and
                     e.drift.bundle.node == idle)
    check(ev_idle is not None and ev_idle.drift.bundle.job_id == "" and
          ev_idle.drift.bundle.expected == "loopback" and
          ev_idle.drift.bundle.found == "external 1 up" and
          ev_idle.drift.bundle.found_peer == node_at(position(idle) + 1) and
          ev_idle.drift.device == FLEET.device_name(idle),
          f"DriftEvent for idle node {idle}: no job, loopback expected, external found")

    # ---- the live ring's node is programmed back; the idle node is never touched
    back = wait_for(lambda: peer_of(live, 1) == want[live][1])
    check(back, f"node {live} programmed back: bundle 1 reaches node {want[live][1]} again")
    check(f"job j1: node(s) {live} programmed back to their ring's settings" in FLEET.log(),
          "the log says the node was programmed back")

    def listed():
        r = fabric.ListDrift(fabric_pb2.ListDriftRequest(), timeout=TIMEOUT_S)
        return r if [b.node for b in r.bundles] == [idle] else None
    r = wait_for(listed)
    check(r is not None, f"ListDrift: only the idle node {idle} listed once {live} is back "
          f"({fabric.ListDrift(fabric_pb2.ListDriftRequest(), timeout=TIMEOUT_S)})")
    if r is not None:
        b = r.bundles[0]
        check(b.bundle == 1 and b.expected == "loopback" and b.found == "external 1 up" and
              b.job_id == "" and b.device == FLEET.device_name(idle) and
              not r.cross_connects,
              "ListDrift: the idle node's bundle, found and expected settings, no job")
    one = fabric.ListDrift(fabric_pb2.ListDriftRequest(device=FLEET.device_name(live)),
                           timeout=TIMEOUT_S)
    check(not one.bundles, f"ListDrift --device {FLEET.device_name(live)}: nothing")
    one = fabric.ListDrift(fabric_pb2.ListDriftRequest(device=FLEET.device_name(idle)),
                           timeout=TIMEOUT_S)
    check([b.node for b in one.bundles] == [idle],
          f"ListDrift --device {FLEET.device_name(idle)}: that node only")
    try:
        fabric.ListDrift(fabric_pb2.ListDriftRequest(device="no-such"), timeout=TIMEOUT_S)
        code = None
    except grpc.RpcError as e:
        code = e.code()
    check(code == grpc.StatusCode.NOT_FOUND, f"ListDrift of an unknown device: {code}")
    out = subprocess.run([OCSCTL, "--insecure", "--server", FLEET.target, "drift"],
                         capture_output=True, text=True, timeout=TIMEOUT_S).stdout
    rows = [ln.split() for ln in out.splitlines()[1:] if ln.strip()]
    check(len(rows) == 1 and rows[0][:2] == [str(idle), "1"] and "report" in rows[0] and
          "loopback" in rows[0], f"ocsctl drift: one row for node {idle}: {out!r}")
    check(peer_of(idle, 1) == node_at(position(idle) + 1),
          f"idle node {idle} still holds the operator's change (never touched)")
    check(wait_for(lambda: gauge("idle") == 1 and gauge("in_ring") == 0),
          f'ocsd_drift_bundles idle 1, in_ring 0 ({gauge("idle")}, {gauge("in_ring")})')

    # ---- the operator puts it back: nothing left to report
    set_bundle(idle, 1, 0, None)
    check(wait_for(lambda: not fabric.ListDrift(fabric_pb2.ListDriftRequest(),
                                                timeout=TIMEOUT_S).bundles and
                   gauge("idle") == 0), "idle node back on loopback: ListDrift empty, gauge 0")
    bad = []
    want = expected_bundles(fabric.ListRings(fabric_pb2.ListRingsRequest(),
                                             timeout=TIMEOUT_S).rings)
    for node in range(FLEET.N_DEV):
        for b in (0, 1):
            if peer_of(node, b) != want.get(node, {0: None, 1: None})[b]:
                bad.append((node, b))
    check(not bad, f"every node holds what ListRings says {bad}")
    w.close()

    # ---- two nodes of the ring changed while ocsd is down: the pass at start
    # programs both back in one transaction of the job
    FLEET.kill_ocsd()
    a, b = ring.nodes[1], ring.nodes[2]
    gap_b = position(b) - position(a)
    set_bundle(a, 1, 1 if gap != 1 else 2, "up")
    set_bundle(b, 0, 1 if gap_b != 1 else 2, "down")
    FLEET.start_ocsd(reconcile_s=1)
    line = f"job j1: node(s) {min(a, b)}, {max(a, b)} programmed back to their ring's settings"
    check(wait_for(lambda: line in FLEET.log()),
          f"after a restart: nodes {a} and {b} programmed back in one transaction")
    bad = [(n, k) for n in ring.nodes for k in (0, 1)
           if peer_of(n, k) != want.get(n, {0: None, 1: None})[k]]
    check(not bad, f"after a restart: every node of the ring holds what ListRings says {bad}")
    FLEET.close()


if __name__ == "__main__":
    try:
        main()
    except Exception:
        FLEET.dump_logs()
        FLEET.close()
        raise
    if FAILURES:
        FLEET.dump_logs()
        print(f"{len(FAILURES)} check(s) failed")
        sys.exit(1)
    print("all checks passed")
