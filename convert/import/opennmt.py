# SPDX-License-Identifier: MIT
"""opennmt.py: an OpenNMT-py (3.x) Transformer checkpoint -> Transformer
metadata and tensors (docs/IMPORT.md).

The checkpoint (model_step_N.pt) is {"model": state dict without the
generator, "generator": {weight, bias}, "vocab": {"src", "tgt": token
lists, "decoder_start_token"}, "opt": the training options}.  What
OpenNMT-py's TransformerEncoder / TransformerDecoder compute, and how it
maps:
  pre-norm layers with final layer norms, nn.LayerNorm eps norm_eps (1e-6)
                                                -> norm pre, ln_eps;
  token embedding * sqrt(d) + PositionalEncoding from 0: SinusoidalInterleaved
    (sin at even columns, cos at odd, 10000^(-2i/d)) | SinusoidalConcat
                                                -> sinusoid-interleaved | sinusoid;
  FFN w_2(act(w_1(LN(x)))), act relu | gelu | silu -> ffn_activation;
  q/k/v/o and FFN without biases unless add_qkvbias / add_ffnbias
                                                -> zero biases;
  logits = generator(x) with its bias           -> out_proj or tied, out_bias;
  the decoder starts from decoder_start_token (<s>); the source has no </s>
                                                -> bos_id, source_eos 0.
Tokenization is outside the checkpoint (its transforms): the model reads
and writes ids.
"""

import numpy as np

import tf_layers
from errors import Refused
from weights import read_torch, to_numpy

ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "silu": "swish"}
POSITIONS = {"SinusoidalInterleaved": "sinusoid-interleaved", "SinusoidalConcat": "sinusoid"}


def _opt(ckpt, path):
    o = ckpt.get("opt")
    if o is None:
        raise Refused("%s: no 'opt' (not an OpenNMT-py checkpoint)" % path)
    return dict(vars(o)) if hasattr(o, "__dict__") else dict(o)


def pos_table(kind, n, d):
    """OpenNMT-py's PositionalEncoding table [n, d]."""
    pos = np.arange(n, dtype=np.float32)[:, None]
    if kind == "SinusoidalInterleaved":
        div = np.exp(np.arange(0, d, 2, dtype=np.float32) * -(np.log(10000.0) / d)).astype(np.float32)
        pe = np.zeros((n, d), dtype=np.float32)
        pe[:, 0::2] = np.sin(pos * div)
        pe[:, 1::2] = np.cos(pos * div)
        return pe
    half = d // 2
    f = np.exp(np.arange(half, dtype=np.float32) * -(np.log(10000) / (half - 1))).astype(np.float32)
    return np.concatenate([np.sin(pos * f), np.cos(pos * f)], axis=1)


