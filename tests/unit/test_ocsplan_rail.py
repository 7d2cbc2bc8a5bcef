#!/usr/bin/python3
"""test_ocsplan_rail.py - `ocsplan rail-only`, the rail-only what-if model on
the command line (solvers/README.md, "rail-only what-if model"): the JSON
shape of the answer exactly as issue 12 lists it, its figures recomputed here
by an independent Python model for the paper's Table II and for random
clusters and prices, the paper's defaults for the four optional prices, and
the exit codes: 2 with one stderr line naming each bad field (radix not a
power of two, zero GPUs, an HB domain that does not divide the cluster,
missing, mistyped and unknown members, malformed JSON, unknown options) and
nothing on stdout.

Usage: test_ocsplan_rail.py PATH/TO/ocsplan
"""
import json
import os
import random
import subprocess
import sys
import tempfile

OCSPLAN = sys.argv[1]
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what, file=sys.stderr)


def run(req, *opts, raw=None):
    text = raw if raw is not None else json.dumps(req)
    p = subprocess.run([OCSPLAN, "rail-only", *opts], input=text, capture_output=True,
                       text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def model(req):
    """The paper's model, written here from the paper, not from the C code."""
    n, k, x = req["gpus"], req["radix"], req["hb_domain"]
    y = n // x
    ptr = req.get("price_transceiver_usd", 199)
    psw = req.get("price_switch_port_usd", 694)
    wtr = req.get("power_transceiver_w", 9)
    wsw = req.get("power_switch_port_w", 18)

    def tiers(endpoints):
        t = 1
        while 2 * (k // 2) ** t < endpoints:
            t += 1
        return t

    def design(t):
        switches = -(-(2 * t - 1) * n // k)
        trx = 2 * t * n
        return {"tiers": t, "switches": switches, "transceivers": trx,
                "cost_usd": psw * switches * k + ptr * trx,
                "power_w": wsw * switches * k + wtr * trx}

    opt, only = design(tiers(n)), design(tiers(y))
    cf, cs = req["hb_gbps"], req["nic_gbps"]
    t_opt = max((x - 1) / cf, x * (y - 1) / cs)
    t_only = y * (x - 1) / cf + x * (y - 1) / cs
    return {"rail_optimized": opt, "rail_only": only,
            "savings": {"cost": 1 - only["cost_usd"] / opt["cost_usd"],
                        "power": 1 - only["power_w"] / opt["power_w"]},
            "a2a": {"t_rail_optimized": t_opt, "t_rail_only": t_only,
                    "slowdown": t_only / t_opt - 1 if t_opt > 0 else 0}}


def close(a, b):
    return abs(a - b) <= 1e-6 * max(1.0, abs(b))


def compare(got, want, where):
    check(set(got) == set(want), "%s: members %s, want %s" % (where, sorted(got), sorted(want)))
    for key, w in want.items():
        g = got.get(key)
        if isinstance(w, dict):
            if isinstance(g, dict):
                compare(g, w, where + "." + key)
            else:
                check(False, "%s.%s is %r, not an object" % (where, key, g))
        elif isinstance(w, int):
            check(isinstance(g, int) and g == w, "%s.%s = %r, want %d" % (where, key, g, w))
        else:
            check(isinstance(g, (int, float)) and close(g, w),
                  "%s.%s = %r, want %r" % (where, key, g, w))


def table2():
    rows = [(32768, 64, 2560, 1536, 196608, 131072, 38, 37),
            (32768, 128, 1280, 256, 196608, 65536, 77, 75),
            (32768, 256, 384, 128, 131072, 65536, 62, 60),
            (65536, 64, 5120, 3072, 393216, 262144, 38, 37),
            (65536, 128, 2560, 1536, 393216, 262144, 38, 37),
            (65536, 256, 1280, 256, 393216, 131072, 77, 75)]
    for n, k, sw_opt, sw_only, tr_opt, tr_only, cost_pct, pwr_pct in rows:
        req = {"gpus": n, "radix": k, "hb_domain": 256, "hb_gbps": 3600, "nic_gbps": 400}
        rc, out, err = run(req)
        check(rc == 0 and err == "", "Table II %d/%d: exit %d %s" % (n, k, rc, err))
        if rc:
            continue
        ans = json.loads(out)
        compare(ans, model(req), "Table II %d/%d" % (n, k))
        check(ans["rail_optimized"]["switches"] == sw_opt and
              ans["rail_only"]["switches"] == sw_only and
              ans["rail_optimized"]["transceivers"] == tr_opt and
              ans["rail_only"]["transceivers"] == tr_only,
              "Table II %d/%d counts: %s" % (n, k, ans))
        check(abs(100 * ans["savings"]["cost"] - cost_pct) <= 0.5 and
              abs(100 * ans["savings"]["power"] - pwr_pct) <= 0.5,
              "Table II %d/%d savings %s" % (n, k, ans["savings"]))


def random_clusters():
    rng = random.Random(20261124)
    for _ in range(60):
        x = rng.choice([1, 2, 4, 8, 16, 72, 256])
        req = {"gpus": x * rng.randint(1, 3000), "radix": rng.choice([4, 8, 16, 32, 64, 128, 512]),
               "hb_domain": x, "hb_gbps": rng.choice([900, 2400, 3600, 7200]),
               "nic_gbps": rng.choice([100, 200, 400, 800.5])}
        if rng.random() < 0.5:
            req.update(price_transceiver_usd=rng.uniform(0, 1000), price_switch_port_usd=rng.uniform(1, 2000),
                       power_transceiver_w=rng.uniform(0, 20), power_switch_port_w=rng.uniform(1, 40))
        rc, out, err = run(req)
        check(rc == 0, "random %s: exit %d %s" % (req, rc, err))
        if rc == 0:
            compare(json.loads(out), model(req), "random %s" % req)


def files_and_pretty():
    req = {"gpus": 32768, "radix": 128, "hb_domain": 256, "hb_gbps": 3600, "nic_gbps": 400,
           "price_transceiver_usd": 199, "price_switch_port_usd": 694,
           "power_transceiver_w": 9, "power_switch_port_w": 18}
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "in.json"), os.path.join(d, "out.json")
        with open(src, "w") as f:
            json.dump(req, f)
        p = subprocess.run([OCSPLAN, "rail-only", "--in", src, "--out", dst, "--pretty"],
                           capture_output=True, text=True, timeout=60)
        check(p.returncode == 0 and p.stdout == "", "--in/--out: exit %d %s" % (p.returncode, p.stderr))
        with open(dst) as f:
            text = f.read()
    check("\n  \"rail_optimized\": {" in text, "--pretty indents: %r" % text[:60])
    explicit = json.loads(text)
    # The defaults are the paper's prices: the same answer without them.
    rc, out, _ = run({k: v for k, v in req.items() if not k.startswith(("price", "power"))})
    check(rc == 0 and json.loads(out) == explicit, "defaults differ from the paper's prices")
    check(explicit["rail_optimized"]["switches"] == 1280 and explicit["rail_only"]["switches"] == 256,
          "issue row: %s" % explicit)
    check(round(explicit["savings"]["cost"], 2) == 0.77 and explicit["savings"]["power"] == 0.75,
          "issue row savings: %s" % explicit["savings"])


def bad_input():
    good = {"gpus": 4096, "radix": 64, "hb_domain": 8, "hb_gbps": 2400, "nic_gbps": 200}
    cases = [
        (dict(good, radix=96), ["radix: must be a power of two"]),
        (dict(good, radix=2), ["radix: must be a power of two of at least 4"]),
        (dict(good, gpus=0), ["gpus: must be at least 1"]),
        (dict(good, gpus=4100), ["hb_domain: must divide gpus"]),
        (dict(good, hb_domain=0), ["hb_domain: must be at least 1"]),
        (dict(good, nic_gbps=0), ["nic_gbps: must be a positive"]),
        (dict(good, hb_gbps="fast"), ["hb_gbps: must be a number"]),
        (dict(good, gpus=4096.5), ["gpus: must be an integer"]),
        (dict(good, price_switch_port_usd=-1), ["price_switch_port_usd: must be zero or more"]),
        (dict(good, extra=1), ["extra: unknown field"]),
        ({k: v for k, v in good.items() if k != "gpus"}, ["gpus: missing"]),
        (dict(good, gpus=0, radix=100, hb_gbps=None),
         ["hb_gbps: must be a number", "gpus: must be at least 1", "radix: must be a power of two"]),
    ]
    for req, want in cases:
        rc, out, err = run(req)
        lines = err.strip().splitlines()
        check(rc == 2 and out == "", "%s: exit %d, stdout %r" % (req, rc, out))
        check(len(lines) == len(want) and all(l.startswith(w) for l, w in zip(lines, want)),
              "%s: stderr %r, want %r" % (req, lines, want))
    rc, out, err = run(None, raw='{"gpus": 8,')
    check(rc == 2 and out == "" and err.startswith("input: malformed JSON"), "malformed: %d %r" % (rc, err))
    rc, out, err = run(None, raw="[1]")
    check(rc == 2 and err.startswith("input: must be an object"), "array: %d %r" % (rc, err))
    rc, out, err = run(good, "--bogus")
    check(rc == 2 and out == "" and err.startswith("--bogus: unknown option"), "option: %d %r" % (rc, err))
    p = subprocess.run([OCSPLAN, "rail-only", "--in", "/nonexistent/x.json"], capture_output=True,
                       text=True, timeout=60)
    check(p.returncode == 1, "unreadable input exits 1, not %d" % p.returncode)
    p = subprocess.run([OCSPLAN, "--help"], capture_output=True, text=True, timeout=60)
    check(p.returncode == 0 and "\n  rail-only " in p.stdout, "--help lists rail-only")


table2()
random_clusters()
files_and_pretty()
bad_input()
if failures:
    print("%d checks failed" % failures, file=sys.stderr)
    sys.exit(1)
print("ocsplan rail-only: all checks passed")
