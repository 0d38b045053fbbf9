/* SPDX-License-Identifier: MIT */
/* device_test.c — the device layer (runtime/device/device.c, device_program.c) and the platform
 * services it uses (runtime/base/platform_posix.c): selection, capabilities,
 * program building, added source tables, the on-disk binary cache,
 * kernel_dir, build failures, error mapping, buffers, atomic file writes and
 * mappings. */
#include "test_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ops.h"
#include "ops_train.h"
#include "platform.h"

#ifndef CL_PLATFORM_NOT_FOUND_KHR
#define CL_PLATFORM_NOT_FOUND_KHR -1001
#endif

/* ---- helpers ------------------------------------------------------------- */

/* Parameters for a device opened by this test: the test device selection,
 * but no binary cache unless a test sets one. */
static nmt_device_params params_nocache(void) {
    nmt_device_params p;
    nmt_test_default_params(&p);
    p.cache_dir = ""; /* none (NULL: the default directory) */
    return p;
}

typedef struct opened {
    nmt_device *dev;
    void *mem;
} opened;

static opened open_ok(const nmt_device_params *p) {
    opened o = {NULL, NULL};
    nmt_status s = nmt_test_device_open_with(p, &o.mem, &o.dev);
    if (s != NMT_OK)
        fail_msg("nmt_device_open(device=\"%s\") failed: %s", p->device ? p->device : "(null)", nmt_status_str(s));
    return o;
}

static void close_dev(opened *o) {
    nmt_test_device_close(o->dev, o->mem);
    o->dev = NULL;
    o->mem = NULL;
}

static nmt_status open_status(const char *device) {
    nmt_device_params p = params_nocache();
    p.device = device;
    p.log = NULL;  /* failures are expected: keep stderr quiet */
    opened o = {NULL, NULL};
    nmt_status s = nmt_test_device_open_with(&p, &o.mem, &o.dev);
    if (s == NMT_OK) close_dev(&o);
    else assert_null(o.dev);
    return s;
}

/* Count devices of a type by asking OpenCL directly (independent of the
 * code under test). */
static unsigned count_cl_devices(cl_device_type type) {
    cl_platform_id plats[16];
    cl_uint np = 0;
    if (clGetPlatformIDs(16, plats, &np) != CL_SUCCESS) return 0;
    unsigned total = 0;
    for (cl_uint p = 0; p < np && p < 16; p++) {
        cl_uint nd = 0;
        if (clGetDeviceIDs(plats[p], type, 0, NULL, &nd) == CL_SUCCESS) total += nd;
    }
    return total;
}

typedef struct listed {
    unsigned n;
    uint32_t platform[64], device[64];
    char name[64][128];
    char pname[64][128];
    int is_gpu[64];
} listed;

static void list_cb(void *user, uint32_t platform, uint32_t device, const char *platform_name,
                    const char *device_name, int is_gpu) {
    listed *l = user;
    if (l->n >= 64) return;
    l->platform[l->n] = platform;
    l->device[l->n] = device;
    snprintf(l->name[l->n], sizeof l->name[0], "%s", device_name);
    snprintf(l->pname[l->n], sizeof l->pname[0], "%s", platform_name);
    l->is_gpu[l->n] = is_gpu;
    l->n++;
}

/* Run the "add" kernel of elementwise.cl from `prog` and check it exactly. */
static void check_add_kernel(nmt_device *dev, cl_program prog) {
    enum { N = 37 };
    float a[N], b[N], got[N];
    for (int i = 0; i < N; i++) {
        a[i] = (float)i * 0.5f;
        b[i] = 100.0f - (float)i;
    }
    cl_kernel k = NULL;
    nmt_test_assert_ok(dev, nmt_device_kernel(dev, prog, "add", &k));
    cl_mem da = nmt_test_upload_f32(dev, a, N), db = nmt_test_upload_f32(dev, b, N);
    cl_ulong zero = 0;
    cl_uint n = N;
    assert_int_equal(clSetKernelArg(k, 0, sizeof da, &da), CL_SUCCESS);
    assert_int_equal(clSetKernelArg(k, 1, sizeof zero, &zero), CL_SUCCESS);
    assert_int_equal(clSetKernelArg(k, 2, sizeof db, &db), CL_SUCCESS);
    assert_int_equal(clSetKernelArg(k, 3, sizeof zero, &zero), CL_SUCCESS);
    assert_int_equal(clSetKernelArg(k, 4, sizeof n, &n), CL_SUCCESS);
    size_t g = N;
    assert_int_equal(clEnqueueNDRangeKernel(dev->queue, k, 1, NULL, &g, NULL, 0, NULL, NULL), CL_SUCCESS);
    nmt_test_download_f32(dev, da, 0, N, got);
    for (int i = 0; i < N; i++) assert_float_equal(got[i], a[i] + b[i], 0.0f);
    clReleaseKernel(k);
    nmt_test_release(da);
    nmt_test_release(db);
}

static char *path_join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    assert_non_null(p);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* ---- selection ----------------------------------------------------------- */

static void test_list(void **state) {
    (void)state;
    listed l;
    memset(&l, 0, sizeof l);
    assert_int_equal(nmt_device_list(list_cb, &l), NMT_OK);
    assert_true(l.n >= 1);
    assert_int_equal(l.n, count_cl_devices(CL_DEVICE_TYPE_ALL));
    /* indices are dense: platforms ascending, devices counting from 0 */
    for (unsigned i = 0; i < l.n; i++) {
        assert_true(l.name[i][0] != '\0');
        assert_true(l.pname[i][0] != '\0');
        if (i == 0 || l.platform[i] != l.platform[i - 1]) assert_int_equal(l.device[i], 0);
        else assert_int_equal(l.device[i], l.device[i - 1] + 1);
    }
    assert_int_equal(nmt_device_list(NULL, NULL), NMT_OK);  /* counting only */
}

static void test_open_default_rule(void **state) {
    (void)state;
    listed l;
    memset(&l, 0, sizeof l);
    assert_int_equal(nmt_device_list(list_cb, &l), NMT_OK);
    unsigned want = 0;  /* first GPU over all platforms, else the first device */
    for (unsigned i = 0; i < l.n; i++)
        if (l.is_gpu[i]) {
            want = i;
            break;
        }
    const char *forms[] = {NULL, ""};
    for (int f = 0; f < 2; f++) {
        nmt_device_params p = params_nocache();
        p.device = forms[f];
        opened o = open_ok(&p);
        nmt_device_info info;
        nmt_device_get_info(o.dev, &info);
        assert_int_equal(info.platform_index, l.platform[want]);
        assert_int_equal(info.device_index, l.device[want]);
        assert_string_equal(info.device_name, l.name[want]);
        assert_int_equal(nmt_device_last_cl_error(o.dev), 0);
        close_dev(&o);
    }
}

static void test_capabilities(void **state) {
    (void)state;
    nmt_device_params p = params_nocache();
    opened o = open_ok(&p);
    nmt_device_info in;
    nmt_device_get_info(o.dev, &in);
    cl_device_id d = o.dev->device;

    assert_true(in.device_name[0] && in.platform_name[0] && in.vendor[0]);
    assert_true(in.driver_version[0] && in.device_version[0]);
    assert_memory_equal(in.device_version, "OpenCL ", 7);
    assert_true(in.compute_units >= 1);
    assert_true(in.max_work_group_size >= 1);
    assert_true(in.local_mem_bytes >= 1024);
    assert_true(in.global_mem_bytes > 0);
    assert_true(in.max_alloc_bytes > 0 && in.max_alloc_bytes <= in.global_mem_bytes);
    assert_true(in.mem_base_align_bytes >= 4);
    assert_int_equal(in.mem_base_align_bytes & (in.mem_base_align_bytes - 1), 0); /* power of two */
    assert_true(in.pref_vector_width_float >= 1 && in.native_vector_width_float >= 1);
    assert_true(in.gemm == NMT_GEMM_OWN || in.gemm == NMT_GEMM_CLBLAST);

    /* Cross-check with direct queries. */
    cl_device_type t = 0;
    assert_int_equal(clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof t, &t, NULL), CL_SUCCESS);
    assert_int_equal(in.is_gpu, (t & CL_DEVICE_TYPE_GPU) != 0);
    assert_int_equal(in.is_cpu, (t & CL_DEVICE_TYPE_CPU) != 0);
    size_t wg = 0;
    assert_int_equal(clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg, &wg, NULL), CL_SUCCESS);
    assert_int_equal(in.max_work_group_size, wg);
    cl_uint bits = 0;
    assert_int_equal(clGetDeviceInfo(d, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof bits, &bits, NULL), CL_SUCCESS);
    assert_int_equal(in.mem_base_align_bytes, bits / 8);
    cl_device_local_mem_type lt = CL_LOCAL;
    assert_int_equal(clGetDeviceInfo(d, CL_DEVICE_LOCAL_MEM_TYPE, sizeof lt, &lt, NULL), CL_SUCCESS);
    assert_int_equal(in.local_mem_is_global, lt == CL_GLOBAL);
    size_t n = 0;
    assert_int_equal(clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, 0, NULL, &n), CL_SUCCESS);
    char *ext = malloc(n + 2);
    assert_non_null(ext);
    assert_int_equal(clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, n, ext + 1, NULL), CL_SUCCESS);
    ext[0] = ' ';  /* " list " so that " name " finds whole tokens */
    ext[n] = ' ';
    ext[n + 1] = '\0';
    assert_int_equal(in.has_fp16, strstr(ext, " cl_khr_fp16 ") != NULL);
    assert_int_equal(in.has_subgroups,
                     strstr(ext, " cl_khr_subgroups ") != NULL || strstr(ext, " cl_intel_subgroups ") != NULL);
    free(ext);
    /* AUTO resolves to CLBlast only on a GPU of a CLBlast build */
    assert_int_equal(in.gemm, (in.is_gpu && nmt_device_have_clblast()) ? NMT_GEMM_CLBLAST : NMT_GEMM_OWN);
    close_dev(&o);
}

