# SPDX-License-Identifier: MIT
"""test_hf_marian.py: `nmt-edge-convert import hf-marian` against transformers.

    python3 tests/import/test_hf_marian.py BUILD_DIR [--work DIR] [--keep]

Builds a tiny random MarianMTModel with transformers itself (d_model 32, 4
heads, 2 + 2 layers, FFN 64, swish, scaled embeddings, a random
final_logits_bias), with two unigram SentencePiece models trained on
different texts and a vocab.json numbered as Marian's (</s> 0, <unk> 1, the
pieces of both sides in an order of neither .spm, <pad> last), saved with
save_pretrained; imports it; then on 24 raw-text sentences checks
  - source and target ids of `nmt-edge tokenize` = MarianTokenizer's;
  - `nmt-edge score` = the model's teacher-forced log-probability, summed
    per sentence, within 1e-3;
  - greedy and beam-4 outputs of `nmt-edge translate` (alpha 0) token for
    token = model.generate's (num_beams 1 / 4, length_penalty 0,
    early_stopping, the same maximum length);
  - fp16 and int8 imports load and translate;
  - refusals: an unsupported activation, a piece missing from vocab.json,
    -o naming an input; nothing written.
Exit status 0 when every check passes.  Needs torch, transformers,
sentencepiece (test-only: scripts/test-import.sh installs them).
"""

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import sentencepiece as spm
import torch
from transformers import MarianConfig, MarianMTModel, MarianTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TEXT = os.path.join(ROOT, "tests", "fixtures", "spm", "input.txt")

MAX_LEN = 30  # target tokens before the end-of-sentence (nmt-edge --max-len)
FAILURES = []


def check(cond, what):
    print("%s: %s" % ("ok" if cond else "FAIL", what))
    if not cond:
        FAILURES.append(what)


def sentences():
    """The test sentences: real lines of the fixture text (held out from
    training) and a few harder ones."""
    with open(TEXT, encoding="utf-8", errors="replace") as f:
        lines = [ln.strip() for ln in f if ln.strip()]
    real = [ln for ln in lines[100:150] if "\t" not in ln][:18]
    hard = ["Hello world", "  two  spaces   inside  ", "Numbers 12345 and 3.14159!",
            "Café naïve façade – “quotes” …", "UPPER lower MiXeD", "unknown 漢字 and emoji 🙂 here"]
    return real + hard, lines[:100]


def train_spm(path_prefix, lines, vocab):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
        name = f.name
    spm.SentencePieceTrainer.train(input=name, model_prefix=path_prefix, vocab_size=vocab, model_type="unigram",
                                   character_coverage=1.0,
                                   hard_vocab_limit=False, minloglevel=2)
    os.unlink(name)
    return path_prefix + ".model"


