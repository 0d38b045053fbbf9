#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run-banmt.sh — one BA-NMT run of the family comparison protocol
# (docs/RESULTS.md "Comparing families"): scripts/compare/run.sh (same
# corpus, shared vocabulary, optimiser, schedule, updates STEPS, checkpoint
# averaging and test-split evaluation) with --arch banmt at the recurrent
# family's nearest size: embedding and hidden 256 (--d-model 256: --emb,
# --hidden, --att, --hist 256, --readout 256), readout dropout 0.2 (the
# paper's output-layer dropout).
#
#   bash scripts/compare/run-banmt.sh NAME SEED [HISTORY] [MORE OPTIONS...]
#
# HISTORY  none (RNNsearch), sa, ta or ba (default ba)
# Memory: BA-NMT's activations grow as O(sentences x source x target length
# x hist) (docs/TRAINING.md), so the protocol's 4,096-token batch is taken as
# ACCUM micro-batches of MAX_TOKENS (default 4 x 1,024: the same tokens per
# update, ~0.5 GB of activations for sentences of ~25 pieces); lower
# MAX_TOKENS (and raise ACCUM) when nmt-edge-train refuses the plan.
# Environment: STEPS, BUILD (as run.sh), MAX_TOKENS (1024), ACCUM (4).
set -euo pipefail
cd "$(dirname "$0")/../.."

if [[ $# -lt 2 ]]; then
  sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
name=$1 seed=$2
shift 2
history=ba
if [[ $# -gt 0 && $1 != -* ]]; then
  history=$1
  shift
fi
exec bash scripts/compare/run.sh "$name" "$seed" --arch banmt --history "$history" \
  --max-tokens "${MAX_TOKENS:-1024}" --accum "${ACCUM:-4}" --dropout 0.2 "$@"
