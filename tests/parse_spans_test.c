/* SPDX-License-Identifier: MIT */
/* parse_spans_test.c — the link-grammar phrase parser (tools/parse_spans.c):
 * base constituents of fixed English sentences over words (exact spans,
 * labels and word byte ranges from link-grammar's English dictionary), the
 * same mapped onto SentencePiece pieces of a fixture model (exact), the
 * spans valid for nmt_session_set_spans and readable as a spans file, and
 * the fallback counting.  Without the parser (NMT_WITH_LINK_GRAMMAR off):
 * the stub says so. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "family_writer.h"
#include "nmt_writer.h"
#include "parse_spans.h"
#include "random_model.h"
#include "spans.h"
#include "spans_file.h"
#include "test_util.h"
#include "transformer_cfg.h"

#ifdef NMT_HAVE_LINK_GRAMMAR

static char *spans_text(const nmt_parsed_span *sp, int n) {
    static char buf[512];
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; i < n; i++)
        o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%u-%u:%s", i ? " " : "", sp[i].start,
                              sp[i].start + sp[i].len, sp[i].label);
    return buf;
}

static void test_words(void **state) {
    (void)state;
    char why[256];
    nmt_parser *p = nmt_parser_create(why, sizeof why);
    assert_non_null(p);
    static const struct {
        const char *text, *spans;
        uint32_t n_words;
    } cases[] = {
        {"The cat sat on the mat.", "0-2:NP 4-6:NP", 7},
        {"The quick brown fox jumps over the lazy dog.", "0-4:NP 6-9:NP", 10},
        {"Colorless green ideas sleep furiously.", "0-3:NP 4-5:ADVP", 6},
        {"I don't think he can't go.", "0-1:NP 3-4:NP 5-6:VP", 7},
    };
    nmt_parsed_span sp[32];
    uint32_t wb[32], we[32], nw = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int n = nmt_parser_word_spans(p, cases[i].text, strlen(cases[i].text), sp, 32, wb, we, 32, &nw);
        printf("[ parse     ] %s -> %s (%u words)\n", cases[i].text, spans_text(sp, n), nw);
        assert_true(n >= 0);
        assert_string_equal(spans_text(sp, n), cases[i].spans);
        assert_int_equal(nw, cases[i].n_words);
    }
    /* word byte ranges of the last sentence ("don't" one word, "." its own) */
    static const uint32_t want_b[7] = {0, 2, 8, 14, 17, 23, 25}, want_e[7] = {1, 7, 13, 16, 22, 25, 26};
    assert_memory_equal(wb, want_b, sizeof want_b);
    assert_memory_equal(we, want_e, sizeof want_e);
    nmt_parser_destroy(p);
}

static void test_pieces(void **state) {
    (void)state;
    size_t n = 0;
    void *model = nmt_test_read_file(NMT_TEST_FIXTURES "/spm/uni_nfkc.model", &n);
    assert_non_null(model);
    size_t need = 0;
    assert_int_equal(nmt_tokenizer_arena_size(model, n, 2048, &need), NMT_OK);
    void *arena = aligned_alloc(NMT_ARENA_ALIGNMENT, nmt_test_round_up(need, NMT_ARENA_ALIGNMENT));
    assert_non_null(arena);
    nmt_tokenizer *t = NULL;
    assert_int_equal(nmt_tokenizer_create(model, n, 2048, arena, need, &t), NMT_OK);
    char why[256];
    nmt_parser *p = nmt_parser_create(why, sizeof why);
    assert_non_null(p);
    /* pieces: ▁T h e ▁c at ▁ s at ▁on ▁the ▁m at . */
    static const struct {
        const char *text, *spans;
    } cases[] = {
        {"The cat sat on the mat.", "0-5:NP 9-12:NP"},
        {"The quick brown fox jumps over the lazy dog.", "0-15:NP 24-32:NP"},
    };
    nmt_parsed_span sp[64];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int32_t *ids;
        uint32_t n_ids;
        assert_int_equal(nmt_tokenizer_encode(t, cases[i].text, strlen(cases[i].text), &ids, &n_ids), NMT_OK);
        int32_t copy[128];
        memcpy(copy, ids, n_ids * sizeof *ids);
        const int k = nmt_parser_piece_spans(p, t, copy, n_ids, sp, 64);
        printf("[ pieces    ] %s -> %s (%u pieces)\n", cases[i].text, spans_text(sp, k), n_ids);
        assert_true(k > 0);
        if (cases[i].spans) assert_string_equal(spans_text(sp, k), cases[i].spans);
        /* what nmt_session_set_spans and the spans file accept */
        nmt_span s[64];
        uint8_t lab[64];
        uint32_t ns = 0;
        const char *txt = spans_text(sp, k);
        assert_int_equal(tsp_parse_line(txt, strlen(txt), s, lab, 64, &ns, NULL, 0), NMT_OK);
        assert_int_equal(ns, (uint32_t)k);
        assert_int_equal(nmt_spans_check(s, ns, n_ids, NULL), NMT_OK);
    }
    uint64_t parsed = 0, fallback = 0;
    nmt_parser_counts(p, &parsed, &fallback);
    assert_true(parsed == 2 && fallback == 0);
    /* word salad has no parse without dropping words: the n-gram fallback */
    const char salad[] = "of of the the and";
    const int32_t *ids;
    uint32_t n_ids;
    assert_int_equal(nmt_parser_word_spans(p, salad, strlen(salad), sp, 64, NULL, NULL, 0, &n_ids), -1);
    assert_int_equal(nmt_tokenizer_encode(t, salad, strlen(salad), &ids, &n_ids), NMT_OK);
    assert_int_equal(nmt_parser_piece_spans(p, t, ids, n_ids, sp, 64), -1);
    nmt_parser_counts(p, &parsed, &fallback);
    assert_true(parsed == 2 && fallback == 1);
    const int32_t none[1] = {0};
    assert_int_equal(nmt_parser_piece_spans(p, t, none, 0, sp, 64), -1); /* nothing to parse */
    nmt_parser_counts(p, &parsed, &fallback);
    assert_true(parsed == 2 && fallback == 2);
    nmt_parser_destroy(p);
    free(arena);
    free(model);
}

