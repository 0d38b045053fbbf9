/* topk.cl — the beam search's candidates on the device (runtime/ops_topk.c,
 * nmt_op_topk_logprobs): the log-softmax of each row of logits fused with a
 * top-k selection, so that a decoder step reads back k candidates per row
 * instead of the whole vocabulary (issue 22).
 *
 *   topk_logprobs  row r of X (n logits, stride ld), one work-group of
 *                  REDUCE_WG (or fewer, a power of two) work-items per row:
 *                  lse = max + log(sum exp(x - max)) by common.cl's
 *                  row_logsumexp, as elementwise.cl's log_softmax (the same
 *                  bits at the same local size; a row without a finite
 *                  entry has lse = 0), lp_v = x_v - lse,
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
 *                  pick != 0 (greedy steps chained on the device, runtime/
 *                  session.c): then the row's next token is its first
 *                  ranked entry whose key is > -inf and, with pick = 2
 *                  (EOS barred), not EOS — the candidate the host's beam
 *                  takes at beam 1 — or EOS when there is none:
 *                  tok[tok_off + r] = its id, score[s_off + r] = its key
 *                  (the row's cumulative score, as the host forms it).  A
 *                  dead row is left as it is.
 *
 *                  The k-th largest of the work-items' maxima bounds the
 *                  keys worth ranking; each work-item keeps the best k of
 *                  its entries above it (private, sorted), writes
 *                  them to local memory, and
 *                  work-item 0 merges the lists: one barrier, no per-rank
 *                  reduction rounds.
 *
 * Defines: REDUCE_WG (the local buffers' capacity, the largest local size),
 * TOPK_MAX (the largest k; local memory holds REDUCE_WG * TOPK_MAX keys and
 * ids, runtime/ops_topk.c sizes it to the device), NMT_SUBGROUPS (defined:
 * row_logsumexp by subgroups, as log_softmax's program; runtime/ops_sg.c). */

#ifndef REDUCE_WG
#define REDUCE_WG 64
#endif
#ifndef TOPK_MAX
#define TOPK_MAX 17
#endif

/* (a, ia) ranks before (b, ib): larger key, then lower id. */
static inline int ranks_before(const float a, const int ia, const float b, const int ib) {
    return a > b || (a == b && ia < ib);
}

/* Entry (key, id) into the sorted list tk/ti of cnt (at most k) entries when
 * it is at or above key_min (not NaN) and among the best k; the new count. */
static inline uint topk_insert(float *tk, int *ti, uint cnt, const uint k, const float key, const int id,
                               const float key_min) {
    if (!(key >= key_min)) return cnt; /* below the bound, or NaN */
    if (cnt == k && !ranks_before(key, id, tk[k - 1], ti[k - 1])) return cnt;
    uint i = cnt < k ? cnt++ : k - 1;
    while (i > 0 && ranks_before(key, id, tk[i - 1], ti[i - 1])) {
        tk[i] = tk[i - 1];
        ti[i] = ti[i - 1];
        i--;
    }
    tk[i] = key;
    ti[i] = id;
    return cnt;
}

