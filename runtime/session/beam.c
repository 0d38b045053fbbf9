/* SPDX-License-Identifier: MIT */
/* beam.c — batched beam search on the host; see beam.h for the rules. */
#include "beam.h"

#include "common.h"

#include <math.h>
#include <stdlib.h>
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
    b->cand_lp = NMT_ARENA_NEW(a, float, 2 * (size_t)max_beam);
    b->row_cand = NMT_ARENA_NEW(a, nmt_beam_cand, 2 * (size_t)max_beam + 1);
    b->banned = NMT_ARENA_NEW(a, int32_t, max_steps);
    b->seen = NMT_ARENA_NEW(a, int32_t, max_steps);
    NMT_CHECK(!a->failed, NMT_ERR_ARENA_TOO_SMALL);
    if (!nmt_arena_measuring(a))
        for (size_t i = 0; i < rows; i++) {
            b->fin[i].tokens = fin_tokens + i * max_steps;
            b->fin[i].token_lp = NULL;
        }
    return NMT_OK;
}

nmt_status nmt_beam_plan_token_lp(nmt_beam *b, nmt_arena *a) {
    const size_t rows = (size_t)b->max_batch * b->max_beam, M = b->max_steps;
    b->lp_hist = NMT_ARENA_NEW(a, float, rows * M);
    b->lp_hist_next = NMT_ARENA_NEW(a, float, rows * M);
    float *fin_lp = NMT_ARENA_NEW(a, float, rows * M);
    NMT_CHECK(!a->failed, NMT_ERR_ARENA_TOO_SMALL);
    if (!nmt_arena_measuring(a))
        for (size_t i = 0; i < rows; i++) b->fin[i].token_lp = fin_lp + i * M;
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
    b->rep_penalty = 1.0f;
    b->sampling = 0;
    b->prefix = NULL;
    b->prefix_len = NULL;
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

nmt_status nmt_beam_plan_vocab(nmt_beam *b, nmt_arena *a, uint32_t V) {
    b->rng = NMT_ARENA_NEW(a, uint64_t, b->max_batch);
    b->pool = NMT_ARENA_NEW(a, nmt_beam_cand, V);
    b->pool_cap = V;
    NMT_CHECK(!a->failed, NMT_ERR_ARENA_TOO_SMALL);
    return NMT_OK;
}

void nmt_beam_set_prefix(nmt_beam *b, const int32_t *const *prefix, const uint32_t *prefix_len) {
    b->prefix = prefix_len ? prefix : NULL;
    b->prefix_len = prefix ? prefix_len : NULL;
}

void nmt_beam_set_repetition(nmt_beam *b, float penalty) { b->rep_penalty = penalty > 0 ? penalty : 1.0f; }

/* splitmix64 (Steele et al. 2014): the finalizer mixes a seed, next() steps. */
static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double next_uniform(uint64_t *state) { /* [0, 1) with 53 bits */
    *state += 0x9E3779B97F4A7C15ull;
    return (double)(mix64(*state) >> 11) * 0x1.0p-53;
}

nmt_status nmt_beam_set_sampling(nmt_beam *b, uint32_t topk, float temperature, uint64_t seed) {
    NMT_CHECK(b->K == 1 && b->V <= b->pool_cap && temperature > 0 && isfinite(temperature), NMT_ERR_LIMIT_EXCEEDED);
    b->sampling = 1;
    b->topk = topk;
    b->temperature = temperature;
    for (uint32_t i = 0; i < b->n; i++) b->rng[i] = mix64(seed + i);
    return NMT_OK;
}

static int cmp_int(const void *x, const void *y) {
    const int32_t a = *(const int32_t *)x, c = *(const int32_t *)y;
    return (a > c) - (a < c);
}

void nmt_beam_logprobs(nmt_beam *b, uint32_t t, float *logits) {
    const uint32_t V = b->V, M = b->max_steps;
    const float p = b->rep_penalty;
    for (uint32_t r = 0; r < b->n * b->K; r++) {
        float *z = logits + (size_t)r * V;
        if (p != 1.0f && t > 0) {
            memcpy(b->seen, b->hist + (size_t)r * M, sizeof(int32_t) * t);
            qsort(b->seen, t, sizeof(int32_t), cmp_int);
            for (uint32_t j = 0; j < t; j++) {
                const int32_t v = b->seen[j];
                if ((j > 0 && v == b->seen[j - 1]) || v < 0 || (uint32_t)v >= V) continue;
                z[v] = z[v] < 0 ? z[v] * p : z[v] / p;
            }
        }
        float mx = -INFINITY;
        for (uint32_t v = 0; v < V; v++) mx = z[v] > mx ? z[v] : mx;
        double sum = 0;
        for (uint32_t v = 0; v < V; v++) sum += exp((double)z[v] - mx);
        const float lse = mx + (float)log(sum);
        for (uint32_t v = 0; v < V; v++) z[v] -= lse;
    }
}

/* Pool order: log-probability descending, then id ascending. */
static int cmp_cand(const void *x, const void *y) {
    const nmt_beam_cand *a = x, *c = y;
    if (a->lp != c->lp) return a->lp > c->lp ? -1 : 1;
    return (a->id > c->id) - (a->id < c->id);
}

/* Draw sentence s's next token among the allowed tokens of its row r (the
 * first nb banned tokens, EOS when no_eos): the topk best (0: all) in
 * pool order, weights exp((lp - best) / temperature), the first whose
 * cumulative weight exceeds u * total.  -1 when nothing is allowed. */
static int32_t sample_token(nmt_beam *b, uint32_t s, const float *lp, uint32_t nb, int no_eos);

static void sort_results(nmt_beam *b, uint32_t s);

static float length_penalty(float alpha, uint32_t len) {
    return alpha == 0.0f ? 1.0f : powf((5.0f + (float)len) / 6.0f, alpha);
}

void nmt_beam_resort(nmt_beam *b, uint32_t i) { sort_results(b, i); }

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

static int32_t sample_token(nmt_beam *b, uint32_t s, const float *lp, uint32_t nb, int no_eos) {
    uint32_t n = 0;
    for (uint32_t v = 0; v < b->V; v++) {
        if (!(lp[v] > -INFINITY) || (no_eos && v == b->eos) || (nb && is_banned(b, nb, (int32_t)v))) continue;
        b->pool[n++] = (nmt_beam_cand){lp[v], (int32_t)v};
    }
    if (n == 0) return -1;
    qsort(b->pool, n, sizeof *b->pool, cmp_cand);
    if (b->topk > 0 && b->topk < n) n = b->topk;
    double total = 0;
    for (uint32_t i = 0; i < n; i++) total += exp(((double)b->pool[i].lp - b->pool[0].lp) / b->temperature);
    const double target = next_uniform(&b->rng[s]) * total;
    double cum = 0;
    for (uint32_t i = 0; i < n; i++) {
        cum += exp(((double)b->pool[i].lp - b->pool[0].lp) / b->temperature);
        if (cum > target) return b->pool[i].id;
    }
    return b->pool[n - 1].id;
}

/* Insert (score, row, tok) into the descending candidate list of size cap;
 * ties keep the earlier (lower row, then lower token) candidate first. */
static void cand_insert(nmt_beam *b, uint32_t *count, uint32_t cap, float s, int32_t row, int32_t tok, float lp) {
    uint32_t c = *count;
    if (c == cap && !(s > b->cand_score[c - 1])) return;
    uint32_t i = c < cap ? c : cap - 1;
    while (i > 0 && s > b->cand_score[i - 1]) {
        b->cand_score[i] = b->cand_score[i - 1];
        b->cand_row[i] = b->cand_row[i - 1];
        b->cand_tok[i] = b->cand_tok[i - 1];
        b->cand_lp[i] = b->cand_lp[i - 1];
        i--;
    }
    b->cand_score[i] = s;
    b->cand_row[i] = row;
    b->cand_tok[i] = tok;
    b->cand_lp[i] = lp;
    if (c < cap) *count = c + 1;
}

static void finish(nmt_beam *b, uint32_t s, uint32_t t, int32_t row, float logprob, float eos_lp) {
    nmt_hyp *h = &b->fin[(size_t)s * b->K + b->n_fin[s]++];
    memcpy(h->tokens, b->hist + (size_t)row * b->max_steps, sizeof(int32_t) * t);
    if (h->token_lp != NULL) {
        memcpy(h->token_lp, b->lp_hist + (size_t)row * b->max_steps, sizeof(float) * t);
        h->token_lp[t] = eos_lp;
    }
    h->len = t;
    h->row = row;
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

/* What one step gives the search: every row's whole distribution (full,
 * rows of V) or its k best candidates and its EOS log-probability. */
typedef struct step_in {
    const float *full;
    const float *lp;     /* (rows, k) */
    const int32_t *id;   /* (rows, k) */
    const float *eos_lp; /* (rows) */
    uint32_t k;
} step_in;

static float eos_of(const nmt_beam *b, const step_in *in, uint32_t row) {
    return in->full ? in->full[(size_t)row * b->V + b->eos] : in->eos_lp[row];
}

static int cmp_cand_id(const void *x, const void *y) {
    const nmt_beam_cand *a = x, *c = y;
    return (a->id > c->id) - (a->id < c->id);
}

/* Row r's unconstrained continuations (the banned tokens, EOS when no_eos,
 * -inf ones skipped), offered in id order as the full scan offers them:
 * the candidate list's ties then resolve the same way. */
static void offer_row(nmt_beam *b, const step_in *in, uint32_t r, uint32_t *nc, uint32_t cap, uint32_t nb,
                      int no_eos) {
    if (in->full) {
        const float *lp = in->full + (size_t)r * b->V;
        for (uint32_t v = 0; v < b->V; v++) {
            float sc = b->score[r] + lp[v];
            if (*nc == cap && !(sc > b->cand_score[cap - 1])) continue;
            if (!(sc > -INFINITY) || (no_eos && v == b->eos) || (nb && is_banned(b, nb, (int32_t)v))) continue;
            cand_insert(b, nc, cap, sc, (int32_t)r, (int32_t)v, lp[v]);
        }
        return;
    }
    uint32_t m = 0;
    for (uint32_t i = 0; i < in->k; i++) {
        const int32_t v = in->id[(size_t)r * in->k + i];
        if (v < 0 || (uint32_t)v >= b->V) continue;
        b->row_cand[m++] = (nmt_beam_cand){in->lp[(size_t)r * in->k + i], v};
    }
    qsort(b->row_cand, m, sizeof *b->row_cand, cmp_cand_id);
    for (uint32_t i = 0; i < m; i++) {
        const int32_t v = b->row_cand[i].id;
        const float sc = b->score[r] + b->row_cand[i].lp;
        if (*nc == cap && !(sc > b->cand_score[cap - 1])) continue;
        if (!(sc > -INFINITY) || (no_eos && v == (int32_t)b->eos) || (nb && is_banned(b, nb, v))) continue;
        cand_insert(b, nc, cap, sc, (int32_t)r, v, b->row_cand[i].lp);
    }
}

static int advance(nmt_beam *b, uint32_t t, const step_in *in) {
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
                if (b->lp_hist != NULL)
                    memcpy(b->lp_hist_next + (size_t)(r0 + k) * M, b->lp_hist + (size_t)(r0 + k) * M,
                           sizeof(float) * M);
            }
            continue;
        }
        const int force_eos = t >= b->max_len[s];
        uint32_t nc = 0, cap = 2 * K;
        for (uint32_t k = 0; k < K; k++) {
            const uint32_t r = r0 + k;
            if (!(b->score[r] > -INFINITY)) continue;
            if (force_eos) {
                const float e = eos_of(b, in, r);
                cand_insert(b, &nc, cap, b->score[r] + e, (int32_t)r, (int32_t)b->eos, e);
                continue;
            }
            const float *lp = in->full ? in->full + (size_t)r * V : NULL; /* the options below need it */
            if (b->prefix != NULL && t < b->prefix_len[s]) { /* forced: the prefix's token only */
                const int32_t v = b->prefix[s][t];
                if (lp[v] > -INFINITY) cand_insert(b, &nc, cap, b->score[r] + lp[v], (int32_t)r, v, lp[v]);
                continue;
            }
            const uint32_t nb = banned_tokens(b, b->hist + (size_t)r * M, t);
            const int no_eos = t < b->min_len;
            if (b->sampling) { /* K = 1: one draw, the only candidate */
                const int32_t v = sample_token(b, s, lp, nb, no_eos);
                if (v >= 0) cand_insert(b, &nc, cap, b->score[r] + lp[v], (int32_t)r, v, lp[v]);
                continue;
            }
            offer_row(b, in, r, &nc, cap, nb, no_eos);
        }
        if (nc == 0) /* the constraints left no continuation: end the live rows here */
            for (uint32_t k = 0; k < K; k++)
                if (b->score[r0 + k] > -INFINITY) {
                    const float e = eos_of(b, in, r0 + k);
                    cand_insert(b, &nc, cap, b->score[r0 + k] + e, (int32_t)(r0 + k), (int32_t)b->eos, e);
                }
        uint32_t alive = 0;
        for (uint32_t i = 0; i < nc && alive < K; i++) {
            const int32_t row = b->cand_row[i], tok = b->cand_tok[i];
            if (tok == (int32_t)b->eos) {
                if (i < K && b->n_fin[s] < K) finish(b, s, t, row, b->cand_score[i], b->cand_lp[i]);
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
            if (b->lp_hist != NULL) {
                float *dlp = b->lp_hist_next + (size_t)j * M;
                memcpy(dlp, b->lp_hist + (size_t)row * M, sizeof(float) * t);
                dlp[t] = b->cand_lp[i];
            }
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
    float *ftmp = b->lp_hist;
    b->lp_hist = b->lp_hist_next;
    b->lp_hist_next = ftmp;
    return all_done;
}

int nmt_beam_advance(nmt_beam *b, uint32_t t, const float *logprobs) {
    const step_in in = {.full = logprobs};
    return advance(b, t, &in);
}

uint32_t nmt_beam_topk_width(const nmt_beam *b, uint32_t t) {
    if (b->sampling || b->no_repeat > 0 || b->rep_penalty != 1.0f) return 0;
    if (b->prefix != NULL)
        for (uint32_t s = 0; s < b->n; s++)
            if (t < b->prefix_len[s]) return 0;
    return 2 * b->K + (t < b->min_len ? 1 : 0);
}

int nmt_beam_advance_topk(nmt_beam *b, uint32_t t, const float *lp, const int32_t *id, uint32_t k,
                          const float *eos_lp) {
    const step_in in = {.lp = lp, .id = id, .eos_lp = eos_lp, .k = k};
    return advance(b, t, &in);
}

const nmt_hyp *nmt_beam_result(const nmt_beam *b, uint32_t i, uint32_t rank) {
    if (i >= b->n || rank >= b->n_fin[i]) return NULL;
    return &b->fin[(size_t)i * b->K + rank];
}

uint32_t nmt_beam_n_results(const nmt_beam *b, uint32_t i) { return i < b->n ? b->n_fin[i] : 0; }
