/* SPDX-License-Identifier: MIT */
/* device.h — internal view of the OpenCL device layer: the nmt_device
 * struct, program building with the on-disk binary cache, error mapping.
 * Everything here lives in the caller's device memory; no allocation. */
#ifndef NMT_DEVICE_H
#define NMT_DEVICE_H

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include "common.h"
#include "tuning.h"

#define NMT_MAX_PROGRAMS 48
#define NMT_PATH_MAX 512
#define NMT_BUILD_OPTIONS_MAX 256
#define NMT_PROGRAM_STEMS 4 /* files one program may join (nmt_device_program) */
#define NMT_BUILD_LOG_MAX 16384   /* scratch for build logs and extension strings */

/* Version of the on-disk program cache layout (part of every cache key and
 * of the file header): bump when the header or the key recipe changes. */
#define NMT_CLBIN_FORMAT 1u
#define NMT_CLBIN_MAGIC "NMTCLBIN"

/* A cached program is <cache_dir>/<16 hex digits of the key>.clbin: this
 * header followed by the driver's binary (CL_PROGRAM_BINARIES).  The header
 * lets a torn or bit-rotted file be rejected before the driver sees it. */
typedef struct nmt_clbin_header {
    char magic[8];          /* NMT_CLBIN_MAGIC, no NUL */
    uint32_t format;        /* NMT_CLBIN_FORMAT */
    uint32_t reserved;      /* 0 */
    uint64_t key;           /* cache key (the file name) */
    uint64_t payload_size;  /* bytes of driver binary after the header */
    uint64_t payload_hash;  /* nmt_fnv1a(NMT_FNV_OFFSET, payload) */
} nmt_clbin_header;

/* One kernel source embedded at build time (generated nmt_kernels_embedded.c). */
typedef struct nmt_embedded_source {
    const char *name;    /* file stem: "gemm" for cl/gemm.cl */
    const char *text;
    size_t length;
} nmt_embedded_source;

extern const nmt_embedded_source nmt_embedded_sources[];  /* the runtime's (forward) kernels */
/* cl/common.cl: helpers shared by every kernel program, prepended to each
 * program's own source (nmt_device_program). */
#define NMT_COMMON_SOURCE "common"
/* cl/chain.cl: the chained few-row ops, between common.cl and the program's
 * own source for the programs with a chain kernel (nmt_program_has_chain:
 * today gemm, gemm_i8, gemm_q8). */
#define NMT_CHAIN_SOURCE "chain"
extern const size_t nmt_embedded_source_count;
/* 1 when a program's own text has a chain kernel: a line that begins with
 * "CHAIN_KERNEL(" (chain.cl's macro).  The one rule for which programs
 * cl/chain.cl goes into; scripts/nmk-retarget.py applies the same. */
int nmt_program_has_chain(const char *text, size_t len);
/* 1 when a build log's line is clang's x86 ABI note on a 512-bit vector
 * (float16, vload16's result included) passed or returned by value where
 * the target lacks AVX-512 (-Wpsabi; PoCL on such a host gives dozens a
 * program).  After inlining nothing crosses a call, and PoCL refuses
 * -Wno-psabi as a build option, so it is no warning of the sources'; on
 * such hosts PoCL's builds get -w (nmt_device.quiet_builds). */
int nmt_build_log_abi_note(const char *line, size_t len);
/* The level a successful build's log goes to the logger at: NMT_LOG_WARN
 * where a line says "warning" (any case) and is neither the ABI note nor
 * clang's count ("33 warnings generated."), else NMT_LOG_DEBUG. */
nmt_log_level nmt_build_log_level(const char *log);

typedef struct nmt_program_slot {
    char source[32];                      /* file stem, or stems joined by '+' (NMT_PROGRAM_STEMS at most) */
    char options[NMT_BUILD_OPTIONS_MAX];  /* build options incl. -D tuning defines */
    cl_program program;
    int from_cache;                       /* 1: created from a cached binary */
    uint64_t key;                         /* cache key (0: no cache) */
    size_t binary_size;                   /* bytes of the binary last read or written */
    uint64_t source_hash;                 /* nmt_source_hash of the texts it was built from */
    int from_pack;                        /* 1: created from the kernel pack's binary */
} nmt_program_slot;

