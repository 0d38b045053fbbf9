/* SPDX-License-Identifier: MIT */
/* checkpoint_test.c — training checkpoints: save and reload bit for bit
 * (parameters, Adam moments, train.* state, embedded tokenizer), keep-last-K
 * pruning, last.nmt, and the deployment export the runtime loads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "banmt_train.h"
#include "checkpoint.h"
#include "family_writer.h"
#include "format.h"
#include "random_model.h"
#include "tf_train.h"
#include "test_util.h"

static char *join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    assert_non_null(p);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static int exists(const char *dir, const char *name) {
    char *p = join(dir, name);
    FILE *f = fopen(p, "rb");
    free(p);
    if (f) fclose(f);
    return f != NULL;
}

static void *read_in(const char *dir, const char *name, size_t *n) {
    char *p = join(dir, name);
    void *d = nmt_test_read_file(p, n);
    free(p);
    assert_non_null(d);
    return d;
}

static void random_config(nmt_random_transformer_config *cfg) {
    nmt_random_transformer_defaults(cfg);
    cfg->src_vocab = cfg->tgt_vocab = 600; /* >= the fixture tokenizer's vocabulary */
    cfg->seed = 5;
}

/* No device needed: the state reader on plain models and bad input. */
static void test_read_state_errors(void **state) {
    (void)state;
    nmt_random_transformer_config cfg;
    random_config(&cfg);
    void *img;
    size_t size;
    assert_int_equal(nmt_random_transformer_image(&cfg, &img, &size), NMT_OK);
    ckpt_state st;
    assert_int_equal(ckpt_read_state(img, size, &st), NMT_ERR_MODEL_ARCH);
    assert_int_equal(ckpt_read_state(img, 64, &st), NMT_ERR_MODEL_TRUNCATED);
    assert_int_equal(ckpt_read_state(NULL, size, &st), NMT_ERR_INVALID_ARGUMENT);
    memset(img, 0x5a, 16);
    assert_int_not_equal(ckpt_read_state(img, size, &st), NMT_OK);
    free(img);
}

typedef struct env {
    nmt_device *dev;
    void *mem;
} env;

static int setup(void **state) {
    env *e = calloc(1, sizeof *e);
    if (!e) return -1;
    e->dev = nmt_test_device_open(&e->mem);
    if (!e->dev) {
        free(e);
        return -1;
    }
    *state = e;
    return 0;
}

static int teardown(void **state) {
    env *e = *state;
    nmt_test_device_close(e->dev, e->mem);
    free(e);
    return 0;
}

/* The trainer finds a family by the image's arch: an unknown arch, or none,
 * is NMT_ERR_MODEL_ARCH before anything is created. */
static void test_train_registry(void **state) {
    env *e = *state;
    assert_ptr_equal(nmt_train_family_find("transformer"), &nmt_tf_train_family);
    assert_ptr_equal(nmt_train_family_find("mgsa"), &nmt_mgsa_train_family);
    assert_ptr_equal(nmt_train_family_find("phrase"), &nmt_phrase_train_family);
    assert_ptr_equal(nmt_train_family_find("banmt"), &nmt_banmt_train_family);
    assert_null(nmt_train_family_find("mg-sa-not-yet"));
    assert_null(nmt_train_family_find(NULL));
    const nmt_train_limits lim = {.max_seqs = 2, .max_src_len = 12, .max_tgt_len = 12, .max_tokens = 0};
    for (int with_arch = 0; with_arch <= 1; with_arch++) {
        nmtw_writer *w = nmtw_create();
        assert_non_null(w);
        if (with_arch) assert_int_equal(nmtw_set_str(w, "arch", "bogus"), NMT_OK);
        assert_int_equal(nmtw_set_i64(w, "d_model", 8), NMT_OK);
        void *img;
        size_t size;
        assert_int_equal(nmtw_write_memory(w, &img, &size), NMT_OK);
        nmtw_destroy(w);
        ntm_model *m = (ntm_model *)&lim;  /* must be reset */
        assert_int_equal(ntm_create(e->dev, img, size, &lim, &m), NMT_ERR_MODEL_ARCH);
        assert_null(m);
        free(img);
    }
}

/* BA-NMT through the registry: after an Adam step (non-zero moments) a
 * checkpoint reloads to the same parameters and moments (its writer
 * output bitwise equal). */
