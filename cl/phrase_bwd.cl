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
 * len[s] of sequence s, DX[(s * n_cap + p) * ld_x + c] += the sum, over
 * window offsets i = 0 .. n - 1 (in that order) with t = (p + pad - i) /
 * stride whole and t < t_out, of DY[(s * t_out + t) * ld_y + i * d + c].
 * A work-item per (c, position): race-free.                [c, s * n_cap + p] */
__kernel void window_rows_bwd(__global const float *DY, const ulong dy_off, const uint ld_y,
                              __global const int *len, const ulong len_off, const uint n_seq, const uint n_cap,
                              const uint t_out, const uint n, const uint stride, const uint pad, const uint d,
                              __global float *DX, const ulong dx_off, const uint ld_x) {
    const uint c = (uint)get_global_id(0);
    const uint q = (uint)get_global_id(1);
    if (c >= d || q >= n_seq * n_cap) return;
    const uint s = q / n_cap, p = q % n_cap;
    if ((int)p >= len[len_off + s]) return;
    float acc = 0.0f;
    for (uint i = 0; i < n; i++) {
        const long u = (long)p + pad - i;
        if (u < 0 || u % stride) continue;
        const ulong t = (ulong)(u / stride);
        if (t < t_out) acc += DY[dy_off + ((ulong)s * t_out + t) * ld_y + (ulong)i * d + c];
    }
    DX[dx_off + (ulong)q * ld_x + c] += acc;
}
