/* SPDX-License-Identifier: MIT */
/* convert_errors_test.c — nmt-edge-convert when things go wrong (issue 21,
 * items 4, 6, 8, 9, 10; issue 14 leftovers a and b), with the exact
 * message or status of each case:
 *   - export never replaces a device, a directory or a dangling link, and
 *     writes through a symbolic link to a regular file;
 *   - a write that fails or is ended by a signal leaves no temporary;
 *   - write failures name the file and the reason;
 *   - info and verify fail when standard output cannot be written;
 *   - model errors name the tensor or key (convert and nmt-edge);
 *   - random is generic (--arch, flags from the family's table) and refuses
 *     what the runtime would refuse, writing nothing;
 *   - export --dtype int8 quantizes exactly the catalogue's quantizable
 *     tensors;
 *   - an output naming an input (same path, hard link, symbolic link) is
 *     refused by every writing subcommand, the input unchanged (issue 55,
 *     item 4). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "format_common.h"
#include "random_model.h"
#include "test_util.h"
#include "tool_out.h"

#ifndef NMT_CONVERT_BIN
#error "NMT_CONVERT_BIN must name the nmt-edge-convert executable"
#endif
#ifndef NMT_EDGE_BIN
#error "NMT_EDGE_BIN must name the nmt-edge executable"
#endif

static char *g_dir;
static char g_ck[4096]; /* a small random checkpoint */

static int setup(void **state) {
    (void)state;
    g_dir = nmt_test_make_temp_dir("converr");
    snprintf(g_ck, sizeof g_ck, "%s/ck.nmt", g_dir);
    nmt_random_transformer_config c;
    nmt_random_transformer_defaults(&c);
    return nmt_random_transformer_write(&c, g_ck) == NMT_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    nmt_test_remove_tree(g_dir);
    free(g_dir);
    return 0;
}

static void path_in(char *buf, size_t cap, const char *name) { snprintf(buf, cap, "%s/%s", g_dir, name); }

/* Run argv[0..] (NULL-terminated) with the program as argv[0]. */
static void run(nmt_test_proc *r, const char *prog, ...) {
    char *argv[32];
    int n = 0;
    argv[n++] = (char *)prog;
    va_list ap;
    va_start(ap, prog);
    const char *a;
    while ((a = va_arg(ap, const char *)) != NULL && n < 31) argv[n++] = (char *)a;
    va_end(ap);
    argv[n] = NULL;
    nmt_test_run(argv, NULL, g_dir, r);
}

/* The run's status and its standard error, exactly. */
static void expect(nmt_test_proc *r, int status, const char *err) {
    if (r->status != status || strcmp(r->err, err) != 0)
        fail_msg("status %d, stderr \"%s\"; want %d, \"%s\"", r->status, r->err, status, err);
    nmt_test_proc_free(r);
}

static int exists(const char *p) {
    struct stat st;
    return lstat(p, &st) == 0;
}

/* ---- item 4: what export replaces ---------------------------------------- */

static void test_export_targets(void **state) {
    (void)state;
    nmt_test_proc r;
    struct stat st;
    run(&r, NMT_CONVERT_BIN, "export", g_ck, "-o", "/dev/full", NULL);
    expect(&r, 1,
           "nmt-edge-convert export: cannot write '/dev/full': not a regular file (a character device); only a "
           "regular file or a new path is replaced\n");
    assert_int_equal(stat("/dev/full", &st), 0);
    assert_true(S_ISCHR(st.st_mode));

    char link[4200], target[4200], dir[4200], want[9000];
    path_in(link, sizeof link, "to-null");
    assert_int_equal(symlink("/dev/null", link), 0);
    run(&r, NMT_CONVERT_BIN, "export", g_ck, "-o", link, NULL);
    snprintf(want, sizeof want,
             "nmt-edge-convert export: cannot write '%s': not a regular file (a character device); only a regular "
             "file or a new path is replaced\n", link);
    expect(&r, 1, want);
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));

    path_in(dir, sizeof dir, "a-dir");
    assert_int_equal(mkdir(dir, 0755), 0);
    run(&r, NMT_CONVERT_BIN, "export", g_ck, "-o", dir, NULL);
    snprintf(want, sizeof want,
             "nmt-edge-convert export: cannot write '%s': a directory; only a regular file or a new path is "
             "replaced\n", dir);
    expect(&r, 1, want);

    /* a link to a missing file is refused; to a regular file, written through */
    path_in(link, sizeof link, "link.nmt");
    path_in(target, sizeof target, "target.nmt");
    assert_int_equal(symlink("target.nmt", link), 0);
    run(&r, NMT_CONVERT_BIN, "export", g_ck, "-o", link, NULL);
    snprintf(want, sizeof want, "nmt-edge-convert export: cannot write '%s': a symbolic link to a missing file\n",
             link);
    expect(&r, 1, want);
    assert_false(exists(target));
    assert_int_equal(nmt_test_write_file(target, "old", 3), 0);
    run(&r, NMT_CONVERT_BIN, "export", g_ck, "-o", link, NULL);
    assert_int_equal(r.status, 0);
    nmt_test_proc_free(&r);
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    nmt_model_info info;
    assert_int_equal(nmt_model_inspect_file(target, &info), NMT_OK);
    /* no temporary left anywhere */
    assert_int_equal(nmt_test_count_files(g_dir, ".tmp", NULL, 0), 0);
}

