/* SPDX-License-Identifier: MIT */
/* ops_common.c — the op tests' fixture and helpers (see ops_common.h). */
#include "ops_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- fixture -------------------------------------------------------------- */

static int open_env(void **state, int train) {
    env *e = calloc(1, sizeof *e);
    if (e == NULL) return -1;
    e->dev = nmt_test_device_open(&e->mem);
    if (e->dev == NULL) return -1;
    nmt_status s = nmt_ops_init(&e->ops, e->dev);
    if (train) {
        if (s == NMT_OK) s = nmt_train_ops_init(&e->t, e->dev);
    } else {
        if (s == NMT_OK) s = nmt_ops_enable_q8(&e->ops);
        if (s == NMT_OK) s = nmt_ops_enable_nn(&e->ops);
    }
    if (s != NMT_OK) {
        fprintf(stderr, "ops init failed: %s\n", nmt_status_str(s));
        return -1;
    }
    *state = e;
    return 0;
}

int kernels_setup(void **state) { return open_env(state, 0); }

int grad_setup(void **state) { return open_env(state, 1); }

void close_env(env *e) {
    nmt_train_ops_release(&e->t);  /* nothing to release after kernels_setup */
    nmt_ops_release(&e->ops);
    nmt_test_device_close(e->dev, e->mem);
}

int ops_teardown(void **state) {
    env *e = *state;
    close_env(e);
    free(e);
    return 0;
}

void open_clblast_env(env *ce, int train) {
    memset(ce, 0, sizeof *ce);
    if (!nmt_device_have_clblast()) {
        fprintf(stderr, "library built without CLBlast: skipping\n");
        skip();
    }
    nmt_device_params p;
    nmt_test_default_params(&p);
    p.gemm = NMT_GEMM_CLBLAST;
    nmt_test_assert_ok(NULL, nmt_test_device_open_with(&p, &ce->mem, &ce->dev));
    nmt_test_assert_ok(ce->dev, nmt_ops_init(&ce->ops, ce->dev));
    assert_int_equal(ce->ops.gemm, NMT_GEMM_CLBLAST);
    if (train) {
        nmt_test_assert_ok(ce->dev, nmt_train_ops_init(&ce->t, ce->dev));
        assert_int_equal(ce->t.gemm, NMT_GEMM_CLBLAST);
    }
}

/* ---- reduction paths (issue 23) ------------------------------------------- */

/* 1 when a program of cl/<source>.cl (alone or joined with others by '+') was built with -DREDUCE_WG and with
 * (sg) or without -DNMT_SUBGROUPS=1. */
static int has_stem(const char *source, const char *stem) { /* source: stems joined by '+' */
    const size_t n = strlen(stem);
    for (const char *c = source;; c++) {
        const char *e = strchr(c, '+');
        const size_t len = e ? (size_t)(e - c) : strlen(c);
        if (len == n && memcmp(c, stem, n) == 0) return 1;
        if (e == NULL) return 0;
        c = e;
    }
}

static int built(const env *e, const char *source, int sg) {
    for (uint32_t i = 0; i < e->dev->n_programs; i++) {
        const nmt_program_slot *p = &e->dev->programs[i];
        if (!has_stem(p->source, source) || strstr(p->options, "-DREDUCE_WG=") == NULL) continue;
        if ((strstr(p->options, "-DNMT_SUBGROUPS=1") != NULL) == sg) return 1;
    }
    return 0;
}

void check_reduce_path(env *e) {
    const int want = e->dev->info.has_subgroups && e->dev->sg_mode != NMT_SG_OFF;
    const int want_norm = want && (!e->dev->info.is_cpu || e->dev->sg_mode == NMT_SG_ALL);
    fprintf(stderr, "reductions: %s, layernorm %s (device subgroups %s, mode %d), subgroup size %u\n",
            e->ops.subgroups ? "subgroups" : "work-group", e->ops.norm_subgroups ? "subgroups" : "portable",
            e->dev->info.has_subgroups ? "yes" : "no", e->dev->sg_mode, (unsigned)e->ops.sg_size);
    if (e->ops.subgroups != want)
        fail_msg("subgroup reductions %s, but the device %s subgroups", e->ops.subgroups ? "taken" : "not taken",
                 e->dev->info.has_subgroups ? "reports" : "does not report");
    assert_int_equal(e->ops.norm_subgroups, want_norm);
    assert_int_equal(e->ops.norm_wg, e->dev->info.is_cpu && !want_norm ? 1 : e->ops.reduce_wg);
    nmt_device_info di;
    nmt_device_get_info(e->dev, &di);
    assert_int_equal(di.subgroup_reductions, want);
    if (!built(e, "elementwise", want)) fail_msg("no elementwise program built %s subgroups", want ? "with" : "without");
    if (!built(e, "norm", want_norm)) fail_msg("no norm program built %s subgroups", want_norm ? "with" : "without");
    if (want) assert_true(e->ops.sg_size >= 1 && e->ops.sg_size <= e->ops.reduce_wg);
    else assert_int_equal(e->ops.sg_size, 0);
}

