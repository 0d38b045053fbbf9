/* SPDX-License-Identifier: MIT */
/* mgsa_syntax_test.c — MG-SA syntax heads in the trainer (issue 15):
 * spans files (good and bad lines, exact statuses and messages), the data
 * path (spans stay with their pairs through the filters and the batcher),
 * the partition (families/spans.c, exact values; what the trainer uploads
 * equals it), the trainer's log-probabilities = the session's scores given
 * the same spans, and whole-model gradients with syntax heads against
 * central differences of the double reference (tests/ref_model.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "family_common.h"
#include "family_writer.h"
#include "format.h"
#include "nmt_writer.h"
#include "random_model.h"
#include "ref_model.h"
#include "spans.h"
#include "spans_file.h"
#include "test_util.h"
#include "tf_train.h"
#include "tf_train_internal.h"
#include "transformer_cfg.h"

typedef nmt_test_dev_env env; /* the group fixture of test_util.h */

/* ---- 1. spans files ------------------------------------------------------ */

static nmt_status line(const char *s, nmt_span *sp, uint8_t *lab, uint32_t *n, char *why) {
    return tsp_parse_line(s, strlen(s), sp, lab, 8, n, why, 160);
}

static void test_spans_lines(void **state) {
    (void)state;
    nmt_span sp[8];
    uint8_t lab[8];
    uint32_t n = 99;
    char why[160];
    assert_int_equal(line("", sp, lab, &n, why), NMT_OK);
    assert_int_equal(n, 0);
    assert_int_equal(line(" \t ", sp, lab, &n, why), NMT_OK);
    assert_int_equal(n, 0);
    assert_int_equal(line("0-2:NP 2-3:VP\t5-9:SBAR 9-10:O", sp, lab, &n, why), NMT_OK);
    assert_int_equal(n, 4);
    const uint32_t want[4][3] = {{0, 2, 0}, {2, 1, 1}, {5, 4, 4}, {9, 1, 7}};
    for (uint32_t k = 0; k < 4; k++) {
        assert_int_equal(sp[k].start, want[k][0]);
        assert_int_equal(sp[k].len, want[k][1]);
        assert_int_equal(lab[k], want[k][2]);
    }
    for (int i = 0; i < TSP_N_LABELS; i++) assert_int_equal(tsp_label_id(tsp_labels[i], strlen(tsp_labels[i])), i);
    assert_int_equal(tsp_label_id("np", 2), -1);
    static const struct {
        const char *text;
        nmt_status st;
        const char *why;
    } bad[] = {
        {"0-2", NMT_ERR_INVALID_ARGUMENT, "'0-2' is not START-END:LABEL"},
        {"0:NP", NMT_ERR_INVALID_ARGUMENT, "'0:NP' is not START-END:LABEL"},
        {"a-2:NP", NMT_ERR_INVALID_ARGUMENT, "'a-2:NP' is not START-END:LABEL"},
        {"0-2x:NP", NMT_ERR_INVALID_ARGUMENT, "'0-2x:NP' is not START-END:LABEL"},
        {"-1-2:NP", NMT_ERR_INVALID_ARGUMENT, "'-1-2:NP' is not START-END:LABEL"},
        {"0-99999999999:NP", NMT_ERR_INVALID_ARGUMENT, "'0-99999999999:NP' is not START-END:LABEL"},
        {"0-2:XP", NMT_ERR_INVALID_ARGUMENT, "'0-2:XP': unknown label (NP VP PP S SBAR ADJP ADVP O)"},
        {"0-2:np", NMT_ERR_INVALID_ARGUMENT, "'0-2:np': unknown label (NP VP PP S SBAR ADJP ADVP O)"},
        {"0-2:", NMT_ERR_INVALID_ARGUMENT, "'0-2:': unknown label (NP VP PP S SBAR ADJP ADVP O)"},
        {"3-3:NP", NMT_ERR_INVALID_SPANS, "span 3-3 is empty"},
        {"4-3:NP", NMT_ERR_INVALID_SPANS, "span 4-3 is empty"},
        {"0-3:NP 2-4:VP", NMT_ERR_INVALID_SPANS, "span 2-4 starts before the end of the one before (3)"},
        {"4-6:NP 0-2:VP", NMT_ERR_INVALID_SPANS, "span 0-2 starts before the end of the one before (6)"},
        {"0-1:O 1-2:O 2-3:O 3-4:O 4-5:O 5-6:O 6-7:O 7-8:O 8-9:O", NMT_ERR_INVALID_ARGUMENT, "more than 8 spans"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why[0] = '\0';
        assert_int_equal(line(bad[i].text, sp, lab, &n, why), bad[i].st);
        assert_string_equal(why, bad[i].why);
    }
    /* a whole file: BOM, CRLF, empty lines, no final newline; errors name the line */
    const char text[] = "\xEF\xBB\xBF" "0-2:NP\r\n\n1-2:VP 3-5:PP\n";
    tsp_file *f = NULL;
    char err[256];
    assert_int_equal(tsp_parse(text, sizeof text - 1, "x.spans", &f, err, sizeof err), NMT_OK);
    assert_int_equal(tsp_lines(f), 3);
    const nmt_span *p;
    const uint8_t *l;
    tsp_line(f, 0, &p, &l, &n);
    assert_int_equal(n, 1);
    assert_true(p[0].start == 0 && p[0].len == 2 && l[0] == 0);
    tsp_line(f, 1, &p, &l, &n);
    assert_true(n == 0 && p == NULL && l == NULL);
    tsp_line(f, 2, &p, &l, &n);
    assert_true(n == 2 && p[1].start == 3 && p[1].len == 2 && l[1] == 2);
    tsp_free(f);
    assert_int_equal(tsp_parse("0-1:S", 5, "y", &f, err, sizeof err), NMT_OK);
    assert_int_equal(tsp_lines(f), 1);
    tsp_free(f);
    const char bad_text[] = "0-1:S\n\n2-1:NP\n";
    assert_int_equal(tsp_parse(bad_text, sizeof bad_text - 1, "z.spans", &f, err, sizeof err), NMT_ERR_INVALID_SPANS);
    assert_null(f);
    assert_string_equal(err, "z.spans:3: span 2-1 is empty");
    assert_int_equal(tsp_parse("0-1:S\nzz\n", 9, "z.spans", &f, err, sizeof err), NMT_ERR_INVALID_ARGUMENT);
    assert_string_equal(err, "z.spans:2: 'zz' is not START-END:LABEL");
    assert_int_equal(tsp_read("/nonexistent/x.spans", &f, err, sizeof err), NMT_ERR_IO);
}

/* ---- 2. the data path ---------------------------------------------------- */

static char *tmp_path(const char *name) {
    static char buf[4][512];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 512, "%s/mgsa_syntax_test.%s", NMT_TEST_BUILD_DIR, name);
    return p;
}

