"""test_rail_daemon.py - the REAL ocsd on a rail-OCS fabric (issue 12): 6
servers of 4 GPUs, 3 servers per OCS group (the last one a spare), so two
ocs-switch devices of 20 ports on ONE ocs-devsim (--count 2
--unidirectional), driven through the real gRPC API (python3-grpcio) and
ocsctl; after every step both devices are read back over NETCONF with
ncclient (a client nobody here wrote): the joins found there (g -> w and
w -> g) must be exactly what ListRailPorts says, and no cross-connect may be
one-way.

Numbering (solvers/fabric.h): GPU g = server * 4 + rail; rail ports 0..7
belong to servers 0 and 1 (group 0, device rail-ocs-g0), 8..15 to servers 3
and 4 (group 1); servers 2 and 5 are the spares.

Checks, in order:
  - a job submitted while the initial port map's transaction runs waits
    for it (the log says so): when that transaction fails (device 0's edit
    held 2.5 s by hang@edit, device 1 refusing its commit) the job is
    FAILED_PRECONDITION naming the reason and nothing is on the devices;
    one waiting when ocsd is stopped is UNAVAILABLE; after a restart, with device 0's commit held 3 s, the job submitted at
    once is ACTIVE after the map is programmed, never refused as a spare;
  - start-up on empty devices: the initial port map is programmed (GPU r
    of every active server on its rail port r);
  - rail jobs: A holds GPUs 0,1,2, B holds 4..7; a GPU held by another job
    is FAILED_PRECONDITION naming GPU and job; a spare's GPU and an
    unknown GPU are refused;
  - `ocsctl gpu replace 1` (case 1): idle GPU 3 takes rail port 1, job A
    is told (Job.gpus, Job.gpu_moves), GPU 1 is faulty and joined to nothing;
  - `ocsctl gpu replace 5` (case 2): server 1's four rail ports move to the
    spare server 2 in one transaction; job B holds 8..11; Watch shows the
    RailEvent with the moves;
  - refusals, each with a clear error and nothing changed (ListRailPorts,
    the faulty GPUs and both devices read back compared before and after):
    no idle GPU and no spare (RESOURCE_EXHAUSTED), an unknown GPU
    (INVALID_ARGUMENT), a GPU on a drained device (FAILED_PRECONDITION);
  - `ocsctl gpu heal 5`: server 1 is a spare again, and the next case-2
    swap (GPU 0) moves server 0's ports onto it;
  - a GPU fault from the device: ocs-devsim `fail-port=P` on GPU 13's port
    sends port-state-change; ocsd swaps it out (RailEvent source device,
    GpuEvent), light back (clearing the knob) leaves it faulty;
  - kill -9 while a case-2 swap hangs in one device's confirm
    (hang@confirm), and again in its commit (hang@commit): after each
    restart all of the server's rail ports have moved or none have, on the
    devices as in ListRailPorts, and the job's GPUs agree.

usage: test_rail_daemon.py BUILD_DIR SOURCE_DIR
"""
import atexit
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ocsd_fleet  # noqa: E402
import rail_helpers  # noqa: E402

BUILD, SRC = sys.argv[1:3]
FLEET = ocsd_fleet.RailFleet(BUILD, SRC, prefix="ocsd-rail-test-")
atexit.register(FLEET.remove)
ocsd_fleet.gen_stubs(os.path.join(SRC, "proto"), os.path.join(FLEET.work, "gen"))
import grpc  # noqa: E402
from ocs.v1 import events_pb2  # noqa: E402
from ocs.v1 import fabric_pb2  # noqa: E402
from ocs.v1 import jobs_pb2  # noqa: E402

TIMEOUT_S = rail_helpers.TIMEOUT_S
FAILURES = []
OCSCTL = os.path.join(BUILD, "northbound", "ocsctl", "ocsctl")
KIND = fabric_pb2.RailSwapKind


