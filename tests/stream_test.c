/* SPDX-License-Identifier: MIT */
/* stream_test.c — streaming and cancellation of nmt_session_translate
 * (nmt_decode_opts.on_step, .cancel; nmt_session_partial) on a small random
 * Transformer, greedy and beam, with the chained and the host-ranked steps:
 *   streaming     after the last step each sentence's partial hypothesis is
 *                 its final result; greedy partials grow by one token a
 *                 step (each the previous plus its token) until the
 *                 sentence is done; a done sentence's partial no longer moves;
 *   cancellation  on_step returning nonzero after step 1, and the flag set
 *                 before the call, give NMT_ERR_CANCELLED; sentences that
 *                 had finished keep their results (an empty source finishes
 *                 at step 0), the others have none; the next call on the
 *                 same session gives the uncancelled results bit for bit;
 *   misuse        nmt_session_partial outside a call or past the batch is
 *                 NMT_ERR_INVALID_ARGUMENT. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "random_model.h"
#include "session_internal.h"
#include "test_util.h"

typedef nmt_test_dev_env env;

#define VOCAB 29
#define NSENT 4
#define MAXT 8
static const int32_t src0[] = {5, 9, 11, 4}, src2[] = {12, 3, 8, 20, 6, 15, 10, 4}, src3[] = {6, 13};
static const int32_t *const srcs[NSENT] = {src0, NULL, src2, src3};
static const uint32_t src_lens[NSENT] = {4, 0, 8, 2}; /* sentence 1 is empty: done at step 0 */
static const nmt_limits limits = {.max_src_len = 9, .max_tgt_len = MAXT, .max_batch = NSENT, .max_beam = 3};

typedef struct model {
    void *image, *arena;
    nmt_session *s;
} model;

static void open_model(env *e, model *m) {
    memset(m, 0, sizeof *m);
    nmt_random_transformer_config rc;
    nmt_random_transformer_defaults(&rc);
    rc.src_vocab = rc.tgt_vocab = VOCAB;
    rc.seed = 91;
    rc.weight_scale = 2.0f; /* peaky: sentences end at different steps */
    size_t size;
    assert_int_equal(nmt_random_transformer_image(&rc, &m->image, &size), NMT_OK);
    const nmt_session_params p = {.model_data = m->image, .model_size = size, .limits = limits};
    size_t need;
    assert_int_equal(nmt_session_arena_size(&p, &need, NULL), NMT_OK);
    m->arena = aligned_alloc(NMT_ARENA_ALIGNMENT, nmt_test_round_up(need, NMT_ARENA_ALIGNMENT));
    nmt_test_assert_ok(e->dev, nmt_session_create(e->dev, &p, m->arena, need, &m->s));
}

static void close_model(model *m) {
    nmt_session_destroy(m->s);
    free(m->arena);
    free(m->image);
}

/* What the callback saw: each sentence's partial after each step. */
typedef struct seen {
    uint32_t steps, stop_after; /* stop_after 0: never stop */
    int32_t tok[MAXT + 2][NSENT][MAXT + 2];
    uint32_t len[MAXT + 2][NSENT];
    int done[MAXT + 2][NSENT];
} seen;

static int on_step(void *user, const nmt_session *s, uint32_t step) {
    seen *v = user;
    assert_int_equal(step, v->steps);
    assert_true(step < MAXT + 2);
    for (uint32_t i = 0; i < NSENT; i++) {
        const int32_t *t;
        uint32_t n;
        int done;
        assert_int_equal(nmt_session_partial(s, i, &t, &n, &done), NMT_OK);
        assert_true(n <= MAXT + 1);
        memcpy(v->tok[step][i], t, sizeof(int32_t) * n);
        v->len[step][i] = n;
        v->done[step][i] = done;
    }
    int32_t const *t;
    uint32_t n;
    assert_int_equal(nmt_session_partial(s, NSENT, &t, &n, NULL), NMT_ERR_INVALID_ARGUMENT);
    v->steps++;
    return v->stop_after && v->steps >= v->stop_after;
}

typedef struct result {
    uint32_t n[NSENT], len[NSENT];
    int32_t tok[NSENT][MAXT + 1];
    float score[NSENT];
} result;

static void results(const model *m, result *r) {
    memset(r, 0, sizeof *r);
    for (uint32_t i = 0; i < NSENT; i++) {
        r->n[i] = nmt_session_n_results(m->s, i);
        r->len[i] = 0;
        if (r->n[i] == 0) continue;
        const int32_t *t;
        float lp;
        assert_int_equal(nmt_session_result(m->s, i, 0, &t, &r->len[i], &r->score[i], &lp), NMT_OK);
        memcpy(r->tok[i], t, sizeof(int32_t) * r->len[i]);
    }
}

