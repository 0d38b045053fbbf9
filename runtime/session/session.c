/* SPDX-License-Identifier: MIT */
/* session.c — the session: model validation, planning of every host and
 * device resource from the limits (run twice: measure, then for real),
 * batching and token upload, beam search driving, forced-decoding scores.
 * After nmt_session_create() returns, nothing here allocates host memory or
 * creates OpenCL objects, and nothing reads the model image (a mapped file
 * is unmapped then). */
#include "session_internal.h"
#include "warmup.h"
#include "spans.h"

#include <math.h>
#include <string.h>

#define NMT_DEFAULT_MAX_SRC 256u
#define NMT_DEFAULT_BEAM 4u
#define NMT_DEFAULT_ALPHA 0.6f
#define NMT_EXTRA_TGT 50u /* max target length = source length + 50 (paper) */
#define NMT_DEFAULT_MAX_TEXT 2048u

/* ------------------------------------------------------------------------ */
/* Model discovery: the family registry (families/registry.c)              */
/* ------------------------------------------------------------------------ */

static void summarise(const nmt_file *f, const void *tok_src, const void *tok_tgt, nmt_model_info *info) {
    uint64_t n_params = 0, bytes = 0;
    unsigned dtypes = 0, dtypes_2d = 0; /* bit per dtype: all tensors, the 2-D ones */
    for (uint32_t i = 0; i < f->h.n_tensors; i++) {
        nmt_tensor_view v;
        if (nmt_file_tensor_at(f, i, &v) != NMT_OK || v.dtype == NMT_DTYPE_U8) continue;
        n_params += v.n_elements;
        bytes += v.nbytes;
        dtypes |= 1u << v.dtype;
        if (v.ndim == 2) dtypes_2d |= 1u << v.dtype;
    }
    if (dtypes_2d) dtypes = dtypes_2d; /* the weights' type: converted models keep 1-D tensors fp32 */
    info->tokenizer = tok_src == NULL ? 0 : tok_tgt != NULL ? 2 : 1;
    info->format_version = f->h.version;
    info->n_params = n_params;
    info->weight_bytes = bytes;
    info->n_tensors = f->h.n_tensors;
    info->file_size = f->size;
    const char *dt = dtypes == (1u << NMT_DTYPE_F32)   ? "fp32"
                     : dtypes == (1u << NMT_DTYPE_F16) ? "fp16"
                     : dtypes == (1u << NMT_DTYPE_I8)  ? "int8"
                                                       : "mixed";
    nmt_strlcpy(info->dtype, dt, sizeof info->dtype);
}

/* 1 when some 2-D tensor of f is stored F16. */
static int has_f16_weights(const nmt_file *f) {
    for (uint32_t i = 0; i < f->h.n_tensors; i++) {
        nmt_tensor_view v;
        if (nmt_file_tensor_at(f, i, &v) == NMT_OK && v.ndim == 2 && v.dtype == NMT_DTYPE_F16) return 1;
    }
    return 0;
}

/* Validate an image completely and parse its configuration. */
static nmt_status open_model(const void *data, size_t size, nmt_file *f, const nmt_family **fam,
                             void *cfg, nmt_model_info *info, char *why, size_t why_cap) {
    NMT_CHECK(data != NULL || size == 0, NMT_ERR_INVALID_ARGUMENT);
    NMT_TRY(nmt_file_open_why(f, data, size, 1, why, why_cap));
    NMT_TRY(nmt_family_of(f, fam));
    memset(info, 0, sizeof *info);
    NMT_TRY(nmt_family_parse(*fam, f, cfg));
    NMT_TRY(nmt_family_check_tensors(*fam, cfg, f, NULL));
    const void *tok_src, *tok_tgt;
    size_t tok_src_n, tok_tgt_n;
    NMT_TRY(nmt_file_tokenizers(f, &tok_src, &tok_src_n, &tok_tgt, &tok_tgt_n));
    (*fam)->info(cfg, info);
    summarise(f, tok_src, tok_tgt, info);
    f->why = NULL; /* the caller's buffer: not kept past this call */
    f->why_cap = 0;
    return NMT_OK;
}

nmt_status nmt_model_inspect(const void *data, size_t size, nmt_model_info *info) {
    NMT_CHECK(info != NULL, NMT_ERR_INVALID_ARGUMENT);
    nmt_file f;
    const nmt_family *fam;
    _Alignas(16) unsigned char cfg[NMT_FAMILY_CFG_BYTES];
    return open_model(data, size, &f, &fam, cfg, info, NULL, 0);
}

nmt_status nmt_model_explain(const void *data, size_t size, char *why, size_t why_cap) {
    if (why != NULL && why_cap > 0) why[0] = '\0';
    nmt_file f;
    const nmt_family *fam;
    nmt_model_info info;
    _Alignas(16) unsigned char cfg[NMT_FAMILY_CFG_BYTES];
    return open_model(data, size, &f, &fam, cfg, &info, why, why_cap);
}

nmt_status nmt_model_explain_file(const char *path, char *why, size_t why_cap) {
    if (why != NULL && why_cap > 0) why[0] = '\0';
    NMT_CHECK(path != NULL, NMT_ERR_INVALID_ARGUMENT);
    nmt_mapping m;
    NMT_TRY(nmt_map_file(path, &m));
    nmt_status st = nmt_model_explain(m.data, m.size, why, why_cap);
    nmt_unmap_file(&m);
    return st;
}

nmt_status nmt_model_inspect_file(const char *path, nmt_model_info *info) {
    NMT_CHECK(path != NULL && info != NULL, NMT_ERR_INVALID_ARGUMENT);
    nmt_mapping m;
    NMT_TRY(nmt_map_file(path, &m));
    nmt_status st = nmt_model_inspect(m.data, m.size, info);
    nmt_unmap_file(&m);
    return st;
}

/* ------------------------------------------------------------------------ */
/* Planning                                                                 */
/* ------------------------------------------------------------------------ */

static nmt_status resolve_limits(const nmt_limits *in, nmt_limits *out) {
    *out = *in;
    if (out->max_src_len == 0) out->max_src_len = NMT_DEFAULT_MAX_SRC;
    if (out->max_batch == 0) out->max_batch = 1;
    if (out->max_beam == 0) out->max_beam = NMT_DEFAULT_BEAM;
    if (out->max_tgt_len == 0) out->max_tgt_len = out->max_src_len + NMT_EXTRA_TGT;
    if (out->max_text_bytes == 0) out->max_text_bytes = NMT_DEFAULT_MAX_TEXT;
    /* generous but bounded so that every size computation stays in range */
    NMT_CHECK(out->max_src_len <= 65536 && out->max_tgt_len <= 65536 && out->max_batch <= 4096 &&
                  out->max_beam <= 256 && (uint64_t)out->max_batch * out->max_beam <= NMT_SESSION_MAX_ROWS &&
                  out->max_text_bytes <= (1u << 24),
              NMT_ERR_INVALID_ARGUMENT);
    return NMT_OK;
}

