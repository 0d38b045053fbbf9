/* SPDX-License-Identifier: MIT */
/*
 * nmt_edge.h — the public C API of libnmtedge.
 *
 * Read this header top to bottom as the tutorial:
 *
 *   1. Open a device (an OpenCL platform/device pair) into memory you own:
 *        void *dmem = ...(nmt_device_footprint() bytes, 16-byte aligned);
 *        nmt_device *dev;  nmt_device_open(&dparams, dmem, nmt_device_footprint(), &dev);
 *   2. Describe the model and the limits you will translate under, and ask
 *      how many bytes of host memory the session needs:
 *        size_t need;  nmt_session_arena_size(&sparams, &need);
 *   3. Hand that much memory to the session.  From here on the runtime never
 *      calls malloc/free and never creates OpenCL objects:
 *        nmt_session *s;  nmt_session_create(dev, &sparams, arena, need, &s);
 *   4. Translate or score batches of text (models with an embedded
 *      SentencePiece tokenizer) or of token-id sequences, read the results.
 *   5. nmt_session_destroy(s); nmt_device_close(dev); free your memory.
 *
 * Conventions: every fallible call returns an nmt_status (0 = NMT_OK).  The
 * library never calls exit/abort and keeps no global state.  Handles are
 * opaque and live inside the memory the caller handed over; they stay valid
 * until the matching destroy/close call and that memory must outlive them.
 *
 * Threads.  The library starts no threads and takes no locks; every call
 * runs on the caller's thread (the log callback too).  The OpenCL driver may
 * run threads of its own.
 *   - An nmt_device is NOT thread-safe.  Its sessions share its command
 *     queue, its compiled-program table and its last-error field, so a
 *     device and every session created on it form one unit that one thread
 *     at a time may use: several sessions on one device are fine when their
 *     calls are serialised (one thread, or the caller's mutex around every
 *     call on that device or its sessions, nmt_session_create and
 *     nmt_session_destroy included).  Such sessions share the device's
 *     compiled programs (built once) but not weights: each session uploads
 *     its own copy of its model's weights, so N sessions of one model hold
 *     N copies in device memory (nmt_session_arena_size's device_bytes
 *     each).
 *   - A session (and the tokenizer nmt_session_tokenizer returns, whose
 *     scratch its text calls share) is used by one thread at a time.
 *   - For parallel work open one device per thread (nmt_device_open may be
 *     called for the same OpenCL device several times, each into its own
 *     memory) with its own sessions; nothing is then shared but the
 *     OpenCL driver and the binary cache directory, whose files are written
 *     to a temporary name and renamed into place.
 *   - A tokenizer of nmt_tokenizer_create is one thread's at a time too
 *     (encoding writes its scratch); tokenizers in different memory are
 *     independent.
 *   - Calls that take no handle (nmt_status_str, nmt_version,
 *     nmt_model_inspect/_explain and their _file forms, nmt_model_tokenizer,
 *     nmt_tokenizer_arena_size, nmt_device_footprint, nmt_session_arena_size,
 *     nmt_batch_plan_tokens)
 *     touch only the memory and files they are given and may run on any
 *     thread at any time; nmt_device_list as far as the OpenCL driver's
 *     platform queries are.
 *
 * Environment.  The library reads the environment only in the calls named
 * here, as developer and benchmark switches (a flag is on when set, not
 * empty and not "0"); set them before that call, never from another thread
 * meanwhile (getenv is not safe against a concurrent setenv):
 *   nmt_device_open():       NMT_EDGE_NO_SUBGROUPS (the portable work-group
 *                            reductions, not subgroups), NMT_EDGE_NO_VNNI (no
 *                            x86 VNNI int8 path on PoCL's CPU device),
 *                            NMT_EDGE_QUEUE_PROFILING (a profiling queue,
 *                            for benchmarks)
 *   nmt_session_create():    NMT_EDGE_NO_I8DOT (int8-weight products take
 *                            fp32 activations; also read by
 *                            nmt_device_get_info for int8_products),
 *                            NMT_EDGE_ATTN = item | group | split (force one
 *                            attention kernel), NMT_EDGE_NO_FUSED_NORM,
 *                            NMT_EDGE_NO_FUSED_QUANT, NMT_EDGE_NO_FUSED_GATE
 *                            (unfused kernels), NMT_EDGE_NO_CHAIN (decoding
 *                            steps not chained on the device),
 *                            NMT_EDGE_NO_PRODUCT_CHAIN (few-row products
 *                            launched one by one)
 * They choose among implementations of the same computation: results may
 * differ in rounding (with NMT_EDGE_NO_I8DOT also by the int8 rounding of
 * activations it turns off).  Everything else is a parameter.  The
 * variables NMT_EDGE_DEVICE, NMT_EDGE_CACHE_DIR (default
 * $XDG_CACHE_HOME/nmt-edge, else $HOME/.cache/nmt-edge), NMT_EDGE_KERNEL_DIR,
 * NMT_EDGE_KERNEL_PACK, NMT_EDGE_BINARIES_ONLY and NMT_EDGE_NO_FP16 are read
 * by the programs, never by the library (which reads XDG_CACHE_HOME and HOME
 * for a NULL nmt_device_params.cache_dir, and PoCL's POCL_KERNEL_CACHE: see
 * cache_fill): nmt-edge, nmt-edge-convert and
 * nmt-edge-train through tools/tool_env.c, nmt-edge-tune (NMT_EDGE_DEVICE,
 * NMT_EDGE_CACHE_DIR only), which pass them as the fields of
 * nmt_device_params and nmt_session_params.  A program that embeds the
 * library and wants them reads them itself: a NULL or ""
 * nmt_device_params.device is the first GPU, else the first device,
 * whatever NMT_EDGE_DEVICE says, and a NULL cache_dir is the default
 * directory ($XDG_CACHE_HOME/nmt-edge, else $HOME/.cache/nmt-edge; "" = none),
 * whatever NMT_EDGE_CACHE_DIR says.
 */
#ifndef NMT_EDGE_H
#define NMT_EDGE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(NMT_BUILD_SHARED)
#define NMT_API __declspec(dllexport)
#elif defined(__GNUC__)
#define NMT_API __attribute__((visibility("default")))
#else
#define NMT_API
#endif

