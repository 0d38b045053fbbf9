/* SPDX-License-Identifier: MIT */
/* convert_test.c — nmt-edge-convert export / info / verify (issue 6) and the
 * runtime's fp16 and int8 weight loading.
 *
 * "Checkpoints" are random-weight models (convert/random_model.h) with
 * trainer-style extras (train.* tensors and metadata keys).  The converter
 * runs as a program (NMT_CONVERT_BIN); sessions compare raw logits of
 * teacher-forced decoding (whole target and incremental) between dtypes:
 *   fp32 export = checkpoint exactly; fp16 and int8 within tolerance of fp32;
 *   int8 = a model holding the dequantized int8 weights as fp32, closely
 *   (the int8 kernels compute the same products). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "random_model.h"
#include "session_internal.h"
#include "test_util.h"

#ifndef NMT_CONVERT_BIN
#error "NMT_CONVERT_BIN must name the nmt-edge-convert executable"
#endif

typedef struct env {
    nmt_device *dev;
    void *mem;
    char *dir;
} env;

static env *g;

static int setup(void **state) {
    g = calloc(1, sizeof *g);
    if (g == NULL) return -1;
    g->dev = nmt_test_device_open(&g->mem);
    if (g->dev == NULL) return -1;
    g->dir = nmt_test_make_temp_dir("convert");
    *state = g;
    return 0;
}

static int teardown(void **state) {
    (void)state;
    nmt_test_remove_tree(g->dir);
    free(g->dir);
    nmt_test_device_close(g->dev, g->mem);
    free(g);
    return 0;
}

/* ---- helpers ------------------------------------------------------------- */

static char *path_in(const char *name) {
    size_t n = strlen(g->dir) + strlen(name) + 2;
    char *p = malloc(n);
    assert_non_null(p);
    snprintf(p, n, "%s/%s", g->dir, name);
    return p;
}

/* Two configurations: (0) separate embeddings, pre-norm, HySAN branches
 * fused by sum; (1) shared + tied embeddings (the int8 embedding is also
 * the output projection), post-norm, gated fusion. */
static void model_cfg(int which, uint64_t seed, nmt_random_transformer_config *c) {
    nmt_random_transformer_defaults(c);
    c->d_model = 32;
    c->n_heads = 4;
    c->d_ff = 48;
    c->src_vocab = 50;
    c->tgt_vocab = which ? 50 : 40;
    c->seed = seed;
    if (which == 0) {
        c->norm = "pre";
        c->enc_branches = "global fw bw";
        c->dec_branches = "global local:2";
        c->fusion = "sum";
    } else {
        c->shared_embeddings = 1;
        c->tied_output = 1;
        c->enc_branches = "global local:3";
        c->dec_branches = "global fw";
        c->fusion = "gate";
    }
}

/* A checkpoint: the model plus optimizer state and train.* metadata. */
static void write_ckpt(const char *path, int which, uint64_t seed, uint32_t d_ff_override) {
    nmt_random_transformer_config c;
    model_cfg(which, seed, &c);
    if (d_ff_override) c.d_ff = d_ff_override;
    nmtw_writer *w = nmtw_create();
    assert_non_null(w);
    assert_int_equal(nmt_random_transformer_add(w, &c), NMT_OK);
    assert_int_equal(nmtw_set_i64(w, "train.step", (int64_t)seed * 1000), NMT_OK);
    assert_int_equal(nmtw_set_f64(w, "train.lr", 1e-3), NMT_OK);
    float m[6] = {1, 2, 3, 4, 5, (float)seed};
    uint32_t shape[1] = {6};
    assert_int_equal(nmtw_add_f32(w, "train.adam_m", 1, shape, m), NMT_OK);
    assert_int_equal(nmtw_add_f32(w, "train.adam_v", 1, shape, m), NMT_OK);
    assert_int_equal(nmtw_write_file(w, path), NMT_OK);
    nmtw_destroy(w);
}

/* Run nmt-edge-convert with up to 12 arguments (NULL-terminated). */
static void convert(nmt_test_proc *r, ...) {
    char *argv[16];
    int n = 0;
    argv[n++] = (char *)NMT_CONVERT_BIN;
    va_list ap;
    va_start(ap, r);
    const char *a;
    while ((a = va_arg(ap, const char *)) != NULL && n < 15) argv[n++] = (char *)a;
    va_end(ap);
    argv[n] = NULL;
    nmt_test_run(argv, NULL, g->dir, r);
}

static void expect_ok(nmt_test_proc *r) {
    if (r->status != 0) fprintf(stderr, "convert failed (%d): %s\n", r->status, r->err);
    assert_int_equal(r->status, 0);
}

