#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""aer.py — alignment error rate of a system's word alignments against a
reference of sure links S and possible links P (Och & Ney 2003):
    AER = 1 - (|A & S| + |A & P|) / (|A| + |S|),  S a subset of P,
with precision |A & P| / |A| and recall |A & S| / |S|, counted over the
whole corpus (not averaged per sentence).

    python3 scripts/compare/aer.py HYP SURE [POSSIBLE]

HYP: one line per sentence pair, Pharaoh "i-j" pairs (source i, target j,
0-based), or `nmt-edge translate/score --alignment hard` output, whose
alignment follows the last "|||".  SURE / POSSIBLE: the same format
(scripts/compare/silver_align.sh writes test.silver); a sure link missing
from POSSIBLE is counted as possible too, and without POSSIBLE every link
is sure (P = S: then AER = 1 - F1 of A against S).  Exit 1 on unequal line
counts or a malformed pair; tests/aer_test.py checks hand-computed cases."""
import sys


def links(line, where):
    """The set of (i, j) pairs of one line ("... ||| i-j i-j" or "i-j i-j")."""
    if "|||" in line:
        line = line.rsplit("|||", 1)[1]
    out = set()
    for p in line.split():
        i, sep, j = p.partition("-")
        if not sep or not i.isdigit() or not j.isdigit():
            sys.exit(f"aer.py: {where}: '{p}' is not an i-j pair")
        out.add((int(i), int(j)))
    return out


def aer(hyp, sure, poss=None):
    """(AER, precision, recall, |A|, |S|) of parallel lists of link sets."""
    a_n = s_n = a_s = a_p = 0
    for k, (A, S) in enumerate(zip(hyp, sure)):
        P = (poss[k] if poss is not None else set()) | S
        a_n += len(A)
        s_n += len(S)
        a_s += len(A & S)
        a_p += len(A & P)
    err = 1.0 - (a_s + a_p) / (a_n + s_n) if a_n + s_n else 0.0
    return err, (a_p / a_n if a_n else 0.0), (a_s / s_n if s_n else 0.0), a_n, s_n


def read(path):
    with open(path, encoding="utf-8") as f:
        return [links(line, f"{path}:{k + 1}") for k, line in enumerate(f)]


def main(argv):
    if len(argv) not in (3, 4) or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) == 2 and argv[1] in ("-h", "--help") else 2
    sets = [read(p) for p in argv[1:]]
    if len({len(s) for s in sets}) != 1:
        sys.exit("aer.py: line counts differ: " + " / ".join(str(len(s)) for s in sets))
    err, prec, rec, a_n, s_n = aer(sets[0], sets[1], sets[2] if len(sets) == 3 else None)
    print(f"AER {100 * err:.2f}  precision {100 * prec:.2f}  recall {100 * rec:.2f}  "
          f"({len(sets[0])} pairs, {a_n} links, {s_n} sure)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
