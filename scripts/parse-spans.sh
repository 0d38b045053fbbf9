#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# parse-spans.sh — `nmt-edge-train parse-spans` on every core: the source
# file is cut into JOBS pieces at line boundaries, each parsed by its own
# process, and the spans joined in order (link-grammar parses one sentence
# at a time, about 57 lines/s on one core of the 2-core machine: 27 min for
# the 94,584 lines of the comparison corpus alone).
#
#   bash scripts/parse-spans.sh SRC SPANS (--spm FILE | --model MODEL) [JOBS]
#
# JOBS default: nproc. Environment: BUILD (default build). SPANS is written
# only when every piece parsed (temporary file, then rename); the pieces'
# counts are printed as each process prints them.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $# -lt 4 ]]; then
  sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
src=$1 out=$2 opt=$3 file=$4 jobs=${5:-$(nproc)}
build=${BUILD:-build}
[[ $opt == --spm || $opt == --model ]] || { echo "parse-spans: give --spm FILE or --model MODEL" >&2; exit 2; }
[[ -r $src ]] || { echo "parse-spans: cannot read $src" >&2; exit 1; }
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "parse-spans: JOBS must be a positive number" >&2; exit 2; }
[[ -x $build/nmt-edge-train ]] || { echo "parse-spans: $build/nmt-edge-train missing (build first)" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/parse-spans.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
split -n "l/$jobs" -d -a 3 "$src" "$tmp/part."
pids=()
for p in "$tmp"/part.[0-9][0-9][0-9]; do
  "$build/nmt-edge-train" parse-spans "$p" -o "$p.spans" "$opt" "$file" > /dev/null 2> "$p.log" &
  pids+=($!)
done
fail=0
for i in "${!pids[@]}"; do wait "${pids[$i]}" || fail=1; done
cat "$tmp"/part.[0-9][0-9][0-9].log | grep -v "^Debug:\|^link-grammar:" >&2 || true
(( fail == 0 )) || { echo "parse-spans: a piece failed (its message above); $out not written" >&2; exit 1; }
cat "$tmp"/part.[0-9][0-9][0-9].spans > "$tmp/all"
n_src=$(wc -l < "$src") n_out=$(wc -l < "$tmp/all")
[[ $n_src == "$n_out" ]] || { echo "parse-spans: $n_out span lines for $n_src source lines; $out not written" >&2; exit 1; }
mv "$tmp/all" "$out"
echo "parse-spans: wrote $out ($n_out lines, $(grep -c '^$' "$out" || true) not parsed)" >&2
