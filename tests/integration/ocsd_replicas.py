"""ocsd_replicas.py - a launcher for replicated ocsd (issue 15) on loopback,
shared by the tests and benchmarks that need several replicas: an M-member
etcd cluster (Debian's `etcd`, data under the fleet's work directory), the
lab devsim fleet of ocsd_fleet.Fleet (16 devices), and N ocsd replicas
(`--store etcd --replica-id rK --advertise 127.0.0.1:PORT`, lease TTL 1 s)
that each listen for gRPC on the port they advertise.

Supervision: like systemd's `Restart=always` with `RestartSec=200ms`, a
replica whose process exits by itself (deposed, killed with -9, crashed) is
started again by the launcher's supervisor thread 200 ms after the exit was
seen; a replica stopped on purpose (stop()) is not. Every start and exit is
recorded in `Replicas.events` as (time, replica id, what, detail).

etcd members run with `--heartbeat-interval 50 --election-timeout 500`:
with etcd's defaults a 1 s lease lasts 2 s, and the cluster would not elect
a new etcd leader within one lease after losing its own (docs/replicas.md).

The client (Client) talks to whichever replica leads: it tries the replica
it last found leading, then every other one; an UNAVAILABLE "not the leader;
leader is HOST:PORT" sends it there, and "not the leader; no leader yet" or a
connection refused (a standby that serves nothing, a replica being
restarted) to the next. Only the "not the leader;" refusal says nothing was
done: "not the leader any more: job X stays accepted ..." (a leader deposed
while it handled the call) is indeterminate. Outcomes are three-valued, as Jepsen's: ok
(acknowledged), fail (certainly not done: never reached a leader, refused by
a follower, or refused by the leader with "nothing changed" or a
precondition/argument error) and info (indeterminate: it may or may not have
happened, e.g. a timeout or a connection lost after the call was sent).

Not a test itself. Used by test_replicas_jepsen.py; API:

    fleet = ocsd_fleet.Fleet(build, src, confirm_timeout_s=5)
    cluster = EtcdCluster(fleet.work, members=3); cluster.start()
    fleet.start_devices()
    reps = Replicas(fleet, cluster, n=3); reps.start_all()
    i = reps.wait_leader(30)           # index of the serving leader
    reps.kill(i) / pause(i) / resume(i) / restart(i) / stop(i) / start(i)
    cluster.kill_member(k) / start_member(k)
    c = reps.client(); outcome, answer, detail = c.submit(spec)
    watch = KeyWatch(cluster, reps.leader_key)   # the leader key's events
    reps.terms()                       # "rK leads (revision R)" from the logs
    reps.close(); watch.close(); cluster.stop()

Loopback only; every process started here is stopped by close()/stop().
"""
import atexit
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import testports

RESTART_DELAY_S = 0.2  # as systemd's Restart=always with RestartSec=200ms
ETCDCTL_TIMEOUT_S = 30  # a whole etcdctl run (its own command timeout is 5 s)


def etcd_data_dir(name):
    """A new directory for an etcd member's data, on tmpfs (/dev/shm) when
    the machine has one: on the disk, etcd's fsyncs waited behind whatever
    else wrote to it (the builds CI runs beside the tests), etcd answered
    none within 333 ms, and a replica lost its 1 s lease. Removed at exit
    (kept with OCSD_TEST_KEEP); the member keeps it across its restarts."""
    shm = "/dev/shm"
    d = tempfile.mkdtemp(prefix=f"ocsd-etcd-{name}-",
                         dir=shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None)
    if not os.environ.get("OCSD_TEST_KEEP"):
        atexit.register(shutil.rmtree, d, True)
    return d


