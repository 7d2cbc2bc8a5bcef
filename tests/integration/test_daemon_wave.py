#!/usr/bin/python3
"""test_daemon_wave.py - many jobs submitted at the same instant (a wave,
issue 24) on the REAL ocsd: each job stays all-or-nothing, on the devices
and in the store, whatever happens to the others.

Lab fabric (16 ocs-devsim devices, cross wiring, --switch-ms 25,
confirm-timeout-s 2), python3-grpcio clients, one thread per job; the
devices are read back with ncclient after every case. A wave is 8
leaf-demand jobs (1 link each) on disjoint GPUs: 7 between leaves of pods
0-2 and one ("odd") between leaf 6 (pod 3) and leaf 1 (pod 0). In the lab
fabric an OCS port is a pod (ARCHITECTURE.md section 1), so only the odd
job's circuits use port 3 of any device.

  a. a refused edit: ocs-devsim's `refuse-port=3` on every device refuses
     any edit that sets a connection on port 3, and lets every other edit
     of the device through (checked first with ncclient alone: refused
     naming the port, the candidate unchanged; an edit off the port taken):
     the 7 others ACTIVE, the odd job answered and stored FAILED naming a
     device and the refusal, the devices hold exactly the 7 jobs' circuits
     (nothing on port 3) and no one-way circuit;
  b. a device dies as the wave arrives (sticky drop@lock/edit/validate/
     commit/confirm knobs, sent on a session opened beforehand as the
     submitting threads are released, on the device every dry-run plan of
     the wave starts with, so at least one job is planned onto it): every
     job ACTIVE or FAILED, at least one FAILED, each FAILED one answered and
     stored naming that device, and at least one ACTIVE (the wave's plans
     keep clear of each other and spread over several device pairs: the
     jobs off the dead device go through), none with a circuit on it; every
     ACTIVE job holds all of its circuits on the devices and nothing else is
     on any device (the dead one, still readable by <get>, included);
  c. kill -9 of ocsd during the wave, 3 rounds with kills at different
     points of the first 200 ms: ocsd restarted on the same store, once
     every job is settled a job answered ACTIVE before the kill is still
     ACTIVE with the same circuits, GetJob and ListJobs agree, and every
     device is read back: it holds exactly the
     union of the circuits the store lists for ACTIVE jobs, each ACTIVE job
     has as many circuits as links it asked for (all of them or none), no
     job other than ACTIVE lists any, every circuit is connected and none is
     one-way;
  d. the wave metrics of the group-commit core: ocsd_wave_jobs,
     ocsd_wave_transactions_total and ocsd_wave_wait_seconds are exported,
     and a burst of K jobs took fewer than K wave transactions. Skipped,
     saying so, while /metrics has no ocsd_wave_transactions_total (ocsd
     before that core: one transaction per job).

usage: test_daemon_wave.py BUILD_DIR SOURCE_DIR [SEED]
"""
import os
import random
import re
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ocsd_fleet  # noqa: E402

BUILD, SRC = sys.argv[1:3]
SEED = int(sys.argv[3]) if len(sys.argv) > 3 else random.randrange(1 << 30)
TIMEOUT_S = 30
SETTLE_S = 30
REFUSED_PORT = 3  # pod 3: only the odd job's circuits use it
KILL_ROUNDS = 3
# (leaf a, leaf b): 7 jobs within pods 0-2, then the odd one touching pod 3
PAIRS = [(0, 2), (1, 3), (0, 4), (1, 5), (2, 4), (3, 5), (0, 3), (6, 1)]

rng = random.Random(SEED)
print(f"daemon_wave: seed {SEED}", flush=True)
fleet = ocsd_fleet.Fleet(BUILD, SRC, confirm_timeout_s=2, prefix="ocsd-wave-")
script = ocsd_fleet.Script("test_daemon_wave", fleet)
check = script.check
ocsd_fleet.gen_stubs(os.path.join(SRC, "proto"), os.path.join(fleet.work, "gen"))
import grpc  # noqa: E402
from ocs.v1 import jobs_pb2, jobs_pb2_grpc  # noqa: E402

ACTIVE, FAILED, RELEASED = (jobs_pb2.JOB_STATE_ACTIVE, jobs_pb2.JOB_STATE_FAILED,
                            jobs_pb2.JOB_STATE_RELEASED)
