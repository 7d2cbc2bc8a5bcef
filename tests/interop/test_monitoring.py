#!/usr/bin/python3
"""test_monitoring.py - deploy/monitoring's dashboard and alert rules
against a real Prometheus (Debian's prometheus package) scraping a real
ocsd on the lab fabric (16 ocs-devsim devices), issue 27.

ocsd runs, the quickstart's job is submitted with ocsctl (ACTIVE), then a
Prometheus (integration/prom_server.py: 1 s scrapes, job "ocsd") starts
with ocsd.rules.yml loaded, and once it has scraped a few times:
  - every query of the Grafana dashboard (each panel's targets, and the
    instance variable's label_values() as the selector it reads) runs
    through /api/v1/query without an error, after the Grafana variables are
    replaced (below); a query left with a `$` fails;
  - the panels of MUST_HAVE_DATA return at least one series (a panel shows
    "No data" only when every one of its queries is empty); the others are
    of ring domains, rail-OCS fabrics, etcd, or counters with no series
    before their first event;
  - every alert expression runs without an error, and on this healthy lab
    none returns a series but those of LOAD_DEPENDENT (a loaded test
    machine may stall ocsd's loop, or time a 1 s scrape out, for real:
    up 0 for one scrape); Prometheus reports every rule of the file loaded
    and evaluated with health "ok", and no alert firing but
    OcsdLoopLateBeats (OcsdDown waits 1m, longer than this test);
  - ocsd stopped (SIGSTOP) for 1.5 s and continued: its late-beat counter
    reaches Prometheus (>= 1), and so does the "Event loop late beats"
    panel's increase.

The Grafana variables: $__rate_interval is 1m. Grafana makes it
max(4 x scrape interval, $__interval + scrape interval); with the 15 s
scrape of deploy/monitoring/prometheus.yml that is 1m, and here, with 1 s
scrapes, a 1m window covers every scrape since the job ran, so that a rate
has its two samples even when a loaded machine missed scrapes. $job is
"ocsd" (the scrape job), $instance ".*" (the "All" value the dashboard
gives, allValue).

usage: test_monitoring.py BUILD_DIR SOURCE_DIR
"""
import json
import os
import re
import signal
import sys
import time

import yaml

BUILD, SRC = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
sys.path.insert(0, os.path.join(SRC, "tests", "integration"))
import ocsd_fleet  # noqa: E402
import prom_server  # noqa: E402

MON = os.path.join(SRC, "deploy", "monitoring")
VARIABLES = {"__rate_interval": "1m", "job": "ocsd", "instance": ".*"}
MUST_HAVE_DATA = {
    "Jobs by state", "Oldest job in flight", "Job requests", "Plan time p90",
    "Transactions by outcome", "Transaction latency", "Rollbacks",
    "Devices by state", "Cross-connects", "OCS input ports used", "Worst contention",
    "Drift", "Circuit repairs", "Reconciliation time p90",
    "Leader", "Leader changes", "Store commit latency", "Store errors",
    "Scrape up", "Uptime", "Event loop late beats", "gRPC latency p99", "Build",
}
LOAD_DEPENDENT = {"OcsdLoopLateBeats", "OcsdDown"}
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
    print(("ok   " if cond else "FAIL ") + what, flush=True)


def grafana_expand(expr):
    """expr with the dashboard's variables ($name and ${name}) replaced."""
    return re.sub(r"\$\{?(\w+)\}?", lambda m: VARIABLES.get(m.group(1), m.group(0)), expr)


def dashboard_queries(dash):
    """(panel title, refId, expr) of every query of the dashboard."""
    for p in dash["panels"]:
        for q in [p] + p.get("panels", []):
            for t in q.get("targets", []):
                yield q["title"], t["refId"], t["expr"]
    for v in dash.get("templating", {}).get("list", []):
        m = re.match(r"label_values\((.*),\s*(\w+)\)$", v.get("definition", ""))
        if m:
            yield f"variable {v['name']}", m.group(2), m.group(1)


def run_query(what, expr):
    """The vector of expr; None after a failed check when it errs."""
    expanded = grafana_expand(expr)
    if "$" in expanded:
        check(False, f"{what}: a variable the test does not know in {expanded}")
        return None
    try:
        return prom.vector(expanded)
    except prom_server.QueryError as e:
        check(False, f"{what}: {expanded}: {e}")
        return None