/* An MG-SA model with syntax heads embedding the fixture tokenizer (600
 * pieces = its vocabulary), random weights. */
static void *syntax_model(const void *spm, size_t spm_size, size_t *size) {
    nmt_random_transformer_config rc;
    nmt_random_transformer_defaults(&rc);
    rc.d_model = 8;
    rc.n_heads = 2;
    rc.d_ff = 16;
    rc.enc_layers = rc.dec_layers = 1;
    rc.src_vocab = rc.tgt_vocab = 600;
    rc.enc_branches = rc.dec_branches = "global";
    rc.seed = 5;
    void *img = NULL;
    assert_int_equal(nmt_random_transformer_image(&rc, &img, size), NMT_OK);
    nmt_file f;
    assert_int_equal(nmt_file_open(&f, img, *size, 1), NMT_OK);
    nmt_tf_cfg c;
    assert_int_equal(nmt_family_parse(&nmt_family_transformer, &f, &c), NMT_OK);
    snprintf(c.mg_layers_text, sizeof c.mg_layers_text, "1");
    snprintf(c.mg_heads_text, sizeof c.mg_heads_text, "word syntax");
    c.mg_fallback = 2;
    c.mg_chunk = 2;
    c.mg_compose = NMT_MG_COM_MAX;
    c.mg_interact = NMT_MG_REC_NONE;
    assert_int_equal(nmt_tf_finish(&c, ~0ull, NULL, 0), NMT_OK);
    free(img);
    nmtw_writer *w = nmtw_create();
    assert_non_null(w);
    assert_int_equal(nmtw_add_hparams(w, &nmt_family_mgsa, &c), NMT_OK);
    assert_int_equal(nmtw_add_random_tensors(w, &nmt_family_mgsa, &c, 5, 1.0f), NMT_OK);
    assert_int_equal(nmtw_add_blob(w, "tokenizer.src", spm, (uint32_t)spm_size), NMT_OK);
    void *out = NULL;
    assert_int_equal(nmtw_write_memory(w, &out, size), NMT_OK);
    nmtw_destroy(w);
    return out;
}

/* nmt-edge translate's path: a session of a model with syntax heads gets a
 * parser, the batch's spans are the parser's piece spans (an unparsable
 * sentence none), and the session accepts them; a model without syntax
 * heads gets no parser. */
