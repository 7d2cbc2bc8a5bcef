#!/usr/bin/python3
"""check_layers.py - checks the two rules that make the source tree a house
of floors (issue 22), over the whole tree, not one folder:

1. The include order. Every folder that holds C sources has a row in the
   table of daemon/README.md ("The include order", between the markers
   `<!-- layers begin` and `<!-- layers end -->`): the folders it may
   include. A folder may include its own files and, transitively, those of
   the folders its row names (their rows, and so on down). Every
   `#include "..."` of every .c, .h and .def file outside tests/ is resolved
   to the file it names (first beside the including file, as the compiler
   does, then by a unique path suffix anywhere in the tree; the generated
   protobuf-c headers `ocs/v1/*.pb-c.h` and `grpc/health/v1/*.pb-c.h`
   belong to the virtual folder `proto`), and an include of a folder above
   or beside the includer's is reported with its line. A folder missing
   from the table, an include that names no file or more than one, and a
   table that is not a one-way order are reported too.

2. No call cycle between object files. It reads the symbol tables of the
   compiled objects given with `nm` (binutils): object A depends on object
   B when A leaves undefined a global symbol B defines. Symbols no given
   object defines (libc, libraries) are ignored, and so are static ones
   (invisible to nm); a symbol two objects define (each program's `main`)
   names no edge. The file-to-file graph is searched for strongly
   connected components (Tarjan): every component of two or more files is
   a cycle, reported with one shortest cycle and the symbols behind each
   of its edges.

usage: check_layers.py SOURCE_DIR [--build BUILD_DIR OBJECT.o...]
    SOURCE_DIR: the project's root (daemon/README.md is read from it);
    BUILD_DIR: the build tree the objects are under, which names each
    object by its source path (build/daemon/CMakeFiles/ocsd_core.dir/
    core/loop.c.o is daemon/core/loop.c). ctest passes every library and
    program of the project (tests/unit/CMakeLists.txt).
Exit: 0 both rules hold, 1 a rule is broken (each breach printed),
2 usage, an unreadable table or an nm failure.
"""
import collections
import os
import re
import subprocess
import sys

SHOW_SYMBOLS = 3  # symbols named per edge
SKIP_TOP = {"tests", ".git", ".ci", "deploy", "docs", "systemd", "cmake"}
SOURCE_EXT = (".c", ".h", ".def")
PROTO_RE = re.compile(r"^(ocs/v1|grpc/health/v1)/[A-Za-z0-9_]+\.pb-c\.h$")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
TABLE = "daemon/README.md"


class Usage(Exception):
    pass


# ---- rule 1: the include order ----

def read_table(source):
    """{folder: [folders it names]} from daemon/README.md's table."""
    path = os.path.join(source, TABLE)
    try:
        text = open(path, encoding="utf-8").read()
    except OSError as e:
        raise Usage("cannot read the layer table: %s" % e)
    begin, end = text.find("<!-- layers begin"), text.find("<!-- layers end -->")
    if begin < 0 or end < begin:
        raise Usage("%s: no '<!-- layers begin' ... '<!-- layers end -->' table" % TABLE)
    table = {}
    for line in text[begin:end].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0].startswith("`"):
            continue
        folder = cells[0].strip("`")
        if folder in table:
            raise Usage("%s: folder %s has two rows" % (TABLE, folder))
        table[folder] = re.findall(r"`([^`]+)`", cells[1])  # the second column only
    if not table:
        raise Usage("%s: the layer table has no rows" % TABLE)
    return table


def closure(table, problems):
    """{folder: set of folders below it}; a cycle or an unknown name in the
    table is a problem (the order must be one-way)."""
    below, state = {}, {}

    def visit(f, path):
        if state.get(f) == "done":
            return below[f]
        if state.get(f) == "open":
            cyc = path[path.index(f):] + [f]
            problems.append("%s: the table is not one-way: %s" % (TABLE, " -> ".join(cyc)))
            return set()
        state[f] = "open"
        acc = set()
        for g in table[f]:
            if g not in table:
                problems.append("%s: %s names %s, which has no row" % (TABLE, f, g))
                continue
            acc.add(g)
            acc |= visit(g, path + [f])
        state[f], below[f] = "done", acc
        return acc

    for f in sorted(table):
        visit(f, [])
    return below


