/* ops_topk.c — the beam search's candidates on the device (ops.h:
 * nmt_ops_enable_topk, nmt_op_topk_logprobs) over cl/topk.cl: the
 * log-softmax of each row fused with a top-k selection, so that a decoder
 * step reads back k candidates per row, not the whole vocabulary. */
#include "ops.h"

#include "kernel_args.h"

#include <stdio.h>

nmt_status nmt_ops_enable_topk(nmt_ops *ops) {
    if (ops == NULL || ops->dev == NULL || ops->reduce_wg == 0) return NMT_ERR_INVALID_ARGUMENT;
    if (ops->k_topk != NULL) return NMT_OK;
    char opts[64];
    snprintf(opts, sizeof opts, "-DREDUCE_WG=%zu -DTOPK_MAX=%u", ops->reduce_wg, (unsigned)NMT_TOPK_MAX);
    cl_program prog;
    NMT_TRY(nmt_device_program(ops->dev, "topk", opts, &prog));
    cl_kernel k;
    NMT_TRY(nmt_device_kernel(ops->dev, prog, "topk_logprobs", &k));
    size_t wg;
    nmt_status st = nmt_kernel_wg(ops->dev, k, ops->reduce_wg, &wg);
    /* the log-probabilities must be log_softmax's bits: its local size or none */
    if (st == NMT_OK && wg != ops->reduce_wg) st = NMT_ERR_UNSUPPORTED;
    if (st != NMT_OK) {
        clReleaseKernel(k);
        return st;
    }
    ops->k_topk = k;
    return NMT_OK;
}

nmt_status nmt_op_topk_logprobs(nmt_ops *ops, nmt_buf x, uint32_t rows, uint32_t n, uint32_t ld, nmt_buf score,
                                uint32_t k, uint32_t eos, nmt_buf out) {
    if (ops == NULL || ops->k_topk == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (rows == 0) return NMT_OK;
    if (x.mem == NULL || score.mem == NULL || out.mem == NULL || n == 0 || ld < n || k == 0 ||
        k > NMT_TOPK_MAX || n > (uint32_t)INT32_MAX - 1)
        return NMT_ERR_INVALID_ARGUMENT;
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
    NMT_TRY(args_end(ops->dev, &a, "topk_logprobs"));
    size_t lws = ops->reduce_wg, gws = (size_t)rows * lws;
    return nmt_enqueue(ops->dev, ops->k_topk, 1, &gws, &lws, "topk_logprobs");
}
