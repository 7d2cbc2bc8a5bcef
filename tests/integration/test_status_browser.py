#!/usr/bin/python3
"""test_status_browser.py - the status page in a real browser (issue 27):
Debian's headless chromium driven by chromedriver over plain W3C WebDriver
HTTP calls (urllib), on the lab fleet with ocs-devsim and the real ocsd.

  1. the lab job submitted: the page, loaded from the metrics listener,
     draws one <path class="circuit"> per circuit /state.json lists for the
     job, each titled with the job, and lists the job ACTIVE in its table;
     screenshot job.png;
  2. ocs-devsim killed: the page's devices table shows a device
     disconnected or unreachable within 2 s of /state.json saying so;
     screenshot down.png;
  3. throughout, no request leaves 127.0.0.1 (every URL in chromium's
     performance log, Network.requestWillBeSent, is on 127.0.0.1 or a
     data:, about:, blob: or the browser's own chrome:// URL; names outside
     loopback also resolve to nothing), the page's five paths are in it, and the console has no Content-Security-Policy
     violation and no error from the page's own script.

Screenshots go to BUILD_DIR/tests/integration/status_browser/. When chromium
or chromedriver is missing or cannot start, the test fails and says why
(deploy/install-deps.sh installs both); it never skips.

usage: test_status_browser.py BUILD_DIR SOURCE_DIR
"""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ocsd_fleet  # noqa: E402
import status_helpers  # noqa: E402
from status_helpers import state  # noqa: E402
import testports  # noqa: E402

BUILD, SRC = sys.argv[1], sys.argv[2]
JOB = "lab-ring"
PAGE_WITHIN_S = 2.0
WAIT_S = 20
CHROMIUM = "/usr/bin/chromium"
LOCAL_SCHEMES = ("data", "about", "blob", "chrome", "devtools")
DRIVER = "/usr/bin/chromedriver"


class Driver:
    """chromedriver as a process and a W3C WebDriver session through it."""

    def __init__(self, work):
        for path in (CHROMIUM, DRIVER):
            if not os.access(path, os.X_OK):
                raise RuntimeError(f"{path} is missing: apt-get install chromium "
                                   "chromium-driver (deploy/install-deps.sh)")
        self.port = testports.reserve(1)
        self.log = open(os.path.join(work, "chromedriver.log"), "w")
        self.proc = subprocess.Popen([DRIVER, f"--port={self.port}", "--allowed-ips=127.0.0.1"],
                                     stdout=self.log, stderr=self.log)
        testports.wait_listening("127.0.0.1", self.port, "chromedriver", 30, proc=self.proc)
        profile = tempfile.mkdtemp(prefix="chromium-", dir=work)
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:loggingPrefs": {"performance": "ALL", "browser": "ALL"},
            "goog:chromeOptions": {"binary": CHROMIUM, "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--user-data-dir={profile}", "--window-size=1400,1600",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-extensions",
                "--disable-default-apps", "--metrics-recording-only",
                # a name outside loopback resolves to nothing: nothing can leave
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]}}}}
        self.session = None
        try:
            self.session = self.call("POST", "/session", caps)["sessionId"]
        except (RuntimeError, OSError) as e:
            self.close()
            raise RuntimeError(f"chromium did not start through chromedriver: {e}")

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data,
                                     method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return json.loads(r.read())["value"]
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"{method} {path}: {e.code} {e.read()[:2000]!r}")

    def s(self, method, path, body=None):
        return self.call(method, f"/session/{self.session}{path}", body)

    def script(self, js, *args):
        return self.s("POST", "/execute/sync", {"script": js, "args": list(args)})

    def screenshot(self, path):
        with open(path, "wb") as f:
            f.write(base64.b64decode(self.s("GET", "/screenshot")))

    def log_entries(self, kind):
        return self.s("POST", "/se/log", {"type": kind})

    def close(self):
        try:
            if self.session:
                self.s("DELETE", "")
        except (RuntimeError, OSError):
            pass
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