static void test_select_by_index(void **state) {
    (void)state;
    listed l;
    memset(&l, 0, sizeof l);
    assert_int_equal(nmt_device_list(list_cb, &l), NMT_OK);
    for (unsigned i = 0; i < l.n; i++) {
        char sel[32];
        snprintf(sel, sizeof sel, "%u:%u", (unsigned)l.platform[i], (unsigned)l.device[i]);
        nmt_device_params p = params_nocache();
        p.device = sel;
        opened o = open_ok(&p);
        assert_int_equal(o.dev->info.platform_index, l.platform[i]);
        assert_int_equal(o.dev->info.device_index, l.device[i]);
        assert_string_equal(o.dev->info.device_name, l.name[i]);
        close_dev(&o);
    }
    /* out of range or malformed index pairs never fall back to another device */
    assert_int_equal(open_status("9:9"), NMT_ERR_NO_DEVICE);
    assert_int_equal(open_status("0:99"), NMT_ERR_NO_DEVICE);
    assert_int_equal(open_status("99:0"), NMT_ERR_NO_DEVICE);
    assert_int_equal(open_status("0:"), NMT_ERR_NO_DEVICE);
    assert_int_equal(open_status(":0"), NMT_ERR_NO_DEVICE);
    assert_int_equal(open_status("0:0:0"), NMT_ERR_NO_DEVICE);
}

static void test_select_by_type(void **state) {
    (void)state;
    const struct {
        const char *name;
        cl_device_type type;
    } kinds[] = {{"cpu", CL_DEVICE_TYPE_CPU}, {"GPU", CL_DEVICE_TYPE_GPU}, {"Accelerator", CL_DEVICE_TYPE_ACCELERATOR}};
    for (size_t i = 0; i < NMT_ARRAY_LEN(kinds); i++) {
        unsigned have = count_cl_devices(kinds[i].type);
        nmt_device_params p = params_nocache();
        p.device = kinds[i].name;
        p.log = NULL;
        opened o = {NULL, NULL};
        nmt_status s = nmt_test_device_open_with(&p, &o.mem, &o.dev);
        if (have == 0) {
            assert_int_equal(s, NMT_ERR_NO_DEVICE);
            continue;
        }
        assert_int_equal(s, NMT_OK);
        cl_device_type t = 0;
        assert_int_equal(clGetDeviceInfo(o.dev->device, CL_DEVICE_TYPE, sizeof t, &t, NULL), CL_SUCCESS);
        assert_true((t & kinds[i].type) != 0);
        close_dev(&o);
    }
    assert_true(count_cl_devices(CL_DEVICE_TYPE_CPU) + count_cl_devices(CL_DEVICE_TYPE_GPU) > 0);
}

static void test_select_by_name(void **state) {
    (void)state;
    nmt_device_params p = params_nocache();
    opened o = open_ok(&p);
    nmt_device_info ref = o.dev->info;
    close_dev(&o);

    /* A middle slice of the device name, case flipped, finds a device with
     * that name (the first such in enumeration order). */
    size_t len = strlen(ref.device_name);
    assert_true(len >= 3);
    char sub[64];
    size_t from = len / 3, n = NMT_MIN(len - from, (size_t)12);
    memcpy(sub, ref.device_name + from, n);
    sub[n] = '\0';
    for (size_t i = 0; i < n; i++) {
        char c = sub[i];
        if (c >= 'a' && c <= 'z') sub[i] = (char)(c - 'a' + 'A');
        else if (c >= 'A' && c <= 'Z') sub[i] = (char)(c - 'A' + 'a');
    }
    p.device = sub;
    o = open_ok(&p);
    assert_true(nmt_strcasestr_ascii(o.dev->info.device_name, sub) || nmt_strcasestr_ascii(o.dev->info.platform_name, sub));
    if (strcmp(o.dev->info.device_name, ref.device_name) == 0) {
        /* the same device unless an earlier one also matches */
        assert_true(o.dev->info.platform_index <= ref.platform_index);
    }
    close_dev(&o);

    /* The platform name selects a device of that platform. */
    p.device = ref.platform_name;
    o = open_ok(&p);
    assert_true(nmt_strcasestr_ascii(o.dev->info.platform_name, ref.platform_name) ||
                nmt_strcasestr_ascii(o.dev->info.device_name, ref.platform_name));
    close_dev(&o);

    assert_int_equal(open_status("no-such-device-xyz"), NMT_ERR_NO_DEVICE);
}

static void test_open_arguments(void **state) {
    (void)state;
    nmt_device_params p = params_nocache();
    p.log = NULL;
    size_t need = nmt_device_footprint();
    assert_true(need >= sizeof(struct nmt_device));
    void *mem = NULL;
    assert_int_equal(posix_memalign(&mem, 64, need + 64), 0);
    nmt_device *dev = (nmt_device *)0x1;

    assert_int_equal(nmt_device_open(NULL, mem, need, &dev), NMT_ERR_INVALID_ARGUMENT);
    assert_null(dev);
    assert_int_equal(nmt_device_open(&p, NULL, need, &dev), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_device_open(&p, mem, need, NULL), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_device_open(&p, (char *)mem + 8, need, &dev), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_device_open(&p, mem, need - 1, &dev), NMT_ERR_ARENA_TOO_SMALL);
    p.gemm = (nmt_gemm_provider)7;
    assert_int_equal(nmt_device_open(&p, mem, need, &dev), NMT_ERR_INVALID_ARGUMENT);
    assert_null(dev);

    /* Providers */
    p.gemm = NMT_GEMM_OWN;
    assert_int_equal(nmt_device_open(&p, mem, need, &dev), NMT_OK);
    assert_ptr_equal(dev, mem);
    assert_int_equal(dev->info.gemm, NMT_GEMM_OWN);
    nmt_device_close(dev);
    p.gemm = NMT_GEMM_CLBLAST;
    nmt_status s = nmt_device_open(&p, mem, need, &dev);
    if (nmt_device_have_clblast()) {
        assert_int_equal(s, NMT_OK);
        assert_int_equal(dev->info.gemm, NMT_GEMM_CLBLAST);
        nmt_device_close(dev);
    } else {
        assert_int_equal(s, NMT_ERR_UNSUPPORTED);
        assert_null(dev);
    }
    /* close(NULL) and get_info/last_cl_error on NULL are harmless */
    nmt_device_close(NULL);
    assert_int_equal(nmt_device_last_cl_error(NULL), 0);
    free(mem);
}

/* ---- errors, hashing, buffers -------------------------------------------- */

static void test_cl_fail_mapping(void **state) {
    (void)state;
    nmt_device_params p = params_nocache();
    p.log = NULL;  /* nmt_cl_fail logs at ERROR */
    opened o = open_ok(&p);
    const struct {
        cl_int err;
        nmt_status want;
    } cases[] = {
        {CL_MEM_OBJECT_ALLOCATION_FAILURE, NMT_ERR_DEVICE_MEMORY},
        {CL_OUT_OF_RESOURCES, NMT_ERR_DEVICE_MEMORY},
        {CL_INVALID_BUFFER_SIZE, NMT_ERR_DEVICE_MEMORY},
        {CL_BUILD_PROGRAM_FAILURE, NMT_ERR_KERNEL_BUILD},
        {CL_INVALID_KERNEL_NAME, NMT_ERR_OPENCL},
        {CL_OUT_OF_HOST_MEMORY, NMT_ERR_OPENCL},
        {CL_INVALID_VALUE, NMT_ERR_OPENCL},
        {-9999, NMT_ERR_OPENCL},
        {-2048, NMT_ERR_OPENCL},  /* a CLBlast-specific status */
    };
    for (size_t i = 0; i < NMT_ARRAY_LEN(cases); i++) {
        assert_int_equal(nmt_cl_fail(o.dev, cases[i].err, "test"), cases[i].want);
        assert_int_equal(nmt_device_last_cl_error(o.dev), cases[i].err);  /* raw code kept */
    }
    assert_int_equal(nmt_cl_fail(NULL, CL_OUT_OF_RESOURCES, "no device"), NMT_ERR_DEVICE_MEMORY);
    assert_string_equal(nmt_cl_error_str(CL_INVALID_KERNEL_NAME), "CL_INVALID_KERNEL_NAME");
    assert_string_equal(nmt_cl_error_str(CL_PLATFORM_NOT_FOUND_KHR), "CL_PLATFORM_NOT_FOUND_KHR");
    assert_string_equal(nmt_cl_error_str(-12345), "unknown OpenCL error");
    close_dev(&o);
}

