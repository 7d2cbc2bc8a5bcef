#!/usr/bin/python3
"""bench_failover.py - how long writes stop when the leader dies (issue 15,
"Failover"): 3 ocsd replicas (lease TTL 1 s) on a 3-member etcd cluster and
the lab fleet of 16 ocs-devsim devices, all on loopback, started by
tests/integration/ocsd_replicas.py (its supervisor restarts a killed
replica 200 ms after its exit, as the 3-replica systemd unit does).

Each of KILLS rounds: a job is ACTIVE (submitted through the leader), every
replica runs and the previous victim is back (a follower; a standby on a
daemon without followers); the leader gets
`kill -9`; a client releases the job until a replica acknowledges it
(RELEASED): it tries every replica (the killed one last), a fresh channel
each attempt, follows "not the leader; leader is ..." redirects, and starts
a new round every 10 ms. The time from the kill
to that acknowledgement is the failover time. Its split, from the same
clock (everything runs on this machine):
  lease     kill -9 to the leader key's DELETE (the lease expired), seen by
            a watch on the key (ocsd_replicas.KeyWatch, etcdctl)
  campaign  that DELETE to the new leader's log line "replica rK leads"
  recovery  that line to the new leader serving writes (its log line
            "leader: serving writes" for a follower that served reads, its
            start line "... gRPC on" for a standby that served nothing)
  write     serving to the release's acknowledgement (the client finding
            the new leader and the release's own device transaction)
Printed: median, p99 and max of the total and of each part, against the
target (p99 <= 2 s with a 1 s lease). A missed target is reported, not a
failure; a release that never succeeds within 30 s, a job not released,
or no single serving leader within 60 s before a kill fail the run (the
Jepsen-style test checks that leader terms never overlap).

usage: bench_failover.py BUILD_DIR SOURCE_DIR [KILLS]   (default 50)
"""
import os
import re
import statistics
import sys
import time

TARGET_S = 2.0
WRITE_DEADLINE_S = 30
SETTLE_S = 1.5  # after the victim is back: its copy loaded
# The log lines that end a campaign and a recovery: a follower that serves
# reads logs "leader: serving writes" when it has recovered; a standby that
# served nothing logs its start line ("... gRPC on ...") then.
LEADS = re.compile(r"^(\S+)Z ocsd\[\d+\] <\d+> \w+: replica (\S+) leads \(leader key revision")
SERVES = [re.compile(r"^(\S+)Z ocsd\[\d+\] <\d+> \w+: leader: serving writes"),
          re.compile(r"^(\S+)Z ocsd\[\d+\] <\d+> \w+: .*gRPC on ")]
NOT_LEADER = re.compile(r"not the leader; leader is (\S+)")
ATTEMPT_TIMEOUT_S = 10


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100.0 * len(values)))]


def log_after(replica, since, pattern, log_time):
    """The time of the first line of replica's log matching pattern stamped
    at or after `since` (log stamps have millisecond resolution), or None."""
    for line in replica.log().splitlines():
        m = pattern.match(line)
        if m:
            t = log_time(m.group(1))
            if t >= since - 0.001:
                return t
    return None


