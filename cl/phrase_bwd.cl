/* SPDX-License-Identifier: MIT */
/* phrase_bwd.cl — backward of cl/phrase.cl (training only).
 *
 * Kernels (NDRange in brackets; surplus work-items return):
 *   segment_max_bwd  DX[A[r * d + c], c] += DG[r, c] for every phrase row
 *                    r < rows and column c < d with A >= 0 (A: segment_max's
 *                    argmax rows).  Race-free because the spans of a sentence
 *                    are disjoint, so no row of X is the argmax of two
 *                    phrase rows in one column.                  [c, r]
 *
 * Offsets and leading dimensions are in elements; addresses use ulong. */

__kernel void segment_max_bwd(__global const int *A, const ulong a_off, __global const float *DG,
                              const ulong dg_off, const uint ld_g, const uint rows, const uint d,
                              __global float *DX, const ulong dx_off, const uint ld_x) {
    const uint c = (uint)get_global_id(0);
    const uint r = (uint)get_global_id(1);
    if (c >= d || r >= rows) return;
    const int a = A[a_off + (ulong)r * d + c];
    if (a >= 0) DX[dx_off + (ulong)a * ld_x + c] += DG[dg_off + (ulong)r * ld_g + c];
}

/* Backward of span_last / span_tokens (cl/phrase.cl):
 *   span_last_bwd    DH[(r * t_cap + t) * ld_h + c] = DG[r * ld_g + c] when
 *                    t == len - 1, else 0 (every row written).  [c, r * t_cap + t]
 *   span_tokens_bwd  DX[(b * n_cap + start + t) * ld_x + c] += DP[(r * t_cap + t) * d + c]
 *                    for t < len; race-free because the spans of a sentence
 *                    are disjoint.                               [c, r * t_cap + t] */
__kernel void span_last_bwd(__global const float *DG, const ulong dg_off, const uint ld_g, __global const int *S,
                            const ulong s_off, const uint rows, const uint t_cap, const uint d, __global float *DH,
                            const ulong dh_off, const uint ld_h) {
    const uint c = (uint)get_global_id(0);
    const uint i = (uint)get_global_id(1);
    if (c >= d || i >= rows * t_cap) return;
    const uint r = i / t_cap, t = i % t_cap;
    const int len = S[s_off + 2 * (ulong)r + 1];
    DH[dh_off + (ulong)i * ld_h + c] = (int)t == len - 1 ? DG[dg_off + (ulong)r * ld_g + c] : 0.0f;
}

__kernel void span_tokens_bwd(__global const float *DP, const ulong dp_off, __global const int *S, const ulong s_off,
                              const uint m_cap, const uint rows, const uint t_cap, const uint d, const uint n_cap,
                              __global float *DX, const ulong dx_off, const uint ld_x) {
    const uint c = (uint)get_global_id(0);
    const uint i = (uint)get_global_id(1);
    if (c >= d || i >= rows * t_cap) return;
    const uint r = i / t_cap, t = i % t_cap;
    const ulong b = r / m_cap;
    const int start = S[s_off + 2 * (ulong)r], len = S[s_off + 2 * (ulong)r + 1];
    if ((int)t < len) DX[dx_off + (b * n_cap + (ulong)(start + (int)t)) * ld_x + c] += DP[dp_off + (ulong)i * d + c];
}

/* Backward of window_rows (cl/phrase.cl): for every valid position p <
 * len[s] of sequence s (every p < n_cap without has_len), DX[(s * n_cap + p) * ld_x + c] += the sum, over
 * window offsets i = 0 .. n - 1 (in that order) with t = (p + pad - i) /
 * stride whole and t < t_out, of DY[(s * t_out + t) * ld_y + i * d + c].
 * A work-item per (c, position): race-free.                [c, s * n_cap + p] */
__kernel void window_rows_bwd(__global const float *DY, const ulong dy_off, const uint ld_y,
                              __global const int *len, const ulong len_off, const int has_len, const uint n_seq,
                              const uint n_cap,
                              const uint t_out, const uint n, const uint stride, const uint pad, const uint d,
                              __global float *DX, const ulong dx_off, const uint ld_x) {
    const uint c = (uint)get_global_id(0);
    const uint q = (uint)get_global_id(1);
    if (c >= d || q >= n_seq * n_cap) return;
    const uint s = q / n_cap, p = q % n_cap;
    if (has_len && (int)p >= len[len_off + s]) return;
    float acc = 0.0f;
    for (uint i = 0; i < n; i++) {
        const long u = (long)p + pad - i;
        if (u < 0 || u % stride) continue;
        const ulong t = (ulong)(u / stride);
        if (t < t_out) acc += DY[dy_off + ((ulong)s * t_out + t) * ld_y + (ulong)i * d + c];
    }
    DX[dx_off + (ulong)q * ld_x + c] += acc;
}