static void test_fnv1a(void **state) {
    (void)state;
    /* Reference values of 64-bit FNV-1a. */
    assert_true(nmt_fnv1a(NMT_FNV_OFFSET, "", 0) == 0xcbf29ce484222325ull);
    assert_true(nmt_fnv1a(NMT_FNV_OFFSET, "a", 1) == 0xaf63dc4c8601ec8cull);
    assert_true(nmt_fnv1a(NMT_FNV_OFFSET, "foobar", 6) == 0x85944171f73967e8ull);
    /* chaining == hashing the concatenation */
    assert_true(nmt_fnv1a(nmt_fnv1a(NMT_FNV_OFFSET, "foo", 3), "bar", 3) == 0x85944171f73967e8ull);
}

static void test_buffers(void **state) {
    (void)state;
    nmt_device_params p = params_nocache();
    p.log = NULL;
    opened o = open_ok(&p);
    nmt_device *dev = o.dev;
    float init[16], part[5] = {-1, -2, -3, -4, -5}, got[16];
    for (int i = 0; i < 16; i++) init[i] = (float)i;
    cl_mem m = nmt_test_upload_f32(dev, init, 16);
    assert_int_equal(nmt_device_write(dev, m, 3 * sizeof(float), sizeof part, part), NMT_OK);
    assert_int_equal(nmt_device_read(dev, m, 0, sizeof got, got), NMT_OK);
    for (int i = 0; i < 16; i++) assert_float_equal(got[i], (i >= 3 && i < 8) ? part[i - 3] : init[i], 0.0f);
    assert_int_equal(nmt_device_read(dev, m, 2 * sizeof(float), 0, NULL), NMT_OK);  /* empty transfer */
    assert_int_equal(nmt_device_finish(dev), NMT_OK);
    nmt_test_release(m);

    cl_mem bad = (cl_mem)0x1;
    assert_int_equal(nmt_device_buffer(dev, 0, NULL, &bad), NMT_ERR_INVALID_ARGUMENT);
    assert_null(bad);
    assert_int_equal(nmt_device_buffer(dev, (size_t)dev->info.max_alloc_bytes + 4096, NULL, &bad),
                     NMT_ERR_DEVICE_MEMORY);
    assert_int_equal(nmt_device_last_cl_error(dev), CL_INVALID_BUFFER_SIZE);
    /* reading past the end is an OpenCL error with the raw code kept */
    m = nmt_test_upload_f32(dev, init, 16);
    assert_int_equal(nmt_device_read(dev, m, 8 * sizeof(float), sizeof got, got), NMT_ERR_OPENCL);
    assert_int_equal(nmt_device_last_cl_error(dev), CL_INVALID_VALUE);
    nmt_test_release(m);
    close_dev(&o);
}

/* ---- programs ------------------------------------------------------------ */

