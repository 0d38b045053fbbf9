/* SPDX-License-Identifier: MIT */
/* device.c — OpenCL device selection, capability query, the tuning a
 * device starts with, buffers and transfers, error mapping (programs and
 * their on-disk binary cache: device_program.c).
 *
 * The nmt_device lives at the start of the caller's memory (the handle is
 * `mem` itself).  Nothing here allocates: enumeration uses fixed arrays on
 * the stack, build logs and extension strings go through dev->build_log, and
 * cached binaries are read and written through file mappings. */
#include "device.h"

#include "kernel_pack.h"
#include "platform.h"

#include <CL/cl_ext.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(NMT_HAVE_CLBLAST) && NMT_HAVE_CLBLAST
#define NMT_CLBLAST_BUILT 1
#else
#define NMT_CLBLAST_BUILT 0
#endif

#ifndef CL_PLATFORM_NOT_FOUND_KHR
#define CL_PLATFORM_NOT_FOUND_KHR -1001
#endif

#define NMT_MAX_PLATFORMS 16
#define NMT_MAX_DEVICES 32          /* per platform */

/* ------------------------------------------------------------------------ */
/* Errors                                                                   */
/* ------------------------------------------------------------------------ */

const char *nmt_cl_error_str(cl_int err) {
    switch (err) {
#define NMT_E(x) case x: return #x;
        NMT_E(CL_SUCCESS)
        NMT_E(CL_DEVICE_NOT_FOUND)
        NMT_E(CL_DEVICE_NOT_AVAILABLE)
        NMT_E(CL_COMPILER_NOT_AVAILABLE)
        NMT_E(CL_MEM_OBJECT_ALLOCATION_FAILURE)
        NMT_E(CL_OUT_OF_RESOURCES)
        NMT_E(CL_OUT_OF_HOST_MEMORY)
        NMT_E(CL_PROFILING_INFO_NOT_AVAILABLE)
        NMT_E(CL_MEM_COPY_OVERLAP)
        NMT_E(CL_IMAGE_FORMAT_MISMATCH)
        NMT_E(CL_IMAGE_FORMAT_NOT_SUPPORTED)
        NMT_E(CL_BUILD_PROGRAM_FAILURE)
        NMT_E(CL_MAP_FAILURE)
        NMT_E(CL_MISALIGNED_SUB_BUFFER_OFFSET)
        NMT_E(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
        NMT_E(CL_COMPILE_PROGRAM_FAILURE)
        NMT_E(CL_LINKER_NOT_AVAILABLE)
        NMT_E(CL_LINK_PROGRAM_FAILURE)
        NMT_E(CL_DEVICE_PARTITION_FAILED)
        NMT_E(CL_KERNEL_ARG_INFO_NOT_AVAILABLE)
        NMT_E(CL_INVALID_VALUE)
        NMT_E(CL_INVALID_DEVICE_TYPE)
        NMT_E(CL_INVALID_PLATFORM)
        NMT_E(CL_INVALID_DEVICE)
        NMT_E(CL_INVALID_CONTEXT)
        NMT_E(CL_INVALID_QUEUE_PROPERTIES)
        NMT_E(CL_INVALID_COMMAND_QUEUE)
        NMT_E(CL_INVALID_HOST_PTR)
        NMT_E(CL_INVALID_MEM_OBJECT)
        NMT_E(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)
        NMT_E(CL_INVALID_IMAGE_SIZE)
        NMT_E(CL_INVALID_SAMPLER)
        NMT_E(CL_INVALID_BINARY)
        NMT_E(CL_INVALID_BUILD_OPTIONS)
        NMT_E(CL_INVALID_PROGRAM)
        NMT_E(CL_INVALID_PROGRAM_EXECUTABLE)
        NMT_E(CL_INVALID_KERNEL_NAME)
        NMT_E(CL_INVALID_KERNEL_DEFINITION)
        NMT_E(CL_INVALID_KERNEL)
        NMT_E(CL_INVALID_ARG_INDEX)
        NMT_E(CL_INVALID_ARG_VALUE)
        NMT_E(CL_INVALID_ARG_SIZE)
        NMT_E(CL_INVALID_KERNEL_ARGS)
        NMT_E(CL_INVALID_WORK_DIMENSION)
        NMT_E(CL_INVALID_WORK_GROUP_SIZE)
        NMT_E(CL_INVALID_WORK_ITEM_SIZE)
        NMT_E(CL_INVALID_GLOBAL_OFFSET)
        NMT_E(CL_INVALID_EVENT_WAIT_LIST)
        NMT_E(CL_INVALID_EVENT)
        NMT_E(CL_INVALID_OPERATION)
        NMT_E(CL_INVALID_GL_OBJECT)
        NMT_E(CL_INVALID_BUFFER_SIZE)
        NMT_E(CL_INVALID_MIP_LEVEL)
        NMT_E(CL_INVALID_GLOBAL_WORK_SIZE)
        NMT_E(CL_INVALID_PROPERTY)
        NMT_E(CL_INVALID_IMAGE_DESCRIPTOR)
        NMT_E(CL_INVALID_COMPILER_OPTIONS)
        NMT_E(CL_INVALID_LINKER_OPTIONS)
        NMT_E(CL_INVALID_DEVICE_PARTITION_COUNT)
        NMT_E(CL_PLATFORM_NOT_FOUND_KHR)
#undef NMT_E
    default: return "unknown OpenCL error";
    }
}

nmt_status nmt_cl_fail(nmt_device *dev, cl_int err, const char *what) {
    nmt_status s;
    switch (err) {
    case CL_MEM_OBJECT_ALLOCATION_FAILURE:
    case CL_OUT_OF_RESOURCES:
    case CL_INVALID_BUFFER_SIZE:
        s = NMT_ERR_DEVICE_MEMORY;
        break;
    case CL_BUILD_PROGRAM_FAILURE:
        s = NMT_ERR_KERNEL_BUILD;
        break;
    default:
        s = NMT_ERR_OPENCL;
        break;
    }
    if (dev != NULL) {
        dev->last_cl_error = (int32_t)err;
        nmt_log(&dev->log, NMT_LOG_ERROR, "OpenCL: %s failed: %s (%d)", what ? what : "call",
                nmt_cl_error_str(err), (int)err);
    }
    return s;
}

int nmt_device_have_clblast(void) { return NMT_CLBLAST_BUILT; }

uint64_t nmt_fnv1a(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = (const unsigned char *)data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

uint64_t nmt_fnv1a_str(uint64_t h, const char *s) { return nmt_fnv1a(h, s, strlen(s) + 1); }

/* ------------------------------------------------------------------------ */
/* Enumeration and selection                                                */
/* ------------------------------------------------------------------------ */

typedef struct nmt_cl_inventory {
    cl_uint n_platforms;
    cl_platform_id platforms[NMT_MAX_PLATFORMS];
    cl_uint n_devices[NMT_MAX_PLATFORMS];
    cl_device_id devices[NMT_MAX_PLATFORMS][NMT_MAX_DEVICES];
} nmt_cl_inventory;

/* Fill the inventory.  No platform at all (CL_PLATFORM_NOT_FOUND_KHR from
 * the ICD loader, or zero platforms) -> NMT_ERR_NO_DEVICE; a platform whose
 * device query fails is skipped (it has zero devices). */
static nmt_status enumerate(nmt_cl_inventory *inv, const nmt_logger *lg, cl_int *cl_err) {
    memset(inv, 0, sizeof *inv);
    *cl_err = CL_SUCCESS;
    cl_uint np = 0;
    cl_int e = clGetPlatformIDs(NMT_MAX_PLATFORMS, inv->platforms, &np);
    if (e == CL_PLATFORM_NOT_FOUND_KHR || (e == CL_SUCCESS && np == 0)) {
        *cl_err = e;
        nmt_log(lg, NMT_LOG_WARN, "no OpenCL platform found (%s)", nmt_cl_error_str(e));
        return NMT_ERR_NO_DEVICE;
    }
    if (e != CL_SUCCESS) {
        *cl_err = e;
        nmt_log(lg, NMT_LOG_ERROR, "OpenCL: clGetPlatformIDs failed: %s (%d)", nmt_cl_error_str(e),
                (int)e);
        return NMT_ERR_OPENCL;
    }
    inv->n_platforms = NMT_MIN(np, (cl_uint)NMT_MAX_PLATFORMS);
    cl_uint total = 0;
    for (cl_uint p = 0; p < inv->n_platforms; p++) {
        cl_uint nd = 0;
        e = clGetDeviceIDs(inv->platforms[p], CL_DEVICE_TYPE_ALL, NMT_MAX_DEVICES, inv->devices[p], &nd);
        if (e != CL_SUCCESS) {
            if (e != CL_DEVICE_NOT_FOUND)
                nmt_log(lg, NMT_LOG_WARN, "platform %u: clGetDeviceIDs failed: %s (%d); skipped",
                        (unsigned)p, nmt_cl_error_str(e), (int)e);
            nd = 0;
        }
        inv->n_devices[p] = NMT_MIN(nd, (cl_uint)NMT_MAX_DEVICES);
        total += inv->n_devices[p];
    }
    if (total == 0) {
        nmt_log(lg, NMT_LOG_WARN, "no OpenCL device found on %u platform(s)", (unsigned)inv->n_platforms);
        return NMT_ERR_NO_DEVICE;
    }
    return NMT_OK;
}

static void get_str(cl_device_id d, cl_device_info what, char *buf, size_t cap) {
    buf[0] = '\0';
    size_t n = 0;
    if (clGetDeviceInfo(d, what, 0, NULL, &n) != CL_SUCCESS || n == 0) return;
    if (n <= cap) {
        if (clGetDeviceInfo(d, what, cap, buf, NULL) != CL_SUCCESS) buf[0] = '\0';
    } else {
        /* Too long for the field: read into a bounded stack copy and truncate. */
        char tmp[1024];
        if (n <= sizeof tmp && clGetDeviceInfo(d, what, sizeof tmp, tmp, NULL) == CL_SUCCESS)
            nmt_strlcpy(buf, tmp, cap);
    }
    buf[cap - 1] = '\0';
}

static void get_platform_str(cl_platform_id p, cl_platform_info what, char *buf, size_t cap) {
    buf[0] = '\0';
    size_t n = 0;
    if (clGetPlatformInfo(p, what, 0, NULL, &n) != CL_SUCCESS || n == 0) return;
    if (n <= cap) {
        if (clGetPlatformInfo(p, what, cap, buf, NULL) != CL_SUCCESS) buf[0] = '\0';
    } else {
        char tmp[1024];
        if (n <= sizeof tmp && clGetPlatformInfo(p, what, sizeof tmp, tmp, NULL) == CL_SUCCESS)
            nmt_strlcpy(buf, tmp, cap);
    }
    buf[cap - 1] = '\0';
}

static cl_device_type device_type(cl_device_id d) {
    cl_device_type t = 0;
    if (clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof t, &t, NULL) != CL_SUCCESS) t = 0;
    return t;
}

/* Parse "P:D" (decimal, nothing else).  Returns 1 on success. */
static int parse_index_pair(const char *s, unsigned long *p, unsigned long *d) {
    unsigned long v[2] = {0, 0};
    for (int part = 0; part < 2; part++) {
        if (*s < '0' || *s > '9') return 0;
        while (*s >= '0' && *s <= '9') {
            if (v[part] > 100000ul) return 0;  /* absurd index */
            v[part] = v[part] * 10 + (unsigned long)(*s - '0');
            s++;
        }
        if (part == 0) {
            if (*s != ':') return 0;
            s++;
        }
    }
    if (*s != '\0') return 0;
    *p = v[0];
    *d = v[1];
    return 1;
}

static int streq_ci(const char *a, const char *b) {
    for (; *a && *b; a++, b++) {
        char x = *a, y = *b;
        if (x >= 'A' && x <= 'Z') x = (char)(x - 'A' + 'a');
        if (y >= 'A' && y <= 'Z') y = (char)(y - 'A' + 'a');
        if (x != y) return 0;
    }
    return *a == *b;
}

/* Apply the selection rule of nmt_device_params.device to the inventory. */
static int select_device(const nmt_cl_inventory *inv, const char *want, cl_uint *out_p, cl_uint *out_d) {
    if (want == NULL || want[0] == '\0') {
        for (cl_uint p = 0; p < inv->n_platforms; p++)
            for (cl_uint d = 0; d < inv->n_devices[p]; d++)
                if (device_type(inv->devices[p][d]) & CL_DEVICE_TYPE_GPU) {
                    *out_p = p;
                    *out_d = d;
                    return 1;
                }
        for (cl_uint p = 0; p < inv->n_platforms; p++)
            if (inv->n_devices[p] > 0) {
                *out_p = p;
                *out_d = 0;
                return 1;
            }
        return 0;
    }
    unsigned long ip, id;
    if (parse_index_pair(want, &ip, &id)) {
        if (ip >= inv->n_platforms || id >= inv->n_devices[ip]) return 0;
        *out_p = (cl_uint)ip;
        *out_d = (cl_uint)id;
        return 1;
    }
    cl_device_type type = 0;
    if (streq_ci(want, "gpu")) type = CL_DEVICE_TYPE_GPU;
    else if (streq_ci(want, "cpu")) type = CL_DEVICE_TYPE_CPU;
    else if (streq_ci(want, "accelerator")) type = CL_DEVICE_TYPE_ACCELERATOR;
    for (cl_uint p = 0; p < inv->n_platforms; p++) {
        char pname[256];
        get_platform_str(inv->platforms[p], CL_PLATFORM_NAME, pname, sizeof pname);
        for (cl_uint d = 0; d < inv->n_devices[p]; d++) {
            int match;
            if (type != 0) {
                match = (device_type(inv->devices[p][d]) & type) != 0;
            } else {
                char dname[256];
                get_str(inv->devices[p][d], CL_DEVICE_NAME, dname, sizeof dname);
                match = nmt_strcasestr_ascii(dname, want) || nmt_strcasestr_ascii(pname, want);
            }
            if (match) {
                *out_p = p;
                *out_d = d;
                return 1;
            }
        }
    }
    return 0;
}

/* Exact token match in a space-separated extension list. */
static int has_extension(const char *list, const char *name) {
    size_t n = strlen(name);
    const char *s = list;
    while (*s) {
        while (*s == ' ') s++;
        const char *e = s;
        while (*e && *e != ' ') e++;
        if ((size_t)(e - s) == n && memcmp(s, name, n) == 0) return 1;
        s = e;
    }
    return 0;
}

/* Fill dev->info from the chosen device; extension strings use the
 * build_log scratch. */
static void query_info(nmt_device *dev) {
    nmt_device_info *in = &dev->info;
    cl_device_id d = dev->device;
    get_platform_str(dev->platform, CL_PLATFORM_NAME, in->platform_name, sizeof in->platform_name);
    get_str(d, CL_DEVICE_NAME, in->device_name, sizeof in->device_name);
    get_str(d, CL_DEVICE_VENDOR, in->vendor, sizeof in->vendor);
    get_str(d, CL_DRIVER_VERSION, in->driver_version, sizeof in->driver_version);
    get_str(d, CL_DEVICE_VERSION, in->device_version, sizeof in->device_version);

    cl_device_type t = device_type(d);
    in->is_gpu = (t & CL_DEVICE_TYPE_GPU) != 0;
    in->is_cpu = (t & CL_DEVICE_TYPE_CPU) != 0;

    cl_uint u = 0;
    cl_ulong ul = 0;
    size_t sz = 0;
    cl_device_local_mem_type lmt = CL_LOCAL;
    if (clGetDeviceInfo(d, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof u, &u, NULL) == CL_SUCCESS) in->compute_units = u;
    if (clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof sz, &sz, NULL) == CL_SUCCESS)
        in->max_work_group_size = sz;
    if (clGetDeviceInfo(d, CL_DEVICE_LOCAL_MEM_SIZE, sizeof ul, &ul, NULL) == CL_SUCCESS) in->local_mem_bytes = ul;
    if (clGetDeviceInfo(d, CL_DEVICE_LOCAL_MEM_TYPE, sizeof lmt, &lmt, NULL) == CL_SUCCESS)
        in->local_mem_is_global = (lmt == CL_GLOBAL);
    if (clGetDeviceInfo(d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof ul, &ul, NULL) == CL_SUCCESS) in->global_mem_bytes = ul;
    if (clGetDeviceInfo(d, CL_DEVICE_GLOBAL_MEM_CACHE_SIZE, sizeof ul, &ul, NULL) == CL_SUCCESS)
        dev->global_cache_bytes = ul;
    if (in->is_cpu) { /* the host's CPU: PoCL reports its L3, Intel's runtime its L2 (1 MiB on the EPYC VM) */
        const uint64_t llc = nmt_host_llc_bytes();
        if (llc > dev->global_cache_bytes) dev->global_cache_bytes = llc;
    }
    if (clGetDeviceInfo(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof ul, &ul, NULL) == CL_SUCCESS) in->max_alloc_bytes = ul;
    if (clGetDeviceInfo(d, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof u, &u, NULL) == CL_SUCCESS)
        in->mem_base_align_bytes = u / 8;  /* the query answers in bits */
    if (clGetDeviceInfo(d, CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT, sizeof u, &u, NULL) == CL_SUCCESS)
        in->pref_vector_width_float = u;
    if (clGetDeviceInfo(d, CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT, sizeof u, &u, NULL) == CL_SUCCESS)
        in->native_vector_width_float = u;

    /* Extensions can be long; read them into the build-log scratch. */
    size_t n = 0;
    char *ext = dev->build_log;
    ext[0] = '\0';
    if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, 0, NULL, &n) == CL_SUCCESS && n <= sizeof dev->build_log) {
        if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, sizeof dev->build_log, ext, NULL) != CL_SUCCESS) ext[0] = '\0';
    } else {
        nmt_log(&dev->log, NMT_LOG_WARN, "device extension string unreadable (%zu bytes); assuming none", n);
    }
    ext[sizeof dev->build_log - 1] = '\0';
    in->has_fp16 = has_extension(ext, "cl_khr_fp16");
    in->has_subgroups = has_extension(ext, "cl_khr_subgroups") || has_extension(ext, "cl_intel_subgroups");
    cl_bitfield dotcaps = 0; /* dot(char4, char4) needs the 4x8-bit unpacked input */
    in->has_int_dot = has_extension(ext, "cl_khr_integer_dot_product") &&
                      clGetDeviceInfo(d, CL_DEVICE_INTEGER_DOT_PRODUCT_CAPABILITIES_KHR, sizeof dotcaps, &dotcaps,
                                      NULL) == CL_SUCCESS && (dotcaps & CL_DEVICE_INTEGER_DOT_PRODUCT_INPUT_4x8BIT_KHR);
    ext[0] = '\0';
    /* PoCL's CPU device runs in this process on this CPU, so the host's
     * CPUID answers for it (docs/PORTING.md, "x86 VNNI"). */
    in->has_x86_vnni = in->is_cpu && nmt_strcasestr_ascii(in->platform_name, "Portable Computing Language") &&
                       nmt_host_has_x86_vnni() && !nmt_env_flag("NMT_EDGE_NO_VNNI");
    /* the same in-process CPU: clang's ABI notes there (nmt_device.quiet_builds) */
    dev->quiet_builds = in->is_cpu && nmt_strcasestr_ascii(in->platform_name, "Portable Computing Language") &&
                        nmt_host_x86_lacks_avx512f();

    /* Identity of the compiler that produces binaries, for the cache key
     * (full strings, not the truncated info fields). */
    char buf[1024];
    uint64_t h = NMT_FNV_OFFSET;
    get_platform_str(dev->platform, CL_PLATFORM_VERSION, buf, sizeof buf);
    h = nmt_fnv1a_str(h, buf);
    get_str(d, CL_DEVICE_NAME, buf, sizeof buf);
    h = nmt_fnv1a_str(h, buf);
    get_str(d, CL_DEVICE_VENDOR, buf, sizeof buf);
    h = nmt_fnv1a_str(h, buf);
    get_str(d, CL_DRIVER_VERSION, buf, sizeof buf);
    h = nmt_fnv1a_str(h, buf);
    get_str(d, CL_DEVICE_VERSION, buf, sizeof buf);
    h = nmt_fnv1a_str(h, buf);
    dev->cache_key_base = h;
}

