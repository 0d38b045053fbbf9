/* cli_tokenize.c — `nmt-edge tokenize` and `detokenize`: SentencePiece
 * encoding and decoding of lines, as spm_encode / spm_decode do. */
#include "cli.h"

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

static int read_whole_file(const char *path, void **data, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, PROG ": cannot open '%s': %s\n", path, strerror(errno));
        return 1;
    }
    size_t cap = 0, n = 0;
    char *buf = NULL;
    for (;;) {
        grow((void **)&buf, &cap, n + 65536, 1);
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        fprintf(stderr, PROG ": error reading '%s'\n", path);
        return 1;
    }
    *data = buf;
    *size = n;
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
} tok_job;

static int tokenize_parse(batch_job *job, const char *line, size_t len, unsigned long line_no) {
    tok_job *tj = (tok_job *)job;
    (void)line_no;
    cli_texts_add(&tj->lines, line, len);
    return 0;
}

static int detokenize_parse(batch_job *job, const char *line, size_t len, unsigned long line_no) {
    tok_job *tj = (tok_job *)job;
    return parse_sentence(line, line + len, line_no, &tj->rule, &tj->seqs);
}

static void tok_reset(batch_job *job) {
    tok_job *tj = (tok_job *)job;
    cli_texts_reset(&tj->lines);
    cli_seqs_reset(&tj->seqs);
}

static int tokenize_run(batch_job *job, unsigned long first, strbuf *out) {
    tok_job *tj = (tok_job *)job;
    cli_texts_ptrs(&tj->lines);
    for (uint32_t i = 0; i < tj->lines.n; i++) {
        const int32_t *ids;
        uint32_t n;
        nmt_status st = nmt_tokenizer_encode(tj->tr.t, tj->lines.ptrs[i], tj->lines.lens[i], &ids, &n);
        if (st == NMT_ERR_INPUT_TOO_LONG) {
            fprintf(stderr, PROG ": line %lu: %zu bytes, more than --max-text-bytes %ld\n",
                    first + i + 1, tj->lines.lens[i], tj->o->max_text_bytes);
            return 1;
        }
        if (st != NMT_OK) return report_status("tokenization failed", st, NULL);
        for (uint32_t k = 0; k < n; k++) {
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
    }
    return 0;
}

static int detokenize_run(batch_job *job, unsigned long first, strbuf *out) {
    tok_job *tj = (tok_job *)job;
    (void)first;
    cli_seqs_ptrs(&tj->seqs);
    for (uint32_t i = 0; i < tj->seqs.n; i++) {
        const uint32_t n = tj->seqs.lens[i];
        size_t need = nmt_tokenizer_decode_bound(tj->tr.t, n) + 1, len;
        grow((void **)&tj->text, &tj->text_cap, need, 1);
        nmt_status st = nmt_tokenizer_decode(tj->tr.t, tj->seqs.ptrs[i], n, tj->text, tj->text_cap, &len);
        if (st != NMT_OK) return report_status("detokenization failed", st, NULL);
        append_text(out, tj->text, len);
        sb_printf(out, "\n");
    }
    return 0;
}

static int run_tok(const cli_opts *o, int detok) {
    tok_job tj = {
        .base = {.parse = detok ? detokenize_parse : tokenize_parse,
                 .run = detok ? detokenize_run : tokenize_run,
                 .reset = tok_reset,
                 .keep_cr = !detok},
        .o = o,
    };
    int rc = open_tokenizer(o, &tj.tr);
    if (rc == 0) {
        nmt_tokenizer_info ti;
        nmt_tokenizer_get_info(tj.tr.t, &ti);
        tj.rule.side = "input";
        tj.rule.vocab = ti.vocab_size;
        tj.rule.max_tokens = UINT32_MAX;
        snprintf(tj.rule.limit_hint, sizeof tj.rule.limit_hint, "none");
        cli_texts_init(&tj.lines, (size_t)o->batch);
        cli_seqs_init(&tj.seqs, (size_t)o->batch);
        rc = process_lines(&tj.base, o->batch);
        cli_texts_free(&tj.lines);
        cli_seqs_free(&tj.seqs);
        free(tj.text);
    }
    close_tokenizer(&tj.tr);
    return rc;
}

int cmd_tokenize(const cli_opts *o) { return run_tok(o, 0); }
int cmd_detokenize(const cli_opts *o) { return run_tok(o, 1); }