static void check_mode(env *e, uint32_t beam, int chained) {
    model m;
    open_model(e, &m);
    m.s->chain_steps = chained && m.s->chain_steps;
    const nmt_batch src = {srcs, src_lens, NSENT};
    const int32_t *t;
    uint32_t n;
    assert_int_equal(nmt_session_partial(m.s, 0, &t, &n, NULL), NMT_ERR_INVALID_ARGUMENT); /* no call */

    nmt_decode_opts plain = {.beam = beam, .alpha_set = 1, .max_len = MAXT};
    nmt_test_assert_ok(e->dev, nmt_session_translate(m.s, &src, &plain));
    result want;
    results(&m, &want);

    seen *v = calloc(1, sizeof *v);
    nmt_decode_opts o = plain;
    o.on_step = on_step;
    o.step_user = v;
    nmt_test_assert_ok(e->dev, nmt_session_translate(m.s, &src, &o));
    result got;
    results(&m, &got);
    assert_memory_equal(&got, &want, sizeof got); /* streaming changes nothing */
    assert_true(v->steps >= 2);
    const uint32_t last = v->steps - 1;
    for (uint32_t i = 0; i < NSENT; i++) {
        assert_true(v->done[last][i]);
        assert_int_equal(v->len[last][i], want.len[i]);
        assert_memory_equal(v->tok[last][i], want.tok[i], sizeof(int32_t) * want.len[i]);
        for (uint32_t st = 0; st < last; st++) {
            if (v->done[st][i]) { /* done: it stays as it is */
                assert_true(v->done[st + 1][i]);
                assert_int_equal(v->len[st + 1][i], v->len[st][i]);
                assert_memory_equal(v->tok[st + 1][i], v->tok[st][i], sizeof(int32_t) * v->len[st][i]);
            } else if (beam == 1 && !v->done[st + 1][i]) { /* greedy: one more token on the same prefix */
                assert_int_equal(v->len[st][i], st + 1);
                assert_int_equal(v->len[st + 1][i], st + 2);
                assert_memory_equal(v->tok[st + 1][i], v->tok[st][i], sizeof(int32_t) * v->len[st][i]);
            }
        }
    }
    assert_true(v->done[0][1]); /* the empty source */

    /* stopped by the callback after step 1 */
    memset(v, 0, sizeof *v);
    v->stop_after = 2;
    assert_int_equal(nmt_session_translate(m.s, &src, &o), NMT_ERR_CANCELLED);
    assert_int_equal(v->steps, 2);
    results(&m, &got);
    uint32_t kept = 0;
    for (uint32_t i = 0; i < NSENT; i++) {
        if (!v->done[1][i]) {
            assert_int_equal(got.n[i], 0);
            continue;
        }
        kept++;
        assert_int_equal(got.len[i], want.len[i]); /* a finished sentence's result is intact */
        assert_memory_equal(got.tok[i], want.tok[i], sizeof(int32_t) * want.len[i]);
        assert_true(got.score[i] == want.score[i]);
    }
    assert_true(kept >= 1 && kept < NSENT);

    /* the flag, set before the call: nothing decoded */
    volatile int flag = 1;
    nmt_decode_opts oc = plain;
    oc.cancel = &flag;
    assert_int_equal(nmt_session_translate(m.s, &src, &oc), NMT_ERR_CANCELLED);
    for (uint32_t i = 0; i < NSENT; i++) assert_int_equal(nmt_session_n_results(m.s, i), 0);

    /* the session goes on as before */
    flag = 0;
    nmt_test_assert_ok(e->dev, nmt_session_translate(m.s, &src, &oc));
    results(&m, &got);
    assert_memory_equal(&got, &want, sizeof got);
    assert_int_equal(nmt_session_partial(m.s, 0, &t, &n, NULL), NMT_ERR_INVALID_ARGUMENT); /* after the call */
    free(v);
    close_model(&m);
}

static void test_greedy_chained(void **state) { check_mode(*state, 1, 1); }
static void test_greedy_host(void **state) { check_mode(*state, 1, 0); }
static void test_beam_chained(void **state) { check_mode(*state, 3, 1); }
static void test_beam_host(void **state) { check_mode(*state, 3, 0); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_chained),
        cmocka_unit_test(test_greedy_host),
        cmocka_unit_test(test_beam_chained),
        cmocka_unit_test(test_beam_host),
    };
    return cmocka_run_group_tests(tests, nmt_test_dev_setup, nmt_test_dev_teardown);
}
