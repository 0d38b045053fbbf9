/* SPDX-License-Identifier: MIT */
/* attention_bwd.cl — backward of the HySAN multi-head masked attention of
 * attention.cl (train/ops/ops_train.h, nmt_attn_bwd_args, gives the exact
 * semantics and the scratch sizes).
 *
 * Forward, per (query sequence s, head h), with the shared score matrix
 * S = Q K^T * scale and one mask M_b per branch:
 *   P_b = softmax_j(S + M_b),   O_b = P_b V        (b < n_branches)
 * Backward, given dO_b for every branch:
 *   dV   = sum_b P_b^T dO_b
 *   D_b  = rowsum(dO_b * O_b)                       (= rowsum(P_b * dP_b))
 *   dS   = sum_b P_b * (dO_b V^T - D_b)             (S is shared: sum)
 *   dQ   = scale * dS K,     dK = scale * dS^T Q
 *
 * Kernels, launched by nmt_op_attention_bwd in this order (rows are
 * row = (s*H + h)*lq + i, as in the forward's scratch):
 *   attn_bwd_scores  S[row, j] = (q_i . k_j) * scale for the keys some
 *                    branch can see (j < n_keys, and j <= pos if causal)
 *                                                  [j, i, s*H + h]
 *   attn_bwd_probs   per (row, branch b): the branch's max and sum over its
 *                    key range [lo, hi], then P_b[row, j] for every
 *                    j < lk_max (0 outside the range), and D_b[row];
 *                    once per branch               [i, s*H + h]
 *   attn_bwd_ds      dS[row, j] = sum_b P_b[row, j] * (dO_b[i] . v_j - D_b[row])
 *                    (0 for keys no branch can see), written over S
 *                                                  [j, i, s*H + h]
 *   attn_bwd_dq      dq[s*lq + i, h*dh + c] = scale * sum_j dS[row, j] k_j[c]
 *                    (bwd_cv(dh) channels per work-item)
 *                                                  [c, i, s*H + h]
 *   attn_bwd_dkv     for kv sequence m, key j, head h, channel c (query
 *                    sequences s = m*group .. m*group + group - 1, s < n_seq):
 *                    dk_j[c] = scale * sum_{s,i} dS[row, j] q_i[c]
 *                    dv_j[c] = sum_{s,i,b} P_b[row, j] dO_b[i][c]
 *                    padding keys (n_keys <= j < lk_max) get 0
 *                    (bwd_cv(dh) channels per work-item)
 *                                                  [c, j, m*H + h]
 *
 * Masks are those of the forward: key padding j < key_len[m], causal
 * j <= pos, FW j <= pos, BW j >= pos, LOCAL |pos - j| <= k, pos = q_pos0 + i.
 * A query row with no allowed key contributes nothing (P_b = 0).
 *
 * Every NDRange may be padded in every dimension: surplus work-items
 * return.  No barriers, no local memory, no atomics: each output element
 * has one writer and sums run in a fixed order.  Addresses are ulong,
 * positions int (the host keeps them below 2^30).  No -D knobs.
 */
/* Channels per work-item of attn_bwd_dq / attn_bwd_dkv: 16 (one float16)
 * when d_head allows, else 1; the host launches d_head / bwd_cv(d_head)
 * work-items along dimension 0 (train/ops/ops_train.c, same rule). */
inline uint bwd_cv(const uint d_head) { return d_head % 16u == 0 ? 16u : 1u; }

inline float bwd_dot(__global const float *a, __global const float *b, const uint n) {
    float16 acc16 = (float16)(0.0f);
    const uint n16 = n & ~15u;
    for (uint c = 0; c < n16; c += 16) acc16 += vload16(0, a + c) * vload16(0, b + c);
    float8 acc8 = acc16.lo + acc16.hi;
    float4 acc4 = acc8.lo + acc8.hi;
    const uint n4 = n & ~3u;
    for (uint c = n16; c < n4; c += 4) acc4 += vload4(0, a + c) * vload4(0, b + c);
    float acc = (acc4.x + acc4.y) + (acc4.z + acc4.w);
    for (uint c = n4; c < n; c++) acc += a[c] * b[c];
    return acc;
}

__kernel void attn_bwd_scores(const uint n_seq, const uint lq, const uint q_pos0, const uint lk_max,
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
    if ((int)j >= n_keys || (causal && (int)j > (int)(q_pos0 + i))) return;
    __global const float *q = Q + q_off + (ulong)(s * lq + i) * q_ld + (ulong)h * d_head;
    __global const float *k = Kc + k_off + (ulong)m * kv_stride + (ulong)j * k_ld + (ulong)h * d_head;
    S[s_off + ((ulong)sh * lq + i) * lk_max + j] = bwd_dot(q, k, d_head) * scale;
}

