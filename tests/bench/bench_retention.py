#!/usr/bin/python3
"""bench_retention.py - what a long job history costs the running daemon
(issue 10, point 7): the real ocsd on the lab fabric (16 ocs-devsim devices)
with an empty state store, then with 100,000 finished jobs in it, measured in
the same run against the same devices:

  scrape  GET /metrics, one request at a time: median latency
  cycle   SubmitJob + ReleaseJob of fresh small jobs, 4 clients on disjoint
          leaf pairs (real device transactions): p50 per call
  plan    PlanJob dry runs of small jobs, 8 clients: plans/s

The history is written straight into the SQLite file before ocsd starts, in
the schema ocsd itself created (ocsd is started once on the empty directory
and stopped): 100,000 jobs RELEASED (90%) or FAILED (10%) within the last
hour, half with an idempotency key, each with its request as SubmitJob
stores it (a packed JobSpec), a confirmed submit intent (two additions, one
leaf-spine link) and a confirmed release intent (two removals). ocsd runs
with --retention-jobs 1000000 so that the retention keeps them; the run
checks that it did (ocsd_jobs{state=...} and ocsd_jobs_pruned_total).

Printed: both figures, the ratio full/empty, and the target: within 10% of
an empty store. A missed target is reported, not a failure (benchmarks fail
only on a broken guarantee); a failed call, a lost history or an ocsd that
does not stop cleanly fail the run. The clients are python3-grpcio processes
over mTLS (one process each, as in bench_daemon_load.py), started and
connected once per ocsd, so that slow process start-up on a loaded machine
does not eat into a load.

usage: bench_retention.py BUILD_DIR SOURCE_DIR [SECONDS_PER_LOAD] [JOBS]
(defaults 3 s and 100000)
"""
import multiprocessing
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import time

