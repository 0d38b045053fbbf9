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
    assert_int_equal(m->s->device_bytes, dev_bytes); /* the prediction is exact on both sides */
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

void check_incremental_equals_forced(nmt_device *dev, nmt_session *s, const nmt_batch *src, uint32_t max_beam,
                                     uint32_t beam_step, uint32_t max_len, const char *what) {
    enum { MAXN = 16, MAXL = 64 };
    assert_true(src->n <= MAXN && max_len <= MAXL);
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
