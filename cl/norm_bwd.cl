/* SPDX-License-Identifier: MIT */
/* norm_bwd.cl — gradients of the layer norm of norm.cl (train/ops/ops_train.h,
 * nmt_op_layernorm_bwd, gives the exact semantics).
 *
 * Forward (per row r, width d):  v = x (+ res),  mu = mean(v),
 *   rstd = 1/sqrt(mean((v - mu)^2) + eps),  xh = (v - mu) * rstd,
 *   y = xh * gamma + beta.
 * Backward, a = dy * gamma:
 *   dv = rstd * (a - mean(a) - xh * mean(a * xh))
 *   dgamma[c] = sum_r dy[r,c] * xh[r,c],   dbeta[c] = sum_r dy[r,c]
 *
 * Kernels:
 *   layernorm_bwd         one work-group per row (NDRange rows * local
 *                         size, any power-of-two local size <= REDUCE_WG):
 *                         recomputes mu and rstd (two-pass, as the forward),
 *                         stores them in stats[2r], stats[2r+1], and writes
 *                         dx = dv (or dx += dv when accumulate).  float16
 *                         loads with a scalar tail; CPUs launch it with
 *                         local size 1 (no barrier work).
 *   layernorm_bwd_params  16 columns per work-item (float16)  [d / 16]
 *                         dgamma[c] (+)= sum_r dy * xh, dbeta[c] (+)= sum_r dy
 *                         over rows in order (deterministic), xh from the
 *                         stats that layernorm_bwd stored.
 *
 * dx must not overlap x, res or dy.  Rows are contiguous (stride d);
 * offsets in elements (ulong).
 *
 * -D knobs (defaults):
 *   REDUCE_WG  capacity of the local reduction buffer, the largest local
 *              size the host may launch layernorm_bwd with (256; power of 2)
 */
#ifndef REDUCE_WG
#define REDUCE_WG 256
#endif

/* Row access as in norm.cl: float16 vectors lid, lid + lsz, ... below
 * 16 * (d / 16), tail elements after; each work-item reads and writes only
 * its own elements. */
__kernel void layernorm_bwd(__global const float *X, const ulong x_off,
                            __global const float *R, const ulong r_off, const int has_res,
                            __global const float *DY, const ulong dy_off,
                            __global float *DX, const ulong dx_off, const int accumulate,
                            const uint d, __global const float *G, const ulong g_off, const float eps,
                            __global float *stats, const ulong st_off) {
    __local float red[REDUCE_WG];
    const ulong row = get_group_id(0);
    const uint lid = (uint)get_local_id(0), lsz = (uint)get_local_size(0);
    __global const float *x = X + x_off + row * d;
    __global const float *r = R + r_off + row * d;
    __global const float *dy = DY + dy_off + row * d;
    __global const float *g = G + g_off;
    __global float *dx = DX + dx_off + row * d;
    const uint nv = d / 16u, tail0 = nv * 16u;

    const float2 st = ln_stats(x, r, has_res, d, eps, red);
    const float mean = st.x, rstd = st.y;

    float16 sa16 = (float16)(0.0f), sax16 = (float16)(0.0f);
    for (uint v = lid; v < nv; v += lsz) {
        const float16 xh = (load16_res(x, r, has_res, v) - mean) * rstd;
        const float16 a = vload16(v, dy) * vload16(v, g);
        sa16 += a;
        sax16 += a * xh;
    }
    float sa = vsum16(sa16), sax = vsum16(sax16);
    for (uint c = tail0 + lid; c < d; c += lsz) {
        const float xh = ((has_res ? x[c] + r[c] : x[c]) - mean) * rstd;
        const float a = dy[c] * g[c];
        sa += a;
        sax += a * xh;
    }
    const float ma = wg_sum(sa, red) / (float)d;
    const float max_ = wg_sum(sax, red) / (float)d;

    for (uint v = lid; v < nv; v += lsz) {
        const float16 xh = (load16_res(x, r, has_res, v) - mean) * rstd;
        const float16 val = rstd * (vload16(v, dy) * vload16(v, g) - ma - xh * max_);
        vstore16(accumulate ? vload16(v, dx) + val : val, v, dx);
    }
    for (uint c = tail0 + lid; c < d; c += lsz) {
        const float xh = ((has_res ? x[c] + r[c] : x[c]) - mean) * rstd;
        const float val = rstd * (dy[c] * g[c] - ma - xh * max_);
        dx[c] = accumulate ? dx[c] + val : val;
    }
    if (lid == 0) {
        stats[st_off + row * 2] = mean;
        stats[st_off + row * 2 + 1] = rstd;
    }
}

__kernel void layernorm_bwd_params(const uint rows, const uint d,
                                   __global const float *X, const ulong x_off,
                                   __global const float *R, const ulong r_off, const int has_res,
                                   __global const float *DY, const ulong dy_off,
                                   __global const float *stats, const ulong st_off,
                                   __global float *DG, const ulong dg_off,
                                   __global float *DB, const ulong db_off, const int accumulate) {
    const uint c0 = (uint)get_global_id(0) * 16u;
    if (c0 >= d) return;
    if (c0 + 16u <= d) { /* 16 columns as one float16, rows in order */
        float16 sg = (float16)(0.0f), sb = (float16)(0.0f);
        for (uint r = 0; r < rows; r++) {
            const ulong e = (ulong)r * d + c0;
            float16 v = vload16(0, X + x_off + e);
            if (has_res) v += vload16(0, R + r_off + e);
            const float16 xh = (v - stats[st_off + (ulong)r * 2]) * stats[st_off + (ulong)r * 2 + 1];
            const float16 dy = vload16(0, DY + dy_off + e);
            sg += dy * xh;
            sb += dy;
        }
        if (accumulate) {
            sg += vload16(0, DG + dg_off + c0);
            sb += vload16(0, DB + db_off + c0);
        }
        vstore16(sg, 0, DG + dg_off + c0);
        vstore16(sb, 0, DB + db_off + c0);
        return;
    }
    for (uint c = c0; c < d; c++) {
        float sg = 0.0f, sb = 0.0f;
        for (uint r = 0; r < rows; r++) {
            const ulong e = (ulong)r * d + c;
            const float v = has_res ? X[x_off + e] + R[r_off + e] : X[x_off + e];
            const float xh = (v - stats[st_off + (ulong)r * 2]) * stats[st_off + (ulong)r * 2 + 1];
            const float dy = DY[dy_off + e];
            sg += dy * xh;
            sb += dy;
        }
        DG[dg_off + c] = accumulate ? DG[dg_off + c] + sg : sg;
        DB[db_off + c] = accumulate ? DB[db_off + c] + sb : sb;
    }
}
