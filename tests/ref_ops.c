/* SPDX-License-Identifier: MIT */
/* ref_ops.c — see ref_ops.h.  Plain loops, double accumulation. */
#include "ref_ops.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

const float *ref_tensor(const nmt_file *f, const char *who, const char *fmt, ...) {
    char name[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    nmt_tensor_view v;
    if (nmt_file_find(f, name, &v) != NMT_OK) {
        fprintf(stderr, "%s: missing %s\n", who, name);
        abort();
    }
    return (const float *)v.data;
}

int64_t ref_meta_i64(const nmt_file *f, const char *key, int64_t def) {
    int64_t v = def;
    nmt_file_get_i64_or(f, key, def, &v);
    return v;
}

/* The products' activation `act` (NMT_ACT_*: 1 ReLU, 2 GELU, 3 swish), in double. */
static double ref_act(double v, int act) {
    if (act == 1) return v < 0.0 ? 0.0 : v;
    if (act == 2) return 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
    if (act == 3) return v / (1.0 + exp(-v));
    return v;
}

void ref_gemm(int trans_b, uint32_t M, uint32_t N, uint32_t K, float alpha, const float *A, uint32_t lda,
              const float *B, uint32_t ldb, float beta, float *C, uint32_t ldc, const float *bias, int relu) {
    for (uint32_t m = 0; m < M; m++) {
        for (uint32_t n = 0; n < N; n++) {
            double acc = 0.0;
            for (uint32_t k = 0; k < K; k++) {
                double b = trans_b ? B[(size_t)n * ldb + k] : B[(size_t)k * ldb + n];
                acc += (double)A[(size_t)m * lda + k] * b;
            }
            double v = (double)alpha * acc;
            if (beta != 0.0f) v += (double)beta * C[(size_t)m * ldc + n];
            if (bias) v += bias[n];
            v = ref_act(v, relu);
            C[(size_t)m * ldc + n] = (float)v;
        }
    }
}

void ref_gemm_q8(uint32_t M, uint32_t N, uint32_t K, float alpha, const float *A, uint32_t lda, const int8_t *Q,
                 uint32_t ldq, const float *scale, float beta, float *C, uint32_t ldc, const float *bias, int relu) {
    for (uint32_t m = 0; m < M; m++) {
        for (uint32_t n = 0; n < N; n++) {
            double acc = 0.0;
            for (uint32_t k = 0; k < K; k++)
                acc += (double)A[(size_t)m * lda + k] * ((double)Q[(size_t)n * ldq + k] * (double)scale[n]);
            double v = (double)alpha * acc;
            if (beta != 0.0f) v += (double)beta * C[(size_t)m * ldc + n];
            if (bias) v += bias[n];
            v = ref_act(v, relu);
            C[(size_t)m * ldc + n] = (float)v;
        }
    }
}

double ref_sinusoid(uint32_t pos, uint32_t c, uint32_t d) {
    uint32_t half = d / 2;
    if (c >= 2 * half) return 0.0;
    uint32_t i = c < half ? c : c - half;
    double denom = half > 1 ? (double)(half - 1) : 1.0;
    double w = pow(10000.0, -(double)i / denom);
    double angle = (double)pos * w;
    return c < half ? sin(angle) : cos(angle);
}

void ref_embed(const int32_t *tok, uint32_t rows, uint32_t seq_len, uint32_t pos0, const float *E, uint32_t d,
               float scale, float *out) {
    for (uint32_t r = 0; r < rows; r++) {
        uint32_t pos = pos0 + r % seq_len;
        const float *e = E + (size_t)tok[r] * d;
        for (uint32_t c = 0; c < d; c++)
            out[(size_t)r * d + c] = (float)((double)e[c] * scale + ref_sinusoid(pos, c, d));
    }
}

void ref_layernorm(const float *x, const float *res, float *out, uint32_t rows, uint32_t d, const float *gamma,
                   const float *beta, float eps) {
    double *v = malloc(sizeof(double) * (d ? d : 1));
    if (v == NULL) abort();
    for (uint32_t r = 0; r < rows; r++) {
        double mean = 0.0, var = 0.0;
        for (uint32_t c = 0; c < d; c++) {
            v[c] = (double)x[(size_t)r * d + c] + (res ? (double)res[(size_t)r * d + c] : 0.0);
            mean += v[c];
        }
        mean /= d;
        for (uint32_t c = 0; c < d; c++) var += (v[c] - mean) * (v[c] - mean);
        var /= d;
        double rstd = 1.0 / sqrt(var + (double)eps);
        for (uint32_t c = 0; c < d; c++)  /* v holds the inputs: out may alias x or res */
            out[(size_t)r * d + c] = (float)((v[c] - mean) * rstd * gamma[c] + beta[c]);
    }
    free(v);
}

void ref_add(float *dst, const float *src, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) dst[i] = (float)((double)dst[i] + src[i]);
}