/* ------------------------------------------------------------------------ */
/* Open / close / info                                                      */
/* ------------------------------------------------------------------------ */

static void load_tuning(nmt_device *dev, nmt_gemm_provider forced);

size_t nmt_device_footprint(void) { return sizeof(struct nmt_device); }

static const char *provider_name(nmt_gemm_provider g) {
    switch (g) {
    case NMT_GEMM_OWN: return "own";
    case NMT_GEMM_CLBLAST: return "clblast";
    default: return "auto";
    }
}

const char *nmt_default_cache_dir(char *buf, size_t cap) {
    const char *v = getenv("XDG_CACHE_HOME");
    int n = -1;
    if (v && v[0] == '/') n = snprintf(buf, cap, "%s/nmt-edge", v); /* the XDG spec: relative values are ignored */
    else if ((v = getenv("HOME")) != NULL && v[0]) n = snprintf(buf, cap, "%s/.cache/nmt-edge", v);
    return n > 0 && (size_t)n < cap ? buf : NULL;
}

/* PoCL's CPU device with its kernel cache on (its default): a program's
 * binary is made by compiling every kernel in it again, and PoCL keeps the
 * compiled kernels itself (nmt_device_params.cache_fill). */
static int pocl_own_cache(const nmt_device *dev) {
    const char *v = getenv("POCL_KERNEL_CACHE");
    return dev->info.is_cpu && nmt_strcasestr_ascii(dev->info.platform_name, "Portable Computing Language") &&
           !(v && strcmp(v, "0") == 0);
}

