/* SPDX-License-Identifier: MIT */
/* ref_model.c — a naive, double-precision Transformer/HySAN (and MG-SA:
 * n-gram phrase heads with max-pooling, optionally after a self-attention
 * inside each phrase, or the last state of an LSTM over each phrase;
 * optionally an LSTM or ON-LSTM over the phrases; phrase-based attention:
 * ConvKV / QueryK n-gram keys, homogeneous or heterogeneous heads)
 * forward pass written straight from
 * docs/ARCHITECTURES.md, reading weights from a validated .nmt image.  One sentence at a time, no padding, no cache: the
 * independent reference the OpenCL session is compared with. */
#include "ref_model.h"
#include "ref_ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct rm {
    const nmt_file *f;
    uint32_t d, H, ff, Le, Ld, Vt, r;
    int pre, shared, tied, fusion; /* 0 sum 1 concat 2 gate */
    double eps, scale;
    uint32_t nbe, nbd;
    int bre[8], brd[8]; /* kind*1000 + k */
    int32_t bos, eos;
    int act;            /* ffn_activation: 0 relu, 1 gelu, 2 swish */
    int pos;            /* position_encoding: 0 sinusoid, 1 sinusoid-2i, 2 sinusoid-interleaved, 3 none */
    uint32_t pos_offset;
    int gate_shared;    /* gate shared: one squeeze gate (gate.0) for the branches */
    uint64_t mg_mask;   /* MG-SA: encoder layers with phrase heads */
    int mg_n[64];       /* per head: 0 word, else n-gram size */
    int mg_lstm;        /* MG-SA: REC = LSTM (1) or ON-LSTM (2) over each phrase sequence */
    int mg_chunk;       /* ON-LSTM chunk size */
    int mg_san;         /* MG-SA: COM = self-attention inside each phrase, then max-pooling */
    int mg_com_lstm;    /* MG-SA: COM = the last state of an LSTM over each phrase */
    int mg_fallback;    /* MG-SA syntax heads (mg_n -1): n-grams of a sentence without spans */
    char ph[3][32];     /* phrase attention: ph_enc, ph_dec, ph_cross ("none": the Transformer's) */
    double *cap;        /* set: attend() adds its probabilities [nq, nk], mean over heads (cap_head
                           0) or of head cap_head - 1 (ref_model_cross_attention) */
    int cap_head;
} rm;

/* W(m, fmt, ...): the fp32 tensor of that name; geti: a metadata integer */
#define W(m, ...) ref_tensor((m)->f, "ref_model", __VA_ARGS__)
#define geti ref_meta_i64

static uint32_t parse_br(const char *s, int *out) {
    uint32_t n = 0;
    char buf[128];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *tok = strtok(buf, " ,"); tok; tok = strtok(NULL, " ,")) {
        if (!strcmp(tok, "global")) out[n++] = 0;
        else if (!strcmp(tok, "fw")) out[n++] = 1000;
        else if (!strcmp(tok, "bw")) out[n++] = 2000;
        else out[n++] = 3000 + atoi(tok + 6);
    }
    return n;
}

/* y[n][out] = x[n][in] W^T + b */
static void lin(const double *x, int n, int in, const float *w, const float *b, int out, double *y) {
    for (int i = 0; i < n; i++)
        for (int o = 0; o < out; o++) {
            double s = b ? b[o] : 0.0;
            for (int k = 0; k < in; k++) s += x[(size_t)i * in + k] * w[(size_t)o * in + k];
            y[(size_t)i * out + o] = s;
        }
}

static void lnorm(double *x, int n, int d, const float *g, const float *b, double eps) {
    for (int i = 0; i < n; i++) {
        double *r = x + (size_t)i * d, mu = 0, var = 0;
        for (int k = 0; k < d; k++) mu += r[k];
        mu /= d;
        for (int k = 0; k < d; k++) var += (r[k] - mu) * (r[k] - mu);
        var /= d;
        for (int k = 0; k < d; k++) r[k] = (r[k] - mu) / sqrt(var + eps) * g[k] + b[k];
    }
}

static int allowed(int br, int i, int j, int causal) {
    if (causal && j > i) return 0;
    int kind = br / 1000, k = br % 1000;
    if (kind == 1) return j <= i;
    if (kind == 2) return j >= i;
    if (kind == 3) return abs(i - j) <= k;
    return 1;
}

/* Multi-head attention of nq queries over nk keys for one branch. */
static void attend(const rm *m, const double *q, const double *k, const double *v, int nq, int nk,
                   int br, int causal, double *out /* nq x d */) {
    int d = (int)m->d, dh = d / (int)m->H;
    double *p = malloc(sizeof(double) * (size_t)nk);
    for (int h = 0; h < (int)m->H; h++)
        for (int i = 0; i < nq; i++) {
            double mx = -INFINITY, sum = 0;
            for (int j = 0; j < nk; j++) {
                if (!allowed(br, i, j, causal)) { p[j] = -INFINITY; continue; }
                double s = 0;
                for (int c = 0; c < dh; c++) s += q[(size_t)i * d + h * dh + c] * k[(size_t)j * d + h * dh + c];
                p[j] = s / sqrt((double)dh);
                if (p[j] > mx) mx = p[j];
            }
            for (int j = 0; j < nk; j++) {
                p[j] = p[j] == -INFINITY ? 0 : exp(p[j] - mx);
                sum += p[j];
            }
            if (m->cap && sum > 0 && (m->cap_head == 0 || m->cap_head == h + 1))
                for (int j = 0; j < nk; j++) m->cap[(size_t)i * nk + j] += p[j] / sum / (m->cap_head ? 1.0 : m->H);
            for (int c = 0; c < dh; c++) {
                double acc = 0;
                for (int j = 0; j < nk; j++) acc += p[j] * v[(size_t)j * d + h * dh + c];
                out[(size_t)i * d + h * dh + c] = sum > 0 ? acc / sum : 0;
            }
        }
    free(p);
}

