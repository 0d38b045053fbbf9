/* SPDX-License-Identifier: MIT */
/* elementwise.cl — cheap per-element and per-row kernels of the op layer.
 *
 * Kernels (NDRange in brackets; every dimension may be padded, surplus
 * work-items return):
 *   embed        out[r,c] = E[tok[r],c] * scale + P(pos0 + r % seq_len, c)
 *                sinusoid P: sin in [0, d/2), cos in [d/2, 2*(d/2)), 0 in
 *                the last column of an odd d; w_i = 10000^(-i/(d/2-1))
 *                (w_i = 1 when d/2 == 1)             [c, min(rows, seq_len)]
 *   embed_q8     the same with an int8 table: E[t,c] = Q[t,c] * qscale[t]
 *                (Q int8 [V, d] row-major, one fp32 scale per row)
 *                                             [c, min(rows, seq_len)]
 *                (all embeddings: P from the table PT of pt_rows positions
 *                when pos < pt_rows, the same bits; common.cl EMBED_ROWS)
 *   pos_table    PT[pos,c] = P_layout(pos + offset, c) for pos < n_pos:
 *                the layouts of common.cl pos_term_layout       [c, pos]
 *   add          dst[i] += src[i]                              [i]
 *   relu         x[i] = max(x[i], 0)                           [i]
 *   act          y[i] = gelu(x[i]) (kind 2: x Phi(x), erf) or
 *                swish(x[i]) (kind 3: x sigmoid(x)); y may be x  [i]
 *   gate_accum   out[r,c] = (accumulate ? out[r,c] : 0) + x[r,c] * sigmoid(g[r,c])
 *                (row strides ld_*)                            [c, r]
 *   copy_rows    dst[r*ld_dst + c] = src[r*ld_src + c]         [c, r]
 *   gather_rows  dst[r*ld_dst + c] = src[idx[r]*ld_src + c]    [c, r]
 *                (src and dst must not overlap)
 *   log_softmax  x[r,:] -= max + log(sum(exp(x[r,:] - max))), in place,
 *                one work-group per row, any power-of-two local size
 *                <= REDUCE_WG; a row of only -INF is left unchanged
 *                                                              [rows * local]
 *
 * Offsets and leading dimensions are in elements; addresses use ulong.
 *
 * -D knobs (defaults):
 *   REDUCE_WG  capacity of log_softmax's local reduction buffers, the largest
 *              local size the host may launch it with (256; power of two)
 *   NMT_SUBGROUPS  defined: common.cl's row_logsumexp reduces by subgroups
 *              (set by runtime/device/device_paths.c where the device has them)
 */
#ifndef REDUCE_WG
#define REDUCE_WG 256
#endif

__kernel void embed(__global const int *tok, const ulong tok_off, const uint rows, const uint seq_len,
                    const uint pos0, __global const float *E, const ulong e_off, const uint d,
                    const float scale, __global float *out, const ulong out_off, __global const float *PT,
                    const ulong pt_off, const uint pt_rows) {
    EMBED_ROWS(E[e_off + t * d + c])
}

__kernel void embed_q8(__global const int *tok, const ulong tok_off, const uint rows, const uint seq_len,
                       const uint pos0, __global const char *Q, const ulong q_off,
                       __global const float *qscale, const ulong s_off, const uint d,
                       const float scale, __global float *out, const ulong out_off, __global const float *PT,
                       const ulong pt_off, const uint pt_rows) {
    EMBED_ROWS((float)Q[q_off + t * d + c] * qscale[s_off + t])
}

__kernel void pos_table(__global float *PT, const ulong pt_off, const uint d, const uint n_pos, const uint layout,
                        const uint offset) {
    const uint c = (uint)get_global_id(0), pos = (uint)get_global_id(1);
    if (c < d && pos < n_pos) PT[pt_off + (ulong)pos * d + c] = pos_term_layout(c, d, (float)(pos + offset), layout);
}

__kernel void add(__global float *dst, const ulong dst_off, __global const float *src, const ulong src_off,
                  const uint n) {
    const uint i = (uint)get_global_id(0);
    if (i < n) dst[dst_off + i] += src[src_off + i];
}

__kernel void relu(__global float *x, const ulong x_off, const uint n) {
    const uint i = (uint)get_global_id(0);
    if (i < n) x[x_off + i] = fmax(x[x_off + i], 0.0f);
}

__kernel void act(__global const float *X, const ulong x_off, __global float *Y, const ulong y_off, const uint n,
                  const uint kind) {
    const uint i = (uint)get_global_id(0);
    if (i >= n) return;
    const float v = X[x_off + i];
    /* kind 2: GELU, x * Phi(x) with the exact normal CDF; 3: swish (SiLU); the
     * products' epilogues use the same functions (common.cl) */
    Y[y_off + i] = kind == 2u ? act_gelu(v) : act_swish(v);
}

__kernel void gate_accum(__global const float *X, const ulong x_off, const uint ld_x,
                         __global const float *G, const ulong g_off, const uint ld_g,
                         __global float *O, const ulong o_off, const uint ld_o,
                         const uint rows, const uint d, const int accumulate) {
    const uint c = (uint)get_global_id(0);
    const uint r = (uint)get_global_id(1);
    if (c >= d || r >= rows) return;
    const float g = G[g_off + (ulong)r * ld_g + c];
    const float v = X[x_off + (ulong)r * ld_x + c] / (1.0f + exp(-g));  /* x * sigmoid(g) */
    const ulong o = o_off + (ulong)r * ld_o + c;
    O[o] = accumulate ? O[o] + v : v;
}

__kernel void copy_rows(__global const float *src, const ulong src_off, const uint ld_src,
                        __global float *dst, const ulong dst_off, const uint ld_dst,
                        const uint rows, const uint cols) {
    const uint c = (uint)get_global_id(0);
    const uint r = (uint)get_global_id(1);
    if (c >= cols || r >= rows) return;
    dst[dst_off + (ulong)r * ld_dst + c] = src[src_off + (ulong)r * ld_src + c];
}

__kernel void gather_rows(__global const float *src, const ulong src_off, const ulong ld_src,
                          __global float *dst, const ulong dst_off, const ulong ld_dst,
                          __global const int *idx, const ulong idx_off, const uint rows, const uint cols) {
    const uint c = (uint)get_global_id(0);
    const uint r = (uint)get_global_id(1);
    if (c >= cols || r >= rows) return;
    const ulong from = (ulong)idx[idx_off + r];
    dst[dst_off + (ulong)r * ld_dst + c] = src[src_off + from * ld_src + c];
}

__kernel void log_softmax(__global float *X, const ulong x_off, const uint n, const uint ld) {
    __local float red_m[REDUCE_WG];
    __local float red_s[REDUCE_WG];
    const uint lid = (uint)get_local_id(0), lsz = (uint)get_local_size(0);
    __global float *x = X + x_off + (ulong)get_group_id(0) * ld;
    float item_max;
    const float lse = row_logsumexp(x, n, red_m, red_s, &item_max);
    if (lse == -INFINITY) return;  /* no finite entry: leave the row as is */
    /* each work-item writes the entries it read (row_logsumexp's chunks):
     * no entry is written by one work-item and read by another */
    const uint nv = n / 8;
    for (uint q = lid; q < nv; q += lsz) vstore8(vload8(q, x) - lse, q, x);
    for (uint c = nv * 8 + lid; c < n; c += lsz) x[c] -= lse;
}