int nmt_session_fp16_compute(const nmt_session *s) { return s ? s->fp16 : 0; }

static nmt_status int_buffer(nmt_session *s, nmt_arena *a, size_t n, nmt_buf *out) {
    return nmt_plan_buffer(&s->pc, a, n * sizeof(cl_int), NULL, out);
}

/* Everything a session owns besides its own struct, in a fixed order. */
static nmt_status plan_session(nmt_session *s, nmt_arena *a) {
    /* set on each pass: the struct moves into the arena between them */
    s->pc.dev = s->dev;
    s->pc.ops = &s->ops;
    s->pc.map = s->mapped ? &s->map : NULL;
    s->pc.fp16 = s->fp16;
    const nmt_limits *L = &s->limits;
    nmt_plan_dims *d = &s->dims;
    d->max_batch = L->max_batch;
    d->max_beam = L->max_beam;
    d->src_cap = L->max_src_len + 1;
    d->tgt_cap = L->max_tgt_len + 1;
    d->step_rows = L->max_batch * L->max_beam;
    const size_t V = s->info.tgt_vocab;
    const size_t tok_cap = NMT_MAX((size_t)d->max_batch * NMT_MAX(d->src_cap, d->tgt_cap), d->step_rows);

    s->h_tok = NMT_ARENA_NEW(a, int32_t, tok_cap);
    s->h_len = NMT_ARENA_NEW(a, int32_t, d->max_batch);
    s->h_max_len = NMT_ARENA_NEW(a, uint32_t, d->max_batch);
    s->h_col = NMT_ARENA_NEW(a, int32_t, d->step_rows);
    s->h_logits = NMT_ARENA_NEW(a, float, (size_t)d->step_rows * V);
    s->topk_cap = NMT_MIN(2 * d->max_beam + 1, NMT_TOPK_MAX);
    s->trim_finished = 1;
    s->order_batch = 1;
    s->kv_table = 1;
    s->slot = NMT_ARENA_NEW(a, uint32_t, d->max_batch);
    s->ord_key = NMT_ARENA_NEW(a, uint64_t, d->max_batch);
    s->ord_tok = NMT_ARENA_NEW(a, const int32_t *, d->max_batch);
    s->ord_len = NMT_ARENA_NEW(a, uint32_t, d->max_batch);
    s->ord_pre = NMT_ARENA_NEW(a, const int32_t *, d->max_batch);
    s->ord_plen = NMT_ARENA_NEW(a, uint32_t, d->max_batch);
    s->ord_spans = NMT_ARENA_NEW(a, const nmt_span *, d->max_batch);
    s->ord_nspans = NMT_ARENA_NEW(a, uint32_t, d->max_batch);
    s->h_step = NMT_ARENA_NEW(a, int32_t, 2 * (size_t)d->step_rows);
    s->h_cand = NMT_ARENA_NEW(a, uint32_t, (size_t)d->step_rows * (2 * s->topk_cap + 1));
    s->h_cand_next = NMT_ARENA_NEW(a, uint32_t, (size_t)d->step_rows * (2 * s->topk_cap + 1));
    s->h_beam_state = NMT_ARENA_NEW(a, int32_t, 3 * (size_t)d->max_batch);
    s->chain_steps = !nmt_env_flag("NMT_EDGE_NO_CHAIN");
    NMT_CHECK(!a->failed, NMT_ERR_ARENA_TOO_SMALL);
    NMT_TRY(nmt_beam_plan(&s->beam, a, d->max_batch, d->max_beam, d->tgt_cap));
    if (s->want_sampling) NMT_TRY(nmt_beam_plan_vocab(&s->beam, a, (uint32_t)V));
    if (s->want_token_lp) NMT_TRY(nmt_beam_plan_token_lp(&s->beam, a));
    NMT_CHECK(!d->align || s->fam->alignments, NMT_ERR_UNSUPPORTED);
    if (d->align) { /* alignments: the per-step rows and back-pointers, walked back per hypothesis */
        s->h_align = NMT_ARENA_NEW(a, float, (size_t)d->tgt_cap * d->step_rows * d->src_cap);
        s->h_align_back = NMT_ARENA_NEW(a, int32_t, (size_t)d->tgt_cap * d->step_rows);
        NMT_CHECK(!a->failed, NMT_ERR_ARENA_TOO_SMALL);
        NMT_TRY(nmt_plan_buffer(&s->pc, a, (size_t)d->step_rows * d->src_cap * sizeof(float), NULL, &s->io.align));
    }

    NMT_TRY(int_buffer(s, a, (size_t)d->max_batch * d->src_cap, &s->io.src_tok));
    NMT_TRY(int_buffer(s, a, d->max_batch, &s->io.src_len));
    NMT_TRY(int_buffer(s, a, 2 * (size_t)d->step_rows, &s->io.step_tok));
    NMT_TRY(int_buffer(s, a, (size_t)d->step_rows * (2 * s->topk_cap + 1), &s->d_cand));
    NMT_TRY(int_buffer(s, a, 3 * (size_t)d->max_batch, &s->d_beam_state));
    if (!nmt_arena_measuring(a)) { /* a device whose kernel cannot take the local size: the whole distribution */
        const nmt_status st = nmt_ops_enable_topk(&s->ops);
        NMT_CHECK(st == NMT_OK || st == NMT_ERR_UNSUPPORTED, st);
        NMT_TRY(nmt_ops_enable_beam(&s->ops));
    }
    NMT_TRY(int_buffer(s, a, d->step_rows, &s->io.reorder));
    NMT_TRY(int_buffer(s, a, (size_t)d->max_batch * d->tgt_cap, &s->io.tgt_tok));
    NMT_TRY(nmt_plan_buffer(&s->pc, a, (size_t)d->step_rows * V * sizeof(float), NULL, &s->io.logits));
    NMT_TRY(s->fam->plan(&s->pc, &s->file, s->cfg, d, a, &s->fam_state));
    NMT_TRY(nmt_session_plan_text(s, a));
    NMT_CHECK(!a->failed, NMT_ERR_ARENA_TOO_SMALL);
    return NMT_OK;
}

/* Fill a session struct's model/limit fields (shared by both passes); the
 * reason of a refused model into why[why_cap] (may be NULL). */