/* ---- issue 55 item 4: an output that names an input ---------------------- */

/* argv (NULL-terminated, without the program) refused with status 2 and the
 * message naming `out` and `in`; `in` keeps its bytes. */
static void expect_same_file(char **args, const char *cmd, const char *out, const char *in) {
    size_t n0 = 0, n1 = 0;
    void *before = nmt_test_read_file(in, &n0);
    assert_non_null(before);
    char *argv[16];
    int n = 0;
    argv[n++] = (char *)NMT_CONVERT_BIN;
    for (int i = 0; args[i] != NULL && n < 15; i++) argv[n++] = args[i];
    argv[n] = NULL;
    nmt_test_proc r;
    nmt_test_run(argv, NULL, g_dir, &r);
    char want[9000];
    snprintf(want, sizeof want, "nmt-edge-convert %s: -o '%s' is the input '%s' (the same file); it is not replaced "
             "(nothing was written)\n", cmd, out, in);
    expect(&r, 2, want);
    void *after = nmt_test_read_file(in, &n1);
    assert_non_null(after);
    assert_int_equal(n0, n1);
    assert_memory_equal(before, after, n0);
    free(before);
    free(after);
}

static void test_output_is_input(void **state) {
    (void)state;
    char ck2[4200], hard[4200], soft[4200], sp[4200], sp_hard[4200], sp_soft[4200], tun[4200], tun_soft[4200];
    path_in(ck2, sizeof ck2, "ck2.nmt");
    path_in(hard, sizeof hard, "ck-hard.nmt");
    path_in(soft, sizeof soft, "ck-soft.nmt");
    path_in(sp, sizeof sp, "sp.model");
    path_in(sp_hard, sizeof sp_hard, "sp-hard.model");
    path_in(sp_soft, sizeof sp_soft, "sp-soft.model");
    path_in(tun, sizeof tun, "t.tuning.txt");
    path_in(tun_soft, sizeof tun_soft, "t-soft.txt");
    size_t n = 0;
    void *img = nmt_test_read_file(g_ck, &n);
    assert_non_null(img);
    assert_int_equal(nmt_test_write_file(ck2, img, n), 0);
    free(img);
    assert_int_equal(link(g_ck, hard), 0);
    assert_int_equal(symlink("ck.nmt", soft), 0); /* relative, resolved in g_dir */
    img = nmt_test_read_file(NMT_TEST_FIXTURES "/spm/uni_nfkc.model", &n);
    assert_non_null(img);
    assert_int_equal(nmt_test_write_file(sp, img, n), 0);
    free(img);
    assert_int_equal(link(sp, sp_hard), 0);
    assert_int_equal(symlink(sp, sp_soft), 0);
    assert_int_equal(nmt_test_write_file(tun, "# tuning\n", 9), 0);
    assert_int_equal(symlink(tun, tun_soft), 0);

    static const char *const dtypes[] = {"fp32", "fp16", "int8"};
    const char *const outs[] = {g_ck, hard, soft};
    for (size_t i = 0; i < NMT_ARRAY_LEN(outs); i++) {
        /* export: the only checkpoint, or the second of two; every dtype */
        expect_same_file((char *[]){"export", g_ck, "-o", (char *)outs[i], NULL}, "export", outs[i], g_ck);
        expect_same_file((char *[]){"export", ck2, g_ck, "-o", (char *)outs[i], "--dtype", (char *)dtypes[i], NULL},
                         "export", outs[i], g_ck);
        /* the input given through the link, the output by its own path */
        expect_same_file((char *[]){"export", (char *)outs[i], "-o", g_ck, NULL}, "export", g_ck, outs[i]);
        /* kernels: the model (checked before the device is opened) */
        expect_same_file((char *[]){"kernels", "--model", g_ck, "-o", (char *)outs[i], NULL}, "kernels", outs[i],
                         g_ck);
    }
    const char *const sp_outs[] = {sp, sp_hard, sp_soft};
    for (size_t i = 0; i < NMT_ARRAY_LEN(sp_outs); i++) {
        char *o = (char *)sp_outs[i];
        expect_same_file((char *[]){"random", "-o", o, "--sp-model", sp, NULL}, "random", o, sp);
        expect_same_file((char *[]){"random", "-o", o, "--src-sp-model", sp, NULL}, "random", o, sp);
        expect_same_file((char *[]){"random", "-o", o, "--src-sp-model", g_ck, "--tgt-sp-model", sp, NULL}, "random",
                         o, sp);
    }
    /* kernels: the tuning file it reads */
    expect_same_file((char *[]){"kernels", "--model", g_ck, "--tuning", tun, "-o", tun_soft, NULL}, "kernels",
                     tun_soft, tun);
    /* a different file is no match: export to a fresh path still works */
    char fresh[4200];
    path_in(fresh, sizeof fresh, "fresh.nmt");
    nmt_test_proc r;
    run(&r, NMT_CONVERT_BIN, "export", soft, "-o", fresh, NULL);
    assert_int_equal(r.status, 0);
    nmt_test_proc_free(&r);
    run(&r, NMT_CONVERT_BIN, "export", fresh, "-o", ck2, NULL); /* replaces a file that is not an input */
    assert_int_equal(r.status, 0);
    nmt_test_proc_free(&r);
}

