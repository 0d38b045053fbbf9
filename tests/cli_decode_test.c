/* SPDX-License-Identifier: MIT */
/* cli_decode_test.c — `nmt-edge translate`'s decoding options and output
 * formats (cli/cli_decode.c), run as a user would:
 *   - --repetition-penalty, --sampling/--temperature/--seed,
 *     --coverage-penalty and --prefix-file print exactly what the library
 *     gives for the same nmt_decode_opts;
 *   - sampling is reproducible for a seed and the same for --batch 1, 3, 8;
 *   - --format marian and --format jsonl carry the text format's
 *     translations, scores and alignments; jsonl's token log-probabilities
 *     sum to its logprob; JSON strings are escaped (cli_json_string, driven
 *     directly on hostile bytes);
 *   - bad values: exit status 2 and the exact message; a short prefix file:
 *     exit status 1 naming the line, the lines before it written. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_common.h"
#include "nmt_edge.h"

/* cli_decode.c's writer needs the program's sb_printf (nmt_edge_cli.c) */
void sb_printf(strbuf *b, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        const size_t room = b->cap - b->len;
        const int n = vsnprintf(b->p ? b->p + b->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0) return;
        if ((size_t)n < room) {
            b->len += (size_t)n;
            return;
        }
        cli_grow((void **)&b->p, &b->cap, b->len + (size_t)n + 1, 1);
    }
}

#define MAX_LINES 64
static const char *const SENTS[] = {"1 2 3 4 5", "6 7 8", "9 10 11 12 13 14 15", "16", "17 18 19 20"};
#define N_SENTS 5u
static const char INPUT[] = "1 2 3 4 5\n6 7 8\n9 10 11 12 13 14 15\n16\n17 18 19 20\n";

/* ---- the library on the same model ---------------------------------------- */

typedef struct lib {
    void *dev_mem, *arena;
    nmt_device *dev;
    nmt_session *s;
} lib;

static void lib_open(lib *L, uint32_t beam, int align) {
    memset(L, 0, sizeof *L);
    nmt_device_params dp = {.device = getenv("NMT_EDGE_DEVICE"), .cache_dir = getenv("NMT_EDGE_CACHE_DIR")};
    size_t fp = (nmt_device_footprint() + 63) / 64 * 64;
    L->dev_mem = aligned_alloc(64, fp);
    assert_int_equal(nmt_device_open(&dp, L->dev_mem, fp, &L->dev), NMT_OK);
    nmt_session_params sp = {.model_path = g_model,
                             .limits = {.max_src_len = 256, .max_batch = 8, .max_beam = beam},
                             .alignment = align, .sampling = 1};
    size_t need;
    assert_int_equal(nmt_session_arena_size(&sp, &need, NULL), NMT_OK);
    const size_t size = (need + NMT_ARENA_ALIGNMENT - 1) / NMT_ARENA_ALIGNMENT * NMT_ARENA_ALIGNMENT;
    L->arena = aligned_alloc(NMT_ARENA_ALIGNMENT, size);
    assert_int_equal(nmt_session_create(L->dev, &sp, L->arena, size, &L->s), NMT_OK);
}

static void lib_close(lib *L) {
    nmt_session_destroy(L->s);
    nmt_device_close(L->dev);
    free(L->arena);
    free(L->dev_mem);
}

/* The five sentences as one library batch. */
typedef struct ids_batch {
    int32_t ids[N_SENTS][16];
    const int32_t *ptrs[N_SENTS];
    uint32_t lens[N_SENTS];
    nmt_batch b;
} ids_batch;

static void parse_ids(const char *p, int32_t *ids, uint32_t *n) {
    char *end;
    *n = 0;
    for (long v = strtol(p, &end, 10); end != p; v = strtol(p, &end, 10)) {
        ids[(*n)++] = (int32_t)v;
        p = end;
    }
}

static void ids_batch_fill(ids_batch *ib) {
    for (uint32_t i = 0; i < N_SENTS; i++) {
        parse_ids(SENTS[i], ib->ids[i], &ib->lens[i]);
        ib->ptrs[i] = ib->ids[i];
    }
    ib->b = (nmt_batch){.tokens = ib->ptrs, .lens = ib->lens, .n = N_SENTS};
}

