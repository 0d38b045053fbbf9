/* beam.c — batched beam search on the host; see beam.h for the rules. */
#include "beam.h"

#include "common.h"

#include <math.h>
#include <string.h>

nmt_status nmt_beam_plan(nmt_beam *b, nmt_arena *a, uint32_t max_batch, uint32_t max_beam,
                         uint32_t max_steps) {
    const size_t rows = (size_t)max_batch * max_beam;
    memset(b, 0, sizeof *b);
    b->max_batch = max_batch;
    b->max_beam = max_beam;
    b->max_steps = max_steps;
    b->score = NMT_ARENA_NEW(a, float, rows);
    b->hist = NMT_ARENA_NEW(a, int32_t, rows * max_steps);
    b->hist_next = NMT_ARENA_NEW(a, int32_t, rows * max_steps);
    b->next_tok = NMT_ARENA_NEW(a, int32_t, rows);
    b->back = NMT_ARENA_NEW(a, int32_t, rows);
    b->max_len = NMT_ARENA_NEW(a, uint32_t, max_batch);
    b->done = NMT_ARENA_NEW(a, uint8_t, max_batch);
    b->n_fin = NMT_ARENA_NEW(a, uint32_t, max_batch);
    b->fin = NMT_ARENA_NEW(a, nmt_hyp, rows);
    int32_t *fin_tokens = NMT_ARENA_NEW(a, int32_t, rows * max_steps);
    b->cand_score = NMT_ARENA_NEW(a, float, 2 * (size_t)max_beam);
    b->cand_row = NMT_ARENA_NEW(a, int32_t, 2 * (size_t)max_beam);
    b->cand_tok = NMT_ARENA_NEW(a, int32_t, 2 * (size_t)max_beam);
    b->banned = NMT_ARENA_NEW(a, int32_t, max_steps);
    NMT_CHECK(!a->failed, NMT_ERR_ARENA_TOO_SMALL);
    if (!nmt_arena_measuring(a))
        for (size_t i = 0; i < rows; i++) b->fin[i].tokens = fin_tokens + i * max_steps;
    return NMT_OK;
}

nmt_status nmt_beam_start(nmt_beam *b, uint32_t n, uint32_t K, uint32_t V, uint32_t eos,
                          uint32_t bos, float alpha, const uint32_t *max_len) {
    NMT_CHECK(n >= 1 && n <= b->max_batch && K >= 1 && K <= b->max_beam && V >= 1 && eos < V,
              NMT_ERR_LIMIT_EXCEEDED);
    b->n = n;
    b->K = K;
    b->V = V;
    b->eos = eos;
    b->alpha = alpha;
    b->min_len = b->no_repeat = 0;
    for (uint32_t i = 0; i < n; i++) {
        NMT_CHECK(max_len[i] < b->max_steps, NMT_ERR_LIMIT_EXCEEDED);
        b->max_len[i] = max_len[i];
        b->done[i] = 0;
        b->n_fin[i] = 0;
    }
    for (uint32_t r = 0; r < n * K; r++) {
        /* all beams of a sentence start identical: only beam 0 is live */
        b->score[r] = (r % K == 0) ? 0.0f : -INFINITY;
        b->next_tok[r] = (int32_t)bos;
        b->back[r] = (int32_t)r;
    }
    return NMT_OK;
}

static float length_penalty(float alpha, uint32_t len) {
    return alpha == 0.0f ? 1.0f : powf((5.0f + (float)len) / 6.0f, alpha);
}

void nmt_beam_constrain(nmt_beam *b, uint32_t min_len, uint32_t no_repeat) {
    b->min_len = min_len;
    b->no_repeat = no_repeat;
}

/* The tokens that would repeat an n-gram of size n = b->no_repeat in the
 * t tokens h of a hypothesis: the token after every earlier occurrence of
 * its last n - 1 tokens (n = 1: every token it has).  Into b->banned;
 * returns their count. */
static uint32_t banned_tokens(nmt_beam *b, const int32_t *h, uint32_t t) {
    const uint32_t n = b->no_repeat;
    uint32_t nb = 0;
    if (n == 0 || t + 1 < n) return 0;
    for (uint32_t i = 0; i + n <= t; i++) /* the n-gram h[i .. i + n - 1] is already there */
        if (n == 1 || memcmp(h + i, h + t - (n - 1), sizeof(int32_t) * (n - 1)) == 0) b->banned[nb++] = h[i + n - 1];
    return nb;
}

static int is_banned(const nmt_beam *b, uint32_t nb, int32_t v) {
    for (uint32_t i = 0; i < nb; i++)
        if (b->banned[i] == v) return 1;
    return 0;
}

/* Insert (score, row, tok) into the descending candidate list of size cap;
 * ties keep the earlier (lower row, then lower token) candidate first. */
