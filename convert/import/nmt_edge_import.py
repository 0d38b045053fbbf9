# SPDX-License-Identifier: MIT
"""nmt_edge_import.py: the importer behind `nmt-edge-convert import`.

    python3 nmt_edge_import.py FORMAT SRC (-o OUT.nmt | --output-fd N) [--quiet]

writes an fp32 .nmt model (docs/FORMAT.md) of the model in SRC.  FORMAT:
hf-marian (a Hugging Face MarianMTModel directory), fairseq (a transformer
checkpoint with its dictionaries), opennmt (an OpenNMT-py 3.x checkpoint).  `nmt-edge-convert
import` runs this script with --output-fd (a temporary file it created),
then checks the model with the runtime's code and quantizes it (export's
code path); run alone with -o, the file is written here without those
checks (docs/IMPORT.md).  Exit status: 0 written, 1 refused or failed
(nothing written), 2 bad usage.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from errors import Refused  # noqa: E402
import nmt_file  # noqa: E402

PROG = "nmt-edge-convert import"
FORMATS = ("hf-marian", "fairseq", "opennmt")


def usage(out):
    out.write("usage: nmt_edge_import.py FORMAT SRC (-o OUT.nmt | --output-fd N) [--quiet]\n"
              "FORMAT: %s\n" % ", ".join(FORMATS))


def parse(argv):
    pos, out, fd, quiet = [], None, None, False
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            usage(sys.stdout)
            sys.exit(0)
        if a in ("-o", "--output", "--output-fd"):
            if i + 1 >= len(argv):
                raise SystemExit(_usage_error("%s needs a value" % a))
            if a == "--output-fd":
                try:
                    fd = int(argv[i + 1])
                except ValueError:
                    raise SystemExit(_usage_error("--output-fd %r: not a number" % argv[i + 1]))
            else:
                out = argv[i + 1]
            i += 2
            continue
        if a == "--quiet":
            quiet = True
        elif a.startswith("-"):
            raise SystemExit(_usage_error("unknown option %r" % a))
        else:
            pos.append(a)
        i += 1
    if len(pos) != 2 or (out is None) == (fd is None):
        raise SystemExit(_usage_error("expected FORMAT SRC and one of -o FILE, --output-fd N"))
    if pos[0] not in FORMATS:
        raise SystemExit(_usage_error("unknown format %r (%s)" % (pos[0], ", ".join(FORMATS))))
    return pos[0], pos[1], out, fd, quiet


def _usage_error(msg):
    sys.stderr.write("%s: %s\n" % (PROG, msg))
    return 2


def convert(fmt, src, log):
    """(metadata, tensors) of the model in src; Refused when it cannot be imported."""
    if not os.path.exists(src):
        raise Refused("'%s' does not exist" % src)
    if fmt == "hf-marian":
        if not os.path.isdir(src):
            raise Refused("'%s' is not a directory (hf-marian reads a saved MarianMTModel directory)" % src)
        import hf_marian
        return hf_marian.convert(src, log)
    if fmt == "fairseq":
        import fairseq
        return fairseq.convert(src, log)
    if fmt == "opennmt":
        if not os.path.isfile(src):
            raise Refused("'%s' is not a file (opennmt reads a checkpoint, model_step_N.pt)" % src)
        import opennmt
        return opennmt.convert(src, log)
    raise Refused("unknown format %r" % fmt)


def main(argv):
    fmt, src, out, fd, quiet = parse(argv)
    def log(msg):
        if not quiet:
            sys.stderr.write("%s: %s\n" % (PROG, msg))

    try:
        meta, tensors = convert(fmt, src, log)
        if fd is not None:
            with os.fdopen(fd, "wb") as f:
                n = nmt_file.write_nmt(f, meta, tensors)
                f.flush()
                os.fsync(f.fileno())
        else:
            tmp = "%s.tmp.%d" % (out, os.getpid())
            try:
                with open(tmp, "xb") as f:
                    n = nmt_file.write_nmt(f, meta, tensors)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, out)
            except BaseException:
                if os.path.exists(tmp):
                    os.unlink(tmp)
                raise
        log("%s: %d tensors, %d bytes (fp32)" % (out or "the model", len(tensors), n))
    except Refused as e:
        sys.stderr.write("%s: %s (nothing was written)\n" % (PROG, e))
        return 1
    except OSError as e:
        sys.stderr.write("%s: %s (nothing was written)\n" % (PROG, e))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
