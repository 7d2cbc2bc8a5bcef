#!/usr/bin/python3
"""check_layers_planted.py - check_layers.py must fail where the house's
rules are broken, not only pass on a tree that keeps them (issue 22).

On a copy of the real tree's C sources and daemon/README.md (in a
temporary directory; the checkout is never touched), it first checks that
the copy passes, then plants one breach at a time and expects exit 1 with
the breach named:
  upward    daemon/fabric/rails.c includes jobs.h (daemon/jobs is above
            daemon/fabric);
  sideways  southbound/devsim/devsim_store.c includes sb_device.h (the
            driver is beside the simulator, not below it);
  table     daemon/core's row names daemon/api (the order is no longer
            one-way);
  unlisted  a new folder daemon/extra with a C file and no row;
  cycle     two objects compiled here with cc, each calling a function the
            other defines (a.c -> b.c -> a.c), beside a third that only
            calls (no false cycle through it).

usage: check_layers_planted.py SOURCE_DIR
Exit: 0 every breach caught and the copy clean, 1 otherwise.
"""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKER = os.path.join(HERE, "check_layers.py")
SKIP_TOP = {"tests", ".git", ".ci", "deploy", "docs", "systemd", "cmake"}


def copy_sources(source, dest):
    for root, dirs, files in os.walk(source):
        rel = os.path.relpath(root, source)
        if rel == ".":
            dirs[:] = [d for d in dirs if d not in SKIP_TOP and not d.startswith(("build", "."))]
        for f in files:
            if f.endswith((".c", ".h", ".def")) or (rel == "daemon" and f == "README.md"):
                os.makedirs(os.path.join(dest, rel), exist_ok=True)
                shutil.copy(os.path.join(root, f), os.path.join(dest, rel, f))


def run(args):
    r = subprocess.run([sys.executable, CHECKER] + args, capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


class Planted:
    """Appends text to a file for the length of a with-block."""

    def __init__(self, path, text, replace=None):
        self.path, self.text, self.replace = path, text, replace

    def __enter__(self):
        self.old = open(self.path).read() if os.path.exists(self.path) else None
        new = self.old or ""
        new = new.replace(*self.replace) if self.replace else new + self.text
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        open(self.path, "w").write(new)

    def __exit__(self, *exc):
        if self.old is None:
            os.remove(self.path)
        else:
            open(self.path, "w").write(self.old)


def expect(name, rc, out, needles):
    missing = [n for n in needles if n not in out]
    if rc == 1 and not missing:
        print("ok: %s caught: %s" % (name, next(l for l in out.splitlines() if needles[0] in l)))
        return True
    print("FAIL: %s: exit %d, missing %s; output:\n%s" % (name, rc, missing, out))
    return False


def main(argv):
    if len(argv) != 1:
        print(__doc__[__doc__.index("usage:"):].strip(), file=sys.stderr)
        return 1
    ok = True
    with tempfile.TemporaryDirectory(prefix="check-layers-") as tmp:
        tree = os.path.join(tmp, "tree")
        copy_sources(argv[0], tree)
        rc, out = run([tree])
        if rc != 0:
            print("FAIL: the copy of the tree does not pass as it is:\n" + out)
            return 1
        print("ok: the copy passes: " + out.splitlines()[0])

        with Planted(os.path.join(tree, "daemon/fabric/rails.c"), '#include "jobs.h"\n'):
            ok &= expect("upward include", *run([tree]),
                         ["daemon/fabric/rails.c:", "reaches daemon/jobs", "FAILED"])
        with Planted(os.path.join(tree, "southbound/devsim/devsim_store.c"),
                     '#include "sb_device.h"\n'):
            ok &= expect("sideways include", *run([tree]),
                         ["southbound/devsim/devsim_store.c:", "reaches southbound (", "FAILED"])
        with Planted(os.path.join(tree, "daemon/README.md"), None,
                     ("| `daemon/core` | `solvers`,", "| `daemon/core` | `daemon/api`, `solvers`,")):
            ok &= expect("table cycle", *run([tree]), ["the table is not one-way", "FAILED"])
        with Planted(os.path.join(tree, "daemon/extra/extra.c"), "int extra;\n"):
            ok &= expect("unlisted folder", *run([tree]),
                         ["daemon/extra holds C sources but has no row", "FAILED"])

        objs = os.path.join(tmp, "build", "planted", "CMakeFiles", "planted.dir")
        os.makedirs(objs)
        sources = {
            "a.c": "int b_f(void);\nint a_f(void) { return b_f() + 1; }\n",
            "b.c": "int a_f(void);\nint b_f(void) { return 0; }\nint b_g(void) { return a_f(); }\n",
            "c.c": "int a_f(void);\nint b_f(void);\nint c_f(void) { return a_f() + b_f(); }\n",
        }
        built = []
        for name, text in sources.items():
            src = os.path.join(tmp, name)
            open(src, "w").write(text)
            obj = os.path.join(objs, name + ".o")
            subprocess.run(["cc", "-c", "-o", obj, src], check=True)
            built.append(obj)
        ok &= expect("call cycle", *run([tree, "--build", os.path.join(tmp, "build")] + built),
                     ["call cycle: planted/a.c -> planted/b.c -> planted/a.c",
                      "planted/a.c uses b_f from planted/b.c", "FAILED: 1 breach"])
    print("check_layers_planted: %s" % ("every breach caught" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
