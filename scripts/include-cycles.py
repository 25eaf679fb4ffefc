#!/usr/bin/python3
"""Include cycles in src/: between folders, and between files inside one folder.

Reads every #include "..." of src/**/*.{c,h} (a bare name is the including file's folder,
"dir/x.h" is src/dir/x.h), joins a .c to its .h, and prints each strongly connected group of
more than one member, at the folder level and at the file level within each folder.
Exits 1 when there is one. Usage: scripts/include-cycles.py [SRC]"""
import os
import re
import sys
from collections import defaultdict

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def unit(path):
    """A .c and its .h are one unit: src/a/b.c and src/a/b.h -> a/b"""
    return os.path.splitext(path)[0]


def graph(src):
    edges = defaultdict(set)
    for root, _, files in os.walk(src):
        for f in files:
            if not f.endswith((".c", ".h")):
                continue
            path = os.path.relpath(os.path.join(root, f), src)
            folder = os.path.dirname(path)
            me = unit(path)
            edges[me]
            with open(os.path.join(src, path), errors="replace") as fh:
                for inc in INCLUDE.findall(fh.read()):
                    target = inc if "/" in inc else os.path.join(folder, inc)
                    if os.path.exists(os.path.join(src, target)):
                        other = unit(os.path.normpath(target))
                        if other != me:
                            edges[me].add(other)
    return edges


def sccs(edges):
    """Tarjan's algorithm, iterative."""
    index, low, on, stack, out, n = {}, {}, set(), [], [], [0]
    for start in list(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = n[0]
        n[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = n[0]
                    n[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    group = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        group.append(w)
                        if w == v:
                            break
                    if len(group) > 1:
                        out.append(sorted(group))
    return out


def main(argv):
    src = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "src")
    edges = graph(src)
    folders = defaultdict(set)
    inside = defaultdict(lambda: defaultdict(set))
    for a, bs in edges.items():
        fa = os.path.dirname(a)
        folders[fa]
        for b in bs:
            fb = os.path.dirname(b)
            if fa != fb:
                folders[fa].add(fb)
            else:
                inside[fa][a].add(b)
    bad = 0
    for group in sccs(folders):
        print("folders in a cycle: " + " ".join(group))
        for a in group:
            for b in sorted(folders[a] & set(group)):
                why = sorted(x for x in edges if os.path.dirname(x) == a
                             and any(os.path.dirname(y) == b for y in edges[x]))
                print(f"   {a} -> {b}: {', '.join(why)}")
        bad += 1
    for folder in sorted(inside):
        for group in sccs(inside[folder]):
            print(f"files of {folder}/ in a cycle: " + " ".join(os.path.basename(g) for g in group))
            bad += 1
    if bad:
        return 1
    print("no include cycle between folders or inside one")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
