/* SPDX-License-Identifier: MIT */
/* data_test.c — the trainer's data: loading and tokenizing parallel text
 * with the committed SentencePiece fixture, the filters, token batches,
 * the seeded per-epoch order and resuming from a position. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "test_util.h"

#define BOS 1
#define EOS 2
#define PAD 0

/* ---- helpers ------------------------------------------------------------ */

typedef struct tok_fixture {
    void *model;
    size_t model_size;
    void *arena;
    nmt_tokenizer *tok;
} tok_fixture;

static void tok_open(tok_fixture *t, uint32_t max_text_bytes) {
    t->model = nmt_test_read_file(NMT_TEST_FIXTURES "/spm/uni_nfkc.model", &t->model_size);
    assert_non_null(t->model);
    size_t need = 0;
    assert_int_equal(nmt_tokenizer_arena_size(t->model, t->model_size, max_text_bytes, &need), NMT_OK);
    t->arena = malloc(need + NMT_ARENA_ALIGNMENT);
    assert_non_null(t->arena);
    assert_int_equal(nmt_tokenizer_create(t->model, t->model_size, max_text_bytes, t->arena,
                                          need + NMT_ARENA_ALIGNMENT, &t->tok),
                     NMT_OK);
}

static void tok_close(tok_fixture *t) {
    free(t->arena);
    free(t->model);
}

static char *join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    assert_non_null(p);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static void write_text(const char *path, const char *text) {
    assert_int_equal(nmt_test_write_file(path, text, strlen(text)), 0);
}

/* Tokens of one sentence, copied into ids (cap entries); returns the count. */
static uint32_t encode(nmt_tokenizer *t, const char *s, int32_t *ids, uint32_t cap) {
    const int32_t *p;
    uint32_t n;
    assert_int_equal(nmt_tokenizer_encode(t, s, strlen(s), &p, &n), NMT_OK);
    assert_true(n <= cap);
    memcpy(ids, p, n * sizeof *ids);
    return n;
}

static const char *const WORDS[] = {"the",   "house", "is",    "small", "we",    "go",   "home",
                                    "today", "water", "green", "river", "city",  "light", "book",
                                    "read",  "quick", "brown", "fox",   "jumps", "over", "lazy"};
#define N_WORDS (sizeof WORDS / sizeof WORDS[0])

/* A sentence of k words from the list, starting at word `start`; reversed
 * order when rev (same words, so the same token count). */
static void sentence(char *buf, size_t cap, uint32_t start, uint32_t k, int rev) {
    buf[0] = '\0';
    for (uint32_t i = 0; i < k; i++) {
        uint32_t w = rev ? start + (k - 1 - i) : start + i;
        if (i) strncat(buf, " ", cap - strlen(buf) - 1);
        strncat(buf, WORDS[w % N_WORDS], cap - strlen(buf) - 1);
    }
}

/* ---- loading ------------------------------------------------------------ */

