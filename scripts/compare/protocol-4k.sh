#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# protocol-4k.sh — the runs of issue 57's longer protocol (docs/RESULTS.md,
# "The 4,000-update protocol"): scripts/compare/run.sh / run-banmt.sh with
# STEPS=4000 (the protocol of "Comparing families" otherwise: same corpus,
# vocabulary, optimiser, batch; last 5 checkpoints averaged, beam 4, test
# split by scripts/eval-model.sh), two seeds a row. Each run resumes when
# its directory data/compare/NAME-sSEED exists (training resumes bit for
# bit: docs/TRAINING.md), so the whole plan may span several sessions.
#
#   bash scripts/compare/protocol-4k.sh            # every run not finished, in order
#   bash scripts/compare/protocol-4k.sh --list     # the plan and each run's state
#   bash scripts/compare/protocol-4k.sh --only NAME[-sSEED]   # one row / run
#   bash scripts/compare/protocol-4k.sh --plan     # NAME|SEED|SCRIPT|ARGS... a line
#
# Environment: BUILD (default build), EVAL (default 1; 0 trains only: as
# run.sh). A run whose directory is locked by a live trainer (the lock
# file names its pid) is skipped, not waited for. A run with 4,000 steps
# but no eval/results.tsv is evaluated (scripts/eval-model.sh, 5, beam 4).
#
# The plan's choices and where they come from:
# - baseline: --enc-branches global --dec-branches global (RESULTS.md,
#   "The baseline: vanilla Transformer"; the queue already training
#   p4k-baseline uses these names and flags).
# - HySAN, the paper's e1 branches: encoder "global fw bw local:3", decoder
#   "global fw local:3", --fusion gate, as docs/ARCHITECTURES.md's `gate`
#   key writes the e1-style branches (issue 57 item 1, commit 200b6c2, whose
#   parameter counts are of these branches). The paper's Table 1
#   (../shared/papers/hysan.txt; the second extraction keeps the check
#   marks' count, six for e1, not their columns) does not say which local
#   width e1 uses (its ablations use k = 1, 2, 5); 3 is the project's,
#   that of the bundled model (scripts/train-bundled.sh). Two rows:
#   --gate shared (one gate per sub-layer, reduction 16: the paper's "+32K")
#   and --gate branch (one per branch, reduction 4, the trainer's default).
# - MG-SA, best variant: LSTM composition, --arch mgsa --mg-layers 1
#   --mg-heads word,word,ngram:2,ngram:3 --mg-compose lstm (RESULTS.md,
#   MG-SA: "LSTM composition is the best variant", 12.09 over two seeds).
# - phrase attention, best variant: heterogeneous ConvKV 123 in all three
#   attentions (--ph-enc/--ph-dec/--ph-cross convkv:hetero:123): the best
#   test BLEU at 1,200 updates (19.46, seed 1), above the interleaved QueryK
#   model's two-seed mean (19.32); RESULTS.md says the ranks between
#   neighbours are not established at one seed.
# - phrase unigram-only control: convkv:homo:4 in all three attentions: four
#   unigram heads, no weight of its own, the Transformer's function computed
#   by the phrase kernels (ARCHITECTURES.md, "Phrase-based attention":
#   "a unigram group is exactly the Transformer"; phrase_test checks
#   convkv:homo:4 x 3 against the Transformer on the same weights).
# - RNNsearch and BA: run-banmt.sh none / ba with the BA-NMT paper's Adam,
#   --adam-betas 0.9,0.999 --adam-eps 1e-6 (../shared/papers/ba-nmt.txt:
#   "adam optimizer (beta1 = 0.9, beta2 = 0.999), and epsilon = 1e-6", one
#   "shared configuration for all the systems", so RNNsearch too; the paper
#   gives no learning rate: the protocol's schedule stays). These options are
#   not stored in checkpoints (TRAINING.md), so every resume passes them.
# Order: both baseline seeds, then seed 1 of every row, then seed 2.
set -euo pipefail
cd "$(dirname "$0")/../.."

