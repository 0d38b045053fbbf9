/* SPDX-License-Identifier: MIT */
/* batching.c — token-based batches (nmt_batch_plan_tokens, include/nmt_edge.h):
 * sort sentences by length, then cut them into batches of at most a token
 * budget of padded tokens.  Pure: reads its arguments, writes the caller's
 * arrays, allocates nothing (an in-place heap sort, so no scratch). */
#include "nmt_edge.h"

#include <stdint.h>

/* The sort key: shorter first, ties by input index (unique, so the order
 * is total and any correct sort gives the same permutation). */
static int before(const uint32_t *lens, uint32_t a, uint32_t b) {
    return lens[a] != lens[b] ? lens[a] < lens[b] : a < b;
}

static void sift_down(const uint32_t *lens, uint32_t *order, uint32_t root, uint32_t n) {
    for (;;) {
        uint64_t child = 2 * (uint64_t)root + 1; /* 64 bits: no wrap for any n */
        if (child >= n) return;
        if (child + 1 < n && before(lens, order[child], order[child + 1])) child++;
        if (!before(lens, order[root], order[child])) return;
        const uint32_t t = order[root];
        order[root] = order[child];
        order[child] = t;
        root = child;
    }
}

/* order[0, n) := 0 .. n-1 sorted by (lens, index): heap sort, O(n log n). */
static void sort_by_length(const uint32_t *lens, uint32_t n, uint32_t *order) {
    for (uint32_t i = 0; i < n; i++) order[i] = i;
    for (uint32_t i = n / 2; i-- > 0;) sift_down(lens, order, i, n);
    for (uint32_t end = n; end-- > 1;) {
        const uint32_t t = order[0];
        order[0] = order[end];
        order[end] = t;
        sift_down(lens, order, 0, end);
    }
}

nmt_status nmt_batch_plan_tokens(const uint32_t *lens, uint32_t n, uint32_t max_tokens, uint32_t max_batch,
                                 uint32_t *order, uint32_t *batch_sizes, uint32_t *n_batches) {
    if (n_batches == NULL || max_tokens == 0 || max_batch == 0) return NMT_ERR_INVALID_ARGUMENT;
    if (n > 0 && (lens == NULL || order == NULL || batch_sizes == NULL)) return NMT_ERR_INVALID_ARGUMENT;
    if (n == 0) {
        *n_batches = 0;
        return NMT_OK;
    }
    sort_by_length(lens, n, order);
    /* Ascending lengths: the sentence being added is the batch's longest,
     * so a batch of k sentences ending at it costs k * (its lens + 1). */
    uint32_t nb = 0, in_batch = 0;
    for (uint32_t k = 0; k < n; k++) {
        const uint64_t row = (uint64_t)lens[order[k]] + 1;
        if (in_batch > 0 && (in_batch == max_batch || (uint64_t)(in_batch + 1) * row > max_tokens)) {
            batch_sizes[nb++] = in_batch;
            in_batch = 0;
        }
        in_batch++; /* a first sentence always fits: alone over the budget, it is its own batch */
    }
    batch_sizes[nb++] = in_batch;
    *n_batches = nb;
    return NMT_OK;
}