/* ---- item 9: write failures name the file and the reason ------------------ */

static void test_write_reasons(void **state) {
    (void)state;
    nmt_test_proc r;
    char out[4200], want[9000];
    path_in(out, sizeof out, "no-such-dir/m.nmt");
    run(&r, NMT_CONVERT_BIN, "export", g_ck, "-o", out, NULL);
    snprintf(want, sizeof want, "nmt-edge-convert export: cannot write '%s': the directory '%s/no-such-dir' does "
             "not exist\n", out, g_dir);
    expect(&r, 1, want);
    run(&r, NMT_CONVERT_BIN, "random", "-o", out, NULL);
    snprintf(want, sizeof want, "nmt-edge-convert random: cannot write '%s': the directory '%s/no-such-dir' does "
             "not exist\n", out, g_dir);
    expect(&r, 1, want);
    /* a read-only directory (root writes anyway: nothing to check there) */
    char ro[4200];
    path_in(ro, sizeof ro, "ro");
    assert_int_equal(mkdir(ro, 0555), 0);
    if (access(ro, W_OK) != 0) {
        path_in(out, sizeof out, "ro/m.nmt");
        run(&r, NMT_CONVERT_BIN, "export", g_ck, "-o", out, NULL);
        snprintf(want, sizeof want, "nmt-edge-convert export: cannot write '%s': cannot create a file in '%s': "
                 "Permission denied\n", out, ro);
        expect(&r, 1, want);
    }
    chmod(ro, 0755);
    /* the writer's own reasons (the full-disk cases are in disk_full_test) */
    nmtw_writer *w = nmtw_create();
    assert_non_null(w);
    char why[256];
    assert_int_equal(nmtw_write_file_why(w, "/dev/null", why, sizeof why), NMT_ERR_IO);
    assert_string_equal(why, "cannot write '/dev/null': not a regular file (a character device); only a regular "
                             "file or a new path is replaced");
    nmtw_destroy(w);
}

/* ---- item 6: temporaries removed on signals ------------------------------- */

/* The guard of tool_out.h: a process ended by `sig` while a temporary is
 * registered removes it and dies of the signal; after tmp_end it stays. */
static void guard_case(int sig, int registered) {
    char tmp[4200];
    path_in(tmp, sizeof tmp, "guarded.tmp.1");
    assert_int_equal(nmt_test_write_file(tmp, "partial", 7), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* (the handlers may already be installed: this process wrote a model in setup) */
        nmt_tool_tmp_begin(tmp);
        if (!registered) nmt_tool_tmp_end();
        raise(sig);
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), sig);
    assert_int_equal(exists(tmp), !registered);
    unlink(tmp);
}

