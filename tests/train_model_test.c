/* SPDX-License-Identifier: MIT */
/* train_model_test.c — the trainer's Transformer/HySAN model (train/families/transformer/tf_train.c):
 * whole-model gradients against double-precision central differences of the
 * reference forward (tests/ref_model.c), log-probability parity with the
 * runtime's nmt_session_score (before and after training, through the
 * exported image), loss reduction, bitwise determinism with dropout, and bad
 * inputs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "family_common.h"
#include "family_writer.h"
#include "format.h"
#include "nmt_writer.h"
#include "random_model.h"
#include "ref_model.h"
#include "test_util.h"
#include "tf_train.h"
#include "transformer_cfg.h"

typedef nmt_test_dev_env env; /* the group fixture of test_util.h */

/* ---- data --------------------------------------------------------------- */

#define PAD 0
#define BOS 1
#define EOS 2
#define MAXS 4
#define MAXL 8

typedef struct sents {
    uint32_t n;
    int32_t src[MAXS][MAXL], tgt[MAXS][MAXL];
    uint32_t slen[MAXS], tlen[MAXS]; /* without EOS */
} sents;

typedef struct tbatch {
    int32_t src[MAXS * (MAXL + 1)], tin[MAXS * (MAXL + 1)], tout[MAXS * (MAXL + 1)];
    uint32_t sl[MAXS], tl[MAXS];
    tft_batch b;
} tbatch;

static void random_sents(sents *s, uint32_t n, const uint32_t *slen, const uint32_t *tlen, uint32_t vocab,
                         uint64_t seed) {
    nmt_test_rng r = nmt_test_rng_make(seed);
    memset(s, 0, sizeof *s);
    s->n = n;
    for (uint32_t i = 0; i < n; i++) {
        s->slen[i] = slen[i];
        s->tlen[i] = tlen[i];
        for (uint32_t j = 0; j < slen[i]; j++) s->src[i][j] = nmt_test_rng_int(&r, 4, (int32_t)vocab);
        for (uint32_t j = 0; j < tlen[i]; j++) s->tgt[i][j] = nmt_test_rng_int(&r, 4, (int32_t)vocab);
    }
}

/* The runtime's conventions: source x EOS pad..., decoder BOS y pad... -> y EOS pad... */
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
                        .tgt_in = tb->tin, .tgt_out = tb->tout, .tgt_lens = tb->tl};
}

static void *random_image(const char *norm, const char *enc_br, const char *dec_br, const char *fusion, uint32_t r,
                          int shared, int tied, uint32_t d, uint32_t ff, uint32_t layers, uint32_t vocab, uint64_t seed,
                          size_t *size) {
    nmt_random_transformer_config c;
    nmt_random_transformer_defaults(&c);
    c.d_model = d;
    c.n_heads = 2;
    c.d_ff = ff;
    c.enc_layers = c.dec_layers = layers;
    c.src_vocab = c.tgt_vocab = vocab;
    c.norm = norm;
    c.enc_branches = enc_br;
    c.dec_branches = dec_br;
    c.fusion = fusion;
    c.gate_reduction = r;
    c.shared_embeddings = shared;
    c.tied_output = tied;
    c.pad_id = PAD;
    c.bos_id = BOS;
    c.eos_id = EOS;
    c.unk_id = 3;
    c.seed = seed;
    void *img = NULL;
    assert_int_equal(nmt_random_transformer_image(&c, &img, size), NMT_OK);
    return img;
}

