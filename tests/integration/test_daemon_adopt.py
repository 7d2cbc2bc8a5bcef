#!/usr/bin/python3
"""test_daemon_adopt.py - issue 14 #2, #7 and #14 on the REAL ocsd (lab
fabric, 16 ocs-devsim devices, python3-grpcio client, devices read back with
ncclient):

  1. ocsd on store A places jobs a1 and a2; then ocsd starts on a fresh,
     empty store B while the devices hold their circuits: it refuses to
     start (exit non-zero) and names --adopt-existing and --clear-existing;
     the devices are untouched;
  2. with --adopt-existing the circuits become job adopted-at-start (ACTIVE,
     planner "adopted"); a new job b1 goes ACTIVE without touching any
     adopted cross-connect (read back before and after);
  3. after a restart `GetJob b1` still shows its plan figures (planner,
     links requested and placed: #14);
  4. releasing adopted-at-start removes exactly the adopted cross-connects;
  5. ocsd on a fresh store C with --clear-existing empties the devices, with
     no one-way circuit at any point;
  6. shutdown with submissions queued (#7): 8 jobs submitted at once on slow
     devices, SIGTERM once the first is ACTIVE; after a restart every job
     answered OK is ACTIVE, every one answered ABORTED (stored, carried out
     at the next start) becomes ACTIVE, and every one answered UNAVAILABLE
     is absent or not ACTIVE;
  7. planner cancellation (#8), on --solver-threads 2 (one DELTA search at a
     time): three PlanJob calls with a search of up to 100,000 generations
     (stall 10,000) on 16,384 micro-batches (its bounds alone take
     seconds) and a 1 s deadline, then a cheap search (5
     generations) queued behind them: the cheap plan is answered in less
     than half the time one such search takes run to its end (measured
     next, at least 2 s), since each abandoned search stops when its
     deadline passes; without cancellation the cheap plan would have waited
     for at least one whole search. Then SIGTERM while such a search
     runs: ocsd stops within 15 s, cleanly (exit 0; the search is cancelled
     by the shutdown, not run to its end), and the caller is answered
     UNAVAILABLE (or sees the server go) within its deadline.

usage: test_daemon_adopt.py BUILD_DIR SOURCE_DIR
"""
import json
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ocsd_fleet  # noqa: E402

BUILD, SRC = sys.argv[1:3]
TIMEOUT_S = 60
OCSCTL = os.path.join(BUILD, "northbound", "ocsctl", "ocsctl")
NC = "urn:ietf:params:xml:ns:netconf:base:1.0"

fleet = ocsd_fleet.Fleet(BUILD, SRC, prefix="ocsd-adopt-")
script = ocsd_fleet.Script("test_daemon_adopt", fleet)
check = script.check
ocsd_fleet.gen_stubs(os.path.join(SRC, "proto"), os.path.join(fleet.work, "gen"))
import grpc  # noqa: E402
from google.protobuf import json_format  # noqa: E402
from ocs.v1 import jobs_pb2, jobs_pb2_grpc  # noqa: E402

ACTIVE = jobs_pb2.JobState.Value("JOB_STATE_ACTIVE")
RELEASED = jobs_pb2.JobState.Value("JOB_STATE_RELEASED")


