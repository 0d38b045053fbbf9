/* SPDX-License-Identifier: MIT */
/* ops_beam.c — beam search steps chained on the device (ops.h:
 * nmt_ops_enable_beam, nmt_op_beam_advance, nmt_op_kv_table_permute) over
 * cl/beam.cl: the next step's tokens, scores and back-pointers written by
 * the device, and the Transformer's K|V table permuted there. */
#include "ops_internal.h"

#include "kernel_args.h"

nmt_status nmt_ops_enable_beam(nmt_ops *ops) {
    if (ops == NULL || ops->dev == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (ops->k_beam_advance != NULL) return NMT_OK;
    cl_program prog;
    NMT_TRY(nmt_device_program(ops->dev, NMT_OPS_ATTN_PROGRAM, "", &prog)); /* beam.cl there */
    cl_kernel adv = NULL, perm = NULL;
    nmt_status st = nmt_device_kernel(ops->dev, prog, "beam_advance", &adv);
    if (st == NMT_OK) st = nmt_device_kernel(ops->dev, prog, "kv_table_permute", &perm);
    size_t wg = 0;
    if (st == NMT_OK) st = nmt_kernel_wg(ops->dev, perm, 64, &wg);
    if (st != NMT_OK) {
        if (adv) clReleaseKernel(adv);
        if (perm) clReleaseKernel(perm);
        return st;
    }
    ops->k_beam_advance = adv;
    ops->k_kv_permute = perm;
    ops->kv_permute_wg = wg;
    return NMT_OK;
}

void nmt_ops_release_beam(nmt_ops *ops) {
    if (ops->k_beam_advance) clReleaseKernel(ops->k_beam_advance);
    if (ops->k_kv_permute) clReleaseKernel(ops->k_kv_permute);
    ops->k_beam_advance = ops->k_kv_permute = NULL;
}

nmt_status nmt_op_beam_advance(nmt_ops *ops, const nmt_beam_step *b) {
    if (ops == NULL || ops->k_beam_advance == NULL || b == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (b->rows == 0) return NMT_OK;
    if (b->cand.mem == NULL || b->state.mem == NULL || b->tok.mem == NULL || b->score.mem == NULL ||
        b->back.mem == NULL || b->K == 0 || b->K > NMT_BEAM_DEVICE_MAX || b->rows % b->K != 0 || b->k == 0 ||
        b->k > NMT_TOPK_MAX || b->V == 0 || b->V > (uint32_t)INT32_MAX)
        return NMT_ERR_INVALID_ARGUMENT;
    if (ops->chain_on) { /* recorded into a chain (ops_chain.c) */
        int taken = 0;
        NMT_TRY(nmt_ops_chain_beam(ops, b, &taken));
        if (taken) return NMT_OK;
    }
    args a = args_begin(ops->k_beam_advance);
    arg_mem(&a, b->cand.mem);
    arg_u64(&a, b->cand.off);
    arg_u32(&a, b->rows);
    arg_u32(&a, b->k);
    arg_u32(&a, b->K);
    arg_u32(&a, b->V);
    arg_u32(&a, b->eos);
    arg_u32(&a, b->t);
    arg_u32(&a, b->min_len);
    arg_mem(&a, b->state.mem);
    arg_u64(&a, b->state.off);
    arg_mem(&a, b->tok.mem);
    arg_u64(&a, b->tok.off);
    arg_mem(&a, b->score.mem);
    arg_u64(&a, b->score.off);
    arg_mem(&a, b->back.mem);
    arg_u64(&a, b->back.off);
    NMT_TRY(args_end(ops->dev, &a, "beam_advance"));
    /* one local size whatever the sentence count (PoCL compiles a kernel
     * per local size, and chose one per count when given none) */
    const size_t gws = b->rows / b->K, lws = 1;
    return nmt_enqueue(ops->dev, ops->k_beam_advance, 1, &gws, &lws, "beam_advance");
}

int nmt_ops_kv_permute_fits(const nmt_ops *ops, uint32_t ld) {
    if (ops == NULL || ops->k_kv_permute == NULL) return 0;
    const uint64_t lm = ops->dev->info.local_mem_bytes ? ops->dev->info.local_mem_bytes : 32768;
    return (uint64_t)ld * sizeof(cl_int) <= lm / 2;
}

nmt_status nmt_op_kv_table_permute(nmt_ops *ops, nmt_buf tab, uint32_t ld, uint32_t positions, nmt_buf back,
                                   uint32_t rows) {
    if (ops == NULL || ops->k_kv_permute == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (positions == 0 || rows == 0) return NMT_OK;
    if (tab.mem == NULL || back.mem == NULL || rows > ld) return NMT_ERR_INVALID_ARGUMENT;
    if (!nmt_ops_kv_permute_fits(ops, ld)) return NMT_ERR_UNSUPPORTED;
    if (ops->chain_on) {
        int taken = 0;
        NMT_TRY(nmt_ops_chain_kv_permute(ops, tab, ld, positions, back, rows, &taken));
        if (taken) return NMT_OK;
    }
    args a = args_begin(ops->k_kv_permute);
    arg_mem(&a, tab.mem);
    arg_u64(&a, tab.off);
    arg_u32(&a, ld);
    arg_mem(&a, back.mem);
    arg_u64(&a, back.off);
    arg_u32(&a, rows);
    arg_raw(&a, (size_t)ld * sizeof(cl_int), NULL);
    NMT_TRY(args_end(ops->dev, &a, "kv_table_permute"));
    const size_t lws = ops->kv_permute_wg, gws = (size_t)positions * lws;
    return nmt_enqueue(ops->dev, ops->k_kv_permute, 1, &gws, &lws, "kv_table_permute");
}
