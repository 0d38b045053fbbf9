#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""check_layers.py — the folders' layers (docs/ARCHITECTURE.md) held to the
code: every #include "..." of a layered folder, and with --objects every
call between the objects of two layers, must go to its own layer or to one
the LAYERS table lets it use (directly or through the layers it uses).  A
header name must be unique in the layered tree, so that an include names one
file.  Exit 1 with one line per violation; --self-test checks that the checks
fail where they must.

    python3 tests/layers/check_layers.py [--source DIR] [--objects BUILD_DIR --nm NM]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

# layer: (folders, the layers it may use directly).  Bottom to top; the
# public header include/ may be used by every layer.  A folder ending in
# "/*" stands for each of its sub-folders.
LAYERS = [
    ("base", ["runtime/base"], []),
    ("model", ["runtime/model"], ["base"]),
    ("device", ["runtime/device"], ["model"]),
    ("ops", ["runtime/ops"], ["device", "kernels"]),
    ("tokenizer", ["runtime/tokenizer"], ["base"]),
    ("families", ["families", "families/*"], ["ops"]),
    ("session", ["runtime/session"], ["families", "tokenizer"]),
    ("tools", ["tools"], ["session"]),  # the programs' shared parts, over the public API
    ("writer", ["writer"], ["families", "tools"]),
    ("train-ops", ["train/ops"], ["writer", "kernels"]),
    ("train-families", ["train/families", "train/families/*"], ["train-ops", "tools"]),
    ("train-core", ["train/core"], ["train-families"]),
    # programs: each uses the layers below it, never another program
    ("nmt-edge", ["cli"], ["session", "tools"]),
    ("nmt-edge-train", ["train/cli"], ["train-core", "session"]),
    ("nmt-edge-convert", ["convert"], ["writer", "session"]),
]
PUBLIC = "include"
KERNELS = ("kernels", ["cl"], [])

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def expand(src, folders):
    out = []
    for f in folders:
        if f.endswith("/*"):
            base = os.path.join(src, f[:-2])
            if os.path.isdir(base):
                out += sorted(os.path.join(f[:-2], d) for d in os.listdir(base)
                              if os.path.isdir(os.path.join(base, d)) and not d.startswith("__"))
        else:
            out.append(f)
    return out


def closure(layers):
    uses = {name: set(deps) for name, _, deps in layers}
    uses[KERNELS[0]] = set()
    full = {}

    def walk(name, seen):
        if name in full:
            return full[name]
        if name in seen:
            raise SystemExit("check_layers: the LAYERS table has a circle through %s" % name)
        acc = set()
        for d in uses[name]:
            acc |= {d} | walk(d, seen | {name})
        full[name] = acc
        return acc

    for name in uses:
        walk(name, set())
    return full


def folder_layers(src, layers):
    """folder (relative) -> layer name"""
    owner = {}
    for name, folders, _ in layers + [KERNELS]:
        for f in expand(src, folders):
            owner[f] = name
    return owner


