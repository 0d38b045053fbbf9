/* SPDX-License-Identifier: MIT */
/* checkpoint_test.c — training checkpoints: save and reload bit for bit
 * (parameters, Adam moments, train.* state, embedded tokenizer), keep-last-K
 * pruning, last.nmt, the deployment export the runtime loads, and what
 * --resume checks of a checkpoint (issue 55, item 6): each train.* field
 * corrupted in turn, the CRCs valid, gives its status and its message. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "banmt_train.h"
#include "checkpoint.h"
#include "family_writer.h"
#include "format.h"
#include "format_common.h"
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

/* The random Transformer (its image in ms->img, ms->size) through the trainer's
 * registry, as nmt-edge-train creates it, with non-trivial optimizer
 * state (a fresh model has M = V = 0) from `seed`: P, M, V, the host
 * copies of n parameters (free them). */
typedef struct model_state {
    void *img;
    size_t size, n;
    float *P, *M, *V;
} model_state;

static ntm_model *model_with_state(env *e, uint64_t seed, model_state *ms) {
    nmt_random_transformer_config cfg;
    random_config(&cfg);
    assert_int_equal(nmt_random_transformer_image(&cfg, &ms->img, &ms->size), NMT_OK);
    nmt_train_limits lim = {.max_seqs = 2, .max_src_len = 12, .max_tgt_len = 12, .max_tokens = 0};
    ntm_model *model = NULL;
    nmt_test_assert_ok(e->dev, ntm_create(e->dev, ms->img, ms->size, &lim, &model));
    assert_ptr_equal(ntm_family(model), &nmt_tf_train_family);
    ms->n = tft_n_params(ntm_impl(model));
    assert_int_equal(ntm_n_params(model), ms->n);
    assert_true(ms->n > 0);
    nmt_test_rng r = nmt_test_rng_make(seed);
    ms->P = nmt_test_random_f32(&r, ms->n, -1.0f, 1.0f);
    ms->M = nmt_test_random_f32(&r, ms->n, -0.01f, 0.01f);
    ms->V = nmt_test_random_f32(&r, ms->n, 0.0f, 1e-4f);
    nmt_test_assert_ok(e->dev, tft_write_state(ntm_impl(model), ms->P, ms->M, ms->V));
    return model;
}