static double sigm(double x) { return 1.0 / (1.0 + exp(-x)); }


/* MG-SA's LSTM / ON-LSTM interaction over the M phrase rows of g (in
 * place): z = g_t W_ih^T + b + h_{t-1} W_hh^T, gates i, f, g, o, then
 * ON-LSTM's master forget / input gates over d / chunk chunks (ft =
 * cumax, it = 1 - cumax, w = ft it, f^ = f w + ft - w, i^ = i w + it - w). */
static void mg_lstm(const rm *m, const char *pre, const char *name, int on, double *g, int M) {
    const int d = (int)m->d, nm = on ? d / m->mg_chunk : 0, G = 4 * d + 2 * nm;
    const float *wi = W(m, "%s.%s.ih.weight", pre, name), *bi = W(m, "%s.%s.ih.bias", pre, name);
    const float *wh = W(m, "%s.%s.hh.weight", pre, name);
    double *z = malloc(sizeof(double) * (size_t)G), *h = calloc((size_t)d, sizeof(double));
    double *c = calloc((size_t)d, sizeof(double));
    for (int t = 0; t < M; t++) {
        for (int k = 0; k < G; k++) {
            double acc = bi[k];
            for (int j = 0; j < d; j++)
                acc += g[(size_t)t * d + j] * wi[(size_t)k * d + j] + h[j] * wh[(size_t)k * d + j];
            z[k] = acc;
        }
        for (int j = 0; j < d; j++) {
            double f = sigm(z[d + j]), i = sigm(z[j]);
            if (nm) {
                const double ft = ref_cumax(z + 4 * d, (uint32_t)nm, (uint32_t)(j / m->mg_chunk));
                const double it = 1 - ref_cumax(z + 4 * d + nm, (uint32_t)nm, (uint32_t)(j / m->mg_chunk)), w = ft * it;
                f = f * w + ft - w;
                i = i * w + it - w;
            }
            c[j] = f * c[j] + i * tanh(z[2 * d + j]);
            h[j] = sigm(z[3 * d + j]) * tanh(c[j]);
            g[(size_t)t * d + j] = h[j];
        }
    }
    free(z); free(h); free(c);
}

/* MG-SA's SAN composition: every token attends (all heads) over the
 * tokens of its n-gram phrase (positions t with t / g == i / g). */
static void mg_san(const rm *m, const char *pre, const double *x, int n, int g, double *out) {
    const int d = (int)m->d, H = (int)m->H, dh = d / H;
    double *q = malloc(sizeof(double) * (size_t)n * d), *k = malloc(sizeof(double) * (size_t)n * d);
    double *v = malloc(sizeof(double) * (size_t)n * d), *p = malloc(sizeof(double) * (size_t)n);
    lin(x, n, d, W(m, "%s.phrase_san.q.weight", pre), W(m, "%s.phrase_san.q.bias", pre), d, q);
    lin(x, n, d, W(m, "%s.phrase_san.k.weight", pre), W(m, "%s.phrase_san.k.bias", pre), d, k);
    lin(x, n, d, W(m, "%s.phrase_san.v.weight", pre), W(m, "%s.phrase_san.v.bias", pre), d, v);
    for (int h = 0; h < H; h++)
        for (int i = 0; i < n; i++) {
            double mx = -INFINITY, sum = 0;
            for (int j = 0; j < n; j++) {
                p[j] = -INFINITY;
                if (j / g != i / g) continue;
                double s = 0;
                for (int c = 0; c < dh; c++) s += q[(size_t)i * d + h * dh + c] * k[(size_t)j * d + h * dh + c];
                p[j] = s / sqrt((double)dh);
                mx = fmax(mx, p[j]);
            }
            for (int j = 0; j < n; j++) sum += p[j] = p[j] == -INFINITY ? 0 : exp(p[j] - mx);
            for (int c = 0; c < dh; c++) {
                double acc = 0;
                for (int j = 0; j < n; j++) acc += p[j] * v[(size_t)j * d + h * dh + c];
                out[(size_t)i * d + h * dh + c] = acc / sum;
            }
        }
    free(q); free(k); free(v); free(p);
}

/* MG-SA: head h's output over the phrase memory of x: phrases of n_h
 * consecutive tokens (the last shorter), each the column-wise max of its
 * tokens, projected by W_k / W_v (head h's columns), attended globally. */
/* MG-SA syntax heads: the spans of the next forward's source (NULL: none). */
static const nmt_span *ref_spans;
static uint32_t ref_n_spans;
static const uint8_t *ref_labels; /* the tag loss's labels of the spans (NULL: no tag loss) */
static double ref_tag;            /* L_tag summed since ref_model_tag_loss */

void ref_model_set_spans(const nmt_span *spans, uint32_t n_spans) {
    ref_spans = n_spans ? spans : NULL;
    ref_n_spans = n_spans;
    ref_labels = NULL;
}

void ref_model_set_span_labels(const uint8_t *labels) { ref_labels = labels; }

double ref_model_tag_loss(void) {
    const double t = ref_tag;
    ref_tag = 0.0;
    return t;
}

/* MG-SA tag loss of one layer's syntactic phrases hg [M, d] (phrase p is
 * span lab_of[p], -1 none): -log softmax(W_t g + b_t)[label]. */
