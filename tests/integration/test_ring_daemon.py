"""test_ring_daemon.py - the REAL ocsd on an OCSTrx ring domain of 64 nodes
(16 ToRs x 4 nodes, 4 GPUs per node, K = 3, 2 bundles), every node's
transceiver agent served by ONE ocs-devsim (--model ocs-transceiver
--count 64), driven through the real gRPC API by python3-grpcio; every node
read back over NETCONF with ncclient (a client nobody here wrote) and
checked against ListRings with the physical model of solvers/hbd_ring.h
(node i of a ring reaches node i-1 through bundle 0 and node i+1 through
bundle 1; the ends and every node in no ring are on loopback).

Checks, in order:
  - ListDevices: every node's agent connected and healthy once subscribed;
    GetFabric's device counters agree with it (devices, connected, drained);
  - PlanJob touches no node; SubmitJob places TP-16 rings (ACTIVE, rings
    and ring figures in the answer); every node holds what ListRings says;
  - a node of the ring next to free nodes fails through the devsim knob
    (node-fault, via the ocs-devsim:set-faults RPC): a NodeEvent (source
    device) and a RingEvent BYPASS_EXTENDED with reaction_us >= devices_us
    > 0 arrive on Watch; the ring skips the node and takes in one free
    node: it stays at 4 nodes (a ring never shrinks, issue 28), its other
    nodes in their order, `ocsctl rings` says bypass_extended, and every
    node holds what ListRings says;
  - MarkNode healthy: the node is free again (GetFabric, NodeEvent) and
    back on loopback;
  - a node healed and another failed at once: the repair's transaction
    (TransactionEvent of the job) carries the healed node's reset to
    loopback (a reset waits 0.5 s for a job's transaction);
  - ReleaseJob: every node back to loopback;
  - kill -9 ocsd while the repair of a second job's ring waits in the
    confirm of a neighbour (hang@confirm): after the restart the node is
    still faulty, the ring is bypass-extended (4 nodes), and every node
    holds what the store says (ListRings);
  - kill -9 ocsd while the repair's fault and intent are not durable yet
    (this test holds the store's SQLite write lock; the nodes are already
    edited, unconfirmed): after the restart no intent was left open, the
    fault is read again from the node and repaired, and every node holds
    what the store says;
  - the repair's intent cannot be stored (the lock held past ocsd's busy
    timeout): every node is rolled back and ocsd refuses writes
    (UNAVAILABLE); once the lock is gone the repair's retry (every second)
    applies and every node holds what ListRings says.

usage: test_ring_daemon.py BUILD_DIR SOURCE_DIR
"""
import atexit
import os
import sqlite3
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ocsd_fleet  # noqa: E402

BUILD, SRC = sys.argv[1:3]
FLEET = ocsd_fleet.RingFleet(BUILD, SRC, prefix="ocsd-ring-test-")
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


class Client:
    def __init__(self):
        ch = grpc.insecure_channel(FLEET.target)
        self.jobs = jobs_pb2_grpc.JobsStub(ch)
        self.fabric = fabric_pb2_grpc.FabricStub(ch)
        self.events = events_pb2_grpc.EventsStub(ch)

    def rings(self, job_id=""):
        return self.fabric.ListRings(fabric_pb2.ListRingsRequest(job_id=job_id),
                                     timeout=TIMEOUT_S).rings




def ring_job(job_id, tp=16, rings=3):
    return jobs_pb2.JobSpec(id=job_id, ring=jobs_pb2.RingRequest(tp=tp, rings=rings))


expected_bundles = ocsd_fleet.ring_bundles


def check_nodes(client, what, skip=()):
    """Reads every node with ncclient and compares it with ListRings."""
    want = expected_bundles(client.rings())
    bad = []
    for node in range(FLEET.N_DEV):
        if node in skip:
            continue
        faulty, bundles = FLEET.read_node(node)
        exp = want.get(node, {0: None, 1: None})
        for b in (0, 1):
            path, _, _, peer = bundles.get(b, ("loopback", 0, None, None))
            if exp[b] is None and path != "loopback":
                bad.append(f"node {node} bundle {b}: {path} to {peer}, want loopback")
            elif exp[b] is not None and (path != "external" or peer != exp[b]):
                bad.append(f"node {node} bundle {b}: {path} to {peer}, want {exp[b]}")
    check(not bad, f"{what}: every node holds what ListRings says" +
          (": " + "; ".join(bad[:6]) if bad else ""))