class EtcdCluster:
    """M etcd members m1..mM on reserved loopback ports (client, peer each)."""

    def __init__(self, work, members=3):
        self.work = work
        self.n = members
        base = testports.reserve(2 * members)
        self.client_ports = [base + 2 * k for k in range(members)]
        self.peer_ports = [base + 2 * k + 1 for k in range(members)]
        self.procs = [None] * members
        self.initial = ",".join(f"m{k + 1}=http://127.0.0.1:{self.peer_ports[k]}"
                                for k in range(members))
        self.started_once = [False] * members
        self.data_dirs = [etcd_data_dir(f"m{k + 1}") for k in range(members)]

    @property
    def urls(self):
        return [f"http://127.0.0.1:{p}" for p in self.client_ports]

    @property
    def endpoints(self):
        """The value of ocsd's --etcd-endpoints."""
        return ",".join(self.urls)

    def start_member(self, k):
        """Starts member k (again, on its data directory and ports)."""
        assert self.procs[k] is None or self.procs[k].poll() is not None
        url, peer = self.urls[k], f"http://127.0.0.1:{self.peer_ports[k]}"
        log = open(os.path.join(self.work, f"etcd-m{k + 1}.log"), "a")
        self.procs[k] = subprocess.Popen(
            ["etcd", "--name", f"m{k + 1}", "--data-dir", self.data_dirs[k],
             "--listen-client-urls", url, "--advertise-client-urls", url,
             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", self.initial, "--initial-cluster-token", "ocsd-replicas",
             "--initial-cluster-state", "new",
             "--heartbeat-interval", "50", "--election-timeout", "500"],
            stdout=log, stderr=log)
        log.close()
        self.started_once[k] = True

    def start(self, timeout_s=60):
        """Starts every member and waits until the cluster is healthy."""
        for k in range(self.n):
            self.start_member(k)
        for k in range(self.n):
            testports.wait_listening("127.0.0.1", self.client_ports[k], f"etcd m{k + 1}",
                                     timeout_s, proc=self.procs[k])
        self.wait_healthy(timeout_s)

    def wait_healthy(self, timeout_s=30, members=None):
        """Waits until every running member (or the given ones) answers
        `endpoint health`; raises RuntimeError otherwise."""
        members = [k for k in range(self.n) if self.running(k)] if members is None else members
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            r = self.ctl("endpoint", "health",
                         endpoints=",".join(self.urls[k] for k in members))
            if r.returncode == 0:
                return
            time.sleep(0.1)
        raise RuntimeError("etcd members %s not healthy" % [f"m{k + 1}" for k in members])

    def running(self, k):
        return self.procs[k] is not None and self.procs[k].poll() is None

    def kill_member(self, k):
        """kill -9 of member k."""
        if self.running(k):
            self.procs[k].send_signal(signal.SIGKILL)
            self.procs[k].wait()

    def stop_member(self, k, timeout_s=30):
        if self.running(k):
            self.procs[k].send_signal(signal.SIGTERM)
            try:
                self.procs[k].wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.kill_member(k)

    def stop(self):
        for k in range(self.n):
            self.stop_member(k)

    def ctl(self, *args, endpoints=None):
        """etcdctl (the client nobody here wrote) on every member, or the given endpoints."""
        return subprocess.run(["etcdctl", "--endpoints", endpoints or self.endpoints,
                               "--command-timeout=5s"] + list(args),
                              capture_output=True, text=True, timeout=ETCDCTL_TIMEOUT_S)

    def get_json(self, key):
        """etcdctl get -w json KEY: the first kv as a dict with the value
        decoded, or None when the key is absent (raises when etcd fails)."""
        import base64
        r = self.ctl("get", key, "-w", "json")
        if r.returncode != 0:
            raise RuntimeError(f"etcdctl get {key}: {r.stderr.strip()}")
        kvs = json.loads(r.stdout).get("kvs") or []
        if not kvs:
            return None
        kv = dict(kvs[0])
        kv["value"] = base64.b64decode(kv.get("value", "")).decode(errors="replace")
        return kv