def build(d, activation="swish"):
    """A saved tiny MarianMTModel directory in d; returns (model, tokenizer)."""
    test, train = sentences()
    src_lines = train
    # a target side whose pieces differ (words reversed) over the same
    # characters (docs/IMPORT.md: a character only the other side knows)
    tgt_lines = [" ".join(w[::-1] for w in ln.split()) for ln in train]
    work = tempfile.mkdtemp()
    s = train_spm(os.path.join(work, "src"), src_lines, 300)
    t = train_spm(os.path.join(work, "tgt"), tgt_lines, 300)
    os.makedirs(d, exist_ok=True)
    shutil.copy(s, os.path.join(d, "source.spm"))
    shutil.copy(t, os.path.join(d, "target.spm"))
    shutil.rmtree(work)
    pieces = []
    for m in (os.path.join(d, "source.spm"), os.path.join(d, "target.spm")):
        sp = spm.SentencePieceProcessor(model_file=m)
        for i in range(sp.get_piece_size()):
            if not (sp.is_control(i) or sp.is_unknown(i)):
                pieces.append(sp.id_to_piece(i))
    rnd = random.Random(7)
    pieces = sorted(set(pieces))
    rnd.shuffle(pieces)
    vocab = ["</s>", "<unk>"] + pieces + ["<pad>"]
    with open(os.path.join(d, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump({p: i for i, p in enumerate(vocab)}, f, ensure_ascii=False)
    V = len(vocab)
    cfg = MarianConfig(vocab_size=V, decoder_vocab_size=V, d_model=32, encoder_layers=2, decoder_layers=2,
                       encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                       activation_function=activation, max_position_embeddings=256, scale_embedding=True,
                       pad_token_id=V - 1, eos_token_id=0, decoder_start_token_id=V - 1, forced_eos_token_id=None,
                       init_std=0.3, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)
    torch.manual_seed(0)
    model = MarianMTModel(cfg).eval()
    with torch.no_grad():
        model.final_logits_bias.normal_(0.0, 0.5)
        model.final_logits_bias[0, 0] += 1.5  # sentences end, mostly before the length limit
    tok = MarianTokenizer(os.path.join(d, "source.spm"), os.path.join(d, "target.spm"),
                          os.path.join(d, "vocab.json"))
    # a few training steps (source -> its words reversed): a random model
    # never ends a sentence, and at the length limit nmt-edge and HF differ
    # by design (nmt-edge ends the hypothesis with EOS and counts it)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(150):
        idx = torch.randint(0, len(src_lines), (16,)).tolist()
        b = tok([src_lines[i] for i in idx], text_target=[tgt_lines[i] for i in idx], padding=True,
                return_tensors="pt")
        lab = b["labels"]
        lab[lab == tok.pad_token_id] = -100
        loss = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"], labels=lab).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        model.final_logits_bias[0, 0] += 2.0  # most beam-4 hypotheses end before the limit
    model.save_pretrained(d)
    tok.save_pretrained(d)
    return MarianMTModel.from_pretrained(d).eval(), MarianTokenizer.from_pretrained(d)


def run(cmd, inp=None, ok=True):
    p = subprocess.run(cmd, input=inp, capture_output=True, text=True)
    if ok and p.returncode != 0:
        sys.stderr.write("command failed (%d): %s\n%s\n" % (p.returncode, " ".join(cmd), p.stderr))
        raise SystemExit(1)
    return p


def generate(model, src_ids, beam, eos):
    """The target ids transformers' generate gives (start token dropped, cut
    after EOS): greedy or beam search with nmt-edge's semantics where they
    can agree (length_penalty 0 = --alpha 0; early_stopping: done with
    `beam` finished hypotheses; nothing banned or forced)."""
    with torch.no_grad():
        g = model.generate(torch.tensor([src_ids]), num_beams=beam, do_sample=False, length_penalty=0.0,
                           early_stopping=True, max_new_tokens=MAX_LEN, min_length=0, bad_words_ids=None,
                           forced_eos_token_id=None, no_repeat_ngram_size=0, repetition_penalty=1.0,
                           num_return_sequences=1)
    ids = g[0].tolist()[1:]
    return ids[:ids.index(eos) + 1] if eos in ids else ids


def check_generation(nmt, model_file, texts, want, eos, beam, ref, min_ended=16):
    """`nmt-edge translate --beam BEAM --alpha 0` on texts against `want`
    (ids, from the reference `ref`).  At the length limit nmt-edge ends the
    hypothesis with EOS (and ranks it with EOS's log-probability), the
    reference stops without one: greedy compares the MAX_LEN tokens before
    it; beam search is required equal where the reference's best hypothesis
    ended by itself (at least min_ended sentences)."""
    p = run([nmt, "translate", "--model", model_file, "--beam", str(beam), "--alpha", "0", "--max-len",
             str(MAX_LEN), "--format", "jsonl", "--quiet"], "\n".join(texts) + "\n")
    got = [json.loads(ln)["tokens"] for ln in p.stdout.splitlines()]
    got = [g[:-1] if len(g) == MAX_LEN + 1 and eos not in w else g for g, w in zip(got, want)]
    ended = [i for i, w in enumerate(want) if eos in w]
    same = sum(got[i] == want[i] for i in ended)
    capped = sum(got[i] == want[i] for i in range(len(texts)) if i not in ended)
    for g, w, t in zip(got, want, texts):
        if g != w:
            print("  beam %d differs on %r%s:\n    nmt-edge  %s\n    reference %s" % (
                beam, t, "" if eos in w else " (length limit)", g, w))
    must = len(texts) if beam == 1 else len(ended)
    check(len(got) == len(texts) and same + (capped if beam == 1 else 0) == must and (beam == 1 or len(ended) >= min_ended),
          "beam %d: outputs equal %s on %d/%d sentences that ended with EOS; %d/%d at the length limit%s" % (
              beam, ref, same, len(ended), capped, len(texts) - len(ended), "" if beam == 1 else " (not required)"))


def check_refused(conv, fmt, src, work, needle, what):
    """`nmt-edge-convert import FMT SRC` exits 1 with `needle` in its message
    and writes nothing."""
    out = os.path.join(work, "refused.nmt")
    p = run([conv, "import", fmt, src, "-o", out], ok=False)
    check(p.returncode == 1 and needle in p.stderr and not os.path.exists(out),
          "refused: %s (%s)" % (what, p.stderr.strip()))


def finish(name, work, keep):
    """Remove the work directory unless kept; the summary line; the exit status."""
    if not keep:
        shutil.rmtree(work)
    print("%s: %s" % (name, "FAILED: " + "; ".join(FAILURES) if FAILURES else "all checks passed"))
    return 1 if FAILURES else 0


def hf_ids(tok, texts, target):
    if target:
        return [tok(text_target=t)["input_ids"] for t in texts]
    return [tok(t)["input_ids"] for t in texts]


def setup():
    """The command line (BUILD_DIR [--work DIR] [--keep]): (keep the work
    directory, nmt-edge, nmt-edge-convert, the work directory)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--work", help="work directory (kept; default a temporary one)")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="nmt-import-")
    os.makedirs(work, exist_ok=True)
    return bool(a.keep or a.work), os.path.join(a.build, "nmt-edge"), os.path.join(a.build, "nmt-edge-convert"), work


def main():
    keep, nmt, conv, work = setup()
    src_dir = os.path.join(work, "marian")
    model, tok = build(src_dir)
    texts, _ = sentences()
    m32 = os.path.join(work, "m32.nmt")
    run([conv, "import", "hf-marian", src_dir, "-o", m32])

    # ---- tokenizers ---------------------------------------------------------
    eos = model.config.eos_token_id
    for target in (False, True):
        want = hf_ids(tok, texts, target)
        cmd = [nmt, "tokenize", "--model", m32] + (["--target"] if target else [])
        got = run(cmd, "\n".join(texts) + "\n").stdout.splitlines()
        got = [[int(x) for x in ln.split()] + [eos] for ln in got]
        same = sum(g == w for g, w in zip(got, want))
        for g, w, t in zip(got, want, texts):
            if g != w:
                print("  %s ids differ on %r:\n    nmt-edge %s\n    hf       %s" % (
                    "target" if target else "source", t, g, w))
        check(same == len(texts) and len(got) == len(texts),
              "%s ids equal MarianTokenizer's on %d/%d sentences" % ("target" if target else "source", same,
                                                                     len(texts)))

    # ---- teacher-forced scores --------------------------------------------------
    # the reference translation of each sentence: the model's own greedy output
    # would do; a fixed other text of the test set is a harder case
    pairs = [(texts[i], texts[(i + 5) % len(texts)]) for i in range(len(texts))]
    src_ids = hf_ids(tok, [p[0] for p in pairs], False)
    tgt_ids = hf_ids(tok, [p[1] for p in pairs], True)
    hf_lp = []
    with torch.no_grad():
        for s, t in zip(src_ids, tgt_ids):
            dec_in = [model.config.decoder_start_token_id] + t[:-1]
            out = model(input_ids=torch.tensor([s]), decoder_input_ids=torch.tensor([dec_in]))
            lp = torch.log_softmax(out.logits[0].double(), dim=-1)
            hf_lp.append(float(lp[torch.arange(len(t)), torch.tensor(t)].sum()))
    got = run([nmt, "score", "--model", m32, "--quiet"], "".join("%s\t%s\n" % p for p in pairs)).stdout.split()
    got = [float(x.split("|||")[0]) for x in got]
    diff = max(abs(g - w) for g, w in zip(got, hf_lp))
    check(len(got) == len(pairs) and diff <= 1e-3,
          "score: max |delta log-probability| %.2e over %d sentences (limit 1e-3)" % (diff, len(pairs)))

    # ---- greedy and beam-4 --------------------------------------------------------
    for beam in (1, 4):
        check_generation(nmt, m32, texts, [generate(model, ids, beam, eos) for ids in src_ids], eos, beam,
                         "model.generate's")

    # ---- fp16, int8 ---------------------------------------------------------------
    for dt in ("fp16", "int8"):
        out = os.path.join(work, "m-%s.nmt" % dt)
        run([conv, "import", "hf-marian", src_dir, "-o", out, "--dtype", dt, "--quiet"])
        p = run([nmt, "translate", "--model", out, "--beam", "4", "--max-len", str(MAX_LEN), "--quiet"],
                "\n".join(texts) + "\n")
        n = len(p.stdout.splitlines())
        check(n == len(texts), "--dtype %s: imported, %d sentences translated (%d bytes)" % (
            dt, n, os.path.getsize(out)))

    # ---- refusals -------------------------------------------------------------------
    bad = os.path.join(work, "bad")
    out = os.path.join(work, "bad.nmt")
    shutil.copytree(src_dir, bad)
    with open(os.path.join(bad, "config.json")) as f:
        cfg = json.load(f)
    cfg["activation_function"] = "relu6"
    with open(os.path.join(bad, "config.json"), "w") as f:
        json.dump(cfg, f)
    p = run([conv, "import", "hf-marian", bad, "-o", out], ok=False)
    check(p.returncode == 1 and "activation_function 'relu6' is not supported" in p.stderr
          and not os.path.exists(out), "refused: activation_function relu6 (%s)" % p.stderr.strip())
    shutil.copy(os.path.join(src_dir, "config.json"), os.path.join(bad, "config.json"))
    with open(os.path.join(bad, "vocab.json"), encoding="utf-8") as f:
        voc = json.load(f)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(bad, "source.spm"))
    victim = sp.id_to_piece(10)
    voc["<removed>"] = voc.pop(victim)
    with open(os.path.join(bad, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(voc, f, ensure_ascii=False)
    p = run([conv, "import", "hf-marian", bad, "-o", out], ok=False)
    check(p.returncode == 1 and "are not in vocab.json" in p.stderr and not os.path.exists(out),
          "refused: a source.spm piece missing from vocab.json (%s)" % p.stderr.strip())
    p = run([conv, "import", "hf-marian", src_dir, "-o", os.path.join(src_dir, "vocab.json")], ok=False)
    check(p.returncode == 2 and "is the input" in p.stderr, "refused: -o naming an input (%s)" % p.stderr.strip())
    left = [f for f in os.listdir(work) if ".import." in f or ".tmp." in f]
    check(not left, "no temporary left in %s (%s)" % (work, left))

    return finish("test_hf_marian", work, keep)


if __name__ == "__main__":
    sys.exit(main())
