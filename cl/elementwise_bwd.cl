/* SPDX-License-Identifier: MIT */
/* elementwise_bwd.cl — gradients of the cheap ops of elementwise.cl, and
 * dropout (train/ops/ops_train.h gives the exact semantics of each).
 *
 * Kernels (NDRange in brackets; every dimension may be padded, surplus
 * work-items return):
 *   embed_bwd  dE[seg_tok[s], c] += scale * sum_{i in [seg[s], seg[s+1])}
 *              dy[perm[i], c]: the host sorts the rows by token id
 *              (nmt_embed_bwd_plan) so every segment holds the rows of one
 *              id and each dE element has exactly one writer: no atomics,
 *              deterministic order (rows ascending within a segment).
 *                                                            [c, s]
 *   relu_bwd   dx[i] = y[i] > 0 ? dy[i] : 0 (y the ReLU output; dx may be dy)
 *   act_bwd    dx[i] = dy[i] act'(x[i]), x the pre-activation, act GELU
 *              (kind 2) or swish (kind 3), as elementwise.cl act; dx may be dy
 *                                                            [i]
 *   gate_bwd   for out = x * sigmoid(g) (gate_accum): with s = sigmoid(g),
 *              dx[r,c] (+)= do * s,  dg[r,c] = do * x * s * (1 - s)
 *              (row strides ld_*)                            [c, r]
 *   dropout    out[i] = keep(offset + i) ? x[i] * inv_keep : 0 (out may be x);
 *              the same call on dy with the same seed and offset is the
 *              backward.  One work-item per 8 Philox counters (32 elements).
 *                                                  [counters spanned]
 *
 * Dropout RNG: Philox4x32-10 (Salmon et al., SC'11), key = (seed low 32
 * bits, seed high 32 bits), counter = (e >> 2 as 64-bit: low, high, 0, 0)
 * for element counter e = offset + i; the element uses output word e & 3.
 * keep(e) = (word >> 8) >= threshold, threshold = round(p * 2^24) computed
 * by the host, so P(keep) = 1 - threshold / 2^24 and the mask depends only
 * on (seed, e): reproducible on every device and independent of launch
 * geometry.
 *
 * Offsets and leading dimensions are in elements; addresses are ulong.
 * No -D knobs.
 */

__kernel void embed_bwd(__global const float *DY, const ulong dy_off, const uint d,
                        __global const int *perm, const ulong perm_off,
                        __global const int *seg, const ulong seg_off,
                        __global const int *seg_tok, const ulong st_off, const uint n_seg,
                        const float scale, __global float *DE, const ulong de_off) {
    const uint c = (uint)get_global_id(0);
    const uint s = (uint)get_global_id(1);
    if (c >= d || s >= n_seg) return;
    const int i0 = seg[seg_off + s], i1 = seg[seg_off + s + 1];
    float acc = 0.0f;
    for (int i = i0; i < i1; i++) acc += DY[dy_off + (ulong)perm[perm_off + (ulong)i] * d + c];
    const ulong e = de_off + (ulong)seg_tok[st_off + s] * d + c;
    DE[e] += scale * acc;
}

__kernel void relu_bwd(__global const float *Y, const ulong y_off, __global const float *DY, const ulong dy_off,
                       __global float *DX, const ulong dx_off, const uint n) {
    const uint i = (uint)get_global_id(0);
    if (i >= n) return;
    const float g = DY[dy_off + i];
    DX[dx_off + i] = Y[y_off + i] > 0.0f ? g : 0.0f;
}

__kernel void act_bwd(__global const float *X, const ulong x_off, __global const float *DY, const ulong dy_off,
                      __global float *DX, const ulong dx_off, const uint n, const uint kind) {
    const uint i = (uint)get_global_id(0);
    if (i >= n) return;
    const float x = X[x_off + i], g = DY[dy_off + i];
    float dydx;
    if (kind == 2u) { /* GELU: Phi(x) + x phi(x) */
        dydx = 0.5f * (1.0f + erf(x * 0.7071067811865476f)) + x * 0.3989422804014327f * exp(-0.5f * x * x);
    } else { /* swish: s + x s (1 - s), s = sigmoid(x) */
        const float s = 1.0f / (1.0f + exp(-x));
        dydx = s + x * s * (1.0f - s);
    }
    DX[dx_off + i] = g * dydx;
}

