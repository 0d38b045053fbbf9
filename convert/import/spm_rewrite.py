# SPDX-License-Identifier: MIT
"""spm_rewrite.py: renumber a SentencePiece .model to another vocabulary.

A SentencePiece model is a protobuf ModelProto; this file reads and writes
its wire format by hand (no protobuf dependency):

  ModelProto   1 pieces (repeated SentencePiece), 2 trainer_spec, 3 normalizer_spec,
               4 self_test_data, 5 denormalizer_spec
  SentencePiece  1 piece (string), 2 score (float), 3 type (enum)
  TrainerSpec    3 model_type (1 unigram, 2 BPE, 3 word, 4 char), 4 vocab_size,
                 40 unk_id, 41 bos_id, 42 eos_id, 43 pad_id (int32; -1 allowed)

rewrite(spm_bytes, vocab) returns a model whose piece i is vocab[i], so that
the ids SentencePiece gives are the model's own (Marian's vocab.json numbers
pieces differently from its .spm files).  Every field other than the pieces
and the trainer spec's ids and vocab_size is copied byte for byte.
"""

import struct

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
TYPE_NAMES = {NORMAL: "normal", UNKNOWN: "unknown", CONTROL: "control", USER_DEFINED: "user-defined",
              UNUSED: "unused", BYTE: "byte"}
UNIGRAM, BPE, WORD, CHAR = 1, 2, 3, 4
MODEL_TYPES = {UNIGRAM: "unigram", BPE: "bpe", WORD: "word", CHAR: "char"}


class SpmError(ValueError):
    pass


# ------------------------------------------------------------------------ #
# Wire format                                                              #
# ------------------------------------------------------------------------ #

