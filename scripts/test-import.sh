#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test-import.sh — `nmt-edge-convert import` against the frameworks themselves
# (issue 53, docs/IMPORT.md): installs the test-only Python packages (torch,
# transformers, sentencepiece; never part of scripts/setup.sh) into a private
# virtual environment, builds, and runs tests/import/test_hf_marian.py (a tiny
# MarianMTModel built and saved by transformers, imported, then token ids,
# teacher-forced log-probabilities and greedy / beam-4 outputs compared with
# MarianTokenizer and the model's own forward and generate) and
# tests/import/test_fairseq.py (the same for a fairseq checkpoint written by
# torch in fairseq's layout, against transformers' FSMT port of fairseq's
# transformer: fairseq itself does not pip-install on Python 3.11) and
# tests/import/test_opennmt.py (a model built, trained and saved with
# OpenNMT-py 3.5 itself; scores and greedy outputs).
#   bash scripts/test-import.sh [BUILD_DIR]      (default build)
#   NMT_IMPORT_VENV   the virtual environment (default build-import-venv/ in
#                     the checkout; reused when already there)
# No system change beyond python3-venv.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
venv=${NMT_IMPORT_VENV:-$PWD/build-import-venv}
bash scripts/setup.sh
source scripts/apt-lib.sh
need_venv
if [[ ! -x $venv/bin/python ]] || ! "$venv/bin/python" -c 'import torch, transformers, sentencepiece, pyonmttok, configargparse' 2> /dev/null ||
   ! "$venv/bin/pip" show -q OpenNMT-py 2> /dev/null; then
  python3 -m venv "$venv"
  # from PyPI, the only Python registry CI reaches (download.pytorch.org's
  # CPU-only wheels are not): torch's default wheel brings its CUDA
  # libraries (about 3 GB installed; 2.5 min measured with transformers)
  # torch and transformers pinned: the test models come from torch's
  # generator and a few training steps, and the fairseq model's beam check
  # needs enough hypotheses that end by themselves (tests/import/test_fairseq.py:
  # 17 of 24 in the run docs/IMPORT.md records, 11 with torch 2.15.0 on an
  # AVX2 VM, where the check then asked for 16)
  "$venv/bin/pip" install -q --disable-pip-version-check torch==2.15.0 numpy transformers==5.25.0 sentencepiece
  # OpenNMT-py 3.5 without its dependencies (they pin an older torch; the
  # optional transforms' packages, spacy and others, are not needed to build
  # and run a model: tests/import/test_opennmt.py stubs them), then the two
  # it imports at load
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps OpenNMT-py==3.5.1
  "$venv/bin/pip" install -q --disable-pip-version-check pyonmttok configargparse
fi
cmake -S . -B "$build" -DNMT_WERROR=ON > /dev/null
cmake --build "$build" -j"$(nproc)" --target nmt-edge nmt-edge-convert
"$venv/bin/python" -c 'import torch, transformers; print("test-import: torch", torch.__version__, "transformers", transformers.__version__)'
# the importer runs on the same interpreter (numpy; torch for the fairseq pickle)
export NMT_EDGE_PYTHON=$venv/bin/python
"$venv/bin/python" tests/import/test_hf_marian.py "$build"
"$venv/bin/python" tests/import/test_fairseq.py "$build"
"$venv/bin/python" tests/import/test_opennmt.py "$build"
