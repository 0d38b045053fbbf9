#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# eval-model.sh — export a training run's last checkpoints (averaged) as
# fp32, fp16 and int8 deployment models and measure each on the test split:
# file size, corpus BLEU (sacreBLEU-compatible, `nmt-edge-train bleu`) and
# the wall time of `nmt-edge translate` over the whole split.
#
#   bash scripts/eval-model.sh RUN_DIR OUT_DIR [N_AVG] [BEAM]
#
# RUN_DIR   a `nmt-edge-train --out` directory (ckpt-*.nmt)
# OUT_DIR   receives model.{fp32,fp16,int8}.nmt, test.{dtype}.de and
#           results.tsv (dtype, bytes, BLEU, seconds, sentences/s)
# N_AVG     newest checkpoints averaged (default 5)
# BEAM      beam size (default 4)
# Environment: BUILD (default build) holds nmt-edge, nmt-edge-convert,
# nmt-edge-train; TEST_SRC / TEST_REF (default data/de-en/test.{en,de}).
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ $# -lt 2 ]]; then
  sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
run=$1 out=$2 navg=${3:-5} beam=${4:-4}
build=${BUILD:-build}
src=${TEST_SRC:-data/de-en/test.en} ref=${TEST_REF:-data/de-en/test.de}
for t in nmt-edge nmt-edge-convert nmt-edge-train; do
  [[ -x $build/$t ]] || { echo "eval-model: $build/$t missing (build first)" >&2; exit 1; }
done
[[ -r $src && -r $ref ]] || { echo "eval-model: $src / $ref not readable (scripts/corpus/make_corpus.sh)" >&2; exit 1; }
mapfile -t ckpts < <(ls "$run"/ckpt-*.nmt 2>/dev/null | sort | tail -n "$navg")
[[ ${#ckpts[@]} -ge 1 ]] || { echo "eval-model: no ckpt-*.nmt in $run" >&2; exit 1; }
mkdir -p "$out"
echo "eval-model: averaging ${#ckpts[@]} checkpoints: ${ckpts[*]##*/}"
printf 'dtype\tbytes\tbleu\tseconds\tsentences_per_s\n' > "$out/results.tsv"
n=$(wc -l < "$src")
for dt in fp32 fp16 int8; do
  m=$out/model.$dt.nmt
  "$build/nmt-edge-convert" export "${ckpts[@]}" -o "$m" --dtype "$dt"
  "$build/nmt-edge-convert" verify "$m" > /dev/null
  bytes=$(stat -c %s "$m")
  t0=$(date +%s.%N)
  "$build/nmt-edge" translate --model "$m" --beam "$beam" --max-text-bytes 16384 --max-src-len 1024 \
    < "$src" > "$out/test.$dt.de"
  t1=$(date +%s.%N)
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
  bleu=$("$build/nmt-edge-train" bleu --ref "$ref" --hyp "$out/test.$dt.de" | sed -n 's/^BLEU = \([0-9.]*\).*/\1/p')
  sps=$(awk -v n="$n" -v s="$secs" 'BEGIN { printf "%.2f", n / s }')
  printf '%s\t%s\t%s\t%s\t%s\n' "$dt" "$bytes" "$bleu" "$secs" "$sps" | tee -a "$out/results.tsv"
done
