/* SPDX-License-Identifier: MIT */
/* train_dist.c — data-parallel training over MPI (train_dist.h, issue 18).
 * Built with MPI when NMT_WITH_MPI is on (CMake option, on where MPI is
 * found); without it every call is that of a single rank. */
#include "train_dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nmt_edge.h"
#include "train_opts.h"

#ifdef NMT_WITH_MPI
#include <mpi.h>

#include "device.h"
#endif

#define PROG TRAIN_PROG

/* A launcher's rank variables (Open MPI, MPICH / Slurm PMI, PMIx). */
static int launched_by_mpi(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i]) != NULL) return 1;
    return 0;
}

/* ---- device choice ------------------------------------------------------- */

typedef struct gpu_pick {
    int want, seen;
    char spec[32];
} gpu_pick;

static void pick_gpu(void *user, uint32_t platform, uint32_t device, const char *pn, const char *dn, int is_gpu) {
    (void)pn;
    (void)dn;
    gpu_pick *g = (gpu_pick *)user;
    if (!is_gpu) return;
    if (g->seen++ == g->want) snprintf(g->spec, sizeof g->spec, "%u:%u", platform, device);
}

const char *train_dist_device(const train_dist *d, const char *spec, char *buf, size_t cap) {
    const char *env = getenv("NMT_EDGE_DEVICE");
    if ((spec && *spec) || (env && *env) || d->size < 2) return spec;
    gpu_pick g = {0, 0, ""};
    if (nmt_device_list(pick_gpu, &g) != NMT_OK || g.seen == 0) return spec;
    g.want = d->local_rank % g.seen;
    g.seen = 0;
    if (nmt_device_list(pick_gpu, &g) != NMT_OK || !g.spec[0]) return spec;
    snprintf(buf, cap, "%s", g.spec);
    return buf;
}

#ifdef NMT_WITH_MPI

/* ---- MPI ------------------------------------------------------------------ */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* An MPI error on this rank: the message, then the whole job stops. */
static void mpi_died(const train_dist *d, int err, const char *what) {
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(err, msg, &len);
    fprintf(stderr, "\n" PROG ": rank %d of %d: %s failed: %s; stopping the job\n", d->rank, d->size, what, msg);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* Waits for reqs[0..n) for at most the timeout: the rank that sees no
 * answer names itself, what it waited for, and stops the job. */
static void wait_all(const train_dist *d, int n, MPI_Request *reqs, const char *what, uint64_t step, double limit) {
    const double t0 = now_s();
    for (;;) {
        int done = 0;
        int err = MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
        if (err != MPI_SUCCESS) mpi_died(d, err, what);
        if (done) return;
        if (now_s() - t0 > limit) {
            fprintf(stderr,
                    "\n" PROG ": rank %d of %d: %s (step %llu): no answer from the other ranks within %g s "
                    "(%s): a rank died, hangs or lost its device; stopping the job\n",
                    d->rank, d->size, what, (unsigned long long)step, limit,
                    limit > d->timeout_s ? "the start's limit" : "--dist-timeout");
            fflush(stderr);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        struct timespec ts = {0, 100000}; /* 0.1 ms: leave the core to the device's threads */
        nanosleep(&ts, NULL);
    }
}

int train_dist_init(train_dist *d, int *argc, char ***argv, double timeout_s, double bucket_mb, int overlap) {
    memset(d, 0, sizeof *d);
    d->size = 1;
    d->timeout_s = timeout_s;
    d->overlap = overlap;
    d->bucket = (size_t)(bucket_mb * 1048576.0 / sizeof(float));
    if (d->bucket < 1024) d->bucket = 1024;
    if (!launched_by_mpi()) return 0;
    if (MPI_Init(argc, argv) != MPI_SUCCESS) {
        fprintf(stderr, PROG ": MPI_Init failed\n");
        return 1;
    }
    d->mpi = 1;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d->size);
    MPI_Comm local;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL, &local) == MPI_SUCCESS) {
        MPI_Comm_rank(local, &d->local_rank);
        MPI_Comm_free(&local);
    }
    return 0;
}

/* The start (data, model, kernels: minutes on a cold kernel cache or a
 * large corpus) may take longer than a step. */
static double start_limit(const train_dist *d) { return d->timeout_s > 3600 ? d->timeout_s : 3600; }

int train_dist_bcast_int(train_dist *d, int v, const char *what) {
    if (!d->mpi) return v;
    MPI_Request r;
    int err = MPI_Ibcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD, &r);
    if (err != MPI_SUCCESS) mpi_died(d, err, what);
    wait_all(d, 1, &r, what, 0, start_limit(d));
    return v;
}

int train_dist_max_int(train_dist *d, int v, const char *what, int start) {
    if (!d->mpi) return v;
    MPI_Request r;
    int err = MPI_Iallreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &r);
    if (err != MPI_SUCCESS) mpi_died(d, err, what);
    wait_all(d, 1, &r, what, 0, start ? start_limit(d) : d->timeout_s);
    return v;
}

/* ---- the gradient all-reduce ------------------------------------------- */

