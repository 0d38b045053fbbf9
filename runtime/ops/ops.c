/* SPDX-License-Identifier: MIT */
/* ops.c — the kernel layer (ops.h): builds the programs of cl/, creates the
 * kernels once, and turns each nmt_op_* call into argument setting plus
 * non-blocking enqueues on the device's in-order queue.
 *
 * Kernel parameters come from the device's tuning (runtime/device/tuning.h: the
 * built-in per-device table, then the tuner's file): per product (fp32 NT,
 * fp32 NN, int8 NT) and shape class (M <= 2, 3..16, > 16) a provider (ours
 * or CLBlast) and our kernels' -D knobs, each distinct set one program.
 *
 * Launch geometry: every kernel has one fixed local size (dimension 0; the
 * others 1), so PoCL, which compiles a kernel per local size at its first
 * launch, compiles each once — at the session's warm-up (warmup.c).  Every
 * NDRange is padded up to a multiple of the local size (PoCL and OpenCL 1.2
 * devices reject non-uniform work-groups) and the kernels discard surplus
 * work-items.  Per-row reductions (layernorm, log_softmax) run one
 * work-group of ops->reduce_wg work-items per row (layernorm on CPUs: one
 * work-item), reducing by subgroups where the device has them (ops_sg.c).
 *
 * Index limits: the GEMM kernels use 32-bit element indices, so a GEMM whose
 * operands reach past 2^32 - 1 elements of their buffer is refused with
 * NMT_ERR_UNSUPPORTED; the other kernels address with 64-bit offsets. */
#include "ops_internal.h"

#include "kernel_args.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(NMT_HAVE_CLBLAST) && NMT_HAVE_CLBLAST
#include <clblast_c.h>
#define NMT_OPS_CLBLAST 1
#else
#define NMT_OPS_CLBLAST 0
#endif

#define NMT_OPS_GEMM_LN_WG 256        /* GEMM_LN_WG of cl/gemm.cl */
#define NMT_OPS_STREAM_WG 8           /* nmt_ops_plan_streaming's NT m2 work-group */

enum { P_ATTENTION, P_NORM, P_ELEMENTWISE, P_COUNT };

static const char *const program_names[P_COUNT] = {NMT_OPS_ATTN_PROGRAM, "norm", "elementwise"};

typedef nmt_kernel_def kernel_def;

/* Every kernel but the products (whose programs depend on the tuning). */
static const kernel_def kernel_defs[] = {
    {offsetof(nmt_ops, k_embed), P_ELEMENTWISE, "embed", 0},
    {offsetof(nmt_ops, k_embed_q8), P_ELEMENTWISE, "embed_q8", 0},
    {offsetof(nmt_ops, k_pos_table), P_ELEMENTWISE, "pos_table", 0},
    {offsetof(nmt_ops, k_layernorm), P_NORM, "layernorm", 1},
    {offsetof(nmt_ops, k_add), P_ELEMENTWISE, "add", 0},
    {offsetof(nmt_ops, k_relu), P_ELEMENTWISE, "relu", 0},
    {offsetof(nmt_ops, k_act), P_ELEMENTWISE, "act", 0},
    {offsetof(nmt_ops, k_gate_accum), P_ELEMENTWISE, "gate_accum", 0},
    {offsetof(nmt_ops, k_copy_rows), P_ELEMENTWISE, "copy_rows", 0},
    {offsetof(nmt_ops, k_gather_rows), P_ELEMENTWISE, "gather_rows", 0},
    {offsetof(nmt_ops, k_log_softmax), P_ELEMENTWISE, "log_softmax", 1},
    {offsetof(nmt_ops, k_attn_scores), P_ATTENTION, "attn_scores", 0},
    {offsetof(nmt_ops, k_attn_stats), P_ATTENTION, "attn_stats", 0},
    {offsetof(nmt_ops, k_attn_apply), P_ATTENTION, "attn_apply", 0},
    {offsetof(nmt_ops, k_attn_fused), P_ATTENTION, "attn_fused", 0},
};

/* ------------------------------------------------------------------------ */
/* Init / release                                                           */
/* ------------------------------------------------------------------------ */

void nmt_ops_release(nmt_ops *ops) {
    if (ops == NULL) return;
    nmt_kernel_table_release(ops, kernel_defs, NMT_ARRAY_LEN(kernel_defs));
    for (int op = 0; op < NMT_GOP_COUNT; op++)
        for (int c = 0; c < NMT_GCLASS_COUNT; c++)
            if (ops->k_gemm[op][c]) clReleaseKernel(ops->k_gemm[op][c]);
    if (ops->k_bias_act) clReleaseKernel(ops->k_bias_act);
    if (ops->k_attn_group) clReleaseKernel(ops->k_attn_group);
    if (ops->k_gemm_ln) clReleaseKernel(ops->k_gemm_ln);
    if (ops->k_i8_gate) clReleaseKernel(ops->k_i8_gate);
    if (ops->k_i8_ln) clReleaseKernel(ops->k_i8_ln);
    if (ops->k_i8_chain) clReleaseKernel(ops->k_i8_chain);
    for (int c = 0; c < 2; c++)
        if (ops->k_q8_chain[c]) clReleaseKernel(ops->k_q8_chain[c]);
    if (ops->k_q8_ln) clReleaseKernel(ops->k_q8_ln);
    for (int c = 0; c < 2; c++)
        if (ops->k_q8_gate[c]) clReleaseKernel(ops->k_q8_gate[c]);
    for (int c = 0; c < 2; c++)
        if (ops->k_chain[c]) clReleaseKernel(ops->k_chain[c]);
    if (ops->chain_ctr) clReleaseMemObject(ops->chain_ctr);
    if (ops->chain_desc) clReleaseMemObject(ops->chain_desc);
    if (ops->chain_qs) clReleaseMemObject(ops->chain_qs);
    if (ops->dev && ops->dev->settle_ctx == ops) ops->dev->settle = NULL; /* recorded work is dropped */
    if (ops->k_segment_max) clReleaseKernel(ops->k_segment_max);
    if (ops->k_ngram_spans) clReleaseKernel(ops->k_ngram_spans);
    if (ops->k_span_tokens) clReleaseKernel(ops->k_span_tokens);
    if (ops->k_span_last) clReleaseKernel(ops->k_span_last);
    if (ops->k_window_rows) clReleaseKernel(ops->k_window_rows);
    if (ops->k_lstm_cell) clReleaseKernel(ops->k_lstm_cell);
    if (ops->k_gru_cell) clReleaseKernel(ops->k_gru_cell);
    if (ops->k_gru_scaled_input) clReleaseKernel(ops->k_gru_scaled_input);
    if (ops->k_act_rows) clReleaseKernel(ops->k_act_rows);
    if (ops->k_weighted_rows) clReleaseKernel(ops->k_weighted_rows);
    if (ops->k_lookup_q8) clReleaseKernel(ops->k_lookup_q8);
    if (ops->k_additive_attn) clReleaseKernel(ops->k_additive_attn);
    if (ops->k_attn_align) clReleaseKernel(ops->k_attn_align);
    if (ops->k_topk) clReleaseKernel(ops->k_topk);
    nmt_ops_release_beam(ops);
    nmt_ops_release_f16(ops);
    if (ops->k_quant_rows) clReleaseKernel(ops->k_quant_rows);
    for (int c = 0; c < NMT_GCLASS_COUNT; c++)
        if (ops->k_i8_quant[c]) clReleaseKernel(ops->k_i8_quant[c]);
    /* Programs belong to the device (built once, shared by sessions). */
    memset(ops, 0, sizeof *ops);
}