static void test_roundtrip_banmt(void **state) {
    env *e = *state;
    nmt_ba_cfg c;
    memset(&c, 0, sizeof c);
    c.src_vocab = c.tgt_vocab = 16;
    c.emb = 8;
    c.hidden = 6;
    c.history = NMT_BA_BA;
    c.bos = 1;
    c.eos = 2;
    c.unk = 3;
    assert_int_equal(nmt_ba_finish(&c, (1ull << 9) | (1ull << 10), NULL, 0), NMT_OK);
    nmtw_writer *w = nmtw_create();
    assert_non_null(w);
    assert_int_equal(nmtw_add_hparams(w, &nmt_family_banmt, &c), NMT_OK);
    assert_int_equal(nmtw_add_random_tensors(w, &nmt_family_banmt, &c, 9, 1.0f), NMT_OK);
    void *img;
    size_t size;
    assert_int_equal(nmtw_write_memory(w, &img, &size), NMT_OK);
    nmtw_destroy(w);
    const nmt_train_limits lim = {.max_seqs = 2, .max_src_len = 4, .max_tgt_len = 3, .max_tokens = 0};
    ntm_model *m = NULL;
    nmt_test_assert_ok(e->dev, ntm_create(e->dev, img, size, &lim, &m));
    assert_ptr_equal(ntm_family(m), &nmt_banmt_train_family);
    const int32_t src[8] = {5, 6, 2, 0, 7, 8, 9, 2}, tin[6] = {1, 4, 5, 1, 6, 0}, tout[6] = {4, 5, 2, 6, 2, 0};
    const uint32_t sl[2] = {3, 4}, tl[2] = {3, 2};
    const nmt_train_batch b = {.n_seq = 2, .src_len = 4, .tgt_len = 3, .src = src, .src_lens = sl, .tgt_in = tin,
                               .tgt_out = tout, .tgt_lens = tl};
    const nmt_train_step_opts o = {.dropout = 0.2f, .label_smoothing = 0.1f, .grad_scale = 0.2f, .seed = 3};
    nmt_test_assert_ok(e->dev, ntm_forward_backward(m, &b, &o, NULL, NULL));
    nmt_adam_params ap = nmt_adam_defaults();
    ap.lr = 1e-2f;
    nmt_test_assert_ok(e->dev, ntm_adam_step(m, &ap));
    char *dir = nmt_test_make_temp_dir("ckpt-banmt");
    ckpt_state st = {1, 0, 0, 3, 5, 0.0, 0.0};
    ckpt_tokenizers tok = {NULL, NULL, 0, 0};
    char err[256] = "";
    assert_int_equal(ckpt_save(m, &tok, &st, dir, 3, err, sizeof err), NMT_OK);
    size_t cs;
    void *ck = read_in(dir, "ckpt-00000001.nmt", &cs);
    ntm_model *m2 = NULL;
    nmt_test_assert_ok(e->dev, ntm_create(e->dev, ck, cs, &lim, &m2));
    void *out[2];
    size_t out_size[2];
    ntm_model *ms[2] = {m, m2};
    for (int i = 0; i < 2; i++) {
        nmtw_writer *ww = nmtw_create();
        assert_non_null(ww);
        nmt_test_assert_ok(e->dev, ntm_add_to_writer(ms[i], ww, 1));
        assert_int_equal(nmtw_write_memory(ww, &out[i], &out_size[i]), NMT_OK);
        nmtw_destroy(ww);
    }
    assert_int_equal(out_size[0], out_size[1]);
    assert_memory_equal(out[0], out[1], out_size[0]);
    nmt_file f;
    nmt_tensor_view v;
    assert_int_equal(nmt_file_open(&f, out[1], out_size[1], 1), NMT_OK);
    assert_int_equal(nmt_file_find(&f, "train.adam_v", &v), NMT_OK);
    assert_int_equal(v.shape[0], ntm_n_params(m2));
    free(out[0]);
    free(out[1]);
    ntm_destroy(m);
    ntm_destroy(m2);
    free(ck);
    free(img);
    nmt_test_remove_tree(dir);
    free(dir);
}

