/* SPDX-License-Identifier: MIT */
/* additive.cl — additive (Bahdanau) attention over a sentence's encoder
 * states, one target step (runtime/ops/ops.h nmt_op_additive_attn; the BA-NMT
 * family, issue 17; docs/ARCHITECTURES.md).  The backward is in the
 * training library (docs/TRAINING-OPS.md).
 *
 * Kernels (NDRange in brackets):
 *   additive_attn  one work-group per row b < n_rows (any power-of-two
 *                  local size <= REDUCE_WG), reading sentence m = b / group;
 *                  n = clamp(len[m], 0, s_cap) valid positions:
 *                    e[j]   = sum_a v[a] tanh(q[b,a] + K[m,j,a] (+ E1[b,j,a]) (+ E2[b,j,a]))
 *                    al[b,j] = softmax_{j < n}(e)[j], 0 for n <= j < s_cap
 *                    out[b,c] = sum_{j < n} al[b,j] H[m,j,c]   (0 when n == 0)
 *                  Work-item lid owns positions j = lid + i * local (their
 *                  scores go through al, then their probabilities), then
 *                  columns c = lid + i * local of the context; a barrier
 *                  (global fence) between the two.         [n_rows * local]
 *
 * Row (m, j) of K and H is m * s_cap + j (strides k_ld, h_ld), row (b, j)
 * of E1 / E2 is b * s_cap + j; al is dense [n_rows, s_cap].  Offsets and
 * leading dimensions are in elements; addresses use ulong.
 *
 * -D knobs (defaults):
 *   REDUCE_WG  capacity of the local reduction buffer, the largest local
 *              size the host may launch with (256; power of two)
 */
#ifndef REDUCE_WG
#define REDUCE_WG 256
#endif

/* Max of v over the work-group (power-of-two local size; every work-item
 * calls it; all receive the result). */
inline float additive_wg_max(float v, __local float *red) {
    const uint lid = (uint)get_local_id(0);
    red[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint w = (uint)get_local_size(0) / 2; w > 0; w >>= 1) {
        if (lid < w) red[lid] = fmax(red[lid], red[lid + w]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float m = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return m;
}

__kernel void additive_attn(__global const float *Q, const ulong q_off, const uint q_ld, __global const float *K,
                            const ulong k_off, const uint k_ld, __global const float *E1, const ulong e1_off,
                            const uint e1_ld, const int has_e1, __global const float *E2, const ulong e2_off,
                            const uint e2_ld, const int has_e2, __global const float *V, const ulong v_off,
                            __global const float *H, const ulong h_off, const uint h_ld, __global const int *len,
                            const ulong len_off, __global float *AL, const ulong al_off, __global float *O,
                            const ulong o_off, const uint o_ld, const uint s_cap, const uint a_dim, const uint dh,
                            const uint group) {
    __local float red[REDUCE_WG];
    const uint lid = (uint)get_local_id(0), lsz = (uint)get_local_size(0);
    const uint b = (uint)get_group_id(0), m = b / group;
    const uint n = (uint)clamp(len[len_off + m], 0, (int)s_cap);
    __global const float *q = Q + q_off + (ulong)b * q_ld;
    __global const float *v = V + v_off;
    __global float *al = AL + al_off + (ulong)b * s_cap;

    /* scores of the owned positions, kept in al */
    float mx = -INFINITY;
    for (uint j = lid; j < n; j += lsz) {
        __global const float *k = K + k_off + ((ulong)m * s_cap + j) * k_ld;
        __global const float *e1 = E1 + e1_off + ((ulong)b * s_cap + j) * e1_ld;
        __global const float *e2 = E2 + e2_off + ((ulong)b * s_cap + j) * e2_ld;
        float e = 0.0f;
        for (uint a = 0; a < a_dim; a++) {
            float x = q[a] + k[a];
            if (has_e1) x += e1[a];
            if (has_e2) x += e2[a];
            e += v[a] * tanh(x);
        }
        al[j] = e;
        mx = fmax(mx, e);
    }
    mx = additive_wg_max(mx, red);
    float s = 0.0f;
    for (uint j = lid; j < n; j += lsz) s += exp(al[j] - mx);
    s = wg_sum(s, red);
    const float inv = n > 0 ? 1.0f / s : 0.0f;
    for (uint j = lid; j < s_cap; j += lsz) al[j] = j < n ? exp(al[j] - mx) * inv : 0.0f;
    barrier(CLK_GLOBAL_MEM_FENCE);

    /* context: column c over every valid position */
    __global const float *h = H + h_off + (ulong)m * s_cap * h_ld;
    __global float *o = O + o_off + (ulong)b * o_ld;
    for (uint c = lid; c < dh; c += lsz) {
        float acc = 0.0f;
        for (uint j = 0; j < n; j++) acc += al[j] * h[(ulong)j * h_ld + c];
        o[c] = acc;
    }
}