def job(job_id, a, b, links, first_gpu=0):
    gpus = [jobs_pb2.GpuPlacement(gpu=8 * leaf + first_gpu + k, leaf=leaf, pod=leaf // 2)
            for leaf in (a, b) for k in range(2)]
    return jobs_pb2.JobSpec(
        id=job_id, placement=jobs_pb2.Placement(gpus=gpus),
        leaf_demand=jobs_pb2.LeafDemand(pairs=[jobs_pb2.LeafPair(a=a, b=b, links=links)]))


def delta_spec(job_id, generations, stall, micro_batches=8):
    with open(os.path.join(SRC, "deploy", "jobs", "lab-delta.json")) as f:
        doc = json.load(f)
    doc["id"] = job_id
    doc.pop("idempotency_key", None)
    doc["parallelism"].update(max_generations=generations, stall_generations=stall,
                              micro_batches=micro_batches)
    return json_format.ParseDict(doc, jobs_pb2.JobSpec())


def ocsctl(*args):
    r = subprocess.run([OCSCTL, "--insecure", "--server", fleet.target, "--timeout-ms", "60000",
                        *args], capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout, r.stderr


def behind_its_back(d, xcs):
    """Adds cross-connects [(in, out)] to device d over NETCONF, as another
    controller or a technician would."""
    from ncclient import manager
    body = "".join(f"<connection><input>{i}</input><output>{o}</output></connection>"
                   for i, o in xcs)
    cfg = (f'<nc:config xmlns:nc="{NC}"><cross-connects xmlns="{ocsd_fleet.NS}">{body}'
           '</cross-connects></nc:config>')
    with manager.connect(host="127.0.0.1", port=fleet.base + d, username="ocsd",
                         password=fleet.password, hostkey_verify=False, allow_agent=False,
                         look_for_keys=False, timeout=10) as m:
        with m.locked("candidate"):
            m.edit_config(target="candidate", config=cfg)
            m.commit()


def free_pair(devices, d0, d1):
    """Ports p != q free as inputs and outputs on both devices of a cross pair."""
    used = {p for name in (fleet.device_name(d0), fleet.device_name(d1))
            for (i, o, _) in devices[name] for p in (i, o)}
    ports = [p for p in range(8) if p not in used]
    return ports[0], ports[1]


def held():
    devices = fleet.read_devices()
    return devices, {(n, i, o) for n, rows in devices.items() for (i, o, _) in rows}


def fresh_store(name):
    fleet.state_dir = os.path.join(fleet.work, name)
    os.makedirs(fleet.state_dir)


def stub():
    return jobs_pb2_grpc.JobsStub(grpc.insecure_channel(fleet.target))


def refused_start(*extra):
    """Starts ocsd expecting it to exit; returns (exit code, its log lines)."""
    args = [fleet.ocsd_bin, "--config", fleet.cfg, "--state-dir", fleet.state_dir,
            "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--insecure",
            *extra]
    p = subprocess.run(args, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stderr


def main():
    fleet.start_devices()

    # 1. circuits on the devices, then an empty store
    fresh_store("store-a")
    fleet.start_ocsd()
    s = stub()
    for j, (a, b) in (("a1", (0, 2)), ("a2", (4, 6))):
        r = s.SubmitJob(job(j, a, b, 2), timeout=TIMEOUT_S).job
        check(r.state == ACTIVE, f"job {j}: {r.state} {r.reason}")
    check(fleet.stop_ocsd() == 0, "ocsd (store A) did not stop cleanly")
    devices, before = held()
    check(len(before) == 8 and fleet.one_way(devices) == [],
          f"jobs a1, a2: the devices hold {len(before)} cross-connects")
    fresh_store("store-b")
    code, log = refused_start()
    check(code not in (0, None), f"ocsd started on an empty store over live circuits: {code}")
    check("--adopt-existing" in log and "--clear-existing" in log,
          f"the refusal does not name both flags: {log[-600:]}")
    check(held()[1] == before, "the refused start changed the devices")

    # 2. adopt, then a new job around the adopted circuits
    fleet.start_ocsd("--adopt-existing")
    s = stub()
    ad = s.GetJob(jobs_pb2.GetJobRequest(id="adopted-at-start"), timeout=TIMEOUT_S).job
    check(ad.state == ACTIVE and ad.figures.planner == "adopted" and
          ad.spec.id == "adopted-at-start",
          f"adopted job: {ad.state} planner {ad.figures.planner!r} id {ad.spec.id!r}")
    check(len(ad.circuits) == 4, f"adopted job holds {len(ad.circuits)} circuits, not 4")
    r = s.SubmitJob(job("b1", 1, 3, 3), timeout=TIMEOUT_S).job
    check(r.state == ACTIVE, f"job b1 next to adopted circuits: {r.state} {r.reason}")
    devices, after = held()
    check(before <= after, f"b1 touched adopted cross-connects: {sorted(before - after)}")
    check(len(after) == 8 + 6 and fleet.one_way(devices) == [],
          f"after b1 the devices hold {len(after)} cross-connects")

    # 3. plan figures survive a restart
    check(fleet.stop_ocsd() == 0, "ocsd (store B) did not stop cleanly")
    fleet.start_ocsd()
    s = stub()
    b1 = s.GetJob(jobs_pb2.GetJobRequest(id="b1"), timeout=TIMEOUT_S).job
    f = b1.figures
    check(b1.state == ACTIVE and f.planner == "leaf-centric" and f.links_requested == 3 and
          f.links_placed == 3, f"b1 after a restart: {b1.state} {f}")

    # 4. releasing the adopted job frees exactly its cross-connects
    r = s.ReleaseJob(jobs_pb2.ReleaseJobRequest(id="adopted-at-start"), timeout=TIMEOUT_S).job
    check(r.state == RELEASED, f"release adopted-at-start: {r.state} {r.reason}")
    devices, now = held()
    check(now == after - before, "the release did not remove exactly the adopted circuits")
    check(fleet.one_way(devices) == [], "a one-way circuit after the release")
    check(fleet.stop_ocsd() == 0, "ocsd did not stop cleanly")

    # 5. clear on a fresh store
    fresh_store("store-c")
    fleet.start_ocsd("--clear-existing")
    check(held()[1] == set(), "--clear-existing left cross-connects on the devices")
    check(fleet.stop_ocsd() == 0, "ocsd (store C) did not stop cleanly")

    # 6. SIGTERM with submissions queued: one job per transaction, so that
    # work is still queued when the first answer comes (a wave would take
    # all eight at once)
    fresh_store("store-d")
    fleet.start_ocsd("--max-wave-jobs", "1")
    s = stub()
    answers, threads = {}, []

    def submit(j, a, b, first_gpu):
        try:
            r = s.SubmitJob(job(j, a, b, 1, first_gpu), timeout=TIMEOUT_S)
            answers[j] = ("OK", r.job.state)
        except grpc.RpcError as e:
            answers[j] = (e.code().name, e.details())

    pairs = [(0, 2), (1, 3), (4, 6), (5, 7), (0, 4), (1, 5), (2, 6), (3, 7)]
    for k, (a, b) in enumerate(pairs):
        t = threading.Thread(target=submit, args=(f"q{k}", a, b, 2 * (k // 4)))
        t.start()
        threads.append(t)
    deadline = time.time() + TIMEOUT_S
    while time.time() < deadline and not any(v[0] == "OK" for v in answers.values()):
        time.sleep(0.01)
    check(fleet.stop_ocsd() == 0, "ocsd did not stop cleanly with work queued")
    for t in threads:
        t.join()
    print("answers at shutdown:", answers, flush=True)
    check(any(v[0] != "OK" for v in answers.values()), "nothing was queued at SIGTERM")
    fleet.start_ocsd()
    s = stub()
    deadline = time.time() + TIMEOUT_S
    states = {}
    while time.time() < deadline:
        states = {}
        for j in answers:
            try:
                states[j] = s.GetJob(jobs_pb2.GetJobRequest(id=j), timeout=TIMEOUT_S).job.state
            except grpc.RpcError as e:
                states[j] = e.code().name
        if all(v in (ACTIVE, RELEASED, "NOT_FOUND", jobs_pb2.JOB_STATE_FAILED)
               for v in states.values()):
            break
        time.sleep(0.1)
    for j, (code, _) in answers.items():
        if code in ("OK", "ABORTED"):
            check(states[j] == ACTIVE, f"{j} answered {code} is {states[j]} after a restart")
        elif code == "UNAVAILABLE":
            check(states[j] != ACTIVE, f"{j} answered UNAVAILABLE is ACTIVE after a restart")
        elif code == "CANCELLED":
            # the connection went with the process before the answer: no
            # answer of ocsd's, so nothing to hold it to
            print(f"{j}: the call was cancelled at shutdown; now {states[j]}", flush=True)
        else:
            check(False, f"{j} answered {code}: {answers[j][1]}")
    devices, _ = held()
    check(fleet.one_way(devices) == [], "a one-way circuit after the restart")
    check(fleet.stop_ocsd() == 0, "ocsd did not stop cleanly")

    # 7. searches whose caller is gone stop
    fresh_store("store-e")  # no job holds the GPUs; the devices are emptied again
    fleet.start_ocsd("--clear-existing", "--solver-threads", "2")
    s = stub()
    codes = []

    def abandoned(k):
        try:
            s.PlanJob(delta_spec(f"long-{k}", 100000, 10000, 16384), timeout=1.0)
            codes.append("OK")
        except grpc.RpcError as e:
            codes.append(e.code().name)

    t0 = time.time()
    threads = [threading.Thread(target=abandoned, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    cheap = s.PlanJob(delta_spec("cheap", 5, 5), timeout=TIMEOUT_S)
    cheap_s = time.time() - t0
    for t in threads:
        t.join()
    check(codes == ["DEADLINE_EXCEEDED"] * 3, f"abandoned searches answered {codes}")
    check(cheap.figures.planner == "delta-fast", f"cheap plan: {cheap.figures}")
    # One such search alone, to compare with: it only has to take longer than
    # the cheap plan's bound, so a search still running at 30 s (the ASan
    # build's, several times slower) is cut there and counts as 30 s.
    t1 = time.time()
    try:
        full = s.PlanJob(delta_spec("full", 100000, 10000, 16384), timeout=30)
        ran = f"{full.figures.generations} generations"
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.DEADLINE_EXCEEDED, f"the full search: {e}")
        ran = "cut at its 30 s deadline"
    full_s = time.time() - t1
    print(f"cheap plan behind 3 abandoned searches: {cheap_s:.2f} s; "
          f"one search run to its end: {full_s:.2f} s ({ran})", flush=True)
    # Behind the three abandoned searches on 2 solver threads, the cheap plan
    # would wait for one of them to end: a whole search. Measured against
    # that search in the same run, not a fixed bound: on an idle machine a
    # search takes about 4 s, under load or ASan far more.
    check(full_s > 2.0, f"a full search takes {full_s:.2f} s: the test proves nothing")
    check(cheap_s < full_s / 2,
          f"the cheap plan waited {cheap_s:.2f} s behind abandoned searches "
          f"(a search takes {full_s:.2f} s)")
    # SIGTERM while a search runs: the shutdown cancels it rather than
    # waiting for its end (which the search above shows takes seconds;
    # it is left at most 15 s here, far less than its 120 s deadline).
    stopped = []

    def searching():
        try:
            s.PlanJob(delta_spec("at-stop", 100000, 10000, 16384), timeout=120)
            stopped.append("OK")
        except grpc.RpcError as e:
            stopped.append(f"{e.code().name}: {e.details()}")

    t2 = threading.Thread(target=searching)
    t2.start()
    time.sleep(1.0)
    t3 = time.time()
    rc = fleet.stop_ocsd(timeout_s=15)
    stop_s = time.time() - t3
    t2.join(timeout=30)
    print(f"SIGTERM during a search: ocsd exited {rc} after {stop_s:.2f} s; "
          f"the caller saw {stopped}", flush=True)
    check(rc == 0, f"ocsd did not stop cleanly within 15 s of SIGTERM during a search ({rc})")
    check(len(stopped) == 1 and stopped[0].startswith(("UNAVAILABLE", "CANCELLED")),
          f"the search's caller saw {stopped}")

    # 8. drift on a running ocsd: listed, kept clear of, adopted, cleared
    fleet.start_ocsd()
    s = stub()
    r = s.SubmitJob(job("r1", 0, 2, 2), timeout=TIMEOUT_S).job
    check(r.state == ACTIVE, f"job r1: {r.state} {r.reason}")
    devices, _ = held()
    p, q = free_pair(devices, 12, 13)           # group 3, devices 0 and 1
    p1, q1 = free_pair(devices, 8, 9)           # group 2
    behind_its_back(12, [(p, q)])
    behind_its_back(13, [(q, p)])               # the other half: a two-way circuit
    behind_its_back(8, [(p1, q1)])              # one-way
    added = {(fleet.device_name(12), p, q), (fleet.device_name(13), q, p),
             (fleet.device_name(8), p1, q1)}
    listed = set()
    deadline = time.time() + 30
    while time.time() < deadline and listed != added:
        code, out, err = ocsctl("--json", "drift")
        listed = {(c["device"], c.get("in_port", 0), c.get("out_port", 0))
                  for c in json.loads(out).get("cross_connects", []) if not c.get("missing")
                  } if code == 0 else set()
        time.sleep(0.5)
    check(listed == added, f"ocsctl drift lists {sorted(listed)}, not {sorted(added)}")
    check('ocsd_drift_cross_connects{kind="unowned"} 3' in fleet.metrics(),
          "ocsd_drift_cross_connects does not count the 3 unowned cross-connects")
    r = s.SubmitJob(job("r2", 1, 3, 3, 4), timeout=TIMEOUT_S).job
    check(r.state == ACTIVE, f"job r2 next to drift: {r.state} {r.reason}")
    devices, now = held()
    check(added <= now, f"job r2 touched unowned cross-connects: {sorted(added - now)}")
    code, out, err = ocsctl("adopt", "--device", fleet.device_name(8), "--ports", f"{p1}:{q1}")
    check(code == 1 and "one-way" in err and "clear it" in err,
          f"adopting a one-way cross-connect: exit {code}: {err.strip()}")
    code, out, err = ocsctl("adopt", "--device", fleet.device_name(12), "--ports", f"{p}:{q}",
                            "--job", "ad1")
    check(code == 0 and "as job ad1" in out, f"ocsctl adopt: exit {code}: {out}{err}")
    ad = s.GetJob(jobs_pb2.GetJobRequest(id="ad1"), timeout=TIMEOUT_S).job
    check(ad.state == ACTIVE and len(ad.circuits) == 1 and ad.spec.id == "ad1",
          f"job ad1: {ad.state} {ad.spec.id!r} {ad.circuits}")
    code, out, err = ocsctl("clear", "--device", fleet.device_name(8))
    check(code == 0 and "cleared 1 cross-connect" in out, f"ocsctl clear: exit {code}: {out}{err}")
    devices, after = held()
    check(after == now - {(fleet.device_name(8), p1, q1)},
          "the clear changed more than the one-way cross-connect")
    r = s.ReleaseJob(jobs_pb2.ReleaseJobRequest(id="ad1"), timeout=TIMEOUT_S).job
    check(r.state == RELEASED, f"release ad1: {r.state} {r.reason}")
    devices, after = held()
    check(after == now - added, "releasing ad1 did not remove exactly its circuit")
    check(fleet.one_way(devices) == [], "a one-way circuit at the end")
    code, out, err = ocsctl("adopt", "--ports", "1:2")
    check(code == 2 and "--ports needs --device" in err, f"adopt --ports alone: {code} {err}")
    check(fleet.stop_ocsd() == 0, "ocsd did not stop cleanly")


sys.exit(script.run(main))