def convert(src, log):
    ckpt = read_torch(src)
    if not isinstance(ckpt, dict) or "model" not in ckpt or "vocab" not in ckpt:
        raise Refused("%s: not an OpenNMT-py checkpoint (no 'model' and 'vocab')" % src)
    o = _opt(ckpt, src)

    def need(key, ok, want):
        v = o.get(key)
        if v not in ok:
            raise Refused("%s: %s %r is not supported (%s)" % (src, key, v, want))
        return v

    need("encoder_type", ("transformer",), "transformer")
    need("decoder_type", ("transformer",), "transformer")
    need("model_task", (None, "seq2seq"), "seq2seq")
    need("layer_norm", (None, "standard"), "standard: RMSNorm is not supported")
    need("max_relative_positions", (None, 0), "0: absolute positions only")
    need("parallel_residual", (None, False), "false")
    need("num_kv", (None, 0), "0: multi-head attention")
    need("self_attn_type", (None, "scaled-dot", "scaled-dot-flash"), "scaled-dot")
    need("aan_useffn", (None, False), "false")
    need("lambda_align", (None, 0, 0.0), "0: no guided alignment head")
    need("full_context_alignment", (None, False), "false")
    need("add_qkvbias", (None, True, False), "true or false")
    need("position_encoding", (True,), "true: sinusoidal positions")
    act = need("pos_ffn_activation_fn", (None,) + tuple(ACTIVATIONS), ", ".join(ACTIVATIONS)) or "relu"
    pe_kind = need("position_encoding_type", (None,) + tuple(POSITIONS), ", ".join(POSITIONS)) or \
        "SinusoidalInterleaved"
    if o.get("src_word_vec_size") != o.get("tgt_word_vec_size") or o.get("src_word_vec_size") != o.get(
            "hidden_size", o.get("rnn_size")):
        raise Refused("%s: src_word_vec_size %r, tgt_word_vec_size %r and hidden_size %r differ (one d_model)" % (
            src, o.get("src_word_vec_size"), o.get("tgt_word_vec_size"), o.get("hidden_size")))
    d = o.get("hidden_size", o.get("rnn_size"))
    heads, ff = o.get("heads"), o.get("transformer_ff")
    enc_layers, dec_layers = o.get("enc_layers"), o.get("dec_layers")
    eps = float(o.get("norm_eps", 1e-6))
    shared = bool(o.get("share_embeddings", False))
    tied = bool(o.get("share_decoder_embeddings", False))

    voc = ckpt["vocab"]
    sv, tv = list(voc["src"]), list(voc["tgt"])
    start = voc.get("decoder_start_token", "<s>")
    try:
        bos, eos, pad, unk = tv.index(start), tv.index("</s>"), tv.index("<blank>"), tv.index("<unk>")
    except ValueError as e:
        raise Refused("%s: the target vocabulary lacks a special token (%s)" % (src, e))
    if sv.index("<blank>") != pad or sv.index("<unk>") != unk or "</s>" not in sv or sv.index("</s>") != eos:
        raise Refused("%s: <blank>, <unk> and </s> must have the same ids in both vocabularies" % src)

    W = {k: to_numpy(v) for k, v in ckpt["model"].items()}
    G = {k: to_numpy(v) for k, v in (ckpt.get("generator") or {}).items()}
    G = {{"0.weight": "weight", "0.bias": "bias"}.get(k, k): v for k, v in G.items()}
    used = set()

    def get(name, shape, optional=False):
        if name not in W:
            if optional:
                return np.zeros(shape, dtype=np.float32)
            raise Refused("%s: tensor %s is missing" % (src, name))
        if list(W[name].shape) != list(shape):
            raise Refused("%s: tensor %s has shape %s, expected %s" % (src, name, list(W[name].shape), list(shape)))
        used.add(name)
        return W[name]

    Vs, Vt = len(sv), len(tv)
    tensors = [("src_embed", get("encoder.embeddings.make_embedding.emb_luts.0.weight", [Vs, d]))]
    dec_emb = get("decoder.embeddings.make_embedding.emb_luts.0.weight", [Vt, d])
    if shared:
        if not np.array_equal(dec_emb, tensors[0][1]):
            raise Refused("%s: share_embeddings, but the two embeddings differ" % src)
    else:
        tensors.append(("tgt_embed", dec_emb))
    if "weight" not in G:
        raise Refused("%s: no generator weight" % src)
    if tied:
        if not np.array_equal(G["weight"], dec_emb):
            raise Refused("%s: share_decoder_embeddings, but the generator differs from the embedding" % src)
    else:
        if list(G["weight"].shape) != [Vt, d]:
            raise Refused("%s: generator weight has shape %s, expected %s" % (src, list(G["weight"].shape), [Vt, d]))
        tensors.append(("out_proj", G["weight"]))
    for side in ("encoder", "decoder"):
        name = side + ".embeddings.make_embedding.pe.pe"
        if name in W:
            t = W[name].reshape(W[name].shape[0], -1)
            if t.shape[1] != d or np.max(np.abs(t - pos_table(pe_kind, t.shape[0], d))) > 1e-4:
                raise Refused("%s: %s is not OpenNMT-py's %s table" % (src, name, pe_kind))
            used.add(name)

    # OpenNMT-py's names -> the fairseq-style names tf_layers maps
    alias = {}

    def layer(t, s, norms):
        for name, real in norms + (("fc1", "feed_forward.w_1"), ("fc2", "feed_forward.w_2"),
                                   ("final_layer_norm", "feed_forward.layer_norm")):
            alias[t + name] = s + real
        for att, real_att in (("self_attn.", "self_attn."), ("encoder_attn.", "context_attn.")):
            for a, b in (("q_proj", "linear_query"), ("k_proj", "linear_keys"), ("v_proj", "linear_values"),
                         ("out_proj", "final_linear")):
                alias[t + att + a] = s + real_att + b

    for l in range(enc_layers):
        layer("encoder.layers.%d." % l, "encoder.transformer.%d." % l, (("self_attn_layer_norm", "layer_norm"),))
    for l in range(dec_layers):
        layer("decoder.layers.%d." % l, "decoder.transformer_layers.%d." % l,
              (("self_attn_layer_norm", "layer_norm_1"), ("encoder_attn_layer_norm", "layer_norm_2")))

    def get_alias(name, shape):
        base, leaf = name.rsplit(".", 1)
        real = alias.get(base, base) + "." + leaf
        # biases OpenNMT-py leaves out (add_qkvbias / add_ffnbias false) are zeros
        return get(real, shape, optional=leaf == "bias" and "layer_norm" not in real)

    tensors += tf_layers.layers(get_alias, d, ff, enc_layers, dec_layers)
    for dst, s in (("enc.ln", "encoder.layer_norm"), ("dec.ln", "decoder.layer_norm")):
        tensors += [(dst + ".weight", get(s + ".weight", [d])), (dst + ".bias", get(s + ".bias", [d]))]
    left = sorted(set(W) - used)
    if left:
        raise Refused("%s: %d tensors this importer does not know (first: %s)" % (src, len(left), ", ".join(left[:5])))
    bias = G.get("bias")
    if bias is not None and not np.any(bias):
        bias = None
    if bias is not None:
        tensors.append(("out_bias", bias.reshape(Vt)))
    log("no tokenizer embedded (OpenNMT-py keeps it in its transforms): the model reads and writes token ids")
    meta = [
        ("arch", "transformer"),
        ("d_model", d), ("n_heads", heads), ("d_ff", ff), ("enc_layers", enc_layers), ("dec_layers", dec_layers),
        ("src_vocab", Vs), ("tgt_vocab", Vt),
        ("norm", "pre"), ("ln_eps", eps), ("embed_scale", float(np.sqrt(d))),
        ("shared_embeddings", 1 if shared else 0), ("tied_output", 1 if tied else 0),
        ("bos_id", bos), ("eos_id", eos), ("pad_id", pad), ("unk_id", unk),
        ("ffn_activation", ACTIVATIONS[act]),
        ("position_encoding", POSITIONS[pe_kind]), ("position_offset", 0),
        ("output_bias", 0 if bias is None else 1),
        ("source_eos", 0),
        ("import.source", "opennmt"),
    ]
    return meta, tf_layers.order(tensors, enc_layers, dec_layers)