#define NMT_VERSION_MAJOR 1
#define NMT_VERSION_MINOR 0
#define NMT_VERSION_PATCH 0

/* ------------------------------------------------------------------------ */
/* Status                                                                   */
/* ------------------------------------------------------------------------ */

/** Status codes.  Values are stable and never renumbered; new codes are
 *  appended.  nmt_status_str() gives a short English description. */
typedef enum nmt_status {
    NMT_OK = 0,
    NMT_ERR_INVALID_ARGUMENT = 1,   /**< NULL pointer, zero size, bad option value */
    NMT_ERR_ARENA_TOO_SMALL = 2,    /**< caller memory smaller than required */
    NMT_ERR_IO = 3,                 /**< open/read/write/mmap failed (errno kept) */
    NMT_ERR_MODEL_TRUNCATED = 4,    /**< file shorter than its header says */
    NMT_ERR_MODEL_BAD_MAGIC = 5,    /**< not an .nmt file */
    NMT_ERR_MODEL_VERSION = 6,      /**< .nmt format version not supported */
    NMT_ERR_MODEL_CHECKSUM = 7,     /**< a CRC-32 did not match */
    NMT_ERR_MODEL_CORRUPT = 8,      /**< structurally invalid (offsets, sizes, strings) */
    NMT_ERR_MODEL_ARCH = 9,         /**< unknown or unsupported architecture / hyper-parameter */
    NMT_ERR_MODEL_MISSING_TENSOR = 10, /**< a tensor the architecture needs is absent */
    NMT_ERR_MODEL_TENSOR_SHAPE = 11,   /**< a tensor has the wrong shape or dtype */
    NMT_ERR_NO_DEVICE = 12,         /**< no OpenCL platform/device matches */
    NMT_ERR_OPENCL = 13,            /**< an OpenCL call failed; see nmt_*_last_cl_error */
    NMT_ERR_KERNEL_BUILD = 14,      /**< an OpenCL program failed to compile */
    NMT_ERR_INPUT_TOO_LONG = 15,    /**< a sentence exceeds the session limits */
    NMT_ERR_TOKEN_OUT_OF_RANGE = 16,/**< a token id is negative or >= vocabulary size */
    NMT_ERR_LIMIT_EXCEEDED = 17,    /**< batch/beam/n-best larger than the session limits */
    NMT_ERR_DEVICE_MEMORY = 18,     /**< device buffers do not fit the device */
    NMT_ERR_UNSUPPORTED = 19,       /**< valid request this build/device cannot serve */
    NMT_ERR_TOKENIZER_MODEL = 20,   /**< SentencePiece model malformed or inconsistent */
    NMT_ERR_NO_TOKENIZER = 21,      /**< text API used on a model without an embedded tokenizer */
    NMT_ERR_BUFFER_TOO_SMALL = 22,  /**< caller's output buffer too small; the size needed is reported */
    NMT_ERR_INVALID_SPANS = 23,     /**< phrase spans empty, out of range, overlapping or not ascending */
    NMT_ERR_NO_ALIGNMENTS = 24,     /**< alignments asked of a session created without them */
    NMT_ERR_KERNEL_PACK_CORRUPT = 25, /**< kernel pack: not one, truncated, checksum or layout wrong */
    NMT_ERR_KERNEL_PACK_VERSION = 26, /**< kernel pack format version not supported */
    NMT_ERR_KERNEL_PACK_DEVICE = 27,  /**< kernel pack made for another device, driver or platform */
    NMT_ERR_KERNEL_PACK_TUNING = 28,  /**< kernel pack made with other kernel parameters, sources or shapes */
    NMT_ERR_KERNEL_PACK_MISSING = 29, /**< binaries only: a program the session needs is not in the pack */
    NMT_ERR_CANCELLED = 30,         /**< the caller stopped a translation (nmt_decode_opts.on_step, .cancel) */
    NMT_STATUS_COUNT_               /**< not a status; keep last */
} nmt_status;

/** Short, static, English description of a status; never NULL. */
NMT_API const char *nmt_status_str(nmt_status s);

/** Library version string "major.minor.patch". */
NMT_API const char *nmt_version(void);

/* ------------------------------------------------------------------------ */
/* Logging                                                                  */
/* ------------------------------------------------------------------------ */

typedef enum nmt_log_level {
    NMT_LOG_ERROR = 0,
    NMT_LOG_WARN = 1,
    NMT_LOG_INFO = 2,
    NMT_LOG_DEBUG = 3
} nmt_log_level;

/** Log callback.  `msg` is valid only during the call.  NULL callback: silent. */
typedef void (*nmt_log_fn)(void *user, nmt_log_level level, const char *msg);

/* ------------------------------------------------------------------------ */
/* Device                                                                   */
/* ------------------------------------------------------------------------ */

/** Which GEMM implementation the kernel layer uses. */
typedef enum nmt_gemm_provider {
    NMT_GEMM_AUTO = 0,    /**< per device: ours on CPU-class devices, CLBlast on GPUs */
    NMT_GEMM_OWN = 1,     /**< our OpenCL kernels */
    NMT_GEMM_CLBLAST = 2  /**< CLBlast (may JIT for tens of seconds on PoCL) */
} nmt_gemm_provider;

/** Progress of compiling OpenCL programs from source (nmt_device_params.progress).
 *  `device` is the device's name; `built` counts the programs compiled
 *  from source on this device so far.  Called before each such compile
 *  (finished 0; built = 0 before the first), and once with finished 1 when
 *  nmt_session_create() returns after compiling at least one (built = all
 *  of them; its warm-up, which makes the driver compile the kernels it
 *  launches, included).  Programs from the cache or a kernel pack call
 *  nothing: a warm start is silent.  Called on the thread that called
 *  nmt_session_create(); `device` is valid during the call only. */
typedef void (*nmt_build_progress_fn)(void *user, const char *device, uint32_t built, int finished);