static void test_load_and_filter(void **state) {
    (void)state;
    tok_fixture t;
    tok_open(&t, 2048);
    char *dir = nmt_test_make_temp_dir("data");
    char *sp = join(dir, "train.src"), *tp = join(dir, "train.tgt");

    /* 40 good pairs (1..10 words, target = the words reversed), then
     * 3 with an empty side, 2 over max_len tokens, 1 over the tokenizer's
     * byte limit, 3 over the length ratio.  Interleaved so the line order
     * matters. */
    size_t cap = 1 << 16;
    char *src = calloc(1, cap), *tgt = calloc(1, cap);
    assert_non_null(src);
    assert_non_null(tgt);
    char a[4096], b[4096];
    char *good_src[40], *good_tgt[40];
    uint32_t n_good = 0;
    for (uint32_t i = 0; i < 49; i++) {
        a[0] = b[0] = '\0';
        if (i == 5 || i == 17) { /* empty target / empty source */
            sentence(a, sizeof a, i, 3, 0);
            if (i == 17) {
                strcpy(b, a);
                a[0] = '\0';
            }
        } else if (i == 23) {    /* only spaces: no tokens */
            strcpy(a, "   ");
            strcpy(b, "the house");
        } else if (i == 9 || i == 30) { /* 120 words: > 100 tokens */
            sentence(a, sizeof a, i, 120, 0);
            sentence(b, sizeof b, i, 120, 1);
        } else if (i == 33) {    /* > 2048 bytes: the tokenizer refuses it */
            memset(a, 'x', 3000);
            a[3000] = '\0';
            strcpy(b, "the house");
        } else if (i == 12 || i == 40 || i == 44) { /* ratio >= 21/4 > 3 */
            strcpy(a, "home");
            sentence(b, sizeof b, i, 20, 0);
            if (i == 40) {
                strcpy(b, "home");
                sentence(a, sizeof a, i, 20, 0);
            }
        } else {
            sentence(a, sizeof a, i, 1 + i % 10, 0);
            sentence(b, sizeof b, i, 1 + i % 10, 1);
            assert_true(n_good < 40);
            good_src[n_good] = strdup(a);
            good_tgt[n_good] = strdup(b);
            n_good++;
        }
        strcat(src, a);
        strcat(tgt, b);
        /* CRLF on one line; no final newline at the end */
        if (i == 2) {
            strcat(src, "\r\n");
            strcat(tgt, "\r\n");
        } else if (i != 48) {
            strcat(src, "\n");
            strcat(tgt, "\n");
        }
    }
    assert_int_equal(n_good, 40);
    write_text(sp, src);
    write_text(tp, tgt);

    td_filter f = {100, 3.0};
    td_corpus *c = NULL;
    td_stats st;
    char err[256];
    assert_int_equal(td_load(sp, tp, t.tok, t.tok, &f, &c, &st, err, sizeof err), NMT_OK);
    assert_int_equal(st.lines, 49);
    assert_int_equal(st.kept, 40);
    assert_int_equal(st.dropped_empty, 3);
    assert_int_equal(st.dropped_long, 3);
    assert_int_equal(st.dropped_ratio, 3);
    assert_int_equal(td_size(c), 40);

    /* Kept pairs, in file order, are exactly the tokenizer's ids. */
    uint64_t ssum = 0, tsum = 0;
    for (uint32_t i = 0; i < 40; i++) {
        int32_t want_s[256], want_t[256];
        uint32_t ns = encode(t.tok, good_src[i], want_s, 256);
        uint32_t nt = encode(t.tok, good_tgt[i], want_t, 256);
        assert_int_equal(ns, nt); /* same words */
        const int32_t *gs, *gt;
        uint32_t gns, gnt;
        td_pair(c, i, &gs, &gns, &gt, &gnt);
        assert_int_equal(gns, ns);
        assert_int_equal(gnt, nt);
        assert_memory_equal(gs, want_s, ns * sizeof(int32_t));
        assert_memory_equal(gt, want_t, nt * sizeof(int32_t));
        ssum += ns;
        tsum += nt;
        free(good_src[i]);
        free(good_tgt[i]);
    }
    assert_int_equal(st.src_tokens, ssum);
    assert_int_equal(st.tgt_tokens, tsum);
    td_free(c);

    /* Filters off: only empty sides and the tokenizer's byte limit drop. */
    f.max_len = 0;
    f.max_ratio = 0;
    assert_int_equal(td_load(sp, tp, t.tok, t.tok, &f, &c, &st, err, sizeof err), NMT_OK);
    assert_int_equal(st.kept, 40 + 2 + 3);
    assert_int_equal(st.dropped_empty, 3);
    assert_int_equal(st.dropped_long, 1);
    assert_int_equal(st.dropped_ratio, 0);
    td_free(c);

    /* NULL filter = the defaults (100, 3.0). */
    assert_int_equal(td_load(sp, tp, t.tok, t.tok, NULL, &c, &st, NULL, 0), NMT_OK);
    assert_int_equal(st.kept, 40);
    td_free(c);

    /* A tighter length filter: exactly the pairs with > 5 tokens go. */
    f.max_len = 5;
    f.max_ratio = 3.0;
    assert_int_equal(td_load(sp, tp, t.tok, t.tok, &f, &c, &st, err, sizeof err), NMT_OK);
    uint64_t kept5 = 0;
    for (uint32_t i = 0; i < 49; i++) {
        if (i == 5 || i == 17 || i == 23 || i == 9 || i == 30 || i == 33 || i == 12 || i == 40 || i == 44)
            continue;
        sentence(a, sizeof a, i, 1 + i % 10, 0);
        int32_t ids[256];
        if (encode(t.tok, a, ids, 256) <= 5) kept5++;
    }
    assert_true(kept5 > 0 && kept5 < 40);
    assert_int_equal(st.kept, kept5);
    /* the ratio pairs have a 20-word side: the length filter comes first */
    assert_int_equal(st.dropped_long, 6 + (40 - kept5));
    assert_int_equal(st.dropped_ratio, 0);
    td_free(c);

    free(src);
    free(tgt);
    free(sp);
    free(tp);
    nmt_test_remove_tree(dir);
    free(dir);
    tok_close(&t);
}

