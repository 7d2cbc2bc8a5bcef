#!/usr/bin/python3
"""test_replica_resume.py - a leader paused (SIGSTOP) for longer than its
lease's TTL while the other replica takes the lead, then resumed (SIGCONT):
the REAL ocsd, two replicas (ocsd_replicas.Replicas, lease TTL 1 s) on a
one-member etcd and the lab fleet (switching time 2 s, so that the leader
is paused with a transaction between commit and confirm).

From the SIGCONT on (a GetFabric and a health Check of ocs.v1.Jobs sent to
the paused one first, so that they are the first things it answers),
GetFabric is asked of both replicas every 50 ms for 5 s (on channels
connected before the pause): the resumed one must never say role "leader"
nor name itself the leader, and its first health answer is not SERVING
(the other said it leads before the SIGCONT and keeps leading), since its
last lease renewal is older than the TTL from its first instant awake. Its log after the SIGCONT says "leadership lost"
once, and no line claims that it "serves no writes until it is restarted"
(its transaction's fenced decision ends the leader phase; it follows by
itself). 5 s on, it follows: role follower, leader the other (on a loaded
machine the sampling goes on until it does, 20 s at most, every sample
checked as above). Then (issue 27)
a job submitted on the leader shows on the follower's status page (/state.json)
with the leader's circuits, role follower, the leader named, devices "unknown".

usage: test_replica_resume.py BUILD_DIR SOURCE_DIR
"""
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ocsd_fleet  # noqa: E402
import ocsd_replicas  # noqa: E402
from status_helpers import state  # noqa: E402

BUILD, SRC = sys.argv[1], sys.argv[2]
POLL_S = 0.05
WATCH_S = 5.0
FOLLOW_S = 20.0  # the resumed one follows within this (5 s when the machine is not loaded)
SWITCH_US = 2000000

fleet = ocsd_fleet.Fleet(BUILD, SRC, confirm_timeout_s=10, prefix="ocsd-resume-")
with open(fleet.cfg) as f:
    fabric = json.load(f)
fabric["ocsd-fabric:fabric"]["devices"]["switch-time-us"] = SWITCH_US
with open(fleet.cfg, "w") as f:
    json.dump(fabric, f)
script = ocsd_fleet.Script("test_replica_resume", fleet)
check = script.check
ocsd_fleet.gen_stubs(os.path.join(SRC, "proto"), os.path.join(fleet.work, "gen"))
import grpc  # noqa: E402
from ocs.v1 import fabric_pb2, fabric_pb2_grpc, jobs_pb2, jobs_pb2_grpc  # noqa: E402
from grpc.health.v1 import health_pb2, health_pb2_grpc  # noqa: E402

cluster = ocsd_replicas.EtcdCluster(fleet.work, members=1)


def channel(reps, k):
    return grpc.insecure_channel(reps.reps[k].advertise, options=ocsd_replicas.RECONNECT)


def role(stub):
    """(role, leader_id) that GetFabric answers, or the error's code name."""
    try:
        f = stub.GetFabric(fabric_pb2.GetFabricRequest(), timeout=1)
        return f.role, f.leader_id
    except grpc.RpcError as e:
        return e.code().name


def main():
    cluster.start()
    fleet.start_devices()
    reps = ocsd_replicas.Replicas(fleet, cluster, n=2)
    try:
        run(reps)
    finally:
        reps.close()
        cluster.stop()