nmt_gemm_class nmt_ops_chain_host(const nmt_ops *ops, nmt_gemm_op op, nmt_gemm_class cls) {
    const nmt_gemm_cfg *m2 = &ops->cfg[op][NMT_GCLASS_M2], *m16 = &ops->cfg[op][NMT_GCLASS_M16];
    const int own = m2->provider == NMT_GEMM_OWN && !m2->kgroup && m16->provider == NMT_GEMM_OWN && !m16->kgroup;
    /* int8 weights x fp32 deferred (int8 x int8 runs those classes): each its own, built where needed */
    const int deferred = op == NMT_GOP_Q8 && (ops->lazy_q8[NMT_GCLASS_M2] || ops->lazy_q8[NMT_GCLASS_M16]);
    return cls == NMT_GCLASS_M16 && (op == NMT_GOP_NT || op == NMT_GOP_Q8) && own && !deferred && m2->vw == m16->vw
               ? NMT_GCLASS_M2
               : cls;
}

void nmt_ops_gemm_opts(const nmt_ops *ops, nmt_gemm_op op, nmt_gemm_class cls, char opts[NMT_OPS_GEMM_OPTS]) {
    const nmt_gemm_cfg *c = &ops->cfg[op][cls];
    int n = snprintf(opts, NMT_OPS_GEMM_OPTS, "-DGEMM_TM=%u -DGEMM_TN=%u -DGEMM_VW=%u -DGEMM_MFAST=%u",
                     (unsigned)c->tm, (unsigned)c->tn, (unsigned)c->vw, (unsigned)c->mfast);
    if (op == NMT_GOP_I8)
        snprintf(opts + n, NMT_OPS_GEMM_OPTS - (size_t)n, " -DI8_DOT=%d",
                 ops->i8_use[cls] == NMT_I8_DOT_BUILTIN ? 1 : ops->i8_use[cls] == NMT_I8_VNNI ? 2 : 0);
    if (c->kgroup) snprintf(opts + n, NMT_OPS_GEMM_OPTS - (size_t)n, " -DGEMM_KG_WG=%u", (unsigned)c->wg);
    /* gemm_chain and gemm_q8_chain (ops_chain.c: CPU devices) only in the
     * programs that create them */
    if ((op == NMT_GOP_NT || op == NMT_GOP_Q8) && cls != NMT_GCLASS_BIG && !c->kgroup && ops->dev->info.is_cpu &&
        nmt_ops_chain_host(ops, op, cls) == cls)
        snprintf(opts + n, NMT_OPS_GEMM_OPTS - (size_t)n, op == NMT_GOP_NT ? " -DGEMM_CHAIN=1" : " -DQ8_CHAIN=1");
}

/* Build the program of one product configuration and create its kernel
 * (int8 x int8: with the dot built-in when ops->i8_use[cls] == 1). */
nmt_status nmt_ops_gemm_kernel(nmt_ops *ops, nmt_gemm_op op, nmt_gemm_class cls) {
    nmt_gemm_cfg *c = &ops->cfg[op][cls];
    if (op == NMT_GOP_I8 && ops->i8_use[cls] == NMT_I8_VNNI) { /* its fixed blocks (cl/gemm_i8.cl) */
        c->tm = cls == NMT_GCLASS_M2 ? 1 : 4;
        c->tn = 4;
        c->vw = 16;
        c->mfast = cls == NMT_GCLASS_M2 ? 0 : 1; /* several row blocks: the 4 of each share B's rows */
    }
    static const char *const progs[NMT_GOP_COUNT] = {"gemm", "gemm", "gemm_q8", "gemm_i8"};
    static const char *const names[NMT_GOP_COUNT] = {"gemm_nt", "gemm_nn", "gemm_q8_nt", "gemm_i8_nt"};
    static const char *const kg_names[NMT_GOP_COUNT] = {"gemm_nt_kgroup", NULL, "gemm_q8_nt_kgroup", NULL};
    if (c->kgroup && kg_names[op] == NULL) return NMT_ERR_INVALID_ARGUMENT; /* nmt_gemm_cfg_valid refuses it */
    cl_program prog;
    for (;;) {
        char opts[NMT_OPS_GEMM_OPTS];
        nmt_ops_gemm_opts(ops, op, cls, opts);
        NMT_TRY(nmt_device_program(ops->dev, progs[op], opts, &prog));
        if (ops->k_gemm[op][cls]) clReleaseKernel(ops->k_gemm[op][cls]);
        ops->k_gemm[op][cls] = NULL;
        NMT_TRY(nmt_device_kernel(ops->dev, prog, c->kgroup ? kg_names[op] : names[op], &ops->k_gemm[op][cls]));
        size_t wg;
        NMT_TRY(nmt_kernel_wg(ops->dev, ops->k_gemm[op][cls], c->wg, &wg));
        /* a kgroup kernel's local size is compiled in: build it again at
         * what the device allows */
        const int again = c->kgroup && wg < c->wg;
        c->wg = (uint16_t)(c->kgroup ? pow2_floor(wg) : wg);
        if (!again) break;
    }
    if (op == NMT_GOP_NT && cls != NMT_GCLASS_BIG) { /* chained few-row products (ops_chain.c; -DGEMM_CHAIN) */
        cl_kernel *g = &ops->k_chain[cls];
        if (*g) clReleaseKernel(*g);
        *g = NULL;
        if (c->provider == NMT_GEMM_OWN && !c->kgroup && ops->dev->info.is_cpu &&
            nmt_ops_chain_host(ops, op, cls) == cls)
            NMT_TRY(nmt_device_kernel(ops->dev, prog, "gemm_chain", g));
    }
    if (op == NMT_GOP_NT && cls == NMT_GCLASS_M2 && c->provider == NMT_GEMM_OWN && !c->kgroup) {
        if (ops->k_gemm_ln) clReleaseKernel(ops->k_gemm_ln);
        ops->k_gemm_ln = NULL;
        NMT_TRY(nmt_device_kernel(ops->dev, prog, "gemm_nt_ln", &ops->k_gemm_ln));
        NMT_TRY(nmt_kernel_wg(ops->dev, ops->k_gemm_ln, NMT_OPS_GEMM_LN_WG, &ops->gemm_ln_wg));
    }
    /* the few-row kernels with this class's sums (ops_rows.c) */
    if (op == NMT_GOP_Q8 && cls != NMT_GCLASS_BIG) {
        cl_kernel *g = &ops->k_q8_gate[cls];
        if (*g) clReleaseKernel(*g);
        *g = NULL;
        if (c->provider == NMT_GEMM_OWN && !c->kgroup) NMT_TRY(nmt_device_kernel(ops->dev, prog, "gemm_q8_gate", g));
        cl_kernel *q = &ops->k_q8_chain[cls]; /* -DQ8_CHAIN: nmt_ops_gemm_opts */
        if (*q) clReleaseKernel(*q);
        *q = NULL;
        if (c->provider == NMT_GEMM_OWN && !c->kgroup && ops->dev->info.is_cpu &&
            nmt_ops_chain_host(ops, op, cls) == cls)
            NMT_TRY(nmt_device_kernel(ops->dev, prog, "gemm_q8_chain", q));
    }
    if (op == NMT_GOP_Q8 && cls == NMT_GCLASS_M2) {
        if (ops->k_q8_ln) clReleaseKernel(ops->k_q8_ln);
        ops->k_q8_ln = NULL;
        if (c->provider == NMT_GEMM_OWN && !c->kgroup) {
            NMT_TRY(nmt_device_kernel(ops->dev, prog, "gemm_q8_nt_ln", &ops->k_q8_ln));
            NMT_TRY(nmt_kernel_wg(ops->dev, ops->k_q8_ln, NMT_OPS_GEMM_LN_WG, &ops->q8_ln_wg));
        }
    }
    return NMT_OK;
}