static void test_signal_removes_temporary(void **state) {
    (void)state;
    guard_case(SIGTERM, 1);
    guard_case(SIGINT, 1);
    guard_case(SIGHUP, 1);
    guard_case(SIGTERM, 0);
    /* the real program: a file-size limit ends the export mid-write with
     * SIGXFSZ (or EFBIG where the signal is ignored); nothing is left */
    char out[4200], script[9000];
    path_in(out, sizeof out, "limited.nmt");
    snprintf(script, sizeof script, "ulimit -f 40; exec '%s' export '%s' -o '%s'", NMT_CONVERT_BIN, g_ck, out);
    nmt_test_proc r;
    run(&r, "/bin/sh", "-c", script, NULL);
    if (r.status != 128 + SIGXFSZ && !(r.status == 1 && strstr(r.err, "File too large (the file was not replaced)")))
        fail_msg("status %d, stderr %s", r.status, r.err);
    nmt_test_proc_free(&r);
    assert_false(exists(out));
    assert_int_equal(nmt_test_count_files(g_dir, ".tmp", NULL, 0), 0);
    char first[4200] = "";
    if (nmt_test_count_files(g_dir, ".0", first, sizeof first) != 0) fail_msg("left behind: %s", first);
}

/* ---- item 8: standard output checked ----------------------------------- */

static void test_stdout_full(void **state) {
    (void)state;
    static const char *const cmds[] = {"info", "verify"};
    for (size_t i = 0; i < 2; i++) {
        char script[9000];
        snprintf(script, sizeof script, "exec '%s' %s '%s' > /dev/full", NMT_CONVERT_BIN, cmds[i], g_ck);
        nmt_test_proc r;
        run(&r, "/bin/sh", "-c", script, NULL);
        expect(&r, 1, "nmt-edge-convert: error writing standard output: No space left on device\n");
    }
}

/* ---- item 10: model errors name the tensor or key ------------------------ */

static void test_model_errors_named(void **state) {
    (void)state;
    size_t n = 0;
    uint8_t *img = model_variant(&(model_change){.reshape = "dec.1.cross_attn.k.weight", .rows = 32, .cols = 16}, &n);
    char bad[4200], want[9000];
    path_in(bad, sizeof bad, "bad-shape.nmt");
    assert_int_equal(nmt_test_write_file(bad, img, n), 0);
    free(img);
    const char *detail = "model tensor has the wrong shape or type: tensor 'dec.1.cross_attn.k.weight' has shape "
                         "[32, 16], expected [32, 32]";
    nmt_test_proc r;
    run(&r, NMT_CONVERT_BIN, "verify", bad, NULL);
    snprintf(want, sizeof want, "nmt-edge-convert verify: '%s': architecture: %s\n", bad, detail);
    expect(&r, 1, want);
    run(&r, NMT_CONVERT_BIN, "info", bad, NULL);
    assert_int_equal(r.status, 1);
    snprintf(want, sizeof want, "architecture: FAIL (%s)\n", detail);
    assert_non_null(strstr(r.out, want));
    nmt_test_proc_free(&r);
    run(&r, NMT_EDGE_BIN, "info", "--model", bad, "--no-device", NULL);
    snprintf(want, sizeof want, "nmt-edge: cannot load model '%s': %s\n", bad, detail);
    expect(&r, 1, want);
    run(&r, NMT_CONVERT_BIN, "export", bad, "-o", "x.nmt", NULL);
    snprintf(want, sizeof want, "nmt-edge-convert export: '%s': %s\n", bad, detail);
    expect(&r, 1, want);
}

/* ---- random: generic, validated by the loader's code ---------------------- */

