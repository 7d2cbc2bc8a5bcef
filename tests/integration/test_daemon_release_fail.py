#!/usr/bin/python3
"""test_daemon_release_fail.py - a release that fails on a device whose
replies are garbled (hardening issue H2).

The real ocsd on the lab fleet (16 ocs-devsim devices), short RPC and
rollback deadlines in the fabric file, the keepalive every 500 ms. For each
RPC step a release can send (lock, edit, validate, commit, confirm, unlock,
get), on a fresh ACTIVE job:
  1. one device the job touches answers that step with broken chunked
     framing (ocs-devsim garble@STEP+, sticky) and the job is released;
  2. whatever the release answered, GetJob, ListCircuits and the devices
     (read with ncclient; the garbled device only when its get answers)
     agree: RELEASED and nothing of it anywhere; or the job still holds its
     circuits (ACTIVE again after a proven rollback, or FAILED with
     `holding` and a reason saying so after ROLLBACK NOT PROVEN), the
     circuit table still lists them, and a new job on its GPUs is refused;
  3. the device is healed; a FAILED job is settled by the keepalive (it
     reads the devices back: at the pre-image the job still holds its
     circuits, at the target the release took effect and the job is
     RELEASED);
  4. a release (again) ends RELEASED: no device holds any of its
     cross-connects and ListCircuits has none of them;
  5. a new job on the same GPUs is ACTIVE with exactly one set of circuits:
     the circuit table is its circuits and the devices hold exactly them.
     It is the job released at the next step.
Once, between 2 and 3 of a step whose release ended FAILED, ocsd is killed
and started again: the job is still FAILED holding its circuits.
Then a release unproven the same way whose job's cross-connects are
removed from the devices behind ocsd's back (as if it had taken effect):
settled at the target, the job is RELEASED and nothing of it is left.
Last, a submission whose read-back is garbled on every device (ROLLBACK
NOT PROVEN) is FAILED holding nothing; settled by the keepalive at the
pre-image, the devices hold nothing and a new job gets exactly one set.
On the code before the fix the second release answered RELEASED at once
and left the circuits in the table and on the devices.

usage: test_daemon_release_fail.py BUILD_DIR SOURCE_DIR
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ocsd_fleet  # noqa: E402

BUILD, SRC = sys.argv[1], sys.argv[2]
STEPS = ["lock", "edit", "validate", "commit", "confirm", "unlock", "get"]
SETTLE_S = 40  # keepalive (0.5 s) + reconnect + read-back, on a loaded machine
GPUS = [(0, 0), (1, 0), (16, 2), (17, 2)]  # (gpu, leaf)
NC = "urn:ietf:params:xml:ns:netconf:base:1.0"
PROVEN = "proven once the devices answered again"  # the reason once settled at the pre-image

fleet = ocsd_fleet.Fleet(BUILD, SRC, confirm_timeout_s=30, prefix="ocsd-relfail-")
script = ocsd_fleet.Script("daemon_release_fail", fleet)
check = script.check


def short_deadlines():
    with open(fleet.cfg) as f:
        fabric = json.load(f)
    dev = fabric["ocsd-fabric:fabric"]["devices"]
    dev["rpc-timeout-ms"] = 1000
    dev["rollback-timeout-ms"] = 2000
    fleet._write_config(fabric)


def remove_behind_back(d, pairs):
    """Deletes cross-connects [(in, out)] from device d over NETCONF."""
    from ncclient import manager
    body = "".join(f'<connection nc:operation="delete"><input>{i}</input>'
                   f"<output>{o}</output></connection>" for i, o in pairs)
    cfg = (f'<nc:config xmlns:nc="{NC}"><cross-connects xmlns="{ocsd_fleet.NS}">{body}'
           "</cross-connects></nc:config>")
    with manager.connect(host="127.0.0.1", port=fleet.base + d, username="ocsd",
                         password=fleet.password, hostkey_verify=False, allow_agent=False,
                         look_for_keys=False, timeout=10) as m:
        m.edit_config(target="candidate", config=cfg)
        m.commit()


def main():
    ocsd_fleet.gen_stubs(os.path.join(SRC, "proto"), os.path.join(fleet.work, "gen"))
    import grpc
    from ocs.v1 import fabric_pb2, fabric_pb2_grpc, jobs_pb2, jobs_pb2_grpc

    short_deadlines()
    fleet.start_devices(switch_ms=1)
    ocsd_args = ["--keepalive-interval-ms", "500"]
    fleet.start_ocsd(*ocsd_args, reconcile_s=600)
    stubs = {}

    def connect():
        ch = grpc.insecure_channel(fleet.target)
        stubs["jobs"] = jobs_pb2_grpc.JobsStub(ch)
        stubs["fabric"] = fabric_pb2_grpc.FabricStub(ch)

    connect()
    name = jobs_pb2.JobState.Name

    def spec(job_id):
        return jobs_pb2.JobSpec(
            id=job_id,
            placement=jobs_pb2.Placement(gpus=[
                jobs_pb2.GpuPlacement(gpu=g, leaf=leaf, pod=leaf // 2) for g, leaf in GPUS]),
            leaf_demand=jobs_pb2.LeafDemand(pairs=[jobs_pb2.LeafPair(a=0, b=2, links=2)]))

    def get(job_id):
        return stubs["jobs"].GetJob(jobs_pb2.GetJobRequest(id=job_id), timeout=30).job

    def table():
        """{(device name, in, out): owner} from ListCircuits (both directions)."""
        out = {}
        for c in stubs["fabric"].ListCircuits(fabric_pb2.ListCircuitsRequest(),
                                              timeout=30).circuits:
            for xc in c.cross_connects:
                out[(xc.device, xc.in_port, xc.out_port)] = c.job_id
        return out

    def job_xcs(job):
        return {(xc.device, xc.in_port, xc.out_port)
                for c in job.circuits for xc in c.cross_connects}

    def devices(skip=None):
        """{(device name, in, out)} held by the devices (not `skip`)."""
        have = set()
        for d in range(fleet.N_DEV):
            if d != skip:
                have |= {(fleet.device_name(d), i, o) for i, o, _ in fleet.read_device(d)}
        return have

    def submit(job_id, what):
        r = stubs["jobs"].SubmitJob(spec(job_id), timeout=60)
        check(r.job.state == jobs_pb2.JOB_STATE_ACTIVE,
              f"{what}: {job_id} is {name(r.job.state)}: {r.job.reason}")
        return r.job

    def refused(job_id, what):
        try:
            r = stubs["jobs"].SubmitJob(spec(job_id), timeout=60)
            check(False, f"{what}: {job_id} on the same GPUs accepted: {name(r.job.state)}")
        except grpc.RpcError as e:
            check(e.code() == grpc.StatusCode.FAILED_PRECONDITION and "held by job" in
                  e.details(), f"{what}: refused with {e.code()} {e.details()}")

    def release(job_id):
        t0 = time.time()
        try:
            r = stubs["jobs"].ReleaseJob(jobs_pb2.ReleaseJobRequest(id=job_id), timeout=120)
            said = "released" if r.job.state == jobs_pb2.JOB_STATE_RELEASED else name(r.job.state)
        except grpc.RpcError as e:
            said = f"{e.code().name}: {e.details()}"
        return said, time.time() - t0

    def holds_consistent(job_id, xcs, skip, what):
        """The job still holds xcs: GetJob, the circuit table, the devices agree."""
        j = get(job_id)
        t = table()
        check(job_xcs(j) == xcs, f"{what}: GetJob lists {len(job_xcs(j))} cross-connects, "
              f"it held {len(xcs)}")
        check({k for k, v in t.items() if v == job_id} == xcs,
              f"{what}: ListCircuits does not list the job's {len(xcs)} cross-connects")
        if j.state == jobs_pb2.JOB_STATE_ACTIVE:
            on = devices(skip)
            mine = {x for x in xcs if skip is None or x[0] != fleet.device_name(skip)}
            check(mine <= on, f"{what}: ACTIVE but the devices lack {sorted(mine - on)}")
        else:
            check(j.state == jobs_pb2.JOB_STATE_FAILED and "still holds" in j.reason,
                  f"{what}: {name(j.state)} does not say it holds its circuits: {j.reason}")
        return j

    def gone(job_id, xcs, what):
        j = get(job_id)
        check(j.state == jobs_pb2.JOB_STATE_RELEASED and not j.circuits,
              f"{what}: {name(j.state)} with {len(j.circuits)} circuits: {j.reason}")
        check(not any(v == job_id for v in table().values()),
              f"{what}: ListCircuits still lists circuits of {job_id}")
        left = devices() & xcs
        check(not left, f"{what}: the devices still hold {sorted(left)}")

    def exactly_one_set(job):
        t = table()
        on = devices()
        check(set(t) == job_xcs(job) and set(t.values()) == {job.spec.id},
              f"{job.spec.id}: the circuit table is not exactly its circuits: {sorted(t.items())}")
        check(on == job_xcs(job), f"{job.spec.id}: the devices hold {sorted(on)}, the job "
              f"{sorted(job_xcs(job))}")

    by_name = {fleet.device_name(d): d for d in range(fleet.N_DEV)}
    job = submit("rf-0", "first job")
    exactly_one_set(job)
    restarted = False
    failed_steps = []
    for n, step in enumerate(STEPS):
        t_step = time.time()
        xcs = job_xcs(job)
        dev = min(by_name[x[0]] for x in xcs)  # one device the job touches
        fleet.set_faults(dev, f"garble@{step}+")
        said, took = release(job.spec.id)
        j = get(job.spec.id)
        print(f"{step}: garbled on {fleet.device_name(dev)}; release said {said!r} in "
              f"{took:.1f} s; GetJob {name(j.state)} ({j.reason})", flush=True)
        readable = None if step == "get" else dev
        if j.state != jobs_pb2.JOB_STATE_RELEASED:
            skip = dev if step == "get" else None
            holds_consistent(job.spec.id, xcs, skip, f"{step}: after the failed release")
            refused(f"rf-{n + 1}", f"{step}: while {job.spec.id} holds its circuits")
        else:
            check(not any(v == job.spec.id for v in table().values()),
                  f"{step}: RELEASED but ListCircuits lists its circuits")
            if readable is not None:
                left = devices(dev) & xcs
                check(not left, f"{step}: RELEASED but the devices hold {sorted(left)}")
        if j.state == jobs_pb2.JOB_STATE_FAILED:
            failed_steps.append(step)
            if not restarted:
                restarted = True
                fleet.kill_ocsd()
                fleet.start_ocsd(*ocsd_args, reconcile_s=600)
                connect()
                print(f"{step}: ocsd killed and started again: {name(get(job.spec.id).state)}",
                      flush=True)
                holds_consistent(job.spec.id, xcs, dev if step == "get" else None,
                                 f"{step}: after a restart")
                refused(f"rf-{n + 1}", f"{step}: after a restart, while {job.spec.id} holds them")
        fleet.set_faults(dev, "")
        if j.state == jobs_pb2.JOB_STATE_FAILED:
            # the keepalive reads the devices back and settles the failed intent
            deadline = time.time() + SETTLE_S
            while time.time() < deadline:
                j = get(job.spec.id)
                if j.state != jobs_pb2.JOB_STATE_FAILED or PROVEN in j.reason:
                    break
                time.sleep(0.2)
            print(f"{step}: settled: {name(j.state)} ({j.reason})", flush=True)
            check(j.state == jobs_pb2.JOB_STATE_RELEASED or PROVEN in j.reason,
                  f"{step}: not settled within {SETTLE_S} s: {name(j.state)} {j.reason}")
            if j.state != jobs_pb2.JOB_STATE_RELEASED:
                holds_consistent(job.spec.id, xcs, None, f"{step}: settled at the pre-image")
        if j.state != jobs_pb2.JOB_STATE_RELEASED:
            said, took = release(job.spec.id)
            print(f"{step}: release again said {said!r} in {took:.1f} s", flush=True)
        gone(job.spec.id, xcs, f"{step}: released")
        job = submit(f"rf-{n + 1}", f"{step}: a new job on the same GPUs")
        exactly_one_set(job)
        print(f"{step}: {time.time() - t_step:.1f} s", flush=True)
    print(f"releases that ended FAILED: {failed_steps}", flush=True)

    # The release took effect after all: a release unproven (get garbled),
    # then the job's cross-connects removed from the devices behind ocsd's
    # back, as the release would have left them. Settled at the target: the
    # job is RELEASED and the circuit table drops them.
    xcs = job_xcs(job)
    dev = min(by_name[x[0]] for x in xcs)
    fleet.set_faults(dev, "garble@get+")
    said, took = release(job.spec.id)
    j = get(job.spec.id)
    print(f"target: release said {said!r}; GetJob {name(j.state)}", flush=True)
    holds_consistent(job.spec.id, xcs, dev, "target: after the failed release")
    for d in sorted({by_name[x[0]] for x in xcs}):
        remove_behind_back(d, [(i, o) for (n_, i, o) in xcs if n_ == fleet.device_name(d)])
    fleet.set_faults(dev, "")
    deadline = time.time() + SETTLE_S
    while j.state == jobs_pb2.JOB_STATE_FAILED and time.time() < deadline:
        time.sleep(0.2)
        j = get(job.spec.id)
    print(f"target: settled: {name(j.state)} ({j.reason})", flush=True)
    gone(job.spec.id, xcs, "target: settled")
    job = submit("rf-r", "after the release took effect")
    exactly_one_set(job)

    # A submission whose rollback is not proven holds nothing; once settled
    # its GPUs get exactly one set.
    said, took = release(job.spec.id)
    check(said == "released", f"release {job.spec.id}: {said}")
    for d in range(fleet.N_DEV):
        fleet.set_faults(d, "garble@get+")
    try:
        r = stubs["jobs"].SubmitJob(spec("rf-s"), timeout=120)
        said = name(r.job.state)
    except grpc.RpcError as e:
        said = f"{e.code().name}: {e.details()}"
    j = get("rf-s")
    print(f"submit with every get garbled: {said!r}; GetJob {name(j.state)} ({j.reason})",
          flush=True)
    check(j.state == jobs_pb2.JOB_STATE_FAILED and not j.circuits and not table(),
          f"rf-s: {name(j.state)} with {len(j.circuits)} circuits, {len(table())} in the table")
    for d in range(fleet.N_DEV):
        fleet.set_faults(d, "")
    deadline = time.time() + SETTLE_S
    while PROVEN not in j.reason and time.time() < deadline:
        time.sleep(0.2)
        j = get("rf-s")
    print(f"rf-s settled: {name(j.state)} ({j.reason})", flush=True)
    check(j.state == jobs_pb2.JOB_STATE_FAILED and PROVEN in j.reason and not j.circuits,
          f"rf-s not settled within {SETTLE_S} s: {name(j.state)} {j.reason}")
    check(not devices(), f"rf-s: the devices hold {sorted(devices())}")
    exactly_one_set(submit("rf-t", "after the unproven submission"))
    check(failed_steps, "no garbled step made a release fail unproven: nothing was tested")
    check(restarted, "no restart was tested")


sys.exit(script.run(main))
