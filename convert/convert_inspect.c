/* SPDX-License-Identifier: MIT */
/* convert_inspect.c — nmt-edge-convert info and verify: describe a model
 * file, and check it on a device with a test forward. */
#include "convert_cmds.h"
#include "tool_env.h"
#include "tool_out.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* info                                                                     */
/* ------------------------------------------------------------------------ */

typedef struct limits_args {
    uint32_t max_batch, max_beam, max_src_len, max_tgt_len;
    const char *device;
} limits_args;

#define LA(field) offsetof(limits_args, field)

static const opt_def info_opts[] = {
    {"max-batch", 0, OPT_U32, LA(max_batch), "N", NULL, "sentences per call (default 1)", 1, 1u << 20},
    {"max-beam", 0, OPT_U32, LA(max_beam), "N", NULL, "beam width (default 4)", 1, 1024},
    {"max-src-len", 0, OPT_U32, LA(max_src_len), "N", NULL, "source tokens per sentence (default 256)", 1, 1u << 20},
    {"max-tgt-len", 0, OPT_U32, LA(max_tgt_len), "N", NULL, "target tokens (default max-src-len + 50)", 1, 1u << 20},
};

static void info_help(FILE *out) {
    fprintf(out,
            "usage: " PROG " info MODEL [--max-batch N --max-beam N --max-src-len N --max-tgt-len N]\n\n"
            "Describe a model file: architecture and hyper-parameters, every metadata key,\n"
            "every tensor (dtype, shape, bytes, CRC), the int8 scale range, and the host\n"
            "arena and device bytes a session needs under the given limits.\n"
            "Exit status 0 when the file is valid, 1 otherwise.\n\noptions:\n");
    print_opts(out, info_opts, sizeof info_opts / sizeof info_opts[0]);
}

static int single_path(const char *cmd, const char **pos, int n_pos) {
    if (n_pos != 1) {
        fprintf(stderr, PROG " %s: exactly one MODEL file is required (see " PROG " %s --help)\n", cmd, cmd);
        return 0;
    }
    (void)pos;
    return 1;
}