static void ref_tag_loss(const rm *m, const char *pre, const double *hg, const int *lab_of, int M) {
    const int d = (int)m->d, L = 8;
    const float *Wt = W(m, "train.%s.phrase_tag.weight", pre), *b = W(m, "train.%s.phrase_tag.bias", pre);
    for (int p = 0; p < M; p++) {
        if (lab_of[p] < 0) continue;
        double z[8], mx = -INFINITY, se = 0.0;
        for (int j = 0; j < L; j++) {
            z[j] = b[j];
            for (int c = 0; c < d; c++) z[j] += (double)Wt[(size_t)j * d + c] * hg[(size_t)p * d + c];
            mx = fmax(mx, z[j]);
        }
        for (int j = 0; j < L; j++) se += exp(z[j] - mx);
        ref_tag -= z[ref_labels[lab_of[p]]] - mx - log(se);
    }
}

/* Head h's phrases of n tokens as (start, length) in ph: n-grams of g, or
 * (syntax, g < 0) the spans with every other token a phrase of its own,
 * n-grams of mg_fallback without spans.  Returns their count. */
static int ref_phrases(const rm *m, int g, int n, int *ph, int *lab_of) {
    int M = 0;
    if (g < 0 && ref_spans == NULL) g = m->mg_fallback;
    for (int t = 0, k = 0; t < n; M++) {
        int w = g > 0 ? (n - t < g ? n - t : g) : 1;
        lab_of[M] = -1;
        if (g < 0 && k < (int)ref_n_spans && (int)ref_spans[k].start == t) {
            lab_of[M] = k;
            w = (int)ref_spans[k++].len;
        }
        ph[2 * M] = t;
        ph[2 * M + 1] = w;
        t += w;
    }
    return M;
}

static void mg_phrase_heads(const rm *m, const char *pre, const double *x, int n, const double *q, double *out) {
    const int d = (int)m->d, dh = d / (int)m->H;
    int *ph = malloc(sizeof(int) * 2 * (size_t)n), *lab_of = malloc(sizeof(int) * (size_t)n), tagged = 0;
    for (int h = 0; h < (int)m->H; h++) {
        const int g = m->mg_n[h];
        if (g == 0) continue;
        const int M = ref_phrases(m, g, n, ph, lab_of);
        double *hg = malloc(sizeof(double) * (size_t)M * d), *k = malloc(sizeof(double) * (size_t)M * d);
        double *v = malloc(sizeof(double) * (size_t)M * d), *o = malloc(sizeof(double) * (size_t)n * d);
        double *tok = malloc(sizeof(double) * (size_t)n * d); /* what is pooled: x, or the composition's attention */
        if (m->mg_san) mg_san(m, pre, x, n, g, tok);
        else memcpy(tok, x, sizeof(double) * (size_t)n * d);
        for (int p = 0; p < M && m->mg_com_lstm; p++) {
            /* LSTM composition: the state after the phrase's last token */
            const int len = n - p * g < g ? n - p * g : g;
            double *seq = malloc(sizeof(double) * (size_t)len * d);
            memcpy(seq, x + (size_t)p * g * d, sizeof(double) * (size_t)len * d);
            mg_lstm(m, pre, "phrase_com_lstm", 0, seq, len);
            memcpy(hg + (size_t)p * d, seq + (size_t)(len - 1) * d, sizeof(double) * (size_t)d);
            free(seq);
        }
        for (int p = 0; p < M && !m->mg_com_lstm; p++)
            for (int c = 0; c < d; c++) {
                double mx = -INFINITY;
                for (int t = ph[2 * p]; t < ph[2 * p] + ph[2 * p + 1]; t++) mx = fmax(mx, tok[(size_t)t * d + c]);
                hg[(size_t)p * d + c] = mx;
            }
        if (g < 0 && ref_labels && !tagged++) ref_tag_loss(m, pre, hg, lab_of, M); /* the first syntax head */
        if (m->mg_lstm) mg_lstm(m, pre, "phrase_lstm", m->mg_lstm == 2, hg, M);
        lin(hg, M, d, W(m, "%s.k.weight", pre), W(m, "%s.k.bias", pre), d, k);
        lin(hg, M, d, W(m, "%s.v.weight", pre), W(m, "%s.v.bias", pre), d, v);
        attend(m, q, k, v, n, M, 0, 0, o);  /* every head over the phrases; keep head h */
        for (int i = 0; i < n; i++)
            memcpy(out + (size_t)i * d + h * dh, o + (size_t)i * d + h * dh, sizeof(double) * (size_t)dh);
        free(hg); free(k); free(v); free(o); free(tok);
    }
    free(ph);
    free(lab_of);
}

/* HySAN self-attention (or cross-attention when mem != NULL); mg: an MG-SA
 * encoder layer (phrase heads replace their columns). */
/* Interleaved phrase attention (unigram + bigram, from the paper's
 * equations 9-17): heterogeneous unigram and bigram keys; unigram queries
 * give u_j, bigram queries Conv2 over the query inputs (x_{j-1}, x_j) give
 * b_j (b_0 = 0); the output at j is W_o [b_j; u_j; b_{j+1}] (encoder, b_n
 * = 0) or W_o [b_j; u_j] (decoder, cross).  Output projection included. */
