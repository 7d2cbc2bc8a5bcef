#!/usr/bin/python3
"""test_paused_leader.py - a leader paused (SIGSTOP) with a commit pending on
the devices and resumed (SIGCONT) after a new leader took over must leave
the store and the devices agreeing (hardening H3, H4; docs/replicas.md,
"A paused leader").

Two replicas (rb, then ra) on a one-member etcd and the lab fleet, every
process real. One case per run (argument CASE):

decided (H3): the devices of group 0 answer their first confirm after
  HANG_S and then drop the session (ocs-devsim hang@confirm,drop@confirm:
  the session's unconfirmed commit reverts, as when rb resumes and closes
  its sessions); a job is submitted through the leader; once etcd's log
  holds its decision (an entry naming intent_decisions) the leader is
  paused, and resumed PAUSE_S later. The new leader must not take the
  commit still pending under the paused leader's sessions for done: it
  fences the devices (kill-session of the lock holder), programs and
  confirms the target under its own sessions, so the job stays ACTIVE
  with its cross-connects on the devices after the hang ended.

undecided (H4): a switching time of SWITCH_S between the devices' commit
  and the read-back that precedes the decision; a job `pre` (leaves 4, 6)
  first, then the job (leaves 0, 2), which lands on the same two devices;
  its commit is seen there, and the leader is paused, before its
  decision. The new leader rolls the intent back: with the fence the
  devices are back at the pre-image at once, so neither its
  reconciliation (every RECONCILE_S) nor its release of `pre` right after
  the resume takes the paused leader's commit for unowned drift (without
  the fence that release wrote the cross-connects back for good, owned by
  no job).

unfenced: as undecided, but one of the two devices refuses the new
  leader's lock (ocs-devsim refuse@lock, set once the commit is seen), so
  that device cannot be fenced. The new leader must then kill no session
  on either device (recovery.c, recov_fence: the paused leader's commit
  spans the pair, and a kill on one device only would leave one direction
  of its circuits standing): it logs so, and both devices still hold the
  paused leader's commit while it stays paused; once resumed, that leader
  rolls its commit back on both.

All end with the same checks: every device read over NETCONF holds
exactly the circuits ListCircuits reports (the live jobs'), ListDrift is
empty, a job the client was told ACTIVE has its cross-connects on the
devices, and a new job on the same GPUs (decided: after the release) is
accepted and ACTIVE.

usage: test_paused_leader.py BUILD_DIR SOURCE_DIR decided|undecided|unfenced
"""
import base64
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ocsd_fleet  # noqa: E402
import ocsd_replicas  # noqa: E402

BUILD, SRC, CASE = sys.argv[1], sys.argv[2], sys.argv[3]
assert CASE in ("decided", "undecided", "unfenced"), CASE
HANG_S = 8         # decided: the confirm of the hung devices, then their session drops
PAUSE_S = 7        # how long the leader stays paused
SWITCH_S = 4       # undecided: between commit and read-back (the decision comes after)
RECONCILE_S = 4    # the replicas' reconciliation interval
CONFIRM_TIMEOUT_S = 60  # longer than the test: nothing reverts by its timeout here
HUNG = range(0, 4)  # decided: group 0's devices (the job's) hang their first confirm

fleet = ocsd_fleet.Fleet(BUILD, SRC, confirm_timeout_s=CONFIRM_TIMEOUT_S,
                         prefix=f"ocsd-paused-{CASE}-")
script = ocsd_fleet.Script(f"test_paused_leader {CASE}", fleet)
check = script.check
ocsd_fleet.gen_stubs(os.path.join(SRC, "proto"), os.path.join(fleet.work, "gen"))
from ocs.v1 import fabric_pb2, jobs_pb2  # noqa: E402

ACTIVE = jobs_pb2.JOB_STATE_ACTIVE
NAME = jobs_pb2.JobState.Name
cluster = ocsd_replicas.EtcdCluster(fleet.work, members=1)
reps = None


