#!/usr/bin/python3
"""test_daemon_delta.py - the REAL ocsd on the lab fabric (16 ocs-devsim
devices) with DAG-aware planning, driven by python3-grpcio (stubs generated
at test time) and by ocsctl, the devices read back over NETCONF with
ncclient.

Checks:
  - a parallelism spec (deploy/jobs/lab-delta.json) with planner
    delta-fast: never slower than the baselines prop-alloc, sqrt-alloc and
    iter-halve planned through the API; PlanJob figures (makespan, NCT, ports used and saved,
    generations) agree between grpcio and `ocsctl --json job plan`, and
    touch no device; `ocsctl job submit` makes the job ACTIVE with exactly
    its circuits on the devices; the plan-duration histogram has a
    "delta-fast" series; the job owns the leaves of its GPUs;
  - restart: the job is still ACTIVE on the same circuits; released, it
    leaves the devices empty; submitted again it is planned again from the
    stored request alone, onto the same circuits (deterministic search);
  - kill -9 at 4 points of a parallelism submission: after the restart the
    job is unknown (not stored yet) or settles ACTIVE, re-planned from its
    stored request when its transaction was rolled back, and the devices
    hold exactly its circuits;
  - bad specs are INVALID_ARGUMENT naming the field (TP not dividing the
    heads, zero bandwidth, GPUs in the wrong pods, DP against the GPU
    count, pods beyond the fabric, a leaf planner) and create no job,
    through grpcio and ocsctl;
  - drains also hold for plans allowed to move other jobs' circuits, and
    such a plan keeps the other jobs' circuits (each job owns its own:
    releasing one leaves exactly the other's on the devices);
  - ListDevices session state: connected; a device whose server dies turns
    disconnected with the error and since when; back, it is connected.

usage: test_daemon_delta.py BUILD_DIR SOURCE_DIR
"""
import atexit
import json
import os
import re
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ocsd_fleet  # noqa: E402
import testports  # noqa: E402

BUILD, SRC = sys.argv[1:3]
del sys.argv[1:3]  # leave unittest's own arguments
TIMEOUT_S = 60
OCSCTL = os.path.join(BUILD, "northbound", "ocsctl", "ocsctl")
JOB_FILE = os.path.join(SRC, "deploy", "jobs", "lab-delta.json")

FLEET = ocsd_fleet.Fleet(BUILD, SRC, prefix="ocsd-delta-")
atexit.register(FLEET.remove)
ocsd_fleet.gen_stubs(os.path.join(SRC, "proto"), os.path.join(FLEET.work, "gen"))
import grpc  # noqa: E402
from google.protobuf import json_format  # noqa: E402
from ocs.v1 import fabric_pb2, fabric_pb2_grpc  # noqa: E402
from ocs.v1 import jobs_pb2, jobs_pb2_grpc  # noqa: E402

INVALID = grpc.StatusCode.INVALID_ARGUMENT
EXTRA_DEVSIMS = []


def delta_job(job_id="lab-delta", edit=None):
    with open(JOB_FILE) as f:
        doc = json.load(f)
    if doc["id"] != job_id:
        doc["id"] = job_id
        doc.pop("idempotency_key", None)
    if edit:
        edit(doc)
    return doc


def spec_of(doc):
    return json_format.ParseDict(doc, jobs_pb2.JobSpec())


def ocsctl(*args, json_out=False):
    cmd = [OCSCTL, "--insecure", "--server", FLEET.target, "--timeout-ms", "60000"]
    if json_out:
        cmd.append("--json")
    r = subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=120)
    out = json.loads(r.stdout) if json_out and r.returncode == 0 else r.stdout
    return r.returncode, out, r.stderr


def write_job(doc, name):
    path = os.path.join(FLEET.work, name)
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


def held():
    devices = FLEET.read_devices()
    return devices, sorted((n, i, o) for n, rows in devices.items() for (i, o, _) in rows)


def xcs_of(circuits):
    return sorted((x.device, x.in_port, x.out_port) for c in circuits for x in c.cross_connects)


def devsim(base, count):
    log = open(os.path.join(FLEET.work, f"devsim-{base}.log"), "w")
    p = subprocess.Popen(
        [FLEET.devsim, "--listen", f"127.0.0.1:{base}", "--count", str(count), "--ports", "8",
         "--user", "ocsd", "--password-file", FLEET.pw_path, "--unidirectional", "--switch-ms", "5"],
        stdout=log, stderr=log)
    log.close()
    EXTRA_DEVSIMS.append(p)
    testports.wait_listening("127.0.0.1", base, "ocs-devsim", 30, count=count, proc=p)
    return p


