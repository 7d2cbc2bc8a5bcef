#!/usr/bin/python3
"""test_daemon_devrestart.py - a device that restarts under a running ocsd
(issue 14 finding 6, issue 13 "warm start").

The real ocsd on the lab fleet (16 ocs-devsim devices, one process), with
reconciliation far apart (--reconcile-interval-s 600) so that only the
transaction sessions and their keepalive are exercised:
  1. a job is submitted and released on warm sessions;
  2. ocs-devsim stops cleanly (SIGTERM): within a few seconds, without any
     submission, ListDevices says every device is DISCONNECTED and a
     DeviceEvent says so on Watch;
  3. ocs-devsim starts again on the same ports: every device is CONNECTED
     again within a few seconds (the keepalive replaced the sessions in the
     background, ocsd_device_reconnects_total counts one per device), and
     the next submission is ACTIVE at its first try (the issue saw `lock:
     session lost`, 8 of 8 tries);
  4. the same after `kill -9` of ocs-devsim and a restart that follows at
     once (faster than the keepalive notices): the submission is ACTIVE at
     its first try, the dead sessions replaced before or during prepare;
  5. the devices hold exactly what `ocsctl circuits` reports;
  6. `kill -9` of ocs-devsim while every device hangs in the confirm (fault
     hang@confirm), restarted only after the transaction's rollback gave up
     (ROLLBACK NOT PROVEN, the job FAILED, its intent `failed` in the
     store): once the devices answer again the keepalive reads them back
     and settles the intent `rolled_back`, and the devices match the store.

usage: test_daemon_devrestart.py BUILD_DIR SOURCE_DIR
"""
import os
import queue
import re
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ocsd_fleet  # noqa: E402

BUILD, SRC = sys.argv[1], sys.argv[2]
SETTLE_S = 15  # keepalive period (1 s here) + backoff + connects, on a loaded machine

fleet = ocsd_fleet.Fleet(BUILD, SRC, confirm_timeout_s=30, prefix="ocsd-devrestart-")
script = ocsd_fleet.Script("daemon_devrestart", fleet)
check = script.check


