/* SPDX-License-Identifier: MIT */
/* schedule_test.c — the trainer's learning-rate schedules at chosen steps. */
#include <math.h>
#include <string.h>

#include "schedule.h"
#include "test_util.h"

static void assert_rel(double got, double want) {
    double tol = 1e-12 * fabs(want) + 1e-300;
    if (fabs(got - want) > tol) fail_msg("got %.17g want %.17g", got, want);
}

static void test_t2t(void **state) {
    (void)state;
    sched_params p = {SCHED_T2T, 2.0, 4000, 512};
    double peak = 2.0 / sqrt(512.0) / sqrt(4000.0);
    assert_rel(sched_lr(&p, 4000), peak);
    /* warm-up: linear in step */
    assert_rel(sched_lr(&p, 1), 2.0 / sqrt(512.0) * 1.0 * pow(4000.0, -1.5));
    assert_rel(sched_lr(&p, 2000), peak / 2);
    /* decay: step^-0.5 */
    assert_rel(sched_lr(&p, 16000), peak / 2);
    assert_rel(sched_lr(&p, 100000), 2.0 / sqrt(512.0) / sqrt(100000.0));
    /* peak is the maximum */
    assert_true(sched_lr(&p, 3999) < peak);
    assert_true(sched_lr(&p, 4001) < peak);
    /* the numbers people quote: d 512, warmup 4000, scale 1 -> ~7.0e-4 */
    p.lr = 1.0;
    assert_true(fabs(sched_lr(&p, 4000) - 6.9877e-4) < 1e-7);
}

static void test_invsqrt(void **state) {
    (void)state;
    sched_params p = {SCHED_INVSQRT, 5e-4, 4000, 0};
    assert_rel(sched_lr(&p, 1), 5e-4 / 4000.0);
    assert_rel(sched_lr(&p, 1000), 1.25e-4);
    assert_rel(sched_lr(&p, 4000), 5e-4);
    assert_rel(sched_lr(&p, 16000), 2.5e-4);
    assert_rel(sched_lr(&p, 64000), 1.25e-4);
    p.warmup = 1;
    assert_rel(sched_lr(&p, 1), 5e-4);
    assert_rel(sched_lr(&p, 4), 2.5e-4);
}

static void test_constant(void **state) {
    (void)state;
    sched_params p = {SCHED_CONSTANT, 3e-4, 4000, 512};
    assert_rel(sched_lr(&p, 1), 3e-4);
    assert_rel(sched_lr(&p, 4000), 3e-4);
    assert_rel(sched_lr(&p, 1000000), 3e-4);
}

static void test_names(void **state) {
    (void)state;
    assert_int_equal(sched_parse("t2t"), SCHED_T2T);
    assert_int_equal(sched_parse("inverse-sqrt"), SCHED_INVSQRT);
    assert_int_equal(sched_parse("constant"), SCHED_CONSTANT);
    assert_int_equal(sched_parse("cosine"), -1);
    assert_int_equal(sched_parse(""), -1);
    assert_int_equal(sched_parse(NULL), -1);
    for (int k = 0; k < 3; k++) assert_int_equal(sched_parse(sched_name((sched_kind)k)), k);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_t2t),
        cmocka_unit_test(test_invsqrt),
        cmocka_unit_test(test_constant),
        cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