/* Summed label-smoothed loss in double through the reference forward. */
static double ref_loss(const nmt_file *f, const sents *s, uint32_t V, double eps) {
    double total = 0.0;
    double *lg = malloc(sizeof(double) * (MAXL + 1) * V);
    assert_non_null(lg);
    for (uint32_t i = 0; i < s->n; i++) {
        int rows = ref_model_logits(f, s->src[i], s->slen[i], s->tgt[i], s->tlen[i], lg);
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
    free(lg);
    return total;
}

static float *read_params(tft_model *m) {
    float *p = malloc(tft_n_params(m) * sizeof(float));
    assert_non_null(p);
    assert_int_equal(tft_read_state(m, p, NULL, NULL, NULL), NMT_OK);
    return p;
}

/* ---- 1. gradient check -------------------------------------------------- */

#ifndef FD_H
#define FD_H 1e-5
#endif

typedef struct grad_case {
    const char *name, *norm, *enc_br, *dec_br, *fusion;
    uint32_t r;
    int shared, tied;
    uint32_t d, ff, layers;
    const char *mg_layers, *mg_heads;  /* MG-SA (arch mgsa) when mg_heads != NULL */
    int mg_rec;                        /* MG-SA phrase interaction, NMT_MG_REC_* */
    int mg_com;                        /* MG-SA phrase composition, NMT_MG_COM_* */
    const char *ph[3];                 /* phrase attention (arch phrase) when ph[0] != NULL: enc, dec, cross */
    const char *act, *pos;             /* ffn_activation, position_encoding (NULL: relu, sinusoid) */
    uint32_t pos_offset;
    int out_bias;                      /* output_bias: a logits bias */
    const char *gate;                  /* gate (NULL: branch) */
} grad_case;

/* Central differences with h = 1e-5 (relative for |p| > 1) of the loss in
 * double: a larger h (1e-3, 1e-4) crosses ReLU kinks of the FFN / gate
 * hidden units (seen on dec.1.ffn.fc1.bias and a gate fc1 bias, where the
 * difference quotient then disagrees while h = 1e-5 agrees to 1e-6).
 * Measured on PoCL (CPU), worst per-tensor normalised error per case:
 * 8.3e-6, 3.0e-5, 2.1e-5, 1.9e-5, 1.0e-5, 2.5e-5 (the worst are always key
 * biases, whose true gradient is 0: softmax is shift-invariant). */
static const grad_case grad_cases[] = {
    {"post sum global", "post", "global", "global", "sum", 4, 0, 0, 8, 16, 1, NULL, NULL, 0, 0, {NULL, NULL, NULL}, NULL, NULL, 0, 0, NULL},
    {"pre shared+tied", "pre", "global", "global", "sum", 4, 1, 1, 8, 16, 2, NULL, NULL, 0, 0, {NULL, NULL, NULL}, NULL, NULL, 0, 0, NULL},
    {"post hysan sum", "post", "global fw bw local:1", "global local:1", "sum", 4, 0, 1, 8, 16, 1, NULL, NULL, 0, 0, {NULL, NULL, NULL}, NULL, NULL, 0, 0, NULL},
    {"pre hysan concat", "pre", "global fw bw local:1", "global local:1", "concat", 4, 0, 0, 8, 16, 1, NULL, NULL, 0, 0, {NULL, NULL, NULL}, NULL, NULL, 0, 0, NULL},
    {"post hysan gate", "post", "global fw bw local:1", "global local:1", "gate", 2, 1, 1, 16, 32, 1, NULL, NULL, 0, 0, {NULL, NULL, NULL}, NULL, NULL, 0, 0, NULL},
    {"pre hysan gate 2 layers", "pre", "global fw bw local:1", "global local:1", "gate", 2, 0, 0, 8, 16, 2, NULL, NULL, 0, 0, {NULL, NULL, NULL}, NULL, NULL, 0, 0, NULL},
    {"post mgsa ngram:2 word", "post", "global", "global", "sum", 4, 0, 0, 8, 16, 2, "1 2", "ngram:2 word", 0, 0, {NULL, NULL, NULL}, NULL, NULL, 0, 0, NULL},
    {"pre mgsa ngram:3 ngram:2", "pre", "global", "global", "sum", 4, 1, 1, 8, 16, 1, "1", "ngram:3 ngram:2", 0, 0, {NULL, NULL, NULL}, NULL, NULL, 0, 0, NULL},
    {"post mgsa lstm ngram:2 word", "post", "global", "global", "sum", 4, 0, 0, 8, 16, 2, "1", "ngram:2 word",
     NMT_MG_REC_LSTM, 0, {NULL, NULL, NULL}, NULL, NULL, 0, 0, NULL},
    {"pre mgsa onlstm ngram:2 ngram:3", "pre", "global", "global", "sum", 4, 0, 0, 8, 16, 1, "1", "ngram:2 ngram:3",
     NMT_MG_REC_ONLSTM, 0, {NULL, NULL, NULL}, NULL, NULL, 0, 0, NULL},
    {"post mgsa san ngram:2 ngram:3", "post", "global", "global", "sum", 4, 0, 0, 8, 16, 2, "1 2", "ngram:2 ngram:3",
     NMT_MG_REC_NONE, NMT_MG_COM_SAN, {NULL, NULL, NULL}, NULL, NULL, 0, 0, NULL},
    {"pre mgsa lstm-com ngram:3 ngram:2", "pre", "global", "global", "sum", 4, 0, 0, 8, 16, 1, "1", "ngram:3 ngram:2",
     NMT_MG_REC_LSTM, NMT_MG_COM_LSTM, {NULL, NULL, NULL}, NULL, NULL, 0, 0, NULL},
    {"post phrase convkv homo", "post", "global", "global", "sum", 4, 0, 0, 8, 16, 1, NULL, NULL, 0, 0,
     {"convkv:homo:11", "convkv:homo:02", "convkv:homo:101"}, NULL, NULL, 0, 0, NULL},
    {"pre phrase convkv hetero", "pre", "global", "global", "sum", 4, 0, 0, 8, 16, 1, NULL, NULL, 0, 0,
     {"convkv:hetero:123", "convkv:hetero:12", "convkv:hetero:13"}, NULL, NULL, 0, 0, NULL},
    {"post phrase queryk homo", "post", "global", "global", "sum", 4, 0, 0, 8, 16, 1, NULL, NULL, 0, 0,
     {"queryk:homo:101", "queryk:homo:11", "queryk:homo:02"}, NULL, NULL, 0, 0, NULL},
    {"pre phrase queryk hetero", "pre", "global", "global", "sum", 4, 1, 1, 8, 16, 1, NULL, NULL, 0, 0,
     {"queryk:hetero:12", "queryk:hetero:123", "queryk:hetero:13"}, NULL, NULL, 0, 0, NULL},
    {"post phrase convkv inter", "post", "global", "global", "sum", 4, 0, 0, 8, 16, 1, NULL, NULL, 0, 0,
     {"convkv:inter:12", "convkv:inter:12", "convkv:inter:12"}, NULL, NULL, 0, 0, NULL},
    {"pre phrase queryk inter", "pre", "global", "global", "sum", 4, 0, 0, 8, 16, 1, NULL, NULL, 0, 0,
     {"queryk:inter:12", "queryk:inter:12", "queryk:inter:12"}, NULL, NULL, 0, 0, NULL},
    {"post swish sinusoid-2i logits bias shared+tied", "post", "global", "global", "sum", 4, 1, 1, 8, 16, 1, NULL, NULL,
     0, 0, {NULL, NULL, NULL}, "swish", "sinusoid-2i", 0, 1, NULL},
    {"pre gelu interleaved offset 2 logits bias", "pre", "global", "global", "sum", 4, 0, 0, 8, 16, 2, NULL, NULL, 0, 0,
     {NULL, NULL, NULL}, "gelu", "sinusoid-interleaved", 2, 1, NULL},
    {"pre hysan gate shared r 4", "pre", "global fw bw local:1", "global local:1", "gate", 4, 0, 0, 8, 16, 1, NULL, NULL,
     0, 0, {NULL, NULL, NULL}, NULL, NULL, 0, 0, "shared"},
};

/* An MG-SA model with img's hyper-parameters, these phrase heads and
 * random weights (seed); img is freed. */
static void *to_mgsa(void *img, size_t *size, const char *layers, const char *heads, int rec, int com,
                     uint64_t seed) {
    nmt_file f;
    assert_int_equal(nmt_file_open(&f, img, *size, 1), NMT_OK);
    nmt_tf_cfg c;
    assert_int_equal(nmt_family_parse(&nmt_family_transformer, &f, &c), NMT_OK);
    snprintf(c.mg_layers_text, sizeof c.mg_layers_text, "%s", layers);
    snprintf(c.mg_heads_text, sizeof c.mg_heads_text, "%s", heads);
    c.mg_interact = rec;
    c.mg_compose = com;
    c.mg_chunk = 2; /* ON-LSTM: d 8, 4 master units */
    c.mg_fallback = 2;
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

/* A phrase-attention model with img's hyper-parameters, these ph_enc /
 * ph_dec / ph_cross and random weights (seed); img is freed. */
static void *to_phrase(void *img, size_t *size, const char *const ph[3], uint64_t seed) {
    nmt_file f;
    assert_int_equal(nmt_file_open(&f, img, *size, 1), NMT_OK);
    nmt_tf_cfg c;
    assert_int_equal(nmt_family_parse(&nmt_family_transformer, &f, &c), NMT_OK);
    for (int i = 0; i < 3; i++) snprintf(c.ph_text[i], sizeof c.ph_text[i], "%s", ph[i]);
    assert_int_equal(nmt_tf_finish(&c, ~0ull, NULL, 0), NMT_OK);
    free(img);
    nmtw_writer *w = nmtw_create();
    assert_non_null(w);
    assert_int_equal(nmtw_add_hparams(w, &nmt_family_phrase, &c), NMT_OK);
    assert_int_equal(nmtw_add_random_tensors(w, &nmt_family_phrase, &c, seed, 1.0f), NMT_OK);
    void *out = NULL;
    assert_int_equal(nmtw_write_memory(w, &out, size), NMT_OK);
    nmtw_destroy(w);
    return out;
}

/* A Transformer with img's hyper-parameters and the keys of other
 * frameworks' models (docs/IMPORT.md), random weights (seed); img is freed. */
static void *to_options(void *img, size_t *size, const grad_case *gc, uint64_t seed) {
    nmt_file f;
    assert_int_equal(nmt_file_open(&f, img, *size, 1), NMT_OK);
    nmt_tf_cfg c;
    assert_int_equal(nmt_family_parse(&nmt_family_transformer, &f, &c), NMT_OK);
    const nmt_family *fam = &nmt_family_transformer;
    if (gc->act) assert_int_equal(nmt_hparam_set_text(nmt_hparam_find(fam, "ffn_activation"), &c, gc->act), NMT_OK);
    if (gc->pos) assert_int_equal(nmt_hparam_set_text(nmt_hparam_find(fam, "position_encoding"), &c, gc->pos), NMT_OK);
    if (gc->gate) assert_int_equal(nmt_hparam_set_text(nmt_hparam_find(fam, "gate"), &c, gc->gate), NMT_OK);
    c.pos_offset = gc->pos_offset;
    c.out_bias = gc->out_bias;
    assert_int_equal(nmt_tf_finish(&c, ~0ull, NULL, 0), NMT_OK);
    free(img);
    nmtw_writer *w = nmtw_create();
    assert_non_null(w);
    assert_int_equal(nmtw_add_hparams(w, fam, &c), NMT_OK);
    assert_int_equal(nmtw_add_random_tensors(w, fam, &c, seed, 1.0f), NMT_OK);
    void *out = NULL;
    assert_int_equal(nmtw_write_memory(w, &out, size), NMT_OK);
    nmtw_destroy(w);
    return out;
}

static void test_gradients(void **state) {
    env *e = *state;
    const uint32_t V = 13;
    const double eps = 0.1;
    static const uint32_t slen[3] = {3, 5, 2}, tlen[3] = {4, 2, 3};
    for (size_t ci = 0; ci < sizeof grad_cases / sizeof grad_cases[0]; ci++) {
        const grad_case *gc = &grad_cases[ci];
        size_t isz;
        void *img = random_image(gc->norm, gc->enc_br, gc->dec_br, gc->fusion, gc->r, gc->shared, gc->tied, gc->d,
                                 gc->ff, gc->layers, V, 100 + ci, &isz);
        if (gc->mg_heads) img = to_mgsa(img, &isz, gc->mg_layers, gc->mg_heads, gc->mg_rec, gc->mg_com, 100 + ci);
        if (gc->ph[0]) img = to_phrase(img, &isz, gc->ph, 100 + ci);
        if (gc->act || gc->pos || gc->pos_offset || gc->out_bias || gc->gate) img = to_options(img, &isz, gc, 100 + ci);
        tft_limits lim = {.max_seqs = 3, .max_src_len = 7, .max_tgt_len = 7, .max_tokens = 0};
        tft_model *m = NULL;
        nmt_test_assert_ok(e->dev, tft_create(e->dev, img, isz, &lim, &m));
        sents s;
        random_sents(&s, 3, slen, tlen, V, 7 + ci);
        tbatch tb;
        make_batch(&s, &tb);
        tft_step_opts o = {.dropout = 0.0f, .attn_dropout = 0.0f, .label_smoothing = (float)eps, .grad_scale = 1.0f, .seed = 1};
        double loss = 0, nll = 0;
        nmt_test_assert_ok(e->dev, tft_zero_grad(m));
        nmt_test_assert_ok(e->dev, tft_forward_backward(m, &tb.b, &o, &loss, &nll));
        const size_t np = tft_n_params(m);
        float *g = malloc(np * sizeof(float));
        assert_non_null(g);
        nmt_test_assert_ok(e->dev, tft_read_state(m, NULL, g, NULL, NULL));

        size_t esz;
        void *eimg = tft_export_image(m, 0, &esz);
        nmt_file f;
        assert_int_equal(nmt_file_open(&f, eimg, esz, 0), NMT_OK);
        const double l0 = ref_loss(&f, &s, V, eps);
        assert_true(fabs(l0 - loss) < 1e-3 * (1.0 + fabs(l0)));

        nmt_test_rng r = nmt_test_rng_make(55 + ci);
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
            assert_int_equal(v.n_elements, count);
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
                const float h = (float)FD_H * fmaxf(1.0f, fabsf(p0));
                const float pp = p0 + h, pm = p0 - h;
                data[j] = pp;
                const double lp = ref_loss(&f, &s, V, eps);
                data[j] = pm;
                const double lm = ref_loss(&f, &s, V, eps);
                data[j] = p0;
                const double fd = (lp - lm) / ((double)pp - (double)pm);
                const double err = fabs((double)g[off + j] - fd);
                if (getenv("GC_DEBUG") && strstr(name, getenv("GC_DEBUG"))) printf("  %s[%zu] g %.6g fd %.6g\n", name, j, (double)g[off + j], fd);
                if (fabs(fd) > max_fd) max_fd = fabs(fd);
                if (err > max_err) max_err = err;
            }
            const double ne = max_err / fmax(max_fd, 1e-3);
            if (ne > worst) {
                worst = ne;
                worst_name = name;
            }
            if (ne > 1e-3) {
                printf("%s: tensor %s: normalised gradient error %.3g (max |fd| %.3g)\n", gc->name, name, ne, max_fd);
                n_bad++;
            }
        }
        printf("[ gradcheck ] %-26s %3u tensors, loss %.5f, worst normalised error %.2e (%s)\n", gc->name,
               tft_n_tensors(m), loss, worst, worst_name);
        free(eimg);
        free(g);
        tft_destroy(m);
        free(img);
        if (n_bad) fail_msg("%s: %d tensors with a gradient error above 1e-3", gc->name, n_bad);
    }
}

