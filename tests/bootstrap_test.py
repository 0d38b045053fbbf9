#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bootstrap_test.py — scripts/compare/bootstrap.py (the paired bootstrap
of docs/RESULTS.md, "The 4,000-update protocol") against sacreBLEU:

  - its 13a tokenizer and corpus BLEU against tests/fixtures/bleu/cases.txt
    (sacreBLEU 2.6.0's answers; the single-reference corpora), always;
  - its paired bootstrap on tests/fixtures/bootstrap/ against sacreBLEU's
    answers stored in expected.txt (API values to 1e-9, and the numbers
    sacreBLEU's command line prints with -w 4, to that precision), when
    numpy is installed (sacreBLEU's resamples come from numpy's generator);
  - the same live against sacrebleu itself, when it is importable.

    python3 tests/bootstrap_test.py [SCRIPTS_COMPARE_DIR [FIXTURES_DIR]]"""
import importlib.util
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
DIR = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(HERE, "..", "scripts", "compare")
FIX = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(HERE, "fixtures")

spec = importlib.util.spec_from_file_location("bootstrap", os.path.join(DIR, "bootstrap.py"))
bs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bs)

try:
    import numpy  # noqa: F401
    HAVE_NUMPY = True
except ImportError:
    HAVE_NUMPY = False
try:
    import sacrebleu
    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import PairedTest, _bootstrap_resample
    HAVE_SACREBLEU = True
except ImportError:
    HAVE_SACREBLEU = False


def unesc(s):
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            n = s[i + 1]
            if n == "x":
                out.append(chr(int(s[i + 2:i + 4], 16)))
                i += 4
                continue
            out.append({"\\": "\\", "t": "\t", "n": "\n", "r": "\r"}[n])
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def bleu_cases():
    toks, corpora = [], []
    cur = None
    with open(os.path.join(FIX, "bleu", "cases.txt"), encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            tag, _, rest = line.partition(" ")
            if tag == "TOK":
                toks.append([unesc(rest), None])
            elif tag == "EXP":
                toks[-1][1] = unesc(rest)
            elif tag == "CORPUS":
                cur = {"refs": int(rest.split()[1]), "H": [], "R": []}
                corpora.append(cur)
            elif tag == "H":
                cur["H"].append(unesc(rest))
            elif tag == "R":
                cur["R"].append(unesc(rest))
            elif tag == "STATS":
                cur["stats"] = [int(x) for x in rest.split()]
            elif tag == "SCORE":
                cur["score"] = float(rest)
    return toks, [c for c in corpora if c["refs"] == 1]


def expected():
    api, cli, delta = {}, {}, {}
    with open(os.path.join(FIX, "bootstrap", "expected.txt"), encoding="utf-8") as f:
        for line in f:
            w = line.split()
            if w and w[0] == "API":
                api[(int(w[1]), w[2])] = [float(x) for x in w[3:]]
            elif w and w[0] == "DELTA":
                delta[int(w[1])] = (float(w[2]), float(w[3]))
            elif w and w[0] == "CLI":
                cli.setdefault(int(w[1]), []).append(" ".join(w[2:]))
    return api, cli, delta


def fixture(name):
    return bs.read_lines(os.path.join(FIX, "bootstrap", name))


class Bleu(unittest.TestCase):
    def test_tokenizer(self):
        toks, _ = bleu_cases()
        self.assertGreater(len(toks), 20)
        for text, want in toks:
            self.assertEqual(bs.tokenize_13a(text.rstrip()), want, repr(text))

    def test_corpus_bleu(self):
        _, corpora = bleu_cases()
        self.assertGreaterEqual(len(corpora), 8)
        for c in corpora:
            st = [sum(col) for col in zip(*bs.corpus_stats(c["H"], c["R"]))]
            # fixture order: sys_len ref_len counts totals, as sacreBLEU's statistics
            self.assertEqual(st, c["stats"])
            self.assertAlmostEqual(bs.corpus_bleu(c["H"], c["R"]), c["score"], delta=1e-9)


@unittest.skipUnless(HAVE_NUMPY, "numpy missing: sacreBLEU's resamples cannot be reproduced")
class Bootstrap(unittest.TestCase):
    def run_case(self, n):
        return bs.paired_bootstrap(fixture("ref.txt"), [fixture("base.txt")], [fixture("sys.txt")], samples=n)

    def test_api_values(self):
        api, _, _ = expected()
        for n in (1000, 100):
            r = self.run_case(n)
            score, mean, ci = api[(n, "baseline")]
            self.assertAlmostEqual(r["baseline"], score, delta=1e-9)
            self.assertAlmostEqual(r["baseline_mean"], mean, delta=1e-9)
            self.assertAlmostEqual(r["baseline_ci"], ci, delta=1e-9)
            score, mean, ci, p = api[(n, "system")]
            self.assertAlmostEqual(r["system"], score, delta=1e-9)
            self.assertAlmostEqual(r["system_mean"], mean, delta=1e-9)
            self.assertAlmostEqual(r["system_ci"], ci, delta=1e-9)
            self.assertEqual(r["p"], p)
            self.assertEqual(r["rng"], "numpy")

    def test_printed_values(self):
        _, cli, _ = expected()
        for n in (1000, 100):
            r = self.run_case(n)
            mine = [f"{r['baseline']:.4f} ({r['baseline_mean']:.4f} ± {r['baseline_ci']:.4f})",
                    f"{r['system']:.4f} ({r['system_mean']:.4f} ± {r['system_ci']:.4f})",
                    f"(p = {r['p']:.4f})"]
            self.assertEqual(mine, cli[n])

    def test_delta_interval(self):
        _, _, want = expected()
        for n in (1000, 100):
            r = self.run_case(n)
            self.assertAlmostEqual(r["delta"], r["system"] - r["baseline"], delta=1e-12)
            self.assertLess(r["delta_lo"], r["delta"])
            self.assertGreater(r["delta_hi"], r["delta"])
            # sacreBLEU's resampled scores' deltas at n//40 and n - n//40 - 1
            self.assertAlmostEqual(r["delta_lo"], want[n][0], delta=1e-9)
            self.assertAlmostEqual(r["delta_hi"], want[n][1], delta=1e-9)
        self.assertAlmostEqual(want[1000][0], 0.5085, delta=5e-5)  # the fixture as measured
        self.assertAlmostEqual(want[1000][1], 10.9142, delta=5e-5)

    def test_seeds_mean(self):
        # two copies of each side: the means equal the single files' scores
        ref, b, s = fixture("ref.txt"), fixture("base.txt"), fixture("sys.txt")
        one = bs.paired_bootstrap(ref, [b], [s], samples=200)
        two = bs.paired_bootstrap(ref, [b, b], [s, s], samples=200)
        for k in ("baseline", "system", "delta", "delta_lo", "delta_hi", "p"):
            self.assertAlmostEqual(one[k], two[k], delta=1e-9, msg=k)
        # the system against itself: delta 0, p 1 (no resample is above 0 + mean)
        same = bs.paired_bootstrap(ref, [s], [s], samples=200)
        self.assertEqual(same["delta"], 0.0)
        self.assertEqual((same["delta_lo"], same["delta_hi"]), (0.0, 0.0))
        self.assertEqual(same["p"], 1 / 201)

    def test_command_line(self):
        p = os.path.join(FIX, "bootstrap")
        r = subprocess.run([sys.executable, os.path.join(DIR, "bootstrap.py"), os.path.join(p, "ref.txt"),
                            "--baseline", os.path.join(p, "base.txt"), "--system", os.path.join(p, "sys.txt")],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("delta +5.33  95% interval [+0.51, +10.91]  p = 0.0280", r.stdout)
        bad = subprocess.run([sys.executable, os.path.join(DIR, "bootstrap.py"), os.path.join(p, "ref.txt"),
                              "--baseline", os.path.join(p, "base.txt"), "--system", os.path.join(p, "expected.txt")],
                             capture_output=True, text=True)
        self.assertEqual(bad.returncode, 1)
        self.assertIn("hypotheses for 80 references", bad.stderr)


@unittest.skipUnless(HAVE_SACREBLEU and HAVE_NUMPY, "sacrebleu not installed")
class LiveSacrebleu(unittest.TestCase):
    def test_corpus_bleu(self):
        _, corpora = bleu_cases()
        for c in corpora:
            self.assertAlmostEqual(bs.corpus_bleu(c["H"], c["R"]), BLEU().corpus_score(c["H"], [c["R"]]).score,
                                   delta=1e-9)

    def test_paired_bootstrap(self):
        os.environ["SACREBLEU_SEED"] = "12345"
        ref, b, s = fixture("ref.txt"), fixture("base.txt"), fixture("sys.txt")
        for n in (1000, 37):
            _, res = PairedTest([("b", b), ("s", s)], {"BLEU": BLEU()}, [ref], test_type="bs", n_samples=n)()
            rb, rs = res["BLEU"]
            r = bs.paired_bootstrap(ref, [b], [s], samples=n)
            self.assertAlmostEqual(r["baseline_mean"], float(rb.mean), delta=1e-9)
            self.assertAlmostEqual(r["baseline_ci"], float(rb.ci), delta=1e-9)
            self.assertAlmostEqual(r["system_mean"], float(rs.mean), delta=1e-9)
            self.assertAlmostEqual(r["system_ci"], float(rs.ci), delta=1e-9)
            self.assertEqual(r["p"], float(rs.p_value))
            bleu = BLEU()
            _, sb = _bootstrap_resample(bleu._extract_corpus_statistics(b, [ref]), bleu, n)
            _, ss = _bootstrap_resample(bleu._extract_corpus_statistics(s, [ref]), bleu, n)
            d = sorted(float(x.score - y.score) for x, y in zip(ss, sb))
            self.assertAlmostEqual(r["delta_lo"], d[n // 40], delta=1e-9)
            self.assertAlmostEqual(r["delta_hi"], d[n - n // 40 - 1], delta=1e-9)


if __name__ == "__main__":
    if HAVE_SACREBLEU:
        print(f"bootstrap_test: sacrebleu {sacrebleu.__version__} found: live comparison on", file=sys.stderr)
    unittest.main(verbosity=2)