static void test_random_refuses(void **state) {
    (void)state;
    char out[4200];
    path_in(out, sizeof out, "refused.nmt");
    static const struct {
        const char *flag, *value, *err;
    } cases[] = {
        {"--enc-branches", "bogus",
         "nmt-edge-convert random: invalid configuration of arch 'transformer': enc_branches 'bogus': expected 1 to "
         "8 of global, fw, bw, local:K (nothing was written)\n"},
        {"--src-vocab", "2",
         "nmt-edge-convert random: invalid configuration of arch 'transformer': eos_id 2, pad_id 0 and unk_id 3 "
         "must be < both vocabularies (src_vocab 2, tgt_vocab 64) (nothing was written)\n"},
        {"--bos-id", "9999",
         "nmt-edge-convert random: invalid configuration of arch 'transformer': bos_id 9999 must be < tgt_vocab 64 "
         "(nothing was written)\n"},
        {"--norm", "mid", "nmt-edge-convert random: --norm expects one of post, pre, got 'mid'\n"},
        {"--arch", "rnn", "nmt-edge-convert random: unknown --arch 'rnn' (known: transformer, mgsa, phrase, banmt)\n"},
    };
    for (size_t i = 0; i < NMT_ARRAY_LEN(cases); i++) {
        nmt_test_proc r;
        run(&r, NMT_CONVERT_BIN, "random", "-o", out, cases[i].flag, cases[i].value, NULL);
        expect(&r, 2, cases[i].err);
        assert_false(exists(out));
    }
    /* --sp-model naming a file that is not a SentencePiece model */
    char want[9000];
    nmt_test_proc r;
    run(&r, NMT_CONVERT_BIN, "random", "-o", out, "--sp-model", g_ck, NULL);
    snprintf(want, sizeof want, "nmt-edge-convert random: '%s' is not a SentencePiece model this runtime reads "
             "(SentencePiece tokenizer model is malformed)\n", g_ck);
    expect(&r, 1, want);
    assert_false(exists(out));
    /* one with more pieces than the vocabulary */
    run(&r, NMT_CONVERT_BIN, "random", "-o", out, "--sp-model", NMT_TEST_FIXTURES "/spm/uni_nfkc.model", NULL);
    expect(&r, 2, "nmt-edge-convert random: the SentencePiece model has 600 pieces; --src-vocab 64 and --tgt-vocab "
                  "64 must be at least that (nothing was written)\n");
    assert_false(exists(out));
}

static void test_random_generic(void **state) {
    (void)state;
    nmt_test_proc r;
    run(&r, NMT_CONVERT_BIN, "random", "--help", NULL);
    assert_int_equal(r.status, 0);
    /* every family's flags, from its table */
    for (uint32_t i = 0; nmt_family_at(i) != NULL; i++) {
        const nmt_family *fam = nmt_family_at(i);
        char head[128];
        snprintf(head, sizeof head, "hyper-parameters of --arch %s", fam->arch);
        assert_non_null(strstr(r.out, head));
        for (uint32_t k = 0; k < fam->n_hparams; k++) {
            char flag[96];
            snprintf(flag, sizeof flag, "--%s ", fam->hparams[k].flag);
            assert_non_null(strstr(r.out, flag));
        }
    }
    assert_non_null(strstr(r.out, "--d-model N"));
    assert_non_null(strstr(r.out, "; default 32"));
    nmt_test_proc_free(&r);

    /* the default arch writes what nmt_random_transformer_write writes */
    char a[4200], b[4200];
    path_in(a, sizeof a, "cli.nmt");
    path_in(b, sizeof b, "api.nmt");
    run(&r, NMT_CONVERT_BIN, "random", "-o", a, "--seed", "7", "--fusion", "gate", "--enc-branches",
        "global fw", "--shared-embeddings", NULL);
    expect(&r, 0, "");
    nmt_random_transformer_config c;
    nmt_random_transformer_defaults(&c);
    c.seed = 7;
    c.fusion = "gate";
    c.enc_branches = "global fw";
    c.shared_embeddings = 1;
    assert_int_equal(nmt_random_transformer_write(&c, b), NMT_OK);
    size_t na, nb;
    void *da = nmt_test_read_file(a, &na), *db = nmt_test_read_file(b, &nb);
    assert_non_null(da);
    assert_non_null(db);
    assert_int_equal(na, nb);
    assert_memory_equal(da, db, na);
    free(da);
    free(db);

    /* another family by name, with its own flags */
    run(&r, NMT_CONVERT_BIN, "random", "-o", a, "--arch", "mgsa", "--mg-heads", "word ngram:2 ngram:2 ngram:3",
        NULL);
    expect(&r, 0, "");
    nmt_model_info info;
    assert_int_equal(nmt_model_inspect_file(a, &info), NMT_OK);
    assert_string_equal(info.arch, "mgsa");
    assert_non_null(strstr(info.family_config, "mg_heads word ngram:2 ngram:2 ngram:3"));
    /* the phrase attentions: random, then an int8 export that verifies and
     * keeps the interleaved output convolution's shape */
    run(&r, NMT_CONVERT_BIN, "random", "-o", a, "--arch", "phrase", "--ph-enc", "queryk:inter:12", "--ph-dec",
        "convkv:homo:211", "--ph-cross", "queryk:hetero:123", NULL);
    expect(&r, 0, "");
    assert_int_equal(nmt_model_inspect_file(a, &info), NMT_OK);
    assert_string_equal(info.arch, "phrase");
    assert_string_equal(info.family_config,
                        "ph_enc queryk:inter:12; ph_dec convkv:homo:211; ph_cross queryk:hetero:123");
    run(&r, NMT_CONVERT_BIN, "export", a, "-o", b, "--dtype", "int8", NULL);
    assert_int_equal(r.status, 0);
    nmt_test_proc_free(&r);
    run(&r, NMT_CONVERT_BIN, "verify", b, NULL);
    assert_int_equal(r.status, 0);
    nmt_test_proc_free(&r);
    assert_int_equal(nmt_model_inspect_file(b, &info), NMT_OK);
    assert_string_equal(info.dtype, "int8");
    run(&r, NMT_CONVERT_BIN, "random", "-o", a, "--arch", "phrase", "--ph-enc", "queryk:inter:123", NULL);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "ph_enc 'queryk:inter:123'"));
    nmt_test_proc_free(&r);
}