static void test_load_errors(void **state) {
    (void)state;
    tok_fixture t;
    tok_open(&t, 2048);
    char *dir = nmt_test_make_temp_dir("data");
    char *sp = join(dir, "a.src"), *tp = join(dir, "a.tgt"), *missing = join(dir, "none.txt");
    write_text(sp, "one\ntwo\nthree\n");
    write_text(tp, "eins\nzwei\n");
    td_corpus *c = (td_corpus *)1;
    td_stats st;
    char err[256] = "";
    assert_int_equal(td_load(sp, tp, t.tok, t.tok, NULL, &c, &st, err, sizeof err), NMT_ERR_INVALID_ARGUMENT);
    assert_null(c);
    assert_non_null(strstr(err, "line 3"));
    assert_non_null(strstr(err, "a.tgt"));

    /* the other way round, and a missing final newline changes nothing */
    write_text(sp, "one\ntwo");
    write_text(tp, "eins\nzwei\ndrei\nvier\n");
    assert_int_equal(td_load(sp, tp, t.tok, t.tok, NULL, &c, &st, err, sizeof err), NMT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "line 3"));

    err[0] = '\0';
    assert_int_equal(td_load(missing, tp, t.tok, t.tok, NULL, &c, &st, err, sizeof err), NMT_ERR_IO);
    assert_non_null(strstr(err, "none.txt"));
    assert_int_equal(td_load(sp, NULL, t.tok, t.tok, NULL, &c, &st, err, sizeof err), NMT_ERR_INVALID_ARGUMENT);

    /* Empty files: an empty corpus, which no batcher accepts. */
    write_text(sp, "");
    write_text(tp, "");
    assert_int_equal(td_load(sp, tp, t.tok, t.tok, NULL, &c, &st, err, sizeof err), NMT_OK);
    assert_int_equal(td_size(c), 0);
    assert_int_equal(st.lines, 0);
    td_batcher *b = NULL;
    assert_int_equal(td_batcher_create(c, 100, 10, 1, BOS, EOS, PAD, &b), NMT_ERR_INVALID_ARGUMENT);
    assert_null(b);
    td_free(c);

    free(sp);
    free(tp);
    free(missing);
    nmt_test_remove_tree(dir);
    free(dir);
    tok_close(&t);
}

/* Token-id files (nmt-edge-train --ids): parsed exactly, the same filters
 * and the same line handling as text; a bad token names file, line and token. */