PLAN_CLIENTS = 8
# Disjoint leaf pairs of the lab fabric (a live job owns its leaves): one per cycle client.
CYCLE_SLOTS = [(0, 2), (1, 3), (4, 6), (5, 7)]
# Cross-pod leaf pairs of the lab fabric (2 leaves per pod), for the plans.
PAIRS = [(a, b) for a in range(8) for b in range(8) if a < b and a // 2 != b // 2]
SCRAPES = 20
TARGET = 0.10  # within 10% of an empty store
START_TIMEOUT_S = 300  # ocsd loads the whole history before it serves


def job_spec(jobs_pb2, job_id, a, b, links):
    """A small job: one GPU on each of leaves a and b, `links` links between them."""
    gpus = [jobs_pb2.GpuPlacement(gpu=8 * leaf, leaf=leaf, pod=leaf // 2) for leaf in (a, b)]
    return jobs_pb2.JobSpec(
        id=job_id, placement=jobs_pb2.Placement(gpus=gpus),
        leaf_demand=jobs_pb2.LeafDemand(pairs=[jobs_pb2.LeafPair(a=a, b=b, links=links)]))


def write_history(db_path, jobs_pb2, n_jobs):
    """Adds n_jobs finished jobs and their intents to ocsd's own schema;
    returns the schema version ocsd wrote."""
    now_ms = int(time.time() * 1000)
    db = sqlite3.connect(db_path)
    version = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
    jobs, intents, xcs, links = [], [], [], []
    for i in range(n_jobs):
        job_id = "hist-%06d" % i
        a, b = CYCLE_SLOTS[i % len(CYCLE_SLOTS)]
        created = now_ms - 3600 * 1000 + i * 3600 * 1000 // n_jobs
        failed = i % 10 == 9
        jobs.append((job_id, "hist-key-%06d" % i if i % 2 else None,
                     "FAILED" if failed else "RELEASED",
                     "RESOURCE_EXHAUSTED: placement.gpus: no free uplinks" if failed else None,
                     job_spec(jobs_pb2, job_id, a, b, 1).SerializeToString(), created,
                     created + 20, i + 1))
        submit, release = 2 * i + 1, 2 * i + 2
        intents += [(submit, job_id, "confirmed", None, created + 1, created + 5),
                    (release, job_id, "confirmed", None, created + 10, created + 15)]
        d = i % 16
        for op, txn in (("add", submit), ("del", release)):
            owner = job_id if op == "add" else None
            xcs += [(txn, op, d // 4, d, a, 4 + b % 4, owner),
                    (txn, op, d // 4, d ^ 1, 4 + b % 4, a, owner)]
        links.append((submit, job_id, a, b, d // 4, 1))
    with db:
        db.executemany("INSERT INTO jobs(id, idempotency_key, state, reason, request,"
                       " created_ms, updated_ms, seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", jobs)
        db.executemany("INSERT INTO intents(txn_id, job_id, state, detail, created_ms,"
                       " finished_ms) VALUES (?, ?, ?, ?, ?, ?)", intents)
        db.executemany("INSERT INTO intent_xcs(txn_id, op, grp, device, in_port, out_port,"
                       " job_id) VALUES (?, ?, ?, ?, ?, ?, ?)", xcs)
        db.executemany("INSERT INTO intent_links(txn_id, job_id, a, b, h, links)"
                       " VALUES (?, ?, ?, ?, ?, ?)", links)
    db.close()
    return version


def count_finished(db_path):
    db = sqlite3.connect("file:%s?mode=ro" % db_path, uri=True)
    n = db.execute("SELECT COUNT(*) FROM jobs WHERE state IN ('RELEASED', 'FAILED')").fetchone()[0]
    db.close()
    return n


def metric(text, name, labels=""):
    m = re.search(r"^%s%s (\S+)$" % (re.escape(name), re.escape(labels)), text, re.M)
    return float(m.group(1)) if m else None


def worker(gen, certs, target, index, commands, out):
    """A client process: connects once, then runs the loads it is sent
    ((kind, start_at, seconds); None stops it) and answers each with its
    per-call latencies in seconds, or a string saying what failed."""
    import grpc
    sys.path.insert(0, gen)
    from ocs.v1 import jobs_pb2, jobs_pb2_grpc

    def read(name):
        with open(os.path.join(certs, name), "rb") as f:
            return f.read()

    ch = grpc.secure_channel(target, grpc.ssl_channel_credentials(
        read("ca.pem"), read("scheduler.key"), read("scheduler.pem")))
    stub = jobs_pb2_grpc.JobsStub(ch)
    try:
        grpc.channel_ready_future(ch).result(timeout=120)  # connected before any clock
        out.put(("ready", None))
    except grpc.FutureTimeoutError:
        out.put(("ready", "client %d: no connection to ocsd in 120 s" % index))
        return
    for kind, start_at, seconds in iter(commands.get, None):
        lat, n = [], 0
        try:
            while time.time() < start_at:
                time.sleep(0.001)
            while time.time() < start_at + seconds:
                if kind == "plan":
                    a, b = PAIRS[(index + n) % len(PAIRS)]
                    links = 1 + n % 4
                    t0 = time.perf_counter()
                    r = stub.PlanJob(job_spec(jobs_pb2, "p-%d-%d" % (index, n), a, b, links),
                                     timeout=60)
                    lat.append(time.perf_counter() - t0)
                    if r.figures.links_placed != links:
                        raise RuntimeError("plan placed %d of %d links"
                                           % (r.figures.links_placed, links))
                else:
                    a, b = CYCLE_SLOTS[index]
                    job_id = "c-%d-%d-%d" % (index, int(start_at * 1000), n)
                    t0 = time.perf_counter()
                    r = stub.SubmitJob(job_spec(jobs_pb2, job_id, a, b, 1 + n % 4), timeout=60)
                    t1 = time.perf_counter()
                    if r.job.state != jobs_pb2.JOB_STATE_ACTIVE:
                        raise RuntimeError("%s: %s %s" % (job_id, r.job.state, r.job.reason))
                    r = stub.ReleaseJob(jobs_pb2.ReleaseJobRequest(id=job_id), timeout=60)
                    if r.job.state != jobs_pb2.JOB_STATE_RELEASED:
                        raise RuntimeError("%s: release %s" % (job_id, r.job.state))
                    lat += [t1 - t0, time.perf_counter() - t1]
                n += 1
        except (grpc.RpcError, RuntimeError) as e:
            lat = "client %d: %s" % (index, e.details() if isinstance(e, grpc.RpcError) else e)
        out.put(("done", lat))
    ch.close()


class Clients:
    """PLAN_CLIENTS connected worker processes on one ocsd; the first
    len(CYCLE_SLOTS) of them also run the submit/release cycles."""

    def __init__(self, ctx, gen, certs, target):
        self.out = ctx.Queue()
        self.commands = [ctx.Queue() for _ in range(PLAN_CLIENTS)]
        self.procs = [ctx.Process(target=worker, args=(gen, certs, target, i, q, self.out))
                      for i, q in enumerate(self.commands)]
        for p in self.procs:
            p.start()
        errors = [self.out.get(timeout=180)[1] for _ in self.procs]
        if any(errors):
            self.close()
            raise RuntimeError("; ".join(e for e in errors if e))

    def run(self, kind, seconds):
        """Per-call latencies of every client over `seconds`, all started together."""
        clients = len(CYCLE_SLOTS) if kind == "cycle" else PLAN_CLIENTS
        start_at = time.time() + 0.3
        for q in self.commands[:clients]:
            q.put((kind, start_at, seconds))
        lat, errors = [], []
        for _ in range(clients):
            got = self.out.get(timeout=seconds + 180)[1]
            if isinstance(got, str):
                errors.append(got)
            else:
                lat += got
        if errors or not lat:
            raise RuntimeError("clients failed: " + ("; ".join(errors) or "no call finished"))
        return lat

    def close(self):
        for q in self.commands:
            q.put(None)
        for p in self.procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100.0 * len(values)))]


def measure(fleet, clients, seconds):
    """The three figures on the running ocsd: (scrape ms, cycle p50 ms, plans/s)."""
    scrapes = []
    for _ in range(SCRAPES):
        t0 = time.perf_counter()
        fleet.metrics()
        scrapes.append((time.perf_counter() - t0) * 1e3)
    cycle = clients.run("cycle", seconds)
    plans = clients.run("plan", seconds)
    return statistics.median(scrapes), percentile(cycle, 50) * 1e3, len(plans) / seconds


def start(fleet, certs, state_dir):
    """Starts ocsd on state_dir with a retention that keeps the history;
    returns how long it took to serve."""
    fleet.state_dir = state_dir
    os.makedirs(state_dir, exist_ok=True)
    t0 = time.perf_counter()
    fleet.start_ocsd("--tls-ca", os.path.join(certs, "ca.pem"),
                     "--tls-cert", os.path.join(certs, "server.pem"),
                     "--tls-key", os.path.join(certs, "server.key"),
                     "--retention-jobs", "1000000", insecure=False, reconcile_s=60)
    return time.perf_counter() - t0


def main():
    build, src = sys.argv[1], sys.argv[2]
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 3.0
    n_jobs = int(sys.argv[4]) if len(sys.argv) > 4 else 100000
    sys.path.insert(0, os.path.join(src, "tests", "integration"))
    import ocsd_fleet

    ocsd_fleet.START_TIMEOUT_S = START_TIMEOUT_S
    fleet = ocsd_fleet.Fleet(build, src, prefix="ocsd-bench-retention-")
    gen, certs = os.path.join(fleet.work, "gen"), os.path.join(fleet.work, "certs")
    ocsd_fleet.gen_stubs(os.path.join(src, "proto"), gen)
    from ocs.v1 import jobs_pb2
    subprocess.run(["bash", os.path.join(src, "tests", "integration", "nb_make_certs.sh"),
                    certs], check=True, stdout=subprocess.DEVNULL)
    empty_dir = os.path.join(fleet.work, "state-empty")
    full_dir = os.path.join(fleet.work, "state-full")
    ctx = multiprocessing.get_context("spawn")  # no gRPC state crosses a fork
    ok = False
    try:
        fleet.start_devices()
        # ocsd creates the schema of the full store, then the history goes in.
        start(fleet, certs, full_dir)
        if fleet.stop_ocsd() != 0:
            raise RuntimeError("ocsd did not stop cleanly after creating the store")
        t0 = time.perf_counter()
        version = write_history(os.path.join(full_dir, "ocsd.db"), jobs_pb2, n_jobs)
        print("retention: %d finished jobs (schema version %s) written in %.1f s; lab fabric, "
              "16 devsim devices, mTLS grpcio clients, %.1f s per load, %d cores"
              % (n_jobs, version, time.perf_counter() - t0, seconds, os.cpu_count()),
              flush=True)

        figures = {}
        for name, state_dir in (("empty", empty_dir), ("full", full_dir)):
            took = start(fleet, certs, state_dir)
            clients = Clients(ctx, gen, certs, fleet.target)
            try:
                clients.run("cycle", 0.5)  # warm-up: the first transaction opens the sessions
                figures[name] = measure(fleet, clients, seconds)
            finally:
                clients.close()
            text = fleet.metrics()
            kept = sum(metric(text, "ocsd_jobs", '{state="%s"}' % s) or 0
                       for s in ("RELEASED", "FAILED"))
            pruned = metric(text, "ocsd_jobs_pruned_total") or 0
            print("%-5s store: ocsd serving %5.2f s after start, %6d finished jobs, %d pruned"
                  % (name, took, kept, pruned), flush=True)
            if fleet.stop_ocsd() != 0:
                raise RuntimeError("ocsd did not stop cleanly (%s store)" % name)
            if name == "full" and (kept < n_jobs or pruned or
                                   count_finished(os.path.join(full_dir, "ocsd.db")) < n_jobs):
                raise RuntimeError("the history was not kept: %d jobs listed, %d pruned"
                                   % (kept, pruned))

        print("%-31s %12s %12s %6s  %s" % ("", "empty store", "%d jobs" % n_jobs, "ratio",
                                           "target: within 10% of an empty store"))
        for label, i, higher_is_better in (("/metrics scrape, median (ms)", 0, False),
                                           ("SubmitJob+ReleaseJob p50 (ms)", 1, False),
                                           ("dry-run PlanJob (plans/s)", 2, True)):
            empty, full = figures["empty"][i], figures["full"][i]
            ratio = full / empty
            met = ratio >= 1 - TARGET if higher_is_better else ratio <= 1 + TARGET
            print("%-31s %12.2f %12.2f %6.2f  %s"
                  % (label, empty, full, ratio, "met" if met else "MISSED"), flush=True)
        ok = True
    finally:
        fleet.close()
        if not ok:
            fleet.dump_logs()
        fleet.remove()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
