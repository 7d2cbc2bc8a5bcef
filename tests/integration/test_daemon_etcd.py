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
  - etcd back: the same submission goes through, a release too.

usage: test_daemon_etcd.py BUILD_DIR SOURCE_DIR
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
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
                 "--initial-cluster", f"m1={peer}"], stdout=log, stderr=log)
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


def start_ocsd():
    fleet.start_ocsd("--store", "etcd", "--etcd-endpoints", etcd.url)
    ch = grpc.insecure_channel(fleet.target)
    stub = jobs_pb2_grpc.JobsStub(ch)
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            stub.ListJobs(jobs_pb2.ListJobsRequest(), timeout=2)
            return ch, stub
        except grpc.RpcError:
            time.sleep(0.2)
    raise RuntimeError("ocsd does not answer ListJobs")


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


def run():
    try:
        main()
    finally:
        etcd.stop()


code = script.run(run)
shutil.rmtree(fleet.work, ignore_errors=True)
sys.exit(code)
