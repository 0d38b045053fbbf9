/* SPDX-License-Identifier: MIT */
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
 *              by runtime/device/device_paths.c where the device has them; not on CPUs)
 */
#ifndef REDUCE_WG
#define REDUCE_WG 256
#endif

__kernel void layernorm(__global const float *X, const ulong x_off,
                        __global const float *R, const ulong r_off, const int has_res,
                        __global float *O, const ulong o_off, const uint d,
                        __global const float *G, const ulong g_off,
                        __global const float *Bt, const ulong b_off, const float eps) {
    __local float red[REDUCE_WG];
    const ulong row = get_group_id(0);
    ln_row(X + x_off + row * d, R + r_off + row * d, has_res, O + o_off + row * d, d, G + g_off, Bt + b_off, eps,
           red);
}