/** Parameters of nmt_device_open().  Zero-initialise, then set what you need. */
typedef struct nmt_device_params {
    /** Device selection; NULL or "" = first GPU, else first device.  Forms:
     *  "P:D" (platform and device index, as `nmt-edge devices` lists them),
     *  "gpu", "cpu", "accelerator", or a case-insensitive substring of the
     *  device or platform name. */
    const char *device;
    /** Directory for compiled program binaries, created if missing, keyed
     *  by device, driver version, source and options; the device's tuning
     *  file is read from it too.  NULL (a zero-initialised struct): the
     *  default, $XDG_CACHE_HOME/nmt-edge, else $HOME/.cache/nmt-edge (the
     *  only environment variables the library reads for it; neither set, or
     *  a relative XDG_CACHE_HOME: no cache).  "" (the empty string): no
     *  cache, nothing read or written.  A directory that cannot be created
     *  runs without the cache (logged).  Binaries are written when a program
     *  is built and again after a session's warm-up, except as cache_fill
     *  says; every write goes to a temporary file renamed into place. */
    const char *cache_dir;
    /** Developer switch: load cl/ kernel sources from this directory instead
     *  of the copies embedded at build time; NULL = embedded. */
    const char *kernel_dir;
    nmt_gemm_provider gemm;
    nmt_log_fn log;
    void *log_user;
    nmt_log_level log_level;
    /* ---- appended fields: zero-initialised = off ------------------------ */
    /** Kernel pack (docs/FORMAT.md, "Kernel packs"): path of a file written
     *  by `nmt-edge-convert kernels` with the device binaries of the programs
     *  a model's session needs on this device.  Checked whole at open (a
     *  corrupt or truncated pack NMT_ERR_KERNEL_PACK_CORRUPT, another format
     *  version _VERSION, another device, driver or platform _DEVICE, other
     *  kernel parameters _TUNING) and read again, mapped for the call only,
     *  whenever a session needs a program: programs in it are created with
     *  clCreateProgramWithBinary, the others compiled as usual.  With a
     *  pack, gemm AUTO means our kernels (CLBlast compiles its own).
     *  NULL = none. */
    const char *kernel_pack;
    /** Nonzero: never compile OpenCL C from source; every program comes
     *  from the kernel pack (or the binary cache), and one that is in
     *  neither fails session creation with NMT_ERR_KERNEL_PACK_MISSING.
     *  Also the mode of a device that reports no compiler
     *  (CL_DEVICE_COMPILER_AVAILABLE false, e.g. FPGA flows), whatever
     *  this says.  gemm CLBLAST is then NMT_ERR_UNSUPPORTED. */
    int binaries_only;
    /** Issue 54: called while programs compile from source (see
     *  nmt_build_progress_fn), so that a first start shows progress; NULL =
     *  none.  progress_user is passed back. */
    nmt_build_progress_fn progress;
    void *progress_user;
    /** Writing the program cache.  0: binaries are written when built,
     *  except on PoCL's CPU device while PoCL's own kernel cache is on
     *  (POCL_KERNEL_CACHE unset or not 0, read at open): there asking for a
     *  program's binary compiles every kernel in it again (about 30 s more
     *  on a first start of the bundled model on 2 cores), and PoCL's cache
     *  already keeps later starts under a second, so nothing is written
     *  and only existing binaries are read.  Nonzero: written on every
     *  driver (what `nmt-edge warmup` does, once, so that later starts load
     *  the binaries: the fastest start). */
    int cache_fill;
} nmt_device_params;

typedef struct nmt_device nmt_device;

/** Capabilities read from the chosen device (plain data, caller-owned copy). */
typedef struct nmt_device_info {
    char platform_name[128];
    char device_name[128];
    char vendor[64];
    char driver_version[64];
    char device_version[64];
    uint32_t platform_index, device_index;
    int is_gpu;                    /**< CL_DEVICE_TYPE_GPU */
    int is_cpu;                    /**< CL_DEVICE_TYPE_CPU */
    uint32_t compute_units;
    size_t max_work_group_size;
    uint64_t local_mem_bytes;
    int local_mem_is_global;       /**< CL_GLOBAL local memory (emulated, e.g. PoCL) */
    uint64_t global_mem_bytes;
    uint64_t max_alloc_bytes;
    uint32_t mem_base_align_bytes;
    uint32_t pref_vector_width_float;
    uint32_t native_vector_width_float;
    int has_fp16;                  /**< cl_khr_fp16 */
    int has_subgroups;             /**< cl_khr_subgroups or OpenCL 2.1+ subgroups */
    nmt_gemm_provider gemm;        /**< resolved provider (never AUTO) */
    /** Issue 23: 1 when the per-row reductions (log-softmax, the beam's
     *  top-k, and layer norm except on CPUs, where a work-item normalises a
     *  row) use subgroups: has_subgroups, the driver answers
     *  clGetKernelSubGroupInfoKHR, and NMT_EDGE_NO_SUBGROUPS was not set at
     *  open.  0: the portable work-group reductions. */
    int subgroup_reductions;
    int has_int_dot;               /**< cl_khr_integer_dot_product with 4x8-bit dot(char4, char4) */
    /** 1 for PoCL's CPU device on an x86-64 host whose CPU reports AVX-512
     *  VNNI (and the OS saves its registers): int8 x int8 products can run
     *  on vpdpbusd (cl/gemm_i8.cl, I8_DOT 2).  NMT_EDGE_NO_VNNI=1 at open
     *  clears it. */
    int has_x86_vnni;
    /** Which kernels products with int8 weights use on this device, per shape
     *  class ("int8 x int8 (dot built-in)", "int8 weights x fp32", ...):
     *  docs/PORTING.md, "Fast paths: int8 x int8 products". */
    char int8_products[128];
    /** The same as bits: bit c set when shape class c (0 m2, 1 m16, 2 big)
     *  runs products with int8 weights as int8 x int8; 0 when every class
     *  takes fp32 activations. */
    unsigned int int8x8_classes;
} nmt_device_info;

/** Bytes of caller memory nmt_device_open() needs (a constant of the build). */
NMT_API size_t nmt_device_footprint(void);

/** Choose and open a device.  `mem` (>= nmt_device_footprint() bytes, 16-byte
 *  aligned) holds the handle until nmt_device_close().  On failure nothing is
 *  left open.  NMT_ERR_NO_DEVICE when no platform/device matches. */
NMT_API nmt_status nmt_device_open(const nmt_device_params *params, void *mem, size_t mem_size,
                                   nmt_device **out);

/** Release every OpenCL object of the device (sessions must be destroyed first). */
NMT_API void nmt_device_close(nmt_device *dev);

/** Copy the device's capabilities into *info. */
NMT_API void nmt_device_get_info(const nmt_device *dev, nmt_device_info *info);