__kernel void attn_bwd_probs(const uint n_seq, const uint lq, const uint q_pos0, const uint lk_max,
                             const uint group, const uint n_heads, const uint d_head, const uint n_branches,
                             const uint b, const int kind, const int radius,
                             __global const int *key_len, const ulong kl_off, const int has_key_len,
                             const uint key_len_const, const int causal,
                             __global const float *S, const ulong s_off,
                             __global const float *O, const ulong o_off, const uint o_ld,
                             __global const float *DO, const ulong do_off, const uint do_ld,
                             __global float *P, const ulong p_off, __global float *Dst, const ulong d_off) {
    const uint i = (uint)get_global_id(0);
    const uint sh = (uint)get_global_id(1);
    if (i >= lq || sh >= n_seq * n_heads || b >= n_branches) return;
    const uint s = sh / n_heads, h = sh - s * n_heads;
    const int n_keys = attn_key_count(key_len, kl_off, has_key_len, key_len_const, s / group, lk_max);
    const int2 r = attn_range((int)(q_pos0 + i), n_keys, causal, kind, radius);
    const ulong row = (ulong)sh * lq + i;
    const ulong n_rows = (ulong)n_seq * n_heads * lq;
    __global const float *srow = S + s_off + row * lk_max;
    __global float *prow = P + p_off + ((ulong)b * n_rows + row) * lk_max;

    float mx = -INFINITY, sum = 0.0f;
    for (int j = r.x; j <= r.y; j++) mx = fmax(mx, srow[j]);
    for (int j = r.x; j <= r.y; j++) sum += exp(srow[j] - mx);
    const float inv = r.x <= r.y ? 1.0f / sum : 0.0f;
    for (int j = 0; j < (int)lk_max; j++) prow[j] = (j >= r.x && j <= r.y) ? exp(srow[j] - mx) * inv : 0.0f;

    const ulong width = (ulong)n_heads * d_head;
    const ulong col = (ulong)b * width + (ulong)h * d_head;
    __global const float *o = O + o_off + (ulong)(s * lq + i) * o_ld + col;
    __global const float *g = DO + do_off + (ulong)(s * lq + i) * do_ld + col;
    Dst[d_off + (ulong)b * n_rows + row] = r.x <= r.y ? bwd_dot(o, g, d_head) : 0.0f;
}

__kernel void attn_bwd_ds(const uint n_seq, const uint lq, const uint q_pos0, const uint lk_max,
                          const uint group, const uint n_heads, const uint d_head, const uint n_branches,
                          __global const float *V, const ulong v_off, const uint v_ld, const ulong kv_stride,
                          __global const int *key_len, const ulong kl_off, const int has_key_len,
                          const uint key_len_const, const int causal,
                          __global const float *DO, const ulong do_off, const uint do_ld,
                          __global const float *P, const ulong p_off,
                          __global const float *Dst, const ulong d_off,
                          __global float *S, const ulong s_off) {
    const uint j = (uint)get_global_id(0);
    const uint i = (uint)get_global_id(1);
    const uint sh = (uint)get_global_id(2);
    if (j >= lk_max || i >= lq || sh >= n_seq * n_heads) return;
    const uint s = sh / n_heads, h = sh - s * n_heads, m = s / group;
    const ulong row = (ulong)sh * lq + i;
    const ulong n_rows = (ulong)n_seq * n_heads * lq;
    const int n_keys = attn_key_count(key_len, kl_off, has_key_len, key_len_const, m, lk_max);
    float acc = 0.0f;
    if ((int)j < n_keys && !(causal && (int)j > (int)(q_pos0 + i))) {
        __global const float *v = V + v_off + (ulong)m * kv_stride + (ulong)j * v_ld + (ulong)h * d_head;
        const ulong width = (ulong)n_heads * d_head;
        for (uint b = 0; b < n_branches; b++) {
            const float p = P[p_off + ((ulong)b * n_rows + row) * lk_max + j];
            if (p == 0.0f) continue;
            __global const float *g = DO + do_off + (ulong)(s * lq + i) * do_ld + (ulong)b * width + (ulong)h * d_head;
            acc += p * (bwd_dot(g, v, d_head) - Dst[d_off + (ulong)b * n_rows + row]);
        }
    }
    S[s_off + row * lk_max + j] = acc;
}

