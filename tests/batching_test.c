/* SPDX-License-Identifier: MIT */
/* batching_test.c — nmt_batch_plan_tokens (runtime/session/batching.c):
 * exact orders and batch sizes of small plans (ties, the budget's edge, the
 * max_batch cap, a sentence over the budget alone, lengths near UINT32_MAX),
 * random plans against a naive reference (insertion sort, greedy cut), and
 * bad arguments with their exact status and nothing written. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "nmt_edge.h"

/* Plan lens[0, n) and compare with the expected order and sizes. */
static void expect_plan(const uint32_t *lens, uint32_t n, uint32_t max_tokens, uint32_t max_batch,
                        const uint32_t *want_order, const uint32_t *want_sizes, uint32_t want_nb) {
    uint32_t order[16], sizes[16], nb = 999;
    assert_true(n <= 16);
    assert_int_equal(nmt_batch_plan_tokens(lens, n, max_tokens, max_batch, order, sizes, &nb), NMT_OK);
    assert_int_equal(nb, want_nb);
    for (uint32_t k = 0; k < n; k++) assert_int_equal(order[k], want_order[k]);
    for (uint32_t b = 0; b < nb; b++) assert_int_equal(sizes[b], want_sizes[b]);
}

static void test_small_plans(void **state) {
    (void)state;
    /* sorted (0)4 (2)1 (2)3 (5)0 (7)5 (9)2; costs with the EOS: 1, then 2*3, 3*3 = 9 <= 12,
     * 4*6 = 24 > 12 cuts; 2*8 > 12, 2*10 > 12: the rest alone */
    const uint32_t a[] = {5, 2, 9, 2, 0, 7};
    expect_plan(a, 6, 12, 8, (const uint32_t[]){4, 1, 3, 0, 5, 2}, (const uint32_t[]){3, 1, 1, 1}, 4);
    /* the same lengths, a budget of 100 and max_batch 4: 4 sentences, then 2*10 */
    expect_plan(a, 6, 100, 4, (const uint32_t[]){4, 1, 3, 0, 5, 2}, (const uint32_t[]){4, 2}, 2);
    /* the cap: five equal sentences, max_batch 2; ties keep the input order */
    const uint32_t b[] = {1, 1, 1, 1, 1};
    expect_plan(b, 5, 100, 2, (const uint32_t[]){0, 1, 2, 3, 4}, (const uint32_t[]){2, 2, 1}, 3);
    /* the budget's edge: 2 * (3 + 1) == 8 fits, 3 * 4 does not */
    const uint32_t c[] = {3, 3, 3};
    expect_plan(c, 3, 8, 8, (const uint32_t[]){0, 1, 2}, (const uint32_t[]){2, 1}, 2);
    expect_plan(c, 3, 7, 8, (const uint32_t[]){0, 1, 2}, (const uint32_t[]){1, 1, 1}, 3);
    /* a sentence over the budget is a batch of its own, never refused */
    const uint32_t d[] = {3, 50, 3};
    expect_plan(d, 3, 10, 4, (const uint32_t[]){0, 2, 1}, (const uint32_t[]){2, 1}, 2);
    /* one sentence */
    expect_plan((const uint32_t[]){7}, 1, 1, 1, (const uint32_t[]){0}, (const uint32_t[]){1}, 1);
    /* lengths near UINT32_MAX: lens + 1 and the products do not wrap (a
     * 32-bit 2 * UINT32_MAX would fit the budget) */
    const uint32_t e[] = {UINT32_MAX, 0, UINT32_MAX - 1};
    expect_plan(e, 3, UINT32_MAX, 8, (const uint32_t[]){1, 2, 0}, (const uint32_t[]){1, 1, 1}, 3);
    /* empty sentences cost 1 each (their EOS) */
    const uint32_t f[] = {0, 0, 0, 0};
    expect_plan(f, 4, 3, 8, (const uint32_t[]){0, 1, 2, 3}, (const uint32_t[]){3, 1}, 2);
}

