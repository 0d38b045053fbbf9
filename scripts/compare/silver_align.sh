#!/bin/bash
# silver_align.sh — the silver-standard word alignments of a test split
# (docs/RESULTS.md, "Alignment agreement"): eflomal (a statistical aligner,
# PyPI; a measurement-only dependency, not in scripts/setup.sh) aligns the
# training text and the test split together (the statistics come from the
# whole), in both directions, on lowercased whitespace words; the test
# lines' intersection of the two directions is the "sure" set, their union
# the "possible" set that scripts/compare/aer.py scores against.
#
#   bash scripts/compare/silver_align.sh DATA_DIR SRC TGT OUT_DIR
#     DATA_DIR holds train.SRC train.TGT test.SRC test.TGT
#     (scripts/corpus/make_corpus.sh's layout); writes OUT_DIR/test.sure,
#     OUT_DIR/test.possible (Pharaoh i-j, one line per test pair).
# Needs eflomal-align on PATH (python3 -m pip install eflomal).
set -euo pipefail
if [ $# -ne 4 ]; then
    sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
data=$1 src=$2 tgt=$3 out=$4
command -v eflomal-align >/dev/null || { echo "silver_align.sh: eflomal-align not found (python3 -m pip install eflomal)" >&2; exit 1; }
for f in train.$src train.$tgt test.$src test.$tgt; do
    [ -r "$data/$f" ] || { echo "silver_align.sh: cannot read $data/$f" >&2; exit 1; }
done
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n_test=$(wc -l < "$data/test.$src")
# lowercase; an empty line would give eflomal nothing to align: a dot stands in
prep() { cat "$@" | python3 -c 'import sys
for l in sys.stdin:
    w = l.split()
    print(" ".join(w).lower() if w else ".")'; }
prep "$data/train.$src" "$data/test.$src" > "$tmp/s"
prep "$data/train.$tgt" "$data/test.$tgt" > "$tmp/t"
eflomal-align -s "$tmp/s" -t "$tmp/t" -f "$tmp/fwd" -r "$tmp/rev" --overwrite
tail -n "$n_test" "$tmp/fwd" > "$tmp/fwd.test"
tail -n "$n_test" "$tmp/rev" > "$tmp/rev.test"
python3 - "$tmp/fwd.test" "$tmp/rev.test" "$out/test.sure.tmp" "$out/test.possible.tmp" <<'PY'
import sys
fwd, rev, sure, poss = sys.argv[1:]
def links(line):
    return {tuple(map(int, p.split("-"))) for p in line.split()}
def fmt(s):
    return " ".join(f"{i}-{j}" for i, j in sorted(s))
with open(fwd) as f, open(rev) as r, open(sure, "w") as s, open(poss, "w") as p:
    for a, b in zip(f, r):
        la, lb = links(a), links(b)
        s.write(fmt(la & lb) + "\n")
        p.write(fmt(la | lb) + "\n")
PY
mv "$out/test.sure.tmp" "$out/test.sure"
mv "$out/test.possible.tmp" "$out/test.possible"
echo "silver_align.sh: wrote $out/test.sure and $out/test.possible ($n_test lines)" >&2