typedef struct image {
    void *data;
    size_t size;
    nmt_file f;
} image;

static void load_image(const char *path, image *im) {
    im->data = nmt_test_read_file(path, &im->size);
    assert_non_null(im->data);
    assert_int_equal(nmt_file_open(&im->f, im->data, im->size, 1), NMT_OK);
}

/* ---- sessions and logits -------------------------------------------------- */

/* Row (i, p) of pass `half` goes to slot half * 2 * SLOTS + i * SLOTS + p. */
#define SLOTS 9
#define MAX_ROWS (2 * 2 * SLOTS)

typedef struct capture {
    float *buf;
    size_t rows, V, half;
} capture;

static void capture_row(void *user, uint32_t i, uint32_t p, int32_t label, const float *row) {
    (void)label;
    capture *c = (capture *)user;
    assert_true(i < 2 && p < SLOTS);
    memcpy(c->buf + (c->half * 2 * SLOTS + i * SLOTS + p) * c->V, row, c->V * sizeof(float));
    c->rows++;
}

/* Raw logits of fixed (src, tgt) pairs, whole-target (half 0) then
 * incremental (half 1); also checks that the arena and device byte
 * predictions are exact for this model.  *V receives tgt_vocab. */
static float *session_logits(const void *data, size_t size, size_t *n_rows, size_t *V) {
    nmt_session_params p;
    memset(&p, 0, sizeof p);
    p.model_data = data;
    p.model_size = size;
    p.limits.max_batch = 2;
    p.limits.max_beam = 2;
    p.limits.max_src_len = 8;
    p.limits.max_tgt_len = 8;
    size_t need = 0;
    uint64_t dev_bytes = 0;
    nmt_test_assert_ok(g->dev, nmt_session_arena_size(&p, &need, &dev_bytes));
    void *arena = aligned_alloc(64, nmt_test_round_up(need, 64));
    assert_non_null(arena);
    nmt_session *s = NULL;
    nmt_test_assert_ok(g->dev, nmt_session_create(g->dev, &p, arena, need, &s));
    assert_int_equal(nmt_session_arena_used(s), need);
    assert_int_equal(s->pc.device_bytes, dev_bytes);
    *V = s->info.tgt_vocab;

    const int32_t s0[] = {5, 9, 7, 11, 30}, s1[] = {8, 12, 6};
    const int32_t t0[] = {4, 6, 20, 13}, t1[] = {15, 7};
    const int32_t *srcs[] = {s0, s1}, *tgts[] = {t0, t1};
    const uint32_t sl[] = {5, 3}, tl[] = {4, 2};
    nmt_batch src = {srcs, sl, 2}, tgt = {tgts, tl, 2};
    capture c = {calloc(MAX_ROWS * *V, sizeof(float)), 0, *V, 0};
    assert_non_null(c.buf);
    for (int inc = 0; inc < 2; inc++) {
        c.half = (size_t)inc;
        nmt_test_assert_ok(g->dev, nmt_session_forced(s, &src, &tgt, inc, 0, capture_row, &c));
    }
    assert_int_equal(c.rows, 2 * (5 + 3));
    c.rows = MAX_ROWS;
    for (size_t i = 0; i < c.rows * *V; i++) assert_true(isfinite(c.buf[i]));

    /* a translation works as well */
    nmt_decode_opts o;
    memset(&o, 0, sizeof o);
    o.beam = 2;
    nmt_test_assert_ok(g->dev, nmt_session_translate(s, &src, &o));
    nmt_session_destroy(s);
    free(arena);
    *n_rows = c.rows;
    return c.buf;
}

/* Max |a - b| / max |b| over the arrays.  (The maxima as x > m ? x : m,
 * the same as fmax for x >= 0 or NaN: a double fmax reduction over widened
 * floats is an internal compiler error of Debian 12's aarch64 GCC 12.2 at
 * -O3, docs/CROSS.md "Release builds"; so in the two loops below.) */
static double rel_err(const float *a, const float *b, size_t n) {
    double e = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        const double ei = fabs((double)a[i] - b[i]), mi = fabs((double)b[i]);
        e = ei > e ? ei : e;
        m = mi > m ? mi : m;
    }
    return m > 0 ? e / m : e;
}

