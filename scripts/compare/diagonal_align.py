#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""diagonal_align.py — the diagonal baseline of an alignment-agreement
table (docs/RESULTS.md): target word j of each pair linked to source word
floor(j * S / T), S and T the pair's word counts (words split at spaces
and tabs, as silver_align.sh and nmt-edge --alignment-words count them).

    python3 scripts/compare/diagonal_align.py TEST.SRC TEST.TGT > OUT"""
import re
import sys


def words(line):
    return len([w for w in re.split(r"[ \t]+", line.rstrip("\n")) if w])


def main(argv):
    if len(argv) != 3:
        print(__doc__)
        return 2
    with open(argv[1], encoding="utf-8") as f, open(argv[2], encoding="utf-8") as g:
        for ls, lt in zip(f, g):
            s, t = words(ls), words(lt)
            print(" ".join(f"{j * s // t}-{j}" for j in range(t)) if s else "")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
