/* recurrent_bwd.cl — backward of cl/recurrent.cl (training only).
 *
 * Kernels (NDRange in brackets; surplus work-items return):
 *   lstm_cell_bwd  step t (taken from the last step down): with the gate
 *                  activations Z, cells C of lstm_cell, the gradient DH of
 *                  the step's output (row r = b * t_cap + t, the recurrent
 *                  part already added by the caller) and DC[b, j], the
 *                  gradient reaching c_t from step t + 1 (0 at the last
 *                  step of a sequence), writes the gradient of the
 *                  pre-activations DZ row r (gate order i, f, g, o) and
 *                  replaces DC[b, j] by the gradient of c_{t-1}.  Steps
 *                  past the sequence give DZ = 0 and DC = 0.       [j, b]
 *
 * Offsets and leading dimensions are in elements; addresses use ulong. */

__kernel void lstm_cell_bwd(__global const float *Z, const ulong z_off, __global const float *C, const ulong c_off,
                            __global const float *DH, const ulong dh_off, const uint ld_dh, __global float *DC,
                            const ulong dc_off, __global float *DZ, const ulong dz_off, __global const int *count,
                            const ulong count_off, const uint n_seq, const uint t_cap, const uint t, const uint h) {
    const uint j = (uint)get_global_id(0);
    const uint b = (uint)get_global_id(1);
    if (j >= h || b >= n_seq) return;
    const ulong r = (ulong)b * t_cap + t;
    __global float *dz = DZ + dz_off + r * 4 * h;
    __global float *dc_carry = DC + dc_off + (ulong)b * h + j;
    if ((int)t >= count[count_off + b]) {
        dz[j] = dz[h + j] = dz[2 * h + j] = dz[3 * h + j] = 0.0f;
        *dc_carry = 0.0f;
        return;
    }
    __global const float *z = Z + z_off + r * 4 * h;
    const float i = z[j], f = z[h + j], g = z[2 * h + j], o = z[3 * h + j];
    const float c = C[c_off + r * h + j], cp = t ? C[c_off + (r - 1) * h + j] : 0.0f;
    const float tc = tanh(c), dh = DH[dh_off + r * ld_dh + j];
    const float dc = *dc_carry + dh * o * (1.0f - tc * tc);
    dz[j] = dc * g * i * (1.0f - i);
    dz[h + j] = dc * cp * f * (1.0f - f);
    dz[2 * h + j] = dc * i * (1.0f - g * g);
    dz[3 * h + j] = dh * tc * o * (1.0f - o);
    *dc_carry = dc * f;
}
