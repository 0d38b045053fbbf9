/* SPDX-License-Identifier: MIT */
/* train_cli_test.c — nmt-edge-train end to end (issue 5):
 *   - a small HySAN model learns a synthetic task (reverse a random token
 *     string) and `nmt-edge translate` then reverses unseen strings;
 *   - a run killed with SIGKILL several times (the checkpoint every step, so
 *     kills also land inside checkpoint writes) and resumed each time ends
 *     with exactly the bytes of an uninterrupted run, and every checkpoint
 *     left behind validates;
 *   - SIGTERM writes a checkpoint and exits 128 + 15; --resume continues;
 *   - one trainer per run directory (issue 55): a second one is refused
 *     while the first holds DIR/.lock, never after it died;
 *   - --resume refuses a checkpoint whose train.* state is impossible
 *     (issue 55, item 6), naming the file and the field, the directory
 *     left as it was;
 *   - bad input: exact exit codes and messages. */
#define _DEFAULT_SOURCE /* flock(), gethostname() */
#include "spans_file.h"
#include "test_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "format.h"
#include "format_common.h"
#include "model_arch.h"
#include "plot.h"
#include "random_model.h"

#ifndef NMT_TRAIN_BIN
#error "NMT_TRAIN_BIN must name the nmt-edge-train executable"
#endif
#ifndef NMT_EDGE_BIN
#error "NMT_EDGE_BIN must name the nmt-edge executable"
#endif

#define VOCAB 16   /* pad 0, bos 1, eos 2, unk 3, symbols 4..15 */

static char *g_dir;

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* n random strings of symbols and their reversals, one per line. */
static void write_reverse_task(const char *src_path, const char *tgt_path, uint32_t n, uint64_t seed,
                               int32_t (*seqs)[8], uint32_t *lens) {
    nmt_test_rng rng = nmt_test_rng_make(seed);
    size_t cap = (size_t)n * 8 * 4 + 16;
    char *a = malloc(cap), *b = malloc(cap);
    assert_non_null(a);
    assert_non_null(b);
    size_t la = 0, lb = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t len = (uint32_t)nmt_test_rng_int(&rng, 2, 8);
        int32_t s[8];
        for (uint32_t j = 0; j < len; j++) s[j] = nmt_test_rng_int(&rng, 4, VOCAB);
        for (uint32_t j = 0; j < len; j++) la += (size_t)sprintf(a + la, j ? " %d" : "%d", s[j]);
        for (uint32_t j = 0; j < len; j++) lb += (size_t)sprintf(b + lb, j ? " %d" : "%d", s[len - 1 - j]);
        a[la++] = '\n';
        b[lb++] = '\n';
        if (seqs) {
            memcpy(seqs[i], s, sizeof s);
            lens[i] = len;
        }
    }
    assert_int_equal(nmt_test_write_file(src_path, a, la), 0);
    assert_int_equal(nmt_test_write_file(tgt_path, b, lb), 0);
    free(a);
    free(b);
}

static int setup(void **state) {
    (void)state;
    g_dir = nmt_test_make_temp_dir("train-cli");
    return 0;
}

static int teardown(void **state) {
    (void)state;
    if (getenv("NMT_TEST_KEEP") == NULL) nmt_test_remove_tree(g_dir);
    free(g_dir);
    return 0;
}

static void path_in(char *buf, size_t cap, const char *name) { snprintf(buf, cap, "%s/%s", g_dir, name); }

/* argv for nmt-edge-train: the common options, then `extra` (NULL-terminated). */
static int train_argv(char **argv, const char *out_dir, const char *src, const char *tgt, char **extra) {
    int n = 0;
    argv[n++] = (char *)NMT_TRAIN_BIN;
    argv[n++] = "--train-src";
    argv[n++] = (char *)src;
    argv[n++] = "--train-tgt";
    argv[n++] = (char *)tgt;
    argv[n++] = "--out";
    argv[n++] = (char *)out_dir;
    argv[n++] = "--ids";
    argv[n++] = "--vocab";
    argv[n++] = "16";
    argv[n++] = "--quiet";
    for (int i = 0; extra && extra[i]; i++) argv[n++] = extra[i];
    argv[n] = NULL;
    return n;
}

static void expect_status(const nmt_test_proc *r, int status) {
    if (r->status != status) fprintf(stderr, "expected exit %d, got %d; stderr:\n%s\n", status, r->status, r->err);
    assert_int_equal(r->status, status);
}

/* ---- the synthetic task ---------------------------------------------------- */

static void test_learns_reversal(void **state) {
    (void)state;
    char src[512], tgt[512], dsrc[512], dtgt[512], out[512], model[600];
    path_in(src, sizeof src, "rev.src");
    path_in(tgt, sizeof tgt, "rev.tgt");
    path_in(dsrc, sizeof dsrc, "rev-dev.src");
    path_in(dtgt, sizeof dtgt, "rev-dev.tgt");
    path_in(out, sizeof out, "rev-run");
    write_reverse_task(src, tgt, 4000, 11, NULL, NULL);
    enum { N_TEST = 40 };
    int32_t seqs[N_TEST][8];
    uint32_t lens[N_TEST];
    write_reverse_task(dsrc, dtgt, N_TEST, 12345, seqs, lens);
    /* --clip-norm 1: at lr 3e-3 without clipping, loss spikes came and went
     * (one kernel change moved a spike onto step 700: dev BLEU 100 at step
     * 600, 83 at 700, 100 at 900); clipped, the curve is monotone here. */
    char *extra[] = {"--dev-src", dsrc, "--dev-tgt", dtgt, "--d-model", "32", "--heads", "2", "--ff", "64",
                     "--enc-layers", "2", "--dec-layers", "2", "--enc-branches", "global fw bw",
                     "--dec-branches", "global local:2", "--fusion", "gate", "--schedule", "inverse-sqrt",
                     "--lr", "0.003", "--warmup", "100", "--max-tokens", "640", "--dropout", "0",
                     "--max-steps", "700", "--eval-every", "350", "--save-every", "350", "--log-every", "50",
                     "--beam", "2", "--clip-norm", "1", NULL};
    char *argv[80];
    train_argv(argv, out, src, tgt, extra);
    nmt_test_proc r;
    nmt_test_run(argv, NULL, g_dir, &r);
    expect_status(&r, 0);
    nmt_test_proc_free(&r);

    /* the log has train and dev lines; the last dev BLEU is high */
    char log[600];
    snprintf(log, sizeof log, "%s/log.jsonl", out);
    size_t n;
    char *text = nmt_test_read_file(log, &n);
    assert_non_null(text);
    const char *last_dev = NULL;
    for (const char *p = text; (p = strstr(p, "\"kind\":\"dev\"")) != NULL; p++) last_dev = p;
    assert_non_null(last_dev);
    const char *b = strstr(last_dev, "\"bleu\":");
    assert_non_null(b);
    double bleu = atof(b + 7);
    fprintf(stderr, "reverse task: dev BLEU %.2f after 700 steps\n", bleu);
    assert_true(bleu > 90.0);
    free(text);
    char svg[600];
    snprintf(svg, sizeof svg, "%s/plot.svg", out);
    assert_non_null(strstr(text = nmt_test_read_file(svg, &n), "<svg"));
    free(text);

    /* the deployment model translates unseen strings with the runtime */
    snprintf(model, sizeof model, "%s/model.nmt", out);
    char *in = malloc(N_TEST * 8 * 4 + 8);
    size_t li = 0;
    for (int i = 0; i < N_TEST; i++) {
        for (uint32_t j = 0; j < lens[i]; j++) li += (size_t)sprintf(in + li, j ? " %d" : "%d", seqs[i][j]);
        in[li++] = '\n';
    }
    in[li] = 0;
    char *targv[] = {(char *)NMT_EDGE_BIN, "translate", "--model", model, "--ids", NULL};
    nmt_test_run(targv, in, g_dir, &r);
    expect_status(&r, 0);
    int correct = 0;
    char *line = r.out;
    for (int i = 0; i < N_TEST && line && *line; i++) {
        char *nl = strchr(line, '\n');
        assert_non_null(nl);
        *nl = 0;
        char want[64];
        size_t lw = 0;
        for (uint32_t j = 0; j < lens[i]; j++)
            lw += (size_t)sprintf(want + lw, j ? " %d" : "%d", seqs[i][lens[i] - 1 - j]);
        correct += strcmp(line, want) == 0;
        line = nl + 1;
    }
    fprintf(stderr, "reverse task: %d of %d unseen strings reversed exactly by nmt-edge translate\n", correct, N_TEST);
    assert_true(correct >= N_TEST * 9 / 10);
    nmt_test_proc_free(&r);
    free(in);
}

/* ---- SIGKILL and resume ---------------------------------------------------- */

static char *small_args[] = {"--d-model", "16", "--heads", "2", "--ff", "32", "--enc-layers", "1", "--dec-layers",
                             "1", "--enc-branches", "global fw", "--fusion", "gate", "--gate-reduction", "2",
                             "--schedule", "inverse-sqrt", "--lr", "0.002", "--warmup", "10", "--max-tokens",
                             "128", "--dropout", "0.1", "--max-steps", "60", "--save-every", "1", "--keep",
                             "3", "--log-every", "5", NULL};

static int file_exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0;
}

/* Highest step of a ckpt-STEP.nmt in dir (-1: none). */
static long max_ckpt_step(const char *dir) {
    DIR *d = opendir(dir);
    if (d == NULL) return -1;
    long best = -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "ckpt-", 5) == 0 && strlen(e->d_name) == 17 &&
            strcmp(e->d_name + 13, ".nmt") == 0) {
            long st = atol(e->d_name + 5);
            if (st > best) best = st;
        }
    }
    closedir(d);
    return best;
}