static nmt_status prepare(nmt_session *s, const nmt_session_params *p, nmt_mapping *map, char *why,
                          size_t why_cap) {
    NMT_CHECK(p != NULL, NMT_ERR_INVALID_ARGUMENT);
    NMT_CHECK((p->model_path != NULL) != (p->model_data != NULL), NMT_ERR_INVALID_ARGUMENT);
    NMT_TRY(resolve_limits(&p->limits, &s->limits));
    s->dims.align = p->alignment != 0;
    s->dims.align_layer = p->align_layer;
    s->dims.align_head = p->align_head;
    s->want_token_lp = p->token_logprobs != 0;
    s->want_sampling = p->sampling != 0;
    const void *data = p->model_data;
    size_t size = p->model_size;
    if (p->model_path != NULL) {
        NMT_TRY(nmt_map_file(p->model_path, map));
        data = map->data;
        size = map->size;
    }
    nmt_status st = open_model(data, size, &s->file, &s->fam, s->cfg, &s->info, why, why_cap);
    if (st == NMT_OK) s->src_eos = s->fam->source_eos == NULL || s->fam->source_eos(s->cfg);
    /* fp16 compute: nmt_session_arena_size has no device (s->dev NULL) and
     * counts it for ON only (AUTO: fp32's upper bound); a session asks its
     * device */
    const int want = p->fp16_compute;
    if (st == NMT_OK && want != NMT_FP16_AUTO && want != NMT_FP16_OFF && want != NMT_FP16_ON)
        st = NMT_ERR_INVALID_ARGUMENT;
    if (st == NMT_OK && want == NMT_FP16_ON && s->dev != NULL && !s->dev->info.has_fp16) st = NMT_ERR_UNSUPPORTED;
    const int dev_fp16 = s->dev != NULL ? s->dev->info.has_fp16 : want == NMT_FP16_ON;
    if (st == NMT_OK)
        s->fp16 = want != NMT_FP16_OFF && dev_fp16 && s->fam->fp16_weights && has_f16_weights(&s->file);
    if (st != NMT_OK && p->model_path != NULL) nmt_unmap_file(map);
    return st;
}

/* Measuring pass over a prepared session struct: exact arena bytes. */
static nmt_status measure(nmt_session *s, size_t *need) {
    nmt_arena a;
    nmt_arena_init_measure(&a);
    (void)nmt_arena_alloc(&a, sizeof(nmt_session), NMT_ARENA_ALIGN);
    s->pc.device_bytes = 0;
    NMT_TRY(plan_session(s, &a));
    *need = nmt_arena_required(&a);
    return NMT_OK;
}

nmt_status nmt_session_arena_size(const nmt_session_params *params, size_t *arena_bytes,
                                  uint64_t *device_bytes) {
    NMT_CHECK(arena_bytes != NULL, NMT_ERR_INVALID_ARGUMENT);
    static const nmt_session zero;
    nmt_session s = zero;
    nmt_mapping map = {0};
    NMT_TRY(prepare(&s, params, &map, NULL, 0));
    nmt_status st = measure(&s, arena_bytes);
    if (params->model_path != NULL) nmt_unmap_file(&map);
    if (st == NMT_OK && device_bytes) *device_bytes = s.pc.device_bytes;
    return st;
}

static void release_all(nmt_session *s) {
    nmt_plan_release(&s->pc);
    if (s->fam && s->fam_state) s->fam->release(s->fam_state);
    nmt_ops_release(&s->ops);
    if (s->mapped) nmt_unmap_file(&s->map);
    s->mapped = 0;
}

nmt_status nmt_session_create(nmt_device *dev, const nmt_session_params *params, void *arena,
                              size_t arena_size, nmt_session **out) {
    NMT_CHECK(dev != NULL && params != NULL && out != NULL && arena != NULL, NMT_ERR_INVALID_ARGUMENT);
    *out = NULL;
    static const nmt_session zero;
    nmt_session tmp = zero; /* validated once, measured, then moved into the arena */
    tmp.dev = dev;
    char why[NMT_MODEL_WHY_BYTES] = "";
    nmt_status sp = prepare(&tmp, params, &tmp.map, why, sizeof why);
    if (sp != NMT_OK && why[0]) nmt_log(&dev->log, NMT_LOG_ERROR, "model refused: %s", why);
    NMT_TRY(sp);
    tmp.mapped = params->model_path != NULL;
    /* the CRC check has read every byte: give the pages back now, and the
     * weights' again once each is on the device (nmt_plan_release_model),
     * so that the file and the device copies are never resident together */
    if (tmp.mapped) nmt_mapping_release(&tmp.map, tmp.map.data, tmp.map.size);
    size_t need;
    nmt_status st = measure(&tmp, &need);
    nmt_arena a;
    nmt_arena_init(&a, arena, arena_size);
    if (st == NMT_OK && a.size < need) st = NMT_ERR_ARENA_TOO_SMALL;
    nmt_session *s = st == NMT_OK ? NMT_ARENA_NEW(&a, nmt_session, 1) : NULL;
    if (s == NULL) {
        if (tmp.mapped) nmt_unmap_file(&tmp.map);
        return st != NMT_OK ? st : NMT_ERR_ARENA_TOO_SMALL;
    }
    *s = tmp;
    s->pc.device_bytes = 0;
    const uint32_t built0 = dev->n_source_builds;
    st = nmt_ops_init_session(&s->ops, dev); /* programs built as the model uses them */
    if (st == NMT_OK) st = nmt_ops_chain_enable(&s->ops, 1); /* few-row products chained (CPU devices) */
    if (st == NMT_OK) st = plan_session(s, &a);
    if (st == NMT_OK) st = nmt_session_warm(s); /* compile every kernel now, refresh the cache */
    nmt_device_progress_done(dev, built0);
    if (st != NMT_OK) {
        release_all(s);
        return st;
    }
    s->arena = a;
    /* Everything the session uses now lives in the arena (tokenizers copy
     * their .model bytes) or on the device (weights are uploaded): drop the
     * model image, so a model file truncated or replaced while the session
     * runs cannot reach it (issue 21), and nothing can point into it. */
    if (s->mapped) nmt_unmap_file(&s->map);
    s->mapped = 0;
    memset(&s->file, 0, sizeof s->file);
    *out = s;
    nmt_log(&dev->log, NMT_LOG_INFO, "session: %zu arena bytes, %llu device bytes%s", a.high,
            (unsigned long long)s->pc.device_bytes,
            s->fp16 ? "; fp16 compute (half weights, fp32 accumulation)" : "");
    return NMT_OK;
}

void nmt_session_destroy(nmt_session *s) {
    if (s == NULL) return;
    release_all(s);
}