class KeyWatch:
    """Records every event of one etcd key from revision 1 on, with the wall
    time each was received: `etcdctl watch --rev R KEY -w json` on a thread,
    started again from the next revision when it ends (a member it used went
    away). events: [(received, type, create_revision, mod_revision, value)]
    in revision order, each revision once."""

    def __init__(self, cluster, key):
        import base64
        self._b64 = base64.b64decode
        self.cluster, self.key = cluster, key
        self.events = []
        self.lock = threading.Lock()
        self.next_rev = 1
        self.proc = None
        self.stopping = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stopping:
            self.proc = subprocess.Popen(
                ["etcdctl", "--endpoints", self.cluster.endpoints, "watch", "-w", "json",
                 "--rev", str(self.next_rev), self.key],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            for line in self.proc.stdout:
                now = time.time()
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                for ev in msg.get("Events") or []:
                    kv = ev.get("kv", {})
                    mod = int(kv.get("mod_revision", 0))
                    if mod < self.next_rev:
                        continue
                    with self.lock:
                        # etcdctl's JSON gives the type as a number (PUT, the 0, absent)
                        kind = "DELETE" if ev.get("type") in (1, "DELETE") else "PUT"
                        self.events.append((now, kind,
                                            int(kv.get("create_revision", 0)), mod,
                                            self._b64(kv.get("value", "")).decode(
                                                errors="replace")))
                        self.next_rev = mod + 1
            self.proc.wait()
            if not self.stopping:
                time.sleep(0.2)

    def snapshot(self):
        with self.lock:
            return list(self.events)

    def close(self):
        self.stopping = True
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait()
        self.thread.join(10)


class Replica:
    """One ocsd replica: id rK, gRPC on the port it advertises, its own state
    directory and log (appended across restarts, each start marked)."""

    def __init__(self, reps, k, port):
        self.reps, self.k, self.id = reps, k, f"r{k + 1}"
        self.port = port
        self.advertise = f"127.0.0.1:{port}"
        self.state_dir = os.path.join(reps.fleet.work, f"state-{self.id}")
        os.makedirs(self.state_dir, exist_ok=True)
        self.log_path = os.path.join(reps.fleet.work, f"ocsd-{self.id}.log")
        self.proc = None
        self.supervised = False  # restarted by the supervisor when it exits
        self.paused = False
        self.exit_seen = None    # when the supervisor saw the exit

    def args(self):
        f, c = self.reps.fleet, self.reps.cluster
        return [f.ocsd_bin, "--config", f.cfg, "--state-dir", self.state_dir,
                "--listen", self.advertise, "--metrics-listen", "127.0.0.1:0", "--insecure",
                "--reconcile-interval-s", "1", "--store", "etcd", "--etcd-endpoints",
                c.endpoints, "--replica-id", self.id, "--advertise", self.advertise,
                "--leader-ttl-s", str(self.reps.ttl_s)] + list(self.reps.extra)

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def metrics_port(self):
        """The metrics listener's port of its latest start (its start line), or None."""
        found = re.findall(r"metrics on \S+ \(port (\d+)", self.log())
        return int(found[-1]) if found else None


def dump_stacks(pid, log_path, why):
    """Appends every thread's stack of process pid (gdb, when installed) to
    its log: a replica that does not stop is a hung event loop, and the
    stacks say where."""
    if not shutil.which("gdb"):
        return
    try:
        out = subprocess.run(["gdb", "-p", str(pid), "-batch", "-nx", "-ex",
                              "thread apply all bt"], capture_output=True, text=True,
                             timeout=60).stdout
    except (subprocess.TimeoutExpired, OSError) as e:
        out = f"gdb: {e}"
    with open(log_path, "a") as log:
        log.write(f"=== stacks of pid {pid} ({why})\n{out}\n")


class Replicas:
    """N replicas of ocsd on `fleet` (an ocsd_fleet.Fleet whose devices run)
    and `cluster` (a started EtcdCluster), under a supervisor thread."""

    def __init__(self, fleet, cluster, n=3, ttl_s=1, extra=()):
        self.fleet, self.cluster, self.ttl_s, self.extra = fleet, cluster, ttl_s, extra
        base = testports.reserve(n)
        self.reps = [Replica(self, k, base + k) for k in range(n)]
        self.events = []  # (time, replica id, "start"|"exit"|"kill"|..., detail)
        self.lock = threading.RLock()  # guards every Replica's proc/flags and events
        self.prefix = "/ocsd/" + self._fabric_name() + "/"
        self.closing = False
        self.sup = threading.Thread(target=self._supervise, daemon=True)
        self.sup.start()

    def _fabric_name(self):
        with open(self.fleet.cfg) as f:
            return json.load(f)["ocsd-fabric:fabric"]["name"]

    @property
    def leader_key(self):
        return self.prefix + "leader"

    def _event(self, r, what, detail=""):
        self.events.append((time.time(), r.id, what, detail))

    # --- processes -------------------------------------------------------

    def start(self, k):
        """Starts replica k (supervised from now on); returns at once: a
        replica waits as a standby until it leads."""
        with self.lock:
            r = self.reps[k]
            assert not r.running()
            with open(r.log_path, "a") as log:
                log.write(f"=== start {time.time():.3f}\n")
                log.flush()
                r.proc = subprocess.Popen(r.args(), stdout=log, stderr=log)
            r.supervised, r.paused, r.exit_seen = True, False, None
            self._event(r, "start", str(r.proc.pid))

    def start_all(self):
        for k in range(len(self.reps)):
            self.start(k)

    def _signal(self, k, sig, what):
        with self.lock:
            r = self.reps[k]
            if not r.running():
                return False
            r.proc.send_signal(sig)
            self._event(r, what)
            return True

    def kill(self, k):
        """kill -9; the supervisor starts it again 200 ms after the exit."""
        if self._signal(k, signal.SIGKILL, "kill"):
            self.reps[k].paused = False

    def pause(self, k):
        """SIGSTOP."""
        if self._signal(k, signal.SIGSTOP, "pause"):
            self.reps[k].paused = True

    def resume(self, k):
        """SIGCONT."""
        if self._signal(k, signal.SIGCONT, "resume"):
            self.reps[k].paused = False

    def stop(self, k, timeout_s=30):
        """SIGTERM (a leader resigns: its lease is revoked), not restarted;
        returns the exit status (None when it had to be killed)."""
        with self.lock:
            r = self.reps[k]
            r.supervised = False
            if not r.running():
                return r.proc.returncode if r.proc else None
            if r.paused:
                r.proc.send_signal(signal.SIGCONT)
                r.paused = False
            r.proc.send_signal(signal.SIGTERM)
            self._event(r, "stop")
        try:
            code = r.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            dump_stacks(r.proc.pid, r.log_path, f"ignored SIGTERM for {timeout_s} s")
            r.proc.kill()
            r.proc.wait()
            code = None
        with self.lock:
            self._event(r, "exit", str(code))
        return code

    def restart(self, k):
        """A clean restart (SIGTERM, then start)."""
        self.stop(k)
        self.start(k)

    def _supervise(self):
        while not self.closing:
            with self.lock:
                now = time.time()
                for k, r in enumerate(self.reps):
                    if not r.supervised or r.proc is None or r.proc.poll() is None:
                        continue
                    if r.exit_seen is None:
                        r.exit_seen = now
                        self._event(r, "exit", str(r.proc.returncode))
                    elif now - r.exit_seen >= RESTART_DELAY_S:
                        self.start(k)
            time.sleep(0.02)

    def close(self):
        """Stops the supervisor and every replica (SIGTERM, then -9)."""
        self.closing = True
        self.sup.join(5)
        for k in range(len(self.reps)):
            self.stop(k)

    # --- leadership -------------------------------------------------------

    def health(self, k, service, timeout_s=1.0):
        """grpc.health.v1 Check(service) on replica k: "SERVING",
        "NOT_SERVING", "UNKNOWN_SERVICE" (NOT_FOUND) or None (no answer)."""
        import grpc
        from grpc.health.v1 import health_pb2, health_pb2_grpc
        with grpc.insecure_channel(self.reps[k].advertise) as ch:
            try:
                r = health_pb2_grpc.HealthStub(ch).Check(
                    health_pb2.HealthCheckRequest(service=service), timeout=timeout_s)
            except grpc.RpcError as e:
                return "UNKNOWN_SERVICE" if e.code() == grpc.StatusCode.NOT_FOUND else None
        return health_pb2.HealthCheckResponse.ServingStatus.Name(r.status)

    def serving_leader(self):
        """Indexes of the replicas whose Check("ocs.v1.Jobs") is SERVING. A
        daemon without per-service health answers NOT_FOUND: then a replica
        counts when Check("") is SERVING and etcd's leader key names it."""
        out = []
        for k, r in enumerate(self.reps):
            if not r.running() or r.paused:
                continue
            s = self.health(k, "ocs.v1.Jobs")
            if s == "SERVING":
                out.append(k)
            elif s == "UNKNOWN_SERVICE" and self.health(k, "") == "SERVING":
                try:
                    holder, _ = self.etcd_leader()
                except RuntimeError:
                    holder = None
                if holder == k:
                    out.append(k)
        return out

    def etcd_leader(self):
        """(replica index or None, create revision) of etcd's leader key, or
        (None, 0) when there is none."""
        kv = self.cluster.get_json(self.leader_key)
        if kv is None:
            return None, 0
        rid = kv["value"].split(" ")[0]
        k = next((i for i, r in enumerate(self.reps) if r.id == rid), None)
        return k, int(kv.get("create_revision", 0))

    def wait_leader(self, timeout_s=30):
        """The index of the one replica serving as leader; raises
        RuntimeError when none does within timeout_s."""
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            found = self.serving_leader()
            if len(found) == 1:
                return found[0]
            time.sleep(0.1)
        raise RuntimeError(f"no serving leader after {timeout_s} s")

    def terms(self):
        """Leader terms each replica's log reports: [(time, replica id,
        create revision)] from "replica rK leads (leader key revision R"."""
        out = []
        for r in self.reps:
            for m in re.finditer(r"^(\S+)Z ocsd\[\d+\] <\d+> \w+: replica (\S+) leads "
                                 r"\(leader key revision (\d+)", r.log(), re.M):
                out.append((_log_time(m.group(1)), m.group(2), int(m.group(3))))
        return sorted(out)

    def client(self, rpc_timeout_s=30):
        return Client(self, rpc_timeout_s)


def _log_time(stamp):
    """Seconds since the epoch of a log line's "2026-11-24T20:42:07.123" (UTC)."""
    import calendar
    day, frac = stamp.split(".")
    return calendar.timegm(time.strptime(day, "%Y-%m-%dT%H:%M:%S")) + int(frac) / 1000.0


TRACE_KEEP = 64
# gRPC core also takes the minimum backoff as the connect timeout: it stays
# at 1 s: a stalled connection attempt ends soon (see Client._connect)
RECONNECT = [("grpc.initial_reconnect_backoff_ms", 50), ("grpc.min_reconnect_backoff_ms", 1000),
             ("grpc.max_reconnect_backoff_ms", 200)]
NOT_LEADER = re.compile(r"not the leader; leader is (\S+)")


class Client:
    """A grpcio client of the replica set that finds the leader itself.
    One per thread (it keeps a channel per replica). Every call returns
    (outcome, answer, detail): outcome "ok", "fail" (certainly not done) or
    "info" (indeterminate); answer the response on "ok"; detail the
    replica that answered, or the error."""

    def __init__(self, reps, rpc_timeout_s=30):
        import grpc
        from ocs.v1 import fabric_pb2_grpc, jobs_pb2_grpc
        self.grpc = grpc
        self.reps, self.timeout = reps, rpc_timeout_s
        self._stubs = (jobs_pb2_grpc.JobsStub, fabric_pb2_grpc.FabricStub)
        n = len(reps.reps)
        self.chans, self.jobs, self.fabric = [None] * n, [None] * n, [None] * n
        for k in range(n):
            self._connect(k)
        self.hint = 0
        self.redirects = 0
        self.trace = []  # the last TRACE_KEEP failed attempts: (time, replica, code, details)

    def _connect(self, k):
        """A new channel to replica k. A replica refuses connections while it
        is a standby or restarting; a channel that saw that keeps backing off
        (gRPC's default: 1 s growing to 120 s), and one whose first
        connection to a replica that had just started stalled kept failing
        for seconds after the replica served (seen on this machine): a new
        channel after every failed connection avoids both."""
        if self.chans[k] is not None:
            self.chans[k].close()
        self.chans[k] = self.grpc.insecure_channel(self.reps.reps[k].advertise, options=RECONNECT)
        self.jobs[k] = self._stubs[0](self.chans[k])
        self.fabric[k] = self._stubs[1](self.chans[k])

    def close(self):
        for c in self.chans:
            c.close()

    def _index_of(self, target):
        return next((k for k, r in enumerate(self.reps.reps) if r.advertise == target), None)

    def _call(self, fn, deadline_s, write):
        """Runs fn(k) on the leader: the hinted replica first, then the
        others, following redirects, until deadline_s (seconds from now)
        passes. A write that reached a replica and failed other than
        "not the leader" is indeterminate."""
        grpc = self.grpc
        end = time.time() + deadline_s
        n = len(self.reps.reps)
        last = "no replica answered"
        tried = 0
        k = self.hint
        while time.time() < end:
            left = end - time.time()
            try:
                ans = fn(k, min(self.timeout, max(0.1, left)))
                self.hint = k
                return "ok", ans, self.reps.reps[k].id
            except grpc.RpcError as e:
                code, details = e.code(), e.details() or ""
                self.trace.append((time.time(), self.reps.reps[k].id, code.name, details))
                del self.trace[:-TRACE_KEEP]
                m = NOT_LEADER.search(details)
                if code == grpc.StatusCode.UNAVAILABLE and "not the leader;" in details:
                    # a replica that is not the leader refused it before doing
                    # anything ("not the leader; leader is X" / "; no leader
                    # yet"); "not the leader any more: job X stays accepted"
                    # and a store failure naming the lost lead are not that:
                    # the job may be stored, and the next leader runs it
                    j = self._index_of(m.group(1)) if m else None
                    last = f"{self.reps.reps[k].id}: {details}"
                    if j is not None and j != k:
                        self.redirects += 1
                        k = j
                        continue
                elif write and code == grpc.StatusCode.UNAVAILABLE and "nothing changed" in details:
                    # the leader refused it before changing anything (e.g. etcd unreachable)
                    return "fail", None, f"{self.reps.reps[k].id}: {code.name}: {details}"
                elif code == grpc.StatusCode.UNAVAILABLE and _never_sent(details):
                    last = f"{self.reps.reps[k].id}: {details}"
                    self._connect(k)
                elif write:
                    # reached a replica (or may have): the write may have happened
                    if code in (grpc.StatusCode.INVALID_ARGUMENT,
                                grpc.StatusCode.FAILED_PRECONDITION,
                                grpc.StatusCode.RESOURCE_EXHAUSTED,
                                grpc.StatusCode.NOT_FOUND,
                                grpc.StatusCode.ALREADY_EXISTS):
                        return "fail", None, f"{self.reps.reps[k].id}: {code.name}: {details}"
                    return "info", None, f"{self.reps.reps[k].id}: {code.name}: {details}"
                else:
                    last = f"{self.reps.reps[k].id}: {code.name}: {details}"
            tried += 1
            k = (k + 1) % n
            if tried % n == 0:
                time.sleep(0.05)  # nobody leads now: a round every 50 ms
        return ("fail" if write else "info"), None, "deadline: " + last

    def submit(self, spec, deadline_s=None):
        return self._call(lambda k, t: self.jobs[k].SubmitJob(spec, timeout=t),
                          deadline_s or self.timeout, True)

    def release(self, job_id, deadline_s=None):
        from ocs.v1 import jobs_pb2
        req = jobs_pb2.ReleaseJobRequest(id=job_id)
        return self._call(lambda k, t: self.jobs[k].ReleaseJob(req, timeout=t),
                          deadline_s or self.timeout, True)

    def get_job(self, job_id, deadline_s=None):
        from ocs.v1 import jobs_pb2
        req = jobs_pb2.GetJobRequest(id=job_id)
        return self._call(lambda k, t: self.jobs[k].GetJob(req, timeout=t),
                          deadline_s or self.timeout, False)

    def list_jobs(self, deadline_s=None):
        """Every job, all pages."""
        from ocs.v1 import jobs_pb2

        def fn(k, t):
            out, token = [], ""
            while True:
                r = self.jobs[k].ListJobs(jobs_pb2.ListJobsRequest(page_token=token), timeout=t)
                out.extend(r.jobs)
                token = r.next_page_token
                if not token:
                    return out
        return self._call(fn, deadline_s or self.timeout, False)

    def summary(self, k, timeout_s=2):
        """GetFabric of replica k itself (no leader search), or None."""
        from ocs.v1 import fabric_pb2
        try:
            return self.fabric[k].GetFabric(fabric_pb2.GetFabricRequest(), timeout=timeout_s)
        except self.grpc.RpcError:
            return None

    def list_circuits(self, deadline_s=None):
        """Every circuit, all pages."""
        from ocs.v1 import fabric_pb2

        def fn(k, t):
            out, token = [], ""
            while True:
                r = self.fabric[k].ListCircuits(fabric_pb2.ListCircuitsRequest(page_token=token),
                                                timeout=t)
                out.extend(r.circuits)
                token = r.next_page_token
                if not token:
                    return out
        return self._call(fn, deadline_s or self.timeout, False)


def _never_sent(details):
    """True for a gRPC UNAVAILABLE that says the connection was never made
    (so the request never reached the replica)."""
    d = details.lower()
    return ("connection refused" in d or "failed to connect" in d
            or "connect failed" in d or "no route" in d or "handshaker shutdown" in d)
