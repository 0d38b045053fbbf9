/* SPDX-License-Identifier: MIT */
/* fp16_compute_test.c — fp16 compute (issue 23 item 1, docs/PORTING.md
 * "Fast paths: fp16 compute"):
 *
 *   kernels   nmt_op_gemm_f16 and nmt_op_embed_f16 against the naive
 *             references of ref_ops.c (ref_gemm, ref_embed) given the same
 *             half-rounded inputs (weights stored half; activations rounded
 *             to half as the kernel does), so only the fp32 summation order
 *             differs: the fp32 products' tolerance (TOL);
 *   sessions  one random Transformer stored fp16, opened with fp16 compute
 *             off and on: the host arena is the same, nmt_session_arena_size
 *             counts device bytes exactly for both (the difference is the
 *             2-D weights' 2 bytes per element), and the teacher-forced
 *             scores of the two paths agree (tolerance below);
 *   refusals  fp16_compute out of range; ON without cl_khr_fp16.
 *
 * On a device that reports cl_khr_fp16 (Intel's CPU runtime) the fast path
 * must be taken: nmt_ops_enable_f16 and a session's fp16 compute failing
 * there fail the test.  On one without it (PoCL) the kernels cannot be
 * built (NMT_ERR_UNSUPPORTED, asserted), AUTO sessions load the weights as
 * fp32 and score bit-identically to OFF ones, and the test says that the
 * fast path is not available. */
#include "ops_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "nmt_writer.h"
#include "random_model.h"
#include "ref_ops.h"
#include "session_internal.h"

static int has_fp16(const env *e) { return e->dev->info.has_fp16; }

static void say_unavailable(const env *e, const char *what) {
    printf("fp16 compute: not available on '%s' (no cl_khr_fp16): %s\n", e->dev->info.device_name, what);
}

static int setup(void **state) {
    if (kernels_setup(state) != 0) return -1;
    env *e = *state;
    const nmt_status s = nmt_ops_enable_f16(&e->ops);
    if (has_fp16(e) ? s != NMT_OK : s != NMT_ERR_UNSUPPORTED) {
        fprintf(stderr, "nmt_ops_enable_f16: %s (device %s cl_khr_fp16)\n", nmt_status_str(s),
                has_fp16(e) ? "reports" : "lacks");
        return -1;
    }
    return 0;
}

/* Half bits of n random floats in [lo, hi) (NaN outside [off, off + rows x
 * cols) by stride ld, as host_block), and their values as floats. */
static uint16_t *half_block(nmt_test_rng *r, size_t total, size_t off, uint32_t rows, uint32_t cols, uint64_t ld,
                            float lo, float hi, float **as_float) {
    float *f = host_block(r, total, off, rows, cols, ld, lo, hi);
    uint16_t *h = malloc(total * sizeof *h);
    assert_non_null(h);
    for (size_t i = 0; i < total; i++) {
        h[i] = nmt_float_to_half(f[i]);
        f[i] = nmt_half_to_float(h[i]);
    }
    *as_float = f;
    return h;
}

/* ---- kernels -------------------------------------------------------------- */

typedef struct f16_case {
    uint32_t M, N, K;
    float alpha, beta;
    int bias, relu;
    uint32_t pad, off;
} f16_case;

static const f16_case f16_cases[] = {
    /* M   N    K   alpha beta bias relu pad off */
    {1, 37, 5, 1.0f, 0.0f, 0, 0, 0, 0},     /* one decoding row, K below a vector */
    {1, 50, 64, 1.0f, 0.0f, 1, 0, 0, 0},
    {2, 45, 19, 0.5f, 1.0f, 1, 1, 3, 5},
    {3, 7, 5, 1.0f, 0.0f, 1, 1, 0, 0},
    {4, 45, 19, 0.5f, 1.0f, 1, 1, 3, 5},
    {16, 70, 37, 1.0f, 0.0f, 1, 0, 1, 2},   /* class boundaries M = 16 | 17 */
    {17, 33, 48, 1.0f, 1.0f, 0, 1, 0, 1},
    {40, 130, 33, 1.0f, 1.0f, 0, 1, 0, 1},
    {64, 96, 80, 2.0f, 0.0f, 1, 0, 2, 3},
};

