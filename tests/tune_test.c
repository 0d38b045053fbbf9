/* SPDX-License-Identifier: MIT */
/* tune_test.c — the tuner (bench/nmt_edge_tune.c): its plan of shapes and
 * buffer sizes (bench/tune_plan.c) for every product and class of the
 * test, small and base shapes, and one class timed for real by the built
 * program on the test device.  Regression: the host staging buffer once
 * held max(A, B, C) floats but was filled with 16,384 int8 scales; for the
 * test model's q8 m2 and m16 classes (B = 192 x 64) that wrote 16 KB past
 * the allocation, and Intel's runtime aborted in glibc's heap checks
 * (docs/RELIABILITY.md, "Second OpenCL implementation"). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "tune_plan.h"

#ifndef NMT_TUNE_BIN
#error "NMT_TUNE_BIN must name the nmt-edge-tune executable"
#endif

static const uint32_t models[3][3] = {{64, 128, 64}, {256, 1024, 8000}, {512, 2048, 8000}};

/* Every buffer covers every shape, and the staging buffer every fill. */
static void test_plan_covers_every_shape(void **state) {
    (void)state;
    for (int m = 0; m < 3; m++)
        for (int op = 0; op < NMT_GOP_COUNT; op++)
            for (int c = 0; c < NMT_GCLASS_COUNT; c++) {
                nmt_tune_plan p;
                assert_int_equal(nmt_tune_plan_make(models[m][0], models[m][1], models[m][2], (nmt_gemm_op)op,
                                                    (nmt_gemm_class)c, &p),
                                 0);
                assert_true(p.n >= 2 && p.n <= NMT_TUNE_MAX_SHAPES);
                for (size_t i = 0; i < p.n; i++) {
                    const nmt_tune_shape *s = &p.shape[i];
                    assert_int_equal(nmt_gemm_class_of(s->M), c);
                    assert_true((size_t)s->M * s->K <= p.a);
                    assert_true((size_t)s->N * s->K <= p.b);
                    assert_true((size_t)s->M * s->N <= p.c);
                    if (op == NMT_GOP_Q8 || op == NMT_GOP_I8) assert_true(s->N <= p.scales);
                }
                if (op != NMT_GOP_Q8 && op != NMT_GOP_I8) assert_int_equal(p.scales, 0);
                assert_true(p.host >= p.a && p.host >= p.b && p.host >= p.scales);
            }
}

/* The exact plan of the class that overflowed. */
static void test_plan_q8_m2_test_model(void **state) {
    (void)state;
    nmt_tune_plan p;
    assert_int_equal(nmt_tune_plan_make(64, 128, 64, NMT_GOP_Q8, NMT_GCLASS_M2, &p), 0);
    assert_int_equal(p.n, 5);
    const uint32_t want[5][3] = {{1, 192, 64}, {1, 64, 64}, {1, 128, 64}, {1, 64, 128}, {1, 64, 64}};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(p.shape[i].M, want[i][0]);
        assert_int_equal(p.shape[i].N, want[i][1]);
        assert_int_equal(p.shape[i].K, want[i][2]);
    }
    assert_int_equal(p.a, 128);
    assert_int_equal(p.b, 192 * 64);
    assert_int_equal(p.c, 192);
    assert_int_equal(p.scales, 192);
    assert_int_equal(p.host, 192 * 64);
    /* NN times the training-side shapes only: output and FFN in */
    assert_int_equal(nmt_tune_plan_make(64, 128, 64, NMT_GOP_NN, NMT_GCLASS_BIG, &p), 0);
    assert_int_equal(p.n, 4);
    assert_int_equal(p.a, 512 * 64);
    assert_int_equal(p.b, 128 * 64);
    assert_int_equal(p.c, 512 * 128);
    assert_int_equal(nmt_tune_plan_make(64, 128, 64, NMT_GOP_COUNT, NMT_GCLASS_M2, &p), -1);
    assert_int_equal(nmt_tune_plan_make(64, 128, 64, NMT_GOP_NT, NMT_GCLASS_COUNT, &p), -1);
    assert_int_equal(p.n, 0);
}

static void run_tune(nmt_test_proc *r, const char *only, const char *dir) {
    char *argv[] = {NMT_TUNE_BIN, "--model", "test", "--only", (char *)only, "--no-clblast", "--reps-time", "0.001",
                    "--dry-run", "--cache", (char *)dir, NULL};
    nmt_test_run(argv, NULL, dir, r);
}

/* The program times q8 m2 on the test device (the class whose staging
 * overflowed; an ASan build, scripts/sanitize.sh, fails here without the
 * fix) and prints a tuning text with its choice. */
static void test_tuner_q8_m2(void **state) {
    (void)state;
    char dir[] = "/tmp/nmt_tune_testXXXXXX";
    assert_non_null(mkdtemp(dir));
    nmt_test_proc r;
    run_tune(&r, "q8:m2", dir);
    if (r.status != 0) fprintf(stderr, "%s", r.err);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "=> q8 m2: own tm="));
    assert_null(strstr(r.out, "=> nt ")); /* --only: nothing else timed */
    assert_null(strstr(r.out, "cannot run here"));
    int timed = 0;
    for (const char *l = r.out; (l = strstr(l, "\n  q8 m2  own ")) != NULL; l++) timed++;
    assert_true(timed >= 6); /* the table's choice and the class's candidates, deduplicated */
    assert_non_null(strstr(r.out, "\ngemm q8 m2 own tm="));
    /* int8 x int8 was not timed: the class keeps the table's choice (every
     * table row says auto or off), not "on" for want of a comparison */
    assert_non_null(strstr(r.out, "=> i8dot m2: kept (int8 x int8 not timed here)\n"));
    assert_non_null(strstr(r.out, "\ni8dot m2 "));
    assert_null(strstr(r.out, "\ni8dot m2 on\n"));
    nmt_test_proc_free(&r);
    /* bad --only: usage, exit status 2 */
    const char *bad[] = {"q8", "q8:m3", "xx:m2", ":m2", "q8:"};
    for (size_t i = 0; i < NMT_ARRAY_LEN(bad); i++) {
        run_tune(&r, bad[i], dir);
        assert_int_equal(r.status, 2);
        assert_non_null(strstr(r.err, "usage: nmt-edge-tune"));
        nmt_test_proc_free(&r);
    }
    nmt_test_remove_tree(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_covers_every_shape),
        cmocka_unit_test(test_plan_q8_m2_test_model),
        cmocka_unit_test(test_tuner_q8_m2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