/* The reference: insertion sort by (length, index), then the greedy cut. */
static uint32_t naive_plan(const uint32_t *lens, uint32_t n, uint32_t max_tokens, uint32_t max_batch,
                           uint32_t *order, uint32_t *sizes) {
    for (uint32_t i = 0; i < n; i++) {
        uint32_t j = i;
        while (j > 0 && lens[order[j - 1]] > lens[i]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
    uint32_t nb = 0, k = 0;
    while (k < n) {
        uint32_t m = 1;
        while (k + m < n && m < max_batch && (uint64_t)(m + 1) * ((uint64_t)lens[order[k + m]] + 1) <= max_tokens)
            m++;
        sizes[nb++] = m;
        k += m;
    }
    return nb;
}

static void test_random_plans(void **state) {
    (void)state;
    enum { N = 1500 };
    uint32_t *lens = malloc(N * sizeof *lens), *order = malloc(N * sizeof *order), *sizes = malloc(N * sizeof *sizes);
    uint32_t *ref_order = malloc(N * sizeof *ref_order), *ref_sizes = malloc(N * sizeof *ref_sizes);
    assert_non_null(lens);
    assert_non_null(ref_sizes);
    uint32_t seed = 12345;
    for (int round = 0; round < 40; round++) {
        seed = seed * 1664525u + 1013904223u;
        const uint32_t n = 1 + (seed >> 8) % N, max_len = 1 + (seed >> 4) % 120;
        const uint32_t max_tokens = 1 + (seed >> 12) % 3000, max_batch = 1 + (seed >> 20) % 64;
        for (uint32_t i = 0; i < n; i++) {
            seed = seed * 1664525u + 1013904223u;
            lens[i] = (seed >> 9) % max_len; /* many ties */
        }
        uint32_t nb = 0;
        assert_int_equal(nmt_batch_plan_tokens(lens, n, max_tokens, max_batch, order, sizes, &nb), NMT_OK);
        const uint32_t ref_nb = naive_plan(lens, n, max_tokens, max_batch, ref_order, ref_sizes);
        assert_int_equal(nb, ref_nb);
        assert_memory_equal(order, ref_order, n * sizeof *order);
        assert_memory_equal(sizes, ref_sizes, nb * sizeof *sizes);
        /* every batch within the budget (or alone) and the cap; the sizes sum to n */
        uint32_t k = 0;
        for (uint32_t b = 0; b < nb; b++) {
            assert_true(sizes[b] >= 1 && sizes[b] <= max_batch);
            const uint64_t longest = lens[order[k + sizes[b] - 1]];
            assert_true(sizes[b] == 1 || (uint64_t)sizes[b] * (longest + 1) <= max_tokens);
            k += sizes[b];
        }
        assert_int_equal(k, n);
    }
    free(lens);
    free(order);
    free(sizes);
    free(ref_order);
    free(ref_sizes);
}

static void test_bad_arguments(void **state) {
    (void)state;
    const uint32_t lens[] = {4, 1};
    uint32_t order[2] = {77, 77}, sizes[2] = {77, 77}, nb = 77;
    assert_int_equal(nmt_batch_plan_tokens(lens, 2, 0, 8, order, sizes, &nb), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_batch_plan_tokens(lens, 2, 64, 0, order, sizes, &nb), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_batch_plan_tokens(NULL, 2, 64, 8, order, sizes, &nb), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_batch_plan_tokens(lens, 2, 64, 8, NULL, sizes, &nb), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_batch_plan_tokens(lens, 2, 64, 8, order, NULL, &nb), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_batch_plan_tokens(lens, 2, 64, 8, order, sizes, NULL), NMT_ERR_INVALID_ARGUMENT);
    /* nothing written by a refused call */
    assert_int_equal(nb, 77);
    assert_int_equal(order[0], 77);
    assert_int_equal(sizes[0], 77);
    /* n == 0: no batches, the arrays may be NULL */
    assert_int_equal(nmt_batch_plan_tokens(NULL, 0, 64, 8, NULL, NULL, &nb), NMT_OK);
    assert_int_equal(nb, 0);
    /* but the budget and the cap are checked for n == 0 too */
    assert_int_equal(nmt_batch_plan_tokens(NULL, 0, 0, 8, NULL, NULL, &nb), NMT_ERR_INVALID_ARGUMENT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_plans),
        cmocka_unit_test(test_random_plans),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
