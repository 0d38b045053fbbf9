#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# valgrind.sh — valgrind memcheck of the nmt-edge CLI (native build in build/):
# info, translate (ids and text), score, each must exit 0 with no memcheck
# error and no definite leak outside the OpenCL driver
# (tests/sanitizers/valgrind.supp: PoCL, libLLVM, libclang-cpp leaks only).
#
#   bash scripts/valgrind.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v valgrind >/dev/null; then
  sudo_cmd=(); [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
    --no-install-recommends valgrind
fi
bash scripts/setup.sh
cmake -S . -B build -DNMT_WERROR=ON >/dev/null
cmake --build build -j"$(nproc)" --target nmt-edge test-model
export POCL_CACHE_DIR=$PWD/build/pocl-cache NMT_EDGE_CACHE_DIR=$PWD/build/nmt-cache
model=build/models/test-model.nmt
vg=(valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite
    --show-leak-kinds=definite --track-origins=yes --suppressions=tests/sanitizers/valgrind.supp)
log=build/valgrind
mkdir -p "$log"
# Warm the kernel caches first under valgrind's "none" tool: PoCL keys its
# cache on the CPU it sees, and valgrind shows a CPU of its own (no AVX-512),
# so a native warm-up does not help; compiling the kernels under memcheck
# takes ~10x longer than under --tool=none.
printf '4 5 6\n' | valgrind --tool=none -q ./build/nmt-edge translate --ids --model "$model" >/dev/null

check() {
  local name=$1 input=$2
  shift 2
  local t0=$SECONDS
  if ! printf '%b' "$input" | "${vg[@]}" --log-file="$log/$name.txt" ./build/nmt-edge "$@" > "$log/$name.out"; then
    echo "valgrind: $name FAILED (see $log/$name.txt)" >&2
    grep -E "ERROR SUMMARY|definitely lost|Invalid|uninitialised" "$log/$name.txt" | head -n 20 >&2
    exit 1
  fi
  echo "valgrind: $name clean ($(grep -o 'ERROR SUMMARY: [0-9]* errors' "$log/$name.txt"), $((SECONDS - t0)) s)"
}
check info '' info --model "$model"
check translate_ids '4 5 6\n7 8\n\n9 10 11 12\n' translate --ids --model "$model" --beam 2 --n-best 2
check score_ids '4 5 6\t7 8\n\t9\n' score --ids --model "$model"
check translate_text 'hello world\n\nthe cat\n' translate --model "$model" --beam 2
# rejected input: exit 1 is expected, memcheck errors are not (exit 99)
set +e
printf '4 x 5\n' | "${vg[@]}" --log-file="$log/bad_input.txt" ./build/nmt-edge translate --ids --model "$model" >/dev/null 2>&1
rc=$?
set -e
[ $rc -eq 1 ] || { echo "valgrind: bad_input: exit $rc, want 1 (see $log/bad_input.txt)" >&2; exit 1; }
echo "valgrind: bad_input clean (exit 1 as expected)"
