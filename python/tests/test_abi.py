# SPDX-License-Identifier: MIT
"""test_abi.py — the ctypes mirror against include/nmt_edge.h: every
struct's size and every field's offset and size as a C compiler lays them
out, the status values, the constants, each declared function's parameter
count, and the version of the package, the header and the library."""

import ctypes
import os
import re
import shutil
import subprocess

import pytest

import nmt_edge
from nmt_edge import _lib

from conftest import HEADER, REPO

CONSTANTS = {
    "NMT_ARENA_ALIGNMENT": _lib.ARENA_ALIGNMENT, "NMT_MODEL_WHY_BYTES": _lib.MODEL_WHY_BYTES,
    "NMT_LOG_ERROR": _lib.LOG_ERROR, "NMT_LOG_DEBUG": _lib.LOG_DEBUG, "NMT_GEMM_AUTO": _lib.GEMM_AUTO,
    "NMT_GEMM_OWN": _lib.GEMM_OWN, "NMT_GEMM_CLBLAST": _lib.GEMM_CLBLAST, "NMT_FP16_OFF": _lib.FP16_OFF,
    "NMT_FP16_AUTO": _lib.FP16_AUTO, "NMT_FP16_ON": _lib.FP16_ON, "NMT_STATUS_COUNT_": len(_lib.STATUS_NAMES),
}


def header_text():
    if not os.path.exists(HEADER):
        pytest.skip("include/nmt_edge.h not found (not run from the repository)")
    with open(HEADER, encoding="utf-8") as f:
        return f.read()


@pytest.fixture(scope="module")
def c_layout(tmp_path_factory):
    """name -> value printed by a C program compiled against the header."""
    header_text()
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "nmt_edge.h"', "int main(void) {"]
    for st in _lib.STRUCTS:
        c = st.__name__
        lines.append('printf("%s %%zu\\n", sizeof(%s));' % (c, c))
        for field, _ in st._fields_:
            lines.append('printf("%s.%s %%zu %%zu\\n", offsetof(%s, %s), sizeof(((%s *)0)->%s));'
                         % (c, field, c, field, c, field))
    for name in list(_lib.STATUS_NAMES) + list(CONSTANTS):
        lines.append('printf("%s %%d\\n", (int)%s);' % (name, name))
    lines.append('printf("version %d.%d.%d\\n", NMT_VERSION_MAJOR, NMT_VERSION_MINOR, NMT_VERSION_PATCH);')
    lines += ["return 0;", "}"]
    d = tmp_path_factory.mktemp("abi")
    src, exe = d / "layout.c", d / "layout"
    src.write_text("\n".join(lines) + "\n")
    subprocess.run([cc, "-std=c11", "-Wall", "-Werror", "-I", os.path.join(REPO, "include"), str(src), "-o", str(exe)],
                   check=True)
    out = subprocess.run([str(exe)], check=True, stdout=subprocess.PIPE).stdout.decode()
    return dict(line.split(" ", 1) for line in out.splitlines())


@pytest.mark.parametrize("struct", _lib.STRUCTS, ids=lambda s: s.__name__)
def test_struct_layout(c_layout, struct):
    name = struct.__name__
    assert int(c_layout[name]) == ctypes.sizeof(struct), "sizeof(%s)" % name
    for field, _ in struct._fields_:
        descr = getattr(struct, field)
        assert c_layout["%s.%s" % (name, field)] == "%d %d" % (descr.offset, descr.size), "%s.%s" % (name, field)


def test_struct_fields_are_the_headers(c_layout):
    # every field the header declares in the mirrored structs is mirrored (same names, same order)
    text = header_text()
    for struct in _lib.STRUCTS:
        body = re.search(r"typedef struct %s \{(.*?)\n\} %s;" % (struct.__name__, struct.__name__), text, re.S)
        assert body, struct.__name__
        code = re.sub(r"/\*.*?\*/", "", body.group(1), flags=re.S)
        names = []
        for decl in code.split(";"):
            decl = " ".join(decl.split())
            if not decl:
                continue
            fn = re.search(r"\(\s*\*\s*(\w+)\s*\)", decl)  # a function pointer field
            if fn:
                names.append(fn.group(1))
                continue
            parts = re.sub(r"\[[^\]]*\]", "", decl).split(",")  # "uint32_t a, b" declares two
            names.append(re.split(r"[\s*]+", parts[0].strip())[-1])
            names += [p.strip().lstrip("*").strip() for p in parts[1:]]
        assert names == [f for f, _ in struct._fields_], struct.__name__


def test_status_values(c_layout):
    for value, name in enumerate(_lib.STATUS_NAMES):
        assert int(c_layout[name]) == value, name
    for name, value in CONSTANTS.items():
        assert int(c_layout[name]) == value, name


def test_functions_match_the_header():
    text = re.sub(r"/\*.*?\*/", "", header_text(), flags=re.S)
    decls = {m.group(1): m.group(2) for m in re.finditer(r"NMT_API[^;(]*?\b(nmt_\w+)\s*\(([^;]*?)\)\s*;", text, re.S)}
    for name, (_, argtypes) in list(_lib._PROTOTYPES.items()) + list(_lib._OPTIONAL.items()):
        assert name in decls, name
        params = decls[name].strip()
        count = 0 if params in ("", "void") else params.count(",") + 1
        assert count == len(argtypes), name


def test_versions(c_layout):
    with open(os.path.join(REPO, "python", "pyproject.toml"), encoding="utf-8") as f:
        pyproject = re.search(r'^version = "([^"]+)"', f.read(), re.M).group(1)
    assert c_layout["version"] == nmt_edge.version() == nmt_edge.__version__ == pyproject


def test_license_is_the_repositorys():
    # python/LICENSE goes into the wheel; it is a copy of the repository's
    with open(os.path.join(REPO, "LICENSE"), "rb") as a, open(os.path.join(REPO, "python", "LICENSE"), "rb") as b:
        assert a.read() == b.read()
