#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# spm_parity.sh [BUILD_DIR] [WORKDIR] — the large tokenizer parity run.
#
# Trains SentencePiece models with the reference spm_train (Debian's
# `sentencepiece`) on real text from this system (scripts/spm_corpus.sh),
# then requires, on every line of a held-out text (>= 20k real lines plus
# the scripts/spm_hard_cases.py lines):
#   nmt-edge tokenize --sp-model M        ==  spm_encode --output_format=id
#   nmt-edge detokenize --sp-model M      ==  spm_decode --input_format=id
# Prints one line per model and a summary; exits 1 on any difference.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
work=${2:-$(mktemp -d)}
bin=$build/nmt-edge
[ -x "$bin" ] || { echo "spm_parity: build $bin first" >&2; exit 2; }
command -v spm_train >/dev/null || { echo "spm_parity: install sentencepiece" >&2; exit 2; }
"$here/scripts/spm_corpus.sh" "$work" >/dev/null
python3 "$here/scripts/spm_hard_cases.py" 2000 > "$work/hard.txt"
cat "$work/heldout.txt" "$work/hard.txt" > "$work/eval.txt"
models=(
  "uni_8k|--model_type=unigram --vocab_size=8000"
  "uni_24k|--model_type=unigram --vocab_size=24000 --hard_vocab_limit=false"
  "uni_1k_bf_sd|--model_type=unigram --vocab_size=1000 --byte_fallback=true --split_digits=true"
  "uni_4k_cf_user|--model_type=unigram --vocab_size=4000 --normalization_rule_name=nmt_nfkc_cf --user_defined_symbols=<sep>,foo,@@ --control_symbols=<ctl>"
  "uni_2k_id_ws|--model_type=unigram --vocab_size=2000 --normalization_rule_name=identity --add_dummy_prefix=false --remove_extra_whitespaces=false --split_by_whitespace=false"
  "bpe_8k|--model_type=bpe --vocab_size=8000"
  "bpe_24k|--model_type=bpe --vocab_size=24000 --hard_vocab_limit=false"
  "bpe_1k_bf_sd|--model_type=bpe --vocab_size=1000 --byte_fallback=true --split_digits=true"
  "bpe_2k_cf_bf|--model_type=bpe --vocab_size=2000 --normalization_rule_name=nmt_nfkc_cf --byte_fallback=true"
  "bpe_2k_suffix|--model_type=bpe --vocab_size=2000 --treat_whitespace_as_suffix=true --remove_extra_whitespaces=false"
)
lines=$(wc -l < "$work/eval.txt")
ver=$(dpkg-query -W -f='${Version}' sentencepiece 2>/dev/null || echo unknown)
echo "sentencepiece $ver; eval lines: $lines ($(wc -l < "$work/heldout.txt") held-out real + $(wc -l < "$work/hard.txt") hard cases); train lines: $(wc -l < "$work/train.txt")"
# number of identical lines (byte for byte) of two files of equal line count
same_lines() {
  python3 - "$1" "$2" <<'PY'
import sys
a = open(sys.argv[1], 'rb').read().split(b'\n')
b = open(sys.argv[2], 'rb').read().split(b'\n')
if a[-1:] == [b''] and b[-1:] == [b'']:
    a, b = a[:-1], b[:-1]
print(sum(x == y for x, y in zip(a, b)) if len(a) == len(b) else -1)
PY
}
fail=0
pids=()
for m in "${models[@]}"; do
  name=${m%%|*}; args=${m#*|}
  # shellcheck disable=SC2086
  spm_train --input="$work/train.txt" --model_prefix="$work/$name" $args --num_threads=2 \
    --input_sentence_size=200000 --shuffle_input_sentence=false > "$work/$name.log" 2>&1 &
  pids+=($!)
  if [ ${#pids[@]} -ge 4 ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
done
wait
for m in "${models[@]}"; do
  name=${m%%|*}
  mod=$work/$name.model
  spm_encode --model="$mod" --output_format=id < "$work/eval.txt" > "$work/$name.ref"
  "$bin" tokenize --sp-model "$mod" --max-text-bytes 1048576 --batch 256 < "$work/eval.txt" > "$work/$name.ours"
  spm_decode --model="$mod" --input_format=id < "$work/$name.ref" > "$work/$name.dref"
  "$bin" detokenize --sp-model "$mod" --batch 256 < "$work/$name.ref" > "$work/$name.dours"
  # compare line by line; decoded texts are compared with line breaks inside
  # a text turned into spaces, as the CLI writes them
  tr '\r' ' ' < "$work/$name.dref" > "$work/$name.dref1"
  tr '\r' ' ' < "$work/$name.dours" > "$work/$name.dours1"
  ids_same=$(same_lines "$work/$name.ref" "$work/$name.ours")
  dec_same=$(same_lines "$work/$name.dref1" "$work/$name.dours1")
  pieces=$(wc -l < "$work/$name.vocab")
  printf '%-16s vocab %6s  ids identical %6d/%d  decoded identical %6d/%d\n' "$name" "$pieces" "$ids_same" "$lines" "$dec_same" "$lines"
  if [ "$ids_same" != "$lines" ] || [ "$dec_same" != "$lines" ]; then fail=1; fi
done
[ $fail = 0 ] && echo "parity: 100% identical for every model" || { echo "parity: DIFFERENCES (see $work)"; exit 1; }
