#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""table4k_test.py — scripts/compare/table-4k.py on a synthetic run folder:
finished, partial and missing runs, values computed by hand (the equal-time
column) or by bootstrap.py directly (the delta's interval).

    python3 tests/table4k_test.py [SCRIPTS_COMPARE_DIR [FIXTURES_DIR]]"""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
DIR = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(HERE, "..", "scripts", "compare")
FIX = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(HERE, "fixtures")


def load(name, file):
    spec = importlib.util.spec_from_file_location(name, os.path.join(DIR, file))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


bs = load("bootstrap", "bootstrap.py")
tk = load("table4k", "table-4k.py")


def make_run(root, name, seed, params, tau, bleu_per_step, steps, hyp=None, ref=None, resumed=False):
    d = os.path.join(root, f"{name}-s{seed}")
    os.makedirs(os.path.join(d, "eval"))
    recs = [{"kind": "config", "options": {"seed": seed}, "params": params}]
    for s in range(20, steps + 1, 20):
        recs.append({"kind": "train", "step": s, "loss": 5.0, "elapsed_s": round(s * tau, 3)})
        if s % 500 == 0:
            recs.append({"kind": "dev", "step": s, "loss": 4.0, "bleu": s * bleu_per_step})
    if resumed:  # a resume repeats steps 3020..3100 (same values) and a pause of 900 s
        recs += [{"kind": "config", "start_step": 3000, "params": params}] + [
            {"kind": "train", "step": s, "loss": 5.0, "elapsed_s": round(s * tau, 3)} for s in range(3020, 3101, 20)]
        recs.insert(len(recs) // 2, {"kind": "train", "step": 1010, "loss": 5.0, "elapsed_s": 1010 * tau + 900})
    with open(os.path.join(d, "log.jsonl"), "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in recs))
        f.write('{"kind":"train","step":')  # a record being written
    for s in range(max(100, steps - 400), steps + 1, 100):
        open(os.path.join(d, f"ckpt-{s:08d}.nmt"), "w").close()
    if hyp is not None:
        with open(os.path.join(d, "eval", "test.fp32.de"), "w") as f:
            f.write("".join(h + "\n" for h in hyp))
        b = bs.corpus_bleu(hyp, ref)
        with open(os.path.join(d, "eval", "results.tsv"), "w") as f:
            f.write("dtype\tbytes\tbleu\tseconds\tsentences_per_s\n")
            for dt in ("fp32", "fp16", "int8"):
                f.write(f"{dt}\t1000\t{b + (0.5 if dt != 'fp32' else 0):.2f}\t10.0\t8.0\n")
    return d


class Table(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        root = self.root = self.tmp.name
        fx = os.path.join(FIX, "bootstrap")
        self.ref = bs.read_lines(os.path.join(fx, "ref.txt"))
        self.base = bs.read_lines(os.path.join(fx, "base.txt"))
        self.sys = bs.read_lines(os.path.join(fx, "sys.txt"))
        self.base2 = self.base[:40] + self.ref[40:50] + self.base[50:]  # seed 2: 10 lines better
        self.refpath = os.path.join(fx, "ref.txt")
        # baseline: 1.0 s/update, dev BLEU = step / 200; seed 2 resumed (repeats, one pause)
        make_run(root, "p4k-baseline", 1, 5734400, 1.0, 1 / 200, 4000, self.base, self.ref)
        make_run(root, "p4k-baseline", 2, 5734400, 1.0, 1 / 200, 4000, self.base2, self.ref, resumed=True)
        # HySAN shared: 2.0 s/update, dev BLEU = step / 160; seed 2 at 1,200 updates
        make_run(root, "p4k-hysan-shared", 1, 5768256, 2.0, 1 / 160, 4000, self.sys, self.ref)
        make_run(root, "p4k-hysan-shared", 2, 5768256, 2.0, 1 / 160, 1200)
        # RNNsearch finished, no BA run: BA's row is "not run"
        make_run(root, "p4k-banmt-none", 1, 8518464, 0.5, 1 / 250, 4000, self.sys, self.ref)

    def tearDown(self):
        self.tmp.cleanup()

    def rows(self, text):
        return {r.split(" | ")[0].lstrip("| "): [c.strip() for c in r.strip("|").split("|")]
                for r in text.splitlines()[2:]}

    def test_table(self):
        t = tk.table(self.root, self.refpath, samples=200)
        rows = self.rows(t)
        self.assertEqual(len(rows), len(tk.ROWS))
        b1, b2 = bs.corpus_bleu(self.base, self.ref), bs.corpus_bleu(self.base2, self.ref)
        r = rows["Transformer (baseline)"]
        self.assertEqual(r[1], "5,734,400")
        self.assertEqual(r[2], "4000/4000 / 4000/4000")
        self.assertEqual(r[3], f"{(round(b1, 2) + round(b2, 2)) / 2:.2f} (s1 {b1:.2f}, s2 {b2:.2f})")
        self.assertEqual(r[4], f"{abs(round(b2, 2) - round(b1, 2)):.2f}")
        self.assertEqual(r[6], "1.000")  # the pause and the repeated steps do not move the median
        self.assertEqual(r[8], "—")

        h = rows["HySAN e1, shared gate"]
        self.assertEqual(h[1], "5,768,256")
        self.assertEqual(h[2], "4000/4000 / 1200/4000")
        self.assertEqual(h[4], "1 seed")
        want = bs.paired_bootstrap(self.ref, [self.base, self.base2], [self.sys], 200, 12345)
        self.assertEqual(h[5], f"{want['delta']:+.2f} [{want['delta_lo']:+.2f}, {want['delta_hi']:+.2f}], "
                               f"p {want['p']:.3f} (1 vs 2 seeds)")
        self.assertLess(want["delta_lo"], want["delta"])
        self.assertEqual(h[6], "2.000")
        # equal time: HySAN (2 s/update) read at update 4000 x 1/2 = 2000: dev 2000/160 = 12.5,
        # the baseline's at 4000: 20.0 -> -7.50 (seed 1 only: seed 2 is not finished)
        self.assertEqual(h[7], "-7.50 (update 2,000)")
        self.assertEqual(h[8], "+1.01")

        n = rows["RNNsearch"]
        # RNNsearch faster (0.5 s/update): the baseline read at update 2000 (dev 10.0), RNNsearch
        # at 4000 (16.0); mean over seeds 1 only (RNNsearch has no seed 2) -> +6.00
        self.assertEqual(n[7], "+6.00 (update 2,000)")
        self.assertEqual(n[2], "4000/4000 / not run")
        ba = rows["BA-NMT (vs RNNsearch)"]
        self.assertEqual(ba[1:8], ["–", "not run", "–", "–", "–", "–", "–"])
        self.assertEqual(ba[8], "+0.82")
        m = rows["MG-SA, LSTM composition"]
        self.assertEqual(m[2], "not run")

    def test_dev_interpolation(self):
        self.assertEqual(tk.dev_at({500: 5.0, 1000: 10.0}, 250), 2.5)
        self.assertEqual(tk.dev_at({500: 5.0, 1000: 10.0}, 750), 7.5)
        self.assertEqual(tk.dev_at({500: 5.0, 1000: 10.0}, 1000), 10.0)
        self.assertIsNone(tk.dev_at({500: 5.0}, 501))

    def test_rows_are_the_plan(self):
        # protocol-4k.sh's plan: two seeds of every row of the table, baseline seeds first,
        # and the flags that make each row
        r = subprocess.run(["bash", os.path.join(DIR, "protocol-4k.sh"), "--plan"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        plan = [line.split("|") for line in r.stdout.splitlines()]
        self.assertEqual(sorted((p[0], p[1]) for p in plan), sorted((n, s) for n, *_ in tk.ROWS for s in "12"))
        self.assertEqual([p[:2] for p in plan[:2]], [["p4k-baseline", "1"], ["p4k-baseline", "2"]])
        args = {p[0]: p[2:] for p in plan}
        self.assertIn("global fw bw local:3", args["p4k-hysan-shared"])
        self.assertEqual(args["p4k-hysan-shared"][-2:], ["--gate", "shared"])
        self.assertEqual(args["p4k-ph-ck-uni"].count("convkv:homo:4"), 3)
        self.assertEqual(args["p4k-banmt-ba"][:2], ["run-banmt.sh", "ba"])
        self.assertEqual(args["p4k-banmt-none"][-4:], ["--adam-betas", "0.9,0.999", "--adam-eps", "1e-6"])

    def test_command_line_partial(self):
        # no run at all and no references: every row prints, none fails
        empty = os.path.join(self.root, "empty")
        os.mkdir(empty)
        r = subprocess.run([sys.executable, os.path.join(DIR, "table-4k.py"), "--root", empty, "--ref",
                            os.path.join(empty, "none.de")], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(len(lines), 2 + len(tk.ROWS))
        self.assertTrue(all(" not run " in line for line in lines[2:]))


if __name__ == "__main__":
    unittest.main(verbosity=2)
