#!/usr/bin/python3
"""test_daemon_logs.py - ocsd's log off journald (issue 14 #13): every line
on stderr has one format (UTC timestamp, ocsd[pid], <priority> name: text),
gRPC core's messages come through it with their source named (all three
libraries: unit/test_log.c), and who did what is logged: a job submitted and its outcome, a
release, a drain and an undrain, each with the client certificate's CN.
The real ocsd runs over mTLS with no devices (they sit on ports nobody
listens on, so a submission fails after the transaction's prepare).
Usage: test_daemon_logs.py OCSD FABRICS_DIR PROTO_DIR MAKE_CERTS"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ocsd_fleet import gen_stubs  # noqa: E402
from ocsd_solo import Ocsd, write_fabric  # noqa: E402

ocsd_bin, fabrics, proto_dir, make_certs = sys.argv[1:5]
LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z ocsd\[\d+\] <[0-7]> "
                  r"(emerg|alert|crit|err|warning|notice|info|debug): \S")
failed = 0


def check(cond, what):
    global failed
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        failed += 1


tmp = tempfile.mkdtemp(prefix="ocsd-logs-")
o = o2 = None
try:
    gen_stubs(proto_dir, os.path.join(tmp, "stubs"))
    from ocs.v1 import fabric_pb2, fabric_pb2_grpc, jobs_pb2, jobs_pb2_grpc  # noqa: E402
    certs = os.path.join(tmp, "certs")
    subprocess.run(["bash", make_certs, certs], check=True, capture_output=True)

    def cert(name):
        with open(os.path.join(certs, name), "rb") as f:
            return f.read()

    cfg = write_fabric(fabrics, tmp)
    o = Ocsd(ocsd_bin, cfg, os.path.join(tmp, "state"), os.path.join(tmp, "ocsd.log"),
             extra=("--tls-ca", os.path.join(certs, "ca.pem"),
                    "--tls-cert", os.path.join(certs, "server.pem"),
                    "--tls-key", os.path.join(certs, "server.key"))).wait_started()

    def channel(role):
        creds = grpc.ssl_channel_credentials(root_certificates=cert("ca.pem"),
                                             private_key=cert(role + ".key"),
                                             certificate_chain=cert(role + ".pem"))
        return grpc.secure_channel(f"127.0.0.1:{o.grpc_port}", creds)

    sched, oper = channel("scheduler"), channel("operator")
    jobs = jobs_pb2_grpc.JobsStub(sched)
    spec = jobs_pb2.JobSpec(
        id="log-1", placement=jobs_pb2.Placement(gpus=[
            jobs_pb2.GpuPlacement(gpu=g, leaf=g // 8, pod=g // 16) for g in (0, 16)]),
        leaf_demand=jobs_pb2.LeafDemand(pairs=[jobs_pb2.LeafPair(a=0, b=2, links=1)]))
    try:
        jobs.SubmitJob(spec, timeout=60)
    except grpc.RpcError:
        pass  # no device listens: the job fails, which is logged too
    try:
        jobs_pb2_grpc.JobsStub(oper).ReleaseJob(jobs_pb2.ReleaseJobRequest(id="nope"),
                                                timeout=30)
    except grpc.RpcError:
        pass
    fab = fabric_pb2_grpc.FabricStub(oper)
    fab.DrainDevice(fabric_pb2.DrainDeviceRequest(device="ocs-g0-d0"), timeout=30)
    fab.UndrainDevice(fabric_pb2.UndrainDeviceRequest(device="ocs-g0-d0"), timeout=30)
    sched.close()
    oper.close()

    # gRPC core's own message: a second ocsd on the same address
    o2 = Ocsd(ocsd_bin, cfg, os.path.join(tmp, "state2"), os.path.join(tmp, "ocsd2.log"),
              listen=f"127.0.0.1:{o.grpc_port}")
    o2.wait_exit(20)
    check(o.stop() == 0, "ocsd stops cleanly")

    lines = [ln for ln in o.log().splitlines() if ln.strip()]
    odd = [ln for ln in lines if not LINE.match(ln)]
    check(lines and not odd, f"{len(lines)} lines, all in one format (odd: {odd[:3]})")
    text = o.log()
    check(re.search(r"> (err|info|debug): grpc: ", o2.log()) is not None,
          "gRPC core's messages go through ocsd's logger: " + o2.log()[-300:])
    for want in (r"job submitted \(planner default\) \(job log-1, client slurm\)",
                 r"job (failed|not submitted)[^\n]*\(job log-1, client slurm\)",
                 r"job not released: [^\n]*\(job nope, client alice\)",
                 r"device ocs-g0-d0 drained \(0 running job\(s\) on it\) \(job -, client alice\)",
                 r"device ocs-g0-d0 undrained [^\n]*client alice\)"):
        check(re.search(want, text) is not None, f"logged: /{want}/")
finally:
    for p in (o, o2):
        if p:
            p.stop()
    if failed and o:
        print("--- ocsd log (tail)")
        print(o.log()[-3000:])
    shutil.rmtree(tmp, ignore_errors=True)
print("test_daemon_logs:", "FAILED" if failed else "OK")
sys.exit(1 if failed else 0)
