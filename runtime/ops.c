/* ops.c — the kernel layer (ops.h): builds the programs of cl/, creates the
 * kernels once, and turns each nmt_op_* call into argument setting plus
 * non-blocking enqueues on the device's in-order queue.
 *
 * Launch geometry: every NDRange is padded up to a multiple of the local
 * size (PoCL and OpenCL 1.2 devices reject non-uniform work-groups) and the
 * kernels discard surplus work-items.  Per-row reductions (layernorm,
 * log_softmax) run one work-group of ops->reduce_wg work-items per row.
 *
 * Index limits: the GEMM kernels use 32-bit element indices, so a GEMM whose
 * operands reach past 2^32 - 1 elements of their buffer is refused with
 * NMT_ERR_UNSUPPORTED; the other kernels address with 64-bit offsets. */
#include "ops.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#if defined(NMT_HAVE_CLBLAST) && NMT_HAVE_CLBLAST
#include <clblast_c.h>
#define NMT_OPS_CLBLAST 1
#else
#define NMT_OPS_CLBLAST 0
#endif

#define NMT_OPS_GEMM_TM 4
#define NMT_OPS_GEMM_TN 4
#define NMT_OPS_GEMM_ROW_TN 8    /* 1 x 8 tiles when M < NMT_OPS_GEMM_TM */
#define NMT_OPS_REDUCE_WG_GPU 256
#define NMT_OPS_REDUCE_WG_CPU 64
#define NMT_OPS_WG_BUDGET 64     /* work-items per group for elementwise kernels */
#define NMT_OPS_POS_LIMIT (1u << 30)  /* attention positions are int in the kernels */

enum { P_GEMM, P_GEMM_ROW, P_ATTENTION, P_NORM, P_ELEMENTWISE, P_COUNT };

static const char *const program_names[P_COUNT] = {"gemm", "gemm", "attention", "norm", "elementwise"};

typedef struct kernel_def {
    size_t offset;     /* of the cl_kernel in nmt_ops */
    int program;
    const char *name;
    int reduction;     /* launched with reduce_wg work-items per group */
} kernel_def;

static const kernel_def kernel_defs[] = {
    {offsetof(nmt_ops, k_gemm_nt), P_GEMM, "gemm_nt", 0},
    {offsetof(nmt_ops, k_gemm_nn), P_GEMM, "gemm_nn", 0},
    {offsetof(nmt_ops, k_bias_act), P_GEMM, "bias_act", 0},
    {offsetof(nmt_ops, k_gemm_nt_row), P_GEMM_ROW, "gemm_nt", 0},
    {offsetof(nmt_ops, k_gemm_nn_row), P_GEMM_ROW, "gemm_nn", 0},
    {offsetof(nmt_ops, k_embed), P_ELEMENTWISE, "embed", 0},
    {offsetof(nmt_ops, k_layernorm), P_NORM, "layernorm", 1},
    {offsetof(nmt_ops, k_add), P_ELEMENTWISE, "add", 0},
    {offsetof(nmt_ops, k_relu), P_ELEMENTWISE, "relu", 0},
    {offsetof(nmt_ops, k_gate_accum), P_ELEMENTWISE, "gate_accum", 0},
    {offsetof(nmt_ops, k_copy_rows), P_ELEMENTWISE, "copy_rows", 0},
    {offsetof(nmt_ops, k_gather_rows), P_ELEMENTWISE, "gather_rows", 0},
    {offsetof(nmt_ops, k_log_softmax), P_ELEMENTWISE, "log_softmax", 1},
    {offsetof(nmt_ops, k_attn_scores), P_ATTENTION, "attn_scores", 0},
    {offsetof(nmt_ops, k_attn_stats), P_ATTENTION, "attn_stats", 0},
    {offsetof(nmt_ops, k_attn_apply), P_ATTENTION, "attn_apply", 0},
};

static cl_kernel *kernel_slot(nmt_ops *ops, const kernel_def *d) {
    return (cl_kernel *)(void *)((char *)ops + d->offset);
}

static size_t pow2_floor(size_t x) {
    size_t p = 1;
    while (p <= x / 2) p *= 2;
    return p;
}

