/* SPDX-License-Identifier: MIT */
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
 *                0 <= p < len[s] (sequence s's valid positions; every
 *                p < n_cap without has_len), else 0.
 *                                                        [c, i, s * t_out + t] */
__kernel void window_rows(__global const float *X, const ulong x_off, const uint ld_x, const uint n_cap,
                          __global const int *len, const ulong len_off, const int has_len, const uint n_seq,
                          const uint t_out, const uint n, const uint stride, const uint pad, const uint d, __global float *Y,
                          const ulong y_off, const uint ld_y) {
    const uint c = (uint)get_global_id(0);
    const uint i = (uint)get_global_id(1);
    const uint r = (uint)get_global_id(2);
    if (c >= d || i >= n || r >= n_seq * t_out) return;
    const uint s = r / t_out, t = r % t_out;
    const long p = (long)t * stride + i - (long)pad;
    const int L = has_len ? len[len_off + s] : (int)n_cap;
    Y[y_off + (ulong)r * ld_y + (ulong)i * d + c] =
        p >= 0 && p < L ? X[x_off + ((ulong)s * n_cap + (ulong)p) * ld_x + c] : 0.0f;
}

/* Phrase-based attention (issue 16; runtime/ops/ops.h nmt_pattn_args gives the
 * exact semantics).  P rows are (s * H + h) * lq + i with p_ld = n_segs *
 * lk_max columns; segment g's keys are columns col0 = g * lk_max + j.
 *   pattn_scores  one segment: P[row, col0 + j] = scale * sum over the
 *                 window taps u < n_win of q_u . K[j - n_win + 1 + u]
 *                 (rows before 0 add nothing) for a valid key (lo <= j <
 *                 n_keys, j <= pos when causal) of a query at pos >= q_lo,
 *                 -INF otherwise.
 *                                                      [j, i, s * H + h]
 *   pattn_softmax every segment at once: each row of P becomes its
 *                 softmax over the valid keys (-INF entries give 0; a row
 *                 without a valid key is all 0).              [i, s * H + h]
 *   pattn_apply   one segment: OUT[s * lq + i, h * dh + c] (+)= sum_j
 *                 P[row, col0 + j] * V[j, h * dh + c]; keys with P == 0
 *                 are skipped (their V rows may be unwritten).
 *                                                      [c, i, s * H + h] */
inline float pattn_score(__global const float *Q, const ulong q_off, const uint q_ld, const int has_q,
                         __global const float *QX, const ulong qx_off, const uint qx_ld, const uint n_ext,
                         __global const float *K, const ulong k_base, const uint k_ld, const uint qrow,
                         const uint h, const uint dh, const int j) {
    const uint n_win = n_ext + (has_q ? 1u : 0u);
    float acc = 0.0f;
    for (uint u = 0; u < n_win; u++) {
        const int kr = j - (int)n_win + 1 + (int)u;
        if (kr < 0) continue;
        __global const float *k = K + k_base + (ulong)kr * k_ld + (ulong)h * dh;
        __global const float *q = u < n_ext ? QX + qx_off + (ulong)qrow * qx_ld + ((ulong)h * n_ext + u) * dh
                                            : Q + q_off + (ulong)qrow * q_ld + (ulong)h * dh;
        for (uint c = 0; c < dh; c++) acc += q[c] * k[c];
    }
    return acc;
}

__kernel void pattn_scores(const uint n_seq, const uint lq, const uint q_pos0, const uint lk_max, const uint group,
                           const uint n_heads, const uint dh, const float scale,
                           __global const float *Q, const ulong q_off, const uint q_ld, const int has_q,
                           __global const float *QX, const ulong qx_off, const uint qx_ld, const uint n_ext,
                           __global const float *K, const ulong k_off, const uint k_ld, const ulong kv_stride,
                           __global const int *key_len, const ulong kl_off, const int has_key_len,
                           const uint key_len_const, const int causal, const uint lo, const uint q_lo,
                           __global float *P, const ulong p_off, const uint p_ld, const uint col0) {
    const uint j = (uint)get_global_id(0);
    const uint i = (uint)get_global_id(1);
    const uint sh = (uint)get_global_id(2);
    if (j >= lk_max || i >= lq || sh >= n_seq * n_heads) return;
    const uint s = sh / n_heads, h = sh - s * n_heads, m = s / group;
    const int n_keys = attn_key_count(key_len, kl_off, has_key_len, key_len_const, m, lk_max);
    const int pos = (int)(q_pos0 + i);
    const int ok = (int)j >= (int)lo && (int)j < n_keys && !(causal && (int)j > pos) && pos >= (int)q_lo;
    const ulong at = p_off + ((ulong)sh * lq + i) * p_ld + col0 + j;
    P[at] = ok ? scale * pattn_score(Q, q_off, q_ld, has_q, QX, qx_off, qx_ld, n_ext, K, k_off + (ulong)m * kv_stride,
                                     k_ld, s * lq + i, h, dh, (int)j)
               : -INFINITY;
}

