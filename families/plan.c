/* SPDX-License-Identifier: MIT */
/* plan.c — what a session lends a family's plan (family.h, nmt_plan_ctx):
 * device buffers counted in both passes and released together, the int8
 * x int8 scratch, and the model file's pages given back once uploaded. */
#include "family.h"

#include "common.h"

nmt_status nmt_plan_buffer(nmt_plan_ctx *pc, nmt_arena *a, size_t bytes, const void *init, nmt_buf *out) {
    nmt_buf_node *node = NMT_ARENA_NEW(a, nmt_buf_node, 1);
    NMT_CHECK(node != NULL, NMT_ERR_ARENA_TOO_SMALL);
    if (bytes == 0) bytes = 4; /* OpenCL rejects empty buffers */
    bytes = nmt_align_up(bytes, 4);
    pc->device_bytes += bytes;
    out->off = 0;
    out->mem = NULL;
    if (nmt_arena_measuring(a)) return NMT_OK;
    if (pc->dev->info.max_alloc_bytes && bytes > pc->dev->info.max_alloc_bytes) {
        nmt_log(&pc->dev->log, NMT_LOG_ERROR,
                "a session buffer of %zu bytes exceeds the device's largest allocation (%llu bytes)",
                bytes, (unsigned long long)pc->dev->info.max_alloc_bytes);
        return NMT_ERR_DEVICE_MEMORY;
    }
    NMT_TRY(nmt_device_buffer(pc->dev, bytes, init, &node->mem));
    node->next = pc->bufs;
    pc->bufs = node;
    out->mem = node->mem;
    return NMT_OK;
}

void nmt_plan_release(nmt_plan_ctx *pc) {
    for (nmt_buf_node *n = pc->bufs; n != NULL; n = n->next)
        if (n->mem) clReleaseMemObject(n->mem);
    pc->bufs = NULL;
}

nmt_status nmt_plan_i8dot(nmt_plan_ctx *pc, nmt_arena *a, size_t rows, size_t kmax) {
    size_t bytes;
    NMT_CHECK(nmt_mul_ok(rows, kmax, &bytes), NMT_ERR_DEVICE_MEMORY);
    nmt_buf q, sc;
    NMT_TRY(nmt_plan_buffer(pc, a, bytes, NULL, &q));
    NMT_TRY(nmt_plan_floats(pc, a, rows, &sc));
    if (nmt_arena_measuring(a)) return NMT_OK;
    nmt_ops_set_i8_scratch(pc->ops, q, sc, bytes, rows);
    return NMT_OK;
}

void nmt_plan_release_model(nmt_plan_ctx *pc, const void *p, size_t n) {
    if (pc != NULL && pc->map != NULL) nmt_mapping_release(pc->map, p, n);
}