static double tensor_elem(const nmt_tensor_view *v, uint64_t i) {
    const unsigned char *p = (const unsigned char *)v->data;
    if (v->dtype == NMT_DTYPE_F32) {
        float x;
        memcpy(&x, p + 4 * i, 4);
        return x;
    }
    if (v->dtype == NMT_DTYPE_F16) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        return nmt_half_to_float(h);
    }
    uint64_t row_len = v->n_elements / v->shape[0];
    return (double)(int8_t)p[i] * v->scales[i / row_len];
}

/* ---- tests ---------------------------------------------------------------- */

static void test_help(void **state) {
    (void)state;
    static const char *const cmds[] = {"export", "info", "verify", "random"};
    for (size_t i = 0; i < NMT_ARRAY_LEN(cmds); i++) {
        nmt_test_proc r;
        convert(&r, cmds[i], "--help", NULL);
        expect_ok(&r);
        assert_non_null(strstr(r.out, "usage: nmt-edge-convert"));
        assert_non_null(strstr(r.out, cmds[i]));
        nmt_test_proc_free(&r);
    }
    nmt_test_proc r;
    convert(&r, "--help", NULL);
    expect_ok(&r);
    assert_non_null(strstr(r.out, "export"));
    assert_non_null(strstr(r.out, "verify"));
    nmt_test_proc_free(&r);
    /* usage errors */
    convert(&r, "export", "-o", "x.nmt", NULL); /* no checkpoint */
    assert_int_equal(r.status, 2);
    nmt_test_proc_free(&r);
    convert(&r, "export", "a.nmt", NULL); /* no -o */
    assert_int_equal(r.status, 2);
    nmt_test_proc_free(&r);
    convert(&r, "export", "a.nmt", "-o", "x.nmt", "--dtype", "int4", NULL);
    assert_int_equal(r.status, 2);
    nmt_test_proc_free(&r);
    convert(&r, "info", NULL);
    assert_int_equal(r.status, 2);
    nmt_test_proc_free(&r);
    convert(&r, "verify", "a", "b", NULL);
    assert_int_equal(r.status, 2);
    nmt_test_proc_free(&r);
}

/* fp32 export of one checkpoint: train.* gone, everything else identical,
 * same logits bit for bit. */
static void test_export_fp32_roundtrip(void **state) {
    (void)state;
    for (int which = 0; which < 2; which++) {
        char *ck = path_in("ck32.nmt"), *out = path_in("out32.nmt");
        write_ckpt(ck, which, 11, 0);
        nmt_test_proc r;
        convert(&r, "export", ck, "-o", out, NULL);
        expect_ok(&r);
        nmt_test_proc_free(&r);
        image a, b;
        load_image(ck, &a);
        load_image(out, &b);
        assert_int_equal(b.f.h.n_tensors, a.f.h.n_tensors - 2);
        assert_int_equal(b.f.h.n_meta, a.f.h.n_meta - 2);
        for (uint32_t i = 0; i < b.f.h.n_meta; i++) {
            nmt_meta_view m, ma;
            assert_int_equal(nmt_file_meta_at(&b.f, i, &m), NMT_OK);
            assert_int_equal(nmt_file_meta_at(&a.f, i, &ma), NMT_OK); /* same order, train.* last */
            assert_string_equal(m.key, ma.key);
            assert_int_equal(m.type, ma.type);
        }
        nmt_meta_view mv;
        assert_int_equal(nmt_file_meta_at(&b.f, b.f.h.n_meta, &mv), NMT_ERR_INVALID_ARGUMENT);
        for (uint32_t i = 0; i < b.f.h.n_tensors; i++) {
            nmt_tensor_view vb, va;
            assert_int_equal(nmt_file_tensor_at(&b.f, i, &vb), NMT_OK);
            assert_true(strncmp(vb.name, "train.", 6) != 0);
            assert_int_equal(nmt_file_find(&a.f, vb.name, &va), NMT_OK);
            assert_int_equal(vb.dtype, NMT_DTYPE_F32);
            assert_int_equal(vb.nbytes, va.nbytes);
            assert_memory_equal(vb.data, va.data, va.nbytes);
        }
        size_t na, nb, V;
        float *la = session_logits(a.data, a.size, &na, &V);
        float *lb = session_logits(b.data, b.size, &nb, &V);
        assert_int_equal(na, nb);
        assert_memory_equal(la, lb, na * V * sizeof(float));
        free(la);
        free(lb);
        free(a.data);
        free(b.data);
        free(ck);
        free(out);
    }
}

/* fp16 and int8 exports: the stored values follow the documented scheme and
 * the logits stay close to fp32. */