static nmt_status ops_init(nmt_ops *ops, nmt_device *dev, const nmt_tuning *t, int lazy) {
    if (ops == NULL || dev == NULL) return NMT_ERR_INVALID_ARGUMENT;
    memset(ops, 0, sizeof *ops);
    if (t == NULL) t = &dev->tuning;
    for (int op = 0; op < NMT_GOP_COUNT; op++)
        for (int c = 0; c < NMT_GCLASS_COUNT; c++)
            if (!nmt_gemm_cfg_valid((nmt_gemm_op)op, &t->gemm[op][c])) return NMT_ERR_INVALID_ARGUMENT;
    ops->dev = dev;
    memcpy(ops->cfg, t->gemm, sizeof ops->cfg);
    int any_clblast = 0;
    for (int op = 0; op < NMT_GOP_COUNT; op++)
        for (int c = 0; c < NMT_GCLASS_COUNT; c++)
            if (ops->cfg[op][c].provider == NMT_GEMM_CLBLAST) {
                if (!NMT_OPS_CLBLAST) return NMT_ERR_UNSUPPORTED;
                any_clblast = 1;
            }
    ops->gemm = (nmt_gemm_provider)ops->cfg[NMT_GOP_NT][NMT_GCLASS_BIG].provider;

    size_t dev_wg = dev->info.max_work_group_size ? dev->info.max_work_group_size : 1;
    size_t reduce_cap = pow2_floor(NMT_MIN((size_t)(t->reduce_wg ? t->reduce_wg : 64), dev_wg));

    char opts[P_COUNT][96];
    opts[P_ATTENTION][0] = '\0';
    ops->subgroups = nmt_device_sg_wanted(dev);
    ops->norm_subgroups = ops->subgroups && (!dev->info.is_cpu || dev->sg_mode == NMT_SG_ALL);
    const char *sg = " -DNMT_SUBGROUPS=1";
    snprintf(opts[P_NORM], sizeof opts[P_NORM], "-DREDUCE_WG=%zu%s", reduce_cap, ops->norm_subgroups ? sg : "");
    snprintf(opts[P_ELEMENTWISE], sizeof opts[P_ELEMENTWISE], "-DREDUCE_WG=%zu%s", reduce_cap,
             ops->subgroups ? sg : "");

    /* norm.cl, elementwise.cl and topk.cl in one program where their
     * options agree (the same subgroup reductions): topk's options, with
     * the k that nmt_ops_enable_topk will ask for (ops->rows_opts) */
    const uint32_t topk_k = nmt_ops_topk_max_k(dev, reduce_cap);
    if (ops->norm_subgroups == ops->subgroups && topk_k >= NMT_OPS_TOPK_MIN) {
        nmt_ops_topk_opts(ops->rows_opts, reduce_cap, topk_k, ops->subgroups);
        memcpy(opts[P_NORM], ops->rows_opts, sizeof ops->rows_opts);
        memcpy(opts[P_ELEMENTWISE], ops->rows_opts, sizeof ops->rows_opts);
    }

    nmt_status s = NMT_OK;
    /* fp32 NT products of every class; NN ones (no model family uses them)
     * at nmt_ops_enable_nn or their first call, int8 ones at nmt_ops_enable_q8 */
    ops->lazy_nt = lazy && !any_clblast;
    for (int c = 0; c < NMT_GCLASS_COUNT && s == NMT_OK && !ops->lazy_nt; c++)
        s = nmt_ops_gemm_kernel(ops, NMT_GOP_NT, (nmt_gemm_class)c);
    cl_program progs[P_COUNT];
    for (int p = 0; p < P_COUNT && s == NMT_OK; p++) {
        const char *name = ops->rows_opts[0] && p != P_ATTENTION ? NMT_OPS_ROWS_PROGRAM : program_names[p];
        s = nmt_device_program(dev, name, opts[p], &progs[p]);
    }
    if (s == NMT_OK && any_clblast) {
        cl_program prog;
        s = nmt_device_program(dev, "gemm", "", &prog);
        if (s == NMT_OK) s = nmt_device_kernel(dev, prog, "bias_act", &ops->k_bias_act);
    }
    if (s != NMT_OK) {
        nmt_ops_release(ops);
        return s;
    }

    size_t reduce_wg = reduce_cap, wg_max = NMT_MIN((size_t)(t->wg ? t->wg : 64), dev_wg);
    s = nmt_kernel_table_create(dev, ops, kernel_defs, NMT_ARRAY_LEN(kernel_defs), progs, &wg_max, &reduce_wg);
    if (s != NMT_OK) {
        nmt_ops_release(ops);
        return s;
    }
    if (ops->k_bias_act) {
        size_t kwg = 1;
        s = nmt_kernel_wg(dev, ops->k_bias_act, wg_max, &kwg);
        if (s != NMT_OK) {
            nmt_ops_release(ops);
            return s;
        }
        wg_max = NMT_MIN(wg_max, kwg);
    }
    ops->reduce_wg = reduce_wg;
    ops->wg_max = pow2_floor(wg_max);
    ops->norm_wg = dev->info.is_cpu && !ops->norm_subgroups ? 1 : ops->reduce_wg;
    ops->fused_norm = !nmt_env_flag("NMT_EDGE_NO_FUSED_NORM");
    ops->i8_fuse_quant = dev->info.is_cpu && !nmt_env_flag("NMT_EDGE_NO_FUSED_QUANT");
    ops->fuse_gate = dev->info.is_cpu && !nmt_env_flag("NMT_EDGE_NO_FUSED_GATE");
    ops->i8_fuse_norm = dev->info.is_cpu;
    ops->k_chunk = dev->info.is_cpu ? NMT_OPS_K_CHUNK_CPU : 0;
    ops->a_tile_bytes = dev->info.is_cpu ? NMT_OPS_A_TILE_BYTES : 0;
    s = nmt_ops_sg_setup(ops);
    if (s == NMT_OK) s = nmt_ops_attn_setup(ops, progs[P_ATTENTION]);
    if (s != NMT_OK) {
        nmt_ops_release(ops);
        return s;
    }
    const nmt_gemm_cfg *b = &ops->cfg[NMT_GOP_NT][NMT_GCLASS_BIG], *r = &ops->cfg[NMT_GOP_NT][NMT_GCLASS_M2];
    nmt_log(&dev->log, NMT_LOG_DEBUG,
            "ops: gemm nt big %s %ux%u vw%u%s wg%u, nt m2 %ux%u vw%u wg%u; reduce_wg=%zu, wg=%zu (%s)",
            b->provider == NMT_GEMM_CLBLAST ? "clblast" : "own", (unsigned)b->tm, (unsigned)b->tn, (unsigned)b->vw,
            b->mfast ? " mfast" : "", (unsigned)b->wg, (unsigned)r->tm, (unsigned)r->tn, (unsigned)r->vw,
            (unsigned)r->wg, ops->reduce_wg, ops->wg_max, t->origin);
    return NMT_OK;
}

nmt_status nmt_ops_init_tuned(nmt_ops *ops, nmt_device *dev, const nmt_tuning *t) {
    return ops_init(ops, dev, t, 0);
}

nmt_status nmt_ops_init(nmt_ops *ops, nmt_device *dev) {
    return ops_init(ops, dev, dev ? &dev->tuning : NULL, 0);
}

nmt_status nmt_ops_init_session(nmt_ops *ops, nmt_device *dev) {
    return ops_init(ops, dev, dev ? &dev->tuning : NULL, 1);
}