__kernel void pattn_softmax(const uint rows, const uint p_ld, __global float *P, const ulong p_off) {
    const uint r = (uint)get_global_id(0);
    if (r >= rows) return;
    __global float *row = P + p_off + (ulong)r * p_ld;
    float mx = -INFINITY;
    for (uint j = 0; j < p_ld; j++) mx = fmax(mx, row[j]);
    if (mx == -INFINITY) {
        for (uint j = 0; j < p_ld; j++) row[j] = 0.0f;
        return;
    }
    float sum = 0.0f;
    for (uint j = 0; j < p_ld; j++) sum += row[j] == -INFINITY ? 0.0f : exp(row[j] - mx);
    const float inv = 1.0f / sum;
    for (uint j = 0; j < p_ld; j++) row[j] = row[j] == -INFINITY ? 0.0f : exp(row[j] - mx) * inv;
}

__kernel void pattn_apply(const uint n_seq, const uint lq, const uint lk_max, const uint group, const uint n_heads,
                          const uint dh, __global const float *V, const ulong v_off, const uint v_ld,
                          const ulong kv_stride, __global const float *P, const ulong p_off, const uint p_ld,
                          const uint col0, const int accumulate, __global float *OUT, const ulong out_off,
                          const uint out_ld) {
    const uint c = (uint)get_global_id(0);
    const uint i = (uint)get_global_id(1);
    const uint sh = (uint)get_global_id(2);
    if (c >= dh || i >= lq || sh >= n_seq * n_heads) return;
    const uint s = sh / n_heads, h = sh - s * n_heads, m = s / group;
    __global const float *prow = P + p_off + ((ulong)sh * lq + i) * p_ld + col0;
    __global const float *vcol = V + v_off + (ulong)m * kv_stride + (ulong)h * dh + c;
    float acc = 0.0f;
    for (uint j = 0; j < lk_max; j++) {
        const float p = prow[j];
        if (p != 0.0f) acc += p * vcol[(ulong)j * v_ld];
    }
    const ulong o = out_off + (ulong)(s * lq + i) * out_ld + (ulong)h * dh + c;
    OUT[o] = accumulate ? OUT[o] + acc : acc;
}

/* pattn_fused: the whole of nmt_op_pattn in one launch, one work-item per
 * query row (s * H + h, i), for d_head <= PATTN_MAX_DH: pass 1 writes
 * every segment's scores (or -INF) into the row of P and finds the max;
 * pass 2 accumulates exp(score - max) * v in private memory; the output
 * is divided by the sum, and P normalised when write_p.  Segment g's
 * tensors are Q<g>, QX<g>, K<g>, V<g> with component g of the vector
 * arguments (offsets, strides, taps, first key, has_q).  With has_kv_row,
 * every segment's key and value at position p of sequence m are those of
 * sequence kv_row[kr_off + p * kr_ld + m] (a beam's rows reading their
 * history where it was written; runtime/ops/ops.h nmt_pattn_args.kv_row).
 *                                                      [s * H + h, i] */
#ifndef PATTN_MAX_DH
#define PATTN_MAX_DH 128
#endif
#define PSEL(v, g) ((g) == 0 ? (v).s0 : (g) == 1 ? (v).s1 : (g) == 2 ? (v).s2 : (v).s3)
#define PSELP(a, b, c, d, g) ((g) == 0 ? (a) : (g) == 1 ? (b) : (g) == 2 ? (c) : (d))

