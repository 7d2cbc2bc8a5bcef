#!/usr/bin/python3
"""Writes ocsd-fabric(5) in scdoc from the fabric file's YANG module, so that
the man page and the module cannot drift apart: every field, its type,
range, default and units, and the description the module gives it.

Usage: fabric_man.py YANG OUT.scd   (reads the module through `yanglint -f
yin`, libyang's own converter; docs/man/CMakeLists.txt runs it at build)
"""

import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

YIN = "{urn:ietf:params:xml:ns:yang:yin:1}"
NODES = ("container", "list", "leaf", "leaf-list", "choice", "case")


def text_of(el, tag):
    """The text of el's <tag><text>...</text></tag> (description), or of the
    value attribute of <tag value=...> (default, units)."""
    child = el.find(YIN + tag)
    if child is None:
        return None
    t = child.find(YIN + "text")
    return t.text.strip() if t is not None and t.text else child.get("value")


def escape(s):
    """scdoc treats * _ and \\ as formatting: write them literally."""
    return s.replace("\\", "\\\\").replace("*", "\\*").replace("_", "\\_")


def type_text(leaf, typedefs):
    t = leaf.find(YIN + "type")
    if t is None:
        return ""
    name = t.get("name")
    parts = [name]
    for restr in ("range", "length", "pattern"):
        r = t.find(YIN + restr)
        if r is not None:
            parts.append(f"{restr} {r.get('value')}")
    enums = [e.get("name") for e in t.findall(YIN + "enum")]
    if enums:
        parts.append("one of " + ", ".join(enums))
    if name in typedefs:
        parts.append(typedefs[name])
    return "; ".join(parts)


GROUPINGS = {}


def walk(el, path, typedefs, out, depth):
    for child in el:
        kind = child.tag[len(YIN):] if child.tag.startswith(YIN) else ""
        if kind == "uses":  # a grouping's nodes, in place
            walk(GROUPINGS[child.get("name").split(":")[-1]], path, typedefs, out, depth)
            continue
        if kind not in NODES:
            continue
        name = child.get("name")
        here = f"{path}/{name}" if path else name
        desc = text_of(child, "description") or "(no description in the module)"
        facts = []
        if kind in ("leaf", "leaf-list"):
            facts.append(type_text(child, typedefs))
        if kind == "list":
            key = child.find(YIN + "key")
            facts.append("list" + (f", key {key.get('value')}" if key is not None else ""))
        if kind == "case":
            # a case is no field: its fields follow, under the parent's path
            walk(child, path, typedefs, out, depth + 1)
            continue
        if kind == "choice":
            cases = [c.get("name") for c in child.findall(YIN + "case")]
            facts.append("choose one: " + ", ".join(cases))
        for attr, label in (("default", "default"), ("units", "units")):
            v = text_of(child, attr)
            if v is not None:
                facts.append(f"{label} {v}")
        if child.find(YIN + "mandatory") is not None and \
                child.find(YIN + "mandatory").get("value") == "true":
            facts.append("required")
        if kind == "leaf-list":
            facts.append("a list of values")
        head = f"*{escape(here)}*" + (f" ({escape('; '.join(f for f in facts if f))})"
                                       if any(facts) else "")
        out.append(head)
        for para in desc.split("\n\n"):
            for line in textwrap.wrap(" ".join(para.split()), 72):
                out.append("\t" + escape(line))
            out.append("\t")
        out[-1] = ""
        # choices and cases do not appear in the file: their children sit
        # under the parent's path
        walk(child, path if kind == "choice" else here, typedefs, out, depth + 1)


def main():
    yang, out_path = sys.argv[1], sys.argv[2]
    yin = subprocess.run(["yanglint", "-f", "yin", yang], capture_output=True, text=True,
                         check=True).stdout
    mod = ET.fromstring(yin)
    typedefs = {}
    GROUPINGS.update({g.get("name"): g for g in mod.findall(YIN + "grouping")})
    for td in mod.findall(YIN + "typedef"):
        typedefs[td.get("name")] = "that is " + type_text(td, {})
    lines = [
        'ocsd-fabric(5) "ocsd" "File Formats"',
        "",
        "# NAME",
        "",
        "ocsd-fabric - the fabric file of ocsd(8)",
        "",
        "# DESCRIPTION",
        "",
    ]
    for para in (text_of(mod, "description") or "").split("\n\n"):
        lines += [escape(" ".join(para.split())), ""]
    lines += [
        "The file is JSON as RFC 7951 encodes YANG data: one object, "
        "*\"ocsd-fabric:fabric\"*, holding the fields below. ocsd(8) reads it with "
        "*--config FILE* and checks it with *--check-config FILE*; every error names "
        "the field's path.",
        "",
        "This page is generated from the module *ocsd-fabric* (revision "
        f"{mod.find(YIN + 'revision').get('date')}), installed as "
        "/usr/share/ocsd/yang/ocsd-fabric.yang: each field below is a node of it, with "
        "its type, range, default and units, and the module's own description.",
        "",
        "# FIELDS",
        "",
        "Paths are relative to *ocsd-fabric:fabric*. A choice is no field of the file: "
        "the fields of the case chosen sit directly under the choice's parent.",
        "",
    ]
    out = []
    for top in mod:
        if top.tag == YIN + "container":
            walk(top, "", typedefs, out, 0)
    lines += out
    lines += [
        "# EXAMPLES",
        "",
        "/usr/share/doc/ocsd/examples/fabrics/ holds one file per kind: lab.json "
        "(leaf-spine-OCS), ocstrx-ring.json (OCSTrx ring domain), rail-ocs.json "
        "(rail-OCS) and lab-mixed.json (devices of two models).",
        "",
        "# SEE ALSO",
        "",
        "*ocsd*(8), *ocsctl*(1), *ocsplan*(1), *yanglint*(1)",
        "",
    ]
    with open(out_path, "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
