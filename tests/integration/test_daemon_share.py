#!/usr/bin/python3
"""test_daemon_share.py - jobs sharing leaves on the REAL ocsd (lab fabric:
8 uplinks per leaf, tau 2, 16 ocs-devsim devices; python3-grpcio client;
devices read back with ncclient).

  1. job A (leaves 0-2, 4 links) and job B (leaves 0-4, 4 links) share leaf
     0 and both go ACTIVE, each contention-free counting the other's links;
     the devices hold both jobs' circuits and no one-way circuit;
  2. job C (leaves 0-6, 1 link) finds leaf 0's uplinks all taken: refused
     RESOURCE_EXHAUSTED with nothing changed, and a dry run reports it as
     figures (0 of 1 link placed);
  3. after a restart the stored leaf-spine links still count: C is refused
     again (planned blind to them, it would have been accepted);
  4. once A is released C fits, and releasing everything empties the devices.

usage: test_daemon_share.py BUILD_DIR SOURCE_DIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ocsd_fleet  # noqa: E402

BUILD, SRC = sys.argv[1:3]
TIMEOUT_S = 30

fleet = ocsd_fleet.Fleet(BUILD, SRC, prefix="ocsd-share-")
script = ocsd_fleet.Script("test_daemon_share", fleet)
check = script.check
ocsd_fleet.gen_stubs(os.path.join(SRC, "proto"), os.path.join(fleet.work, "gen"))
import grpc  # noqa: E402
from ocs.v1 import jobs_pb2, jobs_pb2_grpc  # noqa: E402

ACTIVE = jobs_pb2.JobState.Value("JOB_STATE_ACTIVE")
RELEASED = jobs_pb2.JobState.Value("JOB_STATE_RELEASED")


def job(job_id, a, b, links, first_gpu):
    """Two GPUs on each of leaves a and b (8 GPUs per leaf, 2 leaves per pod)."""
    gpus = [jobs_pb2.GpuPlacement(gpu=8 * leaf + first_gpu + k, leaf=leaf, pod=leaf // 2)
            for leaf in (a, b) for k in range(2)]
    return jobs_pb2.JobSpec(
        id=job_id, placement=jobs_pb2.Placement(gpus=gpus),
        leaf_demand=jobs_pb2.LeafDemand(pairs=[jobs_pb2.LeafPair(a=a, b=b, links=links)]))


def xcs(circuits):
    return sorted((x.device, x.in_port, x.out_port) for c in circuits for x in c.cross_connects)


def held():
    devices = fleet.read_devices()
    return devices, sorted((n, i, o) for n, rows in devices.items() for (i, o, _) in rows)


def refused(stub, spec, what):
    try:
        r = stub.SubmitJob(spec, timeout=TIMEOUT_S)
        check(False, f"{what}: answered {r.job.state} {r.job.reason}")
        return ""
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, f"{what}: {e.code()} {e.details()}")
        return e.details()


def main():
    fleet.start_devices()
    fleet.start_ocsd()
    stub = jobs_pb2_grpc.JobsStub(grpc.insecure_channel(fleet.target))

    # 1. two jobs on leaf 0
    a = stub.SubmitJob(job("share-a", 0, 2, 4, 0), timeout=TIMEOUT_S).job
    b = stub.SubmitJob(job("share-b", 0, 4, 4, 2), timeout=TIMEOUT_S).job
    check(a.state == ACTIVE, f"job A: {a.state} {a.reason}")
    check(b.state == ACTIVE, f"job B shares leaf 0: {b.state} {b.reason}")
    check(b.figures.links_placed == 4 and b.figures.max_contention <= 1.0,
          f"job B: {b.figures.links_placed} links placed, contention {b.figures.max_contention}")
    devices, now = held()
    check(now == sorted(xcs(a.circuits) + xcs(b.circuits)), "devices do not hold A and B")
    check(fleet.one_way(devices) == [], "a one-way circuit on the devices")

    # 2. leaf 0 has no uplink left
    why = refused(stub, job("share-c", 0, 6, 1, 4), "job C on a full shared leaf")
    check("uplinks of leaf 0" in why, f"the refusal does not say why: {why}")
    check(held()[1] == now, "a refused job changed the devices")
    plan = stub.PlanJob(job("share-c", 0, 6, 1, 4), timeout=TIMEOUT_S).figures
    check(plan.links_requested == 1 and plan.links_placed == 0,
          f"dry run of C: {plan.links_placed} of {plan.links_requested} placed")

    # 3. the leaf-spine links survive a restart
    check(fleet.stop_ocsd() == 0, "ocsd did not stop cleanly")
    fleet.start_ocsd()
    stub = jobs_pb2_grpc.JobsStub(grpc.insecure_channel(fleet.target))
    why = refused(stub, job("share-c", 0, 6, 1, 4), "job C after a restart")
    check("uplinks of leaf 0" in why, f"after a restart the links are not known: {why}")
    check(held()[1] == now, "the restart or the refusal changed the devices")

    # 4. room again once A is gone
    r = stub.ReleaseJob(jobs_pb2.ReleaseJobRequest(id="share-a"), timeout=TIMEOUT_S).job
    check(r.state == RELEASED, f"release A: {r.state} {r.reason}")
    c = stub.SubmitJob(job("share-c", 0, 6, 1, 4), timeout=TIMEOUT_S).job
    check(c.state == ACTIVE, f"job C after A left: {c.state} {c.reason}")
    devices, now = held()
    check(now == sorted(xcs(b.circuits) + xcs(c.circuits)), "devices do not hold B and C")
    check(fleet.one_way(devices) == [], "a one-way circuit on the devices")
    for j in ("share-b", "share-c"):
        stub.ReleaseJob(jobs_pb2.ReleaseJobRequest(id=j), timeout=TIMEOUT_S)
    check(held()[1] == [], "devices not empty after every release")
    check(fleet.stop_ocsd() == 0, "ocsd did not exit cleanly")


sys.exit(script.run(main))