def check_includes(src, layers):
    owner = folder_layers(src, layers)
    allowed = closure(layers)
    problems = []
    by_name = {}
    files = []
    for folder, layer in owner.items():
        d = os.path.join(src, folder)
        if not os.path.isdir(d):
            continue
        for fn in sorted(os.listdir(d)):
            if fn.endswith((".c", ".h", ".cl")):
                rel = os.path.join(folder, fn)
                files.append((rel, folder, layer))
                if fn.endswith(".h"):
                    if fn in by_name:
                        problems.append("%s: header name also used by %s" % (rel, by_name[fn][0]))
                    by_name[fn] = (rel, layer)
    pub = os.path.join(src, PUBLIC)
    public = set(os.listdir(pub)) if os.path.isdir(pub) else set()
    edges = {}  # folder -> folders it includes from (for circles between folders)
    for rel, folder, layer in files:
        if rel.endswith(".cl"):
            continue
        with open(os.path.join(src, rel), encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        for m in INCLUDE.finditer(text):
            inc = m.group(1)
            line = text.count("\n", 0, m.start()) + 1
            if "/" in inc:
                target = os.path.normpath(os.path.join(folder, inc))
                tfolder = os.path.dirname(target)
                tlayer = owner.get(tfolder)
                if tlayer is None:
                    problems.append("%s:%d: includes \"%s\", outside every layer" % (rel, line, inc))
                    continue
            elif os.path.exists(os.path.join(src, folder, inc)):
                continue  # its own folder
            elif inc in public:
                continue
            elif inc in by_name:
                tlayer = by_name[inc][1]
                tfolder = os.path.dirname(by_name[inc][0])
            else:
                continue  # not ours (a system or generated header)
            if tfolder != folder:
                edges.setdefault(folder, set()).add(tfolder)
            if tlayer != layer and tlayer not in allowed[layer]:
                problems.append("%s:%d: includes \"%s\" of layer %s, which layer %s may not use"
                                % (rel, line, inc, tlayer, layer))
    problems += folder_circles(edges)
    return problems


def folder_circles(edges):
    """Circles in the include graph between folders (also inside one layer,
    e.g. families/ and a family's folder)."""
    out = []
    state = {}

    def visit(f, path):
        state[f] = 1
        for t in sorted(edges.get(f, ())):
            if state.get(t) == 1:
                out.append("folders include each other: %s" % " -> ".join(path[path.index(t):] + [t]))
            elif t not in state:
                visit(t, path + [t])
        state[f] = 2

    for f in sorted(edges):
        if f not in state:
            visit(f, [f])
    return out


def check_objects(src, layers, build, nm):
    """Calls between layers, from the symbols of the build's object files."""
    owner = folder_layers(src, layers)
    allowed = closure(layers)
    defined = {}
    undefined = {}
    for root, _, names in os.walk(build):
        for fn in names:
            if not fn.endswith(".c.o") or ".dir" not in root:
                continue
            rel = os.path.relpath(os.path.join(root, fn[:-2]), build)
            parts = rel.split(os.sep)
            i = max(k for k, p in enumerate(parts) if p.endswith(".dir"))
            source = "/".join(parts[i + 1:])
            layer = owner.get(os.path.dirname(source))
            if layer is None:
                continue
            out = subprocess.run([nm, os.path.join(root, fn)], capture_output=True, text=True, check=True).stdout
            for ln in out.splitlines():
                f = ln.split()
                if len(f) == 3 and f[1] in "TDBRC":
                    defined.setdefault(f[2], set()).add((source, layer))
                elif len(f) == 2 and f[0] == "U":
                    undefined.setdefault((source, layer), set()).add(f[1])
    problems = set()
    for (source, layer), syms in undefined.items():
        for s in syms:
            defs = defined.get(s, ())
            # a name two programs both define resolves to the caller's own
            if any(dl == layer or dl in allowed[layer] for _, dl in defs):
                continue
            for dsource, dlayer in defs:
                problems.add("%s: calls %s of %s (layer %s), which layer %s may not use"
                             % (source, s, dsource, dlayer, layer))
    return sorted(problems)


def self_test():
    """The checks find an upward include, a relative path around the table,
    two folders of one layer that include each other, a header name used
    twice, an upward call and a table circle."""
    layers = [("low", ["a"], []), ("high", ["b"], ["low"])]
    with tempfile.TemporaryDirectory() as t:
        for d in ("a", "b", "include"):
            os.makedirs(os.path.join(t, d))

        def w(p, s):
            with open(os.path.join(t, p), "w") as fh:
                fh.write(s)
        w("a/low.h", "")
        w("b/high.h", '#include "low.h"\n')
        w("a/low.c", '#include "low.h"\n')
        assert check_includes(t, layers) == [], "a clean tree reports nothing"
        w("a/low.c", '#include "low.h"\n#include "high.h"\n')
        p = check_includes(t, layers)  # the upward include, and so a circle a -> b -> a
        assert len(p) == 2 and "a/low.c:2" in p[0] and "layer high" in p[0], p
        assert p[1] == "folders include each other: a -> b -> a", p
        w("a/low.c", '#include "../b/high.h"\n')
        p = check_includes(t, layers)
        assert len(p) == 2 and "layer high" in p[0] and "a -> b -> a" in p[1], p
        layers2 = [("one", ["c", "c/*"], [])]
        os.makedirs(os.path.join(t, "c", "d"))
        w("c/top.h", '#include "sub.h"\n')
        w("c/d/sub.h", '#include "top.h"\n')
        p = check_includes(t, layers2)
        assert len(p) == 1 and "folders include each other" in p[0], p
        w("c/d/sub.h", "")
        w("a/low.c", "")
        w("b/low.h", "")
        p = check_includes(t, layers)
        assert any("header name also used" in x for x in p), p
        # a call upward, through a prototype of its own (no include)
        w("a/low.c", "int high(void);\nint low(void) { return high(); }\n")
        w("b/high.c", "int high(void) { return 1; }\n")
        for f in ("a/low.c", "b/high.c"):
            o = os.path.join(t, "build", "x.dir", f + ".o")
            os.makedirs(os.path.dirname(o), exist_ok=True)
            subprocess.run([os.environ.get("CC", "cc"), "-c", os.path.join(t, f), "-o", o], check=True)
        p = check_objects(t, layers, os.path.join(t, "build"), os.environ.get("NM", "nm"))
        assert len(p) == 1 and "a/low.c: calls high" in p[0], p
    try:
        closure([("x", ["a"], ["y"]), ("y", ["b"], ["x"])])
    except SystemExit as e:
        assert "circle" in str(e)
    else:
        raise AssertionError("a circle in the table was not found")
    print("check_layers: self-test passed")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    ap.add_argument("--objects", help="a build directory: check calls between layers too")
    ap.add_argument("--nm", default="nm")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        self_test()
        return 0
    src = os.path.abspath(a.source)
    problems = check_includes(src, LAYERS)
    n_obj = ""
    if a.objects:
        problems += check_objects(src, LAYERS, a.objects, a.nm)
        n_obj = " and calls"
    for p in problems:
        print(p)
    if problems:
        print("check_layers: %d violation(s) of the layers (docs/ARCHITECTURE.md)" % len(problems))
        return 1
    print("check_layers: includes%s follow the %d layers" % (n_obj, len(LAYERS)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
