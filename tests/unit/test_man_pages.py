#!/usr/bin/env python3
"""The man pages against the programs (issue 26): for ocsd(8), ocsctl(1),
ocsplan(1), ocs-devsim(1) and ocs-slurm(8), every flag `--help` prints (for
ocs-slurm, `--help` and each command's `--help`) is in the page's source
and every flag the page names is in `--help`; ocsctl's and ocs-slurm's
commands and ocsplan's subcommands likewise. ocsd-fabric(5) names every leaf of the
fabric file's YANG module (read here with a plain scan of the .yang text,
not with the generator's YIN walk). Every page is built (scdoc) and `man -l`
renders it without a warning. Fails, naming what is missing, when scdoc or
a page is missing.

Usage: test_man_pages.py BUILD_DIR SOURCE_DIR
"""

import os
import re
import subprocess
import sys

BUILD, SRC = sys.argv[1], sys.argv[2]
MAN = os.path.join(SRC, "docs", "man")
PAGES = {  # page: (program, its man source)
    "ocsd.8": os.path.join(BUILD, "daemon", "ocsd"),
    "ocsctl.1": os.path.join(BUILD, "northbound", "ocsctl", "ocsctl"),
    "ocsplan.1": os.path.join(BUILD, "solvers", "ocsplan", "ocsplan"),
    "ocs-devsim.1": os.path.join(BUILD, "southbound", "ocs-devsim"),
    "ocs-slurm.8": os.path.join(SRC, "integrations", "slurm", "ocs-slurm"),
}
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*|-[a-zA-Z])(?![\w-])")
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def flags(text):
    return set(FLAG.findall(text))


def slurm_commands(helptext):
    """The commands of ocs-slurm's --help (argparse: {prolog,epilog,...})."""
    m = re.search(r"\{([a-z,]+)\}", helptext)
    return set(m.group(1).split(",")) if m else set()


def words_after(text, start, stop):
    """First words of the indented lines of a --help section."""
    sec = text.split(start, 1)[1].split(stop, 1)[0] if start in text else ""
    return {m.group(1) for m in re.finditer(r"^  ([a-z][a-z-]*)", sec, re.M)}


def main():
    for page, prog in PAGES.items():
        src = open(os.path.join(MAN, page + ".scd")).read()
        p = subprocess.run([prog, "--help"], capture_output=True, text=True, timeout=30)
        helptext = p.stdout + p.stderr
        if page == "ocs-slurm.8":  # each command's options are in its own --help
            for cmd in sorted(slurm_commands(helptext)):
                helptext += subprocess.run([prog, cmd, "--help"], capture_output=True,
                                           text=True, timeout=30).stdout
        # flags in the page's source (scdoc escapes nothing in a flag name)
        want, have = flags(helptext) - {"-h"} | ({"-h"} & flags(helptext)), flags(src)
        missing, extra = sorted(want - have), sorted(have - want)
        check(not missing, f"{page}: every flag of --help is in the page {missing or ''}")
        check(not extra, f"{page}: every flag of the page is in --help {extra or ''}")
        built = os.path.join(BUILD, "docs", "man", page)
        check(os.path.exists(built), f"{page}: built by scdoc ({built})")
    # /etc/default/ocsd (systemd/ocsd.default): every option of ocsd, none other
    ocsd_help = subprocess.run([PAGES["ocsd.8"], "--help"], capture_output=True,
                               text=True).stdout
    default = open(os.path.join(SRC, "systemd", "ocsd.default")).read()
    want, have = flags(ocsd_help), flags(default)
    check(want == have, "systemd/ocsd.default names every option of ocsd --help and no "
          f"other ({sorted(want ^ have)})")
    unit = open(os.path.join(SRC, "systemd", "ocsd.service")).read()
    check("EnvironmentFile=-/etc/default/ocsd" in unit and "$OCSD_OPTS" in unit,
          "ocsd.service reads /etc/default/ocsd and appends $OCSD_OPTS")
    # commands and subcommands
    ctl = subprocess.run([PAGES["ocsctl.1"], "--help"], capture_output=True, text=True).stdout
    cmds = words_after(ctl, "commands:", "options:")
    src = open(os.path.join(MAN, "ocsctl.1.scd")).read()
    section = src.split("# COMMANDS", 1)[1].split("# OPTIONS", 1)[0]
    man_cmds = set(re.findall(r"^\*([a-z][a-z-]*)", section, re.M))
    check(cmds and cmds == man_cmds,
          f"ocsctl(1): COMMANDS = the commands of --help ({sorted(cmds ^ man_cmds)})")
    slurm = subprocess.run([PAGES["ocs-slurm.8"], "--help"], capture_output=True,
                           text=True).stdout
    cmds = slurm_commands(slurm)
    src = open(os.path.join(MAN, "ocs-slurm.8.scd")).read()
    section = src.split("# COMMANDS", 1)[1].split("# OPTIONS", 1)[0]
    man_cmds = set(re.findall(r"^\*([a-z][a-z-]*)\*$", section, re.M))
    check(cmds and cmds == man_cmds,
          f"ocs-slurm(8): COMMANDS = the commands of --help ({sorted(cmds ^ man_cmds)})")
    plan = subprocess.run([PAGES["ocsplan.1"], "--help"], capture_output=True, text=True).stdout
    subs = words_after(plan, "subcommands:", "exit codes")
    src = open(os.path.join(MAN, "ocsplan.1.scd")).read()
    section = src.split("# SUBCOMMANDS", 1)[1].split("# OPTIONS", 1)[0]
    man_subs = set(re.findall(r"\*([a-z][a-z-]*)\*", section))
    check(subs and subs == man_subs,
          f"ocsplan(1): SUBCOMMANDS = the subcommands of --help ({sorted(subs ^ man_subs)})")
    # ocsd-fabric(5): every leaf of the module
    yang = open(os.path.join(SRC, "daemon", "yang", "ocsd-fabric.yang")).read()
    leaves = set(re.findall(r"^\s*leaf(?:-list)?\s+([a-z][a-z0-9-]*)\s*\{", yang, re.M))
    five = os.path.join(BUILD, "docs", "man", "ocsd-fabric.5")
    check(os.path.exists(five), "ocsd-fabric.5 built from the module")
    if os.path.exists(five):
        text = re.sub(r"\\f[BIRP]|\\&", "", open(five).read()).replace("\\-", "-")
        absent = sorted(n for n in leaves if not re.search(rf"(^|/|\b){re.escape(n)}\b", text))
        check(leaves and not absent,
              f"ocsd-fabric(5) names all {len(leaves)} leaves of the module {absent or ''}")
    # rendering
    for page in list(PAGES) + ["ocsd-fabric.5"]:
        built = os.path.join(BUILD, "docs", "man", page)
        if not os.path.exists(built):
            continue
        r = subprocess.run(["man", "--warnings", "-l", built], capture_output=True, text=True,
                           env=dict(os.environ, MANWIDTH="80", MAN_KEEP_FORMATTING="0"))
        warn = [ln for ln in r.stderr.splitlines() if ln.strip()]
        shown = re.sub(".\b", "", r.stdout)  # overstrike bold when not a terminal
        check(r.returncode == 0 and not warn and "NAME" in shown,
              f"{page}: man -l renders it without a warning {warn[:2] or ''}")
    print(f"{len(failures)} problem(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
