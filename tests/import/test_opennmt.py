# SPDX-License-Identifier: MIT
"""test_opennmt.py: `nmt-edge-convert import opennmt` against OpenNMT-py itself.

    python3 tests/import/test_opennmt.py BUILD_DIR [--work DIR]

Builds a tiny Transformer with OpenNMT-py's own model builder
(onmt.model_builder.build_base_model; 3.5: pre-norm, no q/k/v/o or FFN
biases, LayerNorm eps 1e-6, interleaved sinusoids, a generator with a
bias, shared embeddings), trains it 150 steps, saves the checkpoint as
onmt's ModelSaver does ({"model", "generator", "vocab": vocabs_to_dict,
"opt"}), imports it, and checks on 24 id sequences: `nmt-edge score --ids`
against the model's own teacher-forced log-probabilities (within 1e-3
summed; the source without </s>, the target from <s>, as OpenNMT-py feeds
them) and greedy outputs against a greedy loop over the model's own
forward.  OpenNMT-py 3.5 is installed with --no-deps (scripts/
test-import.sh): its optional transform dependencies (spacy, fasttext, ...)
are not needed to build and run a model and are stubbed here.
"""

import os
import sys
import types

for _m in ("spacy", "ahocorasick", "rapidfuzz", "fasttext", "pkuseg", "pyhanlp", "snownlp", "tensorboard", "flask",
           "waitress", "sacrebleu"):
    sys.modules.setdefault(_m, types.ModuleType(_m))
sys.modules["rapidfuzz"].fuzz = sys.modules["rapidfuzz"].process = None

import pyonmttok  # noqa: E402
import torch  # noqa: E402
import onmt.opts as opts  # noqa: E402
from onmt.inputters.inputter import vocabs_to_dict  # noqa: E402
from onmt.model_builder import build_base_model  # noqa: E402
from onmt.utils.parse import ArgumentParser  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_hf_marian as common  # noqa: E402

MAX_LEN = 30
V = 64


def build(path):
    parser = ArgumentParser()
    opts.model_opts(parser)
    opts._add_train_general_opts(parser)
    opt = parser.parse_args(["-encoder_type", "transformer", "-decoder_type", "transformer", "-enc_layers", "2",
                             "-dec_layers", "2", "-hidden_size", "32", "-word_vec_size", "32", "-transformer_ff",
                             "64", "-heads", "4", "-position_encoding", "-share_embeddings",
                             "-share_decoder_embeddings", "-pos_ffn_activation_fn", "gelu", "-dropout", "0",
                             "-attention_dropout", "0", "-model_dtype", "fp32", "-param_init_glorot"])
    opt.parallel_mode = "data_parallel"
    ArgumentParser.update_model_opts(opt)
    ArgumentParser.validate_model_opts(opt)
    toks = ["<unk>", "<blank>", "<s>", "</s>"] + ["w%d" % i for i in range(V - 4)]
    v = pyonmttok.build_vocab_from_tokens(toks, special_tokens=[])
    vocabs = {"src": v, "tgt": v, "data_task": "seq2seq", "decoder_start_token": "<s>"}
    torch.manual_seed(0)
    model = build_base_model(opt, vocabs)
    with torch.no_grad():  # build_base_model leaves what it made with skip_init to the trainer's init
        for name, p in model.named_parameters():
            if p.dim() > 1:
                torch.nn.init.xavier_uniform_(p)
            elif name.endswith("layer_norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            else:
                p.normal_(0.0, 0.1 if "layer_norm" in name else 0.5)
        bad = [n for n, p in model.state_dict().items() if p.is_floating_point() and not torch.isfinite(p).all()]
        assert not bad, "non-finite parameters after the build: %s" % bad
    # a task it can learn in a few steps: the target is the source reversed
    g = torch.Generator().manual_seed(1)
    opt_ = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(150):
        n = int(torch.randint(3, 9, (1,), generator=g))
        src = torch.randint(4, V, (16, n), generator=g)
        tgt = torch.cat([torch.full((16, 1), 2), src.flip(1), torch.full((16, 1), 3)], dim=1)
        dec_out, _ = model(src.unsqueeze(-1), tgt.unsqueeze(-1), torch.full((16,), n))
        logits = model.generator(dec_out)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), tgt[:, 1:].reshape(-1))
        opt_.zero_grad()
        loss.backward()
        opt_.step()
    model.eval()
    sd = {k: v for k, v in model.state_dict().items() if "generator" not in k}
    torch.save({"model": sd, "generator": model.generator.state_dict(), "vocab": vocabs_to_dict(vocabs),
                "opt": opt, "optim": None}, path)
    return model