size_t nmt_session_arena_used(const nmt_session *s) { return s ? s->arena.high : 0; }

void nmt_session_model_info(const nmt_session *s, nmt_model_info *info) {
    if (s && info) *info = s->info;
}

void nmt_session_limits(const nmt_session *s, nmt_limits *limits) {
    if (s && limits) *limits = s->limits;
}

int32_t nmt_session_last_cl_error(const nmt_session *s) { return s ? s->dev->last_cl_error : 0; }

/* ------------------------------------------------------------------------ */
/* Batches                                                                  */
/* ------------------------------------------------------------------------ */

static nmt_status check_batch(const nmt_session *s, const nmt_batch *b, uint32_t vocab,
                              uint32_t max_len, uint32_t *longest) {
    NMT_CHECK(b != NULL && (b->n == 0 || (b->tokens != NULL && b->lens != NULL)),
              NMT_ERR_INVALID_ARGUMENT);
    NMT_CHECK(b->n <= s->limits.max_batch, NMT_ERR_LIMIT_EXCEEDED);
    *longest = 0;
    for (uint32_t i = 0; i < b->n; i++) {
        NMT_CHECK(b->lens[i] <= max_len, NMT_ERR_INPUT_TOO_LONG);
        NMT_CHECK(b->lens[i] == 0 || b->tokens[i] != NULL, NMT_ERR_INVALID_ARGUMENT);
        for (uint32_t j = 0; j < b->lens[i]; j++)
            NMT_CHECK(b->tokens[i][j] >= 0 && (uint32_t)b->tokens[i][j] < vocab,
                      NMT_ERR_TOKEN_OUT_OF_RANGE);
        *longest = NMT_MAX(*longest, b->lens[i]);
    }
    return NMT_OK;
}

nmt_status nmt_session_set_spans(nmt_session *s, const nmt_span *const *spans, const uint32_t *n_spans,
                                 uint32_t n) {
    NMT_CHECK(s != NULL && (spans == NULL || n_spans != NULL), NMT_ERR_INVALID_ARGUMENT);
    s->spans.spans = spans;
    s->spans.n_spans = spans ? n_spans : NULL;
    s->spans.n = spans ? n : 0;
    return NMT_OK;
}

/* The spans set for this call against its batch (nmt_session_set_spans). */
static nmt_status check_spans(const nmt_spans *sp, const nmt_batch *b) {
    if (sp->spans == NULL) return NMT_OK;
    NMT_CHECK(sp->n == b->n, NMT_ERR_INVALID_SPANS);
    for (uint32_t i = 0; i < b->n; i++) /* the trainer's spans files pass the same check */
        NMT_TRY(nmt_spans_check(sp->spans[i], sp->n_spans[i], b->lens[i], NULL));
    return NMT_OK;
}

static nmt_status upload_ints(nmt_session *s, nmt_buf dst, const int32_t *src, size_t n) {
    return nmt_device_write(s->dev, dst.mem, dst.off * sizeof(cl_int), n * sizeof(cl_int), src);
}

/* The same, not waited for: src unchanged until the step's blocking read. */
static nmt_status queue_ints(nmt_session *s, nmt_buf dst, const int32_t *src, size_t n) {
    return nmt_device_write_queued(s->dev, dst.mem, dst.off * sizeof(cl_int), n * sizeof(cl_int), src);
}

/* Pack sources (+EOS, nmt_family.source_eos) into [n, len] with padding, upload, run the encoder. */
static nmt_status encode_batch(nmt_session *s, const nmt_batch *src, uint32_t *len_out) {
    uint32_t longest;
    const nmt_spans spans = s->spans; /* this call's (consumed: the next call has none) */
    s->spans = (nmt_spans){NULL, NULL, 0};
    NMT_TRY(check_batch(s, src, s->info.src_vocab, s->limits.max_src_len, &longest));
    NMT_TRY(check_spans(&spans, src));
    const uint32_t len = longest + 1;
    for (uint32_t i = 0; i < src->n; i++) {
        int32_t *row = s->h_tok + (size_t)i * len;
        if (src->lens[i]) memcpy(row, src->tokens[i], sizeof(int32_t) * src->lens[i]);
        /* EOS after the tokens, unless the family says its sources have
         * none (source_eos 0); an empty source is EOS alone either way */
        const uint32_t n_eos = s->src_eos || src->lens[i] == 0 ? 1 : 0;
        if (n_eos) row[src->lens[i]] = (int32_t)s->info.eos_id;
        for (uint32_t j = src->lens[i] + n_eos; j < len; j++) row[j] = (int32_t)s->info.pad_id;
        s->h_len[i] = (int32_t)(src->lens[i] + n_eos);
    }
    NMT_TRY(upload_ints(s, s->io.src_tok, s->h_tok, (size_t)src->n * len));
    NMT_TRY(upload_ints(s, s->io.src_len, s->h_len, src->n));
    s->io.spans = spans.spans ? &spans : NULL;
    s->io.h_src_len = s->h_len;
    const nmt_status st = s->fam->encode(s->fam_state, &s->io, src->n, len);
    s->io.spans = NULL; /* the caller's arrays are read during the call only */
    NMT_TRY(st);
    *len_out = len;
    return NMT_OK;
}

static nmt_status read_logprobs(nmt_session *s, uint32_t rows, int log_softmax) {
    const uint32_t V = s->info.tgt_vocab;
    if (log_softmax) NMT_TRY(nmt_op_log_softmax(&s->ops, s->io.logits, rows, V, V));
    return nmt_device_read(s->dev, s->io.logits.mem, 0, (size_t)rows * V * sizeof(float), s->h_logits);
}

/* ------------------------------------------------------------------------ */
/* Translation                                                              */
/* ------------------------------------------------------------------------ */

/* The forced prefixes of a call (nmt_decode_opts.prefix) against its batch. */
static nmt_status check_prefix(const nmt_session *s, const nmt_decode_opts *o, uint32_t n) {
    NMT_CHECK(o->prefix_text == NULL, NMT_ERR_INVALID_ARGUMENT); /* the text API's, tokenized */
    if (o->prefix == NULL) return NMT_OK;
    NMT_CHECK(o->prefix_len != NULL, NMT_ERR_INVALID_ARGUMENT);
    for (uint32_t i = 0; i < n; i++) {
        NMT_CHECK(o->prefix_len[i] == 0 || o->prefix[i] != NULL, NMT_ERR_INVALID_ARGUMENT);
        NMT_CHECK(o->prefix_len[i] <= s->limits.max_tgt_len, NMT_ERR_INPUT_TOO_LONG);
        for (uint32_t j = 0; j < o->prefix_len[i]; j++)
            NMT_CHECK(o->prefix[i][j] >= 0 && (uint32_t)o->prefix[i][j] < s->info.tgt_vocab,
                      NMT_ERR_TOKEN_OUT_OF_RANGE);
    }
    return NMT_OK;
}