static size_t pow2_ceil(size_t x) {
    size_t p = 1;
    while (p < x) p *= 2;
    return p;
}

/* ------------------------------------------------------------------------ */
/* Init / release                                                           */
/* ------------------------------------------------------------------------ */

void nmt_ops_release(nmt_ops *ops) {
    if (ops == NULL) return;
    for (size_t i = 0; i < NMT_ARRAY_LEN(kernel_defs); i++) {
        cl_kernel *k = kernel_slot(ops, &kernel_defs[i]);
        if (*k) clReleaseKernel(*k);
        *k = NULL;
    }
    /* Programs belong to the device (built once, shared by sessions). */
    memset(ops, 0, sizeof *ops);
}

nmt_status nmt_ops_init(nmt_ops *ops, nmt_device *dev) {
    if (ops == NULL || dev == NULL) return NMT_ERR_INVALID_ARGUMENT;
    memset(ops, 0, sizeof *ops);
    ops->dev = dev;
    ops->gemm = dev->info.gemm == NMT_GEMM_CLBLAST ? NMT_GEMM_CLBLAST : NMT_GEMM_OWN;
    if (ops->gemm == NMT_GEMM_CLBLAST && !NMT_OPS_CLBLAST) return NMT_ERR_UNSUPPORTED;
    ops->gemm_tm = NMT_OPS_GEMM_TM;
    ops->gemm_tn = NMT_OPS_GEMM_TN;
    ops->gemm_row_tn = NMT_OPS_GEMM_ROW_TN;

    size_t dev_wg = dev->info.max_work_group_size ? dev->info.max_work_group_size : 1;
    size_t reduce_cap = dev->info.is_gpu ? NMT_OPS_REDUCE_WG_GPU : NMT_OPS_REDUCE_WG_CPU;
    reduce_cap = pow2_floor(NMT_MIN(reduce_cap, dev_wg));

    char opts[P_COUNT][96];
    snprintf(opts[P_GEMM], sizeof opts[P_GEMM], "-DGEMM_TM=%u -DGEMM_TN=%u", (unsigned)ops->gemm_tm,
             (unsigned)ops->gemm_tn);
    snprintf(opts[P_GEMM_ROW], sizeof opts[P_GEMM_ROW], "-DGEMM_TM=1 -DGEMM_TN=%u", (unsigned)ops->gemm_row_tn);
    opts[P_ATTENTION][0] = '\0';
    snprintf(opts[P_NORM], sizeof opts[P_NORM], "-DREDUCE_WG=%zu", reduce_cap);
    snprintf(opts[P_ELEMENTWISE], sizeof opts[P_ELEMENTWISE], "-DREDUCE_WG=%zu", reduce_cap);

    cl_program progs[P_COUNT];
    for (int p = 0; p < P_COUNT; p++) {
        nmt_status s = nmt_device_program(dev, program_names[p], opts[p], &progs[p]);
        if (s != NMT_OK) {
            nmt_ops_release(ops);
            return s;
        }
    }

    size_t reduce_wg = reduce_cap, wg_max = NMT_MIN((size_t)NMT_OPS_WG_BUDGET, dev_wg);
    for (size_t i = 0; i < NMT_ARRAY_LEN(kernel_defs); i++) {
        const kernel_def *d = &kernel_defs[i];
        nmt_status s = nmt_device_kernel(dev, progs[d->program], d->name, kernel_slot(ops, d));
        if (s != NMT_OK) {
            nmt_ops_release(ops);
            return s;
        }
        size_t kwg = 0;
        cl_int e = clGetKernelWorkGroupInfo(*kernel_slot(ops, d), dev->device, CL_KERNEL_WORK_GROUP_SIZE,
                                            sizeof kwg, &kwg, NULL);
        if (e != CL_SUCCESS) {
            s = nmt_cl_fail(dev, e, "clGetKernelWorkGroupInfo");
            nmt_ops_release(ops);
            return s;
        }
        if (kwg == 0) kwg = 1;
        if (d->reduction) reduce_wg = NMT_MIN(reduce_wg, pow2_floor(kwg));
        else wg_max = NMT_MIN(wg_max, kwg);
    }
    ops->reduce_wg = reduce_wg;
    ops->wg_max = wg_max;
    nmt_log(&dev->log, NMT_LOG_DEBUG, "ops: gemm=%s tile %ux%u (1x%u below %u rows), reduce_wg=%zu, wg_max=%zu",
            ops->gemm == NMT_GEMM_CLBLAST ? "clblast" : "own", (unsigned)ops->gemm_tm, (unsigned)ops->gemm_tn,
            (unsigned)ops->gemm_row_tn, (unsigned)ops->gemm_tm, ops->reduce_wg, ops->wg_max);
    return NMT_OK;
}

