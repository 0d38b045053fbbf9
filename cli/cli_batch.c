/* SPDX-License-Identifier: MIT */
/* cli_batch.c — the batch runner of the nmt-edge program, and `translate`
 * and `score`, the two subcommands it drives through the library's batched
 * calls (tokenize/detokenize use it too, from cli_tokenize.c).
 *
 * The runner (process_lines) reads lines from standard input or -i FILE,
 * parses each into the pending batch through the subcommand's hooks
 * (batch_job in cli.h) and runs the batch when it is full, when the input
 * ends, or when a terminal or pipe pauses (no further byte ready to read:
 * the partial batch is run), so that a user typing a sentence sees its
 * translation at once; a regular file is read in full batches.
 * With --batch-tokens (translate) the lines pending are a read-ahead
 * window of --read-ahead lines instead, planned into token batches
 * (nmt_batch_plan_tokens) and written back in input order; a line over
 * the limits runs alone and a window whose call fails runs again as
 * sentence batches, so every rule below holds for it as written
 * (run_token_batches).
 *
 * Output integrity, the same for every subcommand:
 *   - every line before the one that stops a run is written: a bad line
 *     first runs the lines pending before it, then stops the run with a
 *     message naming it ("line N: ...") and exit status 1;
 *   - a batch the library rejects as over the limits is run again one
 *     sentence at a time, so the message names the exact line and the limit
 *     it breaks; with --skip-long that line gives an empty output line
 *     (nothing with --n-best > 1) and the run goes on;
 *   - in text mode a line far over --max-text-bytes is never held whole:
 *     the reader cuts it (cli_input.h) and the subcommand's parse_cut
 *     gives it the message it would have whole, every byte counted; under
 *     --skip-long it ends its batch, so its message follows those of the
 *     lines before it;
 *   - output is written after every batch; a write error is a message and
 *     exit status 1;
 *   - -o FILE is replaced atomically: the output goes to a temporary file
 *     beside FILE (symbolic links followed), renamed over it only when the
 *     whole run succeeded; a failed run leaves FILE as it was and says so,
 *     and a terminating signal removes the temporary.  -o refuses anything
 *     but a regular file (a device, a pipe, a directory).
 *
 * translate and score draw a progress line on standard error after each
 * batch when it is a terminal (cli_progress.h; --quiet turns it off); it is
 * erased before any message and at the end. */
#define _XOPEN_SOURCE 700 /* realpath() */
#include "cli.h"
#include "parse_spans.h"
#include "spans_file.h"
#include "tool_out.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ======================================================================== */
/* Output: standard output, or -o FILE replaced atomically                  */
/* ======================================================================== */

/* -o FILE: check it, then create the temporary beside it. */
static int open_output(batch_job *job, const char *path) {
    snprintf(job->out_name, sizeof job->out_name, "'%.4000s'", path);
    struct stat st;
    int exists = stat(path, &st) == 0;
    if (!exists && errno == ENOENT && lstat(path, &st) == 0) {
        fprintf(stderr, PROG ": cannot write to %s: a symbolic link to a missing file\n", job->out_name);
        return 1;
    }
    if (!exists && errno != ENOENT) {
        fprintf(stderr, PROG ": cannot write to %s: %s\n", job->out_name, strerror(errno));
        return 1;
    }
    if (exists && !S_ISREG(st.st_mode)) {
        fprintf(stderr,
                PROG ": cannot write to %s: not a regular file (-o replaces a file; write to "
                     "standard output for a device or a pipe)\n",
                job->out_name);
        return 1;
    }
    job->out_path = exists ? realpath(path, NULL) : strdup(path);
    if (job->out_path == NULL) {
        fprintf(stderr, PROG ": cannot write to %s: %s\n", job->out_name, strerror(errno));
        return 1;
    }
    /* DIR/.NAME.nmt-edge-XXXXXX: the same file system, so rename() is atomic */
    const char *slash = strrchr(job->out_path, '/');
    const int dir_len = slash ? (int)(slash - job->out_path) + 1 : 0;
    size_t cap = strlen(job->out_path) + 32;
    job->tmp_path = xrealloc(NULL, cap);
    snprintf(job->tmp_path, cap, "%.*s.%s.nmt-edge-XXXXXX", dir_len, job->out_path,
             job->out_path + dir_len);
    mode_t mask = umask(0);
    umask(mask);
    int fd = mkstemp(job->tmp_path);
    if (fd < 0) {
        fprintf(stderr, PROG ": cannot write to %s: creating the temporary file %s: %s\n",
                job->out_name, job->tmp_path, strerror(errno));
        free(job->tmp_path);
        job->tmp_path = NULL;
        return 1;
    }
    nmt_tool_tmp_begin(job->tmp_path); /* a terminating signal removes it (tool_out.h) */
    fchmod(fd, exists ? (st.st_mode & 07777) : (0666 & ~mask));
    job->out_fd = fd;
    return 0;
}