/* The decoder steps of a search, each ranked on the host before the next
 * is enqueued: n sentences, K beams, at most `steps` steps. */
/* Before a step: the caller's cancel flag. */
static int call_cancelled(const nmt_session *s) {
    return s->call != NULL && s->call->cancel != NULL && *s->call->cancel != 0;
}

/* After step t: the caller's streaming callback (nonzero: stop). */
static int call_step_done(nmt_session *s, uint32_t t) {
    s->call_steps = t + 1;
    return s->call != NULL && s->call->on_step != NULL && s->call->on_step(s->call->step_user, s, t) != 0;
}

static nmt_status decode_host(nmt_session *s, nmt_beam *b, uint32_t n, uint32_t K, uint32_t steps, float rep) {
    uint32_t live = n; /* sentences [0, live) still decode: trailing finished ones drop out */
    for (uint32_t t = 0; t < steps; t++) {
        if (call_cancelled(s)) return NMT_ERR_CANCELLED;
        /* The rows of finished sentences at the end of the batch are not
         * computed: a step's state is per row at fixed strides and the beam
         * never reads a finished sentence's rows again (docs/RUNTIME.md,
         * "Finished sentences"). */
        while (s->trim_finished && live > 1 && b->done[live - 1]) live--;
        const uint32_t rows = live * K;
        s->rows_trimmed += (uint64_t)(n - live) * K;
        /* k candidates per row when the step allows it (device top-k), else every log-probability */
        uint32_t k = s->ops.k_topk != NULL ? nmt_beam_topk_width(b, t) : 0;
        if (k > s->topk_cap || k > s->ops.topk_max) k = 0;
        if (k) { /* one upload: the tokens, then the scores the kernel ranks by */
            memcpy(s->h_step, b->next_tok, sizeof(int32_t) * rows);
            memcpy(s->h_step + rows, b->score, sizeof(float) * rows);
            NMT_TRY(queue_ints(s, s->io.step_tok, s->h_step, 2 * (size_t)rows));
        } else {
            NMT_TRY(queue_ints(s, s->io.step_tok, b->next_tok, rows));
        }
        NMT_TRY(s->fam->step(s->fam_state, &s->io, rows, K, t));
        const size_t sc = s->dims.src_cap, R = s->dims.step_rows;
        if (s->h_align != NULL)
            NMT_TRY(nmt_device_read(s->dev, s->io.align.mem, 0, (size_t)rows * sc * sizeof(float),
                                    s->h_align + (size_t)t * R * sc));
        int done;
        if (k) {
            const uint32_t V = s->info.tgt_vocab;
            NMT_TRY(nmt_op_topk_logprobs(&s->ops, s->io.logits, rows, V, V, nmt_buf_at(s->io.step_tok, rows), k,
                                         s->info.eos_id, s->d_cand));
            NMT_TRY(nmt_device_read(s->dev, s->d_cand.mem, 0, (size_t)rows * (2 * k + 1) * sizeof(uint32_t),
                                    s->h_cand));
            const uint32_t *c = s->h_cand;
            done = nmt_beam_advance_topk(b, t, (const float *)c, (const int32_t *)(c + (size_t)rows * k), k,
                                         (const float *)(c + 2 * (size_t)rows * k));
        } else {
            NMT_TRY(read_logprobs(s, rows, rep == 1.0f)); /* penalised: raw logits, softmax here */
            if (rep != 1.0f) nmt_beam_logprobs(b, t, s->h_logits);
            done = nmt_beam_advance(b, t, s->h_logits);
        }
        if (s->h_align != NULL) memcpy(s->h_align_back + (size_t)t * R, b->back, sizeof(int32_t) * rows);
        if (call_step_done(s, t)) return NMT_ERR_CANCELLED;
        if (done) break;
        uint32_t moved = 0; /* greedy, and finished sentences, keep their rows: nothing to reorder */
        for (uint32_t r = 0; r < rows && !moved; r++) moved = b->back[r] != (int32_t)r;
        if (!moved) continue;
        /* with the table the family uploads them only if it gathers
         * (nmt_io_reorder_upload): the Transformer's table path does not */
        if (!s->kv_table) NMT_TRY(queue_ints(s, s->io.reorder, b->back, rows));
        s->io.h_reorder = s->kv_table ? b->back : NULL;
        const nmt_status st = s->fam->reorder(s->fam_state, &s->io, rows, t);
        s->io.h_reorder = NULL;
        NMT_TRY(st);
    }
    return NMT_OK;
}

nmt_status nmt_session_reorder_on_device(nmt_session *s, uint32_t rows, uint32_t t) {
    s->io.reorder_on_device = 1;
    const nmt_status st = s->fam->reorder(s->fam_state, &s->io, rows, t);
    s->io.reorder_on_device = 0;
    return st;
}

/* A search with its steps chained on the device (docs/RUNTIME.md, "Steps
 * chained on the device"): after step t the device itself writes step t +
 * 1's input — each row's next token and score, at beam 1 by the top-k
 * kernel (nmt_op_topk_pick), wider by nmt_op_beam_advance, which also
 * writes the back-pointers the family's reorder then reads on the device —
 * so step t + 1 is enqueued before step t's candidates come back, and the
 * host ranks them, as decode_host does, while the device runs step t + 1:
 * the queue does not drain between steps.  The host's and the device's
 * choices are the same by construction (the same candidates, order and
 * float sums; the tests compare every result with decode_host's).  Step
 * t + 1 runs on the rows live before step t's results (trailing finished
 * sentences leave a step later), and a search that ends at step t has run
 * step t + 1 too, unread. */