static void test_export_fp16_int8(void **state) {
    (void)state;
    for (int which = 0; which < 2; which++) {
        char *ck = path_in("ck.nmt"), *o16 = path_in("o16.nmt"), *o8 = path_in("o8.nmt");
        write_ckpt(ck, which, 21 + (uint64_t)which, 0);
        nmt_test_proc r;
        convert(&r, "export", ck, "-o", o16, "--dtype", "fp16", NULL);
        expect_ok(&r);
        nmt_test_proc_free(&r);
        convert(&r, "export", ck, "-o", o8, "--dtype=int8", NULL);
        expect_ok(&r);
        nmt_test_proc_free(&r);
        image a, h, q;
        load_image(ck, &a);
        load_image(o16, &h);
        load_image(o8, &q);
        for (uint32_t i = 0; i < q.f.h.n_tensors; i++) {
            nmt_tensor_view vq, vh, va;
            assert_int_equal(nmt_file_tensor_at(&q.f, i, &vq), NMT_OK);
            assert_int_equal(nmt_file_find(&h.f, vq.name, &vh), NMT_OK);
            assert_int_equal(nmt_file_find(&a.f, vq.name, &va), NMT_OK);
            const float *w = (const float *)va.data;
            if (va.ndim == 1) {
                assert_int_equal(vq.dtype, NMT_DTYPE_F32);
                assert_int_equal(vh.dtype, NMT_DTYPE_F32);
                assert_memory_equal(vq.data, va.data, va.nbytes);
                continue;
            }
            assert_int_equal(vh.dtype, NMT_DTYPE_F16);
            assert_int_equal(vq.dtype, NMT_DTYPE_I8);
            for (uint64_t e = 0; e < va.n_elements; e++)
                assert_int_equal(((const uint16_t *)vh.data)[e], nmt_float_to_half(w[e]));
            const uint64_t rl = va.n_elements / va.shape[0];
            for (uint32_t row = 0; row < va.shape[0]; row++) {
                double m = 0;
                for (uint64_t c = 0; c < rl; c++) {
                    const double x = fabs(w[row * rl + c]);
                    m = x > m ? x : m; /* fmax: rel_err's comment */
                }
                assert_true(vq.scales[row] == (float)(m / 127.0));
                int saw127 = 0;
                for (uint64_t c = 0; c < rl; c++) {
                    int8_t qv = ((const int8_t *)vq.data)[row * rl + c];
                    assert_true(qv != -128);
                    assert_int_equal(qv, (int)round(w[row * rl + c] * 127.0 / m));
                    saw127 |= qv == 127 || qv == -127;
                }
                assert_true(saw127);
            }
        }
        /* the reported dtype is that of the weights (1-D tensors stay fp32) */
        nmt_model_info info;
        assert_int_equal(nmt_model_inspect(h.data, h.size, &info), NMT_OK);
        assert_string_equal(info.dtype, "fp16");
        assert_int_equal(nmt_model_inspect(q.data, q.size, &info), NMT_OK);
        assert_string_equal(info.dtype, "int8");
        size_t n32, n16, n8, V;
        float *l32 = session_logits(a.data, a.size, &n32, &V);
        float *l16 = session_logits(h.data, h.size, &n16, &V);
        float *l8 = session_logits(q.data, q.size, &n8, &V);
        assert_int_equal(n16, n32);
        assert_int_equal(n8, n32);
        double e16 = rel_err(l16, l32, n32 * V), e8 = rel_err(l8, l32, n32 * V);
        printf("config %d: logits max rel error fp16 %.2e, int8 %.2e\n", which, e16, e8);
        assert_true(e16 < 2e-3);
        assert_true(e8 < 5e-2);
        /* the whole-target and incremental halves agree for int8 too */
        const size_t half = n8 / 2 * V;
        assert_true(rel_err(l8 + half, l8, half) < 1e-4);
        free(l32);
        free(l16);
        free(l8);
        free(a.data);
        free(h.data);
        free(q.data);
        free(ck);
        free(o16);
        free(o8);
    }
}

/* The int8 kernels compute what the dequantized weights compute: a session
 * on the int8 file against one on a copy holding q * scale as fp32. */
