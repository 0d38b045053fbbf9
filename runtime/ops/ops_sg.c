/* SPDX-License-Identifier: MIT */
/* ops_sg.c — issue 23's subgroup reductions (docs/PORTING.md, "Fast paths:
 * subgroups"): whether the per-row reduction programs (layernorm in
 * cl/norm.cl, log_softmax in cl/elementwise.cl, topk_logprobs in cl/topk.cl)
 * are built with -DNMT_SUBGROUPS=1, so that cl/common.cl's wg_sum and
 * row_logsumexp reduce with sub_group_reduce_add/max, and the subgroup
 * sizes the driver chose for them.  The portable work-group reductions stay
 * the path of every device without subgroups and of NMT_EDGE_NO_SUBGROUPS=1. */
#include "ops_internal.h"

nmt_status nmt_ops_sg_setup(nmt_ops *ops) {
    ops->sg_size = 0;
    if (!ops->subgroups) return NMT_OK;
    NMT_TRY(nmt_kernel_sg_size(ops->dev, ops->k_log_softmax, ops->reduce_wg, &ops->sg_size));
    nmt_log(&ops->dev->log, NMT_LOG_DEBUG, "ops: subgroup reductions, subgroup size %u at local size %zu",
            (unsigned)ops->sg_size, ops->reduce_wg);
    return NMT_OK;
}