static nmt_status chain_step(nmt_session *s, const nmt_beam *b, uint32_t t, uint32_t rows, uint32_t *host,
                             cl_event *ev, uint32_t *k_out) {
    const uint32_t V = s->info.tgt_vocab, K = b->K, k = nmt_beam_topk_width(b, t);
    const nmt_buf score = nmt_buf_at(s->io.step_tok, s->dims.step_rows);
    NMT_CHECK(k >= 2 && k <= s->topk_cap && k <= s->ops.topk_max, NMT_ERR_INVALID_ARGUMENT);
    NMT_TRY(s->fam->step(s->fam_state, &s->io, rows, K, t));
    s->steps_chained++;
    if (K == 1) {
        NMT_TRY(nmt_op_topk_pick(&s->ops, s->io.logits, rows, V, V, score, k, s->info.eos_id, s->d_cand,
                                 t < b->min_len, s->io.step_tok));
    } else {
        NMT_TRY(nmt_op_topk_logprobs(&s->ops, s->io.logits, rows, V, V, score, k, s->info.eos_id, s->d_cand));
        const nmt_beam_step bs = {.cand = s->d_cand, .state = s->d_beam_state, .tok = s->io.step_tok,
                                  .score = score, .back = s->io.reorder, .rows = rows, .k = k, .K = K, .V = V,
                                  .eos = s->info.eos_id, .t = t, .min_len = b->min_len};
        NMT_TRY(nmt_op_beam_advance(&s->ops, &bs));
    }
    *k_out = k;
    /* Greedy rows continue themselves; beams are reordered on the device.
     * Where the beam step was recorded into a chain (a CPU runtime), the
     * reorder goes before the read, so that it joins the chain the read
     * enqueues; elsewhere after it, so that the read does not wait for it. */
    const int reorder_first = K > 1 && nmt_ops_chain_open(&s->ops);
    if (reorder_first) NMT_TRY(nmt_session_reorder_on_device(s, rows, t));
    NMT_TRY(nmt_device_read_async(s->dev, s->d_cand.mem, 0, (size_t)rows * (2 * k + 1) * sizeof(uint32_t), host,
                                  ev));
    return K > 1 && !reorder_first ? nmt_session_reorder_on_device(s, rows, t) : NMT_OK;
}

static int can_chain(const nmt_session *s, const nmt_beam *b) {
    const uint32_t k = 2 * b->K + 1; /* the widest step */
    return s->chain_steps && s->ops.k_topk != NULL && s->h_align == NULL && b->prefix == NULL &&
           nmt_beam_topk_width(b, 0) > 0 && k <= s->topk_cap && k <= s->ops.topk_max &&
           (b->K == 1 || (b->K <= NMT_BEAM_DEVICE_MAX && s->ops.k_beam_advance != NULL));
}

static nmt_status decode_chained(nmt_session *s, nmt_beam *b, uint32_t n, uint32_t steps) {
    const uint32_t K = b->K;
    const nmt_buf score = nmt_buf_at(s->io.step_tok, s->dims.step_rows);
    uint32_t *host[2] = {s->h_cand, s->h_cand_next}, rows_of[2] = {n * K, 0}, k_of[2] = {0, 0}, live = n;
    cl_event ev[2] = {NULL, NULL};
    NMT_TRY(queue_ints(s, s->io.step_tok, b->next_tok, n * K));
    NMT_TRY(nmt_device_write_queued(s->dev, score.mem, score.off * sizeof(cl_int), sizeof(float) * n * K, b->score));
    if (K > 1) { /* the sentences' state as nmt_beam_start leaves it */
        for (uint32_t i = 0; i < n; i++) {
            s->h_beam_state[3 * i] = b->done[i];
            s->h_beam_state[3 * i + 1] = (int32_t)b->n_fin[i];
            s->h_beam_state[3 * i + 2] = (int32_t)b->max_len[i];
        }
        NMT_TRY(queue_ints(s, s->d_beam_state, s->h_beam_state, 3 * (size_t)n));
    }
    nmt_status st = call_cancelled(s) ? NMT_ERR_CANCELLED : chain_step(s, b, 0, n * K, host[0], &ev[0], &k_of[0]);
    for (uint32_t t = 0; st == NMT_OK; t++) {
        const uint32_t i = t & 1, j = i ^ 1;
        if (t + 1 < steps && call_cancelled(s)) { /* step t is under way: its tokens still count */
            st = NMT_ERR_CANCELLED;
            const nmt_status w = nmt_device_wait(s->dev, &ev[i]);
            if (w != NMT_OK) st = w;
            else {
                const uint32_t *c = host[i], r = rows_of[i], k = k_of[i];
                nmt_beam_advance_topk(b, t, (const float *)c, (const int32_t *)(c + (size_t)r * k), k,
                                      (const float *)(c + 2 * (size_t)r * k));
                s->call_steps = t + 1;
            }
            break;
        }
        if (t + 1 < steps) {
            while (s->trim_finished && live > 1 && b->done[live - 1]) live--;
            s->rows_trimmed += (uint64_t)(n - live) * K;
            rows_of[j] = live * K;
            st = chain_step(s, b, t + 1, live * K, host[j], &ev[j], &k_of[j]);
            if (st != NMT_OK) break;
        }
        st = nmt_device_wait(s->dev, &ev[i]);
        if (st != NMT_OK) break;
        const uint32_t *c = host[i], r = rows_of[i], k = k_of[i];
        const int done = nmt_beam_advance_topk(b, t, (const float *)c, (const int32_t *)(c + (size_t)r * k), k,
                                               (const float *)(c + 2 * (size_t)r * k));
        if (call_step_done(s, t)) {
            st = NMT_ERR_CANCELLED;
            break;
        }
        if (done || t + 1 >= steps) break;
    }
    for (int i = 0; i < 2; i++) /* the step after the last, or one an error left behind */
        if (ev[i] != NULL) {
            const nmt_status w = nmt_device_wait(s->dev, &ev[i]);
            if (st == NMT_OK) st = w;
        }
    return st;
}

