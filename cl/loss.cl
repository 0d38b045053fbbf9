/* SPDX-License-Identifier: MIT */
/* loss.cl — label-smoothed cross entropy over the output logits, forward and
 * backward in one kernel (train/ops/ops_train.h, nmt_op_xent, gives the exact
 * semantics).
 *
 * For a row of logits x[0..V) with target t and smoothing eps:
 *   lse  = log(sum_j exp(x_j)),  lp_j = x_j - lse
 *   q_j  = 1 - eps for j == t,  eps / (V - 1) otherwise (V == 1: q_t = 1)
 *   loss = -sum_j q_j lp_j = -(1 - eps) lp_t - eps/(V-1) (sum_j lp_j - lp_t)
 *   nll  = -lp_t
 *   dx_j = grad_scale * (exp(lp_j) - q_j)
 * A row whose target equals ignore_id or lies outside [0, V) is ignored:
 * loss = nll = 0 and dx = 0.
 *
 * Kernels:
 *   xent  one work-group per row (NDRange rows * local size, any power-of-two
 *         local size <= REDUCE_WG): a pass for the max and the plain sum of
 *         x, a tree reduction, a pass for the sum of exp(x - max), another
 *         reduction, then a pass writing dx.  Work-item l owns the float16
 *         vectors l, l + size, ... of the row and the tail elements past the
 *         last whole vector at l, l + size, ... (branch-free vector loops:
 *         PoCL runs work-items one after another, so each one must stream
 *         contiguous memory).  dx may be the logits themselves (same buffer,
 *         offset and stride: each element is read and then written by its
 *         owner after the reductions); otherwise it must not overlap them.
 *
 * Offsets and leading dimensions in elements; addresses are ulong.
 *
 * -D knobs (defaults):
 *   REDUCE_WG  capacity of the local reduction buffers (256; power of two)
 */
#ifndef REDUCE_WG
#define REDUCE_WG 256
#endif

__kernel void xent(__global const float *X, const ulong x_off, const uint ld, const uint n_cls,
                   __global const int *T, const ulong t_off, const int ignore_id,
                   const float eps, const float grad_scale,
                   __global float *L, const ulong l_off,
                   __global float *NLL, const ulong nll_off, const int has_nll,
                   __global float *DX, const ulong dx_off, const uint ld_dx, const int has_dx) {
    __local float red_m[REDUCE_WG];
    __local float red_s[REDUCE_WG];
    __local float red_x[REDUCE_WG];
    const uint lid = (uint)get_local_id(0), lsz = (uint)get_local_size(0);
    const ulong row = get_group_id(0);
    __global const float *x = X + x_off + row * ld;
    __global float *dx = DX + dx_off + row * ld_dx;
    const int t = T[t_off + row];
    /* An ignored row (uniform over the group) still passes every barrier
     * below, with nothing to reduce: no early return before a barrier.
     * Intel's CPU runtime 2026.2 (intel-opencl-rt from PyPI) compiled the
     * early return so that the group went on to read x[t] with t = -1
     * (a segfault); OpenCL C 1.2 only allows barriers that every
     * work-item reaches. */
    const int valid = !(t == ignore_id || t < 0 || t >= (int)n_cls);
    if (!valid) {
        if (has_dx)
            for (uint c = lid; c < n_cls; c += lsz) dx[c] = 0.0f;
        if (lid == 0) {
            L[l_off + row] = 0.0f;
            if (has_nll) NLL[nll_off + row] = 0.0f;
        }
    }
    const uint n_red = valid ? n_cls : 0u;  /* the elements this row reduces over */

    const float xt = valid ? x[t] : 0.0f;  /* read by everyone before the first barrier (dx may alias x) */
    const uint nv = n_red / 16u, tail0 = nv * 16u;
    float16 mv = (float16)(-INFINITY), sv = (float16)(0.0f);
    for (uint v = lid; v < nv; v += lsz) {
        const float16 x16 = vload16(v, x);
        mv = fmax(mv, x16);
        sv += x16;
    }
    float8 m8 = fmax(mv.lo, mv.hi), s8 = sv.lo + sv.hi;
    float4 m4 = fmax(m8.lo, m8.hi), s4 = s8.lo + s8.hi;
    float m = fmax(fmax(m4.x, m4.y), fmax(m4.z, m4.w)), sx = (s4.x + s4.y) + (s4.z + s4.w);
    for (uint c = tail0 + lid; c < n_red; c += lsz) {
        m = fmax(m, x[c]);
        sx += x[c];
    }
    red_m[lid] = m;
    red_x[lid] = sx;
    /* the global fence orders everyone's read of x[t] before the write of
     * dx[t] when dx aliases x (a local fence alone does not: Oclgrind) */
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    for (uint w = lsz / 2; w > 0; w >>= 1) {
        if (lid < w) {
            red_m[lid] = fmax(red_m[lid], red_m[lid + w]);
            red_x[lid] += red_x[lid + w];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float mx = red_m[0];
    float s = 0.0f;
    if (mx != -INFINITY) {
        float16 e16 = (float16)(0.0f);
        for (uint v = lid; v < nv; v += lsz) e16 += exp(vload16(v, x) - mx);
        s = vsum16(e16);
        for (uint c = tail0 + lid; c < n_red; c += lsz) s += exp(x[c] - mx);
    }
    red_s[lid] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint w = lsz / 2; w > 0; w >>= 1) {
        if (lid < w) red_s[lid] += red_s[lid + w];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float lse = mx + log(red_s[0]);
    const float off = n_cls > 1 ? eps / (float)(n_cls - 1) : 0.0f;
    const float on = n_cls > 1 ? 1.0f - eps : 1.0f;

    if (valid && lid == 0) {
        const float lp_t = xt - lse;
        const float sum_lp = red_x[0] - (float)n_cls * lse;
        L[l_off + row] = -on * lp_t - off * (sum_lp - lp_t);
        if (has_nll) NLL[nll_off + row] = -lp_t;
    }
    if (valid && has_dx) {
        const int16 lane = (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        for (uint v = lid; v < nv; v += lsz) {
            const float16 q = select((float16)(off), (float16)(on), lane + (int)(v * 16u) == (int16)(t));
            vstore16(grad_scale * (exp(vload16(v, x) - lse) - q), v, dx);
        }
        for (uint c = tail0 + lid; c < n_cls; c += lsz) {
            const float q = (int)c == t ? on : off;
            dx[c] = grad_scale * (exp(x[c] - lse) - q);
        }
    }
}
