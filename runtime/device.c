/* device.c — OpenCL device selection, capability query, program building
 * with the on-disk binary cache, buffers and transfers, error mapping.
 *
 * The nmt_device lives at the start of the caller's memory (the handle is
 * `mem` itself).  Nothing here allocates: enumeration uses fixed arrays on
 * the stack, build logs and extension strings go through dev->build_log, and
 * cached binaries are read and written through file mappings. */
#include "device.h"

#include "kernel_pack.h"
#include "ops.h"
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
#define NMT_BUILD_LOG_LINES 40      /* lines of a failing build log sent to the logger */

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

/* Hash a NUL-terminated string including its terminator, so that
 * consecutive fields cannot run into each other ("ab"+"c" != "a"+"bc"). */
static uint64_t fnv_str(uint64_t h, const char *s) { return nmt_fnv1a(h, s, strlen(s) + 1); }

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

    /* Identity of the compiler that produces binaries, for the cache key
     * (full strings, not the truncated info fields). */
    char buf[1024];
    uint64_t h = NMT_FNV_OFFSET;
    get_platform_str(dev->platform, CL_PLATFORM_VERSION, buf, sizeof buf);
    h = fnv_str(h, buf);
    get_str(d, CL_DEVICE_NAME, buf, sizeof buf);
    h = fnv_str(h, buf);
    get_str(d, CL_DEVICE_VENDOR, buf, sizeof buf);
    h = fnv_str(h, buf);
    get_str(d, CL_DRIVER_VERSION, buf, sizeof buf);
    h = fnv_str(h, buf);
    get_str(d, CL_DEVICE_VERSION, buf, sizeof buf);
    h = fnv_str(h, buf);
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

