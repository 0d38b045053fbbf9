#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""nmk-retarget.py - kernel packs for devices without a run-time compiler
(FPGA flows; docs/PORTING.md, format in docs/FORMAT.md "Kernel packs").

  extract:   python3 scripts/nmk-retarget.py extract TEMPLATE.nmk DIR
      For every program of TEMPLATE (a pack made by `nmt-edge-convert kernels
      --model M --tuning TARGET.nmk.tuning.txt` on any device with a
      compiler) writes DIR/NN-NAME.cl (cl/common.cl, cl/chain.cl for the
      programs with a chain kernel, then cl/NAME.cl, or each file of a NAME
      joined by '+': the exact source the runtime builds) and DIR/NN-NAME.options
      (its -D defines), checking that cl/ is the source the template was
      built from.  Compile each with the vendor's offline compiler into
      DIR/NN-NAME.bin (e.g. aoc / v++, see docs/PORTING.md).

  assemble:  python3 scripts/nmk-retarget.py assemble TEMPLATE.nmk TARGET.nmk DIR -o OUT.nmk
      Writes OUT: the identity (device, driver, kernel parameters) of TARGET
      (`nmt-edge-convert kernels --probe` on the target), the program table
      of TEMPLATE, the binaries DIR/NN-NAME.bin.  The tuning ids of TEMPLATE
      and TARGET must agree (the same kernel parameters, so the same -D
      defines).
"""
import os
import re
import struct
import sys
import zlib

HDR, ENT = 896, 384
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def fnv(data, h=0xCBF29CE484222325):
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def read_pack(path):
    d = open(path, "rb").read()
    if len(d) < HDR or d[:8] != b"NMTKPACK" or struct.unpack_from("<I", d, 8)[0] != 1:
        sys.exit(f"{path}: not a version-1 kernel pack")
    if struct.unpack_from("<I", d, 892)[0] != zlib.crc32(d[:892]):
        sys.exit(f"{path}: header CRC-32 mismatch")
    n = struct.unpack_from("<I", d, 24)[0]
    ents = []
    for i in range(n):
        name, opts, oh, sh, off, size, crc = struct.unpack_from("<32s288sQQQQI", d, HDR + ENT * i)
        ents.append((name.rstrip(b"\0"), opts.rstrip(b"\0"), sh))
    return d, ents


def stem(i, name):
    return f"{i:02d}-{name.decode()}"


def cl_text(f):
    return open(os.path.join(ROOT, "cl", f), "rb").read()


def source(name):
    # a program's own texts: cl/NAME.cl, or for stems joined by '+' each in
    # that order (runtime/device/device_program.c nmt_device_program); cl/chain.cl
    # goes in where one of them has a line beginning with CHAIN_KERNEL(
    # (nmt_program_has_chain)
    own = [cl_text(s + ".cl") for s in name.decode().split("+")]
    chained = any(re.search(rb"^CHAIN_KERNEL\(", t, re.M) is not None for t in own)
    texts = [cl_text("common.cl")] + ([cl_text("chain.cl")] if chained else []) + own
    h = 0xCBF29CE484222325
    for t in texts:
        h = fnv(struct.pack("<Q", len(t)) + t, h)
    return texts, h


def extract(template, out):
    _, ents = read_pack(template)
    os.makedirs(out, exist_ok=True)
    for i, (name, opts, sh) in enumerate(ents):
        texts, h = source(name)
        if h != sh:
            sys.exit(f"cl/{name.decode()}.cl is not the source {template} was built from")
        open(os.path.join(out, stem(i, name) + ".cl"), "wb").write(b"".join(texts))
        defines = b" ".join(o for o in opts.split() if not o.startswith(b"-cl-std"))
        open(os.path.join(out, stem(i, name) + ".options"), "wb").write(defines + b"\n")
        print(f"{stem(i, name)}.cl  {defines.decode()}")


def assemble(template, target, bins, out):
    t, ents = read_pack(template)
    g, _ = read_pack(target)
    if t[40:48] != g[40:48]:
        sys.exit("template and target were made with other kernel parameters (tuning ids differ): "
                 "make the template with --tuning TARGET.nmk.tuning.txt")
    blobs = [open(os.path.join(bins, stem(i, e[0]) + ".bin"), "rb").read() for i, e in enumerate(ents)]
    n = len(ents)
    pos, offs = HDR + ENT * n, []
    for b in blobs:
        pos = (pos + 63) // 64 * 64
        offs.append(pos)
        pos += len(b)
    d = bytearray(pos)
    for i, ((name, opts, sh), b) in enumerate(zip(ents, blobs)):
        d[HDR + ENT * i:HDR + ENT * (i + 1)] = struct.pack(
            "<32s288sQQQQII24s", name, opts, fnv(opts + b"\0"), sh, offs[i], len(b), zlib.crc32(b), 0, b"")
        d[offs[i]:offs[i] + len(b)] = b
    hdr = bytearray(g[:HDR])  # identity strings, device and tuning ids of the target
    struct.pack_into("<QII", hdr, 16, pos, n, zlib.crc32(bytes(d[HDR:HDR + ENT * n])))
    struct.pack_into("<I", hdr, 892, zlib.crc32(bytes(hdr[:892])))
    d[:HDR] = hdr
    tmp = out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(d)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, out)
    print(f"{out}: {n} programs, {pos} bytes")


if __name__ == "__main__":
    a = sys.argv[1:]
    if len(a) == 3 and a[0] == "extract":
        extract(a[1], a[2])
    elif len(a) == 6 and a[0] == "assemble" and a[4] == "-o":
        assemble(a[1], a[2], a[3], a[5])
    else:
        sys.exit(__doc__)
