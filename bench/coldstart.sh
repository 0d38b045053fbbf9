#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# coldstart.sh — first start of `nmt-edge translate` on one sentence (issue
# 54), this build beside a reference build of another commit, in the same
# run and interleaved (machines are shared and noisy).  For each build, RUNS
# times each, process start to exit (date +%s.%N):
#   cold      fresh NMT_EDGE_CACHE_DIR and POCL_CACHE_DIR (a new machine)
#   second    the same directories again (the next start as it comes)
#   warmup    (builds that have it) `nmt-edge warmup` in fresh directories
#   warmed    a start after that warmup
# cold and second alternate between the builds, run by run.
#
#   bash bench/coldstart.sh BUILD REF_BUILD [RUNS] [MODEL]
#   e.g. git worktree add --detach /tmp/ref main && cmake -S /tmp/ref -B /tmp/ref/build &&
#        cmake --build /tmp/ref/build -j2 --target nmt-edge
#        bash bench/coldstart.sh build /tmp/ref/build 3 models/en-de.nmt
# REF_BUILD "" runs this build only.  EMU as scripts/pack-coldstart.sh (qemu).
set -euo pipefail
build=${1:?BUILD}
ref=${2-}
runs=${3:-3}
model=${4:-models/en-de.nmt}
emu=(${EMU:-})
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sentence='This package contains the development files for the library.'
builds=("$build")
[ -n "$ref" ] && builds+=("$ref")

# one start: label build dir-stem [extra nmt-edge arguments]; prints seconds
start() {
  local b=$1 d=$2
  shift 2
  local t0 t1
  t0=$(date +%s.%N)
  if ! printf '%s\n' "$sentence" | NMT_EDGE_CACHE_DIR=$d/nmt POCL_CACHE_DIR=$d/pocl \
      "${emu[@]}" "$b/nmt-edge" translate --model "$model" --quiet "$@" >"$tmp/out" 2>"$tmp/err"; then
    echo "coldstart: $b failed:" >&2
    cat "$tmp/err" >&2
    exit 1
  fi
  t1=$(date +%s.%N)
  echo "$t0 $t1" | awk '{printf "%.2f", $2 - $1}'
}

declare -A cold second
for r in $(seq 1 "$runs"); do
  for i in "${!builds[@]}"; do
    d=$tmp/b$i-r$r
    mkdir -p "$d/nmt" "$d/pocl"
    cold[$i]+="$(start "${builds[$i]}" "$d") "
    second[$i]+="$(start "${builds[$i]}" "$d") "
  done
done
for i in "${!builds[@]}"; do
  b=${builds[$i]}
  label=$([ "$i" = 0 ] && echo "this build" || echo "reference")
  echo "$label ($b): cold ${cold[$i]}s; second start ${second[$i]}s"
  if "$b/nmt-edge" warmup --help >/dev/null 2>&1; then
    w="" s=""
    for r in $(seq 1 "$runs"); do
      d=$tmp/w$i-r$r
      mkdir -p "$d/nmt" "$d/pocl"
      t0=$(date +%s.%N)
      NMT_EDGE_CACHE_DIR=$d/nmt POCL_CACHE_DIR=$d/pocl "${emu[@]}" "$b/nmt-edge" warmup --model "$model" >/dev/null
      w+="$(echo "$t0 $(date +%s.%N)" | awk '{printf "%.2f", $2 - $1}') "
      s+="$(start "$b" "$d") "
    done
    echo "$label ($b): warmup ${w}s; start after warmup ${s}s"
  fi
done