/* ---- 2. parity with the runtime ------------------------------------------ */

static void session_scores(env *e, const void *img, size_t isz, const sents *s, float *out) {
    const nmt_limits lim = {.max_src_len = MAXL, .max_tgt_len = MAXL, .max_batch = MAXS, .max_beam = 1};
    const int32_t *sp_[MAXS], *tp_[MAXS];
    for (uint32_t i = 0; i < s->n; i++) {
        sp_[i] = s->src[i];
        tp_[i] = s->tgt[i];
    }
    nmt_batch sb = {sp_, s->slen, s->n}, tb = {tp_, s->tlen, s->n};
    family_session_scores(e->dev, img, isz, &lim, &sb, &tb, NULL, NULL, out);
}

static void compare_with_session(env *e, tft_model *m, const void *img, size_t isz, const sents *s,
                                 const tbatch *tb, const char *what) {
    float lp[MAXS * (MAXL + 1)], want[MAXS];
    nmt_test_assert_ok(e->dev, tft_token_logprobs(m, &tb->b, lp));
    session_scores(e, img, isz, s, want);
    for (uint32_t i = 0; i < s->n; i++) {
        double sum = 0.0;
        for (uint32_t p = 0; p < tb->b.tgt_len; p++) {
            if (p >= tb->tl[i]) assert_true(lp[i * tb->b.tgt_len + p] == 0.0f);
            sum += lp[i * tb->b.tgt_len + p];
        }
        const double diff = fabs(sum - want[i]);
        printf("[ parity    ] %s sentence %u: trainer %.6f session %.6f diff %.2e\n", what, i, sum, (double)want[i],
               diff);
        assert_true(diff < 1e-4 * (1.0 + fabs((double)want[i])));
    }
}