static void test_program_table(void **state) {
    (void)state;
    nmt_device_params p = params_nocache();
    p.log = NULL;
    opened o = open_ok(&p);
    nmt_device *dev = o.dev;
    cl_program a = NULL, b = NULL, c = NULL;
    nmt_test_assert_ok(dev, nmt_device_program(dev, "elementwise", "-DREDUCE_WG=64", &a));
    assert_int_equal(dev->n_programs, 1);
    assert_int_equal(dev->n_source_builds, 1);
    nmt_test_assert_ok(dev, nmt_device_program(dev, "elementwise", "-DREDUCE_WG=64", &b));
    assert_ptr_equal(a, b);  /* built once per (source, options) */
    assert_int_equal(dev->n_programs, 1);
    assert_int_equal(dev->n_source_builds, 1);
    nmt_test_assert_ok(dev, nmt_device_program(dev, "elementwise", "-DREDUCE_WG=32", &c));
    assert_ptr_not_equal(a, c);
    assert_int_equal(dev->n_programs, 2);
    assert_string_equal(dev->programs[1].options, "-DREDUCE_WG=32");
    assert_int_equal(dev->programs[1].from_cache, 0);
    check_add_kernel(dev, c);

    assert_int_equal(nmt_device_program(dev, "no_such_source", "", &a), NMT_ERR_INVALID_ARGUMENT);
    assert_null(a);
    assert_int_equal(nmt_device_program(dev, "../cl/gemm", "", &a), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_device_program(dev, "", "", &a), NMT_ERR_INVALID_ARGUMENT);
    char longopt[NMT_BUILD_OPTIONS_MAX + 8];
    memset(longopt, 'x', sizeof longopt - 1);
    longopt[sizeof longopt - 1] = '\0';
    assert_int_equal(nmt_device_program(dev, "gemm", longopt, &a), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(dev->n_programs, 2);

    /* stems joined by '+': one program of their texts, one build, each
     * file's kernels in it; a bad stem anywhere refuses the whole name */
    const uint32_t builds = dev->n_source_builds;
    nmt_test_assert_ok(dev, nmt_device_program(dev, "norm+elementwise", "-DREDUCE_WG=64", &b));
    assert_ptr_not_equal(b, a);
    assert_int_equal(dev->n_programs, 3);
    assert_int_equal(dev->n_source_builds, builds + 1);
    assert_string_equal(dev->programs[2].source, "norm+elementwise");
    check_add_kernel(dev, b);
    cl_kernel k = NULL;
    nmt_test_assert_ok(dev, nmt_device_kernel(dev, b, "layernorm", &k)); /* norm.cl's */
    clReleaseKernel(k);
    nmt_test_assert_ok(dev, nmt_device_program(dev, "norm+elementwise", "-DREDUCE_WG=64", &c));
    assert_ptr_equal(b, c);
    static const char *const bad[] = {"norm+", "+norm", "norm++elementwise", "norm+common", "chain+norm",
                                      "norm+../cl/gemm", "norm+no_such_source", "norm+norm+norm+norm+norm"};
    for (size_t i = 0; i < NMT_ARRAY_LEN(bad); i++) {
        a = (cl_program)&a;
        assert_int_equal(nmt_device_program(dev, bad[i], "", &a), NMT_ERR_INVALID_ARGUMENT);
        assert_null(a);
    }
    assert_int_equal(dev->n_programs, 3);
    close_dev(&o);
}

/* Sources a caller adds (the training library's, nmt_device_add_sources)
 * are found after the runtime's own, which they cannot shadow; the runtime
 * embeds none of the training sources. */
static void test_added_sources(void **state) {
    (void)state;
    for (size_t i = 0; i < nmt_train_embedded_source_count; i++) {
        assert_memory_equal(nmt_train_embedded_sources[i].text, "/* ", 3);
        for (size_t j = 0; j < nmt_embedded_source_count; j++)
            assert_string_not_equal(nmt_train_embedded_sources[i].name, nmt_embedded_sources[j].name);
    }
    static const char probe[] = "__kernel void probe(__global float *x) { x[0] = 1.0f; }\n";
    static const nmt_embedded_source extra[] = {
        {"elementwise", "not OpenCL C", 12},  /* the runtime's elementwise wins */
        {"extra_probe", probe, sizeof probe - 1},
    };
    nmt_device_params p = params_nocache();
    p.log = NULL;
    opened o = open_ok(&p);
    cl_program a = NULL;
    assert_int_equal(nmt_device_program(o.dev, "loss", "", &a), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_device_program(o.dev, "extra_probe", "", &a), NMT_ERR_INVALID_ARGUMENT);
    nmt_device_add_sources(o.dev, extra, NMT_ARRAY_LEN(extra));
    nmt_test_assert_ok(o.dev, nmt_device_program(o.dev, "elementwise", "-DREDUCE_WG=64", &a));
    check_add_kernel(o.dev, a);
    nmt_test_assert_ok(o.dev, nmt_device_program(o.dev, "extra_probe", "", &a));
    cl_kernel k = NULL;
    nmt_test_assert_ok(o.dev, nmt_device_kernel(o.dev, a, "probe", &k));
    clReleaseKernel(k);
    assert_int_equal(nmt_device_program(o.dev, "loss", "", &a), NMT_ERR_INVALID_ARGUMENT);
    nmt_device_add_sources(o.dev, NULL, 5);  /* removes the table */
    assert_int_equal(nmt_device_program(o.dev, "extra_probe", "-DX=1", &a), NMT_ERR_INVALID_ARGUMENT);
    close_dev(&o);
}

/* Every embedded source compiles without a single warning, with the
 * defaults and with other values of its knobs (-Werror turns warnings into
 * build failures; PoCL's own cache keys on the options, so a cached success
 * is a past warning-free compile of this exact text).  A fast path's source
 * that enables an extension the device lacks is not built (it never is on
 * such a device); on a device that has it, it must compile like the rest. */
static void test_sources_compile_clean(void **state) {
    (void)state;
    nmt_device_params p = params_nocache();
    opened o = open_ok(&p);
    assert_true(nmt_embedded_source_count >= 4);
    for (size_t i = 0; i < nmt_embedded_source_count; i++) {
        cl_program prog = NULL;
        if (strcmp(nmt_embedded_sources[i].name, NMT_COMMON_SOURCE) == 0 ||
            strcmp(nmt_embedded_sources[i].name, NMT_CHAIN_SOURCE) == 0) {
            /* common.cl and chain.cl are parts of programs, not programs */
            assert_int_equal(nmt_device_program(o.dev, nmt_embedded_sources[i].name, "", &prog),
                             NMT_ERR_INVALID_ARGUMENT);
            assert_null(prog);
            continue;
        }
        char ext[96];
        if (nmt_test_missing_extension(o.dev, nmt_embedded_sources[i].text, ext, sizeof ext)) {
            printf("%s: not built here (the device lacks%s)\n", nmt_embedded_sources[i].name, ext);
            continue;
        }
        nmt_test_build_clean(o.dev, nmt_embedded_sources[i].name, "");
        /* the header comment documents the file */
        assert_memory_equal(nmt_embedded_sources[i].text, "/* ", 3);
    }
    nmt_test_build_clean(o.dev, "gemm", "-DGEMM_TM=3 -DGEMM_TN=5");
    nmt_test_build_clean(o.dev, "gemm", "-DGEMM_TM=1 -DGEMM_TN=1");
    nmt_test_build_clean(o.dev, "gemm", "-DGEMM_TM=1 -DGEMM_TN=8");
    nmt_test_build_clean(o.dev, "norm", "-DREDUCE_WG=16");
    nmt_test_build_clean(o.dev, "attention", "-DATTN_TILE=16");
    if (o.dev->info.has_fp16) /* fp16 compute: every vector width of its products */
        for (int vw = 1; vw <= 16; vw *= 2) {
            char opts[64];
            snprintf(opts, sizeof opts, "-DGEMM_VW=%d -DGEMM_TM=3 -DGEMM_TN=2", vw);
            nmt_test_build_clean(o.dev, "gemm_f16", opts);
        }
    close_dev(&o);
}

static int read_header(const char *path, nmt_clbin_header *h, size_t *file_size) {
    size_t n = 0;
    void *data = nmt_test_read_file(path, &n);
    if (data == NULL || n < sizeof *h) {
        free(data);
        return -1;
    }
    memcpy(h, data, sizeof *h);
    *file_size = n;
    free(data);
    return 0;
}

typedef struct cache_env {
    char *root;     /* temp dir */
    char *cache;    /* root/a/b (created by the device) */
} cache_env;

static cache_env cache_env_make(void) {
    cache_env e;
    e.root = nmt_test_make_temp_dir("cache");
    e.cache = path_join(e.root, "a/b");
    return e;
}

static void cache_env_free(cache_env *e) {
    nmt_test_remove_tree(e->root);
    free(e->root);
    free(e->cache);
}

/* Open a device on the cache dir, get elementwise.cl with `opts`, check
 * the counters, run a kernel from it, close. */
static void cached_build(const cache_env *e, const char *opts, unsigned hits, unsigned misses, unsigned rejects) {
    nmt_device_params p = params_nocache();
    p.cache_dir = e->cache;
    if (rejects) p.log = NULL;  /* the reject is logged at WARN: expected */
    opened o = open_ok(&p);
    cl_program prog = NULL;
    nmt_test_assert_ok(o.dev, nmt_device_program(o.dev, "elementwise", opts, &prog));
    assert_int_equal(o.dev->n_cache_hits, hits);
    assert_int_equal(o.dev->n_cache_misses, misses);
    assert_int_equal(o.dev->n_cache_rejects, rejects);
    assert_int_equal(o.dev->n_source_builds, hits ? 0 : 1);
    assert_int_equal(o.dev->programs[0].from_cache, hits ? 1 : 0);
    assert_int_equal(nmt_device_last_cl_error(o.dev), 0);  /* a recovered reject is not an error */
    check_add_kernel(o.dev, prog);
    close_dev(&o);
}

static void test_cache_roundtrip(void **state) {
    (void)state;
    cache_env e = cache_env_make();
    char first[1024];

    cached_build(&e, "-DNMT_TEST_CACHE=1", 0, 1, 0);  /* miss: build, store */
    assert_int_equal(nmt_test_count_files(e.cache, ".clbin", first, sizeof first), 1);
    assert_int_equal(nmt_test_count_files(e.cache, "", NULL, 0), 3);  /* ".", "..", the file: no temp left */

    nmt_clbin_header h;
    size_t size = 0;
    assert_int_equal(read_header(first, &h, &size), 0);
    assert_memory_equal(h.magic, NMT_CLBIN_MAGIC, 8);
    assert_int_equal(h.format, NMT_CLBIN_FORMAT);
    assert_true(h.payload_size > 0 && h.payload_size == size - sizeof h);
    char name[32];
    snprintf(name, sizeof name, "%016llx.clbin", (unsigned long long)h.key);
    assert_non_null(strstr(first, name));  /* the file is named by its key */

    cached_build(&e, "-DNMT_TEST_CACHE=1", 1, 0, 0);  /* hit */
    cached_build(&e, "-DNMT_TEST_CACHE=2", 0, 1, 0);  /* other options: other key */
    assert_int_equal(nmt_test_count_files(e.cache, ".clbin", NULL, 0), 2);
    cache_env_free(&e);
}

/* Damage the single .clbin with `damage`, then expect reject + rebuild +
 * rewrite, then a clean hit. */
typedef void (*damage_fn)(const char *path);

static void damage_flip_payload(const char *path) {
    size_t n = 0;
    unsigned char *d = nmt_test_read_file(path, &n);
    assert_non_null(d);
    d[sizeof(nmt_clbin_header) + (n - sizeof(nmt_clbin_header)) / 2] ^= 0x5a;
    assert_int_equal(nmt_test_write_file(path, d, n), 0);
    free(d);
}

static void damage_truncate(const char *path) {
    size_t n = 0;
    unsigned char *d = nmt_test_read_file(path, &n);
    assert_non_null(d);
    assert_int_equal(nmt_test_write_file(path, d, 10), 0);
    free(d);
}

static void damage_empty(const char *path) { assert_int_equal(nmt_test_write_file(path, "", 0), 0); }

/* A well-formed file (header and checksum right) whose payload the driver
 * must reject: exercises the clCreateProgramWithBinary failure path. */
static void damage_garbage_payload(const char *path) {
    size_t n = 0;
    unsigned char *d = nmt_test_read_file(path, &n);
    assert_non_null(d);
    nmt_clbin_header h;
    memcpy(&h, d, sizeof h);
    unsigned char *payload = d + sizeof h;
    for (size_t i = 0; i < h.payload_size; i++) payload[i] = (unsigned char)(i * 131u + 7u);
    memcpy(payload, "garbage!", 8);
    h.payload_hash = nmt_fnv1a(NMT_FNV_OFFSET, payload, h.payload_size);
    memcpy(d, &h, sizeof h);
    assert_int_equal(nmt_test_write_file(path, d, n), 0);
    free(d);
}

static void cache_reject_case(damage_fn damage) {
    cache_env e = cache_env_make();
    char file[1024];
    cached_build(&e, "-DNMT_TEST_CACHE=3", 0, 1, 0);
    assert_int_equal(nmt_test_count_files(e.cache, ".clbin", file, sizeof file), 1);
    damage(file);
    cached_build(&e, "-DNMT_TEST_CACHE=3", 0, 0, 1);  /* rejected, rebuilt, rewritten */
    assert_int_equal(nmt_test_count_files(e.cache, ".clbin", NULL, 0), 1);
    cached_build(&e, "-DNMT_TEST_CACHE=3", 1, 0, 0);  /* the rewrite is good */
    cache_env_free(&e);
}

static void test_cache_reject_checksum(void **state) {
    (void)state;
    cache_reject_case(damage_flip_payload);
}

static void test_cache_reject_truncated(void **state) {
    (void)state;
    cache_reject_case(damage_truncate);
    cache_reject_case(damage_empty);
}

static void test_cache_reject_by_driver(void **state) {
    (void)state;
    cache_reject_case(damage_garbage_payload);
}

/* Log lines that contain `needle`, counted (issue 55 items 2 and 8). */
typedef struct log_count {
    const char *needle;
    unsigned n;
    char last[1024];
} log_count;

static void count_log(void *user, nmt_log_level level, const char *msg) {
    (void)level;
    log_count *c = (log_count *)user;
    if (strstr(msg, c->needle) != NULL) {
        c->n++;
        snprintf(c->last, sizeof c->last, "%s", msg);
    }
}

/* Issue 54: the debug log says how long each program took, built from source
 * (counted in dev->source_build_s) or loaded from the cache (not counted). */
static void logged_build(const cache_env *e, const char *needle, int from_cache) {
    log_count c = {.needle = needle};
    nmt_device_params p = params_nocache();
    p.cache_dir = e->cache;
    p.log = count_log;
    p.log_user = &c;
    p.log_level = NMT_LOG_DEBUG;
    opened o = open_ok(&p);
    const double t0 = nmt_device_now();
    cl_program prog = NULL;
    nmt_test_assert_ok(o.dev, nmt_device_program(o.dev, "elementwise", "-DNMT_TEST_SECONDS=1", &prog));
    const double wall = nmt_device_now() - t0;
    assert_int_equal(c.n, 1);
    const char *at = strstr(c.last, needle);
    assert_non_null(at);
    char *end = NULL;
    const double logged = strtod(at + strlen(needle), &end);
    assert_string_equal(end, " s");
    assert_true(logged >= 0 && logged <= wall + 1e-3);
    if (from_cache) {
        assert_true(o.dev->source_build_s == 0);
        assert_int_equal(o.dev->n_source_builds, 0);
    } else {
        assert_true(logged > 0);
        assert_true(o.dev->source_build_s >= logged - 1e-3 && o.dev->source_build_s <= wall + 1e-3);
        assert_int_equal(o.dev->n_source_builds, 1);
    }
    check_add_kernel(o.dev, prog);
    close_dev(&o);
}

static void test_build_seconds_logged(void **state) {
    (void)state;
    cache_env e = cache_env_make();
    logged_build(&e, "built from source in ", 0);
    logged_build(&e, "loaded from cache in ", 1);
    cache_env_free(&e);
}

/* ---- issue 55 item 2: a corrupt binary behind a valid header ------------- */

/* Rewrite the single cache entry's payload with `mutate`, then (rehash) make
 * the header valid again: size and checksum of the new payload. */
typedef size_t (*mutate_fn)(unsigned char *payload, size_t n);

static size_t mutate_flip_middle(unsigned char *p, size_t n) {
    for (size_t i = n / 3; i < n / 3 + 64 && i < n; i++) p[i] ^= 0xa5;
    return n;
}

static size_t mutate_flip_head(unsigned char *p, size_t n) {
    for (size_t i = 0; i < 16 && i < n; i++) p[i] ^= 0xff;
    return n;
}

static size_t mutate_cut_half(unsigned char *p, size_t n) {
    (void)p;
    return n / 2;
}

static size_t mutate_zero(unsigned char *p, size_t n) {
    memset(p, 0, n);
    return n;
}

static void rehashed_damage(const char *path, mutate_fn mutate, int rehash) {
    size_t n = 0;
    unsigned char *d = nmt_test_read_file(path, &n);
    assert_non_null(d);
    nmt_clbin_header h;
    memcpy(&h, d, sizeof h);
    unsigned char *payload = d + sizeof h;
    const size_t m = mutate(payload, h.payload_size);
    assert_true(m > 0);
    if (rehash) {
        h.payload_size = m;
        h.payload_hash = nmt_fnv1a(NMT_FNV_OFFSET, payload, m);
        memcpy(d, &h, sizeof h);
    }
    assert_int_equal(nmt_test_write_file(path, d, sizeof h + m), 0);
    free(d);
}

/* The device opens, rebuilds the program from source, runs its kernel
 * correctly and says so once through the logger; the rewritten entry hits. */
static void corrupt_binary_case(mutate_fn mutate, int rehash, const char *opts, const char *reason) {
    cache_env e = cache_env_make();
    char file[1024];
    cached_build(&e, opts, 0, 1, 0);
    assert_int_equal(nmt_test_count_files(e.cache, ".clbin", file, sizeof file), 1);
    rehashed_damage(file, mutate, rehash);

    nmt_device_params p = params_nocache();
    p.cache_dir = e.cache;
    log_count c = {"; rebuilding", 0, ""};
    p.log = count_log;
    p.log_user = &c;
    p.log_level = NMT_LOG_DEBUG;
    opened o = open_ok(&p);
    cl_program prog = NULL;
    nmt_test_assert_ok(o.dev, nmt_device_program(o.dev, "elementwise", opts, &prog));
    if (rehash && o.dev->n_cache_hits == 1) {
        /* the driver took the altered binary and built it: only a kernel
         * that computes the right values may be kept (checked below) */
        assert_int_equal(o.dev->n_source_builds, 0);
    } else {
        assert_int_equal(o.dev->n_cache_rejects, 1);
        assert_int_equal(o.dev->n_source_builds, 1);
        assert_int_equal(c.n, 1);
        char head[1200];
        snprintf(head, sizeof head, "program cache %s for elementwise.cl: %s", file, reason);
        if (strncmp(c.last, head, strlen(head)) != 0) fail_msg("log \"%s\"", c.last);
    }
    assert_int_equal(nmt_device_last_cl_error(o.dev), 0);
    check_add_kernel(o.dev, prog);
    close_dev(&o);
    if (c.n == 1) cached_build(&e, opts, 1, 0, 0); /* the rewrite is good */
    cache_env_free(&e);
}

static void test_cache_corrupt_binary(void **state) {
    (void)state;
    /* the bytes changed, the header left as stored: the checksum catches it */
    corrupt_binary_case(mutate_flip_middle, 0, "-DNMT_TEST_CACHE=7", "checksum mismatch");
    corrupt_binary_case(mutate_flip_head, 0, "-DNMT_TEST_CACHE=8", "checksum mismatch");
    corrupt_binary_case(mutate_cut_half, 0, "-DNMT_TEST_CACHE=9", "size mismatch");
    /* header made valid again (size and checksum of the new bytes): the
     * driver is asked and refuses, or builds a kernel that must compute
     * the right values (a re-hashed truncated binary is not among these:
     * PoCL aborts on it; Intel's CPU runtime crashed on one of these and
     * then deadlocked in its next build: only PoCL's answer is asserted,
     * docs/RELIABILITY.md "Known limits") */
    nmt_device_params p = params_nocache();
    opened o = open_ok(&p);
    const int pocl = strstr(o.dev->info.platform_name, "Portable Computing Language") != NULL;
    close_dev(&o);
    if (!pocl) return;
    corrupt_binary_case(mutate_flip_head, 1, "-DNMT_TEST_CACHE=10", "driver ");
    corrupt_binary_case(mutate_zero, 1, "-DNMT_TEST_CACHE=11", "driver ");
    corrupt_binary_case(mutate_flip_middle, 1, "-DNMT_TEST_CACHE=12", "driver ");
}

static void test_cache_dir_unusable(void **state) {
    (void)state;
    char *root = nmt_test_make_temp_dir("nocache");
    char *file = path_join(root, "file");
    assert_int_equal(nmt_test_write_file(file, "x", 1), 0);
    char *below = path_join(file, "cache");  /* a directory below a regular file */
    nmt_device_params p = params_nocache();
    p.cache_dir = below;
    p.log = NULL;
    opened o = open_ok(&p);  /* still opens: the cache is optional */
    assert_string_equal(o.dev->cache_dir, "");
    cl_program prog = NULL;
    nmt_test_assert_ok(o.dev, nmt_device_program(o.dev, "elementwise", "-DNMT_TEST_CACHE=4", &prog));
    assert_int_equal(o.dev->n_cache_misses + o.dev->n_cache_hits + o.dev->n_cache_rejects, 0);
    close_dev(&o);
    nmt_test_remove_tree(root);
    free(below);
    free(file);
    free(root);
}

/* A long but valid cache path (nested directories ~3,000 bytes deep, and one
 * near PATH_MAX): the device opens without a cache and says so once. */
static void test_cache_dir_long(void **state) {
    (void)state;
    char *root = nmt_test_make_temp_dir("longcache");
    static const size_t lens[] = {NMT_PATH_MAX - 32, 3000, 4000};
    for (size_t i = 0; i < NMT_ARRAY_LEN(lens); i++) {
        char *dir = malloc(lens[i] + 64);
        assert_non_null(dir);
        size_t n = (size_t)snprintf(dir, lens[i] + 64, "%s", root);
        while (n + 9 <= lens[i]) n += (size_t)snprintf(dir + n, lens[i] + 64 - n, "/%s", "dddddddd");
        while (n < lens[i]) dir[n++] = 'e';
        dir[n] = '\0';
        assert_int_equal(strlen(dir), lens[i]);
        nmt_device_params p = params_nocache();
        p.cache_dir = dir;
        log_count c = {"program cache disabled", 0, ""};
        p.log = count_log;
        p.log_user = &c;
        p.log_level = NMT_LOG_DEBUG;
        opened o = open_ok(&p);
        assert_string_equal(o.dev->cache_dir, "");
        cl_program prog = NULL;
        nmt_test_assert_ok(o.dev, nmt_device_program(o.dev, "elementwise", "-DNMT_TEST_CACHE=5", &prog));
        assert_int_equal(o.dev->n_cache_misses + o.dev->n_cache_hits + o.dev->n_cache_rejects, 0);
        assert_int_equal(o.dev->n_source_builds, 1);
        check_add_kernel(o.dev, prog);
        close_dev(&o);
        assert_int_equal(c.n, 1);
        char want[256];
        snprintf(want, sizeof want, "cache directory path of %zu bytes is longer than the %d this runtime "
                 "handles; program cache disabled", lens[i], NMT_PATH_MAX - 33);
        assert_string_equal(c.last, want);
        free(dir);
    }
    /* the longest path it handles is a cache */
    char *dir = malloc(NMT_PATH_MAX);
    assert_non_null(dir);
    size_t n = (size_t)snprintf(dir, NMT_PATH_MAX, "%s/", root);
    for (size_t k = 0; n < NMT_PATH_MAX - 33; k++) dir[n++] = k % 100 == 99 ? '/' : 'f'; /* names < NAME_MAX */
    if (dir[n - 1] == '/') dir[n - 1] = 'f';
    dir[n] = '\0';
    nmt_device_params p = params_nocache();
    p.cache_dir = dir;
    p.log = NULL;
    opened o = open_ok(&p);
    assert_string_equal(o.dev->cache_dir, dir);
    cl_program prog = NULL;
    nmt_test_assert_ok(o.dev, nmt_device_program(o.dev, "elementwise", "-DNMT_TEST_CACHE=6", &prog));
    assert_int_equal(o.dev->n_cache_misses, 1);
    close_dev(&o);
    assert_int_equal(nmt_test_count_files(dir, ".clbin", NULL, 0), 1);
    free(dir);
    nmt_test_remove_tree(root);
    free(root);
}

/* ---- the default cache directory and the opt-out (issue 54) ---------------- */

/* Open with cache_dir NULL (the default) or "" (none) under the environment
 * XDG_CACHE_HOME=xdg (NULL: unset), HOME=home; build one program; return
 * the .clbin count in want_dir (-1: the directory does not exist) and the
 * device's cache_dir in got[cap]. */
static int default_dir_case(const char *cache_dir, const char *xdg, const char *home, const char *want_dir,
                            int fill, char *got, size_t cap, const char *opts) {
    char *old_xdg = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
    char *old_home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    if (xdg) setenv("XDG_CACHE_HOME", xdg, 1);
    else unsetenv("XDG_CACHE_HOME");
    setenv("HOME", home, 1);
    nmt_device_params p = params_nocache();
    p.cache_dir = cache_dir;
    p.cache_fill = fill;
    opened o = open_ok(&p);
    snprintf(got, cap, "%s", o.dev->cache_dir);
    cl_program prog = NULL;
    nmt_test_assert_ok(o.dev, nmt_device_program(o.dev, "norm", opts, &prog));
    close_dev(&o);
    if (old_xdg) setenv("XDG_CACHE_HOME", old_xdg, 1);
    else unsetenv("XDG_CACHE_HOME");
    if (old_home) setenv("HOME", old_home, 1);
    else unsetenv("HOME");
    free(old_xdg);
    free(old_home);
    struct stat st;
    if (stat(want_dir, &st) != 0) return -1;
    return nmt_test_count_files(want_dir, ".clbin", NULL, 0);
}

static void test_cache_default_dir(void **state) {
    (void)state;
    char *root = nmt_test_make_temp_dir("defcache");
    char *xdg = path_join(root, "xdg"), *home = path_join(root, "home");
    char *xdg_dir = path_join(xdg, "nmt-edge"), *home_dir = path_join(home, ".cache/nmt-edge");
    char got[NMT_PATH_MAX];
    /* NULL with XDG_CACHE_HOME: $XDG_CACHE_HOME/nmt-edge, created, written */
    assert_int_equal(default_dir_case(NULL, xdg, home, xdg_dir, 1, got, sizeof got, "-DNMT_TEST_CACHE=20"), 1);
    assert_string_equal(got, xdg_dir);
    assert_int_equal(default_dir_case(NULL, xdg, home, home_dir, 1, got, sizeof got, "-DNMT_TEST_CACHE=20"), -1);
    /* NULL without it, or with a relative one (the XDG spec ignores it): $HOME/.cache/nmt-edge */
    assert_int_equal(default_dir_case(NULL, NULL, home, home_dir, 1, got, sizeof got, "-DNMT_TEST_CACHE=21"), 1);
    assert_string_equal(got, home_dir);
    assert_int_equal(default_dir_case(NULL, "rel/xdg", home, home_dir, 1, got, sizeof got, "-DNMT_TEST_CACHE=22"), 2);
    assert_string_equal(got, home_dir);
    nmt_test_remove_tree(root);
    /* "": no cache, nothing created or written wherever the variables point */
    assert_int_equal(default_dir_case("", xdg, home, xdg, 1, got, sizeof got, "-DNMT_TEST_CACHE=23"), -1);
    assert_string_equal(got, "");
    assert_int_equal(default_dir_case("", NULL, home, home, 1, got, sizeof got, "-DNMT_TEST_CACHE=23"), -1);
    /* cache_fill 0: on PoCL's CPU device (its own kernel cache on) the
     * directory is used but nothing is written at build; elsewhere written */
    nmt_device_params p = params_nocache();
    opened o = open_ok(&p);
    const int pocl = o.dev->info.is_cpu && strstr(o.dev->info.platform_name, "Portable Computing Language") &&
                     !(getenv("POCL_KERNEL_CACHE") && strcmp(getenv("POCL_KERNEL_CACHE"), "0") == 0);
    close_dev(&o);
    assert_int_equal(default_dir_case(NULL, xdg, home, xdg_dir, 0, got, sizeof got, "-DNMT_TEST_CACHE=24"),
                     pocl ? 0 : 1);
    assert_string_equal(got, xdg_dir);
    nmt_test_remove_tree(root);
    free(xdg);
    free(home);
    free(xdg_dir);
    free(home_dir);
    free(root);
}

/* ---- kernel_dir and build failures ---------------------------------------- */

static const char marker_kernel[] =
    "\n__kernel void nmt_test_marker(__global float *x) { x[get_global_id(0)] = 42.0f; }\n";

/* Copy the repository's cl/<stem>.cl into dir. */
static void copy_source(const char *dir, const char *stem) {
    char name[64], repo_name[80];
    snprintf(name, sizeof name, "%s.cl", stem);
    snprintf(repo_name, sizeof repo_name, "cl/%s", name);
    char *src = path_join(NMT_TEST_SOURCE_DIR, repo_name);
    char *dst = path_join(dir, name);
    size_t n = 0;
    char *text = nmt_test_read_file(src, &n);
    assert_non_null(text);
    assert_int_equal(nmt_test_write_file(dst, text, n), 0);
    free(text);
    free(dst);
    free(src);
}

/* Every kernel_dir needs cl/common.cl. */
static void copy_common(const char *dir) { copy_source(dir, NMT_COMMON_SOURCE); }

/* FNV-1a of the repository's cl/<stem>.cl texts as nmt_device_program hashes
 * them (each text's length as u64, then the text), in the order given. */
static uint64_t repo_source_hash(const char *const *stems, int n) {
    uint64_t h = NMT_FNV_OFFSET;
    for (int i = 0; i < n; i++) {
        char name[80];
        snprintf(name, sizeof name, "cl/%s.cl", stems[i]);
        char *path = path_join(NMT_TEST_SOURCE_DIR, name);
        size_t len = 0;
        char *text = nmt_test_read_file(path, &len);
        assert_non_null(text);
        const uint64_t len64 = (uint64_t)len;
        h = nmt_fnv1a(h, &len64, sizeof len64);
        h = nmt_fnv1a(h, text, len);
        free(text);
        free(path);
    }
    return h;
}

/* The slot of the first program built from cl/<stem>.cl (NULL: none). */
static const nmt_program_slot *program_slot(const nmt_device *dev, const char *stem) {
    for (uint32_t i = 0; i < dev->n_programs; i++)
        if (strcmp(dev->programs[i].source, stem) == 0) return &dev->programs[i];
    return NULL;
}

static void test_kernel_dir(void **state) {
    (void)state;
    char *dir = nmt_test_make_temp_dir("kdir");
    char *src = path_join(NMT_TEST_SOURCE_DIR, "cl/elementwise.cl");
    char *dst = path_join(dir, "elementwise.cl");
    size_t n = 0;
    char *text = nmt_test_read_file(src, &n);
    assert_non_null(text);
    char *mod = malloc(n + sizeof marker_kernel);
    memcpy(mod, text, n);
    memcpy(mod + n, marker_kernel, sizeof marker_kernel);
    assert_int_equal(nmt_test_write_file(dst, mod, n + sizeof marker_kernel - 1), 0);

    /* common.cl is part of every program: a kernel_dir without it is an I/O
     * error naming the file, not a fallback to the embedded copy. */
    nmt_device_params p = params_nocache();
    p.kernel_dir = dir;
    p.log = NULL;
    opened o = open_ok(&p);
    cl_program prog = (cl_program)0x1;
    assert_int_equal(nmt_device_program(o.dev, "elementwise", "", &prog), NMT_ERR_IO);
    assert_null(prog);
    assert_int_equal(o.dev->n_programs, 0);
    close_dev(&o);
    copy_common(dir);

    /* From disk: the modified file is what gets built. */
    p = params_nocache();
    p.kernel_dir = dir;
    o = open_ok(&p);
    nmt_test_assert_ok(o.dev, nmt_device_program(o.dev, "elementwise", "", &prog));
    cl_kernel k = NULL;
    nmt_test_assert_ok(o.dev, nmt_device_kernel(o.dev, prog, "nmt_test_marker", &k));
    cl_mem m = nmt_test_buffer_f32_fill(o.dev, 4, 0.0f);
    assert_int_equal(clSetKernelArg(k, 0, sizeof m, &m), CL_SUCCESS);
    size_t g = 4;
    assert_int_equal(clEnqueueNDRangeKernel(o.dev->queue, k, 1, NULL, &g, NULL, 0, NULL, NULL), CL_SUCCESS);
    float got[4];
    nmt_test_download_f32(o.dev, m, 0, 4, got);
    for (int i = 0; i < 4; i++) assert_float_equal(got[i], 42.0f, 0.0f);
    clReleaseKernel(k);
    nmt_test_release(m);
    check_add_kernel(o.dev, prog);
    /* a source absent from kernel_dir is an I/O error, not a silent fallback */
    o.dev->log.fn = NULL;
    assert_int_equal(nmt_device_program(o.dev, "attention", "", &prog), NMT_ERR_IO);
    /* so is chain.cl for a program with a chain kernel, gemm.cl present */
    copy_source(dir, "gemm");
    assert_int_equal(nmt_device_program(o.dev, "gemm", "", &prog), NMT_ERR_IO);
    assert_null(program_slot(o.dev, "gemm"));
    copy_source(dir, NMT_CHAIN_SOURCE);
    nmt_test_assert_ok(o.dev, nmt_device_program(o.dev, "gemm", "", &prog));
    close_dev(&o);

    /* Embedded: the marker kernel does not exist. */
    p = params_nocache();
    p.log = NULL;
    o = open_ok(&p);
    nmt_test_assert_ok(o.dev, nmt_device_program(o.dev, "elementwise", "", &prog));
    assert_int_equal(nmt_device_kernel(o.dev, prog, "nmt_test_marker", &k), NMT_ERR_OPENCL);
    assert_null(k);
    assert_int_equal(nmt_device_last_cl_error(o.dev), CL_INVALID_KERNEL_NAME);
    close_dev(&o);

    /* The repository's cl/ as kernel_dir builds the whole op layer. */
    char *repo_cl = path_join(NMT_TEST_SOURCE_DIR, "cl");
    p = params_nocache();
    p.kernel_dir = repo_cl;
    o = open_ok(&p);
    nmt_ops ops;
    nmt_test_assert_ok(o.dev, nmt_ops_init(&ops, o.dev));
    assert_non_null(ops.k_attn_apply);
    const int rows_together = ops.rows_opts[0] != '\0'; /* elementwise.cl, norm.cl and topk.cl in one */
    nmt_ops_release(&ops);
    /* each program's hash covers the texts it was built from, in order: chain.cl
     * only in gemm's, gemm_i8's and gemm_q8's (nmt_program_has_chain) */
    const char *const gemm_texts[] = {NMT_COMMON_SOURCE, NMT_CHAIN_SOURCE, "gemm"};
    const char *const plain_texts[] = {NMT_COMMON_SOURCE, "elementwise", "norm", "topk"};
    const nmt_program_slot *sl = program_slot(o.dev, "gemm");
    assert_non_null(sl);
    assert_true(sl->source_hash == repo_source_hash(gemm_texts, 3));
    assert_true(sl->source_hash != repo_source_hash((const char *const[]){NMT_COMMON_SOURCE, "gemm"}, 2));
    sl = program_slot(o.dev, rows_together ? NMT_OPS_ROWS_PROGRAM : "elementwise");
    assert_non_null(sl);
    assert_true(sl->source_hash == repo_source_hash(plain_texts, rows_together ? 4 : 2));
    const char *const attn_texts[] = {NMT_COMMON_SOURCE, "attention", "beam"};
    sl = program_slot(o.dev, NMT_OPS_ATTN_PROGRAM);
    assert_non_null(sl);
    assert_true(sl->source_hash == repo_source_hash(attn_texts, 3));
    /* so do the training sources, with no table registered */
    nmt_test_assert_ok(o.dev, nmt_device_program(o.dev, "loss", "", &prog));
    close_dev(&o);

    nmt_test_remove_tree(dir);
    free(repo_cl);
    free(mod);
    free(text);
    free(dst);
    free(src);
    free(dir);
}

/* The rule for which programs cl/chain.cl goes into: a line of the
 * program's own text that begins with "CHAIN_KERNEL(" — in the repository,
 * gemm.cl, gemm_i8.cl and gemm_q8.cl and no other. */
static void test_program_has_chain(void **state) {
    (void)state;
#define HAS(t) nmt_program_has_chain((t), strlen(t))
    assert_int_equal(HAS("CHAIN_KERNEL(gemm_chain)"), 1);
    assert_int_equal(HAS("x\nCHAIN_KERNEL(gemm_chain) /* chain.cl */\n"), 1);
    assert_int_equal(HAS("a\n\nb\nCHAIN_KERNEL(k)"), 1);
    assert_int_equal(HAS(""), 0);
    assert_int_equal(HAS(" CHAIN_KERNEL(k)"), 0);          /* not at a line's start */
    assert_int_equal(HAS("x\n * CHAIN_KERNEL(k)\n"), 0);  /* a comment's line */
    assert_int_equal(HAS("/* CHAIN_KERNEL(k) */"), 0);
    assert_int_equal(HAS("#define CHAIN_KERNEL(NAME) \\\n"), 0); /* chain.cl's own */
    assert_int_equal(HAS("x\nCHAIN_KERNEL"), 0);           /* no parenthesis */
    assert_int_equal(HAS("x\nCHAIN_KERNELS(k)"), 0);
#undef HAS
    assert_int_equal(nmt_program_has_chain("CHAIN_KERNEL(k)", 12), 0); /* the length bounds it */
    assert_int_equal(nmt_program_has_chain("CHAIN_KERNEL(k)", 13), 1);
    assert_int_equal(nmt_program_has_chain(NULL, 0), 0);
    int chained = 0;
    for (size_t i = 0; i < nmt_embedded_source_count; i++) {
        const nmt_embedded_source *es = &nmt_embedded_sources[i];
        const int want = strcmp(es->name, "gemm") == 0 || strcmp(es->name, "gemm_i8") == 0 ||
                         strcmp(es->name, "gemm_q8") == 0;
        if (nmt_program_has_chain(es->text, es->length) != want) fail_msg("%s.cl: chain rule", es->name);
        chained += want;
    }
    assert_int_equal(chained, 3);
}

/* A successful build's log: a warning goes to the logger as one, clang's
 * x86 ABI note on 512-bit vectors (every program on a PoCL host without
 * AVX-512) at debug level, so that a first run there prints nothing. */
static void test_build_log_level(void **state) {
    (void)state;
    static const char abi_w[] = "gemm.cl:40:36: warning: AVX vector argument of type 'const __private float16' (vector "
                                "of 16 'float' values) without 'avx512f' enabled changes the ABI";
    static const char abi_e[] = "t.cl:1:52 <Spelling=_builtin_renames.h:812:20>: error: AVX vector return of type "
                                "'float16' (vector of 16 'float' values) without 'avx512f' enabled changes the ABI";
    assert_int_equal(nmt_build_log_abi_note(abi_w, strlen(abi_w)), 1);
    assert_int_equal(nmt_build_log_abi_note(abi_e, strlen(abi_e)), 1);
    assert_int_equal(nmt_build_log_abi_note(abi_w, strlen(abi_w) - 1), 0); /* bounded by the length */
    const char *other = "k.cl:3:9: warning: unused variable 'x' [-Wunused-variable]";
    assert_int_equal(nmt_build_log_abi_note(other, strlen(other)), 0);
    assert_int_equal(nmt_build_log_level(""), NMT_LOG_DEBUG);
    assert_int_equal(nmt_build_log_level("remark: 2 kernels vectorized"), NMT_LOG_DEBUG);
    assert_int_equal(nmt_build_log_level(other), NMT_LOG_WARN);
    assert_int_equal(nmt_build_log_level("Compilation WARNING: spill"), NMT_LOG_WARN);
    assert_int_equal(nmt_build_log_level(abi_w), NMT_LOG_DEBUG);
    char log[1024];
    snprintf(log, sizeof log, "%s\n%s\n2 warnings generated.", abi_w, abi_w); /* clang's count line */
    assert_int_equal(nmt_build_log_level(log), NMT_LOG_DEBUG);
    snprintf(log, sizeof log, "%s\n%s\n", abi_w, abi_w);
    assert_int_equal(nmt_build_log_level(log), NMT_LOG_DEBUG);
    assert_int_equal(nmt_build_log_level("1 warning generated."), NMT_LOG_DEBUG);
    assert_int_equal(nmt_build_log_level("warnings generated."), NMT_LOG_WARN); /* no count: not that line */
    snprintf(log, sizeof log, "%s\n%s\n%s", abi_w, other, abi_w);
    assert_int_equal(nmt_build_log_level(log), NMT_LOG_WARN);
}

static void test_broken_source(void **state) {
    (void)state;
    char *dir = nmt_test_make_temp_dir("broken");
    copy_common(dir);
    copy_source(dir, NMT_CHAIN_SOURCE);
    char *gemm = path_join(dir, "gemm.cl");
    const char bad[] = "/* broken on purpose */\n__kernel void gemm_nt(__global float *x) { x[0] = undeclared_name; }\n";
    assert_int_equal(nmt_test_write_file(gemm, bad, sizeof bad - 1), 0);

    nmt_device_params p = params_nocache();
    p.kernel_dir = dir;
    p.log = NULL;  /* the build log is logged at ERROR: expected */
    opened o = open_ok(&p);
    cl_program prog = (cl_program)0x1;
    assert_int_equal(nmt_device_program(o.dev, "gemm", "", &prog), NMT_ERR_KERNEL_BUILD);
    assert_null(prog);
    assert_int_equal(nmt_device_last_cl_error(o.dev), CL_BUILD_PROGRAM_FAILURE);
    assert_non_null(strstr(o.dev->build_log, "undeclared_name"));  /* the compiler's message was captured */
    assert_int_equal(o.dev->n_programs, 0);                         /* nothing half-registered */

    /* nmt_ops_init fails the same way and leaves nothing behind */
    nmt_ops ops;
    memset(&ops, 0xab, sizeof ops);
    assert_int_equal(nmt_ops_init(&ops, o.dev), NMT_ERR_KERNEL_BUILD);
    assert_null(ops.k_gemm[NMT_GOP_NT][0]);
    assert_null(ops.k_add);
    assert_null(ops.dev);
    close_dev(&o);

    /* A warning alone builds, but not under -Werror. */
    const char warn[] = "/* warns */\n__kernel void w(__global int *x) { int unused_var = 1.5; x[0] = 1; }\n";
    assert_int_equal(nmt_test_write_file(gemm, warn, sizeof warn - 1), 0);
    o = open_ok(&p);
    o.dev->quiet_builds = 0;
    assert_int_equal(nmt_device_program(o.dev, "gemm", "", &prog), NMT_OK);
    assert_non_null(strstr(o.dev->build_log, "warning"));
    assert_int_equal(nmt_device_program(o.dev, "gemm", "-Werror", &prog), NMT_ERR_KERNEL_BUILD);
    close_dev(&o);

    /* Quiet builds (-w: PoCL on an x86-64 host without AVX-512, whose clang
     * prints "N warnings generated." on our stderr): the same warning, in a
     * source new to the driver's own cache so that its compiler runs,
     * builds with nothing said, in the build log or on stderr. */
    char quiet_src[256];
    const int qn = snprintf(quiet_src, sizeof quiet_src, "/* %ld %ld */\n%s", (long)getpid(), (long)time(NULL),
                            warn);
    assert_int_equal(nmt_test_write_file(gemm, quiet_src, (size_t)qn), 0);
    o = open_ok(&p);
    o.dev->quiet_builds = 1;
    FILE *err = tmpfile();
    assert_non_null(err);
    fflush(stderr);
    const int saved_err = dup(2);
    assert_true(saved_err >= 0);
    assert_int_equal(dup2(fileno(err), 2), 2);
    const nmt_status qs = nmt_device_program(o.dev, "gemm", "", &prog);
    fflush(stderr);
    assert_int_equal(dup2(saved_err, 2), 2);
    close(saved_err);
    char said[512] = "";
    rewind(err);
    const size_t got = fread(said, 1, sizeof said - 1, err);
    said[got] = '\0';
    fclose(err);
    assert_int_equal(qs, NMT_OK);
    assert_null(strstr(o.dev->build_log, "warning"));
    if (strstr(said, "warning")) fail_msg("a quiet build wrote to stderr: \"%s\"", said);
    close_dev(&o);

    nmt_test_remove_tree(dir);
    free(gemm);
    free(dir);
}

/* ---- platform_posix ------------------------------------------------------ */

typedef struct fill_ctx {
    unsigned char seed;
    int calls;
    int fail;
} fill_ctx;

static int fill_pattern(void *user, void *dst, size_t size) {
    fill_ctx *c = user;
    c->calls++;
    if (c->fail) {
        if (size) memset(dst, 0xee, size / 2);  /* partially written, then abort */
        return 1;
    }
    unsigned char *d = dst;
    for (size_t i = 0; i < size; i++) d[i] = (unsigned char)(c->seed + i * 7u);
    return 0;
}

static void check_pattern(const char *path, size_t size, unsigned char seed) {
    nmt_mapping m;
    assert_int_equal(nmt_map_file(path, &m), NMT_OK);
    assert_int_equal(m.size, size);
    const unsigned char *d = m.data;
    for (size_t i = 0; i < size; i++)
        if (d[i] != (unsigned char)(seed + i * 7u)) fail_msg("byte %zu of %s differs", i, path);
    nmt_unmap_file(&m);
    assert_null(m.data);
    assert_int_equal(m.size, 0);
}

static void test_platform_files(void **state) {
    (void)state;
    char *dir = nmt_test_make_temp_dir("plat");
    char *f = path_join(dir, "data.bin");

    /* write + map round trip, then atomic replacement with another size */
    fill_ctx c = {3, 0, 0};
    assert_int_equal(nmt_write_file_atomic(f, 100003, fill_pattern, &c), NMT_OK);
    assert_int_equal(c.calls, 1);
    check_pattern(f, 100003, 3);
    struct stat st;
    assert_int_equal(stat(f, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);
    c.seed = 9;
    assert_int_equal(nmt_write_file_atomic(f, 4096, fill_pattern, &c), NMT_OK);
    check_pattern(f, 4096, 9);

    /* an aborting fill leaves the old file intact and no temporary behind */
    c.fail = 1;
    assert_int_equal(nmt_write_file_atomic(f, 8192, fill_pattern, &c), NMT_ERR_IO);
    assert_int_equal(errno, ECANCELED);
    check_pattern(f, 4096, 9);
    assert_int_equal(nmt_test_count_files(dir, "", NULL, 0), 3);  /* ".", "..", data.bin */

    /* empty files: written with fill(NULL, 0), mapped as (NULL, 0) */
    char *empty = path_join(dir, "empty");
    c.fail = 0;
    assert_int_equal(nmt_write_file_atomic(empty, 0, fill_pattern, &c), NMT_OK);
    nmt_mapping m = {(void *)1, 7};
    assert_int_equal(nmt_map_file(empty, &m), NMT_OK);
    assert_null(m.data);
    assert_int_equal(m.size, 0);
    nmt_unmap_file(&m);

    /* failures */
    char *missing = path_join(dir, "missing");
    assert_int_equal(nmt_map_file(missing, &m), NMT_ERR_IO);
    assert_int_equal(errno, ENOENT);
    assert_null(m.data);
    assert_int_equal(nmt_map_file(dir, &m), NMT_ERR_IO);  /* a directory */
    char *nodir = path_join(dir, "no/such/dir/file");
    assert_int_equal(nmt_write_file_atomic(nodir, 16, fill_pattern, &c), NMT_ERR_IO);
    assert_int_equal(nmt_write_file_atomic(NULL, 16, fill_pattern, &c), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_write_file_atomic(f, 16, NULL, NULL), NMT_ERR_INVALID_ARGUMENT);

    /* remove */
    nmt_remove_file(empty);
    assert_int_equal(nmt_map_file(empty, &m), NMT_ERR_IO);
    nmt_remove_file(empty);  /* absent: ignored */

    nmt_test_remove_tree(dir);
    free(nodir);
    free(missing);
    free(empty);
    free(f);
    free(dir);
}

static void test_platform_make_dirs(void **state) {
    (void)state;
    char *dir = nmt_test_make_temp_dir("mkdirs");
    char *deep = path_join(dir, "x/y//z/");
    struct stat st;
    assert_int_equal(nmt_make_dirs(deep), NMT_OK);
    char *z = path_join(dir, "x/y/z");
    assert_int_equal(stat(z, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(nmt_make_dirs(deep), NMT_OK);  /* existing: fine */
    assert_int_equal(nmt_make_dirs(dir), NMT_OK);

    char *file = path_join(dir, "x/file");
    assert_int_equal(nmt_test_write_file(file, "x", 1), 0);
    assert_int_equal(nmt_make_dirs(file), NMT_ERR_IO);  /* exists, not a directory */
    assert_int_equal(errno, ENOTDIR);
    char *below = path_join(file, "sub");
    assert_int_equal(nmt_make_dirs(below), NMT_ERR_IO);
    assert_int_equal(nmt_make_dirs(""), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_make_dirs(NULL), NMT_ERR_INVALID_ARGUMENT);

    nmt_test_remove_tree(dir);
    free(below);
    free(file);
    free(z);
    free(deep);
    free(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list),
        cmocka_unit_test(test_open_default_rule),
        cmocka_unit_test(test_capabilities),
        cmocka_unit_test(test_select_by_index),
        cmocka_unit_test(test_select_by_type),
        cmocka_unit_test(test_select_by_name),
        cmocka_unit_test(test_open_arguments),
        cmocka_unit_test(test_cl_fail_mapping),
        cmocka_unit_test(test_fnv1a),
        cmocka_unit_test(test_buffers),
        cmocka_unit_test(test_program_table),
        cmocka_unit_test(test_added_sources),
        cmocka_unit_test(test_sources_compile_clean),
        cmocka_unit_test(test_cache_roundtrip),
        cmocka_unit_test(test_cache_reject_checksum),
        cmocka_unit_test(test_cache_reject_truncated),
        cmocka_unit_test(test_cache_reject_by_driver),
        cmocka_unit_test(test_cache_dir_unusable),
        cmocka_unit_test(test_cache_corrupt_binary),
        cmocka_unit_test(test_cache_dir_long),
        cmocka_unit_test(test_cache_default_dir),
        cmocka_unit_test(test_kernel_dir),
        cmocka_unit_test(test_program_has_chain),
        cmocka_unit_test(test_build_log_level),
        cmocka_unit_test(test_build_seconds_logged),
        cmocka_unit_test(test_broken_source),
        cmocka_unit_test(test_platform_files),
        cmocka_unit_test(test_platform_make_dirs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
