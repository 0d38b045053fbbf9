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