/* n training steps (dropout 0.1, label smoothing 0.1, Adam lr 1e-2) on tb. */
static void adam_steps(env *e, tft_model *m, const tbatch *tb, uint64_t n) {
    tft_step_opts o = {.dropout = 0.1f, .attn_dropout = 0.0f, .label_smoothing = 0.1f, .grad_scale = 1.0f / 20.0f, .seed = 5};
    for (uint64_t step = 1; step <= n; step++) {
        nmt_test_assert_ok(e->dev, tft_zero_grad(m));
        o.seed = 5 + step;
        nmt_test_assert_ok(e->dev, tft_forward_backward(m, &tb->b, &o, NULL, NULL));
        nmt_adam_params ap = nmt_adam_defaults();
        ap.lr = 1e-2f;
        ap.step = step;
        nmt_test_assert_ok(e->dev, tft_adam_step(m, &ap));
    }
}

static void test_session_parity(void **state) {
    env *e = *state;
    const uint32_t V = 21;
    static const char *const norms[2] = {"post", "pre"};
    for (int ni = 0; ni < 2; ni++) {
        size_t isz;
        void *img = random_image(norms[ni], "global fw bw local:2", "global local:1", "gate", 2, 0, 0, 16, 32, 2, V,
                                 31 + (uint64_t)ni, &isz);
        tft_limits lim = {.max_seqs = MAXS, .max_src_len = MAXL + 1, .max_tgt_len = MAXL + 1, .max_tokens = 0};
        tft_model *m = NULL;
        nmt_test_assert_ok(e->dev, tft_create(e->dev, img, isz, &lim, &m));
        static const uint32_t slen[4] = {5, 2, 7, 0}, tlen[4] = {3, 6, 1, 4};
        sents s;
        random_sents(&s, 4, slen, tlen, V, 9);
        tbatch tb;
        make_batch(&s, &tb);
        compare_with_session(e, m, img, isz, &s, &tb, norms[ni]);
        /* layout: self q|k|v weights (then biases) adjacent, in file order */
        uint32_t n_fused = 0;
        for (uint32_t ti = 0; ti + 5 < tft_n_tensors(m); ti++) {
            const char *name, *n2;
            size_t o0, o1, o2, o3, o4, o5;
            tft_tensor(m, ti, &name, NULL, NULL, &o0, NULL);
            const size_t len = strlen(name), dd = 16 * 16;
            if (len > 18 && strcmp(name + len - 18, "self_attn.q.weight") == 0) {
                tft_tensor(m, ti + 1, NULL, NULL, NULL, &o1, NULL);
                tft_tensor(m, ti + 2, &n2, NULL, NULL, &o2, NULL);
                tft_tensor(m, ti + 3, NULL, NULL, NULL, &o3, NULL);
                tft_tensor(m, ti + 4, NULL, NULL, NULL, &o4, NULL);
                tft_tensor(m, ti + 5, NULL, NULL, NULL, &o5, NULL);
                assert_true(strstr(n2, "self_attn.k.weight") != NULL);
                assert_true(o2 == o0 + dd && o4 == o0 + 2 * dd && o1 == o0 + 3 * dd && o3 == o1 + 16 &&
                            o5 == o1 + 32);
                n_fused++;
            }
        }
        assert_int_equal(n_fused, 4); /* 2 encoder + 2 decoder layers */

        /* a few Adam steps, then the exported image in the runtime */
        adam_steps(e, m, &tb, 3);
        size_t esz;
        void *eimg = tft_export_image(m, 1, &esz);
        compare_with_session(e, m, eimg, esz, &s, &tb, "trained");
        /* the exported image (with the optimiser state) reloads to the same state */
        tft_model *m2 = NULL;
        nmt_test_assert_ok(e->dev, tft_create(e->dev, eimg, esz, &lim, &m2));
        const size_t np = tft_n_params(m);
        assert_int_equal(tft_n_params(m2), np);
        float *a = malloc(4 * np * sizeof(float)), *b = malloc(4 * np * sizeof(float));
        assert_non_null(a);
        assert_non_null(b);
        nmt_test_assert_ok(e->dev, tft_read_state(m, a, NULL, a + np, a + 2 * np));
        nmt_test_assert_ok(e->dev, tft_read_state(m2, b, NULL, b + np, b + 2 * np));
        assert_memory_equal(a, b, 3 * np * sizeof(float));
        free(a);
        free(b);
        tft_destroy(m2);
        free(eimg);
        tft_destroy(m);
        free(img);
    }
}