static void test_session(void **state) {
    (void)state;
    void *dev_mem = NULL;
    nmt_device *dev = nmt_test_device_open(&dev_mem);
    assert_non_null(dev);
    size_t spm_size = 0, size = 0;
    void *spm = nmt_test_read_file(NMT_TEST_FIXTURES "/spm/uni_nfkc.model", &spm_size);
    assert_non_null(spm);
    void *img = syntax_model(spm, spm_size, &size);
    nmt_session_params sp;
    memset(&sp, 0, sizeof sp);
    sp.model_data = img;
    sp.model_size = size;
    sp.limits.max_src_len = 64;
    sp.limits.max_tgt_len = 8;
    sp.limits.max_batch = 4;
    sp.limits.max_beam = 1;
    size_t need = 0;
    assert_int_equal(nmt_session_arena_size(&sp, &need, NULL), NMT_OK);
    void *arena = aligned_alloc(NMT_ARENA_ALIGNMENT, nmt_test_round_up(need, NMT_ARENA_ALIGNMENT));
    assert_non_null(arena);
    nmt_session *s = NULL;
    nmt_test_assert_ok(dev, nmt_session_create(dev, &sp, arena, need, &s));
    nmt_syntax_spans y;
    nmt_syntax_open(&y, s, "parse_spans_test");
    assert_non_null(y.p);
    const char *texts[3] = {"The cat sat on the mat.", "of of the the and",
                            "The quick brown fox jumps over the lazy dog."};
    const size_t lens[3] = {strlen(texts[0]), strlen(texts[1]), strlen(texts[2])};
    nmt_test_assert_ok(dev, nmt_syntax_set(&y, s, texts, lens, 3));
    assert_true(y.counts[0] == 2 && y.counts[1] == 0 && y.counts[2] == 2);
    assert_true(y.ptrs[0][0].start == 0 && y.ptrs[0][0].len == 5 && y.ptrs[0][1].start == 9 && y.ptrs[0][1].len == 3);
    assert_true(y.ptrs[1] == NULL);
    assert_true(y.ptrs[2][0].start == 0 && y.ptrs[2][0].len == 15 && y.ptrs[2][1].start == 24 &&
                y.ptrs[2][1].len == 8);
    const nmt_text_batch b = {texts, lens, 3};
    nmt_decode_opts o;
    memset(&o, 0, sizeof o);
    o.beam = 1;
    nmt_test_assert_ok(dev, nmt_session_translate_text(s, &b, &o)); /* the spans pass the session's check */
    uint64_t parsed = 0, fallback = 0;
    nmt_parser_counts(y.p, &parsed, &fallback);
    assert_true(parsed == 2 && fallback == 1);
    nmt_syntax_close(&y, "parse_spans_test");
    assert_null(y.p);
    nmt_session_destroy(s);
    free(arena);
    free(img);
    /* no syntax heads: no parser */
    size_t tsz = 0;
    nmt_random_transformer_config rc;
    nmt_random_transformer_defaults(&rc);
    rc.d_model = 8;
    rc.n_heads = 2;
    rc.d_ff = 16;
    rc.enc_layers = rc.dec_layers = 1;
    rc.src_vocab = rc.tgt_vocab = 600;
    void *timg = NULL;
    assert_int_equal(nmt_random_transformer_image(&rc, &timg, &tsz), NMT_OK);
    sp.model_data = timg;
    sp.model_size = tsz;
    assert_int_equal(nmt_session_arena_size(&sp, &need, NULL), NMT_OK);
    arena = aligned_alloc(NMT_ARENA_ALIGNMENT, nmt_test_round_up(need, NMT_ARENA_ALIGNMENT));
    nmt_test_assert_ok(dev, nmt_session_create(dev, &sp, arena, need, &s));
    nmt_syntax_open(&y, s, "parse_spans_test");
    assert_null(y.p);
    nmt_test_assert_ok(dev, nmt_syntax_set(&y, s, texts, lens, 3)); /* nothing to do */
    nmt_syntax_close(&y, "parse_spans_test");
    nmt_session_destroy(s);
    free(arena);
    free(timg);
    free(spm);
    nmt_test_device_close(dev, dev_mem);
}

/* `nmt-edge translate` on a syntax-head model: one output line per input
 * line and nothing of link-grammar's on stdout (its default handler printed
 * a dictionary locale line there, which shifted every translation of a
 * file by one line); the parse counts on stderr. */
static void test_cli_stdout(void **state) {
    (void)state;
    size_t spm_size = 0, size = 0;
    void *spm = nmt_test_read_file(NMT_TEST_FIXTURES "/spm/uni_nfkc.model", &spm_size);
    assert_non_null(spm);
    void *img = syntax_model(spm, spm_size, &size);
    char *dir = nmt_test_make_temp_dir("parse-cli");
    char model[600];
    snprintf(model, sizeof model, "%s/syntax.nmt", dir);
    assert_int_equal(nmt_test_write_file(model, img, size), 0);
    char *argv[] = {(char *)NMT_EDGE_BIN, "translate", "--model", model, "--beam", "1", "--max-len", "8", NULL};
    /* a locale the machine may lack: link-grammar then says so at debug level */
    setenv("LANG", "en_US.UTF-8", 1);
    unsetenv("LC_ALL");
    nmt_test_proc r;
    nmt_test_run(argv, "The cat sat on the mat.\nof of the the and\nThe quick brown fox jumps over the lazy dog.\n", dir,
                 &r);
    if (r.status != 0) fail_msg("status %d: %s", r.status, r.err);
    size_t lines = 0;
    for (size_t i = 0; i < r.out_len; i++) lines += r.out[i] == '\n';
    if (lines != 3 || strstr(r.out, "Debug") || strstr(r.out, "link-grammar") || strstr(r.out, "Dictionary"))
        fail_msg("stdout (%zu lines): %s", lines, r.out);
    if (!strstr(r.err, "syntax heads: 2 sentences parsed, 1 not parsed (n-gram phrases)"))
        fail_msg("stderr: %s", r.err);
    nmt_test_proc_free(&r);
    nmt_test_remove_tree(dir);
    free(dir);
    free(img);
    free(spm);
}

#else

static void test_stub(void **state) {
    (void)state;
    char why[256] = "";
    assert_null(nmt_parser_create(why, sizeof why));
    assert_string_equal(why, "built without link-grammar (cmake -DNMT_WITH_LINK_GRAMMAR=ON)");
}

#endif

int main(void) {
    const struct CMUnitTest tests[] = {
#ifdef NMT_HAVE_LINK_GRAMMAR
        cmocka_unit_test(test_words),
        cmocka_unit_test(test_pieces),
        cmocka_unit_test(test_session),
        cmocka_unit_test(test_cli_stdout),
#else
        cmocka_unit_test(test_stub),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
