/* loss.cl — label-smoothed cross entropy over the output logits, forward and
 * backward in one kernel (runtime/ops_train.h, nmt_op_xent, gives the exact
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
 *         local size <= REDUCE_WG): one read pass over the row accumulating
 *         (max, sum of exp) online plus the plain sum of x, a tree reduction,
 *         then one pass writing dx.  dx may be the logits themselves (same
 *         buffer, offset and stride: each element is read and then written
 *         by the same work-item after the reduction); otherwise it must not
 *         overlap them.
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

    if (t == ignore_id || t < 0 || t >= (int)n_cls) {  /* uniform over the group */
        if (has_dx)
            for (uint c = lid; c < n_cls; c += lsz) dx[c] = 0.0f;
        if (lid == 0) {
            L[l_off + row] = 0.0f;
            if (has_nll) NLL[nll_off + row] = 0.0f;
        }
        return;
    }

    const float xt = x[t];  /* read by everyone before the first barrier (dx may alias x) */
    float m = -INFINITY, s = 0.0f, sx = 0.0f;
    for (uint c = lid; c < n_cls; c += lsz) {
        const float v = x[c];
        sx += v;
        if (v > m) {
            s = s * exp(m - v) + 1.0f;
            m = v;
        } else {
            s += exp(v - m);
        }
    }
    red_m[lid] = m;
    red_s[lid] = m == -INFINITY ? 0.0f : s;
    red_x[lid] = sx;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint w = lsz / 2; w > 0; w >>= 1) {
        if (lid < w) {
            const float m1 = red_m[lid], m2 = red_m[lid + w];
            const float mm = fmax(m1, m2);
            if (mm != -INFINITY) red_s[lid] = red_s[lid] * exp(m1 - mm) + red_s[lid + w] * exp(m2 - mm);
            red_m[lid] = mm;
            red_x[lid] += red_x[lid + w];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float lse = red_m[0] + log(red_s[0]);
    const float off = n_cls > 1 ? eps / (float)(n_cls - 1) : 0.0f;
    const float on = n_cls > 1 ? 1.0f - eps : 1.0f;

    if (lid == 0) {
        const float lp_t = xt - lse;
        const float sum_lp = red_x[0] - (float)n_cls * lse;
        L[l_off + row] = -on * lp_t - off * (sum_lp - lp_t);
        if (has_nll) NLL[nll_off + row] = -lp_t;
    }
    if (has_dx)
        for (uint c = lid; c < n_cls; c += lsz) {
            const float q = (int)c == t ? on : off;
            dx[c] = grad_scale * (exp(x[c] - lse) - q);
        }
}
