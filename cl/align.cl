/* SPDX-License-Identifier: MIT */
/* align.cl — attention alignments (runtime/ops/ops_align.c, nmt_op_attn_align):
 * the cross-attention probabilities of one decoder step, recomputed from
 * its queries and keys and averaged over heads (or one head), for the
 * alignments a session returns when it was created with them
 * (include/nmt_edge.h, nmt_session_result_alignment).
 *
 *   attn_align   out[r, j] = (1 / |heads|) sum_{h in heads}
 *                            softmax_j(q_r,h . k_{m,j,h} * scale),
 *                j < n_keys (m = r / group, n_keys = min(key_len[m],
 *                lk_max)); out[r, j] = 0 for n_keys <= j < lk_max.
 *                heads: every head (head == 0) or head - 1 alone.
 *                One work-item per row r walks the keys twice per head
 *                (online max and sum, then the probabilities), in a fixed
 *                order: a row's result does not depend on the other rows
 *                of the launch (batch size, beam rows).
 *                NDRange (rows), any padding.
 *
 * The same scores as attention.cl's attn_scores (q . k over d_head, then
 * the scale), so the probabilities are the ones the attention used up to
 * rounding.  No -D knobs. */

__kernel void attn_align(const uint rows, const uint group, const uint n_heads, const uint d_head,
                         const uint head, const float scale,
                         __global const float *Q, const ulong q_off, const uint q_ld,
                         __global const float *Kc, const ulong k_off, const uint k_ld,
                         const ulong kv_stride,
                         __global const int *key_len, const ulong kl_off, const uint lk_max,
                         __global float *out, const ulong out_off, const uint out_ld) {
    const uint r = (uint)get_global_id(0);
    if (r >= rows) return;
    const uint m = r / group;
    const int n_keys = min((int)lk_max, key_len[kl_off + m]);
    __global float *o = out + out_off + (ulong)r * out_ld;
    for (uint j = 0; j < lk_max; j++) o[j] = 0.0f;
    const uint h0 = head ? head - 1 : 0, h1 = head ? head : n_heads;
    const float w = 1.0f / (float)(h1 - h0);
    for (uint h = h0; h < h1; h++) {
        __global const float *q = Q + q_off + (ulong)r * q_ld + (ulong)h * d_head;
        __global const float *kb = Kc + k_off + (ulong)m * kv_stride + (ulong)h * d_head;
        float mx = -INFINITY, sum = 0.0f;
        for (int j = 0; j < n_keys; j++) {
            __global const float *k = kb + (ulong)j * k_ld;
            float acc = 0.0f;
            for (uint c = 0; c < d_head; c++) acc += q[c] * k[c];
            const float sc = acc * scale;
            if (sc > mx) {
                sum = sum * exp(mx - sc) + 1.0f;
                mx = sc;
            } else {
                sum += exp(sc - mx);
            }
        }
        if (!(sum > 0.0f)) continue;
        const float inv = w / sum;
        for (int j = 0; j < n_keys; j++) {
            __global const float *k = kb + (ulong)j * k_ld;
            float acc = 0.0f;
            for (uint c = 0; c < d_head; c++) acc += q[c] * k[c];
            o[j] += exp(acc * scale - mx) * inv;
        }
    }
}
