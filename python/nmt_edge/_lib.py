# SPDX-License-Identifier: MIT
"""_lib.py — ctypes mirror of include/nmt_edge.h and the loader of libnmtedge.

Every Structure below repeats its C struct field for field, in the header's
order and with its types; tests/test_abi.py compiles a C program against the
header and checks each size and offset.  Only the functions the package uses
are declared (argtypes and restype), so a wrong call fails in ctypes, not in
the library.

The library is found at first use, in this order:
  1. $NMT_EDGE_LIBRARY (a path to libnmtedge.so*);
  2. a copy bundled next to this file (libnmtedge.so.1, libnmtedge.so);
  3. the system's search path: ctypes.util.find_library("nmtedge"), then
     "libnmtedge.so.1" (what the Debian package libnmtedge1 installs).
"""

import ctypes
import ctypes.util
import os
import threading
from ctypes import (POINTER, Structure, c_char, c_char_p, c_float, c_int, c_int32, c_size_t, c_uint,
                    c_uint32, c_uint64, c_void_p)

# ---------------------------------------------------------------------------
# Status
# ---------------------------------------------------------------------------

#: nmt_status names by value (include/nmt_edge.h; values never renumbered).
STATUS_NAMES = (
    "NMT_OK",
    "NMT_ERR_INVALID_ARGUMENT",
    "NMT_ERR_ARENA_TOO_SMALL",
    "NMT_ERR_IO",
    "NMT_ERR_MODEL_TRUNCATED",
    "NMT_ERR_MODEL_BAD_MAGIC",
    "NMT_ERR_MODEL_VERSION",
    "NMT_ERR_MODEL_CHECKSUM",
    "NMT_ERR_MODEL_CORRUPT",
    "NMT_ERR_MODEL_ARCH",
    "NMT_ERR_MODEL_MISSING_TENSOR",
    "NMT_ERR_MODEL_TENSOR_SHAPE",
    "NMT_ERR_NO_DEVICE",
    "NMT_ERR_OPENCL",
    "NMT_ERR_KERNEL_BUILD",
    "NMT_ERR_INPUT_TOO_LONG",
    "NMT_ERR_TOKEN_OUT_OF_RANGE",
    "NMT_ERR_LIMIT_EXCEEDED",
    "NMT_ERR_DEVICE_MEMORY",
    "NMT_ERR_UNSUPPORTED",
    "NMT_ERR_TOKENIZER_MODEL",
    "NMT_ERR_NO_TOKENIZER",
    "NMT_ERR_BUFFER_TOO_SMALL",
    "NMT_ERR_INVALID_SPANS",
    "NMT_ERR_NO_ALIGNMENTS",
    "NMT_ERR_KERNEL_PACK_CORRUPT",
    "NMT_ERR_KERNEL_PACK_VERSION",
    "NMT_ERR_KERNEL_PACK_DEVICE",
    "NMT_ERR_KERNEL_PACK_TUNING",
    "NMT_ERR_KERNEL_PACK_MISSING",
    "NMT_ERR_CANCELLED",
)
for _value, _name in enumerate(STATUS_NAMES):
    globals()[_name[4:]] = _value  # OK, ERR_IO, ... as module constants
del _value, _name

#: The statuses of a model file the library refuses (nmt_model_explain says why).
MODEL_STATUSES = frozenset(range(4, 12)) | {20}

ARENA_ALIGNMENT = 64   # NMT_ARENA_ALIGNMENT
DEVICE_ALIGNMENT = 16  # nmt_device_open's memory
MODEL_WHY_BYTES = 512  # NMT_MODEL_WHY_BYTES

LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG = range(4)
GEMM_AUTO, GEMM_OWN, GEMM_CLBLAST = range(3)
FP16_OFF, FP16_AUTO, FP16_ON = range(3)

# ---------------------------------------------------------------------------
# Structures (field order and types exactly as the header's)
# ---------------------------------------------------------------------------

LOG_FN = ctypes.CFUNCTYPE(None, c_void_p, c_int, c_char_p)
DEVICE_LIST_FN = ctypes.CFUNCTYPE(None, c_void_p, c_uint32, c_uint32, c_char_p, c_char_p, c_int)
STEP_FN = ctypes.CFUNCTYPE(c_int, c_void_p, c_void_p, c_uint32)
BUILD_PROGRESS_FN = ctypes.CFUNCTYPE(None, c_void_p, c_char_p, c_uint32, c_int)