static void cand_insert(nmt_beam *b, uint32_t *count, uint32_t cap, float s, int32_t row, int32_t tok) {
    uint32_t c = *count;
    if (c == cap && !(s > b->cand_score[c - 1])) return;
    uint32_t i = c < cap ? c : cap - 1;
    while (i > 0 && s > b->cand_score[i - 1]) {
        b->cand_score[i] = b->cand_score[i - 1];
        b->cand_row[i] = b->cand_row[i - 1];
        b->cand_tok[i] = b->cand_tok[i - 1];
        i--;
    }
    b->cand_score[i] = s;
    b->cand_row[i] = row;
    b->cand_tok[i] = tok;
    if (c < cap) *count = c + 1;
}

static void finish(nmt_beam *b, uint32_t s, uint32_t t, int32_t row, float logprob) {
    nmt_hyp *h = &b->fin[(size_t)s * b->K + b->n_fin[s]++];
    memcpy(h->tokens, b->hist + (size_t)row * b->max_steps, sizeof(int32_t) * t);
    h->len = t;
    h->logprob = logprob;
    h->score = logprob / length_penalty(b->alpha, t + 1);
}

static void sort_results(nmt_beam *b, uint32_t s) {
    nmt_hyp *h = &b->fin[(size_t)s * b->K];
    for (uint32_t i = 1; i < b->n_fin[s]; i++) { /* insertion sort, stable */
        nmt_hyp x = h[i];
        uint32_t j = i;
        while (j > 0 && x.score > h[j - 1].score) {
            h[j] = h[j - 1];
            j--;
        }
        h[j] = x;
    }
}

int nmt_beam_advance(nmt_beam *b, uint32_t t, const float *logprobs) {
    const uint32_t K = b->K, V = b->V, M = b->max_steps;
    int all_done = 1;
    for (uint32_t s = 0; s < b->n; s++) {
        const uint32_t r0 = s * K;
        if (b->done[s]) {
            for (uint32_t k = 0; k < K; k++) {
                b->back[r0 + k] = (int32_t)(r0 + k);
                b->next_tok[r0 + k] = (int32_t)b->eos;
                memcpy(b->hist_next + (size_t)(r0 + k) * M, b->hist + (size_t)(r0 + k) * M,
                       sizeof(int32_t) * M);
            }
            continue;
        }
        const int force_eos = t >= b->max_len[s];
        uint32_t nc = 0, cap = 2 * K;
        for (uint32_t k = 0; k < K; k++) {
            const uint32_t r = r0 + k;
            if (!(b->score[r] > -INFINITY)) continue;
            const float *lp = logprobs + (size_t)r * V;
            if (force_eos) {
                cand_insert(b, &nc, cap, b->score[r] + lp[b->eos], (int32_t)r, (int32_t)b->eos);
                continue;
            }
            const uint32_t nb = banned_tokens(b, b->hist + (size_t)r * M, t);
            const int no_eos = t < b->min_len;
            for (uint32_t v = 0; v < V; v++) {
                float sc = b->score[r] + lp[v];
                if (nc == cap && !(sc > b->cand_score[cap - 1])) continue;
                if (!(sc > -INFINITY) || (no_eos && v == b->eos) || (nb && is_banned(b, nb, (int32_t)v))) continue;
                cand_insert(b, &nc, cap, sc, (int32_t)r, (int32_t)v);
            }
        }
        if (nc == 0) /* the constraints left no continuation: end the live rows here */
            for (uint32_t k = 0; k < K; k++)
                if (b->score[r0 + k] > -INFINITY)
                    cand_insert(b, &nc, cap, b->score[r0 + k] + logprobs[(size_t)(r0 + k) * V + b->eos],
                                (int32_t)(r0 + k), (int32_t)b->eos);
        uint32_t alive = 0;
        for (uint32_t i = 0; i < nc && alive < K; i++) {
            const int32_t row = b->cand_row[i], tok = b->cand_tok[i];
            if (tok == (int32_t)b->eos) {
                if (i < K && b->n_fin[s] < K) finish(b, s, t, row, b->cand_score[i]);
                continue;
            }
            if (b->n_fin[s] >= K) break;
            const uint32_t j = r0 + alive++;
            b->back[j] = row;
            b->next_tok[j] = tok;
            b->score[j] = b->cand_score[i]; /* safe: score[] of rows read below come from cand */
            int32_t *dst = b->hist_next + (size_t)j * M;
            memcpy(dst, b->hist + (size_t)row * M, sizeof(int32_t) * t);
            dst[t] = tok;
        }
        for (uint32_t j = r0 + alive; j < r0 + K; j++) { /* unused beams are dead */
            b->back[j] = (int32_t)r0;
            b->next_tok[j] = (int32_t)b->eos;
            b->score[j] = -INFINITY;
        }
        if (b->n_fin[s] >= K || force_eos || alive == 0) {
            b->done[s] = 1;
            sort_results(b, s);
        } else {
            all_done = 0;
        }
    }
    int32_t *tmp = b->hist;
    b->hist = b->hist_next;
    b->hist_next = tmp;
    return all_done;
}

const nmt_hyp *nmt_beam_result(const nmt_beam *b, uint32_t i, uint32_t rank) {
    if (i >= b->n || rank >= b->n_fin[i]) return NULL;
    return &b->fin[(size_t)i * b->K + rank];
}

uint32_t nmt_beam_n_results(const nmt_beam *b, uint32_t i) { return i < b->n ? b->n_fin[i] : 0; }