static void test_sigkill_resume_bit_exact(void **state) {
    (void)state;
    char src[512], tgt[512], ref_dir[512], kill_dir[512];
    path_in(src, sizeof src, "k.src");
    path_in(tgt, sizeof tgt, "k.tgt");
    path_in(ref_dir, sizeof ref_dir, "k-ref");
    path_in(kill_dir, sizeof kill_dir, "k-kill");
    write_reverse_task(src, tgt, 300, 7, NULL, NULL);
    char *argv[80];
    nmt_test_proc r;
    train_argv(argv, ref_dir, src, tgt, small_args);
    nmt_test_run(argv, NULL, g_dir, &r);
    expect_status(&r, 0);
    nmt_test_proc_free(&r);

    /* kill at growing delays, resume each time */
    nmt_test_rng rng = nmt_test_rng_make(99);
    int kills = 0, n = train_argv(argv, kill_dir, src, tgt, small_args);
    char log_path[600];
    snprintf(log_path, sizeof log_path, "%s/k-kill.log", g_dir);
    for (int round = 0; round < 4; round++) {
        if (round > 0) {
            argv[n] = "--resume";
            argv[n + 1] = NULL;
        }
        int pid = nmt_test_spawn(argv, log_path);
        /* wait until this round has written a checkpoint, then kill after a
         * random few ms (often inside the next checkpoint write) */
        for (int t = 0; t < 3000 && max_ckpt_step(kill_dir) < 8 * (round + 1); t++) sleep_us(10000);
        sleep_us(nmt_test_rng_int(&rng, 0, 30000));
        kill(pid, SIGKILL);
        int st = nmt_test_wait(pid);
        if (st == 128 + SIGKILL) kills++;
        assert_true(nmt_test_check_checkpoints(kill_dir) >= 1);
    }
    assert_true(kills >= 3);
    argv[n] = "--resume";
    argv[n + 1] = NULL;
    nmt_test_run(argv, NULL, g_dir, &r);
    expect_status(&r, 0);
    nmt_test_proc_free(&r);

    /* the deployment models are byte-identical: same weights, bit for bit */
    char pa[600], pb[600];
    snprintf(pa, sizeof pa, "%s/model.nmt", ref_dir);
    snprintf(pb, sizeof pb, "%s/model.nmt", kill_dir);
    size_t na, nb;
    void *a = nmt_test_read_file(pa, &na), *b = nmt_test_read_file(pb, &nb);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na);
    free(a);
    free(b);
    /* keep-K: at most 3 numbered checkpoints remain, all valid */
    int left = nmt_test_check_checkpoints(kill_dir);
    assert_true(left >= 1 && left <= 3);
}

/* ---- SIGTERM ------------------------------------------------------------------ */

static void test_sigterm_checkpoints(void **state) {
    (void)state;
    char src[512], tgt[512], dir[512], log_path[600];
    path_in(src, sizeof src, "t.src");
    path_in(tgt, sizeof tgt, "t.tgt");
    path_in(dir, sizeof dir, "t-run");
    snprintf(log_path, sizeof log_path, "%s/t.log", g_dir);
    write_reverse_task(src, tgt, 200, 3, NULL, NULL);
    char *extra[] = {"--d-model", "16", "--heads", "2", "--ff", "32", "--enc-layers", "1", "--dec-layers", "1",
                     "--enc-branches", "global", "--dec-branches", "global", "--max-tokens", "128",
                     "--save-every", "0", "--log-every", "1", NULL};
    char *argv[80];
    int n = train_argv(argv, dir, src, tgt, extra);
    int pid = nmt_test_spawn(argv, log_path);
    char jl[600];
    snprintf(jl, sizeof jl, "%s/log.jsonl", dir);
    /* up to 20 min: under qemu the cold kernel builds alone take minutes */
    int reached = 0, ended = 0;
    for (int t = 0; t < 120000 && !reached && !ended; t++) {
        size_t sz = 0;
        char *txt = nmt_test_read_file(jl, &sz);
        reached = txt && strstr(txt, "\"step\":3,") != NULL;
        free(txt);
        if (!reached) sleep_us(10000);
        /* a run that ended (crashed) fails the test now, not after 20 min
         * (WNOWAIT: nmt_test_wait still reaps it) */
        siginfo_t si;
        memset(&si, 0, sizeof si);
        ended = !reached && waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid;
    }
    kill(pid, SIGTERM);
    if (!reached) {
        size_t sz = 0;
        char *txt = nmt_test_read_file(log_path, &sz);
        fail_msg("the run never logged step 3%s; its output:\n%s", ended ? " (it ended)" : "", txt ? txt : "");
    }
    assert_int_equal(nmt_test_wait(pid), 128 + SIGTERM);
    assert_true(nmt_test_check_checkpoints(dir) == 1);
    /* resume for 2 more steps than the checkpoint has */
    long step = max_ckpt_step(dir);
    assert_true(step >= 3);
    char last[600];
    snprintf(last, sizeof last, "%s/last.nmt", dir);
    assert_true(file_exists(last));
    char steps[32];
    snprintf(steps, sizeof steps, "%ld", step + 2);
    argv[n] = "--resume";
    argv[n + 1] = "--max-steps";
    argv[n + 2] = steps;
    argv[n + 3] = NULL;
    nmt_test_proc r;
    nmt_test_run(argv, NULL, g_dir, &r);
    expect_status(&r, 0);
    nmt_test_proc_free(&r);
    char want[700];
    snprintf(want, sizeof want, "%s/ckpt-%08ld.nmt", dir, step + 2);
    assert_true(file_exists(want));
}

/* ---- bad input -------------------------------------------------------------- */

static void test_bad_input(void **state) {
    (void)state;
    char src[512], tgt[512], bad[512], bad_src[512], short_tgt[512], dir[512], empty[512];
    path_in(src, sizeof src, "b.src");
    path_in(tgt, sizeof tgt, "b.tgt");
    path_in(bad, sizeof bad, "b.bad");
    path_in(bad_src, sizeof bad_src, "b.bad-src");
    path_in(short_tgt, sizeof short_tgt, "b.short");
    path_in(dir, sizeof dir, "b-run");
    path_in(empty, sizeof empty, "b-empty");
    write_reverse_task(src, tgt, 20, 5, NULL, NULL);
    assert_int_equal(nmt_test_write_file(bad, "4 5 6\n4 99 5\n", 13), 0);
    assert_int_equal(nmt_test_write_file(bad_src, "6 5 4\n5 4\n", 10), 0);
    assert_int_equal(nmt_test_write_file(short_tgt, "4 5\n", 4), 0);
    nmt_test_proc r;
    char *argv[80];

    char *help[] = {(char *)NMT_TRAIN_BIN, "--help", NULL};
    nmt_test_run(help, NULL, g_dir, &r);
    expect_status(&r, 0);
    assert_non_null(strstr(r.out, "Usage: nmt-edge-train"));
    nmt_test_proc_free(&r);

    char *missing[] = {(char *)NMT_TRAIN_BIN, "--train-src", src, NULL};
    nmt_test_run(missing, NULL, g_dir, &r);
    expect_status(&r, 2);
    assert_non_null(strstr(r.err, "are required"));
    nmt_test_proc_free(&r);

    char *unknown[] = {"--frobnicate", NULL};
    train_argv(argv, dir, src, tgt, unknown);
    nmt_test_run(argv, NULL, g_dir, &r);
    expect_status(&r, 2);
    assert_non_null(strstr(r.err, "unknown option '--frobnicate'"));
    nmt_test_proc_free(&r);

    char *badval[] = {"--dropout", "2", NULL};
    train_argv(argv, dir, src, tgt, badval);
    nmt_test_run(argv, NULL, g_dir, &r);
    expect_status(&r, 2);
    assert_non_null(strstr(r.err, "invalid value '2' for --dropout"));
    nmt_test_proc_free(&r);

    train_argv(argv, dir, bad_src, bad, NULL);
    nmt_test_run(argv, NULL, g_dir, &r);
    expect_status(&r, 1);
    assert_non_null(strstr(r.err, "b.bad:2: '99' is not a token id in [0, 16)"));
    nmt_test_proc_free(&r);

    /* line counts are compared before any token is parsed */
    train_argv(argv, dir, src, bad, NULL);
    nmt_test_run(argv, NULL, g_dir, &r);
    expect_status(&r, 1);
    assert_non_null(strstr(r.err, "has 20 lines but"));
    nmt_test_proc_free(&r);

    train_argv(argv, dir, src, short_tgt, NULL);
    nmt_test_run(argv, NULL, g_dir, &r);
    expect_status(&r, 1);
    assert_non_null(strstr(r.err, "has 20 lines but"));
    nmt_test_proc_free(&r);

    char *resume[] = {"--resume", NULL};
    train_argv(argv, empty, src, tgt, resume);
    nmt_test_run(argv, NULL, g_dir, &r);
    expect_status(&r, 1);
    assert_non_null(strstr(r.err, "no valid checkpoint"));
    nmt_test_proc_free(&r);

    char *arch[] = {"--d-model", "30", "--heads", "4", NULL};
    train_argv(argv, dir, src, tgt, arch);
    nmt_test_run(argv, NULL, g_dir, &r);
    expect_status(&r, 2);
    assert_non_null(strstr(r.err, "must divide --d-model"));
    nmt_test_proc_free(&r);

    char *plot[] = {(char *)NMT_TRAIN_BIN, "plot", src, "-o", dir, NULL};
    nmt_test_run(plot, NULL, g_dir, &r);
    expect_status(&r, 1);
    nmt_test_proc_free(&r);
}

/* nmt-edge-train with `opts` (train_argv) exits with `status`, saying `msg`. */
static void expect_train_error(const char *dir, const char *src, const char *tgt, char **opts, int status,
                               const char *msg) {
    char *argv[80];
    nmt_test_proc r;
    train_argv(argv, dir, src, tgt, opts);
    nmt_test_run(argv, NULL, g_dir, &r);
    expect_status(&r, status);
    if (strstr(r.err, msg) == NULL) fail_msg("expected '%s' in: %s", msg, r.err);
    nmt_test_proc_free(&r);
}

/* The train line of `step` in DIR/log.jsonl: its loss (the test fails
 * when there is none). */
static double logged_loss(const char *dir, int step) {
    char jl[600], key[48];
    snprintf(jl, sizeof jl, "%s/log.jsonl", dir);
    snprintf(key, sizeof key, "\"kind\":\"train\",\"step\":%d,", step);
    size_t n;
    char *text = nmt_test_read_file(jl, &n);
    assert_non_null(text);
    const char *line = strstr(text, key);
    if (line == NULL) fail_msg("no train line of step %d in %s", step, jl);
    const char *l = strstr(line, "\"loss\":");
    assert_non_null(l);
    const double v = atof(l + 7);
    free(text);
    return v;
}