static void run_gemm_f16(env *e, const f16_case *c, uint64_t seed) {
    nmt_test_rng r = nmt_test_rng_make(seed);
    const uint32_t lda = c->K + c->pad, ldc = c->N + c->pad, ldw = c->K + c->pad;
    const size_t na = c->off + (size_t)c->M * lda + 3, nw = c->off + (size_t)c->N * ldw + 5;
    const size_t nc = c->off + (size_t)c->M * ldc + 3, nbias = c->off + c->N + 3;
    /* activations beyond half's 11 bits, so that the rounding shows */
    float *A = host_block(&r, na, c->off, c->M, c->K, lda, -3, 3);
    float *Wf;
    uint16_t *W = half_block(&r, nw, c->off, c->N, c->K, ldw, -1, 1, &Wf);
    float *C = host_block(&r, nc, c->off, c->M, c->N, ldc, -1, 1);
    if (c->beta == 0.0f) nmt_test_fill_const(C, nc, NAN);
    float *bias = host_block(&r, nbias, c->off, 1, c->N, c->N, -0.5f, 0.5f);
    float *Ah = malloc(na * sizeof *Ah);
    assert_non_null(Ah);
    for (size_t i = 0; i < na; i++) Ah[i] = nmt_half_to_float(nmt_float_to_half(A[i]));

    cl_mem dA = nmt_test_upload_f32(e->dev, A, na), dW = nmt_test_buffer(e->dev, nw * sizeof *W, W);
    cl_mem dC = nmt_test_upload_f32(e->dev, C, nc), dbias = nmt_test_upload_f32(e->dev, bias, nbias);
    nmt_test_assert_ok(e->dev, nmt_op_gemm_f16(&e->ops, c->M, c->N, c->K, c->alpha, B(dA, c->off), lda, B(dW, c->off),
                                               ldw, c->beta, B(dC, c->off), ldc, c->bias ? B(dbias, c->off) : NONE,
                                               c->relu));
    float *got = download(e, dC, nc);
    float *plain = nmt_test_dup_f32(C, nc); /* the same product without rounding A */
    ref_gemm(1, c->M, c->N, c->K, c->alpha, Ah + c->off, lda, Wf + c->off, ldw, c->beta, C + c->off, ldc,
             c->bias ? bias + c->off : NULL, c->relu);
    ref_gemm(1, c->M, c->N, c->K, c->alpha, A + c->off, lda, Wf + c->off, ldw, c->beta, plain + c->off, ldc,
             c->bias ? bias + c->off : NULL, c->relu);
    char what[160];
    snprintf(what, sizeof what, "gemm_f16 M=%u N=%u K=%u alpha=%g beta=%g bias=%d relu=%d pad=%u off=%u", c->M, c->N,
             c->K, (double)c->alpha, (double)c->beta, c->bias, c->relu, c->pad, c->off);
    check_block(got, C, nc, c->off, c->M, c->N, ldc, TOL, what);
    /* the kernel did round A: unrounded products differ by far more than TOL
     * (K >= 19 terms of relative error up to 2^-11) */
    if (c->K >= 19) {
        double num = 0, den = 0;
        for (uint32_t m = 0; m < c->M; m++)
            for (uint32_t n = 0; n < c->N; n++) {
                const size_t i = c->off + (size_t)m * ldc + n;
                num += ((double)got[i] - plain[i]) * ((double)got[i] - plain[i]);
                den += (double)plain[i] * plain[i];
            }
        assert_true(sqrt(num / (den > 0 ? den : 1)) > 10 * TOL);
    }
    nmt_test_release(dA);
    nmt_test_release(dW);
    nmt_test_release(dC);
    nmt_test_release(dbias);
    free(A);
    free(Ah);
    free(W);
    free(Wf);
    free(C);
    free(plain);
    free(bias);
    free(got);
}