/* Result (i, 0) of the last call as the text format prints it. */
static void lib_line(const lib *L, uint32_t i, char *out, size_t cap) {
    const int32_t *t;
    uint32_t len;
    assert_int_equal(nmt_session_result(L->s, i, 0, &t, &len, NULL, NULL), NMT_OK);
    out[0] = '\0';
    for (uint32_t k = 0; k < len; k++) snprintf(out + strlen(out), cap - strlen(out), k ? " %d" : "%d", (int)t[k]);
}

/* ---- CLI = library ------------------------------------------------------- */

static void test_cli_equals_library(void **state) {
    (void)state;
    char prefix_path[400];
    snprintf(prefix_path, sizeof prefix_path, "%s/prefix.txt", g_dir);
    static const char prefixes[] = "9 9 4\n\n30\n\n1 3 4 5 6 7 8 9 10 11\n";
    assert_int_equal(nmt_test_write_file(prefix_path, prefixes, sizeof prefixes - 1), 0);
    enum { N_CASES = 5 };
    for (int k = 0; k < N_CASES; k++) {
        run_result r;
        const int align = k == 2;
        uint32_t beam = k == 1 ? 1 : 3;
        if (k == 0) run_cli(&r, INPUT, "translate", "--model", g_model, "--beam", "3", "--repetition-penalty", "1.7", NULL);
        if (k == 1)
            run_cli(&r, INPUT, "translate", "--model", g_model, "--sampling", "topk:5", "--temperature", "0.7", "--seed",
                    "11", NULL);
        if (k == 2) run_cli(&r, INPUT, "translate", "--model", g_model, "--beam", "3", "--coverage-penalty", "2", NULL);
        if (k == 3) run_cli(&r, INPUT, "translate", "--model", g_model, "--beam", "3", "--prefix-file", prefix_path, NULL);
        if (k == 4) { /* all at once, greedy */
            beam = 1;
            run_cli(&r, INPUT, "translate", "--model", g_model, "--beam", "1", "--repetition-penalty", "0.8",
                    "--prefix-file", prefix_path, NULL);
        }
        expect_status(&r, 0);
        char *lines[MAX_LINES];
        assert_int_equal(split_lines(&r, lines, MAX_LINES), N_SENTS);
        lib L;
        lib_open(&L, beam, align);
        ids_batch ib, pb;
        ids_batch_fill(&ib);
        const char *pl[N_SENTS] = {"9 9 4", "", "30", "", "1 3 4 5 6 7 8 9 10 11"};
        for (uint32_t i = 0; i < N_SENTS; i++) {
            parse_ids(pl[i], pb.ids[i], &pb.lens[i]);
            pb.ptrs[i] = pb.ids[i];
        }
        nmt_decode_opts o = {.beam = beam, .alpha = 0.6f, .alpha_set = 1};
        if (k == 0) o.repetition_penalty = 1.7f;
        if (k == 1) o.beam = 0, o.sampling = 1, o.sampling_topk = 5, o.sampling_temperature = 0.7f, o.seed = 11;
        if (k == 2) o.coverage_penalty = 2.0f;
        if (k == 3 || k == 4) o.prefix = pb.ptrs, o.prefix_len = pb.lens;
        if (k == 4) o.repetition_penalty = 0.8f;
        assert_int_equal(nmt_session_translate(L.s, &ib.b, &o), NMT_OK);
        for (uint32_t i = 0; i < N_SENTS; i++) {
            char want[1024];
            lib_line(&L, i, want, sizeof want);
            assert_string_equal(lines[i], want);
            if (k >= 3) assert_memory_equal(lines[i], pl[i], strlen(pl[i])); /* the output includes the prefix */
        }
        lib_close(&L);
        free_result(&r);
    }
}

/* Sampling: the same seed gives the same lines for --batch 1, 3 and 8
 * (line L draws from seed + L); another seed other lines. */