static void test_roundtrip(void **state) {
    env *e = *state;
    nmt_random_transformer_config cfg;
    random_config(&cfg);
    void *img;
    size_t size;
    assert_int_equal(nmt_random_transformer_image(&cfg, &img, &size), NMT_OK);
    nmt_train_limits lim = {.max_seqs = 2, .max_src_len = 12, .max_tgt_len = 12, .max_tokens = 0};
    ntm_model *model = NULL;  /* through the trainer's registry, as nmt-edge-train */
    nmt_test_assert_ok(e->dev, ntm_create(e->dev, img, size, &lim, &model));
    assert_ptr_equal(ntm_family(model), &nmt_tf_train_family);
    tft_model *m = ntm_impl(model);
    size_t n = tft_n_params(m);
    assert_int_equal(ntm_n_params(model), n);
    assert_true(n > 0);

    /* Non-trivial optimizer state (a fresh model has M = V = 0). */
    nmt_test_rng r = nmt_test_rng_make(42);
    float *P = nmt_test_random_f32(&r, n, -1.0f, 1.0f);
    float *M = nmt_test_random_f32(&r, n, -0.01f, 0.01f);
    float *V = nmt_test_random_f32(&r, n, 0.0f, 1e-4f);
    nmt_test_assert_ok(e->dev, tft_write_state(m, P, M, V));

    size_t sp_size;
    void *sp = nmt_test_read_file(NMT_TEST_FIXTURES "/spm/uni_nfkc.model", &sp_size);
    assert_non_null(sp);
    ckpt_tokenizers tok = {sp, NULL, sp_size, 0};

    char *dir = nmt_test_make_temp_dir("ckpt");
    ckpt_state st = {7, 2, 13, 0xFFFFFFFFFFFFFFF5ull, 123456789, 12.5, 3.25};
    char err[256] = "";
    assert_int_equal(ckpt_save(model, &tok, &st, dir, 3, err, sizeof err), NMT_OK);
    assert_true(exists(dir, "ckpt-00000007.nmt"));
    assert_true(exists(dir, "last.nmt"));

    size_t cs, ls;
    void *ck = read_in(dir, "ckpt-00000007.nmt", &cs);
    void *last = read_in(dir, "last.nmt", &ls);
    assert_int_equal(cs, ls);
    assert_memory_equal(ck, last, cs);
    free(last);
    {   /* last.nmt is a second name of the checkpoint (no second copy), and no
         * temporary link is left behind */
        char pc[4200], pl[4200];
        snprintf(pc, sizeof pc, "%s/ckpt-00000007.nmt", dir);
        snprintf(pl, sizeof pl, "%s/last.nmt", dir);
        struct stat a, b;
        assert_int_equal(stat(pc, &a), 0);
        assert_int_equal(stat(pl, &b), 0);
        assert_true(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
        assert_int_equal((int)a.st_nlink, 2);
    }

    ckpt_state got;
    assert_int_equal(ckpt_read_state(ck, cs, &got), NMT_OK);
    assert_int_equal(got.step, 7);
    assert_int_equal(got.epoch, 2);
    assert_int_equal(got.index, 13);
    assert_true(got.seed == 0xFFFFFFFFFFFFFFF5ull);
    assert_int_equal(got.tokens, 123456789);
    assert_true(got.best_bleu == 12.5);
    assert_true(got.elapsed_s == 3.25);

    /* The tokenizer travels unchanged. */
    const void *tm;
    size_t tms;
    assert_int_equal(nmt_model_tokenizer(ck, cs, 0, &tm, &tms), NMT_OK);
    assert_int_equal(tms, sp_size);
    assert_memory_equal(tm, sp, sp_size);

    /* Reload: parameters and both moments bitwise equal. */
    tft_model *m2 = NULL;
    nmt_test_assert_ok(e->dev, tft_create(e->dev, ck, cs, &lim, &m2));
    assert_int_equal(tft_n_params(m2), n);
    float *P2 = nmt_test_alloc_f32(n), *M2 = nmt_test_alloc_f32(n), *V2 = nmt_test_alloc_f32(n);
    nmt_test_assert_ok(e->dev, tft_read_state(m2, P2, NULL, M2, V2));
    assert_memory_equal(P2, P, n * sizeof(float));
    assert_memory_equal(M2, M, n * sizeof(float));
    assert_memory_equal(V2, V, n * sizeof(float));
    tft_destroy(m2);
    free(ck);

    /* Keep the newest 3: after steps 8..12 only 10, 11, 12 remain (plus
     * last.nmt, which is step 12); other files are not touched. */
    char *notes = join(dir, "ckpt-notes.txt");
    assert_int_equal(nmt_test_write_file(notes, "x", 1), 0);
    for (uint64_t s = 8; s <= 12; s++) {
        st.step = s;
        assert_int_equal(ckpt_save(model, &tok, &st, dir, 3, err, sizeof err), NMT_OK);
    }
    assert_int_equal(nmt_test_count_files(dir, ".nmt", NULL, 0), 4);
    for (uint64_t s = 7; s <= 12; s++) {
        char name[32];
        snprintf(name, sizeof name, "ckpt-%08llu.nmt", (unsigned long long)s);
        assert_int_equal(exists(dir, name), s >= 10);
    }
    assert_true(exists(dir, "ckpt-notes.txt"));
    last = read_in(dir, "last.nmt", &ls);
    assert_int_equal(ckpt_read_state(last, ls, &got), NMT_OK);
    assert_int_equal(got.step, 12);
    free(last);
    st.step = 13;
    assert_int_equal(ckpt_save(model, &tok, &st, dir, 1, err, sizeof err), NMT_OK);
    assert_int_equal(nmt_test_count_files(dir, ".nmt", NULL, 0), 2);
    assert_true(exists(dir, "ckpt-00000013.nmt"));

    /* Bad arguments; a directory that is a file. */
    assert_int_equal(ckpt_save(model, &tok, &st, dir, 0, err, sizeof err), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(ckpt_save(model, &tok, NULL, dir, 1, err, sizeof err), NMT_ERR_INVALID_ARGUMENT);
    err[0] = '\0';
    assert_int_equal(ckpt_save(model, &tok, &st, notes, 1, err, sizeof err), NMT_ERR_IO);
    assert_true(strlen(err) > 0);
    /* a write that fails names the file and the reason (issue 21, item 9) */
    char *blocker = join(dir, "ckpt-00000014.nmt"), want[1200];
    assert_int_equal(mkdir(blocker, 0755), 0);
    st.step = 14;
    assert_int_equal(ckpt_save(model, &tok, &st, dir, 3, err, sizeof err), NMT_ERR_IO);
    snprintf(want, sizeof want, "cannot write '%s': a directory; only a regular file or a new path is replaced",
             blocker);
    assert_string_equal(err, want);
    rmdir(blocker);
    free(blocker);
    char *nodir = join(dir, "no-such-dir/model.nmt");
    assert_int_equal(ckpt_export_why(model, &tok, nodir, err, sizeof err), NMT_ERR_IO);
    snprintf(want, sizeof want, "cannot write '%s': the directory '%s/no-such-dir' does not exist", nodir, dir);
    assert_string_equal(err, want);
    free(nodir);

    /* Export: no train.* keys or tensors, the same parameters, and the
     * runtime opens it with its tokenizer. */
    char *exp = join(dir, "model.nmt");
    assert_int_equal(ckpt_export(model, &tok, exp), NMT_OK);
    size_t es;
    void *ex = nmt_test_read_file(exp, &es);
    assert_non_null(ex);
    nmt_file f;
    assert_int_equal(nmt_file_open(&f, ex, es, 1), NMT_OK);
    const char *meta = (const char *)ex + f.h.meta_offset;
    for (uint64_t i = 0; i + 6 <= f.h.meta_size; i++) assert_false(memcmp(meta + i, "train.", 6) == 0);
    for (uint32_t i = 0; i < f.h.n_tensors; i++) {
        nmt_tensor_view v;
        assert_int_equal(nmt_file_tensor_at(&f, i, &v), NMT_OK);
        assert_false(strncmp(v.name, "train.", 6) == 0);
    }
    assert_int_equal(ckpt_read_state(ex, es, &got), NMT_ERR_MODEL_ARCH);
    for (uint32_t i = 0; i < tft_n_tensors(m); i++) {
        const char *name;
        uint32_t nd, shape[2];
        size_t off, cnt;
        tft_tensor(m, i, &name, &nd, shape, &off, &cnt);
        nmt_tensor_view v;
        assert_int_equal(nmt_file_find(&f, name, &v), NMT_OK);
        assert_int_equal(v.dtype, NMT_DTYPE_F32);
        assert_int_equal(v.n_elements, cnt);
        assert_memory_equal(v.data, P + off, cnt * sizeof(float));
    }
    nmt_session_params sp_params = {.model_data = ex, .model_size = es, .limits = {16, 0, 1, 1, 256}};
    size_t need;
    assert_int_equal(nmt_session_arena_size(&sp_params, &need, NULL), NMT_OK);
    need += NMT_ARENA_ALIGNMENT - 1; /* malloc's pointer is not 64-aligned */
    void *arena = malloc(need);
    assert_non_null(arena);
    nmt_session *s = NULL;
    nmt_test_assert_ok(e->dev, nmt_session_create(e->dev, &sp_params, arena, need, &s));
    assert_non_null(nmt_session_tokenizer(s, 0));
    nmt_session_destroy(s);
    free(arena);
    free(ex);

    free(exp);
    free(notes);
    free(sp);
    free(P);
    free(M);
    free(V);
    free(P2);
    free(M2);
    free(V2);
    ntm_destroy(model);
    free(img);
    nmt_test_remove_tree(dir);
    free(dir);
}

int main(void) {
    const struct CMUnitTest plain[] = {
        cmocka_unit_test(test_read_state_errors),
    };
    const struct CMUnitTest dev[] = {
        cmocka_unit_test(test_train_registry),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_roundtrip_banmt),
    };
    int fails = cmocka_run_group_tests(plain, NULL, NULL);
    fails += cmocka_run_group_tests(dev, setup, teardown);
    return fails;
}