void ref_relu(float *x, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        if (x[i] < 0.0f) x[i] = 0.0f;
}

void ref_gate_accum(const float *x, uint32_t ld_x, const float *g, uint32_t ld_g, float *out, uint32_t ld_out,
                    uint32_t rows, uint32_t d, int accumulate) {
    for (uint32_t r = 0; r < rows; r++) {
        for (uint32_t c = 0; c < d; c++) {
            double sig = 1.0 / (1.0 + exp(-(double)g[(size_t)r * ld_g + c]));
            double v = (double)x[(size_t)r * ld_x + c] * sig;
            float *o = &out[(size_t)r * ld_out + c];
            *o = (float)(accumulate ? (double)*o + v : v);
        }
    }
}

void ref_copy_rows(const float *src, uint32_t ld_src, float *dst, uint32_t ld_dst, uint32_t rows, uint32_t cols) {
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t c = 0; c < cols; c++) dst[(size_t)r * ld_dst + c] = src[(size_t)r * ld_src + c];
}

void ref_gather_rows(const float *src, uint64_t ld_src, float *dst, uint64_t ld_dst, const int32_t *idx,
                     uint32_t rows, uint32_t cols) {
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t c = 0; c < cols; c++) dst[r * ld_dst + c] = src[(uint64_t)idx[r] * ld_src + c];
}

void ref_log_softmax(float *x, uint32_t rows, uint32_t n, uint32_t ld) {
    for (uint32_t r = 0; r < rows; r++) {
        float *row = x + (size_t)r * ld;
        double mx = -INFINITY;
        for (uint32_t c = 0; c < n; c++)
            if (row[c] > mx) mx = row[c];
        if (mx == -INFINITY) continue;
        double sum = 0.0;
        for (uint32_t c = 0; c < n; c++) sum += exp((double)row[c] - mx);
        double lse = mx + log(sum);
        for (uint32_t c = 0; c < n; c++) row[c] = (float)((double)row[c] - lse);
    }
}

int ref_attn_allowed(const ref_attn_args *a, uint32_t s, uint32_t i, uint32_t j, nmt_branch br) {
    int64_t kl = a->key_len ? (int64_t)a->key_len[s / a->group] : (int64_t)a->key_len_const;
    if ((int64_t)j >= kl || j >= a->lk_max) return 0;  /* key padding */
    int64_t pos = (int64_t)a->q_pos0 + i, jj = j;
    if (a->causal && jj > pos) return 0;
    switch (br.kind) {
    case NMT_BRANCH_GLOBAL: return 1;
    case NMT_BRANCH_FW: return jj <= pos;
    case NMT_BRANCH_BW: return jj >= pos;
    case NMT_BRANCH_LOCAL: return llabs(pos - jj) <= (int64_t)br.k;
    case NMT_BRANCH_BLOCK: return pos / (int64_t)br.k == jj / (int64_t)br.k;
    }
    return 0;
}

