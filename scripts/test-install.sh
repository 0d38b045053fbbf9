#!/usr/bin/env bash
# test-install.sh — the library as another program uses it (docs/INTEGRATION.md):
# install the build into a temporary prefix, build examples/ out of tree
# against it with CMake (find_package(nmt_edge CONFIG)) and with pkg-config,
# then run both builds' translate_lines and tokenize on the bundled model.
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
pc=$(PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" pkg-config --cflags --libs --static nmt-edge)
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