/* --adam-betas and --adam-eps: bad values refused with their names; good
 * ones reach the optimiser: spelling out the defaults changes nothing (the
 * log's 6 decimals), other values change the losses after the first
 * update, not before it. */
static void test_adam_options(void **state) {
    (void)state;
    char src[512], tgt[512], d0[512], d1[512], d2[512];
    path_in(src, sizeof src, "a.src");
    path_in(tgt, sizeof tgt, "a.tgt");
    path_in(d0, sizeof d0, "a-default");
    path_in(d1, sizeof d1, "a-spelled");
    path_in(d2, sizeof d2, "a-other");
    write_reverse_task(src, tgt, 40, 5, NULL, NULL);
    char *b1[] = {"--adam-betas", "0.9", NULL}, *b2[] = {"--adam-betas", "0.9,1", NULL};
    char *b3[] = {"--adam-betas", "0.9,0.98x", NULL}, *e1[] = {"--adam-eps", "-1e-8", NULL};
    expect_train_error(d0, src, tgt, b1, 2, "invalid value '0.9' for --adam-betas (expected B1,B2 with each in [0, 1)");
    expect_train_error(d0, src, tgt, b2, 2, "invalid value '0.9,1' for --adam-betas");
    expect_train_error(d0, src, tgt, b3, 2, "invalid value '0.9,0.98x' for --adam-betas");
    expect_train_error(d0, src, tgt, e1, 2, "invalid value '-1e-8' for --adam-eps (expected a number in [0, 1])");
    const char *dirs[3] = {d0, d1, d2};
    for (int k = 0; k < 3; k++) {
        char *opts[40] = {"--d-model", "16", "--heads", "2", "--ff", "32", "--enc-layers", "1", "--dec-layers",
                          "1", "--enc-branches", "global", "--dec-branches", "global", "--dropout", "0",
                          "--lr", "0.01", "--warmup", "1", "--schedule", "constant", "--max-steps", "4",
                          "--log-every", "1", "--eval-every", "0", "--save-every", "0", NULL};
        int n = 30;
        if (k == 1) {
            opts[n++] = "--adam-betas";
            opts[n++] = "0.9,0.98";
            opts[n++] = "--adam-eps";
            opts[n++] = "1e-9";
        } else if (k == 2) {
            opts[n++] = "--adam-betas";
            opts[n++] = "0.5,0.6";
            opts[n++] = "--adam-eps";
            opts[n++] = "0.1";
        }
        opts[n] = NULL;
        char *argv[80];
        nmt_test_proc r;
        train_argv(argv, dirs[k], src, tgt, opts);
        nmt_test_run(argv, NULL, g_dir, &r);
        expect_status(&r, 0);
        nmt_test_proc_free(&r);
    }
    for (int step = 1; step <= 4; step++) {
        const double a = logged_loss(d0, step), b = logged_loss(d1, step), c = logged_loss(d2, step);
        assert_true(a == b);
        if (step == 1) assert_true(a == c); /* before any update */
        else if (a == c) fail_msg("step %d: the same loss %.6f with other Adam parameters", step, a);
    }
}

/* --arch phrase: a new interleaved QueryK model trains and exports with
 * its keys and weights (W_o of the interleaved encoder [d, 3d], decoder
 * [d, 2d]); the --ph-* options need --arch phrase; a bad value names it. */
/* Train into dir with opts (must succeed); DIR/model.nmt read whole. */
static void *trained_model(const char *dir, const char *src, const char *tgt, char **opts, size_t *size) {
    char *argv[80], model[600];
    nmt_test_proc r;
    train_argv(argv, dir, src, tgt, opts);
    nmt_test_run(argv, NULL, g_dir, &r);
    expect_status(&r, 0);
    nmt_test_proc_free(&r);
    snprintf(model, sizeof model, "%s/model.nmt", dir);
    void *img = nmt_test_read_file(model, size);
    assert_non_null(img);
    return img;
}

static void test_phrase(void **state) {
    (void)state;
    char src[512], tgt[512], dir[512];
    path_in(src, sizeof src, "p.src");
    path_in(tgt, sizeof tgt, "p.tgt");
    path_in(dir, sizeof dir, "p-run");
    write_reverse_task(src, tgt, 24, 11, NULL, NULL);
    nmt_test_proc r;
    char *argv[80];
    char *ok[] = {"--arch", "phrase", "--ph-enc", "queryk:inter:12", "--ph-dec", "convkv:homo:11", "--ph-cross",
                  "queryk:hetero:12", "--d-model", "16", "--heads", "2", "--ff", "32", "--enc-layers", "1",
                  "--dec-layers", "1", "--max-steps", "2", "--eval-every", "0", NULL};
    size_t size;
    void *img = trained_model(dir, src, tgt, ok, &size);
    nmt_model_info info;
    assert_int_equal(nmt_model_inspect(img, size, &info), NMT_OK);
    assert_string_equal(info.arch, "phrase");
    assert_string_equal(info.family_config, "ph_enc queryk:inter:12; ph_dec convkv:homo:11; ph_cross queryk:hetero:12");
    nmt_file f;
    assert_int_equal(nmt_file_open(&f, img, size, 1), NMT_OK);
    nmt_tensor_view v;
    assert_int_equal(nmt_file_find(&f, "enc.0.self_attn.o.weight", &v), NMT_OK);
    assert_int_equal(v.shape[1], 48);
    assert_int_equal(nmt_file_find(&f, "enc.0.self_attn.phq.q2.weight", &v), NMT_OK);
    assert_int_equal(nmt_file_find(&f, "dec.0.self_attn.ph2.kv.weight", &v), NMT_OK);
    assert_int_equal(v.shape[0], 16); /* homogeneous: 1 head of 8, k | v */
    assert_int_equal(v.shape[1], 16); /* one extra tap */
    free(img);

    char *no_arch[] = {"--ph-enc", "convkv:homo:11", NULL};
    path_in(dir, sizeof dir, "p-bad");
    expect_train_error(dir, src, tgt, no_arch, 2, "the --ph-* options need --arch phrase");
    char *bad[] = {"--arch", "phrase", "--ph-dec", "queryk:homo:3", "--d-model", "16", "--heads", "2", NULL};
    expect_train_error(dir, src, tgt, bad, 1, "ph_dec 'queryk:homo:3'");
    /* --arch phrase without a phrase attention (no --ph-*, or only none)
     * would train a plain Transformer labelled phrase: refused before
     * anything is written, the options it needs named */
    static const char refusal[] =
        "nmt-edge-train: --arch phrase needs a phrase attention: give at least one of --ph-enc S, --ph-dec S, "
        "--ph-cross S other than none (METHOD:STRUCTURE:DIGITS, e.g. --ph-enc queryk:homo:11; see --help); "
        "without one the model is a plain Transformer (--arch transformer)\n";
    char *bare[] = {"--arch", "phrase", "--d-model", "16", "--heads", "2", NULL};
    char *nones[] = {"--arch", "phrase", "--ph-enc", "none", "--ph-cross", "none", NULL};
    char **refused[2] = {bare, nones};
    path_in(dir, sizeof dir, "p-plain");
    for (int k = 0; k < 2; k++) {
        train_argv(argv, dir, src, tgt, refused[k]);
        nmt_test_run(argv, NULL, g_dir, &r);
        expect_status(&r, 2);
        assert_string_equal(r.err, refusal);
        nmt_test_proc_free(&r);
        assert_false(file_exists(dir));
    }
}

/* The options of other frameworks' models and the HySAN paper's settings:
 * --gate shared (reduction 16 by default), --ffn-activation,
 * --position-encoding reach the model; bad values exit 2 naming them. */
static void test_model_keys(void **state) {
    (void)state;
    char src[512], tgt[512], dir[512];
    path_in(src, sizeof src, "k.src");
    path_in(tgt, sizeof tgt, "k.tgt");
    path_in(dir, sizeof dir, "k-run");
    write_reverse_task(src, tgt, 24, 13, NULL, NULL);
    char *ok[] = {"--gate", "shared", "--ffn-activation", "swish", "--position-encoding", "none", "--d-model", "16",
                  "--heads", "2", "--ff", "32", "--enc-layers", "1", "--dec-layers", "1", "--max-steps", "2",
                  "--eval-every", "0", NULL};
    size_t size;
    void *img = trained_model(dir, src, tgt, ok, &size);
    nmt_model_info info;
    assert_int_equal(nmt_model_inspect(img, size, &info), NMT_OK);
    assert_string_equal(info.family_config, "ffn_activation swish; position_encoding none; gate shared");
    assert_int_equal(info.gate_reduction, 16);
    nmt_file f;
    assert_int_equal(nmt_file_open(&f, img, size, 1), NMT_OK);
    nmt_tensor_view v;
    assert_int_equal(nmt_file_find(&f, "enc.0.self_attn.gate.0.fc1.weight", &v), NMT_OK);
    assert_int_equal(v.shape[0], 1); /* d 16 / r 16 */
    assert_int_equal(nmt_file_find(&f, "enc.0.self_attn.gate.1.fc1.weight", &v), NMT_ERR_MODEL_MISSING_TENSOR);
    free(img);
    path_in(dir, sizeof dir, "k-bad");
    char *bad_gate[] = {"--gate", "both", NULL};
    expect_train_error(dir, src, tgt, bad_gate, 2, "invalid value 'both' for --gate");
    char *bad_act[] = {"--ffn-activation", "tanh", NULL};
    expect_train_error(dir, src, tgt, bad_act, 2, "invalid value 'tanh' for --ffn-activation");
    char *bad_pos[] = {"--position-encoding", "learned", NULL};
    expect_train_error(dir, src, tgt, bad_pos, 2, "invalid value 'learned' for --position-encoding");
}

/* nmt-edge-train attention: the interleaved sub-layers' shares over a
 * parallel text (each line's four percentages sum to 100); a model
 * without interleaved attention, a missing argument and an unreadable
 * model are refused with their status. */
