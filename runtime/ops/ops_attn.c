/* SPDX-License-Identifier: MIT */
/* ops_attn.c — the attention op (ops.h: nmt_op_attention) over
 * cl/attention.cl: one launch of attn_fused (one work-item per query row and
 * head) or attn_group (a work-group per row, on GPUs) for every branch of a
 * hybrid layer, or, where the head is too wide for them or $NMT_EDGE_ATTN is
 * "split", the three-kernel path attn_scores / attn_stats / attn_apply.  In a
 * decoding step the fused launch is recorded into the product chain instead
 * (ops_chain.c).  Split out of ops.c, whose init builds the program. */
#include "ops_internal.h"

#include "kernel_args.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NMT_OPS_POS_LIMIT (1u << 30) /* attention positions are int in the kernels */
#define NMT_OPS_ATTN_MAX_DH 128      /* ATTN_MAX_DH of cl/attention.cl */
#define NMT_OPS_ATTN_GWG 64          /* ATTN_GWG of cl/attention.cl (attn_group's local size) */

/* attn_group's kernel where the device runs it in work-groups of
 * NMT_OPS_ATTN_GWG (else NULL: attn_fused serves), and $NMT_EDGE_ATTN. */
nmt_status nmt_ops_attn_setup(nmt_ops *ops, cl_program prog) {
    static const char *const modes[] = {"", "item", "split", "group"};
    const char *v = getenv("NMT_EDGE_ATTN");
    for (int m = 1; v != NULL && m < (int)NMT_ARRAY_LEN(modes); m++)
        if (strcmp(v, modes[m]) == 0) ops->attn_mode = m;
    NMT_TRY(nmt_device_kernel(ops->dev, prog, "attn_group", &ops->k_attn_group));
    size_t wg = 0;
    NMT_TRY(nmt_kernel_wg(ops->dev, ops->k_attn_group, NMT_OPS_ATTN_GWG, &wg));
    if (wg < NMT_OPS_ATTN_GWG) {
        clReleaseKernel(ops->k_attn_group);
        ops->k_attn_group = NULL;
    }
    return NMT_OK;
}

/* ------------------------------------------------------------------------ */
/* Attention                                                                */
/* ------------------------------------------------------------------------ */

/* Arguments shared by attn_stats and attn_apply after their own leading ones. */
static void attn_mask_args(args *a, const nmt_attn_args *p, int32_t kind, int32_t radius) {
    arg_mem(a, p->key_len.mem ? p->key_len.mem : p->scores.mem);
    arg_u64(a, p->key_len.mem ? p->key_len.off : 0);
    arg_i32(a, p->key_len.mem != NULL);
    arg_u32(a, p->key_len_const);
    arg_i32(a, p->causal ? 1 : 0);
    arg_i32(a, kind);
    arg_i32(a, radius);
}

int nmt_ops_attn_kv_row(const nmt_ops *ops, uint32_t d_head) {
    return ops != NULL && d_head <= NMT_OPS_ATTN_MAX_DH && ops->attn_mode != NMT_ATTN_SPLIT;
}

/* attn_group where chosen (or AUTO on a GPU) and built, else attn_fused. */
static int attn_use_group(const nmt_ops *ops) {
    if (ops->k_attn_group == NULL) return 0;
    return ops->attn_mode == NMT_ATTN_GROUP || (ops->attn_mode == NMT_ATTN_AUTO && ops->dev->info.is_gpu);
}