/* ---- leftover b: int8 only for the catalogue's quantizable tensors -------- */

static void test_export_quantizable_only(void **state) {
    (void)state;
    /* a checkpoint with a 2-D tensor the catalogue does not declare */
    nmt_random_transformer_config c;
    nmt_random_transformer_defaults(&c);
    nmtw_writer *w = nmtw_create();
    assert_non_null(w);
    assert_int_equal(nmt_random_transformer_add(w, &c), NMT_OK);
    float extra[6] = {1, -2, 3, -4, 5, -6};
    assert_int_equal(nmtw_add_f32(w, "extra.table", 2, (const uint32_t[]){2, 3}, extra), NMT_OK);
    char ck[4200], out[4200];
    path_in(ck, sizeof ck, "ck-extra.nmt");
    path_in(out, sizeof out, "q8.nmt");
    assert_int_equal(nmtw_write_file(w, ck), NMT_OK);
    nmtw_destroy(w);
    nmt_test_proc r;
    run(&r, NMT_CONVERT_BIN, "export", ck, "-o", out, "--dtype", "int8", NULL);
    assert_int_equal(r.status, 0);
    nmt_test_proc_free(&r);
    size_t n;
    uint8_t *img = nmt_test_read_file(out, &n);
    assert_non_null(img);
    nmt_file f;
    assert_int_equal(nmt_file_open(&f, img, n, 1), NMT_OK);
    uint32_t n_i8 = 0;
    for (uint32_t i = 0; i < f.h.n_tensors; i++) {
        nmt_tensor_view v;
        assert_int_equal(nmt_file_tensor_at(&f, i, &v), NMT_OK);
        const int want_i8 = v.ndim == 2 && strcmp(v.name, "extra.table") != 0;
        if ((v.dtype == NMT_DTYPE_I8) != want_i8) fail_msg("tensor %s is %s", v.name, nmt_dtype_table[v.dtype].name);
        n_i8 += v.dtype == NMT_DTYPE_I8;
    }
    assert_true(n_i8 > 10);
    free(img);
}

/* ---- issue 55 item 7: every refusal of random writes its reason ---------- */

/* One line "nmt-edge-convert random: REASON\n" of printable ASCII, REASON
 * not empty. */
static void assert_reason_line(const char *err) {
    const char *head = "nmt-edge-convert random: ";
    const size_t n = strlen(err);
    if (strncmp(err, head, strlen(head)) != 0 || n < strlen(head) + 2 || err[n - 1] != '\n')
        fail_msg("not a reason line: \"%s\"", err);
    for (size_t i = 0; i + 1 < n; i++)
        if ((unsigned char)err[i] < 0x20 || (unsigned char)err[i] > 0x7e)
            fail_msg("byte 0x%02x at %zu of \"%s\"", (unsigned char)err[i], i, err);
}