__kernel void pattn_fused(const uint n_seq, const uint lq, const uint q_pos0, const uint lk_max, const uint group,
                          const uint n_heads, const uint dh, const uint n_segs,
                          __global const int *key_len, const ulong kl_off, const int has_key_len,
                          const uint key_len_const, const int causal, const uint q_lo,
                          __global const float *Q0, __global const float *Q1, __global const float *Q2,
                          __global const float *Q3, __global const float *QX0, __global const float *QX1,
                          __global const float *QX2, __global const float *QX3, __global const float *K0,
                          __global const float *K1, __global const float *K2, __global const float *K3,
                          __global const float *V0, __global const float *V1, __global const float *V2,
                          __global const float *V3, const ulong4 q_off, const ulong4 qx_off, const ulong4 k_off,
                          const ulong4 v_off, const uint4 q_ld, const uint4 qx_ld, const uint4 k_ld, const uint4 v_ld,
                          const ulong4 k_stride, const ulong4 v_stride, const uint4 n_ext, const uint4 lo,
                          const int4 has_q, __global const int *kv_row, const ulong kr_off, const uint kr_ld,
                          const int has_kv_row, __global float *P, const ulong p_off, const int write_p,
                          __global float *OUT, const ulong out_off, const uint out_ld) {
    const uint sh = (uint)get_global_id(0);
    const uint i = (uint)get_global_id(1);
    if (sh >= n_seq * n_heads || i >= lq) return;
    const uint s = sh / n_heads, h = sh - s * n_heads, m = s / group, p_ld = n_segs * lk_max;
    const int n_keys = attn_key_count(key_len, kl_off, has_key_len, key_len_const, m, lk_max);
    const int pos = (int)(q_pos0 + i);
    const int hi = pos < (int)q_lo ? -1 : causal ? min(n_keys - 1, pos) : n_keys - 1;
    const uint qrow = s * lq + i;
    __global float *prow = P + p_off + ((ulong)sh * lq + i) * p_ld;
    __global const int *kr_m = kv_row + kr_off + m; /* has_kv_row: position p of sequence m in kr_m[p * kr_ld] */
    float mx = -INFINITY;
    for (uint g = 0; g < n_segs; g++) {
        const uint ne = PSEL(n_ext, g), hq = PSEL(has_q, g) ? 1u : 0u, nw = ne + hq;
        const float scale = rsqrt((float)(nw * dh));
        const ulong kst = PSEL(k_stride, g);
        __global const float *Kg = PSELP(K0, K1, K2, K3, g) + PSEL(k_off, g) + (ulong)h * dh;
        __global const float *qm = PSELP(Q0, Q1, Q2, Q3, g) + PSEL(q_off, g) + (ulong)qrow * PSEL(q_ld, g) +
                                   (ulong)h * dh;
        __global const float *qx = PSELP(QX0, QX1, QX2, QX3, g) + PSEL(qx_off, g) + (ulong)qrow * PSEL(qx_ld, g) +
                                   (ulong)h * ne * dh;
        const uint kld = PSEL(k_ld, g);
        const int j0 = (int)PSEL(lo, g);
        for (int j = 0; j < (int)lk_max; j++) {
            float sc = -INFINITY;
            if (j >= j0 && j <= hi) {
                float acc = 0.0f;
                for (uint u = 0; u < nw; u++) {
                    const int kr = j - (int)nw + 1 + (int)u;
                    if (kr < 0) continue;
                    const ulong seq = has_kv_row ? (ulong)(uint)kr_m[(ulong)kr * kr_ld] : (ulong)m;
                    __global const float *k = Kg + seq * kst + (ulong)kr * kld;
                    __global const float *q = u < ne ? qx + (ulong)u * dh : qm;
                    float4 a4 = (float4)(0.0f);
                    const uint D4 = dh & ~3u;
                    for (uint c = 0; c < D4; c += 4) a4 += vload4(0, q + c) * vload4(0, k + c);
                    acc += (a4.x + a4.y) + (a4.z + a4.w);
                    for (uint c = D4; c < dh; c++) acc += q[c] * k[c];
                }
                sc = acc * scale;
                mx = fmax(mx, sc);
            }
            prow[g * lk_max + j] = sc;
        }
    }
    float acc[PATTN_MAX_DH];
    for (uint c = 0; c < dh; c++) acc[c] = 0.0f;
    float sum = 0.0f;
    if (mx != -INFINITY)
        for (uint g = 0; g < n_segs; g++) {
            const ulong vst = PSEL(v_stride, g);
            __global const float *Vg = PSELP(V0, V1, V2, V3, g) + PSEL(v_off, g) + (ulong)h * dh;
            const uint vld = PSEL(v_ld, g);
            for (uint j = 0; j < lk_max; j++) {
                const float sc = prow[g * lk_max + j];
                if (sc == -INFINITY) continue;
                const float p = exp(sc - mx);
                sum += p;
                const ulong seq = has_kv_row ? (ulong)(uint)kr_m[(ulong)j * kr_ld] : (ulong)m;
                __global const float *v = Vg + seq * vst + (ulong)j * vld;
                for (uint c = 0; c < dh; c++) acc[c] = p * v[c] + acc[c];
            }
        }
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    __global float *o = OUT + out_off + (ulong)qrow * out_ld + (ulong)h * dh;
    for (uint c = 0; c < dh; c++) o[c] = acc[c] * inv;
    if (write_p)
        for (uint j = 0; j < p_ld; j++) prow[j] = prow[j] == -INFINITY ? 0.0f : exp(prow[j] - mx) * inv;
}
