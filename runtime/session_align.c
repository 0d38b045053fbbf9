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
 * the beam reordered; nothing is copied during the search. */
#include "session_internal.h"

#include <math.h>
#include <string.h>

/* Hypothesis `rank` of sentence i and its source columns (tokens + EOS). */
static nmt_status walk(const nmt_session *s, uint32_t i, uint32_t rank, const nmt_hyp **out, uint32_t *cols) {
    NMT_CHECK(s != NULL, NMT_ERR_INVALID_ARGUMENT);
    NMT_CHECK(s->h_align != NULL, NMT_ERR_NO_ALIGNMENTS);
    NMT_CHECK(i < s->n_results && rank < s->result_n_best, NMT_ERR_INVALID_ARGUMENT);
    const nmt_hyp *h = nmt_beam_result(&s->beam, i, rank);
    NMT_CHECK(h != NULL, NMT_ERR_INVALID_ARGUMENT);
    *out = h;
    *cols = (uint32_t)s->h_len[i];
    return NMT_OK;
}

/* The alignment row that beam row r wrote at step p. */
static const float *step_row(const nmt_session *s, uint32_t p, int32_t r) {
    return s->h_align + ((size_t)p * s->dims.step_rows + (size_t)r) * s->dims.src_cap;
}

nmt_status nmt_session_result_alignment(const nmt_session *s, uint32_t i, uint32_t rank, float *soft, size_t cap,
                                        uint32_t *tgt_len, uint32_t *src_cols) {
    NMT_CHECK(tgt_len != NULL && src_cols != NULL && (soft != NULL || cap == 0), NMT_ERR_INVALID_ARGUMENT);
    const nmt_hyp *h;
    uint32_t cols;
    NMT_TRY(walk(s, i, rank, &h, &cols));
    *tgt_len = h->len;
    *src_cols = cols;
    NMT_CHECK((uint64_t)h->len * cols <= cap, NMT_ERR_BUFFER_TOO_SMALL);
    int32_t r = h->row;
    for (uint32_t p = h->len; p-- > 0;) {
        r = s->h_align_back[(size_t)p * s->dims.step_rows + (size_t)r];
        memcpy(soft + (size_t)p * cols, step_row(s, p, r), sizeof(float) * cols);
    }
    return NMT_OK;
}

nmt_status nmt_session_result_links(const nmt_session *s, uint32_t i, uint32_t rank, int32_t *src_pos, size_t cap,
                                    uint32_t *tgt_len) {
    NMT_CHECK(tgt_len != NULL && (src_pos != NULL || cap == 0), NMT_ERR_INVALID_ARGUMENT);
    const nmt_hyp *h;
    uint32_t cols;
    NMT_TRY(walk(s, i, rank, &h, &cols));
    *tgt_len = h->len;
    NMT_CHECK(h->len <= cap, NMT_ERR_BUFFER_TOO_SMALL);
    int32_t r = h->row;
    for (uint32_t p = h->len; p-- > 0;) {
        r = s->h_align_back[(size_t)p * s->dims.step_rows + (size_t)r];
        const float *row = step_row(s, p, r);
        int32_t best = -1; /* over the source tokens: the appended EOS (column cols - 1) never */
        for (uint32_t j = 0; j + 1 < cols; j++)
            if (best < 0 || row[j] > row[best]) best = (int32_t)j;
        src_pos[p] = best;
    }
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
