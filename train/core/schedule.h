/* SPDX-License-Identifier: MIT */
/* schedule.h — learning-rate schedules of the trainer (step is 1-based).
 *   t2t / Vaswani et al.:  lr = scale * d^-0.5 * min(step^-0.5, step * warmup^-1.5)
 *   fairseq inverse_sqrt:  lr = peak * step / warmup             (step < warmup)
 *                               peak * sqrt(warmup / step)       (step >= warmup)
 *   constant:              lr = peak */
#ifndef NMT_TRAIN_SCHEDULE_H
#define NMT_TRAIN_SCHEDULE_H

#include <stdint.h>

typedef enum sched_kind { SCHED_T2T = 0, SCHED_INVSQRT = 1, SCHED_CONSTANT = 2 } sched_kind;

typedef struct sched_params {
    sched_kind kind;
    double lr;        /* t2t: the scale (default 2.0); others: the peak lr */
    uint32_t warmup;  /* steps (>= 1) */
    uint32_t d_model; /* t2t only */
} sched_params;

/* "t2t", "inverse-sqrt", "constant" -> kind; -1 if unknown. */
int sched_parse(const char *name);
const char *sched_name(sched_kind k);
double sched_lr(const sched_params *p, uint64_t step);

#endif