struct nmt_device {
    cl_platform_id platform;
    cl_device_id device;
    cl_context context;
    cl_command_queue queue;
    nmt_device_info info;
    uint64_t global_cache_bytes;    /* CL_DEVICE_GLOBAL_MEM_CACHE_SIZE, on a CPU device at least the host's
                                       last-level cache (nmt_host_llc_bytes); 0 unknown */
    nmt_logger log;
    nmt_tuning tuning;              /* kernel parameters (tuning.h): table, then tuning file */
    int gemm_forced;                /* nmt_device_params.gemm was not AUTO */
    char cache_dir[NMT_PATH_MAX];   /* "" = no binary cache */
    int cache_write;                /* binaries written at build (nmt_device_params.cache_fill) */
    nmt_build_progress_fn progress; /* nmt_device_params.progress, progress_user */
    void *progress_user;
    char kernel_dir[NMT_PATH_MAX];  /* "" = embedded sources */
    /* A second table of embedded sources searched after the runtime's: the
     * training library's kernels (nmt_device_add_sources). */
    const nmt_embedded_source *extra_sources;
    size_t n_extra_sources;
    int32_t last_cl_error;
    uint32_t n_programs;
    nmt_program_slot programs[NMT_MAX_PROGRAMS];
    /* statistics (for logs and tests) */
    uint32_t n_cache_hits, n_cache_misses, n_cache_rejects;
    uint32_t n_source_builds;       /* programs compiled from source */
    double source_build_s;          /* seconds those builds took (nmt_device_now), cache_store included */
    uint32_t n_pack_hits;           /* programs created from the kernel pack */
    char kernel_pack[NMT_PATH_MAX]; /* "" = no pack (kernel_pack.h) */
    int binaries_only;              /* never compile from source: forced, or no compiler */
    int compiler_available;         /* CL_DEVICE_COMPILER_AVAILABLE */
    int quiet_builds;               /* source builds get -w: PoCL's CPU device on an x86-64 host
                                       without AVX-512, whose clang prints the count of its ABI
                                       notes ("18 warnings generated.") on the process's stderr
                                       whatever the build log; a plain field, device_test sets it */
    int sg_mode;                    /* NMT_SG_AUTO, or NMT_SG_OFF (NMT_EDGE_NO_SUBGROUPS=1 at
                                       open), or NMT_SG_ALL: runtime/device/device_paths.c; a plain
                                       field, tests and reduce_bench set it */
    uint64_t cache_key_base;        /* hash of platform/device/driver identity */
    /* Work recorded but not enqueued yet (runtime/ops/ops_chain.c): every
     * enqueue, read, write and finish of this device runs settle(settle_ctx)
     * first (nmt_device_settle), so the queue sees the commands in the
     * order they were issued. */
    nmt_status (*settle)(void *ctx);
    void *settle_ctx;
    char build_log[NMT_BUILD_LOG_MAX]; /* last build log (also extension scratch) */
};

/* dev->sg_mode, read by nmt_ops_init (runtime/device/device_paths.c): AUTO, subgroup
 * reductions where the device has them and a work-group reduces (layernorm
 * on CPUs runs a work-item per row, portable); OFF, none; ALL, layernorm
 * too, one work-group of reduce_wg per row (tests and benchmarks). */
enum { NMT_SG_AUTO = 0, NMT_SG_OFF = 1, NMT_SG_ALL = 2 };

/* Record a failing cl_int, log it with `what`, and map it to a status:
 * CL_MEM_OBJECT_ALLOCATION_FAILURE / CL_OUT_OF_RESOURCES / CL_INVALID_BUFFER_SIZE
 * -> NMT_ERR_DEVICE_MEMORY, CL_BUILD_PROGRAM_FAILURE -> NMT_ERR_KERNEL_BUILD,
 * anything else -> NMT_ERR_OPENCL. */
