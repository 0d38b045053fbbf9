/* SPDX-License-Identifier: MIT */
/* ops_train_launch.h — how every training op enqueues its kernel
 * (ops_train.c, ops_train_rec.c, ops_train_rnn.c): internal to the training
 * library's op layer, not part of ops_train.h's interface.  Same launch rule
 * as ops.c: local sizes fill dimension 0 first within wg_max, global sizes
 * padded to multiples of them (no non-uniform work-groups). */
#ifndef NMT_OPS_TRAIN_LAUNCH_H
#define NMT_OPS_TRAIN_LAUNCH_H

#include "common.h"
#include "kernel_args.h"
#include "ops_train.h"

/* n[0..dims) work-items (dims <= 3); any n[d] == 0 is a no-op. */
static inline nmt_status nmt_train_launch(nmt_train_ops *t, cl_kernel k, cl_uint dims, const size_t *n,
                                          const char *kernel) {
    size_t gws[3], lws[3];
    size_t budget = pow2_floor(t->wg_max ? t->wg_max : 1);
    for (cl_uint d = 0; d < dims; d++) {
        if (n[d] == 0) return NMT_OK;
        lws[d] = NMT_MIN(pow2_ceil(n[d]), budget);
        budget /= lws[d];
        gws[d] = (n[d] + lws[d] - 1) / lws[d] * lws[d];
    }
    return nmt_enqueue(t->dev, k, dims, gws, lws, kernel);
}

#endif