def logprobs(model, src, dec_in):
    with torch.no_grad():
        s = torch.tensor([src]).unsqueeze(-1)
        t = torch.tensor([dec_in + [0]]).unsqueeze(-1)  # forward drops the last position
        out, _ = model(s, t, torch.tensor([len(src)]))
        return torch.log_softmax(model.generator(out)[0].double(), dim=-1)


def main():
    keep, nmt, conv, work = common.setup()
    ck = os.path.join(work, "model_step_150.pt")
    model = build(ck)
    m32 = os.path.join(work, "onmt32.nmt")
    common.run([conv, "import", "opennmt", ck, "-o", m32])
    check = common.check
    g = torch.Generator().manual_seed(2)
    srcs = [torch.randint(4, V, (int(torch.randint(3, 9, (1,), generator=g)),), generator=g).tolist()
            for _ in range(24)]
    tgts = [s[::-1] + [3] for s in srcs]
    tgts = [t if i % 2 else t[1:] for i, t in enumerate(tgts)]  # half of them not the learned answer
    ref = []
    for s, t in zip(srcs, tgts):
        lp = logprobs(model, s, [2] + t[:-1])
        ref.append(float(lp[torch.arange(len(t)), torch.tensor(t)].sum()))
    inp = "".join("%s\t%s\n" % (" ".join(map(str, s)), " ".join(map(str, t[:-1]))) for s, t in zip(srcs, tgts))
    got = [float(x) for x in common.run([nmt, "score", "--model", m32, "--ids", "--quiet"], inp).stdout.split()]
    diff = max(abs(x - y) for x, y in zip(got, ref))
    check(len(got) == len(ref) and diff <= 1e-3,
          "score: max |delta log-probability| %.2e over %d sentences (limit 1e-3)" % (diff, len(ref)))
    want = []
    for s in srcs:  # greedy over OpenNMT-py's own forward
        out = []
        while len(out) < MAX_LEN:
            nxt = int(logprobs(model, s, [2] + out)[len(out)].argmax())
            out.append(nxt)
            if nxt == 3:
                break
        want.append(out)
    p = common.run([nmt, "translate", "--model", m32, "--ids", "--beam", "1", "--max-len", str(MAX_LEN), "--quiet"],
                   "".join(" ".join(map(str, s)) + "\n" for s in srcs))
    got = [[int(x) for x in ln.split()] for ln in p.stdout.splitlines()]
    got = [x + [3] if (not w or w[-1] == 3) else x for x, w in zip(got, want)]
    same = sum(x == w for x, w in zip(got, want))
    ended = sum(1 for w in want if w and w[-1] == 3)
    for x, w in zip(got, want):
        if x != w:
            print("  greedy differs:\n    nmt-edge %s\n    onmt     %s" % (x, w))
    check(same == len(want), "greedy: outputs equal OpenNMT-py's forward on %d/%d sequences (%d ended with </s>)" % (
        same, len(want), ended))
    o8 = os.path.join(work, "onmt8.nmt")
    common.run([conv, "import", "opennmt", ck, "-o", o8, "--dtype", "int8", "--quiet"])
    n = len(common.run([nmt, "translate", "--model", o8, "--ids", "--quiet"],
                       "".join(" ".join(map(str, s)) + "\n" for s in srcs)).stdout.splitlines())
    check(n == len(srcs), "--dtype int8: imported, %d sequences translated" % n)
    ckd = torch.load(ck, weights_only=False)
    ckd["opt"].max_relative_positions = 20
    bad = os.path.join(work, "bad.pt")
    torch.save(ckd, bad)
    common.check_refused(conv, "opennmt", bad, work, "max_relative_positions 20 is not supported",
                         "relative positions")
    return common.finish("test_opennmt", work, keep)


if __name__ == "__main__":
    sys.exit(main())