fleet = ocsd_fleet.Fleet(BUILD, SRC, prefix="ocsd-monitoring-")
prom = None
try:
    r = fleet.start_lab_job()
    check(r.returncode == 0, f"job submit: {r.returncode} {r.stderr.strip()}")

    rules_file = os.path.join(MON, "ocsd.rules.yml")
    prom = prom_server.Prometheus(fleet.work, [f"127.0.0.1:{fleet.metrics_port}"],
                                  rule_files=[rules_file])
    ok, out = prom.check_config()
    check(ok, f"promtool check config with the rules: {out.strip()}")
    prom.start()
    up = prom.wait_up(60)
    check(up and list(up.values()) == [1.0], f"ocsd scraped: up {up}")
    # a few scrapes, so that rates over the window have two samples or more
    n = prom.wait_for('count_over_time(up{job="ocsd"}[1m])',
                      lambda v: v and min(v.values()) >= 4, 30)
    check(n and min(n.values()) >= 4, f"4 scrapes or more: {n}")

    with open(os.path.join(MON, "grafana", "ocsd-dashboard.json")) as f:
        dash = json.load(f)
    titles, with_data = set(), set()
    for title, ref, expr in dashboard_queries(dash):
        titles.add(title)
        v = run_query(f"panel {title} {ref}", expr)
        if v:
            with_data.add(title)
    check(not MUST_HAVE_DATA - titles,
          f"every must-have panel is in the dashboard (missing: {MUST_HAVE_DATA - titles})")
    for title in sorted(MUST_HAVE_DATA & titles):
        check(title in with_data, f"panel {title}: data on the lab")
    check("variable instance" in with_data, "the instance variable lists ocsd")
    print("panels without data on the lab:", sorted(titles - with_data), flush=True)

    with open(rules_file) as f:
        rules = [r for g in yaml.safe_load(f)["groups"] for r in g["rules"]]
    for rule in rules:
        v = run_query(f"alert {rule['alert']}", rule["expr"])
        if v is not None and rule["alert"] not in LOAD_DEPENDENT:
            check(v == {}, f"alert {rule['alert']}: quiet on a healthy lab ({v})")
    # evaluated once a second; before its first evaluation a rule's health is "unknown"
    got = {}
    for _ in range(100):
        got = {r["name"]: r["health"] for g in prom.api("rules")["groups"] for r in g["rules"]}
        if "unknown" not in got.values():
            break
        time.sleep(0.1)
    check(got == {r["alert"]: "ok" for r in rules}, f"every rule loaded, health ok: {got}")
    firing = [a["labels"]["alertname"] for a in prom.api("alerts")["alerts"]
              if a["state"] == "firing" and a["labels"]["alertname"] != "OcsdLoopLateBeats"]
    check(not firing, f"no alert firing on a healthy lab: {firing}")

    # the event loop stalled: a late beat
    fleet.ocsd.send_signal(signal.SIGSTOP)
    time.sleep(1.5)
    fleet.ocsd.send_signal(signal.SIGCONT)
    late = prom.wait_for("ocsd_loop_late_beats_total", lambda v: v and min(v.values()) >= 1, 15)
    check(late and min(late.values()) >= 1, f"ocsd_loop_late_beats_total after SIGSTOP: {late}")
    panel = [t["expr"] for p in dash["panels"] for q in [p] + p.get("panels", [])
             if q["title"] == "Event loop late beats" for t in q["targets"]]
    v = run_query("panel Event loop late beats", panel[0]) if panel else None
    check(v and max(v.values()) > 0, f"panel Event loop late beats shows the stall: {v}")
    check(fleet.stop_ocsd() == 0, "ocsd exit code on SIGTERM")
except Exception as e:
    check(False, f"{e!r}")
    raise
finally:
    if prom is not None:
        prom.stop()
    fleet.close()
    if failures:
        fleet.dump_logs()
        if prom is not None:
            print("--- prometheus.log (tail)\n" + prom.log_tail(), flush=True)
    fleet.remove()
    print(f"monitoring: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
