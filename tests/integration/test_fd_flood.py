#!/usr/bin/python3
"""test_fd_flood.py - descriptor exhaustion does not take ocsd's listeners
down (issue 14 #1). ocsd runs with an open-file limit of LIMIT (soft = hard,
so ocsd cannot raise it) and a client opens more idle TCP connections than
that, first to the gRPC port, then to the metrics port:
  - during the gRPC flood the metrics endpoint still answers (gRPC
    connections are capped below the limit, leaving descriptors for the
    rest of the daemon);
  - during the metrics flood ocsd does not spin: it logs a few lines, not
    one per accept() attempt, and uses little CPU;
  - a gRPC connection attempted while the process is out of descriptors
    (during the metrics flood) does not end the gRPC listener;
  - after each flood ends, a gRPC Health.Check and GET /metrics succeed
    within 1 s (the figure is printed).
No certificate is needed to open a TCP connection, so the test runs ocsd
with --insecure on loopback. Usage: test_fd_flood.py OCSD FABRICS_DIR"""
import os
import resource
import shutil
import socket
import sys
import tempfile
import time
import urllib.request

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ocsd_solo import Ocsd, write_fabric  # noqa: E402

LIMIT = 256
FLOOD = 400        # idle connections per flood: more than LIMIT
HOLD_S = 2.0       # how long each flood holds its connections
RECOVER_S = 1.0    # service must be back within this after a flood

ocsd_bin, fabrics = sys.argv[1], sys.argv[2]
failed = 0


def check(cond, what):
    global failed
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        failed += 1


def low_limit():
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))


def health_ok(port, timeout_s):
    """One Health.Check on a fresh channel (no reconnect back-off carried over)."""
    ch = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        check_rpc = ch.unary_unary("/grpc.health.v1.Health/Check")
        return check_rpc(b"", timeout=timeout_s) == b"\x08\x01"  # SERVING
    except grpc.RpcError:
        return False
    finally:
        ch.close()


def metrics_ok(port, timeout_s):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                    timeout=timeout_s) as r:
            return r.status == 200
    except OSError:
        return False


def recovery_s(probe, port, budget_s=5.0):
    """Seconds until probe(port) succeeds (None if not within budget_s)."""
    start = time.monotonic()
    while time.monotonic() - start < budget_s:
        if probe(port, 0.3):
            return time.monotonic() - start
        time.sleep(0.02)
    return None


def flood(port):
    conns = []
    for _ in range(FLOOD):
        try:
            conns.append(socket.create_connection(("127.0.0.1", port), timeout=2))
        except OSError:
            break  # the backlog is full: that is a flood too
    return conns


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
if hard < 2 * FLOOD + 100:
    print(f"test_fd_flood: needs an open-file hard limit of {2 * FLOOD + 100}, have {hard}")
    sys.exit(1)

tmp = tempfile.mkdtemp(prefix="ocsd-fdflood-")
o = None
try:
    cfg = write_fabric(fabrics, tmp)
    o = Ocsd(ocsd_bin, cfg, os.path.join(tmp, "state"), os.path.join(tmp, "ocsd.log"),
             preexec_fn=low_limit).wait_started()
    check(health_ok(o.grpc_port, 5), "gRPC serves before the floods")

    # 1. flood the gRPC port
    conns = flood(o.grpc_port)
    time.sleep(HOLD_S)
    check(len(conns) > LIMIT, f"{len(conns)} idle connections to the gRPC port")
    check(metrics_ok(o.metrics_port, 5),
          "the metrics endpoint answers during the gRPC flood (connections are capped)")
    for c in conns:
        c.close()
    t = recovery_s(health_ok, o.grpc_port)
    print(f"gRPC back {t if t is None else round(t, 3)} s after the gRPC flood")
    check(t is not None and t <= RECOVER_S, f"gRPC serves within {RECOVER_S} s of the flood")
    check(o.proc.poll() is None, "ocsd survived the gRPC flood")

    # 2. flood the metrics port
    lines_before = o.log().count("\n")
    cpu_before = cpu_s(o.proc.pid)
    conns = flood(o.metrics_port)
    time.sleep(HOLD_S)
    cpu = cpu_s(o.proc.pid) - cpu_before
    lines = o.log().count("\n") - lines_before
    # the process is out of descriptors now: a gRPC connection meets EMFILE
    # at accept (gRPC 1.51 alone would stop listening for good)
    health_ok(o.grpc_port, 0.5)
    time.sleep(0.2)
    check(len(conns) > LIMIT, f"{len(conns)} idle connections to the metrics port")
    print(f"during the metrics flood: {cpu:.2f} s CPU, {lines} log lines in {HOLD_S} s")
    check(cpu < HOLD_S / 2, f"ocsd does not spin on accept errors ({cpu:.2f} s CPU)")
    check(lines < 20, f"accept errors are logged once per interval ({lines} lines)")
    for c in conns:
        c.close()
    t = recovery_s(metrics_ok, o.metrics_port)
    print(f"metrics back {t if t is None else round(t, 3)} s after the metrics flood")
    check(t is not None and t <= RECOVER_S, f"/metrics serves within {RECOVER_S} s of the flood")
    t = recovery_s(health_ok, o.grpc_port)
    check(t is not None and t <= RECOVER_S, "gRPC serves within 1 s of the metrics flood")
    check("out of file descriptors (EMFILE)" in o.log(),
          "the gRPC listener met EMFILE during the metrics flood, and said so once")
    check(o.proc.poll() is None, "ocsd survived the metrics flood")
finally:
    if o:
        o.stop()
        if failed:
            print("--- ocsd log (tail)")
            print(o.log()[-3000:])
    shutil.rmtree(tmp, ignore_errors=True)
print("test_fd_flood:", "FAILED" if failed else "OK")
sys.exit(1 if failed else 0)