static void test_random_reasons(void **state) {
    (void)state;
    char out[4200], missing[4200];
    path_in(out, sizeof out, "reason.nmt");
    path_in(missing, sizeof missing, "no-such.model");
    static const char *const pre = "nmt-edge-convert random: ";
    const struct {
        const char *args[6];
        int status;
        const char *reason; /* after "nmt-edge-convert random: "; NULL: only the form is checked */
    } cases[] = {
        {{"--arch", "rnn"}, 2, "unknown --arch 'rnn' (known: transformer, mgsa, phrase, banmt)"},
        {{"--bogus", "1"}, 2, "unknown option '--bogus' (see nmt-edge-convert random --help)"},
        {{"--d-model"}, 2, "--d-model needs a value"},
        {{"--d-model", "abc"}, 2, "--d-model expects an integer in [2, 1048576], got 'abc'"},
        {{"--d-model", "0"}, 2, "--d-model expects an integer in [2, 1048576], got '0'"},
        {{"--ln-eps", "2"}, 2, "--ln-eps expects a number in (0, 1), got '2'"},
        {{"--ln-eps", "1e-300"}, 2, "--ln-eps expects a number in (0, 1), got '1e-300'"},
        {{"--embed-scale", "1e300"}, 2,
         "--embed-scale expects a number finite as f32 (|x| <= 3.40282e+38), got '1e300'"},
        {{"--arch", "mgsa", "--mg-heads", ""}, 2, "--mg-heads expects a non-empty string of at most 159 bytes, got ''"},
        {{"--arch", "phrase", "--ph-enc", ""}, 2, "--ph-enc expects a non-empty string of at most 31 bytes, got ''"},
        {{"--arch", "mgsa", "--mg-heads", "word bogus"}, 2, NULL},
        {{"--arch", "phrase", "--ph-enc", "bogus"}, 2, NULL},
        {{"--heads", "3"}, 2,
         "invalid configuration of arch 'transformer': d_model 32 must be divisible by n_heads 3 (nothing was "
         "written)"},
        {{"--d-model", "1048576"}, 2,
         "invalid configuration of arch 'transformer': d_model 1048576: at most 65536 (nothing was written)"},
        {{"--seed", "abc"}, 2, "--seed expects an integer in [0, 18446744073709551615], got 'abc'"},
        {{"--weight-scale", "x"}, 2, "--weight-scale expects a positive number, got 'x'"},
        {{"--sp-model", "a", "--src-sp-model", "b"}, 2, "--sp-model excludes --src-sp-model and --tgt-sp-model"},
        {{"--tgt-sp-model", "b"}, 2, "--tgt-sp-model needs --src-sp-model"},
        {{"--sp-model", missing}, 1, NULL},
        {{"--sp-model", g_ck}, 1, NULL},
        {{"--src-sp-model", NMT_TEST_FIXTURES "/spm/uni_nfkc.model"}, 2, NULL},
    };
    for (size_t i = 0; i < NMT_ARRAY_LEN(cases); i++) {
        char *argv[16];
        int n = 0;
        argv[n++] = (char *)NMT_CONVERT_BIN;
        argv[n++] = "random";
        argv[n++] = "-o";
        argv[n++] = out;
        for (int k = 0; k < 6 && cases[i].args[k] != NULL; k++) argv[n++] = (char *)cases[i].args[k];
        argv[n] = NULL;
        nmt_test_proc r;
        nmt_test_run(argv, NULL, g_dir, &r);
        if (r.status != cases[i].status) fail_msg("case %zu: status %d, stderr \"%s\"", i, r.status, r.err);
        assert_reason_line(r.err);
        if (cases[i].reason != NULL) {
            char want[1024];
            snprintf(want, sizeof want, "%s%s\n", pre, cases[i].reason);
            if (strcmp(r.err, want) != 0) fail_msg("case %zu: \"%s\", want \"%s\"", i, r.err, want);
        }
        nmt_test_proc_free(&r);
        assert_false(exists(out));
    }
    /* no -o at all */
    nmt_test_proc r;
    run(&r, NMT_CONVERT_BIN, "random", NULL);
    expect(&r, 2, "nmt-edge-convert random: -o FILE is required\n");

    /* the library: each refusal writes over a poisoned buffer */
    char why[600];
    nmt_random_model m;
    memset(why, 0x7f, sizeof why);
    assert_int_equal(nmt_random_model_init(&m, "rnn", why, sizeof why), NMT_ERR_MODEL_ARCH);
    assert_string_equal(why, "unknown --arch 'rnn' (known: transformer, mgsa, phrase, banmt)");
    assert_int_equal(nmt_random_model_init(&m, "transformer", why, sizeof why), NMT_OK);
    memset(why, 0x7f, sizeof why);
    assert_int_equal(nmt_random_model_set(&m, "no-such", "1", why, sizeof why), NMT_ERR_MODEL_ARCH);
    assert_string_equal(why, "arch 'transformer' has no hyper-parameter 'no-such'");
    memset(why, 0x7f, sizeof why);
    assert_int_equal(nmt_random_model_set(&m, "heads", "3", why, sizeof why), NMT_OK);
    memset(why, 0x7f, sizeof why);
    assert_int_equal(nmt_random_model_build(&m, NULL, why, sizeof why), NMT_ERR_INVALID_ARGUMENT);
    char want[256];
    snprintf(want, sizeof want, "no model or writer: %s", nmt_status_str(NMT_ERR_INVALID_ARGUMENT));
    assert_string_equal(why, want);
    nmtw_writer *w = nmtw_create();
    assert_non_null(w);
    memset(why, 0x7f, sizeof why);
    assert_int_equal(nmt_random_model_build(&m, w, why, sizeof why), NMT_ERR_MODEL_ARCH);
    assert_string_equal(why, "d_model 32 must be divisible by n_heads 3");
    nmtw_destroy(w);
}

