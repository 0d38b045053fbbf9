/* SPDX-License-Identifier: MIT */
/* tune_plan.c — the tuner's shapes and buffer sizes (tune_plan.h). */
#include "tune_plan.h"

#include <string.h>

/* Representative row counts per class (0: none). */
static const uint32_t class_rows[NMT_GCLASS_COUNT][2] = {{1, 0}, {4, 8}, {64, 512}};

static size_t max_size(size_t x, size_t y) { return x > y ? x : y; }

int nmt_tune_plan_make(uint32_t d, uint32_t ff, uint32_t V, nmt_gemm_op op, nmt_gemm_class cls, nmt_tune_plan *p) {
    memset(p, 0, sizeof *p);
    if ((unsigned)op >= NMT_GOP_COUNT || (unsigned)cls >= NMT_GCLASS_COUNT) return -1;
    /* (N, K) of q|k|v, output, FFN in, FFN out, vocabulary */
    const uint32_t nk[5][2] = {{3 * d, d}, {d, d}, {ff, d}, {d, ff}, {V, d}};
    for (int r = 0; r < 2; r++) {
        uint32_t M = class_rows[cls][r];
        if (M == 0) continue;
        for (int j = 0; j < 5; j++) {
            if (op == NMT_GOP_NN && j != 1 && j != 2) continue; /* NN: training-side shapes only */
            nmt_tune_shape s = {M, nk[j][0], nk[j][1]};
            p->shape[p->n++] = s;
            p->a = max_size(p->a, (size_t)s.M * s.K);
            p->b = max_size(p->b, (size_t)s.N * s.K);
            p->c = max_size(p->c, (size_t)s.M * s.N);
            if (op == NMT_GOP_Q8 || op == NMT_GOP_I8) p->scales = max_size(p->scales, s.N);
        }
    }
    p->host = max_size(max_size(p->a, p->b), p->scales);
    return 0;
}
