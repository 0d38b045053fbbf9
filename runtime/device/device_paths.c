/* SPDX-License-Identifier: MIT */
/* device_paths.c — which fast paths a device takes, as data the op layer
 * reads (device.h): the subgroup reductions (docs/PORTING.md, "Fast paths:
 * subgroups"; the programs that use them are runtime/ops/ops_sg.c's) and
 * the int8 x int8 products per shape class ("Fast paths: int8 x int8
 * products"; their kernels are runtime/ops/ops_i8dot.c's).  Here, not in
 * the op layer, because nmt_device_info reports them before any session
 * exists. */
#include "device.h"

#include <CL/cl_ext.h>
#include <stdio.h>

/* ------------------------------------------------------------------------ */
/* Subgroups                                                                */
/* ------------------------------------------------------------------------ */

/* The driver's clGetKernelSubGroupInfoKHR (NULL when it has none). */
static clGetKernelSubGroupInfoKHR_fn sg_info_fn(const nmt_device *dev) {
    return (clGetKernelSubGroupInfoKHR_fn)clGetExtensionFunctionAddressForPlatform(dev->platform,
                                                                                  "clGetKernelSubGroupInfoKHR");
}

int nmt_device_sg_wanted(const nmt_device *dev) {
    /* the size query is required: topk_logprobs must match log_softmax's size */
    return dev != NULL && dev->info.has_subgroups && dev->sg_mode != NMT_SG_OFF && sg_info_fn(dev) != NULL;
}

nmt_status nmt_kernel_sg_size(nmt_device *dev, cl_kernel k, size_t lws, uint32_t *out) {
    *out = 0;
    clGetKernelSubGroupInfoKHR_fn f = sg_info_fn(dev);
    if (f == NULL) return NMT_ERR_UNSUPPORTED;
    size_t sg = 0;
    cl_int e = f(k, dev->device, CL_KERNEL_MAX_SUB_GROUP_SIZE_FOR_NDRANGE_KHR, sizeof lws, &lws, sizeof sg, &sg, NULL);
    if (e != CL_SUCCESS) return nmt_cl_fail(dev, e, "clGetKernelSubGroupInfoKHR");
    *out = (uint32_t)sg;
    return NMT_OK;
}

/* ------------------------------------------------------------------------ */
/* int8 x int8 products                                                     */
/* ------------------------------------------------------------------------ */

static int env_off(void) { return nmt_env_flag("NMT_EDGE_NO_I8DOT"); }

int nmt_i8dot_fast_variant(const nmt_device *dev) {
    return dev->info.has_int_dot ? NMT_I8_DOT_BUILTIN : dev->info.has_x86_vnni ? NMT_I8_VNNI : NMT_I8_PORTABLE;
}

int nmt_i8dot_path(const nmt_device *dev, nmt_gemm_class cls) {
    if (dev == NULL || (unsigned)cls >= NMT_GCLASS_COUNT || env_off()) return 0;
    const int want = dev->tuning.i8dot[cls];
    if (want == NMT_I8DOT_OFF) return 0;
    const int v = nmt_i8dot_fast_variant(dev);
    return want == NMT_I8DOT_ON || v != NMT_I8_PORTABLE ? v : 0;
}

unsigned nmt_i8dot_describe(const nmt_device *dev, char *buf, size_t cap) {
    static const char *const names[4] = {"int8 weights x fp32", "int8 x int8 (dot built-in)",
                                         "int8 x int8 (portable)", "int8 x int8 (x86 VNNI)"};
    int p[NMT_GCLASS_COUNT];
    unsigned classes = 0;
    for (int c = 0; c < NMT_GCLASS_COUNT; c++) {
        p[c] = nmt_i8dot_path(dev, (nmt_gemm_class)c);
        if (p[c] != 0) classes |= 1u << c;
    }
    if (buf == NULL || cap == 0) return classes;
    if (p[0] == p[1] && p[1] == p[2])
        snprintf(buf, cap, "%s%s", names[p[0]], p[0] == 0 && env_off() ? " (NMT_EDGE_NO_I8DOT)" : "");
    else
        snprintf(buf, cap, "m2: %s, m16: %s, big: %s", names[p[0]], names[p[1]], names[p[2]]);
    return classes;
}
