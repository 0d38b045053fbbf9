#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""ct2_compare.py — `nmt-edge translate` beside CTranslate2 on the same
random-weight vanilla Transformer (issue 22).

One model is written with `nmt-edge-convert random` (post-norm, shared
source/target embeddings, an output projection without bias, sinusoidal
positions); its fp32 tensors are read back from the .nmt file (the byte
layout of docs/FORMAT.md) and written as a CTranslate2 model through its
Python `TransformerSpec` API: the same weights, the same position table,
the same layer-norm epsilon.  int8 runs use `nmt-edge-convert export
--dtype int8` on our side and compute_type "int8" on CTranslate2's; fp16
runs (fp16 weights, and fp16 products where the device has them: issue
23) are measured against CTranslate2's float32, which has no float16 on
CPUs.

--nmt-env / --baseline-env NAME=VALUE set environment variables of our
engine's / the baseline's processes (e.g. NMT_EDGE_NO_FP16=1,
NMT_EDGE_NO_SUBGROUPS=1, NMT_EDGE_NO_I8DOT=1, NMT_EDGE_CACHE_DIR=DIR with a
tuning file): with --baseline-env and no --baseline the baseline is the
same nmt-edge, so one run puts a fast path beside the portable one.

Every sentence is decoded to exactly --out-len tokens in both engines
(min = max length), so both do the same work; greedy fp32 outputs are
checked identical.  Each (batch, beam) row times N and 2N sentences in a
fresh process of each engine, interleaved, and takes the difference, so
process start-up, model loading and kernel compilation drop out:
tokens/s = out_len * N / (t(2N) - t(N)), the median of --rounds rounds
(after one untimed run of each engine).
Peak RSS is the 2N run's, measured by GNU time (`apt install time`; without it
the column is 0): a child of this script would inherit the script's own peak
RSS through fork, so wait4 cannot measure it.

With --hf-marian DIR (a Hugging Face MarianMTModel directory, OPUS-MT's
layout) or --hf-marian random-base (a random one of OPUS-MT's base shape
built with transformers: d 512, 8 heads, FFN 2048, 6+6 layers, swish, a
58,101-piece vocabulary) both engines run that checkpoint instead: ours
through `nmt-edge-convert import hf-marian` (int8: `--dtype int8`),
CTranslate2's through its own `ct2-transformers-converter` (issue 53).

    pip install ctranslate2==4.8.5   # benchmark-only dependency
    pip install torch transformers sentencepiece   # --hf-marian only
    python3 bench/ct2_compare.py --build build [--shape small|base] [--dtype fp32 int8]
        [--rows 1x1 1x4 16x1 16x4] [--sentences N] [--rounds R] [--threads 2]
        [--baseline OTHER/nmt-edge] [--nmt-env K=V ...] [--baseline-env K=V ...] [--omp-active]
        [--ct2-device cuda --nmt-env NMT_EDGE_DEVICE=gpu]   # both engines on an NVIDIA GPU
        [--hf-marian DIR|random-base]

Not a test: nothing here asserts speed.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from nmt_reader import read_nmt

SHAPES = {  # d, heads, ffn, enc+dec layers, shared vocabulary
    "small": (256, 4, 1024, 2, 8000),
    "base": (512, 8, 2048, 6, 32000),
}
PAD, BOS, EOS, UNK = 0, 1, 2, 3


def positions(n, d):
    """cl/elementwise.cl's pos_term: sin on the first d/2 columns, cos on the rest."""
    half = d // 2
    w = np.exp(-np.log(10000.0) * np.arange(half) / max(half - 1, 1))
    a = np.arange(n)[:, None] * w[None, :]
    return np.concatenate([np.sin(a), np.cos(a)], axis=1).astype(np.float32)


def vocabulary(v):
    return ["<blank>", "<s>", "</s>", "<unk>"] + [f"w{i}" for i in range(4, v)]