def run(reps):
    reps.start_all()
    i = reps.wait_leader(30)
    j = 1 - i
    old, new = reps.reps[i], reps.reps[j]
    chans = {k: channel(reps, k) for k in (i, j)}
    stubs = {k: fabric_pb2_grpc.FabricStub(chans[k]) for k in (i, j)}
    check(role(stubs[i]) == ("leader", old.id), f"{old.id} GetFabric: {role(stubs[i])}")
    # a submission on the leader: committed on the devices, then 2 s of
    # switching time before its read-back and decision
    gpus = [jobs_pb2.GpuPlacement(gpu=8 * leaf + k, leaf=leaf, pod=leaf // 2)
            for leaf in (0, 2) for k in range(2)]
    spec = jobs_pb2.JobSpec(id="p1", placement=jobs_pb2.Placement(gpus=gpus),
                            leaf_demand=jobs_pb2.LeafDemand(
                                pairs=[jobs_pb2.LeafPair(a=0, b=2, links=1)]))
    t = threading.Thread(target=lambda: _submit(jobs_pb2_grpc.JobsStub(chans[i]), spec),
                         daemon=True)
    t.start()
    deadline = time.time() + 30
    while time.time() < deadline and "job submitted" not in old.log():
        time.sleep(0.02)
    time.sleep(0.6)  # committed on the devices (tens of ms), waiting for the read-back
    reps.pause(i)
    paused = time.time()
    deadline = paused + 30
    while time.time() < deadline and reps.health(j, "ocs.v1.Jobs") != "SERVING":
        time.sleep(0.05)
    check(reps.health(j, "ocs.v1.Jobs") == "SERVING", f"{new.id} did not take the lead")
    check(role(stubs[j]) == ("leader", new.id), f"{new.id} GetFabric: {role(stubs[j])}")
    time.sleep(max(0.0, paused + SWITCH_US / 1e6 + 0.5 - time.time()))  # switching time over
    log_at = len(old.log())
    # a GetFabric already waiting when it wakes up: the first thing it answers
    early = stubs[i].GetFabric.future(fabric_pb2.GetFabricRequest(), timeout=3)
    early_health = health_pb2_grpc.HealthStub(chans[i]).Check.future(
        health_pb2.HealthCheckRequest(service="ocs.v1.Jobs"), timeout=3)
    time.sleep(0.2)
    reps.resume(i)
    resumed = time.time()
    samples = []  # (seconds after SIGCONT, replica id, (role, leader) or an error's code)
    try:
        f = early.result()
        samples.append((0.0, old.id, (f.role, f.leader_id)))
    except grpc.RpcError as e:
        samples.append((0.0, old.id, e.code().name))
    try:
        h = health_pb2.HealthCheckResponse.ServingStatus.Name(early_health.result().status)
    except grpc.RpcError as e:
        h = e.code().name
    check(h != "SERVING", f"{old.id}'s health of ocs.v1.Jobs at SIGCONT: {h}")
    def follows():
        last = [ans for _, rid, ans in samples if rid == old.id][-1]
        return last == ("follower", new.id)

    # WATCH_S of samples; then, on a loaded machine where ending the leader
    # phase takes longer, more until it follows (FOLLOW_S at most): every
    # sample counts for the checks below
    while time.time() - resumed < WATCH_S or (
            time.time() - resumed < FOLLOW_S and not follows()):
        t0 = time.time()
        for k in (i, j):
            samples.append((time.time() - resumed, reps.reps[k].id, role(stubs[k])))
        time.sleep(max(0.0, POLL_S - (time.time() - t0)))
    answers = [(round(ts, 3), ans) for ts, rid, ans in samples
               if rid == old.id and isinstance(ans, tuple)]
    said = [(ts, ans) for ts, ans in answers if ans[0] == "leader"]
    check(not said, f"{old.id} said role=leader after SIGCONT while {new.id} led: {said[:5]}")
    itself = [(ts, ans) for ts, ans in answers if ans[1] == old.id]
    check(not itself, f"{old.id} named itself the leader after SIGCONT: {itself[:5]}")
    check(all(ans == ("leader", new.id) for _, rid, ans in samples if rid == new.id),
          f"{new.id} did not lead throughout: "
          f"{[(round(ts, 3), a) for ts, r, a in samples if r == new.id][:5]}")
    last = [ans for _, rid, ans in samples if rid == old.id][-1]
    check(last == ("follower", new.id),
          f"{old.id} {time.time() - resumed:.1f} s after SIGCONT: {last}")
    print(f"resume: {len(samples)} samples; {old.id}'s first answers: "
          f"{[(round(ts, 3), a) for ts, r, a in samples if r == old.id][:4]}", flush=True)
    after = old.log()[log_at:]
    lost = after.count("leadership lost")
    check(lost == 1, f"{old.id} logged 'leadership lost' {lost} times after SIGCONT")
    check("until it is restarted" not in after,
          f"{old.id} claims it needs a restart: "
          f"{[ln for ln in after.splitlines() if 'until it is restarted' in ln][:2]}")
    check(old.running(), f"{old.id} exited")
    if script.failures:  # the replicas' logs are not in the fleet's dump
        print(f"--- {old.id}'s log\n{old.log()[-8000:]}", flush=True)
    t.join(10)
    follower_page(reps, i, j, jobs_pb2_grpc.JobsStub(chans[j]))
    for c in chans.values():
        c.close()


def follower_page(reps, i, j, leader_jobs):
    """Issue 27: the follower's status page draws its store copy: a job
    submitted on the leader shows there with the leader's circuits, the
    role and leader named, every device's session "unknown" (a follower
    reads no device)."""
    gpus = [jobs_pb2.GpuPlacement(gpu=8 * leaf + 4, leaf=leaf, pod=leaf // 2) for leaf in (1, 3)]
    spec = jobs_pb2.JobSpec(id="p2", placement=jobs_pb2.Placement(gpus=gpus),
                            leaf_demand=jobs_pb2.LeafDemand(
                                pairs=[jobs_pb2.LeafPair(a=1, b=3, links=1)]))
    r = leader_jobs.SubmitJob(spec, timeout=30)
    check(r.job.state == jobs_pb2.JOB_STATE_ACTIVE, f"p2 on the leader: {r.job.reason}")
    ports = {k: reps.reps[k].metrics_port() for k in (i, j)}
    lead = {x["id"]: x for x in state(ports[j])["jobs"]}.get("p2")
    check(lead is not None and lead["circuits"], f"the leader's page has no circuits of p2: {lead}")
    deadline, seen = time.time() + 10, None
    while time.time() < deadline:
        page = state(ports[i])
        seen = {x["id"]: x for x in page["jobs"]}.get("p2")
        if seen is not None and lead is not None and seen["circuits"] == lead["circuits"]:
            break
        time.sleep(0.1)
    check(seen is not None and lead is not None and seen["circuits"] == lead["circuits"],
          f"the follower's page: p2 {seen}, the leader's {lead}")
    check(page["role"] == "follower" and reps.reps[j].id in page["leader"],
          f"the follower's page: role {page['role']!r}, leader {page['leader']!r}")
    check(page["devices"] and all(d["session"] == "unknown" for d in page["devices"]),
          f"the follower's devices: {[d['session'] for d in page['devices']][:4]}")


def _submit(stub, spec):
    try:
        stub.SubmitJob(spec, timeout=20)
    except grpc.RpcError:
        pass  # deposed mid-way: indeterminate, and not what this test checks


sys.exit(script.run(main))
