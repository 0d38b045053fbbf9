/* SPDX-License-Identifier: MIT */
/* beam.cl — beam search steps chained on the device (runtime/ops/ops_beam.c;
 * runtime/session/session.c, decode_chained): the next step's inputs written here,
 * so that the host ranks a step behind instead of between the steps.
 *
 *   beam_advance      one work-item per sentence s < rows / K: what
 *                     nmt_beam_advance_topk (runtime/session/beam.c) does to the
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

__kernel void beam_advance(__global const uint *cand, const ulong cand_off, const uint rows, const uint k,
                           const uint K, const uint V, const uint eos, const uint t, const uint min_len,
                           __global int *state, const ulong state_off, __global int *tok, const ulong tok_off,
                           __global float *score, const ulong score_off, __global int *back, const ulong back_off) {
    const uint s = (uint)get_global_id(0);
    if ((ulong)s * K >= rows) return;
    beam_sentence(cand, cand_off, rows, k, K, V, eos, t, min_len, state, state_off, tok, tok_off, score, score_off,
                  back, back_off, s); /* common.cl */
}

__kernel void kv_table_permute(__global int *tab, const ulong tab_off, const uint ld, __global const int *back,
                               const ulong back_off, const uint rows, __local int *tmp) {
    const uint lid = (uint)get_local_id(0), lsz = (uint)get_local_size(0);
    __global int *e = tab + tab_off + (ulong)get_group_id(0) * ld;
    for (uint r = lid; r < ld; r += lsz) tmp[r] = e[r];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint r = lid; r < rows; r += lsz) e[r] = tmp[back[back_off + r]];
}
