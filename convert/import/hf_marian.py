# SPDX-License-Identifier: MIT
"""hf_marian.py: a Hugging Face MarianMTModel directory -> Transformer metadata
and tensors (arch "transformer", docs/ARCHITECTURES.md; docs/IMPORT.md).

What transformers' modeling_marian.py computes, and how it maps:
  post-norm layers (x = LN(x + F(x))), layer-norm eps 1e-5 (nn.LayerNorm's);
  token embedding * sqrt(d_model) when scale_embedding, else * 1;
  + MarianSinusoidalPositionalEmbedding: halves [sin | cos], frequency
    10000^(-2i/d), positions from 0          -> position_encoding sinusoid-2i;
  FFN fc2(act(fc1(x))), act = ACT2FN[activation_function] -> ffn_activation;
  logits = lm_head(x) + final_logits_bias   -> out_proj / tied_output, out_bias;
  decoder start = decoder_start_token_id (the pad id) -> bos_id;
  the tokenizer appends </s> to the source       -> source_eos 1.
Self-attention q is scaled by d_head^-0.5, as the runtime's attention does.
"""

import json
import os

import numpy as np

import spm_rewrite
import tf_layers
from errors import Refused
from weights import read_hf_weights

ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "swish": "swish", "silu": "swish"}
LN_EPS = 1e-5


def _load_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise Refused("%s: missing" % path)
    except (UnicodeDecodeError, ValueError) as e:
        raise Refused("%s: not JSON (%s)" % (path, e))


def _int(cfg, key, default=None, lo=1):
    v = cfg.get(key, default)
    if isinstance(v, list) and len(v) == 1:
        v = v[0]
    if not isinstance(v, int) or isinstance(v, bool) or v < lo:
        raise Refused("config.json: %s %r is not supported (an integer >= %d)" % (key, v, lo))
    return v


def _bool(cfg, key, default):
    v = cfg.get(key, default)
    if not isinstance(v, bool):
        raise Refused("config.json: %s %r is not supported (true or false)" % (key, v))
    return v