static void test_attention_cmd(void **state) {
    (void)state;
    size_t spm_size;
    void *spm = nmt_test_read_file(NMT_TEST_FIXTURES "/spm/uni_nfkc.model", &spm_size);
    assert_non_null(spm);
    nmt_random_transformer_config c;
    nmt_random_transformer_defaults(&c);
    c.src_vocab = c.tgt_vocab = 600;
    c.src_sp_model = spm;
    c.src_sp_size = spm_size;
    void *tf;
    size_t tf_size;
    assert_int_equal(nmt_random_transformer_image(&c, &tf, &tf_size), NMT_OK);
    static const char *const keys[3] = {"ph_enc", "ph_dec", "ph_cross"};
    const char *const values[3] = {"queryk:inter:12", "convkv:hetero:12", "convkv:inter:12"};
    void *ph;
    size_t ph_size;
    char err[512];
    assert_int_equal(train_model_as_arch(tf, tf_size, "phrase", keys, values, 3, 5, 1.0f, &ph, &ph_size, err,
                                         sizeof err),
                     NMT_OK);
    char model[512], tfm[512], src[512], tgt[512];
    path_in(model, sizeof model, "att.nmt");
    path_in(tfm, sizeof tfm, "att-tf.nmt");
    path_in(src, sizeof src, "att.src");
    path_in(tgt, sizeof tgt, "att.tgt");
    FILE *f = fopen(model, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(ph, 1, ph_size, f), ph_size);
    fclose(f);
    f = fopen(tfm, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(tf, 1, tf_size, f), tf_size);
    fclose(f);
    f = fopen(src, "w");
    assert_non_null(f);
    fputs("hello world\nthis is a test of phrases\n", f);
    fclose(f);
    f = fopen(tgt, "w");
    assert_non_null(f);
    fputs("hallo welt\ndas ist ein test\n", f);
    fclose(f);
    nmt_test_proc r;
    char *ok[] = {(char *)NMT_TRAIN_BIN, "attention", model, src, tgt, NULL};
    nmt_test_run(ok, NULL, g_dir, &r);
    expect_status(&r, 0);
    static const char *const rows[] = {"enc.0.self_attn", "enc.1.self_attn", "dec.0.cross_attn", "dec.1.cross_attn"};
    for (size_t k = 0; k < 4; k++) {
        const char *line = strstr(r.out, rows[k]);
        assert_non_null(line);
        double p[4];
        assert_int_equal(sscanf(line + strlen(rows[k]), "%lf %lf %lf %lf", &p[0], &p[1], &p[2], &p[3]), 4);
        assert_true(fabs(p[0] + p[1] + p[2] + p[3] - 100.0) < 0.05);
    }
    assert_null(strstr(r.out, "dec.0.self_attn")); /* heterogeneous: no kinds of query */
    assert_non_null(strstr(r.out, "(2 pairs of"));
    nmt_test_proc_free(&r);
    char *no_inter[] = {(char *)NMT_TRAIN_BIN, "attention", tfm, src, tgt, NULL};
    nmt_test_run(no_inter, NULL, g_dir, &r);
    expect_status(&r, 1);
    assert_non_null(strstr(r.err, "has no interleaved phrase attention"));
    nmt_test_proc_free(&r);
    char *missing[] = {(char *)NMT_TRAIN_BIN, "attention", model, src, NULL};
    nmt_test_run(missing, NULL, g_dir, &r);
    expect_status(&r, 2);
    assert_non_null(strstr(r.err, "Usage: nmt-edge-train attention MODEL SRC TGT"));
    nmt_test_proc_free(&r);
    char *nofile[] = {(char *)NMT_TRAIN_BIN, "attention", "/nonexistent/m.nmt", src, tgt, NULL};
    nmt_test_run(nofile, NULL, g_dir, &r);
    expect_status(&r, 1);
    assert_non_null(strstr(r.err, "cannot read '/nonexistent/m.nmt'"));
    nmt_test_proc_free(&r);
    free(spm);
    free(tf);
    free(ph);
}

/* MG-SA syntax heads: a run with --train-src-spans and the tag loss; the
 * checkpoint keeps the training-only tagger, the deployment model has
 * none; a span past its sentence, and syntax heads without spans, refused. */
static void test_mgsa_syntax(void **state) {
    (void)state;
    char src[512], tgt[512], spans[512], dir[512], path[600];
    path_in(src, sizeof src, "ms.src");
    path_in(tgt, sizeof tgt, "ms.tgt");
    path_in(spans, sizeof spans, "ms.spans");
    path_in(dir, sizeof dir, "ms-run");
    write_reverse_task(src, tgt, 24, 13, NULL, NULL);
    char text[24 * 16] = "";
    for (int i = 0; i < 24; i++) strcat(text, i % 3 == 2 ? "\n" : i % 3 ? "1-2:VP\n" : "0-2:NP\n");
    assert_int_equal(nmt_test_write_file(spans, text, strlen(text)), 0);
    nmt_test_proc r;
    char *argv[80];
    char *ok[] = {"--arch", "mgsa", "--mg-layers", "1", "--mg-heads", "word syntax", "--train-src-spans", spans,
                  "--mg-tag-lambda", "0.5", "--d-model", "16", "--heads", "2", "--ff", "32", "--enc-layers", "1",
                  "--dec-layers", "1", "--max-steps", "2", "--eval-every", "0", NULL};
    train_argv(argv, dir, src, tgt, ok);
    nmt_test_run(argv, NULL, g_dir, &r);
    expect_status(&r, 0);
    nmt_test_proc_free(&r);
    size_t size;
    nmt_file f;
    nmt_tensor_view v;
    snprintf(path, sizeof path, "%s/model.nmt", dir);
    void *img = nmt_test_read_file(path, &size);
    assert_non_null(img);
    assert_int_equal(nmt_file_open(&f, img, size, 1), NMT_OK);
    assert_int_equal(nmt_file_find(&f, "train.enc.0.self_attn.phrase_tag.weight", &v), NMT_ERR_MODEL_MISSING_TENSOR);
    free(img);
    snprintf(path, sizeof path, "%s/ckpt-00000002.nmt", dir);
    img = nmt_test_read_file(path, &size);
    assert_non_null(img);
    assert_int_equal(nmt_file_open(&f, img, size, 1), NMT_OK);
    assert_int_equal(nmt_file_find(&f, "train.enc.0.self_attn.phrase_tag.weight", &v), NMT_OK);
    assert_true(v.ndim == 2 && v.shape[0] == 8 && v.shape[1] == 16);
    free(img);
    memcpy(text, "0-9:NP\n", 7); /* line 1: past the sentence */
    assert_int_equal(nmt_test_write_file(spans, text, strlen(text)), 0);
    path_in(dir, sizeof dir, "ms-bad");
    expect_train_error(dir, src, tgt, ok, 1, "ms.spans:1: span 0-9 is past the sentence's");
    char *none[] = {"--arch", "mgsa", "--mg-heads", "word syntax", "--d-model", "16", "--heads", "2", NULL};
    expect_train_error(dir, src, tgt, none, 2, "--mg-heads: syntax heads need the phrase spans of the training corpus");
}

/* parse-spans: the spans file of English text (exact lines, the counts on
 * stderr), or, built without the parser, exit 1 saying so. */
static void test_parse_spans(void **state) {
    (void)state;
    char src[512], out[512];
    path_in(src, sizeof src, "en.txt");
    path_in(out, sizeof out, "en.spans");
    const char text[] = "The cat sat on the mat.\n\nof of the the and\nColorless green ideas sleep furiously.\n";
    assert_int_equal(nmt_test_write_file(src, text, strlen(text)), 0);
    char *argv[] = {(char *)NMT_TRAIN_BIN, "parse-spans", src, "-o", out, "--spm",
                    (char *)NMT_TEST_FIXTURES "/spm/uni_nfkc.model", NULL};
    nmt_test_proc r;
    nmt_test_run(argv, NULL, g_dir, &r);
#ifdef NMT_HAVE_LINK_GRAMMAR
    expect_status(&r, 0);
    if (!strstr(r.err, "parse-spans: 4 lines: 2 parsed, 1 empty, 1 not parsed (n-gram fallback)"))
        fail_msg("unexpected: %s", r.err);
    size_t n = 0;
    char *got = nmt_test_read_file(out, &n);
    assert_non_null(got);
    /* pieces ▁T h e ▁c at ▁ s at ▁on ▁the ▁m at . : NP 0-5, NP 9-12 */
    const char *want_start = "0-5:NP 9-12:NP\n\n\n0-";
    assert_true(n > strlen(want_start) && memcmp(got, want_start, strlen(want_start)) == 0);
    assert_int_equal(got[n - 1], '\n');
    free(got);
    /* the file trains: the trainer's reader accepts every line */
    tsp_file *f = NULL;
    char err[256];
    assert_int_equal(tsp_read(out, &f, err, sizeof err), NMT_OK);
    assert_int_equal(tsp_lines(f), 4);
    tsp_free(f);
#else
    expect_status(&r, 1);
    assert_non_null(strstr(r.err, "built without link-grammar"));
#endif
    nmt_test_proc_free(&r);
}

/* --arch mgsa: a new MG-SA model trains and is written as arch mgsa with
 * its phrase heads; bad MG-SA options are refused with their names. */
