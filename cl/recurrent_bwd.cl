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