class nmt_device_params(Structure):
    _fields_ = [
        ("device", c_char_p),
        ("cache_dir", c_char_p),
        ("kernel_dir", c_char_p),
        ("gemm", c_int),
        ("log", LOG_FN),
        ("log_user", c_void_p),
        ("log_level", c_int),
        ("kernel_pack", c_char_p),
        ("binaries_only", c_int),
        ("progress", BUILD_PROGRESS_FN),
        ("progress_user", c_void_p),
        ("cache_fill", c_int),
    ]


class nmt_device_info(Structure):
    _fields_ = [
        ("platform_name", c_char * 128),
        ("device_name", c_char * 128),
        ("vendor", c_char * 64),
        ("driver_version", c_char * 64),
        ("device_version", c_char * 64),
        ("platform_index", c_uint32),
        ("device_index", c_uint32),
        ("is_gpu", c_int),
        ("is_cpu", c_int),
        ("compute_units", c_uint32),
        ("max_work_group_size", c_size_t),
        ("local_mem_bytes", c_uint64),
        ("local_mem_is_global", c_int),
        ("global_mem_bytes", c_uint64),
        ("max_alloc_bytes", c_uint64),
        ("mem_base_align_bytes", c_uint32),
        ("pref_vector_width_float", c_uint32),
        ("native_vector_width_float", c_uint32),
        ("has_fp16", c_int),
        ("has_subgroups", c_int),
        ("gemm", c_int),
        ("subgroup_reductions", c_int),
        ("has_int_dot", c_int),
        ("has_x86_vnni", c_int),
        ("int8_products", c_char * 128),
        ("int8x8_classes", c_uint),
    ]


class nmt_model_info(Structure):
    _fields_ = [
        ("format_version", c_uint32),
        ("arch", c_char * 32),
        ("d_model", c_uint32),
        ("n_heads", c_uint32),
        ("d_ff", c_uint32),
        ("enc_layers", c_uint32),
        ("dec_layers", c_uint32),
        ("src_vocab", c_uint32),
        ("tgt_vocab", c_uint32),
        ("norm", c_char * 8),
        ("enc_branches", c_char * 96),
        ("dec_branches", c_char * 96),
        ("fusion", c_char * 16),
        ("gate_reduction", c_uint32),
        ("shared_embeddings", c_int),
        ("tied_output", c_int),
        ("tokenizer", c_int),
        ("bos_id", c_uint32),
        ("eos_id", c_uint32),
        ("pad_id", c_uint32),
        ("unk_id", c_uint32),
        ("n_params", c_uint64),
        ("weight_bytes", c_uint64),
        ("n_tensors", c_uint32),
        ("dtype", c_char * 8),
        ("file_size", c_uint64),
        ("family_config", c_char * 400),
    ]


class nmt_tokenizer_info(Structure):
    _fields_ = [
        ("vocab_size", c_uint32),
        ("model_type", c_char_p),
        ("byte_fallback", c_int),
        ("unk_id", c_int32),
        ("bos_id", c_int32),
        ("eos_id", c_int32),
        ("pad_id", c_int32),
        ("max_text_bytes", c_uint32),
    ]


class nmt_limits(Structure):
    _fields_ = [
        ("max_src_len", c_uint32),
        ("max_tgt_len", c_uint32),
        ("max_batch", c_uint32),
        ("max_beam", c_uint32),
        ("max_text_bytes", c_uint32),
    ]


class nmt_session_params(Structure):
    _fields_ = [
        ("model_path", c_char_p),
        ("model_data", c_void_p),
        ("model_size", c_size_t),
        ("limits", nmt_limits),
        ("alignment", c_int),
        ("align_layer", c_uint32),
        ("align_head", c_uint32),
        ("token_logprobs", c_int),
        ("sampling", c_int),
        ("fp16_compute", c_int),
    ]


