/* SPDX-License-Identifier: MIT */
/* warmup.c — see warmup.h. */
#include "warmup.h"

#include <string.h>

static nmt_status upload(nmt_session *s, nmt_buf dst, const int32_t *src, size_t n) {
    return nmt_device_write(s->dev, dst.mem, dst.off * sizeof(cl_int), n * sizeof(cl_int), src);
}

nmt_status nmt_session_warm(nmt_session *s) {
    NMT_CHECK(s != NULL && s->fam != NULL, NMT_ERR_INVALID_ARGUMENT);
    const double t0 = nmt_device_now(); /* the debug log's seconds: where a first start goes */
    const nmt_plan_dims *d = &s->dims;
    int32_t *tok = s->h_tok; /* (max_batch * max(src_cap, tgt_cap)) ints */

    /* Encoder over one sentence of up to 17 positions: more than 16 rows,
     * so the products take the large-M class. */
    const uint32_t len = NMT_MIN(d->src_cap, 17u);
    for (uint32_t j = 0; j < len; j++) tok[j] = (int32_t)(j + 1 == len ? s->info.eos_id : s->info.unk_id);
    NMT_TRY(upload(s, s->io.src_tok, tok, len));
    tok[0] = (int32_t)len;
    NMT_TRY(upload(s, s->io.src_len, tok, 1));
    s->io.h_src_len = tok; /* the host's copy of the lengths, as encode_batch gives it */
    const nmt_status st = s->fam->encode(s->fam_state, &s->io, 1, len);
    s->io.h_src_len = NULL;
    NMT_TRY(st);

    /* Decoder steps at t = 0 with one row (M <= 2), with up to 4 rows (the
     * m16 class's int8 products in one launch with their quantization,
     * ops.h NMT_OPS_I8_FUSE_ROWS) and with up to 16 rows, all reading the
     * same sentence, each followed by what beam search does: log-softmax
     * and a reorder of the decoder state. */
    const uint32_t rows_list[3] = {1, NMT_MIN(d->step_rows, NMT_OPS_I8_FUSE_ROWS), NMT_MIN(d->step_rows, 16u)};
    for (int i = 0; i < 3; i++) {
        const uint32_t rows = rows_list[i];
        if (i >= 1 && (rows < 3 || (i == 1 && rows == rows_list[2]))) continue;
        for (uint32_t r = 0; r < rows; r++) tok[r] = (int32_t)s->info.bos_id;
        NMT_TRY(upload(s, s->io.step_tok, tok, rows));
        NMT_TRY(s->fam->step(s->fam_state, &s->io, rows, rows, 0));
        NMT_TRY(nmt_op_log_softmax(&s->ops, s->io.logits, rows, s->info.tgt_vocab, s->info.tgt_vocab));
        if (s->ops.k_topk != NULL) { /* the beam's device top-k, scores 0 */
            for (uint32_t r = 0; r < rows; r++) tok[r] = 0;
            NMT_TRY(upload(s, nmt_buf_at(s->io.step_tok, rows), tok, rows));
            NMT_TRY(nmt_op_topk_logprobs(&s->ops, s->io.logits, rows, s->info.tgt_vocab, s->info.tgt_vocab,
                                         nmt_buf_at(s->io.step_tok, rows), NMT_MIN(s->topk_cap, s->ops.topk_max),
                                         s->info.eos_id, s->d_cand));
        }
        for (uint32_t r = 0; r < rows; r++) tok[r] = 0;
        NMT_TRY(upload(s, s->io.reorder, tok, rows));
        NMT_TRY(s->fam->reorder(s->fam_state, &s->io, rows, 0));
        const uint32_t K = NMT_MIN(d->max_beam, NMT_BEAM_DEVICE_MAX);
        if (i == 2 && K >= 2 && s->ops.k_beam_advance != NULL && s->ops.k_topk != NULL) {
            /* a chained beam step's kernels (session.c decode_chained): one
             * sentence of K beams at its length limit, on candidates of the
             * width the session reads, then a reorder through the device's
             * back-pointers (the next encode puts a permuted K|V table back) */
            const uint32_t k = NMT_MIN(NMT_MIN(2 * K + 1, s->topk_cap), s->ops.topk_max);
            for (uint32_t j = 0; j < 3; j++) tok[j] = 0;
            NMT_TRY(upload(s, s->d_beam_state, tok, 3));
            const nmt_beam_step bs = {.cand = s->d_cand, .state = s->d_beam_state, .tok = s->io.step_tok,
                                      .score = nmt_buf_at(s->io.step_tok, rows), .back = s->io.reorder, .rows = K,
                                      .k = k, .K = K, .V = s->info.tgt_vocab, .eos = s->info.eos_id};
            NMT_TRY(nmt_op_beam_advance(&s->ops, &bs));
            NMT_TRY(nmt_session_reorder_on_device(s, K, 0));
        }
    }
    NMT_TRY(nmt_device_finish(s->dev));
    const double t1 = nmt_device_now();
    const uint32_t refreshed = nmt_device_cache_refresh(s->dev);
    nmt_log(&s->dev->log, NMT_LOG_DEBUG,
            "warm-up: kernels run (and compiled where new) in %.3f s, %u cache binaries written in %.3f s; "
            "%u programs built from source so far, %.3f s",
            t1 - t0, (unsigned)refreshed, nmt_device_now() - t1, (unsigned)s->dev->n_source_builds,
            s->dev->source_build_s);
    return NMT_OK;
}