/* ------------------------------------------------------------------------ */
/* Argument setting and launching                                           */
/* ------------------------------------------------------------------------ */

typedef struct args {
    cl_kernel k;
    cl_uint i;     /* next argument index */
    cl_int err;    /* first failure */
    cl_uint err_i; /* its index */
} args;

static args args_begin(cl_kernel k) {
    args a = {k, 0, CL_SUCCESS, 0};
    return a;
}

static void arg_raw(args *a, size_t size, const void *v) {
    if (a->err == CL_SUCCESS) {
        cl_int e = clSetKernelArg(a->k, a->i, size, v);
        if (e != CL_SUCCESS) {
            a->err = e;
            a->err_i = a->i;
        }
    }
    a->i++;
}

static void arg_mem(args *a, cl_mem m) { arg_raw(a, sizeof m, &m); }
static void arg_u32(args *a, uint32_t v) {
    cl_uint t = (cl_uint)v;
    arg_raw(a, sizeof t, &t);
}
static void arg_i32(args *a, int32_t v) {
    cl_int t = (cl_int)v;
    arg_raw(a, sizeof t, &t);
}
static void arg_u64(args *a, uint64_t v) {
    cl_ulong t = (cl_ulong)v;
    arg_raw(a, sizeof t, &t);
}
static void arg_f32(args *a, float v) {
    cl_float t = v;
    arg_raw(a, sizeof t, &t);
}

static nmt_status args_end(nmt_ops *ops, const args *a, const char *kernel) {
    if (a->err == CL_SUCCESS) return NMT_OK;
    char what[80];
    snprintf(what, sizeof what, "clSetKernelArg(%s, %u)", kernel, (unsigned)a->err_i);
    return nmt_cl_fail(ops->dev, a->err, what);
}

/* Enqueue over n[0..dims) work-items: local sizes fill dimension 0 first
 * (coalesced), global sizes padded to multiples of them.  Any n[d] == 0 is
 * a no-op. */
static nmt_status launch(nmt_ops *ops, cl_kernel k, cl_uint dims, const size_t *n, const char *kernel) {
    size_t gws[3], lws[3];
    size_t budget = pow2_floor(ops->wg_max ? ops->wg_max : 1);  /* powers of two throughout */
    for (cl_uint d = 0; d < dims; d++) {
        if (n[d] == 0) return NMT_OK;
        lws[d] = NMT_MIN(pow2_ceil(n[d]), budget);
        budget /= lws[d];
        gws[d] = (n[d] + lws[d] - 1) / lws[d] * lws[d];
    }
    cl_int e = clEnqueueNDRangeKernel(ops->dev->queue, k, dims, NULL, gws, lws, 0, NULL, NULL);
    if (e != CL_SUCCESS) {
        char what[80];
        snprintf(what, sizeof what, "clEnqueueNDRangeKernel(%s)", kernel);
        return nmt_cl_fail(ops->dev, e, what);
    }
    return NMT_OK;
}

/* Enqueue with explicit local sizes; n[] is padded up to multiples of them. */
static nmt_status launch_local(nmt_ops *ops, cl_kernel k, cl_uint dims, const size_t *n, const size_t *lws,
                               const char *kernel) {
    size_t gws[3];
    for (cl_uint d = 0; d < dims; d++) {
        if (n[d] == 0) return NMT_OK;
        gws[d] = (n[d] + lws[d] - 1) / lws[d] * lws[d];
    }
    cl_int e = clEnqueueNDRangeKernel(ops->dev->queue, k, dims, NULL, gws, lws, 0, NULL, NULL);
    if (e != CL_SUCCESS) {
        char what[80];
        snprintf(what, sizeof what, "clEnqueueNDRangeKernel(%s)", kernel);
        return nmt_cl_fail(ops->dev, e, what);
    }
    return NMT_OK;
}