nmt_status nmt_device_open(const nmt_device_params *params, void *mem, size_t mem_size, nmt_device **out) {
    if (out != NULL) *out = NULL;
    if (params == NULL || mem == NULL || out == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (((uintptr_t)mem & 15u) != 0) return NMT_ERR_INVALID_ARGUMENT;
    if (mem_size < sizeof(struct nmt_device)) return NMT_ERR_ARENA_TOO_SMALL;
    if ((unsigned)params->gemm > (unsigned)NMT_GEMM_CLBLAST) return NMT_ERR_INVALID_ARGUMENT;
    if (params->kernel_dir && strlen(params->kernel_dir) >= NMT_PATH_MAX - 48) return NMT_ERR_INVALID_ARGUMENT;
    if (params->kernel_pack && strlen(params->kernel_pack) >= NMT_PATH_MAX) return NMT_ERR_INVALID_ARGUMENT;

    nmt_device *dev = (nmt_device *)mem;
    memset(dev, 0, sizeof *dev);
    dev->log.fn = params->log;
    dev->log.user = params->log_user;
    dev->log.level = params->log_level;
    if (params->kernel_dir) nmt_strlcpy(dev->kernel_dir, params->kernel_dir, sizeof dev->kernel_dir);

    nmt_cl_inventory inv_storage;  /* about 4 KiB of stack */
    nmt_cl_inventory *inv = &inv_storage;
    cl_int cl_err = CL_SUCCESS;
    nmt_status s = enumerate(inv, &dev->log, &cl_err);
    if (s != NMT_OK) {
        dev->last_cl_error = cl_err;
        return s;
    }

    cl_uint ip = 0, id = 0;
    if (!select_device(inv, params->device, &ip, &id)) {
        nmt_log(&dev->log, NMT_LOG_ERROR, "no OpenCL device matches \"%s\"",
                params->device ? params->device : "");
        return NMT_ERR_NO_DEVICE;
    }
    dev->platform = inv->platforms[ip];
    dev->device = inv->devices[ip][id];
    dev->info.platform_index = ip;
    dev->info.device_index = id;
    query_info(dev);

    /* Binaries only: asked for, or the device has no compiler (FPGA flows). */
    cl_bool compiler = CL_TRUE;
    if (clGetDeviceInfo(dev->device, CL_DEVICE_COMPILER_AVAILABLE, sizeof compiler, &compiler, NULL) != CL_SUCCESS)
        compiler = CL_TRUE;
    dev->compiler_available = compiler != CL_FALSE;
    dev->binaries_only = params->binaries_only || !dev->compiler_available;
    /* issue 23's off switch for the subgroup reductions (runtime/device/device_paths.c) */
    dev->sg_mode = nmt_env_flag("NMT_EDGE_NO_SUBGROUPS") ? NMT_SG_OFF : NMT_SG_AUTO;

    /* GEMM provider; with a pack or without a compiler AUTO is ours
     * (CLBlast compiles its own programs at run time). */
    nmt_gemm_provider g = params->gemm;
    if (g == NMT_GEMM_CLBLAST && (!NMT_CLBLAST_BUILT || dev->binaries_only)) {
        nmt_log(&dev->log, NMT_LOG_ERROR, "gemm provider clblast requested but %s",
                dev->binaries_only ? "programs cannot be compiled here (binaries only)" : "this build has no CLBlast");
        return NMT_ERR_UNSUPPORTED;
    }
    nmt_gemm_provider tuning_gemm = params->gemm;
    if (tuning_gemm == NMT_GEMM_AUTO && ((params->kernel_pack && params->kernel_pack[0]) || dev->binaries_only))
        tuning_gemm = NMT_GEMM_OWN;
    dev->info.gemm = g;  /* resolved below, once the tuning is known */

    cl_int e = CL_SUCCESS;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)dev->platform, 0};
    dev->context = clCreateContext(props, 1, &dev->device, NULL, NULL, &e);
    if (dev->context == NULL || e != CL_SUCCESS) {
        dev->context = NULL;
        return nmt_cl_fail(dev, e != CL_SUCCESS ? e : CL_INVALID_CONTEXT, "clCreateContext");
    }
    /* kernel_args.h NMT_PROFILE_EVENTS: benchmarks set the variable */
    const cl_command_queue_properties qprops = nmt_env_flag("NMT_EDGE_QUEUE_PROFILING") ? CL_QUEUE_PROFILING_ENABLE : 0;
    dev->queue = clCreateCommandQueue(dev->context, dev->device, qprops, &e);
    if (dev->queue == NULL || e != CL_SUCCESS) {
        dev->queue = NULL;
        s = nmt_cl_fail(dev, e != CL_SUCCESS ? e : CL_INVALID_COMMAND_QUEUE, "clCreateCommandQueue");
        clReleaseContext(dev->context);
        dev->context = NULL;
        return s;
    }

    /* Binary cache: NULL the default directory, "" none; a directory we
     * cannot create disables the cache (the device still works, programs
     * are compiled every time). */
    char default_dir[NMT_PATH_MAX];
    const char *cache_dir = params->cache_dir ? params->cache_dir : nmt_default_cache_dir(default_dir, sizeof default_dir);
    dev->cache_write = params->cache_fill || !pocl_own_cache(dev);
    dev->progress = params->progress;
    dev->progress_user = params->progress_user;
    if (cache_dir && cache_dir[0]) {
        /* a long but valid path (cache files are named inside
         * NMT_PATH_MAX-byte buffers): run without the cache, say so once */
        const size_t len = strlen(cache_dir);
        if (len >= NMT_PATH_MAX - 32) {
            nmt_log(&dev->log, NMT_LOG_WARN,
                    "cache directory path of %zu bytes is longer than the %d this runtime handles; program cache "
                    "disabled", len, NMT_PATH_MAX - 33);
        } else if (nmt_make_dirs(cache_dir) == NMT_OK) {
            nmt_strlcpy(dev->cache_dir, cache_dir, sizeof dev->cache_dir);
        } else {
            nmt_log(&dev->log, NMT_LOG_WARN, "cannot create cache directory %s; program cache disabled",
                    cache_dir);
        }
    }

    load_tuning(dev, tuning_gemm);
    g = (nmt_gemm_provider)dev->tuning.gemm[NMT_GOP_NT][NMT_GCLASS_BIG].provider;
    dev->info.gemm = g;
    nmt_log(&dev->log, NMT_LOG_DEBUG, "kernel parameters: %s", dev->tuning.origin);

    if (params->kernel_pack && params->kernel_pack[0]) {
        s = nmt_kpack_attach(dev, params->kernel_pack);
        if (s != NMT_OK) {
            clReleaseCommandQueue(dev->queue);
            clReleaseContext(dev->context);
            dev->queue = NULL;
            dev->context = NULL;
            return s;
        }
    }
    if (dev->binaries_only)
        nmt_log(&dev->log, NMT_LOG_INFO, "binaries only (%s): programs come from %s, never from source",
                dev->compiler_available ? "asked for" : "the device has no compiler",
                dev->kernel_pack[0] ? "the kernel pack or the cache" : "the cache");

    nmt_log(&dev->log, NMT_LOG_INFO,
            "device %u:%u: %s (%s; %s; driver %s) %s, %u compute units, gemm=%s%s%s",
            (unsigned)ip, (unsigned)id, dev->info.device_name, dev->info.platform_name,
            dev->info.device_version, dev->info.driver_version,
            dev->info.is_gpu ? "GPU" : dev->info.is_cpu ? "CPU" : "accelerator",
            (unsigned)dev->info.compute_units, provider_name(g),
            dev->cache_dir[0] ? ", cache " : "", dev->cache_dir);
    *out = dev;
    return NMT_OK;
}

