#!/usr/bin/python3
"""bench_submit_store.py - what the etcd store costs the running daemon next
to SQLite (issue 15, "Benchmarks"): the real ocsd on the lab fabric (16
ocs-devsim devices), once on a SQLite file (`--store sqlite`) and once on a
single-member etcd on loopback (`--store etcd`, alone on its prefix, no
replicas), against the same devices in the same run. The two stores take
turns, ROUNDS rounds each (the order swaps every round, so that neither
always runs first on a machine whose load drifts); ocsd is started afresh
for every round, on the state the previous rounds left.

Measured on each ocsd:
  submit   SubmitJob + ReleaseJob of fresh small jobs on disjoint leaf pairs
           (real device transactions, 1..4 links), first 1 client alone
           (the latency of one submission), then 4 at once (submissions
           queue behind each other: the latency a busy scheduler sees).
           Per job: the
           RPC's own answer (SubmitJob answers when the job is ACTIVE, see
           northbound/README.md) and submit-to-ACTIVE as a Watch client sees
           it (the JobEvent ACTIVE received on a Watch stream opened before
           the load); the release's answer too.
  plan     PlanJob dry runs of small jobs (cross-pod leaf pairs, 1..4
           links), 8 clients: plans/s (nothing stored, nothing touched).
The clients are python3-grpcio processes (one each, spawned and connected
before the clock starts). Latencies are pooled over the rounds; plans/s is
the median of the rounds.

Printed: p50 and p99 of each latency and plans/s for both stores, and the
ratio etcd/sqlite. Every answer is checked (submissions ACTIVE, releases
RELEASED, plans placing every link, an ACTIVE event for every acknowledged
submission); a failure fails the run, a slow figure never does.

etcd: one member started by tests/integration/ocsd_replicas.py's
EtcdCluster (`--heartbeat-interval 50 --election-timeout 500`, as the
replica tests run it), data directory in the work directory (on /tmp, as
SQLite's file), client URL on a reserved loopback port.

usage: bench_submit_store.py BUILD_DIR SOURCE_DIR [SECONDS_PER_LOAD] [ROUNDS]
(defaults 8 s and 3)
"""
import multiprocessing
import os
import statistics
import sys
import threading
import time

