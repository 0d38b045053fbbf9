#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""aer_test.py — scripts/compare/aer.py and gdfa.py (docs/RESULTS.md,
"Alignment agreement") against cases computed by hand; run by ctest when
python3 is found (no network, no eflomal).

    python3 tests/aer_test.py SCRIPTS_COMPARE_DIR"""
import importlib.util
import os
import subprocess
import sys
import tempfile
import unittest

DIR = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "scripts", "compare")


def load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(DIR, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run(*files_and_args):
    return subprocess.run([sys.executable, os.path.join(DIR, "aer.py"), *files_and_args], capture_output=True,
                          text=True)


class Aer(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, text):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_by_hand(self):
        # line 1: A = {0-0 1-1 2-1}, S = {0-0 1-1}, P = S + {2-1 2-2}: |A&S| 2, |A&P| 3
        # line 2: A = {0-0 1-2}, S = {0-0 1-1 2-2}, P = S: |A&S| 1, |A&P| 1
        # corpus: |A| 5, |S| 5 -> AER 1 - (3 + 4) / 10 = 0.30, precision 4/5, recall 3/5
        hyp = self.write("hyp", "-3.25 ||| 0-0 1-1 2-1\nein Satz ||| 1-2 0-0\n")
        sure = self.write("sure", "0-0 1-1\n0-0 1-1 2-2\n")
        poss = self.write("poss", "2-1 2-2\n\n")
        r = run(hyp, sure, poss)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "AER 30.00  precision 80.00  recall 60.00  (2 pairs, 5 links, 5 sure)\n")
        # every link sure (no POSSIBLE): line 1 gives |A&S| = |A&P| = 2 -> 1 - (3 + 3) / 10
        r = run(hyp, sure)
        self.assertEqual(r.stdout, "AER 40.00  precision 60.00  recall 60.00  (2 pairs, 5 links, 5 sure)\n")
        aer = load("aer")
        err, prec, rec, a_n, s_n = aer.aer([{(0, 0), (1, 2)}], [{(0, 0), (1, 1), (2, 2)}])
        self.assertAlmostEqual(err, 1 - 2 / 5)
        self.assertAlmostEqual(prec, 0.5)
        self.assertAlmostEqual(rec, 1 / 3)
        self.assertEqual((a_n, s_n), (2, 3))
        # an empty hypothesis line against an empty reference line counts nothing
        self.assertEqual(aer.aer([set()], [set()]), (0.0, 0.0, 0.0, 0, 0))

    def test_bad_input(self):
        good = self.write("good", "0-0\n")
        r = run(self.write("bad", "0-0 1:2\n"), good)
        self.assertEqual(r.returncode, 1)
        self.assertIn("'1:2' is not an i-j pair", r.stderr)
        r = run(self.write("two", "0-0\n1-1\n"), good)
        self.assertEqual(r.returncode, 1)
        self.assertIn("line counts differ: 2 / 1", r.stderr)
        self.assertEqual(run(good).returncode, 2)


class Gdfa(unittest.TestCase):
    def test_by_hand(self):
        g = load("gdfa").gdfa
        # grow-diag: 2-1 and 1-2 neighbour 1-1, and each has an unaligned word
        self.assertEqual(g({(0, 0), (1, 1), (2, 1)}, {(0, 0), (1, 1), (1, 2)}), {(0, 0), (1, 1), (2, 1), (1, 2)})
        # both words of 0-1 already aligned: not added (neither by grow-diag nor by final-and)
        self.assertEqual(g({(0, 0), (1, 1), (0, 1)}, {(0, 0), (1, 1)}), {(0, 0), (1, 1)})
        # final-and: 3-3 is no neighbour, but both its words are unaligned; 0-3's source word is aligned
        self.assertEqual(g({(0, 0), (3, 3), (0, 3)}, {(0, 0)}), {(0, 0), (3, 3)})
        # grown in steps: 1-1 from 0-0, then 2-2 from 1-1
        self.assertEqual(g({(0, 0), (1, 1), (2, 2)}, {(0, 0)}), {(0, 0), (1, 1), (2, 2)})
        self.assertEqual(g(set(), set()), set())


if __name__ == "__main__":
    unittest.main()