static void test_int8_equals_dequantized(void **state) {
    (void)state;
    for (int which = 0; which < 2; which++) {
        char *ck = path_in("ckq.nmt"), *o8 = path_in("q.nmt");
        write_ckpt(ck, which, 31 + (uint64_t)which, 0);
        nmt_test_proc r;
        convert(&r, "export", ck, "-o", o8, "--dtype", "int8", NULL);
        expect_ok(&r);
        nmt_test_proc_free(&r);
        image q;
        load_image(o8, &q);
        nmtw_writer *w = nmtw_create();
        assert_non_null(w);
        for (uint32_t i = 0; i < q.f.h.n_meta; i++) {
            nmt_meta_view m;
            assert_int_equal(nmt_file_meta_at(&q.f, i, &m), NMT_OK);
            if (m.type == NMT_META_I64) assert_int_equal(nmtw_set_i64(w, m.key, m.i64), NMT_OK);
            else if (m.type == NMT_META_F64) assert_int_equal(nmtw_set_f64(w, m.key, m.f64), NMT_OK);
            else {
                char buf[256];
                assert_true(m.str_len < sizeof buf);
                memcpy(buf, m.str, m.str_len);
                buf[m.str_len] = '\0';
                assert_int_equal(nmtw_set_str(w, m.key, buf), NMT_OK);
            }
        }
        for (uint32_t i = 0; i < q.f.h.n_tensors; i++) {
            nmt_tensor_view v;
            assert_int_equal(nmt_file_tensor_at(&q.f, i, &v), NMT_OK);
            float *x = malloc(v.n_elements * sizeof(float));
            assert_non_null(x);
            for (uint64_t e = 0; e < v.n_elements; e++) x[e] = (float)tensor_elem(&v, e);
            assert_int_equal(nmtw_add_f32(w, v.name, v.ndim, v.shape, x), NMT_OK);
            free(x);
        }
        void *deq;
        size_t deq_size;
        assert_int_equal(nmtw_write_memory(w, &deq, &deq_size), NMT_OK);
        nmtw_destroy(w);
        size_t n8, nd, V;
        /* the int8 weights' kernel, which is exact against the dequantized
         * weights: not the int8 x int8 path (its activations are quantized
         * too; kernels_i8dot_test bounds that error) */
        setenv("NMT_EDGE_NO_I8DOT", "1", 1);
        float *l8 = session_logits(q.data, q.size, &n8, &V);
        unsetenv("NMT_EDGE_NO_I8DOT");
        float *ld = session_logits(deq, deq_size, &nd, &V);
        assert_int_equal(n8, nd);
        double e = rel_err(l8, ld, n8 * V);
        printf("config %d: int8 vs dequantized fp32 max rel error %.2e\n", which, e);
        assert_true(e < 1e-4);
        free(l8);
        free(ld);
        free(deq);
        free(q.data);
        free(ck);
        free(o8);
    }
}

/* Mixed files load too: an fp32 model whose q (but not k, v) is int8 makes
 * the fused q|k|v fall back to fp32; some 1-D tensors as F16 / I8. */
static void test_mixed_dtypes(void **state) {
    (void)state;
    nmt_random_transformer_config c;
    model_cfg(0, 41, &c);
    void *img;
    size_t size;
    assert_int_equal(nmt_random_transformer_image(&c, &img, &size), NMT_OK);
    nmt_file f;
    assert_int_equal(nmt_file_open(&f, img, size, 1), NMT_OK);
    nmtw_writer *w = nmtw_create();
    assert_non_null(w);
    for (uint32_t i = 0; i < f.h.n_meta; i++) {
        nmt_meta_view m;
        assert_int_equal(nmt_file_meta_at(&f, i, &m), NMT_OK);
        if (m.type == NMT_META_I64) assert_int_equal(nmtw_set_i64(w, m.key, m.i64), NMT_OK);
        else if (m.type == NMT_META_F64) assert_int_equal(nmtw_set_f64(w, m.key, m.f64), NMT_OK);
        else {
            char buf[256];
            memcpy(buf, m.str, m.str_len);
            buf[m.str_len] = '\0';
            assert_int_equal(nmtw_set_str(w, m.key, buf), NMT_OK);
        }
    }
    for (uint32_t i = 0; i < f.h.n_tensors; i++) {
        nmt_tensor_view v;
        assert_int_equal(nmt_file_tensor_at(&f, i, &v), NMT_OK);
        const float *x = (const float *)v.data;
        const uint64_t n = v.n_elements;
        if (strcmp(v.name, "enc.0.self_attn.q.weight") == 0 || strcmp(v.name, "enc.1.ln1.bias") == 0) {
            int8_t *qv = malloc(n);
            float *sc = malloc(v.shape[0] * sizeof(float));
            const uint64_t rl = n / v.shape[0];
            for (uint32_t r = 0; r < v.shape[0]; r++) {
                double m = 0;
                for (uint64_t e = 0; e < rl; e++) {
                    const double a = fabs(x[r * rl + e]);
                    m = a > m ? a : m; /* fmax: rel_err's comment */
                }
                sc[r] = m > 0 ? (float)(m / 127) : 1.0f;
                for (uint64_t e = 0; e < rl; e++) qv[r * rl + e] = (int8_t)lrint(x[r * rl + e] / sc[r]);
            }
            assert_int_equal(nmtw_add_tensor(w, v.name, NMT_DTYPE_I8, v.ndim, v.shape, qv, sc), NMT_OK);
            free(qv);
            free(sc);
        } else if (strcmp(v.name, "enc.0.ln1.weight") == 0 || strcmp(v.name, "dec.0.self_attn.k.bias") == 0) {
            uint16_t *hv = malloc(n * 2);
            for (uint64_t e = 0; e < n; e++) hv[e] = nmt_float_to_half(x[e]);
            assert_int_equal(nmtw_add_tensor(w, v.name, NMT_DTYPE_F16, v.ndim, v.shape, hv, NULL), NMT_OK);
            free(hv);
        } else {
            assert_int_equal(nmtw_add_tensor(w, v.name, v.dtype, v.ndim, v.shape, v.data, NULL), NMT_OK);
        }
    }
    void *mixed;
    size_t mixed_size;
    assert_int_equal(nmtw_write_memory(w, &mixed, &mixed_size), NMT_OK);
    nmtw_destroy(w);
    nmt_model_info info;
    assert_int_equal(nmt_model_inspect(mixed, mixed_size, &info), NMT_OK);
    assert_string_equal(info.dtype, "mixed");
    size_t n0, n1, V;
    float *l0 = session_logits(img, size, &n0, &V);
    float *l1 = session_logits(mixed, mixed_size, &n1, &V);
    assert_int_equal(n0, n1);
    assert_true(rel_err(l1, l0, n0 * V) < 5e-2);
    free(l0);
    free(l1);
    free(mixed);
    free(img);
}