def setUpModule():
    FLEET.start_devices()
    FLEET.start_ocsd(reconcile_s=1)


def tearDownModule():
    rc = FLEET.stop_ocsd()
    FLEET.close()
    for p in EXTRA_DEVSIMS:
        if p.poll() is None:
            p.terminate()
            p.wait(timeout=20)
    if rc != 0:
        FLEET.dump_logs()
        raise AssertionError(f"ocsd exited {rc} on SIGTERM")


class DeltaTest(unittest.TestCase):
    def setUp(self):
        self.channel = grpc.insecure_channel(FLEET.target)
        grpc.channel_ready_future(self.channel).result(timeout=TIMEOUT_S)
        self.jobs = jobs_pb2_grpc.JobsStub(self.channel)
        self.fabric = fabric_pb2_grpc.FabricStub(self.channel)

    def tearDown(self):
        self.channel.close()

    def refused(self, call, req, code, details):
        with self.assertRaises(grpc.RpcError) as cm:
            call(req, timeout=TIMEOUT_S)
        self.assertEqual(cm.exception.code(), code, cm.exception.details())
        self.assertEqual(cm.exception.details(), details)

    def no_job(self, job_id):
        with self.assertRaises(grpc.RpcError) as cm:
            self.jobs.GetJob(jobs_pb2.GetJobRequest(id=job_id), timeout=TIMEOUT_S)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.NOT_FOUND)

    def test_1_bad_specs_name_the_field(self):
        def swap(doc):
            g = doc["placement"]["gpus"]
            g[0], g[4] = g[4], g[0]

        cases = [
            (lambda d: d["parallelism"].update(tp=3),
             "parallelism.tp: TP 3 does not divide 16 heads"),
            (lambda d: d["parallelism"].update(bandwidth_gbps=0),
             "parallelism.bandwidth_gbps: 0 is outside (0, 1e+06]"),
            (lambda d: d["parallelism"].update(dp=8),
             "placement.gpus: TP*PP*DP = 32 but the placement has 16 GPUs"),
            (lambda d: d["parallelism"].update(first_pod=3),
             "parallelism.first_pod: the job needs pods 3..6 but the fabric has 4 pods"),
            (lambda d: d["parallelism"].update(tp=0),
             "parallelism.tp: 0 is outside 1..1024"),
            (lambda d: d["options"].update(planner="leaf-centric"),
             'options.planner: "leaf-centric" plans a leaf_demand, not a parallelism spec '
             "(use delta-fast, prop-alloc, sqrt-alloc or iter-halve)"),
        ]
        for i, (edit, details) in enumerate(cases):
            spec = spec_of(delta_job(f"bad-{i}", edit))
            self.refused(self.jobs.SubmitJob, spec, INVALID, details)
            self.refused(self.jobs.PlanJob, spec, INVALID, details)
            self.no_job(f"bad-{i}")
        # GPUs in the wrong pods: the spec says which pod each rank sits in.
        with self.assertRaises(grpc.RpcError) as cm:
            self.jobs.SubmitJob(spec_of(delta_job("bad-swap", swap)), timeout=TIMEOUT_S)
        self.assertEqual(cm.exception.code(), INVALID)
        self.assertTrue(cm.exception.details().startswith("placement.gpus[0]: "),
                        cm.exception.details())
        self.no_job("bad-swap")
        # One GPU per pod cannot carry the middle stages' two pipeline links.
        def thin(d):
            d["placement"]["gpus"] = [{"gpu": 16 * p, "leaf": 2 * p, "pod": p} for p in range(4)]
            d["parallelism"].update(tp=1, pp=4, gpus_per_pod_per_replica=1)
            del d["parallelism"]["replicas_per_pod_set"]
        self.refused(self.jobs.SubmitJob, spec_of(delta_job("thin", thin)),
                     grpc.StatusCode.RESOURCE_EXHAUSTED,
                     "placement.gpus: pod 1 needs at least 2 ports (one circuit on each of its "
                     "2 pod pairs), budget is 1; nothing was touched")
        self.no_job("thin")
        # Through ocsctl: exit 1 and the status on stderr.
        path = write_job(delta_job("bad-ctl", lambda d: d["parallelism"].update(tp=3)),
                         "bad.json")
        rc, _, err = ocsctl("job", "submit", path)
        self.assertEqual(rc, 1, err)
        self.assertIn("INVALID_ARGUMENT: parallelism.tp: TP 3 does not divide 16 heads", err)
        self.no_job("bad-ctl")

    def test_2_plan_submit_and_own_leaves(self):
        _, before = held()
        self.assertEqual(before, [])
        spec = spec_of(delta_job())
        plan = self.jobs.PlanJob(spec, timeout=TIMEOUT_S)
        fig = plan.figures
        self.assertEqual(fig.planner, "delta-fast")
        self.assertGreater(fig.makespan_ms, 0)
        self.assertGreater(fig.critical_comm_ms, 0)
        self.assertGreaterEqual(fig.nct, 1.0)
        self.assertGreater(fig.generations, 0)
        self.assertGreater(fig.links_requested, 0)
        self.assertEqual(fig.links_placed, fig.links_requested)
        # Every pod-level circuit became one leaf-level link and one circuit.
        self.assertEqual(fig.ports_used, 2 * fig.links_requested)
        self.assertEqual(fig.ports_used + fig.ports_saved, 16)  # the job's 16 GPUs
        self.assertEqual(len(plan.circuits), fig.links_requested)
        self.assertLessEqual(fig.max_contention, 1.0)
        pods = {0: (0, 1), 1: (0, 1), 2: (2, 3), 3: (2, 3)}  # pipeline pods per pod
        for c in plan.circuits:
            self.assertNotEqual(c.pod_a, c.pod_b)
            # PP joins the two pods of a pipeline, DP the same stage's pods of the sets.
            self.assertTrue(c.pod_b in pods[c.pod_a] or (c.pod_a % 2) == (c.pod_b % 2), c)
        # The baselines plan the same spec; DELTA-Fast is never slower than the best.
        best = None
        for name in ("prop-alloc", "sqrt-alloc", "iter-halve"):
            base = self.jobs.PlanJob(spec_of(delta_job(edit=lambda d, n=name: d["options"].update(
                planner=n))), timeout=TIMEOUT_S).figures
            self.assertEqual(base.planner, name)
            self.assertEqual(base.generations, 0)
            self.assertGreater(base.makespan_ms, 0)
            self.assertEqual(base.links_placed, base.links_requested)
            best = base.makespan_ms if best is None else min(best, base.makespan_ms)
        self.assertLessEqual(fig.makespan_ms, best * (1 + 1e-9))
        _, after = held()
        self.assertEqual(after, [], "PlanJob touched a device")

        # ocsctl sees the same plan (same seed, same answer).
        rc, out, err = ocsctl("job", "plan", JOB_FILE, json_out=True)
        self.assertEqual(rc, 0, err)
        for k in ("makespan_ms", "nct", "ports_used", "ports_saved", "generations",
                  "links_requested"):
            self.assertAlmostEqual(float(out["figures"][k]), float(getattr(fig, k)), places=6,
                                   msg=k)
        self.assertEqual(sorted((x["device"], x["in_port"], x["out_port"])
                                for c in out["circuits"] for x in c["cross_connects"]),
                         xcs_of(plan.circuits))
        rc, text, err = ocsctl("job", "plan", JOB_FILE)
        self.assertEqual(rc, 0, err)
        for k in ("makespan_ms", "nct", "ports_used", "ports_saved", "generations"):
            self.assertRegex(text, rf"(?m)^{k} +\S+")

        # Submit through ocsctl: ACTIVE, and the devices hold its circuits.
        rc, text, err = ocsctl("job", "submit", JOB_FILE)
        self.assertEqual(rc, 0, err)
        self.assertIn("submitted", text)
        job = self.jobs.GetJob(jobs_pb2.GetJobRequest(id="lab-delta"), timeout=TIMEOUT_S).job
        self.assertEqual(job.state, jobs_pb2.JOB_STATE_ACTIVE, job.reason)
        self.assertEqual(job.spec.WhichOneof("demand"), "parallelism")
        self.assertEqual(job.spec.parallelism.tp, 2)
        self.assertEqual(job.figures.makespan_ms, fig.makespan_ms)
        self.assertEqual(job.figures.ports_used, fig.ports_used)
        self.assertEqual(xcs_of(job.circuits), xcs_of(plan.circuits))
        devices, now = held()
        self.assertEqual(now, xcs_of(job.circuits))
        self.assertEqual(FLEET.one_way(devices), [])
        rc, text, err = ocsctl("job", "show", "lab-delta")
        self.assertEqual(rc, 0, err)
        self.assertIn("parallelism  tp 2, pp 2", text)
        self.assertRegex(text, r"(?m)^ports_saved +\d+")

        # The histogram has the planner's series.
        m = re.search(r'ocsd_plan_duration_seconds_count\{planner="delta-fast"\} (\d+)',
                      FLEET.metrics())
        self.assertIsNotNone(m)
        self.assertGreaterEqual(int(m.group(1)), 2)

        # Same request again: the existing job; a leaf job on its leaves shares
        # them, planned around the parallelism job's leaf-spine links.
        again = self.jobs.SubmitJob(spec_of(delta_job()), timeout=TIMEOUT_S)
        self.assertFalse(again.created)
        leaf_job = jobs_pb2.JobSpec(
            id="leafy", placement=jobs_pb2.Placement(gpus=[
                jobs_pb2.GpuPlacement(gpu=2, leaf=0, pod=0),
                jobs_pb2.GpuPlacement(gpu=18, leaf=2, pod=1)]),
            leaf_demand=jobs_pb2.LeafDemand(pairs=[jobs_pb2.LeafPair(a=0, b=2, links=1)]))
        leafy = self.jobs.SubmitJob(leaf_job, timeout=TIMEOUT_S).job
        self.assertEqual(leafy.state, jobs_pb2.JOB_STATE_ACTIVE, leafy.reason)
        self.assertLessEqual(leafy.figures.max_contention, 1.0)
        devices, now = held()
        self.assertEqual(now, sorted(xcs_of(job.circuits) + xcs_of(leafy.circuits)))
        self.assertEqual(FLEET.one_way(devices), [])
        rel = self.jobs.ReleaseJob(jobs_pb2.ReleaseJobRequest(id="leafy"), timeout=TIMEOUT_S)
        self.assertEqual(rel.job.state, jobs_pb2.JOB_STATE_RELEASED)
        self.assertEqual(held()[1], xcs_of(job.circuits))

    def test_3_restart_release_and_plan_again(self):
        circuits = xcs_of(self.jobs.GetJob(jobs_pb2.GetJobRequest(id="lab-delta"),
                                           timeout=TIMEOUT_S).job.circuits)
        self.assertTrue(circuits)
        self.channel.close()
        self.assertEqual(FLEET.stop_ocsd(), 0)
        FLEET.start_ocsd(reconcile_s=1)
        self.setUp()
        job = self.jobs.GetJob(jobs_pb2.GetJobRequest(id="lab-delta"), timeout=TIMEOUT_S).job
        self.assertEqual(job.state, jobs_pb2.JOB_STATE_ACTIVE)
        self.assertEqual(xcs_of(job.circuits), circuits)
        rel = self.jobs.ReleaseJob(jobs_pb2.ReleaseJobRequest(id="lab-delta"),
                                   timeout=TIMEOUT_S).job
        self.assertEqual(rel.state, jobs_pb2.JOB_STATE_RELEASED)
        self.assertEqual(held()[1], [])
        # Only the stored request is left: the search runs again, same result.
        again = self.jobs.SubmitJob(spec_of(delta_job()), timeout=TIMEOUT_S)
        self.assertFalse(again.created)
        self.assertEqual(again.job.state, jobs_pb2.JOB_STATE_ACTIVE, again.job.reason)
        self.assertEqual(xcs_of(again.job.circuits), circuits)
        self.assertGreater(again.job.figures.makespan_ms, 0)
        self.assertEqual(held()[1], circuits)
        rel = self.jobs.ReleaseJob(jobs_pb2.ReleaseJobRequest(id="lab-delta"),
                                   timeout=TIMEOUT_S).job
        self.assertEqual(rel.state, jobs_pb2.JOB_STATE_RELEASED)
        self.assertEqual(held()[1], [])

    def test_4_drain_holds_when_moving_other_jobs(self):
        drained = "ocs-g0-d0"
        self.fabric.DrainDevice(fabric_pb2.DrainDeviceRequest(device=drained),
                                timeout=TIMEOUT_S)
        try:
            spec = jobs_pb2.JobSpec(
                id="mover", placement=jobs_pb2.Placement(gpus=[
                    jobs_pb2.GpuPlacement(gpu=0, leaf=0, pod=0),
                    jobs_pb2.GpuPlacement(gpu=16, leaf=2, pod=1),
                    jobs_pb2.GpuPlacement(gpu=32, leaf=4, pod=2)]),
                leaf_demand=jobs_pb2.LeafDemand(pairs=[
                    jobs_pb2.LeafPair(a=0, b=2, links=4), jobs_pb2.LeafPair(a=2, b=4, links=4),
                    jobs_pb2.LeafPair(a=0, b=4, links=4)]),
                options=jobs_pb2.JobOptions(allow_moving_other_jobs=True))
            log_before = FLEET.log().count("needed a drained device")
            plan = self.jobs.PlanJob(spec, timeout=TIMEOUT_S)
            self.assertNotIn(drained, [x[0] for x in xcs_of(plan.circuits)])
            self.assertEqual(plan.figures.links_placed, plan.figures.links_requested)
            job = self.jobs.SubmitJob(spec, timeout=TIMEOUT_S).job
            self.assertEqual(job.state, jobs_pb2.JOB_STATE_ACTIVE, job.reason)
            self.assertNotIn(drained, [x[0] for x in xcs_of(job.circuits)])
            devices, now = held()
            self.assertEqual(devices[drained], [])
            self.assertEqual(now, xcs_of(job.circuits))
            # The unconstrained re-plan wanted the drained device: it was refused.
            self.assertGreater(FLEET.log().count("needed a drained device"), log_before)
            self.jobs.ReleaseJob(jobs_pb2.ReleaseJobRequest(id="mover"), timeout=TIMEOUT_S)
            self.assertEqual(held()[1], [])
        finally:
            self.fabric.UndrainDevice(fabric_pb2.UndrainDeviceRequest(device=drained),
                                      timeout=TIMEOUT_S)

    def test_5_moving_keeps_other_jobs(self):
        """allow_moving_other_jobs re-plans every job's demand: the other
        jobs keep their circuits (moved or not), each job owns its own."""
        def leaf_job(job_id, gpus, pairs, move=False):
            return jobs_pb2.JobSpec(
                id=job_id, placement=jobs_pb2.Placement(gpus=[
                    jobs_pb2.GpuPlacement(gpu=g, leaf=g // 8, pod=g // 16) for g in gpus]),
                leaf_demand=jobs_pb2.LeafDemand(pairs=[
                    jobs_pb2.LeafPair(a=a, b=b, links=n) for a, b, n in pairs]),
                options=jobs_pb2.JobOptions(allow_moving_other_jobs=move))

        a = self.jobs.SubmitJob(leaf_job("stay", (0, 16, 32), ((0, 2, 4), (2, 4, 2))),
                                timeout=TIMEOUT_S).job
        self.assertEqual(a.state, jobs_pb2.JOB_STATE_ACTIVE, a.reason)
        self.assertEqual(len(a.circuits), 6)
        b = self.jobs.SubmitJob(leaf_job("move", (8, 24, 56), ((1, 3, 4), (3, 7, 4), (1, 7, 2)),
                                         move=True), timeout=TIMEOUT_S).job
        self.assertEqual(b.state, jobs_pb2.JOB_STATE_ACTIVE, b.reason)
        self.assertEqual(len(b.circuits), 10)
        a2 = self.jobs.GetJob(jobs_pb2.GetJobRequest(id="stay"), timeout=TIMEOUT_S).job
        self.assertEqual(len(a2.circuits), 6, "the other job lost circuits")
        pods_a = sorted(sorted((c.pod_a, c.pod_b)) for c in a2.circuits)
        self.assertEqual(pods_a, sorted(sorted((c.pod_a, c.pod_b)) for c in a.circuits))
        self.assertEqual(held()[1], sorted(xcs_of(a2.circuits) + xcs_of(b.circuits)))
        self.jobs.ReleaseJob(jobs_pb2.ReleaseJobRequest(id="stay"), timeout=TIMEOUT_S)
        self.assertEqual(held()[1], xcs_of(b.circuits))
        self.jobs.ReleaseJob(jobs_pb2.ReleaseJobRequest(id="move"), timeout=TIMEOUT_S)
        self.assertEqual(held()[1], [])

    def test_6_kill_during_submission(self):
        """kill -9 while a parallelism job is being searched, planned or
        programmed: after the restart it is either unknown (not stored yet)
        or settles ACTIVE from its stored request, and the devices hold
        exactly what ocsd says."""
        for i, delay_s in enumerate((0.0, 0.05, 0.15, 0.3)):
            job_id = f"killed-{i}"
            future = self.jobs.SubmitJob.future(spec_of(delta_job(job_id)), timeout=TIMEOUT_S)
            time.sleep(delay_s)
            self.channel.close()
            FLEET.kill_ocsd()
            try:
                future.result()
            except grpc.RpcError:
                pass
            FLEET.start_ocsd(reconcile_s=1)
            self.setUp()
            deadline = time.time() + TIMEOUT_S
            while True:
                try:
                    job = self.jobs.GetJob(jobs_pb2.GetJobRequest(id=job_id),
                                           timeout=TIMEOUT_S).job
                except grpc.RpcError as e:
                    self.assertEqual(e.code(), grpc.StatusCode.NOT_FOUND)
                    job = None
                    break
                if job.state in (jobs_pb2.JOB_STATE_ACTIVE, jobs_pb2.JOB_STATE_FAILED):
                    break
                self.assertLess(time.time(), deadline, f"{job_id} stuck in {job.state}")
                time.sleep(0.1)
            print(f"{job_id} (kill after {delay_s} s):",
                  "not stored" if job is None else jobs_pb2.JobState.Name(job.state), flush=True)
            if job is not None:
                self.assertEqual(job.state, jobs_pb2.JOB_STATE_ACTIVE, job.reason)
                self.assertTrue(job.circuits)
                self.assertEqual(held()[1], xcs_of(job.circuits))
                rel = self.jobs.ReleaseJob(jobs_pb2.ReleaseJobRequest(id=job_id),
                                           timeout=TIMEOUT_S).job
                self.assertEqual(rel.state, jobs_pb2.JOB_STATE_RELEASED)
            self.assertEqual(held()[1], [], f"{job_id}: devices not empty")

    def devices_until(self, want, what):
        deadline = time.time() + 45
        while True:
            devs = {d.name: d for d in self.fabric.ListDevices(
                fabric_pb2.ListDevicesRequest(), timeout=TIMEOUT_S).devices}
            if want(devs):
                return devs
            if time.time() > deadline:
                self.fail(f"{what}: {devs}")
            time.sleep(0.2)

    def test_7_session_state(self):
        connected = fabric_pb2.SESSION_STATE_CONNECTED
        devs = self.devices_until(lambda d: all(x.session == connected for x in d.values()),
                                  "every device connected")
        for d in devs.values():
            self.assertEqual(d.session_error, "")
            self.assertGreater(d.session_since_unix_ms, 0)
        rc, text, err = ocsctl("devices")
        self.assertEqual(rc, 0, err)
        self.assertRegex(text, r"(?m)^ocs-g0-d0 .* connected ")
        # Device 0's server dies (the others come back on a server of their own).
        FLEET.devsim_proc.send_signal(signal.SIGKILL)
        FLEET.devsim_proc.wait()
        t_kill_ms = time.time() * 1000
        devsim(FLEET.base + 1, FLEET.N_DEV - 1)
        dead = "ocs-g0-d0"
        devs = self.devices_until(
            lambda d: d[dead].session == fabric_pb2.SESSION_STATE_DISCONNECTED and all(
                x.session == connected for n, x in d.items() if n != dead),
            "device 0 disconnected, the others connected")
        self.assertNotEqual(devs[dead].session_error, "")
        self.assertEqual(devs[dead].health, fabric_pb2.DEVICE_HEALTH_UNREACHABLE)
        self.assertGreaterEqual(devs[dead].session_since_unix_ms, t_kill_ms - 1000)
        rc, text, err = ocsctl("devices")
        self.assertEqual(rc, 0, err)
        row = [line for line in text.splitlines() if line.startswith(dead + " ")][0]
        self.assertIn(" disconnected ", row)
        self.assertTrue(row.rstrip().endswith(devs[dead].session_error), row)
        # Back: connected again, the error gone.
        devsim(FLEET.base, 1)
        devs = self.devices_until(lambda d: d[dead].session == connected,
                                  "device 0 connected again")
        self.assertEqual(devs[dead].session_error, "")
        self.assertEqual(devs[dead].health, fabric_pb2.DEVICE_HEALTH_HEALTHY)


if __name__ == "__main__":
    unittest.main(verbosity=2)
