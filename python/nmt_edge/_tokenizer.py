# SPDX-License-Identifier: MIT
"""_tokenizer.py — the SentencePiece-compatible tokenizer: a model's embedded
one (Translator.tokenize / detokenize) and nmt_edge.Tokenizer on its own."""

import ctypes
import operator
import os
from ctypes import POINTER, byref, c_int32, c_size_t, c_uint32, c_void_p

from . import _lib
from ._errors import Error, check


def to_bytes(text):
    """UTF-8 bytes of a str (bytes pass through)."""
    if isinstance(text, bytes):
        return text
    if isinstance(text, str):
        return text.encode("utf-8")
    raise TypeError("expected str or bytes, got %s" % type(text).__name__)


def id_array(ids):
    """A ctypes int32 array of a sequence of ints; an id outside int32 is
    NMT_ERR_TOKEN_OUT_OF_RANGE (the library's status for a bad id)."""
    ids = [operator.index(t) for t in ids]  # ints, numpy integers; not floats
    for t in ids:
        if not -(1 << 31) <= t < (1 << 31):
            raise Error(_lib.ERR_TOKEN_OUT_OF_RANGE, "token id %d does not fit int32" % t)
    return (c_int32 * max(len(ids), 1))(*ids), len(ids)


class TokenizerView:
    """Calls on an nmt_tokenizer handle.  `owner` keeps the memory the handle
    lives in alive (a session, or a standalone tokenizer's arena)."""

    def __init__(self, handle, owner):
        self._t = handle
        self._owner = owner

    def encode(self, text):
        """The ids of one sentence (str or UTF-8 bytes)."""
        lib = _lib.load()
        data = to_bytes(text)
        ids = POINTER(c_int32)()
        n = c_uint32()
        check(lib.nmt_tokenizer_encode(self._t, data, len(data), byref(ids), byref(n)))
        return ids[:n.value]

    def decode_bytes(self, ids):
        lib = _lib.load()
        arr, n = id_array(ids)
        cap = lib.nmt_tokenizer_decode_bound(self._t, n)
        out = ctypes.create_string_buffer(max(cap, 1))
        out_len = c_size_t()
        check(lib.nmt_tokenizer_decode(self._t, arr, n, out, cap, byref(out_len)))
        return out.raw[:out_len.value]

    def decode(self, ids):
        """The text of a sequence of ids (invalid UTF-8 becomes U+FFFD)."""
        return self.decode_bytes(ids).decode("utf-8", "replace")

    def piece(self, token_id):
        """The piece string of an id, e.g. "▁Paket"."""
        lib = _lib.load()
        ptr = c_void_p()
        n = c_size_t()
        if not -(1 << 31) <= token_id < (1 << 31):
            raise Error(_lib.ERR_TOKEN_OUT_OF_RANGE, "token id %d does not fit int32" % token_id)
        check(lib.nmt_tokenizer_piece(self._t, token_id, byref(ptr), byref(n)))
        return ctypes.string_at(ptr.value, n.value).decode("utf-8", "replace")

    def info(self):
        """nmt_tokenizer_info as a dict."""
        lib = _lib.load()
        info = _lib.nmt_tokenizer_info()
        check(lib.nmt_tokenizer_get_info(self._t, byref(info)))
        return struct_dict(info)


def struct_dict(s):
    """A Structure's fields as a dict (char arrays and char * as str)."""
    out = {}
    for name, _ in s._fields_:
        v = getattr(s, name)
        out[name] = v.decode("utf-8", "replace") if isinstance(v, bytes) else v
    return out


class Tokenizer(TokenizerView):
    """A tokenizer on its own, no device: a SentencePiece `.model` file, or
    the one embedded in an `.nmt` model (the source side, or the target side
    with target=True).  `max_text_bytes` bounds the sentences it encodes."""

    def __init__(self, path, target=False, max_text_bytes=2048):
        lib = _lib.load()
        with open(os.fspath(path), "rb") as f:
            image = f.read()
        buf = ctypes.create_string_buffer(image, len(image))
        model = c_void_p(ctypes.addressof(buf))
        size = c_size_t(len(image))
        inner = c_void_p()
        inner_size = c_size_t()
        st = lib.nmt_model_tokenizer(model, size, 1 if target else 0, byref(inner), byref(inner_size))
        if st == _lib.OK:
            model, size = inner, inner_size
        elif st != _lib.ERR_MODEL_BAD_MAGIC:  # an .nmt file: refused, or without a tokenizer
            raise Error(st, os.fsdecode(path))
        need = c_size_t()
        check(lib.nmt_tokenizer_arena_size(model, size, max_text_bytes, byref(need)), os.fsdecode(path))
        arena = _lib.AlignedBuffer(need.value, _lib.ARENA_ALIGNMENT)
        handle = c_void_p()
        check(lib.nmt_tokenizer_create(model, size, max_text_bytes, c_void_p(arena.address), need.value,
                                       byref(handle)), os.fsdecode(path))
        # the arena holds a copy of the model bytes: the file image may go
        super().__init__(handle, arena)
