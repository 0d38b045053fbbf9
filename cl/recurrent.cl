/* recurrent.cl — recurrent cells over time (runtime/layers.h
 * nmt_layer_lstm; docs/ARCHITECTURES.md): the pointwise half of a step.
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
 * Offsets and leading dimensions are in elements; addresses use ulong. */

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