/** Raw cl_int of the most recent failing OpenCL call on this device (0 if none). */
NMT_API int32_t nmt_device_last_cl_error(const nmt_device *dev);

/** Enumerate OpenCL devices without opening one: calls `fn` once per device
 *  with its "P:D" indices and names.  Returns NMT_ERR_NO_DEVICE if none. */
typedef void (*nmt_device_list_fn)(void *user, uint32_t platform, uint32_t device,
                                   const char *platform_name, const char *device_name,
                                   int is_gpu);
NMT_API nmt_status nmt_device_list(nmt_device_list_fn fn, void *user);

/* ------------------------------------------------------------------------ */
/* Model inspection (no device, no memory needed)                           */
/* ------------------------------------------------------------------------ */

/** Summary of an .nmt file, filled by nmt_model_inspect(). */
typedef struct nmt_model_info {
    uint32_t format_version;
    char arch[32];              /**< the family (docs/ARCHITECTURES.md): "transformer" (HySAN;
                                     vanilla = global-only), "mgsa" (multi-granularity
                                     self-attention), "phrase" (phrase-based attention) or
                                     "banmt" (BA-NMT, a recurrent model: the Transformer's
                                     fields n_heads, d_ff, norm, branches, fusion are then
                                     empty or 0, d_model is its hidden size) */
    uint32_t d_model, n_heads, d_ff, enc_layers, dec_layers;
    uint32_t src_vocab, tgt_vocab;
    char norm[8];               /**< "pre" or "post" */
    char enc_branches[96];      /**< e.g. "global fw bw local:3" */
    char dec_branches[96];
    char fusion[16];            /**< "sum", "concat" or "gate" */
    uint32_t gate_reduction;
    int shared_embeddings;      /**< source and target embeddings are one tensor */
    int tied_output;            /**< output projection = target embedding */
    int tokenizer;              /**< embedded SentencePiece models: 0 none, 1 one shared
                                     (`tokenizer.src`), 2 source and target */
    uint32_t bos_id, eos_id, pad_id, unk_id;
    uint64_t n_params;          /**< number of weights (elements) */
    uint64_t weight_bytes;      /**< bytes of tensor data in the file */
    uint32_t n_tensors;
    char dtype[8];              /**< storage of the 2-D weights: "fp32", "fp16", "int8" or "mixed"
                                     (1-D tensors, e.g. biases, are fp32 in converted models) */
    uint64_t file_size;
    char family_config[400];    /**< the family's hyper-parameters the fields above do not
                                     cover, "key value; key value" (mgsa: mg_layers,
                                     mg_heads, mg_compose, mg_interact[, mg_chunk,
                                     mg_syntax_fallback]; phrase: ph_enc, ph_dec, ph_cross;
                                     banmt: emb, hidden, att, readout, hist, history,
                                     maxout); "" for the Transformer / HySAN */
} nmt_model_info;

/** Validate an in-memory .nmt image (header, table, checksums, the tensors
 *  the architecture needs) and summarise it.  The image is untrusted. */
NMT_API nmt_status nmt_model_inspect(const void *data, size_t size, nmt_model_info *info);

/** Same for a file (mapped read-only for the duration of the call). */
NMT_API nmt_status nmt_model_inspect_file(const char *path, nmt_model_info *info);

/** Longest reason nmt_model_explain() writes, with its NUL. */
#define NMT_MODEL_WHY_BYTES 512

/** Why nmt_model_inspect() (and a session) refuses an image, in words: the
 *  same checks and the same status, and on a refusal one line in
 *  why[0, why_cap) (caller-owned; cut to fit; NMT_MODEL_WHY_BYTES is
 *  enough) naming the metadata key or tensor with what was expected and
 *  what was found, e.g.
 *    "tensor 'enc.0.ffn.fc1.weight' has shape [64, 31], expected [64, 32]"
 *    "unsupported hyper-parameters of arch 'transformer': bos_id 9999 must be < tgt_vocab 64"
 *    "tensor 'src_embed': CRC-32 0x1a2b3c4d stored, 0x5e6f7081 computed (the data are damaged)".
 *  why is "" for a valid image (or an I/O error: errno says why).
 *  nmt_session_create() also logs the reason of a refused model at
 *  NMT_LOG_ERROR through the device's log callback. */
NMT_API nmt_status nmt_model_explain(const void *data, size_t size, char *why, size_t why_cap);

/** Same for a file (mapped read-only for the duration of the call). */
NMT_API nmt_status nmt_model_explain_file(const char *path, char *why, size_t why_cap);

/* ------------------------------------------------------------------------ */
/* Tokenizer (SentencePiece-compatible; no device, caller memory)           */
/* ------------------------------------------------------------------------ */

/* A tokenizer turns text into the ids of a SentencePiece `.model` and back,
 * producing exactly what SentencePiece 0.1.97 (`spm_encode --output_format=id`,
 * `spm_decode --input_format=id`) produces: same normalization (NFKC charsmap,
 * whitespace rules), unigram (Viterbi) or BPE segmentation, byte fallback,
 * user-defined symbols.  The model bytes are read in place and are untrusted:
 * a malformed file is NMT_ERR_TOKENIZER_MODEL.  Like a session it lives in
 * memory you provide, sized up front from `max_text_bytes` (the longest
 * sentence, in bytes, you will encode):
 *
 *   size_t need;  nmt_tokenizer_arena_size(model, model_size, 2048, &need);
 *   nmt_tokenizer *t;  nmt_tokenizer_create(model, model_size, 2048, arena, need, &t);
 *   const int32_t *ids; uint32_t n;  nmt_tokenizer_encode(t, "Hello", 5, &ids, &n);
 *   char out[256]; size_t len;  nmt_tokenizer_decode(t, ids, n, out, sizeof out, &len);
 *
 * A session whose model embeds a tokenizer owns one (nmt_session_tokenizer())
 * and its text calls below use it.  There is nothing to destroy: the
 * tokenizer holds no resources besides its arena (which holds a copy of the
 * model bytes). */
typedef struct nmt_tokenizer nmt_tokenizer;

/** Exact arena bytes nmt_tokenizer_create() needs (validates the model).
 *  NMT_ERR_UNSUPPORTED for WORD/CHAR models and models with a denormalizer. */