def spec(job_id, leaves=(0, 2)):
    """GPUs 0 and 1 of two leaves in two pods, 2 links: a circuit on the
    first two devices of a group (ports: the leaves), group 0 when free."""
    gpus = [jobs_pb2.GpuPlacement(gpu=8 * leaf + k, leaf=leaf, pod=leaf // 2)
            for leaf in leaves for k in range(2)]
    return jobs_pb2.JobSpec(
        id=job_id, placement=jobs_pb2.Placement(gpus=gpus),
        leaf_demand=jobs_pb2.LeafDemand(
            pairs=[jobs_pb2.LeafPair(a=leaves[0], b=leaves[1], links=2)]))


def decisions_in_etcd():
    """How many entries of etcd's log record a decision (a changeset of
    intent_decisions; one per transaction here)."""
    r = cluster.ctl("get", reps.prefix + "log/", "--prefix", "-w", "json")
    if r.returncode != 0:
        return -1
    kvs = json.loads(r.stdout).get("kvs") or []
    return sum(b"intent_decisions" in base64.b64decode(kv.get("value", "")) for kv in kvs)


def on_leader(c, call):
    """call(c) answered by the serving leader itself (a follower's copy may lag)."""
    c.hint = reps.wait_leader(60)
    return call(c)


def drift(k):
    from ocs.v1 import fabric_pb2_grpc
    import grpc
    with grpc.insecure_channel(reps.reps[k].advertise) as ch:
        r = fabric_pb2_grpc.FabricStub(ch).ListDrift(fabric_pb2.ListDriftRequest(), timeout=10)
    return sorted((x.device, x.in_port, x.out_port, x.missing) for x in r.cross_connects)


def check_agree(c, told_active, what):
    """The devices hold exactly ListCircuits' cross-connects, ListDrift is
    empty, and every job in told_active is ACTIVE with them on the devices."""
    k = reps.wait_leader(60)
    outcome, circuits, detail = on_leader(c, lambda c: c.list_circuits(deadline_s=30))
    check(outcome == "ok", f"{what}: ListCircuits: {detail}")
    if outcome != "ok":
        return
    state = {(x.device, x.in_port, x.out_port) for circ in circuits for x in circ.cross_connects}
    devices = fleet.read_devices()
    held = {(name, i, o) for name, rows in devices.items() for (i, o, _) in rows}
    check(held == state, f"{what}: devices vs ListCircuits: only on the devices "
          f"{sorted(held - state)}, only in the state {sorted(state - held)}")
    d = drift(k)
    check(d == [], f"{what}: ListDrift on the leader {reps.reps[k].id}: {d}")
    for jid in told_active:
        outcome, ans, detail = on_leader(c, lambda c: c.get_job(jid, deadline_s=30))
        j = ans.job if outcome == "ok" else None
        check(j is not None and j.state == ACTIVE,
              f"{what}: {jid}, told ACTIVE, is {NAME(j.state) if j else detail}")
        mine = {(x.device, x.in_port, x.out_port) for circ in circuits if circ.job_id == jid
                for x in circ.cross_connects}
        check(mine and mine <= held, f"{what}: {jid}'s cross-connects on the devices: "
              f"{len(mine & held)} of {len(mine)}")


def wait_for(pred, timeout_s, step_s=0.05):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(step_s)
    return False


def main():
    global reps
    cluster.start()
    extra = ["--reconcile-interval-s", str(RECONCILE_S)]
    if CASE != "decided":
        with open(fleet.cfg) as f:
            fabric = json.load(f)
        fabric["ocsd-fabric:fabric"]["devices"]["switch-time-us"] = SWITCH_S * 1000000
        fleet.cfg = os.path.join(fleet.work, "fabric-slow.json")
        with open(fleet.cfg, "w") as f:
            json.dump(fabric, f)
    fleet.start_devices(5 if CASE == "decided" else SWITCH_S * 1000)
    if CASE == "decided":
        for d in HUNG:
            fleet.set_faults(d, f"hang@confirm={HANG_S * 1000},drop@confirm")
    reps = ocsd_replicas.Replicas(fleet, cluster, n=2, extra=extra)
    reps.start(1)  # rb leads
    check(reps.wait_leader(60) == 1, "rb leads first")
    reps.start(0)
    # ra's device sessions are up before the devices hang: it takes over at once
    check(wait_for(lambda: "16 of 16 devices' sessions ready" in reps.reps[0].log(), 60, 0.1),
          "ra's follower sessions ready")
    c = reps.client(60)
    before = {}  # undecided, unfenced: device -> what it held before the paused job
    if CASE != "decided":
        # a job whose circuits share the paused job's devices: its release
        # later is a transaction of ra's on them
        outcome, ans, detail = c.submit(spec("pre", (4, 6)), deadline_s=60)
        check(outcome == "ok" and ans.job.state == ACTIVE, f"job pre: {outcome} {detail}")
        outcome, circuits, _ = on_leader(c, lambda c: c.list_circuits(deadline_s=30))
        pre_devs = sorted({x.device for circ in circuits for x in circ.cross_connects})
        print(f"undecided: pre is on {pre_devs}", flush=True)
        # the paused job lands on pre's devices: group 0's first pair, other ports
        watched = [d for d in range(fleet.N_DEV) if fleet.device_name(d) in pre_devs]
        before = {d: set(fleet.read_device(d)) for d in watched}
    decided = decisions_in_etcd()
    out = {}

    def submit():
        out["r"] = c.submit(spec("paused"), deadline_s=60)

    th = threading.Thread(target=submit, daemon=True)
    th.start()
    if CASE == "decided":
        # paused between its decision and its confirms (which hang HANG_S)
        check(wait_for(lambda: decisions_in_etcd() > decided, 30, 0.02),
              "the decision reached etcd")
    else:
        # paused between its commit (seen on a device) and its decision
        check(wait_for(lambda: any(set(fleet.read_device(d)) - before[d] for d in before),
                       30, 0.01), "the commit reached pre's devices")
        check(decisions_in_etcd() == decided, "paused before the decision")
    if CASE == "unfenced":
        unlockable = max(before)
        fleet.set_faults(unlockable, "refuse@lock")
    reps.pause(1)
    paused_at = time.time()
    new = None
    while new is None and time.time() < paused_at + 30:
        found = reps.serving_leader()
        new = found[0] if found == [0] else None
        time.sleep(0.05)
    check(new == 0, "ra leads while rb is paused")
    took_over = time.time() - paused_at
    print(f"{CASE}: ra serves {took_over:.2f} s after the pause", flush=True)
    if CASE == "decided":
        check(took_over < HANG_S - 1, "ra took over while rb's confirms still hung "
              "(its commit pending on the devices): else nothing was tested")
    if CASE == "unfenced":
        check(wait_for(lambda: "no session killed on its devices, since "
                       f"{fleet.device_name(unlockable)} refuses its lock" in reps.reps[0].log(),
                       10, 0.1), "ra logged that it kills no session")
        check("kill-session" not in reps.reps[0].log(), "ra killed no session")
        # the paused leader's commit on both devices alike, never on one only
        while time.time() < paused_at + PAUSE_S:
            shown = {d: bool(set(fleet.read_device(d)) - before[d]) for d in before}
            check(all(shown.values()), f"rb's commit on every device while it is paused: {shown}")
            if not all(shown.values()):
                break
    # undecided: one reconciliation pass of ra's at least while rb is paused
    time.sleep(max(0.0, paused_at + PAUSE_S - time.time()))
    reps.resume(1)
    th.join(90)
    outcome, ans, detail = out.get("r", ("info", None, "no answer"))
    told_active = ["paused"] if outcome == "ok" and ans.job.state == ACTIVE else []
    print(f"{CASE}: the submission: {outcome} {detail} "
          f"{NAME(ans.job.state) if outcome == 'ok' else ''}", flush=True)
    # rb, resumed, steps down: one leader again
    check(wait_for(lambda: reps.serving_leader() == [0], 30, 0.1), "ra alone leads")
    if CASE == "decided":
        # the paused leader's hung confirms end (their sessions drop)
        time.sleep(max(0.0, paused_at + HANG_S + 1 - time.time()))
        check("(decided): confirmed" in reps.reps[0].log(), "ra finished the decided intent")
        outcome, ans, _ = on_leader(c, lambda c: c.get_job("paused", deadline_s=30))
        if outcome == "ok" and ans.job.state == ACTIVE and "paused" not in told_active:
            told_active.append("paused")  # ra says ACTIVE: a client asking is told so
        check_agree(c, told_active, "after the resume")
        outcome, _, detail = on_leader(c, lambda c: c.release("paused", deadline_s=60))
        check(outcome == "ok", f"release of paused: {detail}")
    else:
        if CASE == "unfenced":
            # rb, resumed, rolls its commit back on both devices
            check(wait_for(lambda: all(set(fleet.read_device(d)) == before[d] for d in before),
                           30, 0.1), "rb's commit rolled back on both devices after the resume")
        # at once, before ra's next reconciliation pass: a transaction of
        # ra's on the same devices, which keeps what ra's drift table says
        # no job owns there
        outcome, _, detail = on_leader(c, lambda c: c.release("pre", deadline_s=60))
        check(outcome == "ok", f"release of pre: {detail}")
        # the paused leader's job, accepted in the store: ra may run it too
        outcome, ans, _ = on_leader(c, lambda c: c.get_job("paused", deadline_s=30))
        if outcome == "ok" and ans.job.state == ACTIVE:
            told_active += [] if "paused" in told_active else ["paused"]
            check_agree(c, told_active, "after the resume")
            outcome, _, detail = on_leader(c, lambda c: c.release("paused", deadline_s=60))
            check(outcome == "ok", f"release of paused: {detail}")
    outcome, ans, detail = on_leader(c, lambda c: c.submit(spec("again"), deadline_s=60))
    check(outcome == "ok" and ans.job.state == ACTIVE,
          f"a new job on the same GPUs: {outcome} {detail} "
          f"{NAME(ans.job.state) + ' ' + ans.job.reason if outcome == 'ok' else ''}")
    told_active += ["again"] if outcome == "ok" and ans.job.state == ACTIVE else []
    told_active = [j for j in told_active if j != "paused"]  # released (or never ACTIVE)
    check_agree(c, told_active, "after a new job")
    # one reconciliation pass later: still nothing unowned, nothing missing
    time.sleep(RECONCILE_S + 1)
    check_agree(c, told_active, "a reconciliation pass later")
    c.close()


def run():
    try:
        main()
    finally:
        if reps is not None:
            if script.failures:
                for r in reps.reps:
                    print(f"--- {r.id} log (tail)")
                    print("\n".join(r.log().splitlines()[-40:]))
            reps.close()
        cluster.stop()


sys.exit(script.run(run))
