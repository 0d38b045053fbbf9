/* recurrent.cl — recurrent cells over time (runtime/layers.h
 * nmt_layer_lstm; docs/ARCHITECTURES.md): the pointwise half of a step.
 * The products (x W_ih^T for every step at once, h_{t-1} W_hh^T per step)
 * are the GEMMs of the op layer; these kernels apply the gates.
 *
 * Kernels (NDRange in brackets; surplus work-items return):
 *   lstm_cell  step t of n_seq sequences whose step-t rows are
 *              r = b * t_cap + t.  Z row r (4h wide) holds the
 *              pre-activations x W_ih^T + b + h_{t-1} W_hh^T in gate order
 *              i, f, g, o; the kernel replaces them by the activations
 *              sigmoid(i), sigmoid(f), tanh(g), sigmoid(o) and writes
 *                C[r, j] = f * c_{t-1} + i * g   (c_{-1} = 0, c_{t-1} = C[r - 1, j])
 *                H[r, j] = o * tanh(C[r, j]).
 *              Steps past the sequence (t >= count[b]) get zero gates,
 *              cell and output, so padding never enters a state.   [j, b]
 *
 * Offsets and leading dimensions are in elements; addresses use ulong. */

inline float nmt_sigmoid(const float x) { return 1.0f / (1.0f + exp(-x)); }

__kernel void lstm_cell(__global float *Z, const ulong z_off, __global float *C, const ulong c_off,
                        __global float *H, const ulong h_off, const uint ld_h, __global const int *count,
                        const ulong count_off, const uint n_seq, const uint t_cap, const uint t, const uint h) {
    const uint j = (uint)get_global_id(0);
    const uint b = (uint)get_global_id(1);
    if (j >= h || b >= n_seq) return;
    const ulong r = (ulong)b * t_cap + t;
    __global float *z = Z + z_off + r * 4 * h;
    if ((int)t >= count[count_off + b]) {
        z[j] = z[h + j] = z[2 * h + j] = z[3 * h + j] = 0.0f;
        C[c_off + r * h + j] = 0.0f;
        H[h_off + r * ld_h + j] = 0.0f;
        return;
    }
    const float i = nmt_sigmoid(z[j]), f = nmt_sigmoid(z[h + j]), g = tanh(z[2 * h + j]),
                o = nmt_sigmoid(z[3 * h + j]);
    const float cp = t ? C[c_off + (r - 1) * h + j] : 0.0f;
    const float c = f * cp + i * g;
    z[j] = i;
    z[h + j] = f;
    z[2 * h + j] = g;
    z[3 * h + j] = o;
    C[c_off + r * h + j] = c;
    H[h_off + r * ld_h + j] = o * tanh(c);
}
