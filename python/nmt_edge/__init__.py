# SPDX-License-Identifier: MIT
"""nmt_edge — Python binding of libnmtedge, the OpenCL translation runtime.

    import nmt_edge
    with nmt_edge.Translator("models/en-de.nmt") as tr:
        print(tr.translate_batch(["This package contains the library."])[0].hypotheses[0])

A thin layer over the C API of include/nmt_edge.h through ctypes (no compiled
extension): Translator (translate_batch, score_batch, generate_tokens,
tokenize, detokenize), Tokenizer, Error.  The shared library is found at
first use: $NMT_EDGE_LIBRARY, else a copy next to this package, else the
system's (libnmtedge.so.1).  docs/INTEGRATION.md, "Python".
"""

import os
from ctypes import byref

from . import _lib
from ._errors import Error, check, explain_model
from ._tokenizer import Tokenizer, struct_dict
from ._translator import GenerationStepResult, TranslationResult, Translator, default_cache_dir, plan_token_batches

__version__ = "1.0.0"
__all__ = ["Error", "GenerationStepResult", "Tokenizer", "TranslationResult", "Translator", "default_cache_dir",
           "plan_token_batches", "library_path", "list_devices", "model_info", "version"]


def version():
    """The loaded library's version string, e.g. "1.0.0"."""
    return _lib.load().nmt_version().decode()


def library_path():
    """The path (or name) the shared library was loaded from."""
    return _lib.library_path()


def list_devices():
    """The OpenCL devices, as nmt-edge devices lists them: a list of dicts
    with "device" (the "P:D" spec for Translator's device), "platform_name",
    "device_name" and "is_gpu"."""
    found = []

    def one(_user, platform, device, platform_name, device_name, is_gpu):
        found.append({"device": "%d:%d" % (platform, device),
                      "platform_name": platform_name.decode("utf-8", "replace"),
                      "device_name": device_name.decode("utf-8", "replace"), "is_gpu": bool(is_gpu)})

    st = _lib.load().nmt_device_list(_lib.DEVICE_LIST_FN(one), None)
    if st not in (_lib.OK, _lib.ERR_NO_DEVICE):
        raise Error(st)
    return found


def model_info(path):
    """nmt_model_info of an .nmt file (validated; no device), as a dict."""
    p = os.fsencode(path)
    info = _lib.nmt_model_info()
    st = _lib.load().nmt_model_inspect_file(p, byref(info))
    check(st, explain_model(p, st))
    return struct_dict(info)