/* a deferred class, and first the class whose program holds its chain kernel */
nmt_status nmt_ops_nt_ready(nmt_ops *ops, nmt_gemm_class cls) {
    if (!ops->lazy_nt) return NMT_OK;
    const nmt_gemm_class host = nmt_ops_chain_host(ops, NMT_GOP_NT, cls);
    if (host != cls) NMT_TRY(nmt_ops_nt_ready(ops, host));
    return ops->k_gemm[NMT_GOP_NT][cls] != NULL ? NMT_OK : nmt_ops_gemm_kernel(ops, NMT_GOP_NT, cls);
}

nmt_status nmt_ops_q8_ready(nmt_ops *ops, nmt_gemm_class cls) { /* the chain's host is never deferred */
    if (!ops->lazy_q8[cls] || ops->k_gemm[NMT_GOP_Q8][cls] != NULL) return NMT_OK;
    return nmt_ops_gemm_kernel(ops, NMT_GOP_Q8, cls);
}

nmt_status nmt_ops_enable_nn(nmt_ops *ops) {
    if (ops == NULL || ops->dev == NULL || ops->k_add == NULL) return NMT_ERR_INVALID_ARGUMENT;
    for (int c = 0; c < NMT_GCLASS_COUNT; c++)
        if (ops->k_gemm[NMT_GOP_NN][c] == NULL) NMT_TRY(nmt_ops_gemm_kernel(ops, NMT_GOP_NN, (nmt_gemm_class)c));
    return NMT_OK;
}

nmt_status nmt_ops_enable_q8(nmt_ops *ops) {
    if (ops == NULL || ops->dev == NULL || ops->k_add == NULL) return NMT_ERR_INVALID_ARGUMENT;
    const int lazy = ops->lazy_nt; /* a session's ops (nmt_ops_init_session) */
    for (int c = 0; c < NMT_GCLASS_COUNT && !lazy; c++)
        if (ops->k_gemm[NMT_GOP_Q8][c] == NULL) NMT_TRY(nmt_ops_gemm_kernel(ops, NMT_GOP_Q8, (nmt_gemm_class)c));
    for (int c = 0; c < NMT_GCLASS_COUNT; c++) /* the int8 x int8 path where chosen */
        if (ops->k_gemm[NMT_GOP_I8][c] == NULL) ops->i8_use[c] = (uint8_t)nmt_i8dot_path(ops->dev, (nmt_gemm_class)c);
    NMT_TRY(nmt_ops_enable_i8(ops));
    /* a session's: int8 weights x fp32 at first use where int8 x int8 runs
     * (products it cannot take: K or rows beyond its buffers), else now */
    for (int c = 0; c < NMT_GCLASS_COUNT && lazy; c++) /* all first: nmt_ops_chain_host reads them */
        ops->lazy_q8[c] = ops->i8_use[c] != 0 && ops->k_gemm[NMT_GOP_I8][c] != NULL;
    for (int c = 0; c < NMT_GCLASS_COUNT && lazy; c++)
        if (!ops->lazy_q8[c] && ops->k_gemm[NMT_GOP_Q8][c] == NULL)
            NMT_TRY(nmt_ops_gemm_kernel(ops, NMT_GOP_Q8, (nmt_gemm_class)c));
    return NMT_OK;
}

/* ------------------------------------------------------------------------ */
/* Argument setting and launching                                           */
/* ------------------------------------------------------------------------ */

/* One compiled variant per kernel whatever the shape (ops.h). */
nmt_status nmt_ops_launch(nmt_ops *ops, cl_kernel k, cl_uint dims, const size_t *n, const char *kernel) {
    size_t gws[3], lws[3];
    for (cl_uint d = 0; d < dims; d++) {
        if (n[d] == 0) return NMT_OK;
        lws[d] = d == 0 ? (ops->wg_max ? ops->wg_max : 1) : 1;
        gws[d] = (n[d] + lws[d] - 1) / lws[d] * lws[d];
    }
    return nmt_enqueue(ops->dev, k, dims, gws, lws, kernel);
}

/* Enqueue with explicit local sizes; n[] is padded up to multiples of them. */
nmt_status nmt_ops_launch_local(nmt_ops *ops, cl_kernel k, cl_uint dims, const size_t *n, const size_t *lws,
                                const char *kernel) {
    size_t gws[3];
    for (cl_uint d = 0; d < dims; d++) {
        if (n[d] == 0) return NMT_OK;
        gws[d] = (n[d] + lws[d] - 1) / lws[d] * lws[d];
    }
    return nmt_enqueue(ops->dev, k, dims, gws, lws, kernel);
}

/* One work-group of ops->reduce_wg work-items per row. */
static nmt_status launch_rows(nmt_ops *ops, cl_kernel k, size_t rows, const char *kernel) {
    if (rows == 0) return NMT_OK;
    size_t lws = ops->reduce_wg, gws = rows * lws;
    return nmt_enqueue(ops->dev, k, 1, &gws, &lws, kernel);
}

/* Last element index + 1 of a rows x cols matrix at `off` with stride ld,
 * as 64-bit (inputs are at most 2^32 each, so no overflow for off < 2^63). */
static uint64_t extent(size_t off, uint64_t rows, uint64_t ld, uint64_t cols) {
    return (uint64_t)off + (rows - 1) * ld + cols;
}

static int ops_ok(const nmt_ops *ops) { return ops != NULL && ops->dev != NULL && ops->k_add != NULL; }

/* ------------------------------------------------------------------------ */
/* GEMM                                                                     */
/* ------------------------------------------------------------------------ */

/* Launch a product kernel whose arguments are set: blocks of cfg->tm x
 * cfg->tn, dimension 0 over N blocks and dimension 1 over M blocks, local
 * size (cfg->wg, 1); mfast: one dimension of all mb * nb blocks, M fastest
 * (cl/common.cl GEMM_BLOCK_ORIGIN), local size cfg->wg. */
nmt_status nmt_ops_launch_gemm(nmt_ops *ops, cl_kernel k, const nmt_gemm_cfg *c, uint32_t M, uint32_t N,
                              const char *kname) {
    const size_t nb = (N + c->tn - 1) / c->tn, mb = (M + c->tm - 1) / c->tm;
    const size_t l[2] = {c->wg, 1};
    if (c->kgroup) { /* a work-group per column of C and block of rows (cl/common.cl GEMM_KGROUP) */
        if (N > SIZE_MAX / c->wg) return NMT_ERR_UNSUPPORTED;
        const size_t n[2] = {(size_t)N * c->wg, mb};
        return nmt_ops_launch_local(ops, k, 2, n, l, kname);
    }
    if (c->mfast) {
        /* the kernel's block index is a uint: every padded work-item's too */
        if (nb != 0 && mb > ((size_t)UINT32_MAX - c->wg) / nb) return NMT_ERR_UNSUPPORTED;
        const size_t n1 = mb * nb;
        return nmt_ops_launch_local(ops, k, 1, &n1, l, kname);
    }
    const size_t n[2] = {nb, mb};
    return nmt_ops_launch_local(ops, k, 2, n, l, kname);
}