NMT_API nmt_status nmt_tokenizer_arena_size(const void *model, size_t model_size,
                                            uint32_t max_text_bytes, size_t *arena_bytes);

/** Create a tokenizer from `model` (a `.model` file's bytes, caller-owned;
 *  copied into the arena, so they may be freed or changed after the call) in
 *  `arena` (caller-owned, any alignment; add NMT_ARENA_ALIGNMENT - 1 bytes to
 *  the size for an unaligned pointer). */
NMT_API nmt_status nmt_tokenizer_create(const void *model, size_t model_size,
                                        uint32_t max_text_bytes, void *arena, size_t arena_size,
                                        nmt_tokenizer **out);

/** Encode one sentence (`len` bytes of UTF-8; invalid bytes are handled as
 *  SentencePiece does).  *ids points into the arena and stays valid until
 *  the next encode call.  NMT_ERR_INPUT_TOO_LONG if len > max_text_bytes. */
NMT_API nmt_status nmt_tokenizer_encode(nmt_tokenizer *t, const char *text, size_t len,
                                        const int32_t **ids, uint32_t *n_ids);

/** Decode ids into out[0, cap) (not NUL-terminated).  *out_len gets the
 *  text's byte count, also when cap is too small (then the status is
 *  NMT_ERR_BUFFER_TOO_SMALL and out holds a prefix).  out may be NULL with
 *  cap 0 to ask for the size.  NMT_ERR_TOKEN_OUT_OF_RANGE for a bad id. */
NMT_API nmt_status nmt_tokenizer_decode(const nmt_tokenizer *t, const int32_t *ids,
                                        uint32_t n_ids, char *out, size_t cap, size_t *out_len);

/** Bytes that always suffice to decode n_ids ids. */
NMT_API size_t nmt_tokenizer_decode_bound(const nmt_tokenizer *t, uint32_t n_ids);

/** The piece string of an id (points into the arena's copy of the model
 *  bytes, not NUL-terminated). */
NMT_API nmt_status nmt_tokenizer_piece(const nmt_tokenizer *t, int32_t id, const char **piece,
                                       size_t *len);

/** The SentencePiece model embedded in an .nmt image (validated like
 *  nmt_model_inspect): the source one (target = 0) or the target one (the
 *  source one when the model shares a single tokenizer).  *model points into
 *  `data`.  NMT_ERR_NO_TOKENIZER when the file embeds none. */
NMT_API nmt_status nmt_model_tokenizer(const void *data, size_t size, int target,
                                       const void **model, size_t *model_size);

/** Summary of a tokenizer (plain data). */
typedef struct nmt_tokenizer_info {
    uint32_t vocab_size;
    const char *model_type;   /**< "unigram" or "bpe" (static string) */
    int byte_fallback;
    int32_t unk_id;           /**< the UNKNOWN piece */
    int32_t bos_id, eos_id, pad_id; /**< as the trainer spec records them (-1 = none) */
    uint32_t max_text_bytes;
} nmt_tokenizer_info;

NMT_API nmt_status nmt_tokenizer_get_info(const nmt_tokenizer *t, nmt_tokenizer_info *info);

/* ------------------------------------------------------------------------ */
/* Session                                                                  */
/* ------------------------------------------------------------------------ */

/** Alignment the arena sizes below assume.  nmt_session_arena_size() is exact
 *  for memory aligned to this; for an arbitrary pointer add
 *  NMT_ARENA_ALIGNMENT - 1 bytes (the session aligns internally). */
#define NMT_ARENA_ALIGNMENT 64

/** Upper bounds the session is planned for; every buffer is sized from them. */
typedef struct nmt_limits {
    uint32_t max_src_len;   /**< source tokens per sentence, not counting the EOS the runtime appends (default 256) */
    uint32_t max_tgt_len;   /**< target tokens per sentence, not counting EOS (0 = max_src_len + 50, as in the paper) */
    uint32_t max_batch;     /**< sentences per call (default 1) */
    uint32_t max_beam;      /**< beam width (default 4) */
    uint32_t max_text_bytes;/**< bytes of one input sentence for the text API (default 2048,
                                 at most 16 MiB); longer text is NMT_ERR_INPUT_TOO_LONG, never
                                 truncated.  Ignored by models without a tokenizer. */
} nmt_limits;

/** Parameters of a session.  Exactly one of model_path / model_data. */
typedef struct nmt_session_params {
    const char *model_path;   /**< mapped read-only during nmt_session_create() only: the
                                   session keeps nothing of the file, which may then be
                                   truncated, replaced or removed */
    const void *model_data;   /**< or a caller-owned image, read during nmt_session_create()
                                   only (the session keeps no pointer into it) */
    size_t model_size;
    nmt_limits limits;        /**< zero fields take the defaults above */
    /** Nonzero: every translation also records its attention alignments
     *  (nmt_session_result_alignment / nmt_session_result_links): the
     *  probabilities of a decoder cross-attention over the source for each
     *  target token, averaged over its heads.  Costs memory only when set:
     *  a device buffer of max_batch * max_beam * (max_src_len + 1) floats
     *  and host memory of (max_tgt_len + 1) * max_batch * max_beam *
     *  (max_src_len + 2) 4-byte values (every step's rows and back-pointers),
     *  all part of nmt_session_arena_size(); and one small kernel and one
     *  read-back per decoder step.  Default 0 (off).
     *  NMT_ERR_UNSUPPORTED for a model whose decoder cross-attention is
     *  phrase attention (its keys are n-grams, not source tokens). */
    int alignment;
    /** With alignment: the decoder layer, 1-based (0 = the last, the
     *  default), and the head, 1-based (0 = the mean over every head, the
     *  default), whose cross-attention gives them.  Beyond the model's
     *  layers or heads: NMT_ERR_INVALID_ARGUMENT. */
    uint32_t align_layer, align_head;
    /** Nonzero: keep each hypothesis's per-token log-probabilities for
     *  nmt_session_result_token_logprobs (else that call is
     *  NMT_ERR_LIMIT_EXCEEDED).  Costs 3 * max_batch * max_beam *
     *  (max_tgt_len + 1) floats of the arena.  Default 0 (off). */
    int token_logprobs;
    /** Nonzero: plan the scratch of random sampling (nmt_decode_opts.sampling;
     *  without it a sampling call is NMT_ERR_LIMIT_EXCEEDED): tgt_vocab * 8 +
     *  max_batch * 8 bytes of the arena.  Default 0 (off). */
    int sampling;
    /** fp16 compute, for models whose 2-D weights are stored fp16
     *  (docs/PORTING.md, "Fast paths: fp16 compute"): the weights stay fp16
     *  in device memory (half the weight bytes) and the products against
     *  them (linear maps, embedding, output projection) read half weights
     *  and half-rounded activations with fp32 accumulation; softmax, layer
     *  norm, attention and the log-softmax stay fp32.
     *  NMT_FP16_OFF (0, default): the weights become fp32 at load (the
     *  portable path, and what nmt_session_arena_size() counts exactly);
     *  NMT_FP16_AUTO: fp16 compute when the device reports cl_khr_fp16
     *  (what `nmt-edge` asks for unless --no-fp16 or NMT_EDGE_NO_FP16=1);
     *  NMT_FP16_ON: fp16 compute, NMT_ERR_UNSUPPORTED from
     *  nmt_session_create() on a device without cl_khr_fp16.  Models with
     *  no fp16 2-D weights, and families that read weights other than
     *  through the shared layers (BA-NMT), load as before whatever this
     *  says.  nmt_session_arena_size() has no device: its device_bytes
     *  count fp16 weights at 2 bytes for ON and at 4 for OFF and AUTO
     *  (exact for ON and OFF; AUTO's is fp32's, an upper bound: ask with
     *  ON when nmt_device_info.has_fp16 for the exact count).  The host
     *  arena is the same in every mode.  Other values:
     *  NMT_ERR_INVALID_ARGUMENT. */
    int fp16_compute;
} nmt_session_params;