/* The step's slices so far: grown by doubling (host memory, as param_store.c).
 * A failed realloc leaves that array as it was, still holding cap_sl
 * entries, and cap_sl only grows once all four have grown, so a failure
 * never leaves an array shorter than cap_sl. */
static int add_slice(train_dist *d, size_t off, size_t n) {
    if (d->n_sl == d->cap_sl) {
        size_t cap = d->cap_sl ? 2 * d->cap_sl : 64;
        size_t *so = realloc(d->sl_off, cap * sizeof *so);
        if (so) d->sl_off = so;
        size_t *sn = realloc(d->sl_n, cap * sizeof *sn);
        if (sn) d->sl_n = sn;
        void **ev = realloc(d->sl_ev, cap * sizeof *ev);
        if (ev) d->sl_ev = ev;
        MPI_Request *r = realloc(d->reqs, (cap + 1) * sizeof *r);
        if (r) d->reqs = r;
        if (!so || !sn || !ev || !r) return 1;
        d->cap_sl = cap;
    }
    d->sl_off[d->n_sl] = off;
    d->sl_n[d->n_sl] = n;
    d->sl_ev[d->n_sl] = NULL;
    d->n_sl++;
    return 0;
}

static void start_slice(train_dist *d, size_t i) {
    MPI_Request *reqs = (MPI_Request *)d->reqs;
    int err = MPI_Iallreduce(MPI_IN_PLACE, d->host + d->sl_off[i], (int)d->sl_n[i], MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                             &reqs[i]);
    if (err != MPI_SUCCESS) mpi_died(d, err, "the gradient all-reduce");
    d->reduced += d->sl_n[i];
}

/* Starts, in slice order, the all-reduce of every slice whose read-back has
 * completed (no waiting) and lets MPI progress the started ones. */
static void poll_slices(train_dist *d) {
    while (d->n_started < d->n_sl && d->sl_ev[d->n_started] != NULL) {
        cl_event ev = (cl_event)d->sl_ev[d->n_started];
        cl_int st = CL_QUEUED;
        if (clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL) != CL_SUCCESS || st < 0) {
            d->err = NMT_ERR_OPENCL;
            return;
        }
        if (st != CL_COMPLETE) break;
        clReleaseEvent(ev);
        d->sl_ev[d->n_started] = NULL;
        start_slice(d, d->n_started++);
        d->n_early++;
    }
    if (d->n_started > 0) {
        int done;
        MPI_Testall((int)d->n_started, (MPI_Request *)d->reqs, &done, MPI_STATUSES_IGNORE);
    }
}

/* The backward's report (nmt_grads_ready_fn): [off, off + n) is final.
 * Cut into buckets, marked (a slice reported twice is an error), and with
 * overlap read back without waiting; the all-reduces start when polled. */
static void on_ready(void *user, size_t off, size_t n) {
    train_dist *d = (train_dist *)user;
    if (d->err != NMT_OK) return;
    if (off > d->n || n > d->n - off) {
        d->err = NMT_ERR_INVALID_ARGUMENT;
        return;
    }
    for (size_t i = off; i < off + n; i++)
        if (d->mark[i]++) {
            d->err = NMT_ERR_INVALID_ARGUMENT; /* reported twice: not reduced exactly once */
            return;
        }
    for (size_t o = off; o < off + n; o += d->bucket) {
        const size_t cnt = (off + n - o < d->bucket) ? off + n - o : d->bucket;
        if (add_slice(d, o, cnt)) {
            d->err = NMT_ERR_IO;
            return;
        }
        if (!d->overlap) continue;
        nmt_status s = ntm_grads_read_async(d->model, o, cnt, d->host + o, &d->sl_ev[d->n_sl - 1]);
        if (s != NMT_OK) {
            d->err = s;
            return;
        }
        d->n_queued++;
    }
    if (d->overlap) poll_slices(d);
}

nmt_status train_dist_step_begin(train_dist *d, ntm_model *m, uint64_t step) {
    if (!d->mpi) return NMT_OK;
    const size_t n = ntm_n_params(m);
    if (d->host == NULL || d->n != n) {
        free(d->host);
        free(d->mark);
        d->host = malloc(n * sizeof(float));
        d->mark = malloc(n);
        d->n = n;
        if (d->host == NULL || d->mark == NULL) return NMT_ERR_IO; /* host memory, as param_store.c */
    }
    memset(d->mark, 0, n);
    d->model = m;
    d->step = step;
    d->n_sl = d->n_started = 0;
    d->reduced = 0;
    d->err = NMT_OK;
    return NMT_OK;
}

void train_dist_hook(train_dist *d, nmt_train_step_opts *so) {
    if (!d->mpi || d->model == NULL) return;
    so->grads_ready = on_ready;
    so->grads_user = d;
}