__kernel void attn_bwd_dq(const uint n_seq, const uint lq, const uint lk_max, const uint group,
                          const uint n_heads, const uint d_head, const float scale,
                          __global const float *Kc, const ulong k_off, const uint k_ld, const ulong kv_stride,
                          __global const float *S, const ulong s_off,
                          __global float *DQ, const ulong dq_off, const uint dq_ld) {
    const uint cv = bwd_cv(d_head), c = (uint)get_global_id(0) * cv;
    const uint i = (uint)get_global_id(1);
    const uint sh = (uint)get_global_id(2);
    if (c >= d_head || i >= lq || sh >= n_seq * n_heads) return;
    const uint s = sh / n_heads, h = sh - s * n_heads, m = s / group;
    __global const float *ds = S + s_off + ((ulong)sh * lq + i) * lk_max;
    __global const float *kc = Kc + k_off + (ulong)m * kv_stride + (ulong)h * d_head + c;
    __global float *dq = DQ + dq_off + (ulong)(s * lq + i) * dq_ld + (ulong)h * d_head + c;
    if (cv == 16) {
        float16 acc = (float16)(0.0f);
        for (uint j = 0; j < lk_max; j++) acc += ds[j] * vload16(0, kc + (ulong)j * k_ld);
        vstore16(acc * scale, 0, dq);
    } else {
        float acc = 0.0f;
        for (uint j = 0; j < lk_max; j++) acc += ds[j] * kc[(ulong)j * k_ld];
        *dq = acc * scale;
    }
}

__kernel void attn_bwd_dkv(const uint n_seq, const uint lq, const uint lk_max, const uint group,
                           const uint n_heads, const uint d_head, const uint n_branches, const float scale,
                           __global const int *key_len, const ulong kl_off, const int has_key_len,
                           const uint key_len_const,
                           __global const float *Q, const ulong q_off, const uint q_ld,
                           __global const float *DO, const ulong do_off, const uint do_ld,
                           __global const float *S, const ulong s_off,
                           __global const float *P, const ulong p_off,
                           __global float *DK, const ulong dk_off, const uint dk_ld,
                           __global float *DV, const ulong dv_off, const uint dv_ld, const ulong dkv_stride) {
    const uint cv = bwd_cv(d_head), c = (uint)get_global_id(0) * cv;
    const uint j = (uint)get_global_id(1);
    const uint mh = (uint)get_global_id(2);
    const uint n_kv = (n_seq + group - 1) / group;
    if (c >= d_head || j >= lk_max || mh >= n_kv * n_heads) return;
    const uint m = mh / n_heads, h = mh - m * n_heads;
    const int n_keys = attn_key_count(key_len, kl_off, has_key_len, key_len_const, m, lk_max);
    const ulong n_rows = (ulong)n_seq * n_heads * lq;
    const ulong width = (ulong)n_heads * d_head;
    const uint s_end = (int)j < n_keys ? min(n_seq, (m + 1) * group) : m * group; /* padding keys: 0 */
    __global float *dkp = DK + dk_off + (ulong)m * dkv_stride + (ulong)j * dk_ld + (ulong)h * d_head + c;
    __global float *dvp = DV + dv_off + (ulong)m * dkv_stride + (ulong)j * dv_ld + (ulong)h * d_head + c;
    if (cv == 16) {
        float16 dk = (float16)(0.0f), dv = (float16)(0.0f);
        for (uint s = m * group; s < s_end; s++) {
            for (uint i = 0; i < lq; i++) {
                const ulong row = (ulong)(s * n_heads + h) * lq + i;
                const ulong qrow = (ulong)(s * lq + i);
                dk += S[s_off + row * lk_max + j] * vload16(0, Q + q_off + qrow * q_ld + (ulong)h * d_head + c);
                for (uint b = 0; b < n_branches; b++) {
                    const float p = P[p_off + ((ulong)b * n_rows + row) * lk_max + j];
                    dv += p * vload16(0, DO + do_off + qrow * do_ld + (ulong)b * width + (ulong)h * d_head + c);
                }
            }
        }
        vstore16(dk * scale, 0, dkp);
        vstore16(dv, 0, dvp);
    } else {
        float dk = 0.0f, dv = 0.0f;
        for (uint s = m * group; s < s_end; s++) {
            for (uint i = 0; i < lq; i++) {
                const ulong row = (ulong)(s * n_heads + h) * lq + i;
                const ulong qrow = (ulong)(s * lq + i);
                dk += S[s_off + row * lk_max + j] * Q[q_off + qrow * q_ld + (ulong)h * d_head + c];
                for (uint b = 0; b < n_branches; b++) {
                    const float p = P[p_off + ((ulong)b * n_rows + row) * lk_max + j];
                    dv += p * DO[do_off + qrow * do_ld + (ulong)b * width + (ulong)h * d_head + c];
                }
            }
        }
        *dkp = dk * scale;
        *dvp = dv;
    }
}