nmt_status nmt_ops_check_gemm(nmt_ops *ops, uint32_t M, uint32_t N, uint32_t K, nmt_buf A, uint32_t lda,
                                    float beta, nmt_buf C, uint32_t ldc, nmt_buf bias) {
    if (A.mem == NULL || C.mem == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (beta != 0.0f && beta != 1.0f) return NMT_ERR_INVALID_ARGUMENT;
    if (lda < K || ldc < N) return NMT_ERR_INVALID_ARGUMENT;
    const uint64_t lim = (uint64_t)UINT32_MAX;
    if (extent(A.off, M, lda, K) > lim || extent(C.off, M, ldc, N) > lim ||
        (bias.mem && (uint64_t)bias.off + N > lim)) {
        nmt_log(&ops->dev->log, NMT_LOG_ERROR, "gemm operands beyond 32-bit element indexing");
        return NMT_ERR_UNSUPPORTED;
    }
    return NMT_OK;
}

nmt_status nmt_op_gemm(nmt_ops *ops, int trans_b, uint32_t M, uint32_t N, uint32_t K, float alpha, nmt_buf A,
                       uint32_t lda, nmt_buf B, uint32_t ldb, float beta, nmt_buf C, uint32_t ldc, nmt_buf bias,
                       int relu) {
    if (!ops_ok(ops)) return NMT_ERR_INVALID_ARGUMENT;
    if (M == 0 || N == 0) return NMT_OK;
    if (B.mem == NULL || ldb < (trans_b ? K : N)) return NMT_ERR_INVALID_ARGUMENT;
    NMT_TRY(nmt_ops_check_gemm(ops, M, N, K, A, lda, beta, C, ldc, bias));
    if ((trans_b ? extent(B.off, N, ldb, K) : extent(B.off, K ? K : 1, ldb, N)) > (uint64_t)UINT32_MAX) {
        nmt_log(&ops->dev->log, NMT_LOG_ERROR, "gemm operands beyond 32-bit element indexing");
        return NMT_ERR_UNSUPPORTED;
    }
    const int flags = (bias.mem ? 1 : 0) | nmt_ops_act_flags(relu);
    const nmt_gemm_op op = trans_b ? NMT_GOP_NT : NMT_GOP_NN;
    const nmt_gemm_class cls = nmt_gemm_class_of(M);
    const nmt_gemm_cfg *cfg = &ops->cfg[op][cls];
    if (trans_b) NMT_TRY(nmt_ops_nt_ready(ops, cls));
    if (ops->chain_on && trans_b && alpha == 1.0f && beta == 0.0f) { /* recorded into a chain (ops_chain.c) */
        int taken = 0;
        NMT_TRY(nmt_ops_chain_prod(ops, M, N, K, A, lda, B, ldb, bias, C, ldc, (nmt_buf){NULL, 0}, 0, relu, &taken));
        if (taken) return NMT_OK;
    }

#if NMT_OPS_CLBLAST
    if (cfg->provider == NMT_GEMM_CLBLAST && K > 0) {
        NMT_TRY(nmt_device_settle(ops->dev)); /* CLBlast enqueues on the queue itself */
        cl_command_queue q = ops->dev->queue;
        CLBlastStatusCode st = CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo,
                                            trans_b ? CLBlastTransposeYes : CLBlastTransposeNo, M, N, K, alpha,
                                            A.mem, A.off, lda, B.mem, B.off, ldb, beta, C.mem, C.off, ldc, &q, NULL);
        if (st != CLBlastSuccess) return nmt_cl_fail(ops->dev, (cl_int)st, "CLBlastSgemm");
        if (flags == 0) return NMT_OK;
        args a = args_begin(ops->k_bias_act);
        arg_u32(&a, M);
        arg_u32(&a, N);
        arg_mem(&a, C.mem);
        arg_u32(&a, (uint32_t)C.off);
        arg_u32(&a, ldc);
        arg_mem(&a, bias.mem ? bias.mem : C.mem);
        arg_u32(&a, (uint32_t)bias.off);
        arg_i32(&a, flags);
        NMT_TRY(args_end(ops->dev, &a, "bias_act"));
        const size_t n[2] = {N, M};
        return nmt_ops_launch(ops, ops->k_bias_act, 2, n, "bias_act");
    }
#endif

    if (ops->k_gemm[op][cls] == NULL) NMT_TRY(nmt_ops_enable_nn(ops)); /* NN: built at first use */
    cl_kernel k = ops->k_gemm[op][cls];
    const char *kname = trans_b ? "gemm_nt" : "gemm_nn";
    /* Cache blocking on CPUs (PoCL runs work-groups in order, each work-item
     * streaming whole rows of its operands):
     *  - NN with long K in chunks of k_chunk rows (C accumulates from the
     *    second on; bias and ReLU with the last), so the B rows a work-group
     *    streams stay in cache for the next groups;
     *  - NT with many rows in tiles of about a_tile_bytes of A, so
     *    the A rows every N block re-reads stay in L2 (B then streams once
     *    per tile instead of A once per N block). */
    const uint32_t kc = !trans_b && ops->k_chunk && K > 2 * ops->k_chunk ? ops->k_chunk : (K ? K : 1);
    uint32_t mt = M;
    if (trans_b && ops->a_tile_bytes && K > 0) {
        const uint32_t unit = cfg->tm * cfg->wg, rows = ops->a_tile_bytes / 4u / K;
        const uint32_t tile = rows > unit ? rows / unit * unit : unit;
        if (M > 2 * tile) mt = tile;
    }
    for (uint64_t m0 = 0; m0 < M; m0 += mt) {
        const uint32_t mn = (uint32_t)(M - m0 < mt ? M - m0 : mt);
        for (uint64_t k0 = 0; k0 < K || k0 == 0; k0 += kc) {
            const uint32_t kn = (uint32_t)(K - k0 < kc ? K - k0 : kc);
            const int last = k0 + kn >= K;
            args a = args_begin(k);
            arg_u32(&a, mn);
            arg_u32(&a, N);
            arg_u32(&a, kn);
            arg_f32(&a, alpha);
            arg_mem(&a, A.mem);
            arg_u32(&a, (uint32_t)(A.off + m0 * lda + k0));
            arg_u32(&a, lda);
            arg_mem(&a, B.mem);
            arg_u32(&a, (uint32_t)(B.off + (trans_b ? k0 : k0 * ldb)));
            arg_u32(&a, ldb);
            arg_f32(&a, k0 == 0 ? beta : 1.0f);
            arg_mem(&a, C.mem);
            arg_u32(&a, (uint32_t)(C.off + m0 * ldc));
            arg_u32(&a, ldc);
            arg_mem(&a, bias.mem ? bias.mem : C.mem);  /* never dereferenced without the flag */
            arg_u32(&a, bias.mem ? (uint32_t)bias.off : 0u);
            arg_i32(&a, last ? flags : 0);
            NMT_TRY(args_end(ops->dev, &a, kname));
            NMT_TRY(nmt_ops_launch_gemm(ops, k, cfg, mn, N, kname));
            if (last) break;
        }
    }
    return NMT_OK;
}

void nmt_ops_args_gemm_head(args *a, uint32_t M, uint32_t N, uint32_t K, float alpha, nmt_buf A, uint32_t lda) {
    arg_u32(a, M);
    arg_u32(a, N);
    arg_u32(a, K);
    arg_f32(a, alpha);
    arg_mem(a, A.mem);
    arg_u32(a, (uint32_t)A.off);
    arg_u32(a, lda);
}

void nmt_ops_args_gemm_tail(args *a, float beta, nmt_buf C, uint32_t ldc, nmt_buf bias, int relu) {
    arg_f32(a, beta);
    arg_mem(a, C.mem);
    arg_u32(a, (uint32_t)C.off);
    arg_u32(a, ldc);
    arg_mem(a, bias.mem ? bias.mem : C.mem); /* never dereferenced without the flag */
    arg_u32(a, bias.mem ? (uint32_t)bias.off : 0u);
    arg_i32(a, (bias.mem ? 1 : 0) | nmt_ops_act_flags(relu));
}