def sinusoid_2i(n_pos, d):
    """HF Marian's table (MarianSinusoidalPositionalEmbedding.create_weight)."""
    j = np.arange(d)
    enc = np.arange(n_pos)[:, None] / np.power(10000, 2 * (j // 2) / d)[None, :]
    out = np.empty((n_pos, d), dtype=np.float32)
    out[:, :d // 2] = np.sin(enc[:, 0::2])
    out[:, d // 2:] = np.cos(enc[:, 1::2])
    return out


def _vocab_list(path, size):
    v = _load_json(path)
    if not isinstance(v, dict):
        raise Refused("%s: expected an object piece -> id" % path)
    ids = sorted(v.values()) if all(isinstance(i, int) for i in v.values()) else None
    if ids != list(range(size)):
        raise Refused("%s: %d pieces with ids %s; expected ids 0 to %d (the model's vocab_size %d), each once" % (
            path, len(v), "not all integers" if ids is None else "%d to %d" % (ids[0], ids[-1]) if ids else "none",
            size - 1, size))
    out = [None] * size
    for piece, i in v.items():
        out[i] = piece
    codes = [p for p in out if p.startswith(">>") and p.endswith("<<")]
    if codes:
        raise Refused("%s: language-code tokens (%s): multilingual models (a target-language token at the start "
                      "of the source) are not supported" % (path, ", ".join(codes[:5])))
    return out


def convert(src, log):
    cfg = _load_json(os.path.join(src, "config.json"))
    if cfg.get("model_type") != "marian":
        raise Refused("config.json: model_type %r is not supported (marian)" % cfg.get("model_type"))
    archs = cfg.get("architectures") or ["MarianMTModel"]
    if archs != ["MarianMTModel"]:
        raise Refused("config.json: architectures %r is not supported (MarianMTModel)" % archs)
    act = cfg.get("activation_function", "gelu")
    if act not in ACTIVATIONS:
        raise Refused("config.json: activation_function %r is not supported (%s)" % (act, ", ".join(ACTIVATIONS)))
    d = _int(cfg, "d_model", 1024)
    heads = _int(cfg, "encoder_attention_heads", 16)
    dheads = _int(cfg, "decoder_attention_heads", 16)
    if dheads != heads:
        raise Refused("config.json: decoder_attention_heads %d differs from encoder_attention_heads %d: "
                      "not supported (one n_heads)" % (dheads, heads))
    ff = _int(cfg, "encoder_ffn_dim", 4096)
    dff = _int(cfg, "decoder_ffn_dim", 4096)
    if dff != ff:
        raise Refused("config.json: decoder_ffn_dim %d differs from encoder_ffn_dim %d: not supported (one d_ff)"
                      % (dff, ff))
    enc_layers = _int(cfg, "encoder_layers", 12)
    dec_layers = _int(cfg, "decoder_layers", 12)
    vocab_size = _int(cfg, "vocab_size", 58101)
    shared = _bool(cfg, "share_encoder_decoder_embeddings", True)
    tgt_vocab_size = vocab_size if shared else _int(cfg, "decoder_vocab_size", vocab_size)
    tied = _bool(cfg, "tie_word_embeddings", True)
    scale = _bool(cfg, "scale_embedding", False)
    pad = _int(cfg, "pad_token_id", 58100, lo=0)
    eos = _int(cfg, "eos_token_id", 0, lo=0)
    start = _int(cfg, "decoder_start_token_id", pad, lo=0)

    # ---- tensors ----------------------------------------------------------
    raw, wpath = read_hf_weights(src)
    W = {}
    for k, v in raw.items():
        W[k[len("model."):] if k.startswith("model.") else k] = v
    used = set()

    def get(name, shape):
        if name not in W:
            raise Refused("%s: tensor %s is missing" % (wpath, name))
        a = W[name]
        if list(a.shape) != list(shape):
            raise Refused("%s: tensor %s has shape %s, expected %s" % (wpath, name, list(a.shape), list(shape)))
        if a.dtype != np.float32:
            raise Refused("%s: tensor %s is %s, expected floating point" % (wpath, name, a.dtype))
        used.add(name)
        return a

    def first(names, shape):
        """The first of `names` present; the others equal to it count as read."""
        for n in names:
            if n in W:
                used.update(m for m in names if m in W and np.array_equal(W[m], W[n]))
                return get(n, shape)
        raise Refused("%s: none of the tensors %s is present" % (wpath, ", ".join(names)))

    tensors = []
    if shared:
        emb = first(["shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight"], [vocab_size, d])
        for n in ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight"):
            if n in W and not np.array_equal(W[n], emb):
                raise Refused("%s: %s differs from shared.weight, while config.json says "
                              "share_encoder_decoder_embeddings true" % (wpath, n))
        tensors.append(("src_embed", emb))
        tgt_emb = emb
    else:
        tensors.append(("src_embed", get("encoder.embed_tokens.weight", [vocab_size, d])))
        used.add("shared.weight")
        tgt_emb = get("decoder.embed_tokens.weight", [tgt_vocab_size, d])
        tensors.append(("tgt_embed", tgt_emb))
    if tied:
        if "lm_head.weight" in W and not np.array_equal(W["lm_head.weight"], tgt_emb):
            raise Refused("%s: lm_head.weight differs from the decoder embedding, while config.json says "
                          "tie_word_embeddings true" % wpath)
        used.add("lm_head.weight")
    else:
        tensors.append(("out_proj", get("lm_head.weight", [tgt_vocab_size, d])))
    for side in ("encoder", "decoder"):
        name = side + ".embed_positions.weight"
        if name in W:
            n_pos = W[name].shape[0]
            want = sinusoid_2i(n_pos, d)
            if W[name].shape != want.shape or np.max(np.abs(W[name] - want)) > 1e-4:
                raise Refused("%s: %s is not Marian's sinusoid (learned positions are not supported)" % (wpath, name))
            used.add(name)

    tensors += tf_layers.layers(get, d, ff, enc_layers, dec_layers)
    bias = None
    if "final_logits_bias" in W:
        bias = get("final_logits_bias", [1, tgt_vocab_size]).reshape(tgt_vocab_size)
        if not np.any(bias):
            bias = None
    for extra in ("encoder.layernorm_embedding.weight", "encoder.layer_norm.weight"):
        if extra in W:
            raise Refused("%s: tensor %s: a layer norm MarianMTModel does not have (not a Marian model?)"
                          % (wpath, extra))
    left = sorted(set(W) - used)
    if left:
        raise Refused("%s: %d tensors this importer does not know (first: %s)" % (wpath, len(left),
                                                                                 ", ".join(left[:5])))
    if bias is not None:
        tensors.append(("out_bias", bias))

    # ---- vocabulary and tokenizers ------------------------------------------
    src_vocab = _vocab_list(os.path.join(src, "vocab.json"), vocab_size)
    tgt_vocab = src_vocab if shared else _vocab_list(os.path.join(src, "target_vocab.json"), tgt_vocab_size)
    tok_cfg_path = os.path.join(src, "tokenizer_config.json")
    tok_cfg = _load_json(tok_cfg_path) if os.path.isfile(tok_cfg_path) else {}
    if bool(tok_cfg.get("separate_vocabs", False)) == shared:
        raise Refused("tokenizer_config.json: separate_vocabs %r, while config.json's "
                      "share_encoder_decoder_embeddings is %r" % (tok_cfg.get("separate_vocabs", False), shared))
    unk_text = tok_cfg.get("unk_token", "<unk>")
    if isinstance(unk_text, dict):
        unk_text = unk_text.get("content", "<unk>")
    try:
        unk = src_vocab.index(unk_text)
    except ValueError:
        raise Refused("vocab.json: no unknown token %r" % unk_text)
    for name, i in (("pad_token_id", pad), ("eos_token_id", eos)):
        if i >= min(vocab_size, tgt_vocab_size):
            raise Refused("config.json: %s %d is not below the vocabulary size %d" % (name, i, tgt_vocab_size))
    if start >= tgt_vocab_size:
        raise Refused("config.json: decoder_start_token_id %d is not below the target vocabulary size %d"
                      % (start, tgt_vocab_size))
    if not shared and (tgt_vocab[unk] != unk_text or tgt_vocab[eos] != src_vocab[eos] or
                       tgt_vocab[pad] != src_vocab[pad]):
        raise Refused("target_vocab.json: <unk>, </s> and <pad> must have the ids they have in vocab.json")
    specials = {"unk": unk, "eos": eos, "pad": pad}
    toks = []
    for side, fname, vocab in (("source", "source.spm", src_vocab), ("target", "target.spm", tgt_vocab)):
        path = os.path.join(src, fname)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            raise Refused("%s: missing" % path)
        try:
            model, rep = spm_rewrite.rewrite(data, vocab, fname, specials)
        except spm_rewrite.SpmError as e:
            raise Refused(str(e))
        log("%s: %s, %d pieces -> %d (%d from the .spm, %d unused; dropped %s)" % (
            fname, rep["model_type"], len(spm_rewrite.SpmModel(data).pieces), rep["pieces"], rep["from_spm"],
            rep["unused"], ", ".join(rep["dropped"]) or "none"))
        if rep["foreign"]:
            log("warning: %s: %d pieces of the vocabulary are made of characters %s does not know (%s): a text "
                "containing one alone gets <unk> here and the piece's id from MarianTokenizer (docs/IMPORT.md)" % (
                    fname, len(rep["foreign"]), fname, ", ".join(repr(x) for x in rep["foreign"][:5])))
        toks.append(model)
    tensors.append(("tokenizer.src", np.frombuffer(toks[0], dtype=np.uint8)))
    if toks[1] != toks[0]:
        tensors.append(("tokenizer.tgt", np.frombuffer(toks[1], dtype=np.uint8)))

    meta = [
        ("arch", "transformer"),
        ("d_model", d), ("n_heads", heads), ("d_ff", ff), ("enc_layers", enc_layers), ("dec_layers", dec_layers),
        ("src_vocab", vocab_size), ("tgt_vocab", tgt_vocab_size),
        ("norm", "post"), ("ln_eps", LN_EPS), ("embed_scale", float(np.sqrt(d)) if scale else 1.0),
        ("shared_embeddings", 1 if shared else 0), ("tied_output", 1 if tied else 0),
        ("bos_id", start), ("eos_id", eos), ("pad_id", pad), ("unk_id", unk),
        ("ffn_activation", ACTIVATIONS[act]),
        ("position_encoding", "sinusoid-2i"), ("position_offset", 0),
        ("output_bias", 0 if bias is None else 1),
        ("source_eos", 1),
        ("import.source", "hf-marian"),
    ]
    return meta, tf_layers.order(tensors, enc_layers, dec_layers)
