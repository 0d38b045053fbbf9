/* elementwise_bwd.cl — gradients of the cheap ops of elementwise.cl, and
 * dropout (runtime/ops_train.h gives the exact semantics of each).
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
 *                                                            [i]
 *   gate_bwd   for out = x * sigmoid(g) (gate_accum): with s = sigmoid(g),
 *              dx[r,c] (+)= do * s,  dg[r,c] = do * x * s * (1 - s)
 *              (row strides ld_*)                            [c, r]
 *   dropout    out[i] = keep(offset + i) ? x[i] * inv_keep : 0 (out may be x);
 *              the same call on dy with the same seed and offset is the
 *              backward.  One work-item per Philox counter (4 elements).
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

/* Philox4x32-10 of counter (c0, c1, 0, 0) under key (k0, k1): all four words. */
inline uint4 philox4(uint c0, uint c1, uint k0, uint k1) {
    uint c2 = 0, c3 = 0;
    for (int round = 0; round < 10; round++) {
        const uint hi0 = mul_hi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
        const uint hi1 = mul_hi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return (uint4)(c0, c1, c2, c3);
}

/* One work-item per Philox counter: elements e = 4*ctr + w (w < 4) that lie
 * in [offset, offset + n), ctr = offset/4 + global id. */
__kernel void dropout(__global const float *X, const ulong x_off, __global float *O, const ulong o_off,
                      const uint n, const uint seed_lo, const uint seed_hi, const ulong offset,
                      const uint threshold, const float inv_keep) {
    const ulong ctr = (offset >> 2) + get_global_id(0);
    const ulong e0 = ctr << 2;
    if (e0 >= offset + n) return;
    const uint4 r = philox4((uint)ctr, (uint)(ctr >> 32), seed_lo, seed_hi);
    const uint rw[4] = {r.x, r.y, r.z, r.w};
    for (uint w = 0; w < 4; w++) {
        const ulong e = e0 + w;
        if (e < offset || e >= offset + n) continue;
        const ulong i = e - offset;
        const float x = X[x_off + i];
        O[o_off + i] = (rw[w] >> 8) >= threshold ? x * inv_keep : 0.0f;
    }
}