static void test_load_ids(void **state) {
    (void)state;
    char *dir = nmt_test_make_temp_dir("data_ids");
    char *sp = join(dir, "a.src"), *tp = join(dir, "a.tgt");
    /* pairs: kept; empty side; too long (max_len 4); ratio (5/2 > 2); kept (tabs, \r\n) */
    write_text(sp, "\xEF\xBB\xBF" "5 6 7\n9\n1 2 3 4 5\n3\n 10\t11 \r\n");
    write_text(tp, "8 9\n\n4\n1 2 3 4\n12\t13 14\r\n");
    td_filter f = {4, 2.0};
    td_corpus *c = NULL;
    td_stats st;
    char err[256] = "";
    assert_int_equal(td_load_ids(sp, tp, 16, 16, &f, &c, &st, err, sizeof err), NMT_OK);
    assert_int_equal(st.lines, 5);
    assert_int_equal(st.kept, 2);
    assert_int_equal(st.dropped_empty, 1);
    assert_int_equal(st.dropped_long, 1);
    assert_int_equal(st.dropped_ratio, 1);
    assert_int_equal(st.src_tokens, 5);
    assert_int_equal(st.tgt_tokens, 5);
    assert_int_equal(td_size(c), 2);
    const int32_t *ps, *pt;
    uint32_t ns, nt;
    td_pair(c, 0, &ps, &ns, &pt, &nt);
    assert_int_equal(ns, 3);
    assert_int_equal(nt, 2);
    assert_int_equal(ps[0], 5), assert_int_equal(ps[2], 7), assert_int_equal(pt[1], 9);
    td_pair(c, 1, &ps, &ns, &pt, &nt);
    assert_int_equal(ns, 2);
    assert_int_equal(nt, 3);
    assert_int_equal(ps[0], 10), assert_int_equal(ps[1], 11), assert_int_equal(pt[2], 14);
    td_free(c);

    /* out of range, not a number, sign, trailing junk: each its own error */
    static const char *const bad[] = {"1 16\n", "1 x\n", "-1\n", "3a\n", "99999999999999999999\n"};
    static const char *const tok[] = {"'16'", "'x'", "'-1'", "'3a'", "'99999999999999999999'"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char line2[64];
        snprintf(line2, sizeof line2, "1 2\n%s", bad[i]);
        write_text(sp, line2);
        write_text(tp, "3\n4\n");
        c = (td_corpus *)1;
        err[0] = '\0';
        assert_int_equal(td_load_ids(sp, tp, 16, 16, NULL, &c, &st, err, sizeof err), NMT_ERR_INVALID_ARGUMENT);
        assert_null(c);
        assert_non_null(strstr(err, "a.src:2:"));
        assert_non_null(strstr(err, tok[i]));
        assert_non_null(strstr(err, "[0, 16)"));
    }
    /* the target side checks against its own vocabulary */
    write_text(sp, "15\n");
    write_text(tp, "15\n");
    assert_int_equal(td_load_ids(sp, tp, 16, 8, NULL, &c, &st, err, sizeof err), NMT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "a.tgt:1:"));
    /* line counts differ: as for text */
    write_text(tp, "1\n2\n");
    assert_int_equal(td_load_ids(sp, tp, 16, 16, NULL, &c, &st, err, sizeof err), NMT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "line 2"));
    assert_int_equal(td_load_ids(sp, tp, 0, 16, NULL, &c, &st, err, sizeof err), NMT_ERR_INVALID_ARGUMENT);
    free(sp);
    free(tp);
    nmt_test_remove_tree(dir);
    free(dir);
}

/* ---- batches ------------------------------------------------------------ */

#define NP 300

typedef struct synth {
    int32_t *src[NP], *tgt[NP];
    uint32_t sl[NP], tl[NP];
    td_corpus *c;
} synth;

/* Pair i: source (1000 + i, then random ids in [4, 500)), random lengths. */
static void synth_make(synth *s, uint64_t seed) {
    nmt_test_rng r = nmt_test_rng_make(seed);
    for (uint32_t i = 0; i < NP; i++) {
        s->sl[i] = (uint32_t)nmt_test_rng_int(&r, 1, 31);
        s->tl[i] = (uint32_t)nmt_test_rng_int(&r, 1, 31);
        s->src[i] = nmt_test_random_i32(&r, s->sl[i], 4, 500);
        s->tgt[i] = nmt_test_random_i32(&r, s->tl[i], 4, 500);
        s->src[i][0] = 1000 + (int32_t)i;
    }
    assert_int_equal(td_from_tokens((const int32_t *const *)s->src, s->sl, (const int32_t *const *)s->tgt, s->tl,
                                    NP, &s->c),
                     NMT_OK);
}

static void synth_free(synth *s) {
    for (uint32_t i = 0; i < NP; i++) {
        free(s->src[i]);
        free(s->tgt[i]);
    }
    td_free(s->c);
}

/* Check every convention of one batch against the corpus; counts the pairs
 * seen in seen[]; returns a hash of the batch's contents. */
