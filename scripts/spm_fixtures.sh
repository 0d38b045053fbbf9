#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# spm_fixtures.sh [WORKDIR] — regenerate tests/fixtures/spm/ with the
# reference SentencePiece tools (Debian's `sentencepiece`: spm_train,
# spm_encode, spm_decode).  The suite (tests/tokenizer_test.c) then checks
# that our tokenizer gives exactly these ids and decoded texts without
# needing SentencePiece installed.
#
#   MODELS        the model names, one per line (what the test iterates)
#   NAME.model    small models: unigram and BPE, nmt_nfkc / a small custom
#                 rule set (rules.tsv) / identity normalization, with and
#                 without byte_fallback, split_digits, user-defined and
#                 control symbols, whitespace options
#   input.txt     held-out real text + scripts/spm_hard_cases.py lines
#   NAME.ids      spm_encode --output_format=id of every input line
#   NAME.dec      spm_decode --input_format=id of every NAME.ids line
#   VERSION       the spm version and corpus used
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
fx=$here/tests/fixtures/spm
work=${1:-$(mktemp -d)}
command -v spm_train >/dev/null || { echo "spm_fixtures: install sentencepiece" >&2; exit 1; }
"$here/scripts/spm_corpus.sh" "$work" >/dev/null
head -60000 "$work/train.txt" > "$work/train_small.txt"
common="--input=$work/train_small.txt --num_threads=1 --seed_sentencepiece_size=200000 --input_sentence_size=0 --shuffle_input_sentence=false"
models=(
  "uni_nfkc|--model_type=unigram --vocab_size=600 --byte_fallback=true --split_digits=true"
  "bpe_rules|--model_type=bpe --vocab_size=600 --normalization_rule_tsv=$fx/rules.tsv --split_digits=true --user_defined_symbols=<sep>,foo,@@,ab --control_symbols=<ctl>"
  "uni_rules|--model_type=unigram --vocab_size=500 --normalization_rule_tsv=$fx/rules.tsv --user_defined_symbols=<sep>,foo,@@,ab,▁the --control_symbols=<ctl>"
  "bpe_id_ws|--model_type=bpe --vocab_size=500 --normalization_rule_name=identity --byte_fallback=true --add_dummy_prefix=false --remove_extra_whitespaces=false"
  "uni_id_suffix|--model_type=unigram --vocab_size=500 --normalization_rule_name=identity --treat_whitespace_as_suffix=true"
)
: > "$fx/MODELS"
{ head -150 "$work/heldout.txt"; python3 "$here/scripts/spm_hard_cases.py" 80; } > "$fx/input.txt"
for m in "${models[@]}"; do
  name=${m%%|*}; args=${m#*|}
  # shellcheck disable=SC2086
  spm_train $common --model_prefix="$work/$name" $args > "$work/$name.log" 2>&1
  cp "$work/$name.model" "$fx/$name.model"
  spm_encode --model="$fx/$name.model" --output_format=id < "$fx/input.txt" > "$fx/$name.ids"
  spm_decode --model="$fx/$name.model" --input_format=id < "$fx/$name.ids" > "$fx/$name.dec"
  echo "$name" >> "$fx/MODELS"
done
ver=$(dpkg-query -W -f='${Version}' sentencepiece 2>/dev/null || echo unknown)
{
  echo "sentencepiece $ver (spm_train/spm_encode/spm_decode)"
  echo "corpus: scripts/spm_corpus.sh on $(date -u +%Y-%m-%d) ($(wc -l < "$work/train_small.txt") training lines)"
  echo "input.txt: 150 held-out lines + scripts/spm_hard_cases.py 80"
} > "$fx/VERSION"
echo "fixtures written to $fx"
