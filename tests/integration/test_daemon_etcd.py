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
  - etcd back: the same submission goes through, a release too (the
    etcd store's commit times in ocsd_store_commit_duration_seconds);
  - etcd stopped: ocs.v1.Jobs NOT_SERVING, GetFabric's store_problem says
    why, writes refused naming it; etcd back: serving again by itself;
  - two replicas (--replica-id a, b) on fixed ports: a leads, b follows:
    health per service, GetFabric's replica fields, b's Watch sees a's job
    go ACTIVE, b answers GetJob/ListJobs/ListCircuits from its copy, a
    write on b gets exactly "not the leader; leader is HOST:PORT"; the
    leader killed with -9 five times (the killed one comes back as a
    follower): the follower takes over, the job submitted before is still
    ACTIVE, the devices hold what the state says, and the times from the
    kill to the first acknowledged write are printed with their median;
  - etcd stopped under the replicas: writes refused on both, store_problem
    set, the devices untouched; a third replica started while etcd is down
    comes up and says why; etcd back: writes taken again, and the third
    replica's copy has the new job;
  - a leader whose event loop stops (its thread alone held in a ptrace
    stop) gives up the lead
    within RP_LOOP_STALL_MS: the other replica serves writes; once the
    loop runs again the old leader follows;
  - the fence before the confirm: a leader whose key is deleted while a
    transaction waits for the devices' switching time (between commit and
    confirm) does not confirm: its answer says it is not the leader any
    more, and the next term's recovery finds the devices back at the
    pre-image (or still showing the unconfirmed commit, which reverts by
    itself); the job, still accepted, is carried out by the next leader,
    and the devices end holding exactly what ocsd says.