__kernel void gate_bwd(__global const float *X, const ulong x_off, const uint ld_x,
                       __global const float *G, const ulong g_off, const uint ld_g,
                       __global const float *DO, const ulong do_off, const uint ld_do,
                       __global float *DX, const ulong dx_off, const uint ld_dx,
                       __global float *DG, const ulong dg_off, const uint ld_dg,
                       const uint rows, const uint d, const int accumulate) {
    const uint c = (uint)get_global_id(0);
    const uint r = (uint)get_global_id(1);
    if (c >= d || r >= rows) return;
    const float s = 1.0f / (1.0f + exp(-G[g_off + (ulong)r * ld_g + c]));
    const float go = DO[do_off + (ulong)r * ld_do + c];
    const float x = X[x_off + (ulong)r * ld_x + c];
    const ulong ex = dx_off + (ulong)r * ld_dx + c;
    const float vx = go * s;
    DX[ex] = accumulate ? DX[ex] + vx : vx;
    DG[dg_off + (ulong)r * ld_dg + c] = go * x * s * (1.0f - s);
}

/* Philox4x32-10 of 8 counters (c0, c1, 0, 0) (one per lane) under key
 * (k0, k1); the four output words per lane in w0..w3.  The 32x32 -> 64-bit
 * products are written with ulong vectors: PoCL lowers mul_hi on this CPU
 * to 16-bit pieces, the widened product to one vpmuludq per 8 lanes. */
inline void philox8(uint8 c0, uint8 c1, uint k0, uint k1, uint8 *w0, uint8 *w1, uint8 *w2, uint8 *w3) {
    uint8 c2 = (uint8)(0u), c3 = (uint8)(0u);
#pragma unroll
    for (int round = 0; round < 10; round++) {
        const ulong8 p0 = convert_ulong8(c0) * (ulong8)(0xD2511F53ul);
        const ulong8 p1 = convert_ulong8(c2) * (ulong8)(0xCD9E8D57ul);
        const uint8 hi0 = convert_uint8(p0 >> 32), lo0 = convert_uint8(p0);
        const uint8 hi1 = convert_uint8(p1 >> 32), lo1 = convert_uint8(p1);
        c0 = hi1 ^ c1 ^ (uint8)(k0);
        c1 = lo1;
        c2 = hi0 ^ c3 ^ (uint8)(k1);
        c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    *w0 = c0, *w1 = c1, *w2 = c2, *w3 = c3;
}

/* One work-item per 8 Philox counters: elements e = 4*ctr + w (w < 4) that
 * lie in [offset, offset + n), ctr = offset/4 + 8 * global id + lane. */
__kernel void dropout(__global const float *X, const ulong x_off, __global float *O, const ulong o_off,
                      const uint n, const uint seed_lo, const uint seed_hi, const ulong offset,
                      const uint threshold, const float inv_keep) {
    const ulong ctr0 = (offset >> 2) + get_global_id(0) * 8ul;
    const ulong e0 = ctr0 << 2, end = offset + n;
    if (e0 >= end) return;
    const ulong8 ctr = (ulong8)(ctr0) + (ulong8)(0, 1, 2, 3, 4, 5, 6, 7);
    uint8 w0, w1, w2, w3;
    philox8(convert_uint8(ctr), convert_uint8(ctr >> 32), seed_lo, seed_hi, &w0, &w1, &w2, &w3);
    uint r[4][8];
    vstore8(w0, 0, r[0]);
    vstore8(w1, 0, r[1]);
    vstore8(w2, 0, r[2]);
    vstore8(w3, 0, r[3]);
    if (e0 >= offset && e0 + 32 <= end) { /* all 32 elements in range */
        __global const float *x = X + x_off + (e0 - offset);
        __global float *o = O + o_off + (e0 - offset);
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const float4 v = vload4(i, x);
            const uint4 rw = (uint4)(r[0][i], r[1][i], r[2][i], r[3][i]);
            vstore4(select((float4)(0.0f), v * inv_keep, (rw >> 8) >= (uint4)(threshold)), i, o);
        }
        return;
    }
    for (uint k = 0; k < 32; k++) {
        const ulong e = e0 + k;
        if (e < offset || e >= end) continue;
        const ulong i = e - offset;
        const float x = X[x_off + i];
        O[o_off + i] = (r[k & 3][k >> 2] >> 8) >= threshold ? x * inv_keep : 0.0f;
    }
}