int with_ops_mode(env *e, int mode, int topk, void (*body)(env *e)) {
    if (!e->dev->info.has_subgroups || e->dev->sg_mode != NMT_SG_AUTO) return 0;
    nmt_ops fixture = e->ops;
    e->dev->sg_mode = mode;
    nmt_status s = nmt_ops_init(&e->ops, e->dev);
    if (s == NMT_OK && topk) s = nmt_ops_enable_topk(&e->ops);
    if (s == NMT_OK) check_reduce_path(e);
    e->dev->sg_mode = NMT_SG_AUTO;
    if (s != NMT_OK) {
        nmt_ops_release(&e->ops);
        e->ops = fixture;
        fail_msg("ops in subgroup mode %d: %s", mode, nmt_status_str(s));
    }
    body(e);
    nmt_ops_release(&e->ops);
    e->ops = fixture;
    return 1;
}

/* ---- buffers -------------------------------------------------------------- */

nmt_buf B(cl_mem m, size_t off) {
    nmt_buf b = {m, off};
    return b;
}

const nmt_buf NONE = {NULL, 0};

float *download(env *e, cl_mem m, size_t n) {
    float *x = nmt_test_alloc_f32(n);
    nmt_test_download_f32(e->dev, m, 0, n, x);
    return x;
}

/* ---- kernels*_test.c ------------------------------------------------------ */

int8_t *random_i8(nmt_test_rng *r, size_t n) {
    int8_t *q = malloc(n);
    assert_non_null(q);
    for (size_t i = 0; i < n; i++) q[i] = (int8_t)nmt_test_rng_int(r, -127, 128);
    return q;
}

void open_i8_ops(env *e, nmt_ops *ops, int v) {
    nmt_test_assert_ok(e->dev, nmt_ops_init(ops, e->dev));
    nmt_test_assert_ok(e->dev, nmt_ops_enable_q8(ops)); /* the device's own choice first */
    for (int c = 0; c < NMT_GCLASS_COUNT; c++) {
        if (ops->i8_use[c] != v && ops->k_gemm[NMT_GOP_I8][c] != NULL) {
            clReleaseKernel(ops->k_gemm[NMT_GOP_I8][c]); /* the other variant: rebuilt below */
            ops->k_gemm[NMT_GOP_I8][c] = NULL;
        }
        ops->i8_use[c] = (uint8_t)v;
    }
    nmt_test_assert_ok(e->dev, nmt_ops_enable_i8(ops));
    for (int c = 0; c < NMT_GCLASS_COUNT; c++) assert_int_equal(ops->i8_use[c], v);
}

float *host_block(nmt_test_rng *r, size_t total, size_t off, uint32_t rows, uint32_t cols, uint64_t ld, float lo,
                  float hi) {
    float *x = nmt_test_alloc_f32(total);
    nmt_test_fill_const(x, total, NAN);
    for (uint32_t i = 0; i < rows; i++) nmt_test_fill_uniform(r, x + off + i * ld, cols, lo, hi);
    return x;
}

static int in_block(size_t idx, size_t off, uint32_t rows, uint32_t cols, uint64_t ld) {
    if (idx < off) return 0;
    size_t rel = idx - off;
    size_t r = (size_t)(rel / ld), c = (size_t)(rel % ld);
    return r < rows && c < cols;
}

void check_block(const float *got, const float *want, size_t total, size_t off, uint32_t rows, uint32_t cols,
                 uint64_t ld, double tol, const char *what) {
    size_t n = (size_t)rows * cols;
    float *g = nmt_test_alloc_f32(n ? n : 1), *w = nmt_test_alloc_f32(n ? n : 1);
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t c = 0; c < cols; c++) {
            g[(size_t)r * cols + c] = got[off + r * ld + c];
            w[(size_t)r * cols + c] = want[off + r * ld + c];
        }
    nmt_test_assert_close_impl(g, w, n, tol, what, __FILE__, __LINE__);
    free(g);
    free(w);
    for (size_t i = 0; i < total; i++) {
        if (in_block(i, off, rows, cols, ld)) continue;
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0)
            fail_msg("%s: element %zu outside the output block was modified (%g, expected %g)", what, i,
                     (double)got[i], (double)want[i]);
    }
}

/* ---- grad*_test.c --------------------------------------------------------- */

double *widen(const float *x, size_t n) {
    double *d = malloc(sizeof(double) * (n ? n : 1));
    assert_non_null(d);
    for (size_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}

float *nan_f32(size_t n) {
    float *x = nmt_test_alloc_f32(n);
    nmt_test_fill_const(x, n, NAN);
    return x;
}

void fd_check(const char *what, loss_fn L, void *ctx, double *x, size_t n, const float *grad, const float *base) {
    float *fd = nmt_test_alloc_f32(n), *got = nmt_test_alloc_f32(n);
    size_t used = 0, skipped = 0;
    for (size_t i = 0; i < n; i++) {
        const double x0 = x[i];
        int skip = 0;
        x[i] = x0 + FD_H;
        const double lp = L(ctx, &skip);
        x[i] = x0 - FD_H;
        const double lm = L(ctx, &skip);
        x[i] = x0;
        const double g = base ? (double)grad[i] - (double)base[i] : (double)grad[i];
        if (skip) {
            skipped++;
            continue;
        }
        fd[used] = (float)((lp - lm) / (2.0 * FD_H));
        got[used] = (float)g;
        used++;
    }
    assert_true(used > 0 && skipped * 10 <= n);
    if (getenv("NMT_TEST_VERBOSE"))
        fprintf(stderr, "  %-32s fd error %.2e over %zu elements (%zu skipped at kinks)\n", what,
                nmt_test_norm_error(got, fd, used), used, skipped);
    nmt_test_assert_close_impl(got, fd, used, FD_TOL, what, __FILE__, __LINE__);
    free(fd);
    free(got);
}