def _varint(buf, pos):
    v, shift = 0, 0
    while True:
        if pos >= len(buf):
            raise SpmError("truncated varint")
        b = buf[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        if b < 0x80:
            return v, pos
        shift += 7
        if shift >= 70:
            raise SpmError("over-long varint")


def _enc_varint(v):
    if v < 0:
        v += 1 << 64  # int32/int64 negatives: ten bytes, two's complement
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def fields(buf):
    """[(field number, wire type, value, raw bytes of the whole field)]."""
    out, pos = [], 0
    while pos < len(buf):
        start = pos
        key, pos = _varint(buf, pos)
        num, wt = key >> 3, key & 7
        if wt == 0:
            val, pos = _varint(buf, pos)
        elif wt == 1:
            if pos + 8 > len(buf):
                raise SpmError("truncated fixed64")
            val, pos = buf[pos:pos + 8], pos + 8
        elif wt == 2:
            n, pos = _varint(buf, pos)
            if pos + n > len(buf):
                raise SpmError("truncated length-delimited field")
            val, pos = buf[pos:pos + n], pos + n
        elif wt == 5:
            if pos + 4 > len(buf):
                raise SpmError("truncated fixed32")
            val, pos = buf[pos:pos + 4], pos + 4
        else:
            raise SpmError("unsupported wire type %d" % wt)
        out.append((num, wt, val, buf[start:pos]))
    return out


def _field_varint(num, v):
    return _enc_varint(num << 3) + _enc_varint(v)


def _field_bytes(num, b):
    return _enc_varint(num << 3 | 2) + _enc_varint(len(b)) + b


def _int32(v):
    """A varint field's value as int32 (negatives arrive as 64-bit two's complement)."""
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v


# ------------------------------------------------------------------------ #
# Model                                                                    #
# ------------------------------------------------------------------------ #

class Piece:
    def __init__(self, piece, score, typ):
        self.piece, self.score, self.type = piece, score, typ


class SpmModel:
    """The pieces and trainer-spec values of a SentencePiece model."""

    def __init__(self, data):
        self.data = bytes(data)
        self.pieces = []
        self.trainer = b""
        self.model_type = UNIGRAM
        self.ids = {"unk": 0, "bos": 1, "eos": 2, "pad": -1}  # SentencePiece's defaults
        has_trainer = False
        for num, wt, val, _raw in fields(self.data):
            if num == 1 and wt == 2:
                piece, score, typ = b"", 0.0, NORMAL
                for n2, w2, v2, _ in fields(val):
                    if n2 == 1 and w2 == 2:
                        piece = bytes(v2)
                    elif n2 == 2 and w2 == 5:
                        score = struct.unpack("<f", v2)[0]
                    elif n2 == 3 and w2 == 0:
                        typ = v2
                self.pieces.append(Piece(piece, score, typ))
            elif num == 2 and wt == 2:
                has_trainer = True
                self.trainer = bytes(val)
                for n2, w2, v2, _ in fields(val):
                    if n2 == 3 and w2 == 0:
                        self.model_type = v2
                    for name, fnum in (("unk", 40), ("bos", 41), ("eos", 42), ("pad", 43)):
                        if n2 == fnum and w2 == 0:
                            self.ids[name] = _int32(v2)
        if not self.pieces:
            raise SpmError("no pieces (not a SentencePiece model)")
        if not has_trainer:
            self.trainer = b""
        self.index = {p.piece: i for i, p in enumerate(self.pieces)}

    def rewritten(self, pieces, ids):
        """The same model with `pieces` ([Piece]) and trainer-spec `ids`
        ({"unk", "bos", "eos", "pad"} -> int) in place of its own."""
        trainer = bytearray()
        for num, wt, _val, raw in fields(self.trainer):
            if num in (4, 40, 41, 42, 43) and wt == 0:
                continue
            trainer += raw
        trainer += _field_varint(4, len(pieces))
        for name, fnum in (("unk", 40), ("bos", 41), ("eos", 42), ("pad", 43)):
            trainer += _field_varint(fnum, ids[name])
        out = bytearray()
        for p in pieces:
            msg = _field_bytes(1, p.piece) + _enc_varint(2 << 3 | 5) + struct.pack("<f", p.score)
            if p.type != NORMAL:
                msg += _field_varint(3, p.type)
            out += _field_bytes(1, msg)
        trainer_done = False
        for num, wt, _val, raw in fields(self.data):
            if num == 1 and wt == 2:
                continue
            if num == 2 and wt == 2:
                out += _field_bytes(2, bytes(trainer))
                trainer_done = True
                continue
            out += raw
        if not trainer_done:
            out += _field_bytes(2, bytes(trainer))
        return bytes(out)


def rewrite(spm_bytes, vocab, side, specials):
    """Renumber the SentencePiece model `spm_bytes` to `vocab` (a list: piece
    string of each id).  `side` names the file in messages; `specials` maps
    "unk", "eos", "pad" (and optionally "bos") to ids of `vocab`.

    Piece i of the result is vocab[i], with the .spm's score and type when the
    .spm has it; a vocabulary piece the .spm lacks becomes UNUSED (never
    emitted; decoded as its text).  The .spm's unknown piece must be the
    vocabulary's unk; control pieces the vocabulary lacks (<s>) are dropped
    (SentencePiece never emits a control piece).  A normal piece of the .spm
    that the vocabulary lacks is refused: SentencePiece would emit it and the
    framework would map it to <unk>, which no SentencePiece model can say.
    Returns (model bytes, report dict)."""
    m = SpmModel(spm_bytes)
    if m.model_type not in (UNIGRAM, BPE):
        raise SpmError("%s: model_type %s is not supported (unigram, bpe)" % (
            side, MODEL_TYPES.get(m.model_type, m.model_type)))
    vindex = {}
    for i, p in enumerate(vocab):
        vindex[p.encode()] = i
    missing = [p for p in m.pieces if p.piece not in vindex and p.type in (NORMAL, USER_DEFINED, BYTE)]
    if missing:
        first = ", ".join(repr(p.piece.decode("utf-8", "replace")) for p in missing[:5])
        raise SpmError("%s: %d of its %d pieces are not in vocab.json (first: %s): the framework maps them to <unk>, "
                       "which an embedded SentencePiece model cannot reproduce" % (
                           side, len(missing), len(m.pieces), first))
    unk_pieces = [p for p in m.pieces if p.type == UNKNOWN]
    if len(unk_pieces) != 1:
        raise SpmError("%s: %d unknown pieces, expected 1" % (side, len(unk_pieces)))
    if vindex.get(unk_pieces[0].piece) != specials["unk"]:
        raise SpmError("%s: its unknown piece %r is not vocab.json's unk (id %d)" % (
            side, unk_pieces[0].piece.decode("utf-8", "replace"), specials["unk"]))
    has_unused = False
    if m.model_type == BPE:
        extra = [p for p in vocab if p.encode() not in m.index]
        extra = [p for p in extra if vindex[p.encode()] not in specials.values()]
        if extra:
            raise SpmError("%s: a BPE model, and vocab.json has %d pieces it lacks (first: %s): as unused pieces "
                           "they would change the BPE merges; only unigram models can be renumbered" % (
                               side, len(extra), ", ".join(repr(p) for p in extra[:5])))
    pieces = []
    n_unused = 0
    special_ids = {v: k for k, v in specials.items()}
    for i, text in enumerate(vocab):
        b = text.encode()
        j = m.index.get(b)
        if j is not None:
            src = m.pieces[j]
            pieces.append(Piece(b, src.score, src.type))
        elif i in special_ids:
            pieces.append(Piece(b, 0.0, CONTROL))
        else:
            pieces.append(Piece(b, 0.0, UNUSED))
            n_unused += 1
            has_unused = True
    for i in (specials["eos"], specials["pad"]):
        if pieces[i].type != CONTROL:
            raise SpmError("%s: piece %r (id %d) is %s in the .spm; the end-of-sentence and padding pieces must be "
                           "control pieces" % (side, vocab[i], i, TYPE_NAMES.get(pieces[i].type, pieces[i].type)))
    ids = {"unk": specials["unk"], "bos": specials.get("bos", -1), "eos": specials["eos"], "pad": specials["pad"]}
    dropped = [p.piece.decode("utf-8", "replace") for p in m.pieces if p.piece not in vindex]
    # An unknown span of the text (characters no piece has) is looked up in
    # vocab.json by its text: a vocabulary piece made only of such characters
    # gets its id from the framework and <unk> here (docs/IMPORT.md).
    known = set()
    for p in m.pieces:
        if p.type in (NORMAL, USER_DEFINED):
            known.update(p.piece.decode("utf-8", "replace"))
    foreign = [v for v in vocab if v.encode() not in m.index and vindex[v.encode()] not in special_ids
               and not any(ch in known for ch in v)]
    report = {"pieces": len(vocab), "from_spm": len(vocab) - n_unused, "unused": n_unused, "dropped": dropped,
              "model_type": MODEL_TYPES[m.model_type], "has_unused": has_unused, "foreign": foreign}
    return m.rewritten(pieces, ids), report