void nmt_device_close(nmt_device *dev) {
    if (dev == NULL) return;
    for (uint32_t i = 0; i < dev->n_programs; i++)
        if (dev->programs[i].program) clReleaseProgram(dev->programs[i].program);
    if (dev->queue) {
        clFinish(dev->queue);
        clReleaseCommandQueue(dev->queue);
    }
    if (dev->context) clReleaseContext(dev->context);
    memset(dev, 0, sizeof *dev);
}

void nmt_device_get_info(const nmt_device *dev, nmt_device_info *info) {
    if (dev == NULL || info == NULL) return;
    *info = dev->info;
    info->subgroup_reductions = nmt_device_sg_wanted(dev);
    info->int8x8_classes = nmt_i8dot_describe(dev, info->int8_products, sizeof info->int8_products);
}

int32_t nmt_device_last_cl_error(const nmt_device *dev) { return dev ? dev->last_cl_error : 0; }

nmt_status nmt_device_list(nmt_device_list_fn fn, void *user) {
    nmt_cl_inventory inv;
    cl_int e;
    nmt_status s = enumerate(&inv, NULL, &e);
    if (s != NMT_OK) return s;
    for (cl_uint p = 0; p < inv.n_platforms; p++) {
        char pname[128];
        get_platform_str(inv.platforms[p], CL_PLATFORM_NAME, pname, sizeof pname);
        for (cl_uint d = 0; d < inv.n_devices[p]; d++) {
            char dname[128];
            get_str(inv.devices[p][d], CL_DEVICE_NAME, dname, sizeof dname);
            if (fn) fn(user, p, d, pname, dname, (device_type(inv.devices[p][d]) & CL_DEVICE_TYPE_GPU) != 0);
        }
    }
    return NMT_OK;
}