/* MG-SA: the trainer's log-probabilities equal the session's before and
 * after Adam steps (phrase memories over a padded batch, both layers). */
static void test_mgsa_parity(void **state) {
    env *e = *state;
    const uint32_t V = 21;
    size_t isz;
    void *img = random_image("post", "global", "global", "sum", 4, 0, 0, 16, 32, 2, V, 61, &isz);
    img = to_mgsa(img, &isz, "1 2", "word ngram:2", NMT_MG_REC_LSTM, NMT_MG_COM_SAN, 61);
    tft_limits lim = {.max_seqs = MAXS, .max_src_len = MAXL + 1, .max_tgt_len = MAXL + 1, .max_tokens = 0};
    tft_model *m = NULL;
    nmt_test_assert_ok(e->dev, tft_create(e->dev, img, isz, &lim, &m));
    static const uint32_t slen[4] = {5, 2, 7, 0}, tlen[4] = {3, 6, 1, 4};
    sents s;
    random_sents(&s, 4, slen, tlen, V, 19);
    tbatch tb;
    make_batch(&s, &tb);
    compare_with_session(e, m, img, isz, &s, &tb, "mgsa");
    adam_steps(e, m, &tb, 3);
    size_t esz;
    void *eimg = tft_export_image(m, 0, &esz);
    nmt_model_info info;
    assert_int_equal(nmt_model_inspect(eimg, esz, &info), NMT_OK);
    assert_string_equal(info.arch, "mgsa");
    compare_with_session(e, m, eimg, esz, &s, &tb, "mgsa trained");
    free(eimg);
    tft_destroy(m);
    free(img);
}

/* Phrase attention: the trainer's log-probabilities equal the session's
 * scores of the same (random, then trained and exported) model for every
 * method x structure; and the decoder is causal: changing a later target
 * token changes no earlier token's log-probability. */