/* One work-group of ops->reduce_wg work-items per row. */
static nmt_status launch_rows(nmt_ops *ops, cl_kernel k, size_t rows, const char *kernel) {
    if (rows == 0) return NMT_OK;
    size_t lws = ops->reduce_wg, gws = rows * lws;
    cl_int e = clEnqueueNDRangeKernel(ops->dev->queue, k, 1, NULL, &gws, &lws, 0, NULL, NULL);
    if (e != CL_SUCCESS) {
        char what[80];
        snprintf(what, sizeof what, "clEnqueueNDRangeKernel(%s)", kernel);
        return nmt_cl_fail(ops->dev, e, what);
    }
    return NMT_OK;
}

/* Last element index + 1 of a rows x cols matrix at `off` with stride ld,
 * as 64-bit (inputs are at most 2^32 each, so no overflow for off < 2^63). */
static uint64_t extent(size_t off, uint64_t rows, uint64_t ld, uint64_t cols) {
    return (uint64_t)off + (rows - 1) * ld + cols;
}

static int ops_ok(const nmt_ops *ops) { return ops != NULL && ops->dev != NULL && ops->k_add != NULL; }

/* ------------------------------------------------------------------------ */
/* GEMM                                                                     */
/* ------------------------------------------------------------------------ */

nmt_status nmt_op_gemm(nmt_ops *ops, int trans_b, uint32_t M, uint32_t N, uint32_t K, float alpha, nmt_buf A,
                       uint32_t lda, nmt_buf B, uint32_t ldb, float beta, nmt_buf C, uint32_t ldc, nmt_buf bias,
                       int relu) {
    if (!ops_ok(ops)) return NMT_ERR_INVALID_ARGUMENT;
    if (M == 0 || N == 0) return NMT_OK;
    if (A.mem == NULL || B.mem == NULL || C.mem == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (beta != 0.0f && beta != 1.0f) return NMT_ERR_INVALID_ARGUMENT;
    if (lda < K || ldb < (trans_b ? K : N) || ldc < N) return NMT_ERR_INVALID_ARGUMENT;
    const uint64_t lim = (uint64_t)UINT32_MAX;
    if (extent(A.off, M, lda, K) > lim || extent(C.off, M, ldc, N) > lim ||
        (trans_b ? extent(B.off, N, ldb, K) : extent(B.off, K ? K : 1, ldb, N)) > lim ||
        (bias.mem && (uint64_t)bias.off + N > lim)) {
        nmt_log(&ops->dev->log, NMT_LOG_ERROR, "gemm operands beyond 32-bit element indexing");
        return NMT_ERR_UNSUPPORTED;
    }
    const int flags = (bias.mem ? 1 : 0) | (relu ? 2 : 0);

#if NMT_OPS_CLBLAST
    if (ops->gemm == NMT_GEMM_CLBLAST && K > 0) {
        cl_command_queue q = ops->dev->queue;
        CLBlastStatusCode st = CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo,
                                            trans_b ? CLBlastTransposeYes : CLBlastTransposeNo, M, N, K, alpha,
                                            A.mem, A.off, lda, B.mem, B.off, ldb, beta, C.mem, C.off, ldc, &q, NULL);
        if (st != CLBlastSuccess) return nmt_cl_fail(ops->dev, (cl_int)st, "CLBlastSgemm");
        if (flags == 0) return NMT_OK;
        args a = args_begin(ops->k_bias_act);
        arg_u32(&a, M);
        arg_u32(&a, N);
        arg_mem(&a, C.mem);
        arg_u32(&a, (uint32_t)C.off);
        arg_u32(&a, ldc);
        arg_mem(&a, bias.mem ? bias.mem : C.mem);
        arg_u32(&a, (uint32_t)bias.off);
        arg_i32(&a, flags);
        NMT_TRY(args_end(ops, &a, "bias_act"));
        const size_t n[2] = {N, M};
        return launch(ops, ops->k_bias_act, 2, n, "bias_act");
    }
#endif

    /* Fewer rows than a tile: 1-row tiles instead of clamped, recomputed rows. */
    const int row = M < ops->gemm_tm;
    cl_kernel k = trans_b ? (row ? ops->k_gemm_nt_row : ops->k_gemm_nt) : (row ? ops->k_gemm_nn_row : ops->k_gemm_nn);
    const char *kname = trans_b ? "gemm_nt" : "gemm_nn";
    const uint32_t tm = row ? 1 : ops->gemm_tm, tn = row ? ops->gemm_row_tn : ops->gemm_tn;
    args a = args_begin(k);
    arg_u32(&a, M);
    arg_u32(&a, N);
    arg_u32(&a, K);
    arg_f32(&a, alpha);
    arg_mem(&a, A.mem);
    arg_u32(&a, (uint32_t)A.off);
    arg_u32(&a, lda);
    arg_mem(&a, B.mem);
    arg_u32(&a, (uint32_t)B.off);
    arg_u32(&a, ldb);
    arg_f32(&a, beta);
    arg_mem(&a, C.mem);
    arg_u32(&a, (uint32_t)C.off);
    arg_u32(&a, ldc);
    arg_mem(&a, bias.mem ? bias.mem : C.mem);  /* never dereferenced without the flag */
    arg_u32(&a, bias.mem ? (uint32_t)bias.off : 0u);
    arg_i32(&a, flags);
    NMT_TRY(args_end(ops, &a, kname));
    const size_t n[2] = {(N + tn - 1) / tn, (M + tm - 1) / tm};
    return launch(ops, k, 2, n, kname);
}

