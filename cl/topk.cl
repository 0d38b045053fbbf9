/* SPDX-License-Identifier: MIT */
/* topk.cl — the beam search's candidates on the device (runtime/ops/ops_topk.c,
 * nmt_op_topk_logprobs): the log-softmax of each row of logits fused with a
 * top-k selection, so that a decoder step reads back k candidates per row
 * instead of the whole vocabulary (issue 22).
 *
 *   topk_logprobs  row r of X (n logits, stride ld), one work-group of
 *                  REDUCE_WG (or fewer, a power of two) work-items per row:
 *                  lse = max + log(sum exp(x - max)) by common.cl's
 *                  row_logsumexp, as elementwise.cl's log_softmax (the same
 *                  bits at the same local size; a row without a finite
 *                  entry has lse = 0), lp_v = x_v - lse,
 *                  key_v = score[r] + lp_v (the beam's cumulative score of
 *                  the row: the same float sum the host forms, so the
 *                  ranking is the host's).  The k entries of largest key,
 *                  ties to the lower id, NaN keys never: in rank order,
 *                  lp at out[r*k + i], the id at out[rows*k + r*k + i]
 *                  (lp bits, as_uint); missing entries (n < k) lp -inf, id -1.
 *                  out[2*rows*k + r] = lp_eos.  A row whose score is not
 *                  > -inf (a dead beam) is not searched: every entry and
 *                  its lp_eos missing.
 *                  NDRange (rows * lsz), local size lsz.
 *                  pick != 0 (greedy steps chained on the device, runtime/
 *                  session.c): then the row's next token is its first
 *                  ranked entry whose key is > -inf and, with pick = 2
 *                  (EOS barred), not EOS — the candidate the host's beam
 *                  takes at beam 1 — or EOS when there is none:
 *                  tok[tok_off + r] = its id, score[s_off + r] = its key
 *                  (the row's cumulative score, as the host forms it).  A
 *                  dead row is left as it is.
 *
 *                  The k-th largest of the work-items' maxima bounds the
 *                  keys worth ranking; each work-item keeps the best k of
 *                  its entries above it (private, sorted), writes
 *                  them to local memory, and
 *                  work-item 0 merges the lists: one barrier, no per-rank
 *                  reduction rounds.  The steps are common.cl's, which a
 *                  chained decoding step runs with the same lanes in one
 *                  work-item (CHAIN_TOPK): the same bits.
 *
 * Defines: REDUCE_WG (the local buffers' capacity, the largest local size),
 * TOPK_MAX (the largest k; local memory holds REDUCE_WG * TOPK_MAX keys and
 * ids, runtime/ops/ops_topk.c sizes it to the device), NMT_SUBGROUPS (defined:
 * row_logsumexp by subgroups, as log_softmax's program; runtime/device/device_paths.c). */

#ifndef REDUCE_WG
#define REDUCE_WG 64
#endif

/* The work-items' parts (common.cl, shared with the chained top-k of
 * gemm_chain / gemm_i8_chain / gemm_q8_chain): TOPK_BOUND, topk_lane_list,
 * TOPK_MERGE, topk_write. */
TOPK_BOUND(topk_bound_l, __local)
TOPK_MERGE(topk_merge_l, __local)

__kernel void topk_logprobs(__global const float *X, const ulong x_off, const uint n, const uint ld,
                            __global float *score, const ulong s_off, const uint rows, const uint k,
                            const uint eos, __global uint *out, const ulong out_off, const uint pick,
                            __global int *tok, const ulong tok_off) {
    __local float red_m[REDUCE_WG];
    __local float red_s[REDUCE_WG];
    __local float list_k[REDUCE_WG * TOPK_MAX]; /* each work-item's best k: keys, ids */
    __local int list_i[REDUCE_WG * TOPK_MAX];
    __local float item_max[REDUCE_WG]; /* each work-item's largest logit */
    __local float thr[1];              /* the bound on the keys worth ranking */
    const uint lid = (uint)get_local_id(0), lsz = (uint)get_local_size(0);
    const uint r = (uint)get_group_id(0);
    __global const float *x = X + x_off + (ulong)r * ld;
    const float s0 = score[s_off + r];
    if (!(s0 > -INFINITY)) { /* the same for the whole group: no barrier is skipped by some only */
        if (lid == 0) topk_dead(out, out_off, rows, r, k);
        return;
    }

    /* lse: common.cl's row_logsumexp, as log_softmax (0 for a row without a finite entry, which
     * log_softmax leaves as it is) */
    float mw;
    float lse = row_logsumexp(x, n, red_m, red_s, &mw);
    if (lse == -INFINITY) lse = 0.0f;

    item_max[lid] = mw; /* from row_logsumexp's pass */
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0) thr[0] = topk_bound_l(item_max, lsz, k, s0, lse);
    barrier(CLK_LOCAL_MEM_FENCE);
    const float key_min = thr[0];

    float tk[TOPK_MAX];
    int ti[TOPK_MAX];
    const uint cnt = topk_lane_list(x, n, lid, lsz, s0, lse, key_min, k, tk, ti);

    /* The lists into local memory (missing entries: key -inf, id INT_MAX),
     * then work-item 0 merges them in work-item order. */
    for (uint i = 0; i < k; i++) {
        list_k[lid * k + i] = i < cnt ? tk[i] : -INFINITY;
        list_i[lid * k + i] = i < cnt ? ti[i] : INT_MAX;
    }
    /* the global fence: every work-item's read of score[] above is done
     * before work-item 0 writes it (pick) */
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    if (lid != 0) return;
    uint m = 0;
    for (uint w = 0; w < lsz; w++) m = topk_merge_l(list_k + w * k, list_i + w * k, k, tk, ti, m);
    topk_write(x, lse, tk, ti, m, k, eos, n, out, out_off, rows, r, pick, tok, tok_off, score, s_off);
}
