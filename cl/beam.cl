/* beam.cl — beam search steps chained on the device (runtime/ops_beam.c;
 * runtime/session.c, decode_chained): the next step's inputs written here,
 * so that the host ranks a step behind instead of between the steps.
 *
 *   beam_advance      one work-item per sentence s < rows / K: what
 *                     nmt_beam_advance_topk (runtime/beam.c) does to the
 *                     sentence's K rows at step t when the only constraints
 *                     are a minimum length and the length limit, from the
 *                     same candidates (cl/topk.cl's layout: lp at
 *                     cand[r*k + i], ids at cand[rows*k + r*k + i], the EOS
 *                     log-probability at cand[2*rows*k + r]) and the same
 *                     float sums, in the same order: the row's candidates
 *                     offered in id order, the 2K best kept in a list where
 *                     ties keep the earlier, an EOS among the first K ranks
 *                     finishing a hypothesis, the others filling the live
 *                     rows; at the length limit only EOS; no candidate at
 *                     all: EOS.  Writes row j's next token tok[j], its score
 *                     score[j] and the row it continues back[j]; a finished
 *                     sentence's rows continue themselves with EOS.  The
 *                     sentence's state (state[3s]: done, finished count,
 *                     length limit) is the host's beam's, kept here.
 *                     K <= BEAM_MAX, k <= CAND_MAX.  NDRange >= rows / K.
 *   kv_table_permute  the Transformer's K|V table (families/transformer/
 *                     transformer.c) after a beam step, in place: entry
 *                     (p, r) = old entry (p, back[r]) for r < rows, in
 *                     every position p of the NDRange's work-groups
 *                     (one per position; tmp: ld ints of local memory).
 */

#define BEAM_MAX 8
#define CAND_MAX 17

/* (s, row, tok) into the descending list of count (at most cap) entries;
 * ties keep the earlier entry first (runtime/beam.c, cand_insert). */
static inline void cand_insert(float *cs, int *cr, int *ct, uint *count, const uint cap, const float s, const int row,
                               const int tok) {
    const uint c = *count;
    if (c == cap && !(s > cs[c - 1])) return;
    uint i = c < cap ? c : cap - 1;
    while (i > 0 && s > cs[i - 1]) {
        cs[i] = cs[i - 1];
        cr[i] = cr[i - 1];
        ct[i] = ct[i - 1];
        i--;
    }
    cs[i] = s;
    cr[i] = row;
    ct[i] = tok;
    if (c < cap) *count = c + 1;
}

__kernel void beam_advance(__global const uint *cand, const ulong cand_off, const uint rows, const uint k,
                           const uint K, const uint V, const uint eos, const uint t, const uint min_len,
                           __global int *state, const ulong state_off, __global int *tok, const ulong tok_off,
                           __global float *score, const ulong score_off, __global int *back, const ulong back_off) {
    const uint s = (uint)get_global_id(0);
    if ((ulong)s * K >= rows) return;
    __global int *st = state + state_off + 3 * (ulong)s;
    __global const float *c_lp = (__global const float *)(cand + cand_off);
    __global const int *c_id = (__global const int *)(cand + cand_off + (ulong)rows * k);
    __global const float *c_eos = (__global const float *)(cand + cand_off + 2 * (ulong)rows * k);
    __global int *o_tok = tok + tok_off;
    __global float *o_score = score + score_off;
    __global int *o_back = back + back_off;
    const uint r0 = s * K;
    if (st[0]) { /* done: the rows continue themselves */
        for (uint j = r0; j < r0 + K; j++) {
            o_back[j] = (int)j;
            o_tok[j] = (int)eos;
        }
        return;
    }
    const int force_eos = t >= (uint)st[2], no_eos = t < min_len;
    float cs[2 * BEAM_MAX];
    int cr[2 * BEAM_MAX], ct[2 * BEAM_MAX];
    uint nc = 0;
    const uint cap = 2 * K;
    for (uint r = r0; r < r0 + K; r++) {
        const float sr = o_score[r];
        if (!(sr > -INFINITY)) continue;
        if (force_eos) {
            cand_insert(cs, cr, ct, &nc, cap, sr + c_eos[r], (int)r, (int)eos);
            continue;
        }
        float lp[CAND_MAX];
        int id[CAND_MAX];
        uint m = 0;
        for (uint i = 0; i < k; i++) { /* the row's valid candidates, id ascending */
            const int v = c_id[(ulong)r * k + i];
            if (v < 0 || (uint)v >= V) continue;
            uint p = m++;
            while (p > 0 && id[p - 1] > v) {
                id[p] = id[p - 1];
                lp[p] = lp[p - 1];
                p--;
            }
            id[p] = v;
            lp[p] = c_lp[(ulong)r * k + i];
        }
        for (uint i = 0; i < m; i++) {
            const float sc = sr + lp[i];
            if (nc == cap && !(sc > cs[cap - 1])) continue;
            if (!(sc > -INFINITY) || (no_eos && id[i] == (int)eos)) continue;
            cand_insert(cs, cr, ct, &nc, cap, sc, (int)r, id[i]);
        }
    }
    if (nc == 0) /* nothing allowed: the live rows end here */
        for (uint r = r0; r < r0 + K; r++) {
            const float sr = o_score[r];
            if (sr > -INFINITY) cand_insert(cs, cr, ct, &nc, cap, sr + c_eos[r], (int)r, (int)eos);
        }
    int n_fin = st[1];
    uint alive = 0;
    for (uint i = 0; i < nc && alive < K; i++) {
        if (ct[i] == (int)eos) {
            if (i < K && n_fin < (int)K) n_fin++;
            continue;
        }
        if (n_fin >= (int)K) break;
        const uint j = r0 + alive++;
        o_back[j] = cr[i];
        o_tok[j] = ct[i];
        o_score[j] = cs[i]; /* the scores read above are all read */
    }
    for (uint j = r0 + alive; j < r0 + K; j++) {
        o_back[j] = (int)r0;
        o_tok[j] = (int)eos;
        o_score[j] = -INFINITY;
    }
    st[1] = n_fin;
    if (n_fin >= (int)K || force_eos || alive == 0) st[0] = 1;
}

__kernel void kv_table_permute(__global int *tab, const ulong tab_off, const uint ld, __global const int *back,
                               const ulong back_off, const uint rows, __local int *tmp) {
    const uint lid = (uint)get_local_id(0), lsz = (uint)get_local_size(0);
    __global int *e = tab + tab_off + (ulong)get_group_id(0) * ld;
    for (uint r = lid; r < ld; r += lsz) tmp[r] = e[r];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint r = lid; r < rows; r += lsz) e[r] = tmp[back[back_off + r]];
}
