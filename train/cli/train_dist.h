/* SPDX-License-Identifier: MIT */
/* train_dist.h — data-parallel training over MPI for `nmt-edge-train`
 * (issue 18; docs/TRAINING.md "Several devices and machines").
 *
 * Started by an MPI launcher (mpirun, mpiexec, srun), the trainer is one
 * rank of N, each driving one OpenCL device.  A step's accumulation group
 * of --accum K micro-batches is split deterministically: every rank walks
 * the same batch sequence and rank r runs micro-batches r, r+N, r+2N, ...
 * (dropout masks keyed by (seed, step, micro-batch), as in one process);
 * the summed gradients and loss sums are then all-reduced in fp32 (buckets
 * of at most --bucket-mb, each a non-blocking MPI_Iallreduce; during the
 * rank's last micro-batch the family's backward reports each layer's
 * gradients as final, and their buckets are read back and all-reduced
 * while the backward of the layers below runs) and every rank applies the
 * same Adam step.  So N ranks with --accum K
 * train as one process with --accum K; the result differs only by the
 * order of the fp32 sums.
 *
 * Without NMT_WITH_MPI, or when no launcher started the process, every
 * call here is that of a single rank (rank 0 of 1) and MPI is never
 * initialised.  Every collective waits at most --dist-timeout seconds;
 * then, and when a rank fails, the whole job is stopped (MPI_Abort) with a
 * message naming the rank and the cause. */
#ifndef NMT_TRAIN_DIST_H
#define NMT_TRAIN_DIST_H

#include <stddef.h>
#include <stdint.h>

#include "train_model.h"

typedef struct train_dist {
    int rank, size, local_rank; /* 0, 1, 0 for a single process */
    int mpi;                    /* MPI was initialised here (finalise at the end) */
    double timeout_s;           /* longest wait in a collective */
    size_t bucket;              /* floats per all-reduce bucket */
    int overlap;                /* read slices back as the backward reports them (else after it) */
    float *host;                /* [n]: the gradients on their way (owned) */
    void *reqs;                 /* MPI requests, one per slice + 1 (owned) */
    size_t n;                   /* parameters */
    /* the step in progress (train_dist_step_begin .. train_dist_allreduce) */
    ntm_model *model;           /* NULL outside a step */
    uint64_t step;
    unsigned char *mark;        /* [n]: 1 once the element's slice is planned (owned) */
    size_t *sl_off, *sl_n;      /* the step's slices, in all-reduce order (owned) */
    void **sl_ev;               /* their queued read-backs (cl_event; NULL: none pending) */
    size_t n_sl, cap_sl, n_started;
    size_t n_early;             /* slices whose all-reduce started during the backward (since the last log) */
    size_t n_queued;            /* slices whose read-back was queued during the backward (since the last log):
                                 * fixed by the model and --bucket-mb, while n_early depends on timing */
    size_t slices;              /* slices all-reduced (since the last log) */
    size_t reduced;             /* elements all-reduced this step: n, each exactly once */
    nmt_status err;
    /* seconds accumulated since the last train_dist_times call */
    double t_compute; /* forward/backward of this rank's micro-batches (with overlap: and the
                         enqueued read-backs and all-reduces of the layers reported so far) */
    double t_read;    /* after the backward: the read-backs not yet done (the slices it did not
                         report; all of them without overlap), the first all-reduces running */
    double t_wait;    /* waiting for the all-reduces after the last read-back */
    double t_write;   /* host to device */
} train_dist;

/* MPI_Init when an MPI launcher started the process (Open MPI's
 * OMPI_COMM_WORLD_SIZE, PMI_SIZE of MPICH / Slurm PMI2, PMIX_RANK) and the
 * build has MPI; else a single rank.  0, or 1 after a message. */
int train_dist_init(train_dist *d, int *argc, char ***argv, double timeout_s, double bucket_mb, int overlap);

/* The device spec of this rank when --device and $NMT_EDGE_DEVICE say
 * nothing and there are several ranks: GPU number local_rank modulo the
 * GPUs found, as "P:D" in buf; NULL (the default device) otherwise. */
const char *train_dist_device(const train_dist *d, const char *spec, char *buf, size_t cap);

/* Rank 0's value of v on every rank (v on rank 0, the broadcast elsewhere);
 * for the start: waits up to max(timeout, 3600 s). */
int train_dist_bcast_int(train_dist *d, int v, const char *what);
/* The largest v over the ranks; `start`: waits as train_dist_bcast_int,
 * else up to the timeout. */
int train_dist_max_int(train_dist *d, int v, const char *what, int start);

/* A step's gradient all-reduce, in three calls (each nothing with one rank
 * outside MPI): train_dist_step_begin before the step's first
 * micro-batch; train_dist_hook into the step options of this rank's last
 * micro-batch (its backward then reports each layer's gradients as final:
 * with overlap each such slice, cut into buckets, is read back without
 * waiting and its MPI_Iallreduce started once the read is done, while the
 * backward of the earlier layers runs); train_dist_allreduce after it: the
 * slices not reported, then the waits.  The slices, their buckets and their
 * order are the same with and without overlap, so both sum the same fp32
 * values by the same MPI calls.  Every element is all-reduced exactly once
 * (checked: NMT_ERR_INVALID_ARGUMENT otherwise). */
nmt_status train_dist_step_begin(train_dist *d, ntm_model *m, uint64_t step);
void train_dist_hook(train_dist *d, nmt_train_step_opts *so);
/* Sums, over the ranks, of the model's gradients and of sums[0..1] (the
 * step's loss and NLL sums), in place. */
nmt_status train_dist_allreduce(train_dist *d, ntm_model *m, double sums[2], uint64_t step);

/* Stop every rank after this one failed (the reason already printed):
 * names the rank, then MPI_Abort(rc).  A single process just returns rc. */
int train_dist_fail(train_dist *d, int rc);

/* Releases the buffers; MPI_Finalize when it was initialised here. */
void train_dist_finish(train_dist *d);

#endif