def write_ct2(nmt_path, out_dir):
    import ctranslate2
    from ctranslate2.specs import transformer_spec

    meta, t = read_nmt(nmt_path)
    d, heads, L = meta["d_model"], meta["n_heads"], meta["enc_layers"]
    spec = transformer_spec.TransformerSpec.from_config((L, meta["dec_layers"]), heads, pre_norm=False)
    spec.config.layer_norm_epsilon = float(meta["ln_eps"])
    pe = positions(1024, d)

    def linear(ls, w, b=None):
        ls.weight = w
        if b is not None:
            ls.bias = b

    def ln(ls, pfx):
        ls.gamma, ls.beta = t[pfx + ".weight"], t[pfx + ".bias"]

    def qkv(p, names):
        return (np.concatenate([t[f"{p}.{n}.weight"] for n in names]),
                np.concatenate([t[f"{p}.{n}.bias"] for n in names]))

    for side, n_layers in (("enc", L), ("dec", meta["dec_layers"])):
        s = spec.encoder if side == "enc" else spec.decoder
        emb = t["src_embed"] if side == "enc" or meta["shared_embeddings"] else t["tgt_embed"]
        (s.embeddings[0] if side == "enc" else s.embeddings).weight = emb
        s.scale_embeddings = True  # sqrt(d), our embed_scale default
        s.position_encodings.encodings = pe
        for i in range(n_layers):
            ly, p = s.layer[i], f"{side}.{i}"
            linear(ly.self_attention.linear[0], *qkv(p + ".self_attn", "qkv"))
            linear(ly.self_attention.linear[1], t[p + ".self_attn.o.weight"], t[p + ".self_attn.o.bias"])
            ln(ly.self_attention.layer_norm, p + ".ln1")
            if side == "dec":
                linear(ly.attention.linear[0], t[p + ".cross_attn.q.weight"], t[p + ".cross_attn.q.bias"])
                linear(ly.attention.linear[1], *qkv(p + ".cross_attn", "kv"))
                linear(ly.attention.linear[2], t[p + ".cross_attn.o.weight"], t[p + ".cross_attn.o.bias"])
                ln(ly.attention.layer_norm, p + ".ln2")
            linear(ly.ffn.linear_0, t[p + ".ffn.fc1.weight"], t[p + ".ffn.fc1.bias"])
            linear(ly.ffn.linear_1, t[p + ".ffn.fc2.weight"], t[p + ".ffn.fc2.bias"])
            ln(ly.ffn.layer_norm, p + (".ln3" if side == "dec" else ".ln2"))
    spec.decoder.projection.weight = t["out_proj"]
    spec.register_source_vocabulary(vocabulary(meta["src_vocab"]))
    spec.register_target_vocabulary(vocabulary(meta["tgt_vocab"]))
    spec.validate()
    spec.optimize(quantization=None)
    os.makedirs(out_dir, exist_ok=True)
    spec.save(out_dir)
    del ctranslate2


