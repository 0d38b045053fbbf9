#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# train-bundled.sh — trains the bundled English→German model the way
# docs/RESULTS.md describes, then exports and measures it.
#
#   bash scripts/train-bundled.sh [RUN_DIR] [SECONDS]
#
# RUN_DIR  checkpoints, log.jsonl, plot.svg (default data/runs/ende); run the
#          script again to resume an interrupted run (--resume)
# SECONDS  training time budget, cumulative over resumes (default 6600)
#
# Needs the corpus (scripts/corpus/make_corpus.sh → data/de-en/) and a build
# in $BUILD (default build).  The SentencePiece model is trained into
# RUN_DIR/spm.model on the first run (8000 pieces, joint).  At the end
# scripts/eval-model.sh writes RUN_DIR/eval/model.{fp32,fp16,int8}.nmt (the
# last 5 checkpoints averaged) with their test BLEU, size and speed.
set -euo pipefail
cd "$(dirname "$0")/.."
run=${1:-data/runs/ende}
budget=${2:-6600}
build=${BUILD:-build}
[[ -r data/de-en/train.en ]] || { echo "train-bundled: data/de-en/ missing: run scripts/corpus/make_corpus.sh" >&2; exit 1; }
[[ -x $build/nmt-edge-train ]] || { echo "train-bundled: $build/nmt-edge-train missing (build first)" >&2; exit 1; }
resume=()
[[ -e $run/last.nmt ]] && resume=(--resume)
spm=()
[[ -e $run/spm.model ]] && spm=(--spm "$run/spm.model")
"$build/nmt-edge-train" --train-src data/de-en/train.en --train-tgt data/de-en/train.de \
  --dev-src data/de-en/dev.en --dev-tgt data/de-en/dev.de "${spm[@]}" --out "$run" \
  --d-model 256 --heads 4 --ff 1024 --enc-layers 2 --dec-layers 2 \
  --enc-branches "global fw bw local:3" --dec-branches "global local:3" --fusion gate \
  --schedule inverse-sqrt --lr 1e-3 --warmup 600 --max-tokens 4096 --dropout 0.1 --label-smoothing 0.1 \
  --clip-norm 1 --max-time "$budget" --eval-every 400 --save-every 100 --keep 5 --dev-bleu-max 300 \
  --log-every 10 "${resume[@]}"
BUILD=$build bash scripts/eval-model.sh "$run" "$run/eval" 5 4