def middle_node(ring):
    return ring.nodes[len(ring.nodes) // 2]


def position(node):
    """Deployment position of a node (fabric.h: index * tors + tor)."""
    tors, per_tor = FLEET.geometry[0], FLEET.geometry[1]
    return (node % per_tor) * tors + node // per_tor


def top_ring(rings):
    """The ring reaching highest on the line: free nodes lie just above it."""
    return max(rings, key=lambda r: max(position(n) for n in r.nodes))


def extended(old, new, victim, others):
    """new is old without victim plus one node in no other ring, 4 nodes, order kept."""
    added = [n for n in new if n not in old]
    return (len(new) == len(old) and victim not in new and len(added) == 1 and
            added[0] not in others and
            [n for n in new if n in old] == [n for n in old if n != victim])


def ring_by_index(rings, index):
    return next(r for r in rings if r.index == index)


def main():
    FLEET.start_devices()
    FLEET.start_ocsd()
    c = Client()
    w = ocsd_fleet.Watcher(c.events.Watch(events_pb2.WatchRequest(rings=True)), TIMEOUT_S)

    # ---- every node's agent is read once its subscription is up (ListDevices)
    deadline = time.time() + TIMEOUT_S
    devs = []
    while time.time() < deadline:
        devs = c.fabric.ListDevices(fabric_pb2.ListDevicesRequest(), timeout=TIMEOUT_S).devices
        if all(d.health == fabric_pb2.DEVICE_HEALTH_HEALTHY for d in devs):
            break
        time.sleep(0.2)
    check(len(devs) == FLEET.N_DEV and
          all(d.health == fabric_pb2.DEVICE_HEALTH_HEALTHY and
              d.session == fabric_pb2.SESSION_STATE_CONNECTED for d in devs),
          "ListDevices: every node's agent CONNECTED and HEALTHY")
    bad = ocsd_fleet.fabric_counter_problems(c.fabric, fabric_pb2, TIMEOUT_S)
    check(not bad, f"GetFabric's device counters agree with ListDevices {bad}")

    # ---- plan and submit
    plan = c.jobs.PlanJob(ring_job("plan-only"), timeout=TIMEOUT_S)
    check(len(plan.rings) == 3 and all(len(r.nodes) == 4 for r in plan.rings),
          "PlanJob: 3 rings of 4 nodes")
    check(plan.figures.ring.gpus_placed == 48, "PlanJob: 48 GPUs placed")
    check(not c.rings(), "PlanJob: no ring in place")
    check_nodes(c, "after PlanJob")
    sub = c.jobs.SubmitJob(ring_job("j1"), timeout=TIMEOUT_S)
    check(sub.job.state == jobs_pb2.JOB_STATE_ACTIVE, "SubmitJob j1: ACTIVE")
    check(len(sub.job.rings) == 3, "SubmitJob j1: 3 rings in the answer")
    check(sub.job.figures.ring.rings == 3, "SubmitJob j1: ring figures")
    check_nodes(c, "j1 placed")

    # ---- a node fails through the device knob: bypass-extend
    ring0 = top_ring(c.rings("j1"))
    others = {n for r in c.rings() if r.index != ring0.index for n in r.nodes}
    victim = middle_node(ring0)
    FLEET.set_faults(victim, "node-fault")
    node_ev = w.wait(lambda e: e.HasField("node") and e.node.node == victim)
    check(node_ev is not None and node_ev.node.source == "device" and
          node_ev.node.condition == fabric_pb2.NODE_CONDITION_FAULTY,
          f"node {victim} fault: NodeEvent from the device")
    ring_ev = w.wait(lambda e: e.HasField("ring") and e.ring.ring.job_id == "j1")
    check(ring_ev is not None and
          ring_ev.ring.ring.last_change == fabric_pb2.RING_CHANGE_BYPASS_EXTENDED,
          "RingEvent: BYPASS_EXTENDED")
    if ring_ev is not None:
        re = ring_ev.ring
        check(extended(list(ring0.nodes), list(re.ring.nodes), victim, others) and
              list(re.old_nodes) == list(ring0.nodes),
              f"RingEvent: {list(re.old_nodes)} -> {list(re.ring.nodes)} skips node {victim}, "
              "takes in one free node, still 4 nodes")
        check(re.reaction_us >= re.devices_us > 0,
              f"RingEvent: reaction_us {re.reaction_us} >= devices_us {re.devices_us} > 0")
    now = ring_by_index(c.rings("j1"), ring0.index)
    check(extended(list(ring0.nodes), list(now.nodes), victim, others) and
          now.failed_node == victim and
          now.last_change == fabric_pb2.RING_CHANGE_BYPASS_EXTENDED,
          f"ListRings: ring {ring0.index} bypass-extended to {list(now.nodes)}")
    check(c.fabric.GetFabric(fabric_pb2.GetFabricRequest(), timeout=TIMEOUT_S).nodes_faulty == 1,
          "GetFabric: one faulty node")
    check_nodes(c, "after the bypass-extend", skip=(victim,))
    job = c.jobs.GetJob(jobs_pb2.GetJobRequest(id="j1"), timeout=TIMEOUT_S).job
    check(any(r.last_change == fabric_pb2.RING_CHANGE_BYPASS_EXTENDED for r in job.rings) and
          all(len(r.nodes) == 4 for r in job.rings),
          "GetJob: Job.rings shows the bypass-extend, every ring of 4 nodes")
    out = subprocess.run([OCSCTL, "--insecure", "--server", FLEET.target, "rings", "--job", "j1"],
                         capture_output=True, text=True, timeout=TIMEOUT_S).stdout
    row = next((ln.split() for ln in out.splitlines()
                if ln.split()[:2] == ["j1", str(ring0.index)]), [])
    check(row[3:5] == ["bypass_extended", str(victim)],
          f"ocsctl rings: ring {ring0.index} CHANGE bypass_extended, FAILED {victim}: {row}")

    # ---- heal
    FLEET.set_faults(victim, "")
    c.fabric.MarkNode(fabric_pb2.MarkNodeRequest(node=victim,
                                                 condition=fabric_pb2.NODE_CONDITION_HEALTHY),
                      timeout=TIMEOUT_S)
    healed = w.wait(lambda e: e.HasField("node") and e.node.node == victim and
                    e.node.condition == fabric_pb2.NODE_CONDITION_HEALTHY)
    check(healed is not None and healed.node.source == "operator", "MarkNode healthy: NodeEvent")
    check(c.fabric.GetFabric(fabric_pb2.GetFabricRequest(), timeout=TIMEOUT_S).nodes_faulty == 0,
          "GetFabric: no faulty node after the heal")
    # the reset to loopback waits 0.5 s for a job's transaction to carry it, then runs alone
    deadline = time.time() + 5
    while time.time() < deadline and any(
            v[0] != "loopback" for v in FLEET.read_node(victim)[1].values()):
        time.sleep(0.1)
    check_nodes(c, "after the heal")

    # ---- a fault's repair carries a healed node's reset to loopback (it waits
    # 0.5 s for a job's transaction): no transaction of its own to wait behind
    tw = ocsd_fleet.Watcher(c.events.Watch(events_pb2.WatchRequest(transactions=True)),
                            TIMEOUT_S)
    rest = [r for r in c.rings("j1") if r.index != ring0.index]
    v2, v3 = middle_node(rest[0]), middle_node(rest[1])
    FLEET.set_faults(v2, "node-fault")
    check(w.wait(lambda e: e.HasField("ring") and e.ring.ring.failed_node == v2) is not None,
          f"node {v2} fault: its ring repaired")
    FLEET.set_faults(v2, "")
    from ncclient.xml_ import to_ele
    with FLEET._session(v3) as m:  # open first: the fault follows the heal at once
        c.fabric.MarkNode(fabric_pb2.MarkNodeRequest(
            node=v2, condition=fabric_pb2.NODE_CONDITION_HEALTHY), timeout=TIMEOUT_S)
        m.dispatch(to_ele(f'<set-faults xmlns="{ocsd_fleet.DEVSIM_NS}"><spec>node-fault'
                          "</spec></set-faults>"))
    repair = w.wait(lambda e: e.HasField("ring") and e.ring.ring.failed_node == v3)
    check(repair is not None, f"node {v3} fault right after node {v2}'s heal: ring repaired")
    name = FLEET.device_name(v2)
    tx = tw.wait(lambda e: e.HasField("transaction") and name in e.transaction.devices)
    check(tx is not None and tx.transaction.job_id == "j1" and
          tx.transaction.outcome == events_pb2.TRANSACTION_OUTCOME_COMMITTED,
          f"the repair's transaction (job j1) carried node {v2}'s reset "
          f"({tx.transaction if tx else None})")
    tw.close()
    check(all(v[0] == "loopback" for v in FLEET.read_node(v2)[1].values()),
          f"node {v2} back on loopback")
    check_nodes(c, "after the repair that carried a reset", skip=(v3,))
    FLEET.set_faults(v3, "")
    c.fabric.MarkNode(fabric_pb2.MarkNodeRequest(node=v3,
                                                 condition=fabric_pb2.NODE_CONDITION_HEALTHY),
                      timeout=TIMEOUT_S)

    # ---- release (its transaction carries node v3's reset)
    rel = c.jobs.ReleaseJob(jobs_pb2.ReleaseJobRequest(id="j1"), timeout=TIMEOUT_S)
    check(rel.job.state == jobs_pb2.JOB_STATE_RELEASED, "ReleaseJob j1: RELEASED")
    check(not c.rings("j1"), "ListRings: j1 has no ring")
    check_nodes(c, "after the release (every node on loopback)")

    # ---- kill -9 between the fault and the confirm
    c.jobs.SubmitJob(ring_job("j2", rings=2), timeout=TIMEOUT_S)
    ring0 = top_ring(c.rings("j2"))
    victim = middle_node(ring0)
    k = list(ring0.nodes).index(victim)
    FLEET.set_faults(ring0.nodes[k - 1], "hang@confirm=4000")
    FLEET.set_faults(victim, "node-fault")
    deadline = time.time() + TIMEOUT_S
    while time.time() < deadline and f"job j2: ring {ring0.index} lost node" not in FLEET.log():
        time.sleep(0.02)
    time.sleep(0.5)  # the repair's transaction is waiting in the neighbour's confirm
    w.close()
    FLEET.kill_ocsd()
    FLEET.start_ocsd()
    c = Client()
    deadline = time.time() + TIMEOUT_S
    now = None
    while time.time() < deadline:
        now = ring_by_index(c.rings("j2"), ring0.index)
        if now.last_change == fabric_pb2.RING_CHANGE_BYPASS_EXTENDED:
            break
        time.sleep(0.1)
    check(now is not None and now.last_change == fabric_pb2.RING_CHANGE_BYPASS_EXTENDED and
          victim not in now.nodes and len(now.nodes) == 4,
          f"after the restart: ring {ring0.index} of j2 skips node {victim}, 4 nodes")
    check(c.fabric.GetFabric(fabric_pb2.GetFabricRequest(), timeout=TIMEOUT_S).nodes_faulty == 1,
          "after the restart: the node is still faulty (stored)")
    check_nodes(c, "after kill -9 and restart", skip=(victim,))
    check("left open" in FLEET.log(), "recovery resolved the repair left open")
    FLEET.set_faults(victim, "")

    # ---- kill -9 while the repair's intent is not durable yet (txn_driver.c stores
    # it while the devices prepare; the confirm waits for the commit). This
    # test holds the store's SQLite write lock, so ocsd's commit of the fault
    # and the intent waits (busy timeout 5 s) while the nodes are edited.
    first_victim = victim
    c.jobs.SubmitJob(ring_job("j3", rings=1), timeout=TIMEOUT_S)
    ring = c.rings("j3")[0]
    want = expected_bundles(c.rings())
    victim = middle_node(ring)
    others = [n for n in ring.nodes if n != victim]
    open_before = FLEET.log().count("left open")
    db = sqlite3.connect(os.path.join(FLEET.state_dir, "ocsd.db"), isolation_level=None,
                         timeout=10)
    db.execute("BEGIN IMMEDIATE")
    FLEET.set_faults(victim, "node-fault")
    touched = None
    deadline = time.time() + 3
    while time.time() < deadline and touched is None:
        for n in others:
            _, bundles = FLEET.read_node(n)
            if any(bundles.get(b, ("loopback", 0, None, None))[3] != want[n][b]
                   for b in (0, 1)):
                touched = n
                break
    window = "job j3: ring 0 lost node" not in FLEET.log()
    FLEET.kill_ocsd()
    db.execute("ROLLBACK")
    db.close()
    check(touched is not None, "a node of j3's ring was edited while the store was locked")
    check(window, "killed before the fault and the intent were stored")
    FLEET.start_ocsd()
    c = Client()
    deadline = time.time() + TIMEOUT_S
    now = None
    while time.time() < deadline:
        now = c.rings("j3")[0]
        if victim not in now.nodes:
            break
        time.sleep(0.1)
    check(now is not None and victim not in now.nodes and len(now.nodes) == 4 and
          now.last_change in (fabric_pb2.RING_CHANGE_BYPASS_EXTENDED,
                              fabric_pb2.RING_CHANGE_REPLACED),
          f"after the restart: the fault of node {victim} was read again and repaired "
          "(4 nodes)")
    check(c.fabric.GetFabric(fabric_pb2.GetFabricRequest(), timeout=TIMEOUT_S).nodes_faulty == 2,
          "after the restart: both faulty nodes known")
    check(FLEET.log().count("left open") == open_before,
          "no intent was left open (none was stored before the kill)")
    check_nodes(c, "after kill -9 before the intent was durable", skip=(first_victim, victim))
    FLEET.set_faults(victim, "")

    # ---- the intent cannot be stored (the write lock is held past ocsd's 5 s
    # busy timeout): the confirm is never sent, every node is rolled back,
    # and ocsd stops serving writes
    skip = (first_victim, victim)
    c.jobs.SubmitJob(ring_job("j4", rings=1), timeout=TIMEOUT_S)
    ring = c.rings("j4")[0]
    victim = middle_node(ring)
    db = sqlite3.connect(os.path.join(FLEET.state_dir, "ocsd.db"), isolation_level=None,
                         timeout=10)
    db.execute("BEGIN IMMEDIATE")
    FLEET.set_faults(victim, "node-fault")
    deadline = time.time() + TIMEOUT_S
    while time.time() < deadline and "job j4: the ring repair was not applied" not in FLEET.log():
        time.sleep(0.1)
    log = FLEET.log()
    line = next((ln for ln in log.splitlines() if "job j4: the ring repair was not applied" in ln),
                "")
    check("cannot store the transaction intent" in log and "rolled back" in line,
          "intent not stored: the repair was rolled back on every node")
    try:
        c.jobs.SubmitJob(ring_job("j5", rings=1), timeout=TIMEOUT_S)
        code = None
    except grpc.RpcError as e:
        code = e.code()
    check(code == grpc.StatusCode.UNAVAILABLE, f"intent not stored: writes refused ({code})")
    db.execute("ROLLBACK")
    db.close()
    # the repair is tried again every second; once the store takes writes it applies
    deadline = time.time() + TIMEOUT_S
    while time.time() < deadline and victim in c.rings("j4")[0].nodes:
        time.sleep(0.1)
    now = c.rings("j4")[0]
    check(victim not in now.nodes and len(now.nodes) == 4,
          "store writable again: the repair's retry applied (4 nodes)")
    check_nodes(c, "after the retried repair", skip=skip + (victim,))
    FLEET.set_faults(victim, "")
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
