/* norm.cl — normalisation kernels.
 *
 * Kernels:
 *   layernorm  out[r,:] = (v - mean(v)) / sqrt(var(v) + eps) * gamma + beta,
 *              v = x[r,:] (+ res[r,:] when has_res); population variance.
 *              One work-group per row (NDRange rows * local size); any
 *              power-of-two local size <= REDUCE_WG (CPUs: 1, one
 *              work-item per row without barrier work; row access below).
 *              float16 loads with a scalar tail.  Two-pass mean and
 *              variance for accuracy.  out may alias x or res: each element
 *              is written by the work-item that last read it, after the
 *              whole row has been reduced.
 *
 * Rows are contiguous (stride d).  Offsets are in elements (ulong).
 *
 * -D knobs (defaults):
 *   REDUCE_WG  capacity of the local reduction buffer, the largest local
 *              size the host may launch with (256; power of two)
 *   NMT_SUBGROUPS  defined: common.cl's wg_sum reduces by subgroups (set
 *              by runtime/ops_sg.c where the device has them; not on CPUs)
 */
#ifndef REDUCE_WG
#define REDUCE_WG 256
#endif

/* Element access of a row: float16 vectors v < d / 16 (vector v holds
 * elements 16v .. 16v + 15) and the tail elements from 16 * (d / 16); a
 * work-item owns vectors lid, lid + lsz, ... and tail elements lid + 16 *
 * (d / 16), ... so it reads and writes only its own elements. */
__kernel void layernorm(__global const float *X, const ulong x_off,
                        __global const float *R, const ulong r_off, const int has_res,
                        __global float *O, const ulong o_off, const uint d,
                        __global const float *G, const ulong g_off,
                        __global const float *Bt, const ulong b_off, const float eps) {
    __local float red[REDUCE_WG];
    const ulong row = get_group_id(0);
    const uint lid = (uint)get_local_id(0), lsz = (uint)get_local_size(0);
    __global const float *x = X + x_off + row * d;
    __global const float *r = R + r_off + row * d;
    __global float *o = O + o_off + row * d;
    __global const float *g = G + g_off;
    __global const float *bt = Bt + b_off;
    const uint nv = d / 16u, tail0 = nv * 16u;

    float16 s16 = (float16)(0.0f);
    for (uint v = lid; v < nv; v += lsz) s16 += load16_res(x, r, has_res, v);
    float s = vsum16(s16);
    for (uint c = tail0 + lid; c < d; c += lsz) s += has_res ? x[c] + r[c] : x[c];
    const float mean = wg_sum(s, red) / (float)d;

    float16 q16 = (float16)(0.0f);
    for (uint v = lid; v < nv; v += lsz) {
        const float16 t = load16_res(x, r, has_res, v) - mean;
        q16 += t * t;
    }
    float q = vsum16(q16);
    for (uint c = tail0 + lid; c < d; c += lsz) {
        const float t = (has_res ? x[c] + r[c] : x[c]) - mean;
        q += t * t;
    }
    const float rstd = rsqrt(wg_sum(q, red) / (float)d + eps);

    for (uint v = lid; v < nv; v += lsz) {
        const float16 t = load16_res(x, r, has_res, v) - mean;
        vstore16(t * rstd * vload16(v, g) + vload16(v, bt), v, o);
    }
    for (uint c = tail0 + lid; c < d; c += lsz) {
        const float t = (has_res ? x[c] + r[c] : x[c]) - mean;
        o[c] = t * rstd * g[c] + bt[c];
    }
}
