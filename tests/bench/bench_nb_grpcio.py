#!/usr/bin/python3
"""bench_nb_grpcio.py - load benchmark of the northbound server alone:
16 concurrent python3-grpcio clients (one process each) over mTLS against
nb_test_server (the real ocs_northbound library; a test-only handler that
answers from a table on one worker thread, so no planning is measured).

Two loads, 3 rounds each, medians printed:
  plan    PlanJob dry runs of a small job (3 GPUs, 2 leaf pairs)
  cycle   SubmitJob + ReleaseJob of a fresh job (2 calls per cycle)
Throughput is calls per second over all clients; p50/p99 are per-call
latencies. The ratio is against the issue's target of 1,000 dry-run plans
per second for the whole daemon (this figure is the ceiling the gRPC side
leaves for planning).

usage: bench_nb_grpcio.py NB_TEST_SERVER PROTO_DIR MAKE_CERTS [SECONDS_PER_ROUND]
"""
import multiprocessing
import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

CLIENTS = 16
ROUNDS = 3
TARGET_PLANS_PER_S = 1000.0


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

    def spec(job_id):
        gpus = [jobs_pb2.GpuPlacement(gpu=g, leaf=g // 8, pod=g // 32) for g in (0, 40, 100)]
        pairs = [jobs_pb2.LeafPair(a=0, b=5, links=2), jobs_pb2.LeafPair(a=5, b=12, links=1)]
        return jobs_pb2.JobSpec(id=job_id, placement=jobs_pb2.Placement(gpus=gpus),
                                leaf_demand=jobs_pb2.LeafDemand(pairs=pairs))

    stub.PlanJob(spec("warm-%d" % index), timeout=10)  # connect before the clock starts
    while time.time() < start_at:
        time.sleep(0.001)
    lat = []
    end = start_at + seconds
    try:
        run(stub, jobs_pb2, spec, kind, index, start_at, end, lat)
    except grpc.RpcError as e:
        lat = "client %d: %s %s" % (index, e.code(), e.details())
    ch.close()
    out.put(lat)


def run(stub, jobs_pb2, spec, kind, index, start_at, end, lat):
    n = 0
    while time.time() < end:
        if kind == "plan":
            t0 = time.perf_counter()
            stub.PlanJob(spec("p-%d-%d" % (index, n)), timeout=10)
            lat.append(time.perf_counter() - t0)
        else:
            job_id = "c-%d-%d-%d" % (index, int(start_at), n)
            t0 = time.perf_counter()
            stub.SubmitJob(spec(job_id), timeout=10)
            t1 = time.perf_counter()
            stub.ReleaseJob(jobs_pb2.ReleaseJobRequest(id=job_id), timeout=10)
            t2 = time.perf_counter()
            lat += [t1 - t0, t2 - t1]
        n += 1


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100.0 * len(values)))]


def run_round(ctx, gen, certs, target, kind, seconds):
    out = ctx.Queue()
    start_at = time.time() + 3.0  # every client connected and warmed up
    procs = [ctx.Process(target=client, args=(gen, certs, target, kind, seconds, start_at, i, out))
             for i in range(CLIENTS)]
    for p in procs:
        p.start()
    lat = []
    errors = []
    for _ in procs:
        got = out.get(timeout=seconds + 60)
        if isinstance(got, str):
            errors.append(got)
        else:
            lat += got
    for p in procs:
        p.join()
    if errors:
        raise SystemExit("clients failed: " + "; ".join(errors))
    return len(lat) / seconds, percentile(lat, 50) * 1e3, percentile(lat, 99) * 1e3


def main():
    server_bin, proto_dir, make_certs = sys.argv[1:4]
    seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 2.0
    work = tempfile.mkdtemp(prefix="bench_nb_")
    gen = os.path.join(work, "gen")
    certs = os.path.join(work, "certs")
    os.makedirs(gen)
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I" + proto_dir,
                    "--python_out=" + gen, "--grpc_python_out=" + gen, "ocs/v1/fabric.proto",
                    "ocs/v1/jobs.proto"], check=True)
    subprocess.run(["bash", make_certs, certs], check=True)
    server = subprocess.Popen([server_bin, "--ca", os.path.join(certs, "ca.pem"),
                               "--cert", os.path.join(certs, "server.pem"),
                               "--key", os.path.join(certs, "server.key")],
                              stdout=subprocess.PIPE)
    try:
        ready, _, _ = select.select([server.stdout], [], [], 10)
        line = server.stdout.readline().decode() if ready else ""
        if not line.startswith("port "):
            raise SystemExit("server did not start")
        target = "127.0.0.1:" + line.split()[1]
        ctx = multiprocessing.get_context("spawn")  # no gRPC state crosses a fork
        print("northbound load: %d grpcio client processes, mTLS, %d rounds of %.1f s, %d cores"
              % (CLIENTS, ROUNDS, seconds, os.cpu_count()))
        for kind, label in (("plan", "PlanJob dry runs"),
                            ("cycle", "SubmitJob+ReleaseJob calls")):
            rounds = [run_round(ctx, gen, certs, target, kind, seconds) for _ in range(ROUNDS)]
            rate = statistics.median(r[0] for r in rounds)
            p50 = statistics.median(r[1] for r in rounds)
            p99 = statistics.median(r[2] for r in rounds)
            print("%-28s median %8.0f calls/s  p50 %6.2f ms  p99 %6.2f ms" % (label, rate, p50, p99))
            if kind == "plan":
                print("%-28s ratio to the 1,000 plans/s target: %.2f" % ("", rate / TARGET_PLANS_PER_S))
    finally:
        server.terminate()
        server.wait(30)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
