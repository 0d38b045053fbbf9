# SPDX-License-Identifier: MIT
"""conftest.py — fixtures of the Python package's tests: the repository's
bundled model, a random model written by nmt-edge-convert, translators of
both, and the nmt-edge program to compare with.

Environment: NMT_EDGE_LIBRARY (the libnmtedge.so.1 under test; else the
package's own search) and NMT_EDGE_BIN_DIR (the build directory with
nmt-edge and nmt-edge-convert; default: the library's directory).  Tests
that need the programs, a C compiler or the header are skipped without them.
"""

import os
import shutil
import subprocess

import pytest

import nmt_edge

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EN_DE = os.path.join(REPO, "models", "en-de.nmt")
HEADER = os.path.join(REPO, "include", "nmt_edge.h")

# sentences of the bundled model's domain, one empty, one with a non-ASCII letter
SENTENCES = [
    "This package contains the development files for the library.",
    "The program shows a list of files.",
    "",
    "Click OK to close the dialog.",
    "This is a library for reading and writing XML files.",
    "Select the cells you want to delete.",
    "Documentation for the Python module.",
    "The café's menu is a file.",
    "Drag the image to the new position.",
    "This package provides the shared library.",
]


def bin_dir():
    d = os.environ.get("NMT_EDGE_BIN_DIR")
    if not d and os.environ.get("NMT_EDGE_LIBRARY"):
        d = os.path.dirname(os.path.abspath(os.environ["NMT_EDGE_LIBRARY"]))
    return d


def program(name):
    d = bin_dir()
    path = os.path.join(d, name) if d else shutil.which(name)
    if not path or not os.access(path, os.X_OK):
        pytest.skip("%s not found (set NMT_EDGE_BIN_DIR)" % name)
    return path


def run_cli(args, stdin_text):
    """Run nmt-edge with args on stdin_text; its standard output."""
    p = subprocess.run([program("nmt-edge")] + args, input=stdin_text.encode(), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, check=False)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    return p.stdout.decode()


@pytest.fixture(scope="session")
def random_model(tmp_path_factory):
    """A random-weight Transformer without a tokenizer (ids only)."""
    path = str(tmp_path_factory.mktemp("models") / "random.nmt")
    subprocess.run([program("nmt-edge-convert"), "random", "-o", path, "--seed", "7", "--src-vocab", "50",
                    "--tgt-vocab", "40"], check=True, stdout=subprocess.DEVNULL)
    return path


@pytest.fixture(scope="session")
def en_de():
    """A translator of the bundled model with the nmt-edge program's limits."""
    with nmt_edge.Translator(EN_DE) as tr:
        yield tr


@pytest.fixture(scope="session")
def rnd(random_model):
    with nmt_edge.Translator(random_model) as tr:
        yield tr