void ref_attention(const ref_attn_args *a) {
    const uint32_t H = a->n_heads, dh = a->d_head;
    double *p = malloc(sizeof(double) * (a->lk_max ? a->lk_max : 1));
    if (p == NULL) abort();
    const double scale = 1.0 / sqrt((double)dh);
    for (uint32_t b = 0; b < a->n_branches; b++) {
        for (uint32_t s = 0; s < a->n_seq; s++) {
            const uint64_t kv = (uint64_t)(s / a->group) * a->kv_seq_stride;
            for (uint32_t h = 0; h < H; h++) {
                for (uint32_t i = 0; i < a->lq; i++) {
                    const float *q = a->q + (size_t)(s * a->lq + i) * a->q_ld + (size_t)h * dh;
                    double mx = -INFINITY;
                    for (uint32_t j = 0; j < a->lk_max; j++) {
                        if (!ref_attn_allowed(a, s, i, j, a->branches[b])) {
                            p[j] = -INFINITY;
                            continue;
                        }
                        const float *k = a->k + kv + (uint64_t)j * a->k_ld + (size_t)h * dh;
                        double dot = 0.0;
                        for (uint32_t c = 0; c < dh; c++) dot += (double)q[c] * k[c];
                        p[j] = dot * scale;
                        if (p[j] > mx) mx = p[j];
                    }
                    double sum = 0.0;
                    for (uint32_t j = 0; j < a->lk_max; j++) {
                        p[j] = p[j] == -INFINITY ? 0.0 : exp(p[j] - mx);
                        sum += p[j];
                    }
                    float *o = a->out + (size_t)(s * a->lq + i) * a->out_ld + (size_t)b * H * dh + (size_t)h * dh;
                    for (uint32_t c = 0; c < dh; c++) {
                        double acc = 0.0;
                        if (sum > 0.0)
                            for (uint32_t j = 0; j < a->lk_max; j++)
                                if (p[j] != 0.0) acc += p[j] * a->v[kv + (uint64_t)j * a->v_ld + (size_t)h * dh + c];
                        o[c] = (float)(sum > 0.0 ? acc / sum : 0.0);
                    }
                }
            }
        }
    }
    free(p);
}

double ref_cumax(const double *x, uint32_t n, uint32_t k) {
    double mx = x[0], sum = 0, pre = 0;
    for (uint32_t l = 1; l < n; l++) mx = fmax(mx, x[l]);
    for (uint32_t l = 0; l < n; l++) {
        sum += exp(x[l] - mx);
        if (l <= k) pre += exp(x[l] - mx);
    }
    return pre / sum;
}

void ref_additive_attn(const ref_additive_args *a) {
    const uint32_t S = a->s_cap, A = a->a_dim;
    for (uint32_t b = 0; b < a->n_rows; b++) {
        const uint32_t m = b / a->group;
        const int32_t l = a->len[m];
        const uint32_t n = l < 0 ? 0 : (uint32_t)l < S ? (uint32_t)l : S;
        double *al = a->alpha + (size_t)b * S, mx = -INFINITY, sum = 0.0;
        for (uint32_t j = 0; j < S; j++) {
            al[j] = 0.0;
            if (j >= n) continue;
            const size_t rk = ((size_t)m * S + j) * A, re = ((size_t)b * S + j) * A;
            for (uint32_t i = 0; i < A; i++) {
                double x = a->q[(size_t)b * A + i] + a->k[rk + i];
                if (a->e1) x += a->e1[re + i];
                if (a->e2) x += a->e2[re + i];
                al[j] += a->v[i] * tanh(x);
            }
            mx = fmax(mx, al[j]);
        }
        for (uint32_t j = 0; j < n; j++) sum += (al[j] = exp(al[j] - mx));
        for (uint32_t j = 0; j < n; j++) al[j] /= sum;
        for (uint32_t c = 0; c < a->d_h; c++) {
            double acc = 0.0;
            for (uint32_t j = 0; j < n; j++) acc += al[j] * a->h[((size_t)m * S + j) * a->d_h + c];
            a->out[(size_t)b * a->d_h + c] = acc;
        }
    }
}

void ref_gru_cell(const double *xg, const double *hg, const double *hp, uint32_t h, double *out, double *keep) {
    for (uint32_t j = 0; j < h; j++) {
        const double hr = hg ? hg[j] : 0, hz = hg ? hg[h + j] : 0, hn = hg ? hg[2 * h + j] : 0;
        const double p = hp ? hp[j] : 0;
        const double r = 1 / (1 + exp(-(xg[j] + hr))), u = 1 / (1 + exp(-(xg[h + j] + hz)));
        const double n = tanh(xg[2 * h + j] + r * hn);
        out[j] = (1 - u) * n + u * p;
        if (keep) {
            keep[j] = r;
            keep[h + j] = u;
            keep[2 * h + j] = n;
            keep[3 * h + j] = hn;
            keep[4 * h + j] = p;
        }
    }
}