static void test_mgsa(void **state) {
    (void)state;
    char src[512], tgt[512], dir[512];
    path_in(src, sizeof src, "m.src");
    path_in(tgt, sizeof tgt, "m.tgt");
    path_in(dir, sizeof dir, "m-run");
    write_reverse_task(src, tgt, 24, 11, NULL, NULL);
    nmt_test_proc r;
    char *argv[80];
    char *ok[] = {"--arch", "mgsa", "--mg-layers", "1", "--mg-heads", "ngram:2 word", "--mg-interact", "lstm",
                  "--mg-compose", "san",
                  "--d-model", "16", "--heads", "2", "--ff", "32", "--enc-layers", "1", "--dec-layers", "1",
                  "--max-steps", "2", "--eval-every", "0", NULL};
    size_t size;
    void *img = trained_model(dir, src, tgt, ok, &size);
    nmt_model_info info;
    assert_int_equal(nmt_model_inspect(img, size, &info), NMT_OK);
    assert_string_equal(info.arch, "mgsa");
    assert_string_equal(info.enc_branches, "global"); /* the MG-SA default */
    nmt_file f;
    assert_int_equal(nmt_file_open(&f, img, size, 1), NMT_OK);
    char heads[64];
    assert_int_equal(nmt_file_get_str_or(&f, "mg_heads", "", heads, sizeof heads), NMT_OK);
    assert_string_equal(heads, "ngram:2 word");
    assert_int_equal(nmt_file_get_str_or(&f, "mg_interact", "", heads, sizeof heads), NMT_OK);
    assert_string_equal(heads, "lstm");
    assert_int_equal(nmt_file_get_str_or(&f, "mg_compose", "", heads, sizeof heads), NMT_OK);
    assert_string_equal(heads, "san");
    nmt_tensor_view v; /* the LSTM's and the composition's weights, drawn beside the Transformer's */
    assert_int_equal(nmt_file_find(&f, "enc.0.self_attn.phrase_san.q.weight", &v), NMT_OK);
    assert_int_equal(nmt_file_find(&f, "enc.0.self_attn.phrase_lstm.hh.weight", &v), NMT_OK);
    assert_int_equal(v.shape[0], 64);
    assert_int_equal(v.shape[1], 16);
    free(img);

    char *bad_heads[] = {"--arch", "mgsa", "--mg-heads", "word", "--d-model", "16", "--heads", "2", NULL};
    path_in(dir, sizeof dir, "m-bad"); /* m-run holds a run now */
    expect_train_error(dir, src, tgt, bad_heads, 1,
                       "cannot build the mgsa model: the options do not form a valid configuration of mgsa");
    /* the whole reason, its cause (the head count) last, then the status:
     * a 160-byte buffer once cut it just before "syntax for each of" */
    train_argv(argv, dir, src, tgt, bad_heads);
    nmt_test_run(argv, NULL, g_dir, &r);
    expect_status(&r, 1);
    char want[512];
    snprintf(want, sizeof want, "for each of the 2 heads, and a global-only encoder (enc_branches 'global') (%s)\n",
             nmt_status_str(NMT_ERR_MODEL_ARCH));
    const char *line = strstr(r.err, "nmt-edge-train: cannot build the mgsa model: the options do not form a valid "
                                     "configuration of mgsa: mg_layers '1', mg_heads 'word': expected encoder layers "
                                     "in [1, 2] and one of word | ngram:N");
    /* one line, the last of stderr, ending in `want` */
    if (line == NULL || strlen(line) < strlen(want) || strcmp(line + strlen(line) - strlen(want), want) != 0 ||
        memchr(line, '\n', strlen(line) - strlen(want)) != NULL)
        fail_msg("expected one line ending in '%s'; stderr:\n%s", want, r.err);
    nmt_test_proc_free(&r);
    char *bad_rec[] = {"--arch", "mgsa", "--mg-interact", "gru", "--d-model", "16", "--heads", "2", NULL};
    expect_train_error(dir, src, tgt, bad_rec, 1, "cannot build the mgsa model: invalid value for mg-interact");
    char *syntax[] = {"--arch", "mgsa", "--mg-heads", "word syntax", "--d-model", "16", "--heads", "2", NULL};
    expect_train_error(dir, src, tgt, syntax, 2, "--mg-heads: syntax heads need the phrase spans of the training corpus");
    char *no_arch[] = {"--mg-heads", "word word", NULL};
    expect_train_error(dir, src, tgt, no_arch, 2, "the --mg-* options need --arch mgsa");
    char *bogus[] = {"--arch", "rnn", NULL};
    expect_train_error(dir, src, tgt, bogus, 2, "invalid value 'rnn' for --arch (transformer, mgsa, phrase or banmt)");
}

/* --arch banmt: a new BA-NMT model (the family's flags) trains, exports as
 * arch banmt with the chosen widths, and --resume from a mid-run
 * checkpoint ends bit-exact with the uninterrupted run; the activation
 * cap refuses with the numbers; the BA-NMT flags need --arch banmt. */
static void test_banmt(void **state) {
    (void)state;
    char src[512], tgt[512], dir[512], dir2[512], model[600], model2[600];
    path_in(src, sizeof src, "b.src");
    path_in(tgt, sizeof tgt, "b.tgt");
    path_in(dir, sizeof dir, "b-run");
    path_in(dir2, sizeof dir2, "b-run2");
    write_reverse_task(src, tgt, 24, 13, NULL, NULL);
    nmt_test_proc r;
    char *argv[80];
    char *ok[] = {"--arch", "banmt", "--emb", "12", "--hidden", "10", "--hist", "6", "--history", "ba", "--maxout",
                  "--max-tokens", "128", "--max-steps", "4", "--save-every", "2", "--eval-every", "0", NULL};
    train_argv(argv, dir, src, tgt, ok);
    nmt_test_run(argv, NULL, g_dir, &r);
    expect_status(&r, 0);
    assert_non_null(strstr(r.err, "activations of the largest batch"));
    nmt_test_proc_free(&r);
    /* the same run stopped at step 2, then resumed */
    char *half[] = {"--arch", "banmt", "--emb", "12", "--hidden", "10", "--hist", "6", "--history", "ba", "--maxout",
                    "--max-tokens", "128", "--max-steps", "2", "--save-every", "2", "--eval-every", "0", NULL};
    int n = train_argv(argv, dir2, src, tgt, half);
    nmt_test_run(argv, NULL, g_dir, &r);
    expect_status(&r, 0);
    nmt_test_proc_free(&r);
    argv[n - 5] = "4"; /* --max-steps */
    argv[n] = "--resume";
    argv[n + 1] = NULL;
    nmt_test_run(argv, NULL, g_dir, &r);
    expect_status(&r, 0);
    nmt_test_proc_free(&r);
    snprintf(model, sizeof model, "%s/model.nmt", dir);
    snprintf(model2, sizeof model2, "%s/model.nmt", dir2);
    size_t size, size2;
    void *img = nmt_test_read_file(model, &size), *img2 = nmt_test_read_file(model2, &size2);
    assert_non_null(img);
    assert_non_null(img2);
    assert_int_equal(size, size2);
    assert_memory_equal(img, img2, size); /* bit-exact resume */
    nmt_model_info info;
    assert_int_equal(nmt_model_inspect(img, size, &info), NMT_OK);
    assert_string_equal(info.arch, "banmt");
    nmt_file f;
    assert_int_equal(nmt_file_open(&f, img, size, 1), NMT_OK);
    nmt_tensor_view v;
    assert_int_equal(nmt_file_find(&f, "hist.src.hh.weight", &v), NMT_OK);
    assert_int_equal(v.shape[0], 18);
    assert_int_equal(v.shape[1], 6);
    assert_int_equal(nmt_file_find(&f, "dec.readout.weight", &v), NMT_OK);
    assert_int_equal(v.shape[0], 24); /* maxout: 2R, R = emb */
    free(img);
    free(img2);

    path_in(dir, sizeof dir, "b-bad");
    char *capped[] = {"--arch", "banmt", "--emb", "12", "--hidden", "10", "--max-act-bytes", "1000", NULL};
    expect_train_error(dir, src, tgt, capped, 1, "above --max-act-bytes 1000: lower --max-tokens or --max-len");
    char *bad[] = {"--arch", "banmt", "--history", "both", NULL};
    expect_train_error(dir, src, tgt, bad, 1, "cannot build the banmt model: invalid value for history");
    char *no_arch[] = {"--hist", "8", NULL};
    expect_train_error(dir, src, tgt, no_arch, 2, "--hist needs --arch banmt");
}

/* ---- issue 21: run ownership, spm_train's reason, bleu's output ----------- */

/* The step of DIR/last.nmt. */
static uint64_t last_step(const char *dir) {
    char p[600];
    snprintf(p, sizeof p, "%s/last.nmt", dir);
    size_t n;
    void *img = nmt_test_read_file(p, &n);
    assert_non_null(img);
    nmt_file f;
    assert_int_equal(nmt_file_open(&f, img, n, 0), NMT_OK);
    int64_t step = -1;
    assert_int_equal(nmt_file_get_i64(&f, "train.step", &step), NMT_OK);
    free(img);
    return (uint64_t)step;
}

/* A fresh run into a directory holding another run is refused unless
 * --resume or --overwrite; --overwrite starts over (the old run's higher
 * checkpoints gone, so --keep keeps the new ones and --resume continues
 * the new run). */
static void test_run_ownership(void **state) {
    (void)state;
    char src[512], tgt[512], dir[512], model[600], want[1400];
    path_in(src, sizeof src, "o.src");
    path_in(tgt, sizeof tgt, "o.tgt");
    path_in(dir, sizeof dir, "o-run");
    write_reverse_task(src, tgt, 24, 13, NULL, NULL);
    snprintf(model, sizeof model, "%s/model.nmt", dir);
    nmt_test_proc r;
    char *argv[80];
    char *first[] = {"--d-model", "16", "--heads", "2", "--ff", "32", "--enc-layers", "1", "--dec-layers", "1",
                     "--max-steps", "6", "--save-every", "2", "--keep", "2", "--eval-every", "0", NULL};
    train_argv(argv, dir, src, tgt, first);
    nmt_test_run(argv, NULL, g_dir, &r);
    expect_status(&r, 0);
    nmt_test_proc_free(&r);
    assert_int_equal(last_step(dir), 6);
    size_t n0;
    void *before = nmt_test_read_file(model, &n0);
    assert_non_null(before);

    char *second[] = {"--d-model", "16", "--heads", "2", "--ff", "32", "--enc-layers", "1", "--dec-layers", "1",
                      "--max-steps", "2", "--save-every", "1", "--keep", "2", "--eval-every", "0", NULL, NULL};
    int n = train_argv(argv, dir, src, tgt, second);
    nmt_test_run(argv, NULL, g_dir, &r);
    expect_status(&r, 2);
    snprintf(want, sizeof want, "nmt-edge-train: '%s' holds another run (", dir);
    assert_ptr_equal(strstr(r.err, want), r.err);
    assert_non_null(strstr(r.err, "ckpt-00000006.nmt"));
    assert_non_null(strstr(r.err, "): continue it with --resume, or start a new one there with --overwrite (which "
                                  "removes that run's checkpoints, last.nmt, model.nmt, log.jsonl and plot.svg), "
                                  "or choose another --out\n"));
    nmt_test_proc_free(&r);
    size_t n1;
    void *after = nmt_test_read_file(model, &n1); /* untouched */
    assert_non_null(after);
    assert_int_equal(n0, n1);
    assert_memory_equal(before, after, n0);
    free(before);
    free(after);
    assert_int_equal(last_step(dir), 6);

    argv[n] = "--overwrite";
    argv[n + 1] = "--resume";
    argv[n + 2] = NULL;
    nmt_test_run(argv, NULL, g_dir, &r);
    expect_status(&r, 2);
    assert_non_null(strstr(r.err, "nmt-edge-train: --resume and --overwrite exclude each other\n"));
    nmt_test_proc_free(&r);

    argv[n + 1] = NULL;
    nmt_test_run(argv, NULL, g_dir, &r);
    expect_status(&r, 0);
    nmt_test_proc_free(&r);
    assert_int_equal(last_step(dir), 2);
    char p[600];
    snprintf(p, sizeof p, "%s/ckpt-00000006.nmt", dir);
    assert_false(file_exists(p));
    snprintf(p, sizeof p, "%s/ckpt-00000002.nmt", dir);
    assert_true(file_exists(p));
    /* --resume continues the new run */
    second[11] = "4"; /* --max-steps 4 */
    n = train_argv(argv, dir, src, tgt, second);
    argv[n] = "--resume";
    argv[n + 1] = NULL;
    nmt_test_run(argv, NULL, g_dir, &r);
    expect_status(&r, 0);
    snprintf(want, sizeof want, "resuming from %s/ckpt-00000002.nmt (step 2)", dir);
    assert_non_null(strstr(r.err, want));
    nmt_test_proc_free(&r);
    assert_int_equal(last_step(dir), 4);
}