int cmd_info(int argc, char **argv) {
    limits_args a;
    memset(&a, 0, sizeof a);
    const char *pos[2];
    int n_pos = 0;
    switch (parse_opts_pos("info", info_opts, sizeof info_opts / sizeof info_opts[0], argc, argv, &a, pos, 2, &n_pos)) {
    case PARSE_HELP: info_help(stdout); return 0;
    case PARSE_ERROR: return EXIT_USAGE;
    case PARSE_OK: break;
    }
    if (!single_path("info", pos, n_pos)) return EXIT_USAGE;
    model_image m;
    if (!read_image("info", pos[0], &m)) return 1;
    int rc = 0;
    nmt_status s = nmt_file_open(&m.f, m.data, m.size, 0);
    printf("file: %s (%zu bytes)\n", m.path, m.size);
    char why[600];
    if (s != NMT_OK) {
        model_problem(m.data, m.size, s, why, sizeof why);
        printf("structure: FAIL (%s)\n", why);
        fprintf(stderr, PROG " info: '%s': %s\n", m.path, why);
        free_image(&m);
        return 1;
    }
    printf("format: version %u, %u metadata records, %u tensors\n", m.f.h.version, m.f.h.n_meta, m.f.h.n_tensors);

    nmt_model_info info;
    nmt_status si = nmt_model_inspect(m.data, m.size, &info);
    if (si == NMT_OK) { /* the strings come from the file: escaped (tool_out.h) */
        char e[5][4 * sizeof info.family_config + 1];
        printf("architecture: %s\n", nmt_tool_escape(info.arch, SIZE_MAX, e[0], sizeof e[0]));
        printf("  d_model %u, n_heads %u, d_ff %u, layers %u + %u\n", info.d_model, info.n_heads, info.d_ff,
               info.enc_layers, info.dec_layers);
        printf("  vocab src %u tgt %u, norm %s, fusion %s (gate r %u)\n", info.src_vocab, info.tgt_vocab,
               nmt_tool_escape(info.norm, SIZE_MAX, e[1], sizeof e[1]),
               nmt_tool_escape(info.fusion, SIZE_MAX, e[2], sizeof e[2]), info.gate_reduction);
        printf("  branches: encoder \"%s\", decoder \"%s\"\n",
               nmt_tool_escape(info.enc_branches, SIZE_MAX, e[3], sizeof e[3]),
               nmt_tool_escape(info.dec_branches, SIZE_MAX, e[4], sizeof e[4]));
        printf("  shared embeddings %d, tied output %d, tokenizer %d\n", info.shared_embeddings, info.tied_output,
               info.tokenizer);
        printf("  ids: bos %u eos %u pad %u unk %u\n", info.bos_id, info.eos_id, info.pad_id, info.unk_id);
        printf("  parameters %llu, weight bytes %llu, dtype %s\n", (unsigned long long)info.n_params,
               (unsigned long long)info.weight_bytes, nmt_tool_escape(info.dtype, SIZE_MAX, e[0], sizeof e[0]));
    } else {
        model_problem(m.data, m.size, si, why, sizeof why);
        printf("architecture: FAIL (%s)\n", why);
        rc = 1;
    }

    printf("metadata:\n");
    for (uint32_t i = 0; i < m.f.h.n_meta; i++) {
        nmt_meta_view mv;
        if (nmt_file_meta_at(&m.f, i, &mv) != NMT_OK) break;
        char key[4 * sizeof mv.key + 1], str[4 * 200 + 1];
        nmt_tool_escape(mv.key, SIZE_MAX, key, sizeof key);
        if (mv.type == NMT_META_I64) printf("  %-24s i64 %lld\n", key, (long long)mv.i64);
        else if (mv.type == NMT_META_F64) printf("  %-24s f64 %.17g\n", key, mv.f64);
        else
            printf("  %-24s str \"%s\"\n", key,
                   nmt_tool_escape(mv.str, mv.str_len > 200 ? 200 : mv.str_len, str, sizeof str));
    }

    printf("tensors:\n");
    uint32_t bad_crc = 0, n_i8 = 0;
    float smin = INFINITY, smax = 0.0f;
    uint64_t bytes_by[NMT_DTYPE_COUNT_] = {0};
    for (uint32_t i = 0; i < m.f.h.n_tensors; i++) {
        nmt_tensor_view v;
        if (nmt_file_tensor_at(&m.f, i, &v) != NMT_OK) break;
        nmt_tensor_entry e;
        memcpy(&e, m.data + m.f.h.table_offset + (size_t)i * NMT_TENSOR_ENTRY_SIZE, sizeof e);
        const int crc_ok = nmt_crc32(0, v.data, (size_t)v.nbytes) == e.crc;
        bad_crc += !crc_ok;
        bytes_by[v.dtype] += v.nbytes;
        char sh[64], extra[96] = "";
        shape_str(&v, sh, sizeof sh);
        if (v.dtype == NMT_DTYPE_I8) {
            float lo = INFINITY, hi = 0.0f;
            for (uint32_t rr = 0; rr < v.shape[0]; rr++) {
                float sc;
                memcpy(&sc, (const unsigned char *)v.scales + 4 * (size_t)rr, sizeof sc);
                lo = fminf(lo, sc);
                hi = fmaxf(hi, sc);
            }
            smin = fminf(smin, lo);
            smax = fmaxf(smax, hi);
            n_i8++;
            snprintf(extra, sizeof extra, "  scales [%.4g, %.4g]", lo, hi);
        }
        char name[4 * NMT_TENSOR_NAME_MAX + 1];
        printf("  %-40s %-3s %-14s %10llu%s%s\n", nmt_tool_escape(v.name, SIZE_MAX, name, sizeof name),
               nmt_dtype_table[v.dtype].name, sh,
               (unsigned long long)v.nbytes, crc_ok ? "" : "  CRC MISMATCH", extra);
    }
    printf("bytes by dtype:");
    for (int d = 0; d < NMT_DTYPE_COUNT_; d++)
        if (bytes_by[d]) printf(" %s %llu", nmt_dtype_table[d].name, (unsigned long long)bytes_by[d]);
    printf("\n");
    if (n_i8) printf("int8 scales: %u tensors, min %.6g, max %.6g\n", n_i8, smin, smax);
    else printf("int8 scales: none (no I8 tensors)\n");
    nmt_status sv = nmt_file_open(&m.f, m.data, m.size, 1);
    if (sv == NMT_OK && bad_crc == 0) {
        printf("checksums: ok (header, metadata, table and %u tensors)\n", m.f.h.n_tensors);
    } else {
        char detail[600], shown[4 * sizeof detail];
        nmt_file vf;
        nmt_file_open_why(&vf, m.data, m.size, 1, detail, sizeof detail);
        printf("checksums: FAIL (%s; %u tensor%s mismatched%s%s)\n", nmt_status_str(sv), bad_crc,
               bad_crc == 1 ? "" : "s", detail[0] ? "; first: " : "",
               nmt_tool_escape(detail, SIZE_MAX, shown, sizeof shown));
        rc = 1;
    }

    if (si == NMT_OK) {
        nmt_session_params p;
        memset(&p, 0, sizeof p);
        p.model_data = m.data;
        p.model_size = m.size;
        p.limits.max_batch = a.max_batch;
        p.limits.max_beam = a.max_beam;
        p.limits.max_src_len = a.max_src_len;
        p.limits.max_tgt_len = a.max_tgt_len;
        size_t arena = 0;
        uint64_t dev_bytes = 0;
        nmt_status sa = nmt_session_arena_size(&p, &arena, &dev_bytes);
        if (sa == NMT_OK)
            printf("session (max_batch %u, max_beam %u, max_src_len %u, max_tgt_len %u; 0 = default):\n"
                   "  arena bytes %zu, device bytes %llu\n",
                   a.max_batch, a.max_beam, a.max_src_len, a.max_tgt_len, arena, (unsigned long long)dev_bytes);
        else {
            model_problem(m.data, m.size, sa, why, sizeof why);
            printf("session: FAIL (%s)\n", why);
            rc = 1;
        }
    }
    if (rc != 0) fprintf(stderr, PROG " info: '%s' is not a valid model\n", m.path);
    free_image(&m);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* verify                                                                   */
/* ------------------------------------------------------------------------ */

static const opt_def verify_opts[] = {
    {"device", 0, OPT_STR, LA(device), "SPEC", NULL,
     "OpenCL device: P:D, gpu, cpu, accelerator or a name substring (default $NMT_EDGE_DEVICE, "
     "else the runtime's default)", 0, 0},
};

static void verify_help(FILE *out) {
    fprintf(out,
            "usage: " PROG " verify MODEL [--device SPEC]\n\n"
            "Check a model file: structure and every CRC-32, the architecture, then open\n"
            "a session on the device and translate a short token sequence, checking that\n"
            "the scores are finite.  Prints 'OK' and exits 0, or prints the failing\n"
            "step and the runtime's status string and exits 1.\n\noptions:\n");
    print_opts(out, verify_opts, sizeof verify_opts / sizeof verify_opts[0]);
}

/* "verify: 'PATH': STEP: STATUS[: why the model is refused]" */
static int verify_fail(const model_image *m, const char *step, nmt_status s) {
    char why[600];
    model_problem(m->data, m->size, s, why, sizeof why);
    fprintf(stderr, PROG " verify: '%s': %s: %s\n", m->path, step, why);
    return 1;
}

int cmd_verify(int argc, char **argv) {
    limits_args a;
    memset(&a, 0, sizeof a);
    const char *pos[2];
    int n_pos = 0;
    switch (parse_opts_pos("verify", verify_opts, sizeof verify_opts / sizeof verify_opts[0], argc, argv, &a, pos, 2,
                           &n_pos)) {
    case PARSE_HELP: verify_help(stdout); return 0;
    case PARSE_ERROR: return EXIT_USAGE;
    case PARSE_OK: break;
    }
    if (!single_path("verify", pos, n_pos)) return EXIT_USAGE;
    model_image m;
    if (!read_image("verify", pos[0], &m)) return 1;
    int rc = 1;
    void *dev_mem = NULL, *arena = NULL;
    nmt_device *dev = NULL;
    nmt_session *sess = NULL;
    nmt_status s = nmt_file_open(&m.f, m.data, m.size, 1);
    if (s != NMT_OK) {
        rc = verify_fail(&m, "structure/checksums", s);
        goto done;
    }
    printf("structure and checksums: ok (%u tensors)\n", m.f.h.n_tensors);
    nmt_model_info info;
    s = nmt_model_inspect(m.data, m.size, &info);
    if (s != NMT_OK) {
        rc = verify_fail(&m, "architecture", s);
        goto done;
    }
    char arch[4 * sizeof info.arch + 1], dtype[4 * sizeof info.dtype + 1];
    printf("architecture: ok (%s, d_model %u, %u + %u layers, dtype %s)\n",
           nmt_tool_escape(info.arch, SIZE_MAX, arch, sizeof arch), info.d_model, info.enc_layers, info.dec_layers,
           nmt_tool_escape(info.dtype, SIZE_MAX, dtype, sizeof dtype));

    nmt_device_params dp;
    char cache_dir[4096];
    memset(&dp, 0, sizeof dp);
    nmt_tool_device_params(&dp, a.device, cache_dir, sizeof cache_dir);
    size_t fp = (nmt_device_footprint() + 63) / 64 * 64;
    dev_mem = aligned_alloc(64, fp ? fp : 64);
    if (dev_mem == NULL) {
        fprintf(stderr, PROG " verify: out of memory\n");
        goto done;
    }
    nmt_tool_signals sigs;
    nmt_tool_signals_save(&sigs);
    s = nmt_device_open(&dp, dev_mem, fp, &dev);
    nmt_tool_signals_restore(&sigs); /* the OpenCL runtime may have installed its own (tool_out.h) */
    if (s != NMT_OK) {
        dev = NULL;
        rc = verify_fail(&m, "device", s);
        goto done;
    }
    nmt_session_params p;
    memset(&p, 0, sizeof p);
    p.model_data = m.data;
    p.model_size = m.size;
    p.limits.max_batch = 1;
    p.limits.max_beam = 2;
    p.limits.max_src_len = 16;
    p.limits.max_tgt_len = 8;
    p.fp16_compute = nmt_tool_fp16_compute(0); /* the products nmt-edge would run */
    size_t need = 0;
    s = nmt_session_arena_size(&p, &need, NULL);
    if (s == NMT_OK) {
        arena = aligned_alloc(NMT_ARENA_ALIGNMENT, (need + NMT_ARENA_ALIGNMENT - 1) / NMT_ARENA_ALIGNMENT *
                                                       NMT_ARENA_ALIGNMENT);
        if (arena == NULL) {
            fprintf(stderr, PROG " verify: out of memory\n");
            goto done;
        }
        s = nmt_session_create(dev, &p, arena, need, &sess);
    }
    if (s != NMT_OK) {
        sess = NULL;
        rc = verify_fail(&m, "session", s);
        goto done;
    }
    int32_t toks[6];
    for (uint32_t i = 0; i < 6; i++) toks[i] = (int32_t)((info.unk_id + 1 + 3 * i) % info.src_vocab);
    const int32_t *rows[1] = {toks};
    const uint32_t lens[1] = {6};
    nmt_batch b = {rows, lens, 1};
    nmt_decode_opts o;
    memset(&o, 0, sizeof o);
    o.beam = 2;
    o.max_len = 8;
    s = nmt_session_translate(sess, &b, &o);
    const int32_t *out = NULL;
    uint32_t out_len = 0;
    float score = NAN, logprob = NAN;
    if (s == NMT_OK) s = nmt_session_result(sess, 0, 0, &out, &out_len, &score, &logprob);
    if (s != NMT_OK) {
        rc = verify_fail(&m, "test translation", s);
        goto done;
    }
    float lp = NAN;
    s = nmt_session_score(sess, &b, &b, &lp);
    if (s != NMT_OK) {
        rc = verify_fail(&m, "test scoring", s);
        goto done;
    }
    if (!isfinite(score) || !isfinite(logprob) || !isfinite(lp)) {
        fprintf(stderr, PROG " verify: '%s': test forward: non-finite score (score %g, logprob %g, forced %g)\n",
                m.path, score, logprob, lp);
        goto done;
    }
    printf("test forward: ok (%u output tokens, score %.4f, logprob %.4f, forced logprob %.4f)\n", out_len, score,
           logprob, lp);
    printf("OK\n");
    rc = 0;
done:
    if (sess) nmt_session_destroy(sess);
    if (dev) nmt_device_close(dev);
    free(arena);
    free(dev_mem);
    free_image(&m);
    return rc;
}
