#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# phrase_speed.sh — training and decoding speed of every phrase-based
# attention configuration of the results table (docs/RESULTS.md, issue 16)
# relative to the vanilla Transformer of the same shape, each ratio measured
# in one process (translate_bench --versus, train_bench --phrase).
#
#   bash bench/phrase_speed.sh [BUILD] [WORKDIR]
#
# BUILD    build directory with nmt-edge-convert, translate_bench and
#          train_bench (default build)
# WORKDIR  where the random models are written (default a fresh mktemp -d,
#          removed at the end)
# Environment: SENTENCES (default 32), BATCH (default 8), STEPS (train_bench
# timed steps, default 3), SKIP_TRAIN=1 / SKIP_DECODE=1 to run one half.
#
# Decoding: random models of the comparison shape (d 256, 4 heads, FFN 1024,
# 2+2 layers, vocabularies of 8,000, post-norm, seed 5), every hypothesis
# exactly 40 tokens (--fixed-len), so that every model does the same work;
# translate_bench takes four --versus models a run, so the ten configurations
# are three runs, each with its own Transformer reference.
# Training: train_bench's model (shared tied vocabulary, 128 x 32 target
# tokens), each phrase step followed by a step of the vanilla model built
# from the same weights.
set -euo pipefail
build=${1:-build}
work=${2:-}
specs=(convkv:homo:22 queryk:homo:22 convkv:homo:211 queryk:homo:211
       convkv:hetero:12 queryk:hetero:12 convkv:hetero:123 queryk:hetero:123
       convkv:inter:12 queryk:inter:12)
for t in nmt-edge-convert translate_bench train_bench; do
  [[ -x $build/$t ]] || { echo "phrase_speed: $build/$t missing (configure with -DNMT_BUILD_BENCH=ON and build first)" >&2; exit 1; }
done
if [[ -z $work ]]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work"
shape=(--d-model 256 --heads 4 --ff 1024 --enc-layers 2 --dec-layers 2 --src-vocab 8000
       --tgt-vocab 8000 --seed 5)

if [[ ${SKIP_DECODE:-0} != 1 ]]; then
  "$build/nmt-edge-convert" random -o "$work/tf.nmt" "${shape[@]}" > /dev/null
  files=()
  for s in "${specs[@]}"; do
    f=$work/${s//:/-}.nmt
    "$build/nmt-edge-convert" random -o "$f" --arch phrase "${shape[@]}" --ph-enc "$s" --ph-dec "$s" \
      --ph-cross "$s" > /dev/null
    files+=("$f")
  done
  for ((i = 0; i < ${#files[@]}; i += 4)); do
    versus=()
    for f in "${files[@]:i:4}"; do versus+=(--versus "$f"); done
    echo "== decoding: ${specs[*]:i:4}"
    "$build/translate_bench" --model-file "$work/tf.nmt" "${versus[@]}" --fixed-len \
      --sentences "${SENTENCES:-32}" --batch "${BATCH:-8}"
  done
fi

if [[ ${SKIP_TRAIN:-0} != 1 ]]; then
  for s in "${specs[@]}"; do
    echo "== training: $s"
    "$build/train_bench" --phrase "$s" --steps "${STEPS:-3}" --no-torch
  done
fi
