#!/bin/bash
# SPDX-License-Identifier: MIT
# align_aer.sh — AER of a model's alignments of a test split against a
# silver standard (docs/RESULTS.md, "Alignment agreement"): each test pair
# is scored under teacher forcing with `nmt-edge score --alignment
# --alignment-words` (the reference's words linked to the source words its
# pieces attend to most), then compared with scripts/compare/aer.py, every
# silver link sure.
#
#   bash scripts/compare/align_aer.sh MODEL TEST.SRC TEST.TGT SILVER [OUT] [-- NMT_EDGE_OPTIONS...]
#     SILVER: scripts/compare/silver_align.sh's test.silver for the same
#     pairs; OUT (default: a temporary file) keeps the score output; the
#     options after -- go to nmt-edge score (e.g. --align-layer 1
#     --align-head 2 --device cpu).  NMT_EDGE names the program (default
#     build/nmt-edge).  Prints aer.py's line.
set -euo pipefail
if [ $# -lt 4 ]; then
    sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
model=$1 src=$2 tgt=$3 silver=$4
shift 4
out=
if [ $# -gt 0 ] && [ "$1" != "--" ]; then out=$1; shift; fi
[ $# -gt 0 ] && [ "$1" = "--" ] && shift
here=$(cd "$(dirname "$0")" && pwd)
bin=${NMT_EDGE:-build/nmt-edge}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -n "$out" ] || out=$tmp/score.out
paste "$src" "$tgt" > "$tmp/pairs"
# long pairs must not be skipped: 512 source pieces, targets up to 562
"$bin" score --model "$model" --alignment --alignment-words --max-src-len 512 --batch 16 --quiet \
    -i "$tmp/pairs" -o "$out" "$@"
python3 "$here/aer.py" "$out" "$silver"
