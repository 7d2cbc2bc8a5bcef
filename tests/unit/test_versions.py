#!/usr/bin/env python3
"""--version on every program of ocsd (issue 26): ocsd, ocsctl, ocsplan and
ocs-devsim each exit 0 and print "PROG VERSION (git DESCRIBE)" with the
project's version and the git describe of the tree they were built from
(its commit is HEAD's, when the source is a git checkout), then a
"libraries:" line naming the libraries that program runs on, each with a
version.

Usage: test_versions.py BUILD_DIR SOURCE_DIR
"""

import os
import re
import subprocess
import sys

BUILD, SRC = sys.argv[1], sys.argv[2]
PROGRAMS = {
    "ocsd": ("daemon/ocsd", ["gRPC core", "libyang", "libnetconf2", "libssh", "OpenSSL",
                             "SQLite", "libevent", "jansson"]),
    "ocsctl": ("northbound/ocsctl/ocsctl", ["gRPC core", "protobuf-c", "jansson"]),
    "ocsplan": ("solvers/ocsplan/ocsplan", ["jansson"]),
    "ocs-devsim": ("southbound/ocs-devsim", ["libyang", "libnetconf2", "libssh", "OpenSSL"]),
}


def project_version():
    with open(os.path.join(SRC, "CMakeLists.txt")) as f:
        return re.search(r"project\(\s*ocsd\s+VERSION\s+([0-9.]+)", f.read()).group(1)


def head():
    p = subprocess.run(["git", "-C", SRC, "rev-parse", "HEAD"], capture_output=True, text=True)
    return p.stdout.strip() if p.returncode == 0 else None


def main():
    version, commit, failures = project_version(), head(), []
    for prog, (path, libs) in PROGRAMS.items():
        p = subprocess.run([os.path.join(BUILD, path), "--version"], capture_output=True,
                           text=True, timeout=30)
        lines = p.stdout.splitlines()
        first = re.fullmatch(rf"{re.escape(prog)} {re.escape(version)} \(git (.+)\)",
                             lines[0] if lines else "")
        problems = []
        if p.returncode != 0:
            problems.append(f"exit {p.returncode} ({p.stderr.strip()})")
        if not first:
            problems.append(f"first line {lines[:1]}, want '{prog} {version} (git ...)'")
        elif commit:
            # describe: TAG-N-gHASH, or HASH with --always; -dirty after edits
            m = re.search(r"(?:-g)?([0-9a-f]{7,40})(?:-dirty)?$", first.group(1))
            if not m or not commit.startswith(m.group(1)):
                problems.append(f"git describe {first.group(1)!r} is not HEAD {commit[:12]}")
        got = lines[1] if len(lines) > 1 else ""
        for lib in libs:
            if not re.search(rf"{re.escape(lib)} [0-9]", got):
                problems.append(f"no '{lib} <version>' in {got!r}")
        print(("ok   " if not problems else "FAIL ") + f"{prog} --version: " +
              ("; ".join(problems) if problems else " | ".join(lines)))
        failures += problems
    print(f"{len(PROGRAMS)} programs, {len(failures)} problem(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