/** Values of nmt_session_params.fp16_compute. */
enum { NMT_FP16_OFF = 0, NMT_FP16_AUTO = 1, NMT_FP16_ON = 2 };

typedef struct nmt_session nmt_session;

/** Exact host bytes nmt_session_create() will use for this model and these
 *  limits (validates the model; no device needed).  Also reports the device
 *  bytes the session will allocate if device_bytes is non-NULL. */
NMT_API nmt_status nmt_session_arena_size(const nmt_session_params *params, size_t *arena_bytes,
                                          uint64_t *device_bytes);

/** Create a session: validates the model, uploads weights, creates every
 *  device buffer and kernel the model needs.  All host memory comes from
 *  `arena` (caller-owned, must outlive the session; see NMT_ARENA_ALIGNMENT).
 *  NMT_ERR_ARENA_TOO_SMALL if arena_size < nmt_session_arena_size(). */
NMT_API nmt_status nmt_session_create(nmt_device *dev, const nmt_session_params *params,
                                      void *arena, size_t arena_size, nmt_session **out);

/** Release the session's device buffers and kernels.  The arena is the caller's again. */
NMT_API void nmt_session_destroy(nmt_session *s);

/** Bytes of the arena in use at the high-water mark, not counting the
 *  alignment padding at its start (== nmt_session_arena_size()). */
NMT_API size_t nmt_session_arena_used(const nmt_session *s);

/** 1 when the session's products use fp16 weights (fp16 compute, see
 *  nmt_session_params.fp16_compute), 0 when they are fp32 or int8. */
NMT_API int nmt_session_fp16_compute(const nmt_session *s);

/** The model summary of a live session. */
NMT_API void nmt_session_model_info(const nmt_session *s, nmt_model_info *info);

/** Effective limits (defaults filled in). */
NMT_API void nmt_session_limits(const nmt_session *s, nmt_limits *limits);

/** Decoding options; zero-initialised fields take the defaults. */
typedef struct nmt_decode_opts {
    uint32_t beam;        /**< 1 = greedy; default 4 */
    float alpha;          /**< GNMT length penalty ((5+len)/6)^alpha; default 0.6, <0 = 0 */
    int alpha_set;        /**< nonzero: use `alpha` even if it is 0 */
    uint32_t max_len;     /**< max target tokens excluding EOS; 0 = src_len + 50 (capped by limits) */
    uint32_t n_best;      /**< hypotheses returned per sentence; default 1, <= beam */
    uint32_t min_len;     /**< no EOS before this many target tokens (a sentence's
                               max_len still ends it); default 0 */
    uint32_t no_repeat_ngram; /**< > 0: no n-gram of this many tokens appears twice in a
                               hypothesis; default 0 (off) */
    float max_len_a, max_len_b; /**< when max_len is 0 and either is > 0: a sentence's max
                               target tokens = a * its source tokens + b (capped by the
                               limits); default off (source tokens + 50) */
    /* ---- appended fields: zero-initialised = off ------------------------ */
    /** GNMT coverage penalty weight beta >= 0 (Wu et al. 2016): a finished
     *  hypothesis's score gets beta * sum_j log(min(c_j, 1)) added, c_j the
     *  attention source token j received over the hypothesis's tokens (the
     *  rows of nmt_session_result_alignment, EOS column excluded; c_j is
     *  floored at 1e-6), and its n-best list is re-ranked by that score.
     *  Needs a session created with `alignment` (else
     *  NMT_ERR_NO_ALIGNMENTS).  Default 0 (off). */
    float coverage_penalty;
    /** CTRL / CTranslate2 repetition penalty > 0: before each step's
     *  softmax, the logit z of every token already in the hypothesis
     *  becomes z / penalty when z >= 0 and z * penalty when z < 0 (once per
     *  distinct token; scores are those of the penalised distribution).
     *  0 or 1 = off (default). */
    float repetition_penalty;
    /** Nonzero: random sampling instead of search (beam must be 1; beam 0
     *  means 1 here, any other is NMT_ERR_INVALID_ARGUMENT).  Each step
     *  draws the next token among the sampling_topk most probable allowed
     *  tokens (0 = all of them, 1 = greedy: CTranslate2's sampling_topk),
     *  with probabilities proportional to p^(1/temperature).  Sentence i of
     *  a call draws from its own stream seeded with seed + i: the same seed
     *  gives the same output whatever else is in the batch.  Scores are the
     *  model's (the temperature does not change them). */
    int sampling;
    uint32_t sampling_topk;
    float sampling_temperature;   /**< > 0; 0 = 1.0 (default) */
    uint64_t seed;
    /** Forced target prefix: prefix[i] (prefix_len[i] ids, no BOS/EOS) of
     *  sentence i (i < the call's batch size) is decoded first, whatever
     *  the model prefers, then the search goes on; results include it and
     *  their scores count its log-probabilities.  A sentence's length limit
     *  is at least its prefix.  Caller's arrays, read during the call only;
     *  NULL = none; prefix_len[i] == 0: none for sentence i.  Longer than
     *  max_tgt_len: NMT_ERR_INPUT_TOO_LONG. */
    const int32_t *const *prefix;
    const uint32_t *prefix_len;
    /** The same as text, for nmt_session_translate_text only (tokenized
     *  with the target tokenizer; nmt_session_translate refuses it, and
     *  both forms at once, with NMT_ERR_INVALID_ARGUMENT). */
    const char *const *prefix_text;
    const size_t *prefix_text_len;
    /** Streaming: called after every decoding step (step 0, 1, ...) of
     *  nmt_session_translate / nmt_session_translate_text, on the calling
     *  thread, once the step's tokens are chosen; inside it
     *  nmt_session_partial() reads each sentence's best hypothesis so far.
     *  A nonzero return stops the call as `cancel` does.  NULL: none. */
    int (*on_step)(void *user, const nmt_session *s, uint32_t step);
    void *step_user;
    /** Cancellation and deadlines: checked before every step; when *cancel
     *  is nonzero (set by another thread, a signal handler or on_step's
     *  caller) the call stops and returns NMT_ERR_CANCELLED.  The sentences
     *  that had finished keep their results (nmt_session_n_results > 0 for
     *  them), the others have none; the session stays usable.  NULL: none. */
    const volatile int *cancel;
} nmt_decode_opts;