static void test_phrase_parity_and_causality(void **state) {
    env *e = *state;
    const uint32_t V = 21;
    static const char *const cfgs[][3] = {
        {"convkv:homo:11", "convkv:homo:02", "convkv:hetero:12"},
        {"queryk:hetero:123", "queryk:homo:101", "queryk:homo:11"},
        {"queryk:homo:02", "convkv:hetero:123", "queryk:hetero:13"},
        {"convkv:hetero:13", "queryk:hetero:12", "convkv:homo:011"},
        {"queryk:inter:12", "queryk:inter:12", "queryk:inter:12"},
        {"convkv:inter:12", "convkv:inter:12", "queryk:inter:12"},
    };
    for (size_t k = 0; k < NMT_ARRAY_LEN(cfgs); k++) {
        size_t isz;
        void *img = random_image(k % 2 ? "pre" : "post", "global", "global", "sum", 4, 0, 0, 16, 32, 2, V, 71 + k,
                                 &isz);
        img = to_phrase(img, &isz, cfgs[k], 71 + k);
        tft_limits lim = {.max_seqs = MAXS, .max_src_len = MAXL + 1, .max_tgt_len = MAXL + 1, .max_tokens = 0};
        tft_model *m = NULL;
        nmt_test_assert_ok(e->dev, tft_create(e->dev, img, isz, &lim, &m));
        static const uint32_t slen[4] = {5, 2, 7, 1}, tlen[4] = {3, 6, 1, 4};
        sents s;
        random_sents(&s, 4, slen, tlen, V, 29 + k);
        tbatch tb;
        make_batch(&s, &tb);
        compare_with_session(e, m, img, isz, &s, &tb, cfgs[k][1]);
        /* causality: a different last target token of sentence 1 (6
         * tokens) leaves the log-probabilities of its earlier positions */
        float a[MAXS * (MAXL + 1)], b[MAXS * (MAXL + 1)];
        nmt_test_assert_ok(e->dev, tft_token_logprobs(m, &tb.b, a));
        const uint32_t T = tb.b.tgt_len, last = tlen[1];
        tb.tin[1 * T + last] = tb.tin[1 * T + last] == 5 ? 6 : 5; /* decoder input at position 6 */
        tb.tin[1 * T + 3] = tb.tin[1 * T + 3] == 7 ? 8 : 7;      /* and at position 3 */
        nmt_test_assert_ok(e->dev, tft_token_logprobs(m, &tb.b, b));
        for (uint32_t p = 0; p < 3; p++) assert_memory_equal(&a[1 * T + p], &b[1 * T + p], sizeof(float));
        assert_true(a[1 * T + 3] != b[1 * T + 3]);
        for (uint32_t i = 0; i < 4; i++) /* other sentences: untouched */
            if (i != 1)
                for (uint32_t p = 0; p < T; p++) assert_memory_equal(&a[i * T + p], &b[i * T + p], sizeof(float));
        make_batch(&s, &tb);
        /* the interleaved sub-layers' attention mass: every unigram query row
         * sums to 1 per head, every bigram query row but the first too */
        ntm_attn_mass mass[8];
        memset(mass, 0, sizeof mass);
        uint32_t nm = 0;
        nmt_test_assert_ok(e->dev, tft_attention_mass(m, &tb.b, mass, 8, &nm));
        uint32_t want_n = 0;
        for (int kind = 0; kind < 3; kind++)
            if (strstr(cfgs[k][kind], "inter")) want_n += 2; /* 2 layers */
        assert_int_equal(nm, want_n);
        for (uint32_t i = 0; i < nm; i++) {
            const int enc = !strncmp(mass[i].where, "enc", 3);
            double rows = 0;
            for (uint32_t q = 0; q < 4; q++) rows += enc ? tb.sl[q] : tb.tl[q];
            const double H = 2, tok = mass[i].mass[0] + mass[i].mass[1], phr = mass[i].mass[2] + mass[i].mass[3];
            assert_true(fabs(tok - H * rows) < 1e-3 * rows);
            assert_true(fabs(phr - H * (rows - 4)) < 1e-3 * rows);
            for (int q = 0; q < 4; q++) assert_true(mass[i].mass[q] > 0);
        }
        adam_steps(e, m, &tb, 3);
        size_t esz;
        void *eimg = tft_export_image(m, 0, &esz);
        nmt_model_info info;
        assert_int_equal(nmt_model_inspect(eimg, esz, &info), NMT_OK);
        assert_string_equal(info.arch, "phrase");
        compare_with_session(e, m, eimg, esz, &s, &tb, "phrase trained");
        free(eimg);
        tft_destroy(m);
        free(img);
    }
}

/* ---- 3. training reduces the loss ----------------------------------------- */

static void test_training_reduces_loss(void **state) {
    env *e = *state;
    const uint32_t V = 13;
    size_t isz;
    void *img = random_image("pre", "global", "global", "sum", 4, 1, 1, 16, 32, 1, V, 77, &isz);
    tft_limits lim = {.max_seqs = 3, .max_src_len = 7, .max_tgt_len = 7, .max_tokens = 0};
    tft_model *m = NULL;
    nmt_test_assert_ok(e->dev, tft_create(e->dev, img, isz, &lim, &m));
    static const uint32_t slen[3] = {4, 5, 3}, tlen[3] = {4, 3, 5};
    sents s;
    random_sents(&s, 3, slen, tlen, V, 3);
    tbatch tb;
    make_batch(&s, &tb);
    const float ntok = (float)(tb.tl[0] + tb.tl[1] + tb.tl[2]);
    double l0 = 0, nll0 = 0, l = 0, nll = 0;
    nmt_test_assert_ok(e->dev, tft_forward_loss(m, &tb.b, 0.0f, &l0, &nll0));
    assert_true(fabs(l0 - nll0) < 1e-4 * l0); /* no smoothing: loss == nll */
    tft_step_opts o = {.dropout = 0.0f, .attn_dropout = 0.0f, .label_smoothing = 0.0f, .grad_scale = 1.0f / ntok, .seed = 1};
    double first = 0;
    for (uint64_t step = 1; step <= 30; step++) {
        nmt_test_assert_ok(e->dev, tft_zero_grad(m));
        nmt_test_assert_ok(e->dev, tft_forward_backward(m, &tb.b, &o, &l, &nll));
        if (step == 1) first = l;
        double gn = 0;
        nmt_test_assert_ok(e->dev, tft_grad_norm(m, &gn));
        assert_true(isfinite(gn) && gn > 0.0);
        nmt_adam_params ap = nmt_adam_defaults();
        ap.lr = 1e-2f;
        ap.step = step;
        nmt_test_assert_ok(e->dev, tft_adam_step(m, &ap));
    }
    assert_true(fabs(first - l0) < 1e-4 * l0);
    nmt_test_assert_ok(e->dev, tft_forward_loss(m, &tb.b, 0.0f, &l, &nll));
    printf("[ training  ] loss %.4f -> %.4f after 30 Adam steps\n", l0, l);
    assert_true(l < 0.5 * l0);
    tft_destroy(m);
    free(img);
}

/* ---- 4. determinism --------------------------------------------------------- */

static void run_steps(env *e, tft_model *m, const tbatch *tb, uint64_t seed) {
    tft_step_opts o = {.dropout = 0.1f, .attn_dropout = 0.0f, .label_smoothing = 0.1f, .grad_scale = 0.1f, .seed = 0};
    for (uint64_t step = 1; step <= 3; step++) {
        nmt_test_assert_ok(e->dev, tft_zero_grad(m));
        o.seed = seed + step;
        nmt_test_assert_ok(e->dev, tft_forward_backward(m, &tb->b, &o, NULL, NULL));
        nmt_adam_params ap = nmt_adam_defaults();
        ap.lr = 1e-3f;
        ap.step = step;
        nmt_test_assert_ok(e->dev, tft_adam_step(m, &ap));
    }
}