def swaps():
    """ocsd_rail_swaps_total by kind, from a scrape of /metrics."""
    prefix = 'ocsd_rail_swaps_total{kind="'
    return {line[len(prefix):].split('"')[0]: float(line.split()[-1])
            for line in FLEET.metrics().splitlines() if line.startswith(prefix)}


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILURES.append(what)
    return cond


def Client():
    return rail_helpers.Client(FLEET)


def ocsctl(*args):
    return rail_helpers.ocsctl(OCSCTL, FLEET.target, *args)


def initial_map():
    return rail_helpers.initial_map(FLEET)


def check_devices(client, what):
    """Both devices read with ncclient agree with ListRailPorts, no one-way."""
    joins, one_way = FLEET.port_map()
    ports, _ = client.ports()
    want = {p: g for p, g in ports.items() if g >= 0}
    check(joins == want and not one_way,
          f"{what}: the devices hold exactly ListRailPorts' joins, no one-way circuit" +
          ("" if joins == want else f" (devices {joins}, ListRailPorts {want})") +
          (f" one-way: {one_way}" if one_way else ""))
    return joins


def wait_map(client, timeout=TIMEOUT_S):
    deadline = time.time() + timeout
    while time.time() < deadline:
        ports, _ = client.ports()
        if any(g >= 0 for g in ports.values()):
            return ports
        time.sleep(0.1)
    return {}


def expect_refusal(client, gpu, code, words, what):
    """ReplaceGpu(gpu) refused with code and words; nothing changed."""
    before_ports, before_faulty = client.ports()
    before_dev = FLEET.port_map()
    try:
        client.fabric.ReplaceGpu(fabric_pb2.ReplaceGpuRequest(gpu=gpu), timeout=TIMEOUT_S)
        check(False, f"{what}: refused")
        return
    except grpc.RpcError as e:
        check(e.code() == code and all(w in e.details() for w in words),
              f"{what}: {code.name} saying {words} ({e.code().name}: {e.details()})")
    after_ports, after_faulty = client.ports()
    check(after_ports == before_ports and after_faulty == before_faulty,
          f"{what}: ListRailPorts and the faulty GPUs unchanged")
    check(FLEET.port_map() == before_dev, f"{what}: the devices unchanged")


def jobs_wait_for_map():
    """A job submitted while the initial port map's transaction runs waits for
    its end: refused with the reason when it failed, ACTIVE when it was
    programmed. Leaves ocsd running on the programmed map, job-a holding 0,1,2."""
    FLEET.set_faults(0, "hang@edit=2500")
    FLEET.set_faults(1, "refuse@commit")
    FLEET.start_ocsd()
    c = Client()
    t0 = time.time()
    try:
        c.submit("job-a", [0, 1, 2])
        check(False, "a job submitted while the initial map fails is refused")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.FAILED_PRECONDITION and
              "placement.gpus" in e.details() and
              "the rail port map is not on the devices: programming the initial port map "
              "failed" in e.details(),
              "a job submitted while the initial map fails: FAILED_PRECONDITION naming the "
              f"reason ({e.code().name}: {e.details()})")
    log = FLEET.log()
    check("job requests wait until the rail port map is programmed" in log and
          time.time() - t0 > 2,
          f"the job waited for the map's transaction ({time.time() - t0:.1f} s)")
    check(FLEET.port_map() == ({}, []), "the failed initial map left the devices empty")
    check(FLEET.stop_ocsd() == 0, "ocsd stops cleanly")

    # ocsd stopped while a job waits: the job is told, UNAVAILABLE
    FLEET.set_faults(0, "hang@edit=2500")
    FLEET.set_faults(1, "refuse@commit")
    starts = FLEET.log().count("job requests wait until the rail port map is programmed")
    FLEET.start_ocsd()
    c = Client()
    pb = jobs_pb2
    waiting = c.jobs.SubmitJob.future(pb.JobSpec(id="job-z", placement=pb.Placement(
        gpus=[pb.GpuPlacement(gpu=g) for g in (4, 5)])), timeout=TIMEOUT_S)
    deadline = time.time() + TIMEOUT_S
    while (FLEET.log().count("job requests wait until the rail port map is programmed") == starts
           and time.time() < deadline):
        time.sleep(0.05)
    rc = FLEET.stop_ocsd()
    try:
        waiting.result()
        check(False, "a job waiting for the map when ocsd stops is refused")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.UNAVAILABLE and "shutting down" in e.details(),
              "a job waiting for the map when ocsd stops: UNAVAILABLE "
              f"({e.code().name}: {e.details()})")
    check(rc == 0 and FLEET.port_map() == ({}, []),
          f"ocsd stops cleanly ({rc}), the devices still empty")

    FLEET.set_faults(1, "")
    FLEET.set_faults(0, "hang@commit=3000")
    FLEET.start_ocsd()
    c = Client()
    t0 = time.time()
    a = c.submit("job-a", [0, 1, 2])
    waited = time.time() - t0
    check(a.state == jobs_pb2.JOB_STATE_ACTIVE and list(a.gpus) == [0, 1, 2],
          f"a job submitted at once after start is ACTIVE holding 0,1,2 ({a.state}, "
          f"{list(a.gpus)}, after {waited:.1f} s)")
    log = FLEET.log().split("=== start")[-1]
    programmed, active = log.find("rail port map programmed"), log.find("job ACTIVE")
    check(0 <= programmed < active,
          "it was answered once the map was programmed (the log in that order)")
    return c