/* ---- issue 55 item 3: one trainer per run directory ------------------------- */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Every entry of dir with its size, mtime and (files under 64 KiB) a CRC
 * of its bytes, sorted, as one malloc'd string. */
static char *dir_state(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    char *lines[256];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat sb;
        assert_int_equal(stat(p, &sb), 0);
        uint32_t crc = 0;
        if (S_ISREG(sb.st_mode)) {
            size_t size;
            void *img = nmt_test_read_file(p, &size);
            assert_non_null(img);
            crc = nmt_crc32(0, img, size);
            free(img);
        }
        assert_true(n < 256);
        lines[n] = malloc(1200);
        assert_non_null(lines[n]);
        snprintf(lines[n], 1200, "%s %lld %lld.%09ld %08x\n", e->d_name, (long long)sb.st_size,
                 (long long)sb.st_mtim.tv_sec, (long)sb.st_mtim.tv_nsec, crc);
        n++;
    }
    closedir(d);
    qsort(lines, (size_t)n, sizeof lines[0], cmp_str);
    char *s = malloc((size_t)n * 1200 + 1);
    assert_non_null(s);
    s[0] = '\0';
    for (int i = 0; i < n; i++) {
        strcat(s, lines[i]);
        free(lines[i]);
    }
    return s;
}

static void host_name(char *buf, size_t cap) {
    assert_int_equal(gethostname(buf, cap), 0);
    buf[cap - 1] = '\0';
}

/* Hold DIR/.lock as a trainer would (flock, then the holder line); the fd. */
static int hold_lock(const char *dir, const char *line) {
    char p[600];
    snprintf(p, sizeof p, "%s/.lock", dir);
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
    assert_int_equal(ftruncate(fd, 0), 0);
    assert_int_equal(pwrite(fd, line, strlen(line), 0), (ssize_t)strlen(line));
    return fd;
}

/* dir_state without DIR/.lock (each trainer writes its pid there). */
static char *dir_state_unlocked(const char *dir) {
    char *s = dir_state(dir);
    if (strncmp(s, ".lock ", 6) == 0) memmove(s, strchr(s, '\n') + 1, strlen(strchr(s, '\n') + 1) + 1);
    return s;
}

/* The trainer of argv (train_argv's n arguments) with --resume: its exit
 * status asserted, its output in *r (free it). */
static void run_resume(char **argv, int n, int status, nmt_test_proc *r) {
    argv[n] = "--resume";
    argv[n + 1] = NULL;
    nmt_test_run(argv, NULL, g_dir, r);
    expect_status(r, status);
}

/* The newest checkpoint with one train.* field made impossible (its CRCs
 * valid): --resume exits 1 with "nmt-edge-train: 'PATH': FIELD VALUE: why"
 * as its last line and changes nothing in the run directory; a state
 * checked against the corpus (the data position) and one against the
 * model (the moments) as well as the checkpoint's own fields.  The good
 * checkpoint put back resumes. */
