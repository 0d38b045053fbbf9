/* SPDX-License-Identifier: MIT */
/* ref_banmt.c — a naive, double-precision BA-NMT (RNNsearch with source /
 * target / bilingual history attention) written straight from
 * docs/ARCHITECTURES.md, reading weights from a validated fp32 .nmt image.
 * One sentence at a time, no padding, no batching, no beam: the
 * independent reference the OpenCL session is compared with. */
#include "ref_banmt.h"
#include "ref_ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct rb {
    const nmt_file *f;
    int E, H, A, R, Hh, sa, ta, maxout, Vt;
    int32_t bos, eos;
} rb;

/* W(m, fmt, ...): the fp32 tensor of that name; geti: a metadata integer */
#define W(m, ...) ref_tensor((m)->f, "ref_banmt", __VA_ARGS__)
#define geti(f, k, def) ((int)ref_meta_i64(f, k, def))

/* y[out] = W x + b (b may be NULL) */
static void mv(const float *w, const float *b, const double *x, int in, int out, double *y) {
    for (int o = 0; o < out; o++) {
        double s = b ? b[o] : 0.0;
        for (int k = 0; k < in; k++) s += w[(size_t)o * in + k] * x[k];
        y[o] = s;
    }
}

/* h = GRU <name>(x, h) in place (cuDNN form, ops.h nmt_op_gru_cell). */
static void gru(const rb *m, const char *name, const double *x, int in, int h, double *state) {
    double xg[3 * 512], hg[3 * 512], out[512];
    mv(W(m, "%s.ih.weight", name), W(m, "%s.ih.bias", name), x, in, 3 * h, xg);
    mv(W(m, "%s.hh.weight", name), W(m, "%s.hh.bias", name), state, h, 3 * h, hg);
    ref_gru_cell(xg, hg, state, (uint32_t)h, out, NULL);
    memcpy(state, out, sizeof(double) * (size_t)h);
}

