/* SPDX-License-Identifier: MIT */
/* cli_tokenize.c — `nmt-edge tokenize` and `detokenize`: SentencePiece
 * encoding and decoding of lines, as spm_encode / spm_decode do. */
#include "cli.h"
#include "tool_file.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================================== */
/* tokenize, detokenize                                                     */
/* ======================================================================== */

/* A tokenizer over a whole file read into memory (no device needed). */
typedef struct tok_runtime {
    void *file;
    void *arena;
    nmt_tokenizer *t;
} tok_runtime;

static void close_tokenizer(tok_runtime *tr) {
    free(tr->file);
    free(tr->arena);
    memset(tr, 0, sizeof *tr);
}

/* The model or .model file whole (tool_file.h: regular files only, so
 * /dev/zero or a FIFO is refused before anything is read). */
static int read_whole_file(const char *path, void **data, size_t *size) {
    char why[NMT_TOOL_WHY_BYTES];
    *data = nmt_tool_read_file(path, 0, size, why, sizeof why);
    if (*data == NULL) {
        fprintf(stderr, PROG ": %s\n", why);
        return 1;
    }
    return 0;
}

static int open_tokenizer(const cli_opts *o, tok_runtime *tr) {
    const char *path = o->sp_model ? o->sp_model : o->model;
    size_t size;
    if (read_whole_file(path, &tr->file, &size) != 0) return 1;
    const void *model = tr->file;
    size_t model_size = size;
    if (o->sp_model == NULL) {
        nmt_status st = nmt_model_tokenizer(tr->file, size, o->target, &model, &model_size);
        if (st != NMT_OK) return model_error(path, st);
    }
    const uint32_t max_text = (uint32_t)o->max_text_bytes;
    size_t need;
    nmt_status st = nmt_tokenizer_arena_size(model, model_size, max_text, &need);
    if (st != NMT_OK) return model_error(path, st);
    if (check_memory("tokenizer arena", need, 0, NULL, "--max-text-bytes") != 0) return 1;
    size_t alloc = round_up(need ? need : 1, NMT_ARENA_ALIGNMENT);
    tr->arena = aligned_alloc(NMT_ARENA_ALIGNMENT, alloc);
    if (tr->arena == NULL) {
        fprintf(stderr, PROG ": cannot allocate the %zu-byte tokenizer arena\n", alloc);
        return 1;
    }
    st = nmt_tokenizer_create(model, model_size, max_text, tr->arena, alloc, &tr->t);
    return st == NMT_OK ? 0 : model_error(path, st);
}

typedef struct tok_job {
    batch_job base;
    const cli_opts *o;
    tok_runtime tr;
    side_rule rule;       /* detokenize: ids of the tokenizer's vocabulary */
    cli_texts lines;      /* tokenize */
    seq_buf seqs;         /* detokenize */
    char *text;           /* detokenize output scratch */
    size_t text_cap;
    strbuf done;          /* output lines of the last call, back to back */
    size_t *ends;         /* (batch) end of result r in done */
} tok_job;

static int tokenize_parse(batch_job *job, const char *line, size_t len, unsigned long line_no,
                          char *err, size_t cap) {
    tok_job *tj = (tok_job *)job;
    (void)line_no, (void)err, (void)cap;
    cli_texts_add(&tj->lines, line, len);
    return LINE_OK;
}

/* A line longer than --max-text-bytes + 1, cut: tokenize's message for it
 * (tokenize_why_long's), with every byte counted. */
static int tokenize_parse_cut(batch_job *job, const char *head, size_t head_len, uint64_t len,
                              const cli_cut *cut, unsigned long line_no, char *err, size_t cap) {
    tok_job *tj = (tok_job *)job;
    (void)head, (void)head_len, (void)cut;
    cli_texts_add(&tj->lines, "", 0);
    snprintf(err, cap, "line %lu: %llu bytes, more than --max-text-bytes %ld", line_no, (unsigned long long)len,
             tj->o->max_text_bytes);
    return LINE_LONG;
}

static int detokenize_parse(batch_job *job, const char *line, size_t len, unsigned long line_no,
                            char *err, size_t cap) {
    tok_job *tj = (tok_job *)job;
    return cli_parse_ids(line, line + len, line_no, &tj->rule, &tj->seqs, err, cap) ? LINE_BAD
                                                                                     : LINE_OK;
}

static void tok_reset(batch_job *job) {
    tok_job *tj = (tok_job *)job;
    cli_texts_reset(&tj->lines);
    cli_seqs_reset(&tj->seqs);
}