static void ph_interleaved(const rm *m, const char *pre, int queryk, const double *x, int n, const double *src,
                           int ns, int causal, int enc, double *out) {
    const int d = (int)m->d, H = (int)m->H, dh = d / H;
    double *q = malloc(sizeof(double) * (size_t)n * d), *k = malloc(sizeof(double) * (size_t)ns * d);
    double *v = malloc(sizeof(double) * (size_t)ns * d);
    lin(x, n, d, W(m, "%s.q.weight", pre), W(m, "%s.q.bias", pre), d, q);
    lin(src, ns, d, W(m, "%s.k.weight", pre), W(m, "%s.k.bias", pre), d, k);
    lin(src, ns, d, W(m, "%s.v.weight", pre), W(m, "%s.v.bias", pre), d, v);
    /* windows (pos - 1, pos) of the key inputs and of the query inputs */
    double *sw = calloc((size_t)ns * 2 * d, sizeof(double)), *xw = calloc((size_t)n * 2 * d, sizeof(double));
    for (int j = 0; j < ns; j++)
        for (int u = 0; u < 2; u++)
            if (j - 1 + u >= 0) memcpy(sw + ((size_t)j * 2 + u) * d, src + (size_t)(j - 1 + u) * d, sizeof(double) * d);
    for (int j = 0; j < n; j++)
        for (int u = 0; u < 2; u++)
            if (j - 1 + u >= 0) memcpy(xw + ((size_t)j * 2 + u) * d, x + (size_t)(j - 1 + u) * d, sizeof(double) * d);
    /* bigram keys/values (ConvKV: kv2 [2d]; QueryK: v2 [d]); the two kinds of queries */
    double *kv2 = malloc(sizeof(double) * (size_t)ns * 2 * d);
    double *qu1 = q, *qx1 = malloc(sizeof(double) * (size_t)n * 2 * d); /* unigram queries, QueryK's 2-tap kernels */
    double *qb = malloc(sizeof(double) * (size_t)n * d), *qbx = malloc(sizeof(double) * (size_t)n * 2 * d);
    if (!queryk) {
        lin(sw, ns, 2 * d, W(m, "%s.ph2.kv.weight", pre), W(m, "%s.ph2.kv.bias", pre), 2 * d, kv2);
    } else {
        lin(sw, ns, 2 * d, W(m, "%s.ph2.v.weight", pre), W(m, "%s.ph2.v.bias", pre), d, kv2);
        lin(x, n, d, W(m, "%s.ph2.q.weight", pre), W(m, "%s.ph2.q.bias", pre), 2 * d, qx1);
        lin(xw, n, 2 * d, W(m, "%s.phq.q2.weight", pre), W(m, "%s.phq.q2.bias", pre), 2 * d, qbx);
    }
    lin(xw, n, 2 * d, W(m, "%s.phq.q.weight", pre), W(m, "%s.phq.q.bias", pre), d, qb);
    const int vld = queryk ? d : 2 * d, voff = queryk ? 0 : d;
    double *ub = calloc((size_t)n * 2 * d, sizeof(double)); /* rows b_j | u_j */
    double *sc = malloc(sizeof(double) * 2 * (size_t)ns);
    for (int which = 0; which < 2; which++) { /* 0: unigram queries -> u, 1: bigram queries -> b */
        const double *qa = which ? qb : qu1, *qk = which ? qbx : qx1;
        for (int h = 0; h < H; h++)
            for (int i = which; i < n; i++) {
                double mx = -INFINITY;
                for (int j = 0; j < ns; j++) {
                    const int ok1 = !causal || j <= i, ok2 = ok1 && j >= 1;
                    double a1 = 0, a2 = 0;
                    for (int c = 0; c < dh; c++) a1 += qa[(size_t)i * d + h * dh + c] * k[(size_t)j * d + h * dh + c];
                    a1 /= sqrt((double)dh);
                    if (!queryk) {
                        for (int c = 0; c < dh; c++) a2 += qa[(size_t)i * d + h * dh + c] * kv2[(size_t)j * 2 * d + h * dh + c];
                        a2 /= sqrt((double)dh);
                    } else {
                        for (int u = 0; u < 2; u++)
                            if (j - 1 + u >= 0)
                                for (int c = 0; c < dh; c++)
                                    a2 += qk[(size_t)i * 2 * d + (h * 2 + u) * dh + c] * k[(size_t)(j - 1 + u) * d + h * dh + c];
                        a2 /= sqrt(2.0 * dh);
                    }
                    sc[j] = ok1 ? a1 : -INFINITY;
                    sc[ns + j] = ok2 ? a2 : -INFINITY;
                    mx = fmax(mx, fmax(sc[j], sc[ns + j]));
                }
                double sum = 0;
                for (int j = 0; j < 2 * ns; j++) sum += sc[j] == -INFINITY ? 0 : exp(sc[j] - mx);
                for (int c = 0; c < dh; c++) {
                    double acc = 0;
                    for (int j = 0; j < ns; j++) {
                        if (sc[j] != -INFINITY) acc += exp(sc[j] - mx) * v[(size_t)j * d + h * dh + c];
                        if (sc[ns + j] != -INFINITY) acc += exp(sc[ns + j] - mx) * kv2[(size_t)j * vld + voff + h * dh + c];
                    }
                    ub[(size_t)i * 2 * d + (which ? 0 : d) + h * dh + c] = acc / sum;
                }
            }
    }
    const int win = enc ? 3 : 2;
    double *cat = calloc((size_t)n * win * d, sizeof(double));
    for (int i = 0; i < n; i++) {
        memcpy(cat + (size_t)i * win * d, ub + (size_t)i * 2 * d, sizeof(double) * 2 * d);
        if (enc && i + 1 < n) memcpy(cat + (size_t)i * win * d + 2 * d, ub + (size_t)(i + 1) * 2 * d, sizeof(double) * d);
    }
    lin(cat, n, win * d, W(m, "%s.o.weight", pre), W(m, "%s.o.bias", pre), d, out);
    free(q); free(k); free(v); free(sw); free(xw); free(kv2); free(qx1); free(qb); free(qbx); free(ub); free(sc);
    free(cat);
}

/* Phrase-based attention (docs/ARCHITECTURES.md, "phrase"), from its
 * formulas: queries x (n rows), keys/values from src (ns rows), spec
 * "METHOD:STRUCTURE:DIGITS"; the output projection included.  Window u of
 * the key ending at j is position j - taps + 1 + u (zero before 0). */
