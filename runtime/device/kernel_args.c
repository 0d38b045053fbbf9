/* SPDX-License-Identifier: MIT */
/* kernel_args.c — error reporting for kernel_args.h. */
#include "kernel_args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Kernel profile (nmt_kernel_profile_*), a fixed table, no allocation,
 * off unless enabled.  NMT_PROFILE_DRAINED: wall time per (kernel,
 * NDRange), measured by finishing the queue around each launch.
 * NMT_PROFILE_EVENTS: the queue is not drained; each launch takes an event,
 * and in batches of PROF_EV_MAX the events' start and end give its device
 * time and the device's idle time since the previous launch ended. */
#define PROF_MAX 256
#define PROF_EV_MAX 4096
typedef struct prof_row {
    const char *name;
    size_t gws[3];
    unsigned long long calls;
    double seconds, gap_seconds;
} prof_row;
static prof_row prof_rows[PROF_MAX];
static size_t prof_n;
static int prof_on;
static cl_event ev_buf[PROF_EV_MAX];
static const char *ev_name[PROF_EV_MAX];
static size_t ev_gws[PROF_EV_MAX][3];
static size_t ev_n;
static cl_ulong ev_prev_end; /* end of the last resolved launch; 0: none yet */
static int ev_unavailable;   /* the queue was created without profiling */

static double prof_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void prof_add(const char *name, const size_t *g, double dt, double gap) {
    for (size_t i = 0; i < prof_n; i++) {
        prof_row *r = &prof_rows[i];
        if (strcmp(r->name, name) == 0 && memcmp(r->gws, g, sizeof r->gws) == 0) {
            r->calls++;
            r->seconds += dt;
            r->gap_seconds += gap;
            return;
        }
    }
    if (prof_n == PROF_MAX) return;
    prof_row *r = &prof_rows[prof_n++];
    r->name = name;
    memcpy(r->gws, g, sizeof r->gws);
    r->calls = 1;
    r->seconds = dt;
    r->gap_seconds = gap;
}

/* Waits for the recorded launches and adds them, in enqueue order (one
 * in-order queue), to the table. */
static void ev_flush(void) {
    if (ev_n == 0) return;
    clWaitForEvents((cl_uint)ev_n, ev_buf);
    for (size_t i = 0; i < ev_n; i++) {
        cl_ulong st = 0, en = 0;
        if (clGetEventProfilingInfo(ev_buf[i], CL_PROFILING_COMMAND_START, sizeof st, &st, NULL) != CL_SUCCESS ||
            clGetEventProfilingInfo(ev_buf[i], CL_PROFILING_COMMAND_END, sizeof en, &en, NULL) != CL_SUCCESS)
            ev_unavailable = 1;
        else {
            const double gap = ev_prev_end && st > ev_prev_end ? (double)(st - ev_prev_end) * 1e-9 : 0.0;
            prof_add(ev_name[i], ev_gws[i], en > st ? (double)(en - st) * 1e-9 : 0.0, gap);
            ev_prev_end = en;
        }
        clReleaseEvent(ev_buf[i]);
    }
    ev_n = 0;
}

void nmt_kernel_profile_enable(int mode) {
    if (mode && !prof_on) {
        prof_n = 0;
        ev_prev_end = 0;
        ev_unavailable = 0;
    }
    if (!mode) ev_flush();
    prof_on = mode;
}

static int prof_cmp(const void *a, const void *b) {
    double x = ((const prof_row *)a)->seconds, y = ((const prof_row *)b)->seconds;
    return (x < y) - (x > y);
}

void nmt_kernel_profile_print(FILE *f, double scale) {
    ev_flush();
    if (ev_unavailable) fprintf(f, "(no event times: the queue was created without profiling; some launches left out)\n");
    double total = 0, gaps = 0;
    for (size_t i = 0; i < prof_n; i++) {
        total += prof_rows[i].seconds;
        gaps += prof_rows[i].gap_seconds;
    }
    qsort(prof_rows, prof_n, sizeof *prof_rows, prof_cmp);
    fprintf(f, "%-22s %-22s %8s %10s %6s %10s\n", "kernel", "global size", "calls", "ms", "%", "idle ms");
    for (size_t i = 0; i < prof_n; i++) {
        const prof_row *r = &prof_rows[i];
        char g[48];
        snprintf(g, sizeof g, "%zux%zux%zu", r->gws[0], r->gws[1], r->gws[2]);
        fprintf(f, "%-22s %-22s %8.1f %10.4f %6.2f %10.4f\n", r->name, g, (double)r->calls * scale,
                r->seconds * 1e3 * scale, total > 0 ? 100.0 * r->seconds / total : 0.0, r->gap_seconds * 1e3 * scale);
    }
    fprintf(f, "total kernel time %.4f ms", total * 1e3 * scale);
    if (gaps > 0) fprintf(f, ", device idle between launches %.4f ms", gaps * 1e3 * scale);
    fprintf(f, "\n");
}

