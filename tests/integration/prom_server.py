"""prom_server.py - a real Prometheus server (Debian's prometheus package)
for the tests that check ocsd's metrics against it (interop_prometheus,
interop_monitoring): its own configuration and storage in the test's work
directory, loopback only, scraping the targets every second as scrape job
"ocsd" (the name deploy/monitoring's rules expect), optionally loading rule
files; and its HTTP query API.

usage:
    prom = prom_server.Prometheus(work, ["127.0.0.1:PORT"], rule_files=[...])
    prom.check_config()   # promtool check config: (ok, output)
    prom.start()
    prom.wait_up(60)
    prom.vector('ocsd_jobs{state="ACTIVE"}')   # {labels-json: value}
    prom.stop()
"""
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import testports

PROMETHEUS, PROMTOOL = "/usr/bin/prometheus", "/usr/bin/promtool"


class QueryError(RuntimeError):
    """The query API answered with an error (a bad expression, say)."""


class Prometheus:
    def __init__(self, work, targets, rule_files=()):
        self.work = work
        self.port = testports.reserve(1)
        self.cfg = os.path.join(work, "prometheus.yml")
        self.log_path = os.path.join(work, "prometheus.log")
        self.proc = None
        with open(self.cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                    "  evaluation_interval: 1s\n")
            if rule_files:
                f.write("rule_files:\n" + "".join(f"  - '{p}'\n" for p in rule_files))
            f.write("scrape_configs:\n  - job_name: ocsd\n    static_configs:\n"
                    f"      - targets: {json.dumps(list(targets))}\n")

    def check_config(self):
        """promtool check config on the configuration (and its rule files)."""
        r = subprocess.run([PROMTOOL, "check", "config", self.cfg], capture_output=True,
                           text=True, timeout=60)
        return r.returncode == 0, r.stdout + r.stderr

    def start(self):
        log = open(self.log_path, "w")
        self.proc = subprocess.Popen([PROMETHEUS, "--config.file", self.cfg,
                                      "--storage.tsdb.path", os.path.join(self.work, "tsdb"),
                                      "--web.listen-address", f"127.0.0.1:{self.port}"],
                                     stdout=log, stderr=log)
        log.close()
        testports.wait_listening("127.0.0.1", self.port, "prometheus", 30, proc=self.proc)

    def api(self, path, **params):
        """The data of a GET of the HTTP API; QueryError when it says error."""
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                body = json.load(r)
        except urllib.error.HTTPError as e:  # 400/422: the body says why
            try:
                body = json.load(e)
            except ValueError:  # 503 while starting: not JSON
                raise QueryError(f"{path} {params}: HTTP {e.code}") from None
        if body.get("status") != "success":
            raise QueryError(f"{path} {params}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def vector(self, promql):
        """The instant vector of promql as {labels-json: value}."""
        data = self.api("query", query=promql)
        if data["resultType"] == "scalar":
            return {"{}": float(data["result"][1])}
        return {json.dumps(s["metric"], sort_keys=True): float(s["value"][1])
                for s in data["result"]}

    def wait_for(self, promql, pred, timeout_s):
        """Polls promql every 0.1 s until pred(vector) holds; the last vector
        (None if no query answered). Connection and query errors count as not yet."""
        last = None
        deadline = time.time() + timeout_s
        while time.time() < deadline and self.proc.poll() is None:
            try:
                last = self.vector(promql)
                if pred(last):
                    break
            except (OSError, RuntimeError):
                pass
            time.sleep(0.1)
        return last

    def wait_up(self, timeout_s):
        """Until the target's health is up (a scrape that times out at 1 s on a
        loaded machine reads up 0; the next one counts): the last up vector."""
        return self.wait_for('up{job="ocsd"}', lambda v: list(v.values()) == [1.0], timeout_s)

    def log_tail(self, chars=2000):
        with open(self.log_path, errors="replace") as f:
            return f.read()[-chars:]

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