static void write_text(const char *path, const char *text) {
    assert_int_equal(nmt_test_write_file(path, text, strlen(text)), 0);
}

static void test_data_alignment(void **state) {
    (void)state;
    /* filters (max_len 4, ratio 2) drop lines 2 (empty), 3 (long) and 4 (ratio) */
    const char *src = tmp_path("src"), *tgt = tmp_path("tgt"), *spf = tmp_path("spans");
    write_text(src, "5 6 7\n\n5 6 7 8 9 10\n5\n8 9 10 11\n");
    write_text(tgt, "5 6\n5\n5 6 7 8 9\n5 6 7 8\n8 9 10\n");
    /* the dropped lines' spans are never checked against a sentence (line 3's is past any kept one) */
    write_text(spf, "0-2:NP\n0-1:NP\n0-6:S\n\n1-3:VP 3-4:O\n");
    const td_filter flt = {4, 2.0};
    td_corpus *c = NULL;
    td_stats st;
    char err[512];
    assert_int_equal(td_load_ids(src, tgt, 20, 20, &flt, &c, &st, err, sizeof err), NMT_OK);
    assert_int_equal(st.kept, 2);
    assert_true(st.dropped_empty == 1 && st.dropped_long == 1 && st.dropped_ratio == 1);
    tsp_file *f = NULL;
    assert_int_equal(tsp_read(spf, &f, err, sizeof err), NMT_OK);
    assert_int_equal(td_set_spans(c, f, err, sizeof err), NMT_OK);
    assert_int_equal(td_set_spans(c, f, err, sizeof err), NMT_ERR_INVALID_ARGUMENT); /* once */
    tsp_free(f);
    const nmt_span *sp;
    const uint8_t *lab;
    uint32_t n;
    uint64_t ln;
    td_pair_spans(c, 0, &sp, &lab, &n, &ln);
    assert_true(ln == 1 && n == 1 && sp[0].start == 0 && sp[0].len == 2 && lab[0] == 0);
    td_pair_spans(c, 1, &sp, &lab, &n, &ln);
    assert_true(ln == 5 && n == 2 && sp[0].start == 1 && sp[0].len == 2 && lab[0] == 1 && sp[1].start == 3 &&
                sp[1].len == 1 && lab[1] == 7);
    /* every batch row carries its own pair's spans, in the sorted and shuffled orders */
    td_batcher *b = NULL;
    assert_int_equal(td_batcher_create(c, 64, 1, 7, 1, 2, 0, &b), NMT_OK);
    assert_int_equal(td_batches_per_epoch(b), 2);
    for (int k = 0; k < 6; k++) {
        nmt_train_batch tb;
        assert_int_equal(td_next(b, &tb, NULL), NMT_OK);
        assert_int_equal(tb.n_seq, 1);
        assert_true(tb.spans != NULL && tb.n_spans != NULL && tb.span_labels != NULL);
        const uint32_t pair = tb.src[0] == 5 ? 0 : 1;
        td_pair_spans(c, pair, &sp, &lab, &n, NULL);
        assert_int_equal(tb.n_spans[0], n);
        assert_memory_equal(tb.spans[0], sp, n * sizeof *sp);
        assert_memory_equal(tb.span_labels[0], lab, n);
    }
    td_batcher_free(b);
    td_free(c);

    /* a kept pair's span past its sentence; a line count other than the source's */
    write_text(spf, "0-2:NP\n\n\n\n1-5:VP\n");
    assert_int_equal(td_load_ids(src, tgt, 20, 20, &flt, &c, &st, err, sizeof err), NMT_OK);
    assert_int_equal(tsp_read(spf, &f, err, sizeof err), NMT_OK);
    assert_int_equal(td_set_spans(c, f, err, sizeof err), NMT_ERR_INVALID_SPANS);
    char want[600];
    snprintf(want, sizeof want, "%s:5: span 1-5 is past the sentence's 4 pieces", spf);
    assert_string_equal(err, want);
    tsp_free(f);
    write_text(spf, "0-2:NP\n\n\n\n");
    assert_int_equal(tsp_read(spf, &f, err, sizeof err), NMT_OK);
    assert_int_equal(td_set_spans(c, f, err, sizeof err), NMT_ERR_INVALID_ARGUMENT);
    snprintf(want, sizeof want, "%s has 4 lines but the source has 5", spf);
    assert_string_equal(err, want);
    tsp_free(f);
    /* without spans a batch has none */
    td_batcher *b2 = NULL;
    assert_int_equal(td_batcher_create(c, 64, 4, 7, 1, 2, 0, &b2), NMT_OK);
    nmt_train_batch tb;
    assert_int_equal(td_next(b2, &tb, NULL), NMT_OK);
    assert_true(tb.spans == NULL && tb.n_spans == NULL && tb.span_labels == NULL);
    td_batcher_free(b2);
    td_free(c);
    remove(src);
    remove(tgt);
    remove(spf);
}

