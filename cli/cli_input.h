/* SPDX-License-Identifier: MIT */
/* cli_input.h — the nmt-edge program's input parsing, apart from the rest
 * of the CLI so that a fuzzer (tests/fuzz/fuzz_cli_input.c) can drive it.
 * Part of the program, not of the library: it may allocate (growth failure
 * exits the program with a message, as the CLI does everywhere).
 *
 * Input contract: one sentence per line; CR LF and LF line ends; lines of
 * any length, but a reader given a limit (text mode: --max-text-bytes)
 * keeps only the first bytes of a longer line and counts the rest (issue
 * 55: memory stays bounded by the limit, not by the input).  Id mode:
 * whitespace-separated non-negative decimal ids.
 * Text mode: the line's bytes are the sentence (any bytes but '\n').  Score
 * lines are SOURCE<TAB>TARGET with exactly one TAB. */
#ifndef NMT_CLI_INPUT_H
#define NMT_CLI_INPUT_H

#include <stddef.h>
#include <stdint.h>

void *cli_xrealloc(void *p, size_t n);

/* Grow *p (elements of `elem` bytes, capacity *cap) to hold at least `need`. */
void cli_grow(void **p, size_t *cap, size_t need, size_t elem);

/* Token ids of up to `batch` sentences, stored back to back. */
typedef struct cli_seqs {
    int32_t *ids;
    size_t n_ids, cap_ids;
    size_t *start;          /* (batch) offset of each sentence in ids */
    uint32_t *lens;         /* (batch) */
    const int32_t **ptrs;   /* (batch) filled by cli_seqs_ptrs() */
    uint32_t n;
} cli_seqs;

void cli_seqs_init(cli_seqs *q, size_t batch);
void cli_seqs_free(cli_seqs *q);
void cli_seqs_reset(cli_seqs *q);
/* Point ptrs[i] at sentence i (after the last append, ids no longer move). */
void cli_seqs_ptrs(cli_seqs *q);

/* Text sentences of up to `batch` lines, stored back to back. */
typedef struct cli_texts {
    char *bytes;
    size_t n_bytes, cap_bytes;
    size_t *start;          /* (batch) */
    size_t *lens;           /* (batch) */
    const char **ptrs;      /* (batch) filled by cli_texts_ptrs() */
    uint32_t n;
} cli_texts;

void cli_texts_init(cli_texts *q, size_t batch);
void cli_texts_free(cli_texts *q);
void cli_texts_reset(cli_texts *q);
void cli_texts_add(cli_texts *q, const char *s, size_t n);
void cli_texts_ptrs(cli_texts *q);

/* What a sentence of ids on one side must satisfy. */
typedef struct cli_side_rule {
    const char *side;       /* "source" / "target" */
    uint32_t vocab;         /* ids must be < vocab */
    uint32_t max_tokens;    /* tokens allowed, EOS excluded */
    char limit_hint[96];    /* which option sets max_tokens */
} cli_side_rule;

/* Parse [p, end) as one sentence of ids into q (q must have room for one
 * more sentence).  0 on success; otherwise a one-line message (no newline,
 * "line N: ...") in err[0, cap), q unchanged but for spare ids, and 2 when
 * the sentence is well-formed but over max_tokens, else 1. */
int cli_parse_ids(const char *p, const char *end, unsigned long line, const cli_side_rule *r,
                  cli_seqs *q, char *err, size_t cap);

/* What the reader saw of a line it cut (cli_reader_line returned 2): every
 * byte was scanned, none past the first limit + 1 kept. */
typedef struct cli_cut {
    uint64_t len;           /* bytes before its "\n" (a CR before it included) */
    int nl;                 /* it ended with "\n" (else the input ended) */
    int cr;                 /* its last byte before the "\n" (or the end) is a CR */
    uint64_t tabs;          /* TAB bytes in it */
    uint64_t first_tab;     /* offset of the first TAB (tabs > 0) */
} cli_cut;

/* Lines from a file descriptor, with a look-ahead that tells whether the
 * next line is already there: the batch runner ends a batch early when an
 * interactive or piped input pauses, so a user typing a sentence sees its
 * translation at once, while a regular file is read in full batches. */
typedef struct cli_reader {
    int fd;
    int pauses;             /* not a regular file: input may stop to wait */
    int eof;
    char *buf;              /* unread bytes are buf[start, end) */
    size_t cap, start, end;
    /* 0: lines of any length are returned whole.  Else a line of more than
     * limit + 1 bytes before its "\n" (limit after a CR is stripped) is cut:
     * its first limit + 1 bytes are returned, the rest read in 64 KiB steps
     * and counted into `cut`, never buffered; cap stays below
     * 2 * (limit + 1 + 65536).  Set before the first line is read. */
    size_t limit;
    cli_cut cut;            /* the last line returned as cut */
} cli_reader;

/* Read lines from fd (not closed by the reader); fstat decides `pauses`. */
void cli_reader_init(cli_reader *r, int fd);
void cli_reader_free(cli_reader *r);
/* The next line with its "\n" (none on a last line without one) in
 * *line[0, *n), valid until the next call: 1, or 0 at the end of input, or
 * -1 on a read error (errno set); with a limit, 2 for a line over it:
 * *line[0, *n) its first limit + 1 bytes, r->cut the whole line's counts,
 * and the next call returns the line after it. */
int cli_reader_line(cli_reader *r, const char **line, size_t *n);
/* 1 when the next cli_reader_line() call cannot block: a whole line is
 * buffered, the input has ended, or the descriptor is readable (poll with
 * zero timeout); always 1 for a regular file. */
int cli_reader_ready(cli_reader *r);

/* Length of a line without its "\n" or "\r\n" end. */
size_t cli_line_len(const char *line, size_t n);

/* Split a score line at its only TAB: 0 and *tab = its offset, or 1 with a
 * message in err when there is no TAB or more than one. */
int cli_split_pair(const char *line, size_t n, unsigned long line_no, size_t *tab, char *err,
                   size_t cap);
/* The message of cli_split_pair's 1, for a line that has not one TAB. */
void cli_pair_error(unsigned long line_no, char *err, size_t cap);

#endif