static void ph_attention(const rm *m, const char *pre, const char *spec, const double *x, int n, const double *src,
                         int ns, int causal, double *out) {
    const int d = (int)m->d, H = (int)m->H, dh = d / H, queryk = !strncmp(spec, "queryk", 6);
    const int homo = strstr(spec, ":homo:") != NULL;
    if (strstr(spec, ":inter:")) {
        ph_interleaved(m, pre, queryk, x, n, src, ns, causal, src == x && !causal, out);
        return;
    }
    const char *digits = strrchr(spec, ':') + 1;
    /* per head: the n-gram sizes its keys come in (homo: one; hetero: all) */
    int sizes[8], n_sizes = 0, head_n[64];
    for (int i = 0, h = 0; digits[i]; i++) {
        const int v = digits[i] - '0';
        if (homo)
            for (int k = 0; k < v; k++) head_n[h++] = i + 1;
        else
            sizes[n_sizes++] = v;
    }
    double *q = malloc(sizeof(double) * (size_t)n * d), *k = malloc(sizeof(double) * (size_t)ns * d);
    double *v = malloc(sizeof(double) * (size_t)ns * d), *ctx = calloc((size_t)n * d, sizeof(double));
    lin(x, n, d, W(m, "%s.q.weight", pre), W(m, "%s.q.bias", pre), d, q);
    lin(src, ns, d, W(m, "%s.k.weight", pre), W(m, "%s.k.bias", pre), d, k);
    lin(src, ns, d, W(m, "%s.v.weight", pre), W(m, "%s.v.bias", pre), d, v);
    /* score and value of key j of size nn for head h: sc[i][j], val[j][c] */
    const int maxk = 4 * ns;
    double *sc = malloc(sizeof(double) * (size_t)n * maxk), *val = malloc(sizeof(double) * (size_t)maxk * dh);
    for (int h = 0; h < H; h++) {
        int ks = 0; /* keys of this head, over its sizes */
        const int nsz = homo ? 1 : n_sizes;
        for (int zi = 0; zi < nsz; zi++) {
            const int nn = homo ? head_n[h] : sizes[zi];
            int h0 = 0, nh = H; /* the segment's heads: homo, the run of heads of size nn */
            if (homo) {
                while (head_n[h0] != nn) h0++;
                nh = 0;
                while (h0 + nh < H && head_n[h0 + nh] == nn) nh++;
            }
            const int hl = h - h0, w = nh * dh, own = nn >= 2, taps = homo ? nn - 1 : nn;
            const float *Wkv = NULL, *Bkv = NULL, *Wq = NULL, *Bq = NULL, *Wv = NULL, *Bv = NULL;
            if (own && !queryk) {
                Wkv = W(m, "%s.ph%d.kv.weight", pre, nn);
                if (!homo) Bkv = W(m, "%s.ph%d.kv.bias", pre, nn);
            }
            if (own && queryk) {
                Wq = W(m, "%s.ph%d.q.weight", pre, nn);
                Wv = W(m, "%s.ph%d.v.weight", pre, nn);
                if (!homo) {
                    Bq = W(m, "%s.ph%d.q.bias", pre, nn);
                    Bv = W(m, "%s.ph%d.v.bias", pre, nn);
                }
            }
            for (int j = 0; j < ns; j++, ks++) {
                /* convolved rows (ConvKV keys, both methods' values) of the window */
                double kc[64], vc[64];
                for (int c = 0; c < dh; c++) {
                    double kk = 0, vv = 0;
                    if (!own || homo) { /* the Transformer's row: unigram, or the homogeneous last tap */
                        kk = k[(size_t)j * d + h * dh + c];
                        vv = v[(size_t)j * d + h * dh + c];
                    }
                    if (own) {
                        const int rk = hl * dh + c; /* row of the head's column in the segment's block */
                        if (!homo) { kk = Bkv ? Bkv[h * dh + c] : 0; vv = Bkv ? Bkv[d + h * dh + c] : Bv ? Bv[h * dh + c] : 0; }
                        for (int u = 0; u < taps; u++) {
                            const int pos = j - (nn - 1) + u;
                            if (pos < 0) continue;
                            for (int e = 0; e < d; e++) {
                                const double xe = src[(size_t)pos * d + e];
                                const size_t col = (size_t)u * d + e, K = (size_t)taps * d;
                                if (!queryk) {
                                    const int rowk = homo ? rk : h * dh + c, rowv = homo ? w + rk : d + h * dh + c;
                                    kk += Wkv[(size_t)rowk * K + col] * xe;
                                    vv += Wkv[(size_t)rowv * K + col] * xe;
                                } else {
                                    vv += Wv[(size_t)(homo ? rk : h * dh + c) * K + col] * xe;
                                }
                            }
                        }
                    }
                    kc[c] = kk;
                    vc[c] = vv;
                }
                for (int c = 0; c < dh; c++) val[(size_t)ks * dh + c] = vc[c];
                for (int i = 0; i < n; i++) {
                    const int ok = j < ns && (!causal || j <= i) && (homo || j >= nn - 1);
                    double a = 0;
                    if (!queryk || !own) {
                        for (int c = 0; c < dh; c++) a += q[(size_t)i * d + h * dh + c] * kc[c];
                        a /= sqrt((double)dh);
                    } else {
                        /* QueryK: tap u's query (x W_q^(u)) . k_{j - nn + 1 + u} */
                        for (int u = 0; u < nn; u++) {
                            const int pos = j - (nn - 1) + u;
                            if (pos < 0) continue;
                            for (int c = 0; c < dh; c++) {
                                double qu;
                                if (homo && u == nn - 1) {
                                    qu = q[(size_t)i * d + h * dh + c];
                                } else {
                                    const int row = homo ? (hl * (nn - 1) + u) * dh + c : (h * nn + u) * dh + c;
                                    qu = Bq ? Bq[row] : 0;
                                    for (int e = 0; e < d; e++) qu += Wq[(size_t)row * d + e] * x[(size_t)i * d + e];
                                }
                                a += qu * k[(size_t)pos * d + h * dh + c];
                            }
                        }
                        a /= sqrt((double)nn * dh);
                    }
                    sc[(size_t)i * maxk + ks] = ok ? a : -INFINITY;
                }
            }
        }
        for (int i = 0; i < n; i++) {
            double mx = -INFINITY, sum = 0;
            for (int j = 0; j < ks; j++) mx = fmax(mx, sc[(size_t)i * maxk + j]);
            for (int c = 0; c < dh; c++) {
                double acc = 0;
                sum = 0;
                for (int j = 0; j < ks; j++) {
                    const double p = sc[(size_t)i * maxk + j] == -INFINITY ? 0 : exp(sc[(size_t)i * maxk + j] - mx);
                    sum += p;
                    acc += p * val[(size_t)j * dh + c];
                }
                ctx[(size_t)i * d + h * dh + c] = sum > 0 ? acc / sum : 0;
            }
        }
    }
    lin(ctx, n, d, W(m, "%s.o.weight", pre), W(m, "%s.o.bias", pre), d, out);
    free(q); free(k); free(v); free(ctx); free(sc); free(val);
}

