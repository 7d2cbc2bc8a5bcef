#!/usr/bin/python3
"""test_daemon_lifecycle.py - runs the real ocsd binary the way systemd does
and checks what an operator relies on: READY and watchdog notifications on
NOTIFY_SOCKET, a /metrics endpoint that promtool accepts, SIGHUP re-reads
that report invalid, changed and unchanged fabric files without stopping, and a
clean SIGTERM exit. Usage: test_daemon_lifecycle.py OCSD FABRICS_DIR"""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testports  # noqa: E402

ocsd, fabrics = sys.argv[1], sys.argv[2]
passed = failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what)


def get(port, path, method="GET"):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    try:
        # a status is checked here, not latency: 10 s, as ocsd shares a loaded
        # CI machine (a 5 s deadline once expired under ctest -j2)
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""


def metric(text, name, labels):
    m = re.search(re.escape(name + labels) + r" (\S+)", text)
    return float(m.group(1)) if m else None


tmp = tempfile.mkdtemp(prefix="ocsd-life-")
proc = None
try:
    cfg = os.path.join(tmp, "fabric.json")
    with open(os.path.join(tmp, "pw"), "w") as f:
        f.write("lab-" + os.urandom(6).hex() + "\n")
    # No devices run here: they sit on reserved ports nobody listens on, never
    # on the lab's 18300.. where a quickstart lab may be running.
    dead = testports.reserve(16)
    with open(os.path.join(fabrics, "lab.json")) as f:
        lab = (f.read().replace("/etc/ocsd/device-password", os.path.join(tmp, "pw"))
               .replace('"port-base": 18300', f'"port-base": {dead}'))
    assert f'"port-base": {dead}' in lab, "lab.json no longer has port-base 18300"
    with open(cfg, "w") as f:
        f.write(lab)
    sock_path = os.path.join(tmp, "notify")
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(sock_path)
    notify.settimeout(5)
    env = dict(os.environ, NOTIFY_SOCKET=sock_path, WATCHDOG_USEC="200000")
    errlog = open(os.path.join(tmp, "stderr"), "w+")
    proc = subprocess.Popen([ocsd, "--config", cfg, "--state-dir", tmp, "--listen",
                             "127.0.0.1:0", "--insecure", "--metrics-listen", "127.0.0.1:0"],
                            env=env, stderr=errlog)

    def messages(until, timeout=5.0):
        seen = []
        end = time.time() + timeout
        while time.time() < end:
            try:
                msg = notify.recv(4096).decode()
            except socket.timeout:
                break
            seen.append(msg)
            if until in msg:
                break
        return seen

    ready = messages("READY=1")
    check(any("READY=1" in m for m in ready), f"no READY=1 ({ready})")
    dogs = [m for m in messages("never", timeout=0.7) if "WATCHDOG=1" in m]
    check(len(dogs) >= 2, f"watchdog pinged {len(dogs)} times in 0.7 s at 0.2 s period")

    errlog.seek(0)
    port = int(re.search(r"\(port (\d+)\)", errlog.read()).group(1))
    status, text = get(port, "/metrics")
    check(status == 200, f"/metrics status {status}")
    lint = subprocess.run(["promtool", "check", "metrics"], input=text.encode(),
                          capture_output=True)
    check(lint.returncode == 0, f"promtool: {lint.stdout} {lint.stderr}")
    check(metric(text, "ocsd_ocs_input_ports", '{group="3",state="free"}') == 16,
          "lab group 3 should have 16 free cabled input ports")
    check(get(port, "/other")[0] == 404, "unknown path must be 404")
    check(get(port, "/metrics", "POST")[0] == 405, "POST must be 405")

    def reload_and_count(result):
        proc.send_signal(signal.SIGHUP)
        msgs = messages("READY=1")
        check(any("RELOADING=1" in m for m in msgs), "no RELOADING=1 on SIGHUP")
        _, t = get(port, "/metrics")
        return metric(t, "ocsd_config_reloads_total", '{result="%s"}' % result)

    with open(cfg, "w") as f:
        f.write('{"ocsd-fabric:fabric": {"name": "lab", "pods": "x"}}')
    check(reload_and_count("invalid") == 1, "invalid reload not counted")
    check(proc.poll() is None, "ocsd died on an invalid reload")
    with open(cfg, "w") as f:
        f.write(lab.replace('"pods": 4', '"pods": 3'))
    check(reload_and_count("restart_needed") == 1, "a changed file is not reported")
    with open(cfg, "w") as f:
        f.write(lab.replace('"confirm-timeout-s": 60', '"confirm-timeout-s": 90'))
    check(reload_and_count("restart_needed") == 2, "a changed confirm timeout is not reported")
    # how devices are reached applies live (tests/integration/test_daemon_reload.py
    # shows the devices being reached with the new settings)
    with open(cfg, "w") as f:
        f.write(lab.replace('"rpc-timeout-ms": 5000', '"rpc-timeout-ms": 7000'))
    check(reload_and_count("applied") == 1, "a changed rpc timeout is not applied")
    check(proc.poll() is None, "ocsd died on a reload")
    check(reload_and_count("unchanged") == 1, "an unchanged file is not reported")
    with open(cfg, "w") as f:
        f.write(lab)
    check(reload_and_count("applied") == 2, "going back is not applied")

    proc.send_signal(signal.SIGTERM)
    stopping = messages("STOPPING=1")
    check(any("STOPPING=1" in m for m in stopping), "no STOPPING=1 on SIGTERM")
    try:
        code = proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = "timeout"
    check(code == 0, f"exit code after SIGTERM: {code}")

    # An invalid fabric file stops start-up with exit code 2 and the path.
    with open(cfg, "w") as f:
        f.write(lab.replace('"k-leaf": 8', '"k-leaf": 7'))
    r = subprocess.run([ocsd, "--config", cfg, "--state-dir", tmp, "--insecure", "--listen",
                        "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"],
                       capture_output=True, timeout=10)
    check(r.returncode == 2 and b"/ocsd-fabric:fabric/k-leaf" in r.stderr,
          f"invalid config at start: {r.returncode} {r.stderr}")
    with open(cfg, "w") as f:
        f.write(lab)
    r = subprocess.run([ocsd, "--config", cfg, "--state-dir", "/nonexistent/dir", "--insecure",
                        "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"],
                       capture_output=True, timeout=10)
    check(r.returncode == 1 and b"state store" in r.stderr,
          f"unwritable state dir: {r.returncode} {r.stderr}")
    # Plaintext gRPC off loopback is refused, naming the setting.
    r = subprocess.run([ocsd, "--config", cfg, "--state-dir", tmp, "--insecure", "--listen",
                        "0.0.0.0:0", "--metrics-listen", "127.0.0.1:0"],
                       capture_output=True, timeout=10)
    check(r.returncode == 1 and b"gRPC server" in r.stderr and b"loopback" in r.stderr,
          f"insecure off loopback: {r.returncode} {r.stderr}")
    # A missing device password file stops start-up with the path.
    with open(cfg, "w") as f:
        f.write(lab.replace(os.path.join(tmp, "pw"), os.path.join(tmp, "nope")))
    r = subprocess.run([ocsd, "--config", cfg, "--state-dir", tmp, "--insecure", "--listen",
                        "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"],
                       capture_output=True, timeout=10)
    check(r.returncode == 1 and b"password-file" in r.stderr,
          f"missing password file: {r.returncode} {r.stderr}")
finally:
    if proc is not None and proc.poll() is None:  # a check raised: do not leave ocsd behind
        proc.kill()
        proc.wait()
    shutil.rmtree(tmp, ignore_errors=True)

print(f"daemon-lifecycle: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
