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
#endif

#define PROG TRAIN_PROG

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

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

int train_dist_init(train_dist *d, int *argc, char ***argv, double timeout_s, double bucket_mb) {
    memset(d, 0, sizeof *d);
    d->size = 1;
    d->timeout_s = timeout_s;
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

nmt_status train_dist_allreduce(train_dist *d, ntm_model *m, double sums[2], uint64_t step) {
    if (!d->mpi) return NMT_OK;
    const size_t n = ntm_n_params(m), nb = (n + d->bucket - 1) / d->bucket;
    if (d->host == NULL || d->n != n) {
        free(d->host);
        free(d->reqs);
        d->host = malloc(n * sizeof(float));
        d->reqs = malloc((nb + 1) * sizeof(MPI_Request));
        d->n = n;
        if (d->host == NULL || d->reqs == NULL) return NMT_ERR_IO; /* host memory, as param_store.c */
    }
    MPI_Request *reqs = (MPI_Request *)d->reqs;
    const char *what = "the gradient all-reduce";
    double t0 = now_s();
    int err = MPI_Iallreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &reqs[0]);
    if (err != MPI_SUCCESS) mpi_died(d, err, what);
    /* last bucket first (the backward's order: output layers first); each
     * started before the next is read back, and progressed meanwhile */
    for (size_t k = 0; k < nb; k++) {
        const size_t b = nb - 1 - k, off = b * d->bucket, cnt = (b + 1 == nb) ? n - off : d->bucket;
        nmt_status s = ntm_grads_read(m, off, cnt, d->host + off);
        if (s != NMT_OK) return s;
        err = MPI_Iallreduce(MPI_IN_PLACE, d->host + off, (int)cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &reqs[k + 1]);
        if (err != MPI_SUCCESS) mpi_died(d, err, what);
        int done;
        MPI_Testall((int)k + 2, reqs, &done, MPI_STATUSES_IGNORE);
    }
    double t1 = now_s();
    wait_all(d, (int)nb + 1, reqs, what, step, d->timeout_s);
    double t2 = now_s();
    nmt_status s = ntm_grads_write(m, 0, n, d->host);
    d->t_read += t1 - t0;
    d->t_wait += t2 - t1;
    d->t_write += now_s() - t2;
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
    free(d->host);
    free(d->reqs);
    d->host = NULL;
    d->reqs = NULL;
    if (d->mpi) MPI_Finalize();
    d->mpi = 0;
}

#else /* !NMT_WITH_MPI: one process */

int train_dist_init(train_dist *d, int *argc, char ***argv, double timeout_s, double bucket_mb) {
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
