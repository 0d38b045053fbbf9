/* SPDX-License-Identifier: MIT */
/* recurrent.cl — recurrent cells over time (runtime/ops/layers.h
 * nmt_layer_lstm, nmt_layer_gru; docs/ARCHITECTURES.md): the pointwise
 * half of a step.
 * The products (x W_ih^T for every step at once, h_{t-1} W_hh^T per step)
 * are the GEMMs of the op layer; these kernels apply the gates.
 *
 * Kernels (NDRange in brackets; surplus work-items return):
 *   lstm_cell  step t of n_seq sequences whose step-t rows are
 *              r = b * t_cap + t.  Z row r (zw = 4h + 2m wide, m = h /
 *              chunk master units for ON-LSTM, m = 0 for chunk 0) holds
 *              the pre-activations x W_ih^T + b + h_{t-1} W_hh^T in the
 *              order i, f, g, o (h each), then ON-LSTM's master forget and
 *              master input gates (m each).  The kernel replaces i, f, g, o
 *              by sigmoid(i), sigmoid(f), tanh(g), sigmoid(o) (the master
 *              pre-activations stay: the backward recomputes them) and
 *              writes
 *                LSTM     C[r, j] = f c_{t-1} + i g
 *                ON-LSTM  ft = cumax(master f)[k], it = 1 - cumax(master i)[k],
 *                         k = j / chunk, cumax = cumulative sum of softmax,
 *                         w = ft it, fh = f w + (ft - w), ih = i w + (it - w),
 *                         C[r, j] = fh c_{t-1} + ih g
 *                H[r, j] = o tanh(C[r, j])
 *              (c_{-1} = 0, c_{t-1} = C[r - 1, j]).  Steps past the
 *              sequence (t >= count[b]) get zero gates, cell and output, so
 *              padding never enters a state.                      [j, b]
 *
 *   gru_cell   GRU step t (cuDNN / PyTorch form, ops.h nmt_op_gru_cell)
 *              of n_seq state rows b.  The step's data row is
 *              r = b * t_cap + t, or b * t_cap + len - 1 - t when reverse
 *              (len = min(count[b], t_cap); gru_step_row of common.cl).  Z
 *              row r (ld_z >= 5h) holds the input pre-activations
 *              x W_ih^T + b_ih in columns 0 .. 3h (order r, z, n); HG row
 *              b the recurrent ones h_prev W_hh^T + b_hh (ld_hg 0: one row
 *              for all; absent: zeros), HP row b the previous state
 *              (absent: zeros).  The kernel writes
 *                r = sigmoid(xr + hr), u = sigmoid(xz + hz),
 *                n = tanh(xn + r hn), h' = (1 - u) n + u h_prev
 *              to HS row b (may be HP: in place) and OUT row r (when
 *              present), and keeps r, u, n, hn, h_prev in Z row r columns
 *              0 .. 5h for the backward.  A step past the sequence keeps
 *              the state (HS = h_prev) and writes zeros to Z and OUT row
 *              b * t_cap + t.                                    [j, b]
 *   gru_scaled_input
 *              the input pre-activations of GRUs whose input is a shared
 *              projection scaled per row (BA-NMT's history GRUs:
 *              alpha_bj (h_j W_ih^T)): OUT row r = b * s_cap + j gets
 *              A[b, j] P[(b / group) * s_cap + j] + bias (bias absent:
 *              none); n columns.                                 [c, r]
 *   act_rows   OUT[r, c] = tanh(X[r, c]) (pool 1; may be in place) or
 *              max(X[r, 2c], X[r, 2c + 1]) (pool 2, maxout), c < n
 *              (BA-NMT's initial state and readout)             [c, r]
 *   weighted_rows
 *              OUT[b, c] = sum_{j < s_cap} A[b, j] X[b * s_cap + j, c]
 *              (X absent: zeros; BA-NMT's history sums)         [c, b]
 *   lookup_q8  OUT[r, c] = Q[tok[r], c] * qscale[tok[r]]: an int8
 *              embedding without position terms (RNN families)  [c, r]
 *
 * Defines: none.  Offsets and leading dimensions are in elements;
 * addresses use ulong. */

inline float nmt_sigmoid(const float x) { return 1.0f / (1.0f + exp(-x)); }

__kernel void lstm_cell(__global float *Z, const ulong z_off, __global float *C, const ulong c_off,
                        __global float *H, const ulong h_off, const uint ld_h, __global const int *count,
                        const ulong count_off, const uint n_seq, const uint t_cap, const uint t, const uint h,
                        const uint chunk) {
    const uint j = (uint)get_global_id(0);
    const uint b = (uint)get_global_id(1);
    if (j >= h || b >= n_seq) return;
    const uint m = chunk ? h / chunk : 0;
    const ulong r = (ulong)b * t_cap + t;
    __global float *z = Z + z_off + r * (4 * h + 2 * m);
    if ((int)t >= count[count_off + b]) {
        z[j] = z[h + j] = z[2 * h + j] = z[3 * h + j] = 0.0f;
        C[c_off + r * h + j] = 0.0f;
        H[h_off + r * ld_h + j] = 0.0f;
        return;
    }
    const float i = nmt_sigmoid(z[j]), f = nmt_sigmoid(z[h + j]), g = tanh(z[2 * h + j]),
                o = nmt_sigmoid(z[3 * h + j]);
    float fh = f, ih = i;
    if (chunk) {
        const uint k = j / chunk;
        const float ft = cumax_at(z + 4 * h, m, k), it = 1.0f - cumax_at(z + 4 * h + m, m, k);
        const float w = ft * it;
        fh = f * w + (ft - w);
        ih = i * w + (it - w);
    }
    const float cp = t ? C[c_off + (r - 1) * h + j] : 0.0f;
    const float c = fh * cp + ih * g;
    z[j] = i;
    z[h + j] = f;
    z[2 * h + j] = g;
    z[3 * h + j] = o;
    C[c_off + r * h + j] = c;
    H[h_off + r * ld_h + j] = o * tanh(c);
}