static void test_gemm_f16(void **state) {
    env *e = *state;
    if (!has_fp16(e)) {
        say_unavailable(e, "gemm_f16_nt not built, the portable fp32 products serve fp16 models");
        return;
    }
    for (size_t i = 0; i < NMT_ARRAY_LEN(f16_cases); i++) run_gemm_f16(e, &f16_cases[i], 2300 + i);
}

static void test_embed_f16(void **state) {
    env *e = *state;
    if (!has_fp16(e)) {
        say_unavailable(e, "embed_f16 not built");
        return;
    }
    nmt_test_rng r = nmt_test_rng_make(77);
    const uint32_t V = 23, d = 20, rows = 7, seq_len = 3, pos0 = 5, off = 9;
    float *Ef;
    uint16_t *E = half_block(&r, off + (size_t)V * d, off, V, d, d, -2, 2, &Ef);
    int32_t tok[7];
    nmt_test_fill_int(&r, tok, rows, 0, (int32_t)V);
    cl_mem dE = nmt_test_buffer(e->dev, (off + (size_t)V * d) * sizeof *E, E);
    cl_mem dT = nmt_test_upload_i32(e->dev, tok, rows);
    cl_mem dO = nmt_test_buffer_f32_fill(e->dev, (size_t)rows * d + 4, NAN);
    nmt_test_assert_ok(e->dev, nmt_op_embed_f16(&e->ops, B(dT, 0), rows, seq_len, pos0, B(dE, off), d, 1.5f, B(dO, 2)));
    float *got = download(e, dO, (size_t)rows * d + 4);
    float want[7 * 20];
    ref_embed(tok, rows, seq_len, pos0, Ef + off, d, 1.5f, want);
    nmt_test_assert_close(got + 2, want, (size_t)rows * d, TOL);
    assert_true(isnan(got[0]) && isnan(got[1]) && isnan(got[rows * d + 2]) && isnan(got[rows * d + 3]));
    nmt_test_release(dE);
    nmt_test_release(dT);
    nmt_test_release(dO);
    free(E);
    free(Ef);
    free(got);
}

static void test_f16_arguments(void **state) {
    env *e = *state;
    float x[64] = {0};
    cl_mem m = nmt_test_upload_f32(e->dev, x, 64);
    nmt_ops bare = e->ops; /* ops without the fp16 kernels */
    memset(bare.k_gemm_f16, 0, sizeof bare.k_gemm_f16);
    bare.k_embed_f16 = NULL;
    assert_int_equal(nmt_op_gemm_f16(&bare, 2, 4, 4, 1, B(m, 0), 4, B(m, 0), 4, 0, B(m, 0), 4, NONE, 0),
                     NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_embed_f16(&bare, B(m, 0), 2, 1, 0, B(m, 0), 4, 1, B(m, 0)), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_gemm_f16(NULL, 2, 4, 4, 1, B(m, 0), 4, B(m, 0), 4, 0, B(m, 0), 4, NONE, 0),
                     NMT_ERR_INVALID_ARGUMENT);
    if (has_fp16(e)) {
        nmt_ops *o = &e->ops;
        assert_int_equal(nmt_op_gemm_f16(o, 2, 4, 4, 1, B(m, 0), 4, B(m, 0), 3, 0, B(m, 0), 4, NONE, 0),
                         NMT_ERR_INVALID_ARGUMENT); /* ldw < K */
        assert_int_equal(nmt_op_gemm_f16(o, 2, 4, 4, 1, B(m, 0), 4, NONE, 4, 0, B(m, 0), 4, NONE, 0),
                         NMT_ERR_INVALID_ARGUMENT);
        assert_int_equal(nmt_op_gemm_f16(o, 2, 4, 4, 1, B(m, 0), 4, B(m, 0), 4, 0.5f, B(m, 0), 4, NONE, 0),
                         NMT_ERR_INVALID_ARGUMENT); /* beta not 0 or 1 */
        assert_int_equal(nmt_op_gemm_f16(o, 0, 4, 4, 1, B(m, 0), 4, B(m, 0), 4, 0, B(m, 0), 4, NONE, 0), NMT_OK);
        assert_int_equal(nmt_op_embed_f16(o, NONE, 2, 1, 0, B(m, 0), 4, 1, B(m, 0)), NMT_ERR_INVALID_ARGUMENT);
        assert_int_equal(nmt_op_embed_f16(o, B(m, 0), 2, 0, 0, B(m, 0), 4, 1, B(m, 0)), NMT_ERR_INVALID_ARGUMENT);
        assert_int_equal(nmt_ops_enable_f16(o), NMT_OK); /* twice: nothing new */
    } else {
        assert_int_equal(nmt_ops_enable_f16(&e->ops), NMT_ERR_UNSUPPORTED);
        assert_null(e->ops.k_gemm_f16[0]);
    }
    nmt_test_release(m);
}

