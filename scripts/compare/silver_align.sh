#!/bin/bash
# SPDX-License-Identifier: MIT
# silver_align.sh — the silver-standard word alignments of a test split
# (docs/RESULTS.md, "Alignment agreement"): eflomal (a statistical aligner,
# PyPI; a measurement-only dependency, never in scripts/setup.sh) aligns the
# training text and the test split together (the statistics come from the
# whole), in both directions, on lowercased whitespace words; the test
# lines of the two directions are symmetrised with grow-diag-final-and
# (scripts/compare/gdfa.py).  scripts/compare/aer.py scores a system
# against the result with every link sure.
#
#   bash scripts/compare/silver_align.sh DATA_DIR SRC TGT OUT_DIR
#     DATA_DIR holds train.SRC train.TGT test.SRC test.TGT
#     (scripts/corpus/make_corpus.sh's layout); writes OUT_DIR/test.silver
#     (Pharaoh i-j, source word i - target word j, 0-based, one line per
#     test pair) and the two directions, OUT_DIR/test.fwd, test.rev.
#     eflomal samples without a seed option: two runs differ a little
#     (docs/RESULTS.md gives the spread measured).
# Needs eflomal-align on PATH (python3 -m pip install eflomal; 2.0.0 used).
set -euo pipefail
if [ $# -ne 4 ]; then
    sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
data=$1 src=$2 tgt=$3 out=$4
here=$(cd "$(dirname "$0")" && pwd)
command -v eflomal-align >/dev/null || { echo "silver_align.sh: eflomal-align not found (python3 -m pip install eflomal)" >&2; exit 1; }
for f in train.$src train.$tgt test.$src test.$tgt; do
    [ -r "$data/$f" ] || { echo "silver_align.sh: cannot read $data/$f" >&2; exit 1; }
done
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n_test=$(wc -l < "$data/test.$src")
[ "$n_test" -eq "$(wc -l < "$data/test.$tgt")" ] || { echo "silver_align.sh: test.$src and test.$tgt differ in lines" >&2; exit 1; }
# lowercase, words split at spaces and tabs only (as nmt-edge --alignment-words
# counts them); an empty line would give eflomal nothing to align: a dot
# stands in (its links are dropped below)
prep() { cat "$@" | python3 -c 'import re, sys
for l in sys.stdin:
    w = [x for x in re.split(r"[ \t]+", l.rstrip("\n")) if x]
    print(" ".join(w).lower() if w else ".")'; }
prep "$data/train.$src" "$data/test.$src" > "$tmp/s"
prep "$data/train.$tgt" "$data/test.$tgt" > "$tmp/t"
eflomal-align -s "$tmp/s" -t "$tmp/t" -f "$tmp/fwd" -r "$tmp/rev" --overwrite
# the test lines; a link outside a line's words (an empty line's dot) is dropped
python3 - "$n_test" "$data/test.$src" "$data/test.$tgt" "$tmp/fwd" "$tmp/rev" "$out" <<'PY'
import re, sys
n, src, tgt, fwd, rev, out = sys.argv[1:]
n = int(n)
def words(path):
    with open(path, encoding="utf-8") as f:
        return [len([x for x in re.split(r"[ \t]+", l.rstrip("\n")) if x]) for l in f]
ns, nt = words(src), words(tgt)
for name, path in (("fwd", fwd), ("rev", rev)):
    with open(path) as f:
        lines = f.readlines()[-n:]
    assert len(lines) == n, f"{name}: {len(lines)} test lines, want {n}"
    with open(f"{out}/test.{name}.tmp", "w") as o:
        for k, l in enumerate(lines):
            pairs = [tuple(map(int, p.split("-"))) for p in l.split()]
            o.write(" ".join(f"{i}-{j}" for i, j in sorted(pairs) if i < ns[k] and j < nt[k]) + "\n")
PY
python3 "$here/gdfa.py" "$out/test.fwd.tmp" "$out/test.rev.tmp" > "$out/test.silver.tmp"
for f in fwd rev silver; do mv "$out/test.$f.tmp" "$out/test.$f"; done
echo "silver_align.sh: wrote $out/test.silver (grow-diag-final-and), test.fwd, test.rev ($n_test lines)" >&2