static void attention(const rm *m, const char *pre, const double *x, int n, const double *mem, int nm,
                      const int *br, uint32_t nbr, int causal, int mg, double *out) {
    int d = (int)m->d;
    size_t nd = (size_t)n * d;
    double *q = malloc(sizeof(double) * nd), *k, *v;
    const double *kvsrc = mem ? mem : x;
    int nk = mem ? nm : n;
    k = malloc(sizeof(double) * (size_t)nk * d);
    v = malloc(sizeof(double) * (size_t)nk * d);
    lin(x, n, d, W(m, "%s.q.weight", pre), W(m, "%s.q.bias", pre), d, q);
    lin(kvsrc, nk, d, W(m, "%s.k.weight", pre), W(m, "%s.k.bias", pre), d, k);
    lin(kvsrc, nk, d, W(m, "%s.v.weight", pre), W(m, "%s.v.bias", pre), d, v);
    double *ctx = calloc(nd * nbr, sizeof(double)), *xb = malloc(sizeof(double) * nd);
    for (uint32_t b = 0; b < nbr; b++) {
        attend(m, q, k, v, n, nk, br[b], causal, xb);
        if (mg) mg_phrase_heads(m, pre, x, n, q, xb);
        for (int i = 0; i < n; i++)
            memcpy(ctx + ((size_t)i * nbr + b) * d, xb + (size_t)i * d, sizeof(double) * d);
    }
    double *fused = calloc(nd, sizeof(double));
    int in_dim = d;
    if (nbr == 1) {
        memcpy(fused, ctx, sizeof(double) * nd);
    } else if (m->fusion == 1) {
        free(fused);
        fused = ctx;
        ctx = NULL;
        in_dim = d * (int)nbr;
    } else {
        int dr = d / (int)m->r;
        double *g1 = malloc(sizeof(double) * (size_t)n * dr), *g2 = malloc(sizeof(double) * nd);
        for (uint32_t b = 0; b < nbr; b++) {
            for (int i = 0; i < n; i++) memcpy(xb + (size_t)i * d, ctx + ((size_t)i * nbr + b) * d, sizeof(double) * d);
            if (m->fusion == 0) {
                for (size_t e = 0; e < nd; e++) fused[e] += xb[e];
                continue;
            }
            const uint32_t gb = m->gate_shared ? 0 : b; /* gate shared: gate.0 for every branch */
            lin(xb, n, d, W(m, "%s.gate.%u.fc1.weight", pre, gb), W(m, "%s.gate.%u.fc1.bias", pre, gb), dr, g1);
            for (size_t e = 0; e < (size_t)n * dr; e++) g1[e] = g1[e] > 0 ? g1[e] : 0;
            lin(g1, n, dr, W(m, "%s.gate.%u.fc2.weight", pre, gb), W(m, "%s.gate.%u.fc2.bias", pre, gb), d, g2);
            for (size_t e = 0; e < nd; e++) fused[e] += xb[e] / (1.0 + exp(-g2[e]));
        }
        free(g1);
        free(g2);
    }
    lin(fused, n, in_dim, W(m, "%s.o.weight", pre), W(m, "%s.o.bias", pre), d, out);
    free(q); free(k); free(v); free(ctx); free(xb); free(fused);
}

static void ffn(const rm *m, const char *pre, const double *x, int n, double *out) {
    double *h = malloc(sizeof(double) * (size_t)n * m->ff);
    lin(x, n, (int)m->d, W(m, "%s.ffn.fc1.weight", pre), W(m, "%s.ffn.fc1.bias", pre), (int)m->ff, h);
    for (size_t e = 0; e < (size_t)n * m->ff; e++) {
        const double v = h[e];
        h[e] = m->act == 1 ? 0.5 * v * (1.0 + erf(v / sqrt(2.0))) : m->act == 2 ? v / (1.0 + exp(-v)) : v > 0 ? v : 0;
    }
    lin(h, n, (int)m->ff, W(m, "%s.ffn.fc2.weight", pre), W(m, "%s.ffn.fc2.bias", pre), (int)m->d, out);
    free(h);
}