class nmt_decode_opts(Structure):
    _fields_ = [
        ("beam", c_uint32),
        ("alpha", c_float),
        ("alpha_set", c_int),
        ("max_len", c_uint32),
        ("n_best", c_uint32),
        ("min_len", c_uint32),
        ("no_repeat_ngram", c_uint32),
        ("max_len_a", c_float),
        ("max_len_b", c_float),
        ("coverage_penalty", c_float),
        ("repetition_penalty", c_float),
        ("sampling", c_int),
        ("sampling_topk", c_uint32),
        ("sampling_temperature", c_float),
        ("seed", c_uint64),
        ("prefix", POINTER(POINTER(c_int32))),
        ("prefix_len", POINTER(c_uint32)),
        ("prefix_text", POINTER(c_char_p)),
        ("prefix_text_len", POINTER(c_size_t)),
        # streaming and cancellation (issue 56)
        ("on_step", STEP_FN),
        ("step_user", c_void_p),
        ("cancel", POINTER(c_int)),
    ]


class nmt_batch(Structure):
    _fields_ = [
        ("tokens", POINTER(POINTER(c_int32))),
        ("lens", POINTER(c_uint32)),
        ("n", c_uint32),
    ]


class nmt_span(Structure):
    _fields_ = [("start", c_uint32), ("len", c_uint32)]


class nmt_text_batch(Structure):
    _fields_ = [
        ("text", POINTER(c_char_p)),
        ("lens", POINTER(c_size_t)),
        ("n", c_uint32),
    ]


#: Every mirrored struct, by its C name (for the layout test).
STRUCTS = (nmt_device_params, nmt_device_info, nmt_model_info, nmt_tokenizer_info, nmt_limits,
           nmt_session_params, nmt_decode_opts, nmt_batch, nmt_span, nmt_text_batch)

# ---------------------------------------------------------------------------
# Functions
# ---------------------------------------------------------------------------

_p = c_void_p  # opaque handles: nmt_device *, nmt_session *, nmt_tokenizer *
_PROTOTYPES = {
    "nmt_status_str": (c_char_p, [c_int]),
    "nmt_version": (c_char_p, []),
    "nmt_device_footprint": (c_size_t, []),
    "nmt_device_open": (c_int, [POINTER(nmt_device_params), c_void_p, c_size_t, POINTER(_p)]),
    "nmt_device_close": (None, [_p]),
    "nmt_device_get_info": (None, [_p, POINTER(nmt_device_info)]),
    "nmt_device_last_cl_error": (c_int32, [_p]),
    "nmt_device_list": (c_int, [DEVICE_LIST_FN, c_void_p]),
    "nmt_model_inspect_file": (c_int, [c_char_p, POINTER(nmt_model_info)]),
    "nmt_model_explain_file": (c_int, [c_char_p, c_char_p, c_size_t]),
    "nmt_model_tokenizer": (c_int, [c_void_p, c_size_t, c_int, POINTER(c_void_p), POINTER(c_size_t)]),
    "nmt_tokenizer_arena_size": (c_int, [c_void_p, c_size_t, c_uint32, POINTER(c_size_t)]),
    "nmt_tokenizer_create": (c_int, [c_void_p, c_size_t, c_uint32, c_void_p, c_size_t, POINTER(_p)]),
    "nmt_tokenizer_encode": (c_int, [_p, c_char_p, c_size_t, POINTER(POINTER(c_int32)), POINTER(c_uint32)]),
    "nmt_tokenizer_decode": (c_int, [_p, POINTER(c_int32), c_uint32, c_char_p, c_size_t, POINTER(c_size_t)]),
    "nmt_tokenizer_decode_bound": (c_size_t, [_p, c_uint32]),
    "nmt_tokenizer_piece": (c_int, [_p, c_int32, POINTER(c_void_p), POINTER(c_size_t)]),
    "nmt_tokenizer_get_info": (c_int, [_p, POINTER(nmt_tokenizer_info)]),
    "nmt_session_arena_size": (c_int, [POINTER(nmt_session_params), POINTER(c_size_t), POINTER(c_uint64)]),
    "nmt_session_create": (c_int, [_p, POINTER(nmt_session_params), c_void_p, c_size_t, POINTER(_p)]),
    "nmt_session_destroy": (None, [_p]),
    "nmt_session_arena_used": (c_size_t, [_p]),
    "nmt_session_model_info": (None, [_p, POINTER(nmt_model_info)]),
    "nmt_session_limits": (None, [_p, POINTER(nmt_limits)]),
    "nmt_session_translate": (c_int, [_p, POINTER(nmt_batch), POINTER(nmt_decode_opts)]),
    "nmt_session_n_results": (c_uint32, [_p, c_uint32]),
    "nmt_session_result": (c_int, [_p, c_uint32, c_uint32, POINTER(POINTER(c_int32)), POINTER(c_uint32),
                                   POINTER(c_float), POINTER(c_float)]),
    "nmt_session_score": (c_int, [_p, POINTER(nmt_batch), POINTER(nmt_batch), POINTER(c_float)]),
    "nmt_session_tokenizer": (_p, [_p, c_int]),
    "nmt_session_translate_text": (c_int, [_p, POINTER(nmt_text_batch), POINTER(nmt_decode_opts)]),
    "nmt_session_result_text": (c_int, [_p, c_uint32, c_uint32, POINTER(c_void_p), POINTER(c_size_t),
                                        POINTER(c_float), POINTER(c_float)]),
    "nmt_session_score_text": (c_int, [_p, POINTER(nmt_text_batch), POINTER(nmt_text_batch), POINTER(c_float)]),
    "nmt_session_last_cl_error": (c_int32, [_p]),
}
# Declared when the library has them (a library older than the header may not).
_OPTIONAL = {
    "nmt_session_partial": (c_int, [_p, c_uint32, POINTER(POINTER(c_int32)), POINTER(c_uint32), POINTER(c_int)]),
    # token batches (issue 56)
    "nmt_batch_plan_tokens": (c_int, [POINTER(c_uint32), c_uint32, c_uint32, c_uint32, POINTER(c_uint32),
                                      POINTER(c_uint32), POINTER(c_uint32)]),
}

