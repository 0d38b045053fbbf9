#!/bin/sh
# SPDX-License-Identifier: MIT
# make_corpus.sh — thin wrapper: build the en–de corpus (DDTP + LibreOffice help)
# into data/de-en/ (or the directory given) and train the joint 8k SentencePiece
# vocabulary.  All arguments go to make_corpus.py; see `make_corpus.sh --help`.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
exec python3 "$here/make_corpus.py" --spm "$@"