/* ---- 3. the partition ------------------------------------------------------ */

static void test_partition(void **state) {
    (void)state;
    /* sentence 0: 5 tokens + EOS, spans [0,2) [3,5); 1: 3 + EOS, no spans
     * (fallback 2-grams); 2: 6 + EOS, span [1,4); padded length 7 */
    static const nmt_span s0[2] = {{0, 2}, {3, 2}}, s2[1] = {{1, 3}};
    const nmt_span *spans[3] = {s0, NULL, s2};
    const uint32_t n_spans[3] = {2, 0, 1};
    const nmt_spans sp = {spans, n_spans, 3};
    const int32_t lens[3] = {6, 4, 7};
    int32_t seg[3 * 7 * 2], cnt[3];
    memset(seg, 0x55, sizeof seg);
    nmt_spans_partition(2, &sp, lens, 3, 7, seg, cnt);
    static const int32_t want_seg[3][7][2] = {
        {{0, 2}, {2, 1}, {3, 2}, {5, 1}, {0, 0}, {0, 0}, {0, 0}},
        {{0, 2}, {2, 2}, {0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}},
        {{0, 1}, {1, 3}, {4, 1}, {5, 1}, {6, 1}, {0, 0}, {0, 0}},
    };
    assert_memory_equal(seg, want_seg, sizeof seg);
    assert_true(cnt[0] == 4 && cnt[1] == 2 && cnt[2] == 5);
    /* no spans at all: every sentence gets the fallback */
    nmt_spans_partition(3, NULL, lens, 3, 7, seg, cnt);
    assert_true(cnt[0] == 2 && cnt[1] == 2 && cnt[2] == 3);
    assert_true(seg[0] == 0 && seg[1] == 3 && seg[2] == 3 && seg[3] == 3);
    assert_true(seg[14 + 2] == 3 && seg[14 + 3] == 1);
    /* the check: the runtime's statuses */
    uint32_t bad = 9;
    assert_int_equal(nmt_spans_check(s0, 2, 5, &bad), NMT_OK);
    assert_int_equal(nmt_spans_check(s0, 2, 4, &bad), NMT_ERR_INVALID_SPANS);
    assert_int_equal(bad, 1);
    static const nmt_span empty[1] = {{1, 0}}, over[2] = {{0, 3}, {2, 1}}, desc[2] = {{3, 1}, {0, 1}};
    assert_int_equal(nmt_spans_check(empty, 1, 5, NULL), NMT_ERR_INVALID_SPANS);
    assert_int_equal(nmt_spans_check(over, 2, 5, NULL), NMT_ERR_INVALID_SPANS);
    assert_int_equal(nmt_spans_check(desc, 2, 5, NULL), NMT_ERR_INVALID_SPANS);
    assert_int_equal(nmt_spans_check(NULL, 1, 5, NULL), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_spans_check(NULL, 0, 5, NULL), NMT_OK);
}

