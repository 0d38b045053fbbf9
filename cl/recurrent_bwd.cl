/* SPDX-License-Identifier: MIT */
/* recurrent_bwd.cl — backward of cl/recurrent.cl (training only).
 *
 * Kernels (NDRange in brackets; surplus work-items return):
 *   lstm_cell_bwd      step t (taken from the last step down): with the
 *                      gate activations Z (and the master pre-activations),
 *                      cells C of lstm_cell, the gradient DH of the step's
 *                      output (row r = b * t_cap + t, the recurrent part
 *                      already added by the caller) and DC[b, j], the
 *                      gradient reaching c_t from step t + 1 (0 at the last
 *                      step of a sequence), writes the gradient of the
 *                      pre-activations i, f, g, o to DZ row r and replaces
 *                      DC[b, j] by the gradient of c_{t-1}.  ON-LSTM
 *                      (chunk > 0): unit j's parts of the gradients of its
 *                      chunk's master gates ft and it go to DM[b, j] and
 *                      DM[b, h + j] (onlstm_master_bwd sums them).  Steps
 *                      past the sequence give DZ = 0, DC = 0, DM = 0.
 *                                                                  [j, b]
 *   onlstm_master_bwd  step t, ON-LSTM: the gradient of the master
 *                      pre-activations of row r (DZ columns 4h .. 4h + 2m)
 *                      through cumax (y = cumsum(softmax(x)):
 *                      dx_l = s_l (sum_{k >= l} dy_k - sum_k s_k sum_{k' >= k} dy_k'))
 *                      from the per-unit parts in DM (it = 1 - cumax:
 *                      its dy is minus the sum).  Zero past the sequence. [b]
 *   gru_cell_bwd       GRU step t (taken from the last step down), the
 *                      backward of gru_cell: with its kept rows Z (r, u,
 *                      n, hn, h_prev at the step's data row, gru_step_row)
 *                      and DH[b, j], the gradient reaching the step's
 *                      state from later steps, plus DOUT at the data row
 *                      when present (d = DH + DOUT):
 *                        dn~ = d (1 - u) (1 - n^2)       (n's pre-activation)
 *                        du~ = d (h_prev - n) u (1 - u)
 *                        dr~ = dn~ hn r (1 - r)
 *                      DZ data row (ld_dz >= 4h) <- dr~, du~, dn~, dn~ r
 *                      (the gradients of x W_ih^T + b_ih, then of hn);
 *                      DG[b] (3h) <- dr~, du~, dn~ r (of h_prev W_hh^T +
 *                      b_hh) and DH[b, j] <- d u, the direct part of the
 *                      gradient of h_prev (the caller adds DG W_hh).  A
 *                      padding step zeroes DZ row b * t_cap + t and DG[b]
 *                      and leaves DH (the state passed through). [j, b]
 *   gru_scaled_input_dp
 *                      backward of gru_scaled_input for P: DP row
 *                      pr = s * s_cap + j += sum over the group's rows
 *                      b = s * group + k of A[b, j] DOUT[b * s_cap + j].
 *                                                                 [c, pr]
 *   gru_scaled_input_da
 *                      for A: DA[b, j] = (beta DA[b, j] +) the dot of
 *                      P[(b / group) * s_cap + j] and DOUT[b * s_cap + j]
 *                      over the n columns.                         [j, b]
 *   act_rows_bwd       backward of act_rows (pool 1: tanh, X its input;
 *                      pool 3: tanh, X its output; pool 2: maxout, X its
 *                      input, the gradient to the larger of each pair,
 *                      the first on a tie): DX[r, .] from DY[r, c], c < n
 *                      (DX overwritten).                           [c, r]
 *   weighted_rows_da   backward of weighted_rows for A: DA[b, j] += the
 *                      dot of X[b * s_cap + j] and DOUT[b] over n.  [j, b]
 *   weighted_rows_dx   for X: DX[b * s_cap + j, c] += A[b, j] DOUT[b, c].
 *                                                               [c, b * s_cap + j]
 *
 * Offsets and leading dimensions are in elements; addresses use ulong. */

