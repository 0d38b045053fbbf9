#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""train_step_torch.py - PyTorch reference for bench/train_bench.c.

The same Transformer / HySAN architecture as the runtime
(docs/ARCHITECTURES.md): post-norm layers, shared source/target embedding
scaled by sqrt(d_model) plus the fairseq/tensor2tensor sinusoid of
runtime/ops/ops.h nmt_op_embed, tied output projection, HySAN self-attention
(one score matrix per head shared by every branch, each branch a mask over
it) fused by sum, concat or a per-branch squeeze gate, ReLU FFN, residual
dropout (on the embeddings and after every sub-layer), the label-smoothed
cross entropy of nmt_op_xent (q_t = 1 - eps, q_j = eps / (V - 1)), gradient
norm, Adam (beta 0.9 / 0.98, eps 1e-9).

Times `--steps` training steps (zero_grad + forward + backward + gradient
norm + Adam) after `--warmup` untimed ones, on the batch written by
train_bench (`--batch FILE`) or, without it, on the identical batch
generated here.  Prints, last, one machine-readable line:

  torch_ms_per_step=... torch_tokens_per_s=... torch_params=... ...

Verification aid (not part of the benchmark): `--load MODEL.nmt --score
PAIRS` loads the F32 weights of a model file of the same shape and prints
log P(y EOS | x EOS) per `SRC<TAB>TGT` id line, to compare with
`nmt-edge score` on the same model (the two must agree to float rounding).