DOM_CIRCUITS = """
return Array.from(document.querySelectorAll('#topology path.circuit'))
  .map((p) => (p.querySelector('title') || {}).textContent || '');
"""
DOM_JOB_STATE = """
const row = Array.from(document.querySelectorAll('#jobs tbody tr'))
  .find((r) => r.dataset.job === arguments[0]);
return row ? row.children[1].textContent : null;
"""
DOM_DOWN = """
return Array.from(document.querySelectorAll('#devices tbody tr'))
  .some((r) => ['disconnected', 'unreachable'].includes(r.children[2].textContent) ||
               ['disconnected', 'unreachable'].includes(r.children[3].textContent));
"""


def main(fleet, check):
    out_dir = os.path.join(BUILD, "tests", "integration", "status_browser")
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    r = fleet.start_lab_job()
    port = fleet.metrics_port
    check(r.returncode == 0, f"submit: {r.stdout} {r.stderr}")
    job = {j["id"]: j for j in state(port)["jobs"]}.get(JOB)
    check(job is not None and job["circuits"], f"/state.json has no circuits of {JOB}")
    if not job:
        return
    want = len(job["circuits"])
    drv = Driver(fleet.work)
    try:
        # 1. the job's circuits drawn in the page
        drv.s("POST", "/url", {"url": f"http://127.0.0.1:{port}/"})
        deadline, titles = time.time() + WAIT_S, []
        while time.time() < deadline:
            titles = drv.script(DOM_CIRCUITS)
            if len(titles) == want:
                break
            time.sleep(0.2)
        check(len(titles) == want, f"the page draws {len(titles)} circuit paths, want {want}")
        check(all(t.startswith(f"job {JOB}: ") for t in titles),
              f"circuit titles not naming {JOB}: {titles[:3]}")
        check(drv.script(DOM_JOB_STATE, JOB) == "ACTIVE",
              f"the jobs table shows {JOB} as {drv.script(DOM_JOB_STATE, JOB)}")
        drv.screenshot(os.path.join(out_dir, "job.png"))

        # 2. devices killed: the page follows /state.json within 2 s
        status_helpers.kill_devices_and_time(
            fleet, {"json": lambda: status_helpers.any_device_down(port),
                    "page": lambda: drv.script(DOM_DOWN)},
            check, "page", "json", PAGE_WITHIN_S)
        drv.screenshot(os.path.join(out_dir, "down.png"))

        # 3. nothing left loopback; no CSP violation, no script error
        urls = set()
        for e in drv.log_entries("performance"):
            msg = json.loads(e["message"])["message"]
            if msg.get("method") == "Network.requestWillBeSent":
                urls.add(msg["params"]["request"]["url"])
        check(urls, "the performance log shows no request at all")
        # chrome:// is the browser's own new-tab page, served from memory
        away = [u for u in urls if urllib.parse.urlsplit(u).scheme not in LOCAL_SCHEMES
                and urllib.parse.urlsplit(u).hostname != "127.0.0.1"]
        check(not away, f"requests left 127.0.0.1: {away}")
        ours = [u for u in urls if urllib.parse.urlsplit(u).hostname == "127.0.0.1"]
        print(f"{len(urls)} distinct URLs requested, {len(ours)} on 127.0.0.1, "
              f"{len(away)} elsewhere", flush=True)
        check({f"http://127.0.0.1:{port}{p}" for p in ("/", "/status.js", "/status.css",
                                                        "/state.json", "/topology.svg")}
              <= urls, f"the page's own requests are not all in the log: {sorted(ours)}")
        console = [e["message"] for e in drv.log_entries("browser")
                   if e.get("level") in ("SEVERE", "WARNING")]
        bad = [m for m in console if "Content Security Policy" in m or "status.js" in m]
        check(not bad, f"console: {bad}")
    finally:
        drv.close()


if __name__ == "__main__":
    fleet = ocsd_fleet.Fleet(BUILD, SRC, prefix="ocsd-browser-")
    t = ocsd_fleet.Script("status_browser", fleet)
    sys.exit(t.run(lambda: main(fleet, t.check)))
