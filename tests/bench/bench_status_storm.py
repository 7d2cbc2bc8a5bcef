#!/usr/bin/python3
"""bench_status_storm.py - what the status page costs monitoring (issue 27's
benchmark, second half): a GET /metrics during a page refresh storm against
an idle one, on the real ocsd and the lab fabric (16 ocs-devsim devices), the
quickstart's job submitted so the page has circuits to draw.

  idle   SCRAPES scrapes of /metrics, one every SCRAPE_GAP_S: median latency
  storm  the same while CLIENTS processes each load the whole page every
         second, as a browser refreshing it would: /, /status.js,
         /status.css, /state.json and /topology.svg, one after another

Idle and storm alternate ROUNDS times in the same run, so that the machine's
noise falls on both; the medians are over every scrape of each kind. Printed:
both medians, their ratio and the target (within 2x of idle), the page loads
per second the clients achieved and their median load time. A missed target
is reported, not a failure; a failed request fails the run.

usage: bench_status_storm.py BUILD_DIR SOURCE_DIR [CLIENTS] [ROUNDS]
(defaults 10 and 3)
"""
import multiprocessing
import os
import statistics
import sys
import time
import urllib.request

BUILD, SRC = sys.argv[1], sys.argv[2]
CLIENTS = int(sys.argv[3]) if len(sys.argv) > 3 else 10
ROUNDS = int(sys.argv[4]) if len(sys.argv) > 4 else 3
sys.path.insert(0, os.path.join(SRC, "tests", "integration"))
import ocsd_fleet  # noqa: E402

PAGE = ("/", "/status.js", "/status.css", "/state.json", "/topology.svg")
SCRAPES = 20
SCRAPE_GAP_S = 0.1
TARGET = 2.0


def get(port, path):
    """Seconds one GET of path took; raises on anything but 200."""
    t = time.monotonic()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        r.read()
        if r.status != 200:
            raise RuntimeError(f"GET {path}: HTTP {r.status}")
    return time.monotonic() - t


def refresher(port, stop, loads):
    """One client: the whole page every second until stop is set; appends
    (when it ended, seconds) of each load to loads (CLOCK_MONOTONIC, one
    clock for every process)."""
    while not stop.is_set():
        began = time.monotonic()
        sum(get(port, p) for p in PAGE)
        took = time.monotonic() - began
        loads.append((time.monotonic(), took))
        stop.wait(max(0.0, 1.0 - took))


def scrapes(port):
    out = []
    for _ in range(SCRAPES):
        out.append(get(port, "/metrics"))
        time.sleep(SCRAPE_GAP_S)
    return out


def main():
    r = fleet.start_lab_job()
    script.check(r.returncode == 0, f"the lab job: {r.stdout} {r.stderr}")
    port = fleet.metrics_port
    for p in PAGE + ("/metrics",):  # every path answers before timing starts
        get(port, p)
    idle, storm, loads = [], [], multiprocessing.Manager().list()
    windows = []  # (start, end) of each round's storm scrapes
    for _ in range(ROUNDS):
        idle += scrapes(port)
        stop = multiprocessing.Event()
        clients = [multiprocessing.Process(target=refresher, args=(port, stop, loads))
                   for _ in range(CLIENTS)]
        for c in clients:
            c.start()
        time.sleep(1.5)  # every client past its first load
        t = time.monotonic()
        storm += scrapes(port)
        windows.append((t, time.monotonic()))
        stop.set()
        for c in clients:
            c.join(timeout=30)
            script.check(c.exitcode == 0, f"a page client exited {c.exitcode} (a failed GET)")
    mi, ms = statistics.median(idle), statistics.median(storm)
    print(f"{CLIENTS} clients loading the page ({len(PAGE)} GETs) every 1 s, {ROUNDS} rounds", flush=True)
    print(f"  /metrics idle:  median {mi * 1000:.2f} ms over {len(idle)} scrapes", flush=True)
    print(f"  /metrics storm: median {ms * 1000:.2f} ms over {len(storm)} scrapes", flush=True)
    during = [took for end, took in loads if any(a <= end <= b for a, b in windows)]
    storm_s = sum(b - a for a, b in windows)
    print(f"  page loads while scraping: {len(during)} in {storm_s:.1f} s "
          f"({len(during) / storm_s:.1f}/s), median {statistics.median(during) * 1000:.1f} ms",
          flush=True)
    verdict = "met" if ms <= TARGET * mi else "MISSED"
    print(f"  ratio storm/idle {ms / mi:.2f} (target <= {TARGET:.0f}): {verdict}", flush=True)


fleet = ocsd_fleet.Fleet(BUILD, SRC, prefix="ocsd-storm-")
script = ocsd_fleet.Script("bench_status_storm", fleet)
sys.exit(script.run(main))