/* ---- 4. the model ---------------------------------------------------------- */

#define PAD 0
#define BOS 1
#define EOS 2
#define MAXS 4
#define MAXL 8

typedef struct sents {
    uint32_t n;
    int32_t src[MAXS][MAXL], tgt[MAXS][MAXL];
    uint32_t slen[MAXS], tlen[MAXS]; /* without EOS */
    const nmt_span *spans[MAXS];
    uint32_t n_spans[MAXS];
    const uint8_t *labels[MAXS];
} sents;

typedef struct tbatch {
    int32_t src[MAXS * (MAXL + 1)], tin[MAXS * (MAXL + 1)], tout[MAXS * (MAXL + 1)];
    uint32_t sl[MAXS], tl[MAXS];
    tft_batch b;
} tbatch;

static const nmt_span sp_a[2] = {{0, 2}, {3, 2}}, sp_c[2] = {{1, 3}, {4, 2}};
static const uint8_t lab_a[2] = {0, 1}, lab_c[2] = {4, 7}; /* NP VP, SBAR O */

/* Three pairs: spans, none (fallback 2-grams), spans covering the sentence. */
static void make_sents(sents *s, uint32_t V, uint64_t seed) {
    static const uint32_t slen[3] = {5, 3, 6}, tlen[3] = {4, 2, 3};
    nmt_test_rng r = nmt_test_rng_make(seed);
    memset(s, 0, sizeof *s);
    s->n = 3;
    for (uint32_t i = 0; i < 3; i++) {
        s->slen[i] = slen[i];
        s->tlen[i] = tlen[i];
        for (uint32_t j = 0; j < slen[i]; j++) s->src[i][j] = nmt_test_rng_int(&r, 4, (int32_t)V);
        for (uint32_t j = 0; j < tlen[i]; j++) s->tgt[i][j] = nmt_test_rng_int(&r, 4, (int32_t)V);
    }
    s->spans[0] = sp_a;
    s->n_spans[0] = 2;
    s->spans[2] = sp_c;
    s->n_spans[2] = 2;
    s->labels[0] = lab_a;
    s->labels[2] = lab_c;
}

static void make_batch(const sents *s, tbatch *tb) {
    uint32_t S = 0, T = 0;
    for (uint32_t i = 0; i < s->n; i++) {
        if (s->slen[i] + 1 > S) S = s->slen[i] + 1;
        if (s->tlen[i] + 1 > T) T = s->tlen[i] + 1;
    }
    for (uint32_t i = 0; i < s->n; i++) {
        for (uint32_t j = 0; j < S; j++)
            tb->src[i * S + j] = j < s->slen[i] ? s->src[i][j] : j == s->slen[i] ? EOS : PAD;
        for (uint32_t p = 0; p < T; p++) {
            tb->tin[i * T + p] = p == 0 ? BOS : p <= s->tlen[i] ? s->tgt[i][p - 1] : PAD;
            tb->tout[i * T + p] = p < s->tlen[i] ? s->tgt[i][p] : p == s->tlen[i] ? EOS : PAD;
        }
        tb->sl[i] = s->slen[i] + 1;
        tb->tl[i] = s->tlen[i] + 1;
    }
    tb->b = (tft_batch){.n_seq = s->n, .src_len = S, .tgt_len = T, .src = tb->src, .src_lens = tb->sl,
                        .tgt_in = tb->tin, .tgt_out = tb->tout, .tgt_lens = tb->tl, .spans = s->spans,
                        .n_spans = s->n_spans, .span_labels = s->labels};
}