/** A batch of source sentences given as token ids (no BOS; the runtime
 *  appends EOS).  Empty sentences are allowed and translate to empty output. */
typedef struct nmt_batch {
    const int32_t *const *tokens;  /**< tokens[i] points at lens[i] ids */
    const uint32_t *lens;
    uint32_t n;                    /**< number of sentences (<= limits.max_batch) */
} nmt_batch;

/** A phrase of a source sentence: its tokens [start, start + len). */
typedef struct nmt_span {
    uint32_t start, len;
} nmt_span;

/** Phrase spans for the sentences of the next nmt_session_translate() or
 *  nmt_session_score() call on s, which consumes them (later calls have
 *  none unless set again).  MG-SA models with `syntax` phrase heads read
 *  them; other models ignore them.  spans[i] points at n_spans[i] spans of
 *  sentence i (i < n, n = that call's batch size) in ascending order, each
 *  non-empty, within [0, lens[i]) and not overlapping the one before; the
 *  call checks them whatever the model and fails with
 *  NMT_ERR_INVALID_SPANS (nothing translated) when one is not, or when n
 *  differs from its batch.  The runtime completes them to a partition:
 *  every token in no span, and the EOS it appends, is a phrase of its own;
 *  a sentence with n_spans[i] == 0 gets the model's fallback n-gram
 *  phrases, as every sentence does without spans.  The arrays are the
 *  caller's and must stay valid until that call returns; nothing is
 *  copied (the runtime stays allocation-free).  spans = NULL clears. */
NMT_API nmt_status nmt_session_set_spans(nmt_session *s, const nmt_span *const *spans, const uint32_t *n_spans,
                                         uint32_t n);

/** Translate a batch.  All sentences' beams advance together; the session
 *  decodes them longest source first and stops computing the rows of
 *  finished sentences at the end of that order (without sampling), which
 *  changes no result: results are indexed as the batch was given.  Results
 *  stay readable with nmt_session_result() until the next translate/score
 *  call. */
NMT_API nmt_status nmt_session_translate(nmt_session *s, const nmt_batch *src,
                                         const nmt_decode_opts *opts);

/** During a translate call (from nmt_decode_opts.on_step): sentence i's
 *  best hypothesis so far, its tokens (EOS excluded; they point into the
 *  arena and change at the next step) and whether the sentence has
 *  finished (*done 1: the final best hypothesis, as nmt_session_result will
 *  give it with n_best 1).  With beam search the best live hypothesis may
 *  change from one step to the next: its tokens are not always the previous
 *  step's plus one.  NMT_ERR_INVALID_ARGUMENT outside a call or for i past
 *  the batch. */
NMT_API nmt_status nmt_session_partial(const nmt_session *s, uint32_t i, const int32_t **tokens, uint32_t *len,
                                       int *done);

/** Number of hypotheses available for sentence `i` of the last translate
 *  call: min(n_best, hypotheses the search finished); 0 if i is out of range. */
NMT_API uint32_t nmt_session_n_results(const nmt_session *s, uint32_t i);

/** Hypothesis `rank` (0 = best) of sentence `i` of the last translate call.
 *  *tokens (excluding EOS) points into the arena.  *score is the
 *  length-normalised score used for ranking, *logprob the raw sum. */
NMT_API nmt_status nmt_session_result(const nmt_session *s, uint32_t i, uint32_t rank,
                                      const int32_t **tokens, uint32_t *len, float *score,
                                      float *logprob);

/** Per-token log-probabilities of the same hypothesis: *n = its tokens + 1
 *  values (each token's, then the EOS's; they sum to *logprob), written
 *  into lp[0, cap) (caller-owned; *n is set also when cap is too small:
 *  then NMT_ERR_BUFFER_TOO_SMALL and nothing is written).  Needs a session
 *  created with `token_logprobs` (else NMT_ERR_LIMIT_EXCEEDED). */
NMT_API nmt_status nmt_session_result_token_logprobs(const nmt_session *s, uint32_t i, uint32_t rank, float *lp,
                                                     size_t cap, uint32_t *n);

