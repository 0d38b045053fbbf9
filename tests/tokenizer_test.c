/* SPDX-License-Identifier: MIT */
/* tokenizer_test.c — the SentencePiece-compatible tokenizer.
 *
 *   parity      every model in fixtures/spm/MODELS: our ids for every line
 *               of input.txt equal spm_encode's (NAME.ids), and decoding
 *               those ids equals spm_decode's text (NAME.dec).  The fixtures
 *               come from scripts/spm_fixtures.sh (fixtures/spm/VERSION).
 *   arena       the predicted arena size is exactly the high-water mark; one
 *               byte less is NMT_ERR_ARENA_TOO_SMALL.
 *   limits      input longer than max_text_bytes is NMT_ERR_INPUT_TOO_LONG
 *               (exactly at the bound is fine); decode into a short buffer
 *               reports the size needed; bad ids are out of range.
 *   malformed   every truncation of a model, and seeded random corruptions,
 *               give a status (never a crash); a few hand-made files give
 *               the exact status.
 *   api         piece/info accessors. */
#include "test_util.h"

#include "nmt_edge.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FX NMT_TEST_FIXTURES "/spm/"

typedef struct tok_box {
    void *model;
    size_t model_size;
    void *arena;
    size_t arena_size;
    nmt_tokenizer *t;
} tok_box;

static void *read_fixture(const char *name, size_t *n) {
    char path[1024];
    snprintf(path, sizeof path, FX "%s", name);
    void *d = nmt_test_read_file(path, n);
    if (d == NULL) fail_msg("cannot read %s", path);
    return d;
}

static void tok_open(tok_box *b, const char *model_file, uint32_t max_text) {
    memset(b, 0, sizeof *b);
    b->model = read_fixture(model_file, &b->model_size);
    assert_int_equal(nmt_tokenizer_arena_size(b->model, b->model_size, max_text, &b->arena_size),
                     NMT_OK);
    b->arena = aligned_alloc(64, nmt_test_round_up(b->arena_size, 64));
    assert_non_null(b->arena);
    assert_int_equal(nmt_tokenizer_create(b->model, b->model_size, max_text, b->arena,
                                          b->arena_size, &b->t),
                     NMT_OK);
}

static void tok_close(tok_box *b) {
    free(b->arena);
    free(b->model);
}

/* Next '\n'-terminated line of [*p, end) (the terminator excluded). */
static int next_line(const char **p, const char *end, const char **line, size_t *len) {
    if (*p >= end) return 0;
    const char *nl = memchr(*p, '\n', (size_t)(end - *p));
    *line = *p;
    *len = nl ? (size_t)(nl - *p) : (size_t)(end - *p);
    *p = nl ? nl + 1 : end;
    return 1;
}

static uint32_t parse_ids(const char *s, size_t n, int32_t *out, uint32_t cap) {
    uint32_t k = 0;
    size_t i = 0;
    while (i < n) {
        while (i < n && s[i] == ' ') i++;
        if (i >= n) break;
        long v = 0;
        while (i < n && s[i] >= '0' && s[i] <= '9') v = v * 10 + (s[i++] - '0');
        assert_true(k < cap);
        out[k++] = (int32_t)v;
    }
    return k;
}