/* A random MG-SA model: d 8, 2 heads (as given), 2+2 layers, interaction rec. */
static void *syntax_image(const char *heads, const char *layers, int rec, uint32_t V, uint64_t seed, size_t *size) {
    nmt_random_transformer_config rc;
    nmt_random_transformer_defaults(&rc);
    rc.d_model = 8;
    rc.n_heads = 2;
    rc.d_ff = 16;
    rc.enc_layers = rc.dec_layers = 2;
    rc.src_vocab = rc.tgt_vocab = V;
    rc.enc_branches = rc.dec_branches = "global";
    rc.pad_id = PAD;
    rc.bos_id = BOS;
    rc.eos_id = EOS;
    rc.unk_id = 3;
    rc.seed = seed;
    void *img = NULL;
    assert_int_equal(nmt_random_transformer_image(&rc, &img, size), NMT_OK);
    nmt_file f;
    assert_int_equal(nmt_file_open(&f, img, *size, 1), NMT_OK);
    nmt_tf_cfg c;
    assert_int_equal(nmt_family_parse(&nmt_family_transformer, &f, &c), NMT_OK);
    snprintf(c.mg_layers_text, sizeof c.mg_layers_text, "%s", layers);
    snprintf(c.mg_heads_text, sizeof c.mg_heads_text, "%s", heads);
    c.mg_fallback = 2;
    c.mg_interact = rec;
    c.mg_compose = NMT_MG_COM_MAX;
    c.mg_chunk = 2;
    assert_int_equal(nmt_tf_finish(&c, ~0ull, NULL, 0), NMT_OK);
    free(img);
    nmtw_writer *w = nmtw_create();
    assert_non_null(w);
    assert_int_equal(nmtw_add_hparams(w, &nmt_family_mgsa, &c), NMT_OK);
    assert_int_equal(nmtw_add_random_tensors(w, &nmt_family_mgsa, &c, seed, 1.0f), NMT_OK);
    void *out = NULL;
    assert_int_equal(nmtw_write_memory(w, &out, size), NMT_OK);
    nmtw_destroy(w);
    return out;
}

/* The session's scores of s given its spans (nmt_session_set_spans). */
static void session_scores(env *e, const void *img, size_t isz, const sents *s, float *out) {
    const nmt_limits lim = {.max_src_len = MAXL, .max_tgt_len = MAXL, .max_batch = MAXS, .max_beam = 1};
    const int32_t *sp_[MAXS], *tp_[MAXS];
    for (uint32_t i = 0; i < s->n; i++) {
        sp_[i] = s->src[i];
        tp_[i] = s->tgt[i];
    }
    nmt_batch sb = {sp_, s->slen, s->n}, tb = {tp_, s->tlen, s->n};
    family_session_scores(e->dev, img, isz, &lim, &sb, &tb, s->spans, s->n_spans, out);
}

/* Summed label-smoothed loss in double through the reference forward, each
 * sentence with its spans, plus lambda times the tag loss. */
static double ref_loss(const nmt_file *f, const sents *s, uint32_t V, double eps, double lambda) {
    double total = 0.0;
    double *lg = malloc(sizeof(double) * (MAXL + 1) * V);
    assert_non_null(lg);
    for (uint32_t i = 0; i < s->n; i++) {
        ref_model_set_spans(s->spans[i], s->n_spans[i]);
        if (lambda > 0.0) ref_model_set_span_labels(s->labels[i]);
        const int rows = ref_model_logits(f, s->src[i], s->slen[i], s->tgt[i], s->tlen[i], lg);
        total += lambda * ref_model_tag_loss();
        for (int p = 0; p < rows; p++) {
            const double *x = lg + (size_t)p * V;
            const int32_t t = (uint32_t)p < s->tlen[i] ? s->tgt[i][p] : EOS;
            double mx = x[0], se = 0.0, sum = 0.0;
            for (uint32_t j = 1; j < V; j++) mx = x[j] > mx ? x[j] : mx;
            for (uint32_t j = 0; j < V; j++) se += exp(x[j] - mx);
            const double lse = mx + log(se);
            for (uint32_t j = 0; j < V; j++) sum += x[j] - lse;
            const double lpt = x[t] - lse;
            total -= (1.0 - eps) * lpt + eps / (V - 1) * (sum - lpt);
        }
    }
    ref_model_set_spans(NULL, 0);
    free(lg);
    return total;
}

