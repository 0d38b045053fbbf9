/* SPDX-License-Identifier: MIT */
/* session_align.c — the alignments of a translation (nmt_edge.h:
 * nmt_session_result_alignment, nmt_session_result_links).
 *
 * A session created with `alignment` keeps, for every decoder step t of the
 * last translate call, the rows the family wrote into io.align (row r: the
 * cross-attention of beam row r over the source, EOS column included) and
 * the beam's back-pointers after that step (session.c, translate loop).  A
 * finished hypothesis of length T ended at step T in row h->row; the token
 * p < T was predicted at step p in row r_p, where r_T = h->row and r_p =
 * back[p][r_{p+1}] (the row that row r_{p+1} continued).  Walking back
 * therefore gives the hypothesis's own attention at every step, whatever
 * the beam reordered; nothing is copied during the search.
 *
 * nmt_session_score on such a session decodes the references position by
 * position (nmt_session_forced's incremental path: one row per pair, no
 * reordering) and keeps the rows the same way, so the same two calls then
 * read pair i's alignment as result (i, 0). */
#include "session_internal.h"

#include <math.h>
#include <string.h>

/* The rows of one result: translate's hypothesis `h`, whose back-pointers
 * lead to them, or (h == NULL) scored pair i, whose row p is row i of
 * step p (forced decoding keeps one row per pair and never reorders). */
typedef struct aligned {
    const nmt_hyp *h;
    uint32_t i, len, cols; /* target tokens (EOS excluded); source tokens + EOS */
} aligned;

static nmt_status find(const nmt_session *s, uint32_t i, uint32_t rank, aligned *out) {
    NMT_CHECK(s != NULL, NMT_ERR_INVALID_ARGUMENT);
    NMT_CHECK(s->h_align != NULL, NMT_ERR_NO_ALIGNMENTS);
    if (s->n_scored > 0) {
        NMT_CHECK(i < s->n_scored && rank == 0, NMT_ERR_INVALID_ARGUMENT);
        *out = (aligned){NULL, i, s->h_max_len[i], (uint32_t)s->h_len[i]};
        return NMT_OK;
    }
    NMT_CHECK(i < s->n_results && rank < s->result_n_best, NMT_ERR_INVALID_ARGUMENT);
    const uint32_t k = s->slot[i]; /* where sentence i decoded (session.c, longest first) */
    const nmt_hyp *h = nmt_beam_result(&s->beam, k, rank);
    NMT_CHECK(h != NULL, NMT_ERR_INVALID_ARGUMENT);
    *out = (aligned){h, k, h->len, (uint32_t)s->h_len[k]};
    return NMT_OK;
}

/* The alignment row that beam row r wrote at step p. */
static const float *step_row(const nmt_session *s, uint32_t p, int32_t r) {
    return s->h_align + ((size_t)p * s->dims.step_rows + (size_t)r) * s->dims.src_cap;
}

/* Row p of result a, for p = len - 1 down to 0 in that order: *r carries
 * the walk back through the beam (start it at row_start(a)). */
static int32_t row_start(const aligned *a) { return a->h ? a->h->row : (int32_t)a->i; }

static const float *row_at(const nmt_session *s, const aligned *a, uint32_t p, int32_t *r) {
    if (a->h != NULL) *r = s->h_align_back[(size_t)p * s->dims.step_rows + (size_t)*r];
    return step_row(s, p, *r);
}

nmt_status nmt_session_result_alignment(const nmt_session *s, uint32_t i, uint32_t rank, float *soft, size_t cap,
                                        uint32_t *tgt_len, uint32_t *src_cols) {
    NMT_CHECK(tgt_len != NULL && src_cols != NULL && (soft != NULL || cap == 0), NMT_ERR_INVALID_ARGUMENT);
    aligned a;
    NMT_TRY(find(s, i, rank, &a));
    *tgt_len = a.len;
    *src_cols = a.cols;
    NMT_CHECK((uint64_t)a.len * a.cols <= cap, NMT_ERR_BUFFER_TOO_SMALL);
    int32_t r = row_start(&a);
    for (uint32_t p = a.len; p-- > 0;) memcpy(soft + (size_t)p * a.cols, row_at(s, &a, p, &r), sizeof(float) * a.cols);
    return NMT_OK;
}

