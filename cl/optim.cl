/* SPDX-License-Identifier: MIT */
/* optim.cl — optimiser and gradient-buffer kernels over flat float buffers
 * (train/ops/ops_train.h gives the exact semantics of each call).
 *
 * Kernels (NDRange in brackets; padded, surplus work-items return):
 *   adam            g' = g * grad_scale
 *                   m = b1 m + (1 - b1) g',  v = b2 v + (1 - b2) g'^2
 *                   p -= lr * ((m / bc1) / (sqrt(v / bc2) + eps) + wd * p)
 *                   bc1 = 1 - b1^t, bc2 = 1 - b2^t computed by the host
 *                   (wd: decoupled weight decay, AdamW; 0 = plain Adam)  [i]
 *   reduce_partial  stage 1 of a deterministic sum (square = 1: sum of
 *                   squares): work-group g (local size <= REDUCE_WG, power
 *                   of two) reduces elements [g*chunk, min(n, (g+1)*chunk))
 *                   into partial[g]; each work-item sums a strided subset in
 *                   order, then a fixed tree.             [groups * local]
 *   reduce_final    stage 2: one work-group sums partial[0..n_part) into
 *                   out[0] the same way.                  [local]
 *   scale           x[i] *= a                             [i]
 *   fill            x[i] = a                              [i]
 *   axpy            y[i] += a * x[i]                      [i]
 * For a given device, local size and group count the summation order is
 * fixed, so results are bitwise reproducible run to run.
 *
 * Offsets are in elements (ulong).
 *
 * -D knobs (defaults):
 *   REDUCE_WG  capacity of the local reduction buffer (256; power of two)
 */
#ifndef REDUCE_WG
#define REDUCE_WG 256
#endif

__kernel void adam(__global float *P, const ulong p_off, __global const float *G, const ulong g_off,
                   __global float *M, const ulong m_off, __global float *V, const ulong v_off, const uint n,
                   const float lr, const float b1, const float b2, const float eps, const float bc1,
                   const float bc2, const float grad_scale, const float wd) {
    const uint i = (uint)get_global_id(0);
    if (i >= n) return;
    const float g = G[g_off + i] * grad_scale;
    const float m = b1 * M[m_off + i] + (1.0f - b1) * g;
    const float v = b2 * V[v_off + i] + (1.0f - b2) * g * g;
    M[m_off + i] = m;
    V[v_off + i] = v;
    const float p = P[p_off + i];
    P[p_off + i] = p - lr * ((m / bc1) / (sqrt(v / bc2) + eps) + wd * p);
}

__kernel void reduce_partial(__global const float *X, const ulong x_off, const uint n, const uint chunk,
                             const int square, __global float *part, const ulong part_off) {
    __local float red[REDUCE_WG];
    const uint lid = (uint)get_local_id(0), lsz = (uint)get_local_size(0);
    const uint g = (uint)get_group_id(0);
    const ulong lo = (ulong)g * chunk;
    const ulong hi = min((ulong)n, lo + chunk);
    float s = 0.0f;
    for (ulong e = lo + lid; e < hi; e += lsz) {
        const float v = X[x_off + e];
        s += square ? v * v : v;
    }
    const float total = wg_sum(s, red);
    if (lid == 0) part[part_off + g] = total;
}

__kernel void reduce_final(__global const float *part, const ulong part_off, const uint n_part,
                           __global float *out, const ulong out_off) {
    __local float red[REDUCE_WG];
    const uint lid = (uint)get_local_id(0), lsz = (uint)get_local_size(0);
    float s = 0.0f;
    for (uint e = lid; e < n_part; e += lsz) s += part[part_off + e];
    const float total = wg_sum(s, red);
    if (lid == 0) out[out_off] = total;
}

__kernel void scale(__global float *X, const ulong x_off, const uint n, const float a) {
    const uint i = (uint)get_global_id(0);
    if (i < n) X[x_off + i] *= a;
}

__kernel void fill(__global float *X, const ulong x_off, const uint n, const float a) {
    const uint i = (uint)get_global_id(0);
    if (i < n) X[x_off + i] = a;
}

__kernel void axpy(__global float *Y, const ulong y_off, __global const float *X, const ulong x_off,
                   const uint n, const float a) {
    const uint i = (uint)get_global_id(0);
    if (i < n) Y[y_off + i] += a * X[x_off + i];
}
