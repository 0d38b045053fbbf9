/* SPDX-License-Identifier: MIT */
/* banmt_train_internal.h — the BA-NMT trainer model's private layout,
 * shared by banmt_train.c (plan, forward, the record's calls) and
 * banmt_train_bwd.c (backpropagation through time).  Step t's slice of a
 * per-step buffer starts t * n * width floats in (t * n * S * width for
 * the per-position ones); decoder rows are step-major (t * n + b). */
#ifndef NMT_BANMT_TRAIN_INTERNAL_H
#define NMT_BANMT_TRAIN_INTERNAL_H

#include "banmt_fwd.h"
#include "ops_train.h"
#include "param_store.h"
#include "train_family.h"

typedef struct bat_model {
    nmt_device *dev;
    nmt_ba_cfg c;
    nmt_train_limits lim;
    size_t act_bytes;       /* nmt_ba_train_act_bytes of lim */
    nmt_ops ops;
    nmt_train_ops t;
    int ops_ok, t_ok;
    nmt_pstore ps;          /* parameters P, gradients G, Adam moments M, V (one layout) and their table */
    cl_mem mems[96];        /* every other device buffer */
    size_t n_mems;
    nmt_ba_weights w;       /* views into P */
    nmt_ba_fwd fw;
    float drop_p;
    uint64_t drop_seed;
    nmt_ba_enc_acts enc;    /* the encoder's activations (n * S rows) */
    /* kept per step: cat (n, cat), z1 / z2 (n, 5H), st (n, H), q (n, A), alpha (n * S), u (n, R|2R),
       tt (n, R) readout after dropout, pt (n, 3Ht); per position: e1 / e2 (n * S, A), zs / zt (n * S,
       5Hh), hs / ts (n * S, Hh) the history states after step t */
    nmt_buf cat, z1, st, q, alpha, z2, u, tt, e1, e2, zs, hs, zt, ts, pt;
    nmt_buf hg;             /* recurrent products (scratch: the cell consumes them) */
    nmt_buf logits, loss, nll, partial, red;
    /* backward scratch */
    nmt_buf dt, dcat, du, dz, dg, ds_a, ds_b, dtmp, dhs, de1, dps, dts, de2, dpt, dalpha, dq, dk, dh, dx, dy;
    nmt_buf dze, dge, dhe, ascr, mq, mk, mv, mscr;
    nmt_buf src_tok, tgt_in, tgt_out, klen, mask, perm, seg, segtok; /* int */
    int32_t *h_src, *h_tin, *h_tout, *h_klen, *h_mask, *h_perm, *h_seg, *h_segtok;
    uint32_t *h_count;
    float *h_nll;
    uint32_t n, S, T;       /* the loaded batch */
} bat_model;

/* The gradient of a parameter view (the same slice of G as of P). */
static inline nmt_buf bat_grad(const bat_model *m, nmt_buf p) { return nmt_buf_at(m->ps.G, p.off); }

/* The forward's buffers of step t and its pass (banmt_fwd.h). */
void bat_step_acts(void *user, uint32_t t, nmt_ba_acts *out);
nmt_ba_pass bat_pass(const bat_model *m, uint32_t t);

/* Backward from the logits' gradient (in m->logits): adds every
 * parameter's gradient into m->G.  p, seed: the forward's dropout. */
nmt_status bat_backward(bat_model *m, float p, uint64_t seed);

#endif
