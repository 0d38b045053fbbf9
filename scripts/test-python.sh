#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test-python.sh — the Python package (python/, docs/INTEGRATION.md "Python"):
# builds the shared library and the programs the tests compare with, builds
# the wheel (pure Python: nmt_edge-VERSION-py3-none-any.whl), installs the
# package with `pip install` into a fresh venv, and runs its pytest suite
# with NMT_EDGE_LIBRARY pointing at the built libnmtedge.so.1.
#   bash scripts/test-python.sh [BUILD_DIR]   (default build)
# BUILD_DIR gives nmt-edge and nmt-edge-convert (built there if missing);
# the library is BUILD_DIR's own when it is a shared build
# (-DBUILD_SHARED_LIBS=ON), else BUILD_DIR-shared's (configured shared and
# built there: only nmtedge_shared, as scripts/test-install.sh does).
# Installs python3-venv when `python3 -m venv` is missing (Debian 12);
# pytest and setuptools come from PyPI into the venv.  The compiled kernels
# are cached as the programs cache them ($NMT_EDGE_CACHE_DIR, default
# ~/.cache/nmt-edge).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
build=${1:-build}
bash scripts/setup.sh
[ -f "$build/CMakeCache.txt" ] || cmake -S . -B "$build" -DNMT_WERROR=ON > /dev/null
cmake --build "$build" -j"$(nproc)" --target nmt-edge nmt-edge-convert
if grep -q '^BUILD_SHARED_LIBS:BOOL=ON' "$build/CMakeCache.txt"; then
  shared=$build
else
  shared=$build-shared
  [ -f "$shared/CMakeCache.txt" ] || cmake -S . -B "$shared" -DBUILD_SHARED_LIBS=ON -DNMT_WERROR=ON > /dev/null
fi
cmake --build "$shared" -j"$(nproc)" --target nmtedge_shared
lib=$(cd "$shared" && pwd)/libnmtedge.so.1
bin=$(cd "$build" && pwd)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# a venv with pip needs Debian's python3-venv (its ensurepip), not installed by default
if ! command -v python3 > /dev/null || ! python3 -m venv "$tmp/venv" > /dev/null 2>&1; then
  source scripts/apt-lib.sh
  apt_update test-python
  apt_get install -y -qq --no-install-recommends python3 python3-venv
  rm -rf "$tmp/venv"
  python3 -m venv "$tmp/venv"
fi
py=$tmp/venv/bin/python
"$py" -m pip install -q --disable-pip-version-check pytest
# build from a copy: setuptools writes build/ and *.egg-info beside the sources
cp -r python "$tmp/src"
rm -rf "$tmp/src/build" "$tmp/src/"*.egg-info
"$py" -m pip wheel -q --disable-pip-version-check --no-deps -w "$tmp/wheels" "$tmp/src"
version=$(sed -n 's/^version = "\([^"]*\)".*/\1/p' python/pyproject.toml)
wheel=$tmp/wheels/nmt_edge-$version-py3-none-any.whl
[ -f "$wheel" ] || { echo "test-python: expected $wheel, got: $(ls "$tmp/wheels")" >&2; exit 1; }
"$py" -m pip install -q --disable-pip-version-check "$tmp/src"
# the tests import the installed package, not python/ (run from $tmp)
cd "$tmp"
"$py" -c 'import nmt_edge, sys; assert nmt_edge.__file__.startswith(sys.prefix), nmt_edge.__file__'
NMT_EDGE_LIBRARY=$lib NMT_EDGE_BIN_DIR=$bin "$py" -m pytest -q -p no:cacheprovider "$repo/python/tests"
echo "test-python: $(basename "$wheel") built; the installed package passes its tests against $lib"