_lock = threading.Lock()
_lib = None
_lib_path = None


def _candidates():
    env = os.environ.get("NMT_EDGE_LIBRARY")
    if env:
        return [env]  # an explicit choice: nothing else is tried
    here = os.path.dirname(os.path.abspath(__file__))
    found = [os.path.join(here, name) for name in ("libnmtedge.so.1", "libnmtedge.so")
             if os.path.exists(os.path.join(here, name))]
    system = ctypes.util.find_library("nmtedge")
    if system:
        found.append(system)
    found.append("libnmtedge.so.1")
    return found


def load():
    """The loaded library (ctypes.CDLL), found as the module docstring says.

    Raises OSError naming every place tried when none loads, or when the
    library's major version is not this package's."""
    global _lib, _lib_path
    with _lock:
        if _lib is not None:
            return _lib
        errors = []
        for path in _candidates():
            try:
                lib = ctypes.CDLL(path, use_errno=True)
            except OSError as e:
                errors.append("%s: %s" % (path, e))
                continue
            missing = [name for name in _PROTOTYPES if getattr(lib, name, None) is None]
            if missing:
                errors.append("%s: not libnmtedge 1.x (no %s)" % (path, ", ".join(missing[:3])))
                continue
            for name, (restype, argtypes) in _PROTOTYPES.items():
                fn = getattr(lib, name)
                fn.restype, fn.argtypes = restype, argtypes
            for name, (restype, argtypes) in _OPTIONAL.items():
                fn = getattr(lib, name, None)
                if fn is not None:
                    fn.restype, fn.argtypes = restype, argtypes
            version = lib.nmt_version().decode()
            if version.split(".")[0] != "1":
                errors.append("%s: version %s, this package needs 1.x" % (path, version))
                continue
            _lib, _lib_path = lib, path
            return lib
        raise OSError("nmt_edge: cannot load libnmtedge (set NMT_EDGE_LIBRARY to its path); tried:\n  " +
                      "\n  ".join(errors))


def library_path():
    """Where the loaded library came from (the name or path given to dlopen)."""
    load()
    return _lib_path


def has(name):
    """True when the loaded library exports function `name`."""
    return getattr(load(), name, None) is not None


class AlignedBuffer:
    """`size` bytes of zeroed memory aligned to `align`, owned by Python:
    the caller memory the library's handles live in.  Keep the object alive
    as long as the handle."""

    __slots__ = ("_raw", "address", "size")

    def __init__(self, size, align):
        self._raw = ctypes.create_string_buffer(max(size, 1) + align - 1)
        base = ctypes.addressof(self._raw)
        self.address = base + (-base) % align
        self.size = size
