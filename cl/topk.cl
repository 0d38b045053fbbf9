/* topk.cl — the beam search's candidates on the device (runtime/ops_topk.c,
 * nmt_op_topk_logprobs): the log-softmax of each row of logits fused with a
 * top-k selection, so that a decoder step reads back k candidates per row
 * instead of the whole vocabulary (issue 22).
 *
 *   topk_logprobs  row r of X (n logits, stride ld), one work-group of
 *                  REDUCE_WG (or fewer, a power of two) work-items per row:
 *                  lse = max + log(sum exp(x - max)) by exactly the passes
 *                  of elementwise.cl's log_softmax (the same strided online
 *                  pass and tree, so the same bits at the same local size;
 *                  a row without a finite entry has lse = 0), lp_v = x_v - lse,
 *                  key_v = score[r] + lp_v (the beam's cumulative score of
 *                  the row: the same float sum the host forms, so the
 *                  ranking is the host's).  The k entries of largest key,
 *                  ties to the lower id, NaN keys never: in rank order,
 *                  lp at out[r*k + i], the id at out[rows*k + r*k + i]
 *                  (lp bits, as_uint); missing entries (n < k) lp -inf, id -1.
 *                  out[2*rows*k + r] = lp_eos.  A row whose score is not
 *                  > -inf (a dead beam) is not searched: every entry and
 *                  its lp_eos missing.
 *                  NDRange (rows * lsz), local size lsz.
 *
 * Defines: REDUCE_WG (the local buffers' capacity, the largest local size),
 * TOPK_MAX (the largest k). */

#ifndef TOPK_MAX
#define TOPK_MAX 33
#endif

/* (a, ia) ranks before (b, ib): larger key, then lower id. */
static inline int ranks_before(const float a, const int ia, const float b, const int ib) {
    return a > b || (a == b && ia < ib);
}

__kernel void topk_logprobs(__global const float *X, const ulong x_off, const uint n, const uint ld,
                            __global const float *score, const ulong s_off, const uint rows, const uint k,
                            const uint eos, __global uint *out, const ulong out_off) {
    __local float red_m[REDUCE_WG];
    __local float red_s[REDUCE_WG];
    __local int red_i[REDUCE_WG];
    const uint lid = (uint)get_local_id(0), lsz = (uint)get_local_size(0);
    const uint r = (uint)get_group_id(0);
    __global const float *x = X + x_off + (ulong)r * ld;
    __global uint *o_lp = out + out_off + (ulong)r * k;
    __global uint *o_id = out + out_off + (ulong)rows * k + (ulong)r * k;
    const float s0 = score[s_off + r];
    if (!(s0 > -INFINITY)) { /* the same for the whole group: no barrier is skipped by some only */
        for (uint i = lid; i < k; i += lsz) {
            o_lp[i] = as_uint(-INFINITY);
            o_id[i] = (uint)-1;
        }
        if (lid == 0) out[out_off + 2 * (ulong)rows * k + r] = as_uint(-INFINITY);
        return;
    }

    /* lse: elementwise.cl's log_softmax, pass for pass. */
    float m = -INFINITY, s = 0.0f;
    for (uint c = lid; c < n; c += lsz) {
        const float v = x[c];
        if (v > m) {
            s = s * exp(m - v) + 1.0f;
            m = v;
        } else {
            s += exp(v - m);
        }
    }
    if (m == -INFINITY) s = 0.0f;
    red_m[lid] = m;
    red_s[lid] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint w = lsz / 2; w > 0; w >>= 1) {
        if (lid < w) {
            const float m1 = red_m[lid], m2 = red_m[lid + w];
            const float mm = fmax(m1, m2);
            if (mm != -INFINITY) red_s[lid] = red_s[lid] * exp(m1 - mm) + red_s[lid + w] * exp(m2 - mm);
            red_m[lid] = mm;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float mx = red_m[0];
    const float lse = mx == -INFINITY ? 0.0f : mx + log(red_s[0]);
    barrier(CLK_LOCAL_MEM_FENCE); /* everyone has read red_m[0] before it is reused */

    /* Each work-item's best k of its strided entries, sorted. */
    float tk[TOPK_MAX];
    int ti[TOPK_MAX];
    uint cnt = 0;
    for (uint c = lid; c < n; c += lsz) {
        const float key = s0 + (x[c] - lse);
        if (key != key) continue; /* NaN */
        if (cnt == k && !ranks_before(key, (int)c, tk[k - 1], ti[k - 1])) continue;
        uint i = cnt < k ? cnt++ : k - 1;
        while (i > 0 && ranks_before(key, (int)c, tk[i - 1], ti[i - 1])) {
            tk[i] = tk[i - 1];
            ti[i] = ti[i - 1];
            i--;
        }
        tk[i] = key;
        ti[i] = (int)c;
    }

    /* k rounds: the best head of all lists wins, its owner moves on. */
    uint head = 0;
    for (uint j = 0; j < k; j++) {
        red_m[lid] = head < cnt ? tk[head] : -INFINITY;
        red_i[lid] = head < cnt ? ti[head] : INT_MAX;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint w = lsz / 2; w > 0; w >>= 1) {
            if (lid < w && ranks_before(red_m[lid + w], red_i[lid + w], red_m[lid], red_i[lid])) {
                red_m[lid] = red_m[lid + w];
                red_i[lid] = red_i[lid + w];
            }
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        const int win = red_i[0];
        if (lid == 0) {
            o_lp[j] = as_uint(win == INT_MAX ? -INFINITY : x[win] - lse);
            o_id[j] = win == INT_MAX ? (uint)-1 : (uint)win;
        }
        if (head < cnt && ti[head] == win) head++;
        barrier(CLK_LOCAL_MEM_FENCE); /* red_i[0] read by all before the next round */
    }
    if (lid == 0) out[out_off + 2 * (ulong)rows * k + r] = as_uint(eos < n ? x[eos] - lse : -INFINITY);
}
