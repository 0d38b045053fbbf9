#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# paired_rounds.sh — one build's decoding speed under two environments (a
# setting on against off), as paired rounds on a shared, noisy machine:
# each round runs translate_bench once with each environment, the first of
# the pair swapped every round, and the ratio A/B is taken within the round.
# Prints, per batch x beam row of translate_bench (1x1, 1x4, 16x1, 16x4),
# the median tok/s of A and of B, the median paired ratio A/B with its
# range, and in how many rounds A was ahead.  docs/PERFORMANCE.md uses it
# for the chained decoding steps (NMT_EDGE_NO_PRODUCT_CHAIN=1 as B).
#
#   bash bench/paired_rounds.sh [-r ROUNDS] [-b BUILD] [-B BUILD_B] [-c CACHE] MODEL 'ENV_A' 'ENV_B'
#
# ENV_A, ENV_B  space-separated VAR=VALUE settings ('' for none), e.g.
#               '' 'NMT_EDGE_NO_PRODUCT_CHAIN=1'
# -r ROUNDS     rounds (default 3)
# -b BUILD      build directory with translate_bench (default build)
# -B BUILD_B    B runs this build's translate_bench instead (one change
#               against the commit before it: two builds, same settings)
# -c CACHE      program cache directory for translate_bench --cache (default
#               a fresh mktemp -d, removed at the end; its first run compiles)
# Environment: SENTENCES (default 32), BATCH (translate_bench's largest
# batch, default 16); POCL_CACHE_DIR and the like pass through.
set -euo pipefail
rounds=3 build=build build_b= cache=
while getopts "r:b:B:c:h" opt; do
  case $opt in
    r) rounds=$OPTARG ;;
    b) build=$OPTARG ;;
    B) build_b=$OPTARG ;;
    c) cache=$OPTARG ;;
    h) sed -n '2,23p' "$0"; exit 0 ;;
    *) echo "usage: $0 [-r ROUNDS] [-b BUILD] [-B BUILD_B] [-c CACHE] MODEL 'ENV_A' 'ENV_B'" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
if [ $# -ne 3 ]; then
  echo "usage: $0 [-r ROUNDS] [-b BUILD] [-B BUILD_B] [-c CACHE] MODEL 'ENV_A' 'ENV_B'" >&2
  exit 2
fi
model=$1 env_a=$2 env_b=$3
bench=$build/translate_bench bench_b=${build_b:-$build}/translate_bench
for b in "$bench" "$bench_b"; do
  [ -x "$b" ] || { echo "$0: $b not found (configure with -DNMT_BUILD_BENCH=ON, build the translate_bench target)" >&2; exit 1; }
done
[ -r "$model" ] || { echo "$0: cannot read model $model" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -n "$cache" ] || cache=$tmp/cache
cache_b=$cache
[ -z "$build_b" ] || cache_b=$cache.b # another build's programs: a cache of their own
out=$tmp/rounds.txt
: > "$out"
for r in $(seq 1 "$rounds"); do
  for v in 0 1; do
    if [ $(((r + v) % 2)) = 1 ]; then e=$env_b tag=B b=$bench_b c=$cache_b; else e=$env_a tag=A b=$bench c=$cache; fi
    # the rows "batch beam seconds sent/s tok/s ..." of 1x1, 1x4, 16x1, 16x4
    rates=$(env $e "$b" --model-file "$model" --fixed-len --sentences "${SENTENCES:-32}" \
      --batch "${BATCH:-16}" --cache "$c" 2>&1 | awk '$1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && $6 ~ /x$/ { printf "%s ", $5 }')
    echo "r$r $tag $rates" >> "$out"
    echo "round $r $tag: $rates" >&2
  done
done
python3 - "$out" <<'PY'
import statistics as st
import sys

rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    rows.setdefault(f[0], {})[f[1]] = [float(x) for x in f[2:]]
names = ["1x1", "1x4", "16x1", "16x4"]
n = len(rows)
for i, name in enumerate(names):
    a = [rows[k]["A"][i] for k in sorted(rows) if len(rows[k].get("A", [])) > i and len(rows[k].get("B", [])) > i]
    b = [rows[k]["B"][i] for k in sorted(rows) if len(rows[k].get("A", [])) > i and len(rows[k].get("B", [])) > i]
    if not a:
        continue
    ratio = [x / y for x, y in zip(a, b)]
    print("%-5s A %.1f tok/s  B %.1f tok/s  A/B %.3f (%.3f-%.3f)  A ahead %d/%d"
          % (name, st.median(a), st.median(b), st.median(ratio), min(ratio), max(ratio),
             sum(x > 1 for x in ratio), len(ratio)))
PY