/* Averaging N checkpoints: every tensor is the element-wise mean (computed
 * in double, rounded once). */
static void test_average(void **state) {
    (void)state;
    enum { N = 3 };
    char *ck[N];
    image in[N];
    for (int k = 0; k < N; k++) {
        char name[32];
        snprintf(name, sizeof name, "avg%d.nmt", k);
        ck[k] = path_in(name);
        write_ckpt(ck[k], 1, 100 + (uint64_t)k, 0);
        load_image(ck[k], &in[k]);
    }
    char *out = path_in("avg.nmt");
    nmt_test_proc r;
    convert(&r, "export", ck[0], ck[1], ck[2], "-o", out, "--dtype", "fp32", NULL);
    expect_ok(&r);
    assert_non_null(strstr(r.out, "3 checkpoints averaged"));
    nmt_test_proc_free(&r);
    image o;
    load_image(out, &o);
    uint32_t checked = 0;
    for (uint32_t i = 0; i < o.f.h.n_tensors; i++) {
        nmt_tensor_view v, vk[N];
        assert_int_equal(nmt_file_tensor_at(&o.f, i, &v), NMT_OK);
        assert_int_equal(v.dtype, NMT_DTYPE_F32);
        for (int k = 0; k < N; k++) assert_int_equal(nmt_file_find(&in[k].f, v.name, &vk[k]), NMT_OK);
        const float *got = (const float *)v.data;
        int differs = 0;
        for (uint64_t e = 0; e < v.n_elements; e++) {
            double s = 0;
            for (int k = 0; k < N; k++) s += ((const float *)vk[k].data)[e];
            assert_true(got[e] == (float)(s / N));
            differs |= ((const float *)vk[0].data)[e] != ((const float *)vk[1].data)[e];
        }
        checked += differs;
    }
    assert_true(checked > 10); /* the seeds really gave different weights */
    /* averaged + quantized in one go */
    char *out8 = path_in("avg8.nmt");
    convert(&r, "export", ck[0], ck[1], ck[2], "-o", out8, "--dtype", "int8", NULL);
    expect_ok(&r);
    nmt_test_proc_free(&r);
    convert(&r, "verify", out8, NULL);
    expect_ok(&r);
    nmt_test_proc_free(&r);
    free(o.data);
    for (int k = 0; k < N; k++) {
        free(in[k].data);
        free(ck[k]);
    }
    free(out);
    free(out8);
}

/* Checkpoints of different architectures, versions or garbage: a clear
 * error naming the problem, non-zero exit, no output file. */