nmt_status args_end(nmt_device *dev, const args *a, const char *kernel) {
    if (a->err == CL_SUCCESS) return NMT_OK;
    char what[80];
    snprintf(what, sizeof what, "clSetKernelArg(%s, %u)", kernel, (unsigned)a->err_i);
    return nmt_cl_fail(dev, a->err, what);
}

nmt_status nmt_enqueue(nmt_device *dev, cl_kernel k, cl_uint dims, const size_t *gws,
                       const size_t *lws, const char *kernel) {
    NMT_TRY(nmt_device_settle(dev));
    double t0 = 0;
    size_t g[3] = {0, 0, 0};
    for (cl_uint d = 0; d < dims && d < 3; d++) g[d] = gws[d];
    if (prof_on == NMT_PROFILE_DRAINED) {
        clFinish(dev->queue);
        t0 = prof_now();
    }
    cl_event ev = NULL;
    cl_int e = clEnqueueNDRangeKernel(dev->queue, k, dims, NULL, gws, lws, 0, NULL,
                                      prof_on == NMT_PROFILE_EVENTS ? &ev : NULL);
    if (prof_on == NMT_PROFILE_DRAINED && e == CL_SUCCESS) {
        clFinish(dev->queue);
        prof_add(kernel, g, prof_now() - t0, 0.0);
    }
    if (ev != NULL) {
        if (ev_n == PROF_EV_MAX) ev_flush();
        ev_buf[ev_n] = ev;
        ev_name[ev_n] = kernel;
        memcpy(ev_gws[ev_n++], g, sizeof g);
    }
    if (e == CL_SUCCESS) return NMT_OK;
    char what[80];
    snprintf(what, sizeof what, "clEnqueueNDRangeKernel(%s)", kernel);
    return nmt_cl_fail(dev, e, what);
}

static cl_kernel *slot(void *base, const nmt_kernel_def *d) {
    return (cl_kernel *)(void *)((char *)base + d->offset);
}

nmt_status nmt_kernel_wg(nmt_device *dev, cl_kernel k, size_t wish, size_t *out) {
    size_t kwg = 0;
    cl_int e = clGetKernelWorkGroupInfo(k, dev->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg, &kwg, NULL);
    if (e != CL_SUCCESS) return nmt_cl_fail(dev, e, "clGetKernelWorkGroupInfo");
    size_t dev_wg = dev->info.max_work_group_size ? dev->info.max_work_group_size : 1;
    *out = pow2_floor(NMT_MAX((size_t)1, NMT_MIN(NMT_MIN(wish ? wish : 1, dev_wg), kwg ? kwg : 1)));
    return NMT_OK;
}

nmt_status nmt_kernel_table_create(nmt_device *dev, void *base, const nmt_kernel_def *defs, size_t n,
                                   const cl_program *progs, size_t *wg, size_t *reduce_wg) {
    for (size_t i = 0; i < n; i++) {
        const nmt_kernel_def *d = &defs[i];
        size_t *limit = d->reduction ? reduce_wg : wg, kwg = 0;
        NMT_TRY(nmt_device_kernel(dev, progs[d->program], d->name, slot(base, d)));
        NMT_TRY(nmt_kernel_wg(dev, *slot(base, d), *limit, &kwg));
        *limit = NMT_MIN(*limit, kwg);
    }
    return NMT_OK;
}

void nmt_kernel_table_release(void *base, const nmt_kernel_def *defs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        cl_kernel *k = slot(base, &defs[i]);
        if (*k) clReleaseKernel(*k);
        *k = NULL;
    }
}