/* Backward of phrase-based attention (cl/phrase.cl pattn_*; train/
 * ops_train.h nmt_op_pattn_bwd).  P: the forward's probabilities, DS the
 * same shape.  Work-items own rows (dp, ds, dq: a query row s * H + h, i)
 * or key rows (dk, dv: a key row r of key sequence m, head h) and keep
 * their accumulators in private memory, PBWD_DH columns at a time.
 *   pattn_dp   one segment: DS[row, col0 + j] = dO_row . V[j] over head h's
 *              columns where P > 0, else 0.                 [s * H + h, i]
 *   pattn_ds   every segment: DS = P * (DS - sum_j P DS) per row.     [row]
 *   pattn_dq   one segment: for tap u of the window, dq_u += scale *
 *              sum_j DS[row, col0 + j] K[j - n_win + 1 + u] (rows >= 0);
 *              tap n_win - 1 goes to DQ when has_q, taps < n_ext to DQX.
 *                                                           [s * H + h, i]
 *   pattn_dk   one segment: DK[m, r] += scale * sum over the query rows of
 *              sequences s / group == m and taps u of DS[row, col0 + r +
 *              n_win - 1 - u] q_u (r + n_win - 1 - u < lk_max).  [m * H + h, r]
 *   pattn_dv   one segment: DV[m, j] += sum over the same rows of
 *              P[row, col0 + j] dO_row.                     [m * H + h, j]
 * Each work-item owns its outputs: race-free. */
#ifndef PBWD_DH
#define PBWD_DH 64
#endif

__kernel void pattn_dp(const uint n_seq, const uint lq, const uint lk_max, const uint group, const uint n_heads,
                       const uint dh, __global const float *V, const ulong v_off, const uint v_ld,
                       const ulong kv_stride, __global const float *DO, const ulong do_off, const uint do_ld,
                       __global const float *P, const ulong p_off, const uint p_ld, const uint col0,
                       __global float *DS, const ulong ds_off) {
    const uint sh = (uint)get_global_id(0);
    const uint i = (uint)get_global_id(1);
    if (sh >= n_seq * n_heads || i >= lq) return;
    const uint s = sh / n_heads, h = sh - s * n_heads, m = s / group;
    const ulong row = ((ulong)sh * lq + i) * p_ld + col0;
    __global const float *g = DO + do_off + (ulong)(s * lq + i) * do_ld + (ulong)h * dh;
    __global const float *vb = V + v_off + (ulong)m * kv_stride + (ulong)h * dh;
    const uint D4 = dh & ~3u;
    for (uint j = 0; j < lk_max; j++) {
        float acc = 0.0f;
        if (P[p_off + row + j] != 0.0f) {
            __global const float *v = vb + (ulong)j * v_ld;
            float4 a4 = (float4)(0.0f);
            for (uint c = 0; c < D4; c += 4) a4 += vload4(0, g + c) * vload4(0, v + c);
            acc = (a4.x + a4.y) + (a4.z + a4.w);
            for (uint c = D4; c < dh; c++) acc += g[c] * v[c];
        }
        DS[ds_off + row + j] = acc;
    }
}

__kernel void pattn_ds(const uint rows, const uint p_ld, __global const float *P, const ulong p_off,
                       __global float *DS, const ulong ds_off) {
    const uint r = (uint)get_global_id(0);
    if (r >= rows) return;
    __global const float *p = P + p_off + (ulong)r * p_ld;
    __global float *ds = DS + ds_off + (ulong)r * p_ld;
    float dot = 0.0f;
    for (uint j = 0; j < p_ld; j++) dot += p[j] * ds[j];
    for (uint j = 0; j < p_ld; j++) ds[j] = p[j] * (ds[j] - dot);
}

__kernel void pattn_dq(const uint n_seq, const uint lq, const uint lk_max, const uint group, const uint n_heads,
                       const uint dh, const float scale, __global const float *K, const ulong k_off, const uint k_ld,
                       const ulong kv_stride, __global const float *DS, const ulong ds_off, const uint p_ld,
                       const uint col0, __global float *DQ, const ulong dq_off, const uint dq_ld, const int has_q,
                       __global float *DQX, const ulong dqx_off, const uint dqx_ld, const uint n_ext) {
    const uint sh = (uint)get_global_id(0);
    const uint i = (uint)get_global_id(1);
    if (sh >= n_seq * n_heads || i >= lq) return;
    const uint n_win = n_ext + (has_q ? 1u : 0u);
    const uint s = sh / n_heads, h = sh - s * n_heads, m = s / group;
    __global const float *ds = DS + ds_off + ((ulong)sh * lq + i) * p_ld + col0;
    __global const float *kb = K + k_off + (ulong)m * kv_stride + (ulong)h * dh;
    const ulong row = (ulong)(s * lq + i);
    float acc[PBWD_DH];
    for (uint u = 0; u < n_win; u++)
        for (uint c0 = 0; c0 < dh; c0 += PBWD_DH) {
            const uint w = min((uint)PBWD_DH, dh - c0);
            for (uint c = 0; c < w; c++) acc[c] = 0.0f;
            for (uint j = 0; j < lk_max; j++) {
                const int kr = (int)j - (int)n_win + 1 + (int)u;
                const float g = ds[j];
                if (kr < 0 || g == 0.0f) continue;
                __global const float *k = kb + (ulong)kr * k_ld + c0;
                for (uint c = 0; c < w; c++) acc[c] = g * k[c] + acc[c];
            }
            __global float *d = u < n_ext ? DQX + dqx_off + row * dqx_ld + ((ulong)h * n_ext + u) * dh + c0
                                          : DQ + dq_off + row * dq_ld + (ulong)h * dh + c0;
            for (uint c = 0; c < w; c++) d[c] += scale * acc[c];
        }
}