/* ------------------------------------------------------------------------ */
/* Elementwise and row ops                                                  */
/* ------------------------------------------------------------------------ */

nmt_status nmt_op_embed(nmt_ops *ops, nmt_buf tok, uint32_t rows, uint32_t seq_len, uint32_t pos0, nmt_buf E,
                        uint32_t d, float scale, nmt_buf out) {
    if (!ops_ok(ops)) return NMT_ERR_INVALID_ARGUMENT;
    if (rows == 0 || d == 0) return NMT_OK;
    if (tok.mem == NULL || E.mem == NULL || out.mem == NULL || seq_len == 0) return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(ops->k_embed);
    arg_mem(&a, tok.mem);
    arg_u64(&a, tok.off);
    arg_u32(&a, rows);
    arg_u32(&a, seq_len);
    arg_u32(&a, pos0);
    arg_mem(&a, E.mem);
    arg_u64(&a, E.off);
    arg_u32(&a, d);
    arg_f32(&a, scale);
    arg_mem(&a, out.mem);
    arg_u64(&a, out.off);
    NMT_TRY(args_end(ops, &a, "embed"));
    const size_t n[2] = {d, rows};
    return launch(ops, ops->k_embed, 2, n, "embed");
}

nmt_status nmt_op_layernorm(nmt_ops *ops, nmt_buf x, nmt_buf res, nmt_buf out, uint32_t rows, uint32_t d,
                            nmt_buf gamma, nmt_buf beta, float eps) {
    if (!ops_ok(ops)) return NMT_ERR_INVALID_ARGUMENT;
    if (rows == 0 || d == 0) return NMT_OK;
    if (x.mem == NULL || out.mem == NULL || gamma.mem == NULL || beta.mem == NULL) return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(ops->k_layernorm);
    arg_mem(&a, x.mem);
    arg_u64(&a, x.off);
    arg_mem(&a, res.mem ? res.mem : x.mem);
    arg_u64(&a, res.mem ? res.off : 0);
    arg_i32(&a, res.mem != NULL);
    arg_mem(&a, out.mem);
    arg_u64(&a, out.off);
    arg_u32(&a, d);
    arg_mem(&a, gamma.mem);
    arg_u64(&a, gamma.off);
    arg_mem(&a, beta.mem);
    arg_u64(&a, beta.off);
    arg_f32(&a, eps);
    NMT_TRY(args_end(ops, &a, "layernorm"));
    return launch_rows(ops, ops->k_layernorm, rows, "layernorm");
}

