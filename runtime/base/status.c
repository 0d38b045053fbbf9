/* SPDX-License-Identifier: MIT */
/* status.c — nmt_status_str() and the version string. */
#include "nmt_edge.h"

#define NMT_STR2(x) #x
#define NMT_STR(x) NMT_STR2(x)

const char *nmt_version(void) {
    return NMT_STR(NMT_VERSION_MAJOR) "." NMT_STR(NMT_VERSION_MINOR) "." NMT_STR(NMT_VERSION_PATCH);
}

const char *nmt_status_str(nmt_status s) {
    static const char *const names[NMT_STATUS_COUNT_] = {
        [NMT_OK] = "success",
        [NMT_ERR_INVALID_ARGUMENT] = "invalid argument",
        [NMT_ERR_ARENA_TOO_SMALL] = "arena too small for this model and these limits",
        [NMT_ERR_IO] = "file input/output error",
        [NMT_ERR_MODEL_TRUNCATED] = "model file is truncated",
        [NMT_ERR_MODEL_BAD_MAGIC] = "not an nmt-edge model file (bad magic)",
        [NMT_ERR_MODEL_VERSION] = "unsupported model format version",
        [NMT_ERR_MODEL_CHECKSUM] = "model file checksum mismatch",
        [NMT_ERR_MODEL_CORRUPT] = "model file is corrupt",
        [NMT_ERR_MODEL_ARCH] = "unsupported model architecture or hyper-parameter",
        [NMT_ERR_MODEL_MISSING_TENSOR] = "model file lacks a required tensor",
        [NMT_ERR_MODEL_TENSOR_SHAPE] = "model tensor has the wrong shape or type",
        [NMT_ERR_NO_DEVICE] = "no matching OpenCL device",
        [NMT_ERR_OPENCL] = "OpenCL call failed",
        [NMT_ERR_KERNEL_BUILD] = "OpenCL kernel compilation failed",
        [NMT_ERR_INPUT_TOO_LONG] = "input longer than the session limit",
        [NMT_ERR_TOKEN_OUT_OF_RANGE] = "token id out of vocabulary range",
        [NMT_ERR_LIMIT_EXCEEDED] = "request exceeds the session limits (batch, beam or n-best)",
        [NMT_ERR_DEVICE_MEMORY] = "not enough device memory",
        [NMT_ERR_UNSUPPORTED] = "not supported by this build or device",
        [NMT_ERR_TOKENIZER_MODEL] = "SentencePiece tokenizer model is malformed",
        [NMT_ERR_NO_TOKENIZER] = "model has no embedded tokenizer",
        [NMT_ERR_BUFFER_TOO_SMALL] = "output buffer too small",
        [NMT_ERR_INVALID_SPANS] = "phrase spans empty, out of range, overlapping or not ascending",
        [NMT_ERR_NO_ALIGNMENTS] = "session created without alignments",
        [NMT_ERR_KERNEL_PACK_CORRUPT] = "kernel pack is not one, truncated or damaged",
        [NMT_ERR_KERNEL_PACK_VERSION] = "unsupported kernel pack format version",
        [NMT_ERR_KERNEL_PACK_DEVICE] = "kernel pack made for another device, driver or platform",
        [NMT_ERR_KERNEL_PACK_TUNING] = "kernel pack made with other kernel parameters, sources or shapes",
        [NMT_ERR_KERNEL_PACK_MISSING] = "a program the session needs is not in the kernel pack (binaries only)",
        [NMT_ERR_CANCELLED] = "cancelled by the caller",
    };
    if ((unsigned)s >= NMT_STATUS_COUNT_ || names[s] == NULL) return "unknown status";
    return names[s];
}