/* The trainer's log-probabilities = the session's scores (same spans), and
 * = the reference; the partition it uploads is nmt_spans_partition's; bad
 * spans are the runtime's status. */
static void test_parity(void **state) {
    env *e = *state;
    const uint32_t V = 19;
    size_t isz;
    void *img = syntax_image("word syntax", "1 2", NMT_MG_REC_NONE, V, 41, &isz);
    tft_limits lim = {.max_seqs = MAXS, .max_src_len = MAXL + 1, .max_tgt_len = MAXL + 1, .max_tokens = 0};
    tft_model *m = NULL;
    nmt_test_assert_ok(e->dev, tft_create(e->dev, img, isz, &lim, &m));
    sents s;
    make_sents(&s, V, 5);
    tbatch tb;
    make_batch(&s, &tb);
    float lp[MAXS * (MAXL + 1)], want[MAXS];
    nmt_test_assert_ok(e->dev, tft_token_logprobs(m, &tb.b, lp));
    session_scores(e, img, isz, &s, want);
    nmt_file f;
    assert_int_equal(nmt_file_open(&f, img, isz, 0), NMT_OK);
    for (uint32_t i = 0; i < s.n; i++) {
        double sum = 0.0;
        for (uint32_t p = 0; p < tb.b.tgt_len; p++) sum += lp[i * tb.b.tgt_len + p];
        ref_model_set_spans(s.spans[i], s.n_spans[i]);
        const double ref = ref_model_score(&f, s.src[i], s.slen[i], s.tgt[i], s.tlen[i]);
        printf("[ parity    ] sentence %u: trainer %.6f session %.6f reference %.6f\n", i, sum, (double)want[i], ref);
        assert_true(fabs(sum - want[i]) < 1e-4 * (1.0 + fabs((double)want[i])));
        assert_true(fabs(sum - ref) < 1e-4 * (1.0 + fabs(ref)));
    }
    /* the spans matter: without them sentence 0 and 2 score differently, 1 the same */
    float lp2[MAXS * (MAXL + 1)];
    tbatch tb2 = tb;
    tb2.b.spans = NULL;
    tb2.b.n_spans = NULL;
    nmt_test_assert_ok(e->dev, tft_token_logprobs(m, &tb2.b, lp2));
    double d[3] = {0, 0, 0};
    for (uint32_t i = 0; i < 3; i++)
        for (uint32_t p = 0; p < tb.b.tgt_len; p++) d[i] += fabs(lp[i * tb.b.tgt_len + p] - lp2[i * tb.b.tgt_len + p]);
    assert_true(d[0] > 1e-5 && d[2] > 1e-5 && d[1] < 1e-6);
    /* what the trainer uploaded into each MG layer's syntax group is the runtime's partition */
    nmt_test_assert_ok(e->dev, tft_token_logprobs(m, &tb.b, lp));
    const int32_t lens[3] = {6, 4, 7};
    const nmt_spans spn = {s.spans, s.n_spans, 3};
    int32_t want_seg[3 * 7 * 2], want_cnt[3], got_seg[3 * 7 * 2], got_cnt[3];
    nmt_spans_partition(2, &spn, lens, 3, 7, want_seg, want_cnt);
    int layers = 0;
    for (uint32_t k = 0; k < m->n_enc_sub; k++) {
        if (!tft_is_mg(m, &m->subs[k])) continue;
        const nmt_tf_acts *a = &m->subs[k].a;
        assert_int_equal(nmt_device_read(e->dev, a->mg_seg[1].mem, 0, sizeof got_seg, got_seg), NMT_OK);
        assert_int_equal(nmt_device_read(e->dev, a->mg_cnt[1].mem, 0, sizeof got_cnt, got_cnt), NMT_OK);
        assert_memory_equal(got_seg, want_seg, sizeof got_seg);
        assert_memory_equal(got_cnt, want_cnt, sizeof got_cnt);
        layers++;
    }
    assert_int_equal(layers, 2);
    /* the tagger is training-only: in a checkpoint, not in a deployment model (which the runtime loads) */
    size_t csz, dsz;
    void *ck = tft_export_image(m, 1, &csz), *dep = tft_export_image(m, 0, &dsz);
    nmt_file fc, fd;
    nmt_tensor_view v;
    assert_int_equal(nmt_file_open(&fc, ck, csz, 0), NMT_OK);
    assert_int_equal(nmt_file_open(&fd, dep, dsz, 0), NMT_OK);
    assert_int_equal(nmt_file_find(&fc, "train.enc.1.self_attn.phrase_tag.weight", &v), NMT_OK);
    assert_true(v.ndim == 2 && v.shape[0] == TSP_N_LABELS && v.shape[1] == 8);
    assert_int_equal(nmt_file_find(&fc, "train.enc.0.self_attn.phrase_tag.bias", &v), NMT_OK);
    assert_int_equal(nmt_file_find(&fd, "train.enc.0.self_attn.phrase_tag.weight", &v), NMT_ERR_MODEL_MISSING_TENSOR);
    session_scores(e, dep, dsz, &s, want);
    free(ck);
    free(dep);
    /* bad spans: the runtime's status */
    static const nmt_span past[1] = {{4, 2}}, over[2] = {{0, 2}, {1, 2}}, empty[1] = {{1, 0}};
    const nmt_span *const bads[3] = {past, over, empty};
    const uint32_t nb[3] = {1, 2, 1};
    for (int k = 0; k < 3; k++) {
        tbatch tb3 = tb;
        const nmt_span *sp3[3] = {s.spans[0], bads[k], s.spans[2]};
        const uint32_t ns3[3] = {s.n_spans[0], nb[k], s.n_spans[2]};
        tb3.b.spans = sp3;
        tb3.b.n_spans = ns3;
        assert_int_equal(tft_token_logprobs(m, &tb3.b, lp2), NMT_ERR_INVALID_SPANS);
    }
    tft_destroy(m);
    free(img);
}

