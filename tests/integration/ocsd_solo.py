"""ocsd_solo.py - runs one real ocsd with no devices (the lab fabric's
devices on reserved ports nobody listens on), for tests of the daemon's own
edges: listeners, locks, files, logs. Used by test_daemon_exclusive.py,
test_fd_flood.py and test_daemon_logs.py."""
import os
import re
import subprocess
import time

import testports

START_TIMEOUT_S = 30


def write_fabric(fabrics_dir, tmp):
    """The lab fabric with a password file and dead device ports; its path."""
    pw = os.path.join(tmp, "device-password")
    with open(pw, "w") as f:
        f.write("lab-" + os.urandom(6).hex() + "\n")
    dead = testports.reserve(16)
    with open(os.path.join(fabrics_dir, "lab.json")) as f:
        lab = (f.read().replace("/etc/ocsd/device-password", pw)
               .replace('"port-base": 18300', f'"port-base": {dead}'))
    assert f'"port-base": {dead}' in lab, "lab.json no longer has port-base 18300"
    cfg = os.path.join(tmp, "fabric.json")
    with open(cfg, "w") as f:
        f.write(lab)
    return cfg


class Ocsd:
    """One ocsd process; its stderr goes to LOG (read with .log())."""

    def __init__(self, ocsd_bin, cfg, state_dir, log_path, listen="127.0.0.1:0",
                 metrics="127.0.0.1:0", extra=(), preexec_fn=None, env=None):
        os.makedirs(state_dir, exist_ok=True)
        self.log_path = log_path
        args = [ocsd_bin, "--config", cfg, "--state-dir", state_dir, "--listen", listen,
                "--metrics-listen", metrics, "--reconcile-interval-s", "0"]
        if "--tls-ca" not in extra:
            args.append("--insecure")
        with open(log_path, "w") as log:
            self.proc = subprocess.Popen(args + list(extra), stdout=log, stderr=log,
                                         preexec_fn=preexec_fn, env=env)
        self.grpc_port = self.metrics_port = None

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def wait_started(self):
        """Waits for the start line; returns self (raises if ocsd exited)."""
        deadline = time.time() + START_TIMEOUT_S
        while time.time() < deadline:
            text = self.log()
            m = re.search(r"metrics on \S+ \(port (\d+)\), gRPC on \S+ \(port (\d+)", text)
            if m:
                self.metrics_port, self.grpc_port = int(m.group(1)), int(m.group(2))
                for port in (self.grpc_port, self.metrics_port):
                    testports.wait_listening("127.0.0.1", port, "ocsd", START_TIMEOUT_S,
                                             proc=self.proc)
                return self
            if self.proc.poll() is not None:
                raise RuntimeError("ocsd exited %d:\n%s" % (self.proc.returncode, text))
            time.sleep(0.05)
        raise RuntimeError("ocsd did not start:\n" + self.log())

    def wait_exit(self, timeout_s=30):
        """The exit code of an ocsd expected to stop by itself (None: still running)."""
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode
