/* SPDX-License-Identifier: MIT */
/* family_common.c — see family_common.h. */
#include "family_common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "family_writer.h"
#include "session_internal.h"
#include "test_util.h"

void *family_image(const nmt_family *fam, const void *cfg, uint64_t seed, size_t *size) {
    nmtw_writer *w = nmtw_create();
    assert_non_null(w);
    assert_int_equal(nmtw_add_hparams(w, fam, cfg), NMT_OK);
    assert_int_equal(nmtw_add_random_tensors(w, fam, cfg, seed, 1.0f), NMT_OK);
    void *img;
    assert_int_equal(nmtw_write_memory(w, &img, size), NMT_OK);
    nmtw_destroy(w);
    return img;
}

void test_model_open(nmt_device *dev, void *image, size_t size, const nmt_limits *lim, test_model *m) {
    memset(m, 0, sizeof *m);
    m->image = image;
    m->size = size;
    assert_int_equal(nmt_file_open(&m->file, image, size, 1), NMT_OK);
    nmt_session_params p = {.model_data = image, .model_size = size, .limits = *lim};
    size_t bytes;
    uint64_t dev_bytes = 0;
    assert_int_equal(nmt_session_arena_size(&p, &bytes, &dev_bytes), NMT_OK);
    m->arena = aligned_alloc(NMT_ARENA_ALIGNMENT, nmt_test_round_up(bytes, NMT_ARENA_ALIGNMENT));
    assert_non_null(m->arena);
    nmt_test_assert_ok(dev, nmt_session_create(dev, &p, m->arena, bytes, &m->s));
    assert_int_equal(nmt_session_arena_used(m->s), bytes);
    assert_int_equal(m->s->pc.device_bytes, dev_bytes); /* the prediction is exact on both sides */
}

void test_model_close(test_model *m) {
    nmt_session_destroy(m->s);
    free(m->arena);
    free(m->image);
}

void family_session_scores(nmt_device *dev, const void *img, size_t size, const nmt_limits *lim, const nmt_batch *src,
                           const nmt_batch *tgt, const nmt_span *const *spans, const uint32_t *n_spans, float *out) {
    nmt_session_params sp;
    memset(&sp, 0, sizeof sp);
    sp.model_data = img;
    sp.model_size = size;
    sp.limits = *lim;
    size_t need = 0;
    assert_int_equal(nmt_session_arena_size(&sp, &need, NULL), NMT_OK);
    void *arena = aligned_alloc(NMT_ARENA_ALIGNMENT, nmt_test_round_up(need, NMT_ARENA_ALIGNMENT));
    assert_non_null(arena);
    nmt_session *ss = NULL;
    nmt_test_assert_ok(dev, nmt_session_create(dev, &sp, arena, need, &ss));
    if (spans) nmt_test_assert_ok(dev, nmt_session_set_spans(ss, spans, n_spans, src->n));
    nmt_test_assert_ok(dev, nmt_session_score(ss, src, tgt, out));
    nmt_session_destroy(ss);
    free(arena);
}

void *tft_export_image(tft_model *m, int optimizer, size_t *size) {
    nmtw_writer *w = nmtw_create();
    assert_non_null(w);
    assert_int_equal(tft_add_to_writer(m, w, optimizer), NMT_OK);
    void *img = NULL;
    assert_int_equal(nmtw_write_memory(w, &img, size), NMT_OK);
    nmtw_destroy(w);
    return img;
}