def job_spec(jobs_pb2, job_id):
    """One link between leaves 0 and 2: one GPU on each."""
    gpus = [jobs_pb2.GpuPlacement(gpu=8 * leaf, leaf=leaf, pod=leaf // 2) for leaf in (0, 2)]
    return jobs_pb2.JobSpec(
        id=job_id, placement=jobs_pb2.Placement(gpus=gpus),
        leaf_demand=jobs_pb2.LeafDemand(pairs=[jobs_pb2.LeafPair(a=0, b=2, links=1)]))


def wait_all_running(reps, timeout_s=30):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if all(r.running() for r in reps.reps):
            return
        time.sleep(0.05)
    raise RuntimeError("a replica did not come back")


def first_write(reps, victim, job_id, jobs_pb2, killed):
    """Releases job_id on the first replica that serves writes after the
    kill; returns (answer, replica index). Each attempt on a fresh channel:
    ocsd_replicas.Client's long-lived channels to replicas that refused
    connections stayed in gRPC's reconnect backoff for 11-13 s after the new
    leader served (measured here), which would measure the client."""
    import grpc
    from ocs.v1 import jobs_pb2_grpc
    req = jobs_pb2.ReleaseJobRequest(id=job_id)
    order = [k for k in range(len(reps.reps)) if k != victim] + [victim]
    i, k, last = 0, order[0], "no attempt"
    while time.time() < killed + WRITE_DEADLINE_S:
        with grpc.insecure_channel(reps.reps[k].advertise) as ch:
            t = time.time()
            try:
                return jobs_pb2_grpc.JobsStub(ch).ReleaseJob(req, timeout=ATTEMPT_TIMEOUT_S), k
            except grpc.RpcError as e:
                last = "%s: %s %s" % (reps.reps[k].id, e.code().name, e.details())
                if os.environ.get("BENCH_DEBUG"):
                    print("debug: +%.3f s %s (%.0f ms)" % (t - killed, last,
                                                          (time.time() - t) * 1e3))
                m = NOT_LEADER.search(e.details() or "")
                j = next((x for x, r in enumerate(reps.reps) if m and r.advertise == m.group(1)),
                         None)
        if j is not None and j != k:
            k = j  # a follower names the leader
            continue
        i += 1
        k = order[i % len(order)]
        if i % len(order) == 0:
            time.sleep(0.01)
    key = reps.cluster.get_json(reps.leader_key)
    ttl = reps.cluster.ctl("lease", "timetolive", "%x" % int(key["lease"])).stdout.strip() \
        if key and key.get("lease") else ""
    raise RuntimeError("no replica released %s within %d s of the kill: %s; leader key now %s %s"
                       % (job_id, WRITE_DEADLINE_S, last, key, ttl))


def one_kill(n, reps, watch, jobs_pb2, ocsd_replicas, out, spec=job_spec):
    """Submits a job (spec(jobs_pb2, id)) on the leader, kills the leader,
    releases the job through the new leader; appends the figures to out."""
    import grpc
    from ocs.v1 import jobs_pb2_grpc
    job_id = "fo-%d" % n
    victim = reps.wait_leader(60)  # exactly one replica serves writes
    with grpc.insecure_channel(reps.reps[victim].advertise) as ch:
        r = jobs_pb2_grpc.JobsStub(ch).SubmitJob(spec(jobs_pb2, job_id),
                                                  timeout=WRITE_DEADLINE_S)
    if r.job.state != jobs_pb2.JOB_STATE_ACTIVE:
        raise RuntimeError("submit %s: %s %s" % (job_id, r.job.state, r.job.reason))
    seen = len(watch.snapshot())
    killed = time.time()
    reps.kill(victim)
    r, new = first_write(reps, victim, job_id, jobs_pb2, killed)
    acked = time.time()
    if r.job.state != jobs_pb2.JOB_STATE_RELEASED:
        raise RuntimeError("release %s after kill %d: %s %s" % (job_id, n, r.job.state,
                                                                 r.job.reason))
    rep = reps.reps[new]
    expired = next((t for (t, kind, _, _, _) in watch.snapshot()[seen:] if kind == "DELETE"),
                   None)
    lead = log_after(rep, killed, LEADS, ocsd_replicas._log_time)
    serve = None
    for pattern in SERVES:
        serve = serve or log_after(rep, lead or killed, pattern, ocsd_replicas._log_time)
    row = {"total": acked - killed}
    if os.environ.get("BENCH_DEBUG"):
        print("debug:", expired, lead, serve, watch.snapshot()[seen:])
        print(rep.log()[-3000:])
    if expired is not None and lead is not None and serve is not None:
        row.update(lease=expired - killed, campaign=lead - expired, recovery=serve - lead,
                   write=acked - serve)
    out.append(row)
    parts = " ".join("%s %.0f" % (k, row[k] * 1e3) for k in ("lease", "campaign", "recovery",
                                                             "write") if k in row)
    print("kill %2d: %s -> %s  %.0f ms  (%s)" % (n + 1, reps.reps[victim].id, rep.id,
                                                 row["total"] * 1e3, parts or "split unknown"),
          flush=True)


def print_split(rows):
    """Prints median, p99 and max of the total and of each part of rows
    (one_kill's); returns the total's p99 in seconds."""
    print("%-10s %10s %10s %10s" % ("ms", "median", "p99", "max"))
    for key in ("total", "lease", "campaign", "recovery", "write"):
        v = [r[key] * 1e3 for r in rows if key in r]
        if v:
            print("%-10s %10.0f %10.0f %10.0f" % (key, statistics.median(v),
                                                  percentile(v, 99), max(v)))
    return percentile([r["total"] for r in rows], 99)


def shut_down(reps, watch, cluster, fleet, ok):
    """Stops everything a run started (any of them None when not started);
    prints the replicas' and the fleet's logs when the run failed. The work
    directory stays when OCSD_TEST_KEEP is set."""
    if reps is not None:
        if not ok:
            for r in reps.reps:
                print("--- %s log (tail)\n%s" % (r.id, "\n".join(r.log().splitlines()[-15:])))
        reps.close()
    if watch is not None:
        watch.close()
    cluster.stop()
    fleet.close()
    if not ok:
        fleet.dump_logs()
    if os.environ.get("OCSD_TEST_KEEP"):
        print("kept", fleet.work)
    else:
        fleet.remove()


def main():
    build, src = sys.argv[1], sys.argv[2]
    kills = int(sys.argv[3]) if len(sys.argv) > 3 else 50
    sys.path.insert(0, os.path.join(src, "tests", "integration"))
    import ocsd_fleet
    import ocsd_replicas

    fleet = ocsd_fleet.Fleet(build, src, confirm_timeout_s=5, prefix="ocsd-bench-failover-")
    ocsd_fleet.gen_stubs(os.path.join(src, "proto"), os.path.join(fleet.work, "gen"))
    from ocs.v1 import jobs_pb2
    cluster = ocsd_replicas.EtcdCluster(fleet.work, members=3)
    reps = watch = None
    rows = []
    ok = False
    try:
        cluster.start()
        fleet.start_devices()
        reps = ocsd_replicas.Replicas(fleet, cluster, n=3, ttl_s=1)
        watch = ocsd_replicas.KeyWatch(cluster, reps.leader_key)
        reps.start_all()
        reps.wait_leader(60)
        print("failover: 3 ocsd replicas (lease TTL 1 s) on a 3-member etcd "
              "(heartbeat 50 ms, election 500 ms), lab fabric, 16 devsim devices, "
              "%d kill -9s of the leader, %d cores" % (kills, os.cpu_count()), flush=True)
        for n in range(kills):
            wait_all_running(reps)
            time.sleep(SETTLE_S)
            one_kill(n, reps, watch, jobs_pb2, ocsd_replicas, rows)
        p99 = print_split(rows)
        print("p99 kill -9 to the first acknowledged write: %.2f s, target %.1f s: %s"
              % (p99, TARGET_S, "met" if p99 <= TARGET_S else "MISSED"))
        print("split known for %d of %d kills" % (sum("lease" in r for r in rows), len(rows)),
              flush=True)
        ok = True
    except Exception as e:  # noqa: BLE001 - reported with the logs
        print("ERROR:", repr(e), flush=True)
    finally:
        shut_down(reps, watch, cluster, fleet, ok)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