static uint64_t check_batch(const synth *s, const nmt_train_batch *b, uint32_t tgt_tokens, uint32_t max_tokens,
                            uint32_t max_seqs, uint32_t *seen) {
    assert_true(b->n_seq >= 1 && b->n_seq <= max_seqs);
    uint32_t m = b->src_len > b->tgt_len ? b->src_len : b->tgt_len;
    assert_true((uint64_t)b->n_seq * m <= max_tokens);
    uint32_t max_sl = 0, max_tl = 0, toks = 0;
    uint64_t h = 1469598103934665603ull;
    for (uint32_t q = 0; q < b->n_seq; q++) {
        const int32_t *sr = b->src + (size_t)q * b->src_len;
        const int32_t *ti = b->tgt_in + (size_t)q * b->tgt_len;
        const int32_t *to = b->tgt_out + (size_t)q * b->tgt_len;
        int32_t id = sr[0] - 1000;
        assert_true(id >= 0 && id < NP);
        seen[id]++;
        uint32_t n = s->sl[id], k = s->tl[id];
        assert_int_equal(b->src_lens[q], n + 1);
        assert_int_equal(b->tgt_lens[q], k + 1);
        assert_memory_equal(sr, s->src[id], n * sizeof(int32_t));
        assert_int_equal(sr[n], EOS);
        for (uint32_t t = n + 1; t < b->src_len; t++) assert_int_equal(sr[t], PAD);
        assert_int_equal(ti[0], BOS);
        assert_memory_equal(ti + 1, s->tgt[id], k * sizeof(int32_t));
        assert_memory_equal(to, s->tgt[id], k * sizeof(int32_t));
        assert_int_equal(to[k], EOS);
        for (uint32_t t = k + 1; t < b->tgt_len; t++) {
            assert_int_equal(ti[t], PAD);
            assert_int_equal(to[t], PAD);
        }
        if (n + 1 > max_sl) max_sl = n + 1;
        if (k + 1 > max_tl) max_tl = k + 1;
        toks += k + 1;
        h = (h ^ (uint64_t)id) * 1099511628211ull;
    }
    /* padded to the longest sequence of the batch, no more */
    assert_int_equal(b->src_len, max_sl);
    assert_int_equal(b->tgt_len, max_tl);
    assert_int_equal(tgt_tokens, toks);
    return h;
}

