/* SPDX-License-Identifier: MIT */
/* attention.cl — multi-head masked attention with HySAN branches sharing one
 * score matrix (runtime/ops/ops.h, nmt_attn_args, gives the exact semantics).
 *
 * Kernels, launched by nmt_op_attention in this order:
 *   attn_scores  S[s,h,i,j] = (q_i . k_j) * scale           once per call
 *                NDRange (j, i, s*H + h); only keys some branch can see are
 *                computed (j < key_len, and j <= pos_i when causal); the
 *                other entries of S are left untouched.
 *   attn_stats   per (s, h, i): max and sum of exp over the keys the branch
 *                allows, into stats[row*2 + {0,1}]        once per branch
 *                NDRange (i, s*H + h)
 *   attn_apply   out[s*lq+i, h*d_head + c] (branch column block chosen by
 *                the host through out_off) = sum_j softmax_j * v_j[c]
 *                NDRange (c, i, s*H + h), work-groups (L, 1, 1): the
 *                group of a row computes each probability once into local
 *                memory, ATTN_TILE keys at a time; dimension 0 may be
 *                padded past d_head (the host pads it to a multiple of L)
 *                                                         once per branch
 *
 *   attn_fused   the whole of the above in one launch, for d_head <=
 *                ATTN_MAX_DH: one work-item per (s*H + h, i, branch)
 *                walks its allowed keys once with an online softmax
 *                (running max, rescaled sum and accumulator, as in
 *                FlashAttention), so no score matrix and no barriers; the
 *                branch kinds come packed 4 bits each in `kinds`, their
 *                radii in `radii` (int8).  Scores are recomputed per
 *                branch (cheap next to the launches it saves).  When
 *                d_head % 16 == 0, q and the accumulator are float16
 *                registers (unrolled loops over the ATTN_MAX_DH / 16
 *                vectors); otherwise a private array.  With has_kv_row,
 *                key (and value) j of kv sequence m is read from the
 *                sequence kv_row[kr_off + j * kr_ld + m] instead of m (a
 *                beam's rows share their history: the decoder's K|V cache
 *                is not reordered, runtime/ops/ops.h nmt_attn_args.kv_row).
 *                With has_new (a decoding step, lq == 1): the key and
 *                value at the query's own position come from row s of
 *                Kn / Vn (the step's projections) instead of the cache,
 *                and the branch-0 work-item of (s, h) writes its head's
 *                slices of them into the cache there, where the next
 *                steps read them (the step's K|V append, fused; no
 *                work-item of this launch reads the cache at that
 *                position, so the write races with no read).
 *                NDRange (s*H + h, i, branch), any padding
 *
 * Masks.  Query i sits at position pos = q_pos0 + i; key j at position j.
 * Every mask is an interval of keys, so a row is the range [lo, hi]:
 *   key padding   j < key_len[m]    (m = s / group, the kv sequence)
 *   causal        j <= pos
 *   FW            j <= pos          BW   j >= pos
 *   LOCAL k       pos - k <= j <= pos + k
 * An empty range (lo > hi) gives stats (-INF, 0) and an output row of 0.
 *
 * Index arithmetic is 64-bit (ulong) for addresses; positions are int (the
 * host keeps q_pos0 + lq and the LOCAL radius below 2^30).  The NDRanges of
 * attn_scores and attn_stats may be padded in every dimension, attn_apply's
 * in dimension 0 only: surplus work-items return (or idle past barriers).
 *
 * -D knobs (defaults):
 *   ATTN_TILE    keys whose probabilities attn_apply stages in local memory
 *                per step (64)
 *   ATTN_MAX_DH  largest d_head attn_fused handles (its private
 *                accumulator; 128)
 */
#ifndef ATTN_TILE
#define ATTN_TILE 64
#endif
/* ATTN_MAX_DH's default: common.cl (attn_item) */

