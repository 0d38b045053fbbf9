/* SPDX-License-Identifier: MIT */
/* tune_plan.h — what the tuner (nmt_edge_tune.c) times for one product and
 * shape class: the model's product shapes at the class's representative row
 * counts, and the sizes of the operand buffers and of the host staging
 * buffer that fills them.  Plain arithmetic, no OpenCL: tests/tune_test.c
 * checks it (the staging buffer once was smaller than the int8 scales it
 * filled, a heap overflow: docs/RELIABILITY.md, "Second OpenCL
 * implementation"). */
#ifndef NMT_TUNE_PLAN_H
#define NMT_TUNE_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "tuning.h"

enum { NMT_TUNE_MAX_SHAPES = 10 };

typedef struct nmt_tune_shape {
    uint32_t M, N, K;
} nmt_tune_shape;

typedef struct nmt_tune_plan {
    nmt_tune_shape shape[NMT_TUNE_MAX_SHAPES];
    size_t n;        /* shapes used */
    size_t a;        /* elements of A (fp32): the largest M*K */
    size_t b;        /* elements of B: the largest N*K (fp32; int8 for NMT_GOP_Q8 / _I8) */
    size_t c;        /* elements of C (fp32): the largest M*N */
    size_t scales;   /* per-row scales (fp32) of NMT_GOP_Q8 / _I8: the largest N; 0 otherwise */
    size_t host;     /* floats of the host staging buffer: at least each of a, b, scales */
} nmt_tune_plan;

/* The plan for (op, cls) with a model of width d, FFN width ff and
 * vocabulary V (each >= 1).  Returns 0, or -1 for an op or class out of
 * range (p is then zeroed). */
int nmt_tune_plan_make(uint32_t d, uint32_t ff, uint32_t V, nmt_gemm_op op, nmt_gemm_class cls, nmt_tune_plan *p);

#endif