static void check_model(const char *name) {
    char file[256];
    size_t in_n, ids_n, dec_n;
    char *in = read_fixture("input.txt", &in_n);
    snprintf(file, sizeof file, "%s.ids", name);
    char *ids_txt = read_fixture(file, &ids_n);
    snprintf(file, sizeof file, "%s.dec", name);
    char *dec_txt = read_fixture(file, &dec_n);
    snprintf(file, sizeof file, "%s.model", name);
    tok_box b;
    tok_open(&b, file, 1u << 14);
    const char *pi = in, *pe = ids_txt, *pd = dec_txt;
    const char *line = NULL, *want_ids = NULL, *want_dec = NULL;
    size_t len = 0, want_len = 0, dec_len = 0;
    int32_t want[1u << 14];
    char out[1u << 16];
    unsigned line_no = 0, enc_ok = 0, dec_ok = 0;
    while (next_line(&pi, in + in_n, &line, &len)) {
        line_no++;
        assert_true(next_line(&pe, ids_txt + ids_n, &want_ids, &want_len));
        assert_true(next_line(&pd, dec_txt + dec_n, &want_dec, &dec_len));
        const uint32_t nw = parse_ids(want_ids, want_len, want, 1u << 14);
        const int32_t *got;
        uint32_t ng;
        assert_int_equal(nmt_tokenizer_encode(b.t, line, len, &got, &ng), NMT_OK);
        if (ng != nw || (nw && memcmp(got, want, nw * sizeof *got) != 0)) {
            fprintf(stderr, "%s line %u: ids differ (%u vs %u): '%.*s'\n", name, line_no, ng, nw,
                    (int)(want_len < 200 ? want_len : 200), want_ids);
        } else {
            enc_ok++;
        }
        size_t olen;
        assert_int_equal(nmt_tokenizer_decode(b.t, want, nw, out, sizeof out, &olen), NMT_OK);
        if (olen != dec_len || memcmp(out, want_dec, olen) != 0)
            fprintf(stderr, "%s line %u: decoded text differs\n", name, line_no);
        else
            dec_ok++;
    }
    fprintf(stderr, "  %-14s %u lines: %u ids identical, %u decodes identical\n", name, line_no,
            enc_ok, dec_ok);
    assert_true(line_no > 200);
    assert_int_equal(enc_ok, line_no);
    assert_int_equal(dec_ok, line_no);
    tok_close(&b);
    free(in);
    free(ids_txt);
    free(dec_txt);
}

static void test_parity(void **state) {
    (void)state;
    size_t n;
    char *list = read_fixture("MODELS", &n);
    const char *p = list, *line;
    size_t len;
    int models = 0;
    while (next_line(&p, list + n, &line, &len)) {
        if (len == 0) continue;
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)len, line);
        check_model(name);
        models++;
    }
    assert_true(models >= 5);
    free(list);
}

static void test_arena_exact(void **state) {
    (void)state;
    size_t n;
    void *model = read_fixture("uni_nfkc.model", &n);
    size_t need;
    assert_int_equal(nmt_tokenizer_arena_size(model, n, 512, &need), NMT_OK);
    uint8_t *arena = aligned_alloc(64, nmt_test_round_up(need + 64, 64));
    nmt_tokenizer *t;
    assert_int_equal(nmt_tokenizer_create(model, n, 512, arena, need - 1, &t),
                     NMT_ERR_ARENA_TOO_SMALL);
    assert_int_equal(nmt_tokenizer_create(model, n, 512, arena, need, &t), NMT_OK);
    /* an unaligned pointer needs NMT_ARENA_ALIGNMENT - 1 more */
    assert_int_equal(nmt_tokenizer_create(model, n, 512, arena + 1, need + 63, &t), NMT_OK);
    const int32_t *ids;
    uint32_t k;
    assert_int_equal(nmt_tokenizer_encode(t, "Hello world", 11, &ids, &k), NMT_OK);
    assert_true(k > 0);
    /* scratch grows with the bound: a 4x longer bound needs more memory */
    size_t need4;
    assert_int_equal(nmt_tokenizer_arena_size(model, n, 2048, &need4), NMT_OK);
    assert_true(need4 > need);
    free(arena);
    free(model);
}