def source_files(source):
    """Relative paths of every C source outside tests/ and the build trees."""
    out = []
    for root, dirs, files in os.walk(source):
        rel = os.path.relpath(root, source)
        if rel == ".":
            dirs[:] = [d for d in dirs if d not in SKIP_TOP and not d.startswith(("build", "."))]
        out += [os.path.normpath(os.path.join(rel, f)) for f in files if f.endswith(SOURCE_EXT)]
    return sorted(out)


def resolve(source, files_by_suffix, includer, name):
    """(path, None) of the file an include names, ("proto", None) for a
    generated protobuf-c header, or (None, why)."""
    beside = os.path.normpath(os.path.join(os.path.dirname(includer), name))
    if os.path.isfile(os.path.join(source, beside)):
        return beside, None
    if PROTO_RE.match(name):
        return "proto", None
    hits = files_by_suffix.get(name.split("/")[-1], [])
    hits = [h for h in hits if h == name or h.endswith("/" + name)]
    if len(hits) == 1:
        return hits[0], None
    if not hits:
        return None, "names no file of the tree"
    return None, "is ambiguous: %s" % ", ".join(hits)


def check_includes(source):
    problems = []
    table = read_table(source)
    below = closure(table, problems)
    for folder in table:
        if folder != "proto" and not os.path.isdir(os.path.join(source, folder)):
            problems.append("%s: folder %s has a row but no directory" % (TABLE, folder))
    files = source_files(source)
    by_suffix = collections.defaultdict(list)
    for f in files:
        by_suffix[os.path.basename(f)].append(f)
    n_includes = 0
    unlisted = set()
    for f in files:
        folder = os.path.dirname(f)
        if folder not in table:
            unlisted.add(folder)
            continue
        with open(os.path.join(source, f), encoding="utf-8", errors="replace") as fh:
            for lineno, line in enumerate(fh, 1):
                m = INCLUDE_RE.match(line)
                if not m:
                    continue
                n_includes += 1
                target, why = resolve(source, by_suffix, f, m.group(1))
                if target is None:
                    problems.append('%s:%d: #include "%s" %s' % (f, lineno, m.group(1), why))
                    continue
                tfolder = "proto" if target == "proto" else os.path.dirname(target)
                if tfolder == folder or tfolder in below.get(folder, ()):
                    continue
                may = ", ".join(sorted(below.get(folder, ()))) or "nothing but itself"
                problems.append('%s:%d: #include "%s" reaches %s (%s), which %s may not include '
                                '(it may include: %s)' % (f, lineno, m.group(1), tfolder,
                                                          target, folder, may))
    for folder in sorted(unlisted):
        problems.append("%s holds C sources but has no row in %s's layer table" % (folder, TABLE))
    return problems, len(files), n_includes, len(table)


# ---- rule 2: no call cycle ----

def read_symbols(obj):
    """(defined, undefined) global symbol sets of one object file."""
    r = subprocess.run(["nm", "-P", obj], capture_output=True, text=True)
    if r.returncode != 0:
        raise Usage("nm %s: %s" % (obj, r.stderr.strip()))
    defined, undefined = set(), set()
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            undefined.add(name)
        elif kind.isupper() or kind in "uvw":  # global (or weak / unique) definitions
            defined.add(name)
    return defined, undefined


def object_name(build, obj):
    """daemon/core/loop.c for BUILD/daemon/CMakeFiles/ocsd_core.dir/core/loop.c.o."""
    path = os.path.abspath(obj)
    head, sep, tail = path.partition("/CMakeFiles/")
    if not sep or ".dir/" not in tail:
        return os.path.relpath(path, build)
    rel = tail.split(".dir/", 1)[1]
    rel = rel[:-2] if rel.endswith(".o") else rel
    return os.path.normpath(os.path.join(os.path.relpath(head, build), rel))