usage: test_daemon_etcd.py BUILD_DIR SOURCE_DIR
"""
import calendar
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ocsd_fleet  # noqa: E402
import ocsd_replicas  # noqa: E402
import testports  # noqa: E402

BUILD, SRC = sys.argv[1], sys.argv[2]
OCSCTL = os.path.join(BUILD, "northbound", "ocsctl", "ocsctl")
RPC_TIMEOUT_S = 60

fleet = ocsd_fleet.Fleet(BUILD, SRC, confirm_timeout_s=5, prefix="ocsd-etcd-")
script = ocsd_fleet.Script("test_daemon_etcd", fleet)
check = script.check
ocsd_fleet.gen_stubs(os.path.join(SRC, "proto"), os.path.join(fleet.work, "gen"))
import grpc  # noqa: E402
from grpc.health.v1 import health_pb2, health_pb2_grpc  # noqa: E402
from ocs.v1 import events_pb2, events_pb2_grpc, fabric_pb2, fabric_pb2_grpc  # noqa: E402
from ocs.v1 import jobs_pb2, jobs_pb2_grpc  # noqa: E402


class Etcd:
    """One etcd member on two reserved loopback ports; data in the fleet's
    work directory (removed with it)."""

    def __init__(self, work):
        self.client = testports.reserve(2)
        self.peer = self.client + 1
        self.url = f"http://127.0.0.1:{self.client}"
        self.data = ocsd_replicas.etcd_data_dir("m1")
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


class Replica:
    """One ocsd replica on its own reserved gRPC port (its --advertise), its
    own state directory and log."""

    def __init__(self, name, cfg=None):
        self.name = name
        self.cfg = cfg or fleet.cfg
        self.port = testports.reserve(1)
        self.addr = f"127.0.0.1:{self.port}"
        self.dir = os.path.join(fleet.work, "state-" + name)
        self.log_path = os.path.join(fleet.work, f"ocsd-{name}.log")
        self.proc = None
        self.ch = None

    def start(self):
        os.makedirs(self.dir, exist_ok=True)
        with open(self.log_path, "a") as log:
            self.proc = subprocess.Popen(
                [fleet.ocsd_bin, "--config", self.cfg, "--state-dir", self.dir,
                 "--listen", self.addr, "--metrics-listen", "127.0.0.1:0", "--insecure",
                 "--reconcile-interval-s", "1", "--store", "etcd", "--etcd-endpoints",
                 etcd.url, "--replica-id", self.name, "--advertise", self.addr],
                stdout=log, stderr=log)
        # reconnect at once: a replica's server restarts when its role changes,
        # and the default backoff (1 s, growing) would count in the failover.
        # Not grpc.min_reconnect_backoff_ms: gRPC core takes it as the connect
        # timeout (100 ms at least), and an ASan replica that has just taken
        # the lead on a loaded machine can take longer than that to send its
        # SETTINGS frame: the attempt failed, and with it the next call. The
        # default (20 s) waits for a slow server as any client would.
        self.ch = grpc.insecure_channel(self.addr, options=[
            ("grpc.initial_reconnect_backoff_ms", 20), ("grpc.max_reconnect_backoff_ms", 100)])
        self.jobs = jobs_pb2_grpc.JobsStub(self.ch)
        self.fabric = fabric_pb2_grpc.FabricStub(self.ch)
        self.health = health_pb2_grpc.HealthStub(self.ch)
        self.events = events_pb2_grpc.EventsStub(self.ch)

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def serving(self, service):
        """The health of service; None while the replica does not answer."""
        try:
            return self.health.Check(health_pb2.HealthCheckRequest(service=service),
                                     timeout=2).status
        except grpc.RpcError:
            return None

    def wait(self, service, status, timeout_s=60):
        deadline = time.time() + timeout_s
        while time.time() < deadline and self.proc.poll() is None:
            if self.serving(service) == status:
                return True
            time.sleep(0.05)
        return False

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.ch.close()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            rc = self.proc.wait(timeout=60)
            check(rc == 0, f"{self.name}'s exit status after SIGTERM: {rc}\n"
                  + self.log()[-3000:])
        if self.ch:
            self.ch.close()


SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def refused(call, *args):
    """The details of the UNAVAILABLE a write gets; None when it was taken."""
    try:
        call(*args, timeout=RPC_TIMEOUT_S)
        return None
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.UNAVAILABLE, f"refusal code {e.code()}")
        return e.details()


def first_write(r, write):
    """Retries write on replica r until it is taken; its answer. A follower
    refuses writes (UNAVAILABLE); while it becomes the leader its server
    restarts (calls in flight end CANCELLED, new ones UNAVAILABLE). Each try
    on a channel of its own, as a client that retries at once would: a
    channel's reconnect backoff is not the replica's failover."""
    deadline = time.time() + 60
    while time.time() < deadline:
        ch = grpc.insecure_channel(r.addr, options=[("grpc.use_local_subchannel_pool", 1)])
        try:
            return write(jobs_pb2_grpc.JobsStub(ch))
        except grpc.RpcError as e:
            if e.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED):
                raise
            time.sleep(0.02)
        finally:
            ch.close()
    raise RuntimeError(f"{r.name} took no write within 60 s")


def find_leader(rs, timeout_s=30):
    """The replica of rs whose ocs.v1.Jobs is SERVING (None: none within the time)."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        for r in rs:
            if r.proc.poll() is None and r.serving("ocs.v1.Jobs") == SERVING:
                return r
        time.sleep(0.05)
    return None


