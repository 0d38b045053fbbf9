/* SPDX-License-Identifier: MIT */
/* schedule.c — learning-rate schedules (see schedule.h). */
#include "schedule.h"

#include <math.h>
#include <string.h>

int sched_parse(const char *name) {
    if (!name) return -1;
    if (strcmp(name, "t2t") == 0) return SCHED_T2T;
    if (strcmp(name, "inverse-sqrt") == 0) return SCHED_INVSQRT;
    if (strcmp(name, "constant") == 0) return SCHED_CONSTANT;
    return -1;
}

const char *sched_name(sched_kind k) {
    switch (k) {
    case SCHED_T2T: return "t2t";
    case SCHED_INVSQRT: return "inverse-sqrt";
    case SCHED_CONSTANT: return "constant";
    }
    return "unknown";
}

double sched_lr(const sched_params *p, uint64_t step) {
    if (!p) return 0.0;
    double s = (double)(step < 1 ? 1 : step);
    double w = (double)(p->warmup < 1 ? 1 : p->warmup);
    switch (p->kind) {
    case SCHED_T2T: {
        double d = (double)(p->d_model < 1 ? 1 : p->d_model);
        double a = 1.0 / sqrt(s), b = s / (w * sqrt(w));
        return p->lr / sqrt(d) * (a < b ? a : b);
    }
    case SCHED_INVSQRT:
        if (s < w) return p->lr * s / w;
        return p->lr * sqrt(w / s);
    case SCHED_CONSTANT: return p->lr;
    }
    return 0.0;
}
