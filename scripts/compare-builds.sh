#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# compare-builds.sh — two builds of the tree (a change and the commit before
# it) against each other, for a change that must not alter behaviour
# (docs/ARCHITECTURE.md): the bundled model's translations of the test split,
# as shipped (int8) and exported as fp32, byte for byte; then, with BENCH=1, the decoding benchmark
# (bench/paired_rounds.sh -B: rounds that alternate the builds) and the
# training-step benchmark (train_bench, builds alternated, ROUNDS rounds).
#
#   bash scripts/compare-builds.sh OLD_BUILD NEW_BUILD [TEXT]
#
# TEXT          source sentences (default data/de-en/test.en, from
#               scripts/corpus/make_corpus.sh)
# Environment: BENCH (default 0), ROUNDS (default 3), MODEL (default
# models/en-de.nmt).  Both builds need NMT_BUILD_BENCH=ON for BENCH=1.
# Exit 1 when the translations differ.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $# -lt 2 ]]; then
  sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
old=$1 new=$2 text=${3:-data/de-en/test.en}
model=${MODEL:-models/en-de.nmt}
rounds=${ROUNDS:-3}
for b in "$old" "$new"; do
  [[ -x $b/nmt-edge && -x $b/nmt-edge-convert ]] || { echo "compare-builds: $b: no nmt-edge / nmt-edge-convert" >&2; exit 1; }
done
[[ -r $text ]] || { echo "compare-builds: $text missing (scripts/corpus/make_corpus.sh)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export NMT_EDGE_NO_BUILD_NOTE=1
"$new/nmt-edge-convert" export "$model" -o "$work/fp32.nmt" --dtype fp32 > /dev/null
status=0
for kind in shipped fp32; do
  m=$model
  [[ $kind == fp32 ]] && m=$work/fp32.nmt
  for side in old new; do
    b=$old
    [[ $side == new ]] && b=$new
    start=$(date +%s.%N)
    NMT_EDGE_CACHE_DIR="$work/cache-$side" "$b/nmt-edge" translate --model "$m" --max-src-len 1024 -i "$text" -o "$work/$kind.$side"
    echo "$kind $side: $(wc -l < "$work/$kind.$side") lines, $(echo "$(date +%s.%N) - $start" | bc) s"
  done
  if cmp -s "$work/$kind.old" "$work/$kind.new"; then
    echo "$kind: translations identical ($(sha256sum < "$work/$kind.new" | cut -c1-16))"
  else
    echo "$kind: translations DIFFER" >&2
    status=1
  fi
done
if [[ ${BENCH:-0} == 1 ]]; then
  echo "== decoding (translate_bench), A = old, B = new"
  bash bench/paired_rounds.sh -r "$rounds" -b "$old" -B "$new" "$model" '' ''
  echo "== training step (train_bench --no-torch), old and new alternated"
  for ((r = 1; r <= rounds; r++)); do
    for side in old new; do
      b=$old
      [[ $side == new ]] && b=$new
      printf 'round %d %s: ' "$r" "$side"
      "$b/train_bench" --variant hysan --steps 3 --warmup 1 --no-torch 2>&1 | grep "^ours_ms_per_step"
    done
  done
fi
exit $status