static void test_sampling_reproducible(void **state) {
    (void)state;
    run_result a, b, c, d;
    run_cli(&a, INPUT, "translate", "--model", g_model, "--sampling", "topk:0", "--seed", "5", "--batch", "8", NULL);
    run_cli(&b, INPUT, "translate", "--model", g_model, "--sampling", "topk:0", "--seed", "5", "--batch", "1", NULL);
    run_cli(&c, INPUT, "translate", "--model", g_model, "--sampling", "topk:0", "--seed", "5", "--batch", "3", NULL);
    run_cli(&d, INPUT, "translate", "--model", g_model, "--sampling", "topk:0", "--seed", "6", "--batch", "8", NULL);
    expect_status(&a, 0);
    expect_status(&b, 0);
    expect_status(&c, 0);
    expect_status(&d, 0);
    assert_string_equal(a.out, b.out);
    assert_string_equal(a.out, c.out);
    assert_string_not_equal(a.out, d.out);
    /* the second line alone, with seed 5 + 1: the same as line 2 above */
    run_result e;
    run_cli(&e, "6 7 8\n", "translate", "--model", g_model, "--sampling", "topk:0", "--seed", "6", NULL);
    expect_status(&e, 0);
    char *la[MAX_LINES], *le[MAX_LINES];
    assert_int_equal(split_lines(&a, la, MAX_LINES), N_SENTS);
    assert_int_equal(split_lines(&e, le, MAX_LINES), 1);
    assert_string_equal(la[1], le[0]);
    free_result(&a);
    free_result(&b);
    free_result(&c);
    free_result(&d);
    free_result(&e);
}

/* ---- formats ------------------------------------------------------------- */

/* The value after "KEY": in a JSON line (as a string up to the next ',' or
 * '}' outside brackets). */
static const char *json_field(const char *line, const char *key, char *out, size_t cap) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(line, pat);
    if (p == NULL) return NULL;
    p += strlen(pat);
    size_t n = 0;
    int depth = 0, in_str = 0;
    for (; p[n] && n + 1 < cap; n++) {
        const char c = p[n];
        if (in_str) {
            if (c == '\\') n++;
            else if (c == '"') in_str = 0;
            continue;
        }
        if (c == '"') in_str = 1;
        else if (c == '[') depth++;
        else if (c == ']') depth--;
        else if ((c == ',' || c == '}') && depth == 0) break;
    }
    memcpy(out, p, n);
    out[n] = '\0';
    return out;
}

/* Pharaoh pairs "4-0 3-1" as the JSON array "[[4, 0], [3, 1]]". */
static void pairs_as_json(const char *aln, char *out, size_t cap) {
    size_t n = (size_t)snprintf(out, cap, "[");
    for (const char *p = aln; *p;) {
        char *end;
        const long i = strtol(p, &end, 10);
        assert_int_equal(*end, '-');
        const long j = strtol(end + 1, &end, 10);
        n += (size_t)snprintf(out + n, cap - n, "%s[%ld, %ld]", p == aln ? "" : ", ", i, j);
        p = end + (*end == ' ');
    }
    snprintf(out + n, cap - n, "]");
}

/* Fields of a line split at " ||| " / "|||" (Marian's separator): how many. */
static int bar_fields(const char *line) {
    int n = 1;
    for (const char *p = line; (p = strstr(p, "|||")) != NULL; p += 3) n++;
    return n;
}

/* Numbers in a flat JSON array "[a, b, ...]" (its text in v). */
static int json_count(const char *v) {
    assert_int_equal(v[0], '[');
    int n = 0;
    for (const char *c = v + 1; *c && *c != ']';) {
        char *end;
        strtod(c, &end);
        assert_true(end > c);
        n++;
        c = end;
        while (*c == ',' || *c == ' ') c++;
    }
    return n;
}

/* --format marian is Marian's n-best line, "i ||| TEXT ||| F0= LOGPROB |||
 * SCORE", with --alignment "i ||| TEXT ||| ALIGNMENT ||| F0= LOGPROB |||
 * SCORE" (F0 the raw log-probability, the last field the length-normalised
 * score); --format jsonl carries the same translation, scores and
 * alignment (a JSON array), tokens and token_logprobs of equal length, the
 * end-of-sentence last in both. */