__kernel void lstm_cell_bwd(__global const float *Z, const ulong z_off, __global const float *C, const ulong c_off,
                            __global const float *DH, const ulong dh_off, const uint ld_dh, __global float *DC,
                            const ulong dc_off, __global float *DZ, const ulong dz_off, __global float *DM,
                            const ulong dm_off, __global const int *count, const ulong count_off, const uint n_seq,
                            const uint t_cap, const uint t, const uint h, const uint chunk) {
    const uint j = (uint)get_global_id(0);
    const uint b = (uint)get_global_id(1);
    if (j >= h || b >= n_seq) return;
    const uint m = chunk ? h / chunk : 0, zw = 4 * h + 2 * m;
    const ulong r = (ulong)b * t_cap + t;
    __global float *dz = DZ + dz_off + r * zw;
    __global float *dc_carry = DC + dc_off + (ulong)b * h + j;
    if ((int)t >= count[count_off + b]) {
        dz[j] = dz[h + j] = dz[2 * h + j] = dz[3 * h + j] = 0.0f;
        *dc_carry = 0.0f;
        if (chunk) DM[dm_off + (ulong)b * 2 * h + j] = DM[dm_off + (ulong)b * 2 * h + h + j] = 0.0f;
        return;
    }
    __global const float *z = Z + z_off + r * zw;
    const float i = z[j], f = z[h + j], g = z[2 * h + j], o = z[3 * h + j];
    float ft = 0.0f, it = 0.0f, w = 1.0f, fh = f, ih = i;
    if (chunk) {
        const uint k = j / chunk;
        ft = cumax_at(z + 4 * h, m, k);
        it = 1.0f - cumax_at(z + 4 * h + m, m, k);
        w = ft * it;
        fh = f * w + (ft - w);
        ih = i * w + (it - w);
    }
    const float c = C[c_off + r * h + j], cp = t ? C[c_off + (r - 1) * h + j] : 0.0f;
    const float tc = tanh(c), dh = DH[dh_off + r * ld_dh + j];
    const float dc = *dc_carry + dh * o * (1.0f - tc * tc);
    const float dfh = dc * cp, dih = dc * g;
    dz[j] = dih * w * i * (1.0f - i);
    dz[h + j] = dfh * w * f * (1.0f - f);
    dz[2 * h + j] = dc * ih * (1.0f - g * g);
    dz[3 * h + j] = dh * tc * o * (1.0f - o);
    *dc_carry = dc * fh;
    if (chunk) {
        /* fh = f w + ft - w, ih = i w + it - w, w = ft it */
        const float dw = dfh * (f - 1.0f) + dih * (i - 1.0f);
        DM[dm_off + (ulong)b * 2 * h + j] = dfh + dw * it;
        DM[dm_off + (ulong)b * 2 * h + h + j] = dih + dw * ft;
    }
}

__kernel void onlstm_master_bwd(__global const float *Z, const ulong z_off, __global const float *DM,
                                const ulong dm_off, __global float *DZ, const ulong dz_off, __global const int *count,
                                const ulong count_off, const uint n_seq, const uint t_cap, const uint t, const uint h,
                                const uint chunk) {
    const uint b = (uint)get_global_id(0);
    if (b >= n_seq || chunk == 0) return;
    const uint m = h / chunk, zw = 4 * h + 2 * m;
    const ulong r = (ulong)b * t_cap + t;
    __global float *dzm = DZ + dz_off + r * zw + 4 * h;
    const int past = (int)t >= count[count_off + b];
    for (uint gate = 0; gate < 2; gate++) {
        __global const float *x = Z + z_off + r * zw + 4 * h + gate * m;
        __global const float *dm = DM + dm_off + (ulong)b * 2 * h + gate * h;
        const float sign = gate ? -1.0f : 1.0f; /* it = 1 - cumax */
        if (past) {
            for (uint l = 0; l < m; l++) dzm[gate * m + l] = 0.0f;
            continue;
        }
        float mx = x[0];
        for (uint l = 1; l < m; l++) mx = fmax(mx, x[l]);
        float sum = 0.0f;
        for (uint l = 0; l < m; l++) sum += exp(x[l] - mx);
        /* pass 1: dot = sum_l s_l ds_l, ds_l = sum_{k >= l} dy_k */
        float acc = 0.0f, dot = 0.0f;
        for (uint l = m; l-- > 0;) {
            float dy = 0.0f;
            for (uint q = 0; q < chunk; q++) dy += dm[l * chunk + q];
            acc += sign * dy;
            dot += exp(x[l] - mx) / sum * acc;
        }
        /* pass 2: dx_l = s_l (ds_l - dot) */
        acc = 0.0f;
        for (uint l = m; l-- > 0;) {
            float dy = 0.0f;
            for (uint q = 0; q < chunk; q++) dy += dm[l * chunk + q];
            acc += sign * dy;
            dzm[gate * m + l] = exp(x[l] - mx) / sum * (acc - dot);
        }
    }
}

__kernel void gru_cell_bwd(__global const float *Z, const ulong z_off, const uint ld_z, __global const float *DOUT,
                           const ulong dout_off, const uint ld_dout, __global float *DH, const ulong dh_off,
                           __global float *DZ, const ulong dz_off, const uint ld_dz, __global float *DG,
                           const ulong dg_off, __global const int *count, const ulong count_off, const uint n_seq,
                           const uint t_cap, const uint t, const uint h, const uint flags) {
    const uint j = (uint)get_global_id(0);
    const uint b = (uint)get_global_id(1);
    if (j >= h || b >= n_seq) return;
    ulong r;
    const int real = gru_step_row(count, count_off, flags & GRU_COUNT, b, t_cap, t, flags & GRU_REVERSE, &r);
    __global float *dz = DZ + dz_off + r * ld_dz;
    __global float *dg = DG + dg_off + (ulong)b * 3 * h;
    if (!real) {
        dz[j] = dz[h + j] = dz[2 * h + j] = dz[3 * h + j] = 0.0f;
        dg[j] = dg[h + j] = dg[2 * h + j] = 0.0f;
        return;
    }
    __global const float *z = Z + z_off + r * ld_z;
    const float rg = z[j], u = z[h + j], n = z[2 * h + j], hn = z[3 * h + j], hp = z[4 * h + j];
    __global float *dh = DH + dh_off + (ulong)b * h + j;
    const float d = *dh + ((flags & GRU_OUT) ? DOUT[dout_off + r * ld_dout + j] : 0.0f);
    const float dn = d * (1.0f - u) * (1.0f - n * n);
    const float du = d * (hp - n) * u * (1.0f - u);
    const float dr = dn * hn * rg * (1.0f - rg);
    dz[j] = dr;
    dz[h + j] = du;
    dz[2 * h + j] = dn;
    dz[3 * h + j] = dn * rg;
    dg[j] = dr;
    dg[h + j] = du;
    dg[2 * h + j] = dn * rg;
    *dh = d * u;
}

