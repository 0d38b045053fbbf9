# SPDX-License-Identifier: MIT
"""Reader of .nmt files (docs/FORMAT.md) for the benchmark scripts: the
metadata and the fp32 tensors by name. A verification aid for files this
project wrote, not a loader for untrusted files: it checks the magic only."""
import struct

import numpy as np

MAGIC = b"NMTEDGE\x1a"


def read_nmt(path, fp32_only=True):
    """(metadata dict, {name: fp32 numpy array}). With fp32_only a tensor of
    another dtype ends the program with a message; otherwise it is skipped."""
    with open(path, "rb") as f:
        b = f.read()
    if b[:8] != MAGIC:
        raise SystemExit(f"{path}: not an .nmt file")
    meta_off, _meta_size, table_off = struct.unpack_from("<QQQ", b, 24)
    n_t, n_m = struct.unpack_from("<II", b, 48)
    meta, p = {}, meta_off
    for _ in range(n_m):
        kl, ty, _r, cnt = struct.unpack_from("<HBBI", b, p)
        key = b[p + 8:p + 8 + kl].decode()
        q = p + 8 + (kl + 7) // 8 * 8
        if ty == 1:
            v, vl = struct.unpack_from("<q", b, q)[0], 8
        elif ty == 2:
            v, vl = struct.unpack_from("<d", b, q)[0], 8
        else:
            v, vl = b[q:q + cnt].decode(), (cnt + 7) // 8 * 8
        meta[key] = v
        p = q + vl
    tensors = {}
    for i in range(n_t):
        e = table_off + 128 * i
        name = b[e:e + 80].split(b"\0")[0].decode()
        dtype, ndim = struct.unpack_from("<II", b, e + 80)
        shape = struct.unpack_from("<4I", b, e + 88)[:ndim]
        off = struct.unpack_from("<Q", b, e + 104)[0]
        if dtype != 0:
            if fp32_only:
                raise SystemExit(f"{path}: tensor {name} is not fp32")
            continue
        tensors[name] = np.frombuffer(b, "<f4", int(np.prod(shape)), off).reshape(shape).copy()
    return meta, tensors
