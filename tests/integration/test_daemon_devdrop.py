#!/usr/bin/python3
"""test_daemon_devdrop.py - devices that drop their connections do not kill
ocsd (issue H1: with devices on TLS, `kill -9` of ocs-devsim killed ocsd
by SIGPIPE about 2 s later: OpenSSL answered the reset with an alert
written from inside SSL_read, and ocsd did not ignore SIGPIPE).

For each transport (TLS, then SSH) the real ocsd on the lab fleet (16
ocs-devsim devices in one process), reconciliation every second and the
keepalive every second, so that their reads hit the reset:
  1. a job is submitted and released on warm sessions;
  2. idle sessions: ocs-devsim is killed with SIGKILL; ocsd stays alive (the
     process runs and ListDevices answers) for several reconciliation and
     keepalive rounds, and every device is DISCONNECTED;
  3. ocs-devsim starts again on the same ports: every device is CONNECTED
     again, a new job is ACTIVE and the devices hold exactly what
     ListCircuits reports;
  4. in the middle of a transaction: every device's commit hangs (fault
     hang@commit), ocs-devsim is killed with SIGKILL once the job's edits
     are in the candidates; the job ends FAILED (no device can have
     committed: the hang outlasts the kill), ocsd stays alive and reports
     the devices DISCONNECTED; the rollback of the unreachable devices
     gives up at rollback-timeout-ms (10 s), not at the 40 s connect
     timeout;
  5. ocs-devsim starts again: every device CONNECTED, a new job is ACTIVE
     and read back on the devices.

usage: test_daemon_devdrop.py BUILD_DIR SOURCE_DIR
"""
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ocsd_fleet  # noqa: E402

BUILD, SRC = sys.argv[1], sys.argv[2]
SETTLE_S = 15  # keepalive period (1 s here) + backoff + connects, on a loaded machine
RPC_TIMEOUT_MS = 40000  # the hung commit must outlast the kill (see the fleet below)
ROLLBACK_LIMIT_S = 18  # rollback-timeout-ms (10 s) and room for a loaded machine
HOLD_S = 4  # ocsd died about 2 s after the kill (issue H1): watch it longer