def main():
    FLEET.start_devices()
    c = jobs_wait_for_map()
    w = ocsd_fleet.Watcher(c.events.Watch(events_pb2.WatchRequest(rings=True)), TIMEOUT_S)

    # ---- start-up: the initial port map on empty devices
    ports = wait_map(c)
    check(ports == initial_map(), f"initial port map programmed ({ports})")
    check_devices(c, "initial map")

    # ---- rail jobs
    b = c.submit("job-b", [4, 5, 6, 7])
    check(b.state == jobs_pb2.JOB_STATE_ACTIVE, "job-b ACTIVE holding 4..7")
    for gpus, code, words, what in (
            ([3, 0], grpc.StatusCode.FAILED_PRECONDITION, ["gpu 0", "job-a"], "a held GPU"),
            ([8], grpc.StatusCode.FAILED_PRECONDITION, ["gpu 8", "spare"], "a spare's GPU"),
            ([24], grpc.StatusCode.INVALID_ARGUMENT, ["placement.gpus[0].gpu"], "unknown GPU")):
        try:
            c.submit("job-c", gpus)
            check(False, f"submit with {what} refused")
        except grpc.RpcError as e:
            check(e.code() == code and all(x in e.details() for x in words),
                  f"submit with {what}: {code.name} ({e.code().name}: {e.details()})")

    # ---- case 1 by ocsctl
    rc, out, err = ocsctl("gpu", "replace", "1")
    swap = (out or {}).get("swap", {})
    check(rc == 0 and swap.get("kind") == "RAIL_SWAP_KIND_IDLE_GPU" and
          int(swap.get("idle_gpu", -1)) == 3,
          f"ocsctl gpu replace 1: case 1, idle GPU 3 took over ({rc} {out} {err})")
    ports, faulty = c.ports()
    check(ports[1] == 3 and ports[3] == -1 and faulty == [1],
          f"case 1: rail port 1 on GPU 3, port 3 dark, GPU 1 faulty ({ports}, {faulty})")
    a = c.job("job-a")
    check(list(a.gpus) == [0, 3, 2] and [(m.old_gpu, m.new_gpu) for m in a.gpu_moves] ==
          [(1, 3)], f"case 1: job-a told its new GPU ({list(a.gpus)}, {a.gpu_moves})")
    joins = check_devices(c, "case 1")
    check(1 not in joins.values(), "case 1: GPU 1 is joined to nothing on the devices")

    # ---- case 2 by ocsctl
    rc, out, err = ocsctl("gpu", "replace", "5")
    swap = (out or {}).get("swap", {})
    check(rc == 0 and swap.get("kind") == "RAIL_SWAP_KIND_SPARE_SERVER" and
          swap.get("spare_server") == 2,
          f"ocsctl gpu replace 5: case 2 onto spare server 2 ({rc} {out} {err})")
    ev = w.wait(lambda e: e.WhichOneof("kind") == "rail" and e.rail.swap.failed_gpu == 5)
    check(ev is not None and len(ev.rail.swap.moves) == 4 and
          {(m.old_gpu, m.new_gpu, m.job_id) for m in ev.rail.swap.moves} ==
          {(4, 8, "job-b"), (5, 9, "job-b"), (6, 10, "job-b"), (7, 11, "job-b")} and
          ev.rail.reaction_us >= ev.rail.devices_us > 0,
          f"case 2: RailEvent with the four moves of job-b ({ev})")
    ports, _ = c.ports()
    check([ports[p] for p in range(4, 8)] == [8, 9, 10, 11],
          f"case 2: rail ports 4..7 on the spare's GPUs 8..11 ({ports})")
    check(list(c.job("job-b").gpus) == [8, 9, 10, 11], "case 2: job-b holds 8..11")
    check_devices(c, "case 2")
    n = swaps()
    check(n == {"idle-gpu": 1, "spare-server": 1, "refused": 0},
          f"ocsd_rail_swaps_total: one swap of each case, nothing refused ({n})")

    # ---- refusals: nothing changes
    expect_refusal(c, 0, grpc.StatusCode.RESOURCE_EXHAUSTED,
                   ["no idle GPU in server 0", "no idle spare in group 0"],
                   "no idle GPU and no spare")
    expect_refusal(c, 24, grpc.StatusCode.INVALID_ARGUMENT, ["gpu"], "unknown GPU")
    c.fabric.DrainDevice(fabric_pb2.DrainDeviceRequest(device="rail-ocs-g1", force=True),
                         timeout=TIMEOUT_S)
    expect_refusal(c, 13, grpc.StatusCode.FAILED_PRECONDITION, ["rail-ocs-g1", "drained"],
                   "a GPU on a drained device")
    bad = ocsd_fleet.fabric_counter_problems(c.fabric, fabric_pb2, TIMEOUT_S)
    check(not bad, f"GetFabric's device counters agree with ListDevices, one drained {bad}")
    c.fabric.UndrainDevice(fabric_pb2.UndrainDeviceRequest(device="rail-ocs-g1"),
                           timeout=TIMEOUT_S)

    # ---- heal: server 1 is a spare again
    rc, out, err = ocsctl("gpu", "heal", "5")
    ev = w.wait(lambda e: e.WhichOneof("kind") == "gpu" and e.gpu.gpu == 5)
    check(rc == 0 and ev is not None and
          ev.gpu.condition == fabric_pb2.GPU_CONDITION_HEALTHY,
          f"ocsctl gpu heal 5: GpuEvent healthy ({rc} {err})")
    rc, out, err = ocsctl("gpu", "replace", "0")
    swap = (out or {}).get("swap", {})
    check(rc == 0 and swap.get("kind") == "RAIL_SWAP_KIND_SPARE_SERVER" and
          swap.get("spare_server") == 1,
          f"the healed server 1 took over server 0's ports ({rc} {out} {err})")
    check(list(c.job("job-a").gpus) == [4, 5, 6], "job-a now on server 1 (GPUs 4,5,6)")
    check_devices(c, "case 2 onto a healed server")

    # ---- a GPU fault from the device (port-state-change)
    dev, port = FLEET.gpu_port(13)
    FLEET.set_faults(dev, f"fail-port={port}")
    ev = w.wait(lambda e: e.WhichOneof("kind") == "rail" and e.rail.swap.failed_gpu == 13)
    check(ev is not None and ev.rail.source == "device" and
          ev.rail.swap.kind == KIND.RAIL_SWAP_KIND_IDLE_GPU,
          f"fail-port on GPU 13: swapped out by the notification ({ev})")
    ports, faulty = c.ports()
    check(13 in faulty and 13 not in ports.values(), f"GPU 13 faulty, on no port ({ports})")
    n = swaps()
    check(n == {"idle-gpu": 2, "spare-server": 2, "refused": 0},
          f"ocsd_rail_swaps_total: the device's fault counted, refused ReplaceGpu not ({n})")
    check_devices(c, "device-reported fault")
    FLEET.set_faults(dev, "")  # light back
    time.sleep(0.5)
    check(13 in c.ports()[1], "light back: GPU 13 stays faulty until marked healthy")

    # ---- kill -9 during a case-2 swap
    ports, _ = c.ports()
    server3 = [g for g in range(12, 16) if g in ports.values()]
    c.submit("job-e", server3)
    FLEET.set_faults(1, "hang@confirm=8000")
    before = dict(ports)
    t = threading.Thread(target=lambda: ocsctl("gpu", "replace", str(server3[0])), daemon=True)
    t.start()
    time.sleep(2.0)
    FLEET.kill_ocsd()
    w.close()
    FLEET.set_faults(1, "")
    FLEET.start_ocsd()
    c = Client()
    ports, _ = c.ports()
    moved = [p for p in range(8, 12) if ports[p] != before[p]]
    check(len(moved) in (0, 4),
          f"kill -9 in a case-2 swap: all of server 3's ports moved or none ({moved})")
    e = c.job("job-e")
    held = [p for p in range(8, 12) if before[p] in server3]
    check(sorted(e.gpus) == sorted(ports[p] for p in held),
          f"job-e holds exactly the GPUs now on its rail ports ({list(e.gpus)}, {ports})")
    check_devices(c, "after kill -9 and restart")

    # ---- kill -9 again, the swap held before its commit this time: server 4's
    # ports onto server 3 (a spare again once GPU 13 is healed)
    rc, _, err = ocsctl("gpu", "heal", "13")
    check(rc == 0, f"gpu heal 13 ({err})")
    c.submit("job-g", [16, 17, 18, 19])
    before, _ = c.ports()
    FLEET.set_faults(1, "hang@commit=8000")
    t = threading.Thread(target=lambda: ocsctl("gpu", "replace", "17"), daemon=True)
    t.start()
    time.sleep(2.0)
    FLEET.kill_ocsd()
    FLEET.set_faults(1, "")
    FLEET.start_ocsd()
    c = Client()
    ports, _ = c.ports()
    moved = [p for p in range(12, 16) if ports[p] != before[p]]
    check(len(moved) in (0, 4),
          f"kill -9 before a case-2 commit: all of server 4's ports moved or none ({moved})")
    check(sorted(c.job("job-g").gpus) == sorted(ports[p] for p in range(12, 16)),
          f"job-g holds exactly the GPUs on server 4's ports ({list(c.job('job-g').gpus)})")
    check_devices(c, "after the second kill -9")
    check(FLEET.stop_ocsd() == 0, "ocsd stops cleanly")


def run():
    try:
        main()
    except Exception as e:  # reported with the daemon's log
        FAILURES.append(repr(e))
        print("ERROR:", repr(e), flush=True)
    finally:
        if FAILURES:
            FLEET.dump_logs(80)
        FLEET.close()
    print("test_rail_daemon:", "FAILED" if FAILURES else "passed",
          f"({len(FAILURES)} failure(s))")
    return 1 if FAILURES else 0


sys.exit(run())
