/* SPDX-License-Identifier: MIT */
/* cli_info.c — `nmt-edge info` (model, memory, device) and `devices`. */
#include "cli.h"
#include "common.h"
#include "tool_out.h"

#include <errno.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ======================================================================== */
/* info, devices                                                            */
/* ======================================================================== */

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void kv(strbuf *out, const char *key, const char *fmt, ...) {
    char val[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(val, sizeof val, fmt, ap);
    va_end(ap);
    sb_printf(out, "%-20s %s\n", key, val);
}

static const char *yes_no(int v) { return v ? "yes" : "no"; }

/* A metadata string of the model, escaped for the terminal (tool_out.h). */
static void kv_text(strbuf *out, const char *key, const char *text) {
    char e[4 * sizeof(((nmt_model_info *)0)->family_config) + 1];
    kv(out, key, "%s", nmt_tool_escape(text, SIZE_MAX, e, sizeof e));
}

static void describe_model(strbuf *out, const char *path, const nmt_model_info *m) {
    kv(out, "model", "%s", path);
    kv(out, "format_version", "%u", m->format_version);
    kv_text(out, "architecture", m->arch);
    kv(out, "d_model", "%u", m->d_model);
    /* the fields a family's info hook leaves unset (0, "") are not its own:
     * a recurrent family (BA-NMT) has no heads, FFN, branches, fusion or
     * norm; its hyper-parameters are in family_config */
    if (m->n_heads) kv(out, "n_heads", "%u", m->n_heads);
    if (m->d_ff) kv(out, "d_ff", "%u", m->d_ff);
    kv(out, "enc_layers", "%u", m->enc_layers);
    kv(out, "dec_layers", "%u", m->dec_layers);
    kv(out, "src_vocab", "%u", m->src_vocab);
    kv(out, "tgt_vocab", "%u", m->tgt_vocab);
    if (m->enc_branches[0]) kv_text(out, "enc_branches", m->enc_branches);
    if (m->dec_branches[0]) kv_text(out, "dec_branches", m->dec_branches);
    if (strcmp(m->fusion, "gate") == 0)
        kv(out, "fusion", "gate (reduction %u)", m->gate_reduction);
    else if (m->fusion[0])
        kv_text(out, "fusion", m->fusion);
    if (m->norm[0]) kv_text(out, "norm", m->norm);
    kv(out, "shared_embeddings", "%s", yes_no(m->shared_embeddings));
    kv(out, "tied_output", "%s", yes_no(m->tied_output));
    if (m->family_config[0]) kv_text(out, "family_config", m->family_config);
    kv(out, "special_ids", "bos %u, eos %u, pad %u, unk %u", m->bos_id, m->eos_id, m->pad_id,
       m->unk_id);
    kv(out, "tokenizer", "%s",
       m->tokenizer == 0   ? "none (translate and score read ids)"
       : m->tokenizer == 1 ? "SentencePiece, shared (tokenizer.src)"
                           : "SentencePiece, source and target (tokenizer.src, tokenizer.tgt)");
    kv(out, "parameters", "%llu", (unsigned long long)m->n_params);
    kv_text(out, "dtype", m->dtype);
    kv(out, "tensors", "%u", m->n_tensors);
    kv(out, "weight_bytes", "%llu", (unsigned long long)m->weight_bytes);
    kv(out, "file_size", "%llu", (unsigned long long)m->file_size);
}

static const char *device_type(int is_gpu, int is_cpu) {
    return is_gpu ? "GPU" : is_cpu ? "CPU" : "other";
}

static void describe_device(strbuf *out, const nmt_device_info *d) {
    kv(out, "device", "%u:%u  %s", d->platform_index, d->device_index, d->device_name);
    kv(out, "platform", "%s (%s)", d->platform_name, d->vendor);
    kv(out, "driver", "%s, %s", d->driver_version, d->device_version);
    kv(out, "device_type", "%s", device_type(d->is_gpu, d->is_cpu));
    kv(out, "compute_units", "%u", d->compute_units);
    kv(out, "local_mem_bytes", "%llu%s", (unsigned long long)d->local_mem_bytes,
       d->local_mem_is_global ? " (emulated in global memory)" : "");
    kv(out, "global_mem_bytes", "%llu", (unsigned long long)d->global_mem_bytes);
    kv(out, "fp16", "%s", yes_no(d->has_fp16));
    kv(out, "subgroups", "%s", yes_no(d->has_subgroups));
    kv(out, "reductions", "%s",
       d->subgroup_reductions && d->is_cpu
           ? "subgroups (log_softmax, topk_logprobs); layernorm a work-item per row (CPU)"
       : d->subgroup_reductions ? "subgroups (layernorm, log_softmax, topk_logprobs)"
       : d->has_subgroups       ? "work-group (subgroups off: NMT_EDGE_NO_SUBGROUPS, or no size query)"
                                : "work-group (the device has no subgroups)");
    kv(out, "gemm", "%s", GEMM_NAMES[(unsigned)d->gemm < 3 ? d->gemm : 0]);
    kv(out, "int_dot", "%s", yes_no(d->has_int_dot));
    kv(out, "x86_vnni", "%s", yes_no(d->has_x86_vnni));
    kv(out, "int8_products", "%s", d->int8_products);
    /* runtime/ops/ops_chain.c: what a session turns on (nmt_ops_chain_enable) */
    kv(out, "decoding_steps", "%s",
       !d->is_cpu ? "a launch per op (few-row ops are chained on CPU devices only)"
       : nmt_env_flag("NMT_EDGE_NO_PRODUCT_CHAIN")
           ? "a launch per op (NMT_EDGE_NO_PRODUCT_CHAIN)"
           : "one launch for fp32 and int8-weight products of up to 4 rows and the embeddings, norms, "
             "attentions, HySAN gates, top-k and beam step between them (gemm_chain, gemm_q8_chain, gemm_i8_chain; off: "
             "NMT_EDGE_NO_PRODUCT_CHAIN=1)");
}

/* The precision of the products (docs/PORTING.md, "Fast paths: fp16
 * compute"): fp16 compute is on exactly when its plan needs fewer device
 * bytes than fp32's (fp16 weights that stay half), on a device with
 * cl_khr_fp16 (di NULL: no device) unless turned off.  Then *device_bytes
 * (device_bytes above: fp32 weights, what nmt_session_arena_size counts
 * without a device) becomes the fp16 plan's exact count, printed as
 * fp16_device_bytes. */
static void describe_products(strbuf *out, const cli_opts *o, const nmt_limits *lim, const nmt_model_info *m,
                              const nmt_device_info *di, uint64_t *device_bytes) {
    nmt_session_params sp = session_params(o, lim);
    const int off = sp.fp16_compute == NMT_FP16_OFF;
    size_t arena;
    uint64_t half_bytes = 0;
    sp.fp16_compute = NMT_FP16_ON;
    const int saves = nmt_session_arena_size(&sp, &arena, &half_bytes) == NMT_OK && half_bytes < *device_bytes;
    const char *why = NULL;
    /* int8 models: whether any class runs int8 x int8 decides the activations' side */
    const int i8_all_fp32 = di == NULL || di->int8x8_classes == 0;
    if (!saves && strcmp(m->dtype, "int8") == 0)
        why = i8_all_fp32 ? "int8 weights (per-row scales) x fp32 activations, fp32 accumulation"
                          : "int8 weights (per-row scales); the int8 x int8 products of int8_products quantize "
                            "their activations per row (int32 sums), the others take fp32 activations";
    else if (!saves)
        why = "fp32";
    else if (off)
        why = "fp32 (fp16 weights converted at load: --no-fp16 or NMT_EDGE_NO_FP16)";
    else if (di == NULL)
        why = "fp32 without a device; fp16 compute on a device with cl_khr_fp16";
    else if (!di->has_fp16)
        why = "fp32 (fp16 weights converted at load: the device has no cl_khr_fp16)";
    if (why != NULL) {
        kv(out, "products", "%s", why);
    } else {
        kv(out, "products", "fp16 compute: half weights and half-rounded activations, fp32 accumulation "
                            "(cl_khr_fp16; off: --no-fp16 or NMT_EDGE_NO_FP16=1)");
        *device_bytes = half_bytes;
        kv(out, "fp16_device_bytes", "%llu", (unsigned long long)half_bytes);
    }
    kv(out, "softmax_norm_loss", "fp32 (attention softmax, layer norm, log-softmax)");
}

int cmd_info(const cli_opts *o) {
    nmt_model_info mi;
    errno = 0;
    nmt_status st = nmt_model_inspect_file(o->model, &mi);
    if (st != NMT_OK) return model_error(o->model, st);
    nmt_limits lim = limits_from(o, o->beam);
    size_t arena;
    uint64_t device_bytes = 0;
    if (model_sizes(o, &lim, &arena, &device_bytes) != 0) return 1;

    strbuf out = {0};
    describe_model(&out, o->model, &mi);
    kv(&out, "limits", "max_src_len %u, max_tgt_len %u, batch %u, beam %u", lim.max_src_len,
       lim.max_tgt_len ? lim.max_tgt_len : lim.max_src_len + 50u, lim.max_batch, lim.max_beam);
    kv(&out, "arena_bytes", "%zu", arena);
    kv(&out, "device_bytes", "%llu", (unsigned long long)device_bytes);
    kv(&out, "device_handle_bytes", "%zu", nmt_device_footprint());
    int rc = 0, fits = 1;
    if (!o->no_device) {
        runtime rt = {0};
        rc = open_device(o, &rt);
        if (rc == 0) {
            nmt_device_info di;
            nmt_device_get_info(rt.dev, &di);
            describe_device(&out, &di);
            describe_products(&out, o, &lim, &mi, &di, &device_bytes);
            kv(&out, "max_alloc_bytes", "%llu", (unsigned long long)di.max_alloc_bytes);
            fits = di.global_mem_bytes == 0 || device_bytes <= di.global_mem_bytes;
            kv(&out, "session_fits", "%s", fits ? "yes" : "no (device_bytes > global_mem_bytes)");
        }
        if (rc == 0) rc = write_out(&out);
        /* the report is written; limits the device cannot hold are an error */
        if (rc == 0 && !fits)
            rc = check_memory("session arena", arena, device_bytes, rt.dev, CLI_SESSION_OPTIONS);
        close_runtime(&rt);
    } else {
        describe_products(&out, o, &lim, &mi, NULL, &device_bytes);
        rc = write_out(&out);
    }
    /* likewise an arena larger than this host lets the process take */
    if (rc == 0) rc = check_memory("session arena", arena, 0, NULL, CLI_SESSION_OPTIONS);
    free(out.p);
    return rc;
}

int cmd_warmup(const cli_opts *o) {
    if (o->no_cache) {
        fprintf(stderr, PROG ": warmup: --no-cache leaves nothing to write\n");
        return 2;
    }
    if (o->no_device) {
        fprintf(stderr, PROG ": warmup: --no-device leaves nothing to compile\n");
        return 2;
    }
    cli_opts w = *o;
    w.fill_cache = 1;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    runtime rt = {0};
    int rc = open_session(&w, o->beam, &rt);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (rc == 0) {
        nmt_device_info di;
        nmt_device_get_info(rt.dev, &di);
        const char *dir = getenv("NMT_EDGE_CACHE_DIR"); /* as tools/tool_env.c chose it */
        if (dir == NULL || dir[0] == '\0') dir = rt.cache_dir;
        printf("warmed up %s for %s in %.1f s; program cache %s\n", o->model, di.device_name,
               (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec),
               dir[0] ? dir : "(none: set NMT_EDGE_CACHE_DIR or HOME)");
        if (fflush(stdout) != 0) rc = 1;
    }
    close_runtime(&rt);
    return rc;
}

static void list_one(void *user, uint32_t platform, uint32_t device, const char *platform_name,
                     const char *device_name, int is_gpu) {
    sb_printf(user, "%u:%u  %s / %s  (%s)\n", platform, device, platform_name, device_name,
              is_gpu ? "GPU" : "non-GPU");
}

int cmd_devices(const cli_opts *o) {
    (void)o;
    strbuf out = {0};
    nmt_status st = nmt_device_list(list_one, &out);
    int rc = st == NMT_OK ? write_out(&out) : report_status("cannot list devices", st, NULL);
    free(out.p);
    return rc;
}