/* ---- sessions ------------------------------------------------------------- */

/* The random Transformer of random_model.h (pre-norm, HySAN branches, gate
 * fusion, tied output: every kind of weight product) with its 2-D tensors
 * stored fp16 (malloc'd image); *n2d = their elements. */
static void *f16_image(size_t *size, uint64_t *n2d) {
    nmt_random_transformer_config rc;
    nmt_random_transformer_defaults(&rc);
    rc.d_model = 64;
    rc.d_ff = 128;
    rc.src_vocab = rc.tgt_vocab = 90;
    rc.norm = "pre";
    rc.enc_branches = "global fw bw local:3";
    rc.dec_branches = "global local:3";
    rc.fusion = "gate";
    rc.tied_output = 1;
    rc.seed = 23;
    void *img32;
    size_t size32;
    assert_int_equal(nmt_random_transformer_image(&rc, &img32, &size32), NMT_OK);
    nmt_file f;
    assert_int_equal(nmt_file_open(&f, img32, size32, 1), NMT_OK);
    nmtw_writer *w = nmtw_create();
    assert_non_null(w);
    for (uint32_t i = 0; i < f.h.n_meta; i++) {
        nmt_meta_view mv;
        assert_int_equal(nmt_file_meta_at(&f, i, &mv), NMT_OK);
        char str[256];
        if (mv.type == NMT_META_I64) assert_int_equal(nmtw_set_i64(w, mv.key, mv.i64), NMT_OK);
        if (mv.type == NMT_META_F64) assert_int_equal(nmtw_set_f64(w, mv.key, mv.f64), NMT_OK);
        if (mv.type == NMT_META_STR) {
            assert_true(mv.str_len < sizeof str);
            memcpy(str, mv.str, mv.str_len);
            str[mv.str_len] = '\0';
            assert_int_equal(nmtw_set_str(w, mv.key, str), NMT_OK);
        }
    }
    *n2d = 0;
    for (uint32_t i = 0; i < f.h.n_tensors; i++) {
        nmt_tensor_view v;
        assert_int_equal(nmt_file_tensor_at(&f, i, &v), NMT_OK);
        assert_int_equal(v.dtype, NMT_DTYPE_F32);
        if (v.ndim != 2) {
            assert_int_equal(nmtw_add_tensor(w, v.name, v.dtype, v.ndim, v.shape, v.data, NULL), NMT_OK);
            continue;
        }
        uint16_t *h = malloc((size_t)v.n_elements * sizeof *h);
        assert_non_null(h);
        for (uint64_t j = 0; j < v.n_elements; j++) {
            float x;
            memcpy(&x, (const char *)v.data + 4 * j, 4);
            h[j] = nmt_float_to_half(x);
        }
        assert_int_equal(nmtw_add_tensor(w, v.name, NMT_DTYPE_F16, 2, v.shape, h, NULL), NMT_OK);
        *n2d += v.n_elements;
        free(h);
    }
    void *img;
    assert_int_equal(nmtw_write_memory(w, &img, size), NMT_OK);
    nmtw_destroy(w);
    free(img32);
    return img;
}