nmt_status nmt_cl_fail(nmt_device *dev, cl_int err, const char *what);

/* Symbolic name of an OpenCL error code ("CL_OUT_OF_RESOURCES"); never NULL. */
const char *nmt_cl_error_str(cl_int err);

/* 1 if this build links CLBlast (NMT_HAVE_CLBLAST), else 0. */
int nmt_device_have_clblast(void);

/* Early-return on a failing OpenCL call. */
#define NMT_CL(dev, call)                                                      \
    do {                                                                       \
        cl_int nmt_cl_e_ = (call);                                             \
        if (nmt_cl_e_ != CL_SUCCESS) return nmt_cl_fail((dev), nmt_cl_e_, #call); \
    } while (0)

/* Get (build once per device, then reuse) the program for cl/<source>.cl
 * (after cl/common.cl, which every program includes, and cl/chain.cl for
 * gemm, gemm_i8 and gemm_q8; "common" and "chain" themselves are
 * INVALID_ARGUMENT) with `options`.  `source` may join up to
 * NMT_PROGRAM_STEMS stems with '+' ("attention+beam"): one program of all
 * their texts, in that order, after cl/common.cl: on PoCL each build costs
 * about as much for a small file as for several (docs/PERFORMANCE.md,
 * "Start-up"), so programs built with the same options go together.  Uses the binary cache when configured:
 * key = hash of device name, vendor, driver version, platform version, the
 * source texts and options.  A cached binary that the driver rejects is deleted and the
 * program rebuilt from source.  The program is owned by the device. */
nmt_status nmt_device_program(nmt_device *dev, const char *source, const char *options,
                              cl_program *out);

/* The options clBuildProgram gets for a program built with `options`:
 * "-cl-std=CL1.2" and the options (what the cache key and a kernel pack
 * entry record).  Cut to fit buf[cap]. */
void nmt_full_build_options(const char *options, char *buf, size_t cap);

/* Store again every cached program whose driver binary changed since it was
 * built or loaded (PoCL adds the code it compiles lazily per work-group size
 * at the first launch, so calling this after a warm-up makes the next start
 * skip those compiles too).  Best effort; returns how many were written. */
uint32_t nmt_device_cache_refresh(nmt_device *dev);

/* The library's default program cache directory into buf ($XDG_CACHE_HOME
 * /nmt-edge when absolute, else $HOME/.cache/nmt-edge); NULL when neither
 * gives one that fits. */
const char *nmt_default_cache_dir(char *buf, size_t cap);

/* Tell the progress callback that session creation is over, when programs
 * were compiled from source since `builds_before` (dev->n_source_builds
 * then): finished = 1 (nmt_build_progress_fn). */
void nmt_device_progress_done(nmt_device *dev, uint32_t builds_before);

/* Seconds on a monotonic clock (CLOCK_MONOTONIC): the start-up's debug log
 * lines say what each program build and the warm-up took (issue 54). */
double nmt_device_now(void);

/* Path of the device's tuning file: <cache_dir>/tuning-<16 hex>.txt, or ""
 * when the device has no cache directory. */
void nmt_device_tuning_path(const nmt_device *dev, char *buf, size_t cap);

/* Make the sources of `table` (n entries; static storage) available to
 * nmt_device_program after the runtime's own, which they cannot shadow: the
 * training library adds its kernels this way (nmt_train_ops_init), so the
 * runtime carries none of them.  One table per device: a call replaces the
 * previous one, NULL removes it.  kernel_dir, when set, still wins. */
void nmt_device_add_sources(nmt_device *dev, const nmt_embedded_source *table, size_t n);

/* Create a kernel from a program (caller releases with clReleaseKernel). */
nmt_status nmt_device_kernel(nmt_device *dev, cl_program prog, const char *name, cl_kernel *out);

/* Device buffer; `host` non-NULL copies host data in (CL_MEM_COPY_HOST_PTR). */
nmt_status nmt_device_buffer(nmt_device *dev, size_t bytes, const void *host, cl_mem *out);

/* Blocking host<->device transfers and queue completion. */
/* Enqueue the recorded work (dev->settle), if any. */
nmt_status nmt_device_settle(nmt_device *dev);

nmt_status nmt_device_write(nmt_device *dev, cl_mem buf, size_t offset, size_t bytes, const void *src);
nmt_status nmt_device_read(nmt_device *dev, cl_mem buf, size_t offset, size_t bytes, void *dst);
/* The read enqueued without waiting (the queue runs it after the commands
 * before it); *ev completes when dst holds the bytes (the caller releases
 * it).  dst must stay valid until then. */
nmt_status nmt_device_read_async(nmt_device *dev, cl_mem buf, size_t offset, size_t bytes, void *dst, cl_event *ev);
/* The write enqueued without waiting for it: the queue copies src when it
 * reaches the command, so src must hold its bytes, unchanged, until a later
 * blocking transfer or finish on the queue has returned.  It saves the
 * queue drain a blocking write costs (docs/RUNTIME.md, "Decoding"). */
nmt_status nmt_device_write_queued(nmt_device *dev, cl_mem buf, size_t offset, size_t bytes, const void *src);
/* Wait for *ev (from nmt_device_read_async), release it and set it NULL;
 * NMT_ERR_OPENCL when the command failed. */
nmt_status nmt_device_wait(nmt_device *dev, cl_event *ev);
nmt_status nmt_device_finish(nmt_device *dev);

/* Subgroup reductions (device_paths.c): 1 when the device reports
 * subgroups (and the driver answers clGetKernelSubGroupInfoKHR) and
 * dev->sg_mode is not NMT_SG_OFF.  nmt_kernel_sg_size: k's largest
 * subgroup size at local size lws (NMT_ERR_UNSUPPORTED without the query). */
int nmt_device_sg_wanted(const nmt_device *dev);
nmt_status nmt_kernel_sg_size(nmt_device *dev, cl_kernel k, size_t lws, uint32_t *out);

/* The int8-weight products of shape class cls on this device
 * (device_paths.c; the kernels: runtime/ops/ops_i8dot.c): 0 = int8 weights x fp32 (cl/gemm_q8.cl), else the int8 x
 * int8 kernel variant NMT_I8_* (cl/gemm_i8.cl).  From the tuning's i8dot
 * choice (auto: int8 x int8 where the device has a fast variant), the
 * device's cl_khr_integer_dot_product or x86 VNNI, and $NMT_EDGE_NO_I8DOT
 * (set and not "0": always 0). */
enum { NMT_I8_DOT_BUILTIN = 1, NMT_I8_PORTABLE = 2, NMT_I8_VNNI = 3 };
int nmt_i8dot_path(const nmt_device *dev, nmt_gemm_class cls);

/* The int8 x int8 variant "on" gives on this device: the dot built-in, x86
 * VNNI, or the portable kernel. */
int nmt_i8dot_fast_variant(const nmt_device *dev);

/* nmt_i8dot_path of every class as text, for nmt_device_info.int8_products;
 * returns nmt_device_info.int8x8_classes (bit c: class c runs int8 x int8). */
unsigned nmt_i8dot_describe(const nmt_device *dev, char *buf, size_t cap);

/* 64-bit FNV-1a, used for cache keys (chain by passing the previous value;
 * start with NMT_FNV_OFFSET). */
#define NMT_FNV_OFFSET 0xcbf29ce484222325ull
uint64_t nmt_fnv1a(uint64_t h, const void *data, size_t n);
/* The same over a NUL-terminated string including its terminator, so that
 * consecutive fields cannot run into each other ("ab"+"c" != "a"+"bc"). */
uint64_t nmt_fnv1a_str(uint64_t h, const char *s);

#endif
