#!/usr/bin/python3
"""bench_daemon_load.py - load benchmark of the whole daemon (issue 5): the
real ocsd on the lab fabric (16 ocs-devsim devices), driven over mTLS by
python3-grpcio client processes (one process per client, so that the
clients are not serialized by one interpreter).

Two loads, ROUNDS rounds each, medians printed:
  plan    16 clients: PlanJob dry runs of small jobs (one leaf pair across
          two pods, 1..4 links; planning on ocsd's solver pool, nothing
          touched). Target: 1,000 plans/s on this 2-core machine (the
          clients share the two cores with ocsd and the devices).
  cycle   SubmitJob + ReleaseJob of a fresh small job, each a real device
          transaction on the NETCONF devices. The lab fabric has 8 leaves
          and a live job owns its leaves, so at most 4 jobs can run at once:
          4 clients, one per disjoint leaf pair (0,2) (1,3) (4,6) (5,7).
Throughput is calls per second over all clients; p50/p99 are per-call
latencies. Every answer is checked (plans place every link; submissions
end ACTIVE, releases RELEASED); any error fails the benchmark.

usage: bench_daemon_load.py BUILD_DIR SOURCE_DIR [SECONDS_PER_ROUND]
"""
import multiprocessing
import os
import statistics
import subprocess
import sys
import time

PLAN_CLIENTS = 16
CYCLE_SLOTS = [(0, 2), (1, 3), (4, 6), (5, 7)]
ROUNDS = 3
TARGET_PLANS_PER_S = 1000.0
# Cross-pod leaf pairs of the lab fabric (2 leaves per pod), for the plans.
PAIRS = [(a, b) for a in range(8) for b in range(8) if a < b and a // 2 != b // 2]


def client(gen, certs, target, kind, seconds, start_at, index, out):
    import grpc
    sys.path.insert(0, gen)
    from ocs.v1 import jobs_pb2, jobs_pb2_grpc

    def read(name):
        with open(os.path.join(certs, name), "rb") as f:
            return f.read()

    creds = grpc.ssl_channel_credentials(read("ca.pem"), read("scheduler.key"),
                                         read("scheduler.pem"))
    ch = grpc.secure_channel(target, creds)
    stub = jobs_pb2_grpc.JobsStub(ch)

    def spec(job_id, a, b, links):
        gpus = [jobs_pb2.GpuPlacement(gpu=8 * leaf, leaf=leaf, pod=leaf // 2) for leaf in (a, b)]
        return jobs_pb2.JobSpec(
            id=job_id, placement=jobs_pb2.Placement(gpus=gpus),
            leaf_demand=jobs_pb2.LeafDemand(pairs=[jobs_pb2.LeafPair(a=a, b=b, links=links)]))

    lat = []
    try:
        stub.ListJobs(jobs_pb2.ListJobsRequest(), timeout=30)  # connected before the clock
        while time.time() < start_at:
            time.sleep(0.001)
        end = start_at + seconds
        n = 0
        while time.time() < end:
            if kind == "plan":
                a, b = PAIRS[(index + n) % len(PAIRS)]
                links = 1 + n % 4
                t0 = time.perf_counter()
                r = stub.PlanJob(spec("p-%d-%d" % (index, n), a, b, links), timeout=30)
                lat.append(time.perf_counter() - t0)
                if r.figures.links_placed != links or len(r.circuits) != links:
                    raise RuntimeError("plan placed %d of %d links" %
                                       (r.figures.links_placed, links))
            else:
                a, b = CYCLE_SLOTS[index]
                job_id = "c-%d-%d-%d" % (index, int(start_at), n)
                t0 = time.perf_counter()
                r = stub.SubmitJob(spec(job_id, a, b, 1 + n % 4), timeout=60)
                t1 = time.perf_counter()
                if r.job.state != jobs_pb2.JOB_STATE_ACTIVE:
                    raise RuntimeError("%s: %s %s" % (job_id, r.job.state, r.job.reason))
                r = stub.ReleaseJob(jobs_pb2.ReleaseJobRequest(id=job_id), timeout=60)
                t2 = time.perf_counter()
                if r.job.state != jobs_pb2.JOB_STATE_RELEASED:
                    raise RuntimeError("%s: release %s" % (job_id, r.job.state))
                lat += [t1 - t0, t2 - t1]
            n += 1
    except (grpc.RpcError, RuntimeError) as e:
        lat = "client %d: %s" % (index, e.details() if isinstance(e, grpc.RpcError) else e)
    ch.close()
    out.put(lat)


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100.0 * len(values)))]