static void test_limits(void **state) {
    (void)state;
    tok_box b;
    tok_open(&b, "bpe_rules.model", 64);
    char text[65];
    memset(text, 'a', sizeof text);
    const int32_t *ids;
    uint32_t n;
    assert_int_equal(nmt_tokenizer_encode(b.t, text, 64, &ids, &n), NMT_OK);
    assert_int_equal(nmt_tokenizer_encode(b.t, text, 65, &ids, &n), NMT_ERR_INPUT_TOO_LONG);
    assert_int_equal(nmt_tokenizer_encode(b.t, NULL, 0, &ids, &n), NMT_OK);
    assert_int_equal(n, 0);
    assert_int_equal(nmt_tokenizer_encode(b.t, NULL, 3, &ids, &n), NMT_ERR_INVALID_ARGUMENT);
    /* decode: size query, short buffer, bad ids */
    assert_int_equal(nmt_tokenizer_encode(b.t, "foo bar baz", 11, &ids, &n), NMT_OK);
    int32_t copy[64];
    memcpy(copy, ids, n * sizeof *ids);
    size_t need;
    assert_int_equal(nmt_tokenizer_decode(b.t, copy, n, NULL, 0, &need), NMT_ERR_BUFFER_TOO_SMALL);
    assert_int_equal(need, 11);
    assert_true(need <= nmt_tokenizer_decode_bound(b.t, n));
    char out[16];
    size_t len;
    assert_int_equal(nmt_tokenizer_decode(b.t, copy, n, out, 5, &len), NMT_ERR_BUFFER_TOO_SMALL);
    assert_int_equal(len, 11);
    assert_memory_equal(out, "foo b", 5);
    assert_int_equal(nmt_tokenizer_decode(b.t, copy, n, out, sizeof out, &len), NMT_OK);
    assert_memory_equal(out, "foo bar baz", 11);
    int32_t bad[2] = {3, 600};
    assert_int_equal(nmt_tokenizer_decode(b.t, bad, 2, out, sizeof out, &len),
                     NMT_ERR_TOKEN_OUT_OF_RANGE);
    bad[1] = -1;
    assert_int_equal(nmt_tokenizer_decode(b.t, bad, 2, out, sizeof out, &len),
                     NMT_ERR_TOKEN_OUT_OF_RANGE);
    assert_int_equal(nmt_tokenizer_arena_size(b.model, b.model_size, 0, &need),
                     NMT_ERR_INVALID_ARGUMENT);
    tok_close(&b);
}

static void test_api(void **state) {
    (void)state;
    tok_box b;
    tok_open(&b, "uni_nfkc.model", 256);
    nmt_tokenizer_info info;
    assert_int_equal(nmt_tokenizer_get_info(b.t, &info), NMT_OK);
    assert_int_equal(info.vocab_size, 600);
    assert_string_equal(info.model_type, "unigram");
    assert_int_equal(info.byte_fallback, 1);
    assert_int_equal(info.unk_id, 0);
    assert_int_equal(info.bos_id, 1);
    assert_int_equal(info.eos_id, 2);
    assert_int_equal(info.pad_id, -1);
    const char *p;
    size_t len;
    assert_int_equal(nmt_tokenizer_piece(b.t, 0, &p, &len), NMT_OK);
    assert_int_equal(len, 5);
    assert_memory_equal(p, "<unk>", 5);
    assert_int_equal(nmt_tokenizer_piece(b.t, 3, &p, &len), NMT_OK);
    assert_memory_equal(p, "<0x00>", 6);
    assert_int_equal(nmt_tokenizer_piece(b.t, 600, &p, &len), NMT_ERR_TOKEN_OUT_OF_RANGE);
    /* full-width text normalizes (NFKC) to the same ids as ASCII */
    const int32_t *ids;
    uint32_t n1, n2;
    int32_t first[64];
    assert_int_equal(nmt_tokenizer_encode(b.t, "ABC 123", 7, &ids, &n1), NMT_OK);
    memcpy(first, ids, n1 * sizeof *ids);
    const char *fw = "\xef\xbc\xa1\xef\xbc\xa2\xef\xbc\xa3\xe3\x80\x80\xef\xbc\x91\xef\xbc\x92\xef\xbc\x93";
    assert_int_equal(nmt_tokenizer_encode(b.t, fw, strlen(fw), &ids, &n2), NMT_OK);
    assert_int_equal(n1, n2);
    assert_memory_equal(first, ids, n1 * sizeof *ids);
    tok_close(&b);
}