static nmt_status translate_in_order(nmt_session *s, const nmt_batch *src, const nmt_decode_opts *opts) {
    static const nmt_decode_opts defaults;
    if (opts == NULL) opts = &defaults;
    const float temperature = opts->sampling_temperature != 0.0f ? opts->sampling_temperature : 1.0f;
    const float rep = opts->repetition_penalty != 0.0f ? opts->repetition_penalty : 1.0f;
    NMT_CHECK(isfinite(temperature) && temperature > 0 && isfinite(rep) && rep > 0 &&
                  isfinite(opts->coverage_penalty) && opts->coverage_penalty >= 0,
              NMT_ERR_INVALID_ARGUMENT);
    NMT_CHECK(!opts->sampling || opts->beam <= 1, NMT_ERR_INVALID_ARGUMENT);
    NMT_CHECK(opts->coverage_penalty == 0.0f || s->h_align != NULL, NMT_ERR_NO_ALIGNMENTS);
    const uint32_t K = opts->beam         ? opts->beam
                       : opts->sampling ? 1
                                        : NMT_MIN(NMT_DEFAULT_BEAM, s->limits.max_beam);
    const uint32_t n_best = opts->n_best ? opts->n_best : 1;
    float alpha = (opts->alpha_set || opts->alpha != 0.0f) ? opts->alpha : NMT_DEFAULT_ALPHA;
    NMT_CHECK(isfinite(alpha), NMT_ERR_INVALID_ARGUMENT);
    NMT_CHECK(isfinite(opts->max_len_a) && isfinite(opts->max_len_b) && opts->max_len_a >= 0 &&
                  opts->max_len_b >= 0,
              NMT_ERR_INVALID_ARGUMENT);
    const int ratio = opts->max_len == 0 && (opts->max_len_a > 0 || opts->max_len_b > 0);
    if (alpha < 0) alpha = 0;
    NMT_CHECK(K <= s->limits.max_beam && n_best <= K, NMT_ERR_LIMIT_EXCEEDED);
    s->n_results = 0;
    s->n_scored = 0;
    s->result_n_best = n_best;
    if (src->n == 0) return NMT_OK;
    NMT_CHECK(src->n <= s->limits.max_batch, NMT_ERR_LIMIT_EXCEEDED);
    NMT_TRY(check_prefix(s, opts, src->n));

    uint32_t len;
    NMT_TRY(encode_batch(s, src, &len));
    uint32_t steps = 0;
    for (uint32_t i = 0; i < src->n; i++) {
        /* an empty source translates to an empty target: EOS is forced at once */
        uint32_t m = src->lens[i] + NMT_EXTRA_TGT;
        if (opts->max_len) m = opts->max_len;
        else if (ratio) m = (uint32_t)fminf(opts->max_len_a * (float)src->lens[i] + opts->max_len_b, 1e9f);
        if (src->lens[i] == 0) m = 0;
        if (opts->prefix != NULL) m = NMT_MAX(m, opts->prefix_len[i]); /* the prefix, at least */
        s->h_max_len[i] = NMT_MIN(m, s->limits.max_tgt_len);
        steps = NMT_MAX(steps, s->h_max_len[i] + 1);
    }
    nmt_beam *b = &s->beam;
    NMT_TRY(nmt_beam_start(b, src->n, K, s->info.tgt_vocab, s->info.eos_id, s->info.bos_id, alpha,
                           s->h_max_len));
    nmt_beam_constrain(b, opts->min_len, opts->no_repeat_ngram);
    nmt_beam_set_prefix(b, opts->prefix, opts->prefix_len);
    nmt_beam_set_repetition(b, rep);
    if (opts->sampling) NMT_TRY(nmt_beam_set_sampling(b, opts->sampling_topk, temperature, opts->seed));
    s->call = opts;
    s->call_steps = 0;
    const nmt_status st = can_chain(s, b) ? decode_chained(s, b, src->n, steps) : decode_host(s, b, src->n, K, steps, rep);
    s->call = NULL;
    nmt_beam_set_prefix(b, NULL, NULL); /* the caller's arrays: not kept */
    if (st == NMT_ERR_CANCELLED) { /* finished sentences keep their results, the others have none */
        for (uint32_t i = 0; i < src->n; i++)
            if (!b->done[i]) b->n_fin[i] = 0;
        s->n_results = src->n;
        return st;
    }
    NMT_TRY(st);
    s->n_results = src->n;
    if (opts->coverage_penalty > 0) nmt_session_coverage(s, opts->coverage_penalty);
    return NMT_OK;
}

/* The caller's sentences longest source first (stable), so that the short
 * ones, which finish first, are the trailing ones that leave the step
 * (docs/RUNTIME.md, "Finished sentences"); s->slot maps each back.  Each
 * sentence decodes on its own rows, so the order changes no result.  With
 * sampling the caller's order stays (sentence i draws with seed + i), and
 * a batch the checks will refuse goes through unchanged. */
nmt_status nmt_session_translate(nmt_session *s, const nmt_batch *src, const nmt_decode_opts *opts) {
    NMT_CHECK(s != NULL && src != NULL, NMT_ERR_INVALID_ARGUMENT);
    const uint32_t n = src->n;
    const int sampling = opts != NULL && opts->sampling;
    for (uint32_t i = 0; i < NMT_MIN(n, s->limits.max_batch); i++) s->slot[i] = i;
    if (!s->order_batch || sampling || n < 2 || n > s->limits.max_batch || src->tokens == NULL || src->lens == NULL)
        return translate_in_order(s, src, opts);
    for (uint32_t i = 0; i < n; i++) s->ord_key[i] = (uint64_t)(~src->lens[i]) << 32 | i; /* ascending: longest first */
    for (uint32_t i = 1; i < n; i++) /* insertion sort: batches are small, often in order already */
        for (uint32_t j = i; j > 0 && s->ord_key[j] < s->ord_key[j - 1]; j--) {
            const uint64_t x = s->ord_key[j];
            s->ord_key[j] = s->ord_key[j - 1];
            s->ord_key[j - 1] = x;
        }
    nmt_decode_opts o = opts ? *opts : (nmt_decode_opts){0};
    const int pre = o.prefix != NULL && o.prefix_len != NULL;
    const nmt_spans sp = s->spans;
    const int spans = sp.spans != NULL && sp.n_spans != NULL && sp.n == n;
    for (uint32_t j = 0; j < n; j++) {
        const uint32_t i = (uint32_t)(s->ord_key[j] & 0xffffffffu);
        s->slot[i] = j;
        s->ord_tok[j] = src->tokens[i];
        s->ord_len[j] = src->lens[i];
        if (pre) s->ord_pre[j] = o.prefix[i], s->ord_plen[j] = o.prefix_len[i];
        if (spans) s->ord_spans[j] = sp.spans[i], s->ord_nspans[j] = sp.n_spans[i];
    }
    if (pre) o.prefix = s->ord_pre, o.prefix_len = s->ord_plen;
    if (spans) s->spans = (nmt_spans){s->ord_spans, s->ord_nspans, n};
    const nmt_batch b = {s->ord_tok, s->ord_len, n};
    return translate_in_order(s, &b, opts ? &o : NULL);
}

nmt_status nmt_session_partial(const nmt_session *s, uint32_t i, const int32_t **tokens, uint32_t *len, int *done) {
    NMT_CHECK(s != NULL && tokens != NULL && len != NULL && s->call != NULL, NMT_ERR_INVALID_ARGUMENT);
    const nmt_beam *b = &s->beam;
    NMT_CHECK(i < b->n, NMT_ERR_INVALID_ARGUMENT);
    const uint32_t j = s->slot[i]; /* the decoding order's index */
    if (done) *done = b->done[j];
    if (b->done[j]) { /* sorted when it finished: the best first */
        const nmt_hyp *h = nmt_beam_result(b, j, 0);
        *tokens = h ? h->tokens : b->hist;
        *len = h ? h->len : 0;
        return NMT_OK;
    }
    /* live rows are in candidate order: the sentence's first row is its best */
    *tokens = b->hist + (size_t)j * b->K * b->max_steps;
    *len = s->call_steps;
    return NMT_OK;
}