static void test_determinism(void **state) {
    env *e = *state;
    const uint32_t V = 13;
    size_t isz;
    void *img = random_image("post", "global fw local:1", "global", "gate", 2, 0, 0, 8, 16, 1, V, 5, &isz);
    tft_limits lim = {.max_seqs = 3, .max_src_len = 7, .max_tgt_len = 7, .max_tokens = 0};
    tft_model *m = NULL;
    nmt_test_assert_ok(e->dev, tft_create(e->dev, img, isz, &lim, &m));
    static const uint32_t slen[3] = {4, 6, 3}, tlen[3] = {5, 3, 2};
    sents s;
    random_sents(&s, 3, slen, tlen, V, 11);
    tbatch tb;
    make_batch(&s, &tb);
    const size_t np = tft_n_params(m);
    float *p0 = read_params(m);
    float *zero = calloc(np, sizeof(float));
    assert_non_null(zero);
    run_steps(e, m, &tb, 100);
    float *p1 = read_params(m);
    nmt_test_assert_ok(e->dev, tft_write_state(m, p0, zero, zero));
    run_steps(e, m, &tb, 100);
    float *p2 = read_params(m);
    assert_memory_equal(p1, p2, np * sizeof(float));
    assert_memory_not_equal(p0, p1, np * sizeof(float));
    nmt_test_assert_ok(e->dev, tft_write_state(m, p0, zero, zero));
    run_steps(e, m, &tb, 200);
    float *p3 = read_params(m);
    assert_memory_not_equal(p1, p3, np * sizeof(float));
    /* gradients accumulate across micro-batches: two calls give twice one */
    nmt_test_assert_ok(e->dev, tft_write_state(m, p0, NULL, NULL));
    tft_step_opts o = {.dropout = 0.0f, .attn_dropout = 0.0f, .label_smoothing = 0.1f, .grad_scale = 0.1f, .seed = 1};
    float *g1 = malloc(np * sizeof(float)), *g2 = malloc(np * sizeof(float));
    assert_non_null(g1);
    assert_non_null(g2);
    nmt_test_assert_ok(e->dev, tft_zero_grad(m));
    nmt_test_assert_ok(e->dev, tft_forward_backward(m, &tb.b, &o, NULL, NULL));
    nmt_test_assert_ok(e->dev, tft_read_state(m, NULL, g1, NULL, NULL));
    nmt_test_assert_ok(e->dev, tft_forward_backward(m, &tb.b, &o, NULL, NULL));
    nmt_test_assert_ok(e->dev, tft_read_state(m, NULL, g2, NULL, NULL));
    for (size_t i = 0; i < np; i++) g1[i] *= 2.0f;
    nmt_test_assert_close(g2, g1, np, 1e-6);
    double gn = 0;
    nmt_test_assert_ok(e->dev, tft_grad_norm(m, &gn));
    double want = 0;
    for (size_t i = 0; i < np; i++) want += (double)g2[i] * g2[i];
    assert_true(fabs(gn - sqrt(want)) < 1e-4 * sqrt(want));
    nmt_test_assert_ok(e->dev, tft_zero_grad(m));
    nmt_test_assert_ok(e->dev, tft_grad_norm(m, &gn));
    assert_true(gn == 0.0);
    free(g1);
    free(g2);
    free(p0);
    free(p1);
    free(p2);
    free(p3);
    free(zero);
    tft_destroy(m);
    free(img);
}

/* ---- 5. bad input ------------------------------------------------------------ */

/* Rebuild `img` with its metadata keys set for the config of the random
 * model, tensor `change` written as int8 (or dropped when drop). */
static void *rewrite_image(const void *img, size_t isz, const char *change, int drop, const char *arch,
                           size_t *out_size) {
    nmt_file f;
    assert_int_equal(nmt_file_open(&f, img, isz, 1), NMT_OK);
    nmtw_writer *w = nmtw_create();
    assert_non_null(w);
    static const char *const ikeys[] = {"d_model", "n_heads", "d_ff", "enc_layers", "dec_layers", "src_vocab",
                                        "tgt_vocab", "shared_embeddings", "tied_output", "gate_reduction",
                                        "bos_id", "eos_id", "pad_id", "unk_id"};
    static const char *const skeys[] = {"norm", "enc_branches", "dec_branches", "fusion"};
    assert_int_equal(nmtw_set_str(w, "arch", arch), NMT_OK);
    for (size_t i = 0; i < sizeof ikeys / sizeof ikeys[0]; i++) {
        int64_t v;
        assert_int_equal(nmt_file_get_i64(&f, ikeys[i], &v), NMT_OK);
        assert_int_equal(nmtw_set_i64(w, ikeys[i], v), NMT_OK);
    }
    for (size_t i = 0; i < sizeof skeys / sizeof skeys[0]; i++) {
        char buf[96];
        assert_int_equal(nmt_file_get_str(&f, skeys[i], buf, sizeof buf), NMT_OK);
        assert_int_equal(nmtw_set_str(w, skeys[i], buf), NMT_OK);
    }
    for (uint32_t i = 0; i < f.h.n_tensors; i++) {
        nmt_tensor_view v;
        assert_int_equal(nmt_file_tensor_at(&f, i, &v), NMT_OK);
        if (change && strcmp(v.name, change) == 0) {
            if (drop) continue;
            int8_t *q = calloc(v.n_elements, 1);
            float *sc = malloc(v.shape[0] * sizeof(float));
            assert_non_null(q);
            assert_non_null(sc);
            for (uint32_t k = 0; k < v.shape[0]; k++) sc[k] = 0.01f;
            assert_int_equal(nmtw_add_tensor(w, v.name, NMT_DTYPE_I8, v.ndim, v.shape, q, sc), NMT_OK);
            free(q);
            free(sc);
        } else {
            assert_int_equal(nmtw_add_tensor(w, v.name, v.dtype, v.ndim, v.shape, v.data, NULL), NMT_OK);
        }
    }
    void *out = NULL;
    assert_int_equal(nmtw_write_memory(w, &out, out_size), NMT_OK);
    nmtw_destroy(w);
    return out;
}