/* ---- malformed models ---------------------------------------------------- */

static nmt_status try_model(const void *m, size_t n) {
    size_t need;
    nmt_status st = nmt_tokenizer_arena_size(m, n, 256, &need);
    if (st != NMT_OK) return st;
    void *arena = aligned_alloc(64, nmt_test_round_up(need, 64));
    nmt_tokenizer *t;
    st = nmt_tokenizer_create(m, n, 256, arena, need, &t);
    if (st == NMT_OK) {
        static const char *const texts[] = {"Hello world", "  \xef\xbc\xa1 \xff\x80 caf\xc3\xa9 ",
                                            "\xf0\x9f\x98\x80 12345", ""};
        for (size_t i = 0; i < 4; i++) {
            const int32_t *ids;
            uint32_t k;
            nmt_status e = nmt_tokenizer_encode(t, texts[i], strlen(texts[i]), &ids, &k);
            assert_true(e == NMT_OK || e == NMT_ERR_TOKENIZER_MODEL);
            if (e == NMT_OK) {
                char out[4096];
                size_t len;
                e = nmt_tokenizer_decode(t, ids, k, out, sizeof out, &len);
                assert_true(e == NMT_OK || e == NMT_ERR_BUFFER_TOO_SMALL);
            }
        }
    }
    free(arena);
    return st;
}

static void test_truncated(void **state) {
    (void)state;
    size_t n;
    uint8_t *m = read_fixture("bpe_rules.model", &n);
    unsigned ok = 0;
    for (size_t len = 0; len < n; len += (len < 4096 ? 1 : 97)) {
        uint8_t *copy = malloc(len ? len : 1);
        memcpy(copy, m, len);
        nmt_status st = try_model(copy, len);
        assert_true(st == NMT_ERR_TOKENIZER_MODEL || st == NMT_OK || st == NMT_ERR_UNSUPPORTED);
        ok += st == NMT_OK;
        free(copy);
    }
    /* a prefix ending between two pieces is a valid smaller model; one
     * cut inside a message is not: most cuts fail */
    assert_true(ok > 0 && ok < 4096 / 2);
    assert_int_equal(try_model(m, n), NMT_OK);
    free(m);
}

static void test_corrupted(void **state) {
    (void)state;
    size_t n;
    uint8_t *m = read_fixture("uni_rules.model", &n);
    nmt_test_rng rng = nmt_test_rng_make(7);
    uint8_t *copy = malloc(n);
    for (int iter = 0; iter < 1500; iter++) {
        memcpy(copy, m, n);
        const int flips = 1 + (int)(nmt_test_rng_next(&rng) % 8);
        for (int k = 0; k < flips; k++)
            copy[nmt_test_rng_next(&rng) % n] = (uint8_t)nmt_test_rng_next(&rng);
        nmt_status st = try_model(copy, n);
        assert_true(st == NMT_ERR_TOKENIZER_MODEL || st == NMT_OK || st == NMT_ERR_UNSUPPORTED);
    }
    free(copy);
    free(m);
}