__kernel void pattn_dk(const uint n_seq, const uint lq, const uint lk_max, const uint group, const uint n_heads,
                       const uint dh, const float scale, __global const float *Q, const ulong q_off, const uint q_ld,
                       const int has_q, __global const float *QX, const ulong qx_off, const uint qx_ld,
                       const uint n_ext, __global const float *DS, const ulong ds_off, const uint p_ld,
                       const uint col0, __global float *DK, const ulong dk_off, const uint dk_ld,
                       const ulong dkv_stride) {
    const uint mh = (uint)get_global_id(0);
    const uint r = (uint)get_global_id(1);
    const uint n_kv = (n_seq + group - 1) / group;
    if (mh >= n_kv * n_heads || r >= lk_max) return;
    const uint m = mh / n_heads, h = mh - m * n_heads;
    const uint n_win = n_ext + (has_q ? 1u : 0u);
    const uint s1 = min(n_seq, (m + 1) * group);
    float acc[PBWD_DH];
    for (uint c0 = 0; c0 < dh; c0 += PBWD_DH) {
        const uint w = min((uint)PBWD_DH, dh - c0);
        for (uint c = 0; c < w; c++) acc[c] = 0.0f;
        for (uint s = m * group; s < s1; s++)
            for (uint i = 0; i < lq; i++) {
                const ulong row = (ulong)(s * lq + i);
                __global const float *ds = DS + ds_off + (((ulong)s * n_heads + h) * lq + i) * p_ld + col0;
                for (uint u = 0; u < n_win; u++) {
                    const uint j = r + n_win - 1 - u;
                    if (j >= lk_max) continue;
                    const float g = ds[j];
                    if (g == 0.0f) continue;
                    __global const float *q = u < n_ext ? QX + qx_off + row * qx_ld + ((ulong)h * n_ext + u) * dh + c0
                                                        : Q + q_off + row * q_ld + (ulong)h * dh + c0;
                    for (uint c = 0; c < w; c++) acc[c] = g * q[c] + acc[c];
                }
            }
        __global float *d = DK + dk_off + (ulong)m * dkv_stride + (ulong)r * dk_ld + (ulong)h * dh + c0;
        for (uint c = 0; c < w; c++) d[c] += scale * acc[c];
    }
}

__kernel void pattn_dv(const uint n_seq, const uint lq, const uint lk_max, const uint group, const uint n_heads,
                       const uint dh, __global const float *P, const ulong p_off, const uint p_ld, const uint col0,
                       __global const float *DO, const ulong do_off, const uint do_ld, __global float *DV,
                       const ulong dv_off, const uint dv_ld, const ulong dkv_stride) {
    const uint mh = (uint)get_global_id(0);
    const uint j = (uint)get_global_id(1);
    const uint n_kv = (n_seq + group - 1) / group;
    if (mh >= n_kv * n_heads || j >= lk_max) return;
    const uint m = mh / n_heads, h = mh - m * n_heads;
    const uint s1 = min(n_seq, (m + 1) * group);
    float acc[PBWD_DH];
    for (uint c0 = 0; c0 < dh; c0 += PBWD_DH) {
        const uint w = min((uint)PBWD_DH, dh - c0);
        for (uint c = 0; c < w; c++) acc[c] = 0.0f;
        for (uint s = m * group; s < s1; s++)
            for (uint i = 0; i < lq; i++) {
                const float p = P[p_off + (((ulong)s * n_heads + h) * lq + i) * p_ld + col0 + j];
                if (p == 0.0f) continue;
                __global const float *g = DO + do_off + (ulong)(s * lq + i) * do_ld + (ulong)h * dh + c0;
                for (uint c = 0; c < w; c++) acc[c] = p * g[c] + acc[c];
            }
        __global float *d = DV + dv_off + (ulong)m * dkv_stride + (ulong)j * dv_ld + (ulong)h * dh + c0;
        for (uint c = 0; c < w; c++) d[c] += acc[c];
    }
}
