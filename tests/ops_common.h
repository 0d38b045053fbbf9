/* SPDX-License-Identifier: MIT */
/* ops_common.h — the fixture and helpers shared by the op tests:
 *
 *   kernels_test.c, kernels_gemm_test.c, kernels_attn_test.c
 *       the forward ops of runtime/ops/ops.h against the naive references of
 *       ref_ops.c;
 *   grad_test.c, grad_attn_test.c, grad_exact_test.c
 *       the training ops of train/ops/ops_train.h against finite differences
 *       or exact double references.
 *
 *   fixture   env: the test device, its forward ops and (grad tests) its
 *             training ops, opened by a cmocka group setup; a second env
 *             on a CLBlast device for the CLBlast cases.
 *   buffers   B(m, off) views, NONE, download().
 *   kernels   host_block() inputs surrounded by NaN, check_block() results
 *             close inside the output block and bitwise unchanged outside.
 *   grad      widen(), nan_f32() and fd_check() (central differences). */
#ifndef NMT_OPS_COMMON_H
#define NMT_OPS_COMMON_H

#include "test_util.h"

#include "ops_internal.h"
#include "ops_train.h"

/* ---- fixture -------------------------------------------------------------- */

typedef struct env {
    nmt_device *dev;
    void *mem;
    nmt_ops ops;
    nmt_train_ops t;  /* built by grad_setup only (zero otherwise) */
} env;

/* Group setups: open the test device and nmt_ops_init its forward ops;
 * kernels_setup then enables the int8 and NN GEMM kernels, grad_setup
 * builds the training ops.  -1 (message on stderr) on failure. */
int kernels_setup(void **state);
int grad_setup(void **state);
/* Releases what either setup built. */
int ops_teardown(void **state);

/* A second env on a test device opened with the CLBlast GEMM provider: its
 * forward ops and (train) its training ops, each checked to use CLBlast;
 * skips the calling test when the library is built without CLBlast.
 * close_env releases it. */
void open_clblast_env(env *ce, int train);
void close_env(env *e);

/* ---- reduction paths (issue 23, runtime/device/device_paths.c) ------------------------- */

/* Fails unless e->ops use the subgroup reductions exactly when the device
 * reports subgroups and dev->sg_mode is not NMT_SG_OFF (a device that
 * offers them without the path taken is a failure, not a skip), layernorm
 * too unless on a CPU in NMT_SG_AUTO, with the define in those programs'
 * options, norm_wg to match and a subgroup size; prints the path. */
void check_reduce_path(env *e);

/* body(e) again with e->ops replaced by ops built in subgroup mode `mode`
 * (NMT_SG_OFF: the portable kernels; NMT_SG_ALL: layernorm's subgroup
 * kernel on CPUs too; topk: nmt_ops_enable_topk as well), checked by
 * check_reduce_path, then the fixture's ops back.  Nothing to run (0) on a
 * device without subgroups (PoCL: the fixture's ops are the portable ones)
 * or when NMT_EDGE_NO_SUBGROUPS set the mode; 1 when body ran. */
int with_ops_mode(env *e, int mode, int topk, void (*body)(env *e));

/* ---- buffers -------------------------------------------------------------- */

nmt_buf B(cl_mem m, size_t off);
extern const nmt_buf NONE;

/* The first n floats of m in a malloc'd array (free() it). */
float *download(env *e, cl_mem m, size_t n);

/* ---- kernels*_test.c ------------------------------------------------------ */

#define TOL 1e-5

/* n random int8 values in [-127, 127] (free() it). */
int8_t *random_i8(nmt_test_rng *r, size_t n);

/* An nmt_ops on the test device with the int8 x int8 kernels of every
 * class in variant v (NMT_I8_*; the device must have it). */
void open_i8_ops(env *e, nmt_ops *ops, int v);

/* Host array of `total` floats: NaN everywhere, then a rows x cols block at
 * `off` (stride ld) of uniform random values in [lo, hi). */
float *host_block(nmt_test_rng *r, size_t total, size_t off, uint32_t rows, uint32_t cols, uint64_t ld, float lo,
                  float hi);

/* got vs want: close (normalised error <= tol) inside the block, bitwise
 * identical outside it. */
void check_block(const float *got, const float *want, size_t total, size_t off, uint32_t rows, uint32_t cols,
                 uint64_t ld, double tol, const char *what);

/* ---- grad*_test.c --------------------------------------------------------- */

#define FD_H 1e-3
#define FD_TOL 1e-4  /* fp32 kernel vs O(h^2) double FD (measured: ~1e-7) */
#define EXACT_TOL 1e-5

/* malloc'd double copy of x[0..n) (fails the test when out of memory). */
double *widen(const float *x, size_t n);
/* n floats, all NaN (free() it). */
float *nan_f32(size_t n);

/* A differentiable forward: L(ctx) in double, reading its inputs from
 * double arrays the checker perturbs.  *skip set by the loss means "this
 * perturbation crossed a kink (ReLU): do not compare this element". */
typedef double (*loss_fn)(void *ctx, int *skip);

/* Central differences of L with respect to every x[i] (i < n) compared with
 * grad[i] (minus base[i] when base is non-NULL: accumulated outputs) by the
 * normalised error, tolerance FD_TOL; NMT_TEST_VERBOSE=1 prints the error. */
void fd_check(const char *what, loss_fn L, void *ctx, double *x, size_t n, const float *grad, const float *base);

#endif