/* Whole-model gradients with syntax heads against central differences of
 * the reference loss (the train_model_test method: h = 1e-5, every element
 * of small tensors, 3 samples of larger ones): without the tag loss; with
 * it (lambda 0.3, random W_t, b_t: their gradients and the tag loss's
 * gradient into the encoder); with it under an LSTM interaction (the tag
 * reads the pooled phrases before the interaction). */
static void test_gradients(void **state) {
    env *e = *state;
    const uint32_t V = 13;
    const double eps = 0.1;
    static const struct {
        const char *heads, *layers;
        int rec;
        float lambda;
    } cases[3] = {{"word syntax", "1 2", NMT_MG_REC_NONE, 0.0f},
                  {"word syntax", "1 2", NMT_MG_REC_NONE, 0.3f},
                  {"syntax ngram:2", "1", NMT_MG_REC_LSTM, 0.3f}};
    for (int ci = 0; ci < 3; ci++) {
        const char *const name_c = cases[ci].heads;
        const double lambda = cases[ci].lambda;
        size_t isz;
        void *img = syntax_image(cases[ci].heads, cases[ci].layers, cases[ci].rec, V, 70 + (uint64_t)ci, &isz);
        tft_limits lim = {.max_seqs = 3, .max_src_len = 7, .max_tgt_len = 7, .max_tokens = 0};
        tft_model *m = NULL;
        nmt_test_assert_ok(e->dev, tft_create(e->dev, img, isz, &lim, &m));
        sents s;
        make_sents(&s, V, 11 + (uint64_t)ci);
        tbatch tb;
        make_batch(&s, &tb);
        /* the tagger: random weights (a new model's start at 0) */
        float *params = malloc(tft_n_params(m) * sizeof(float));
        assert_non_null(params);
        nmt_test_assert_ok(e->dev, tft_read_state(m, params, NULL, NULL, NULL));
        nmt_test_rng pr = nmt_test_rng_make(3 + (uint64_t)ci);
        uint32_t n_tag = 0;
        for (uint32_t ti = 0; ti < tft_n_tensors(m); ti++) {
            const char *name;
            size_t off, count;
            tft_tensor(m, ti, &name, NULL, NULL, &off, &count);
            if (strncmp(name, "train.", 6)) continue;
            n_tag++;
            for (size_t j = 0; j < count; j++) {
                assert_true(params[off + j] == 0.0f);
                params[off + j] = (float)(nmt_test_rng_int(&pr, -1000, 1001) / 1000.0);
            }
        }
        assert_int_equal(n_tag, strlen(cases[ci].layers) == 1 ? 2 : 4); /* weight, bias per MG layer */
        nmt_test_assert_ok(e->dev, tft_write_state(m, params, NULL, NULL));
        free(params);
        tft_step_opts o = {.dropout = 0.0f, .label_smoothing = (float)eps, .grad_scale = 1.0f, .seed = 1,
                           .tag_lambda = (float)lambda};
        double loss = 0, nll = 0;
        nmt_test_assert_ok(e->dev, tft_zero_grad(m));
        nmt_test_assert_ok(e->dev, tft_forward_backward(m, &tb.b, &o, &loss, &nll));
        const size_t np = tft_n_params(m);
        float *g = malloc(np * sizeof(float));
        assert_non_null(g);
        nmt_test_assert_ok(e->dev, tft_read_state(m, NULL, g, NULL, NULL));
        size_t esz;
        void *eimg = tft_export_image(m, 1, &esz); /* with the train.* tagger */
        nmt_file f;
        assert_int_equal(nmt_file_open(&f, eimg, esz, 0), NMT_OK);
        const double l0 = ref_loss(&f, &s, V, eps, lambda);
        assert_true(fabs(l0 - loss) < 1e-3 * (1.0 + fabs(l0)));
        nmt_test_rng r = nmt_test_rng_make(99 + (uint64_t)ci);
        double worst = 0.0;
        const char *worst_name = "";
        int n_bad = 0;
        for (uint32_t ti = 0; ti < tft_n_tensors(m); ti++) {
            const char *name;
            uint32_t ndim, shape[2];
            size_t off, count;
            tft_tensor(m, ti, &name, &ndim, shape, &off, &count);
            nmt_tensor_view v;
            assert_int_equal(nmt_file_find(&f, name, &v), NMT_OK);
            float *data = (float *)(uintptr_t)v.data;
            const int is_emb = strstr(name, "embed") != NULL;
            const size_t n_samp = count <= 16 ? count : 3;
            double max_fd = 0.0, max_err = 0.0;
            for (size_t k = 0; k < n_samp; k++) {
                size_t j;
                if (count <= 16) {
                    j = k;
                } else if (is_emb) { /* a row of a token of the batch */
                    const uint32_t i = (uint32_t)nmt_test_rng_int(&r, 0, 3);
                    const int32_t tok = k == 0 ? s.src[i][0] : k == 1 ? s.tgt[i][0] : EOS;
                    j = (size_t)tok * shape[1] + (size_t)nmt_test_rng_int(&r, 0, (int32_t)shape[1]);
                } else {
                    j = (size_t)nmt_test_rng_int(&r, 0, (int32_t)count);
                }
                const float p0 = data[j];
                const float h = 1e-5f * fmaxf(1.0f, fabsf(p0));
                const float pp = p0 + h, pm = p0 - h;
                data[j] = pp;
                const double lp = ref_loss(&f, &s, V, eps, lambda);
                data[j] = pm;
                const double lm = ref_loss(&f, &s, V, eps, lambda);
                data[j] = p0;
                const double fd = (lp - lm) / ((double)pp - (double)pm);
                const double err = fabs((double)g[off + j] - fd);
                if (fabs(fd) > max_fd) max_fd = fabs(fd);
                if (err > max_err) max_err = err;
            }
            const double ne = max_err / fmax(max_fd, 1e-3);
            if (ne > worst) {
                worst = ne;
                worst_name = name;
            }
            if (ne > 1e-3) {
                printf("%s: tensor %s: normalised gradient error %.3g (max |fd| %.3g)\n", name_c, name, ne, max_fd);
                n_bad++;
            }
        }
        printf("[ gradcheck ] mgsa %-16s lambda %.1f %3u tensors, loss %.5f, worst normalised error %.2e (%s)\n",
               name_c, lambda, tft_n_tensors(m), loss, worst, worst_name);
        free(eimg);
        free(g);
        tft_destroy(m);
        free(img);
        if (n_bad) fail_msg("%s: %d tensors with a gradient error above 1e-3", name_c, n_bad);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spans_lines),
        cmocka_unit_test(test_data_alignment),
        cmocka_unit_test(test_partition),
        cmocka_unit_test(test_parity),
        cmocka_unit_test(test_gradients),
    };
    return cmocka_run_group_tests(tests, nmt_test_dev_setup, nmt_test_dev_teardown);
}
