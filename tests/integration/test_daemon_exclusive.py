#!/usr/bin/python3
"""test_daemon_exclusive.py - one ocsd per address and per state directory,
and the modes of what ocsd creates (issue 14 #3, #17):
  - a second ocsd on the gRPC address of a running one is refused (gRPC's
    SO_REUSEPORT would let it bind and take half the calls), saying so;
  - a second ocsd on the state directory of a running one is refused with
    the holder's pid, and starts once the first is gone (the flock goes with
    the process);
  - ocsd.db is created 0600 under umask 022;
  - POST /metrics with a body is 405 (not 413) and names the allowed methods.
Usage: test_daemon_exclusive.py OCSD FABRICS_DIR"""
import http.client
import os
import shutil
import stat
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ocsd_solo import Ocsd, write_fabric  # noqa: E402

ocsd_bin, fabrics = sys.argv[1], sys.argv[2]
failed = 0


def check(cond, what):
    global failed
    if not cond:
        failed += 1
        print("FAIL:", what)
    else:
        print("ok:", what)


def umask022():
    os.umask(0o022)


tmp = tempfile.mkdtemp(prefix="ocsd-excl-")
running = []
try:
    cfg = write_fabric(fabrics, tmp)
    s1, s2 = os.path.join(tmp, "s1"), os.path.join(tmp, "s2")
    a = Ocsd(ocsd_bin, cfg, s1, os.path.join(tmp, "a.log"), preexec_fn=umask022)
    running.append(a)
    a.wait_started()

    # 1. the same gRPC address, another state directory
    b = Ocsd(ocsd_bin, cfg, s2, os.path.join(tmp, "b.log"),
             listen=f"127.0.0.1:{a.grpc_port}")
    running.append(b)
    code = b.wait_exit(20)
    check(code not in (None, 0), f"second ocsd on 127.0.0.1:{a.grpc_port}: exit {code}")
    check(f"cannot listen on 127.0.0.1:{a.grpc_port} (address in use" in b.log(),
          "the refusal names the address in use: " + b.log()[-400:])

    # 2. the same state directory, other addresses
    c = Ocsd(ocsd_bin, cfg, s1, os.path.join(tmp, "c.log"))
    running.append(c)
    code = c.wait_exit(20)
    check(code not in (None, 0), f"second ocsd on state directory s1: exit {code}")
    check(f"state directory {s1} is in use by another ocsd (pid {a.proc.pid}" in c.log(),
          "the refusal names the directory and the holder's pid: " + c.log()[-400:])

    # 3. ocsd.db mode
    mode = stat.S_IMODE(os.stat(os.path.join(s1, "ocsd.db")).st_mode)
    check(mode == 0o600, f"ocsd.db mode {oct(mode)}, want 0o600")
    for side in ("ocsd.db-wal", "ocsd.db-shm"):
        p = os.path.join(s1, side)
        if os.path.exists(p):
            m = stat.S_IMODE(os.stat(p).st_mode)
            check(m == 0o600, f"{side} mode {oct(m)}, want 0o600")

    # 4. POST /metrics with a body
    conn = http.client.HTTPConnection("127.0.0.1", a.metrics_port, timeout=10)
    conn.request("POST", "/metrics", body=b"x=1" * 10,
                 headers={"Content-Type": "application/x-www-form-urlencoded"})
    r = conn.getresponse()
    check(r.status == 405, f"POST /metrics with a body: {r.status}, want 405")
    check(r.getheader("Allow") == "GET, HEAD", f"Allow header {r.getheader('Allow')}")
    conn.close()

    # 5. the lock goes with the process: the directory serves again
    check(a.stop() == 0, "first ocsd stops cleanly")
    d = Ocsd(ocsd_bin, cfg, s1, os.path.join(tmp, "d.log"))
    running.append(d)
    try:
        d.wait_started()
        check(True, "ocsd starts on s1 once the first is gone")
    except RuntimeError as e:
        check(False, f"ocsd on s1 after the first stopped: {e}")
finally:
    for o in running:
        o.stop()
    if failed:
        for name in ("a", "b", "c", "d"):
            p = os.path.join(tmp, name + ".log")
            if os.path.exists(p):
                print(f"--- {name}.log (tail)")
                print(open(p, errors="replace").read()[-1500:])
    shutil.rmtree(tmp, ignore_errors=True)
print("test_daemon_exclusive:", "FAILED" if failed else "OK")
sys.exit(1 if failed else 0)