nmt_status nmt_op_gemm_q8(nmt_ops *ops, uint32_t M, uint32_t N, uint32_t K, float alpha, nmt_buf A, uint32_t lda,
                          nmt_buf Q, uint32_t ldq, nmt_buf scale, float beta, nmt_buf C, uint32_t ldc, nmt_buf bias,
                          int relu) {
    if (!ops_ok(ops)) return NMT_ERR_INVALID_ARGUMENT;
    const nmt_gemm_class cls = nmt_gemm_class_of(M);
    if (ops->k_gemm[NMT_GOP_Q8][cls] == NULL && !ops->lazy_q8[cls]) return NMT_ERR_INVALID_ARGUMENT; /* not enabled */
    if (M == 0 || N == 0) return NMT_OK;
    if (Q.mem == NULL || scale.mem == NULL || ldq < K) return NMT_ERR_INVALID_ARGUMENT;
    NMT_TRY(nmt_ops_check_gemm(ops, M, N, K, A, lda, beta, C, ldc, bias));
    if (nmt_ops_i8_fits(ops, cls, M, K)) /* int8 x int8 (ops_i8dot.c) */
        return nmt_ops_gemm_q8_as_i8(ops, M, N, K, alpha, A, lda, Q, ldq, scale, beta, C, ldc, bias, relu);
    NMT_TRY(nmt_ops_q8_ready(ops, cls));
    if (extent(Q.off, N, ldq, K) > (uint64_t)UINT32_MAX || (uint64_t)scale.off + N > (uint64_t)UINT32_MAX) {
        nmt_log(&ops->dev->log, NMT_LOG_ERROR, "gemm_q8 operands beyond 32-bit element indexing");
        return NMT_ERR_UNSUPPORTED;
    }
    if (ops->chain_on && alpha == 1.0f && beta == 0.0f) { /* recorded into a chain (ops_chain.c) */
        int taken = 0;
        NMT_TRY(nmt_ops_chain_q8(ops, 0, M, N, K, A, lda, Q, ldq, scale, bias, C, ldc, (nmt_buf){NULL, 0}, 0, relu,
                                 &taken));
        if (taken) return NMT_OK;
    }
    cl_kernel k = ops->k_gemm[NMT_GOP_Q8][cls];
    args a = args_begin(k);
    nmt_ops_args_gemm_head(&a, M, N, K, alpha, A, lda);
    arg_mem(&a, Q.mem);
    arg_u32(&a, (uint32_t)Q.off);
    arg_u32(&a, ldq);
    arg_mem(&a, scale.mem);
    arg_u32(&a, (uint32_t)scale.off);
    nmt_ops_args_gemm_tail(&a, beta, C, ldc, bias, relu);
    NMT_TRY(args_end(ops->dev, &a, "gemm_q8_nt"));
    return nmt_ops_launch_gemm(ops, k, &ops->cfg[NMT_GOP_Q8][cls], M, N, "gemm_q8_nt");
}

/* ------------------------------------------------------------------------ */
/* Elementwise and row ops                                                  */
/* ------------------------------------------------------------------------ */

nmt_status nmt_ops_embed_kernel(nmt_ops *ops, cl_kernel k, const char *name, nmt_buf tok, uint32_t rows,
                                uint32_t seq_len, uint32_t pos0, nmt_buf E, nmt_buf E_scale, uint32_t d, float scale,
                                nmt_buf out) {
    if (rows == 0 || d == 0) return NMT_OK;
    if (tok.mem == NULL || E.mem == NULL || out.mem == NULL || seq_len == 0) return NMT_ERR_INVALID_ARGUMENT;
    const int table = ops->pos_rows > 0 && ops->pos_d == d;
    /* a layout the kernels do not compute: every position from the table */
    if (ops->pos_table_only && (!table || (uint64_t)pos0 + NMT_MIN(rows, seq_len) > ops->pos_rows))
        return NMT_ERR_INVALID_ARGUMENT;
    if (ops->chain_on && (k == ops->k_embed || k == ops->k_embed_q8)) { /* recorded into a chain (ops_chain.c) */
        int taken = 0;
        NMT_TRY(nmt_ops_chain_embed(ops, tok, rows, seq_len, pos0, E, E_scale, d, scale, out,
                                    table ? ops->pos_tab : out, table ? ops->pos_rows : 0, &taken));
        if (taken) return NMT_OK;
    }
    args a = args_begin(k);
    arg_mem(&a, tok.mem);
    arg_u64(&a, tok.off);
    arg_u32(&a, rows);
    arg_u32(&a, seq_len);
    arg_u32(&a, pos0);
    arg_mem(&a, E.mem);
    arg_u64(&a, E.off);
    if (E_scale.mem != NULL) { /* int8 rows: their scales */
        arg_mem(&a, E_scale.mem);
        arg_u64(&a, E_scale.off);
    }
    arg_u32(&a, d);
    arg_f32(&a, scale);
    arg_mem(&a, out.mem);
    arg_u64(&a, out.off);
    arg_mem(&a, table ? ops->pos_tab.mem : out.mem); /* never read without rows */
    arg_u64(&a, table ? ops->pos_tab.off : 0);
    arg_u32(&a, table ? ops->pos_rows : 0);
    NMT_TRY(args_end(ops->dev, &a, name));
    const size_t n[2] = {d, rows < seq_len ? rows : seq_len}; /* a work-item per column and position */
    return nmt_ops_launch(ops, k, 2, n, name);
}

nmt_status nmt_ops_set_pos_table(nmt_ops *ops, nmt_buf PT, uint32_t n_pos, uint32_t d, uint32_t layout,
                                 uint32_t offset) {
    if (!ops_ok(ops)) return NMT_ERR_INVALID_ARGUMENT;
    ops->pos_rows = 0;
    ops->pos_table_only = 0;
    if (layout > NMT_POS_NONE || (uint64_t)n_pos + offset > (uint64_t)1 << 24) return NMT_ERR_INVALID_ARGUMENT;
    if (PT.mem == NULL || n_pos == 0 || d == 0) return NMT_OK;
    if ((uint64_t)n_pos * d > UINT32_MAX) return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(ops->k_pos_table);
    arg_mem(&a, PT.mem);
    arg_u64(&a, PT.off);
    arg_u32(&a, d);
    arg_u32(&a, n_pos);
    arg_u32(&a, layout);
    arg_u32(&a, offset);
    NMT_TRY(args_end(ops->dev, &a, "pos_table"));
    const size_t n[2] = {d, n_pos};
    NMT_TRY(nmt_ops_launch(ops, ops->k_pos_table, 2, n, "pos_table"));
    ops->pos_tab = PT;
    ops->pos_rows = n_pos;
    ops->pos_d = d;
    ops->pos_table_only = layout != NMT_POS_SINUSOID || offset != 0;
    return NMT_OK;
}

int nmt_ops_plan_streaming(nmt_ops *ops, uint64_t step_bytes) {
    if (!ops_ok(ops) || !ops->dev->info.is_cpu || ops->dev->global_cache_bytes == 0 ||
        step_bytes <= ops->dev->global_cache_bytes || ops->cfg[NMT_GOP_NT][NMT_GCLASS_M2].kgroup)
        return 0; /* a kgroup kernel's work-group size is compiled in */
    nmt_gemm_cfg *c = &ops->cfg[NMT_GOP_NT][NMT_GCLASS_M2];
    if (c->wg > NMT_OPS_STREAM_WG) c->wg = NMT_OPS_STREAM_WG;
    ops->fused_norm = 0;
    nmt_log(&ops->dev->log, NMT_LOG_INFO,
            "a decoder step streams %.1f MB of weights, more than the device's %.1f MB cache: one- and two-row "
            "products in work-groups of %u, layer norms not fused",
            (double)step_bytes / 1e6, (double)ops->dev->global_cache_bytes / 1e6, (unsigned)c->wg);
    return 1;
}

