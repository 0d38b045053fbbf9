/* SPDX-License-Identifier: MIT */
/* spans.c — phrase spans: the check and the partition (spans.h). */
#include "spans.h"

#include "common.h"

nmt_status nmt_spans_check(const nmt_span *sp, uint32_t n_spans, uint32_t len, uint32_t *bad) {
    NMT_CHECK(n_spans == 0 || sp != NULL, NMT_ERR_INVALID_ARGUMENT);
    uint64_t end = 0; /* of the span before */
    for (uint32_t k = 0; k < n_spans; k++) {
        const nmt_span x = sp[k];
        if (!(x.len > 0 && x.start >= end && (uint64_t)x.start + x.len <= len)) {
            if (bad) *bad = k;
            return NMT_ERR_INVALID_SPANS;
        }
        end = (uint64_t)x.start + x.len;
    }
    return NMT_OK;
}

void nmt_spans_partition(uint32_t fallback, const nmt_spans *src, const int32_t *lens, uint32_t n, uint32_t len,
                         int32_t *seg, int32_t *cnt) {
    for (uint32_t b = 0; b < n; b++) {
        const uint32_t L = (uint32_t)lens[b], ns = src ? src->n_spans[b] : 0;
        const nmt_span *sp = ns ? src->spans[b] : NULL;
        int32_t *row = seg + (size_t)b * len * 2;
        uint32_t m = 0, k = 0;
        for (uint32_t t = 0; t < L; m++) {
            uint32_t w = 1;
            if (ns == 0) w = NMT_MIN(fallback, L - t);
            else if (k < ns && sp[k].start == t) w = sp[k++].len;
            row[2 * m] = (int32_t)t;
            row[2 * m + 1] = (int32_t)w;
            t += w;
        }
        cnt[b] = (int32_t)m;
        for (; m < len; m++) row[2 * m] = row[2 * m + 1] = 0;
    }
}
