#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run.sh — one run of the family comparison protocol (docs/RESULTS.md,
# "Comparing families"): the corpus of scripts/corpus/make_corpus.sh, one
# shared SentencePiece vocabulary (data/compare/spm.model, 8,000 pieces,
# trained once with the trainer's own spm_train options), d 256 / 4 heads /
# FFN 1024 / 2+2 layers, post-norm, the same optimiser, batch and number of
# updates (STEPS) for every run; then the last 5 checkpoints averaged and
# measured on the test split (scripts/eval-model.sh, beam 4).
#
#   bash scripts/compare/run.sh NAME SEED [MODEL OPTIONS...]
#
# NAME           run directory data/compare/NAME-sSEED (resumes when it exists)
# SEED           --seed of the run (data order, dropout, initial weights)
# MODEL OPTIONS  what makes the variant, e.g. --enc-branches global
#                --dec-branches global (the vanilla Transformer baseline)
# Environment: STEPS (default 1200: about 35 min a run on this 2-core machine
# alone), BUILD (default build), EVAL (default 1; 0 trains only, for a
# machine that evaluates elsewhere or in its own order).
set -euo pipefail
cd "$(dirname "$0")/../.."

if [[ $# -lt 2 ]]; then
  sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
name=$1 seed=$2
shift 2
steps=${STEPS:-1200}
build=${BUILD:-build}
data=data/de-en
run=data/compare/$name-s$seed
[[ -r $data/train.en ]] || { echo "compare: $data missing: run scripts/corpus/make_corpus.sh" >&2; exit 1; }
[[ -x $build/nmt-edge-train ]] || { echo "compare: $build/nmt-edge-train missing (build first)" >&2; exit 1; }
mkdir -p data/compare
spm=data/compare/spm.model
if [[ ! -e $spm ]]; then
  # the options nmt-edge-train uses when it trains its own (train/cli/nmt_edge_train.c)
  spm_train --input="$data/train.en,$data/train.de" --model_prefix=data/compare/spm.tmp --vocab_size=8000 \
    --model_type=unigram --character_coverage=1.0 --byte_fallback=true --unk_id=0 --bos_id=1 --eos_id=2 \
    --pad_id=3 --input_sentence_size=2000000 --shuffle_input_sentence=true \
    > data/compare/spm_train.log 2>&1
  mv data/compare/spm.tmp.model "$spm"
  rm -f data/compare/spm.tmp.vocab
fi
resume=()
[[ -e $run/last.nmt ]] && resume=(--resume)
"$build/nmt-edge-train" --train-src $data/train.en --train-tgt $data/train.de \
  --dev-src $data/dev.en --dev-tgt $data/dev.de --spm "$spm" --out "$run" \
  --d-model 256 --heads 4 --ff 1024 --enc-layers 2 --dec-layers 2 --norm post --seed "$seed" \
  --schedule inverse-sqrt --lr 1e-3 --warmup 600 --max-tokens 4096 --dropout 0.1 --label-smoothing 0.1 \
  --clip-norm 1 --max-steps "$steps" --eval-every 500 --save-every 100 --keep 5 --dev-bleu-max 300 \
  --log-every 20 --quiet "$@" "${resume[@]}"
[[ ${EVAL:-1} == 0 ]] || BUILD=$build bash scripts/eval-model.sh "$run" "$run/eval" 5 4