static void test_resume_refuses_bad_state(void **state) {
    (void)state;
    char src[512], tgt[512], dir[512], ckpt[600];
    path_in(src, sizeof src, "rs.src");
    path_in(tgt, sizeof tgt, "rs.tgt");
    path_in(dir, sizeof dir, "rs-run");
    snprintf(ckpt, sizeof ckpt, "%s/ckpt-00000004.nmt", dir);
    write_reverse_task(src, tgt, 24, 19, NULL, NULL);
    nmt_test_proc r;
    char *argv[80];
    char *opts[] = {"--d-model", "16", "--heads", "2", "--ff", "32", "--enc-layers", "1", "--dec-layers", "1",
                    "--max-tokens", "64", "--max-steps", "4", "--save-every", "2", "--keep", "2",
                    "--eval-every", "0", NULL, NULL};
    int n = train_argv(argv, dir, src, tgt, opts);
    nmt_test_run(argv, NULL, g_dir, &r);
    expect_status(&r, 0);
    const char *be = strstr(r.err, " batches an epoch");
    assert_non_null(be);
    while (be > r.err && be[-1] >= '0' && be[-1] <= '9') be--;
    const long per_epoch = atol(be);
    assert_true(per_epoch >= 2);
    nmt_test_proc_free(&r);
    size_t good_n;
    uint8_t *good = nmt_test_read_file(ckpt, &good_n);
    assert_non_null(good);

    char index_msg[300], want[1200];
    snprintf(index_msg, sizeof index_msg, "train.index %ld: not below the %ld batches of an epoch of this corpus "
             "with these --max-tokens, --max-seqs, --max-len and --max-ratio", per_epoch, per_epoch);
    const struct {
        model_change c;
        const char *msg;
    } cases[] = {
        {{.meta_key = "train.step", .meta_i64 = -5}, "train.step -5: must be >= 0"},
        {{.meta_key = "train.step", .meta_i64 = 3}, "train.step 3: the file's name says step 4"},
        {{.meta_key = "train.seed", .meta_i64 = 1ll << 31}, "train.seed 2147483648: outside --seed's range [0, "
                                                             "1073741824]"},
        {{.meta_drop = "train.elapsed_s"}, "metadata key 'train.elapsed_s' is missing (required)"},
        {{.meta_key = "train.index", .meta_i64 = per_epoch}, index_msg},
        {{.drop = "train.adam_m"}, "train.adam_m: missing (the optimizer's first moment)"},
        {{.set_f32 = "train.adam_v", .set_index = 2, .set_value = NAN}, "train.adam_v[2] nan: not finite"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        size_t bn;
        uint8_t *bad = image_variant(good, good_n, &cases[k].c, &bn);
        assert_int_equal(nmt_test_write_file(ckpt, bad, bn), 0);
        free(bad);
        char *before = dir_state_unlocked(dir);
        run_resume(argv, n, 1, &r);
        snprintf(want, sizeof want, "nmt-edge-train: '%s': %s\n", ckpt, cases[k].msg);
        const size_t le = strlen(r.err), lw = strlen(want);
        if (le < lw || strcmp(r.err + le - lw, want) != 0)
            fail_msg("case %zu: stderr does not end with\n%s\nstderr:\n%s", k, want, r.err);
        nmt_test_proc_free(&r);
        char *after = dir_state_unlocked(dir);
        assert_string_equal(after, before);
        free(after);
        free(before);
    }
    /* the good checkpoint resumes (to step 6) */
    assert_int_equal(nmt_test_write_file(ckpt, good, good_n), 0);
    opts[13] = "6";
    run_resume(argv, train_argv(argv, dir, src, tgt, opts), 0, &r);
    nmt_test_proc_free(&r);
    assert_int_equal(max_ckpt_step(dir), 6);
    free(good);
}

/* While another process holds DIR/.lock (the test itself, as a trainer
 * would), a new run, --resume and --overwrite each stop at once, exit 1,
 * naming the holder, and leave the directory as it was; a lock file
 * nobody holds is no lock (a killed trainer's is taken over); a trainer
 * started while another runs on the same directory is refused, naming the
 * running one's pid, and once that one is killed the directory is free. */
static void test_run_lock(void **state) {
    (void)state;
    char src[512], tgt[512], dir[512], lock[600], host[256], line[400], want[2400];
    path_in(src, sizeof src, "l.src");
    path_in(tgt, sizeof tgt, "l.tgt");
    path_in(dir, sizeof dir, "l-run");
    snprintf(lock, sizeof lock, "%s/.lock", dir);
    write_reverse_task(src, tgt, 24, 17, NULL, NULL);
    host_name(host, sizeof host);
    nmt_test_proc r;
    char *argv[80];
    char *opts[] = {"--d-model", "16", "--heads", "2", "--ff", "32", "--enc-layers", "1", "--dec-layers", "1",
                    "--max-steps", "4", "--save-every", "2", "--keep", "2", "--eval-every", "0", NULL, NULL};
    int n = train_argv(argv, dir, src, tgt, opts);
    nmt_test_run(argv, NULL, g_dir, &r);
    expect_status(&r, 0);
    nmt_test_proc_free(&r);
    assert_int_equal(last_step(dir), 4);
    /* the run left its lock file, naming itself: nobody holds it now */
    size_t ln;
    char *text = nmt_test_read_file(lock, &ln);
    assert_non_null(text);
    snprintf(want, sizeof want, " on %s\n", host);
    assert_true(ln > strlen(want) && strncmp(text, "nmt-edge-train pid ", 19) == 0 &&
                strcmp(text + ln - strlen(want), want) == 0);
    free(text);

    snprintf(line, sizeof line, "nmt-edge-train pid %ld on %s\n", (long)getpid(), host);
    int fd = hold_lock(dir, line);
    char *before = dir_state(dir);
    snprintf(want, sizeof want,
             "nmt-edge-train: '%s' is in use by nmt-edge-train pid %ld on %s; wait for that run to end or stop "
             "it, or choose another --out\n",
             dir, (long)getpid(), host);
    const char *modes[] = {NULL, "--resume", "--overwrite"};
    for (int k = 0; k < 3; k++) {
        argv[n] = (char *)modes[k];
        argv[n + 1] = NULL;
        nmt_test_run(argv, NULL, g_dir, &r);
        expect_status(&r, 1);
        assert_string_equal(r.err, want);
        nmt_test_proc_free(&r);
        char *after = dir_state(dir);
        assert_string_equal(after, before);
        free(after);
    }
    /* a lock file that names nobody: the path instead */
    assert_int_equal(ftruncate(fd, 0), 0);
    assert_int_equal(pwrite(fd, "x\n", 2, 0), 2);
    free(before);
    before = dir_state(dir);
    argv[n] = "--resume";
    argv[n + 1] = NULL;
    nmt_test_run(argv, NULL, g_dir, &r);
    expect_status(&r, 1);
    snprintf(want, sizeof want,
             "nmt-edge-train: '%s' is in use by another process (it holds the lock on '%s'); wait for that run "
             "to end or stop it, or choose another --out\n",
             dir, lock);
    assert_string_equal(r.err, want);
    nmt_test_proc_free(&r);
    char *after = dir_state(dir);
    assert_string_equal(after, before);
    free(after);
    free(before);
    assert_int_equal(last_step(dir), 4);

    /* released (the file stays, as a killed holder leaves it): --resume runs */
    assert_int_equal(pwrite(fd, line, strlen(line), 0), (ssize_t)strlen(line));
    close(fd);
    opts[11] = "6";
    n = train_argv(argv, dir, src, tgt, opts);
    argv[n] = "--resume";
    argv[n + 1] = NULL;
    nmt_test_run(argv, NULL, g_dir, &r);
    expect_status(&r, 0);
    nmt_test_proc_free(&r);
    assert_int_equal(last_step(dir), 6);

    /* two trainers on one directory: the second is refused while the first
     * runs (it has locked once its line names it) */
    opts[11] = "1000000";
    n = train_argv(argv, dir, src, tgt, opts);
    argv[n] = "--resume";
    argv[n + 1] = NULL;
    char log_path[600];
    snprintf(log_path, sizeof log_path, "%s/l-first.log", g_dir);
    const int pid = nmt_test_spawn(argv, log_path);
    snprintf(line, sizeof line, "nmt-edge-train pid %d on %s\n", pid, host);
    int locked = 0, ended = 0;
    for (int t = 0; t < 60000 && !locked && !ended; t++) { /* up to 10 minutes (qemu) */
        text = nmt_test_read_file(lock, &ln);
        locked = text != NULL && ln == strlen(line) && memcmp(text, line, ln) == 0;
        free(text);
        if (locked) break;
        sleep_us(10000);
        siginfo_t si; /* a first trainer that ended fails the test now (WNOWAIT: still reaped below) */
        memset(&si, 0, sizeof si);
        ended = waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid;
    }
    if (!locked) {
        kill(pid, SIGKILL);
        nmt_test_wait(pid);
        text = nmt_test_read_file(log_path, &ln);
        fail_msg("the first trainer never wrote its lock line%s; its output:\n%s", ended ? " (it ended)" : "",
                 text ? text : "");
    }
    nmt_test_run(argv, NULL, g_dir, &r);
    snprintf(want, sizeof want,
             "nmt-edge-train: '%s' is in use by nmt-edge-train pid %d on %s; wait for that run to end or stop "
             "it, or choose another --out\n",
             dir, pid, host);
    const int second = r.status;
    const int same = strcmp(r.err, want) == 0;
    if (!same) fprintf(stderr, "second trainer's stderr:\n%s\n", r.err);
    nmt_test_proc_free(&r);
    kill(pid, SIGKILL);
    assert_int_equal(nmt_test_wait(pid), 128 + SIGKILL);
    assert_int_equal(second, 1);
    assert_true(same);
    /* killed: the kernel dropped its lock; the file left behind is no lock */
    fd = open(lock, O_RDWR | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
    close(fd);
    opts[11] = "2";
    n = train_argv(argv, dir, src, tgt, opts);
    argv[n] = "--overwrite";
    argv[n + 1] = NULL;
    nmt_test_run(argv, NULL, g_dir, &r);
    expect_status(&r, 0);
    nmt_test_proc_free(&r);
    assert_int_equal(last_step(dir), 2);
}

/* spm_train's own reason, or "not installed" only when it is not found
 * (stand-in programs on PATH). */
static void test_spm_train_reason(void **state) {
    (void)state;
    char src[512], tgt[512], bin[512], fake[600], dir[512], script[4096];
    path_in(src, sizeof src, "s.src");
    path_in(tgt, sizeof tgt, "s.tgt");
    path_in(bin, sizeof bin, "fake-bin");
    write_reverse_task(src, tgt, 12, 17, NULL, NULL);
    assert_int_equal(mkdir(bin, 0755), 0);
    snprintf(fake, sizeof fake, "%s/spm_train", bin);
    const char *body = "#!/bin/sh\necho 'trainer_interface.cc(123) LOG(INFO) Loaded 12 sentences' >&2\n"
                       "echo 'Internal: trainer_interface.cc(664) [(trainer_spec_.vocab_size()) == "
                       "(model_proto->pieces_size())] Vocabulary size is too high (300). Please set it to a value "
                       "<= 41.' >&2\nexit 1\n";
    assert_int_equal(nmt_test_write_file(fake, body, strlen(body)), 0);
    assert_int_equal(chmod(fake, 0755), 0);
    nmt_test_proc r;
    for (int installed = 1; installed >= 0; installed--) {
        path_in(dir, sizeof dir, installed ? "s-run" : "s-run2");
        snprintf(script, sizeof script,
                 "PATH='%s'; export PATH; exec '%s' --train-src '%s' --train-tgt '%s' --out '%s' --spm-vocab 300 "
                 "--max-steps 1 --quiet",
                 installed ? bin : dir, NMT_TRAIN_BIN, src, tgt, dir);
        char *argv[] = {"/bin/sh", "-c", script, NULL};
        nmt_test_run(argv, NULL, g_dir, &r);
        expect_status(&r, 1);
        char want[2000];
        if (installed)
            snprintf(want, sizeof want,
                     "nmt-edge-train: spm_train failed (exit 1): trainer_interface.cc(123) LOG(INFO) Loaded 12 "
                     "sentences Internal: trainer_interface.cc(664) [(trainer_spec_.vocab_size()) == "
                     "(model_proto->pieces_size())] Vocabulary size is too high (300). Please set it to a value <= "
                     "41. (log: %s/spm_train.log; or pass --spm MODEL)\n", dir);
        else
            snprintf(want, sizeof want,
                     "nmt-edge-train: spm_train is not installed (No such file or directory): install it with "
                     "'apt-get install sentencepiece' or pass --spm MODEL\n");
        if (strstr(r.err, want) == NULL) fail_msg("stderr:\n%s\nwant:\n%s", r.err, want);
        if (installed) assert_null(strstr(r.err, "apt-get"));
        nmt_test_proc_free(&r);
    }
}

/* bleu's score must reach standard output (issue 21, item 8). */
static void test_bleu_output_checked(void **state) {
    (void)state;
    char hyp[512], script[2048];
    path_in(hyp, sizeof hyp, "bleu.txt");
    assert_int_equal(nmt_test_write_file(hyp, "a b c d\n", 8), 0);
    snprintf(script, sizeof script, "exec '%s' bleu '%s' '%s' > /dev/full", NMT_TRAIN_BIN, hyp, hyp);
    char *argv[] = {"/bin/sh", "-c", script, NULL};
    nmt_test_proc r;
    nmt_test_run(argv, NULL, g_dir, &r);
    expect_status(&r, 1);
    assert_string_equal(r.err, "nmt-edge-train bleu: error writing standard output: No space left on device\n");
    nmt_test_proc_free(&r);
    char *ok[] = {(char *)NMT_TRAIN_BIN, "bleu", hyp, hyp, NULL};
    nmt_test_run(ok, NULL, g_dir, &r);
    expect_status(&r, 0);
    assert_non_null(strstr(r.out, "BLEU = 100.00"));
    nmt_test_proc_free(&r);
}


/* ---- issue 52 item 8: what a run reports ------------------------------------ */

/* How many times `needle` occurs in `hay`. */
static int count_of(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++) n++;
    return n;
}

/* A short run with a dev set, progress on: the warnings for --max-steps
 * below --warmup, --eval-every and --save-every (naming options and
 * values); the progress line's step/total; log.jsonl's first line the
 * config record (version, resolved options), which the plot's reader
 * skips; a dev record at the last step, which no --eval-every reached.
 * Resumed to a step that is an eval step: a second config record (its
 * start step), and that step evaluated once, not twice. */
static void test_run_report(void **state) {
    (void)state;
    char src[512], tgt[512], dsrc[512], dtgt[512], dir[512], jl[600], svg[600], err[600];
    path_in(src, sizeof src, "rr.src");
    path_in(tgt, sizeof tgt, "rr.tgt");
    path_in(dsrc, sizeof dsrc, "rr-dev.src");
    path_in(dtgt, sizeof dtgt, "rr-dev.tgt");
    path_in(dir, sizeof dir, "rr-run");
    write_reverse_task(src, tgt, 24, 21, NULL, NULL);
    write_reverse_task(dsrc, dtgt, 3, 22, NULL, NULL);
    char *opts[] = {NMT_TRAIN_BIN, "--train-src", src, "--train-tgt", tgt, "--out", dir, "--ids", "--vocab", "16",
                    "--dev-src", dsrc, "--dev-tgt", dtgt, "--d-model", "16", "--heads", "2", "--ff", "32",
                    "--enc-layers", "1", "--dec-layers", "1", "--enc-branches", "global", "--dec-branches", "global",
                    "--beam", "1", "--warmup", "10", "--log-every", "1", "--eval-every", "5", "--save-every", "5",
                    "--max-steps", "3", NULL, NULL, NULL};
    const int n = (int)(sizeof opts / sizeof opts[0]) - 3;
    nmt_test_proc r;
    nmt_test_run(opts, NULL, g_dir, &r);
    expect_status(&r, 0);
    static const char *const warnings[] = {
        "nmt-edge-train: warning: --max-steps 3 is below --warmup 10: the run ends inside the warm-up (the learning "
        "rate never reaches its peak)\n",
        "nmt-edge-train: warning: --max-steps 3 is below --eval-every 5: the dev set is evaluated at the last step "
        "only\n",
        "nmt-edge-train: warning: --max-steps 3 is below --save-every 5: the only checkpoint is the one at the last "
        "step\n"};
    for (int k = 0; k < 3; k++)
        if (strstr(r.err, warnings[k]) == NULL) fail_msg("expected '%s' in:\n%s", warnings[k], r.err);
    assert_null(strstr(r.err, "below --log-every"));
    for (int step = 1; step <= 3; step++) { /* step/total (stderr is no terminal: a line each) */
        char want[32];
        snprintf(want, sizeof want, "\nstep %d/3  epoch ", step);
        if (strstr(r.err, want) == NULL) fail_msg("no progress line 'step %d/3' in:\n%s", step, r.err);
    }
    assert_non_null(strstr(r.err, "nmt-edge-train: step 3 dev loss "));
    nmt_test_proc_free(&r);

    snprintf(jl, sizeof jl, "%s/log.jsonl", dir);
    size_t len;
    char *text = nmt_test_read_file(jl, &len);
    assert_non_null(text);
    char want[4096];
    snprintf(want, sizeof want,
             "{\"kind\":\"config\",\"program\":\"nmt-edge-train\",\"version\":\"%s\",\"start_step\":0,\"options\":"
             "{\"train-src\":\"%s\",\"train-tgt\":\"%s\",\"dev-src\":\"%s\",\"dev-tgt\":\"%s\",\"out\":\"%s\","
             "\"spm\":null,", nmt_version(), src, tgt, dsrc, dtgt, dir);
    if (strncmp(text, want, strlen(want)) != 0) fail_msg("log.jsonl's first line:\n%.*s\nwant it to start:\n%s",
                                                         (int)strcspn(text, "\n"), text, want);
    const size_t first = strcspn(text, "\n");
    char *cfg = strndup(text, first);
    static const char *const values[] = {"\"arch\":\"transformer\",", "\"max-steps\":3,", "\"warmup\":10,",
                                         "\"eval-every\":5,", "\"d-model\":16,", "\"lr\":2,", "\"dropout\":0.1,",
                                         "\"adam-betas\":[0.9,0.98]", "\"ids\":true,", "\"resume\":false,",
                                         "\"src_vocab\":16,", "\"ranks\":1,"};
    for (size_t k = 0; k < sizeof values / sizeof values[0]; k++)
        if (strstr(cfg, values[k]) == NULL) fail_msg("no %s in the config record:\n%s", values[k], cfg);
    assert_int_equal(cfg[first - 1], '}');
    free(cfg);
    /* the records after it: train at steps 1-3, then the final evaluation */
    assert_int_equal(count_of(text, "\"kind\":\"config\""), 1);
    assert_int_equal(count_of(text, "\"kind\":\"train\""), 3);
    assert_int_equal(count_of(text, "\"kind\":\"dev\""), 1);
    const char *dev = strstr(text, "{\"kind\":\"dev\",\"step\":3,\"loss\":");
    assert_non_null(dev);
    assert_ptr_equal(dev + strcspn(dev, "\n") + 1, text + len); /* the last line */
    free(text);
    /* the plot's reader takes the whole log, config record included */
    snprintf(svg, sizeof svg, "%s/re.svg", dir);
    assert_int_equal(plot_svg(jl, svg, err, sizeof err), NMT_OK);

    /* resumed to step 4, an eval step of --eval-every 2: evaluated once */
    opts[n - 3] = "2";    /* --save-every */
    opts[n - 5] = "2";    /* --eval-every */
    opts[n - 1] = "4";    /* --max-steps */
    opts[n] = "--resume";
    opts[n + 1] = "--quiet";
    nmt_test_run(opts, NULL, g_dir, &r);
    expect_status(&r, 0);
    assert_null(strstr(r.err, "step 4/4")); /* --quiet: no progress line */
    assert_null(strstr(r.err, "below --eval-every"));
    nmt_test_proc_free(&r);
    text = nmt_test_read_file(jl, &len);
    assert_non_null(text);
    assert_int_equal(count_of(text, "\"kind\":\"config\""), 2);
    const char *second = strstr(text + 1, "{\"kind\":\"config\"");
    assert_non_null(second);
    assert_int_equal(second[-1], '\n');
    assert_non_null(strstr(second, "\"start_step\":3,"));
    assert_non_null(strstr(second, "\"resume\":true,"));
    assert_int_equal(count_of(text, "{\"kind\":\"dev\",\"step\":4,"), 1);
    assert_int_equal(count_of(text, "\"kind\":\"dev\""), 2);
    free(text);
}

/* bleu takes sacreBLEU's order, REF then HYP (`sacrebleu REF < HYP`), or
 * --ref / --hyp in any order, or the hypotheses on standard input; the
 * scores tell the sides apart (a short hypothesis: BP < 1); usage errors
 * exit 2 with the usage. */
static void test_bleu_args(void **state) {
    (void)state;
    char ref[512], hyp[512];
    path_in(ref, sizeof ref, "bleu-ref.txt");
    path_in(hyp, sizeof hyp, "bleu-hyp.txt");
    assert_int_equal(nmt_test_write_file(ref, "a b c d e f\n", 12), 0);
    assert_int_equal(nmt_test_write_file(hyp, "a b c d\n", 8), 0);
    static const char want[] =
        "BLEU = 60.65 100.0/100.0/100.0/100.0 (BP = 0.607 ratio = 0.667 hyp_len = 4 ref_len = 6) 1 sentences\n";
    char *b = (char *)NMT_TRAIN_BIN;
    char *pos[] = {b, "bleu", ref, hyp, NULL};
    char *named[] = {b, "bleu", "--ref", ref, "--hyp", hyp, NULL};
    char *swapped[] = {b, "bleu", "--hyp", hyp, "--ref", ref, NULL};
    char *mixed[] = {b, "bleu", "--hyp", hyp, ref, NULL};
    char *dash[] = {b, "bleu", ref, "-", NULL};
    char *piped[] = {b, "bleu", ref, NULL};
    char **ok[6] = {pos, named, swapped, mixed, dash, piped};
    nmt_test_proc r;
    for (int k = 0; k < 6; k++) {
        nmt_test_run(ok[k], k >= 4 ? "a b c d\n" : NULL, g_dir, &r);
        expect_status(&r, 0);
        assert_string_equal(r.out, want);
        nmt_test_proc_free(&r);
    }
    char *old_order[] = {b, "bleu", hyp, ref, NULL}; /* the other way round: another score */
    nmt_test_run(old_order, NULL, g_dir, &r);
    expect_status(&r, 0);
    assert_non_null(strstr(r.out, "hyp_len = 6 ref_len = 4"));
    nmt_test_proc_free(&r);

    static const char usage[] = "Usage: nmt-edge-train bleu REF [HYP]\n"
                                "       nmt-edge-train bleu --ref REF --hyp HYP\n";
    char *help[] = {b, "bleu", "--help", NULL};
    nmt_test_run(help, NULL, g_dir, &r);
    expect_status(&r, 0);
    assert_ptr_equal(strstr(r.out, usage), r.out);
    assert_non_null(strstr(r.out, "the reference first"));
    assert_non_null(strstr(r.out, "--ref FILE    the reference translations\n"));
    assert_non_null(strstr(r.out, "--hyp FILE    the hypotheses to score ('-': standard input)\n"));
    nmt_test_proc_free(&r);
    char *three[] = {b, "bleu", ref, hyp, hyp, NULL};
    char *both[] = {b, "bleu", "--ref", ref, "--hyp", hyp, hyp, NULL};
    char *none[] = {b, "bleu", NULL};
    char *twice[] = {b, "bleu", "--ref", ref, "--ref", ref, NULL};
    char *bad_opt[] = {b, "bleu", "--tokenize", "13a", ref, hyp, NULL};
    char *ref_stdin[] = {b, "bleu", "-", hyp, NULL};
    char **bad[6] = {three, both, none, twice, bad_opt, ref_stdin};
    static const char *const first[6] = {
        "nmt-edge-train bleu: unexpected argument '", /* the third positional */
        "nmt-edge-train bleu: unexpected argument '",
        "nmt-edge-train bleu: no reference file (REF or --ref FILE)\n",
        "nmt-edge-train bleu: --ref given twice\n",
        "nmt-edge-train bleu: unexpected argument '--tokenize'\n",
        "nmt-edge-train bleu: the reference must be a file (only HYP may be standard input)\n"};
    for (int k = 0; k < 6; k++) {
        nmt_test_run(bad[k], NULL, g_dir, &r);
        expect_status(&r, 2);
        if (strstr(r.err, first[k]) != r.err || strstr(r.err, usage) == NULL)
            fail_msg("case %d: stderr:\n%s", k, r.err);
        nmt_test_proc_free(&r);
    }
    /* a line count mismatch names which side is which */
    char *short_hyp[] = {b, "bleu", ref, NULL};
    nmt_test_run(short_hyp, "", g_dir, &r);
    expect_status(&r, 1);
    char msg[1400];
    snprintf(msg, sizeof msg, "nmt-edge-train bleu: the hypotheses (standard input) and the references (%s) have "
             "different line counts (standard input ends first)\n", ref);
    assert_string_equal(r.err, msg);
    nmt_test_proc_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_ownership),
        cmocka_unit_test(test_run_lock),
        cmocka_unit_test(test_resume_refuses_bad_state),
        cmocka_unit_test(test_spm_train_reason),
        cmocka_unit_test(test_bleu_output_checked),
        cmocka_unit_test(test_bleu_args),
        cmocka_unit_test(test_run_report),
        cmocka_unit_test(test_mgsa),
        cmocka_unit_test(test_mgsa_syntax),
        cmocka_unit_test(test_parse_spans),
        cmocka_unit_test(test_phrase),
        cmocka_unit_test(test_model_keys),
        cmocka_unit_test(test_attention_cmd),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_adam_options),
        cmocka_unit_test(test_sigterm_checkpoints),
        cmocka_unit_test(test_sigkill_resume_bit_exact),
        cmocka_unit_test(test_banmt),
        cmocka_unit_test(test_learns_reversal),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