/* Encode lines [lo, lo + n) into tj->done. */
static nmt_status tokenize_call(batch_job *job, uint32_t lo, uint32_t n) {
    tok_job *tj = (tok_job *)job;
    strbuf *out = &tj->done;
    out->len = 0;
    cli_texts_ptrs(&tj->lines);
    for (uint32_t i = lo; i < lo + n; i++) {
        const int32_t *ids;
        uint32_t n_ids;
        nmt_status st = nmt_tokenizer_encode(tj->tr.t, tj->lines.ptrs[i], tj->lines.lens[i], &ids, &n_ids);
        if (st != NMT_OK) return st;
        for (uint32_t k = 0; k < n_ids; k++) {
            if (tj->o->pieces) {
                const char *piece;
                size_t len;
                if (k) sb_printf(out, " ");
                if (nmt_tokenizer_piece(tj->tr.t, ids[k], &piece, &len) == NMT_OK)
                    append_text(out, piece, len);
            } else {
                sb_printf(out, k ? " %d" : "%d", (int)ids[k]);
            }
        }
        sb_printf(out, "\n");
        tj->ends[i - lo] = out->len;
    }
    return NMT_OK;
}

/* Decode sentences [lo, lo + n) into tj->done. */
static nmt_status detokenize_call(batch_job *job, uint32_t lo, uint32_t n) {
    tok_job *tj = (tok_job *)job;
    tj->done.len = 0;
    cli_seqs_ptrs(&tj->seqs);
    for (uint32_t i = lo; i < lo + n; i++) {
        const uint32_t n_ids = tj->seqs.lens[i];
        size_t need = nmt_tokenizer_decode_bound(tj->tr.t, n_ids) + 1, len;
        grow((void **)&tj->text, &tj->text_cap, need, 1);
        nmt_status st = nmt_tokenizer_decode(tj->tr.t, tj->seqs.ptrs[i], n_ids, tj->text, tj->text_cap, &len);
        if (st != NMT_OK) return st;
        append_text(&tj->done, tj->text, len);
        sb_printf(&tj->done, "\n");
        tj->ends[i - lo] = tj->done.len;
    }
    return NMT_OK;
}

static int tok_append(batch_job *job, uint32_t r, unsigned long index, strbuf *out) {
    tok_job *tj = (tok_job *)job;
    (void)index;
    const size_t from = r ? tj->ends[r - 1] : 0;
    grow((void **)&out->p, &out->cap, out->len + (tj->ends[r] - from) + 1, 1);
    memcpy(out->p + out->len, tj->done.p + from, tj->ends[r] - from);
    out->len += tj->ends[r] - from;
    return 0;
}

static void tokenize_why_long(batch_job *job, uint32_t i, unsigned long line_no, char *err, size_t cap) {
    tok_job *tj = (tok_job *)job;
    snprintf(err, cap, "line %lu: %zu bytes, more than --max-text-bytes %ld", line_no,
             tj->lines.lens[i], tj->o->max_text_bytes);
}

static int run_tok(const cli_opts *o, int detok) {
    tok_job tj = {
        .base = {.parse = detok ? detokenize_parse : tokenize_parse,
                 .parse_cut = detok ? NULL : tokenize_parse_cut, /* lines over the limit are cut as read */
                 .line_limit = detok ? 0 : (size_t)o->max_text_bytes,
                 .call = detok ? detokenize_call : tokenize_call,
                 .append = tok_append,
                 .why_long = tokenize_why_long, /* detokenize: never too long */
                 .reset = tok_reset,
                 .what = detok ? "detokenization failed" : "tokenization failed",
                 .keep_cr = !detok},
        .o = o,
    };
    int rc = batch_open(&tj.base, o);
    if (rc == 0) rc = open_tokenizer(o, &tj.tr);
    if (rc == 0) {
        nmt_tokenizer_info ti;
        nmt_tokenizer_get_info(tj.tr.t, &ti);
        tj.rule.side = "input";
        tj.rule.vocab = ti.vocab_size;
        tj.rule.max_tokens = UINT32_MAX;
        snprintf(tj.rule.limit_hint, sizeof tj.rule.limit_hint, "none");
        cli_texts_init(&tj.lines, (size_t)o->batch);
        cli_seqs_init(&tj.seqs, (size_t)o->batch);
        tj.ends = xrealloc(NULL, (size_t)o->batch * sizeof *tj.ends);
        rc = process_lines(&tj.base);
        cli_texts_free(&tj.lines);
        cli_seqs_free(&tj.seqs);
        free(tj.text);
        free(tj.done.p);
        free(tj.ends);
    }
    close_tokenizer(&tj.tr);
    return batch_close(&tj.base, rc);
}

int cmd_tokenize(const cli_opts *o) { return run_tok(o, 0); }
int cmd_detokenize(const cli_opts *o) { return run_tok(o, 1); }