nmt_status nmt_device_open(const nmt_device_params *params, void *mem, size_t mem_size, nmt_device **out) {
    if (out != NULL) *out = NULL;
    if (params == NULL || mem == NULL || out == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (((uintptr_t)mem & 15u) != 0) return NMT_ERR_INVALID_ARGUMENT;
    if (mem_size < sizeof(struct nmt_device)) return NMT_ERR_ARENA_TOO_SMALL;
    if ((unsigned)params->gemm > (unsigned)NMT_GEMM_CLBLAST) return NMT_ERR_INVALID_ARGUMENT;
    if (params->cache_dir && strlen(params->cache_dir) >= NMT_PATH_MAX - 32) return NMT_ERR_INVALID_ARGUMENT;
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
    /* issue 23's off switch for the subgroup reductions (runtime/ops_sg.c) */
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

    /* Binary cache: a directory we cannot create disables the cache (the
     * device still works, programs are compiled every time). */
    if (params->cache_dir && params->cache_dir[0]) {
        if (nmt_make_dirs(params->cache_dir) == NMT_OK) {
            nmt_strlcpy(dev->cache_dir, params->cache_dir, sizeof dev->cache_dir);
        } else {
            nmt_log(&dev->log, NMT_LOG_WARN, "cannot create cache directory %s; program cache disabled",
                    params->cache_dir);
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
    info->subgroup_reductions = nmt_ops_sg_wanted(dev);
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

/* ------------------------------------------------------------------------ */
/* Programs                                                                 */
/* ------------------------------------------------------------------------ */

/* Fetch the build log into dev->build_log (truncated, NUL-terminated). */
static void fetch_build_log(nmt_device *dev, cl_program prog) {
    char *log = dev->build_log;
    size_t cap = sizeof dev->build_log;
    log[0] = '\0';
    size_t n = 0;
    if (clGetProgramBuildInfo(prog, dev->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &n) != CL_SUCCESS) return;
    if (n <= cap) {
        if (clGetProgramBuildInfo(prog, dev->device, CL_PROGRAM_BUILD_LOG, cap, log, NULL) != CL_SUCCESS)
            log[0] = '\0';
    } else {
        /* Longer than the scratch: the API cannot return a prefix, so say so. */
        snprintf(log, cap, "(build log of %zu bytes exceeds the %zu-byte buffer)", n, cap);
    }
    log[cap - 1] = '\0';
    /* Trim trailing whitespace; drivers often append newlines. */
    size_t len = strlen(log);
    while (len > 0 && (log[len - 1] == '\n' || log[len - 1] == '\r' || log[len - 1] == ' ')) log[--len] = '\0';
}

/* Send dev->build_log to the logger line by line (the logger's line
 * buffer is 1 KiB), at most NMT_BUILD_LOG_LINES lines. */
static void log_build_log(nmt_device *dev, nmt_log_level level, const char *source) {
    const char *p = dev->build_log;
    unsigned lines = 0;
    while (*p && lines < NMT_BUILD_LOG_LINES) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        nmt_log(&dev->log, level, "  %s.cl: %.*s", source, (int)NMT_MIN(n, (size_t)900), p);
        lines++;
        p += n;
        if (*p == '\n') p++;
    }
    if (*p) nmt_log(&dev->log, level, "  %s.cl: (build log truncated)", source);
}

static int contains_ci(const char *h, const char *n) { return nmt_strcasestr_ascii(h, n); }

typedef struct cache_fill_ctx {
    nmt_device *dev;
    cl_program program;
    uint64_t key;
    size_t payload;
} cache_fill_ctx;

/* Writes header + driver binary straight into the temp file's mapping. */
static int cache_fill(void *user, void *dst, size_t size) {
    cache_fill_ctx *c = (cache_fill_ctx *)user;
    if (dst == NULL || size != sizeof(nmt_clbin_header) + c->payload) return 1;
    unsigned char *payload = (unsigned char *)dst + sizeof(nmt_clbin_header);
    cl_int e = clGetProgramInfo(c->program, CL_PROGRAM_BINARIES, sizeof payload, &payload, NULL);
    if (e != CL_SUCCESS) {
        nmt_log(&c->dev->log, NMT_LOG_WARN, "clGetProgramInfo(CL_PROGRAM_BINARIES) failed: %s (%d)",
                nmt_cl_error_str(e), (int)e);
        return 1;
    }
    nmt_clbin_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, NMT_CLBIN_MAGIC, sizeof h.magic);
    h.format = NMT_CLBIN_FORMAT;
    h.key = c->key;
    h.payload_size = c->payload;
    h.payload_hash = nmt_fnv1a(NMT_FNV_OFFSET, payload, c->payload);
    memcpy(dst, &h, sizeof h);
    return 0;
}

/* Store the freshly built program's binary under `path` (best effort). */
static size_t cache_store(nmt_device *dev, cl_program prog, uint64_t key, const char *path) {
    size_t bin_size = 0;
    cl_int e = clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof bin_size, &bin_size, NULL);
    if (e != CL_SUCCESS || bin_size == 0) {
        nmt_log(&dev->log, NMT_LOG_WARN, "program binary unavailable (%s, %zu bytes); not cached",
                nmt_cl_error_str(e), bin_size);
        return 0;
    }
    cache_fill_ctx c = {dev, prog, key, bin_size};
    if (nmt_write_file_atomic(path, sizeof(nmt_clbin_header) + bin_size, cache_fill, &c) != NMT_OK) {
        nmt_log(&dev->log, NMT_LOG_WARN, "cannot write program cache file %s", path);
        return 0;
    }
    nmt_log(&dev->log, NMT_LOG_DEBUG, "cached program binary %s (%zu bytes)", path, bin_size);
    return bin_size;
}

/* Try the cache file.  Returns a built program, or NULL (miss or reject;
 * a rejected file is deleted and counted). */
static cl_program cache_load(nmt_device *dev, uint64_t key, const char *path, const char *options,
                             const char *source) {
    nmt_mapping m;
    if (nmt_map_file(path, &m) != NMT_OK) {
        dev->n_cache_misses++;
        return NULL;
    }
    const char *why = NULL;
    cl_int e = CL_SUCCESS;
    cl_program prog = NULL;
    nmt_clbin_header h;
    if (m.size < sizeof h) {
        why = "shorter than its header";
    } else {
        memcpy(&h, m.data, sizeof h);
        const unsigned char *payload = (const unsigned char *)m.data + sizeof h;
        size_t payload_size = m.size - sizeof h;
        if (memcmp(h.magic, NMT_CLBIN_MAGIC, sizeof h.magic) != 0 || h.format != NMT_CLBIN_FORMAT)
            why = "bad header";
        else if (h.key != key)
            why = "key mismatch";
        else if (h.payload_size != payload_size || payload_size == 0)
            why = "size mismatch";
        else if (h.payload_hash != nmt_fnv1a(NMT_FNV_OFFSET, payload, payload_size))
            why = "checksum mismatch";
        else {
            cl_int bin_status = CL_SUCCESS;
            prog = clCreateProgramWithBinary(dev->context, 1, &dev->device, &payload_size, &payload,
                                             &bin_status, &e);
            if (prog == NULL || e != CL_SUCCESS || bin_status != CL_SUCCESS) {
                if (e == CL_SUCCESS) e = bin_status != CL_SUCCESS ? bin_status : CL_INVALID_BINARY;
                why = "driver rejected the binary";
            } else {
                e = clBuildProgram(prog, 1, &dev->device, options, NULL, NULL);
                if (e != CL_SUCCESS) why = "driver could not build the binary";
            }
            if (why && prog) {
                clReleaseProgram(prog);
                prog = NULL;
            }
        }
    }
    nmt_unmap_file(&m);
    if (why) {
        /* Recovered by rebuilding from source, so last_cl_error is left alone. */
        nmt_log(&dev->log, NMT_LOG_WARN, "program cache %s for %s.cl: %s%s%s; rebuilding", path, source, why,
                e != CL_SUCCESS ? " " : "", e != CL_SUCCESS ? nmt_cl_error_str(e) : "");
        nmt_remove_file(path);
        dev->n_cache_rejects++;
        return NULL;
    }
    dev->n_cache_hits++;
    return prog;
}

void nmt_device_add_sources(nmt_device *dev, const nmt_embedded_source *table, size_t n) {
    if (dev == NULL) return;
    dev->extra_sources = table;
    dev->n_extra_sources = table ? n : 0;
}

static const nmt_embedded_source *find_embedded(const nmt_device *dev, const char *name) {
    for (size_t i = 0; i < nmt_embedded_source_count; i++)
        if (strcmp(nmt_embedded_sources[i].name, name) == 0) return &nmt_embedded_sources[i];
    for (size_t i = 0; i < dev->n_extra_sources; i++)
        if (strcmp(dev->extra_sources[i].name, name) == 0) return &dev->extra_sources[i];
    return NULL;
}

/* The text of <source>.cl: embedded, or mapped from kernel_dir (*file, to be
 * unmapped by the caller).  A file missing from kernel_dir is an I/O error,
 * never a fallback to the embedded copy. */
static nmt_status source_text(nmt_device *dev, const char *source, nmt_mapping *file, const char **text,
                              size_t *len) {
    if (dev->kernel_dir[0]) {
        char path[NMT_PATH_MAX + 64];
        snprintf(path, sizeof path, "%s/%s.cl", dev->kernel_dir, source);
        if (nmt_map_file(path, file) != NMT_OK) {
            nmt_log(&dev->log, NMT_LOG_ERROR, "cannot read kernel source %s", path);
            return NMT_ERR_IO;
        }
        *text = file->data ? (const char *)file->data : "";
        *len = file->size;
        return NMT_OK;
    }
    const nmt_embedded_source *es = find_embedded(dev, source);
    if (es == NULL) {
        nmt_log(&dev->log, NMT_LOG_ERROR, "no embedded kernel source %s.cl", source);
        return NMT_ERR_INVALID_ARGUMENT;
    }
    *text = es->text;
    *len = es->length;
    return NMT_OK;
}

nmt_status nmt_device_program(nmt_device *dev, const char *source, const char *options, cl_program *out) {
    if (out) *out = NULL;
    if (dev == NULL || source == NULL || out == NULL || dev->context == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (options == NULL) options = "";
    if (source[0] == '\0' || strlen(source) >= sizeof dev->programs[0].source ||
        strlen(options) >= sizeof dev->programs[0].options)
        return NMT_ERR_INVALID_ARGUMENT;
    for (const char *c = source; *c; c++)  /* a file stem, never a path */
        if (*c == '/' || *c == '\\' || *c == '.') return NMT_ERR_INVALID_ARGUMENT;
    if (strcmp(source, NMT_COMMON_SOURCE) == 0) return NMT_ERR_INVALID_ARGUMENT; /* prepended, not a program */

    for (uint32_t i = 0; i < dev->n_programs; i++) {
        nmt_program_slot *sl = &dev->programs[i];
        if (strcmp(sl->source, source) == 0 && strcmp(sl->options, options) == 0) {
            *out = sl->program;
            return NMT_OK;
        }
    }
    if (dev->n_programs >= NMT_MAX_PROGRAMS) {
        nmt_log(&dev->log, NMT_LOG_ERROR, "program table full (%d programs)", NMT_MAX_PROGRAMS);
        return NMT_ERR_UNSUPPORTED;
    }

    /* Source text: cl/common.cl (helpers every program shares) then the
     * program's own file; embedded, or both mapped from kernel_dir for the
     * duration of the build. */
    nmt_mapping files[2] = {{NULL, 0}, {NULL, 0}};
    const char *texts[2];
    size_t lens[2];
    nmt_status ls = source_text(dev, NMT_COMMON_SOURCE, &files[0], &texts[0], &lens[0]);
    if (ls == NMT_OK) ls = source_text(dev, source, &files[1], &texts[1], &lens[1]);
    if (ls != NMT_OK) {
        nmt_unmap_file(&files[0]);
        return ls;
    }
    char full_opts[NMT_BUILD_OPTIONS_MAX + 32];
    nmt_full_build_options(options, full_opts, sizeof full_opts);
    uint64_t source_hash = NMT_FNV_OFFSET;  /* what a pack entry must have been built from */
    for (int i = 0; i < 2; i++) {  /* lengths as u64: the same on every host */
        const uint64_t len64 = (uint64_t)lens[i];
        source_hash = nmt_fnv1a(source_hash, &len64, sizeof len64);
        source_hash = nmt_fnv1a(source_hash, texts[i], lens[i]);
    }

    char cache_path[NMT_PATH_MAX + 32];
    uint64_t key = 0;
    cl_program prog = NULL;
    int from_cache = 0, from_pack = 0;
    size_t binary_size = 0;
    nmt_status s = NMT_OK;
    if (dev->kernel_pack[0]) {
        s = nmt_kpack_program(dev, source, full_opts, source_hash, &prog);
        from_pack = prog != NULL;
    }
    if (s == NMT_OK && prog == NULL && dev->cache_dir[0]) {
        const uint32_t fmt = NMT_CLBIN_FORMAT;
        key = fnv_str(dev->cache_key_base, source);
        for (int i = 0; i < 2; i++) {
            key = nmt_fnv1a(key, &lens[i], sizeof lens[i]);
            key = nmt_fnv1a(key, texts[i], lens[i]);
        }
        key = fnv_str(key, full_opts);
        key = nmt_fnv1a(key, &fmt, sizeof fmt);
        snprintf(cache_path, sizeof cache_path, "%s/%016llx.clbin", dev->cache_dir, (unsigned long long)key);
        prog = cache_load(dev, key, cache_path, full_opts, source);
        from_cache = prog != NULL;
        if (prog != NULL &&
            clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof binary_size, &binary_size, NULL) != CL_SUCCESS)
            binary_size = 0;
    }

    if (s == NMT_OK && prog == NULL && dev->binaries_only) {
        nmt_log(&dev->log, NMT_LOG_ERROR, "%s.cl (\"%s\") is in no kernel pack%s and cannot be compiled here "
                "(binaries only); make a pack for this model and device (nmt-edge-convert kernels)",
                source, full_opts, dev->kernel_pack[0] ? "" : " (none given)");
        s = NMT_ERR_KERNEL_PACK_MISSING;
    }
    if (s == NMT_OK && prog == NULL) {
        cl_int e = CL_SUCCESS;
        prog = clCreateProgramWithSource(dev->context, 2, texts, lens, &e);
        if (prog == NULL || e != CL_SUCCESS) {
            prog = NULL;
            s = nmt_cl_fail(dev, e != CL_SUCCESS ? e : CL_INVALID_PROGRAM, "clCreateProgramWithSource");
        } else {
            e = clBuildProgram(prog, 1, &dev->device, full_opts, NULL, NULL);
            fetch_build_log(dev, prog);
            if (e != CL_SUCCESS) {
                nmt_status mapped = nmt_cl_fail(dev, e, "clBuildProgram");
                /* Compiler rejections are build failures whatever the code. */
                if (e == CL_BUILD_PROGRAM_FAILURE || e == CL_INVALID_BUILD_OPTIONS ||
                    e == CL_COMPILER_NOT_AVAILABLE || e == CL_INVALID_PROGRAM)
                    mapped = NMT_ERR_KERNEL_BUILD;
                s = mapped;
                nmt_log(&dev->log, NMT_LOG_ERROR, "building %s.cl with \"%s\" failed; build log:", source,
                        full_opts);
                log_build_log(dev, NMT_LOG_ERROR, source);
                clReleaseProgram(prog);
                prog = NULL;
            } else {
                dev->n_source_builds++;
                if (dev->build_log[0]) {
                    nmt_log_level lvl = contains_ci(dev->build_log, "warning") ? NMT_LOG_WARN : NMT_LOG_DEBUG;
                    nmt_log(&dev->log, lvl, "build log of %s.cl (\"%s\"):", source, full_opts);
                    log_build_log(dev, lvl, source);
                }
                if (dev->cache_dir[0]) binary_size = cache_store(dev, prog, key, cache_path);
            }
        }
    }
    nmt_unmap_file(&files[1]);
    nmt_unmap_file(&files[0]);
    if (s != NMT_OK) return s;

    nmt_program_slot *sl = &dev->programs[dev->n_programs++];
    nmt_strlcpy(sl->source, source, sizeof sl->source);
    nmt_strlcpy(sl->options, options, sizeof sl->options);
    sl->program = prog;
    sl->from_cache = from_cache;
    sl->key = key;
    sl->binary_size = binary_size;
    sl->source_hash = source_hash;
    sl->from_pack = from_pack;
    nmt_log(&dev->log, NMT_LOG_DEBUG, "program %s.cl (\"%s\") %s", source, options,
            from_pack ? "created from the kernel pack" : from_cache ? "loaded from cache" : "built from source");
    *out = prog;
    return NMT_OK;
}

void nmt_full_build_options(const char *options, char *buf, size_t cap) {
    snprintf(buf, cap, "-cl-std=CL1.2%s%s", options && options[0] ? " " : "", options ? options : "");
}

uint32_t nmt_device_cache_refresh(nmt_device *dev) {
    if (dev == NULL || dev->cache_dir[0] == '\0') return 0;
    uint32_t written = 0;
    for (uint32_t i = 0; i < dev->n_programs; i++) {
        nmt_program_slot *sl = &dev->programs[i];
        size_t now = 0;
        if (sl->program == NULL || sl->key == 0 ||
            clGetProgramInfo(sl->program, CL_PROGRAM_BINARY_SIZES, sizeof now, &now, NULL) != CL_SUCCESS ||
            now == 0 || now == sl->binary_size)
            continue;
        char path[NMT_PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/%016llx.clbin", dev->cache_dir, (unsigned long long)sl->key);
        size_t stored = cache_store(dev, sl->program, sl->key, path);
        if (stored) {
            sl->binary_size = stored;
            written++;
        }
    }
    if (written) nmt_log(&dev->log, NMT_LOG_DEBUG, "program cache: %u binaries refreshed after warm-up", (unsigned)written);
    return written;
}

void nmt_device_tuning_path(const nmt_device *dev, char *buf, size_t cap) {
    if (buf == NULL || cap == 0) return;
    buf[0] = '\0';
    if (dev == NULL || dev->cache_dir[0] == '\0') return;
    snprintf(buf, cap, "%s/tuning-%016llx.txt", dev->cache_dir, (unsigned long long)dev->cache_key_base);
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
            snprintf(t->origin, sizeof t->origin, "cache: %s", path);
        } else {
            nmt_log(&dev->log, NMT_LOG_WARN, "tuning file %s not understood; using the built-in table", path);
        }
        nmt_unmap_file(&m);
    }
    if (!NMT_CLBLAST_BUILT || forced != NMT_GEMM_AUTO) {
        nmt_gemm_provider p = forced == NMT_GEMM_CLBLAST ? NMT_GEMM_CLBLAST : NMT_GEMM_OWN;
        for (int op = 0; op < NMT_GOP_COUNT; op++)
            for (int c = 0; c < NMT_GCLASS_COUNT; c++)
                if (op != NMT_GOP_Q8 && op != NMT_GOP_I8) {
                    t->gemm[op][c].provider = (uint8_t)p;
                    if (p == NMT_GEMM_CLBLAST) t->gemm[op][c].kgroup = 0;
                }
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

nmt_status nmt_device_write(nmt_device *dev, cl_mem buf, size_t offset, size_t bytes, const void *src) {
    if (dev == NULL || buf == NULL || (src == NULL && bytes)) return NMT_ERR_INVALID_ARGUMENT;
    if (bytes == 0) return NMT_OK;
    NMT_CL(dev, clEnqueueWriteBuffer(dev->queue, buf, CL_TRUE, offset, bytes, src, 0, NULL, NULL));
    return NMT_OK;
}

nmt_status nmt_device_write_queued(nmt_device *dev, cl_mem buf, size_t offset, size_t bytes, const void *src) {
    if (dev == NULL || buf == NULL || (src == NULL && bytes)) return NMT_ERR_INVALID_ARGUMENT;
    if (bytes == 0) return NMT_OK;
    NMT_CL(dev, clEnqueueWriteBuffer(dev->queue, buf, CL_FALSE, offset, bytes, src, 0, NULL, NULL));
    return NMT_OK;
}

nmt_status nmt_device_read(nmt_device *dev, cl_mem buf, size_t offset, size_t bytes, void *dst) {
    if (dev == NULL || buf == NULL || (dst == NULL && bytes)) return NMT_ERR_INVALID_ARGUMENT;
    if (bytes == 0) return NMT_OK;
    NMT_CL(dev, clEnqueueReadBuffer(dev->queue, buf, CL_TRUE, offset, bytes, dst, 0, NULL, NULL));
    return NMT_OK;
}

nmt_status nmt_device_read_async(nmt_device *dev, cl_mem buf, size_t offset, size_t bytes, void *dst, cl_event *ev) {
    if (dev == NULL || buf == NULL || ev == NULL || dst == NULL || bytes == 0) return NMT_ERR_INVALID_ARGUMENT;
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
    NMT_CL(dev, clFinish(dev->queue));
    return NMT_OK;
}