CYCLE_SLOTS = [(0, 2), (1, 3), (4, 6), (5, 7)]  # disjoint leaf pairs: one per cycle client
PLAN_CLIENTS = 8
PAIRS = [(a, b) for a in range(8) for b in range(8) if a < b and a // 2 != b // 2]
RPC_TIMEOUT_S = 60


def job_spec(jobs_pb2, job_id, a, b, links):
    """A small job: one GPU on each of leaves a and b, `links` links between them."""
    gpus = [jobs_pb2.GpuPlacement(gpu=8 * leaf, leaf=leaf, pod=leaf // 2) for leaf in (a, b)]
    return jobs_pb2.JobSpec(
        id=job_id, placement=jobs_pb2.Placement(gpus=gpus),
        leaf_demand=jobs_pb2.LeafDemand(pairs=[jobs_pb2.LeafPair(a=a, b=b, links=links)]))


def worker(gen, target, index, commands, out):
    """A client process: connects once, then runs the loads it is sent
    ((kind, tag, start_at, seconds); None stops it). A submit load answers
    [(job id, sent, submit answered, release answered)] in wall-clock seconds
    (the Watch collector in the parent stamps with the same clock); a plan
    load answers the number of plans; a string says what failed."""
    import grpc
    sys.path.insert(0, gen)
    from ocs.v1 import jobs_pb2, jobs_pb2_grpc

    ch = grpc.insecure_channel(target)
    stub = jobs_pb2_grpc.JobsStub(ch)
    try:
        grpc.channel_ready_future(ch).result(timeout=120)
        out.put(None)
    except grpc.FutureTimeoutError:
        out.put("client %d: no connection to ocsd in 120 s" % index)
        return
    for kind, tag, start_at, seconds in iter(commands.get, None):
        got, n = [], 0
        try:
            while time.time() < start_at:
                time.sleep(0.001)
            while time.time() < start_at + seconds:
                if kind == "plan":
                    a, b = PAIRS[(index + n) % len(PAIRS)]
                    links = 1 + n % 4
                    r = stub.PlanJob(job_spec(jobs_pb2, "p-%d-%d" % (index, n), a, b, links),
                                     timeout=RPC_TIMEOUT_S)
                    if r.figures.links_placed != links:
                        raise RuntimeError("plan placed %d of %d links"
                                           % (r.figures.links_placed, links))
                else:
                    a, b = CYCLE_SLOTS[index]
                    job_id = "%s-%d-%d" % (tag, index, n)
                    t0 = time.time()
                    r = stub.SubmitJob(job_spec(jobs_pb2, job_id, a, b, 1 + n % 4),
                                       timeout=RPC_TIMEOUT_S)
                    t1 = time.time()
                    if r.job.state != jobs_pb2.JOB_STATE_ACTIVE:
                        raise RuntimeError("%s: %s %s" % (job_id, r.job.state, r.job.reason))
                    r = stub.ReleaseJob(jobs_pb2.ReleaseJobRequest(id=job_id),
                                        timeout=RPC_TIMEOUT_S)
                    if r.job.state != jobs_pb2.JOB_STATE_RELEASED:
                        raise RuntimeError("%s: release %s" % (job_id, r.job.state))
                    got.append((job_id, t0, t1, time.time()))
                n += 1
            out.put(n if kind == "plan" else got)
        except (grpc.RpcError, RuntimeError) as e:
            out.put("client %d: %s" % (index, e.details() if isinstance(e, grpc.RpcError) else e))
    ch.close()


class Clients:
    """PLAN_CLIENTS connected worker processes on one ocsd; the first
    len(CYCLE_SLOTS) also run the submit loads."""

    def __init__(self, ctx, gen, target):
        self.out = ctx.Queue()
        self.commands = [ctx.Queue() for _ in range(PLAN_CLIENTS)]
        self.procs = [ctx.Process(target=worker, args=(gen, target, i, q, self.out))
                      for i, q in enumerate(self.commands)]
        for p in self.procs:
            p.start()
        errors = [self.out.get(timeout=180) for _ in self.procs]
        if any(errors):
            self.close()
            raise RuntimeError("; ".join(e for e in errors if e))

    def run(self, kind, tag, seconds, clients=PLAN_CLIENTS):
        start_at = time.time() + 0.3
        for q in self.commands[:clients]:
            q.put((kind, tag, start_at, seconds))
        results = [self.out.get(timeout=seconds + 180) for _ in range(clients)]
        errors = [r for r in results if isinstance(r, str)]
        if errors:
            raise RuntimeError("clients failed: " + "; ".join(errors))
        if kind == "plan":
            return sum(results)
        return [row for r in results for row in r]

    def close(self):
        for q in self.commands:
            q.put(None)
        for p in self.procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()


class ActiveTimes:
    """A Watch stream (job events) on its own thread: when each job's
    ACTIVE event arrived (wall clock)."""

    def __init__(self, channel, events_pb2, events_pb2_grpc, jobs_pb2):
        self.seen = {}
        self.ready = threading.Event()
        self.call = events_pb2_grpc.EventsStub(channel).Watch(
            events_pb2.WatchRequest(jobs=True))
        self.active = jobs_pb2.JOB_STATE_ACTIVE
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            for ev in self.call:
                now = time.time()
                if ev.WhichOneof("kind") == "job" and ev.job.state == self.active:
                    self.seen.setdefault(ev.job.job_id, now)
        except Exception:  # noqa: BLE001 - cancelled at the end: no more events
            pass

    def close(self):
        self.call.cancel()
        self.thread.join(timeout=10)


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100.0 * len(values)))]


def one_round(fleet, ctx, gen, store, etcd, tag, seconds, figures):
    """Starts ocsd on `store`, runs both loads, stops it; adds to figures[store]."""
    import grpc
    from ocs.v1 import events_pb2, events_pb2_grpc, jobs_pb2

    fleet.state_dir = os.path.join(fleet.work, "state-" + store)
    os.makedirs(fleet.state_dir, exist_ok=True)
    extra = ["--store", "etcd", "--etcd-endpoints", etcd.endpoints] if store == "etcd" else []
    fleet.start_ocsd(*extra, reconcile_s=60)
    ch = grpc.insecure_channel(fleet.target)
    watch = ActiveTimes(ch, events_pb2, events_pb2_grpc, jobs_pb2)
    clients = Clients(ctx, gen, fleet.target)
    try:
        clients.run("submit", tag + "-warm", 0.5, 1)  # the first transaction opens the sessions
        rows1 = clients.run("submit", tag + "-1", seconds, 1)
        rows = clients.run("submit", tag, seconds, len(CYCLE_SLOTS))
        plans = clients.run("plan", tag, seconds)
        time.sleep(0.5)  # the last ACTIVE events are on their way
    finally:
        clients.close()
        watch.close()
        ch.close()
    missing = [r[0] for r in rows + rows1 if r[0] not in watch.seen]
    if missing:
        raise RuntimeError("%s: no ACTIVE event for %d acknowledged jobs (%s ...)"
                           % (store, len(missing), missing[0]))
    f = figures[store]
    f["submit1"] += [(t1 - t0) * 1e3 for (_, t0, t1, _) in rows1]
    f["active1"] += [(watch.seen[j] - t0) * 1e3 for (j, t0, _, _) in rows1]
    f["release1"] += [(t2 - t1) * 1e3 for (_, _, t1, t2) in rows1]
    f["submit"] += [(t1 - t0) * 1e3 for (_, t0, t1, _) in rows]
    f["active"] += [(watch.seen[j] - t0) * 1e3 for (j, t0, _, _) in rows]
    f["release"] += [(t2 - t1) * 1e3 for (_, _, t1, t2) in rows]
    f["plans"].append(plans / seconds)
    print("  %-6s %s: %4d + %4d submissions, %6.0f plans/s, submit p50 %.1f / %.1f ms"
          % (store, tag, len(rows1), len(rows), plans / seconds,
             percentile([(t1 - t0) * 1e3 for (_, t0, t1, _) in rows1], 50),
             percentile([(t1 - t0) * 1e3 for (_, t0, t1, _) in rows], 50)), flush=True)
    code = fleet.stop_ocsd()
    if code != 0:
        raise RuntimeError("ocsd on %s did not stop cleanly: %s" % (store, code))