static void test_formats(void **state) {
    (void)state;
    nmt_model_info mi;
    assert_int_equal(nmt_model_inspect_file(g_model, &mi), NMT_OK);
    run_result text, marian, plain, json, nb, soft;
    run_cli(&text, INPUT, "translate", "--model", g_model, "--with-score", "--alignment", NULL);
    run_cli(&marian, INPUT, "translate", "--model", g_model, "--format", "marian", "--alignment", NULL);
    run_cli(&plain, INPUT, "translate", "--model", g_model, "--format", "marian", "--n-best", "2", NULL);
    run_cli(&json, INPUT, "translate", "--model", g_model, "--format", "jsonl", "--alignment", NULL);
    run_cli(&nb, INPUT, "translate", "--model", g_model, "--format", "jsonl", "--n-best", "3", NULL);
    run_cli(&soft, INPUT, "translate", "--model", g_model, "--format", "jsonl", "--alignment", "soft", NULL);
    expect_status(&text, 0);
    expect_status(&marian, 0);
    expect_status(&plain, 0);
    expect_status(&json, 0);
    expect_status(&nb, 0);
    expect_status(&soft, 0);
    char *lt[MAX_LINES], *lm[MAX_LINES], *lp[MAX_LINES], *lj[MAX_LINES], *ln[MAX_LINES], *ls[MAX_LINES];
    assert_int_equal(split_lines(&text, lt, MAX_LINES), N_SENTS);
    assert_int_equal(split_lines(&marian, lm, MAX_LINES), N_SENTS);
    assert_int_equal(split_lines(&plain, lp, MAX_LINES), 2 * N_SENTS);
    assert_int_equal(split_lines(&json, lj, MAX_LINES), N_SENTS);
    assert_int_equal(split_lines(&nb, ln, MAX_LINES), 3 * N_SENTS);
    assert_int_equal(split_lines(&soft, ls, MAX_LINES), N_SENTS);
    for (uint32_t i = 0; i < N_SENTS; i++) {
        /* text: "SCORE ||| IDS ||| ALIGN" */
        char score[64], ids[512], aln[512], want[1200], v[1024], logprob_s[64];
        assert_int_equal(sscanf(lt[i], "%63[^ ] ||| ", score), 1);
        const char *rest = strstr(lt[i], " ||| ") + 5;
        const char *sep = strstr(rest, " |||");
        snprintf(ids, sizeof ids, "%.*s", (int)(sep - rest), rest);
        snprintf(aln, sizeof aln, "%s", sep[4] == ' ' ? sep + 5 : sep + 4);
        assert_non_null(json_field(lj[i], "logprob", logprob_s, sizeof logprob_s));
        /* marian: exactly 5 fields with the alignment, 4 without */
        snprintf(want, sizeof want, "%u ||| %s |||%s%s ||| F0= %s ||| %s", i, ids, aln[0] ? " " : "", aln, logprob_s,
                 score);
        assert_string_equal(lm[i], want);
        assert_int_equal(bar_fields(lm[i]), 5);
        snprintf(want, sizeof want, "%u ||| %s ||| F0= %s ||| %s", i, ids, logprob_s, score);
        assert_string_equal(lp[2 * i], want); /* the best of two, as the 1-best */
        assert_int_equal(bar_fields(lp[2 * i + 1]), 4);
        snprintf(want, sizeof want, "%u ||| ", i);
        assert_memory_equal(lp[2 * i + 1], want, strlen(want));
        assert_non_null(strstr(lp[2 * i + 1], " ||| F0= -"));
        /* jsonl */
        assert_non_null(json_field(lj[i], "line", v, sizeof v));
        assert_int_equal(atoi(v), (int)i);
        assert_non_null(json_field(lj[i], "rank", v, sizeof v));
        assert_string_equal(v, "0");
        assert_non_null(json_field(lj[i], "text", v, sizeof v));
        snprintf(want, sizeof want, "\"%s\"", ids);
        assert_string_equal(v, want);
        assert_non_null(json_field(lj[i], "score", v, sizeof v));
        assert_string_equal(v, score);
        assert_non_null(json_field(lj[i], "alignment", v, sizeof v));
        pairs_as_json(aln, want, sizeof want);
        assert_string_equal(v, want);
        assert_null(strstr(lj[i], "\"pieces\"")); /* only with --with-pieces */
        assert_non_null(json_field(lj[i], "tokens", v, sizeof v)); /* "[1, 2, EOS]": the ids, then EOS */
        const int n_tokens = json_count(v);
        char joined[1024];
        size_t nj = 0;
        for (char *c = v + 1; *c && *c != ']'; c++)
            if (*c != ',') joined[nj++] = *c;
        joined[nj] = '\0';
        snprintf(want, sizeof want, "%s%s%u", ids, ids[0] ? " " : "", mi.eos_id);
        assert_string_equal(joined, want);
        const double logprob = atof(logprob_s);
        assert_non_null(json_field(lj[i], "token_logprobs", v, sizeof v));
        double sum = 0;
        for (char *c = v + 1; *c && *c != ']';) {
            char *end;
            sum += strtod(c, &end);
            c = end;
            while (*c == ',' || *c == ' ') c++;
        }
        int words = 0;
        for (const char *c = ids; *c; c++) words += (c == ids || c[-1] == ' ') && *c != ' ';
        assert_int_equal(json_count(v), n_tokens); /* equal lengths */
        assert_int_equal(n_tokens, words + 1);     /* each token, then EOS */
        assert_float_equal(sum, logprob, 1e-4);
        /* soft: an array of rows, one per target token (EOS excluded), each over the source and its EOS */
        static char sv[1 << 16];
        assert_non_null(json_field(ls[i], "alignment", sv, sizeof sv));
        assert_true(sv[0] == '[' && sv[strlen(sv) - 1] == ']');
        int rows = 0, src_words = 0;
        for (const char *c = SENTS[i]; *c; c++) src_words += (c == SENTS[i] || c[-1] == ' ') && *c != ' ';
        for (const char *c = sv + 1; *c == '[';) {
            const char *close = strchr(c, ']');
            char row[512];
            snprintf(row, sizeof row, "%.*s", (int)(close - c + 1), c);
            assert_int_equal(json_count(row), src_words + 1);
            rows++;
            c = close + 1;
            if (*c == ',') c += 2;
        }
        assert_int_equal(rows, words);
        /* n-best: ranks 0..2 of line i, the best equal to the 1-best line */
        for (uint32_t r = 0; r < 3; r++) {
            assert_non_null(json_field(ln[3 * i + r], "line", v, sizeof v));
            assert_int_equal(atoi(v), (int)i);
            assert_non_null(json_field(ln[3 * i + r], "rank", v, sizeof v));
            assert_int_equal(atoi(v), (int)r);
            assert_null(strstr(ln[3 * i + r], "\"alignment\""));
        }
        assert_non_null(json_field(ln[3 * i], "text", v, sizeof v));
        snprintf(want, sizeof want, "\"%s\"", ids);
        assert_string_equal(v, want);
    }
    free_result(&text);
    free_result(&marian);
    free_result(&plain);
    free_result(&json);
    free_result(&nb);
    free_result(&soft);
}