/* Residual sub-layer; kind 0 self, 1 cross, 2 ffn. */
static void sub(const rm *m, const char *layer, int lnidx, int kind, double *x, int n, const double *mem,
                int nm, const int *br, uint32_t nbr, int causal, int mg) {
    size_t nd = (size_t)n * m->d;
    double *in = malloc(sizeof(double) * nd), *out = malloc(sizeof(double) * nd);
    char pre[64];
    memcpy(in, x, sizeof(double) * nd);
    if (m->pre) lnorm(in, n, (int)m->d, W(m, "%s.ln%d.weight", layer, lnidx), W(m, "%s.ln%d.bias", layer, lnidx), m->eps);
    const char *ph = kind == 2 ? "none" : m->ph[kind == 1 ? 2 : layer[0] == 'd'];
    if (kind == 0) snprintf(pre, sizeof pre, "%s.self_attn", layer);
    if (kind == 1) snprintf(pre, sizeof pre, "%s.cross_attn", layer);
    if (kind < 2 && strcmp(ph, "none")) ph_attention(m, pre, ph, in, n, kind ? mem : in, kind ? nm : n, causal, out);
    else if (kind == 0) attention(m, pre, in, n, NULL, 0, br, nbr, causal, mg, out);
    else if (kind == 1) { static const int g[1] = {0}; attention(m, pre, in, n, mem, nm, g, 1, 0, 0, out); }
    if (kind == 2) ffn(m, layer, in, n, out);
    for (size_t e = 0; e < nd; e++) x[e] += out[e];
    if (!m->pre) lnorm(x, n, (int)m->d, W(m, "%s.ln%d.weight", layer, lnidx), W(m, "%s.ln%d.bias", layer, lnidx), m->eps);
    free(in);
    free(out);
}

/* The position term of column c at position p in the model's layout. */
static double pos_term(const rm *m, int p, int c) {
    const int d = (int)m->d, half = d / 2;
    const double q = (double)p + m->pos_offset;
    switch (m->pos) {
    case 0: {
        const int i = c < half ? c : c - half;
        const double w = pow(10000.0, -(double)i / (double)(half - 1));
        return c < half ? sin(q * w) : cos(q * w);
    }
    case 1: {
        const int i = c < half ? c : c - half;
        const double w = pow(10000.0, -2.0 * i / d);
        return c < half ? sin(q * w) : cos(q * w);
    }
    case 2: {
        const double w = pow(10000.0, -2.0 * (c / 2) / d);
        return c % 2 ? cos(q * w) : sin(q * w);
    }
    default: return 0.0;
    }
}

static void embed(const rm *m, const float *E, const int32_t *tok, int n, double *x) {
    const int d = (int)m->d;
    for (int p = 0; p < n; p++)
        for (int c = 0; c < d; c++) x[(size_t)p * d + c] = E[(size_t)tok[p] * d + c] * m->scale + pos_term(m, p, c);
}

/* The forward; cap (optional): the cross-attention probabilities of decoder
 * layer cap_layer (1-based, 0 = last), head cap_head (0 = mean). */