__kernel void attn_scores(const uint n_seq, const uint lq, const uint q_pos0, const uint lk_max,
                          const uint group, const uint n_heads, const uint d_head, const float scale,
                          __global const float *Q, const ulong q_off, const uint q_ld,
                          __global const float *Kc, const ulong k_off, const uint k_ld,
                          const ulong kv_stride,
                          __global const int *key_len, const ulong kl_off, const int has_key_len,
                          const uint key_len_const, const int causal,
                          __global float *S, const ulong s_off) {
    const uint j = (uint)get_global_id(0);
    const uint i = (uint)get_global_id(1);
    const uint sh = (uint)get_global_id(2);
    if (j >= lk_max || i >= lq || sh >= n_seq * n_heads) return;
    const uint s = sh / n_heads, h = sh - s * n_heads, m = s / group;
    const int n_keys = attn_key_count(key_len, kl_off, has_key_len, key_len_const, m, lk_max);
    const int pos = (int)(q_pos0 + i);
    if ((int)j >= n_keys || (causal && (int)j > pos)) return;

    __global const float *q = Q + q_off + (ulong)(s * lq + i) * q_ld + (ulong)h * d_head;
    __global const float *k = Kc + k_off + (ulong)m * kv_stride + (ulong)j * k_ld + (ulong)h * d_head;
    float4 acc4 = (float4)(0.0f);
    const uint D4 = d_head & ~3u;
    for (uint c = 0; c < D4; c += 4) acc4 += vload4(0, q + c) * vload4(0, k + c);
    float acc = (acc4.x + acc4.y) + (acc4.z + acc4.w);
    for (uint c = D4; c < d_head; c++) acc += q[c] * k[c];
    S[s_off + ((ulong)sh * lq + i) * lk_max + j] = acc * scale;
}

__kernel void attn_stats(const uint n_seq, const uint lq, const uint q_pos0, const uint lk_max,
                         const uint group, const uint n_heads,
                         __global const int *key_len, const ulong kl_off, const int has_key_len,
                         const uint key_len_const, const int causal, const int kind, const int radius,
                         __global const float *S, const ulong s_off,
                         __global float *stats, const ulong st_off) {
    const uint i = (uint)get_global_id(0);
    const uint sh = (uint)get_global_id(1);
    if (i >= lq || sh >= n_seq * n_heads) return;
    const uint s = sh / n_heads;
    const int n_keys = attn_key_count(key_len, kl_off, has_key_len, key_len_const, s / group, lk_max);
    const int2 r = attn_range((int)(q_pos0 + i), n_keys, causal, kind, radius);
    const ulong row = (ulong)sh * lq + i;
    __global const float *srow = S + s_off + row * lk_max;

    float mx = -INFINITY, sum = 0.0f;
    if (r.x <= r.y) {
        for (int j = r.x; j <= r.y; j++) mx = fmax(mx, srow[j]);
        for (int j = r.x; j <= r.y; j++) sum += exp(srow[j] - mx);
    }
    stats[st_off + row * 2] = mx;
    stats[st_off + row * 2 + 1] = sum;
}

__kernel void attn_apply(const uint n_seq, const uint lq, const uint q_pos0, const uint lk_max,
                         const uint group, const uint n_heads, const uint d_head,
                         __global const float *V, const ulong v_off, const uint v_ld,
                         const ulong kv_stride,
                         __global const int *key_len, const ulong kl_off, const int has_key_len,
                         const uint key_len_const, const int causal, const int kind, const int radius,
                         __global const float *S, const ulong s_off,
                         __global const float *stats, const ulong st_off,
                         __global float *out, const ulong out_off, const uint out_ld) {
    __local float p[ATTN_TILE];
    const uint c = (uint)get_global_id(0);
    const uint i = (uint)get_global_id(1);
    const uint sh = (uint)get_global_id(2);
    /* Work-groups span dimension 0 only, so these exits are uniform per group. */
    if (i >= lq || sh >= n_seq * n_heads) return;
    const uint lid = (uint)get_local_id(0), lsz = (uint)get_local_size(0);
    const uint s = sh / n_heads, h = sh - s * n_heads, m = s / group;
    const int n_keys = attn_key_count(key_len, kl_off, has_key_len, key_len_const, m, lk_max);
    const int2 r = attn_range((int)(q_pos0 + i), n_keys, causal, kind, radius);
    const ulong row = (ulong)sh * lq + i;
    const int active = c < d_head;  /* padding work-items still take part in the barriers */

    float acc = 0.0f;
    if (r.x <= r.y) {
        __global const float *srow = S + s_off + row * lk_max;
        __global const float *vcol = V + v_off + (ulong)m * kv_stride + (ulong)h * d_head + min(c, d_head - 1u);
        const float mx = stats[st_off + row * 2];
        const float inv = 1.0f / stats[st_off + row * 2 + 1];  /* sum >= 1: the max term is exp(0) */
        for (int j0 = r.x; j0 <= r.y; j0 += ATTN_TILE) {
            const int n = min(ATTN_TILE, r.y - j0 + 1);
            /* each probability of the tile computed once per work-group */
            for (int t = (int)lid; t < n; t += (int)lsz) p[t] = exp(srow[j0 + t] - mx) * inv;
            barrier(CLK_LOCAL_MEM_FENCE);
            if (active)
                for (int t = 0; t < n; t++) acc += p[t] * vcol[(ulong)(j0 + t) * v_ld];
            barrier(CLK_LOCAL_MEM_FENCE);
        }
    }
    if (active) out[out_off + (ulong)(s * lq + i) * out_ld + (ulong)h * d_head + c] = acc;
}

