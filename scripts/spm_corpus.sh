#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# spm_corpus.sh OUTDIR — real English text from this Debian system for the
# tokenizer parity runs (nothing is downloaded):
#   desc.txt       package short descriptions (apt's Packages index)
#   changelog.txt  /usr/share/doc/*/changelog*.gz (first 400 lines of each)
#   copyright.txt  /usr/share/doc/*/copyright
# then train.txt (40k descriptions + 60k changelog + 60k copyright lines) and
# heldout.txt (the remaining descriptions + 3k changelog + 2k copyright lines,
# disjoint from train.txt).
set -euo pipefail
out=${1:?usage: spm_corpus.sh OUTDIR}
mkdir -p "$out"
cd "$out"
# the largest main Packages index (not -updates / -security) of any architecture
pk=$(ls -S /var/lib/apt/lists/*_main_binary-*_Packages* 2>/dev/null | head -1 || true)
[ -n "$pk" ] || { echo "spm_corpus: no apt Packages index (run apt-get update)" >&2; exit 1; }
case "$pk" in
  *.lz4) lz4cat "$pk" ;; *.gz) zcat "$pk" ;; *.xz) xzcat "$pk" ;; *) cat "$pk" ;;
esac | grep '^Description: ' | sed 's/^Description: //' > desc.txt
for f in /usr/share/doc/*/changelog*.gz; do zcat "$f" 2>/dev/null | head -400 || true; done > changelog.txt
cat /usr/share/doc/*/copyright > copyright.txt 2>/dev/null || true
head -40000 desc.txt > train.txt
sed -n 1,60000p changelog.txt >> train.txt
sed -n 1,60000p copyright.txt >> train.txt
{ tail -n +40001 desc.txt; sed -n 200001,203000p changelog.txt; sed -n 300001,302000p copyright.txt; } > heldout.txt
wc -l train.txt heldout.txt
