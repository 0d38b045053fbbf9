#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""table-4k.py — the results table of issue 57's 4,000-update protocol
(docs/RESULTS.md, "The 4,000-update protocol"), in Markdown, from whatever
runs exist under data/compare/ (scripts/compare/protocol-4k.sh).

    python3 scripts/compare/table-4k.py [--root data/compare] [--ref data/de-en/test.de]
                                        [--samples 1000] [--seed 12345]

Per row (one family variant, seeds 1 and 2, run directories ROOT/NAME-sSEED):
  - params: the trainer's count ("params" of log.jsonl's config record);
  - updates: the newest checkpoint's step over 4,000 ("not run" without a
    directory);
  - test BLEU: eval/results.tsv's fp32 BLEU (scripts/eval-model.sh: last 5
    checkpoints averaged, beam 4), the mean over evaluated seeds, each seed,
    and the spread (largest minus smallest);
  - delta: mean test BLEU minus the reference row's (the baseline, or
    RNNsearch for BA, the paper's comparison), with the paired bootstrap
    95 % interval and p-value of scripts/compare/bootstrap.py on the seeds'
    eval/test.fp32.de (sacreBLEU's method, mean over seeds per resample);
  - s/update: the median over the log's training reports of elapsed_s
    difference / step difference (robust to pauses and resumes; on a shared
    machine still an upper bound, not a speed), the mean over seeds;
  - equal time: the trainer's dev BLEU (first 300 dev sentences, beam 4,
    every 500 updates: log.jsonl's "dev" records) of the row and of its
    reference at the same training time T = 4000 x (the faster one's
    s/update): the faster system is read at update 4,000 and the slower
    at update 4000 x fast/slow, its dev BLEU interpolated linearly between
    evaluations (0 at update 0). Only the last 5 checkpoints are kept, so
    test BLEU exists at update 4,000 only; dev BLEU is what both curves
    have at every time. Mean over the seeds both sides have finished;
  - the paper's delta (PAPER below, with the table each number comes from).
A row that is not finished shows "N/4000 updates" (or "not run") instead of
its scores; its parameter count and speed show as soon as it has a log."""
import argparse
import importlib.util
import json
import os
import statistics
import sys

STEPS = 4000
SEEDS = (1, 2)

# name, label, reference row, paper's delta and where it comes from
# (../shared/papers/*.txt; their test sets, model sizes and training
# lengths are not ours: docs/RESULTS.md, "What the numbers do and do not show")
ROWS = [
    ("p4k-baseline", "Transformer (baseline)", None, None, "—"),
    ("p4k-hysan-shared", "HySAN e1, shared gate", "p4k-baseline", +1.01,
     "HySAN Table 1 e1 vs base, 32.28 − 31.27, IWSLT14 De-En small (Table 2a: gated sum, +32K parameters)"),
    ("p4k-hysan-branch", "HySAN e1, per-branch gates", "p4k-baseline", +1.01,
     "the same: the paper has one gated-sum figure (its +32K parameters are the shared gate's count)"),
    ("p4k-mgsa-lstmc", "MG-SA, LSTM composition", "p4k-baseline", +0.27,
     "MG-SA Phrase Composition table, LSTM 27.58 − n/a 27.31, WMT14 En-De (phrase heads in layers 1–6)"),
    ("p4k-ph-ck-het123", "phrase: heterogeneous ConvKV 123", "p4k-baseline", +1.08,
     "phrase attention Table 2, 27.15 − Table 1's Transformer (Base, 1 GPU) 26.07, WMT14 En-De"),
    ("p4k-ph-ck-uni", "phrase: unigram-only ConvKV (control)", "p4k-baseline", 0.0,
     "none: the Transformer's function (0 by construction)"),
    ("p4k-banmt-none", "RNNsearch", "p4k-baseline", None, "— (the paper has no Transformer)"),
    ("p4k-banmt-ba", "BA-NMT (vs RNNsearch)", "p4k-banmt-none", +0.82,
     "BA-NMT Table 4, 26.58 − RNNsearch* 25.76, En-De"),
]


def load_bootstrap():
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("bootstrap", os.path.join(here, "bootstrap.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def read_log(path):
    """config record, [(step, elapsed_s)] of train records, {step: dev BLEU}
    (a resumed run's repeated steps: the last record wins)."""
    config, train, dev = None, {}, {}
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue  # a line being written
                k = r.get("kind")
                if k == "config" and config is None:
                    config = r
                elif k == "train" and "step" in r and "elapsed_s" in r:
                    train[int(r["step"])] = float(r["elapsed_s"])
                elif k == "dev" and "step" in r and r.get("bleu") is not None:
                    dev[int(r["step"])] = float(r["bleu"])
    except OSError:
        pass
    return config, sorted(train.items()), dev


def ckpt_step(d):
    best = 0
    try:
        for n in os.listdir(d):
            if n.startswith("ckpt-") and n.endswith(".nmt"):
                try:
                    best = max(best, int(n[5:-4]))
                except ValueError:
                    pass
    except OSError:
        pass
    return best


def fp32_bleu(d):
    try:
        with open(os.path.join(d, "eval", "results.tsv"), encoding="utf-8") as f:
            rows = [line.rstrip("\n").split("\t") for line in f]
    except OSError:
        return None
    head = rows[0] if rows else []
    for r in rows[1:]:
        if len(r) == len(head) and r[0] == "fp32":
            try:
                return float(r[head.index("bleu")])
            except ValueError:
                return None
    return None


def step_time(train):
    rates = []
    for (s0, t0), (s1, t1) in zip(train, train[1:]):
        if s1 > s0 and t1 > t0:
            rates.append((t1 - t0) / (s1 - s0))
    return statistics.median(rates) if rates else None


def dev_at(dev, step):
    pts = sorted(dev.items())
    if not pts:
        return None
    prev = (0, 0.0)
    for s, b in pts:
        if s >= step:
            s0, b0 = prev
            return b0 + (b - b0) * (step - s0) / (s - s0) if s > s0 else b
        prev = (s, b)
    return None  # past the last evaluation


class Run:
    def __init__(self, root, name, seed):
        self.dir = os.path.join(root, f"{name}-s{seed}")
        self.seed = seed
        self.exists = os.path.isdir(self.dir)
        self.config, self.train, self.dev = read_log(os.path.join(self.dir, "log.jsonl"))
        self.steps = ckpt_step(self.dir)
        self.bleu = fp32_bleu(self.dir) if self.steps >= STEPS else None
        self.hyp = os.path.join(self.dir, "eval", "test.fp32.de")
        self.tau = step_time(self.train)

    @property
    def done(self):
        return self.bleu is not None and os.path.exists(self.hyp)


def fmt(x, nd=2, sign=False):
    if x is None:
        return "–"
    return f"{x:+.{nd}f}" if sign else f"{x:.{nd}f}"


def equal_time(runs, refs):
    """Mean over seeds of (row's dev BLEU - ref's) at equal training time, and
    the step the slower side is read at (mean over seeds)."""
    deltas, steps = [], []
    for r in runs:
        q = next((x for x in refs if x.seed == r.seed), None)
        if q is None or r.steps < STEPS or q.steps < STEPS or not r.tau or not q.tau:
            continue
        if r.tau >= q.tau:  # the row is slower: read it earlier
            s = STEPS * q.tau / r.tau
            a, b = dev_at(r.dev, s), dev_at(q.dev, STEPS)
        else:
            s = STEPS * r.tau / q.tau
            a, b = dev_at(r.dev, STEPS), dev_at(q.dev, s)
        if a is None or b is None:
            continue
        deltas.append(a - b)
        steps.append(s)
    if not deltas:
        return None, None
    return sum(deltas) / len(deltas), sum(steps) / len(steps)


def table(root, ref_path, samples=1000, seed=12345):
    bs = load_bootstrap()
    refs_text = bs.read_lines(ref_path) if os.path.exists(ref_path) else None
    runs = {name: [Run(root, name, s) for s in SEEDS] for name, *_ in ROWS}
    out = ["| row | params | updates | test BLEU (seeds) | spread | Δ [95 % CI], p | s/update | "
           "Δ dev BLEU at equal time (slower read at) | paper Δ | paper source |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for name, label, ref, paper, source in ROWS:
        rs = runs[name]
        params = next((r.config.get("params") for r in rs if r.config), None)
        ptxt = f"{params:,}" if isinstance(params, int) else "–"
        taus = [r.tau for r in rs if r.tau]
        tau = fmt(sum(taus) / len(taus), 3) if taus else "–"
        done = [r for r in rs if r.done]
        if not any(r.exists for r in rs):
            upd = "not run"
        else:
            upd = " / ".join(f"{r.steps}/{STEPS}" if r.exists else "not run" for r in rs)
        if done:
            mean = sum(r.bleu for r in done) / len(done)
            bleu = f"{mean:.2f} ({', '.join(f's{r.seed} {r.bleu:.2f}' for r in done)})"
            spread = fmt(max(r.bleu for r in done) - min(r.bleu for r in done)) if len(done) > 1 else "1 seed"
        else:
            bleu, spread = "–", "–"
        delta, eqt = "–", "–"
        if ref is not None and done:
            rdone = [r for r in runs[ref] if r.done]
            if not rdone:
                delta = f"({ref} not finished)"
            elif refs_text is None:
                delta = f"({ref_path} missing)"
            else:
                try:
                    b = bs.paired_bootstrap(refs_text, [bs.read_lines(r.hyp) for r in rdone],
                                            [bs.read_lines(r.hyp) for r in done], samples, seed)
                    delta = (f"{b['delta']:+.2f} [{b['delta_lo']:+.2f}, {b['delta_hi']:+.2f}], "
                             f"p {b['p']:.3f}")
                    if len(done) != len(rdone):
                        delta += f" ({len(done)} vs {len(rdone)} seeds)"
                except (OSError, ValueError) as e:
                    delta = f"(bootstrap: {e})"
            d, s = equal_time(rs, runs[ref])
            if d is not None:
                eqt = f"{d:+.2f} (update {s:,.0f})"
        out.append(f"| {label} | {ptxt} | {upd} | {bleu} | {spread} | {delta} | {tau} | {eqt} | "
                   f"{fmt(paper, sign=True) if paper is not None else '—'} | {source} |")
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default="data/compare", help="the run directories' folder (data/compare)")
    ap.add_argument("--ref", default="data/de-en/test.de", help="test references (data/de-en/test.de)")
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=12345)
    a = ap.parse_args(argv)
    sys.stdout.write(table(a.root, a.ref, a.samples, a.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
