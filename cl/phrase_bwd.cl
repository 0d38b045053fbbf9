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
 * same shape.
 *   pattn_dp   one segment: DS[row, col0 + j] = dO_row . V[j] over head h's
 *              columns where P > 0, else 0.            [j, i, s * H + h]
 *   pattn_ds   every segment: DS = P * (DS - sum_j P DS) per row.     [row]
 *   pattn_dq   one segment: for tap u of the window, dq_u[c] += scale *
 *              sum_j DS[row, col0 + j] K[j - n_win + 1 + u, c] (rows >= 0);
 *              tap n_win - 1 goes to DQ when has_q, taps < n_ext to DQX.
 *                                        [u * dh + c, i, s * H + h]
 *   pattn_dk   one segment: DK[m, r, h * dh + c] += scale * sum over the
 *              query rows of sequences s / group == m and taps u of
 *              DS[row, col0 + r + n_win - 1 - u] q_u[c] (r + n_win - 1 - u <
 *              lk_max).                              [c, r, m * H + h]
 *   pattn_dv   one segment: DV[m, j, h * dh + c] += sum over the same rows
 *              of P[row, col0 + j] dO_row[h * dh + c].   [c, j, m * H + h]
 * Each work-item owns its output element: race-free. */
__kernel void pattn_dp(const uint n_seq, const uint lq, const uint lk_max, const uint group, const uint n_heads,
                       const uint dh, __global const float *V, const ulong v_off, const uint v_ld,
                       const ulong kv_stride, __global const float *DO, const ulong do_off, const uint do_ld,
                       __global const float *P, const ulong p_off, const uint p_ld, const uint col0,
                       __global float *DS, const ulong ds_off) {
    const uint j = (uint)get_global_id(0);
    const uint i = (uint)get_global_id(1);
    const uint sh = (uint)get_global_id(2);
    if (j >= lk_max || i >= lq || sh >= n_seq * n_heads) return;
    const uint s = sh / n_heads, h = sh - s * n_heads, m = s / group;
    const ulong at = ((ulong)sh * lq + i) * p_ld + col0 + j;
    float acc = 0.0f;
    if (P[p_off + at] != 0.0f) {
        __global const float *v = V + v_off + (ulong)m * kv_stride + (ulong)j * v_ld + (ulong)h * dh;
        __global const float *g = DO + do_off + (ulong)(s * lq + i) * do_ld + (ulong)h * dh;
        for (uint c = 0; c < dh; c++) acc += g[c] * v[c];
    }
    DS[ds_off + at] = acc;
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
    const uint uc = (uint)get_global_id(0);
    const uint i = (uint)get_global_id(1);
    const uint sh = (uint)get_global_id(2);
    const uint n_win = n_ext + (has_q ? 1u : 0u);
    if (uc >= n_win * dh || i >= lq || sh >= n_seq * n_heads) return;
    const uint u = uc / dh, c = uc - u * dh;
    const uint s = sh / n_heads, h = sh - s * n_heads, m = s / group;
    __global const float *ds = DS + ds_off + ((ulong)sh * lq + i) * p_ld + col0;
    __global const float *kc = K + k_off + (ulong)m * kv_stride + (ulong)h * dh + c;
    float acc = 0.0f;
    for (uint j = 0; j < lk_max; j++) {
        const int kr = (int)j - (int)n_win + 1 + (int)u;
        if (kr >= 0 && ds[j] != 0.0f) acc += ds[j] * kc[(ulong)kr * k_ld];
    }
    const ulong row = (ulong)(s * lq + i);
    if (u < n_ext) DQX[dqx_off + row * dqx_ld + ((ulong)h * n_ext + u) * dh + c] += scale * acc;
    else DQ[dq_off + row * dq_ld + (ulong)h * dh + c] += scale * acc;
}

__kernel void pattn_dk(const uint n_seq, const uint lq, const uint lk_max, const uint group, const uint n_heads,
                       const uint dh, const float scale, __global const float *Q, const ulong q_off, const uint q_ld,
                       const int has_q, __global const float *QX, const ulong qx_off, const uint qx_ld,
                       const uint n_ext, __global const float *DS, const ulong ds_off, const uint p_ld,
                       const uint col0, __global float *DK, const ulong dk_off, const uint dk_ld,
                       const ulong dkv_stride) {
    const uint c = (uint)get_global_id(0);
    const uint r = (uint)get_global_id(1);
    const uint mh = (uint)get_global_id(2);
    const uint n_kv = (n_seq + group - 1) / group;
    if (c >= dh || r >= lk_max || mh >= n_kv * n_heads) return;
    const uint m = mh / n_heads, h = mh - m * n_heads;
    const uint n_win = n_ext + (has_q ? 1u : 0u);
    const uint s1 = min(n_seq, (m + 1) * group);
    float acc = 0.0f;
    for (uint s = m * group; s < s1; s++)
        for (uint i = 0; i < lq; i++) {
            const ulong row = (ulong)(s * lq + i);
            __global const float *ds = DS + ds_off + (((ulong)s * n_heads + h) * lq + i) * p_ld + col0;
            for (uint u = 0; u < n_win; u++) {
                const uint j = r + n_win - 1 - u;
                if (j >= lk_max || ds[j] == 0.0f) continue;
                const float q = u < n_ext ? QX[qx_off + row * qx_ld + ((ulong)h * n_ext + u) * dh + c]
                                          : Q[q_off + row * q_ld + (ulong)h * dh + c];
                acc += ds[j] * q;
            }
        }
    DK[dk_off + (ulong)m * dkv_stride + (ulong)r * dk_ld + (ulong)h * dh + c] += scale * acc;
}

__kernel void pattn_dv(const uint n_seq, const uint lq, const uint lk_max, const uint group, const uint n_heads,
                       const uint dh, __global const float *P, const ulong p_off, const uint p_ld, const uint col0,
                       __global const float *DO, const ulong do_off, const uint do_ld, __global float *DV,
                       const ulong dv_off, const uint dv_ld, const ulong dkv_stride) {
    const uint c = (uint)get_global_id(0);
    const uint j = (uint)get_global_id(1);
    const uint mh = (uint)get_global_id(2);
    const uint n_kv = (n_seq + group - 1) / group;
    if (c >= dh || j >= lk_max || mh >= n_kv * n_heads) return;
    const uint m = mh / n_heads, h = mh - m * n_heads;
    const uint s1 = min(n_seq, (m + 1) * group);
    float acc = 0.0f;
    for (uint s = m * group; s < s1; s++)
        for (uint i = 0; i < lq; i++) {
            const float p = P[p_off + (((ulong)s * n_heads + h) * lq + i) * p_ld + col0 + j];
            if (p != 0.0f) acc += p * DO[do_off + (ulong)(s * lq + i) * do_ld + (ulong)h * dh + c];
        }
    DV[dv_off + (ulong)m * dkv_stride + (ulong)j * dv_ld + (ulong)h * dh + c] += acc;
}