def run_round(ctx, gen, certs, target, kind, clients, seconds):
    out = ctx.Queue()
    start_at = time.time() + 3.0  # every client started and connected
    procs = [ctx.Process(target=client,
                         args=(gen, certs, target, kind, seconds, start_at, i, out))
             for i in range(clients)]
    for p in procs:
        p.start()
    lat, errors = [], []
    for _ in procs:
        got = out.get(timeout=seconds + 120)
        if isinstance(got, str):
            errors.append(got)
        else:
            lat += got
    for p in procs:
        p.join()
    if errors:
        raise RuntimeError("clients failed: " + "; ".join(errors))
    return len(lat) / seconds, percentile(lat, 50) * 1e3, percentile(lat, 99) * 1e3


def main():
    build, src = sys.argv[1], sys.argv[2]
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 3.0
    sys.path.insert(0, os.path.join(src, "tests", "integration"))
    import ocsd_fleet

    fleet = ocsd_fleet.Fleet(build, src, prefix="ocsd-bench-")
    gen, certs = os.path.join(fleet.work, "gen"), os.path.join(fleet.work, "certs")
    ocsd_fleet.gen_stubs(os.path.join(src, "proto"), gen)
    subprocess.run(["bash", os.path.join(src, "tests", "integration", "nb_make_certs.sh"),
                    certs], check=True)
    ok = False
    try:
        fleet.start_devices()
        fleet.start_ocsd("--tls-ca", os.path.join(certs, "ca.pem"),
                         "--tls-cert", os.path.join(certs, "server.pem"),
                         "--tls-key", os.path.join(certs, "server.key"), insecure=False,
                         reconcile_s=60)
        ctx = multiprocessing.get_context("spawn")  # no gRPC state crosses a fork
        # Warm-up: the first transaction opens the device sessions.
        run_round(ctx, gen, certs, fleet.target, "cycle", len(CYCLE_SLOTS), 0.5)
        print("daemon load: ocsd on the lab fabric (16 devsim devices), grpcio client "
              "processes over mTLS, %d rounds of %.1f s, %d cores"
              % (ROUNDS, seconds, os.cpu_count()), flush=True)
        for kind, clients, label in (
                ("plan", PLAN_CLIENTS, "PlanJob dry runs"),
                ("cycle", len(CYCLE_SLOTS), "SubmitJob+ReleaseJob calls")):
            rounds = [run_round(ctx, gen, certs, fleet.target, kind, clients, seconds)
                      for _ in range(ROUNDS)]
            rate = statistics.median(r[0] for r in rounds)
            p50 = statistics.median(r[1] for r in rounds)
            p99 = statistics.median(r[2] for r in rounds)
            print("%-28s %2d clients  median %7.0f calls/s  p50 %7.2f ms  p99 %7.2f ms"
                  % (label, clients, rate, p50, p99), flush=True)
            if kind == "plan":
                print("%-28s ratio to the 1,000 plans/s target: %.2f"
                      % ("", rate / TARGET_PLANS_PER_S), flush=True)
        ok = fleet.stop_ocsd() == 0
    finally:
        fleet.close()
        if not ok:
            fleet.dump_logs()
        fleet.remove()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