/* Table row for the device, then the tuner's file, then a forced provider. */
static void load_tuning(nmt_device *dev, nmt_gemm_provider forced) {
    nmt_tuning *t = &dev->tuning;
    nmt_tuning_from_table(t, &dev->info);
    char path[NMT_PATH_MAX + 32];
    nmt_device_tuning_path(dev, path, sizeof path);
    nmt_mapping m;
    if (path[0] && nmt_map_file(path, &m) == NMT_OK) {
        if (nmt_tuning_parse(t, (const char *)m.data, m.size) == NMT_OK) {
            nmt_strlcpy(t->origin, "cache: ", sizeof t->origin); /* a long path is cut, as intended */
            nmt_strlcpy(t->origin + 7, path, sizeof t->origin - 7);
        } else {
            nmt_log(&dev->log, NMT_LOG_WARN, "tuning file %s not understood; using the built-in table", path);
        }
        nmt_unmap_file(&m);
    }
    if (!NMT_CLBLAST_BUILT || forced != NMT_GEMM_AUTO) {
        nmt_gemm_provider p = forced == NMT_GEMM_CLBLAST ? NMT_GEMM_CLBLAST : NMT_GEMM_OWN;
        for (int op = 0; op < NMT_GOP_COUNT; op++)
            for (int c = 0; c < NMT_GCLASS_COUNT; c++)
                if (op != NMT_GOP_Q8 && op != NMT_GOP_I8) nmt_gemm_cfg_set_provider(&t->gemm[op][c], p);
    }
    dev->gemm_forced = forced != NMT_GEMM_AUTO;
}

