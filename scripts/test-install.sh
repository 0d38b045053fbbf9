#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test-install.sh — the library as another program uses it (docs/INTEGRATION.md):
# install the build into a temporary prefix, build examples/ out of tree
# against it with CMake (find_package(nmt_edge CONFIG)) and with plain
# `pkg-config --libs` (no --static), then run both builds' translate_lines
# and tokenize on the bundled model;
# then the same with the shared library (BUILD_SHARED_LIBS=ON, in BUILD_DIR-shared).
#   bash scripts/test-install.sh [BUILD_DIR]   (default build; built first)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
bash scripts/setup.sh
cmake -S . -B "$build" -DNMT_WERROR=ON > /dev/null
cmake --build "$build" -j"$(nproc)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" > /dev/null
flags="-Wall -Wextra -Werror"
cmake -S examples -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_C_FLAGS="$flags" > /dev/null
cmake --build "$tmp/cmake"
mkdir -p "$tmp/pc"
# Plain `pkg-config --libs`, no --static: the static library's nmt-edge.pc
# names what libnmtedge.a needs (OpenCL, CLBlast, -lm) in Libs/Requires, so
# the link works as written in docs/INTEGRATION.md.
pc=$(PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" pkg-config --cflags --libs nmt-edge)
[[ " $pc " == *" -lnmtedge "*" -lm "* && " $pc " == *" -lOpenCL "* ]] ||
  { echo "test-install: the static install's pkg-config --libs is '$pc' (wants -lnmtedge, -lm, -lOpenCL)" >&2; exit 1; }
for ex in translate_lines tokenize; do
  # shellcheck disable=SC2086
  cc $flags "examples/$ex.c" $pc -o "$tmp/pc/$ex"
done
text="This package contains the development files for the library."
want="Dieses Paket enthält die Entwicklungsdateien für die Bibliothek."
for dir in "$tmp/cmake" "$tmp/pc"; do
  got=$(echo "$text" | "$dir/translate_lines" models/en-de.nmt)
  [[ $got == "$want" ]] || { echo "test-install: $dir/translate_lines printed '$got', expected '$want'" >&2; exit 1; }
  got=$(echo "Hello world" | "$dir/tokenize" models/en-de.nmt)
  [[ $got == "▁H/511 ell/800 o/359 ▁world/5136" ]] || { echo "test-install: $dir/tokenize printed '$got'" >&2; exit 1; }
done
echo "test-install: the installed package builds the examples with CMake and pkg-config; both translate"

# The shared library (BUILD_SHARED_LIBS=ON, docs/INTEGRATION.md): only
# libnmtedge is built (the programs are the static build's), its exports are
# checked against the header (ctest shared_exports), the library components
# are installed, and translate_lines is built against them with CMake
# (nmt_edge::nmtedge is then the shared library; CMake's build RPATH finds it)
# and with pkg-config (-lnmtedge picks the .so; LD_LIBRARY_PATH finds it).
shared=$build-shared
cmake -S . -B "$shared" -DBUILD_SHARED_LIBS=ON -DNMT_WERROR=ON > /dev/null
cmake --build "$shared" -j"$(nproc)" --target nmtedge_shared
ctest --test-dir "$shared" -R '^shared_exports$' --output-on-failure
for c in lib dev; do
  cmake --install "$shared" --prefix "$tmp/shared" --component "$c" > /dev/null
done
cmake -S examples -B "$tmp/cmake-shared" -DCMAKE_PREFIX_PATH="$tmp/shared" -DCMAKE_C_FLAGS="$flags" > /dev/null
cmake --build "$tmp/cmake-shared" --target translate_lines
# The shared library's nmt-edge.pc keeps OpenCL, CLBlast and -lm private
# (the .so's own NEEDED entries): plain --libs is the library alone,
# --static adds them for a link of the archive.
pc=$(PKG_CONFIG_PATH="$tmp/shared/lib/pkgconfig" pkg-config --cflags --libs nmt-edge)
[[ " $pc " == *" -lnmtedge "* && " $pc " != *" -lOpenCL "* && " $pc " != *" -lm "* ]] ||
  { echo "test-install: the shared install's pkg-config --libs is '$pc' (wants -lnmtedge alone)" >&2; exit 1; }
pc_static=$(PKG_CONFIG_PATH="$tmp/shared/lib/pkgconfig" pkg-config --libs --static nmt-edge)
[[ " $pc_static " == *" -lm "* && " $pc_static " == *" -lOpenCL "* ]] ||
  { echo "test-install: the shared install's pkg-config --libs --static is '$pc_static' (wants -lm, -lOpenCL)" >&2; exit 1; }
# shellcheck disable=SC2086
cc $flags examples/translate_lines.c $pc -o "$tmp/pc/translate_lines-shared"
for exe in "$tmp/cmake-shared/translate_lines" "$tmp/pc/translate_lines-shared"; do
  lib=$(LD_LIBRARY_PATH="$tmp/shared/lib" ldd "$exe" | awk '/libnmtedge/{print $3}')
  [[ $lib == "$tmp/shared/lib/libnmtedge.so".* ]] ||
    { echo "test-install: $exe does not use the installed shared library (ldd: '$lib')" >&2; exit 1; }
  got=$(echo "$text" | LD_LIBRARY_PATH="$tmp/shared/lib" "$exe" models/en-de.nmt)
  [[ $got == "$want" ]] || { echo "test-install: $exe printed '$got', expected '$want'" >&2; exit 1; }
done
echo "test-install: the shared library exports the header's functions only; the examples translate with it"