/** Soft alignment of hypothesis `rank` of sentence `i` of the last
 *  translate call (a session created with `alignment`): for each of its
 *  *tgt_len target tokens (EOS excluded; the tokens of nmt_session_result)
 *  a row of *src_cols = source tokens + 1 probabilities, the last column
 *  the EOS the runtime appends to the source; each row sums to 1.  Row p is
 *  the attention of the decoder step that predicted token p, following the
 *  hypothesis through the beam's reorderings.  Written row-major into
 *  soft[0, cap) (caller-owned, cap in floats); *tgt_len and *src_cols are
 *  set also when cap is too small (then NMT_ERR_BUFFER_TOO_SMALL and
 *  nothing is written; soft may be NULL with cap 0 to ask the size).
 *  Sentence and source positions count tokens (SentencePiece pieces for
 *  the text API), not words.  After nmt_session_score() (or _score_text)
 *  on such a session, the results are its pairs instead: pair i is result
 *  (i, 0), its rows those of the reference's tokens under teacher forcing
 *  (row p: the attention of the step that predicts reference token p).
 *  Both kinds use the memory alignments already plan (nothing more).
 *  NMT_ERR_NO_ALIGNMENTS when the session was created without alignments;
 *  NMT_ERR_INVALID_ARGUMENT for a result that does not exist (a rank other
 *  than 0 after a score call). */
NMT_API nmt_status nmt_session_result_alignment(const nmt_session *s, uint32_t i, uint32_t rank, float *soft,
                                                size_t cap, uint32_t *tgt_len, uint32_t *src_cols);

/** Hard alignment of the same hypothesis: src_pos[p] = the source token
 *  (0 <= src_pos[p] < source tokens, the appended EOS never) with the
 *  largest probability in row p of the soft alignment (the first on ties),
 *  for its *tgt_len target tokens; -1 when the source is empty.  The
 *  Pharaoh link of target token p is "src_pos[p]-p".  Sizes and statuses
 *  as nmt_session_result_alignment (cap in entries). */
NMT_API nmt_status nmt_session_result_links(const nmt_session *s, uint32_t i, uint32_t rank, int32_t *src_pos,
                                            size_t cap, uint32_t *tgt_len);

/** Forced decoding: log P(tgt | src) (natural log, EOS included) of each
 *  pair into out_logprob[i].  tgt sentences exclude BOS/EOS.  A session
 *  created with `alignment` decodes the targets position by position (the
 *  path beam search takes; equal to the whole-target pass up to rounding)
 *  and keeps each pair's alignment: read it with
 *  nmt_session_result_alignment / nmt_session_result_links (i, rank 0)
 *  until the next translate/score call. */
NMT_API nmt_status nmt_session_score(nmt_session *s, const nmt_batch *src, const nmt_batch *tgt,
                                     float *out_logprob);

/* ---- Text: models with an embedded tokenizer ---------------------------- */

/** The session's tokenizer for the source (target = 0) or target side
 *  (target != 0; the same object when the model shares one), or NULL when
 *  the model embeds none.  Valid for the session's lifetime; encoding with
 *  it uses scratch the text calls below also use. */
NMT_API nmt_tokenizer *nmt_session_tokenizer(const nmt_session *s, int target);

/** A batch of sentences as UTF-8 text (no NUL needed; lens[i] bytes each). */
typedef struct nmt_text_batch {
    const char *const *text;
    const size_t *lens;
    uint32_t n;                    /**< <= limits.max_batch */
} nmt_text_batch;

/** Tokenize every sentence with the source tokenizer, then translate as
 *  nmt_session_translate().  NMT_ERR_NO_TOKENIZER without a tokenizer;
 *  NMT_ERR_INPUT_TOO_LONG when a sentence has more than max_text_bytes bytes
 *  or more than max_src_len tokens.  Read results with nmt_session_result()
 *  (ids) or nmt_session_result_text(). */
NMT_API nmt_status nmt_session_translate_text(nmt_session *s, const nmt_text_batch *src,
                                              const nmt_decode_opts *opts);

/** Hypothesis `rank` of sentence `i` of the last translate call, detokenized
 *  with the target tokenizer.  *text (not NUL-terminated) points into the
 *  arena and stays valid until the next result_text/translate/score call. */
NMT_API nmt_status nmt_session_result_text(nmt_session *s, uint32_t i, uint32_t rank,
                                           const char **text, size_t *len, float *score,
                                           float *logprob);

/** nmt_session_score() on text pairs (target side tokenized with the target
 *  tokenizer; more than max_tgt_len tokens is NMT_ERR_INPUT_TOO_LONG). */
NMT_API nmt_status nmt_session_score_text(nmt_session *s, const nmt_text_batch *src,
                                          const nmt_text_batch *tgt, float *out_logprob);

/** Raw cl_int of the last failing OpenCL call in this session (0 if none). */
NMT_API int32_t nmt_session_last_cl_error(const nmt_session *s);

/* ---- Token batches (issue 56) -------------------------------------------- */

/** Plan token-based batches (CTranslate2's batch_type "tokens", Marian's
 *  --mini-batch-words) for n sentences of lens[i] source tokens each (as
 *  nmt_batch.lens: no EOS).  A batch costs its padded size, what the
 *  device computes: sentences * (longest lens + 1), the +1 the EOS the
 *  runtime appends; a batch holds at most max_tokens of it and at most
 *  max_batch sentences (the session's limits.max_batch).
 *
 *  The sentences are sorted by length, shortest first, ties in input
 *  order (so the plan depends on lens only and is reproducible), and cut
 *  greedily into consecutive batches: order[0, n) receives the input
 *  indices in that order, batch_sizes[0, *n_batches) the sentences of each
 *  batch (batch b is order[sum of batch_sizes[0, b)] onwards, each size
 *  >= 1, summing to n).  A sentence whose own cost (lens + 1) is over
 *  max_tokens is a batch of its own: it is never refused here (the session
 *  checks its length against max_src_len).  A sentence's translation does
 *  not depend on what else is in its batch (except that sampling seeds
 *  sentence i of a call with seed + i: pass the seeds in input order), so
 *  translating the batches and putting result k back at input index
 *  order[k] gives what sentence batches give.
 *
 *  Caller-owned arrays of n entries each (batch_sizes needs n too: the
 *  worst case is one sentence a batch); nothing is allocated, O(n log n).
 *  n == 0: *n_batches = 0 (the arrays may then be NULL).  NULL pointers
 *  (for n > 0), max_tokens 0 or max_batch 0: NMT_ERR_INVALID_ARGUMENT,
 *  nothing written.  Touches only its arguments: any thread, any time. */
NMT_API nmt_status nmt_batch_plan_tokens(const uint32_t *lens, uint32_t n, uint32_t max_tokens,
                                         uint32_t max_batch, uint32_t *order, uint32_t *batch_sizes,
                                         uint32_t *n_batches);

#ifdef __cplusplus
}
#endif
#endif /* NMT_EDGE_H */