__kernel void gru_scaled_input_dp(__global const float *A, const ulong a_off, const uint ld_a,
                                  __global const float *DOUT, const ulong dout_off, const uint ld_dout,
                                  __global float *DP, const ulong dp_off, const uint ld_dp, const uint n_sent,
                                  const uint s_cap, const uint group, const uint n) {
    const uint c = (uint)get_global_id(0);
    const uint pr = (uint)get_global_id(1);
    if (c >= n || pr >= n_sent * s_cap) return;
    const uint s = pr / s_cap, j = pr % s_cap;
    float acc = 0.0f;
    for (uint k = 0; k < group; k++) {
        const ulong b = (ulong)s * group + k;
        acc += A[a_off + b * ld_a + j] * DOUT[dout_off + (b * s_cap + j) * ld_dout + c];
    }
    DP[dp_off + (ulong)pr * ld_dp + c] += acc;
}

__kernel void gru_scaled_input_da(__global const float *P, const ulong p_off, const uint ld_p,
                                  __global const float *DOUT, const ulong dout_off, const uint ld_dout,
                                  __global float *DA, const ulong da_off, const uint ld_da, const uint beta,
                                  const uint n_rows, const uint s_cap, const uint group, const uint n) {
    const uint j = (uint)get_global_id(0);
    const uint b = (uint)get_global_id(1);
    if (j >= s_cap || b >= n_rows) return;
    __global const float *p = P + p_off + ((ulong)(b / group) * s_cap + j) * ld_p;
    __global const float *d = DOUT + dout_off + ((ulong)b * s_cap + j) * ld_dout;
    float acc = 0.0f;
    for (uint c = 0; c < n; c++) acc += p[c] * d[c];
    __global float *da = DA + da_off + (ulong)b * ld_da + j;
    *da = beta ? *da + acc : acc;
}

__kernel void act_rows_bwd(__global const float *X, const ulong x_off, const uint ld_x, __global const float *DY,
                           const ulong dy_off, const uint ld_dy, __global float *DX, const ulong dx_off,
                           const uint ld_dx, const uint rows, const uint n, const uint pool) {
    const uint c = (uint)get_global_id(0);
    const uint r = (uint)get_global_id(1);
    if (c >= n || r >= rows) return;
    __global const float *x = X + x_off + (ulong)r * ld_x;
    __global float *dx = DX + dx_off + (ulong)r * ld_dx;
    const float dy = DY[dy_off + (ulong)r * ld_dy + c];
    if (pool == 2) {
        const int first = x[2 * c] >= x[2 * c + 1];
        dx[2 * c] = first ? dy : 0.0f;
        dx[2 * c + 1] = first ? 0.0f : dy;
    } else {
        const float y = pool == 3 ? x[c] : tanh(x[c]);
        dx[c] = (1.0f - y * y) * dy;
    }
}

__kernel void weighted_rows_da(__global const float *X, const ulong x_off, const uint ld_x, __global const float *DOUT,
                               const ulong dout_off, const uint ld_dout, __global float *DA, const ulong da_off,
                               const uint ld_da, const uint n_rows, const uint s_cap, const uint n) {
    const uint j = (uint)get_global_id(0);
    const uint b = (uint)get_global_id(1);
    if (j >= s_cap || b >= n_rows) return;
    __global const float *x = X + x_off + ((ulong)b * s_cap + j) * ld_x;
    __global const float *d = DOUT + dout_off + (ulong)b * ld_dout;
    float acc = 0.0f;
    for (uint c = 0; c < n; c++) acc += x[c] * d[c];
    DA[da_off + (ulong)b * ld_da + j] += acc;
}

__kernel void weighted_rows_dx(__global const float *A, const ulong a_off, const uint ld_a, __global const float *DOUT,
                               const ulong dout_off, const uint ld_dout, __global float *DX, const ulong dx_off,
                               const uint ld_dx, const uint n_rows, const uint s_cap, const uint n) {
    const uint c = (uint)get_global_id(0);
    const uint r = (uint)get_global_id(1);
    if (c >= n || r >= n_rows * s_cap) return;
    const uint b = r / s_cap, j = r % s_cap;
    DX[dx_off + (ulong)r * ld_dx + c] += A[a_off + (ulong)b * ld_a + j] * DOUT[dout_off + (ulong)b * ld_dout + c];
}