typedef struct opened {
    void *arena;
    nmt_session *s;
    size_t arena_bytes;
    uint64_t device_bytes;
} opened;

/* A session on img with fp16_compute `mode`, checked against the plan
 * nmt_session_arena_size makes for `plan_mode`. */
static void open_mode(env *e, void *img, size_t size, int mode, int plan_mode, opened *o) {
    const nmt_limits lim = {.max_src_len = 12, .max_tgt_len = 12, .max_batch = 3, .max_beam = 2};
    nmt_session_params p = {.model_data = img, .model_size = size, .limits = lim, .fp16_compute = plan_mode};
    assert_int_equal(nmt_session_arena_size(&p, &o->arena_bytes, &o->device_bytes), NMT_OK);
    o->arena = aligned_alloc(NMT_ARENA_ALIGNMENT, nmt_test_round_up(o->arena_bytes, NMT_ARENA_ALIGNMENT));
    assert_non_null(o->arena);
    p.fp16_compute = mode;
    nmt_test_assert_ok(e->dev, nmt_session_create(e->dev, &p, o->arena, o->arena_bytes, &o->s));
    assert_int_equal(nmt_session_arena_used(o->s), o->arena_bytes);
    assert_int_equal(o->s->pc.device_bytes, o->device_bytes); /* exact */
}

static void close_opened(opened *o) {
    nmt_session_destroy(o->s);
    free(o->arena);
}

/* Teacher-forced log-probabilities of three fixed pairs. */
static void scores(env *e, nmt_session *s, float out[3]) {
    static const int32_t s0[] = {5, 9, 17, 33, 40, 2}, s1[] = {7, 8, 2}, s2[] = {60, 61, 62, 63, 64, 65, 66, 2};
    static const int32_t t0[] = {11, 12, 13, 2}, t1[] = {80, 2}, t2[] = {20, 21, 22, 23, 24, 25, 2};
    const int32_t *sp[] = {s0, s1, s2}, *tp[] = {t0, t1, t2};
    const uint32_t sl[] = {6, 3, 8}, tl[] = {4, 2, 7};
    const nmt_batch src = {sp, sl, 3}, tgt = {tp, tl, 3};
    nmt_test_assert_ok(e->dev, nmt_session_score(s, &src, &tgt, out));
}

