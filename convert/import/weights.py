# SPDX-License-Identifier: MIT
"""weights.py: read a checkpoint's tensors as float32 numpy arrays.

safetensors files are read by hand (an 8-byte little-endian header length,
a JSON header {name: {dtype, shape, data_offsets}}, then the raw
little-endian data), so no package beyond numpy is needed; a pickle
(pytorch_model.bin, *.pt) needs torch, imported only then.
"""

import json
import mmap
import os

import numpy as np

from errors import Refused

_ST_DTYPES = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "BF16": "bf16", "I64": "<i8", "I32": "<i4",
              "U8": "u1", "I8": "i1", "BOOL": "?"}


def read_safetensors(path):
    """{name: float32 or integer numpy array} of a .safetensors file."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < 8:
            raise Refused("%s: not a safetensors file (%d bytes)" % (path, size))
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    n = int.from_bytes(mm[:8], "little")
    if n > size - 8:
        raise Refused("%s: not a safetensors file (header of %d bytes in a %d-byte file)" % (path, n, size))
    try:
        header = json.loads(mm[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise Refused("%s: not a safetensors file (%s)" % (path, e))
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt = _ST_DTYPES.get(info.get("dtype"))
        if dt is None:
            raise Refused("%s: tensor %s has dtype %r, which is not supported" % (path, name, info.get("dtype")))
        b, e = info["data_offsets"]
        shape = tuple(info["shape"])
        if not 0 <= b <= e <= size - base:
            raise Refused("%s: tensor %s lies outside the file" % (path, name))
        raw = mm[base + b:base + e]
        if dt == "bf16":
            a = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            a = np.frombuffer(raw, dtype=dt)
        count = int(np.prod(shape)) if shape else 1
        if a.size != count:
            raise Refused("%s: tensor %s has %d elements for shape %s" % (path, name, a.size, list(shape)))
        a = a.reshape(shape)
        out[name] = a.astype(np.float32) if a.dtype.kind == "f" else a
    mm.close()
    return out


def read_torch(path):
    """{name: numpy array} of a torch pickle (a state dict, possibly nested
    under 'model' / 'state_dict')."""
    try:
        import torch
    except ImportError:
        raise Refused("%s is a PyTorch pickle: reading it needs torch (pip install torch), or save the model "
                      "as safetensors" % path)
    try:
        obj = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as e:  # noqa: BLE001 - any unpickling failure is the file's
        raise Refused("%s: cannot read it with torch.load: %s" % (path, e))
    return obj


def to_numpy(t):
    """A torch tensor or numpy array as numpy (floats as float32)."""
    if hasattr(t, "detach"):
        t = t.detach().cpu()
        if t.is_floating_point():
            t = t.float()
        t = t.numpy()
    a = np.asarray(t)
    return a.astype(np.float32) if a.dtype.kind == "f" else a


def read_hf_weights(src):
    """The tensors of a Hugging Face model directory: model.safetensors,
    a sharded model.safetensors.index.json, or pytorch_model.bin."""
    st = os.path.join(src, "model.safetensors")
    idx = os.path.join(src, "model.safetensors.index.json")
    pt = os.path.join(src, "pytorch_model.bin")
    if os.path.isfile(st):
        return read_safetensors(st), st
    if os.path.isfile(idx):
        with open(idx, encoding="utf-8") as f:
            shards = sorted(set(json.load(f)["weight_map"].values()))
        out = {}
        for s in shards:
            out.update(read_safetensors(os.path.join(src, s)))
        return out, idx
    if os.path.isfile(pt):
        obj = read_torch(pt)
        if not isinstance(obj, dict):
            raise Refused("%s: not a state dict (a %s)" % (pt, type(obj).__name__))
        return {k: to_numpy(v) for k, v in obj.items()}, pt
    raise Refused("%s: no model.safetensors, model.safetensors.index.json or pytorch_model.bin" % src)