int ref_banmt_logits(const nmt_file *f, const int32_t *src, uint32_t src_len, const int32_t *tgt, uint32_t tgt_len,
                     double *logits, double *alpha_out) {
    rb m = {.f = f};
    m.E = geti(f, "emb", 0);
    m.H = geti(f, "hidden", 0);
    m.A = geti(f, "att", m.H);
    m.R = geti(f, "readout", m.E);
    m.Hh = geti(f, "hist", m.H);
    m.maxout = geti(f, "maxout", 0);
    m.Vt = geti(f, "tgt_vocab", 0);
    m.bos = geti(f, "bos_id", 0);
    m.eos = geti(f, "eos_id", 1);
    char hist[16] = "ba";
    nmt_file_get_str(f, "history", hist, sizeof hist);
    m.sa = !strcmp(hist, "sa") || !strcmp(hist, "ba");
    m.ta = !strcmp(hist, "ta") || !strcmp(hist, "ba");
    const int E = m.E, H = m.H, A = m.A, R = m.R, Hh = m.Hh, Ls = (int)src_len + 1, T = (int)tgt_len + 1;
    const int cat_w = E + 3 * H + (m.sa ? Hh : 0) + (m.ta ? Hh : 0), Rr = m.maxout ? 2 * R : R;
    double *h = calloc((size_t)Ls * 2 * H, sizeof(double)), *K = calloc((size_t)Ls * A, sizeof(double));
    double *hs = calloc((size_t)Ls * Hh, sizeof(double)), *ts = calloc((size_t)Ls * Hh, sizeof(double));
    double *tmp = calloc((size_t)(2 * H + E + 3 * Hh + cat_w + Rr + 16), sizeof(double));
    double *cat = calloc((size_t)cat_w, sizeof(double)), *u = calloc((size_t)Rr, sizeof(double));
    double *x = calloc((size_t)E, sizeof(double)), *e = calloc((size_t)Ls, sizeof(double));
    double s[512], st[512], sn[512], q[512], c[1024], t[512], a[512], in[1024];
    /* encoder: forward and reverse GRUs over the tokens (EOS appended) */
    const float *Es = W(&m, "enc.emb.weight"), *Et = W(&m, "dec.emb.weight");
    for (int dir = 0; dir < 2; dir++) {
        double state[512] = {0};
        for (int k = 0; k < Ls; k++) {
            const int j = dir ? Ls - 1 - k : k;
            const int32_t tok = j < (int)src_len ? src[j] : m.eos;
            for (int i = 0; i < E; i++) x[i] = Es[(size_t)tok * E + i];
            gru(&m, dir ? "enc.bwd" : "enc.fwd", x, E, H, state);
            memcpy(h + (size_t)j * 2 * H + dir * H, state, sizeof(double) * (size_t)H);
        }
    }
    for (int j = 0; j < Ls; j++) mv(W(&m, "att.k.weight"), NULL, h + (size_t)j * 2 * H, 2 * H, A, K + (size_t)j * A);
    for (int i = 0; i < 2 * H; i++) {
        c[i] = 0;
        for (int j = 0; j < Ls; j++) c[i] += h[(size_t)j * 2 * H + i] / Ls;
    }
    mv(W(&m, "dec.init.weight"), W(&m, "dec.init.bias"), c, 2 * H, H, s);
    for (int i = 0; i < H; i++) s[i] = tanh(s[i]);
    const float *v = W(&m, "att.v");
    for (int p = 0; p < T; p++) {
        const int32_t yin = p == 0 ? m.bos : tgt[p - 1];
        for (int i = 0; i < E; i++) x[i] = Et[(size_t)yin * E + i];
        memcpy(st, s, sizeof(double) * (size_t)H);
        gru(&m, "dec.gru1", x, E, H, st);
        mv(W(&m, "att.q.weight"), W(&m, "att.q.bias"), st, H, A, q);
        double mx = -INFINITY, sum = 0;
        for (int j = 0; j < Ls; j++) {
            for (int i = 0; i < A; i++) a[i] = q[i] + K[(size_t)j * A + i];
            if (m.sa) {
                mv(W(&m, "att.hist_s.weight"), NULL, hs + (size_t)j * Hh, Hh, A, tmp);
                for (int i = 0; i < A; i++) a[i] += tmp[i];
            }
            if (m.ta) {
                mv(W(&m, "att.hist_t.weight"), NULL, ts + (size_t)j * Hh, Hh, A, tmp);
                for (int i = 0; i < A; i++) a[i] += tmp[i];
            }
            e[j] = 0;
            for (int i = 0; i < A; i++) e[j] += v[i] * tanh(a[i]);
            if (e[j] > mx) mx = e[j];
        }
        for (int j = 0; j < Ls; j++) sum += (e[j] = exp(e[j] - mx));
        for (int j = 0; j < Ls; j++) e[j] /= sum;
        if (alpha_out) memcpy(alpha_out + (size_t)p * Ls, e, sizeof(double) * (size_t)Ls);
        for (int i = 0; i < 2 * H; i++) {
            c[i] = 0;
            for (int j = 0; j < Ls; j++) c[i] += e[j] * h[(size_t)j * 2 * H + i];
        }
        memcpy(sn, st, sizeof(double) * (size_t)H);
        gru(&m, "dec.gru2", c, 2 * H, H, sn);
        /* readout input [y; c; s_i; hsum; tsum] */
        int o = 0;
        memcpy(cat + o, x, sizeof(double) * (size_t)E), o += E;
        memcpy(cat + o, c, sizeof(double) * 2 * (size_t)H), o += 2 * H;
        memcpy(cat + o, sn, sizeof(double) * (size_t)H), o += H;
        for (int hist_k = 0; hist_k < 2; hist_k++) {
            if (!(hist_k ? m.ta : m.sa)) continue;
            const double *hx = hist_k ? ts : hs;
            for (int i = 0; i < Hh; i++) {
                double acc = 0;
                for (int j = 0; j < Ls; j++) acc += e[j] * hx[(size_t)j * Hh + i];
                cat[o + i] = acc;
            }
            o += Hh;
        }
        mv(W(&m, "dec.readout.weight"), W(&m, "dec.readout.bias"), cat, cat_w, Rr, u);
        for (int i = 0; i < R; i++) t[i] = m.maxout ? fmax(u[2 * i], u[2 * i + 1]) : tanh(u[i]);
        mv(W(&m, "out.proj.weight"), W(&m, "out.proj.bias"), t, R, m.Vt, logits + (size_t)p * m.Vt);
        /* history updates with alpha of this step, s_{i-1} for the target side */
        for (int j = 0; j < Ls; j++) {
            if (m.sa) {
                for (int i = 0; i < 2 * H; i++) in[i] = e[j] * h[(size_t)j * 2 * H + i];
                gru(&m, "hist.src", in, 2 * H, Hh, hs + (size_t)j * Hh);
            }
            if (m.ta) {
                for (int i = 0; i < H; i++) in[i] = e[j] * s[i];
                gru(&m, "hist.tgt", in, H, Hh, ts + (size_t)j * Hh);
            }
        }
        memcpy(s, sn, sizeof(double) * (size_t)H);
    }
    free(h), free(K), free(hs), free(ts), free(tmp), free(cat), free(u), free(x), free(e);
    return T;
}

double ref_banmt_score(const nmt_file *f, const int32_t *src, uint32_t src_len, const int32_t *tgt, uint32_t tgt_len) {
    const int V = geti(f, "tgt_vocab", 0), eos = geti(f, "eos_id", 1);
    double *lg = malloc(sizeof(double) * (size_t)(tgt_len + 1) * V);
    const int T = ref_banmt_logits(f, src, src_len, tgt, tgt_len, lg, NULL);
    double lp = 0;
    for (int p = 0; p < T; p++) {
        const double *r = lg + (size_t)p * V;
        double mx = -INFINITY, sum = 0;
        for (int i = 0; i < V; i++) mx = fmax(mx, r[i]);
        for (int i = 0; i < V; i++) sum += exp(r[i] - mx);
        const int32_t y = p < (int)tgt_len ? tgt[p] : eos;
        lp += r[y] - mx - log(sum);
    }
    free(lg);
    return lp;
}