__kernel void topk_logprobs(__global const float *X, const ulong x_off, const uint n, const uint ld,
                            __global float *score, const ulong s_off, const uint rows, const uint k,
                            const uint eos, __global uint *out, const ulong out_off, const uint pick,
                            __global int *tok, const ulong tok_off) {
    __local float red_m[REDUCE_WG];
    __local float red_s[REDUCE_WG];
    __local float list_k[REDUCE_WG * TOPK_MAX]; /* each work-item's best k: keys, ids */
    __local int list_i[REDUCE_WG * TOPK_MAX];
    __local float item_max[REDUCE_WG]; /* each work-item's largest logit */
    __local float thr[1];              /* the bound on the keys worth ranking */
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

    /* lse: common.cl's row_logsumexp, as log_softmax (0 for a row without a finite entry, which
     * log_softmax leaves as it is) */
    float mw;
    float lse = row_logsumexp(x, n, red_m, red_s, &mw);
    if (lse == -INFINITY) lse = 0.0f;

    /* A bound: the k-th largest of the work-items' maxima T is an entry, and
     * at least k entries are >= T, so an entry whose key is below key(T)
     * cannot be among the k best (keys are monotone in x).  Only the
     * entries at or above it are ranked (few: the pass stays a compare). */
    item_max[lid] = mw; /* from row_logsumexp's pass */
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0) {
        float best[TOPK_MAX];
        uint nb = 0;
        for (uint w = 0; w < lsz; w++) {
            const float v = item_max[w];
            if (nb == k && !(v > best[k - 1])) continue;
            uint i = nb < k ? nb++ : k - 1;
            while (i > 0 && v > best[i - 1]) {
                best[i] = best[i - 1];
                i--;
            }
            best[i] = v;
        }
        thr[0] = nb == k ? s0 + (best[k - 1] - lse) : -INFINITY;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    const float key_min = thr[0];

    /* Each work-item's best k of its entries (row_logsumexp's chunks) at or
     * above the bound, sorted.  A float8 chunk is tested at once; the few
     * entries at or above the bound are inserted one by one. */
    float tk[TOPK_MAX];
    int ti[TOPK_MAX];
    uint cnt = 0;
    const uint nv = n / 8;
    for (uint q = lid; q < nv; q += lsz) {
        const float8 kv = s0 + (vload8(q, x) - lse);
        if (!any(kv >= key_min)) continue; /* all below the bound, or NaN */
        const float kk[8] = {kv.s0, kv.s1, kv.s2, kv.s3, kv.s4, kv.s5, kv.s6, kv.s7};
        for (uint e = 0; e < 8; e++) cnt = topk_insert(tk, ti, cnt, k, kk[e], (int)(8 * q + e), key_min);
    }
    for (uint c = nv * 8 + lid; c < n; c += lsz) cnt = topk_insert(tk, ti, cnt, k, s0 + (x[c] - lse), (int)c, key_min);

    /* The lists into local memory (missing entries: key -inf, id INT_MAX),
     * then work-item 0 merges them: each list is sorted, so a list is left
     * at its first entry that does not beat the k-th best so far. */
    for (uint i = 0; i < k; i++) {
        list_k[lid * k + i] = i < cnt ? tk[i] : -INFINITY;
        list_i[lid * k + i] = i < cnt ? ti[i] : INT_MAX;
    }
    /* the global fence: every work-item's read of score[] above is done
     * before work-item 0 writes it (pick) */
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    if (lid != 0) return;
    uint m = 0;
    for (uint w = 0; w < lsz; w++)
        for (uint j = 0; j < k; j++) {
            const float key = list_k[w * k + j];
            const int id = list_i[w * k + j];
            if (id == INT_MAX || (m == k && !ranks_before(key, id, tk[k - 1], ti[k - 1]))) break;
            m = topk_insert(tk, ti, m, k, key, id, -INFINITY); /* list keys are never NaN */
        }
    for (uint j = 0; j < k; j++) {
        o_lp[j] = as_uint(j < m ? x[ti[j]] - lse : -INFINITY);
        o_id[j] = j < m ? (uint)ti[j] : (uint)-1;
    }
    if (lid == 0) out[out_off + 2 * (ulong)rows * k + r] = as_uint(eos < n ? x[eos] - lse : -INFINITY);
    if (pick == 0) return;
    int id = (int)eos;
    float key = -INFINITY;
    for (uint j = 0; j < m; j++)
        if (tk[j] > -INFINITY && (pick == 1 || ti[j] != (int)eos)) {
            id = ti[j];
            key = tk[j];
            break;
        }
    tok[tok_off + r] = id;
    score[s_off + r] = key; /* read by every work-item before the last barrier */
}
