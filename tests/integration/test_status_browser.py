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
  3. an OCSTrx ring domain (ocsd_fleet.RingFleet, 32 nodes on one
     ocs-devsim --model ocs-transceiver), a fresh chromium: a TP-16 job of
     3 rings submitted (status_helpers.start_ring_job) and the page loaded;
     a node of one of its rings failed through the devsim knob (node-fault,
     the ocs-devsim:set-faults RPC: the node reports the fault, ocsd
     repairs): within 2 s of /state.json showing the ring bypassed around
     the node, the page shows the ring's <path class="ring"> titled with
     the node failed and bypassed, the node's circle of class "faulty", and
     the rings table's row with change bypass-extended, the failed node,
     and the ring's nodes as /state.json lists them; screenshot ring.png;
     then a node in no ring has its bundle 1 put on an external path
     behind ocsd's back (NETCONF, RingFleet.set_bundle; ocsd reconciles
     every second): within 2 s of /state.json's bundle_drift listing it,
     the page's drift table has its row (no ring, found external 1 up,
     expected loopback), its circle is of class "drift" and the drift line
     says one bundle differs; screenshot drift.png (scrolled to the drift
     and rings tables);
  4. in each of the two browser sessions, no request leaves 127.0.0.1
     (every URL in chromium's performance log, Network.requestWillBeSent,
     is on 127.0.0.1 or a data:, about:, blob: or the browser's own
     chrome:// URL; names outside loopback also resolve to nothing), the
     page's five paths are in it, and the console has no
     Content-Security-Policy violation and no error from the page's own
     script.

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
# a node fault: the devsim's notification, the repair's transaction, stored
RING_LIMIT_S = 10
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
DOM_RING = """
const [job, index, node] = arguments;
const ring = Array.from(document.querySelectorAll('#topology path.ring'))
  .map((p) => (p.querySelector('title') || {}).textContent || '')
  .find((t) => t.startsWith('job ' + job + ' ring ' + index + ' ('));
const circle = Array.from(document.querySelectorAll('#topology circle.node'))
  .find((c) => ((c.querySelector('title') || {}).textContent || '').split(/[:,]/)[0] ===
    'node ' + node);
const row = Array.from(document.querySelectorAll('#rings tbody tr'))
  .find((r) => r.children[0].textContent === job && r.children[1].textContent === String(index));
return {title: ring || null, faulty: circle ? circle.classList.contains('faulty') : null,
        row: row ? Array.from(row.children).map((c) => c.textContent) : null};
"""
DOM_DRIFT = """
const node = String(arguments[0]);
const row = Array.from(document.querySelectorAll('#bundle-drift tbody tr'))
  .find((r) => r.children[0].textContent === node);
const circle = Array.from(document.querySelectorAll('#topology circle.node'))
  .find((c) => ((c.querySelector('title') || {}).textContent || '').split(/[:,]/)[0] ===
    'node ' + node);
return {row: row ? Array.from(row.children).map((c) => c.textContent) : null,
        shown: !document.getElementById('bundle-drift').hidden,
        marked: circle ? circle.classList.contains('drift') : null,
        text: document.getElementById('drift').textContent};
"""
DOM_DOWN = """
return Array.from(document.querySelectorAll('#devices tbody tr'))
  .some((r) => ['disconnected', 'unreachable'].includes(r.children[2].textContent) ||
               ['disconnected', 'unreachable'].includes(r.children[3].textContent));
"""


def stayed_local(drv, port, check):
    """Part 4 on the browser session drv: nothing left loopback since the
    last call, the page's own requests were made, no CSP violation and no
    error from status.js in the console."""
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


def main(fleet, check, out_dir):
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

        # 4. nothing left loopback; no CSP violation, no script error
        stayed_local(drv, port, check)
    finally:
        drv.close()


def drift_shown(fleet, drv, check, out_dir):
    """Part 3's drift: a node in no ring with its bundle 1 put on an external
    path behind ocsd's back (over NETCONF): the next reconciliation pass
    lists it in /state.json's bundle_drift; within 2 s the page's drift
    table has its row (no ring, found external, expected loopback), its
    circle is of class "drift", and the drift line counts it."""
    port = fleet.metrics_port
    s = state(port)
    held = {n for r in s["rings"] for n in r["nodes"]} | set(s["faulty_nodes"])
    free = [n for n in range(fleet.N_DEV) if n not in held]
    idle = next(n for n in free
                if any(fleet.position(m) == fleet.position(n) + 1 for m in free))
    check(drv.script(DOM_DRIFT, idle)["row"] is None, f"node {idle} listed before any drift")
    fleet.set_bundle(idle, 1, 1, "up")
    listed = lambda: any(b["node"] == idle for b in state(port)["bundle_drift"])  # noqa: E731

    def page_shows():
        seen = drv.script(DOM_DRIFT, idle)
        return seen["row"] is not None and seen["shown"] and seen["marked"] is True

    status_helpers.time_probes(f"node {idle}'s bundle 1 changed behind ocsd's back",
                               {"json": listed, "page": page_shows},
                               check, "page", "json", PAGE_WITHIN_S, RING_LIMIT_S)
    seen = drv.script(DOM_DRIFT, idle)
    print(f"the page's drift: {seen}", flush=True)
    row = seen["row"] or ["?"] * 5
    check(row[1:3] == ["1", "(no ring)"] and row[3].startswith("external 1 up") and
          row[4] == "loopback" and seen["text"] == "1 bundle differs from the rings",
          f"the drift table's row for node {idle}: {seen}")
    # the drift table and the rings table below it, in view
    drv.script("document.getElementById('drift').scrollIntoView();")
    drv.screenshot(os.path.join(out_dir, "drift.png"))


def ring_main(fleet, check, out_dir):
    """Part 3 (and 4) on a ring domain."""
    rings = status_helpers.start_ring_job(fleet, check, reconcile_s=1)
    if not rings:
        return
    port, job = fleet.metrics_port, status_helpers.RING_JOB
    ring, victim = status_helpers.ring_to_fail(fleet, rings)
    drv = Driver(fleet.work)
    try:
        drv.s("POST", "/url", {"url": f"http://127.0.0.1:{port}/"})
        deadline, seen = time.time() + WAIT_S, {}
        while time.time() < deadline and not (seen.get("title") and seen.get("row")):
            seen = drv.script(DOM_RING, job, ring["index"], victim)
            time.sleep(0.2)
        check(seen.get("title") and seen.get("row") and seen.get("faulty") is False,
              f"the page does not draw ring {ring['index']} of {job} before the fault: {seen}")

        def page_shows():
            nonlocal seen
            seen = drv.script(DOM_RING, job, ring["index"], victim)
            return (f"node {victim} failed, bypassed" in (seen["title"] or "") and
                    seen["faulty"] is True and seen["row"] is not None and
                    seen["row"][3] == str(victim) and
                    str(victim) not in seen["row"][4].split())

        fleet.set_faults(victim, "node-fault")  # the device reports the fault
        status_helpers.time_probes(
            f"node {victim} failed through the devsim knob",
            {"json": lambda: status_helpers.ring_bypassed(state(port), ring["index"], victim),
             "page": page_shows},
            check, "page", "json", PAGE_WITHIN_S, RING_LIMIT_S)
        print(f"the page's ring {ring['index']}: {seen}", flush=True)
        now = status_helpers.ring_bypassed(state(port), ring["index"], victim)
        check(now is not None and now["change"] == "bypass-extended" and seen["row"] and
              seen["row"][2] == "bypass-extended" and
              seen["row"][4].split() == [str(n) for n in now["nodes"]],
              f"the rings table's row {seen['row']} is not /state.json's bypass-extended "
              f"ring {now}")
        drv.screenshot(os.path.join(out_dir, "ring.png"))
        drift_shown(fleet, drv, check, out_dir)
        stayed_local(drv, port, check)
    finally:
        drv.close()


if __name__ == "__main__":
    out_dir = os.path.join(BUILD, "tests", "integration", "status_browser")
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    fleet = ocsd_fleet.Fleet(BUILD, SRC, prefix="ocsd-browser-")
    t = ocsd_fleet.Script("status_browser", fleet)
    rc = t.run(lambda: main(fleet, t.check, out_dir))
    ring_fleet = ocsd_fleet.RingFleet(BUILD, SRC, tors=8, nodes_per_tor=4,
                                      prefix="ocsd-browser-ring-")
    t = ocsd_fleet.Script("status_browser (ring domain)", ring_fleet)
    sys.exit(rc | t.run(lambda: ring_main(ring_fleet, t.check, out_dir)))