/* --with-pieces: "pieces" as long as "tokens", each the target tokenizer's
 * piece of its id, the end-of-sentence's last; refused without jsonl or
 * without a tokenizer. */
static void test_with_pieces(void **state) {
    (void)state;
    run_result r;
    run_cli(&r, "Hello world.\n\nA second one.\n", "translate", "--model", g_text_model, "--format", "jsonl",
            "--with-pieces", "--max-len", "6", NULL);
    expect_status(&r, 0);
    char *lines[MAX_LINES];
    assert_int_equal(split_lines(&r, lines, MAX_LINES), 3);
    for (int i = 0; i < 3; i++) {
        char v[2048], p[2048];
        assert_non_null(json_field(lines[i], "tokens", v, sizeof v));
        assert_non_null(json_field(lines[i], "pieces", p, sizeof p));
        int n_pieces = 0;
        for (const char *c = p; (c = strchr(c, '"')) != NULL; c++) {
            c = strchr(c + 1, '"'); /* the pieces of this model have no quotes */
            assert_non_null(c);
            n_pieces++;
        }
        assert_int_equal(n_pieces, json_count(v));
        const size_t pl = strlen(p);
        assert_true(pl >= 7 && strcmp(p + pl - 7, "\"</s>\"]") == 0);
        if (i == 1) assert_string_equal(p, "[\"</s>\"]"); /* the empty line: the end-of-sentence alone */
    }
    free_result(&r);
    run_cli(&r, "1 2\n", "translate", "--model", g_model, "--format", "jsonl", "--with-pieces", NULL);
    expect_status(&r, 1);
    char want[600];
    snprintf(want, sizeof want, "nmt-edge: --with-pieces needs a model with an embedded tokenizer; '%s' has none\n",
             g_model);
    assert_string_equal(r.err, want);
    free_result(&r);
    run_cli(&r, "1 2\n", "translate", "--model", g_model, "--with-pieces", NULL);
    expect_status(&r, 2);
    assert_non_null(strstr(r.err, "nmt-edge translate: --with-pieces is for --format jsonl\n"));
    free_result(&r);
}