def main():
    ocsd_fleet.gen_stubs(os.path.join(SRC, "proto"), os.path.join(fleet.work, "gen"))
    import grpc
    from ocs.v1 import events_pb2, events_pb2_grpc, fabric_pb2, fabric_pb2_grpc
    from ocs.v1 import jobs_pb2, jobs_pb2_grpc

    connected = fabric_pb2.SESSION_STATE_CONNECTED
    disconnected = fabric_pb2.SESSION_STATE_DISCONNECTED

    fleet.start_devices(switch_ms=1)
    extra = [] if os.environ.get("DEVRESTART_NO_KEEPALIVE") else [
        "--keepalive-interval-ms", "1000"]
    fleet.start_ocsd(*extra, reconcile_s=600)
    ch = grpc.insecure_channel(fleet.target)
    jobs = jobs_pb2_grpc.JobsStub(ch)
    fabric = fabric_pb2_grpc.FabricStub(ch)
    events = queue.Queue()

    def watch():
        try:
            for ev in events_pb2_grpc.EventsStub(ch).Watch(events_pb2.WatchRequest()):
                if ev.HasField("device"):
                    events.put((ev.device.device, ev.device.session))
        except grpc.RpcError:
            pass

    threading.Thread(target=watch, daemon=True).start()

    def sessions():
        return {d.name: d.session for d in fabric.ListDevices(
            fabric_pb2.ListDevicesRequest(), timeout=10).devices}

    def wait_all(state, what):
        t0 = time.time()
        deadline = t0 + SETTLE_S
        while time.time() < deadline:
            s = sessions()
            if all(v == state for v in s.values()):
                print(f"{what}: every device {fabric_pb2.SessionState.Name(state)} after "
                      f"{time.time() - t0:.1f} s", flush=True)
                return True
            time.sleep(0.1)
        bad = {k: fabric_pb2.SessionState.Name(v) for k, v in sessions().items() if v != state}
        check(False, f"{what}: not every device {fabric_pb2.SessionState.Name(state)}: {bad}")
        return False

    def spec(job_id, a, b):
        gpus = [jobs_pb2.GpuPlacement(gpu=8 * leaf + k, leaf=leaf, pod=leaf // 2)
                for leaf in (a, b) for k in range(2)]
        return jobs_pb2.JobSpec(
            id=job_id, placement=jobs_pb2.Placement(gpus=gpus),
            leaf_demand=jobs_pb2.LeafDemand(pairs=[jobs_pb2.LeafPair(a=a, b=b, links=2)]))

    def submit(job_id, a, b, what):
        t0 = time.time()
        r = jobs.SubmitJob(spec(job_id, a, b), timeout=60)
        print(f"{what}: {job_id} {jobs_pb2.JobState.Name(r.job.state)} in "
              f"{(time.time() - t0) * 1000:.0f} ms", flush=True)
        check(r.job.state == jobs_pb2.JOB_STATE_ACTIVE,
              f"{what}: {job_id} is {jobs_pb2.JobState.Name(r.job.state)}: {r.job.reason}")
        return r.job.state == jobs_pb2.JOB_STATE_ACTIVE

    def release(job_id):
        r = jobs.ReleaseJob(jobs_pb2.ReleaseJobRequest(id=job_id), timeout=60)
        check(r.job.state == jobs_pb2.JOB_STATE_RELEASED,
              f"release {job_id}: {jobs_pb2.JobState.Name(r.job.state)} {r.job.reason}")

    wait_all(connected, "at start")
    if submit("warm", 0, 2, "warm sessions"):
        release("warm")

    # 2. a clean stop: the keepalive notices without any submission
    while not events.empty():
        events.get()
    fleet.devsim_proc.send_signal(signal.SIGTERM)
    fleet.devsim_proc.wait(timeout=30)
    wait_all(disconnected, "after ocs-devsim stopped")
    # ListDevices can say DISCONNECTED before the last DeviceEvents reach
    # this client's Watch thread: wait for them, within the same bound
    seen = set()
    deadline = time.time() + SETTLE_S
    while len(seen) < fleet.N_DEV and time.time() < deadline:
        try:
            name, state = events.get(timeout=0.2)
        except queue.Empty:
            continue
        if state == disconnected:
            seen.add(name)
    check(len(seen) == fleet.N_DEV, f"DeviceEvent DISCONNECTED for {len(seen)} of "
          f"{fleet.N_DEV} devices")

    # 3. back on the same ports: sessions replaced in the background
    fleet.start_devices(switch_ms=1)
    wait_all(connected, "after ocs-devsim restarted")
    if submit("after-restart", 1, 3, "after a clean restart"):
        release("after-restart")
    # every device's session was replaced once (the keepalive's pass counts it)
    deadline = time.time() + SETTLE_S
    while time.time() < deadline:
        counts = {m.group(1): float(m.group(2)) for m in re.finditer(
            r'^ocsd_device_reconnects_total\{device="([^"]+)"\} (\S+)$', fleet.metrics(), re.M)}
        if len(counts) == fleet.N_DEV and all(v >= 1 for v in counts.values()):
            break
        time.sleep(0.2)
    check(len(counts) == fleet.N_DEV and all(v >= 1 for v in counts.values()),
          f"ocsd_device_reconnects_total after the restart: {counts}")

    # 4. kill -9 and an immediate restart: the dead sessions are found
    # before (or replaced during) prepare, never a failed submission
    fleet.devsim_proc.send_signal(signal.SIGKILL)
    fleet.devsim_proc.wait()
    fleet.start_devices(switch_ms=1)
    held = submit("after-kill", 4, 6, "after kill -9 and a restart")

    # 5. devices against ocsd's circuits
    circuits = fabric.ListCircuits(fabric_pb2.ListCircuitsRequest(), timeout=10).circuits
    reported = sorted((x.device, x.in_port, x.out_port)
                      for c in circuits for x in c.cross_connects)
    devices = fleet.read_devices()
    have = sorted((name, i, o) for name, rows in devices.items() for (i, o, _) in rows)
    check(have == reported, f"devices hold {have}, ocsd reports {reported}")
    check((len(have) > 0) == held, f"{len(have)} cross-connects on the devices")
    check(fleet.one_way(devices) == [], f"one-way circuits {fleet.one_way(devices)}")
    if held:
        release("after-kill")

    # 6. the device dies between commit and confirm and stays away longer
    # than the rollback's deadline (10 s): not provable then, settled later
    fleet.devsim_proc.send_signal(signal.SIGTERM)
    fleet.devsim_proc.wait(timeout=30)
    fleet.start_devices(1, "--fault", "hang@confirm=30000")
    wait_all(connected, "with the confirm hanging")
    answer = {}

    def submit_killed():
        try:
            answer["r"] = jobs.SubmitJob(spec("killed", 5, 7), timeout=90)
        except grpc.RpcError as e:
            answer["e"] = e

    t = threading.Thread(target=submit_killed)
    t.start()
    # kill once the confirmed commit is on the device (its running datastore
    # holds the job's cross-connects) and the confirm hangs; planning and
    # prepare may take seconds on a loaded machine, so wait for it, not a time
    t_wait = time.time() + 60
    while time.time() < t_wait and not any(fleet.read_devices().values()):
        time.sleep(0.2)
    check(any(fleet.read_devices().values()), "the confirmed commit never reached the device")
    time.sleep(0.5)  # the read-back passes and the confirm is sent
    fleet.devsim_proc.send_signal(signal.SIGKILL)
    fleet.devsim_proc.wait()
    t.join(90)
    # the answer is INTERNAL naming the unproven rollback, the job FAILED
    e = answer.get("e")
    check(e is not None and e.code() == grpc.StatusCode.INTERNAL
          and "ROLLBACK NOT PROVEN" in e.details(), f"killed in the confirm: {answer}")
    j = jobs.GetJob(jobs_pb2.GetJobRequest(id="killed"), timeout=10).job
    check(j.state == jobs_pb2.JOB_STATE_FAILED,
          f"killed in the confirm: job {jobs_pb2.JobState.Name(j.state)} {j.reason}")
    check(intent_states("killed") == ["failed"],
          f"intent of the killed job before the devices return: {intent_states('killed')}")
    fleet.start_devices(switch_ms=1)
    t0 = time.time()
    deadline = t0 + SETTLE_S
    while time.time() < deadline and intent_states("killed") != ["rolled_back"]:
        time.sleep(0.1)
    print(f"intent settled {time.time() - t0:.1f} s after the devices came back", flush=True)
    check(intent_states("killed") == ["rolled_back"],
          f"intent of the killed job once the devices are back: {intent_states('killed')}")
    circuits = fabric.ListCircuits(fabric_pb2.ListCircuitsRequest(), timeout=10).circuits
    devices = fleet.read_devices()
    have = sorted((name, i, o) for name, rows in devices.items() for (i, o, _) in rows)
    check(have == [] and len(circuits) == 0,
          f"after the settle: devices hold {have}, ocsd reports {len(circuits)} circuits")
    check("rollback proven after the devices came back" in fleet.log(),
          "the settle is not logged")
    ch.close()


def intent_states(job_id):
    """The states of job_id's intents in ocsd's store (read with SQLite)."""
    import sqlite3
    db = sqlite3.connect(os.path.join(fleet.state_dir, "ocsd.db"), timeout=10)
    try:
        return [row[0] for row in db.execute(
            "SELECT state FROM intents WHERE job_id = ? ORDER BY txn_id", (job_id,))]
    finally:
        db.close()


sys.exit(script.run(main))