def main():
    build, src = sys.argv[1], sys.argv[2]
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 8.0
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    sys.path.insert(0, os.path.join(src, "tests", "integration"))
    import ocsd_fleet
    import ocsd_replicas

    fleet = ocsd_fleet.Fleet(build, src, prefix="ocsd-bench-store-")
    gen = os.path.join(fleet.work, "gen")
    ocsd_fleet.gen_stubs(os.path.join(src, "proto"), gen)
    etcd = ocsd_replicas.EtcdCluster(fleet.work, members=1)
    ctx = multiprocessing.get_context("spawn")  # no gRPC state crosses a fork
    figures = {s: {k: [] for k in ("submit1", "active1", "release1", "submit", "active",
                                   "release", "plans")}
               for s in ("sqlite", "etcd")}
    ok = False
    try:
        etcd.start()
        fleet.start_devices()
        print("submit latency and dry-run plans/s, SQLite file vs single-member etcd on "
              "loopback: lab fabric, 16 devsim devices, 1 then %d submit and %d plan clients, "
              "%d rounds of %.1f s per load, %d cores"
              % (len(CYCLE_SLOTS), PLAN_CLIENTS, rounds, seconds, os.cpu_count()), flush=True)
        for r in range(rounds):
            order = ("sqlite", "etcd") if r % 2 == 0 else ("etcd", "sqlite")
            for store in order:
                one_round(fleet, ctx, gen, store, etcd, "r%d" % r, seconds, figures)
        print("%-34s %10s %10s %12s" % ("ms (plans/s last)", "sqlite", "etcd", "etcd/sqlite"))
        rows = []
        for n, sfx in (("1 client", "1"), ("%d clients" % len(CYCLE_SLOTS), "")):
            rows += [("SubmitJob answer p50, " + n, "submit" + sfx, 50),
                     ("SubmitJob answer p99, " + n, "submit" + sfx, 99),
                     ("submit to ACTIVE p50, " + n, "active" + sfx, 50),
                     ("submit to ACTIVE p99, " + n, "active" + sfx, 99),
                     ("ReleaseJob answer p50, " + n, "release" + sfx, 50),
                     ("ReleaseJob answer p99, " + n, "release" + sfx, 99)]
        for label, key, p in rows:
            s = percentile(figures["sqlite"][key], p)
            e = percentile(figures["etcd"][key], p)
            print("%-34s %10.1f %10.1f %12.2f" % (label, s, e, e / s))
        s = statistics.median(figures["sqlite"]["plans"])
        e = statistics.median(figures["etcd"]["plans"])
        print("%-34s %10.0f %10.0f %12.2f" % ("dry-run PlanJob (plans/s)", s, e, e / s))
        print("%-34s %10d %10d" % ("submissions measured (1 / %d clients)" % len(CYCLE_SLOTS),
                                   len(figures["sqlite"]["submit1"]),
                                   len(figures["etcd"]["submit1"])))
        print("%-34s %10d %10d" % ("", len(figures["sqlite"]["submit"]),
                                   len(figures["etcd"]["submit"])), flush=True)
        ok = True
    finally:
        fleet.close()
        etcd.stop()
        if not ok:
            fleet.dump_logs()
            log_path = os.path.join(fleet.work, "etcd-m1.log")
            if os.path.exists(log_path):
                with open(log_path, errors="replace") as f:
                    print("--- etcd.log (tail)\n" + "".join(f.readlines()[-20:]))
        fleet.remove()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