nmt_status train_dist_allreduce(train_dist *d, ntm_model *m, double sums[2], uint64_t step) {
    if (!d->mpi) return NMT_OK;
    const char *what = "the gradient all-reduce";
    if (d->model != m || d->n != ntm_n_params(m)) return NMT_ERR_INVALID_ARGUMENT; /* no train_dist_step_begin */
    double t0 = now_s();
    /* what the backward did not report (all of it for a family without
     * reports): runs of unmarked parameters, the last first */
    for (size_t hi = d->n; hi > 0 && d->err == NMT_OK;) {
        while (hi > 0 && d->mark[hi - 1]) hi--;
        size_t lo = hi;
        while (lo > 0 && !d->mark[lo - 1]) lo--;
        if (lo < hi) {
            int ov = d->overlap;
            d->overlap = 0; /* read below, in slice order */
            on_ready(d, lo, hi - lo);
            d->overlap = ov;
        }
        hi = lo;
    }
    for (size_t i = d->n_started; i < d->n_sl && d->err == NMT_OK; i++) {
        if (d->sl_ev[i] != NULL) { /* its read is queued: wait for it */
            cl_event ev = (cl_event)d->sl_ev[i];
            if (clWaitForEvents(1, &ev) != CL_SUCCESS) d->err = NMT_ERR_OPENCL;
            clReleaseEvent(ev);
            d->sl_ev[i] = NULL;
        } else {
            nmt_status s = ntm_grads_read(m, d->sl_off[i], d->sl_n[i], d->host + d->sl_off[i]);
            if (s != NMT_OK) d->err = s;
        }
        if (d->err != NMT_OK) break;
        start_slice(d, i);
        d->n_started = i + 1;
        int done;
        MPI_Testall((int)d->n_started, (MPI_Request *)d->reqs, &done, MPI_STATUSES_IGNORE);
    }
    if (d->err == NMT_OK && d->reduced != d->n) d->err = NMT_ERR_INVALID_ARGUMENT; /* each element exactly once */
    if (d->err != NMT_OK) {
        fprintf(stderr, "\n" PROG ": rank %d of %d: step %llu: the gradient slices failed (%s; %zu of %zu reduced)\n",
                d->rank, d->size, (unsigned long long)step, nmt_status_str(d->err), d->reduced, d->n);
        return d->err;
    }
    MPI_Request *reqs = (MPI_Request *)d->reqs;
    int err = MPI_Iallreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &reqs[d->n_sl]);
    if (err != MPI_SUCCESS) mpi_died(d, err, what);
    double t1 = now_s();
    wait_all(d, (int)d->n_sl + 1, reqs, what, step, d->timeout_s);
    double t2 = now_s();
    nmt_status s = ntm_grads_write(m, 0, d->n, d->host);
    d->t_read += t1 - t0;
    d->t_wait += t2 - t1;
    d->t_write += now_s() - t2;
    d->slices += d->n_sl;
    d->model = NULL;
    return s;
}

int train_dist_fail(train_dist *d, int rc) {
    if (!d->mpi || d->size < 2) return rc;
    fprintf(stderr, "\n" PROG ": rank %d of %d failed (the reason is above): stopping the job\n", d->rank, d->size);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, rc ? rc : 1);
    return rc;
}

void train_dist_finish(train_dist *d) {
    for (size_t i = 0; i < d->n_sl; i++)
        if (d->sl_ev[i] != NULL) clReleaseEvent((cl_event)d->sl_ev[i]);
    free(d->host);
    free(d->reqs);
    free(d->mark);
    free(d->sl_off);
    free(d->sl_n);
    free(d->sl_ev);
    const int mpi = d->mpi;
    memset(d, 0, sizeof *d);
    if (mpi) MPI_Finalize();
}

#else /* !NMT_WITH_MPI: one process */

int train_dist_init(train_dist *d, int *argc, char ***argv, double timeout_s, double bucket_mb, int overlap) {
    (void)overlap;
    (void)argc;
    (void)argv;
    (void)bucket_mb;
    memset(d, 0, sizeof *d);
    d->size = 1;
    d->timeout_s = timeout_s;
    if (launched_by_mpi()) {
        /* several copies of one run would write the same files */
        fprintf(stderr, PROG ": started by an MPI launcher, but this build has no MPI (NMT_WITH_MPI off): "
                        "rebuild with libopenmpi-dev installed, or run it without mpirun\n");
        return 1;
    }
    return 0;
}

int train_dist_bcast_int(train_dist *d, int v, const char *what) {
    (void)d;
    (void)what;
    return v;
}

int train_dist_max_int(train_dist *d, int v, const char *what, int start) {
    (void)d;
    (void)what;
    (void)start;
    return v;
}

nmt_status train_dist_step_begin(train_dist *d, ntm_model *m, uint64_t step) {
    (void)d;
    (void)m;
    (void)step;
    return NMT_OK;
}

void train_dist_hook(train_dist *d, nmt_train_step_opts *so) {
    (void)d;
    (void)so;
}

nmt_status train_dist_allreduce(train_dist *d, ntm_model *m, double sums[2], uint64_t step) {
    (void)d;
    (void)m;
    (void)sums;
    (void)step;
    return NMT_OK;
}

int train_dist_fail(train_dist *d, int rc) {
    (void)d;
    return rc;
}

void train_dist_finish(train_dist *d) { (void)d; }

#endif