nmt_status nmt_op_embed(nmt_ops *ops, nmt_buf tok, uint32_t rows, uint32_t seq_len, uint32_t pos0, nmt_buf E,
                        uint32_t d, float scale, nmt_buf out) {
    if (!ops_ok(ops)) return NMT_ERR_INVALID_ARGUMENT;
    const nmt_buf none = {NULL, 0};
    return nmt_ops_embed_kernel(ops, ops->k_embed, "embed", tok, rows, seq_len, pos0, E, none, d, scale, out);
}

nmt_status nmt_op_embed_q8(nmt_ops *ops, nmt_buf tok, uint32_t rows, uint32_t seq_len, uint32_t pos0, nmt_buf Q,
                           nmt_buf qscale, uint32_t d, float scale, nmt_buf out) {
    if (!ops_ok(ops)) return NMT_ERR_INVALID_ARGUMENT;
    if (rows == 0 || d == 0) return NMT_OK;
    if (qscale.mem == NULL) return NMT_ERR_INVALID_ARGUMENT;
    return nmt_ops_embed_kernel(ops, ops->k_embed_q8, "embed_q8", tok, rows, seq_len, pos0, Q, qscale, d, scale, out);
}

nmt_status nmt_op_layernorm(nmt_ops *ops, nmt_buf x, nmt_buf res, nmt_buf out, uint32_t rows, uint32_t d,
                            nmt_buf gamma, nmt_buf beta, float eps) {
    if (!ops_ok(ops)) return NMT_ERR_INVALID_ARGUMENT;
    if (rows == 0 || d == 0) return NMT_OK;
    if (x.mem == NULL || out.mem == NULL || gamma.mem == NULL || beta.mem == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (ops->chain_on) { /* recorded into a chain (ops_chain.c) */
        int taken = 0;
        NMT_TRY(nmt_ops_chain_ln(ops, rows, d, x, d, res, d, out, d, gamma, beta, eps, &taken));
        if (taken) return NMT_OK;
    }
    args a = args_begin(ops->k_layernorm);
    arg_mem(&a, x.mem);
    arg_u64(&a, x.off);
    arg_mem(&a, res.mem ? res.mem : x.mem);
    arg_u64(&a, res.mem ? res.off : 0);
    arg_i32(&a, res.mem != NULL);
    arg_mem(&a, out.mem);
    arg_u64(&a, out.off);
    arg_u32(&a, d);
    arg_mem(&a, gamma.mem);
    arg_u64(&a, gamma.off);
    arg_mem(&a, beta.mem);
    arg_u64(&a, beta.off);
    arg_f32(&a, eps);
    NMT_TRY(args_end(ops->dev, &a, "layernorm"));
    size_t lws = ops->norm_wg ? ops->norm_wg : 1, gws = (size_t)rows * lws;
    return nmt_enqueue(ops->dev, ops->k_layernorm, 1, &gws, &lws, "layernorm");
}

nmt_status nmt_op_gemm_nt_ln(nmt_ops *ops, uint32_t M, uint32_t N, uint32_t K, nmt_buf A, uint32_t lda, nmt_buf B,
                             uint32_t ldb, nmt_buf bias, nmt_buf R, uint32_t ldr, nmt_buf gamma, nmt_buf beta,
                             float eps, nmt_buf O, uint32_t ldo) {
    if (!ops_ok(ops)) return NMT_ERR_INVALID_ARGUMENT;
    if (nmt_gemm_class_of(M) == NMT_GCLASS_M2) NMT_TRY(nmt_ops_nt_ready(ops, NMT_GCLASS_M2));
    if (ops->k_gemm_ln == NULL || !ops->fused_norm || nmt_gemm_class_of(M) != NMT_GCLASS_M2) return NMT_ERR_UNSUPPORTED;
    if (M == 0 || N == 0) return NMT_OK;
    if (B.mem == NULL || R.mem == NULL || gamma.mem == NULL || beta.mem == NULL || ldb < K || ldr < N)
        return NMT_ERR_INVALID_ARGUMENT;
    NMT_TRY(nmt_ops_check_gemm(ops, M, N, K, A, lda, 0.0f, O, ldo, bias));
    const uint64_t a_end = extent(A.off, M, lda, K), o_end = extent(O.off, M, ldo, N);
    if (A.mem == O.mem && A.off < o_end && O.off < a_end) return NMT_ERR_INVALID_ARGUMENT; /* O must not alias A */
    const uint64_t lim = (uint64_t)UINT32_MAX;
    if (extent(B.off, N, ldb, K) > lim || extent(R.off, M, ldr, N) > lim || (uint64_t)gamma.off + N > lim ||
        (uint64_t)beta.off + N > lim) {
        nmt_log(&ops->dev->log, NMT_LOG_ERROR, "gemm_nt_ln operands beyond 32-bit element indexing");
        return NMT_ERR_UNSUPPORTED;
    }
    if (ops->chain_on && ops->norm_wg == 1) { /* the product with R, then the norm in place: a chain's two ops */
        int taken = 0;
        NMT_TRY(nmt_ops_chain_prod(ops, M, N, K, A, lda, B, ldb, bias, O, ldo, R, ldr, 0, &taken));
        if (taken) {
            NMT_TRY(nmt_ops_chain_ln(ops, M, N, O, ldo, (nmt_buf){NULL, 0}, 0, O, ldo, gamma, beta, eps, &taken));
            return taken ? NMT_OK : nmt_op_layernorm(ops, O, (nmt_buf){NULL, 0}, O, M, N, gamma, beta, eps);
        }
    }
    args a = args_begin(ops->k_gemm_ln);
    arg_u32(&a, N);
    arg_u32(&a, K);
    arg_mem(&a, A.mem);
    arg_u32(&a, (uint32_t)A.off);
    arg_u32(&a, lda);
    arg_mem(&a, B.mem);
    arg_u32(&a, (uint32_t)B.off);
    arg_u32(&a, ldb);
    arg_mem(&a, bias.mem ? bias.mem : B.mem); /* never dereferenced without the flag */
    arg_u32(&a, bias.mem ? (uint32_t)bias.off : 0u);
    arg_i32(&a, bias.mem != NULL);
    arg_mem(&a, R.mem);
    arg_u32(&a, (uint32_t)R.off);
    arg_u32(&a, ldr);
    arg_mem(&a, O.mem);
    arg_u32(&a, (uint32_t)O.off);
    arg_u32(&a, ldo);
    arg_mem(&a, gamma.mem);
    arg_u32(&a, (uint32_t)gamma.off);
    arg_mem(&a, beta.mem);
    arg_u32(&a, (uint32_t)beta.off);
    arg_f32(&a, eps);
    NMT_TRY(args_end(ops->dev, &a, "gemm_nt_ln"));
    size_t lws = NMT_MIN(ops->norm_wg ? ops->norm_wg : 1, ops->gemm_ln_wg ? ops->gemm_ln_wg : 1);
    lws = pow2_floor(lws);
    size_t gws = (size_t)M * lws;
    return nmt_enqueue(ops->dev, ops->k_gemm_ln, 1, &gws, &lws, "gemm_nt_ln");
}

nmt_status nmt_op_add(nmt_ops *ops, nmt_buf dst, nmt_buf src, uint32_t n) {
    if (!ops_ok(ops)) return NMT_ERR_INVALID_ARGUMENT;
    if (n == 0) return NMT_OK;
    if (dst.mem == NULL || src.mem == NULL) return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(ops->k_add);
    arg_mem(&a, dst.mem);
    arg_u64(&a, dst.off);
    arg_mem(&a, src.mem);
    arg_u64(&a, src.off);
    arg_u32(&a, n);
    NMT_TRY(args_end(ops->dev, &a, "add"));
    const size_t g[1] = {n};
    return nmt_ops_launch(ops, ops->k_add, 1, g, "add");
}

nmt_status nmt_op_relu(nmt_ops *ops, nmt_buf x, uint32_t n) {
    if (!ops_ok(ops)) return NMT_ERR_INVALID_ARGUMENT;
    if (n == 0) return NMT_OK;
    if (x.mem == NULL) return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(ops->k_relu);
    arg_mem(&a, x.mem);
    arg_u64(&a, x.off);
    arg_u32(&a, n);
    NMT_TRY(args_end(ops->dev, &a, "relu"));
    const size_t g[1] = {n};
    return nmt_ops_launch(ops, ops->k_relu, 1, g, "relu");
}

int nmt_ops_fuse_act(const nmt_ops *ops, uint32_t rows) {
    return !ops || !ops->dev || !ops->dev->info.is_cpu || rows <= NMT_ACT_FUSE_CPU_ROWS;
}

nmt_status nmt_op_act(nmt_ops *ops, nmt_buf x, nmt_buf y, uint32_t n, int kind) {
    if (!ops_ok(ops)) return NMT_ERR_INVALID_ARGUMENT;
    if (n == 0) return NMT_OK;
    if (x.mem == NULL || y.mem == NULL || kind < NMT_ACT_NONE || kind > NMT_ACT_SWISH) return NMT_ERR_INVALID_ARGUMENT;
    const int in_place = x.mem == y.mem && x.off == y.off;
    if (kind == NMT_ACT_NONE && in_place) return NMT_OK;
    if (kind == NMT_ACT_NONE) return nmt_op_copy_rows(ops, x, n, y, n, 1, n);
    if (kind == NMT_ACT_RELU && in_place) return nmt_op_relu(ops, x, n);
    if (kind == NMT_ACT_RELU) return NMT_ERR_INVALID_ARGUMENT; /* in place only (and in the products) */
    args a = args_begin(ops->k_act);
    arg_mem(&a, x.mem);
    arg_u64(&a, x.off);
    arg_mem(&a, y.mem);
    arg_u64(&a, y.off);
    arg_u32(&a, n);
    arg_u32(&a, (uint32_t)kind);
    NMT_TRY(args_end(ops->dev, &a, "act"));
    const size_t g[1] = {n};
    return nmt_ops_launch(ops, ops->k_act, 1, g, "act");
}

nmt_status nmt_op_gate_accum(nmt_ops *ops, nmt_buf x, uint32_t ld_x, nmt_buf g, uint32_t ld_g, nmt_buf out,
                             uint32_t ld_out, uint32_t rows, uint32_t d, int accumulate) {
    if (!ops_ok(ops)) return NMT_ERR_INVALID_ARGUMENT;
    if (rows == 0 || d == 0) return NMT_OK;
    if (x.mem == NULL || g.mem == NULL || out.mem == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (ld_x < d || ld_g < d || ld_out < d) return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(ops->k_gate_accum);
    arg_mem(&a, x.mem);
    arg_u64(&a, x.off);
    arg_u32(&a, ld_x);
    arg_mem(&a, g.mem);
    arg_u64(&a, g.off);
    arg_u32(&a, ld_g);
    arg_mem(&a, out.mem);
    arg_u64(&a, out.off);
    arg_u32(&a, ld_out);
    arg_u32(&a, rows);
    arg_u32(&a, d);
    arg_i32(&a, accumulate ? 1 : 0);
    NMT_TRY(args_end(ops->dev, &a, "gate_accum"));
    const size_t n[2] = {d, rows};
    return nmt_ops_launch(ops, ops->k_gate_accum, 2, n, "gate_accum");
}

nmt_status nmt_op_copy_rows(nmt_ops *ops, nmt_buf src, uint32_t ld_src, nmt_buf dst, uint32_t ld_dst, uint32_t rows,
                            uint32_t cols) {
    if (!ops_ok(ops)) return NMT_ERR_INVALID_ARGUMENT;
    if (rows == 0 || cols == 0) return NMT_OK;
    if (src.mem == NULL || dst.mem == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (ld_src < cols || ld_dst < cols) return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(ops->k_copy_rows);
    arg_mem(&a, src.mem);
    arg_u64(&a, src.off);
    arg_u32(&a, ld_src);
    arg_mem(&a, dst.mem);
    arg_u64(&a, dst.off);
    arg_u32(&a, ld_dst);
    arg_u32(&a, rows);
    arg_u32(&a, cols);
    NMT_TRY(args_end(ops->dev, &a, "copy_rows"));
    const size_t n[2] = {cols, rows};
    return nmt_ops_launch(ops, ops->k_copy_rows, 2, n, "copy_rows");
}

nmt_status nmt_op_gather_rows(nmt_ops *ops, nmt_buf src, uint64_t ld_src, nmt_buf dst, uint64_t ld_dst, nmt_buf idx,
                              uint32_t rows, uint32_t cols) {
    if (!ops_ok(ops)) return NMT_ERR_INVALID_ARGUMENT;
    if (rows == 0 || cols == 0) return NMT_OK;
    if (src.mem == NULL || dst.mem == NULL || idx.mem == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (ld_src < cols || ld_dst < cols) return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(ops->k_gather_rows);
    arg_mem(&a, src.mem);
    arg_u64(&a, src.off);
    arg_u64(&a, ld_src);
    arg_mem(&a, dst.mem);
    arg_u64(&a, dst.off);
    arg_u64(&a, ld_dst);
    arg_mem(&a, idx.mem);
    arg_u64(&a, idx.off);
    arg_u32(&a, rows);
    arg_u32(&a, cols);
    NMT_TRY(args_end(ops->dev, &a, "gather_rows"));
    const size_t n[2] = {cols, rows};
    return nmt_ops_launch(ops, ops->k_gather_rows, 2, n, "gather_rows");
}

nmt_status nmt_op_log_softmax(nmt_ops *ops, nmt_buf x, uint32_t rows, uint32_t n, uint32_t ld) {
    if (!ops_ok(ops)) return NMT_ERR_INVALID_ARGUMENT;
    if (rows == 0 || n == 0) return NMT_OK;
    if (x.mem == NULL || ld < n) return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(ops->k_log_softmax);
    arg_mem(&a, x.mem);
    arg_u64(&a, x.off);
    arg_u32(&a, n);
    arg_u32(&a, ld);
    NMT_TRY(args_end(ops->dev, &a, "log_softmax"));
    return launch_rows(ops, ops->k_log_softmax, rows, "log_softmax");
}

/* ------------------------------------------------------------------------ */
/* For the op files with products of their own (ops_f16.c): the checks     */
/* ------------------------------------------------------------------------ */

nmt_status nmt_ops_gemm_check(nmt_ops *ops, uint32_t M, uint32_t N, uint32_t K, nmt_buf A, uint32_t lda, nmt_buf W,
                              uint32_t ldw, float beta, nmt_buf C, uint32_t ldc, nmt_buf bias) {
    if (W.mem == NULL || ldw < K) return NMT_ERR_INVALID_ARGUMENT;
    NMT_TRY(nmt_ops_check_gemm(ops, M, N, K, A, lda, beta, C, ldc, bias));
    if (extent(W.off, N, ldw, K) > (uint64_t)UINT32_MAX) {
        nmt_log(&ops->dev->log, NMT_LOG_ERROR, "gemm operands beyond 32-bit element indexing");
        return NMT_ERR_UNSUPPORTED;
    }
    return NMT_OK;
}
