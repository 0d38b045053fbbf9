#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test-link-grammar.sh — the MG-SA parser path, which the README's test
# command builds without (link-grammar is optional): installs it
# (scripts/setup.sh --with-link-grammar), builds nmt-edge, nmt-edge-train and
# the tests that use the parser with NMT_WITH_LINK_GRAMMAR=ON in their own
# build directory, and runs them: parse_spans_test (word and piece spans,
# the session path, nmt-edge translate's stdout line for line) and
# train_cli_test (parse-spans, and training with spans files).
#   bash scripts/test-link-grammar.sh [BUILD_DIR] [ctest options...]
#     BUILD_DIR default build-lg (PoCL's and nmt-edge's program caches copied
#     from build/ when the suite ran there first, as in .ci/run)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-lg}
[[ $# -gt 0 ]] && shift
bash scripts/setup.sh --with-link-grammar
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNMT_WITH_LINK_GRAMMAR=ON > /dev/null
# the kernels are the suite's: start from its compiled programs when there
for c in pocl-cache nmt-cache; do
  [[ -d build/$c && ! -e $build/$c ]] && cp -r "build/$c" "$build/$c"
done
cmake --build "$build" -j"$(nproc)" --target nmt-edge nmt-edge-train parse_spans_test train_cli_test
grep -q '^NMT_WITH_LINK_GRAMMAR:BOOL=ON' "$build/CMakeCache.txt" || { echo "test-link-grammar: not built with the parser" >&2; exit 1; }
ctest --test-dir "$build" --output-on-failure -R '^(parse_spans_test|train_cli_test)$' "$@"