static void test_roundtrip(void **state) {
    env *e = *state;
    model_state ms;
    ntm_model *model = model_with_state(e, 42, &ms);
    tft_model *m = ntm_impl(model);
    const size_t n = ms.n;
    void *img = ms.img;
    float *P = ms.P, *M = ms.M, *V = ms.V;
    nmt_train_limits lim = {.max_seqs = 2, .max_src_len = 12, .max_tgt_len = 12, .max_tokens = 0};

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

/* One corrupted copy of a checkpoint and what the resume checks say of it. */
typedef struct resume_case {
    model_change c;
    nmt_status want;
    const char *msg;
} resume_case;

/* --resume's checks (ckpt_check_state, _position, _moments) on a real
 * checkpoint of n parameters, then on copies with one field changed. */
static void test_resume_checks(void **state) {
    env *e = *state;
    model_state ms;
    ntm_model *model = model_with_state(e, 7, &ms);
    const size_t n = ms.n;
    char *dir = nmt_test_make_temp_dir("ckpt-resume");
    ckpt_state st = {7, 2, 13, 5, 123456, 12.5, 3.25};
    char err[512] = "";
    assert_int_equal(ckpt_save(model, NULL, &st, dir, 1, err, sizeof err), NMT_OK);
    size_t cs;
    void *ck = read_in(dir, "ckpt-00000007.nmt", &cs);

    /* the good checkpoint passes every check, its fields read back */
    ckpt_state got;
    assert_int_equal(ckpt_check_state(ck, cs, 7, &got, err, sizeof err), NMT_OK);
    assert_string_equal(err, "");
    assert_true(got.step == 7 && got.epoch == 2 && got.index == 13 && got.seed == 5 && got.tokens == 123456);
    assert_true(got.best_bleu == 12.5 && got.elapsed_s == 3.25);
    assert_int_equal(ckpt_check_state(ck, cs, UINT64_MAX, &got, err, sizeof err), NMT_OK);
    assert_int_equal(ckpt_check_position(&got, 14, err, sizeof err), NMT_OK);
    assert_int_equal(ckpt_check_moments(ck, cs, n, err, sizeof err), NMT_OK);

    /* the step of the file's name, and the data position against the corpus */
    assert_int_equal(ckpt_check_state(ck, cs, 8, &got, err, sizeof err), NMT_ERR_MODEL_CORRUPT);
    assert_string_equal(err, "train.step 7: the file's name says step 8");
    assert_int_equal(ckpt_check_position(&st, 13, err, sizeof err), NMT_ERR_MODEL_CORRUPT);
    assert_string_equal(err, "train.index 13: not below the 13 batches of an epoch of this corpus with these "
                             "--max-tokens, --max-seqs, --max-len and --max-ratio");

    /* each scalar field: absent, of the wrong type, out of range */
#define I64(k, v) {.meta_key = k, .meta_i64 = (v)}
#define F64(k, v) {.meta_key = k, .meta_is_f64 = 1, .meta_f64 = (v)}
    const resume_case scalar[] = {
        {I64("train.step", -5), NMT_ERR_MODEL_CORRUPT, "train.step -5: must be >= 0"},
        {I64("train.step", (1ll << 40) + 1), NMT_ERR_MODEL_CORRUPT, "train.step 1099511627777: more than 2^40 steps"},
        {I64("train.step", 9), NMT_ERR_MODEL_CORRUPT, "train.step 9: the file's name says step 7"},
        {{.meta_drop = "train.step"}, NMT_ERR_MODEL_ARCH, "metadata key 'train.step' is missing (required)"},
        {{.meta_key = "train.step", .meta_str = "7"}, NMT_ERR_MODEL_ARCH,
         "metadata key 'train.step' is a string, expected an integer (i64)"},
        {I64("train.epoch", -1), NMT_ERR_MODEL_CORRUPT, "train.epoch -1: must be >= 0"},
        {I64("train.epoch", 7 * 4096 + 1), NMT_ERR_MODEL_CORRUPT,
         "train.epoch 28673: more than 7 steps of at most 4096 batches reach"},
        {{.meta_drop = "train.epoch"}, NMT_ERR_MODEL_ARCH, "metadata key 'train.epoch' is missing (required)"},
        {I64("train.index", -2), NMT_ERR_MODEL_CORRUPT, "train.index -2: must be >= 0"},
        {I64("train.index", 7 * 4096 + 1), NMT_ERR_MODEL_CORRUPT,
         "train.index 28673: more than 7 steps of at most 4096 batches reach"},
        {{.meta_drop = "train.index"}, NMT_ERR_MODEL_ARCH, "metadata key 'train.index' is missing (required)"},
        {I64("train.seed", -3), NMT_ERR_MODEL_CORRUPT, "train.seed -3: must be >= 0"},
        {I64("train.seed", (1ll << 30) + 1), NMT_ERR_MODEL_CORRUPT,
         "train.seed 1073741825: outside --seed's range [0, 1073741824]"},
        {{.meta_drop = "train.seed"}, NMT_ERR_MODEL_ARCH, "metadata key 'train.seed' is missing (required)"},
        {I64("train.tokens", -4), NMT_ERR_MODEL_CORRUPT, "train.tokens -4: must be >= 0"},
        {I64("train.tokens", 6), NMT_ERR_MODEL_CORRUPT,
         "train.tokens 6: fewer than train.step 7 (each step trains on a token at least)"},
        {I64("train.tokens", (7 * 4096 + 1) * (1ll << 24)), NMT_ERR_MODEL_CORRUPT,
         "train.tokens 481053114368: more than 7 steps of at most 4096 batches of 16777216 tokens reach"},
        {{.meta_drop = "train.tokens"}, NMT_ERR_MODEL_ARCH, "metadata key 'train.tokens' is missing (required)"},
        {F64("train.best_bleu", 100.5), NMT_ERR_MODEL_CORRUPT, "train.best_bleu 100.5: must be in [0, 100]"},
        {F64("train.best_bleu", -1), NMT_ERR_MODEL_CORRUPT, "train.best_bleu -1: must be in [0, 100]"},
        {F64("train.best_bleu", NAN), NMT_ERR_MODEL_CORRUPT, "train.best_bleu nan: must be in [0, 100]"},
        {I64("train.best_bleu", 12), NMT_ERR_MODEL_ARCH,
         "metadata key 'train.best_bleu' is an integer (i64), expected a number (f64)"},
        {F64("train.elapsed_s", -0.5), NMT_ERR_MODEL_CORRUPT, "train.elapsed_s -0.5: must be in [0, 1e+12] seconds"},
        {F64("train.elapsed_s", INFINITY), NMT_ERR_MODEL_CORRUPT, "train.elapsed_s inf: must be in [0, 1e+12] seconds"},
        {{.meta_drop = "train.elapsed_s"}, NMT_ERR_MODEL_ARCH, "metadata key 'train.elapsed_s' is missing (required)"},
    };
#undef I64
#undef F64
    for (size_t i = 0; i < sizeof scalar / sizeof scalar[0]; i++) {
        size_t bs;
        uint8_t *bad = image_variant(ck, cs, &scalar[i].c, &bs);
        nmt_status s = ckpt_check_state(bad, bs, 7, &got, err, sizeof err);
        if (s != scalar[i].want || strcmp(err, scalar[i].msg) != 0)
            fail_msg("scalar case %zu: status %d (want %d), message '%s' (want '%s')", i, s, scalar[i].want, err,
                     scalar[i].msg);
        free(bad);
    }

    /* the moments: absent, wrong shape or type, non-finite, a negative second moment */
    char want_shape[3][160];
    snprintf(want_shape[0], sizeof want_shape[0], "train.adam_m fp32 [1, %zu]: must be fp32 [%zu], the model's "
             "parameter count", n, n);
    snprintf(want_shape[1], sizeof want_shape[1], "train.adam_v u8 [%zu]: must be fp32 [%zu], the model's "
             "parameter count", 4 * n, n);
    const resume_case moment[] = {
        {{.drop = "train.adam_m"}, NMT_ERR_MODEL_MISSING_TENSOR,
         "train.adam_m: missing (the optimizer's first moment)"},
        {{.drop = "train.adam_v"}, NMT_ERR_MODEL_MISSING_TENSOR,
         "train.adam_v: missing (the optimizer's second moment)"},
        {{.reshape = "train.adam_m", .rows = 1, .cols = (uint32_t)n}, NMT_ERR_MODEL_TENSOR_SHAPE, want_shape[0]},
        {{.as_u8 = "train.adam_v"}, NMT_ERR_MODEL_TENSOR_SHAPE, want_shape[1]},
        {{.set_f32 = "train.adam_m", .set_index = 3, .set_value = NAN}, NMT_ERR_MODEL_CORRUPT,
         "train.adam_m[3] nan: not finite"},
        {{.set_f32 = "train.adam_v", .set_index = 0, .set_value = INFINITY}, NMT_ERR_MODEL_CORRUPT,
         "train.adam_v[0] inf: not finite"},
        {{.set_f32 = "train.adam_v", .set_index = 5, .set_value = -0.5f}, NMT_ERR_MODEL_CORRUPT,
         "train.adam_v[5] -0.5: must be >= 0 (a mean of squared gradients)"},
    };
    for (size_t i = 0; i < sizeof moment / sizeof moment[0]; i++) {
        size_t bs;
        uint8_t *bad = image_variant(ck, cs, &moment[i].c, &bs);
        assert_int_equal(ckpt_check_state(bad, bs, 7, &got, err, sizeof err), NMT_OK); /* the state is fine */
        nmt_status s = ckpt_check_moments(bad, bs, n, err, sizeof err);
        if (s != moment[i].want || strcmp(err, moment[i].msg) != 0)
            fail_msg("moment case %zu: status %d (want %d), message '%s' (want '%s')", i, s, moment[i].want, err,
                     moment[i].msg);
        free(bad);
    }
    /* moments of another model's parameter count */
    char want[200];
    assert_int_equal(ckpt_check_moments(ck, cs, n + 1, err, sizeof err), NMT_ERR_MODEL_TENSOR_SHAPE);
    snprintf(want, sizeof want, "train.adam_m fp32 [%zu]: must be fp32 [%zu], the model's parameter count", n, n + 1);
    assert_string_equal(err, want);
    /* a deployment model is no checkpoint */
    assert_int_equal(ckpt_check_state(ms.img, ms.size, UINT64_MAX, &got, err, sizeof err), NMT_ERR_MODEL_ARCH);
    assert_string_equal(err, "metadata key 'train.step' is missing (required)");

    free(ck);
    free(ms.P);
    free(ms.M);
    free(ms.V);
    ntm_destroy(model);
    free(ms.img);
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
        cmocka_unit_test(test_resume_checks),
    };
    int fails = cmocka_run_group_tests(plain, NULL, NULL);
    fails += cmocka_run_group_tests(dev, setup, teardown);
    return fails;
}