/* Hand-made protobuf files with the exact status. */
static void test_bad_files(void **state) {
    (void)state;
    /* a piece message: field 1 (LEN) { 1: "<unk>", 3: UNKNOWN } */
    static const uint8_t unk_only[] = {0x0a, 0x09, 0x0a, 0x05, '<', 'u', 'n', 'k', '>', 0x18, 0x02};
    assert_int_equal(try_model(unk_only, sizeof unk_only), NMT_ERR_TOKENIZER_MODEL); /* no normal piece */
    static const uint8_t good[] = {0x0a, 0x09, 0x0a, 0x05, '<', 'u', 'n', 'k', '>', 0x18, 0x02,
                                   0x0a, 0x08, 0x0a, 0x01, 'a', 0x15, 0x00, 0x00, 0x80, 0xbf};
    assert_int_equal(try_model(good, sizeof good), NMT_OK);
    static const uint8_t no_unk[] = {0x0a, 0x08, 0x0a, 0x01, 'a', 0x15, 0x00, 0x00, 0x80, 0xbf};
    assert_int_equal(try_model(no_unk, sizeof no_unk), NMT_ERR_TOKENIZER_MODEL);
    static const uint8_t dup[] = {0x0a, 0x09, 0x0a, 0x05, '<', 'u', 'n', 'k', '>', 0x18, 0x02,
                                  0x0a, 0x03, 0x0a, 0x01, 'a', 0x0a, 0x03, 0x0a, 0x01, 'a'};
    assert_int_equal(try_model(dup, sizeof dup), NMT_ERR_TOKENIZER_MODEL);
    static const uint8_t empty_piece[] = {0x0a, 0x09, 0x0a, 0x05, '<', 'u', 'n', 'k', '>', 0x18, 0x02,
                                          0x0a, 0x02, 0x0a, 0x00};
    assert_int_equal(try_model(empty_piece, sizeof empty_piece), NMT_ERR_TOKENIZER_MODEL);
    /* a BYTE piece without byte_fallback */
    static const uint8_t byte_piece[] = {0x0a, 0x09, 0x0a, 0x05, '<', 'u', 'n', 'k', '>', 0x18, 0x02,
                                         0x0a, 0x0a, 0x0a, 0x06, '<', '0', 'x', '4', '1', '>', 0x18, 0x06,
                                         0x0a, 0x03, 0x0a, 0x01, 'a'};
    assert_int_equal(try_model(byte_piece, sizeof byte_piece), NMT_ERR_TOKENIZER_MODEL);
    /* WORD model type (trainer_spec field 3 = 3) */
    static const uint8_t word[] = {0x0a, 0x09, 0x0a, 0x05, '<', 'u', 'n', 'k', '>', 0x18, 0x02,
                                   0x0a, 0x03, 0x0a, 0x01, 'a', 0x12, 0x02, 0x18, 0x03};
    assert_int_equal(try_model(word, sizeof word), NMT_ERR_UNSUPPORTED);
    /* a charsmap whose trie size exceeds the blob */
    static const uint8_t charsmap[] = {0x0a, 0x09, 0x0a, 0x05, '<', 'u', 'n', 'k', '>', 0x18, 0x02,
                                       0x0a, 0x03, 0x0a, 0x01, 'a', 0x1a, 0x08, 0x12, 0x06,
                                       0xff, 0x00, 0x00, 0x00, 0x00, 0x00};
    assert_int_equal(try_model(charsmap, sizeof charsmap), NMT_ERR_TOKENIZER_MODEL);
    /* a group wire type, a truncated varint, a length past the end */
    static const uint8_t group[] = {0x0b, 0x0c};
    assert_int_equal(try_model(group, sizeof group), NMT_ERR_TOKENIZER_MODEL);
    static const uint8_t varint[] = {0x10, 0xff, 0xff};
    assert_int_equal(try_model(varint, sizeof varint), NMT_ERR_TOKENIZER_MODEL);
    static const uint8_t past[] = {0x0a, 0x7f, 0x00};
    assert_int_equal(try_model(past, sizeof past), NMT_ERR_TOKENIZER_MODEL);
    assert_int_equal(try_model("", 0), NMT_ERR_TOKENIZER_MODEL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parity),     cmocka_unit_test(test_arena_exact),
        cmocka_unit_test(test_limits),     cmocka_unit_test(test_api),
        cmocka_unit_test(test_truncated),  cmocka_unit_test(test_corrupted),
        cmocka_unit_test(test_bad_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