/* Text with quotes, backslashes and control characters through the text
 * model's prefix: the JSON text is escaped; and the writer on raw bytes. */
static void test_json_escaping(void **state) {
    (void)state;
    strbuf b = {0};
    static const char raw[] = "a\"b\\c\nd\te\x01\x7f\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"
                              "\xff|\xe2\x82|\xc0\xaf|\xed\xa0\x80|\xf4\x90\x80\x80|\r\b\f/";
    cli_json_string(&b, raw, sizeof raw - 1);
    assert_string_equal(b.p, "\"a\\\"b\\\\c\\nd\\te\\u0001\\u007f\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"
                             "\\ufffd|\\ufffd\\ufffd|\\ufffd\\ufffd|\\ufffd\\ufffd\\ufffd|\\ufffd\\ufffd\\ufffd\\ufffd|"
                             "\\r\\b\\f/\"");
    b.len = 0;
    cli_json_string(&b, "", 0);
    assert_string_equal(b.p, "\"\"");
    free(b.p);

    char prefix_path[400];
    snprintf(prefix_path, sizeof prefix_path, "%s/tprefix.txt", g_dir);
    static const char pre[] = "say \"hi\\\" \n";
    assert_int_equal(nmt_test_write_file(prefix_path, pre, sizeof pre - 1), 0);
    run_result r;
    run_cli(&r, "Hello world.\n", "translate", "--model", g_text_model, "--format", "jsonl", "--prefix-file",
            prefix_path, "--max-len", "12", NULL);
    expect_status(&r, 0);
    assert_non_null(strstr(r.out, "\"text\": \"say \\\"hi\\\\\\\""));
    free_result(&r);
}

/* ---- bad values ---------------------------------------------------------- */

static void expect_error(int status, const char *message, const char *in, ...) {
    char *argv[24];
    int n = 0;
    argv[n++] = (char *)NMT_EDGE_BIN;
    va_list ap;
    va_start(ap, in);
    const char *a;
    while ((a = va_arg(ap, const char *)) != NULL) argv[n++] = (char *)a;
    va_end(ap);
    argv[n] = NULL;
    run_result r;
    nmt_test_run(argv, in, g_dir, &r);
    expect_status(&r, status);
    if (strstr(r.err, message) == NULL) fail_msg("expected '%s' in stderr, got:\n%s", message, r.err);
    free_result(&r);
}