__kernel void gru_cell(__global float *Z, const ulong z_off, const uint ld_z, __global const float *HG,
                       const ulong hg_off, const uint ld_hg, __global const float *HP, const ulong hp_off,
                       const uint ld_hp, __global float *HS, const ulong hs_off, const uint ld_hs, __global float *OUT,
                       const ulong out_off, const uint ld_out, __global const int *count, const ulong count_off,
                       const uint n_seq, const uint t_cap, const uint t, const uint h, const uint flags) {
    const uint j = (uint)get_global_id(0);
    const uint b = (uint)get_global_id(1);
    if (j >= h || b >= n_seq) return;
    ulong r;
    const int real = gru_step_row(count, count_off, flags & GRU_COUNT, b, t_cap, t, flags & GRU_REVERSE, &r);
    __global float *z = Z + z_off + r * ld_z;
    const float hp = (flags & GRU_HP) ? HP[hp_off + (ulong)b * ld_hp + j] : 0.0f;
    if (!real) {
        z[j] = z[h + j] = z[2 * h + j] = z[3 * h + j] = z[4 * h + j] = 0.0f;
        HS[hs_off + (ulong)b * ld_hs + j] = hp;
        if (flags & GRU_OUT) OUT[out_off + r * ld_out + j] = 0.0f;
        return;
    }
    float hr = 0.0f, hz = 0.0f, hn = 0.0f;
    if (flags & GRU_HG) {
        __global const float *g = HG + hg_off + (ulong)b * ld_hg;
        hr = g[j];
        hz = g[h + j];
        hn = g[2 * h + j];
    }
    const float rg = nmt_sigmoid(z[j] + hr), u = nmt_sigmoid(z[h + j] + hz);
    const float n = tanh(z[2 * h + j] + rg * hn);
    const float hnew = (1.0f - u) * n + u * hp;
    z[j] = rg;
    z[h + j] = u;
    z[2 * h + j] = n;
    z[3 * h + j] = hn;
    z[4 * h + j] = hp;
    HS[hs_off + (ulong)b * ld_hs + j] = hnew;
    if (flags & GRU_OUT) OUT[out_off + r * ld_out + j] = hnew;
}

__kernel void gru_scaled_input(__global const float *P, const ulong p_off, const uint ld_p, __global const float *A,
                               const ulong a_off, const uint ld_a, __global const float *BIAS, const ulong bias_off,
                               const uint has_bias, __global float *OUT, const ulong out_off, const uint ld_out,
                               const uint n_rows, const uint s_cap, const uint group, const uint n) {
    const uint c = (uint)get_global_id(0);
    const uint r = (uint)get_global_id(1);
    if (c >= n || r >= n_rows * s_cap) return;
    const uint b = r / s_cap, j = r % s_cap;
    const ulong pr = (ulong)(b / group) * s_cap + j;
    const float v = A[a_off + (ulong)b * ld_a + j] * P[p_off + pr * ld_p + c];
    OUT[out_off + (ulong)r * ld_out + c] = has_bias ? v + BIAS[bias_off + c] : v;
}

__kernel void act_rows(__global const float *X, const ulong x_off, const uint ld_x, __global float *OUT,
                       const ulong out_off, const uint ld_out, const uint rows, const uint n, const uint pool) {
    const uint c = (uint)get_global_id(0);
    const uint r = (uint)get_global_id(1);
    if (c >= n || r >= rows) return;
    __global const float *x = X + x_off + (ulong)r * ld_x;
    OUT[out_off + (ulong)r * ld_out + c] = pool == 2 ? fmax(x[2 * c], x[2 * c + 1]) : tanh(x[c]);
}

__kernel void weighted_rows(__global const float *X, const ulong x_off, const uint ld_x, const uint has_x,
                            __global const float *A, const ulong a_off, const uint ld_a, __global float *OUT,
                            const ulong out_off, const uint ld_out, const uint n_rows, const uint s_cap,
                            const uint n) {
    const uint c = (uint)get_global_id(0);
    const uint b = (uint)get_global_id(1);
    if (c >= n || b >= n_rows) return;
    float acc = 0.0f;
    if (has_x)
        for (uint j = 0; j < s_cap; j++)
            acc += A[a_off + (ulong)b * ld_a + j] * X[x_off + ((ulong)b * s_cap + j) * ld_x + c];
    OUT[out_off + (ulong)b * ld_out + c] = acc;
}

__kernel void lookup_q8(__global const int *tok, const ulong tok_off, const uint rows, __global const char *Q,
                        const ulong q_off, __global const float *qscale, const ulong s_off, const uint d,
                        __global float *OUT, const ulong out_off, const uint ld_out) {
    const uint c = (uint)get_global_id(0);
    const uint r = (uint)get_global_id(1);
    if (c >= d || r >= rows) return;
    const ulong t = (ulong)tok[tok_off + r];
    OUT[out_off + (ulong)r * ld_out + c] = (float)Q[q_off + t * d + c] * qscale[s_off + t];
}