/* Write the batch's output; 1 (message printed) on a write error. */
static int write_batch(batch_job *job, strbuf *b) {
    const char *p = b->p;
    size_t n = b->len;
    b->len = 0;
    while (n > 0) {
        ssize_t k = write(job->out_fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            cli_progress_clear(&job->progress);
            fprintf(stderr, PROG ": error writing %s: %s\n", job->out_name,
                    strerror(k < 0 ? errno : EIO));
            return 1;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

int batch_open(batch_job *job, const cli_opts *o) {
    job->batch = (uint32_t)o->batch;
    job->window = job->batch;
    if (job->length != NULL && o->batch_tokens > 0) { /* token batches over a read-ahead window */
        job->batch_tokens = (uint32_t)o->batch_tokens;
        job->window = o->read_ahead > 0 ? (uint32_t)o->read_ahead : job->batch * CLI_READ_AHEAD_BATCHES;
        const size_t w = job->window;
        job->plan_order = xrealloc(NULL, w * sizeof *job->plan_order);
        job->plan_sizes = xrealloc(NULL, w * sizeof *job->plan_sizes);
        job->plan_lens = xrealloc(NULL, w * sizeof *job->plan_lens);
        job->plan_live = xrealloc(NULL, w * sizeof *job->plan_live);
        job->stage_at = xrealloc(NULL, w * sizeof *job->stage_at);
        job->stage_len = xrealloc(NULL, w * sizeof *job->stage_len);
        job->stage_done = xrealloc(NULL, w);
        job->slot_lens = xrealloc(NULL, w * sizeof *job->slot_lens);
    }
    job->skip_long = o->skip_long;
    job->skipped = xrealloc(NULL, job->window);
    memset(job->skipped, 0, job->window);
    job->in_fd = 0;
    job->out_fd = 1;
    snprintf(job->in_name, sizeof job->in_name, "standard input");
    snprintf(job->out_name, sizeof job->out_name, "standard output");
    if (o->input != NULL) {
        snprintf(job->in_name, sizeof job->in_name, "'%.4000s'", o->input);
        job->in_fd = open(o->input, O_RDONLY | O_CLOEXEC);
        if (job->in_fd < 0) {
            fprintf(stderr, PROG ": cannot open %s: %s\n", job->in_name, strerror(errno));
            return 1;
        }
    }
    if (o->output != NULL && open_output(job, o->output) != 0) return 1;
    cli_reader_init(&job->in, job->in_fd);
    const int summary = !job->show_summary || o->quiet ? CLI_SUMMARY_NEVER
                        : o->verbose                   ? CLI_SUMMARY_ALWAYS
                                                       : CLI_SUMMARY_ON_TERMINAL;
    cli_progress_init(&job->progress, job->show_progress && !o->quiet, summary, job->in_fd, job->out_fd);
    return 0;
}

int batch_close(batch_job *job, int rc) {
    cli_reader_free(&job->in);
    free(job->skipped);
    job->skipped = NULL;
    free(job->plan_order);
    free(job->plan_sizes);
    free(job->plan_lens);
    free(job->plan_live);
    free(job->stage_at);
    free(job->stage_len);
    free(job->stage_done);
    free(job->slot_lens);
    job->slot_lens = NULL;
    free(job->staged.p);
    job->plan_order = job->plan_sizes = job->plan_lens = job->plan_live = NULL;
    job->stage_at = job->stage_len = NULL;
    job->stage_done = NULL;
    job->staged.p = NULL;
    if (job->in_fd > 0) close(job->in_fd);
    job->in_fd = -1;
    if (job->tmp_path != NULL) {
        if (rc == 0) {
            int err = fsync(job->out_fd) != 0 ? errno : 0;
            if (close(job->out_fd) != 0 && err == 0) err = errno;
            if (err != 0) {
                fprintf(stderr, PROG ": error writing %s: %s\n", job->out_name, strerror(err));
                rc = 1;
            } else if (rename(job->tmp_path, job->out_path) != 0) {
                fprintf(stderr, PROG ": cannot replace %s: %s\n", job->out_name, strerror(errno));
                rc = 1;
            }
        } else {
            close(job->out_fd);
        }
        if (rc != 0) {
            unlink(job->tmp_path);
            if (!job->kept_said)
                fprintf(stderr, PROG ": nothing written to %s (the run failed; the file is as it was)\n",
                        job->out_name);
        }
        nmt_tool_tmp_end();
    }
    free(job->tmp_path);
    free(job->out_path);
    job->tmp_path = job->out_path = NULL;
    return rc;
}

/* ======================================================================== */
/* The line loop                                                            */
/* ======================================================================== */

static const char *skip_note(const batch_job *job) {
    return job->blank_skipped ? "its output is an empty line (--skip-long)"
                              : "it has no output lines (--skip-long)";
}

/* A line over the limits stops the run (no --skip-long): say why, that -o
 * FILE stays as it was, and what --skip-long would do (translate, score). */
static void long_line_stop(batch_job *job, const char *why) {
    cli_progress_clear(&job->progress);
    fprintf(stderr, PROG ": %s", why);
    if (job->tmp_path != NULL) {
        fprintf(stderr, "; %s is left as it was", job->out_name);
        job->kept_said = 1;
    }
    if (job->can_skip)
        fprintf(stderr, "; --skip-long writes %s for it instead",
                job->blank_skipped ? "an empty line" : "no lines");
    fputc('\n', stderr);
}

static void skipped_output(const batch_job *job, strbuf *out) {
    if (job->blank_skipped) sb_printf(out, "\n");
}

/* Run slots [lo, lo + n) of the pending lines (slot 0 is input line
 * first + 1) as one sentence batch and append their output; on an error
 * `out` holds the output of every line before it. */
static int run_batch(batch_job *job, uint32_t lo, uint32_t n, unsigned long first, strbuf *out) {
    uint32_t live = 0;
    for (uint32_t i = 0; i < n; i++) live += !job->skipped[lo + i];
    if (live == 0) { /* placeholders only (--skip-long): nothing to run */
        for (uint32_t i = 0; i < n; i++) skipped_output(job, out);
        return 0;
    }
    nmt_status st = job->call(job, lo, n);
    int rc;
    if (st == NMT_OK) {
        for (uint32_t i = 0; i < n; i++) {
            if (job->skipped[lo + i]) skipped_output(job, out);
            else if ((rc = job->append(job, i, first + lo + i, out)) != 0) return rc;
        }
        return 0;
    }
    /* a sentence's own fault (its spans, an id the model lacks) is found
     * below and named by its line, as text over the limits */
    const int per_line = st == NMT_ERR_INVALID_SPANS || st == NMT_ERR_TOKEN_OUT_OF_RANGE;
    if (st != NMT_ERR_INPUT_TOO_LONG && (!per_line || n == 1)) {
        cli_progress_clear(&job->progress);
        if (per_line) fprintf(stderr, PROG ": line %lu: %s: %s\n", first + lo + 1, job->what, nmt_status_str(st));
        return per_line ? 1 : report_status(job->what, st, job->rt);
    }
    /* Text over the limits is only seen once tokenized: run the batch one
     * sentence at a time to find it, keeping every other output. */
    for (uint32_t i = lo; i < lo + n; i++) {
        if (job->skipped[i]) {
            skipped_output(job, out);
            continue;
        }
        st = job->call(job, i, 1);
        if (st == NMT_ERR_INPUT_TOO_LONG) {
            char why[512];
            job->why_long(job, i, first + i + 1, why, sizeof why);
            if (!job->skip_long) {
                long_line_stop(job, why);
                return 1;
            }
            cli_progress_clear(&job->progress);
            fprintf(stderr, PROG ": %s; %s\n", why, skip_note(job));
            skipped_output(job, out);
            continue;
        }
        if (st == NMT_ERR_INVALID_SPANS || st == NMT_ERR_TOKEN_OUT_OF_RANGE) {
            cli_progress_clear(&job->progress);
            fprintf(stderr, PROG ": line %lu: %s: %s\n", first + i + 1, job->what, nmt_status_str(st));
            return 1;
        }
        if (st != NMT_OK) {
            cli_progress_clear(&job->progress);
            return report_status(job->what, st, job->rt);
        }
        if ((rc = job->append(job, 0, first + i, out)) != 0) return rc;
    }
    return 0;
}

/* Slots [lo, hi) of the pending lines as sentence batches of --batch, in
 * input order. */
static int run_sentence_batches(batch_job *job, uint32_t lo, uint32_t hi, unsigned long first, strbuf *out) {
    for (; lo < hi; lo += job->batch) {
        const uint32_t n = hi - lo < job->batch ? hi - lo : job->batch;
        const int rc = run_batch(job, lo, n, first, out);
        if (rc != 0) return rc;
    }
    return 0;
}

/* The staged outputs of slots [lo, hi) in input order ('--skip-long'
 * placeholders included), up to the first slot not staged. */
static void write_back(batch_job *job, uint32_t lo, uint32_t hi, strbuf *out) {
    for (uint32_t i = lo; i < hi; i++) {
        if (job->skipped[i]) {
            skipped_output(job, out);
            continue;
        }
        if (!job->stage_done[i]) return;
        const size_t len = job->stage_len[i];
        if (len == 0) continue; /* staged.p may still be NULL */
        grow((void **)&out->p, &out->cap, out->len + len + 1, 1);
        memcpy(out->p + out->len, job->staged.p + job->stage_at[i], len);
        out->len += len;
        out->p[out->len] = '\0';
    }
}

/* Slots [lo, hi) as token batches: sorted by source tokens (slot_lens)
 * and cut into calls of at most batch_tokens padded tokens and --batch
 * sentences (nmt_batch_plan_tokens), their outputs staged and written back
 * in input order.  A call that fails (a bad span, a prefix over the
 * limits, a device error) sends the range through the sentence batches
 * instead, from its first line: what they write and say is then exactly
 * what sentence batches would have. */
static int run_token_range(batch_job *job, uint32_t lo, uint32_t hi, unsigned long first, strbuf *out) {
    uint32_t m = 0;
    for (uint32_t i = lo; i < hi; i++) {
        job->stage_done[i] = 0;
        if (job->skipped[i]) continue;
        job->plan_live[m] = i;
        job->plan_lens[m++] = job->slot_lens[i];
    }
    uint32_t nb = 0;
    if (m == 0 || nmt_batch_plan_tokens(job->plan_lens, m, job->batch_tokens, job->batch, job->plan_order,
                                        job->plan_sizes, &nb) != NMT_OK)
        return run_sentence_batches(job, lo, hi, first, out);
    for (uint32_t k = 0; k < m; k++) job->plan_order[k] = job->plan_live[job->plan_order[k]]; /* to slots */
    job->staged.len = 0;
    for (uint32_t b = 0, at = 0; b < nb; at += job->plan_sizes[b++]) {
        job->order = job->plan_order;
        const nmt_status st = job->call(job, at, job->plan_sizes[b]);
        job->order = NULL;
        if (st != NMT_OK) return run_sentence_batches(job, lo, hi, first, out);
        for (uint32_t r = 0; r < job->plan_sizes[b]; r++) {
            const uint32_t slot = job->plan_order[at + r];
            job->stage_at[slot] = job->staged.len;
            job->order = job->plan_order; /* append reads the call's sources by slot */
            const int rc = job->append(job, r, first + slot, &job->staged);
            job->order = NULL;
            if (rc != 0) { /* a result could not be read: the lines before it that are done */
                write_back(job, lo, slot, out);
                return rc;
            }
            job->stage_len[slot] = job->staged.len - job->stage_at[slot];
            job->stage_done[slot] = 1;
        }
    }
    write_back(job, lo, hi, out);
    return 0;
}

/* --batch-tokens: the pending lines (the read-ahead window) as token
 * batches.  A line over --max-src-len once tokenized (length_limit) runs
 * alone through run_batch, which names it (and skips it under --skip-long
 * or stops the run), between token batches of the lines before and after
 * it: the output and messages of sentence batches, without sending the
 * whole window through them. */
static int run_token_batches(batch_job *job, unsigned long first, strbuf *out) {
    const uint32_t n = job->pending;
    uint32_t lo = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (job->skipped[i]) continue;
        job->slot_lens[i] = job->length(job, i);
        if (job->length_limit == 0 || job->slot_lens[i] <= job->length_limit) continue;
        int rc = run_token_range(job, lo, i, first, out);
        if (rc == 0) rc = run_batch(job, i, 1, first, out);
        if (rc != 0) return rc;
        lo = i + 1;
    }
    return run_token_range(job, lo, n, first, out);
}

int process_lines(batch_job *job) {
    strbuf out = {0};
    char err[512];
    unsigned long line_no = 0, first = 0;
    uint64_t bytes = 0; /* input bytes of the lines read (the progress line's ETA) */
    int rc = 0;
    job->in.limit = job->parse_cut != NULL ? job->line_limit : 0;
    cli_progress_start(&job->progress);
    for (;;) {
        const char *line;
        size_t n;
        int got = cli_reader_line(&job->in, &line, &n), stop = 0, read_errno = errno, too_long = 0;
        int said_later = 0; /* a cut line under --skip-long: its message after the lines before it */
        if (got < 0) {
            stop = 1; /* after the lines before it */
        } else if (got > 0) {
            int v;
            if (got == 2) { /* over the limit: only its first bytes were kept (cli_input.h) */
                const cli_cut *c = &job->in.cut;
                const uint64_t len = c->len - (uint64_t)(c->cr && !job->keep_cr);
                v = job->parse_cut(job, line, n, len, c, ++line_no, err, sizeof err);
                bytes += c->len + (uint64_t)c->nl;
            } else {
                size_t len = job->keep_cr ? n - (n > 0 && line[n - 1] == '\n') : cli_line_len(line, n);
                v = job->parse(job, line, len, ++line_no, err, sizeof err);
                bytes += n;
            }
            if (v == LINE_LONG && job->skip_long) {
                if (got == 2) {
                    said_later = 1;
                } else {
                    cli_progress_clear(&job->progress);
                    fprintf(stderr, PROG ": %s; %s\n", err, skip_note(job));
                }
                job->skipped[job->pending] = 1;
                v = LINE_OK;
            }
            if (v == LINE_OK) job->pending++;
            else stop = 1, too_long = v == LINE_LONG; /* after the lines before it */
        }
        /* a cut line ends its batch: the messages of the lines before it
         * (over the limits once tokenized) come first, as for whole lines */
        if (job->pending > 0 && (got <= 0 || stop || said_later || job->pending == job->window ||
                                 !cli_reader_ready(&job->in))) {
            rc = job->batch_tokens > 0 ? run_token_batches(job, first, &out) : run_batch(job, 0, job->pending, first, &out);
            if (job->progress.out_tty && out.len > 0) cli_progress_clear(&job->progress);
            if (write_batch(job, &out) != 0) rc = 1;
            first += job->pending;
            memset(job->skipped, 0, job->pending);
            job->pending = 0;
            job->reset(job);
            if (rc != 0) break;
            cli_progress_update(&job->progress, first, bytes);
        }
        if (said_later) {
            cli_progress_clear(&job->progress);
            fprintf(stderr, PROG ": %s; %s\n", err, skip_note(job));
        }
        if (stop) cli_progress_clear(&job->progress);
        if (stop && got < 0)
            fprintf(stderr, PROG ": error reading %s: %s\n", job->in_name, strerror(read_errno));
        else if (stop && too_long)
            long_line_stop(job, err);
        else if (stop)
            fprintf(stderr, PROG ": %s\n", err);
        rc |= stop;
        if (stop || got == 0) break;
    }
    cli_progress_clear(&job->progress);
    free(out.p);
    return rc;
}

/* ======================================================================== */
/* Shared by the subcommands                                                */
/* ======================================================================== */

void append_text(strbuf *out, const char *s, size_t n) {
    grow((void **)&out->p, &out->cap, out->len + n + 1, 1);
    for (size_t i = 0; i < n; i++) out->p[out->len + i] = (s[i] == '\n' || s[i] == '\r') ? ' ' : s[i];
    out->len += n;
    out->p[out->len] = '\0';
}

static void append_ids(strbuf *out, const int32_t *ids, uint32_t n) {
    for (uint32_t k = 0; k < n; k++) sb_printf(out, k ? " %d" : "%d", (int)ids[k]);
}

/* Sentences [lo, lo + n) of q as a library batch. */
static nmt_batch seq_view(seq_buf *q, uint32_t lo, uint32_t n) {
    cli_seqs_ptrs(q);
    nmt_batch b = {.tokens = q->ptrs + lo, .lens = q->lens + lo, .n = n};
    return b;
}

static nmt_text_batch text_view(cli_texts *q, uint32_t lo, uint32_t n) {
    cli_texts_ptrs(q);
    nmt_text_batch b = {.text = q->ptrs + lo, .lens = q->lens + lo, .n = n};
    return b;
}

/* Drop the last sentence of q. */
static void seqs_pop(seq_buf *q) {
    q->n--;
    q->n_ids = q->start[q->n];
}

/* The vocabulary and length rules of a live session for one side. */
static side_rule session_rule(const runtime *rt, int target) {
    nmt_model_info mi;
    nmt_limits lim;
    nmt_session_model_info(rt->s, &mi);
    nmt_session_limits(rt->s, &lim);
    uint32_t limit = target ? lim.max_tgt_len : lim.max_src_len;
    side_rule r = {
        .side = target ? "target" : "source",
        .vocab = target ? mi.tgt_vocab : mi.src_vocab,
        .max_tokens = limit,
    };
    snprintf(r.limit_hint, sizeof r.limit_hint, "%s %u%s", target ? "target limit" : "--max-src-len",
             limit, target ? "; see --max-len" : "");
    return r;
}

/* Text mode: the session's model embeds a tokenizer and --ids is not given. */
static int text_mode(const cli_opts *o, const runtime *rt) {
    return !o->ids && nmt_session_tokenizer(rt->s, 0) != NULL;
}

/* The session's --max-text-bytes. */
static uint32_t text_limit(const runtime *rt) {
    nmt_limits lim;
    nmt_session_limits(rt->s, &lim);
    return lim.max_text_bytes;
}

/* "line N is longer than the limits: SIDE sentence has LEN bytes, ...". */
static void text_bytes_long(const runtime *rt, const side_rule *r, uint64_t len, unsigned long line_no,
                            char *err, size_t cap) {
    const uint32_t limit = text_limit(rt);
    snprintf(err, cap,
             "line %lu is longer than the limits: %s sentence has %llu bytes, more than the "
             "limit of %u (--max-text-bytes %u)",
             line_no, r->side, (unsigned long long)len, limit, limit);
}

/* Why a text sentence is over the session's limits on one side: 1 and
 * "line N is longer than the limits: ..." in err, or 0 when it is not. */
static int text_over_limits(const runtime *rt, int target, const side_rule *r, const char *s,
                            size_t len, unsigned long line_no, char *err, size_t cap) {
    if (len > text_limit(rt)) {
        text_bytes_long(rt, r, len, line_no, err, cap);
        return 1;
    }
    nmt_tokenizer *tok = nmt_session_tokenizer(rt->s, target);
    const int32_t *ids;
    uint32_t n;
    if (tok == NULL || nmt_tokenizer_encode(tok, s, len, &ids, &n) != NMT_OK || n <= r->max_tokens)
        return 0;
    snprintf(err, cap,
             "line %lu is longer than the limits: %s sentence has %u tokens, more than the limit "
             "of %u (%s)",
             line_no, r->side, n, r->max_tokens, r->limit_hint);
    return 1;
}

static void generic_long(unsigned long line_no, char *err, size_t cap) {
    snprintf(err, cap, "line %lu is longer than the limits", line_no);
}

/* ======================================================================== */
/* translate                                                                */
/* ======================================================================== */

/* --spans FILE: the phrase spans of every input line, read at the start
 * (tools/spans_file.h), handed to each call (nmt_session_set_spans). */
typedef struct cli_spans {
    tsp_file *f;              /* NULL: no --spans */
    const nmt_span **ptrs;    /* (batch) */
    uint32_t *n;              /* (batch) */
} cli_spans;

static int spans_open(cli_spans *c, const char *path, size_t batch) {
    memset(c, 0, sizeof *c);
    if (path == NULL) return 0;
    char err[512] = "";
    const nmt_status st = tsp_read(path, &c->f, err, sizeof err);
    if (st != NMT_OK) {
        fprintf(stderr, PROG ": --spans: %s\n", *err ? err : nmt_status_str(st));
        return 1;
    }
    c->ptrs = xrealloc(NULL, batch * sizeof *c->ptrs);
    c->n = xrealloc(NULL, batch * sizeof *c->n);
    return 0;
}

/* The spans of the call's sentences (slots batch_slot(job, lo, k) of the
 * lines from line0) for the next call; without --spans nothing (the caller
 * may parse text instead). */
static nmt_status spans_set(cli_spans *c, nmt_session *s, const batch_job *job, unsigned long line0, uint32_t lo,
                            uint32_t n) {
    for (uint32_t k = 0; k < n; k++) {
        const uint8_t *labels;
        tsp_line(c->f, line0 + batch_slot(job, lo, k), &c->ptrs[k], &labels, &c->n[k]);
    }
    return nmt_session_set_spans(s, c->ptrs, c->n, n);
}

/* A spans file with another line count than the input: a warning. */
static void spans_close(cli_spans *c, const char *path, unsigned long lines) {
    if (path != NULL && c->f != NULL && tsp_lines(c->f) != lines) /* path NULL: the run failed, say nothing */
        fprintf(stderr, PROG ": warning: --spans '%s' has %llu lines, the input %lu\n", path,
                (unsigned long long)tsp_lines(c->f), lines);
    tsp_free(c->f);
    free(c->ptrs);
    free(c->n);
}

typedef struct translate_job {
    batch_job base;
    runtime *rt;
    nmt_decode_opts dopts;
    side_rule src_rule;
    int text;             /* the model's tokenizer reads and writes text */
    int with_score;       /* --with-score */
    seq_buf src;
    cli_texts src_text;
    uint32_t lo;          /* first sentence of the last call */
    cli_align align;      /* --alignment */
    unsigned long line0;  /* 0-based input line of the batch's first sentence */
    int format;           /* CLI_FORMAT_* */
    unsigned long long seed; /* --seed: line L samples with seed + L */
    const char *prefix_path; /* --prefix-file, NULL: none */
    cli_prefix prefix;
    float *token_lp;      /* (max_tgt_len + 1) --format jsonl */
    int32_t *tokens;      /* (max_tgt_len + 1) --format jsonl: a hypothesis's ids, then EOS */
    int32_t eos_id;       /* the target end-of-sentence id */
    int with_pieces;      /* --with-pieces */
    const char **pieces;  /* (max_tgt_len + 1) --with-pieces */
    size_t *piece_lens;   /* (max_tgt_len + 1) */
    uint64_t tokens_out;  /* target tokens of the best translations written (the summary) */
    strbuf scratch;       /* --format jsonl: the ids text, the alignment */
    nmt_syntax_spans syn; /* MG-SA syntax heads: link-grammar spans of text input (tools/parse_spans.h) */
    cli_spans spans;      /* --spans FILE */
    int stream;           /* --stream on a terminal: each sentence drawn as it is decoded */
    char *stream_buf;     /* the partial text */
    size_t stream_cap;
    /* --batch-tokens: a call's sentences gathered in planned order, (batch) each */
    const char **g_text;
    size_t *g_text_len;
    const int32_t **g_ids;
    uint32_t *g_lens;
    const char **g_ptext;   /* their --prefix-file lines */
    size_t *g_ptext_len;
    const int32_t **g_pids;
    uint32_t *g_plens;
} translate_job;

/* --stream: after each decoding step, sentence 0's best hypothesis so far
 * (nmt_session_partial), detokenized, redrawn on the terminal line; the
 * final text replaces it (translate_append).  Streaming never changes the
 * output: the batch is one sentence and the final line is the result. */
static int stream_step(void *user, const nmt_session *s, uint32_t step) {
    translate_job *t = user;
    const int32_t *ids;
    uint32_t n;
    int done;
    (void)step;
    if (nmt_session_partial(s, 0, &ids, &n, &done) != NMT_OK) return 0;
    size_t len = 0;
    const nmt_tokenizer *tok = nmt_session_tokenizer(s, 1);
    if (tok == NULL) { /* ids */
        t->scratch.len = 0;
        append_ids(&t->scratch, ids, n);
        len = t->scratch.len;
        if (len + 1 > t->stream_cap) t->stream_buf = xrealloc(t->stream_buf, t->stream_cap = len + 1);
        if (len) memcpy(t->stream_buf, t->scratch.p, len);
    } else if (nmt_tokenizer_decode(tok, ids, n, t->stream_buf, t->stream_cap, &len) == NMT_ERR_BUFFER_TOO_SMALL) {
        t->stream_buf = xrealloc(t->stream_buf, t->stream_cap = len + 1);
        if (nmt_tokenizer_decode(tok, ids, n, t->stream_buf, t->stream_cap, &len) != NMT_OK) return 0;
    }
    static const char clear[] = "\r\033[K";
    if (write(t->base.out_fd, clear, sizeof clear - 1) < 0) return 0; /* the final write reports errors */
    for (size_t k = 0; k < len; k++) /* one line: control bytes (a newline in a piece) as spaces */
        if ((unsigned char)t->stream_buf[k] < 0x20) t->stream_buf[k] = ' ';
    if (len && write(t->base.out_fd, t->stream_buf, len) < 0) return 0;
    return 0;
}

/* Line line_no has no --prefix-file line: 1 with the message. */
static int prefix_missing(const translate_job *t, unsigned long line_no, char *err, size_t cap) {
    if (t->prefix_path == NULL || line_no <= t->prefix.n) return 0;
    snprintf(err, cap, "line %lu: --prefix-file '%s' has only %lu line%s", line_no, t->prefix_path, t->prefix.n,
             t->prefix.n == 1 ? "" : "s");
    return 1;
}

static int translate_parse(batch_job *job, const char *line, size_t len, unsigned long line_no,
                           char *err, size_t cap) {
    translate_job *t = (translate_job *)job;
    if (prefix_missing(t, line_no, err, cap)) return LINE_BAD;
    if (t->text) {
        cli_texts_add(&t->src_text, line, len);
        return LINE_OK;
    }
    int rc = cli_parse_ids(line, line + len, line_no, &t->src_rule, &t->src, err, cap);
    if (rc != 2) return rc == 0 ? LINE_OK : LINE_BAD;
    char unused[8];
    cli_parse_ids(line, line, line_no, &t->src_rule, &t->src, unused, sizeof unused);
    return LINE_LONG;
}

/* Text mode: a line longer than --max-text-bytes (+ 1 for a CR), cut. */
static int translate_parse_cut(batch_job *job, const char *head, size_t head_len, uint64_t len,
                               const cli_cut *cut, unsigned long line_no, char *err, size_t cap) {
    translate_job *t = (translate_job *)job;
    (void)head, (void)head_len, (void)cut;
    if (prefix_missing(t, line_no, err, cap)) return LINE_BAD;
    cli_texts_add(&t->src_text, "", 0);
    text_bytes_long(t->rt, &t->src_rule, len, line_no, err, cap);
    return LINE_LONG;
}

static void translate_reset(batch_job *job) {
    translate_job *t = (translate_job *)job;
    t->line0 += t->text ? t->src_text.n : t->src.n; /* every line of the batch had a slot */
    cli_seqs_reset(&t->src);
    cli_texts_reset(&t->src_text);
}

/* --batch-tokens: the sources (and prefixes) of the call's slots
 * order[lo .. lo + n - 1] gathered into t's arrays, in that order. */
static void translate_gather(translate_job *t, uint32_t lo, uint32_t n, nmt_decode_opts *o) {
    const batch_job *job = &t->base;
    if (t->text) cli_texts_ptrs(&t->src_text);
    else cli_seqs_ptrs(&t->src);
    for (uint32_t k = 0; k < n; k++) {
        const uint32_t slot = batch_slot(job, lo, k);
        const unsigned long line = t->line0 + slot;
        if (t->text) {
            t->g_text[k] = t->src_text.ptrs[slot];
            t->g_text_len[k] = t->src_text.lens[slot];
        } else {
            t->g_ids[k] = t->src.ptrs[slot];
            t->g_lens[k] = t->src.lens[slot];
        }
        if (t->prefix_path != NULL && t->text) {
            t->g_ptext[k] = t->prefix.text.ptrs[line];
            t->g_ptext_len[k] = t->prefix.text.lens[line];
        } else if (t->prefix_path != NULL) {
            t->g_pids[k] = t->prefix.id_ptrs[line];
            t->g_plens[k] = t->prefix.id_lens[line];
        }
    }
    if (t->prefix_path != NULL && t->text) {
        o->prefix_text = t->g_ptext;
        o->prefix_text_len = t->g_ptext_len;
    } else if (t->prefix_path != NULL) {
        o->prefix = t->g_pids;
        o->prefix_len = t->g_plens;
    }
}

/* Token batches: slot i's source tokens (its text encoded as the call will). */
static uint32_t translate_length(batch_job *job, uint32_t i) {
    translate_job *t = (translate_job *)job;
    if (!t->text) return t->src.lens[i];
    const int32_t *ids;
    uint32_t n = 0;
    nmt_tokenizer *tok = nmt_session_tokenizer(t->rt->s, 0);
    if (nmt_tokenizer_encode(tok, t->src_text.bytes + t->src_text.start[i], t->src_text.lens[i], &ids, &n) != NMT_OK)
        return 0; /* the call says why */
    return n;
}

static nmt_status translate_call(batch_job *job, uint32_t lo, uint32_t n) {
    translate_job *t = (translate_job *)job;
    t->lo = lo;
    nmt_decode_opts o = t->dopts;
    const unsigned long first = t->line0 + lo; /* input line of sentence lo (sentence batches) */
    o.seed = t->seed + first; /* --sampling has no token batches: cli_decode_check */
    if (job->order != NULL) {
        translate_gather(t, lo, n, &o);
    } else if (t->prefix_path != NULL && t->text) {
        o.prefix_text = t->prefix.text.ptrs + first;
        o.prefix_text_len = t->prefix.text.lens + first;
    } else if (t->prefix_path != NULL) {
        o.prefix = t->prefix.id_ptrs + first;
        o.prefix_len = t->prefix.id_lens + first;
    }
    if (t->stream) {
        o.on_step = stream_step;
        o.step_user = t;
    }
    if (t->spans.f != NULL) { /* --spans: the file's, for text and ids alike */
        const nmt_status st = spans_set(&t->spans, t->rt->s, job, t->line0, lo, n);
        if (st != NMT_OK) return st;
    }
    if (t->text) {
        nmt_text_batch b = text_view(&t->src_text, lo, n);
        if (job->order != NULL) b.text = t->g_text, b.lens = t->g_text_len;
        if (t->spans.f == NULL) {
            const nmt_status st = nmt_syntax_set(&t->syn, t->rt->s, b.text, b.lens, n);
            if (st != NMT_OK) return st;
        }
        return nmt_session_translate_text(t->rt->s, &b, &o);
    }
    nmt_batch b = job->order != NULL ? (nmt_batch){.tokens = t->g_ids, .lens = t->g_lens, .n = n}
                                     : seq_view(&t->src, lo, n);
    return nmt_session_translate(t->rt->s, &b, &o);
}

/* --format jsonl: hypothesis r of result i (its text when t->text) as one
 * JSON object (cli_json_append): tokens, token_logprobs and (--with-pieces)
 * pieces end with the end-of-sentence; the alignment as a JSON array. */
static int translate_json(translate_job *t, uint32_t i, uint32_t r, unsigned long index, const char *text,
                          size_t text_len, float score, float logprob, strbuf *out) {
    const int32_t *ids;
    uint32_t len, n_lp;
    nmt_status st = nmt_session_result(t->rt->s, i, r, &ids, &len, NULL, NULL);
    if (st == NMT_OK) st = nmt_session_result_token_logprobs(t->rt->s, i, r, t->token_lp, (size_t)len + 1, &n_lp);
    if (st == NMT_OK && n_lp != len + 1) st = NMT_ERR_INVALID_ARGUMENT; /* cannot happen: documented */
    if (st != NMT_OK) return report_status("reading a translation failed", st, t->rt);
    memcpy(t->tokens, ids, sizeof *ids * len);
    t->tokens[len] = t->eos_id;
    const nmt_tokenizer *tok = t->with_pieces ? nmt_session_tokenizer(t->rt->s, 1) : NULL;
    for (uint32_t k = 0; tok != NULL && k <= len; k++)
        if (nmt_tokenizer_piece(tok, t->tokens[k], &t->pieces[k], &t->piece_lens[k]) != NMT_OK) t->pieces[k] = NULL;
    t->scratch.len = 0;
    if (!t->text) append_ids(&t->scratch, ids, len); /* the text is what the text format prints: the ids */
    const size_t text_at = t->scratch.len;
    if (t->align.mode != CLI_ALIGN_NONE) {
        const uint32_t k = batch_slot(&t->base, t->lo, i);
        if (cli_align_json(&t->align, t->rt, i, r, t->text ? t->src_text.ptrs[k] : NULL,
                           t->text ? t->src_text.lens[k] : 0, &t->scratch) != 0)
            return 1;
    }
    if (!t->text) { /* scratch may have moved */
        text = t->scratch.p ? t->scratch.p : "";
        text_len = text_at;
    }
    const cli_json_hyp h = {.line = index, .rank = r, .text = text, .text_len = text_len, .tokens = t->tokens,
                            .n_tokens = len + 1, .score = score, .logprob = logprob, .token_lp = t->token_lp,
                            .alignment = t->align.mode != CLI_ALIGN_NONE ? t->scratch.p + text_at : NULL,
                            .alignment_len = t->scratch.len - text_at,
                            .pieces = tok != NULL ? t->pieces : NULL, .piece_lens = t->piece_lens};
    cli_json_append(out, &h);
    return 0;
}

/* The hypotheses of result i: one line, or with --n-best N > 1 up to N
 * lines "INDEX ||| TEXT ||| SCORE[ ||| ALIGNMENT]"; --with-score: "SCORE
 * ||| TEXT"; --format marian: Marian's n-best lines "INDEX ||| TEXT[ |||
 * ALIGNMENT] ||| F0= LOGPROB ||| SCORE"; --format jsonl: JSON objects. */
static int translate_append(batch_job *job, uint32_t i, unsigned long index, strbuf *out) {
    translate_job *t = (translate_job *)job;
    for (uint32_t r = 0; r < t->dopts.n_best; r++) {
        const int32_t *ids = NULL;
        const char *text = NULL;
        size_t text_len = 0;
        uint32_t len = 0;
        float score, logprob;
        nmt_status st;
        if (t->text) st = nmt_session_result_text(t->rt->s, i, r, &text, &text_len, &score, &logprob);
        else st = nmt_session_result(t->rt->s, i, r, &ids, &len, &score, &logprob);
        /* the search may finish fewer than n_best hypotheses; print those */
        if (st == NMT_ERR_INVALID_ARGUMENT && r > 0) break;
        if (st == NMT_OK && r == 0) st = nmt_session_result(t->rt->s, i, 0, &ids, &len, NULL, NULL);
        if (st != NMT_OK) return report_status("reading a translation failed", st, t->rt);
        if (r == 0) t->tokens_out += len; /* the summary counts the best translations' tokens */
        if (t->format == CLI_FORMAT_JSONL) {
            if (translate_json(t, i, r, index, text, text_len, score, logprob, out) != 0) return 1;
            continue;
        }
        const int marian = t->format == CLI_FORMAT_MARIAN;
        if (t->stream) sb_printf(out, "\r\033[K"); /* the final text replaces the partial one */
        if (t->dopts.n_best > 1 || marian) sb_printf(out, "%lu ||| ", index);
        else if (t->with_score) sb_printf(out, "%.6f ||| ", (double)score);
        if (t->text) append_text(out, text, text_len);
        else append_ids(out, ids, len);
        if (t->dopts.n_best > 1 && !marian) sb_printf(out, " ||| %.6f", (double)score);
        if (t->align.mode != CLI_ALIGN_NONE) {
            const uint32_t k = batch_slot(&t->base, t->lo, i); /* the source of result i */
            const char *stext = t->text ? t->src_text.ptrs[k] : NULL;
            const size_t slen = t->text ? t->src_text.lens[k] : 0;
            if (cli_align_append(&t->align, t->rt, i, r, stext, slen, NULL, 0, out) != 0) return 1;
        }
        if (marian) sb_printf(out, " ||| F0= %.6f ||| %.6f", (double)logprob, (double)score);
        sb_printf(out, "\n");
    }
    return 0;
}

static void translate_why_long(batch_job *job, uint32_t i, unsigned long line_no, char *err,
                               size_t cap) {
    translate_job *t = (translate_job *)job;
    if (!t->text || !text_over_limits(t->rt, 0, &t->src_rule, t->src_text.ptrs[i], t->src_text.lens[i],
                                      line_no, err, cap))
        generic_long(line_no, err, cap);
}

int cmd_translate(const cli_opts *o) {
    runtime rt = {0};
    translate_job t = {
        .base = {.parse = translate_parse, .call = translate_call, .append = translate_append,
                 .length = translate_length,
                 .why_long = translate_why_long, .reset = translate_reset,
                 .what = "translation failed", .rt = &rt, .show_progress = 1, .show_summary = 1, .can_skip = 1,
                 .blank_skipped = o->n_best == 1 && cli_format(o) == CLI_FORMAT_TEXT},
        .rt = &rt,
        .dopts = {.beam = (uint32_t)o->beam, .alpha = (float)o->alpha, .alpha_set = 1,
                  .max_len = (uint32_t)o->max_len, .n_best = (uint32_t)o->n_best,
                  .min_len = (uint32_t)o->min_len, .no_repeat_ngram = (uint32_t)o->no_repeat_ngram,
                  .max_len_a = (float)o->max_len_a, .max_len_b = (float)o->max_len_b,
                  .coverage_penalty = (float)o->coverage_penalty, .repetition_penalty = (float)o->repetition_penalty,
                  .sampling = o->sampling != NULL, .sampling_topk = (uint32_t)o->sampling_topk,
                  .sampling_temperature = (float)o->temperature},
        .with_score = o->with_score,
        .with_pieces = o->with_pieces,
        .format = cli_format(o),
        .seed = o->seed_value,
        .prefix_path = o->prefix_file,
    };
    /* --stream draws on a terminal only, one sentence at a time, text lines */
    t.stream = o->stream && o->output == NULL && isatty(STDOUT_FILENO) && t.format == CLI_FORMAT_TEXT &&
               o->n_best == 1 && !o->with_score && o->alignment == NULL;
    cli_opts one;
    if (t.stream) {
        one = *o;
        one.batch = 1;
        one.batch_tokens = 0; /* one line at a time, as typed */
        t.base.show_progress = 0;
        o = &one; /* only the batch differs; read below through o */
    }
    int rc = batch_open(&t.base, o);
    if (rc == 0) rc = open_session(o, o->beam, &rt);
    if (rc == 0) {
        t.src_rule = session_rule(&rt, 0);
        t.base.length_limit = t.src_rule.max_tokens; /* token batches: a longer line runs alone */
        t.text = text_mode(o, &rt);
        if (t.text) { /* longer lines are cut as they are read (cli_input.h) */
            t.base.parse_cut = translate_parse_cut;
            t.base.line_limit = text_limit(&rt);
        }
        if (t.text) nmt_syntax_open(&t.syn, rt.s, PROG);
        cli_seqs_init(&t.src, t.base.window); /* every pending line has a slot */
        cli_texts_init(&t.src_text, t.base.window);
        const size_t nb = (size_t)o->batch; /* --batch-tokens: a call's sentences in planned order */
        t.g_text = xrealloc(NULL, nb * sizeof *t.g_text);
        t.g_text_len = xrealloc(NULL, nb * sizeof *t.g_text_len);
        t.g_ids = xrealloc(NULL, nb * sizeof *t.g_ids);
        t.g_lens = xrealloc(NULL, nb * sizeof *t.g_lens);
        t.g_ptext = xrealloc(NULL, nb * sizeof *t.g_ptext);
        t.g_ptext_len = xrealloc(NULL, nb * sizeof *t.g_ptext_len);
        t.g_pids = xrealloc(NULL, nb * sizeof *t.g_pids);
        t.g_plens = xrealloc(NULL, nb * sizeof *t.g_plens);
        rc = cli_align_init(&t.align, o, &rt);
        nmt_limits lim;
        nmt_session_limits(rt.s, &lim);
        t.token_lp = xrealloc(NULL, sizeof(float) * ((size_t)lim.max_tgt_len + 1));
        t.tokens = xrealloc(NULL, sizeof(int32_t) * ((size_t)lim.max_tgt_len + 1));
        t.pieces = xrealloc(NULL, sizeof(const char *) * ((size_t)lim.max_tgt_len + 1));
        t.piece_lens = xrealloc(NULL, sizeof(size_t) * ((size_t)lim.max_tgt_len + 1));
        nmt_model_info mi;
        nmt_session_model_info(rt.s, &mi);
        t.eos_id = (int32_t)mi.eos_id;
        if (rc == 0 && t.with_pieces && nmt_session_tokenizer(rt.s, 1) == NULL) {
            fprintf(stderr, PROG ": --with-pieces needs a model with an embedded tokenizer; '%s' has none\n",
                    o->model);
            rc = 1;
        }
        if (rc == 0 && t.prefix_path != NULL)
            rc = cli_prefix_load(&t.prefix, t.prefix_path, !t.text, session_rule(&rt, 1).vocab);
        if (rc == 0) rc = spans_open(&t.spans, o->spans_file, (size_t)o->batch);
        if (rc == 0) rc = process_lines(&t.base);
        if (rc == 0 && t.prefix_path != NULL && t.line0 < t.prefix.n)
            fprintf(stderr, PROG ": warning: --prefix-file '%s' has %lu lines, the input %lu: the rest are unused\n",
                    t.prefix_path, t.prefix.n, t.line0);
        nmt_syntax_close(&t.syn, PROG);
        if (rc == 0) spans_close(&t.spans, o->spans_file, t.line0);
        else spans_close(&t.spans, NULL, 0);
        cli_prefix_free(&t.prefix);
        free(t.token_lp);
        free(t.tokens);
        free(t.pieces);
        free(t.piece_lens);
        free(t.scratch.p);
        free(t.stream_buf);
        free(t.g_text);
        free(t.g_text_len);
        free(t.g_ids);
        free(t.g_lens);
        free(t.g_ptext);
        free(t.g_ptext_len);
        free(t.g_pids);
        free(t.g_plens);
        cli_align_free(&t.align);
        cli_seqs_free(&t.src);
        cli_texts_free(&t.src_text);
    }
    close_runtime(&rt);
    rc = batch_close(&t.base, rc);
    if (rc == 0) cli_progress_finish(&t.base.progress, t.line0, t.tokens_out);
    return rc;
}

/* ======================================================================== */
/* score                                                                    */
/* ======================================================================== */

typedef struct score_job {
    batch_job base;
    runtime *rt;
    side_rule rules[2];   /* source, target */
    int text;
    seq_buf seqs[2];
    cli_texts texts[2];
    float *logprob;       /* (batch) of the last call */
    uint32_t lo;          /* first pair of the last call */
    cli_align align;      /* --alignment */
    unsigned long line0;  /* 0-based input line of the batch's first pair */
    cli_spans spans;      /* --spans FILE */
    nmt_syntax_spans syn; /* MG-SA syntax heads: link-grammar spans of text input, as translate's */
} score_job;

static int score_parse(batch_job *job, const char *line, size_t len, unsigned long line_no,
                       char *err, size_t cap) {
    score_job *sj = (score_job *)job;
    size_t tab;
    if (cli_split_pair(line, len, line_no, &tab, err, cap) != 0) return LINE_BAD;
    if (sj->text) {
        cli_texts_add(&sj->texts[0], line, tab);
        cli_texts_add(&sj->texts[1], line + tab + 1, len - tab - 1);
        return LINE_OK;
    }
    char tgt_err[256];
    int a = cli_parse_ids(line, line + tab, line_no, &sj->rules[0], &sj->seqs[0], err, cap);
    if (a == 1) return LINE_BAD;
    int b = cli_parse_ids(line + tab + 1, line + len, line_no, &sj->rules[1], &sj->seqs[1], tgt_err,
                          sizeof tgt_err);
    if (b == 1 || (b == 2 && a == 0)) snprintf(err, cap, "%s", tgt_err);
    if (a == 0 && b == 0) return LINE_OK;
    if (a == 0) seqs_pop(&sj->seqs[0]);
    if (b == 0) seqs_pop(&sj->seqs[1]);
    if (b == 1) return LINE_BAD;
    /* over the limits: empty placeholders keep both sides aligned */
    for (int k = 0; k < 2; k++)
        cli_parse_ids(line, line, line_no, &sj->rules[k], &sj->seqs[k], tgt_err, sizeof tgt_err);
    return LINE_LONG;
}

/* Text mode: a pair longer than twice --max-text-bytes + 1 (+ 1 for a
 * CR), cut: the message of the whole line (cli_split_pair's, or the first
 * side over the limits, the source's tokens counted from the kept bytes). */
static int score_parse_cut(batch_job *job, const char *head, size_t head_len, uint64_t len,
                           const cli_cut *cut, unsigned long line_no, char *err, size_t cap) {
    score_job *sj = (score_job *)job;
    if (cut->tabs != 1) {
        cli_pair_error(line_no, err, cap);
        return LINE_BAD;
    }
    const uint64_t src_len = cut->first_tab, tgt_len = len - cut->first_tab - 1;
    const uint32_t limit = text_limit(sj->rt);
    if (src_len > limit) text_bytes_long(sj->rt, &sj->rules[0], src_len, line_no, err, cap);
    else if (src_len >= head_len ||
             !text_over_limits(sj->rt, 0, &sj->rules[0], head, (size_t)src_len, line_no, err, cap))
        text_bytes_long(sj->rt, &sj->rules[1], tgt_len, line_no, err, cap); /* then the target is over */
    for (int k = 0; k < 2; k++) cli_texts_add(&sj->texts[k], "", 0);
    return LINE_LONG;
}

static void score_reset(batch_job *job) {
    score_job *sj = (score_job *)job;
    sj->line0 += sj->text ? sj->texts[0].n : sj->seqs[0].n; /* every line of the batch had a slot */
    for (int k = 0; k < 2; k++) {
        cli_seqs_reset(&sj->seqs[k]);
        cli_texts_reset(&sj->texts[k]);
    }
}

static nmt_status score_call(batch_job *job, uint32_t lo, uint32_t n) {
    score_job *sj = (score_job *)job;
    sj->lo = lo;
    if (sj->spans.f != NULL) {
        const nmt_status st = spans_set(&sj->spans, sj->rt->s, job, sj->line0, lo, n);
        if (st != NMT_OK) return st;
    }
    if (sj->text) {
        nmt_text_batch src = text_view(&sj->texts[0], lo, n), tgt = text_view(&sj->texts[1], lo, n);
        if (sj->spans.f == NULL) { /* the spans translate would parse for these sources */
            const nmt_status st = nmt_syntax_set(&sj->syn, sj->rt->s, src.text, src.lens, n);
            if (st != NMT_OK) return st;
        }
        return nmt_session_score_text(sj->rt->s, &src, &tgt, sj->logprob);
    }
    nmt_batch src = seq_view(&sj->seqs[0], lo, n), tgt = seq_view(&sj->seqs[1], lo, n);
    return nmt_session_score(sj->rt->s, &src, &tgt, sj->logprob);
}

/* "LOGPROB", with --alignment "LOGPROB ||| ALIGNMENT" (the pair's, under
 * teacher forcing). */
static int score_append(batch_job *job, uint32_t i, unsigned long index, strbuf *out) {
    (void)index;
    score_job *sj = (score_job *)job;
    sb_printf(out, "%.6f", (double)sj->logprob[i]);
    if (sj->align.mode != CLI_ALIGN_NONE) {
        const uint32_t k = sj->lo + i; /* the pair of result i */
        const int t = sj->text;
        if (cli_align_append(&sj->align, sj->rt, i, 0, t ? sj->texts[0].ptrs[k] : NULL, t ? sj->texts[0].lens[k] : 0,
                             t ? sj->texts[1].ptrs[k] : NULL, t ? sj->texts[1].lens[k] : 0, out) != 0)
            return 1;
    }
    sb_printf(out, "\n");
    return 0;
}

static void score_why_long(batch_job *job, uint32_t i, unsigned long line_no, char *err, size_t cap) {
    score_job *sj = (score_job *)job;
    for (int k = 0; k < 2 && sj->text; k++)
        if (text_over_limits(sj->rt, k, &sj->rules[k], sj->texts[k].ptrs[i], sj->texts[k].lens[i],
                             line_no, err, cap))
            return;
    generic_long(line_no, err, cap);
}

int cmd_score(const cli_opts *o) {
    runtime rt = {0};
    score_job sj = {
        .base = {.parse = score_parse, .call = score_call, .append = score_append,
                 .why_long = score_why_long, .reset = score_reset, .what = "scoring failed",
                 .rt = &rt, .blank_skipped = 1, .show_progress = 1, .can_skip = 1},
        .rt = &rt,
    };
    int rc = batch_open(&sj.base, o);
    if (rc == 0) rc = open_session(o, 1, &rt);
    if (rc == 0) {
        sj.text = text_mode(o, &rt);
        if (sj.text) { /* longer lines are cut as they are read (cli_input.h) */
            sj.base.parse_cut = score_parse_cut;
            sj.base.line_limit = 2 * (size_t)text_limit(&rt) + 1;
        }
        for (int k = 0; k < 2; k++) {
            sj.rules[k] = session_rule(&rt, k);
            cli_seqs_init(&sj.seqs[k], (size_t)o->batch);
            cli_texts_init(&sj.texts[k], (size_t)o->batch);
        }
        sj.logprob = xrealloc(NULL, (size_t)o->batch * sizeof *sj.logprob);
        if (sj.text) nmt_syntax_open(&sj.syn, rt.s, PROG);
        rc = cli_align_init(&sj.align, o, &rt);
        if (rc == 0) rc = spans_open(&sj.spans, o->spans_file, (size_t)o->batch);
        if (rc == 0) rc = process_lines(&sj.base);
        if (rc == 0) spans_close(&sj.spans, o->spans_file, sj.line0);
        else spans_close(&sj.spans, NULL, 0);
        nmt_syntax_close(&sj.syn, PROG);
        cli_align_free(&sj.align);
        for (int k = 0; k < 2; k++) {
            cli_seqs_free(&sj.seqs[k]);
            cli_texts_free(&sj.texts[k]);
        }
        free(sj.logprob);
    }
    close_runtime(&rt);
    return batch_close(&sj.base, rc);
}