STEPS_4K=4000
# NAME|SEED|SCRIPT|ARGS... ('|'-separated: branch lists hold spaces)
plan=()
add() { plan+=("$(IFS='|'; echo "$*")"); }
E1_ENC="global fw bw local:3" E1_DEC="global fw local:3"
BA_ADAM=(--adam-betas "0.9,0.999" --adam-eps 1e-6)
row() { # row NAME SCRIPT ARGS... for seed $seed
  local name=$1 script=$2
  shift 2
  add "$name" "$seed" "$script" "$@"
}
rows() {
  row p4k-hysan-shared run.sh --enc-branches "$E1_ENC" --dec-branches "$E1_DEC" --fusion gate --gate shared
  row p4k-hysan-branch run.sh --enc-branches "$E1_ENC" --dec-branches "$E1_DEC" --fusion gate --gate branch
  row p4k-mgsa-lstmc run.sh --arch mgsa --mg-layers 1 --mg-heads word,word,ngram:2,ngram:3 --mg-compose lstm
  row p4k-ph-ck-het123 run.sh --arch phrase --ph-enc convkv:hetero:123 --ph-dec convkv:hetero:123 \
    --ph-cross convkv:hetero:123
  row p4k-ph-ck-uni run.sh --arch phrase --ph-enc convkv:homo:4 --ph-dec convkv:homo:4 --ph-cross convkv:homo:4
  row p4k-banmt-none run-banmt.sh none "${BA_ADAM[@]}"
  row p4k-banmt-ba run-banmt.sh ba "${BA_ADAM[@]}"
}
for seed in 1 2; do row p4k-baseline run.sh --enc-branches global --dec-branches global; done
for seed in 1 2; do rows; done

# Newest checkpoint's step (what a resume continues from), the log's last
# training step, whether eval/results.tsv exists, and a live trainer's pid.
ckpt_step() {
  local f
  f=$(ls "$1"/ckpt-*.nmt 2> /dev/null | sort | tail -n 1)
  [[ -n $f ]] || { echo 0; return; }
  f=${f##*/ckpt-}
  echo $((10#${f%.nmt}))
}
log_step() {
  [[ -r $1/log.jsonl ]] || { echo 0; return; }
  sed -n 's/^{"kind":"train","step":\([0-9]*\),.*/\1/p' "$1/log.jsonl" | tail -n 1 | grep . || echo 0
}
live_pid() {
  local pid
  [[ -r $1/.lock ]] || return 1
  pid=$(sed -n 's/^nmt-edge-train pid \([0-9]*\) on .*/\1/p' "$1/.lock")
  [[ -n $pid && -r /proc/$pid/cmdline ]] && tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q "nmt-edge-train" &&
    tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q -- "--out $1 " && { echo "$pid"; return 0; }
  return 1
}

list=0 plan_out=0 only=
while [[ $# -gt 0 ]]; do
  case $1 in
    --list) list=1 ;;
    --plan) plan_out=1 ;;
    --only) only=${2:?--only needs NAME or NAME-sSEED}; shift ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "protocol-4k: unknown argument '$1' (--list, --only NAME)" >&2; exit 2 ;;
  esac
  shift
done

matched=0
for entry in "${plan[@]}"; do
  IFS='|' read -r -a f <<< "$entry"
  name=${f[0]} seed=${f[1]} script=${f[2]}
  args=("${f[@]:3}")
  dir=data/compare/$name-s$seed
  [[ -z $only || $only == "$name" || $only == "$name-s$seed" ]] || continue
  matched=1
  c=$(ckpt_step "$dir") l=$(log_step "$dir")
  ev=no
  [[ -s $dir/eval/results.tsv ]] && ev=yes
  pid=$(live_pid "$dir" || true)
  if ((list)); then
    if [[ ! -d $dir ]]; then state="not started"
    elif [[ -n $pid ]]; then state="training (pid $pid)"
    elif ((c >= STEPS_4K)) && [[ $ev == yes ]]; then state="done"
    elif ((c >= STEPS_4K)); then state="trained, not evaluated"
    else state=stopped; fi
    printf '%-18s s%s  ckpt %4d/%d  log %4d  eval %-3s  %-22s  %s' "$name" "$seed" "$c" "$STEPS_4K" "$l" "$ev" \
      "$state" "$script"
    for a in "${args[@]}"; do [[ $a == *' '* ]] && printf ' "%s"' "$a" || printf ' %s' "$a"; done
    printf '\n'
    continue
  fi
  if ((plan_out)); then
    echo "$entry"
    continue
  fi
  if [[ -n $pid ]]; then
    echo "protocol-4k: $dir: trainer pid $pid is on it: skipped"
    continue
  fi
  if ((c >= STEPS_4K)); then
    if [[ $ev == yes ]]; then
      echo "protocol-4k: $dir: done"
    elif [[ ${EVAL:-1} == 0 ]]; then
      echo "protocol-4k: $dir: trained, not evaluated (EVAL=0)"
    else
      BUILD=${BUILD:-build} bash scripts/eval-model.sh "$dir" "$dir/eval" 5 4
    fi
    continue
  fi
  echo "protocol-4k: $name seed $seed: $script ${args[*]} (from step $c)"
  STEPS=$STEPS_4K bash "scripts/compare/$script" "$name" "$seed" "${args[@]}"
done
((matched)) || { echo "protocol-4k: no run named '$only' (see --list)" >&2; exit 2; }