def make_marian_base(d, seed):
    """A random MarianMTModel of OPUS-MT's base shape saved in d, with
    SentencePiece models trained on the repository's fixture text and a
    vocab.json of 58,101 pieces (</s> 0, <unk> 1, the models' pieces, then
    filler pieces neither model has, <pad> last), as Marian numbers them."""
    import json
    import shutil

    import sentencepiece as spm
    import torch
    from transformers import MarianConfig, MarianMTModel

    os.makedirs(d, exist_ok=True)
    text = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "spm", "input.txt")
    for side in ("source", "target"):
        spm.SentencePieceTrainer.train(input=text, model_prefix=os.path.join(d, side), vocab_size=500,
                                       model_type="unigram", hard_vocab_limit=False, minloglevel=2)
        shutil.move(os.path.join(d, side + ".model"), os.path.join(d, side + ".spm"))
        os.unlink(os.path.join(d, side + ".vocab"))
    sp = spm.SentencePieceProcessor(model_file=os.path.join(d, "source.spm"))
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size()) if not (sp.is_control(i) or sp.is_unknown(i))]
    V = 58101
    vocab = ["</s>", "<unk>"] + pieces + [f"\u2581x{i}" for i in range(V - 3 - len(pieces))] + ["<pad>"]
    with open(os.path.join(d, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump({p: i for i, p in enumerate(vocab)}, f, ensure_ascii=False)
    cfg = MarianConfig(vocab_size=V, decoder_vocab_size=V, d_model=512, encoder_layers=6, decoder_layers=6,
                       encoder_attention_heads=8, decoder_attention_heads=8, encoder_ffn_dim=2048,
                       decoder_ffn_dim=2048, activation_function="swish", max_position_embeddings=512,
                       scale_embedding=True, pad_token_id=V - 1, eos_token_id=0, decoder_start_token_id=V - 1,
                       forced_eos_token_id=None)
    torch.manual_seed(seed)
    MarianMTModel(cfg).eval().save_pretrained(d)
    return vocab


def prepare_marian(args, work, conv):
    """(models by dtype, CTranslate2 model dir, vocabulary file, id range of
    source tokens, shape line) for --hf-marian."""
    import json

    src = args.hf_marian
    if src == "random-base":
        src = os.path.join(work, "marian-base")
        if not os.path.exists(os.path.join(src, "config.json")):
            make_marian_base(src, args.seed)
    with open(os.path.join(src, "vocab.json"), encoding="utf-8") as f:
        v = json.load(f)
    vocab = [None] * len(v)
    for p, i in v.items():
        vocab[i] = p
    voc_file = os.path.join(work, "vocab.txt.json")
    with open(voc_file, "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    models = {}
    for dt in args.dtype:
        models[dt] = os.path.join(work, f"marian.{dt}.nmt")
        if not os.path.exists(models[dt]):
            subprocess.run([conv, "import", "hf-marian", src, "-o", models[dt], "--dtype", dt], check=True,
                           stdout=subprocess.DEVNULL)
    ct2_dir = os.path.join(work, "marian.ct2")
    if not os.path.exists(os.path.join(ct2_dir, "model.bin")):
        subprocess.run(["ct2-transformers-converter", "--model", src, "--output_dir", ct2_dir, "--force"], check=True,
                       stdout=subprocess.DEVNULL)
    with open(os.path.join(src, "config.json")) as f:
        c = json.load(f)
    shape = (f"Hugging Face Marian {src}: d {c['d_model']}, {c['encoder_attention_heads']} heads, FFN "
             f"{c['encoder_ffn_dim']}, {c['encoder_layers']}+{c['decoder_layers']} layers, "
             f"{c.get('activation_function')}, vocabulary {len(vocab)}")
    return models, ct2_dir, voc_file, (2, len(vocab) - 1), shape


def ct2_worker(args):
    """Child process: translate a file of id lines with CTranslate2, write ids."""
    import ctranslate2

    if args.ct2_device == "cuda":
        tr = ctranslate2.Translator(args.ct2_model, device="cuda", compute_type=args.ct2_type)
    else:
        tr = ctranslate2.Translator(args.ct2_model, device="cpu", compute_type=args.ct2_type, inter_threads=1,
                                    intra_threads=args.threads)
    if args.vocab.endswith(".json"):  # --hf-marian: the model's own pieces
        import json

        with open(args.vocab, encoding="utf-8") as f:
            voc = json.load(f)
    else:
        voc = vocabulary(int(args.vocab))
    index = {t: i for i, t in enumerate(voc)}
    src = [[voc[int(x)] for x in line.split()] + ["</s>"] for line in open(args.input)]  # our encoder adds EOS
    res = tr.translate_batch(src, beam_size=args.beam, max_batch_size=args.batch, min_decoding_length=args.out_len,
                             max_decoding_length=args.out_len, length_penalty=0.0)
    with open(args.output, "w") as f:
        for r in res:
            f.write(" ".join(str(index[tok]) for tok in r.hypotheses[0]) + "\n")


GNU_TIME = "/usr/bin/time"


def run_timed(cmd, env=None):
    """Wall seconds and peak RSS (KiB; 0 when unknown) of one child process.

    A child forked from this script inherits the script's own peak RSS (Linux
    keeps the larger of the forked image's and the new program's across exec),
    so wait4's ru_maxrss would never report less than this process, which holds
    the model's arrays.  GNU time, a small process, forks the program itself and
    reports its ru_maxrss: the program's own peak.  Without it RSS is 0."""
    rss_file = None
    if os.access(GNU_TIME, os.X_OK):
        fd, rss_file = tempfile.mkstemp(prefix="ct2cmp.rss.")
        os.close(fd)
        cmd = [GNU_TIME, "-f", "%M", "-o", rss_file] + cmd
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, _ = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    err = p.stderr.read().decode()
    p.stderr.close()
    rss = 0
    if rss_file:
        with open(rss_file) as f:
            text = f.read().split()
        os.unlink(rss_file)
        rss = int(text[-1]) if text and text[-1].isdigit() else 0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{err}")
    return wall, rss


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--shape", choices=SHAPES, default="small")
    ap.add_argument("--dtype", nargs="+", default=["fp32", "int8"], choices=["fp32", "fp16", "int8"])
    ap.add_argument("--rows", nargs="+", default=["1x1", "1x4", "16x1", "16x4"], help="BATCHxBEAM")
    ap.add_argument("--sentences", type=int, default=16, help="N (the runs decode N and 2N)")
    ap.add_argument("--src-len", type=int, default=20)
    ap.add_argument("--out-len", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--baseline", help="another nmt-edge program (e.g. the previous commit's), timed in the same rounds")
    ap.add_argument("--nmt-env", nargs="+", default=[], metavar="K=V", help="environment of our engine's processes")
    ap.add_argument("--baseline-env", nargs="+", default=[], metavar="K=V",
                    help="environment of the baseline's processes (the baseline defaults to the same nmt-edge)")
    ap.add_argument("--ct2-device", choices=["cpu", "cuda"], default="cpu",
                    help="CTranslate2's device; with cuda, pass --nmt-env NMT_EDGE_DEVICE=gpu for ours, and fp16 "
                         "rows run CTranslate2 in float16")
    ap.add_argument("--hf-marian", metavar="DIR|random-base",
                    help="both engines on a Hugging Face Marian checkpoint (ours imported, CTranslate2's converted by "
                         "ct2-transformers-converter); random-base builds one of OPUS-MT's base shape")
    ap.add_argument("--omp-active", action="store_true",
                    help="leave CTranslate2's OpenMP threads spinning (default: OMP_WAIT_POLICY=PASSIVE; on a "
                         "loaded 2-core machine spinning threads made it 10x slower)")
    # worker mode (internal)
    ap.add_argument("--ct2-worker", action="store_true", help=argparse.SUPPRESS)
    for a in ("--ct2-model", "--ct2-type", "--input", "--output", "--vocab"):
        ap.add_argument(a, help=argparse.SUPPRESS)
    ap.add_argument("--beam", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--batch", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.ct2_worker:
        return ct2_worker(args)

    def env_of(pairs):
        env = dict(os.environ)
        for kv in pairs:
            if "=" not in kv:
                sys.exit(f"ct2_compare: {kv!r} is not NAME=VALUE")
            k, v = kv.split("=", 1)
            env[k] = v
        return env

    for row in args.rows:  # t(2N) - t(N) is N sentences' time only when N is whole batches
        B = int(row.split("x")[0])
        if args.sentences < B or args.sentences % B:
            sys.exit(f"ct2_compare: --sentences {args.sentences} is not a multiple of row {row}'s batch {B}: "
                     f"the N and 2N runs would not differ by N/{B} whole batches")
    nmt_env, base_env = env_of(args.nmt_env), env_of(args.baseline_env)
    conv, nmt = os.path.join(args.build, "nmt-edge-convert"), os.path.join(args.build, "nmt-edge")
    for exe in (conv, nmt, args.baseline):
        if exe and not os.access(exe, os.X_OK):
            sys.exit(f"ct2_compare: {exe} is not an executable (build first, or pass --build / --baseline)")
    if args.baseline_env and not args.baseline:
        args.baseline = nmt
    work = args.workdir or tempfile.mkdtemp(prefix="ct2cmp.")
    os.makedirs(work, exist_ok=True)
    if args.hf_marian:
        models, ct2_dir, voc_arg, (id_lo, id_hi), shape_line = prepare_marian(args, work, conv)
    else:
        d, heads, ffn, layers, vocab = SHAPES[args.shape]
        shape_line = (f"shape {args.shape}: d {d}, {heads} heads, FFN {ffn}, {layers}+{layers} layers, shared "
                      f"vocabulary {vocab}")
        voc_arg, id_lo, id_hi = str(vocab), 4, vocab
        model = os.path.join(work, f"{args.shape}.nmt")
        subprocess.run([conv, "random", "-o", model, "--d-model", str(d), "--heads", str(heads), "--ff", str(ffn),
                        "--enc-layers", str(layers), "--dec-layers", str(layers), "--src-vocab", str(vocab),
                        "--tgt-vocab", str(vocab), "--shared-embeddings", "--seed", str(args.seed)], check=True,
                       stdout=subprocess.DEVNULL)
        models = {"fp32": model}
        for dt in ("fp16", "int8"):
            if dt in args.dtype:
                models[dt] = os.path.join(work, f"{args.shape}.{dt}.nmt")
                subprocess.run([conv, "export", model, "-o", models[dt], "--dtype", dt], check=True,
                               stdout=subprocess.DEVNULL)
        ct2_dir = os.path.join(work, f"{args.shape}.ct2")
        write_ct2(model, ct2_dir)
    rng = np.random.default_rng(args.seed)
    N = args.sentences
    lines = rng.integers(id_lo, id_hi, size=(2 * N, args.src_len))  # the 2N run: the N run's lines, then N more
    for n in (N, 2 * N):
        with open(os.path.join(work, f"in{n}.txt"), "w") as f:
            f.writelines(" ".join(map(str, line)) + "\n" for line in lines[:n])

    env_cache = os.environ.get("POCL_CACHE_DIR")
    ct2_types = {"fp32": "float32", "int8": "int8",
                 "fp16": "float16" if args.ct2_device == "cuda" else "float32"}
    print(f"# {shape_line}; {N} and {2 * N} sentences of {args.src_len} ids, each decoded to {args.out_len} tokens; "
          f"CTranslate2 {__import__('ctranslate2').__version__} on {args.ct2_device}"
          f"{f' with {args.threads} threads' if args.ct2_device == 'cpu' else ''}; median of "
          f"{args.rounds} rounds; CT2 OMP_WAIT_POLICY={'(default)' if args.omp_active else 'PASSIVE'}; "
          f"POCL_CACHE_DIR={env_cache}; baseline {args.baseline}; our env {args.nmt_env}; baseline env "
          f"{args.baseline_env}; fp16 rows: CTranslate2 in {ct2_types['fp16']}")
    ct2_env = dict(os.environ)
    if not args.omp_active:
        ct2_env["OMP_WAIT_POLICY"] = "PASSIVE"
    engines = ["nmt", "ct2"] + (["base"] if args.baseline else [])
    base_cols = " baseline tok/s | baseline / CT2 |" if args.baseline else ""
    print(f"| dtype | batch | beam | nmt-edge tok/s | CTranslate2 tok/s | nmt-edge / CT2 |{base_cols} "
          "peak RSS nmt-edge / CT2 (MiB) |")
    print("|---|---|---|---|---|---|" + ("---|---|" if args.baseline else "") + "---|")
    greedy_checked = []
    for dt in args.dtype:
        for row in args.rows:
            B, K = map(int, row.split("x"))
            cmds = {}
            for n in (N, 2 * N):
                inp = os.path.join(work, f"in{n}.txt")
                cmds[("nmt", n)] = [nmt, "translate", "--model", models[dt], "--ids", "--beam", str(K), "--batch",
                                    str(B), "--min-len", str(args.out_len), "--max-len", str(args.out_len),
                                    "--quiet", "-i", inp, "-o", os.path.join(work, f"nmt.{dt}.{row}.{n}.txt")]
                cmds[("ct2", n)] = [sys.executable, os.path.abspath(__file__), "--ct2-worker", "--ct2-model", ct2_dir,
                                    "--ct2-type", ct2_types[dt], "--ct2-device", args.ct2_device,
                                    "--vocab", voc_arg, "--threads",
                                    str(args.threads), "--beam", str(K), "--batch", str(B), "--out-len",
                                    str(args.out_len), "--input", inp, "--output",
                                    os.path.join(work, f"ct2.{dt}.{row}.{n}.txt")]
                if args.baseline:
                    cmds[("base", n)] = [args.baseline] + cmds[("nmt", n)][1:-1] + [
                        os.path.join(work, f"base.{dt}.{row}.{n}.txt")]
            rates = {e: [] for e in engines}
            rss = {e: 0 for e in engines}
            envs = {"nmt": nmt_env, "ct2": ct2_env, "base": base_env}
            for eng in engines:  # untimed: kernel compilation, caches, page cache
                run_timed(cmds[(eng, N)], envs[eng])
            # each round starts at the next engine: in a fixed order the
            # engine after CTranslate2 ran 0.60-0.64x at batch 1 in both
            # orders of two nmt-edge configurations (docs/PERFORMANCE.md,
            # "Beside CTranslate2 on a host without AVX-512")
            for rnd in range(args.rounds):
                for i in range(len(engines)):
                    eng = engines[(rnd + i) % len(engines)]
                    env = envs[eng]
                    t1, _ = run_timed(cmds[(eng, N)], env)
                    t2, r2 = run_timed(cmds[(eng, 2 * N)], env)
                    rates[eng].append(args.out_len * N / (t2 - t1) if t2 > t1 else float("nan"))
                    rss[eng] = max(rss[eng], r2)
            for eng in engines:  # equal output lengths
                for line in open(os.path.join(work, f"{eng}.{dt}.{row}.{2 * N}.txt")):
                    if len(line.split()) != args.out_len:
                        sys.exit(f"{eng} {dt} {row}: an output of {len(line.split())} tokens, not {args.out_len}")
            if dt == "fp32" and K == 1:
                a = open(os.path.join(work, f"nmt.{dt}.{row}.{2 * N}.txt")).read()
                b = open(os.path.join(work, f"ct2.{dt}.{row}.{2 * N}.txt")).read()
                greedy_checked.append((row, a == b))
            if args.baseline and open(os.path.join(work, f"base.{dt}.{row}.{2 * N}.txt")).read() != open(
                    os.path.join(work, f"nmt.{dt}.{row}.{2 * N}.txt")).read():
                print(f"# {dt} {row}: the baseline's outputs differ")
            mn, mc = float(np.median(rates["nmt"])), float(np.median(rates["ct2"]))
            base = ""
            if args.baseline:
                mb = float(np.median(rates["base"]))
                base = f" {mb:.0f} | {mb / mc:.2f} |"
            mib = {e: f"{v / 1024:.0f}" if v else "n/a" for e, v in rss.items()}
            print(f"| {dt} | {B} | {K} | {mn:.0f} | {mc:.0f} | {mn / mc:.2f} |{base} {mib['nmt']} / "
                  f"{mib['ct2']} |", flush=True)
    for row, same in greedy_checked:
        print(f"# greedy fp32 {row}: outputs {'identical' if same else 'DIFFER'}")
    if not all(s for _, s in greedy_checked):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
