#!/usr/bin/python3
"""test_monitoring_rules.py - deploy/monitoring/ checked without a server
(issue 27):
  - `promtool check rules` on ocsd.rules.yml, `promtool check config` on
    the example prometheus.yml (which loads the rules), and `promtool test
    rules` on ocsd.rules.test.yml;
  - every alert has a severity label (critical or warning), a summary and a
    description, and a runbook annotation "README.md#<alert, lower case>"
    whose heading "### <alert>" exists in README.md with its three parts
    (Meaning, Check first, Do);
  - every alert has a promtool test that expects it to fire and one eval
    that expects it not to, and no test names an alert the rules lack;
  - the dashboard is JSON whose every panel and target uses the
    ${DS_PROMETHEUS} input, with panel titles unique;
  - every ocsd_* metric an alert or a panel names is documented in
    daemon/README.md (a renamed metric fails here before it fails on a
    real Prometheus in interop_monitoring).

usage: test_monitoring_rules.py SOURCE_DIR
"""
import json
import os
import re
import subprocess
import sys

import yaml

SRC = sys.argv[1]
MON = os.path.join(SRC, "deploy", "monitoring")
PROMTOOL = "/usr/bin/promtool"
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)


def promtool(*args):
    r = subprocess.run([PROMTOOL] + list(args), cwd=MON, capture_output=True, text=True,
                       timeout=60)
    check(r.returncode == 0, f"promtool {' '.join(args)}: {r.returncode}\n{r.stdout}{r.stderr}")


def metric_names(expr):
    """The ocsd_* metric names expr reads, histogram suffixes dropped."""
    return {re.sub(r"_(bucket|count|sum)$", "", m) for m in re.findall(r"\bocsd_[a-z_]+", expr)}


def dashboard_panels(dash):
    """Every panel of the dashboard, the rows' nested panels included."""
    for p in dash["panels"]:
        yield p
        yield from p.get("panels", [])


promtool("check", "rules", "ocsd.rules.yml")
promtool("check", "config", "prometheus.yml")
promtool("test", "rules", "ocsd.rules.test.yml")

with open(os.path.join(MON, "ocsd.rules.yml")) as f:
    rules = [r for g in yaml.safe_load(f)["groups"] for r in g["rules"]]
with open(os.path.join(MON, "ocsd.rules.test.yml")) as f:
    tests = yaml.safe_load(f)["tests"]
with open(os.path.join(MON, "README.md")) as f:
    readme = f.read()
with open(os.path.join(SRC, "daemon", "README.md")) as f:
    documented = set(re.findall(r"`(ocsd_[a-z_]+)`", f.read()))

alerts = [r["alert"] for r in rules if "alert" in r]
check(len(alerts) == len(set(alerts)), f"alert names unique: {alerts}")
used = set()
for r in rules:
    name = r.get("alert")
    check(name is not None, f"a rule without an alert name: {r}")
    labels, notes = r.get("labels", {}), r.get("annotations", {})
    check(labels.get("severity") in ("critical", "warning"),
          f"{name}: severity label critical or warning ({labels})")
    check(notes.get("summary") and notes.get("description"), f"{name}: summary and description")
    check(notes.get("runbook") == f"README.md#{name.lower()}",
          f"{name}: runbook annotation README.md#{name.lower()} ({notes.get('runbook')})")
    section = re.search(r"^### %s\n(.*?)(?=^#|\Z)" % re.escape(name), readme, re.M | re.S)
    check(section is not None, f"{name}: a '### {name}' section in deploy/monitoring/README.md")
    for part in ("**Meaning.**", "**Check first.**", "**Do.**"):
        check(section is not None and part in section.group(1), f"{name}: README part {part}")
    used |= metric_names(r["expr"])

fires, quiet = set(), set()
for t in tests:
    for a in t.get("alert_rule_test", []):
        check(a["alertname"] in alerts, f"test {t.get('name')}: unknown alert {a['alertname']}")
        (fires if a.get("exp_alerts") else quiet).add(a["alertname"])
for name in alerts:
    check(name in fires, f"{name}: no promtool test expects it to fire")
    check(name in quiet, f"{name}: no promtool test expects it not to fire")

with open(os.path.join(MON, "grafana", "ocsd-dashboard.json")) as f:
    dash = json.load(f)
check([i["name"] for i in dash.get("__inputs", [])] == ["DS_PROMETHEUS"],
      "the dashboard's one input is DS_PROMETHEUS")
titles = []
for p in dashboard_panels(dash):
    if p["type"] == "row":
        continue
    titles.append(p["title"])
    check(p.get("datasource", {}).get("uid") == "${DS_PROMETHEUS}",
          f"panel {p['title']}: datasource ${{DS_PROMETHEUS}}")
    check(p.get("targets"), f"panel {p['title']}: has queries")
    for t in p.get("targets", []):
        check(t.get("datasource", {}).get("uid") == "${DS_PROMETHEUS}",
              f"panel {p['title']} {t.get('refId')}: datasource ${{DS_PROMETHEUS}}")
        used |= metric_names(t["expr"])
check(len(titles) == len(set(titles)), f"panel titles unique: {sorted(titles)}")

for m in sorted(used - documented):
    check(False, f"{m}: used by an alert or a panel, not documented in daemon/README.md")

print(f"monitoring_rules: {len(alerts)} alerts, {len(titles)} panels, {len(used)} metrics; "
      f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