static int forward(const nmt_file *f, const int32_t *src, uint32_t src_len, const int32_t *tgt, uint32_t tgt_len,
                   double *logits, double *cap, uint32_t cap_layer, uint32_t cap_head) {
    rm m = {0};
    m.f = f;
    m.d = (uint32_t)geti(f, "d_model", 0);
    m.H = (uint32_t)geti(f, "n_heads", 0);
    m.ff = (uint32_t)geti(f, "d_ff", 0);
    m.Le = (uint32_t)geti(f, "enc_layers", 0);
    m.Ld = (uint32_t)geti(f, "dec_layers", 0);
    m.Vt = (uint32_t)geti(f, "tgt_vocab", 0);
    m.r = (uint32_t)geti(f, "gate_reduction", 4);
    m.shared = (int)geti(f, "shared_embeddings", 0);
    m.tied = (int)geti(f, "tied_output", 0);
    m.bos = (int32_t)geti(f, "bos_id", 0);
    m.eos = (int32_t)geti(f, "eos_id", 1);
    nmt_file_get_f64_or(f, "ln_eps", 1e-5, &m.eps);
    nmt_file_get_f64_or(f, "embed_scale", sqrt((double)m.d), &m.scale);
    char s[128];
    nmt_file_get_str_or(f, "norm", "post", s, sizeof s);
    m.pre = !strcmp(s, "pre");
    nmt_file_get_str_or(f, "ffn_activation", "relu", s, sizeof s);
    m.act = !strcmp(s, "gelu") ? 1 : !strcmp(s, "swish") ? 2 : 0;
    nmt_file_get_str_or(f, "position_encoding", "sinusoid", s, sizeof s);
    m.pos = !strcmp(s, "sinusoid-2i") ? 1 : !strcmp(s, "sinusoid-interleaved") ? 2 : !strcmp(s, "none") ? 3 : 0;
    m.pos_offset = (uint32_t)geti(f, "position_offset", 0);
    nmt_file_get_str_or(f, "gate", "branch", s, sizeof s);
    m.gate_shared = !strcmp(s, "shared");
    nmt_file_get_str_or(f, "fusion", "sum", s, sizeof s);
    m.fusion = !strcmp(s, "sum") ? 0 : !strcmp(s, "concat") ? 1 : 2;
    nmt_file_get_str_or(f, "enc_branches", "global", s, sizeof s);
    m.nbe = parse_br(s, m.bre);
    nmt_file_get_str_or(f, "dec_branches", "global", s, sizeof s);
    m.nbd = parse_br(s, m.brd);
    nmt_file_get_str_or(f, "ph_enc", "none", m.ph[0], sizeof m.ph[0]);
    nmt_file_get_str_or(f, "ph_dec", "none", m.ph[1], sizeof m.ph[1]);
    nmt_file_get_str_or(f, "ph_cross", "none", m.ph[2], sizeof m.ph[2]);
    nmt_file_get_str_or(f, "arch", "transformer", s, sizeof s);
    if (!strcmp(s, "mgsa")) {
        char buf[256];
        nmt_file_get_str_or(f, "mg_layers", "1", buf, sizeof buf);
        for (char *tok = strtok(buf, " ,"); tok; tok = strtok(NULL, " ,")) m.mg_mask |= 1ull << (atoi(tok) - 1);
        nmt_file_get_str_or(f, "mg_heads", "word word ngram:2 ngram:3", buf, sizeof buf);
        int h = 0;
        for (char *tok = strtok(buf, " ,"); tok && h < 64; tok = strtok(NULL, " ,"))
            m.mg_n[h++] = !strcmp(tok, "syntax") ? -1 : strncmp(tok, "ngram:", 6) ? 0 : atoi(tok + 6);
        m.mg_fallback = (int)geti(f, "mg_syntax_fallback", 2);
        nmt_file_get_str_or(f, "mg_interact", "none", buf, sizeof buf);
        m.mg_lstm = !strcmp(buf, "lstm") ? 1 : !strcmp(buf, "onlstm") ? 2 : 0;
        m.mg_chunk = (int)geti(f, "mg_chunk", 8);
        nmt_file_get_str_or(f, "mg_compose", "max", buf, sizeof buf);
        m.mg_san = !strcmp(buf, "san");
        m.mg_com_lstm = !strcmp(buf, "lstm");
    }
    const int d = (int)m.d;

    /* encoder over src + EOS (source_eos 0: src alone; an empty one is EOS) */
    const int src_eos = (int)geti(f, "source_eos", 1) || src_len == 0;
    int ns = (int)src_len + src_eos;
    int32_t *st = malloc(sizeof(int32_t) * (size_t)ns);
    memcpy(st, src, sizeof(int32_t) * src_len);
    if (src_eos) st[src_len] = m.eos;
    double *x = malloc(sizeof(double) * (size_t)ns * d);
    embed(&m, W(&m, "src_embed"), st, ns, x);
    char layer[32];
    for (uint32_t l = 0; l < m.Le; l++) {
        snprintf(layer, sizeof layer, "enc.%u", l);
        sub(&m, layer, 1, 0, x, ns, NULL, 0, m.bre, m.nbe, 0, (int)(m.mg_mask >> l & 1));
        sub(&m, layer, 2, 2, x, ns, NULL, 0, NULL, 0, 0, 0);
    }
    if (m.pre) lnorm(x, ns, d, W(&m, "enc.ln.weight"), W(&m, "enc.ln.bias"), m.eps);

    /* decoder over BOS + tgt */
    int nt = (int)tgt_len + 1;
    int32_t *tt = malloc(sizeof(int32_t) * (size_t)nt);
    tt[0] = m.bos;
    memcpy(tt + 1, tgt, sizeof(int32_t) * tgt_len);
    const float *Et = m.shared ? W(&m, "src_embed") : W(&m, "tgt_embed");
    double *y = malloc(sizeof(double) * (size_t)nt * d);
    embed(&m, Et, tt, nt, y);
    for (uint32_t l = 0; l < m.Ld; l++) {
        snprintf(layer, sizeof layer, "dec.%u", l);
        sub(&m, layer, 1, 0, y, nt, NULL, 0, m.brd, m.nbd, 1, 0);
        const int capture = cap && l + 1 == (cap_layer ? cap_layer : m.Ld);
        m.cap = capture ? cap : NULL;
        m.cap_head = (int)cap_head;
        sub(&m, layer, 2, 1, y, nt, x, ns, NULL, 0, 0, 0);
        m.cap = NULL;
        sub(&m, layer, 3, 2, y, nt, NULL, 0, NULL, 0, 0, 0);
    }
    if (m.pre) lnorm(y, nt, d, W(&m, "dec.ln.weight"), W(&m, "dec.ln.bias"), m.eps);
    const float *Wo = m.tied ? Et : W(&m, "out_proj");
    lin(y, nt, d, Wo, geti(f, "output_bias", 0) ? W(&m, "out_bias") : NULL, (int)m.Vt, logits);
    free(st); free(x); free(tt); free(y);
    return nt;
}

int ref_model_logits(const nmt_file *f, const int32_t *src, uint32_t src_len, const int32_t *tgt,
                     uint32_t tgt_len, double *logits) {
    return forward(f, src, src_len, tgt, tgt_len, logits, NULL, 0, 0);
}

int ref_model_cross_attention(const nmt_file *f, const int32_t *src, uint32_t src_len, const int32_t *tgt,
                              uint32_t tgt_len, uint32_t layer, uint32_t head, double *probs) {
    const uint32_t V = (uint32_t)geti(f, "tgt_vocab", 0);
    double *lg = malloc(sizeof(double) * (size_t)(tgt_len + 1) * V);
    memset(probs, 0, sizeof(double) * (size_t)(tgt_len + 1) * (src_len + 1));
    const int n = forward(f, src, src_len, tgt, tgt_len, lg, probs, layer, head);
    free(lg);
    return n;
}

double ref_model_score(const nmt_file *f, const int32_t *src, uint32_t src_len, const int32_t *tgt, uint32_t tgt_len) {
    const uint32_t V = (uint32_t)geti(f, "tgt_vocab", 0);
    const int32_t eos = (int32_t)geti(f, "eos_id", 1);
    double *lg = calloc((size_t)(tgt_len + 1) * V, sizeof(double)), total = 0;
    if (lg == NULL) return NAN;
    ref_model_logits(f, src, src_len, tgt, tgt_len, lg);
    for (uint32_t p = 0; p <= tgt_len; p++) {
        const double *r = lg + (size_t)p * V;
        double mx = -INFINITY, z = 0;
        for (uint32_t v = 0; v < V; v++) mx = fmax(mx, r[v]);
        for (uint32_t v = 0; v < V; v++) z += exp(r[v] - mx);
        total += r[p < tgt_len ? tgt[p] : eos] - mx - log(z);
    }
    free(lg);
    return total;
}
