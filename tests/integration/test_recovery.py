#!/usr/bin/python3
"""test_recovery.py - crash recovery of the real ocsd (issue 5): `kill -9`
at random points during a stream of job submissions and releases, then
restart and check against the devices themselves.

Fabric: the lab fabric (16 ocs-devsim devices, real NETCONF servers) with
confirm-timeout-s 2, so a device reverts quickly when ocsd dies between
commit and confirm. Four client threads (python3-grpcio) each own a pair of
leaves in different pods ((0,2), (1,3), (4,6), (5,7): two live jobs never
share a leaf) and loop: submit a one-pair job (1..4 links, random planner),
hold it a moment, release it. After a random number of submissions (1..8,
plus a random 0..40 ms so that the kill lands inside planning, a device
transaction or a store write) ocsd gets SIGKILL and is restarted; after one
restart in four it is killed again within 0.5 s, while it recovers. After
every restart, once no job is PENDING/PLANNING/PROGRAMMING/RELEASING:
  - every job whose SubmitJob was answered OK is present: ACTIVE, or
    RELEASED if its ReleaseJob was answered (either, if the release was in
    flight at the kill);
  - every job whose submission was in flight is absent, ACTIVE or FAILED,
    and the same SubmitJob retried (as a scheduler would) ends ACTIVE,
    created only if the job was absent;
  - every ACTIVE job has as many circuits as links it asked for;
  - every device, read with ncclient, holds exactly the cross-connects that
    `ocsctl circuits` reports, all "connected", and none is one-way.
At the end every job is released and every device must be empty.

SUBMISSIONS defaults to 40 (a default run of about 2 minutes on 2 cores);
the issue's 200 is the opt-in ctest `recovery_200` (label bench).

usage: test_recovery.py BUILD_DIR SOURCE_DIR [SUBMISSIONS] [SEED]
"""
import collections
import json
import os
import random
import re
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ocsd_fleet  # noqa: E402

BUILD, SRC = sys.argv[1], sys.argv[2]
SUBMISSIONS = int(sys.argv[3]) if len(sys.argv) > 3 else 40
SEED = int(sys.argv[4]) if len(sys.argv) > 4 else random.randrange(1 << 30)
OCSCTL = os.path.join(BUILD, "northbound", "ocsctl", "ocsctl")
SLOTS = [(0, 2), (1, 3), (4, 6), (5, 7)]  # leaf pairs, each across two pods
RPC_TIMEOUT_S = 60
CONVERGE_S = 90
CONFIRM_TIMEOUT_S = 2

rng = random.Random(SEED)
print(f"recovery: {SUBMISSIONS} submissions, seed {SEED}", flush=True)
passed = failed = 0
check_lock = threading.Lock()


def check(cond, what):
    global passed, failed
    with check_lock:
        if cond:
            passed += 1
        else:
            failed += 1
            print("FAIL:", what, flush=True)


fleet = ocsd_fleet.Fleet(BUILD, SRC, confirm_timeout_s=CONFIRM_TIMEOUT_S,
                         prefix="ocsd-recovery-")
ocsd_fleet.gen_stubs(os.path.join(SRC, "proto"), os.path.join(fleet.work, "gen"))
import grpc  # noqa: E402
from ocs.v1 import jobs_pb2, jobs_pb2_grpc  # noqa: E402

ACTIVE, RELEASED, FAILED = (jobs_pb2.JOB_STATE_ACTIVE, jobs_pb2.JOB_STATE_RELEASED,
                            jobs_pb2.JOB_STATE_FAILED)
SETTLED = (ACTIVE, RELEASED, FAILED)
NAME = jobs_pb2.JobState.Name


class Ledger:
    """What the clients were told, under one lock."""

    def __init__(self):
        self.lock = threading.Lock()
        self.submitted = 0          # SubmitJob calls started
        self.acked = {}             # id -> links: SubmitJob answered OK (ACTIVE)
        self.acked_failed = set()   # SubmitJob answered OK with state FAILED
        self.released = set()       # ReleaseJob answered OK
        self.release_inflight = set()
        self.submit_inflight = set()
        self.links = {}             # id -> links asked for
        self.specs = {}             # id -> the JobSpec sent