void check_trim_equals_full(nmt_device *dev, nmt_session *s, const nmt_batch *src, uint32_t beam,
                                   const char *what) {
    enum { MAXN = 16, MAXB = 4, MAXL = 64 };
    assert_true(src->n <= MAXN && beam <= MAXB);
    const int32_t *tp[MAXN];
    uint32_t lens[MAXN], order[MAXN];
    for (uint32_t i = 0; i < src->n; i++) order[i] = i;
    for (uint32_t i = 1; i < src->n; i++) /* insertion sort, longest first */
        for (uint32_t j = i; j > 0 && src->lens[order[j]] > src->lens[order[j - 1]]; j--) {
            const uint32_t x = order[j];
            order[j] = order[j - 1];
            order[j - 1] = x;
        }
    for (uint32_t i = 0; i < src->n; i++) tp[i] = src->tokens[order[i]], lens[i] = src->lens[order[i]];
    const nmt_batch sorted = {tp, lens, src->n};
    const nmt_decode_opts opts = {.beam = beam, .n_best = beam, .max_len_a = 1.0f};
    static int32_t toks[MAXN][MAXB][MAXL];
    uint32_t n_res[MAXN], len[MAXN][MAXB];
    float score[MAXN][MAXB], lp[MAXN][MAXB];
    s->rows_trimmed = 0;
    nmt_test_assert_ok(dev, nmt_session_translate(s, &sorted, &opts));
    if (lens[0] != lens[src->n - 1] && s->rows_trimmed == 0)
        fail_msg("%s, beam %u: sources of %u to %u tokens, yet no row was trimmed", what, beam, lens[src->n - 1],
                 lens[0]);
    for (uint32_t i = 0; i < src->n; i++) {
        n_res[i] = nmt_session_n_results(s, i);
        for (uint32_t r = 0; r < n_res[i]; r++) {
            const int32_t *t;
            nmt_test_assert_ok(dev, nmt_session_result(s, i, r, &t, &len[i][r], &score[i][r], &lp[i][r]));
            assert_true(len[i][r] <= MAXL);
            memcpy(toks[i][r], t, sizeof(int32_t) * len[i][r]);
        }
    }
    /* 0: untrimmed, sorted; 1: the caller's order, sorted by the session
     * (its result i is sorted sentence pos[i]); 2: the caller's order kept;
     * 3: as 1 with the decoder state gathered on every beam reorder (no
     * K|V table: transformer.c); 4: as 1 with every step ranked on the host
     * before the next (the others chain the steps on the device where the
     * session can: session.c, decode_chained) */
    uint32_t pos[MAXN];
    for (uint32_t j = 0; j < src->n; j++) pos[order[j]] = j;
    for (int pass = 0; pass < 5; pass++) {
        s->trim_finished = pass != 0;
        s->order_batch = pass != 2;
        s->kv_table = pass != 3;
        s->chain_steps = pass != 4;
        s->rows_trimmed = 0;
        s->steps_chained = 0;
        const nmt_status st = nmt_session_translate(s, pass ? src : &sorted, &opts);
        s->trim_finished = s->order_batch = s->kv_table = s->chain_steps = 1;
        nmt_test_assert_ok(dev, st);
        if (pass == 1 && lens[0] != lens[src->n - 1] && s->rows_trimmed == 0)
            fail_msg("%s, beam %u: the session did not order the batch (no row trimmed)", what, beam);
        if (pass == 1 && s->h_align == NULL && s->ops.k_topk != NULL && s->steps_chained == 0)
            fail_msg("%s, beam %u: the steps were not chained on the device", what, beam);
        if (pass == 4 && s->steps_chained != 0) fail_msg("%s, beam %u: chained with chain_steps cleared", what, beam);
        for (uint32_t i = 0; i < src->n; i++) {
            const uint32_t k = pass ? pos[i] : i; /* the sorted run's sentence */
            assert_int_equal(nmt_session_n_results(s, i), n_res[k]);
            for (uint32_t r = 0; r < n_res[k]; r++) {
                const int32_t *t;
                uint32_t l;
                float sc, p;
                nmt_test_assert_ok(dev, nmt_session_result(s, i, r, &t, &l, &sc, &p));
                if (l != len[k][r] || memcmp(t, toks[k][r], sizeof(int32_t) * l) != 0 ||
                    fabs(sc - score[k][r]) > 1e-5 * fmax(1.0, fabs(sc)) ||
                    fabs(p - lp[k][r]) > 1e-5 * fmax(1.0, fabs(p)))
                    fail_msg("%s, beam %u, pass %d, sentence %u, rank %u: %u tokens, %.7f; against %u tokens, %.7f",
                             what, beam, pass, i, r, l, p, len[k][r], lp[k][r]);
            }
        }
    }
}

void check_incremental_equals_forced(nmt_device *dev, nmt_session *s, const nmt_batch *src, uint32_t max_beam,
                                     uint32_t beam_step, uint32_t max_len, const char *what) {
    enum { MAXN = 16, MAXL = 64 };
    assert_true(src->n <= MAXN && max_len <= MAXL);
    check_trim_equals_full(dev, s, src, max_beam, what);
    for (uint32_t beam = 1; beam <= max_beam; beam += beam_step) {
        const nmt_decode_opts opts = {.beam = beam, .max_len = max_len};
        nmt_test_assert_ok(dev, nmt_session_translate(s, src, &opts));
        static int32_t toks[MAXN][MAXL];
        const int32_t *tp[MAXN];
        uint32_t lens[MAXN];
        float incr[MAXN], forced[MAXN];
        for (uint32_t i = 0; i < src->n; i++) {
            const int32_t *t;
            float score;
            nmt_test_assert_ok(dev, nmt_session_result(s, i, 0, &t, &lens[i], &score, &incr[i]));
            assert_true(lens[i] <= max_len);
            memcpy(toks[i], t, sizeof(int32_t) * lens[i]);
            tp[i] = toks[i];
        }
        const nmt_batch hyp = {tp, lens, src->n};
        nmt_test_assert_ok(dev, nmt_session_score(s, src, &hyp, forced));
        for (uint32_t i = 0; i < src->n; i++)
            if (fabs(incr[i] - forced[i]) > 1e-4 * fmax(1.0, fabs(forced[i])))
                fail_msg("%s, beam %u, sentence %u: incremental %.6f, forced %.6f", what, beam, i, incr[i], forced[i]);
    }
}