def replicas():
    """Two replicas: a leads, b follows (reads, redirects, health, Watch);
    the leader killed with -9, again and again: the other takes over."""
    a, b = Replica("a"), Replica("b")
    try:
        a.start()
        check(a.wait("ocs.v1.Jobs", SERVING), "a never led:\n" + a.log()[-3000:])
        b.start()
        check(b.wait("", SERVING), "b does not serve:\n" + b.log()[-3000:])
        check(b.serving("ocs.v1.Jobs") == NOT_SERVING, "b's Jobs health")
        check(a.serving("") == SERVING, "a's health")
        fa = a.fabric.GetFabric(fabric_pb2.GetFabricRequest(), timeout=RPC_TIMEOUT_S)
        check(fa.role == "leader" and fa.replica_id == "a" and fa.leader_id == "a"
              and fa.store_problem == "", f"a's GetFabric: {fa}")
        deadline = time.time() + 10
        while time.time() < deadline:
            fb = b.fabric.GetFabric(fabric_pb2.GetFabricRequest(), timeout=RPC_TIMEOUT_S)
            if len(fb.replicas) == 2:
                break
            time.sleep(0.1)
        check(fb.role == "follower" and fb.leader_id == "a" and fb.leader_address == a.addr
              and sorted((x.id, x.address, x.leader) for x in fb.replicas)
              == [("a", a.addr, True), ("b", b.addr, False)], f"b's GetFabric: {fb}")

        # b's Watch sees a's job go ACTIVE; b reads it from its copy
        w = ocsd_fleet.Watcher(b.events.Watch(events_pb2.WatchRequest(jobs=True)),
                               RPC_TIMEOUT_S)
        time.sleep(0.5)
        r = a.jobs.SubmitJob(spec("e3", 4, 6, 1), timeout=RPC_TIMEOUT_S)
        check(r.job.state == jobs_pb2.JOB_STATE_ACTIVE, f"e3 on a: {r.job.reason}")
        ev = w.wait(lambda e: e.WhichOneof("kind") == "job" and e.job.job_id == "e3"
                    and e.job.state == jobs_pb2.JOB_STATE_ACTIVE, timeout=10)
        check(ev is not None, "b's Watch saw no JobEvent e3 ACTIVE")
        w.close()
        j = b.jobs.GetJob(jobs_pb2.GetJobRequest(id="e3"), timeout=RPC_TIMEOUT_S).job
        check(j.state == jobs_pb2.JOB_STATE_ACTIVE, f"e3 on b: {j.state}")
        ids = {x.spec.id for x in b.jobs.ListJobs(jobs_pb2.ListJobsRequest(),
                                             timeout=RPC_TIMEOUT_S).jobs}
        check({"e2", "e3"} <= ids, f"b's ListJobs: {ids}")
        fleet.grpc_port = b.port
        on_b = ocsd_circuits()
        fleet.grpc_port = a.port
        check(on_b == ocsd_circuits() == device_circuits(), "b's circuits, a's, the devices")

        # writes on the follower: the exact redirect
        why = refused(b.jobs.SubmitJob, spec("e5", 5, 7, 1))
        check(why == f"not the leader; leader is {a.addr}", f"b's refusal: {why}")
        why = refused(b.jobs.ReleaseJob, jobs_pb2.ReleaseJobRequest(id="e3"))
        check(why == f"not the leader; leader is {a.addr}", f"b's refusal: {why}")

        # kill -9 the leader, five times: the follower takes over and serves
        # writes; the killed one comes back as a follower
        took = []
        leader, follower = a, b
        for k in range(5):
            job = f"f{k // 2}"
            killed = time.time()
            leader.kill()
            if k % 2 == 0:
                r = first_write(follower, lambda x: x.SubmitJob(
                    spec(job, 5, 7, 1), timeout=RPC_TIMEOUT_S))
                check(r.job.state == jobs_pb2.JOB_STATE_ACTIVE, f"{job}: {r.job.reason}")
            else:
                r = first_write(follower, lambda x: x.ReleaseJob(
                    jobs_pb2.ReleaseJobRequest(id=job), timeout=RPC_TIMEOUT_S))
                check(r.job.state == jobs_pb2.JOB_STATE_RELEASED, f"{job}: {r.job.reason}")
            took.append(time.time() - killed)
            stamps = {}
            for key, pat in (("leads", r"replica \w+ leads \(leader key"),
                             ("serves", r"leader: serving writes")):
                m = re.findall(r"^(\S+)Z ocsd\[\d+\] .*" + pat, follower.log(), re.M)
                if m:
                    t = calendar.timegm(time.strptime(m[-1][:19], "%Y-%m-%dT%H:%M:%S"))
                    stamps[key] = t + float("0" + m[-1][19:]) - killed
            print("failover %d: %s took the lead %.2f s after the kill, served writes at "
                  "%.2f s, first write acknowledged at %.2f s"
                  % (k, follower.name, stamps.get("leads", -1), stamps.get("serves", -1),
                     took[-1]), flush=True)
            j = follower.jobs.GetJob(jobs_pb2.GetJobRequest(id="e3"), timeout=RPC_TIMEOUT_S)
            check(j.job.state == jobs_pb2.JOB_STATE_ACTIVE, f"e3 after failover {k}")
            fleet.grpc_port = follower.port
            check(ocsd_circuits() == device_circuits(), f"circuits after failover {k}")
            leader.start()
            check(leader.wait("", SERVING), f"{leader.name} back as a follower")
            check(leader.serving("ocs.v1.Jobs") == NOT_SERVING, f"{leader.name} follows")
            leader, follower = follower, leader
        took.sort()
        print("failover: %s s from kill -9 of the leader to the follower's first "
              "acknowledged write (lease TTL 1 s); median %.2f s"
              % (" ".join("%.2f" % t for t in took), took[len(took) // 2]), flush=True)

        # etcd down: both refuse writes, say why, the devices stay; back by itself
        before = device_circuits()
        etcd.stop()
        check(leader.wait("ocs.v1.Jobs", NOT_SERVING, 10), "the leader's health, etcd down")
        for r in (leader, follower):
            why = refused(r.jobs.SubmitJob, spec("e7", 0, 2, 1))
            check(why is not None and (why.startswith("not the leader")
                                       or "etcd unreachable since" in why),
                  f"{r.name} with etcd down: {why}")
            deadline = time.time() + 10  # each replica's own probe notices
            while time.time() < deadline:
                f = r.fabric.GetFabric(fabric_pb2.GetFabricRequest(), timeout=RPC_TIMEOUT_S)
                if "etcd unreachable" in f.store_problem:
                    break
                time.sleep(0.05)
            check("etcd unreachable" in f.store_problem,
                  f"{r.name}'s store_problem: {f.store_problem!r}")
        check(device_circuits() == before, "devices changed while etcd was down")

        # a replica started while etcd is down comes up and says why
        c = Replica("c")
        c.start()
        try:
            check(c.wait("", SERVING), "c does not serve with etcd down:\n" + c.log()[-3000:])
            f = c.fabric.GetFabric(fabric_pb2.GetFabricRequest(), timeout=RPC_TIMEOUT_S)
            check(f.role == "follower" and "etcd unreachable" in f.store_problem,
                  f"c with etcd down: {f}")
            etcd.start()
            now = find_leader((a, b, c))
            check(now is not None, "no leader after etcd came back")
            r = first_write(now, lambda x: x.SubmitJob(spec("e7", 0, 2, 1),
                                                            timeout=RPC_TIMEOUT_S))
            check(r.job.state == jobs_pb2.JOB_STATE_ACTIVE, f"e7 after etcd came back: {r}")
            deadline = time.time() + 30
            j = None
            while time.time() < deadline:
                try:
                    j = c.jobs.GetJob(jobs_pb2.GetJobRequest(id="e7"), timeout=5).job
                    if j.state == jobs_pb2.JOB_STATE_ACTIVE:
                        break
                except grpc.RpcError:
                    pass
                time.sleep(0.1)
            check(j is not None and j.state == jobs_pb2.JOB_STATE_ACTIVE,
                  f"c's copy after etcd came back: {j}")
            c.stop()  # a leader or a follower: the others go on
            now = find_leader((a, b))
            check(now is not None, "no leader after c stopped")
            fleet.grpc_port = now.port
            check(ocsd_circuits() == device_circuits(),
                  "devices and state after etcd returned")
            r = first_write(now, lambda x: x.ReleaseJob(
                jobs_pb2.ReleaseJobRequest(id="e7"), timeout=RPC_TIMEOUT_S))
            check(r.job.state == jobs_pb2.JOB_STATE_RELEASED, f"release e7: {r.job.reason}")
        finally:
            c.stop()
    finally:
        a.stop()
        b.stop()


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
    # health and GetFabric say why (the probe notices within its period)
    health = health_pb2_grpc.HealthStub(ch)
    deadline = time.time() + 10
    while time.time() < deadline and health.Check(
            health_pb2.HealthCheckRequest(service="ocs.v1.Jobs"), timeout=5).status != NOT_SERVING:
        time.sleep(0.05)
    check(health.Check(health_pb2.HealthCheckRequest(service="ocs.v1.Jobs"), timeout=5).status
          == NOT_SERVING, "ocs.v1.Jobs serving with etcd down")
    check(health.Check(health_pb2.HealthCheckRequest(), timeout=5).status == SERVING,
          "the server's health with etcd down")
    f = fabric_pb2_grpc.FabricStub(ch).GetFabric(fabric_pb2.GetFabricRequest(), timeout=5)
    check(f.store_problem.startswith("etcd unreachable since ") and f.role == "",
          f"GetFabric with etcd down: {f.store_problem!r} {f.role!r}")
    try:
        stub.SubmitJob(spec("e2", 1, 3, 1), timeout=RPC_TIMEOUT_S)
        check(False, "e2 accepted with etcd down (after the probe noticed)")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.UNAVAILABLE and "etcd unreachable" in e.details(),
              f"e2 refused: {e.code()} {e.details()}")
    check(device_circuits() == before, "devices changed while etcd was down")
    text = fleet.metrics()
    check(metric(text, "ocsd_store_errors_total", 'backend="etcd"') is not None,
          "ocsd_store_errors_total{backend=etcd}")
    lint = subprocess.run(["promtool", "check", "metrics"], input=text.encode(),
                          capture_output=True, timeout=60)
    check(lint.returncode == 0, f"promtool: {lint.stdout} {lint.stderr}")

    # etcd back: the retry goes through without restarting ocsd, the release too
    etcd.start()
    deadline = time.time() + 30
    while time.time() < deadline and health.Check(
            health_pb2.HealthCheckRequest(service="ocs.v1.Jobs"), timeout=5).status != SERVING:
        time.sleep(0.05)
    check(fleet.ocsd.poll() is None, "ocsd still runs")
    r = stub.SubmitJob(spec("e2", 1, 3, 1), timeout=RPC_TIMEOUT_S)
    check(r.job.state == jobs_pb2.JOB_STATE_ACTIVE, f"e2 after etcd returned: {r.job.reason}")
    r = stub.ReleaseJob(jobs_pb2.ReleaseJobRequest(id="e1"), timeout=RPC_TIMEOUT_S)
    check(r.job.state == jobs_pb2.JOB_STATE_RELEASED, f"release e1: {r.job.reason}")
    text = fleet.metrics()
    check((metric(text, "ocsd_etcd_request_duration_seconds_count", 'op="txn"')
           or 0) >= 1, "etcd txn latencies recorded")
    check((metric(text, "ocsd_store_commit_duration_seconds_count", 'backend="etcd"')
           or 0) >= 2, "store commit times recorded as the etcd backend's (e2, release)")
    check(ocsd_circuits() == device_circuits(),
          "devices and ocsd agree at the end")
    ch.close()
    check(fleet.stop_ocsd() == 0, "ocsd's exit status after SIGTERM")
    replicas()
    stalled_loop()
    fence()


class LoopThreadStop:
    """Stops ONE thread of a child process for real, its other threads
    running on: ptrace(PTRACE_SEIZE) + PTRACE_INTERRUPT on that thread
    alone (ocsd runs its event loop on its main thread, whose id is the
    pid), PTRACE_DETACH to let it run again. No hook in the daemon. The
    ptrace calls must come from this Python thread; the kernel detaches by
    itself if this process dies."""
    SEIZE, INTERRUPT, DETACH, WALL = 0x4206, 0x4207, 17, 0x40000000

    def __init__(self, tid):
        import ctypes
        self.ctypes, self.tid, self.held = ctypes, tid, False
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p,
                                     ctypes.c_void_p]

    def _ptrace(self, req):
        if self.libc.ptrace(req, self.tid, None, None) != 0:
            e = self.ctypes.get_errno()
            raise OSError(e, f"ptrace({req:#x}, {self.tid}): {os.strerror(e)}")

    def stop(self):
        self._ptrace(self.SEIZE)
        self.held = True
        self._ptrace(self.INTERRUPT)
        # the thread is stopped once this reports it (consumed here, so
        # Popen.poll() never sees a ptrace stop)
        _, status = os.waitpid(self.tid, self.WALL)
        if not os.WIFSTOPPED(status):
            raise OSError(0, f"thread {self.tid} did not stop: status {status:#x}")

    def resume(self):
        if self.held:
            self.held = False
            self._ptrace(self.DETACH)


def stalled_loop():
    """A leader whose event loop stops (its other threads running on, the
    lease's keep-alive among them) gives up the lead: the other replica
    serves writes within RP_LOOP_STALL_MS (5 s) + the TTL. The loop is
    stopped for real: its thread alone is held in a ptrace stop
    (LoopThreadStop) until q has taken two writes."""
    p, q = Replica("p"), Replica("q")
    hold = None
    try:
        p.start()
        check(p.wait("ocs.v1.Jobs", SERVING), "p never led:\n" + p.log()[-3000:])
        q.start()
        check(q.wait("", SERVING), "q does not serve:\n" + q.log()[-3000:])
        hold = LoopThreadStop(p.proc.pid)
        hold.stop()
        stalled = time.time()
        # the first write q takes (each try on a fresh channel): f2's release
        r = first_write(q, lambda s: s.ReleaseJob(jobs_pb2.ReleaseJobRequest(id="f2"),
                                                  timeout=RPC_TIMEOUT_S))
        took = time.time() - stalled
        check(r.job.state == jobs_pb2.JOB_STATE_RELEASED, f"release f2 on q: {r.job.reason}")
        print(f"stalled loop: q took its first write {took:.2f} s after p's loop stopped",
              flush=True)
        check(took <= 5 + 1 + 4, f"q took over after {took:.1f} s (5 s stall + 1 s TTL)")
        check(p.proc.poll() is None, "p exited")
        check("the event loop has not run for" in p.log(), "p does not say why it gave up")
        r = first_write(q, lambda s: s.SubmitJob(spec("st1", 5, 7, 1), timeout=RPC_TIMEOUT_S))
        check(r.job.state == jobs_pb2.JOB_STATE_ACTIVE, f"st1 on q: {r.job.reason}")
        # p's loop runs again
        hold.resume()
        deadline = time.time() + 30
        fp = None
        while time.time() < deadline:
            try:
                fp = p.fabric.GetFabric(fabric_pb2.GetFabricRequest(), timeout=2)
                if fp.role == "follower" and fp.leader_id == "q":
                    break
            except grpc.RpcError:
                pass
            time.sleep(0.1)
        check(fp is not None and fp.role == "follower" and fp.leader_id == "q",
              f"p after its loop ran again: {fp}")
        check(q.serving("ocs.v1.Jobs") == SERVING, "q stopped leading")
        r = first_write(q, lambda s: s.ReleaseJob(jobs_pb2.ReleaseJobRequest(id="st1"),
                                                  timeout=RPC_TIMEOUT_S))
        check(r.job.state == jobs_pb2.JOB_STATE_RELEASED, f"release st1: {r.job.reason}")
        fleet.grpc_port, port = q.port, fleet.grpc_port
        check(ocsd_circuits() == device_circuits(), "devices and ocsd agree after the stall")
        fleet.grpc_port = port
    finally:
        if hold:  # a failure while p's loop was held: let it go
            hold.resume()
        q.stop()
        p.stop()


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
    # c starts as a follower, then leads (port 0 stays the port it got)
    health = health_pb2_grpc.HealthStub(ch)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            if health.Check(health_pb2.HealthCheckRequest(service="ocs.v1.Jobs"),
                            timeout=2).status == SERVING:
                break
        except grpc.RpcError:
            pass
        time.sleep(0.05)
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
    # No confirm was sent. c, the only replica, leads again at once, and its
    # recovery reads the devices: every one back at the pre-image (the
    # deposed run rolled back), or still showing that run's unconfirmed
    # commit, which reverts by itself; either proves no confirm.
    verdict = re.compile(r"transaction \d+ of job e6 left open: rolled_back, recovered(?: after "
                         r"restart: devices back at the pre-image|: never decided, so never "
                         r"confirmed)")
    deadline = time.time() + 30
    while time.time() < deadline and not verdict.search(fleet.log()):
        time.sleep(0.1)
    check(verdict.search(fleet.log()), "the next term's recovery of e6's transaction:\n"
          + fleet.log()[-3000:])
    # The job stays accepted (its answer said so) and the next term carries
    # it out with transactions of its own: the devices end holding what
    # ocsd says, the circuits before and the job's if it is ACTIVE.
    deadline = time.time() + 60
    j = None
    while time.time() < deadline:
        try:
            j = stub.GetJob(jobs_pb2.GetJobRequest(id="e6"), timeout=5).job
            if j.state in (jobs_pb2.JOB_STATE_ACTIVE, jobs_pb2.JOB_STATE_FAILED):
                break
        except grpc.RpcError:
            pass
        time.sleep(0.2)
    check(j is not None and j.state in (jobs_pb2.JOB_STATE_ACTIVE, jobs_pb2.JOB_STATE_FAILED),
          f"e6 on the next term: {j}")
    now = device_circuits()
    check(now == ocsd_circuits() and before <= now
          and (now != before) == (j is not None and j.state == jobs_pb2.JOB_STATE_ACTIVE),
          f"devices after the withheld confirm and the next term: {sorted(now ^ before)}")
    ch.close()
    fleet.stop_ocsd()


def run():
    try:
        main()
    except Exception:
        traceback.print_exc()  # where, next to the logs Script dumps
        raise
    finally:
        for name in ("a", "b", "c", "p", "q"):
            path = os.path.join(fleet.work, f"ocsd-{name}.log")
            if script.failures and os.path.exists(path):
                with open(path, errors="replace") as f:
                    print(f"--- ocsd-{name}.log (tail)\n" + f.read()[-6000:], flush=True)
        etcd.stop()


code = script.run(run)
shutil.rmtree(fleet.work, ignore_errors=True)
sys.exit(code)