ledger = Ledger()


def spec(job_id, a, b, links):
    gpus = [jobs_pb2.GpuPlacement(gpu=8 * leaf + k, leaf=leaf, pod=leaf // 2)
            for leaf in (a, b) for k in range(2)]
    return jobs_pb2.JobSpec(
        id=job_id, idempotency_key="key-" + job_id,
        placement=jobs_pb2.Placement(gpus=gpus),
        leaf_demand=jobs_pb2.LeafDemand(pairs=[jobs_pb2.LeafPair(a=a, b=b, links=links)]),
        options=jobs_pb2.JobOptions(planner=rng.choice(("leaf-centric", "pod-centric"))))


class Slot:
    """One client thread owning a leaf pair; `holding` is a job of this
    slot that is (or may be) ACTIVE and must be released before the next."""

    def __init__(self, index, leaves):
        self.index, self.leaves = index, leaves
        self.holding = None
        self.thread = None

    def run(self, stub, stop):
        try:
            self.loop(stub, stop)
        except grpc.RpcError:
            pass  # ocsd was killed under this call; the ledger says which one

    def loop(self, stub, stop):
        while not stop.is_set():
            if self.holding:
                job_id = self.holding
                with ledger.lock:
                    ledger.release_inflight.add(job_id)
                r = stub.ReleaseJob(jobs_pb2.ReleaseJobRequest(id=job_id), timeout=RPC_TIMEOUT_S)
                with ledger.lock:
                    ledger.release_inflight.discard(job_id)
                    if r.job.state == RELEASED:
                        ledger.released.add(job_id)
                check(r.job.state == RELEASED,
                      f"release {job_id}: {NAME(r.job.state)} {r.job.reason}")
                self.holding = None
                continue
            with ledger.lock:
                if ledger.submitted >= SUBMISSIONS:
                    return
                n = ledger.submitted
                ledger.submitted += 1
                job_id = f"r{n:04d}-s{self.index}"
                links = rng.randint(1, 4)
                ledger.links[job_id] = links
                ledger.submit_inflight.add(job_id)
                ledger.specs[job_id] = spec(job_id, *self.leaves, links)
            self.holding = job_id  # it may be ACTIVE even if the answer is lost
            r = stub.SubmitJob(ledger.specs[job_id], timeout=RPC_TIMEOUT_S)
            with ledger.lock:
                ledger.submit_inflight.discard(job_id)
                if r.job.state == ACTIVE:
                    ledger.acked[job_id] = links
                else:
                    ledger.acked_failed.add(job_id)
            check(r.job.state == ACTIVE and len(r.job.circuits) == links,
                  f"submit {job_id}: {NAME(r.job.state)} {len(r.job.circuits)} circuits "
                  f"{r.job.reason}")
            if r.job.state != ACTIVE:
                self.holding = None
            time.sleep(rng.uniform(0, 0.03))


def wait_ready(stub):
    for _ in range(300):
        try:
            return stub.ListJobs(jobs_pb2.ListJobsRequest(), timeout=2)
        except grpc.RpcError:
            time.sleep(0.1)
    raise RuntimeError("ocsd does not answer ListJobs")


def converge(stub):
    """{id: Job} once every job is settled (bounded wait)."""
    deadline = time.time() + CONVERGE_S
    while True:
        jobs = {j.spec.id: j for j in stub.ListJobs(jobs_pb2.ListJobsRequest(),
                                                      timeout=RPC_TIMEOUT_S).jobs}
        if all(j.state in SETTLED for j in jobs.values()):
            return jobs
        if time.time() > deadline:
            check(False, "jobs did not settle: " + ", ".join(
                f"{i}={NAME(j.state)}" for i, j in jobs.items() if j.state not in SETTLED))
            return jobs
        time.sleep(0.1)


def wait_sessions():
    """Until a reconciliation read every device back (sessions are up), so
    that the kills land in job work rather than in the first SSH handshakes
    (a kill there can leave ocs-devsim's accept threads stalled; reported)."""
    deadline = time.time() + CONVERGE_S
    while time.time() < deadline:
        text = fleet.metrics()
        done = re.search(r"^ocsd_reconcile_duration_seconds_count (\d+)$", text, re.M)
        down = re.search(r"^ocsd_devices_unreachable (\S+)$", text, re.M)
        if done and int(done.group(1)) >= 1 and down and float(down.group(1)) == 0:
            return
        time.sleep(0.1)
    check(False, "devices still unreachable after a restart:\n" + "\n".join(
        x for x in fleet.metrics().splitlines() if "unreachable" in x or "reconcile" in x))


def ocsctl_circuits():
    r = subprocess.run([OCSCTL, "--insecure", "--server", fleet.target, "--json", "circuits"],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, f"ocsctl circuits: {r.returncode} {r.stderr}")
    return json.loads(r.stdout).get("circuits", []) if r.returncode == 0 else []


def check_after_restart(stub, slots, round_no):
    jobs = converge(stub)
    with ledger.lock:
        acked = dict(ledger.acked)
        released = set(ledger.released)
        rel_inflight = set(ledger.release_inflight)
        sub_inflight = set(ledger.submit_inflight)
    where = f"after restart {round_no}"
    for job_id in acked:
        j = jobs.get(job_id)
        if j is None:
            check(False, f"{where}: acknowledged job {job_id} lost")
            continue
        if job_id in released:
            want = (RELEASED,)
        elif job_id in rel_inflight:
            want = (ACTIVE, RELEASED)
        else:
            want = (ACTIVE,)
        check(j.state in want, f"{where}: {job_id} is {NAME(j.state)}, want "
              f"{'/'.join(NAME(s) for s in want)} ({j.reason})")
    for job_id in sub_inflight:
        j = jobs.get(job_id)
        check(j is None or j.state in (ACTIVE, FAILED),
              f"{where}: in-flight {job_id} is {NAME(j.state) if j else '-'}")
    # A scheduler whose SubmitJob got no answer retries it unchanged: the
    # job ends ACTIVE, whether it ran before the kill (answered from the
    # store, created = false) or not (run now).
    for job_id in sorted(sub_inflight):
        before = jobs.get(job_id)
        r = stub.SubmitJob(ledger.specs[job_id], timeout=RPC_TIMEOUT_S)
        check(r.job.state == ACTIVE and len(r.job.circuits) == ledger.links[job_id],
              f"{where}: retried {job_id}: {NAME(r.job.state)} {r.job.reason}")
        check(r.created == (before is None),
              f"{where}: retried {job_id} (was {NAME(before.state) if before else 'absent'}): "
              f"created={r.created}")
        if r.job.state == ACTIVE:
            with ledger.lock:
                ledger.acked[job_id] = ledger.links[job_id]
            slots[int(job_id.rsplit("-s", 1)[1])].holding = job_id
            jobs[job_id] = r.job
    # What was in flight is settled now: from here on it is known.
    with ledger.lock:
        ledger.submit_inflight.clear()
        for job_id in rel_inflight:
            if jobs.get(job_id) and jobs[job_id].state == RELEASED:
                ledger.released.add(job_id)
        ledger.release_inflight.clear()
    for job_id, j in jobs.items():
        check(job_id in ledger.links, f"{where}: unknown job {job_id}")
        if j.state == ACTIVE:
            check(len(j.circuits) == ledger.links.get(job_id),
                  f"{where}: {job_id} has {len(j.circuits)} circuits, asked for "
                  f"{ledger.links.get(job_id)}")
    # Two ACTIVE jobs of one slot would mean a leaf held twice.
    for s in slots:
        live = [i for i, j in jobs.items() if j.state == ACTIVE and i.endswith(f"-s{s.index}")]
        check(len(live) <= 1, f"{where}: slot {s.index} has several active jobs {live}")
        # The slot releases what it may hold; nothing else.
        s.holding = live[0] if live else None
    # Devices against what ocsd reports.
    reported = sorted((x["device"], x["in_port"], x["out_port"])
                      for c in ocsctl_circuits() for x in c["cross_connects"])
    devices = fleet.read_devices()
    held = sorted((name, i, o) for name, rows in devices.items() for (i, o, _) in rows)
    check(held == reported, f"{where}: devices hold {held}, ocsctl circuits reports {reported}")
    check(all(st == "connected" for rows in devices.values() for (_, _, st) in rows),
          f"{where}: not every connection is connected: {devices}")
    check(fleet.one_way(devices) == [], f"{where}: one-way {fleet.one_way(devices)}")
    want_xcs = sum(2 * len(j.circuits) for j in jobs.values() if j.state == ACTIVE)
    check(len(held) == want_xcs, f"{where}: {len(held)} cross-connects, jobs need {want_xcs}")
    return jobs


try:
    fleet.start_devices()
    slots = [Slot(i, leaves) for i, leaves in enumerate(SLOTS)]
    round_no = double_kills = 0
    t0 = time.time()
    fleet.start_ocsd()
    while True:
        ch = grpc.insecure_channel(fleet.target)
        stub = jobs_pb2_grpc.JobsStub(ch)
        wait_ready(stub)
        if round_no:
            check_after_restart(stub, slots, round_no)
        with ledger.lock:
            done = ledger.submitted >= SUBMISSIONS
            target = ledger.submitted + rng.randint(1, 8)
        if done:
            break
        wait_sessions()
        stop = threading.Event()
        for s in slots:
            s.thread = threading.Thread(target=s.run, args=(stub, stop))
            s.thread.start()
        # Kill once `target` submissions were started (or the stream ended),
        # a random moment later.
        deadline = time.time() + 120
        while time.time() < deadline:
            with ledger.lock:
                if ledger.submitted >= target:
                    break
            if not any(s.thread.is_alive() for s in slots):
                break
            time.sleep(0.001)
        time.sleep(rng.uniform(0, 0.04))
        stop.set()
        fleet.kill_ocsd()
        round_no += 1
        for s in slots:
            s.thread.join(RPC_TIMEOUT_S)
        ch.close()
        fleet.start_ocsd()
        # Now and then ocsd dies again while it recovers.
        if rng.random() < 0.25:
            time.sleep(rng.uniform(0, 0.5))
            fleet.kill_ocsd()
            double_kills += 1
            fleet.start_ocsd()
    # The end: release what is left; the devices must be empty.
    for s in slots:
        if s.holding:
            r = stub.ReleaseJob(jobs_pb2.ReleaseJobRequest(id=s.holding), timeout=RPC_TIMEOUT_S)
            check(r.job.state == RELEASED, f"final release {s.holding}: {NAME(r.job.state)}")
    devices = fleet.read_devices()
    check(all(not rows for rows in devices.values()), f"devices not empty at the end: {devices}")
    check(len(ledger.acked) > 0, "no submission was ever acknowledged")
    ch.close()
    check(fleet.stop_ocsd() == 0, "ocsd exit code on SIGTERM")
    with ledger.lock:
        print(f"recovery: {round_no} kills ({double_kills} again during recovery), {len(ledger.acked)} acknowledged, "
              f"{len(ledger.released)} released, {len(ledger.acked_failed)} answered FAILED, "
              "transactions found open at a restart: " + ", ".join(
                  f"{k} {v}" for k, v in sorted(collections.Counter(
                      re.findall(r" left open: (\w+)", fleet.log())).items())) + ", "
              f"{time.time() - t0:.0f} s", flush=True)
except Exception:
    failed += 1
    raise
finally:
    fleet.close()
    if failed:
        fleet.dump_logs()
    fleet.remove()
    print(f"recovery: {passed} passed, {failed} failed (seed {SEED})")
sys.exit(1 if failed else 0)
