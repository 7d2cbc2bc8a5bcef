#!/usr/bin/python3
"""test_daemon_reload.py - SIGHUP applies new device access settings to the
REAL ocsd while it runs (lab fabric, 16 ocs-devsim devices, python3-grpcio
client, devices read back with ncclient).

  1. a job goes ACTIVE on the fleet;
  2. the fabric file moves every device to ports nobody listens on; SIGHUP
     answers `applied` and the next submission fails UNAVAILABLE with nothing
     changed on any device (the devices were reached with the new ports);
  3. the file points at the fleet again; SIGHUP `applied`; a submission goes
     ACTIVE with its circuits on the devices;
  4. a FIFO in place of the fabric file: SIGHUP logs "PATH is not a regular
     file" and counts `invalid` without waiting for a writer (the event loop
     answers ListJobs at once); the file back, SIGHUP `unchanged`;
  5. a change of the fabric itself (and 6. of a device's model) is `restart_needed` and nothing of it is
     applied: ocsd keeps working on the running configuration.

usage: test_daemon_reload.py BUILD_DIR SOURCE_DIR
"""
import json
import os
import re
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ocsd_fleet  # noqa: E402
import testports  # noqa: E402

BUILD, SRC = sys.argv[1:3]
TIMEOUT_S = 30

fleet = ocsd_fleet.Fleet(BUILD, SRC, prefix="ocsd-reload-")
script = ocsd_fleet.Script("test_daemon_reload", fleet)
check = script.check
ocsd_fleet.gen_stubs(os.path.join(SRC, "proto"), os.path.join(fleet.work, "gen"))
import grpc  # noqa: E402
from ocs.v1 import jobs_pb2, jobs_pb2_grpc  # noqa: E402

ACTIVE = jobs_pb2.JobState.Value("JOB_STATE_ACTIVE")


def job(job_id, a, b):
    gpus = [jobs_pb2.GpuPlacement(gpu=8 * leaf + k, leaf=leaf, pod=leaf // 2)
            for leaf in (a, b) for k in range(2)]
    return jobs_pb2.JobSpec(
        id=job_id, placement=jobs_pb2.Placement(gpus=gpus),
        leaf_demand=jobs_pb2.LeafDemand(pairs=[jobs_pb2.LeafPair(a=a, b=b, links=2)]))


def reloads(result):
    m = re.search(r'^ocsd_config_reloads_total\{result="%s"\} (\S+)$' % result,
                  fleet.metrics(), re.M)
    return float(m.group(1)) if m else 0.0


def sighup(result):
    """SIGHUP, then wait (bounded) until the reload is counted as `result`."""
    before = reloads(result)
    fleet.ocsd.send_signal(signal.SIGHUP)
    deadline = time.time() + TIMEOUT_S
    while time.time() < deadline:
        if reloads(result) == before + 1:
            return True
        time.sleep(0.05)
    return False


def write_fabric(edit):
    with open(fleet.cfg) as f:
        fabric = json.load(f)
    edit(fabric["ocsd-fabric:fabric"])
    with open(fleet.cfg, "w") as f:
        json.dump(fabric, f, indent=2)


def held():
    """The cross-connects the devices hold, read over NETCONF."""
    return {name: [(i, o) for i, o, _ in rows] for name, rows in fleet.read_devices().items()}


def fifo_step(stub):
    saved = fleet.cfg + ".saved"
    os.rename(fleet.cfg, saved)
    os.mkfifo(fleet.cfg)
    try:
        fleet.ocsd.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + TIMEOUT_S
        refusal = f"{fleet.cfg} is not a regular file"
        while refusal not in fleet.log() and time.monotonic() < deadline:
            time.sleep(0.05)
        check(refusal in fleet.log(), f"a FIFO as fabric file: no log line '{refusal}'")
        # The loop answers at once: ListJobs is served on the event loop.
        t0 = time.monotonic()
        try:
            stub.ListJobs(jobs_pb2.ListJobsRequest(), timeout=2)
            took = time.monotonic() - t0
            check(took < 2, f"ListJobs took {took:.2f} s after SIGHUP on a FIFO")
        except grpc.RpcError as e:
            check(False, f"ListJobs after SIGHUP on a FIFO: {e.code()} {e.details()}")
        check(reloads("invalid") >= 1, "a FIFO as fabric file is not counted invalid")
    finally:
        # Release a reader stuck in open() (the bug), so the test ends.
        try:
            os.close(os.open(fleet.cfg, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
        os.remove(fleet.cfg)
        os.rename(saved, fleet.cfg)
    check(sighup("unchanged"), "fabric file back after a FIFO: reload not counted unchanged")
    check(fleet.ocsd.poll() is None, "ocsd died on a FIFO as fabric file")


def main():
    fleet.start_devices()
    fleet.start_ocsd()
    stub = jobs_pb2_grpc.JobsStub(grpc.insecure_channel(fleet.target))
    base = fleet.base

    r = stub.SubmitJob(job("before", 0, 2), timeout=TIMEOUT_S)
    check(r.job.state == ACTIVE, f"first job: {r.job.state} {r.job.reason}")
    first = held()
    check(sum(map(len, first.values())) > 0, "the first job's circuits are on no device")

    # 2. every device elsewhere: the next transaction cannot reach them
    dead = testports.reserve(fleet.N_DEV)  # reserved, nobody listens there
    write_fabric(lambda f: f["devices"].update({"port-base": dead}))
    check(sighup("applied"), "moved devices: reload not counted as applied")
    try:
        r = stub.SubmitJob(job("moved", 1, 3),
                           timeout=TIMEOUT_S)
        check(False, f"submission to unreachable devices answered {r.job.state}")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.UNAVAILABLE,
              f"unreachable devices: {e.code()} {e.details()}")
        # issue 14 #16: the rollback is said once, not twice
        check(e.details().count("rolled back") <= 1,
              f"the rollback is repeated: {e.details()}")
    check(held() == first, "a failed submission changed a device")

    # 3. back on the fleet: the devices are reached again
    write_fabric(lambda f: f["devices"].update({"port-base": base}))
    check(sighup("applied"), "devices back: reload not counted as applied")
    r = stub.SubmitJob(job("after", 1, 3), timeout=TIMEOUT_S)
    check(r.job.state == ACTIVE, f"job after the reload: {r.job.state} {r.job.reason}")
    after = held()
    check(sum(map(len, after.values())) > sum(map(len, first.values())),
          "the job after the reload has no circuits on the devices")

    # 4. a FIFO in place of the fabric file: refused without waiting for a
    #    writer; the event loop keeps serving; the file back, reload works
    fifo_step(stub)

    # 5. the fabric itself: reported, not applied
    pods = json.load(open(fleet.cfg))["ocsd-fabric:fabric"]["pods"]
    write_fabric(lambda f: f.update({"pods": 2}))
    check(sighup("restart_needed"), "a changed fabric is not reported restart_needed")
    # 6. a device's model: it changes what the stored circuits mean there
    write_fabric(lambda f: (f.update({"pods": pods}),
                            f["devices"].update({"device": [{"id": 0, "model": "polatis"}]})))
    check(sighup("restart_needed"), "a changed device model is not reported restart_needed")
    r = stub.ReleaseJob(jobs_pb2.ReleaseJobRequest(id="after"), timeout=TIMEOUT_S)
    check(held() == first, "release after a restart_needed reload did not restore the devices")
    check(fleet.ocsd.poll() is None, "ocsd died during the reloads")
    check(fleet.stop_ocsd() == 0, "ocsd did not exit cleanly")


sys.exit(script.run(main))