Benchmark-only dependency: apt-get install python3-torch (Debian 12 ships
PyTorch 1.13).  Not a test: nothing here asserts speed.
"""
import argparse
import math
import sys
import time

MASK64 = (1 << 64) - 1


def xorshift(x):
    x ^= (x << 13) & MASK64
    x ^= x >> 7
    x ^= (x << 17) & MASK64
    return x


def make_batch(n_seq, src_len, tgt_len, vocab, bos, eos, pad):
    """The batch of train_bench.c make_batch(): full-length sentences of
    random ids in [4, vocab) from a fixed xorshift64 stream."""
    del pad
    x = 88172645463325252
    src, tgt_in, tgt_out = [], [], []
    for _ in range(n_seq):
        row = []
        for _ in range(src_len - 1):
            x = xorshift(x)
            row.append(4 + x % (vocab - 4))
        src.append(row + [eos])
        y = []
        for _ in range(tgt_len - 1):
            x = xorshift(x)
            y.append(4 + x % (vocab - 4))
        tgt_in.append([bos] + y)
        tgt_out.append(y + [eos])
    return {
        "n_seq": n_seq, "src_len": src_len, "tgt_len": tgt_len, "vocab": vocab, "pad": 0,
        "src_lens": [src_len] * n_seq, "tgt_lens": [tgt_len] * n_seq,
        "src": src, "tgt_in": tgt_in, "tgt_out": tgt_out,
    }


def read_batch(path):
    """The text file of train_bench.c write_batch()."""
    with open(path) as f:
        magic = f.readline().split()
        if magic != ["nmt-train-bench-batch", "1"]:
            raise SystemExit("train_step_torch: %s: not a train_bench batch file" % path)
        vals = [int(t) for t in f.read().split()]
    n_seq, src_len, tgt_len, vocab, pad = vals[:5]
    pos = 5

    def take(n):
        nonlocal pos
        out = vals[pos:pos + n]
        if len(out) != n:
            raise SystemExit("train_step_torch: %s: truncated" % path)
        pos += n
        return out

    def rows(length):
        return [take(length) for _ in range(n_seq)]

    b = {"n_seq": n_seq, "src_len": src_len, "tgt_len": tgt_len, "vocab": vocab, "pad": pad}
    b["src_lens"] = take(n_seq)
    b["tgt_lens"] = take(n_seq)
    b["src"] = rows(src_len)
    b["tgt_in"] = rows(tgt_len)
    b["tgt_out"] = rows(tgt_len)
    return b


def parse_branches(s):
    out = []
    for tok in s.split():
        if tok in ("global", "fw", "bw"):
            out.append((tok, 0))
        elif tok.startswith("local:"):
            out.append(("local", int(tok[6:])))
        else:
            raise SystemExit("train_step_torch: unknown branch %r" % tok)
    return out


def read_pairs(path, vocab, bos, eos, pad):
    """Lines `SRC<TAB>TGT` of space-separated ids (the input of `nmt-edge
    score --ids`) as a padded batch: x EOS / BOS y -> y EOS."""
    srcs, tgts = [], []
    with open(path) as f:
        for line in f:
            if line.strip():
                a, b = line.rstrip("\n").split("\t")
                srcs.append([int(t) for t in a.split()] + [eos])
                tgts.append([int(t) for t in b.split()])
    ls = max(len(x) for x in srcs)
    lt = max(len(y) for y in tgts) + 1
    return {
        "n_seq": len(srcs), "src_len": ls, "tgt_len": lt, "vocab": vocab, "pad": pad,
        "src_lens": [len(x) for x in srcs], "tgt_lens": [len(y) + 1 for y in tgts],
        "src": [x + [pad] * (ls - len(x)) for x in srcs],
        "tgt_in": [[bos] + y + [pad] * (lt - 1 - len(y)) for y in tgts],
        "tgt_out": [y + [eos] + [pad] * (lt - 1 - len(y)) for y in tgts],
    }


def read_nmt_f32(path, torch):
    """The fp32 tensors of a .nmt file by name, as torch tensors."""
    from nmt_reader import read_nmt
    return {k: torch.from_numpy(v) for k, v in read_nmt(path, fp32_only=False)[1].items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variant", choices=["vanilla", "hysan"], default="vanilla")
    ap.add_argument("--enc-branches", help="override the variant's encoder branches")
    ap.add_argument("--dec-branches", help="override the variant's decoder branches")
    ap.add_argument("--fusion", choices=["sum", "concat", "gate"], help="override the variant's fusion")
    ap.add_argument("--gate-reduction", type=int, default=4)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ff", type=int, default=1024)
    ap.add_argument("--enc-layers", type=int, default=2)
    ap.add_argument("--dec-layers", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=8000, help="shared vocabulary (without --batch)")
    ap.add_argument("--batch", metavar="FILE", help="batch written by train_bench (else generated here)")
    ap.add_argument("--seqs", type=int, default=128, help="sentences (without --batch)")
    ap.add_argument("--src-len", type=int, default=32, help="source length incl. EOS (without --batch)")
    ap.add_argument("--tgt-len", type=int, default=32, help="target length incl. BOS/EOS (without --batch)")
    ap.add_argument("--steps", type=int, default=5, help="timed steps")
    ap.add_argument("--warmup", type=int, default=1, help="untimed steps first")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--label-smoothing", type=float, default=0.1)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--clip-norm", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--load", metavar="MODEL.nmt",
                    help="verification: take the weights of this F32 model file (same shape options)")
    ap.add_argument("--score", metavar="PAIRS",
                    help="verification: print log P(y EOS | x EOS) per `SRC<TAB>TGT` id line "
                         "(no dropout, no training), as `nmt-edge score --ids` does")
    args = ap.parse_args()

    try:
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
    except ImportError as e:
        print("train_step_torch: PyTorch not available (%s); apt-get install python3-torch" % e,
              file=sys.stderr)
        return 3

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    enc_b = {"vanilla": "global", "hysan": "global fw bw local:3"}[args.variant]
    dec_b = {"vanilla": "global", "hysan": "global local:3"}[args.variant]
    fusion = {"vanilla": "sum", "hysan": "gate"}[args.variant]
    enc_b = parse_branches(args.enc_branches or enc_b)
    dec_b = parse_branches(args.dec_branches or dec_b)
    fusion = args.fusion or fusion
    d, H, r = args.d_model, args.heads, args.gate_reduction
    NEG = -1e9  # additive mask; finite so fully masked (padding) rows stay finite

    if args.score:
        batch = read_pairs(args.score, args.vocab, 1, 2, 0)
    elif args.batch:
        batch = read_batch(args.batch)
    else:
        batch = make_batch(args.seqs, args.src_len, args.tgt_len, args.vocab, 1, 2, 0)
    V, pad = batch["vocab"], batch["pad"]

    def branch_masks(branches, lq, lk, decoder):
        """bool [n_branches, lq, lk]: keys each branch may see (docs/ARCHITECTURES.md)."""
        i = torch.arange(lq).view(lq, 1)
        j = torch.arange(lk).view(1, lk)
        ms = []
        for kind, k in branches:
            if kind == "global":
                m = torch.ones(lq, lk, dtype=torch.bool)
            elif kind == "fw":
                m = j <= i
            elif kind == "bw":
                m = j >= i
            elif decoder:
                m = (i - j >= 0) & (i - j <= k)
            else:
                m = (i - j).abs() <= k
            if decoder:
                m = m & (j <= i)
            ms.append(m.expand(lq, lk))
        return torch.stack(ms)

    def attn_bias(branch_m, key_keep):
        """float [B, n_branches, 1, lq, lk]: 0 where allowed, NEG elsewhere."""
        allowed = branch_m.unsqueeze(0).unsqueeze(2) & key_keep.view(key_keep.shape[0], 1, 1, 1, -1)
        return torch.zeros(allowed.shape).masked_fill(~allowed, NEG)

    class HySelfAttention(nn.Module):
        """Multi-branch self-attention: S = QK^T / sqrt(dh) once per head,
        softmax(S + M_b) V per branch, fused, then W_o."""

        def __init__(self, n_branches):
            super().__init__()
            self.nb = n_branches
            self.qkv = nn.Linear(d, 3 * d)
            self.gated = fusion == "gate" and n_branches > 1
            self.concat = fusion == "concat" and n_branches > 1
            self.o = nn.Linear(d * n_branches if self.concat else d, d)
            if self.gated:
                a, b1 = 1 / math.sqrt(d), 1 / math.sqrt(d // r)
                self.g1w = nn.Parameter(torch.empty(n_branches, d // r, d).uniform_(-a, a))
                self.g1b = nn.Parameter(torch.empty(n_branches, d // r).uniform_(-a, a))
                self.g2w = nn.Parameter(torch.empty(n_branches, d, d // r).uniform_(-b1, b1))
                self.g2b = nn.Parameter(torch.empty(n_branches, d).uniform_(-b1, b1))

        def forward(self, x, bias):
            B, T, _ = x.shape
            q, k, v = self.qkv(x).view(B, T, 3, H, d // H).permute(2, 0, 3, 1, 4)  # [B,H,T,dh]
            s = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(d // H))  # [B,H,T,T]
            if self.nb == 1:
                p = torch.softmax(s + bias[:, 0], dim=-1)
                return self.o(torch.matmul(p, v).transpose(1, 2).reshape(B, T, d))
            p = torch.softmax(s.unsqueeze(1) + bias, dim=-1)  # [B,nb,H,T,T]
            xb = torch.matmul(p, v.unsqueeze(1))  # [B,nb,H,T,dh]
            xb = xb.permute(0, 1, 3, 2, 4).reshape(B, self.nb, T, d)  # heads concatenated per branch
            if self.concat:
                fused = xb.permute(0, 2, 1, 3).reshape(B, T, self.nb * d)
            elif self.gated:  # per-branch squeeze gate, per token
                h = torch.relu(torch.einsum("bntd,nkd->bntk", xb, self.g1w) + self.g1b.unsqueeze(1))
                g = torch.sigmoid(torch.einsum("bntk,ndk->bntd", h, self.g2w) + self.g2b.unsqueeze(1))
                fused = (xb * g).sum(1)
            else:
                fused = xb.sum(1)
            return self.o(fused)

    class CrossAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.q = nn.Linear(d, d)
            self.kv = nn.Linear(d, 2 * d)
            self.o = nn.Linear(d, d)

        def forward(self, x, mem, bias):
            B, T, _ = x.shape
            S = mem.shape[1]
            q = self.q(x).view(B, T, H, d // H).transpose(1, 2)
            k, v = self.kv(mem).view(B, S, 2, H, d // H).permute(2, 0, 3, 1, 4)
            s = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(d // H)) + bias
            return self.o(torch.matmul(torch.softmax(s, dim=-1), v).transpose(1, 2).reshape(B, T, d))

    class FFN(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(d, args.ff)
            self.fc2 = nn.Linear(args.ff, d)

        def forward(self, x):
            return self.fc2(torch.relu(self.fc1(x)))

    drop = nn.Dropout(args.dropout)

    class EncLayer(nn.Module):  # post-norm: x = LN(x + drop(F(x)))
        def __init__(self):
            super().__init__()
            self.self_attn = HySelfAttention(len(enc_b))
            self.ln1, self.ffn, self.ln2 = nn.LayerNorm(d), FFN(), nn.LayerNorm(d)

        def forward(self, x, bias):
            x = self.ln1(x + drop(self.self_attn(x, bias)))
            return self.ln2(x + drop(self.ffn(x)))

    class DecLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.self_attn = HySelfAttention(len(dec_b))
            self.cross_attn = CrossAttention()
            self.ln1, self.ln2, self.ln3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
            self.ffn = FFN()

        def forward(self, x, bias, mem, xbias):
            x = self.ln1(x + drop(self.self_attn(x, bias)))
            x = self.ln2(x + drop(self.cross_attn(x, mem, xbias)))
            return self.ln3(x + drop(self.ffn(x)))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Parameter(torch.empty(V, d).uniform_(-1 / math.sqrt(d), 1 / math.sqrt(d)))
            self.enc = nn.ModuleList([EncLayer() for _ in range(args.enc_layers)])
            self.dec = nn.ModuleList([DecLayer() for _ in range(args.dec_layers)])
            half = d // 2
            w = torch.tensor([10000.0 ** (-i / (half - 1)) if half > 1 else 1.0 for i in range(half)],
                             dtype=torch.float64)
            maxlen = max(batch["src_len"], batch["tgt_len"])
            ang = torch.arange(maxlen, dtype=torch.float64).view(-1, 1) * w.view(1, -1)
            self.register_buffer("pos", torch.cat([ang.sin(), ang.cos()], dim=1).float())

        def emb(self, tok):
            return drop(F.embedding(tok, self.embed) * math.sqrt(d) + self.pos[:tok.shape[1]])

        def forward(self, src, enc_bias, tgt_in, dec_bias, xbias):
            mem = self.emb(src)
            for layer in self.enc:
                mem = layer(mem, enc_bias)
            y = self.emb(tgt_in)
            for layer in self.dec:
                y = layer(y, dec_bias, mem, xbias)
            return torch.matmul(y, self.embed.t())  # tied output, no bias

    def load_weights(model, t):
        """Tensor names of docs/ARCHITECTURES.md -> this module (q,k,v and k,v fused)."""
        def lin(mod, *names):
            mod.weight.copy_(torch.cat([t[n + ".weight"] for n in names]))
            mod.bias.copy_(torch.cat([t[n + ".bias"] for n in names]))

        def ln(mod, name):
            mod.weight.copy_(t[name + ".weight"])
            mod.bias.copy_(t[name + ".bias"])

        with torch.no_grad():
            model.embed.copy_(t["src_embed"])
            for stack, layers in (("enc", model.enc), ("dec", model.dec)):
                for i, layer in enumerate(layers):
                    p = "%s.%d." % (stack, i)
                    a = layer.self_attn
                    lin(a.qkv, p + "self_attn.q", p + "self_attn.k", p + "self_attn.v")
                    lin(a.o, p + "self_attn.o")
                    if a.gated:
                        for b in range(a.nb):
                            g = p + "self_attn.gate.%d." % b
                            a.g1w[b].copy_(t[g + "fc1.weight"])
                            a.g1b[b].copy_(t[g + "fc1.bias"])
                            a.g2w[b].copy_(t[g + "fc2.weight"])
                            a.g2b[b].copy_(t[g + "fc2.bias"])
                    lin(layer.ffn.fc1, p + "ffn.fc1")
                    lin(layer.ffn.fc2, p + "ffn.fc2")
                    ln(layer.ln1, p + "ln1")
                    ln(layer.ln2, p + "ln2")
                    if stack == "dec":
                        lin(layer.cross_attn.q, p + "cross_attn.q")
                        lin(layer.cross_attn.kv, p + "cross_attn.k", p + "cross_attn.v")
                        lin(layer.cross_attn.o, p + "cross_attn.o")
                        ln(layer.ln3, p + "ln3")

    n, ls, lt = batch["n_seq"], batch["src_len"], batch["tgt_len"]
    src = torch.tensor(batch["src"], dtype=torch.long)
    tgt_in = torch.tensor(batch["tgt_in"], dtype=torch.long)
    tgt_out = torch.tensor(batch["tgt_out"], dtype=torch.long)
    src_keep = torch.arange(ls).view(1, -1) < torch.tensor(batch["src_lens"]).view(-1, 1)
    tgt_keep = torch.arange(lt).view(1, -1) < torch.tensor(batch["tgt_lens"]).view(-1, 1)
    enc_bias = attn_bias(branch_masks(enc_b, ls, ls, False), src_keep)
    dec_bias = attn_bias(branch_masks(dec_b, lt, lt, True), tgt_keep)
    xbias = attn_bias(torch.ones(1, lt, ls, dtype=torch.bool), src_keep)[:, 0]  # [B,1,lt,ls]
    tgt_out = tgt_out.masked_fill(~tgt_keep, pad)
    loss_mask = tgt_keep & (tgt_out != pad)
    n_tok = int(loss_mask.sum())

    model = Model()
    model.train()
    if args.load:
        load_weights(model, read_nmt_f32(args.load, torch))
    if args.score:
        model.eval()
        drop.eval()
        with torch.no_grad():
            lp = torch.log_softmax(model(src, enc_bias, tgt_in, dec_bias, xbias), dim=-1)
            tok = lp.gather(-1, tgt_out.unsqueeze(-1)).squeeze(-1) * loss_mask
            for v in tok.sum(-1).tolist():
                print("%.6f" % v)
        return 0
    params = [p for p in model.parameters()]
    n_params = sum(p.numel() for p in params)
    opt = torch.optim.Adam(params, lr=args.lr, betas=(0.9, 0.98), eps=1e-9)
    eps = args.label_smoothing
    q_other = eps / (V - 1) if V > 1 else 0.0

    def step():
        opt.zero_grad(set_to_none=False)
        logits = model(src, enc_bias, tgt_in, dec_bias, xbias)
        lp = torch.log_softmax(logits, dim=-1)
        nll = -lp.gather(-1, tgt_out.unsqueeze(-1)).squeeze(-1)
        smooth = -lp.sum(-1)
        tok_loss = (1.0 - eps - q_other) * nll + q_other * smooth  # -sum_j q_j lp_j
        loss = (tok_loss * loss_mask).sum()
        (loss * (1.0 / n_tok)).backward()
        norm = torch.nn.utils.clip_grad_norm_(params, args.clip_norm)
        opt.step()
        return float(loss) / n_tok, float(norm)

    print("torch %s, %d threads, variant %s, enc %s, dec %s, fusion %s, %d parameters" %
          (torch.__version__, torch.get_num_threads(), args.variant,
           " ".join(k if k != "local" else "local:%d" % v for k, v in enc_b),
           " ".join(k if k != "local" else "local:%d" % v for k, v in dec_b), fusion, n_params))
    print("batch %d x src %d / tgt %d, %d target tokens, vocabulary %d" % (n, ls, lt, n_tok, V))
    sys.stdout.flush()
    for i in range(args.warmup):
        t0 = time.perf_counter()
        loss, norm = step()
        print("torch warm-up %d: %.1f ms, loss/token %.4f, grad norm %.4f" %
              (i + 1, (time.perf_counter() - t0) * 1e3, loss, norm))
        sys.stdout.flush()
    times = []
    for i in range(args.steps):
        t0 = time.perf_counter()
        loss, norm = step()
        times.append(time.perf_counter() - t0)
        print("torch step %d: %.1f ms, loss/token %.4f, grad norm %.4f" % (i + 1, times[-1] * 1e3, loss, norm))
        sys.stdout.flush()
    if not times:
        return 0
    mean = sum(times) / len(times)
    print("torch_ms_per_step=%.1f torch_tokens_per_s=%.1f torch_min_ms=%.1f torch_params=%d torch_steps=%d "
          "torch_threads=%d torch_version=%s" %
          (mean * 1e3, n_tok / mean, min(times) * 1e3, n_params, len(times), torch.get_num_threads(),
           torch.__version__))
    return 0


if __name__ == "__main__":
    sys.exit(main())
