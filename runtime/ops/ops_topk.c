/* SPDX-License-Identifier: MIT */
/* ops_topk.c — the beam search's candidates on the device (ops.h:
 * nmt_ops_enable_topk, nmt_op_topk_logprobs) over cl/topk.cl: the
 * log-softmax of each row fused with a top-k selection, so that a decoder
 * step reads back k candidates per row, not the whole vocabulary. */
#include "ops_internal.h"

#include "kernel_args.h"

#include <stdio.h>
#include <string.h>

uint32_t nmt_ops_topk_max_k(const nmt_device *dev, size_t wg) {
    /* local memory: wg * k (key, id) pairs and two floats per work-item */
    const size_t lm = dev->info.local_mem_bytes ? dev->info.local_mem_bytes : 32768;
    const size_t fit = wg && lm > 8 * wg + 256 ? (lm - 8 * wg - 256) / (8 * wg) : 0;
    return (uint32_t)NMT_MIN(fit, (size_t)NMT_TOPK_MAX);
}

void nmt_ops_topk_opts(char opts[NMT_OPS_ROWS_OPTS], size_t wg, uint32_t k, int subgroups) {
    snprintf(opts, NMT_OPS_ROWS_OPTS, "-DREDUCE_WG=%zu -DTOPK_MAX=%u%s", wg, (unsigned)k,
             subgroups ? " -DNMT_SUBGROUPS=1" : "");
}

nmt_status nmt_ops_enable_topk(nmt_ops *ops) {
    if (ops == NULL || ops->dev == NULL || ops->reduce_wg == 0) return NMT_ERR_INVALID_ARGUMENT;
    if (ops->k_topk != NULL) return NMT_OK;
    const size_t wg = ops->reduce_wg;
    const uint32_t max_k = nmt_ops_topk_max_k(ops->dev, wg);
    if (max_k < NMT_OPS_TOPK_MIN) return NMT_ERR_UNSUPPORTED;
    char opts[NMT_OPS_ROWS_OPTS];
    nmt_ops_topk_opts(opts, wg, max_k, ops->subgroups);
    /* the program nmt_ops_init built with norm.cl and elementwise.cl where
     * its options are these (reduce_wg unchanged by the kernels' limits) */
    const int rows = ops->rows_opts[0] && strcmp(opts, ops->rows_opts) == 0;
    cl_program prog;
    NMT_TRY(nmt_device_program(ops->dev, rows ? NMT_OPS_ROWS_PROGRAM : "topk", opts, &prog));
    cl_kernel k;
    NMT_TRY(nmt_device_kernel(ops->dev, prog, "topk_logprobs", &k));
    size_t got;
    nmt_status st = nmt_kernel_wg(ops->dev, k, wg, &got);
    /* the log-probabilities must be log_softmax's bits: its local size or none */
    if (st == NMT_OK && got != wg) st = NMT_ERR_UNSUPPORTED;
    /* and, with subgroup reductions, its subgroup size (ops_sg.c) */
    uint32_t sg = 0;
    if (st == NMT_OK && ops->subgroups) st = nmt_kernel_sg_size(ops->dev, k, wg, &sg);
    if (st == NMT_OK && sg != ops->sg_size) {
        nmt_log(&ops->dev->log, NMT_LOG_WARN, "topk_logprobs: subgroup size %u, log_softmax's %u: no device top-k",
                (unsigned)sg, (unsigned)ops->sg_size);
        st = NMT_ERR_UNSUPPORTED;
    }
    if (st != NMT_OK) {
        clReleaseKernel(k);
        return st;
    }
    ops->k_topk = k;
    ops->topk_max = max_k;
    return NMT_OK;
}

static nmt_status topk_launch(nmt_ops *ops, nmt_buf x, uint32_t rows, uint32_t n, uint32_t ld, nmt_buf score,
                              uint32_t k, uint32_t eos, nmt_buf out, uint32_t pick, nmt_buf tok) {
    if (ops == NULL || ops->k_topk == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (rows == 0) return NMT_OK;
    if (x.mem == NULL || score.mem == NULL || out.mem == NULL || n == 0 || ld < n || k == 0 ||
        k > ops->topk_max || n > (uint32_t)INT32_MAX - 1 || (pick && tok.mem == NULL))
        return NMT_ERR_INVALID_ARGUMENT;
    if (ops->chain_on) { /* recorded into a chain (ops_chain.c) */
        int taken = 0;
        NMT_TRY(nmt_ops_chain_topk(ops, x, rows, n, ld, score, k, eos, out, pick, tok, &taken));
        if (taken) return NMT_OK;
    }
    args a = args_begin(ops->k_topk);
    arg_mem(&a, x.mem);
    arg_u64(&a, x.off);
    arg_u32(&a, n);
    arg_u32(&a, ld);
    arg_mem(&a, score.mem);
    arg_u64(&a, score.off);
    arg_u32(&a, rows);
    arg_u32(&a, k);
    arg_u32(&a, eos);
    arg_mem(&a, out.mem);
    arg_u64(&a, out.off);
    arg_u32(&a, pick);
    arg_mem(&a, pick ? tok.mem : out.mem); /* not written without pick */
    arg_u64(&a, pick ? tok.off : 0);
    NMT_TRY(args_end(ops->dev, &a, "topk_logprobs"));
    size_t lws = ops->reduce_wg, gws = (size_t)rows * lws;
    return nmt_enqueue(ops->dev, ops->k_topk, 1, &gws, &lws, "topk_logprobs");
}

nmt_status nmt_op_topk_logprobs(nmt_ops *ops, nmt_buf x, uint32_t rows, uint32_t n, uint32_t ld, nmt_buf score,
                                uint32_t k, uint32_t eos, nmt_buf out) {
    return topk_launch(ops, x, rows, n, ld, score, k, eos, out, 0, (nmt_buf){NULL, 0});
}

nmt_status nmt_op_topk_pick(nmt_ops *ops, nmt_buf x, uint32_t rows, uint32_t n, uint32_t ld, nmt_buf score,
                            uint32_t k, uint32_t eos, nmt_buf out, int no_eos, nmt_buf tok) {
    return topk_launch(ops, x, rows, n, ld, score, k, eos, out, no_eos ? 2 : 1, tok);
}