nmt_status nmt_op_attention(nmt_ops *ops, const nmt_attn_args *p) {
    if ((ops == NULL || ops->dev == NULL || ops->k_add == NULL) || p == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (p->group == 0 || p->n_branches == 0 || p->n_branches > NMT_MAX_BRANCHES) return NMT_ERR_INVALID_ARGUMENT;
    for (uint32_t b = 0; b < p->n_branches; b++)
        if ((unsigned)p->branches[b].kind > (unsigned)NMT_BRANCH_BLOCK ||
            (p->branches[b].kind == NMT_BRANCH_BLOCK && p->branches[b].k == 0))
            return NMT_ERR_INVALID_ARGUMENT;
    if (p->n_seq == 0 || p->lq == 0 || p->n_heads == 0 || p->d_head == 0) return NMT_OK;
    if (p->q.mem == NULL || p->k.mem == NULL || p->v.mem == NULL || p->out.mem == NULL || p->scores.mem == NULL ||
        p->stats.mem == NULL)
        return NMT_ERR_INVALID_ARGUMENT;
    const uint64_t width = (uint64_t)p->n_heads * p->d_head;
    if (p->q_ld < width || p->k_ld < width || p->v_ld < width || p->out_ld < width * p->n_branches)
        return NMT_ERR_INVALID_ARGUMENT;
    if ((uint64_t)p->q_pos0 + p->lq >= NMT_OPS_POS_LIMIT || p->lk_max >= NMT_OPS_POS_LIMIT ||
        (uint64_t)p->n_seq * p->n_heads > UINT32_MAX || (uint64_t)p->n_seq * p->lq > UINT32_MAX) {
        nmt_log(&ops->dev->log, NMT_LOG_ERROR, "attention sizes beyond the kernels' index range");
        return NMT_ERR_UNSUPPORTED;
    }
    const int has_new = p->k_new.mem != NULL;
    if (has_new != (p->v_new.mem != NULL) || (has_new && (p->lq != 1 || p->group != 1 || p->new_ld < width)))
        return NMT_ERR_INVALID_ARGUMENT;
    const uint32_t rows_sh = p->n_seq * p->n_heads;
    const float scale = (float)(1.0 / sqrt((double)p->d_head));

    if (nmt_ops_attn_kv_row(ops, p->d_head)) {
        /* one launch: every branch, scores recomputed per branch */
        cl_uint kinds = 0;
        cl_int8 radii;
        memset(&radii, 0, sizeof radii);
        for (uint32_t b = 0; b < p->n_branches; b++) {
            kinds |= (cl_uint)p->branches[b].kind << (4 * b);
            radii.s[b] = (cl_int)NMT_MIN(p->branches[b].k, NMT_OPS_POS_LIMIT);
        }
        const int grp = attn_use_group(ops);
        if (!grp && ops->chain_on) { /* recorded into a chain (ops_chain.c) */
            int taken = 0;
            NMT_TRY(nmt_ops_chain_attn(ops, p, scale, kinds, radii.s, &taken));
            if (taken) return NMT_OK;
        }
        cl_kernel k = grp ? ops->k_attn_group : ops->k_attn_fused;
        const char *kname = grp ? "attn_group" : "attn_fused";
        args a = args_begin(k);
        arg_u32(&a, p->n_seq);
        arg_u32(&a, p->lq);
        arg_u32(&a, p->q_pos0);
        arg_u32(&a, p->lk_max);
        arg_u32(&a, p->group);
        arg_u32(&a, p->n_heads);
        arg_u32(&a, p->d_head);
        arg_f32(&a, scale);
        arg_mem(&a, p->q.mem);
        arg_u64(&a, p->q.off);
        arg_u32(&a, p->q_ld);
        arg_mem(&a, p->k.mem);
        arg_u64(&a, p->k.off);
        arg_u32(&a, p->k_ld);
        arg_mem(&a, p->v.mem);
        arg_u64(&a, p->v.off);
        arg_u32(&a, p->v_ld);
        arg_u64(&a, p->kv_seq_stride);
        arg_mem(&a, p->kv_row.mem ? p->kv_row.mem : p->scores.mem);
        arg_u64(&a, p->kv_row.mem ? p->kv_row.off : 0);
        arg_u32(&a, p->kv_row_ld);
        arg_i32(&a, p->kv_row.mem != NULL);
        arg_mem(&a, has_new ? p->k_new.mem : p->scores.mem);
        arg_u64(&a, has_new ? p->k_new.off : 0);
        arg_mem(&a, has_new ? p->v_new.mem : p->scores.mem);
        arg_u64(&a, has_new ? p->v_new.off : 0);
        arg_u32(&a, p->new_ld);
        arg_i32(&a, has_new);
        arg_mem(&a, p->key_len.mem ? p->key_len.mem : p->scores.mem);
        arg_u64(&a, p->key_len.mem ? p->key_len.off : 0);
        arg_i32(&a, p->key_len.mem != NULL);
        arg_u32(&a, p->key_len_const);
        arg_i32(&a, p->causal ? 1 : 0);
        arg_u32(&a, p->n_branches);
        arg_u32(&a, kinds);
        arg_raw(&a, sizeof radii, &radii);
        arg_mem(&a, p->out.mem);
        arg_u64(&a, p->out.off);
        arg_u32(&a, p->out_ld);
        NMT_TRY(args_end(ops->dev, &a, kname));
        if (grp) {
            const size_t n_grp[3] = {(size_t)rows_sh * NMT_OPS_ATTN_GWG, p->lq, p->n_branches};
            const size_t l_grp[3] = {NMT_OPS_ATTN_GWG, 1, 1};
            return nmt_ops_launch_local(ops, k, 3, n_grp, l_grp, kname);
        }
        const size_t n_fused[3] = {rows_sh, p->lq, p->n_branches};
        return nmt_ops_launch(ops, k, 3, n_fused, kname);
    }

    if (p->kv_row.mem != NULL) return NMT_ERR_UNSUPPORTED; /* only the fused kernel reads through a table */
    if (has_new) { /* the append first: the split kernels read the new position from the cache */
        if (p->kv_seq_stride > UINT32_MAX) return NMT_ERR_UNSUPPORTED;
        const size_t pos = p->q_pos0;
        NMT_TRY(nmt_op_copy_rows(ops, p->k_new, p->new_ld, nmt_buf_at(p->k, pos * p->k_ld),
                                 (uint32_t)p->kv_seq_stride, p->n_seq, (uint32_t)width));
        NMT_TRY(nmt_op_copy_rows(ops, p->v_new, p->new_ld, nmt_buf_at(p->v, pos * p->v_ld),
                                 (uint32_t)p->kv_seq_stride, p->n_seq, (uint32_t)width));
    }
    /* 1. scores, shared by every branch */
    args a = args_begin(ops->k_attn_scores);
    arg_u32(&a, p->n_seq);
    arg_u32(&a, p->lq);
    arg_u32(&a, p->q_pos0);
    arg_u32(&a, p->lk_max);
    arg_u32(&a, p->group);
    arg_u32(&a, p->n_heads);
    arg_u32(&a, p->d_head);
    arg_f32(&a, scale);
    arg_mem(&a, p->q.mem);
    arg_u64(&a, p->q.off);
    arg_u32(&a, p->q_ld);
    arg_mem(&a, p->k.mem);
    arg_u64(&a, p->k.off);
    arg_u32(&a, p->k_ld);
    arg_u64(&a, p->kv_seq_stride);
    arg_mem(&a, p->key_len.mem ? p->key_len.mem : p->scores.mem);
    arg_u64(&a, p->key_len.mem ? p->key_len.off : 0);
    arg_i32(&a, p->key_len.mem != NULL);
    arg_u32(&a, p->key_len_const);
    arg_i32(&a, p->causal ? 1 : 0);
    arg_mem(&a, p->scores.mem);
    arg_u64(&a, p->scores.off);
    NMT_TRY(args_end(ops->dev, &a, "attn_scores"));
    const size_t n_scores[3] = {p->lk_max, p->lq, rows_sh};
    NMT_TRY(nmt_ops_launch(ops, ops->k_attn_scores, 3, n_scores, "attn_scores"));

    /* 2./3. per branch: softmax statistics, then the weighted sum of V into
     * the branch's column block.  The in-order queue serialises the reuse
     * of `stats` between branches. */
    for (uint32_t b = 0; b < p->n_branches; b++) {
        const int32_t kind = (int32_t)p->branches[b].kind;
        const int32_t radius = (int32_t)NMT_MIN(p->branches[b].k, NMT_OPS_POS_LIMIT);

        a = args_begin(ops->k_attn_stats);
        arg_u32(&a, p->n_seq);
        arg_u32(&a, p->lq);
        arg_u32(&a, p->q_pos0);
        arg_u32(&a, p->lk_max);
        arg_u32(&a, p->group);
        arg_u32(&a, p->n_heads);
        attn_mask_args(&a, p, kind, radius);
        arg_mem(&a, p->scores.mem);
        arg_u64(&a, p->scores.off);
        arg_mem(&a, p->stats.mem);
        arg_u64(&a, p->stats.off);
        NMT_TRY(args_end(ops->dev, &a, "attn_stats"));
        const size_t n_stats[2] = {p->lq, rows_sh};
        NMT_TRY(nmt_ops_launch(ops, ops->k_attn_stats, 2, n_stats, "attn_stats"));

        a = args_begin(ops->k_attn_apply);
        arg_u32(&a, p->n_seq);
        arg_u32(&a, p->lq);
        arg_u32(&a, p->q_pos0);
        arg_u32(&a, p->lk_max);
        arg_u32(&a, p->group);
        arg_u32(&a, p->n_heads);
        arg_u32(&a, p->d_head);
        arg_mem(&a, p->v.mem);
        arg_u64(&a, p->v.off);
        arg_u32(&a, p->v_ld);
        arg_u64(&a, p->kv_seq_stride);
        attn_mask_args(&a, p, kind, radius);
        arg_mem(&a, p->scores.mem);
        arg_u64(&a, p->scores.off);
        arg_mem(&a, p->stats.mem);
        arg_u64(&a, p->stats.off);
        arg_mem(&a, p->out.mem);
        arg_u64(&a, p->out.off + (uint64_t)b * width);
        arg_u32(&a, p->out_ld);
        NMT_TRY(args_end(ops->dev, &a, "attn_apply"));
        /* work-groups along the channels of one row only (the kernel
         * shares each row's probabilities through local memory) */
        const size_t n_apply[3] = {p->d_head, p->lq, rows_sh};
        const size_t l_apply[3] = {NMT_MIN(pow2_ceil(p->d_head), pow2_floor(ops->wg_max)), 1, 1};
        NMT_TRY(nmt_ops_launch_local(ops, ops->k_attn_apply, 3, n_apply, l_apply, "attn_apply"));
    }
    return NMT_OK;
}
