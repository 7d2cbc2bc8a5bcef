#!/usr/bin/python3
"""check_callgraph.py - checks that no two source files of a program call
each other, directly or around a longer cycle (issue 10: the daemon's files
form a one-way graph, so each can be read, tested and replaced on its own).

It reads the symbol tables of compiled object files with `nm` (binutils):
a global symbol an object defines (functions, and global data) against the
symbols it leaves undefined. Object A depends on object B when A uses a
symbol B defines; symbols no given object defines (libc, libraries, other
folders) are ignored, and so are static functions (file-local, invisible to
nm as global symbols). The file-to-file graph is then searched for strongly
connected components: every component of two or more files is a cycle, and
each is reported with one concrete cycle (e.g. jobs.c -> jobs_txn.c ->
jobs.c) and the symbols behind each of its edges.

usage: check_callgraph.py OBJECT.o...
    (the daemon's: daemon/CMakeFiles/<target>.dir/*.o in the build tree;
    ctest passes them through the CMake variable OCSD_CALLGRAPH_OBJECTS)
Exit: 0 no cycle, 1 cycles (printed), 2 usage or nm failure.
"""
import collections
import os
import subprocess
import sys

SHOW_SYMBOLS = 3  # symbols named per edge


def read_symbols(obj):
    """(defined, undefined) global symbol sets of one object file."""
    r = subprocess.run(["nm", "-P", obj], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("nm %s: %s" % (obj, r.stderr.strip()))
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


def display_names(objects):
    """Short names: the source file (jobs.c for .../jobs.c.o), with its
    directory when two objects would share a name."""
    def short(path):
        base = os.path.basename(path)
        return base[:-2] if base.endswith(".o") else base
    counts = collections.Counter(short(o) for o in objects)
    return {o: short(o) if counts[short(o)] == 1 else
            os.path.join(os.path.basename(os.path.dirname(o)), short(o)) for o in objects}


def build_graph(symbols):
    """symbols: {file: (defined, undefined)} -> {file: {other: [symbols]}}"""
    owner = {}
    for f, (defined, _) in symbols.items():
        for s in defined:
            owner.setdefault(s, f)
    graph = {f: collections.defaultdict(list) for f in symbols}
    for f, (_, undefined) in symbols.items():
        for s in sorted(undefined):
            g = owner.get(s)
            if g is not None and g != f:
                graph[f][g].append(s)
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


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__[__doc__.index("usage:"):].strip(), file=sys.stderr)
        return 2
    names = display_names(argv)
    try:
        symbols = {names[o]: read_symbols(o) for o in argv}
    except (RuntimeError, OSError) as e:
        print("check_callgraph: %s" % e, file=sys.stderr)
        return 2
    graph = build_graph(symbols)
    cycles = [c for c in strongly_connected(graph) if len(c) > 1]
    edges = sum(len(v) for v in graph.values())
    if not cycles:
        print("check_callgraph: %d files, %d file-to-file dependencies, no cycle" %
              (len(graph), edges))
        return 0
    for comp in sorted(cycles):
        cycle = shortest_cycle(graph, comp)
        print("check_callgraph: cycle: %s" % " -> ".join(cycle))
        for a, b in zip(cycle, cycle[1:]):
            syms = graph[a][b]
            more = " (+%d more)" % (len(syms) - SHOW_SYMBOLS) if len(syms) > SHOW_SYMBOLS else ""
            print("    %s uses %s%s from %s" % (a, ", ".join(syms[:SHOW_SYMBOLS]), more, b))
        if len(comp) > 2:
            print("    every dependency among its files %s:" % ", ".join(comp))
            for a in comp:
                for b in sorted(graph[a]):
                    if b in comp:
                        print("      %s -> %s%s" % (a, b, " (two-way)" if a in graph[b] else ""))
    print("check_callgraph: FAILED: %d cycle(s) among %d files" % (len(cycles), len(graph)))
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
