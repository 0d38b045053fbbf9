/* SPDX-License-Identifier: MIT */
/* disk_full_test.c — a full disk while writing a converted model: the
 * atomic writer (nmtw_write_file, convert/nmt_writer.c) must report
 * NMT_ERR_IO, keep the previous file byte for byte and leave no temporary
 * file behind, wherever the disk fills up (issue 7, "limits").
 *
 * The disk is filled through link-time wrappers (-Wl,--wrap, see
 * tests/CMakeLists.txt) of fwrite, fflush, fsync and fclose: once armed,
 * fwrite accepts only `budget` more bytes and then fails with ENOSPC, or
 * fflush / fsync / fclose fail with ENOSPC (the ways a real full disk shows
 * through stdio's buffering).  stdout/stderr are never failed.
 *
 * The trainer's checkpoints (train/core/checkpoint.c, same writer) get the same
 * treatment: a failed ckpt_save reports NMT_ERR_IO and leaves the previous
 * checkpoint and last.nmt byte for byte, with no new or temporary file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "random_model.h"
#include "test_util.h"

typedef enum { FAIL_NONE, FAIL_WRITE, FAIL_FLUSH, FAIL_FSYNC, FAIL_CLOSE } fail_mode;
static fail_mode mode;
static long budget; /* FAIL_WRITE: bytes fwrite still accepts */
static int n_failed;

static int ours(FILE *f) { return f != stdout && f != stderr; }

size_t __real_fwrite(const void *p, size_t size, size_t n, FILE *f);
size_t __wrap_fwrite(const void *p, size_t size, size_t n, FILE *f);
size_t __wrap_fwrite(const void *p, size_t size, size_t n, FILE *f) {
    if (mode != FAIL_WRITE || !ours(f) || size == 0) return __real_fwrite(p, size, n, f);
    size_t want = size * n;
    if ((long)want <= budget) {
        budget -= (long)want;
        return __real_fwrite(p, size, n, f);
    }
    size_t fit = (size_t)budget / size;
    size_t done = fit ? __real_fwrite(p, size, fit, f) : 0;
    budget = 0;
    n_failed++;
    errno = ENOSPC;
    return done;
}

int __real_fflush(FILE *f);
int __wrap_fflush(FILE *f);
int __wrap_fflush(FILE *f) {
    if (mode == FAIL_FLUSH && f != NULL && ours(f)) {
        n_failed++;
        errno = ENOSPC;
        return EOF;
    }
    return __real_fflush(f);
}

int __real_fsync(int fd);
int __wrap_fsync(int fd);
int __wrap_fsync(int fd) {
    if (mode == FAIL_FSYNC && fd > 2) {
        n_failed++;
        errno = ENOSPC;
        return -1;
    }
    return __real_fsync(fd);
}

int __real_fclose(FILE *f);
int __wrap_fclose(FILE *f);
int __wrap_fclose(FILE *f) {
    int r = __real_fclose(f); /* the stream is gone either way, as with a real error */
    if (mode == FAIL_CLOSE && ours(f)) {
        n_failed++;
        errno = ENOSPC;
        return EOF;
    }
    return r;
}

/* Case i of a sweep: the disk fills after budgets[i] bytes (i < nb), then
 * fflush, fsync, fclose fail with ENOSPC (i = nb, nb + 1, nb + 2). */
#define N_OTHER_FAILURES 3
static void arm_case(size_t i, const long *budgets, size_t nb) {
    static const fail_mode others[N_OTHER_FAILURES] = {FAIL_FLUSH, FAIL_FSYNC, FAIL_CLOSE};
    n_failed = 0;
    if (i < nb) {
        mode = FAIL_WRITE;
        budget = budgets[i];
    } else {
        mode = others[i - nb];
    }
}