def build_graph(symbols):
    """symbols: {file: (defined, undefined)} -> {file: {other: [symbols]}}"""
    owners = collections.defaultdict(list)
    for f, (defined, _) in symbols.items():
        for s in defined:
            owners[s].append(f)
    graph = {f: collections.defaultdict(list) for f in symbols}
    for f, (_, undefined) in symbols.items():
        for s in sorted(undefined):
            o = owners.get(s, [])
            if len(o) == 1 and o[0] != f:
                graph[f][o[0]].append(s)
    return graph


def strongly_connected(graph):
    """Tarjan's algorithm (iterative); components in no particular order."""
    index, low, on_stack, stack, comps = {}, {}, set(), [], []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    x = stack.pop()
                    on_stack.discard(x)
                    comp.append(x)
                    if x == node:
                        break
                comps.append(sorted(comp))
    return comps


def shortest_cycle(graph, comp):
    """A shortest cycle through the first file of a component (BFS)."""
    start, members = comp[0], set(comp)
    prev = {start: None}
    queue = collections.deque([start])
    while queue:
        node = queue.popleft()
        for nxt in sorted(graph[node]):
            if nxt not in members:
                continue
            if nxt == start:
                path = [node]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return list(reversed(path)) + [start]
            if nxt not in prev:
                prev[nxt] = node
                queue.append(nxt)
    return [start]


def check_calls(build, objects):
    names = {}
    for o in objects:
        n = object_name(build, o)
        if n in names.values():
            n = "%s (%s)" % (n, o)
        names[o] = n
    symbols = {names[o]: read_symbols(o) for o in objects}
    graph = build_graph(symbols)
    problems = []
    for comp in sorted(c for c in strongly_connected(graph) if len(c) > 1):
        cycle = shortest_cycle(graph, comp)
        lines = ["call cycle: %s" % " -> ".join(cycle)]
        for a, b in zip(cycle, cycle[1:]):
            syms = graph[a][b]
            more = " (+%d more)" % (len(syms) - SHOW_SYMBOLS) if len(syms) > SHOW_SYMBOLS else ""
            lines.append("    %s uses %s%s from %s" % (a, ", ".join(syms[:SHOW_SYMBOLS]), more, b))
        if len(comp) > 2:
            lines.append("    every dependency among %s:" % ", ".join(comp))
            for a in comp:
                for b in sorted(graph[a]):
                    if b in comp:
                        lines.append("      %s -> %s%s" % (a, b, " (two-way)" if a in graph[b]
                                                            else ""))
        problems.append("\n".join(lines))
    return problems, len(graph), sum(len(v) for v in graph.values())


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__[__doc__.index("usage:"):].strip(), file=sys.stderr)
        return 2
    source, rest = argv[0], argv[1:]
    build, objects = None, []
    if rest:
        if rest[0] != "--build" or len(rest) < 2:
            print("check_layers: usage: check_layers.py SOURCE_DIR [--build BUILD_DIR OBJECT.o...]",
                  file=sys.stderr)
            return 2
        build, objects = rest[1], rest[2:]
    try:
        problems, n_files, n_inc, n_folders = check_includes(source)
        print("check_layers: includes: %d files in %d folders, %d quoted includes" %
              (n_files, n_folders, n_inc))
        if objects:
            calls, n_obj, n_edges = check_calls(build, objects)
            print("check_layers: calls: %d objects, %d file-to-file dependencies" % (n_obj, n_edges))
            problems += calls
    except Usage as e:
        print("check_layers: %s" % e, file=sys.stderr)
        return 2
    for p in problems:
        print("check_layers: %s" % p)
    if problems:
        print("check_layers: FAILED: %d breach(es)" % len(problems))
        return 1
    print("check_layers: every include goes down the table, no call cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
