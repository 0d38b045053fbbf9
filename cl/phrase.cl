/* phrase.cl — phrase-level memories of the MG-SA family (issue 15,
 * docs/ARCHITECTURES.md): token rows pooled into phrase rows over spans.
 *
 * Kernels (NDRange in brackets; surplus work-items return):
 *   segment_max  rows = n_sent * m_cap phrase rows r = b * m_cap + m; the
 *                span of phrase m of sentence b is start = S[2r],
 *                len = S[2r + 1], token positions of that sentence, whose
 *                rows are b * n_cap + t of X:
 *                  G[r, c] = max over start <= t < start + len of X[b * n_cap + t, c]
 *                and, when has_arg, A[r * d + c] = the row of X that gave it
 *                (the first on ties).  len == 0 (no phrase) gives G = 0 and
 *                A = -1.  The caller guarantees 0 <= start and
 *                start + len <= n_cap.                          [c, r]
 *   ngram_spans  the n-gram partition of sentence b < n_sent of length
 *                L = len[b] (EOS included, padding excluded): phrase m covers
 *                positions [m * n, min((m + 1) * n, L)), so the last may be
 *                shorter; S[2r] = m * n, S[2r + 1] = its length (0 past the
 *                sentence), r = b * m_cap + m; count[b] = the number of
 *                phrases, min(ceil(L / n), m_cap).                [m, b]
 *
 * Offsets and leading dimensions are in elements; addresses use ulong.
 * The backward (in the training library) needs the spans of a sentence
 * disjoint. */

__kernel void segment_max(__global const float *X, const ulong x_off, const uint ld_x, const uint n_cap,
                          __global const int *S, const ulong s_off, const uint m_cap, const uint rows,
                          const uint d, __global float *G, const ulong g_off, const uint ld_g,
                          __global int *A, const ulong a_off, const int has_arg) {
    const uint c = (uint)get_global_id(0);
    const uint r = (uint)get_global_id(1);
    if (c >= d || r >= rows) return;
    const ulong b = r / m_cap;
    const int start = S[s_off + 2 * (ulong)r], len = S[s_off + 2 * (ulong)r + 1];
    float best = 0.0f;
    int arg = -1;
    for (int t = 0; t < len; t++) {
        const ulong row = b * n_cap + (ulong)(start + t);
        const float v = X[x_off + row * ld_x + c];
        if (t == 0 || v > best) {
            best = v;
            arg = (int)row;
        }
    }
    G[g_off + (ulong)r * ld_g + c] = best;
    if (has_arg) A[a_off + (ulong)r * d + c] = arg;
}

__kernel void ngram_spans(__global const int *len, const ulong len_off, const uint n_sent, const uint n,
                          const uint m_cap, __global int *S, const ulong s_off, __global int *count,
                          const ulong count_off) {
    const uint m = (uint)get_global_id(0);
    const uint b = (uint)get_global_id(1);
    if (m >= m_cap || b >= n_sent) return;
    const int L = max(len[len_off + b], 0);
    const long start = (long)m * n;
    const long rest = (long)L - start;
    const ulong r = (ulong)b * m_cap + m;
    S[s_off + 2 * r] = (int)start;
    S[s_off + 2 * r + 1] = (int)(rest <= 0 ? 0 : rest < (long)n ? rest : (long)n);
    if (m == 0) count[count_off + b] = (int)min(((uint)L + n - 1) / n, m_cap);
}

/* Phrases as sequences (MG-SA's LSTM composition): phrase row
 * r = b * m_cap + m with span (start, len) = (S[2r], S[2r + 1]) becomes the
 * sequence of rows r * t_cap + t, t < t_cap (t_cap >= every len).
 *   span_tokens  P[(r * t_cap + t) * d + c] = X[(b * n_cap + start + t) * ld_x + c]
 *                for t < len, else 0; count[r] = len.       [c, r * t_cap + t]
 *   span_last    G[r * ld_g + c] = H[(r * t_cap + len - 1) * ld_h + c] (the
 *                state after the phrase's last token), 0 for len 0.  [c, r] */
__kernel void span_tokens(__global const float *X, const ulong x_off, const uint ld_x, const uint n_cap,
                          __global const int *S, const ulong s_off, const uint m_cap, const uint rows, const uint t_cap,
                          const uint d, __global float *P, const ulong p_off, __global int *count,
                          const ulong count_off) {
    const uint c = (uint)get_global_id(0);
    const uint i = (uint)get_global_id(1);
    if (c >= d || i >= rows * t_cap) return;
    const uint r = i / t_cap, t = i % t_cap;
    const ulong b = r / m_cap;
    const int start = S[s_off + 2 * (ulong)r], len = S[s_off + 2 * (ulong)r + 1];
    P[p_off + (ulong)i * d + c] = (int)t < len ? X[x_off + (b * n_cap + (ulong)(start + (int)t)) * ld_x + c] : 0.0f;
    if (c == 0 && t == 0) count[count_off + r] = len;
}

__kernel void span_last(__global const float *H, const ulong h_off, const uint ld_h, __global const int *S,
                        const ulong s_off, const uint rows, const uint t_cap, const uint d, __global float *G,
                        const ulong g_off, const uint ld_g) {
    const uint c = (uint)get_global_id(0);
    const uint r = (uint)get_global_id(1);
    if (c >= d || r >= rows) return;
    const int len = S[s_off + 2 * (ulong)r + 1];
    G[g_off + (ulong)r * ld_g + c] = len > 0 ? H[h_off + ((ulong)r * t_cap + (ulong)(len - 1)) * ld_h + c] : 0.0f;
}

/* Windows of positions as rows (1-D convolution over positions, the
 * phrase-based attentions' Conv_n as one GEMM over these rows):
 *   window_rows  Y[(s * t_out + t) * ld_y + i * d + c] = X[(s * n_cap + p) * ld_x + c],
 *                p = t * stride + i - pad, for window offset i < n, when
 *                0 <= p < len[s] (sequence s's valid positions), else 0.
 *                                                        [c, i, s * t_out + t] */
__kernel void window_rows(__global const float *X, const ulong x_off, const uint ld_x, const uint n_cap,
                          __global const int *len, const ulong len_off, const uint n_seq, const uint t_out,
                          const uint n, const uint stride, const uint pad, const uint d, __global float *Y,
                          const ulong y_off, const uint ld_y) {
    const uint c = (uint)get_global_id(0);
    const uint i = (uint)get_global_id(1);
    const uint r = (uint)get_global_id(2);
    if (c >= d || i >= n || r >= n_seq * t_out) return;
    const uint s = r / t_out, t = r % t_out;
    const long p = (long)t * stride + i - (long)pad;
    const int L = len[len_off + s];
    Y[y_off + (ulong)r * ld_y + (ulong)i * d + c] =
        p >= 0 && p < L ? X[x_off + ((ulong)s * n_cap + (ulong)p) * ld_x + c] : 0.0f;
}