SETTLED = (ACTIVE, FAILED, RELEASED)
NAME = jobs_pb2.JobState.Name


def wave_specs(tag):
    """The wave's 8 JobSpecs, ids tag-0..tag-7 (tag-7 the odd one): two
    GPUs per leaf and job, no GPU shared."""
    next_gpu = {}
    specs = []
    for n, (a, b) in enumerate(PAIRS):
        gpus = []
        for leaf in (a, b):
            first = next_gpu.get(leaf, 0)
            next_gpu[leaf] = first + 2
            gpus += [jobs_pb2.GpuPlacement(gpu=8 * leaf + first + k, leaf=leaf, pod=leaf // 2)
                     for k in range(2)]
        specs.append(jobs_pb2.JobSpec(
            id=f"{tag}-{n}", idempotency_key=f"key-{tag}-{n}",
            placement=jobs_pb2.Placement(gpus=gpus),
            leaf_demand=jobs_pb2.LeafDemand(pairs=[jobs_pb2.LeafPair(a=a, b=b, links=1)])))
    return specs


def xcs(circuits):
    return sorted((x.device, x.in_port, x.out_port) for c in circuits for x in c.cross_connects)


def submit_wave(stub, specs, at_start=None):
    """Every SubmitJob at the same instant (a barrier releases the threads,
    after at_start() when given); (threads, {id: Job or grpc.RpcError})."""
    out = {}
    gate = threading.Barrier(len(specs), action=at_start)

    def one(spec):
        gate.wait()
        try:
            out[spec.id] = stub.SubmitJob(spec, timeout=TIMEOUT_S).job
        except grpc.RpcError as e:
            out[spec.id] = e

    threads = [threading.Thread(target=one, args=(s,)) for s in specs]
    for t in threads:
        t.start()
    return threads, out


def get_job(stub, job_id):
    try:
        return stub.GetJob(jobs_pb2.GetJobRequest(id=job_id), timeout=TIMEOUT_S).job
    except grpc.RpcError as e:
        if e.code() == grpc.StatusCode.NOT_FOUND:
            return None
        raise


def settle(stub, ids):
    """{id: Job or None (unknown to ocsd)} once none of ids is in flight."""
    deadline = time.time() + SETTLE_S
    while True:
        jobs = {i: get_job(stub, i) for i in ids}
        busy = {i: NAME(j.state) for i, j in jobs.items() if j and j.state not in SETTLED}
        if not busy:
            return jobs
        if time.time() > deadline:
            check(False, f"jobs did not settle: {busy}")
            return jobs
        time.sleep(0.1)


def listed_jobs(stub):
    """{id: Job} of ListJobs, every page."""
    out, token = {}, ""
    while True:
        r = stub.ListJobs(jobs_pb2.ListJobsRequest(page_token=token), timeout=TIMEOUT_S)
        out.update({j.spec.id: j for j in r.jobs})
        token = r.next_page_token
        if not token:
            return out


def check_devices(what, jobs, expect_active=None):
    """The devices against the store's view: they hold exactly the union of
    the ACTIVE jobs' circuits, all connected, no one-way circuit; each ACTIVE
    job has its one link, no other job lists a circuit. Returns the devices."""
    devices = fleet.read_devices()
    held = sorted((n, i, o) for n, rows in devices.items() for (i, o, _) in rows)
    want = []
    for job_id, j in sorted(jobs.items()):
        if j is None:
            continue
        if j.state == ACTIVE:
            check(len(j.circuits) == 1 and len(xcs(j.circuits)) == 2,
                  f"{what}: ACTIVE job {job_id} has {len(j.circuits)} circuits "
                  f"{xcs(j.circuits)} for 1 link")
            want += xcs(j.circuits)
        else:
            check(not j.circuits, f"{what}: {NAME(j.state)} job {job_id} lists circuits "
                  f"{xcs(j.circuits)}")
    check(held == sorted(want), f"{what}: the devices hold {held}, the ACTIVE jobs {sorted(want)}")
    check(fleet.one_way(devices) == [], f"{what}: one-way circuits {fleet.one_way(devices)}")
    pending = [(n, i, o, s) for n, rows in devices.items() for (i, o, s) in rows
               if s != "connected"]
    check(not pending, f"{what}: circuits not connected: {pending}")
    if expect_active is not None:
        active = sorted(i for i, j in jobs.items() if j and j.state == ACTIVE)
        check(active == sorted(expect_active), f"{what}: ACTIVE {active}, "
              f"expected {sorted(expect_active)}")
    return devices


def release_all(stub, what):
    """Releases every ACTIVE job; the devices end empty."""
    for job_id, j in listed_jobs(stub).items():
        if j.state == ACTIVE:
            r = stub.ReleaseJob(jobs_pb2.ReleaseJobRequest(id=job_id), timeout=TIMEOUT_S).job
            check(r.state == RELEASED, f"{what}: release {job_id}: {NAME(r.state)} {r.reason}")
    left = {n: rows for n, rows in fleet.read_devices().items() if rows}
    check(not left, f"{what}: the devices still hold {left} after releasing every job")


def refusal(text):
    """Whether a failure names a device and the refused edit."""
    return bool(re.search(r"ocs-g\d-d\d", text) and f"refuse-port={REFUSED_PORT}" in text)


def knob_alone(what):
    """ocs-devsim's refuse-port on device 0 (ocsd idle), with ncclient: an edit
    setting a connection on the port is refused naming it and leaves the
    candidate as it was, one that leaves the port alone goes through."""
    from ncclient.operations.rpc import RPCError

    def conns(pairs):
        rows = "".join(f"<connection><input>{i}</input><output>{o}</output></connection>"
                       for i, o in pairs)
        return ('<config xmlns="urn:ietf:params:xml:ns:netconf:base:1.0">'
                f'<cross-connects xmlns="{ocsd_fleet.NS}">{rows}</cross-connects></config>')

    with fleet._session(0) as m:
        try:
            m.edit_config(target="candidate", config=conns([(0, 1), (1, 0), (2, 3), (3, 2)]))
            check(False, f"{what}: an edit setting 2->3 went through refuse-port=3")
        except RPCError as e:
            check(f"refuse-port={REFUSED_PORT}" in str(e) and "2->3" in str(e),
                  f"{what}: the refusal says '{e}'")
        cand = fleet._rows(m.get_config(source="candidate").data_xml)
        check(cand == [], f"{what}: a refused edit left {cand} in the candidate")
        try:
            m.edit_config(target="candidate", config=conns([(0, 1), (1, 0)]))
        except RPCError as e:
            check(False, f"{what}: an edit off port {REFUSED_PORT} refused: {e}")
        cand = fleet._rows(m.get_config(source="candidate").data_xml)
        check([(i, o) for i, o, _ in cand] == [(0, 1), (1, 0)],
              f"{what}: an edit off port {REFUSED_PORT} left {cand} in the candidate")
        m.discard_changes()


def case_refused_edit(stub):
    what = "a (refused edit)"
    specs = wave_specs("ref")
    odd = specs[-1].id
    plan = xcs(stub.PlanJob(specs[-1], timeout=TIMEOUT_S).circuits)
    check(plan and all(REFUSED_PORT in (i, o) for (_, i, o) in plan),
          f"{what}: the odd job's dry run {plan} does not use port {REFUSED_PORT}")
    for d in range(fleet.N_DEV):
        fleet.set_faults(d, f"refuse-port={REFUSED_PORT}")
    knob_alone(what)
    threads, answers = submit_wave(stub, specs)
    for t in threads:
        t.join()
    jobs = settle(stub, [s.id for s in specs])
    for job_id, a in sorted(answers.items()):
        if job_id == odd:
            # its own outcome: FAILED, or the error that says why
            said = (a.details() if isinstance(a, grpc.RpcError) else
                    f"{NAME(a.state)} {a.reason}")
            check(refusal(said), f"{what}: the odd job was answered '{said}', expected "
                  "its failure naming a device and the refusal")
            j = jobs[odd]
            check(j is not None and j.state == FAILED and refusal(j.reason),
                  f"{what}: the odd job ended {NAME(j.state) if j else 'unknown'} "
                  f"'{j.reason if j else ''}', expected FAILED naming a device and the refusal")
        elif isinstance(a, grpc.RpcError):
            check(False, f"{what}: SubmitJob {job_id}: {a.code()} {a.details()}")
        else:
            check(a.state == ACTIVE, f"{what}: {job_id} answered {NAME(a.state)} '{a.reason}'")
    devices = check_devices(what, jobs, expect_active=[s.id for s in specs[:-1]])
    on_port = [(n, i, o) for n, rows in devices.items() for (i, o, _) in rows
               if REFUSED_PORT in (i, o)]
    check(not on_port, f"{what}: the devices hold {on_port} on the refused port")
    for d in range(fleet.N_DEV):
        fleet.set_faults(d, "")
    release_all(stub, what)


def case_device_dies(stub):
    what = "b (device dies)"
    specs = wave_specs("dead")
    firsts = {xcs(stub.PlanJob(s, timeout=TIMEOUT_S).circuits)[0][0] for s in specs[:-1]}
    check(len(firsts) == 1, f"{what}: dry runs start on several devices {firsts}")
    dead = sorted(firsts)[0]
    d = int(re.match(r"ocs-g(\d)-d(\d)$", dead).group(1)) * fleet.PER_GROUP + \
        int(re.match(r"ocs-g(\d)-d(\d)$", dead).group(2))
    # the device dies as the wave arrives: every step of a transaction ends
    # the session (get still answers, so that it can be read back below);
    # the session that kills it is open before, so the knob lands at once
    from ncclient.xml_ import to_ele
    with fleet._session(d) as m:
        threads, answers = submit_wave(stub, specs, at_start=lambda: m.dispatch(to_ele(
            f'<set-faults xmlns="{ocsd_fleet.DEVSIM_NS}"><spec>drop@lock+,drop@edit+,'
            "drop@validate+,drop@commit+,drop@confirm+</spec></set-faults>")))
        for t in threads:
            t.join()
    jobs = settle(stub, [s.id for s in specs])
    failed = sorted(i for i, j in jobs.items() if j and j.state == FAILED)
    print(f"{what}: {dead} down, FAILED {failed}", flush=True)
    check(failed, f"{what}: no job failed with {dead} down: "
          f"{ {i: NAME(j.state) for i, j in jobs.items() if j} }")
    # the wave's plans keep clear of each other, so they spread over several
    # device pairs: the jobs off the dead device go through without it
    active = [j for j in jobs.values() if j and j.state == ACTIVE]
    check(active, f"{what}: no job ACTIVE: the jobs off {dead} did not go through")
    on_dead = [(j.spec.id, x) for j in active for x in xcs(j.circuits) if x[0] == dead]
    check(not on_dead, f"{what}: ACTIVE jobs hold circuits on the dead device: {on_dead}")
    for job_id, j in sorted(jobs.items()):
        a = answers.get(job_id)
        if j is None:
            check(False, f"{what}: {job_id} unknown to ocsd")
            continue
        check(j.state in (ACTIVE, FAILED), f"{what}: {job_id} ended {NAME(j.state)}")
        if j.state == FAILED:
            check(dead in j.reason, f"{what}: {job_id} FAILED '{j.reason}', not naming {dead}")
        # each answer is the job's own outcome: OK with its state, or the
        # error of its failure naming the device
        if isinstance(a, grpc.RpcError):
            check(j.state == FAILED and dead in a.details(),
                  f"{what}: {job_id} answered {a.code()} '{a.details()}', the store says "
                  f"{NAME(j.state)}")
        else:
            check(a.state == j.state, f"{what}: {job_id} answered {NAME(a.state)}, "
                  f"the store says {NAME(j.state)}")
    fleet.set_faults(d, "")
    check_devices(what, jobs)
    wait_connected()
    release_all(stub, what)


def wait_connected():
    """Until ocsd has every device back (a dropped session reconnects)."""
    deadline = time.time() + SETTLE_S
    while time.time() < deadline:
        m = re.search(r"^ocsd_devices_unreachable (\S+)$", fleet.metrics(), re.M)
        if m and float(m.group(1)) == 0:
            return
        time.sleep(0.1)
    check(False, "devices still unreachable")


def wait_ready(stub):
    for _ in range(300):
        try:
            return stub.ListJobs(jobs_pb2.ListJobsRequest(), timeout=2)
        except grpc.RpcError:
            time.sleep(0.1)
    raise RuntimeError("ocsd does not answer ListJobs")


def case_kills(stub):
    """Returns the stub of the last ocsd started."""
    # kill points spread over the first 200 ms: planning, the edits, the
    # commits, the confirms of one wave or of the serial transactions
    bounds = [(0.0, 0.04), (0.04, 0.1), (0.1, 0.2)]
    rng.shuffle(bounds)
    for rnd, (lo, hi) in enumerate(bounds[:KILL_ROUNDS]):
        what = f"c (kill -9, round {rnd})"
        specs = wave_specs(f"kill{rnd}")
        delay = rng.uniform(lo, hi)
        threads, answers = submit_wave(stub, specs)
        time.sleep(delay)
        fleet.kill_ocsd()
        for t in threads:
            t.join()
        told = {i: NAME(a.state) if not isinstance(a, grpc.RpcError) else str(a.code())
                for i, a in answers.items()}
        print(f"{what}: killed at {delay * 1000:.0f} ms; answers {told}", flush=True)
        fleet.start_ocsd(reconcile_s=1)
        stub = jobs_pb2_grpc.JobsStub(grpc.insecure_channel(fleet.target))
        wait_ready(stub)
        jobs = settle(stub, [s.id for s in specs])
        print(f"{what}: after the restart " + ", ".join(
            f"{i}={NAME(j.state) if j else 'unknown'}" for i, j in sorted(jobs.items())),
            flush=True)
        for job_id, a in answers.items():
            if not isinstance(a, grpc.RpcError) and a.state == ACTIVE:
                j = jobs.get(job_id)
                check(j is not None and j.state == ACTIVE and
                      xcs(j.circuits) == xcs(a.circuits),
                      f"{what}: {job_id} was answered ACTIVE, after the restart "
                      f"{NAME(j.state) if j else 'unknown'}")
        listed = listed_jobs(stub)
        for job_id, j in jobs.items():
            if j is not None:
                check(job_id in listed and listed[job_id].state == j.state,
                      f"{what}: ListJobs and GetJob disagree on {job_id}")
        check_devices(what, jobs)
        wait_connected()
        release_all(stub, what)
    return stub


def case_metrics(stub):
    what = "d (wave metrics)"
    text = fleet.metrics()
    if not re.search(r"^ocsd_wave_transactions_total ", text, re.M):
        print(f"{what}: SKIPPED: /metrics has no ocsd_wave_transactions_total "
              "(ocsd without the group-commit core runs one transaction per job)", flush=True)
        return

    def counter():
        m = re.search(r"^ocsd_wave_transactions_total (\S+)$", fleet.metrics(), re.M)
        return float(m.group(1))

    specs = wave_specs("burst")
    before = counter()
    threads, answers = submit_wave(stub, specs)
    for t in threads:
        t.join()
    took = counter() - before
    states = {i: NAME(a.state) if not isinstance(a, grpc.RpcError) else str(a.code())
              for i, a in answers.items()}
    check(all(s == "JOB_STATE_ACTIVE" for s in states.values()), f"{what}: {states}")
    check(took < len(specs), f"{what}: a burst of {len(specs)} jobs took {took:.0f} wave "
          "transactions")
    print(f"{what}: {len(specs)} jobs in {took:.0f} wave transaction(s)", flush=True)
    # after the burst: a histogram has no series before its first wave, and
    # the ocsd started by case c's last round may not have run one (a kill
    # before its first admission)
    text = fleet.metrics()
    for name in ("ocsd_wave_jobs_bucket", "ocsd_wave_jobs_count",
                 "ocsd_wave_wait_seconds_bucket", "ocsd_wave_wait_seconds_count"):
        check(re.search(rf"^{name}[ {{]", text, re.M), f"{what}: /metrics lacks {name}")
    release_all(stub, what)


def main():
    t0 = time.time()
    fleet.start_devices(25)
    fleet.start_ocsd(reconcile_s=1)
    stub = jobs_pb2_grpc.JobsStub(grpc.insecure_channel(fleet.target))
    wait_connected()
    for case in (case_refused_edit, case_device_dies):
        t = time.time()
        case(stub)
        print(f"{case.__name__}: {time.time() - t:.1f} s", flush=True)
    t = time.time()
    stub = case_kills(stub)
    print(f"case_kills: {time.time() - t:.1f} s", flush=True)
    case_metrics(stub)
    print(f"total {time.time() - t0:.1f} s", flush=True)


sys.exit(script.run(main))
