# SPDX-License-Identifier: MIT
"""fairseq.py: a fairseq `transformer` checkpoint -> Transformer metadata and
tensors (docs/IMPORT.md).

SRC is the checkpoint file (checkpoint*.pt) or a directory holding one
checkpoint*.pt / model.pt, with dict.SRC.txt and dict.TGT.txt beside it
(fairseq-preprocess's dictionaries) and, when the data was encoded with
SentencePiece, its model (sentencepiece.bpe.model, spm.model or
*.model; one shared model, or spm.SRC.model / spm.TGT.model).

What fairseq's TransformerModel computes, and how it maps:
  post-norm, or pre-norm with final layer norms (normalize_before)
                                                  -> norm post | pre;
  token embedding * sqrt(d) unless no_scale_embedding -> embed_scale;
  + SinusoidalPositionalEmbedding (tensor2tensor's halves [sin | cos],
    10000^(-i/(d/2-1))), positions from padding_idx + 1
                                                  -> position_encoding sinusoid,
                                                     position_offset pad + 1;
  FFN activation_fn relu | gelu                   -> ffn_activation;
  decoder input starts with </s> (eos)            -> bos_id = eos;
  the source ends with </s>                       -> source_eos 1.
Dictionary ids: <s> 0, <pad> 1, </s> 2, <unk> 3, then dict.txt's lines.
"""

import glob
import os

import numpy as np

import spm_rewrite
import tf_layers
from errors import Refused
from weights import read_torch, to_numpy

ACTIVATIONS = {"relu": "relu", "gelu": "gelu"}
LN_EPS = 1e-5


def _cfg(ckpt, path):
    """The model's settings as a dict (fairseq >= 0.10: cfg["model"], a dict
    or Namespace; older: args, a Namespace)."""
    cfg = ckpt.get("cfg")
    m = None
    if cfg is not None:
        m = cfg.get("model") if isinstance(cfg, dict) else getattr(cfg, "model", None)
    if m is None:
        m = ckpt.get("args")
    if m is None:
        raise Refused("%s: no model settings (cfg['model'] or args)" % path)
    if not isinstance(m, dict):
        m = dict(vars(m)) if hasattr(m, "__dict__") else dict(m)
    return m


def _find(src):
    if os.path.isfile(src):
        return src, os.path.dirname(os.path.abspath(src))
    cands = sorted(glob.glob(os.path.join(src, "checkpoint*.pt"))) + sorted(glob.glob(os.path.join(src, "model.pt")))
    if len(cands) != 1:
        raise Refused("%s: %s; name the checkpoint file" % (
            src, "no checkpoint*.pt or model.pt" if not cands else "%d checkpoints (%s)" % (
                len(cands), ", ".join(os.path.basename(c) for c in cands))))
    return cands[0], src