static void test_batches_epoch(void **state) {
    (void)state;
    synth s;
    synth_make(&s, 11);
    const uint32_t MT = 96, MS = 6;
    td_batcher *b = NULL;
    assert_int_equal(td_batcher_create(s.c, MT, MS, 7, BOS, EOS, PAD, &b), NMT_OK);
    uint32_t nb = td_batches_per_epoch(b);
    assert_true(nb >= NP / MS && nb < NP);
    uint32_t bseq, bsrc, btgt;
    td_batcher_bounds(b, &bseq, &bsrc, &btgt);
    assert_true(bseq <= MS && bsrc <= 31 && btgt <= 31);

    uint32_t seen[NP];
    uint32_t obs_seq = 0, obs_src = 0, obs_tgt = 0;
    for (uint64_t epoch = 0; epoch < 2; epoch++) {
        memset(seen, 0, sizeof seen);
        for (uint32_t k = 0; k < nb; k++) {
            td_position p = td_tell(b);
            assert_int_equal(p.epoch, epoch);
            assert_int_equal(p.index, k);
            nmt_train_batch bt;
            uint32_t toks;
            assert_int_equal(td_next(b, &bt, &toks), NMT_OK);
            check_batch(&s, &bt, toks, MT, MS, seen);
            if (bt.n_seq > obs_seq) obs_seq = bt.n_seq;
            if (bt.src_len > obs_src) obs_src = bt.src_len;
            if (bt.tgt_len > obs_tgt) obs_tgt = bt.tgt_len;
        }
        for (uint32_t i = 0; i < NP; i++) assert_int_equal(seen[i], 1);
    }
    assert_int_equal(td_tell(b).epoch, 2);
    assert_int_equal(td_tell(b).index, 0);
    assert_int_equal(obs_seq, bseq);
    assert_int_equal(obs_src, bsrc);
    assert_int_equal(obs_tgt, btgt);

    /* Validation order: the sorted list, every pair once, target lengths
     * non-decreasing, and td_batch_at does not move the position. */
    memset(seen, 0, sizeof seen);
    uint32_t prev_tl = 0;
    for (uint32_t k = 0; k < nb; k++) {
        nmt_train_batch bt;
        uint32_t toks;
        assert_int_equal(td_batch_at(b, k, &bt, &toks), NMT_OK);
        check_batch(&s, &bt, toks, MT, MS, seen);
        for (uint32_t q = 0; q < bt.n_seq; q++) {
            assert_true(bt.tgt_lens[q] >= prev_tl);
            prev_tl = bt.tgt_lens[q];
        }
    }
    for (uint32_t i = 0; i < NP; i++) assert_int_equal(seen[i], 1);
    nmt_train_batch bt;
    assert_int_equal(td_batch_at(b, nb, &bt, NULL), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(td_tell(b).epoch, 2);
    td_batcher_free(b);

    /* max_seqs binds instead of max_tokens */
    assert_int_equal(td_batcher_create(s.c, 100000, 4, 7, BOS, EOS, PAD, &b), NMT_OK);
    assert_int_equal(td_batches_per_epoch(b), NP / 4);
    td_batcher_bounds(b, &bseq, NULL, NULL);
    assert_int_equal(bseq, 4);
    td_batcher_free(b);

    /* A pair longer than max_tokens alone; bad sizes. */
    assert_int_equal(td_batcher_create(s.c, 30, 4, 7, BOS, EOS, PAD, &b), NMT_ERR_INVALID_ARGUMENT);
    assert_null(b);
    assert_int_equal(td_batcher_create(s.c, 0, 4, 7, BOS, EOS, PAD, &b), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(td_batcher_create(s.c, 100, 0, 7, BOS, EOS, PAD, &b), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(td_batcher_create(NULL, 100, 4, 7, BOS, EOS, PAD, &b), NMT_ERR_INVALID_ARGUMENT);
    synth_free(&s);
}

/* The sequence of batch hashes of `count` td_next calls. */
static void run_hashes(const synth *s, td_batcher *b, uint32_t count, uint64_t *h) {
    uint32_t seen[NP];
    memset(seen, 0, sizeof seen);
    for (uint32_t k = 0; k < count; k++) {
        nmt_train_batch bt;
        uint32_t toks;
        assert_int_equal(td_next(b, &bt, &toks), NMT_OK);
        h[k] = check_batch(s, &bt, toks, 96, 6, seen);
    }
}

static void test_seed_order_and_resume(void **state) {
    (void)state;
    synth s;
    synth_make(&s, 12);
    td_batcher *a, *b, *c;
    assert_int_equal(td_batcher_create(s.c, 96, 6, 7, BOS, EOS, PAD, &a), NMT_OK);
    assert_int_equal(td_batcher_create(s.c, 96, 6, 7, BOS, EOS, PAD, &b), NMT_OK);
    assert_int_equal(td_batcher_create(s.c, 96, 6, 8, BOS, EOS, PAD, &c), NMT_OK);
    uint32_t nb = td_batches_per_epoch(a);
    assert_int_equal(td_batches_per_epoch(c), nb); /* same buckets, other order */
    uint32_t total = 2 * nb + nb / 2;
    uint64_t *ha = malloc(total * sizeof *ha), *hb = malloc(total * sizeof *hb), *hc = malloc(total * sizeof *hc);
    assert_non_null(ha);
    assert_non_null(hb);
    assert_non_null(hc);
    run_hashes(&s, a, total, ha);
    run_hashes(&s, b, total, hb);
    run_hashes(&s, c, total, hc);
    /* same seed: the same batches in the same order */
    assert_memory_equal(ha, hb, total * sizeof *ha);
    /* another seed: another order (of the same set of batches) */
    assert_memory_not_equal(ha, hc, nb * sizeof *ha);
    /* epochs differ from each other */
    assert_memory_not_equal(ha, ha + nb, nb * sizeof *ha);
    uint32_t moved = 0;
    for (uint32_t k = 0; k < nb; k++) moved += ha[k] != hc[k];
    assert_true(moved > nb / 2);

    /* Resume: a fresh batcher sought to (epoch 1, index 5) of the same seed
     * continues exactly as the uninterrupted run did. */
    td_batcher *r;
    assert_int_equal(td_batcher_create(s.c, 96, 6, 7, BOS, EOS, PAD, &r), NMT_OK);
    td_position p = {1, 5};
    assert_int_equal(td_seek(r, p), NMT_OK);
    assert_int_equal(td_tell(r).epoch, 1);
    assert_int_equal(td_tell(r).index, 5);
    uint32_t rest = total - (nb + 5);
    uint64_t *hr = malloc(rest * sizeof *hr);
    assert_non_null(hr);
    run_hashes(&s, r, rest, hr);
    assert_memory_equal(hr, ha + nb + 5, rest * sizeof *hr);

    /* tell/seek round trip in the middle of a run, on the same batcher */
    assert_int_equal(td_seek(a, (td_position){0, 3}), NMT_OK);
    run_hashes(&s, a, 4, hr);
    assert_memory_equal(hr, hb + 3, 4 * sizeof *hr);
    td_position mid = td_tell(a);
    assert_int_equal(mid.epoch, 0);
    assert_int_equal(mid.index, 7);
    run_hashes(&s, a, 3, hr);
    assert_int_equal(td_seek(a, mid), NMT_OK);
    run_hashes(&s, a, 3, hr + 3);
    assert_memory_equal(hr, hr + 3, 3 * sizeof *hr);

    /* out of range */
    assert_int_equal(td_seek(a, (td_position){0, nb}), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(td_tell(a).index, 10);

    free(ha);
    free(hb);
    free(hc);
    free(hr);
    td_batcher_free(a);
    td_batcher_free(b);
    td_batcher_free(c);
    td_batcher_free(r);
    synth_free(&s);
}

static void test_from_tokens(void **state) {
    (void)state;
    const int32_t s0[] = {5, 6, 7}, t0[] = {8, 9};
    const int32_t s1[] = {10}, t1[] = {11, 12, 13, 14};
    const int32_t *src[] = {s0, s1}, *tgt[] = {t0, t1};
    const uint32_t sl[] = {3, 1}, tl[] = {2, 4};
    td_corpus *c = NULL;
    assert_int_equal(td_from_tokens(src, sl, tgt, tl, 2, &c), NMT_OK);
    assert_int_equal(td_size(c), 2);
    const int32_t *ps, *pt;
    uint32_t ns, nt;
    td_pair(c, 1, &ps, &ns, &pt, &nt);
    assert_int_equal(ns, 1);
    assert_int_equal(nt, 4);
    assert_int_equal(ps[0], 10);
    assert_memory_equal(pt, t1, sizeof t1);
    assert_true(pt != t1); /* copied */

    /* One batch of both: sorted by target length (pair 0 first), padded. */
    td_batcher *b;
    assert_int_equal(td_batcher_create(c, 100, 8, 1, BOS, EOS, PAD, &b), NMT_OK);
    assert_int_equal(td_batches_per_epoch(b), 1);
    nmt_train_batch bt;
    uint32_t toks;
    assert_int_equal(td_next(b, &bt, &toks), NMT_OK);
    assert_int_equal(bt.n_seq, 2);
    assert_int_equal(bt.src_len, 4);
    assert_int_equal(bt.tgt_len, 5);
    const int32_t want_src[] = {5, 6, 7, EOS, 10, EOS, PAD, PAD};
    const int32_t want_in[] = {BOS, 8, 9, PAD, PAD, BOS, 11, 12, 13, 14};
    const int32_t want_out[] = {8, 9, EOS, PAD, PAD, 11, 12, 13, 14, EOS};
    assert_memory_equal(bt.src, want_src, sizeof want_src);
    assert_memory_equal(bt.tgt_in, want_in, sizeof want_in);
    assert_memory_equal(bt.tgt_out, want_out, sizeof want_out);
    assert_int_equal(bt.src_lens[0], 4);
    assert_int_equal(bt.src_lens[1], 2);
    assert_int_equal(bt.tgt_lens[0], 3);
    assert_int_equal(bt.tgt_lens[1], 5);
    assert_int_equal(toks, 8);
    /* one batch per epoch: the next one wraps */
    assert_int_equal(td_tell(b).epoch, 1);
    assert_int_equal(td_tell(b).index, 0);

    /* max_tokens 8: 2 * max(4, 5) = 10 > 8, so two batches */
    td_batcher_free(b);
    assert_int_equal(td_batcher_create(c, 8, 8, 1, BOS, EOS, PAD, &b), NMT_OK);
    assert_int_equal(td_batches_per_epoch(b), 2);
    assert_int_equal(td_batch_at(b, 0, &bt, &toks), NMT_OK);
    assert_int_equal(bt.n_seq, 1);
    assert_int_equal(bt.src_len, 4);
    assert_int_equal(bt.tgt_len, 3);
    assert_int_equal(toks, 3);
    td_batcher_free(b);
    td_free(c);

    /* bad input */
    const int32_t *nul[] = {NULL, s1};
    assert_int_equal(td_from_tokens(nul, sl, tgt, tl, 2, &c), NMT_ERR_INVALID_ARGUMENT);
    assert_null(c);
    assert_int_equal(td_from_tokens(NULL, NULL, NULL, NULL, 0, &c), NMT_OK);
    assert_int_equal(td_size(c), 0);
    td_free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_and_filter),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_load_ids),
        cmocka_unit_test(test_batches_epoch),
        cmocka_unit_test(test_seed_order_and_resume),
        cmocka_unit_test(test_from_tokens),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