static void test_export_mismatch(void **state) {
    (void)state;
    char *a = path_in("mm_a.nmt"), *b = path_in("mm_b.nmt"), *c = path_in("mm_c.nmt");
    char *out = path_in("mm_out.nmt"), *v2 = path_in("mm_v2.nmt"), *junk = path_in("mm_junk.nmt");
    write_ckpt(a, 0, 1, 0);
    write_ckpt(b, 0, 2, 96);  /* d_ff differs */
    write_ckpt(c, 1, 3, 0);   /* other configuration */
    nmt_test_proc r;
    convert(&r, "export", a, b, "-o", out, NULL);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "architecture mismatch"));
    assert_non_null(strstr(r.err, "d_ff"));
    nmt_test_proc_free(&r);
    convert(&r, "export", a, c, "-o", out, NULL);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "architecture mismatch"));
    nmt_test_proc_free(&r);
    size_t n;
    assert_null(nmt_test_read_file(out, &n));

    /* a tensor of another shape under the same metadata */
    nmt_random_transformer_config cfg;
    model_cfg(0, 5, &cfg);
    nmtw_writer *w = nmtw_create();
    assert_int_equal(nmt_random_transformer_add(w, &cfg), NMT_OK);
    uint32_t shape[1] = {3};
    float x[3] = {0};
    assert_int_equal(nmtw_add_f32(w, "extra.tensor", 1, shape, x), NMT_OK);
    assert_int_equal(nmtw_write_file(w, c), NMT_OK);
    nmtw_destroy(w);
    convert(&r, "export", a, c, "-o", out, NULL);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "extra.tensor"));
    nmt_test_proc_free(&r);

    /* another format version */
    void *img = nmt_test_read_file(a, &n);
    assert_non_null(img);
    uint32_t ver = 2;
    memcpy((char *)img + 8, &ver, 4);
    assert_int_equal(nmt_test_write_file(v2, img, n), 0);
    convert(&r, "export", v2, "-o", out, NULL);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, nmt_status_str(NMT_ERR_MODEL_VERSION)));
    nmt_test_proc_free(&r);
    free(img);
    /* not a model at all; a missing file */
    assert_int_equal(nmt_test_write_file(junk, "hello", 5), 0);
    convert(&r, "export", junk, "-o", out, NULL);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, nmt_status_str(NMT_ERR_MODEL_TRUNCATED)));
    nmt_test_proc_free(&r);
    convert(&r, "export", "/nonexistent/ckpt.nmt", "-o", out, NULL);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "cannot open"));
    nmt_test_proc_free(&r);
    assert_null(nmt_test_read_file(out, &n));
    free(a);
    free(b);
    free(c);
    free(out);
    free(v2);
    free(junk);
}

/* verify: a good file passes; corrupted or truncated copies fail with the
 * runtime's status string. */
static void test_verify(void **state) {
    (void)state;
    char *ck = path_in("vf_ck.nmt"), *o8 = path_in("vf8.nmt"), *bad = path_in("vf_bad.nmt");
    write_ckpt(ck, 1, 7, 0);
    nmt_test_proc r;
    convert(&r, "export", ck, "-o", o8, "--dtype", "int8", NULL);
    expect_ok(&r);
    nmt_test_proc_free(&r);
    convert(&r, "verify", o8, NULL);
    expect_ok(&r);
    assert_non_null(strstr(r.out, "OK"));
    assert_non_null(strstr(r.out, "test forward: ok"));
    nmt_test_proc_free(&r);

    size_t n;
    unsigned char *img = nmt_test_read_file(o8, &n);
    assert_non_null(img);
    /* flip a byte inside the last tensor's data */
    img[n - 10] ^= 0x5a;
    assert_int_equal(nmt_test_write_file(bad, img, n), 0);
    convert(&r, "verify", bad, NULL);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, nmt_status_str(NMT_ERR_MODEL_CHECKSUM)));
    nmt_test_proc_free(&r);
    convert(&r, "info", bad, NULL);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.out, "CRC MISMATCH"));
    assert_non_null(strstr(r.out, "checksums: FAIL"));
    nmt_test_proc_free(&r);
    img[n - 10] ^= 0x5a;
    /* truncated */
    assert_int_equal(nmt_test_write_file(bad, img, n - 100), 0);
    convert(&r, "verify", bad, NULL);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, nmt_status_str(NMT_ERR_MODEL_TRUNCATED)));
    nmt_test_proc_free(&r);
    /* empty */
    assert_int_equal(nmt_test_write_file(bad, img, 0), 0);
    convert(&r, "verify", bad, NULL);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, nmt_status_str(NMT_ERR_MODEL_TRUNCATED)));
    nmt_test_proc_free(&r);
    /* header damage */
    img[20] ^= 1;
    assert_int_equal(nmt_test_write_file(bad, img, n), 0);
    convert(&r, "verify", bad, NULL);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, nmt_status_str(NMT_ERR_MODEL_CHECKSUM)));
    nmt_test_proc_free(&r);
    img[20] ^= 1;
    /* a device that does not exist */
    convert(&r, "verify", o8, "--device", "no-such-device-xyz", NULL);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, nmt_status_str(NMT_ERR_NO_DEVICE)));
    nmt_test_proc_free(&r);
    convert(&r, "verify", "/nonexistent/m.nmt", NULL);
    assert_int_equal(r.status, 1);
    nmt_test_proc_free(&r);
    free(img);
    free(ck);
    free(o8);
    free(bad);
}

