#!/usr/bin/env python3
"""aer.py — alignment error rate of a system's word alignments against a
sure/possible reference (Och & Ney 2003):
    AER = 1 - (|A & S| + |A & P|) / (|A| + |S|),  S a subset of P,
with precision |A & P| / |A| and recall |A & S| / |S|, summed over the corpus.

    python3 scripts/compare/aer.py HYP SURE POSSIBLE

HYP: one line per sentence pair, Pharaoh "i-j" pairs (source i, target j,
0-based), or `nmt-edge translate/score --alignment hard` output, whose
alignment follows the last " ||| ".  SURE / POSSIBLE: the same format
(scripts/compare/silver_align.sh writes them); a sure link missing from
POSSIBLE is counted as possible too.  Exit 1 on unequal line counts or a
malformed pair."""
import sys


def links(line, where):
    if "|||" in line:
        line = line.rsplit("|||", 1)[1]
    out = set()
    for p in line.split():
        i, sep, j = p.partition("-")
        if not sep or not i.isdigit() or not j.isdigit():
            sys.exit(f"aer.py: {where}: '{p}' is not an i-j pair")
        out.add((int(i), int(j)))
    return out


def main(argv):
    if len(argv) != 4 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) == 2 else 2
    with open(argv[1]) as h, open(argv[2]) as s, open(argv[3]) as p:
        hyp, sure, poss = h.readlines(), s.readlines(), p.readlines()
    if not (len(hyp) == len(sure) == len(poss)):
        sys.exit(f"aer.py: line counts differ: {len(hyp)} / {len(sure)} / {len(poss)}")
    a_n = s_n = a_s = a_p = 0
    for k, (lh, ls, lp) in enumerate(zip(hyp, sure, poss)):
        A = links(lh, f"{argv[1]}:{k + 1}")
        S = links(ls, f"{argv[2]}:{k + 1}")
        P = links(lp, f"{argv[3]}:{k + 1}") | S
        a_n += len(A)
        s_n += len(S)
        a_s += len(A & S)
        a_p += len(A & P)
    aer = 1.0 - (a_s + a_p) / (a_n + s_n) if a_n + s_n else 0.0
    prec = a_p / a_n if a_n else 0.0
    rec = a_s / s_n if s_n else 0.0
    print(f"AER {100 * aer:.2f}  precision {100 * prec:.2f}  recall {100 * rec:.2f}  "
          f"({len(hyp)} pairs, {a_n} links, {s_n} sure)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
