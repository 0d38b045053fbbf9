# SPDX-License-Identifier: MIT
"""nmt_file.py: a small writer of .nmt files (format version 1, docs/FORMAT.md).

The layout is the one docs/FORMAT.md's worked example and writer/nmt_writer.c
write: header at 0, metadata at 128, the tensor table right after it, data
at the next multiple of 64, each tensor 64-byte aligned, in table order.
Only F32 and U8 tensors are written here: nmt-edge-convert quantizes
(export's code path) after the runtime's checks.
"""

import struct
import zlib

import numpy as np

MAGIC = b"NMTEDGE\x1a"
VERSION = 1
DTYPE_F32, DTYPE_U8 = 0, 3
META_I64, META_F64, META_STR = 1, 2, 3
MAX_NAME = 79


def _pad(b, n):
    return b + bytes(-len(b) % n)


def _meta_record(key, value):
    k = key.encode()
    if not 1 <= len(k) <= 63:
        raise ValueError("metadata key %r: 1 to 63 bytes" % key)
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, str):
        typ, v = META_STR, value.encode()
        if b"\x00" in v:
            raise ValueError("metadata %s: a NUL byte in the value" % key)
    elif isinstance(value, int):
        typ, v = META_I64, struct.pack("<q", value)
    elif isinstance(value, float):
        typ, v = META_F64, struct.pack("<d", value)
    else:
        raise TypeError("metadata %s: %r is not int, float or str" % (key, value))
    count = len(v) if typ == META_STR else 1
    return struct.pack("<HBBI", len(k), typ, 0, count) + _pad(k, 8) + _pad(v, 8)


class Tensor:
    """One tensor: a name, a dtype and its bytes (a C-contiguous array)."""

    def __init__(self, name, array):
        if not 1 <= len(name.encode()) <= MAX_NAME:
            raise ValueError("tensor name %r: 1 to %d bytes" % (name, MAX_NAME))
        if array.dtype == np.uint8:
            if array.ndim != 1:
                raise ValueError("tensor %s: a U8 tensor is 1-D" % name)
            self.dtype = DTYPE_U8
            self.data = np.ascontiguousarray(array)
        else:
            if not 1 <= array.ndim <= 4:
                raise ValueError("tensor %s: 1 to 4 dimensions, not %d" % (name, array.ndim))
            self.dtype = DTYPE_F32
            self.data = np.ascontiguousarray(array, dtype="<f4")
        if min(self.data.shape) < 1:
            raise ValueError("tensor %s: an empty dimension %s" % (name, self.data.shape))
        self.name = name
        self.shape = list(self.data.shape)
        self.nbytes = self.data.nbytes
        self.crc = zlib.crc32(memoryview(self.data).cast("B"))


def write_nmt(fileobj, meta, tensors):
    """Write a model to the binary file object `fileobj`.

    meta: [(key, int | float | str)] in file order; tensors: [(name, numpy
    array)] in table order (float arrays become F32, uint8 arrays U8).
    Returns the number of bytes written."""
    keys = [k for k, _ in meta]
    if len(set(keys)) != len(keys):
        raise ValueError("duplicate metadata keys")
    ts = [Tensor(n, a) for n, a in tensors]
    if len({t.name for t in ts}) != len(ts):
        raise ValueError("duplicate tensor names")
    meta_blob = b"".join(_meta_record(k, v) for k, v in meta)
    table_off = 128 + len(meta_blob)
    data_off = table_off + 128 * len(ts)
    data_off += -data_off % 64
    table, offsets, end = b"", [], data_off
    for t in ts:
        off = end + (-end % 64)
        offsets.append(off)
        end = off + t.nbytes
        dims = t.shape + [0] * (4 - len(t.shape))
        table += struct.pack("<80sII4IQQII", t.name.encode(), t.dtype, len(t.shape), *dims, off, t.nbytes, t.crc, 0)
    head = struct.pack("<8sIIQQQQIIQII52x", MAGIC, VERSION, 128, end, 128, len(meta_blob), table_off, len(ts),
                       len(meta), data_off, zlib.crc32(meta_blob), zlib.crc32(table))
    head += struct.pack("<I", zlib.crc32(head))
    fileobj.write(head + meta_blob + table + bytes(data_off - table_off - len(table)))
    pos = data_off
    for t, off in zip(ts, offsets):
        fileobj.write(bytes(off - pos))
        fileobj.write(memoryview(t.data).cast("B"))
        pos = off + t.nbytes
    return pos
