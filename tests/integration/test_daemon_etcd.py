#!/usr/bin/python3
"""test_daemon_etcd.py - the real ocsd on the etcd store (issue 15,
--store etcd), with a real single-member etcd (Debian's etcd-server) and the
lab fleet of 16 ocs-devsim devices, all on loopback:

  - ocsd starts on an empty etcd; `ocsctl status` and GetFabric name the
    store; the state directory holds no ocsd.db;
  - a submitted job is ACTIVE, its circuits are on the devices (read with
    ncclient), and etcd holds the log (etcdctl, the client nobody here
    wrote, lists the head and the entries);
  - ocsd killed with -9 and started again (an empty local copy: the state
    comes from etcd alone) serves the same job and circuits;
  - etcd stopped: a submission is refused with UNAVAILABLE naming etcd,
    the devices are untouched, ocsd_store_errors_total counts it, and
    /metrics (with the etcd latency histogram) passes promtool;
  - etcd back: the same submission goes through, a release too;
  - two replicas (--replica-id a, b): a leads (ocsd_leader 1), b waits as
    a standby without serving; a killed with -9: b leads, recovers as after
    a restart and serves the same jobs and circuits, and the time from the
    kill to b's first acknowledged write is printed;
  - the fence before the confirm: a leader whose key is deleted while a
    transaction waits for the devices' switching time (between commit and
    confirm) does not confirm: the job fails naming it, and the devices
    keep none of its cross-connects.

usage: test_daemon_etcd.py BUILD_DIR SOURCE_DIR
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ocsd_fleet  # noqa: E402
import testports  # noqa: E402

BUILD, SRC = sys.argv[1], sys.argv[2]
OCSCTL = os.path.join(BUILD, "northbound", "ocsctl", "ocsctl")
RPC_TIMEOUT_S = 60

fleet = ocsd_fleet.Fleet(BUILD, SRC, confirm_timeout_s=5, prefix="ocsd-etcd-")
script = ocsd_fleet.Script("test_daemon_etcd", fleet)
check = script.check
ocsd_fleet.gen_stubs(os.path.join(SRC, "proto"), os.path.join(fleet.work, "gen"))
import grpc  # noqa: E402
from ocs.v1 import jobs_pb2, jobs_pb2_grpc  # noqa: E402


class Etcd:
    """One etcd member on two reserved loopback ports; data in the fleet's
    work directory (removed with it)."""

    def __init__(self, work):
        self.client = testports.reserve(2)
        self.peer = self.client + 1
        self.url = f"http://127.0.0.1:{self.client}"
        self.data = os.path.join(work, "etcd")
        self.log_path = os.path.join(work, "etcd.log")
        self.proc = None

    def start(self):
        peer = f"http://127.0.0.1:{self.peer}"
        with open(self.log_path, "a") as log:
            self.proc = subprocess.Popen(
                ["etcd", "--name", "m1", "--data-dir", self.data,
                 "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
                 "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                 "--initial-cluster", f"m1={peer}",
                 # a 1 s lease lasts 1 s only with an election timeout
                 # below 667 ms (docs/replicas.md)
                 "--heartbeat-interval", "50", "--election-timeout", "500"],
                stdout=log, stderr=log)
        testports.wait_listening("127.0.0.1", self.client, "etcd", 30, proc=self.proc)
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.ctl("endpoint", "health").returncode == 0:
                return
            time.sleep(0.1)
        raise RuntimeError("etcd did not become healthy")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)

    def ctl(self, *args):
        return subprocess.run(["etcdctl", "--endpoints", self.url, "--command-timeout=5s"]
                              + list(args), capture_output=True, text=True, timeout=30)


etcd = Etcd(fleet.work)


def spec(job_id, a, b, links):
    gpus = [jobs_pb2.GpuPlacement(gpu=8 * leaf + k, leaf=leaf, pod=leaf // 2)
            for leaf in (a, b) for k in range(2)]
    return jobs_pb2.JobSpec(
        id=job_id, idempotency_key="key-" + job_id,
        placement=jobs_pb2.Placement(gpus=gpus),
        leaf_demand=jobs_pb2.LeafDemand(pairs=[jobs_pb2.LeafPair(a=a, b=b, links=links)]))


def ocsctl(*args):
    r = subprocess.run([OCSCTL, "--insecure", "--server", fleet.target, "--json"] + list(args),
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, f"ocsctl {' '.join(args)}: {r.returncode} {r.stderr}")
    return json.loads(r.stdout) if r.returncode == 0 else {}


def device_circuits():
    """{(device, in, out)} read from the devices."""
    return {(name, i, o) for name, rows in fleet.read_devices().items() for (i, o, _) in rows}


def ocsd_circuits():
    return {(x["device"], x["in_port"], x["out_port"])
            for c in ocsctl("circuits").get("circuits", []) for x in c["cross_connects"]}


def metric(text, name, labels):
    m = re.search(r"^%s\{%s\} (\S+)$" % (re.escape(name), re.escape(labels)), text, re.M)
    return float(m.group(1)) if m else None


def wait_serving(target):
    ch = grpc.insecure_channel(target)
    stub = jobs_pb2_grpc.JobsStub(ch)
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            stub.ListJobs(jobs_pb2.ListJobsRequest(), timeout=2)
            return ch, stub
        except grpc.RpcError:
            time.sleep(0.2)
    raise RuntimeError("ocsd does not answer ListJobs")


def start_ocsd(*extra):
    fleet.start_ocsd("--store", "etcd", "--etcd-endpoints", etcd.url, *extra)
    return wait_serving(fleet.target)


def replicas():
    """a leads, b is a standby; a killed: b takes over."""
    ch, stub = start_ocsd("--replica-id", "a", "--advertise", "127.0.0.1:1")
    check(re.search(r"^ocsd_leader 1$", fleet.metrics(), re.M), "a: ocsd_leader 1")
    b_dir = os.path.join(fleet.work, "state-b")
    os.makedirs(b_dir)
    b_log = os.path.join(fleet.work, "ocsd-b.log")
    with open(b_log, "w") as log:
        b = subprocess.Popen(
            [fleet.ocsd_bin, "--config", fleet.cfg, "--state-dir", b_dir, "--listen",
             "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--insecure",
             "--reconcile-interval-s", "1", "--store", "etcd", "--etcd-endpoints", etcd.url,
             "--replica-id", "b", "--advertise", "127.0.0.1:2"], stdout=log, stderr=log)
    try:
        deadline = time.time() + 30
        while "standby until it leads (leader now: a 127.0.0.1:1)" not in open(b_log).read():
            check(time.time() < deadline and b.poll() is None, "b never became a standby")
            if time.time() >= deadline or b.poll() is not None:
                return
            time.sleep(0.1)
        time.sleep(2)  # several lease periods: b must still wait
        check("gRPC on" not in open(b_log).read(), "b serves while a leads")
        r = stub.SubmitJob(spec("e3", 4, 6, 1), timeout=RPC_TIMEOUT_S)
        check(r.job.state == jobs_pb2.JOB_STATE_ACTIVE, f"e3 on a: {r.job.reason}")
        before = ocsd_circuits()
        ch.close()
        killed = time.time()
        fleet.kill_ocsd()
        port = None
        while time.time() < killed + 60 and port is None and b.poll() is None:
            m = re.search(r"gRPC on \S+ \(port (\d+)", open(b_log).read())
            port = int(m.group(1)) if m else None
            time.sleep(0.02)
        check(port is not None, "b did not take over:\n" + open(b_log).read()[-3000:])
        if port is None:
            return
        ch_b, stub_b = wait_serving(f"127.0.0.1:{port}")
        r = stub_b.SubmitJob(spec("e4", 5, 7, 1), timeout=RPC_TIMEOUT_S)
        took = time.time() - killed
        check(r.job.state == jobs_pb2.JOB_STATE_ACTIVE, f"e4 on b: {r.job.reason}")
        print(f"failover: {took:.2f} s from kill -9 of the leader to the standby's "
              "first acknowledged write (lease TTL 1 s, warm start included)", flush=True)
        j = stub_b.GetJob(jobs_pb2.GetJobRequest(id="e3"), timeout=RPC_TIMEOUT_S).job
        check(j.state == jobs_pb2.JOB_STATE_ACTIVE, f"e3 on b: {j.state}")
        fleet.grpc_port = port
        after = ocsd_circuits()
        check(before <= after and after == device_circuits(), "b's circuits and the devices")
        ch_b.close()
    finally:
        if b.poll() is None:
            b.send_signal(signal.SIGTERM)
            check(b.wait(timeout=60) == 0, "b's exit status after SIGTERM:\n"
                  + open(b_log).read()[-3000:])


def main():
    etcd.start()
    fleet.start_devices()
    ch, stub = start_ocsd()

    status = ocsctl("status")
    check(status.get("fabric", {}).get("store") == "etcd", f"status: {status}")
    check(not os.path.exists(os.path.join(fleet.state_dir, "ocsd.db")),
          "ocsd.db created with --store etcd")
    check("etcd " + etcd.url in fleet.log(), "the start line names the etcd store")

    r = stub.SubmitJob(spec("e1", 0, 2, 2), timeout=RPC_TIMEOUT_S)
    check(r.job.state == jobs_pb2.JOB_STATE_ACTIVE, f"e1: {r.job.state} {r.job.reason}")
    devs = device_circuits()
    mine = ocsd_circuits()
    check(len(mine) > 0 and mine == devs,
          f"devices {sorted(devs)} vs ocsd {sorted(mine)}")
    keys = etcd.ctl("get", "--prefix", "/ocsd/", "--keys-only").stdout.split()
    check("/ocsd/lab/head" in keys and any(k.startswith("/ocsd/lab/log/") for k in keys),
          f"etcd keys: {keys[:10]}")

    # kill -9 and start again: the copy is rebuilt from etcd alone
    ch.close()
    fleet.kill_ocsd()
    ch, stub = start_ocsd()
    j = stub.GetJob(jobs_pb2.GetJobRequest(id="e1"), timeout=RPC_TIMEOUT_S).job
    check(j.state == jobs_pb2.JOB_STATE_ACTIVE, f"e1 after restart: {j.state}")
    check(ocsd_circuits() == mine, "circuits after the restart")

    # etcd down: refused, naming etcd; devices untouched
    before = device_circuits()
    etcd.stop()
    try:
        stub.SubmitJob(spec("e2", 1, 3, 1), timeout=RPC_TIMEOUT_S)
        check(False, "e2 accepted with etcd down")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.UNAVAILABLE, f"e2: {e.code()}")
        check("etcd" in (e.details() or ""), f"e2's message names etcd: {e.details()}")
    check(device_circuits() == before, "devices changed while etcd was down")
    text = fleet.metrics()
    errors = metric(text, "ocsd_store_errors_total", 'backend="etcd"')
    check(errors is not None and errors >= 1, f"ocsd_store_errors_total {errors}")
    check((metric(text, "ocsd_etcd_request_duration_seconds_count", 'op="txn"') or 0) >= 1,
          "etcd txn latencies recorded")
    lint = subprocess.run(["promtool", "check", "metrics"], input=text.encode(),
                          capture_output=True, timeout=60)
    check(lint.returncode == 0, f"promtool: {lint.stdout} {lint.stderr}")

    # etcd back: the retry goes through, the release too
    etcd.start()
    r = stub.SubmitJob(spec("e2", 1, 3, 1), timeout=RPC_TIMEOUT_S)
    check(r.job.state == jobs_pb2.JOB_STATE_ACTIVE, f"e2 after etcd returned: {r.job.reason}")
    r = stub.ReleaseJob(jobs_pb2.ReleaseJobRequest(id="e1"), timeout=RPC_TIMEOUT_S)
    check(r.job.state == jobs_pb2.JOB_STATE_RELEASED, f"release e1: {r.job.reason}")
    check(ocsd_circuits() == device_circuits(),
          "devices and ocsd agree at the end")
    ch.close()
    check(fleet.stop_ocsd() == 0, "ocsd's exit status after SIGTERM")
    replicas()
    fence()


def fence():
    """The leader key deleted between commit and confirm: no confirm."""
    with open(fleet.cfg) as f:
        fabric = json.load(f)
    fabric["ocsd-fabric:fabric"]["devices"]["switch-time-us"] = 4000000
    slow = os.path.join(fleet.work, "fabric-slow.json")
    with open(slow, "w") as f:
        json.dump(fabric, f)
    fleet.cfg, normal = slow, fleet.cfg
    try:
        ch, stub = start_ocsd("--replica-id", "c", "--advertise", "127.0.0.1:3")
    finally:
        fleet.cfg = normal
    before = device_circuits()
    out = {}

    def submit():
        try:
            out["r"] = stub.SubmitJob(spec("e6", 0, 2, 1), timeout=RPC_TIMEOUT_S)
        except grpc.RpcError as e:
            out["e"] = e

    t = threading.Thread(target=submit)
    t.start()
    time.sleep(1.5)  # committed on the devices, waiting 4 s before the read-back
    d = etcd.ctl("del", "/ocsd/lab/leader")
    check(d.returncode == 0 and d.stdout.strip() == "1", f"etcdctl del: {d.stdout} {d.stderr}")
    t.join(RPC_TIMEOUT_S)
    r, e = out.get("r"), out.get("e")
    text = (r.job.reason if r else (e.details() if e else "")) or ""
    check((r is None or r.job.state != jobs_pb2.JOB_STATE_ACTIVE) and "not the leader" in text,
          f"e6 without leadership: {r.job.state if r else e}: {text}")
    check("not the leader any more" in fleet.log(), "c logs the withheld confirm")
    # the unconfirmed commit is gone from every device (rolled back)
    check(device_circuits() == before, "devices after the withheld confirm")
    ch.close()
    fleet.stop_ocsd()


def run():
    try:
        main()
    finally:
        etcd.stop()


code = script.run(run)
shutil.rmtree(fleet.work, ignore_errors=True)
sys.exit(code)