def scenario(fleet, check, transport):
    ocsd_fleet.gen_stubs(os.path.join(SRC, "proto"), os.path.join(fleet.work, "gen"))
    import grpc
    from ocs.v1 import fabric_pb2, fabric_pb2_grpc, jobs_pb2, jobs_pb2_grpc

    connected = fabric_pb2.SESSION_STATE_CONNECTED
    disconnected = fabric_pb2.SESSION_STATE_DISCONNECTED

    fleet.start_devices(switch_ms=1)
    fleet.start_ocsd("--keepalive-interval-ms", "1000", reconcile_s=1)
    ch = grpc.insecure_channel(fleet.target)
    jobs = jobs_pb2_grpc.JobsStub(ch)
    fabric = fabric_pb2_grpc.FabricStub(ch)

    def alive(what):
        rc = fleet.ocsd.poll()
        if rc is not None:
            sig = f" (signal {signal.Signals(-rc).name})" if rc < 0 else ""
            check(False, f"{transport}: {what}: ocsd died, exit status {rc}{sig}")
            raise RuntimeError("ocsd died")

    def sessions():
        return {d.name: d.session for d in fabric.ListDevices(
            fabric_pb2.ListDevicesRequest(), timeout=10).devices}

    def wait_all(state, what):
        t0 = time.time()
        while time.time() < t0 + SETTLE_S:
            alive(what)
            s = sessions()
            if all(v == state for v in s.values()):
                print(f"{transport}: {what}: every device {fabric_pb2.SessionState.Name(state)} "
                      f"after {time.time() - t0:.1f} s", flush=True)
                return
            time.sleep(0.1)
        bad = {k: fabric_pb2.SessionState.Name(v) for k, v in sessions().items() if v != state}
        check(False, f"{transport}: {what}: not every device "
              f"{fabric_pb2.SessionState.Name(state)}: {bad}")

    def hold(what):
        """ocsd stays alive and answers for HOLD_S while the devices are gone."""
        t_end = time.time() + HOLD_S
        while time.time() < t_end:
            alive(what)
            sessions()
            time.sleep(0.2)
        print(f"{transport}: {what}: ocsd alive {HOLD_S} s after the kill", flush=True)

    def spec(job_id, a, b):
        gpus = [jobs_pb2.GpuPlacement(gpu=8 * leaf + k, leaf=leaf, pod=leaf // 2)
                for leaf in (a, b) for k in range(2)]
        return jobs_pb2.JobSpec(
            id=job_id, placement=jobs_pb2.Placement(gpus=gpus),
            leaf_demand=jobs_pb2.LeafDemand(pairs=[jobs_pb2.LeafPair(a=a, b=b, links=2)]))

    def submit(job_id, a, b):
        r = jobs.SubmitJob(spec(job_id, a, b), timeout=60)
        check(r.job.state == jobs_pb2.JOB_STATE_ACTIVE,
              f"{transport}: {job_id} is {jobs_pb2.JobState.Name(r.job.state)}: {r.job.reason}")

    def release(job_id):
        r = jobs.ReleaseJob(jobs_pb2.ReleaseJobRequest(id=job_id), timeout=60)
        check(r.job.state == jobs_pb2.JOB_STATE_RELEASED,
              f"{transport}: release {job_id}: {jobs_pb2.JobState.Name(r.job.state)} "
              f"{r.job.reason}")

    def devices_match(what):
        """The devices hold exactly what ListCircuits reports, and something."""
        circuits = fabric.ListCircuits(fabric_pb2.ListCircuitsRequest(), timeout=10).circuits
        reported = sorted((x.device, x.in_port, x.out_port)
                          for c in circuits for x in c.cross_connects)
        devices = fleet.read_devices()
        have = sorted((name, i, o) for name, rows in devices.items() for (i, o, _) in rows)
        check(have == reported and len(have) > 0,
              f"{transport}: {what}: devices hold {have}, ocsd reports {reported}")
        check(fleet.one_way(devices) == [],
              f"{transport}: {what}: one-way circuits {fleet.one_way(devices)}")

    def kill_devices():
        fleet.devsim_proc.send_signal(signal.SIGKILL)
        fleet.devsim_proc.wait()

    wait_all(connected, "at start")
    submit("warm", 0, 2)
    release("warm")

    # 2. idle sessions reset under the keepalive and the reconciliation
    kill_devices()
    hold("idle devices killed")
    wait_all(disconnected, "idle devices killed")

    # 3. back on the same ports
    fleet.start_devices(switch_ms=1)
    wait_all(connected, "devices restarted")
    submit("after-idle-kill", 1, 3)
    devices_match("after the idle kill")
    release("after-idle-kill")

    # 4. killed while every commit hangs
    fleet.devsim_proc.send_signal(signal.SIGTERM)
    fleet.devsim_proc.wait(timeout=30)
    # a worker per hanging commit: enough left to serve the candidate reads
    fleet.start_devices(1, "--fault", "hang@commit=60000", "--workers", "24")
    wait_all(connected, "with the commit hanging")
    answer = {}

    def submit_killed():
        try:
            answer["r"] = jobs.SubmitJob(spec("mid", 4, 6), timeout=90)
        except grpc.RpcError as e:
            answer["e"] = e

    t = threading.Thread(target=submit_killed)
    t.start()
    # the job's edits in the candidates: validate and commit follow at once,
    # and the commit hangs for 60 s; planning may take seconds under load
    t_wait = time.time() + 60
    while time.time() < t_wait and t.is_alive() and not any(
            fleet.read_device(d, "candidate") for d in range(fleet.N_DEV)):
        time.sleep(0.1)
    check(t.is_alive(), f"{transport}: the submission ended before the kill: {answer}")
    time.sleep(1.0)  # validate, then the commit sent and hanging
    kill_devices()
    t0 = time.time()
    t.join(90)
    check(not t.is_alive(), f"{transport}: the submission did not end after the kill")
    j = jobs.GetJob(jobs_pb2.GetJobRequest(id="mid"), timeout=10).job
    failed_s = time.time() - t0
    print(f"{transport}: killed mid-transaction: job {jobs_pb2.JobState.Name(j.state)} "
          f"{failed_s:.1f} s after the kill ({j.reason})", flush=True)
    # the devices refuse connections: the rollback gives up at
    # rollback-timeout-ms (10 s by default), not at the connect timeout
    # (rpc-timeout-ms, 40 s here; before, each reconnect waited for that)
    check(failed_s < ROLLBACK_LIMIT_S,
          f"{transport}: the rollback of unreachable devices took {failed_s:.1f} s: "
          f"rollback-timeout-ms is 10 s")
    check(j.state == jobs_pb2.JOB_STATE_FAILED,
          f"{transport}: killed mid-transaction: job {jobs_pb2.JobState.Name(j.state)} "
          f"{j.reason}; answer {answer}")
    hold("devices killed mid-transaction")
    wait_all(disconnected, "devices killed mid-transaction")

    # 5. back again: a new job is programmed and read back
    fleet.start_devices(switch_ms=1)
    wait_all(connected, "devices restarted after the mid-transaction kill")
    submit("after-txn-kill", 5, 7)
    devices_match("after the mid-transaction kill")
    alive("the end")
    ch.close()


rc = 0
for transport in ("tls", "ssh"):
    # device RPCs wait 40 s, not 5: the kill must land while the commit
    # hangs, and under load finding the edits in the 16 candidates took
    # longer than 5 s, and once (a fresh-clone CI run, a candidate read
    # timing out) longer than 20 s: the commit then timed out before the kill
    fleet = ocsd_fleet.Fleet(BUILD, SRC, confirm_timeout_s=30, rpc_timeout_ms=RPC_TIMEOUT_MS,
                             prefix=f"ocsd-devdrop-{transport}-", transport=transport)
    script = ocsd_fleet.Script(f"daemon_devdrop ({transport})", fleet)
    t_start = time.time()
    rc |= script.run(lambda: scenario(fleet, script.check, transport))
    print(f"{transport}: {time.time() - t_start:.1f} s", flush=True)
sys.exit(rc)