static void test_bad_values(void **state) {
    (void)state;
    const char *m = g_model;
    expect_error(2, "nmt-edge translate: --sampling draws one hypothesis: it needs --beam 1 (got --beam 4)\n", "1\n",
                 "translate", "--model", m, "--sampling", "topk:3", "--beam", "4", NULL);
    expect_error(2, "nmt-edge translate: --sampling 'top:3': expected topk:K, K an integer from 0 to 1000000", "1\n",
                 "translate", "--model", m, "--sampling", "top:3", NULL);
    expect_error(2, "--sampling 'topk:-1': expected topk:K", "1\n", "translate", "--model", m, "--sampling", "topk:-1",
                 NULL);
    expect_error(2, "nmt-edge translate: --temperature needs --sampling\n", "1\n", "translate", "--model", m,
                 "--temperature", "0.5", NULL);
    expect_error(2, "nmt-edge translate: --seed needs --sampling\n", "1\n", "translate", "--model", m, "--seed", "1",
                 NULL);
    expect_error(2, "nmt-edge translate: --seed: 'x' is not an integer in [0, 18446744073709551615]\n", "1\n",
                 "translate", "--model", m, "--sampling", "topk:0", "--seed", "x", NULL);
    expect_error(2, "nmt-edge translate: --temperature: '0' is not a number in [0.001, 100]\n", "1\n", "translate",
                 "--model", m, "--sampling", "topk:0", "--temperature", "0", NULL);
    expect_error(2, "nmt-edge translate: --repetition-penalty: '-1' is not a number in [0.001, 100]\n", "1\n",
                 "translate", "--model", m, "--repetition-penalty", "-1", NULL);
    expect_error(2, "nmt-edge translate: --coverage-penalty: 'nan' is not a number in [0, 100]\n", "1\n", "translate",
                 "--model", m, "--coverage-penalty", "nan", NULL);
    expect_error(2, "nmt-edge translate: --format: 'xml' is not one of text, marian, jsonl\n", "1\n", "translate",
                 "--model", m, "--format", "xml", NULL);
    expect_error(2, "nmt-edge translate: --with-score is for --format text (the jsonl format has the scores)\n", "1\n",
                 "translate", "--model", m, "--format", "jsonl", "--with-score", NULL);
    expect_error(2, "nmt-edge translate: --n-best 2 is larger than --beam 1\n", "1\n", "translate", "--model", m,
                 "--sampling", "topk:0", "--n-best", "2", NULL);
    expect_error(2, "nmt-edge score: unknown option '--sampling'\n", "1\t2\n", "score", "--model", m, "--sampling",
                 "topk:1", NULL);
    /* prefix files */
    char path[400], missing[400];
    snprintf(path, sizeof path, "%s/short.txt", g_dir);
    snprintf(missing, sizeof missing, "%s/none.txt", g_dir);
    assert_int_equal(nmt_test_write_file(path, "4\n", 2), 0);
    run_result r;
    run_cli(&r, "1 2\n3 4\n", "translate", "--model", m, "--prefix-file", path, NULL);
    expect_status(&r, 1);
    char want[600];
    snprintf(want, sizeof want, "nmt-edge: line 2: --prefix-file '%s' has only 1 line\n", path);
    assert_string_equal(r.err, want);
    char *lines[4];
    assert_int_equal(split_lines(&r, lines, 4), 1); /* line 1 written */
    assert_true(lines[0][0] == '4');
    free_result(&r);
    snprintf(want, sizeof want, "nmt-edge: cannot open --prefix-file '%s': No such file or directory\n", missing);
    expect_error(1, want, "1\n", "translate", "--model", m, "--prefix-file", missing, NULL);
    assert_int_equal(nmt_test_write_file(path, "4 x\n", 4), 0);
    snprintf(want, sizeof want, "nmt-edge: --prefix-file '%s' line 1: 'x' is not a target token id (0 to 49)\n", path);
    expect_error(1, want, "1\n", "translate", "--model", m, "--prefix-file", path, NULL);
    assert_int_equal(nmt_test_write_file(path, "50\n", 3), 0);
    snprintf(want, sizeof want, "nmt-edge: --prefix-file '%s' line 1: '50' is not a target token id (0 to 49)\n", path);
    expect_error(1, want, "1\n", "translate", "--model", m, "--prefix-file", path, NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cli_equals_library),
        cmocka_unit_test(test_sampling_reproducible),
        cmocka_unit_test(test_formats),
        cmocka_unit_test(test_with_pieces),
        cmocka_unit_test(test_json_escaping),
        cmocka_unit_test(test_bad_values),
    };
    return cmocka_run_group_tests(tests, cli_group_setup, cli_group_teardown);
}