/* ATTN_ROW_PARAMS, ATTN_ROW_SETUP, ATTN_APPEND and attn_item (attn_fused's
 * work-item): common.cl, where gemm.cl's gemm_chain runs it too. */

__kernel void attn_fused(ATTN_ROW_PARAMS) {
    const uint sh = (uint)get_global_id(0);
    const uint i = (uint)get_global_id(1);
    const uint b = (uint)get_global_id(2);
    if (sh >= n_seq * n_heads || i >= lq || b >= n_branches) return;
    attn_item(ATTN_ROW_ARGS, sh, i, b);
}

/* attn_group: attn_fused's result with one work-group of ATTN_GWG
 * work-items per (s*H + h, i, branch) instead of one work-item, for GPUs,
 * where a lone work-item walking the keys waits on every load in turn
 * (on an H200 attn_fused took 63-100 us a call at batch 1; docs/
 * PERFORMANCE.md).  Keys come in tiles of ATTN_GWG: work-item l scores key
 * j0 + l, the tile's maximum rescales the running sum and accumulators (the
 * online softmax of attn_fused, a tile at a time), each work-item turns its
 * score into a probability, and work-item c accumulates channels c and
 * c + ATTN_GWG (d_head <= 2 * ATTN_GWG = ATTN_MAX_DH) over the tile's keys,
 * so the loads of a value row are contiguous across the group.  The same
 * masks, kv_row table and fused append (has_new) as attn_fused; sums in
 * another order, so it agrees with attn_fused to rounding, not bits.
 * NDRange (ATTN_GWG * n_seq * H, lq, n_branches), local (ATTN_GWG, 1, 1),
 * no padding. */
#define ATTN_GWG 64
__kernel __attribute__((reqd_work_group_size(ATTN_GWG, 1, 1)))
void attn_group(ATTN_ROW_PARAMS) {
    __local float p_[ATTN_GWG];
    __local ulong kv_[ATTN_GWG];
    const uint l = (uint)get_local_id(0);
    const uint sh = (uint)get_group_id(0);
    const uint i = (uint)get_global_id(1);
    const uint b = (uint)get_global_id(2);
    ATTN_ROW_SETUP(sh, i, b)
    const uint c0 = l, c1 = l + ATTN_GWG;
    const uint D4 = d_head & ~3u;

    float mx = -INFINITY, sum = 0.0f, acc0 = 0.0f, acc1 = 0.0f;
    for (int j0 = r.x; j0 <= r.y; j0 += ATTN_GWG) {
        const int nt = min(ATTN_GWG, r.y - j0 + 1);
        const int j = j0 + (int)l;
        float sc = -INFINITY;
        if ((int)l < nt) {
            const ulong kv = (ulong)(has_kv_row ? (uint)kr[(ulong)j * kr_ld] : m) * kv_stride;
            kv_[l] = kv;
            __global const float *k = j == own ? kn : kb + kv + (ulong)j * k_ld;
            float4 d4 = (float4)(0.0f);
            for (uint c = 0; c < D4; c += 4) d4 += vload4(0, q + c) * vload4(0, k + c);
            float dot = (d4.x + d4.y) + (d4.z + d4.w);
            for (uint c = D4; c < d_head; c++) dot += q[c] * k[c];
            sc = dot * scale;
        }
        p_[l] = sc;
        barrier(CLK_LOCAL_MEM_FENCE);
        float tmx = mx;
        for (int t = 0; t < nt; t++) tmx = fmax(tmx, p_[t]);
        barrier(CLK_LOCAL_MEM_FENCE);
        if ((int)l < nt) p_[l] = exp(sc - tmx);
        const float corr = exp(mx - tmx); /* exp(-INF) = 0 on the first tile */
        sum *= corr;
        acc0 *= corr;
        acc1 *= corr;
        mx = tmx;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int t = 0; t < nt; t++) {
            const float p = p_[t];
            const int jt = j0 + t;
            __global const float *v = jt == own ? vn : vb + kv_[t] + (ulong)jt * v_ld;
            sum += p;
            if (c0 < d_head) acc0 = p * v[c0] + acc0;
            if (c1 < d_head) acc1 = p * v[c1] + acc1;
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* p_ and kv_ are rewritten by the next tile */
    }
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    if (c0 < d_head) o[c0] = acc0 * inv;
    if (c1 < d_head) o[c1] = acc1 * inv;
    /* the append: no work-item of the launch reads the cache at the own
     * position, so the writes race with no read */
    ATTN_APPEND(l, (uint)ATTN_GWG)
}
