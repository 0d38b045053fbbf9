/* SPDX-License-Identifier: MIT */
/* additive_bwd.cl — backward of additive attention (cl/additive.cl;
 * train/ops/ops_train.h nmt_op_additive_bwd; docs/TRAINING-OPS.md).  Training
 * library only.  Rows b < n_rows, each its own sentence (group 1), n =
 * clamp(len[b], 0, s_cap) valid positions, al the forward's probabilities,
 * pre[j,a] = q[b,a] + K[b,j,a] (+ E1[b,j,a]) (+ E2[b,j,a]), t = tanh(pre):
 *
 *   g[j]     = dal[b,j] (when has_dal) + dc[b,:] . H[b,j,:]
 *   de[j]    = al[j] (g[j] - sum_{l<n} al[l] g[l])       (softmax backward)
 *   dpre[j,a] = de[j] v[a] (1 - t^2)
 *   dq[b,a]  = (dq_acc ? dq[b,a] : 0) + sum_j dpre[j,a]
 *   dK[b,j,a] += dpre[j,a], dE1 / dE2 likewise (when present)
 *   dH[b,j,c] += al[j] dc[b,c]
 *   dv[a]    += sum_b sum_j de[j] t[j,a]
 *
 * Kernels (NDRange in brackets):
 *   additive_bwd_rows  one work-group per row b (any power-of-two local
 *                      size <= REDUCE_WG): work-item lid owns positions
 *                      j = lid + i * local (g, then de, into the scratch
 *                      SCR = de [n_rows, s_cap] then P [n_rows, a_dim])
 *                      and columns c = lid + i * local of dH; after a
 *                      barrier (global fence), attention columns
 *                      a = lid + i * local: dq, dK, dE1, dE2 and row b's
 *                      share of dv, P[b, a].  Every element has one writer.
 *                                                           [n_rows * local]
 *   additive_bwd_dv    dv[a] += sum_b P[b, a], in order of b.      [a]
 *
 * Offsets and leading dimensions are in elements; addresses use ulong.
 *
 * -D knobs (defaults):
 *   REDUCE_WG  capacity of the local reduction buffer, the largest local
 *              size the host may launch additive_bwd_rows with (256; power
 *              of two)
 */
#ifndef REDUCE_WG
#define REDUCE_WG 256
#endif

__kernel void additive_bwd_rows(__global const float *Q, const ulong q_off, const uint q_ld,
                                __global const float *K, const ulong k_off, const uint k_ld,
                                __global const float *E1, const ulong e1_off, const uint e1_ld, const int has_e1,
                                __global const float *E2, const ulong e2_off, const uint e2_ld, const int has_e2,
                                __global const float *V, const ulong v_off, __global const float *H,
                                const ulong h_off, const uint h_ld, __global const int *len, const ulong len_off,
                                __global const float *AL, const ulong al_off, __global const float *DC,
                                const ulong dc_off, const uint dc_ld, __global const float *DAL,
                                const ulong dal_off, const int has_dal, __global float *DQ, const ulong dq_off,
                                const uint dq_ld, const int dq_acc, __global float *DK, const ulong dk_off,
                                const uint dk_ld, __global float *DE1, const ulong de1_off, const uint de1_ld,
                                const int has_de1, __global float *DE2, const ulong de2_off, const uint de2_ld,
                                const int has_de2, __global float *DH, const ulong dh_off, const uint dh_ld,
                                __global float *SCR, const ulong scr_off, const uint n_rows,
                                const uint s_cap, const uint a_dim, const uint dh) {
    __local float red[REDUCE_WG];
    const uint lid = (uint)get_local_id(0), lsz = (uint)get_local_size(0);
    const uint b = (uint)get_group_id(0);
    const uint n = (uint)clamp(len[len_off + b], 0, (int)s_cap);
    const ulong row0 = (ulong)b * s_cap; /* row (b, 0) of K, E1, E2, H and their gradients */
    __global const float *al = AL + al_off + row0;
    __global const float *dc = DC + dc_off + (ulong)b * dc_ld;
    __global float *de = SCR + scr_off + row0;

    /* g and the softmax backward over the owned positions */
    float acc = 0.0f;
    for (uint j = lid; j < n; j += lsz) {
        __global const float *h = H + h_off + (row0 + j) * h_ld;
        float g = has_dal ? DAL[dal_off + row0 + j] : 0.0f;
        for (uint c = 0; c < dh; c++) g += dc[c] * h[c];
        de[j] = g;
        acc += al[j] * g;
    }
    const float tot = wg_sum(acc, red);
    for (uint j = lid; j < n; j += lsz) de[j] = al[j] * (de[j] - tot);

    /* dH: column c of every valid position */
    for (uint c = lid; c < dh; c += lsz) {
        const float d = dc[c];
        for (uint j = 0; j < n; j++) DH[dh_off + (row0 + j) * dh_ld + c] += al[j] * d;
    }
    barrier(CLK_GLOBAL_MEM_FENCE);

    /* attention column a: recompute tanh, scatter dpre */
    __global const float *q = Q + q_off + (ulong)b * q_ld;
    __global const float *v = V + v_off;
    for (uint a = lid; a < a_dim; a += lsz) {
        const float qa = q[a], va = v[a];
        float dqa = 0.0f, dva = 0.0f;
        for (uint j = 0; j < n; j++) {
            const ulong r = row0 + j;
            float x = qa + K[k_off + r * k_ld + a];
            if (has_e1) x += E1[e1_off + r * e1_ld + a];
            if (has_e2) x += E2[e2_off + r * e2_ld + a];
            const float t = tanh(x), dej = de[j];
            const float dp = dej * va * (1.0f - t * t);
            dva += dej * t;
            dqa += dp;
            DK[dk_off + r * dk_ld + a] += dp;
            if (has_de1) DE1[de1_off + r * de1_ld + a] += dp;
            if (has_de2) DE2[de2_off + r * de2_ld + a] += dp;
        }
        __global float *dq = DQ + dq_off + (ulong)b * dq_ld + a;
        *dq = (dq_acc ? *dq : 0.0f) + dqa;
        SCR[scr_off + (ulong)n_rows * s_cap + (ulong)b * a_dim + a] = dva;
    }
}

__kernel void additive_bwd_dv(__global const float *P, const ulong p_off, const uint n_rows, const uint a_dim,
                              __global float *DV, const ulong dv_off) {
    const uint a = (uint)get_global_id(0);
    if (a >= a_dim) return;
    float s = 0.0f;
    for (uint b = 0; b < n_rows; b++) s += P[p_off + (ulong)b * a_dim + a];
    DV[dv_off + a] += s;
}
