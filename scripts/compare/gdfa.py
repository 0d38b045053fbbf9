#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""gdfa.py — symmetrise two directional word alignments with
grow-diag-final-and (Koehn, Och & Marcu 2003; the Moses heuristic).

    python3 scripts/compare/gdfa.py FWD REV > OUT

FWD, REV: one line per sentence pair, Pharaoh "i-j" pairs, both oriented
source i - target j (eflomal-align's -f and -r files).  Starting from
their intersection, links of the union are added while they neighbour an
existing link (the 8 neighbours) and one of their two words is still
unaligned, until nothing changes (grow-diag); then every link of FWD, then
of REV, whose two words are both still unaligned (final-and).  OUT: the
result, pairs sorted."""
import sys

NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


def parse(line):
    return {tuple(int(x) for x in p.split("-")) for p in line.split()}


def gdfa(fwd, rev):
    """The symmetrised set of two sets of (i, j) links."""
    union = fwd | rev
    out = set(fwd & rev)
    src = {i for i, _ in out}
    tgt = {j for _, j in out}
    grew = True
    while grew:
        grew = False
        for i, j in sorted(out):
            for di, dj in NEIGHBOURS:
                n = (i + di, j + dj)
                if n in union and n not in out and (n[0] not in src or n[1] not in tgt):
                    out.add(n)
                    src.add(n[0])
                    tgt.add(n[1])
                    grew = True
    for direction in (fwd, rev):
        for i, j in sorted(direction):
            if i not in src and j not in tgt:
                out.add((i, j))
                src.add(i)
                tgt.add(j)
    return out


def main(argv):
    if len(argv) != 3:
        print(__doc__)
        return 2
    with open(argv[1], encoding="utf-8") as f, open(argv[2], encoding="utf-8") as r:
        fl, rl = f.readlines(), r.readlines()
    if len(fl) != len(rl):
        sys.exit(f"gdfa.py: line counts differ: {len(fl)} / {len(rl)}")
    for a, b in zip(fl, rl):
        print(" ".join(f"{i}-{j}" for i, j in sorted(gdfa(parse(a), parse(b)))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
