#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# pack-coldstart.sh — cold start with a kernel pack vs JIT cold start vs warm
# cache (issue 19 item 3; numbers in docs/PERFORMANCE.md).  For each model:
# process start to exit of `nmt-edge translate` on one sentence, timed with
# `date +%s.%N`, RUNS times each:
#   jit-cold   fresh NMT_EDGE_CACHE_DIR and POCL_CACHE_DIR (first run on a new machine)
#   pack-cold  fresh POCL_CACHE_DIR, no program cache, --kernel-pack --binaries-only
#   warm       the program cache (and PoCL's) of a jit-cold run reused
#
#   bash scripts/pack-coldstart.sh [BUILD_DIR] [RUNS] [MODEL...]
#   default: build 3 build/models/test-model.nmt models/en-de.nmt
# Also runs under qemu with an aarch64 BUILD_DIR (scripts/cross-setup.sh arm64,
# docs/CROSS.md): EMU set to the toolchain's emulator command, i.e. with
# d=~/.cache/nmt-edge-cross/arm64 and t=aarch64-linux-gnu
#   EMU="env OCL_ICD_VENDORS=$d/pocl.icd LD_LIBRARY_PATH=$d/root/usr/lib/$t:$d/root/lib/$t qemu-aarch64-static -L /"
# (-L /usr/aarch64-linux-gnu mixes two glibc builds and hangs PoCL).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
runs=${2:-3}
shift 2 || shift $# || true
models=("$@")
[ ${#models[@]} -eq 0 ] && models=("$build/models/test-model.nmt" models/en-de.nmt)
emu=(${EMU:-})
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sentence='This package contains the development files for the library.'

run() { # label args...: prints the seconds; a failing run stops the script
  local t0 t1
  shift
  t0=$(date +%s.%N)
  echo "$sentence" | "${emu[@]}" "$build/nmt-edge" translate "$@" > "$tmp/out.txt" || { echo FAILED; return 1; }
  t1=$(date +%s.%N)
  echo "$t0 $t1" | awk '{printf "%.2f", $2 - $1}'
}

for m in "${models[@]}"; do
  name=$(basename "$m" .nmt)
  NMT_EDGE_CACHE_DIR=$tmp/pack-nmt POCL_CACHE_DIR=$tmp/pack-pocl \
    "${emu[@]}" "$build/nmt-edge-convert" kernels --model "$m" -o "$tmp/$name.nmk" > /dev/null
  pack_bytes=$(stat -c %s "$tmp/$name.nmk")
  jit=() pack=() warm=()
  for r in $(seq "$runs"); do
    export NMT_EDGE_CACHE_DIR=$tmp/jit-$r-nmt POCL_CACHE_DIR=$tmp/jit-$r-pocl
    jit+=("$(run jit --model "$m")") || exit 1
    cp "$tmp/out.txt" "$tmp/jit.txt"
    warm+=("$(run warm --model "$m")") || exit 1
    export POCL_CACHE_DIR=$tmp/pack-$r-pocl
    pack+=("$(run pack --model "$m" --no-cache --binaries-only --kernel-pack "$tmp/$name.nmk")") || exit 1
    cmp -s "$tmp/out.txt" "$tmp/jit.txt" || { echo "$name: pack output differs from JIT" >&2; exit 1; }
  done
  echo "$name (pack $pack_bytes bytes): jit-cold ${jit[*]} s | pack-cold ${pack[*]} s | warm ${warm[*]} s"
done
