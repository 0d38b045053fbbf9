/* SPDX-License-Identifier: MIT */
/* ops_sg.c — issue 23's subgroup reductions (docs/PORTING.md, "Fast paths:
 * subgroups"): whether the per-row reduction programs (layernorm in
 * cl/norm.cl, log_softmax in cl/elementwise.cl, topk_logprobs in cl/topk.cl)
 * are built with -DNMT_SUBGROUPS=1, so that cl/common.cl's wg_sum and
 * row_logsumexp reduce with sub_group_reduce_add/max, and the subgroup
 * sizes the driver chose for them.  The portable work-group reductions stay
 * the path of every device without subgroups and of NMT_EDGE_NO_SUBGROUPS=1. */
#include "ops.h"

#include <CL/cl_ext.h>

/* The driver's clGetKernelSubGroupInfoKHR (NULL when it has none). */
static clGetKernelSubGroupInfoKHR_fn sg_info_fn(const nmt_device *dev) {
    return (clGetKernelSubGroupInfoKHR_fn)clGetExtensionFunctionAddressForPlatform(dev->platform,
                                                                                  "clGetKernelSubGroupInfoKHR");
}

int nmt_ops_sg_wanted(const nmt_device *dev) {
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

nmt_status nmt_ops_sg_setup(nmt_ops *ops) {
    ops->sg_size = 0;
    if (!ops->subgroups) return NMT_OK;
    NMT_TRY(nmt_kernel_sg_size(ops->dev, ops->k_log_softmax, ops->reduce_wg, &ops->sg_size));
    nmt_log(&ops->dev->log, NMT_LOG_DEBUG, "ops: subgroup reductions, subgroup size %u at local size %zu",
            (unsigned)ops->sg_size, ops->reduce_wg);
    return NMT_OK;
}