uint32_t nmt_session_n_results(const nmt_session *s, uint32_t i) {
    if (s == NULL || i >= s->n_results) return 0;
    return NMT_MIN(nmt_beam_n_results(&s->beam, s->slot[i]), s->result_n_best);
}

nmt_status nmt_session_result(const nmt_session *s, uint32_t i, uint32_t rank, const int32_t **tokens,
                              uint32_t *len, float *score, float *logprob) {
    NMT_CHECK(s != NULL && tokens != NULL && len != NULL, NMT_ERR_INVALID_ARGUMENT);
    NMT_CHECK(i < s->n_results && rank < s->result_n_best, NMT_ERR_INVALID_ARGUMENT);
    const nmt_hyp *h = nmt_beam_result(&s->beam, s->slot[i], rank);
    NMT_CHECK(h != NULL, NMT_ERR_INVALID_ARGUMENT);
    *tokens = h->tokens;
    *len = h->len;
    if (score) *score = h->score;
    if (logprob) *logprob = h->logprob;
    return NMT_OK;
}

nmt_status nmt_session_result_token_logprobs(const nmt_session *s, uint32_t i, uint32_t rank, float *lp,
                                             size_t cap, uint32_t *n) {
    NMT_CHECK(s != NULL && n != NULL && (lp != NULL || cap == 0), NMT_ERR_INVALID_ARGUMENT);
    NMT_CHECK(i < s->n_results && rank < s->result_n_best, NMT_ERR_INVALID_ARGUMENT);
    const nmt_hyp *h = nmt_beam_result(&s->beam, s->slot[i], rank);
    NMT_CHECK(h != NULL, NMT_ERR_INVALID_ARGUMENT);
    NMT_CHECK(h->token_lp != NULL, NMT_ERR_LIMIT_EXCEEDED); /* a session created without token_logprobs */
    *n = h->len + 1;
    NMT_CHECK(cap >= (size_t)h->len + 1, NMT_ERR_BUFFER_TOO_SMALL);
    memcpy(lp, h->token_lp, sizeof(float) * (h->len + 1));
    return NMT_OK;
}

/* ------------------------------------------------------------------------ */
/* Forced decoding                                                          */
/* ------------------------------------------------------------------------ */

/* Decoder inputs [BOS, y_0 .. y_{T-1}] padded to tlen, and the label of
 * position p: y_p for p < T, EOS at p == T. */
static void pack_targets(nmt_session *s, const nmt_batch *tgt, uint32_t tlen) {
    for (uint32_t i = 0; i < tgt->n; i++) {
        int32_t *row = s->h_tok + (size_t)i * tlen;
        row[0] = (int32_t)s->info.bos_id;
        for (uint32_t p = 1; p < tlen; p++)
            row[p] = p <= tgt->lens[i] ? tgt->tokens[i][p - 1] : (int32_t)s->info.pad_id;
    }
}

static int32_t label_at(const nmt_session *s, const nmt_batch *tgt, uint32_t i, uint32_t p) {
    return p < tgt->lens[i] ? tgt->tokens[i][p] : (int32_t)s->info.eos_id;
}

nmt_status nmt_session_forced(nmt_session *s, const nmt_batch *src, const nmt_batch *tgt,
                              int incremental, int log_softmax, nmt_forced_fn fn, void *user) {
    NMT_CHECK(s != NULL && src != NULL && tgt != NULL && fn != NULL && tgt->n == src->n,
              NMT_ERR_INVALID_ARGUMENT);
    if (src->n == 0) return NMT_OK;
    uint32_t longest, len;
    NMT_TRY(check_batch(s, tgt, s->info.tgt_vocab, s->limits.max_tgt_len, &longest));
    NMT_TRY(encode_batch(s, src, &len));
    const uint32_t tlen = longest + 1, n = src->n, V = s->info.tgt_vocab;
    pack_targets(s, tgt, tlen);
    if (incremental) {
        /* one row per sentence, positions one at a time through the KV cache */
        int32_t *col = s->h_col;
        for (uint32_t p = 0; p < tlen; p++) {
            for (uint32_t i = 0; i < n; i++) col[i] = s->h_tok[(size_t)i * tlen + p];
            NMT_TRY(upload_ints(s, s->io.step_tok, col, n));
            NMT_TRY(s->fam->step(s->fam_state, &s->io, n, 1, p));
            NMT_TRY(read_logprobs(s, n, log_softmax));
            for (uint32_t i = 0; i < n; i++)
                if (p <= tgt->lens[i]) fn(user, i, p, label_at(s, tgt, i, p), s->h_logits + (size_t)i * V);
        }
        return NMT_OK;
    }
    NMT_TRY(upload_ints(s, s->io.tgt_tok, s->h_tok, (size_t)n * tlen));
    NMT_TRY(s->fam->decode_full(s->fam_state, &s->io, n, tlen));
    const uint32_t total = n * tlen, chunk = s->dims.step_rows;
    for (uint32_t first = 0; first < total; first += chunk) {
        const uint32_t rows = NMT_MIN(chunk, total - first);
        NMT_TRY(s->fam->project(s->fam_state, &s->io, first, rows));
        NMT_TRY(read_logprobs(s, rows, log_softmax));
        for (uint32_t r = 0; r < rows; r++) {
            const uint32_t i = (first + r) / tlen, p = (first + r) % tlen;
            if (p <= tgt->lens[i]) fn(user, i, p, label_at(s, tgt, i, p), s->h_logits + (size_t)r * V);
        }
    }
    return NMT_OK;
}

static void add_logprob(void *user, uint32_t i, uint32_t p, int32_t label, const float *row) {
    (void)p;
    ((float *)user)[i] += row[label];
}

nmt_status nmt_session_score(nmt_session *s, const nmt_batch *src, const nmt_batch *tgt,
                             float *out_logprob) {
    NMT_CHECK(s != NULL && src != NULL && tgt != NULL && out_logprob != NULL, NMT_ERR_INVALID_ARGUMENT);
    NMT_CHECK(src->n == tgt->n, NMT_ERR_INVALID_ARGUMENT);
    for (uint32_t i = 0; i < src->n; i++) out_logprob[i] = 0.0f;
    s->n_results = 0;
    s->n_scored = 0;
    if (s->h_align != NULL) return nmt_session_score_aligned(s, src, tgt, out_logprob); /* session_align.c */
    return nmt_session_forced(s, src, tgt, 0, 1, add_logprob, out_logprob);
}