static nmt_random_transformer_config model_cfg(uint64_t seed) {
    nmt_random_transformer_config c;
    nmt_random_transformer_defaults(&c);
    c.d_model = 16;
    c.n_heads = 2;
    c.d_ff = 32;
    c.enc_layers = 1;
    c.dec_layers = 1;
    c.seed = seed;
    return c;
}

static void test_full_disk_keeps_previous_model(void **state) {
    (void)state;
    char *dir = nmt_test_make_temp_dir("diskfull");
    char path[1024];
    snprintf(path, sizeof path, "%s/model.nmt", dir);
    nmt_random_transformer_config old_cfg = model_cfg(1), new_cfg = model_cfg(2);
    mode = FAIL_NONE;
    assert_int_equal(nmt_random_transformer_write(&old_cfg, path), NMT_OK);
    size_t old_size;
    void *old = nmt_test_read_file(path, &old_size);
    assert_non_null(old);
    assert_true(old_size > 8192);

    /* the disk fills after 0, 1, 127, 128, ... bytes, up to one byte short */
    const long budgets[] = {0, 1, 127, 128, 4095, 4096, 8191, (long)old_size / 2, (long)old_size - 1};
    for (size_t i = 0; i < NMT_ARRAY_LEN(budgets) + N_OTHER_FAILURES; i++) {
        arm_case(i, budgets, NMT_ARRAY_LEN(budgets));
        nmt_status st = nmt_random_transformer_write(&new_cfg, path);
        mode = FAIL_NONE;
        if (st != NMT_ERR_IO || n_failed == 0)
            fail_msg("case %zu: status %s after %d injected failures, want NMT_ERR_IO", i, nmt_status_str(st),
                     n_failed);
        size_t now_size;
        void *now = nmt_test_read_file(path, &now_size);
        assert_non_null(now);
        if (now_size != old_size || memcmp(now, old, old_size) != 0)
            fail_msg("case %zu: the previous model was damaged", i);
        free(now);
        /* no temporary file left: ".", ".." and model.nmt only */
        assert_int_equal(nmt_test_count_files(dir, "", NULL, 0), 3);
        nmt_model_info info;
        assert_int_equal(nmt_model_inspect_file(path, &info), NMT_OK);
    }

    /* with space again the new model replaces the old one */
    assert_int_equal(nmt_random_transformer_write(&new_cfg, path), NMT_OK);
    size_t new_size;
    void *fresh = nmt_test_read_file(path, &new_size);
    assert_non_null(fresh);
    assert_true(new_size == old_size && memcmp(fresh, old, old_size) != 0);
    assert_int_equal(nmt_test_count_files(dir, "", NULL, 0), 3);
    free(fresh);
    free(old);
    nmt_test_remove_tree(dir);
    free(dir);
}

/* The checkpoint directory after a failed save: exactly the previous
 * checkpoint and last.nmt, unchanged. */
static void check_previous_checkpoint(const char *dir, const void *old, size_t old_size, size_t i) {
    static const char *const names[] = {"ckpt-00000001.nmt", "last.nmt"};
    for (int j = 0; j < 2; j++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, names[j]);
        size_t n;
        void *now = nmt_test_read_file(p, &n);
        assert_non_null(now);
        if (n != old_size || memcmp(now, old, old_size) != 0) fail_msg("case %zu: %s was damaged", i, names[j]);
        free(now);
    }
    assert_int_equal(nmt_test_count_files(dir, "", NULL, 0), 4); /* ., .., the two names */
}