/* ---- issue 55 item 5: values fp16 cannot hold, non-finite values ---------- */

/* The random Transformer checkpoint with element 3 of `tensor` set to `x`,
 * exported with `dtype`: refused with `err`, exit 1, nothing written; NULL
 * err: written. */
static void export_value(const char *tensor, float x, const char *dtype, const char *err) {
    /* a copy through the writer (new checksums), the one value changed */
    size_t n = 0;
    uint8_t *img = model_variant(&(model_change){.set_f32 = tensor, .set_index = 3, .set_value = x}, &n);
    char ck[4200], out[4200];
    path_in(ck, sizeof ck, "big.nmt");
    path_in(out, sizeof out, "big-out.nmt");
    unlink(out);
    assert_int_equal(nmt_test_write_file(ck, img, n), 0);
    free(img);
    nmt_test_proc r;
    run(&r, NMT_CONVERT_BIN, "export", ck, "-o", out, "--dtype", dtype, NULL);
    if (err == NULL) {
        assert_int_equal(r.status, 0);
        nmt_test_proc_free(&r);
        assert_true(exists(out));
        return;
    }
    expect(&r, 1, err);
    assert_false(exists(out));
}

static void test_export_fp16_range(void **state) {
    (void)state;
    const char *w = "enc.0.ffn.fc1.weight"; /* quantizable */
    const char *b = "enc.0.ffn.fc1.bias";   /* stays fp32 */
    const char *range = "is beyond fp16's range (|x| <= 65504); export with --dtype fp32 or int8 (nothing was "
                        "written)\n";
    static const float beyond[] = {65520.0f, -65520.0f, 1e5f, 3e38f};
    for (size_t i = 0; i < NMT_ARRAY_LEN(beyond); i++) {
        char want[512];
        snprintf(want, sizeof want, "nmt-edge-convert export: tensor '%s' element 3 = %g %s", w, (double)beyond[i],
                 range);
        export_value(w, beyond[i], "fp16", want);
        export_value(w, beyond[i], "fp32", NULL); /* fp32 and int8 hold it */
        export_value(w, beyond[i], "int8", NULL);
        export_value(b, beyond[i], "fp16", NULL); /* a tensor that stays fp32 */
    }
    /* the largest values that round to 65504 are fine */
    export_value(w, 65504.0f, "fp16", NULL);
    export_value(w, -65519.0f, "fp16", NULL);
    /* non-finite values are refused for every dtype */
    static const char *const dtypes[] = {"fp32", "fp16", "int8"};
    static const float nonfinite[] = {INFINITY, -INFINITY, NAN};
    for (size_t i = 0; i < NMT_ARRAY_LEN(nonfinite); i++)
        for (size_t d = 0; d < NMT_ARRAY_LEN(dtypes); d++) {
            char want[512];
            snprintf(want, sizeof want, "nmt-edge-convert export: tensor '%s' element 3 = %g is not finite (nothing "
                     "was written)\n", b, (double)nonfinite[i]);
            export_value(b, nonfinite[i], dtypes[d], want);
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_export_targets),
        cmocka_unit_test(test_output_is_input),
        cmocka_unit_test(test_export_fp16_range),
        cmocka_unit_test(test_random_reasons),
        cmocka_unit_test(test_write_reasons),
        cmocka_unit_test(test_signal_removes_temporary),
        cmocka_unit_test(test_stdout_full),
        cmocka_unit_test(test_model_errors_named),
        cmocka_unit_test(test_random_refuses),
        cmocka_unit_test(test_random_generic),
        cmocka_unit_test(test_export_quantizable_only),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
