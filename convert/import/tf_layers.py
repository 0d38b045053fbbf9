# SPDX-License-Identifier: MIT
"""tf_layers.py: the encoder and decoder layers of fairseq's transformer and
of the models derived from it (Hugging Face Marian, BART, FSMT), which all
name a layer's tensors the same way, mapped to the Transformer family's
names (families/transformer/transformer_cfg.c nmt_tf_catalogue)."""


def layers(get, d, ff, enc_layers, dec_layers):
    """[(nmt-edge name, array)] of every layer; get(source name, shape)
    returns the source's tensor (and refuses a missing or misshapen one)."""
    out = []

    def lin(dst, src, rows, cols):
        out.append((dst + ".weight", get(src + ".weight", [rows, cols])))
        out.append((dst + ".bias", get(src + ".bias", [rows])))

    def ln(dst, src):
        out.append((dst + ".weight", get(src + ".weight", [d])))
        out.append((dst + ".bias", get(src + ".bias", [d])))

    def attn(dst, src):
        for a, b in (("q", "q_proj"), ("k", "k_proj"), ("v", "v_proj"), ("o", "out_proj")):
            lin("%s.%s" % (dst, a), "%s.%s" % (src, b), d, d)

    for l in range(enc_layers):
        s = "encoder.layers.%d" % l
        attn("enc.%d.self_attn" % l, s + ".self_attn")
        ln("enc.%d.ln1" % l, s + ".self_attn_layer_norm")
        ln("enc.%d.ln2" % l, s + ".final_layer_norm")
        lin("enc.%d.ffn.fc1" % l, s + ".fc1", ff, d)
        lin("enc.%d.ffn.fc2" % l, s + ".fc2", d, ff)
    for l in range(dec_layers):
        s = "decoder.layers.%d" % l
        attn("dec.%d.self_attn" % l, s + ".self_attn")
        attn("dec.%d.cross_attn" % l, s + ".encoder_attn")
        ln("dec.%d.ln1" % l, s + ".self_attn_layer_norm")
        ln("dec.%d.ln2" % l, s + ".encoder_attn_layer_norm")
        ln("dec.%d.ln3" % l, s + ".final_layer_norm")
        lin("dec.%d.ffn.fc1" % l, s + ".fc1", ff, d)
        lin("dec.%d.ffn.fc2" % l, s + ".fc2", d, ff)
    return out


def order(tensors, enc_layers, dec_layers):
    """The tensors in the family catalogue's order (nmt_tf_catalogue:
    embeddings, each encoder layer, enc.ln, each decoder layer, dec.ln), the
    others (out_bias, tokenizers) after, by name."""
    names = ["src_embed", "tgt_embed", "out_proj"]

    def lin(p):
        return [p + ".weight", p + ".bias"]

    for l in range(enc_layers):
        p = "enc.%d." % l
        for x in "qkvo":
            names += lin(p + "self_attn." + x)
        names += lin(p + "ln1") + lin(p + "ln2") + lin(p + "ffn.fc1") + lin(p + "ffn.fc2")
    names += lin("enc.ln")
    for l in range(dec_layers):
        p = "dec.%d." % l
        for x in "qkvo":
            names += lin(p + "self_attn." + x)
        for x in "qkvo":
            names += lin(p + "cross_attn." + x)
        names += lin(p + "ln1") + lin(p + "ln2") + lin(p + "ln3") + lin(p + "ffn.fc1") + lin(p + "ffn.fc2")
    names += lin("dec.ln")
    rank = {n: i for i, n in enumerate(names)}
    return sorted(tensors, key=lambda t: (rank.get(t[0], len(names)), t[0] if t[0] not in rank else ""))