/* ------------------------------------------------------------------------ */
/* Kernels, buffers, transfers                                              */
/* ------------------------------------------------------------------------ */

nmt_status nmt_device_kernel(nmt_device *dev, cl_program prog, const char *name, cl_kernel *out) {
    if (out) *out = NULL;
    if (dev == NULL || prog == NULL || name == NULL || out == NULL) return NMT_ERR_INVALID_ARGUMENT;
    cl_int e = CL_SUCCESS;
    cl_kernel k = clCreateKernel(prog, name, &e);
    if (k == NULL || e != CL_SUCCESS) {
        char what[96];
        snprintf(what, sizeof what, "clCreateKernel(%s)", name);
        return nmt_cl_fail(dev, e != CL_SUCCESS ? e : CL_INVALID_KERNEL, what);
    }
    *out = k;
    return NMT_OK;
}

nmt_status nmt_device_buffer(nmt_device *dev, size_t bytes, const void *host, cl_mem *out) {
    if (out) *out = NULL;
    if (dev == NULL || out == NULL || bytes == 0 || dev->context == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (dev->info.max_alloc_bytes && (uint64_t)bytes > dev->info.max_alloc_bytes) {
        nmt_log(&dev->log, NMT_LOG_ERROR, "buffer of %zu bytes exceeds the device's max allocation (%llu)",
                bytes, (unsigned long long)dev->info.max_alloc_bytes);
        return nmt_cl_fail(dev, CL_INVALID_BUFFER_SIZE, "clCreateBuffer");
    }
    cl_mem_flags flags = CL_MEM_READ_WRITE | (host ? CL_MEM_COPY_HOST_PTR : 0);
    cl_int e = CL_SUCCESS;
    cl_mem m = clCreateBuffer(dev->context, flags, bytes, (void *)(uintptr_t)host, &e);
    if (m == NULL || e != CL_SUCCESS) return nmt_cl_fail(dev, e != CL_SUCCESS ? e : CL_MEM_OBJECT_ALLOCATION_FAILURE, "clCreateBuffer");
    *out = m;
    return NMT_OK;
}

nmt_status nmt_device_settle(nmt_device *dev) {
    if (dev == NULL || dev->settle == NULL) return NMT_OK;
    nmt_status (*fn)(void *) = dev->settle;
    dev->settle = NULL;
    return fn(dev->settle_ctx);
}

nmt_status nmt_device_write(nmt_device *dev, cl_mem buf, size_t offset, size_t bytes, const void *src) {
    if (dev == NULL || buf == NULL || (src == NULL && bytes)) return NMT_ERR_INVALID_ARGUMENT;
    if (bytes == 0) return NMT_OK;
    NMT_TRY(nmt_device_settle(dev));
    NMT_CL(dev, clEnqueueWriteBuffer(dev->queue, buf, CL_TRUE, offset, bytes, src, 0, NULL, NULL));
    return NMT_OK;
}

nmt_status nmt_device_write_queued(nmt_device *dev, cl_mem buf, size_t offset, size_t bytes, const void *src) {
    if (dev == NULL || buf == NULL || (src == NULL && bytes)) return NMT_ERR_INVALID_ARGUMENT;
    if (bytes == 0) return NMT_OK;
    NMT_TRY(nmt_device_settle(dev));
    NMT_CL(dev, clEnqueueWriteBuffer(dev->queue, buf, CL_FALSE, offset, bytes, src, 0, NULL, NULL));
    return NMT_OK;
}

nmt_status nmt_device_read(nmt_device *dev, cl_mem buf, size_t offset, size_t bytes, void *dst) {
    if (dev == NULL || buf == NULL || (dst == NULL && bytes)) return NMT_ERR_INVALID_ARGUMENT;
    if (bytes == 0) return NMT_OK;
    NMT_TRY(nmt_device_settle(dev));
    NMT_CL(dev, clEnqueueReadBuffer(dev->queue, buf, CL_TRUE, offset, bytes, dst, 0, NULL, NULL));
    return NMT_OK;
}

nmt_status nmt_device_read_async(nmt_device *dev, cl_mem buf, size_t offset, size_t bytes, void *dst, cl_event *ev) {
    if (dev == NULL || buf == NULL || ev == NULL || dst == NULL || bytes == 0) return NMT_ERR_INVALID_ARGUMENT;
    NMT_TRY(nmt_device_settle(dev));
    NMT_CL(dev, clEnqueueReadBuffer(dev->queue, buf, CL_FALSE, offset, bytes, dst, 0, NULL, ev));
    clFlush(dev->queue);
    return NMT_OK;
}

nmt_status nmt_device_wait(nmt_device *dev, cl_event *ev) {
    if (dev == NULL || ev == NULL || *ev == NULL) return NMT_ERR_INVALID_ARGUMENT;
    const cl_int err = clWaitForEvents(1, ev);
    clReleaseEvent(*ev);
    *ev = NULL;
    NMT_CL(dev, err);
    return NMT_OK;
}

nmt_status nmt_device_finish(nmt_device *dev) {
    if (dev == NULL || dev->queue == NULL) return NMT_ERR_INVALID_ARGUMENT;
    NMT_TRY(nmt_device_settle(dev));
    NMT_CL(dev, clFinish(dev->queue));
    return NMT_OK;
}