def read_dict(path):
    """fairseq Dictionary: <s>, <pad>, </s>, <unk>, then one 'SYMBOL COUNT
    [#fairseq:overwrite]' per line."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
    except FileNotFoundError:
        raise Refused("%s: missing" % path)
    out = ["<s>", "<pad>", "</s>", "<unk>"]
    for n, ln in enumerate(lines, 1):
        if not ln.strip():
            continue
        parts = ln.rstrip().rsplit(" ", 1)
        word = parts[0]
        if word.endswith(" #fairseq:overwrite"):
            word = word[:-len(" #fairseq:overwrite")]
        elif len(parts) == 2 and parts[1] == "#fairseq:overwrite":
            word = parts[0].rsplit(" ", 1)[0]
        if word in out and not ln.rstrip().endswith("#fairseq:overwrite"):
            raise Refused("%s line %d: duplicate word %r" % (path, n, word))
        out.append(word)
    return out


def convert(src, log):
    ckpt_path, d = _find(src)
    ckpt = read_torch(ckpt_path)
    if not isinstance(ckpt, dict) or "model" not in ckpt:
        raise Refused("%s: not a fairseq checkpoint (no 'model' state dict)" % ckpt_path)
    a = _cfg(ckpt, ckpt_path)
    arch = a.get("arch", a.get("_name", "transformer"))
    if not str(arch).startswith("transformer"):
        raise Refused("%s: arch %r is not supported (transformer*)" % (ckpt_path, arch))

    def need(key, want, why):
        v = a.get(key, want)
        if v != want and not (v is None and want is False):
            raise Refused("%s: %s %r is not supported (%s)" % (ckpt_path, key, v, why))

    act = a.get("activation_fn", "relu")
    if act not in ACTIVATIONS:
        raise Refused("%s: activation_fn %r is not supported (%s)" % (ckpt_path, act, ", ".join(ACTIVATIONS)))
    need("encoder_learned_pos", False, "learned positions: only sinusoids")
    need("decoder_learned_pos", False, "learned positions: only sinusoids")
    need("no_token_positional_embeddings", False, "models with positions only")
    need("layernorm_embedding", False, "no layer norm of the embeddings")
    need("adaptive_softmax_cutoff", None, "a plain output layer")
    need("quant_noise_pq", 0, "no quantization noise")
    need("no_decoder_final_norm", False, "the decoder's final norm of pre-norm models")
    need("cross_self_attention", False, "standard cross-attention")
    need("decoder_output_dim", a.get("decoder_embed_dim"), "equal to decoder_embed_dim")
    need("decoder_input_dim", a.get("decoder_embed_dim"), "equal to decoder_embed_dim")
    d_model = a.get("encoder_embed_dim", 512)
    for k in ("decoder_embed_dim",):
        if a.get(k, d_model) != d_model:
            raise Refused("%s: %s %r differs from encoder_embed_dim %r (one d_model)" % (ckpt_path, k, a.get(k),
                                                                                       d_model))
    heads = a.get("encoder_attention_heads", 8)
    if a.get("decoder_attention_heads", heads) != heads:
        raise Refused("%s: decoder_attention_heads %r differs from encoder_attention_heads %r (one n_heads)" % (
            ckpt_path, a.get("decoder_attention_heads"), heads))
    ff = a.get("encoder_ffn_embed_dim", 2048)
    if a.get("decoder_ffn_embed_dim", ff) != ff:
        raise Refused("%s: decoder_ffn_embed_dim %r differs from encoder_ffn_embed_dim %r (one d_ff)" % (
            ckpt_path, a.get("decoder_ffn_embed_dim"), ff))
    pre = bool(a.get("encoder_normalize_before", False))
    if bool(a.get("decoder_normalize_before", False)) != pre:
        raise Refused("%s: encoder_normalize_before %r and decoder_normalize_before %r differ (one norm)" % (
            ckpt_path, pre, a.get("decoder_normalize_before")))
    enc_layers = a.get("encoder_layers", 6)
    dec_layers = a.get("decoder_layers", 6)
    scale = not a.get("no_scale_embedding", False)
    shared = bool(a.get("share_all_embeddings", False))
    tied = shared or bool(a.get("share_decoder_input_output_embed", False))

    sl, tl = a.get("source_lang"), a.get("target_lang")
    if not sl or not tl:
        task = ckpt.get("cfg", {}).get("task", {}) if isinstance(ckpt.get("cfg"), dict) else {}
        task = task if isinstance(task, dict) else dict(vars(task)) if hasattr(task, "__dict__") else {}
        sl, tl = sl or task.get("source_lang"), tl or task.get("target_lang")
    if not sl or not tl:
        dicts = sorted(glob.glob(os.path.join(d, "dict.*.txt")))
        raise Refused("%s: source_lang / target_lang unknown (dictionaries there: %s)" % (
            ckpt_path, ", ".join(os.path.basename(x) for x in dicts) or "none"))
    src_vocab = read_dict(os.path.join(d, "dict.%s.txt" % sl))
    tgt_vocab = read_dict(os.path.join(d, "dict.%s.txt" % tl))

    W = {k: to_numpy(v) for k, v in ckpt["model"].items()}
    used = set()

    def get(name, shape=None):
        if name not in W:
            raise Refused("%s: tensor %s is missing" % (ckpt_path, name))
        x = W[name]
        if shape is not None and list(x.shape) != list(shape):
            raise Refused("%s: tensor %s has shape %s, expected %s" % (ckpt_path, name, list(x.shape), list(shape)))
        used.add(name)
        return x

    Vs, Vt = get("encoder.embed_tokens.weight").shape[0], get("decoder.embed_tokens.weight").shape[0]
    if Vs < len(src_vocab) or Vt < len(tgt_vocab):
        raise Refused("%s: embeddings of %d / %d rows for dictionaries of %d / %d words" % (
            ckpt_path, Vs, Vt, len(src_vocab), len(tgt_vocab)))
    # fairseq pads dictionaries to a multiple of 8 with madeupwordNNNN
    src_vocab += ["madeupword%04d" % i for i in range(Vs - len(src_vocab))]
    tgt_vocab += ["madeupword%04d" % i for i in range(Vt - len(tgt_vocab))]
    tensors = [("src_embed", get("encoder.embed_tokens.weight", [Vs, d_model]))]
    if shared:
        if Vs != Vt or not np.array_equal(W["encoder.embed_tokens.weight"], W["decoder.embed_tokens.weight"]):
            raise Refused("%s: share_all_embeddings, but the two embeddings differ" % ckpt_path)
    else:
        tensors.append(("tgt_embed", get("decoder.embed_tokens.weight", [Vt, d_model])))
    if "decoder.output_projection.weight" in W:
        op = get("decoder.output_projection.weight", [Vt, d_model])
        if tied and not np.array_equal(op, W["decoder.embed_tokens.weight"]):
            raise Refused("%s: share_decoder_input_output_embed, but decoder.output_projection.weight differs "
                          "from the decoder embedding" % ckpt_path)
        if not tied:
            tensors.append(("out_proj", op))
    elif not tied:
        tensors.append(("out_proj", get("decoder.embed_out", [Vt, d_model])))
    for k in list(W):
        if k.endswith("embed_positions._float_tensor") or k.endswith(".version"):
            used.add(k)

    tensors += tf_layers.layers(get, d_model, ff, enc_layers, dec_layers)
    if pre:
        for dst, s in (("enc.ln", "encoder.layer_norm"), ("dec.ln", "decoder.layer_norm")):
            tensors += [(dst + ".weight", get(s + ".weight", [d_model])), (dst + ".bias", get(s + ".bias", [d_model]))]
    left = sorted(set(W) - used)
    if left:
        raise Refused("%s: %d tensors this importer does not know (first: %s)" % (ckpt_path, len(left),
                                                                                 ", ".join(left[:5])))

    # ---- SentencePiece models, renumbered to the dictionaries --------------
    specials = {"bos": 0, "pad": 1, "eos": 2, "unk": 3}
    pairs = []
    for side, lang, vocab in (("source", sl, src_vocab), ("target", tl, tgt_vocab)):
        names = ["spm.%s.model" % lang, "sentencepiece.bpe.model", "spm.model", "sentencepiece.model"]
        found = [os.path.join(d, n) for n in names if os.path.isfile(os.path.join(d, n))]
        pairs.append(found[0] if found else None)
    toks = []
    if pairs[0] is not None and pairs[1] is not None:
        for (side, vocab), path in zip((("source", src_vocab), ("target", tgt_vocab)), pairs):
            with open(path, "rb") as f:
                data = f.read()
            try:
                model, rep = spm_rewrite.rewrite(data, vocab, os.path.basename(path), specials)
            except spm_rewrite.SpmError as e:
                raise Refused(str(e))
            log("%s (%s): %s, %d pieces -> %d (%d from the .spm, %d unused)" % (
                os.path.basename(path), side, rep["model_type"], len(spm_rewrite.SpmModel(data).pieces),
                rep["pieces"], rep["from_spm"], rep["unused"]))
            toks.append(model)
        tensors.append(("tokenizer.src", np.frombuffer(toks[0], dtype=np.uint8)))
        if toks[1] != toks[0]:
            tensors.append(("tokenizer.tgt", np.frombuffer(toks[1], dtype=np.uint8)))
    else:
        log("no SentencePiece model beside the checkpoint: the model reads and writes token ids (--ids)")

    meta = [
        ("arch", "transformer"),
        ("d_model", d_model), ("n_heads", heads), ("d_ff", ff), ("enc_layers", enc_layers),
        ("dec_layers", dec_layers), ("src_vocab", Vs), ("tgt_vocab", Vt),
        ("norm", "pre" if pre else "post"), ("ln_eps", LN_EPS),
        ("embed_scale", float(np.sqrt(d_model)) if scale else 1.0),
        ("shared_embeddings", 1 if shared else 0), ("tied_output", 1 if tied else 0),
        ("bos_id", specials["eos"]), ("eos_id", specials["eos"]), ("pad_id", specials["pad"]),
        ("unk_id", specials["unk"]),
        ("ffn_activation", ACTIVATIONS[act]),
        ("position_encoding", "sinusoid"), ("position_offset", specials["pad"] + 1),
        ("output_bias", 0), ("source_eos", 1),
        ("import.source", "fairseq"),
    ]
    return meta, tf_layers.order(tensors, enc_layers, dec_layers)
