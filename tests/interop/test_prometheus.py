#!/usr/bin/python3
"""test_prometheus.py - interop of ocsd's GET /metrics with the real
Prometheus server (Debian's prometheus package) and promtool.

ocsd runs on the lab fabric (16 ocs-devsim devices); a job is submitted with
ocsctl so that transactions and plans have happened. Then:
  - `promtool check metrics` accepts a scrape, and the scrape holds the
    transaction and plan histograms and counters of that job;
  - a prometheus server (its own temporary storage, loopback only, 1 s
    scrape interval) scrapes ocsd, and its HTTP query API gives back
    ocsd_jobs{state="ACTIVE"} = 1, the used OCS input ports of the job
    (16 cross-connects: 16 used input ports over the four groups), and the
    target health "up" (the server: integration/prom_server.py).

usage: test_prometheus.py BUILD_DIR SOURCE_DIR
"""
import os
import re
import subprocess
import sys

BUILD, SRC = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(SRC, "tests", "integration"))
import ocsd_fleet  # noqa: E402
import prom_server  # noqa: E402

passed = failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what, flush=True)


def sample(text, name, labels=""):
    m = re.search(r"^%s%s (\S+)$" % (re.escape(name), re.escape(labels)), text, re.M)
    return float(m.group(1)) if m else None


fleet = ocsd_fleet.Fleet(BUILD, SRC, prefix="ocsd-prometheus-")
prom = None
try:
    r = fleet.start_lab_job()
    check(r.returncode == 0, f"job submit: {r.returncode} {r.stderr}")
    r = fleet.ocsctl("job", "plan", os.path.join(SRC, "deploy", "jobs", "lab-ring.json"))
    check(r.returncode == 0, f"dry run of the running job: {r.returncode} {r.stderr}")

    # promtool on a scrape taken after the job ran.
    text = fleet.metrics()
    pt = subprocess.run([prom_server.PROMTOOL, "check", "metrics"], input=text, capture_output=True,
                        text=True, timeout=60)
    check(pt.returncode == 0, f"promtool check metrics: {pt.returncode} {pt.stdout} {pt.stderr}")
    check(sample(text, "ocsd_transactions_total", '{outcome="committed"}') == 1,
          "ocsd_transactions_total{outcome=\"committed\"} after one job:\n" + text)
    check(sample(text, "ocsd_transaction_duration_seconds_count",
                 '{outcome="committed"}') == 1, "transaction duration histogram missing")
    check(re.search(r'^ocsd_transaction_duration_seconds_bucket'
                    r'\{outcome="committed",le="\+Inf"\} 1$', text, re.M),
          "transaction histogram +Inf bucket")
    # Bucket bounds in their shortest form, as queries spell them.
    check(re.search(r'^ocsd_transaction_duration_seconds_bucket'
                    r'\{outcome="committed",le="0.0025"\} [01]$', text, re.M),
          "le=\"0.0025\" bucket:\n" + "\n".join(
              x for x in text.splitlines() if x.startswith("ocsd_transaction_duration")))
    check(sample(text, "ocsd_plan_duration_seconds_count", '{planner="leaf-centric"}') == 2,
          "plan histogram: one submit and one dry run")
    check(re.search(r'^ocsd_rpc_requests_total\{method="Jobs/SubmitJob",code="OK"\} 1$', text,
                    re.M), "rpc counter of SubmitJob")
    check(sample(text, "ocsd_jobs", '{state="ACTIVE"}') == 1, "ocsd_jobs ACTIVE in the scrape")

    # A real Prometheus server scraping ocsd.
    prom = prom_server.Prometheus(fleet.work, [f"127.0.0.1:{fleet.metrics_port}"])
    ok, out = prom.check_config()
    check(ok, f"promtool check config: {out}")
    prom.start()
    # bounded: 60 s for the first scrapes
    up = prom.wait_up(60)
    active = prom.wait_for('ocsd_jobs{state="ACTIVE"}', bool, 10)
    ports = prom.vector('sum(ocsd_ocs_input_ports{state="used"})')
    check(prom.proc.poll() is None, "prometheus exited:\n" + prom.log_tail())
    check(up and list(up.values()) == [1.0], f"target health via the query API: {up}")
    check(active and list(active.values()) == [1.0],
          f'ocsd_jobs{{state="ACTIVE"}} via the query API: {active}')
    check(ports and list(ports.values()) == [16.0], f"used OCS input ports: {ports}")
    bucket = prom.vector('ocsd_plan_duration_seconds_bucket{le="0.0025"}')
    check(len(bucket) == 1, f'a bucket by le="0.0025" via the query API: {bucket}')
    # A change shows up in the next scrapes: release -> RELEASED 1, ACTIVE 0.
    r = fleet.ocsctl("job", "release", "lab-ring")
    check(r.returncode == 0, f"release: {r.stderr}")
    released = prom.wait_for('ocsd_jobs{state="RELEASED"}',
                             lambda v: list(v.values()) == [1.0], 30)
    check(released and list(released.values()) == [1.0], f"RELEASED via the query API: {released}")
    check(list(prom.vector('ocsd_jobs{state="ACTIVE"}').values()) == [0.0],
          "ACTIVE after release")
    check(fleet.stop_ocsd() == 0, "ocsd exit code on SIGTERM")
except Exception:
    failed += 1
    raise
finally:
    if prom is not None:
        prom.stop()
    fleet.close()
    if failed:
        fleet.dump_logs()
    fleet.remove()
    print(f"prometheus: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
