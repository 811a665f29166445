#!/usr/bin/env python3
"""Checks the source tree's layering (docs/architecture.md): imports run
capi -> runtime -> (backend, core, opencl, cuda), opencl and cuda -> (backend,
core) and neither to the other, the
back-end seam (backend) imports only core, the files the seam already
serves reach no back end directly, core imports nothing from opencl, the
imports between files have no cycle (so no two files import each other),
every file opens with a comment stating its job, and none is over 700
lines. Prints what it finds and exits non-zero on any breach.

usage: check_layers.py [SRC]   (default: src)"""

import os
import re
import sys

MAX_LINES = 700
# Which top-level parts each part may import.
ALLOWED = {
    "capi": {"capi", "runtime", "backend", "core", "opencl"},
    "runtime": {"runtime", "backend", "core", "opencl", "cuda"},
    "backend": {"backend", "core"},
    "opencl": {"opencl", "backend", "core"},
    "cuda": {"cuda", "backend", "core"},
    "core": {"core"},
    "lib": {"capi", "runtime", "backend", "core", "opencl", "cuda"},
}
# Runtime files that talk to the back end only through the seam.
SEAM_ONLY = {
    ("runtime", "context"),
    ("runtime", "event"),
    ("runtime", "watch"),
    ("runtime", "queue"),
    ("runtime", "queue", "state"),
    ("runtime", "queue", "lanes"),
    ("runtime", "queue", "tracking"),
    ("runtime", "queue", "submit"),
    ("runtime", "queue", "wait"),
    ("runtime", "usm"),
    ("runtime", "usm_alloc"),
    ("runtime", "usm_pool"),
    ("runtime", "launch"),
    ("runtime", "program"),
    ("runtime", "build_cache"),
    ("runtime", "buffer"),
    ("runtime", "buffer", "access"),
    ("runtime", "buffer", "alloc"),
    ("runtime", "buffer", "copies"),
    ("runtime", "buffer", "handle"),
    ("runtime", "buffer", "read"),
    ("runtime", "buffer", "storage"),
    ("runtime", "buffer", "transfer"),
    ("runtime", "buffer", "window"),
    ("runtime", "graph"),
    ("runtime", "graph", "cmdbuf"),
    ("runtime", "graph", "direct"),
    ("runtime", "graph", "exec"),
    ("runtime", "graph", "managed"),
    ("runtime", "graph", "onlane"),
    ("runtime", "graph", "record"),
    ("runtime", "graph", "replay"),
}
BACK_ENDS = {"opencl", "cuda"}


def module_of(src, path):
    rel = os.path.relpath(path, src)[: -len(".rs")].split(os.sep)
    if rel[-1] == "mod":
        rel = rel[:-1]
    return tuple(rel) if rel != ["lib"] else ("lib",)


def use_paths(text):
    """Every path a file names through `use`, `super::` or `crate::`."""
    text = re.sub(r"//[^\n]*", "", text)
    paths = set()
    for m in re.finditer(r"\buse\s+([^;]+);", text, re.S):
        paths.update(expand(m.group(1).replace("\n", " ").strip()))
    paths.update(m.group(0) for m in re.finditer(r"\b(?:super|crate)(?:::\w+)+", text))
    return paths


def expand(tree):
    """`a::{b, c::{d}}` into `a::b`, `a::c::d`."""
    m = re.match(r"^([\w:]*?)::\{(.*)\}$", tree, re.S)
    if not m:
        return [tree]
    prefix, body = m.group(1), m.group(2)
    parts, depth, cur = [], 0, ""
    for ch in body:
        depth += ch == "{"
        depth -= ch == "}"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    out = []
    for p in parts:
        p = p.strip()
        if p:
            out.extend(expand(prefix + "::" + p) if "{" in p else [prefix + "::" + p])
    return out


def resolve(src, here, path, modules):
    """The module a path leads to: the longest known module prefix."""
    segs = path.split("::")
    if segs[0] == "super":
        base = list(here[:-1])
        segs = segs[1:]
        while segs and segs[0] == "super":
            base = base[:-1]
            segs = segs[1:]
    elif segs[0] == "crate":
        base = []
        segs = segs[1:]
    else:
        return None
    best = tuple(base) if tuple(base) in modules else None
    cur = list(base)
    for s in segs:
        cur.append(s)
        if tuple(cur) in modules:
            best = tuple(cur)
        else:
            break
    return best


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else "src"
    files = {}
    for root, _, names in os.walk(src):
        for n in names:
            if n.endswith(".rs"):
                p = os.path.join(root, n)
                files[module_of(src, p)] = p
    modules = set(files)
    problems = []
    edges = {}
    for mod, path in sorted(files.items()):
        text = open(path, encoding="utf-8").read()
        lines = text.count("\n")
        if lines > MAX_LINES:
            problems.append(f"{path}: {lines} lines (at most {MAX_LINES})")
        if not text.startswith("//!"):
            problems.append(f"{path}: does not open with a //! comment stating its job")
        deps = set()
        for p in use_paths(text):
            t = resolve(src, mod, p, modules)
            # A module's own children are declared in it, not imported.
            if t and t != mod and t[: len(mod)] != mod:
                deps.add(t)
        edges[mod] = deps
        part = mod[0]
        if mod in SEAM_ONLY:
            for d in sorted(deps):
                if d[0] in BACK_ENDS:
                    problems.append(f"{path}: imports {'/'.join(d)}; it reaches the back end only through the seam")
        for d in deps:
            if d[0] not in ALLOWED.get(part, {part}):
                problems.append(f"{path}: imports {'/'.join(d)}, against the layers ({part} may import {sorted(ALLOWED[part])})")
    # Cycles among files (Tarjan's strongly connected components).
    index, low, stack, on, sccs = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(sorted("/".join(c) for c in comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    for c in sccs:
        problems.append("files that import each other in a circle: " + " -> ".join(c))
    n_edges = sum(len(d) for d in edges.values())
    if problems:
        for p in problems:
            print("FAIL", p)
        return 1
    print(f"layers: {len(files)} files, {n_edges} imports between them, no cycle, none against the layers, "
          f"none over {MAX_LINES} lines, each states its job")
    return 0


if __name__ == "__main__":
    sys.exit(main())