nmt_status nmt_op_add(nmt_ops *ops, nmt_buf dst, nmt_buf src, uint32_t n) {
    if (!ops_ok(ops)) return NMT_ERR_INVALID_ARGUMENT;
    if (n == 0) return NMT_OK;
    if (dst.mem == NULL || src.mem == NULL) return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(ops->k_add);
    arg_mem(&a, dst.mem);
    arg_u64(&a, dst.off);
    arg_mem(&a, src.mem);
    arg_u64(&a, src.off);
    arg_u32(&a, n);
    NMT_TRY(args_end(ops, &a, "add"));
    const size_t g[1] = {n};
    return launch(ops, ops->k_add, 1, g, "add");
}

nmt_status nmt_op_relu(nmt_ops *ops, nmt_buf x, uint32_t n) {
    if (!ops_ok(ops)) return NMT_ERR_INVALID_ARGUMENT;
    if (n == 0) return NMT_OK;
    if (x.mem == NULL) return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(ops->k_relu);
    arg_mem(&a, x.mem);
    arg_u64(&a, x.off);
    arg_u32(&a, n);
    NMT_TRY(args_end(ops, &a, "relu"));
    const size_t g[1] = {n};
    return launch(ops, ops->k_relu, 1, g, "relu");
}

nmt_status nmt_op_gate_accum(nmt_ops *ops, nmt_buf x, uint32_t ld_x, nmt_buf g, uint32_t ld_g, nmt_buf out,
                             uint32_t ld_out, uint32_t rows, uint32_t d, int accumulate) {
    if (!ops_ok(ops)) return NMT_ERR_INVALID_ARGUMENT;
    if (rows == 0 || d == 0) return NMT_OK;
    if (x.mem == NULL || g.mem == NULL || out.mem == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (ld_x < d || ld_g < d || ld_out < d) return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(ops->k_gate_accum);
    arg_mem(&a, x.mem);
    arg_u64(&a, x.off);
    arg_u32(&a, ld_x);
    arg_mem(&a, g.mem);
    arg_u64(&a, g.off);
    arg_u32(&a, ld_g);
    arg_mem(&a, out.mem);
    arg_u64(&a, out.off);
    arg_u32(&a, ld_out);
    arg_u32(&a, rows);
    arg_u32(&a, d);
    arg_i32(&a, accumulate ? 1 : 0);
    NMT_TRY(args_end(ops, &a, "gate_accum"));
    const size_t n[2] = {d, rows};
    return launch(ops, ops->k_gate_accum, 2, n, "gate_accum");
}

nmt_status nmt_op_copy_rows(nmt_ops *ops, nmt_buf src, uint32_t ld_src, nmt_buf dst, uint32_t ld_dst, uint32_t rows,
                            uint32_t cols) {
    if (!ops_ok(ops)) return NMT_ERR_INVALID_ARGUMENT;
    if (rows == 0 || cols == 0) return NMT_OK;
    if (src.mem == NULL || dst.mem == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (ld_src < cols || ld_dst < cols) return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(ops->k_copy_rows);
    arg_mem(&a, src.mem);
    arg_u64(&a, src.off);
    arg_u32(&a, ld_src);
    arg_mem(&a, dst.mem);
    arg_u64(&a, dst.off);
    arg_u32(&a, ld_dst);
    arg_u32(&a, rows);
    arg_u32(&a, cols);
    NMT_TRY(args_end(ops, &a, "copy_rows"));
    const size_t n[2] = {cols, rows};
    return launch(ops, ops->k_copy_rows, 2, n, "copy_rows");
}

nmt_status nmt_op_gather_rows(nmt_ops *ops, nmt_buf src, uint64_t ld_src, nmt_buf dst, uint64_t ld_dst, nmt_buf idx,
                              uint32_t rows, uint32_t cols) {
    if (!ops_ok(ops)) return NMT_ERR_INVALID_ARGUMENT;
    if (rows == 0 || cols == 0) return NMT_OK;
    if (src.mem == NULL || dst.mem == NULL || idx.mem == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (ld_src < cols || ld_dst < cols) return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(ops->k_gather_rows);
    arg_mem(&a, src.mem);
    arg_u64(&a, src.off);
    arg_u64(&a, ld_src);
    arg_mem(&a, dst.mem);
    arg_u64(&a, dst.off);
    arg_u64(&a, ld_dst);
    arg_mem(&a, idx.mem);
    arg_u64(&a, idx.off);
    arg_u32(&a, rows);
    arg_u32(&a, cols);
    NMT_TRY(args_end(ops, &a, "gather_rows"));
    const size_t n[2] = {cols, rows};
    return launch(ops, ops->k_gather_rows, 2, n, "gather_rows");
}

nmt_status nmt_op_log_softmax(nmt_ops *ops, nmt_buf x, uint32_t rows, uint32_t n, uint32_t ld) {
    if (!ops_ok(ops)) return NMT_ERR_INVALID_ARGUMENT;
    if (rows == 0 || n == 0) return NMT_OK;
    if (x.mem == NULL || ld < n) return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(ops->k_log_softmax);
    arg_mem(&a, x.mem);
    arg_u64(&a, x.off);
    arg_u32(&a, n);
    arg_u32(&a, ld);
    NMT_TRY(args_end(ops, &a, "log_softmax"));
    return launch_rows(ops, ops->k_log_softmax, rows, "log_softmax");
}

/* ------------------------------------------------------------------------ */
/* Attention                                                                */
/* ------------------------------------------------------------------------ */

/* Arguments shared by attn_stats and attn_apply after their own leading ones. */
static void attn_mask_args(args *a, const nmt_attn_args *p, int32_t kind, int32_t radius) {
    arg_mem(a, p->key_len.mem ? p->key_len.mem : p->scores.mem);
    arg_u64(a, p->key_len.mem ? p->key_len.off : 0);
    arg_i32(a, p->key_len.mem != NULL);
    arg_u32(a, p->key_len_const);
    arg_i32(a, p->causal ? 1 : 0);
    arg_i32(a, kind);
    arg_i32(a, radius);
}

nmt_status nmt_op_attention(nmt_ops *ops, const nmt_attn_args *p) {
    if (!ops_ok(ops) || p == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (p->group == 0 || p->n_branches == 0 || p->n_branches > NMT_MAX_BRANCHES) return NMT_ERR_INVALID_ARGUMENT;
    for (uint32_t b = 0; b < p->n_branches; b++)
        if ((unsigned)p->branches[b].kind > (unsigned)NMT_BRANCH_LOCAL) return NMT_ERR_INVALID_ARGUMENT;
    if (p->n_seq == 0 || p->lq == 0 || p->n_heads == 0 || p->d_head == 0) return NMT_OK;
    if (p->q.mem == NULL || p->k.mem == NULL || p->v.mem == NULL || p->out.mem == NULL || p->scores.mem == NULL ||
        p->stats.mem == NULL)
        return NMT_ERR_INVALID_ARGUMENT;
    const uint64_t width = (uint64_t)p->n_heads * p->d_head;
    if (p->q_ld < width || p->k_ld < width || p->v_ld < width || p->out_ld < width * p->n_branches)
        return NMT_ERR_INVALID_ARGUMENT;
    if ((uint64_t)p->q_pos0 + p->lq >= NMT_OPS_POS_LIMIT || p->lk_max >= NMT_OPS_POS_LIMIT ||
        (uint64_t)p->n_seq * p->n_heads > UINT32_MAX || (uint64_t)p->n_seq * p->lq > UINT32_MAX) {
        nmt_log(&ops->dev->log, NMT_LOG_ERROR, "attention sizes beyond the kernels' index range");
        return NMT_ERR_UNSUPPORTED;
    }
    const uint32_t rows_sh = p->n_seq * p->n_heads;
    const float scale = (float)(1.0 / sqrt((double)p->d_head));

    /* 1. scores, shared by every branch */
    args a = args_begin(ops->k_attn_scores);
    arg_u32(&a, p->n_seq);
    arg_u32(&a, p->lq);
    arg_u32(&a, p->q_pos0);
    arg_u32(&a, p->lk_max);
    arg_u32(&a, p->group);
    arg_u32(&a, p->n_heads);
    arg_u32(&a, p->d_head);
    arg_f32(&a, scale);
    arg_mem(&a, p->q.mem);
    arg_u64(&a, p->q.off);
    arg_u32(&a, p->q_ld);
    arg_mem(&a, p->k.mem);
    arg_u64(&a, p->k.off);
    arg_u32(&a, p->k_ld);
    arg_u64(&a, p->kv_seq_stride);
    arg_mem(&a, p->key_len.mem ? p->key_len.mem : p->scores.mem);
    arg_u64(&a, p->key_len.mem ? p->key_len.off : 0);
    arg_i32(&a, p->key_len.mem != NULL);
    arg_u32(&a, p->key_len_const);
    arg_i32(&a, p->causal ? 1 : 0);
    arg_mem(&a, p->scores.mem);
    arg_u64(&a, p->scores.off);
    NMT_TRY(args_end(ops, &a, "attn_scores"));
    const size_t n_scores[3] = {p->lk_max, p->lq, rows_sh};
    NMT_TRY(launch(ops, ops->k_attn_scores, 3, n_scores, "attn_scores"));

    /* 2./3. per branch: softmax statistics, then the weighted sum of V into
     * the branch's column block.  The in-order queue serialises the reuse
     * of `stats` between branches. */
    for (uint32_t b = 0; b < p->n_branches; b++) {
        const int32_t kind = (int32_t)p->branches[b].kind;
        const int32_t radius = (int32_t)NMT_MIN(p->branches[b].k, NMT_OPS_POS_LIMIT);

        a = args_begin(ops->k_attn_stats);
        arg_u32(&a, p->n_seq);
        arg_u32(&a, p->lq);
        arg_u32(&a, p->q_pos0);
        arg_u32(&a, p->lk_max);
        arg_u32(&a, p->group);
        arg_u32(&a, p->n_heads);
        attn_mask_args(&a, p, kind, radius);
        arg_mem(&a, p->scores.mem);
        arg_u64(&a, p->scores.off);
        arg_mem(&a, p->stats.mem);
        arg_u64(&a, p->stats.off);
        NMT_TRY(args_end(ops, &a, "attn_stats"));
        const size_t n_stats[2] = {p->lq, rows_sh};
        NMT_TRY(launch(ops, ops->k_attn_stats, 2, n_stats, "attn_stats"));

        a = args_begin(ops->k_attn_apply);
        arg_u32(&a, p->n_seq);
        arg_u32(&a, p->lq);
        arg_u32(&a, p->q_pos0);
        arg_u32(&a, p->lk_max);
        arg_u32(&a, p->group);
        arg_u32(&a, p->n_heads);
        arg_u32(&a, p->d_head);
        arg_mem(&a, p->v.mem);
        arg_u64(&a, p->v.off);
        arg_u32(&a, p->v_ld);
        arg_u64(&a, p->kv_seq_stride);
        attn_mask_args(&a, p, kind, radius);
        arg_mem(&a, p->scores.mem);
        arg_u64(&a, p->scores.off);
        arg_mem(&a, p->stats.mem);
        arg_u64(&a, p->stats.off);
        arg_mem(&a, p->out.mem);
        arg_u64(&a, p->out.off + (uint64_t)b * width);
        arg_u32(&a, p->out_ld);
        NMT_TRY(args_end(ops, &a, "attn_apply"));
        /* work-groups along the channels of one row only (the kernel
         * shares each row's probabilities through local memory) */
        const size_t n_apply[3] = {p->d_head, p->lq, rows_sh};
        const size_t l_apply[3] = {NMT_MIN(pow2_ceil(p->d_head), pow2_floor(ops->wg_max)), 1, 1};
        NMT_TRY(launch_local(ops, ops->k_attn_apply, 3, n_apply, l_apply, "attn_apply"));
    }
    return NMT_OK;
}