nmt_status nmt_session_result_links(const nmt_session *s, uint32_t i, uint32_t rank, int32_t *src_pos, size_t cap,
                                    uint32_t *tgt_len) {
    NMT_CHECK(tgt_len != NULL && (src_pos != NULL || cap == 0), NMT_ERR_INVALID_ARGUMENT);
    aligned a;
    NMT_TRY(find(s, i, rank, &a));
    *tgt_len = a.len;
    NMT_CHECK(a.len <= cap, NMT_ERR_BUFFER_TOO_SMALL);
    int32_t r = row_start(&a);
    for (uint32_t p = a.len; p-- > 0;) {
        const float *row = row_at(s, &a, p, &r);
        int32_t best = -1; /* over the source tokens: the appended EOS (column cols - 1) never */
        for (uint32_t j = 0; j + 1 < a.cols; j++)
            if (best < 0 || row[j] > row[best]) best = (int32_t)j;
        src_pos[p] = best;
    }
    return NMT_OK;
}

/* ---- nmt_session_score with alignments ---------------------------------- */

typedef struct score_ctx {
    nmt_session *s;
    float *logprob;   /* (n) */
    uint32_t n;       /* pairs */
    uint32_t next;    /* the first step whose rows are not read yet */
    nmt_status st;    /* the first failure of a read */
} score_ctx;

/* Called for every live pair after each step p (p ascending; the longest
 * reference keeps every step live): sums the log-probabilities and, on a
 * step's first call, keeps the step's alignment rows (n rows). */
static void score_row(void *user, uint32_t i, uint32_t p, int32_t label, const float *row) {
    score_ctx *c = (score_ctx *)user;
    c->logprob[i] += row[label];
    if (p < c->next || c->st != NMT_OK) return;
    nmt_session *s = c->s;
    const size_t sc = s->dims.src_cap;
    c->st = nmt_device_read(s->dev, s->io.align.mem, 0, (size_t)c->n * sc * sizeof(float),
                            s->h_align + (size_t)p * s->dims.step_rows * sc);
    c->next = p + 1;
}

nmt_status nmt_session_score_aligned(nmt_session *s, const nmt_batch *src, const nmt_batch *tgt,
                                     float *out_logprob) {
    score_ctx c = {s, out_logprob, src->n, 0, NMT_OK};
    NMT_TRY(nmt_session_forced(s, src, tgt, 1, 1, score_row, &c));
    NMT_TRY(c.st);
    for (uint32_t i = 0; i < src->n; i++) s->h_max_len[i] = tgt->lens[i];
    s->n_scored = src->n;
    return NMT_OK;
}

void nmt_session_coverage(nmt_session *s, float beta) {
    nmt_beam *b = &s->beam;
    for (uint32_t i = 0; i < s->n_results; i++) {
        const uint32_t cols = (uint32_t)s->h_len[i]; /* source tokens + EOS; EOS not counted */
        for (uint32_t k = 0; k < b->n_fin[i]; k++) {
            nmt_hyp *h = &b->fin[(size_t)i * b->K + k];
            double cp = 0;
            for (uint32_t j = 0; j + 1 < cols; j++) {
                double c = 0;
                int32_t r = h->row;
                for (uint32_t p = h->len; p-- > 0;) {
                    r = s->h_align_back[(size_t)p * s->dims.step_rows + (size_t)r];
                    c += step_row(s, p, r)[j];
                }
                cp += log(c < 1e-6 ? 1e-6 : c > 1.0 ? 1.0 : c);
            }
            h->score += (float)(beta * cp);
        }
        nmt_beam_resort(b, i);
    }
}