static void test_session_fp16(void **state) {
    env *e = *state;
    size_t size;
    uint64_t n2d;
    void *img = f16_image(&size, &n2d);

    /* the plans: same host arena; device bytes differ by exactly 2 bytes per
     * 2-D weight (every weight and fused block has an even element count) */
    const nmt_limits lim = {.max_src_len = 12, .max_tgt_len = 12, .max_batch = 3, .max_beam = 2};
    nmt_session_params p = {.model_data = img, .model_size = size, .limits = lim};
    size_t a_off, a_on, a_auto;
    uint64_t d_off, d_on, d_auto;
    assert_int_equal(nmt_session_arena_size(&p, &a_off, &d_off), NMT_OK);
    p.fp16_compute = NMT_FP16_ON;
    assert_int_equal(nmt_session_arena_size(&p, &a_on, &d_on), NMT_OK);
    p.fp16_compute = NMT_FP16_AUTO;
    assert_int_equal(nmt_session_arena_size(&p, &a_auto, &d_auto), NMT_OK);
    assert_int_equal(a_on, a_off);
    assert_int_equal(a_auto, a_off);
    assert_int_equal(d_auto, d_off); /* no device: fp32's count */
    assert_int_equal(d_off - d_on, 2 * n2d);

    opened off, fast;
    open_mode(e, img, size, NMT_FP16_OFF, NMT_FP16_OFF, &off);
    assert_int_equal(nmt_session_fp16_compute(off.s), 0);
    float s_off[3], s_fast[3];
    scores(e, off.s, s_off);
    if (has_fp16(e)) {
        open_mode(e, img, size, NMT_FP16_ON, NMT_FP16_ON, &fast);
        assert_int_equal(nmt_session_fp16_compute(fast.s), 1); /* the device has it: the path is taken */
        scores(e, fast.s, s_fast);
        /* Same fp16 weights on both paths; only the activations entering
         * each product are rounded to half (relative 2^-11 = 4.9e-4 each),
         * so log-probabilities of a few tokens move by about that relative
         * amount (measured on Intel's runtime: 6e-6 .. 2.7e-5 relative);
         * 1e-3 leaves room for other devices' summation orders and is far
         * under what a wrong weight, offset or row would give (order 1). */
        for (int i = 0; i < 3; i++) {
            const double rel = fabs((double)s_fast[i] - s_off[i]) / fmax(1.0, fabs((double)s_off[i]));
            printf("fp16 compute: pair %d log-prob %.6f (fp32 path %.6f), relative difference %.2e\n", i,
                   (double)s_fast[i], (double)s_off[i], rel);
            assert_true(rel < 1e-3);
            assert_true(s_fast[i] != s_off[i]); /* the products did run in half */
        }
        close_opened(&fast);
        open_mode(e, img, size, NMT_FP16_AUTO, NMT_FP16_ON, &fast); /* AUTO = ON here, planned exactly */
        assert_int_equal(nmt_session_fp16_compute(fast.s), 1);
        close_opened(&fast);
    } else {
        /* AUTO on a device without cl_khr_fp16: the portable path, bit for bit */
        open_mode(e, img, size, NMT_FP16_AUTO, NMT_FP16_OFF, &fast);
        assert_int_equal(nmt_session_fp16_compute(fast.s), 0);
        scores(e, fast.s, s_fast);
        assert_memory_equal(s_fast, s_off, sizeof s_off);
        close_opened(&fast);
        void *arena = aligned_alloc(NMT_ARENA_ALIGNMENT, nmt_test_round_up(a_on, NMT_ARENA_ALIGNMENT));
        assert_non_null(arena);
        nmt_session *s = NULL;
        p.fp16_compute = NMT_FP16_ON;
        assert_int_equal(nmt_session_create(e->dev, &p, arena, a_on, &s), NMT_ERR_UNSUPPORTED);
        assert_null(s);
        free(arena);
        say_unavailable(e, "sessions load fp16 weights as fp32 (scores bit-identical to fp16_compute OFF)");
    }
    close_opened(&off);

    /* an out-of-range mode is refused by both calls */
    p.fp16_compute = 3;
    size_t a;
    assert_int_equal(nmt_session_arena_size(&p, &a, NULL), NMT_ERR_INVALID_ARGUMENT);
    p.fp16_compute = -1;
    assert_int_equal(nmt_session_arena_size(&p, &a, NULL), NMT_ERR_INVALID_ARGUMENT);
    free(img);
}

/* An fp32 model: fp16 compute changes nothing (nothing to keep half). */
static void test_session_fp32_model(void **state) {
    env *e = *state;
    nmt_random_transformer_config rc;
    nmt_random_transformer_defaults(&rc);
    void *img;
    size_t size;
    assert_int_equal(nmt_random_transformer_image(&rc, &img, &size), NMT_OK);
    opened o;
    open_mode(e, img, size, has_fp16(e) ? NMT_FP16_ON : NMT_FP16_AUTO, NMT_FP16_ON, &o);
    assert_int_equal(nmt_session_fp16_compute(o.s), 0);
    assert_null(o.s->ops.k_gemm_f16[0]);
    close_opened(&o);
    free(img);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_f16),
        cmocka_unit_test(test_embed_f16),
        cmocka_unit_test(test_f16_arguments),
        cmocka_unit_test(test_session_fp16),
        cmocka_unit_test(test_session_fp32_model),
    };
    return cmocka_run_group_tests(tests, setup, ops_teardown);
}