static void test_bad_input(void **state) {
    env *e = *state;
    const uint32_t V = 13;
    size_t isz, sz;
    void *img = random_image("post", "global", "global", "sum", 4, 0, 0, 8, 16, 1, V, 3, &isz);
    tft_limits lim = {.max_seqs = 2, .max_src_len = 6, .max_tgt_len = 6, .max_tokens = 0};
    tft_model *m = (tft_model *)1;

    /* the unchanged rewrite loads */
    void *ok = rewrite_image(img, isz, NULL, 0, "transformer", &sz);
    assert_int_equal(tft_create(e->dev, ok, sz, &lim, &m), NMT_OK);
    tft_destroy(m);
    free(ok);
    void *q8 = rewrite_image(img, isz, "enc.0.ffn.fc1.weight", 0, "transformer", &sz);
    assert_int_equal(tft_create(e->dev, q8, sz, &lim, &m), NMT_ERR_UNSUPPORTED);
    assert_null(m);
    free(q8);
    void *miss = rewrite_image(img, isz, "out_proj", 1, "transformer", &sz);
    assert_int_equal(tft_create(e->dev, miss, sz, &lim, &m), NMT_ERR_MODEL_MISSING_TENSOR);
    free(miss);
    void *arch = rewrite_image(img, isz, NULL, 0, "mgsa", &sz);
    assert_int_equal(tft_create(e->dev, arch, sz, &lim, &m), NMT_ERR_MODEL_ARCH);
    free(arch);
    /* MG-SA syntax heads train (their spans: mgsa_syntax_test) */
    void *syn = to_mgsa(rewrite_image(img, isz, NULL, 0, "transformer", &sz), &sz, "1", "word syntax",
                        NMT_MG_REC_NONE, NMT_MG_COM_MAX, 5);
    assert_int_equal(tft_create(e->dev, syn, sz, &lim, &m), NMT_OK);
    tft_destroy(m);
    m = NULL;
    free(syn);
    char garbage[512];
    memset(garbage, 'x', sizeof garbage);
    assert_int_equal(tft_create(e->dev, garbage, sizeof garbage, &lim, &m), NMT_ERR_MODEL_BAD_MAGIC);
    assert_int_equal(tft_create(e->dev, img, 100, &lim, &m), NMT_ERR_MODEL_TRUNCATED);
    tft_limits bad = {.max_seqs = 0, .max_src_len = 6, .max_tgt_len = 6, .max_tokens = 0};
    assert_int_equal(tft_create(e->dev, img, isz, &bad, &m), NMT_ERR_INVALID_ARGUMENT);
    bad = (tft_limits){.max_seqs = 2, .max_src_len = 6, .max_tgt_len = 6, .max_tokens = 5}; /* max_tokens below one sequence */
    assert_int_equal(tft_create(e->dev, img, isz, &bad, &m), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(tft_create(e->dev, img, isz, NULL, &m), NMT_ERR_INVALID_ARGUMENT);

    nmt_test_assert_ok(e->dev, tft_create(e->dev, img, isz, &lim, &m));
    static const uint32_t slen[3] = {4, 5, 3}, tlen[3] = {3, 4, 5};
    sents s;
    random_sents(&s, 3, slen, tlen, V, 1);
    tbatch tb;
    make_batch(&s, &tb);
    tft_step_opts o = {.dropout = 0.0f, .attn_dropout = 0.0f, .label_smoothing = 0.1f, .grad_scale = 1.0f, .seed = 1};
    double l = 0;
    float lp[MAXS * (MAXL + 1)];
    assert_int_equal(tft_forward_backward(m, &tb.b, &o, &l, NULL), NMT_ERR_INVALID_ARGUMENT); /* 3 > max_seqs */
    s.n = 2;
    make_batch(&s, &tb);
    nmt_test_assert_ok(e->dev, tft_forward_backward(m, &tb.b, &o, &l, NULL));
    assert_true(l > 0.0);
    o.attn_dropout = 0.1f;
    assert_int_equal(tft_forward_backward(m, &tb.b, &o, &l, NULL), NMT_ERR_INVALID_ARGUMENT);
    o.attn_dropout = 0.0f;
    s.slen[1] = 6; /* 7 positions with EOS > max_src_len 6 */
    make_batch(&s, &tb);
    assert_int_equal(tft_forward_backward(m, &tb.b, &o, &l, NULL), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(tft_token_logprobs(m, &tb.b, lp), NMT_ERR_INVALID_ARGUMENT);
    s.slen[1] = 5;
    make_batch(&s, &tb);
    tb.sl[0] = 0; /* no EOS */
    assert_int_equal(tft_forward_loss(m, &tb.b, 0.0f, &l, NULL), NMT_ERR_INVALID_ARGUMENT);
    make_batch(&s, &tb);
    tb.src[1] = (int32_t)V;
    assert_int_equal(tft_forward_backward(m, &tb.b, &o, &l, NULL), NMT_ERR_TOKEN_OUT_OF_RANGE);
    make_batch(&s, &tb);
    tb.tout[0] = -3;
    assert_int_equal(tft_forward_loss(m, &tb.b, 0.0f, &l, NULL), NMT_ERR_TOKEN_OUT_OF_RANGE);
    make_batch(&s, &tb);
    tb.tin[2] = (int32_t)V + 4;
    assert_int_equal(tft_token_logprobs(m, &tb.b, lp), NMT_ERR_TOKEN_OUT_OF_RANGE);
    make_batch(&s, &tb);
    nmt_test_assert_ok(e->dev, tft_token_logprobs(m, &tb.b, lp));
    tft_destroy(m);
    free(img);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradients),
        cmocka_unit_test(test_session_parity),
        cmocka_unit_test(test_mgsa_parity),
        cmocka_unit_test(test_phrase_parity_and_causality),
        cmocka_unit_test(test_training_reduces_loss),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests_name("train_model", tests, nmt_test_dev_setup, nmt_test_dev_teardown);
}