static void test_full_disk_keeps_previous_checkpoint(void **state) {
    (void)state;
    char *dir = nmt_test_make_temp_dir("diskfull-ckpt");
    nmt_random_transformer_config cfg = model_cfg(3);
    void *img;
    size_t img_size;
    assert_int_equal(nmt_random_transformer_image(&cfg, &img, &img_size), NMT_OK);
    void *dmem;
    nmt_device *dev = nmt_test_device_open(&dmem);
    assert_non_null(dev);
    const nmt_train_limits lim = {.max_seqs = 2, .max_src_len = 4, .max_tgt_len = 4};
    ntm_model *m;
    nmt_test_assert_ok(dev, ntm_create(dev, img, img_size, &lim, &m));
    char err[256];
    ckpt_state st = {1, 0, 0, 9, 100, 0.0, 1.0};
    mode = FAIL_NONE;
    nmt_test_assert_ok(dev, ckpt_save(m, NULL, &st, dir, 3, err, sizeof err));
    char p1[1024];
    snprintf(p1, sizeof p1, "%s/ckpt-00000001.nmt", dir);
    size_t old_size;
    void *old = nmt_test_read_file(p1, &old_size);
    assert_non_null(old);

    st.step = 2;
    const long budgets[] = {0, 4096, (long)old_size / 2, (long)old_size - 1};
    for (size_t i = 0; i < NMT_ARRAY_LEN(budgets) + N_OTHER_FAILURES; i++) {
        arm_case(i, budgets, NMT_ARRAY_LEN(budgets));
        err[0] = '\0';
        nmt_status s = ckpt_save(m, NULL, &st, dir, 3, err, sizeof err);
        mode = FAIL_NONE;
        if (s != NMT_ERR_IO || n_failed == 0)
            fail_msg("case %zu: status %s after %d injected failures, want NMT_ERR_IO", i, nmt_status_str(s),
                     n_failed);
        assert_non_null(strstr(err, "ckpt-00000002.nmt")); /* the message names the file */
        check_previous_checkpoint(dir, old, old_size, i);
    }
    /* with space again: step 2 is written and last.nmt follows it */
    nmt_test_assert_ok(dev, ckpt_save(m, NULL, &st, dir, 3, err, sizeof err));
    assert_int_equal(nmt_test_count_files(dir, "", NULL, 0), 5);
    char p2[1024], pl[1024];
    snprintf(p2, sizeof p2, "%s/ckpt-00000002.nmt", dir);
    snprintf(pl, sizeof pl, "%s/last.nmt", dir);
    size_t n2, nl;
    void *c2 = nmt_test_read_file(p2, &n2), *cl = nmt_test_read_file(pl, &nl);
    assert_true(c2 && cl && n2 == nl && memcmp(c2, cl, n2) == 0);
    free(c2);
    free(cl);
    free(old);
    ntm_destroy(m);
    nmt_test_device_close(dev, dmem);
    free(img);
    nmt_test_remove_tree(dir);
    free(dir);
}

/* The reason a full disk gives (issue 21, item 9): the file and errno's
 * text, wherever the disk fills. */
static void test_full_disk_says_why(void **state) {
    (void)state;
    char *dir = nmt_test_make_temp_dir("diskwhy");
    char path[1024], want[1200], why[1200];
    snprintf(path, sizeof path, "%s/model.nmt", dir);
    snprintf(want, sizeof want, "cannot write '%s': No space left on device (the file was not replaced)", path);
    nmt_random_transformer_config c = model_cfg(3);
    nmtw_writer *w = nmtw_create();
    assert_non_null(w);
    assert_int_equal(nmt_random_transformer_add(w, &c), NMT_OK);
    const long budgets[] = {0, 4096};
    for (size_t i = 0; i < NMT_ARRAY_LEN(budgets) + N_OTHER_FAILURES; i++) {
        arm_case(i, budgets, NMT_ARRAY_LEN(budgets));
        nmt_status st = nmtw_write_file_why(w, path, why, sizeof why);
        mode = FAIL_NONE;
        assert_int_equal(st, NMT_ERR_IO);
        assert_string_equal(why, want);
        assert_int_equal(nmt_test_count_files(dir, "", NULL, 0), 2); /* ".", ".." */
    }
    nmtw_destroy(w);
    nmt_test_remove_tree(dir);
    free(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_full_disk_keeps_previous_model),
                                       cmocka_unit_test(test_full_disk_keeps_previous_checkpoint),
                                       cmocka_unit_test(test_full_disk_says_why)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