/* info: every metadata key and tensor, the scale range, exact memory. */
static void test_info(void **state) {
    (void)state;
    char *ck = path_in("if_ck.nmt"), *o8 = path_in("if8.nmt");
    write_ckpt(ck, 0, 9, 0);
    nmt_test_proc r;
    convert(&r, "export", ck, "-o", o8, "--dtype", "int8", NULL);
    expect_ok(&r);
    nmt_test_proc_free(&r);
    convert(&r, "info", o8, "--max-batch", "3", "--max-beam", "2", "--max-src-len", "20", NULL);
    expect_ok(&r);
    image q;
    load_image(o8, &q);
    for (uint32_t i = 0; i < q.f.h.n_meta; i++) {
        nmt_meta_view m;
        assert_int_equal(nmt_file_meta_at(&q.f, i, &m), NMT_OK);
        assert_non_null(strstr(r.out, m.key));
    }
    for (uint32_t i = 0; i < q.f.h.n_tensors; i++) {
        nmt_tensor_view v;
        assert_int_equal(nmt_file_tensor_at(&q.f, i, &v), NMT_OK);
        assert_non_null(strstr(r.out, v.name));
    }
    assert_null(strstr(r.out, "train."));
    assert_non_null(strstr(r.out, "int8 scales:"));
    assert_non_null(strstr(r.out, "checksums: ok"));
    assert_non_null(strstr(r.out, "d_model 32"));
    nmt_session_params p;
    memset(&p, 0, sizeof p);
    p.model_data = q.data;
    p.model_size = q.size;
    p.limits.max_batch = 3;
    p.limits.max_beam = 2;
    p.limits.max_src_len = 20;
    size_t arena;
    uint64_t dev;
    assert_int_equal(nmt_session_arena_size(&p, &arena, &dev), NMT_OK);
    char want[128];
    snprintf(want, sizeof want, "arena bytes %zu, device bytes %llu", arena, (unsigned long long)dev);
    assert_non_null(strstr(r.out, want));
    nmt_test_proc_free(&r);
    free(q.data);
    free(ck);
    free(o8);
}

/* int8 weights need less device memory than fp32 ones. */
static void test_int8_device_bytes(void **state) {
    (void)state;
    char *ck = path_in("db_ck.nmt"), *o8 = path_in("db8.nmt"), *o16 = path_in("db16.nmt");
    write_ckpt(ck, 1, 3, 0);
    nmt_test_proc r;
    convert(&r, "export", ck, "-o", o8, "--dtype", "int8", NULL);
    expect_ok(&r);
    nmt_test_proc_free(&r);
    convert(&r, "export", ck, "-o", o16, "--dtype", "fp16", NULL);
    expect_ok(&r);
    nmt_test_proc_free(&r);
    uint64_t dev[3];
    const char *paths[3] = {ck, o16, o8};
    for (int i = 0; i < 3; i++) {
        nmt_session_params p;
        memset(&p, 0, sizeof p);
        p.model_path = paths[i];
        p.limits.max_src_len = 4;
        p.limits.max_beam = 1;
        size_t arena;
        assert_int_equal(nmt_session_arena_size(&p, &arena, &dev[i]), NMT_OK);
    }
    assert_int_equal(dev[0], dev[1]);  /* fp16 is converted to fp32 at load */
    assert_true(dev[2] < dev[0]);
    free(ck);
    free(o8);
    free(o16);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help),
        cmocka_unit_test(test_export_fp32_roundtrip),
        cmocka_unit_test(test_export_fp16_int8),
        cmocka_unit_test(test_int8_equals_dequantized),
        cmocka_unit_test(test_mixed_dtypes),
        cmocka_unit_test(test_average),
        cmocka_unit_test(test_export_mismatch),
        cmocka_unit_test(test_verify),
        cmocka_unit_test(test_info),
        cmocka_unit_test(test_int8_device_bytes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
