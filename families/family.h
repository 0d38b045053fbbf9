/* SPDX-License-Identifier: MIT */
/* family.h — what a model family (Transformer/HySAN now; MG-SA, phrasal
 * attention and BA-NMT later) declares once and provides to every tool.
 *
 * A family is one `nmt_family` record in the registry (families/registry.c),
 * found by the `arch` string of a model file.  It declares
 *   - its hyper-parameters: a table of `nmt_hparam` (metadata key, command-
 *     line flag, type, default, range, help) read by the generic parser,
 *     writer and `info` printer below, plus one `finish` hook for the checks
 *     that involve several keys;
 *   - its tensors: a catalogue walker that emits one `nmt_tensor_decl` per
 *     tensor (name, shape, whether it may be stored int8, how a random model
 *     initialises it, where it lands in the family's weight struct);
 *   - its runtime: parse / plan / encode / step / reorder / decode_full /
 *     project, written with the shared forward of the family's folder.
 * The session (runtime/session/session.c), the trainer's model
 * (train/families/<name>/) and the converter (writer/random_model.c, convert/) all start
 * from nmt_family_find().  docs/ADDING-A-FAMILY.md walks through a new one.
 * Nothing here is public. */
#ifndef NMT_FAMILY_H
#define NMT_FAMILY_H

#include "arena.h"
#include "format.h"
#include "layers.h"
#include "ops.h"
#include "platform.h"

typedef struct nmt_plan_ctx nmt_plan_ctx;

/* ------------------------------------------------------------------------ */
/* Hyper-parameters                                                         */
/* ------------------------------------------------------------------------ */

typedef enum nmt_hp_type {
    NMT_HP_U32,   /* integer in [lo, hi], stored uint32_t; metadata i64 */
    NMT_HP_FLAG,  /* 0 or 1, stored int; metadata i64 */
    NMT_HP_F32,   /* real in (lo, hi) exclusive when lo < hi, stored float; metadata f64 */
    NMT_HP_ENUM,  /* one of `choices`, stored int (index); metadata str */
    NMT_HP_TEXT,  /* free text (the family's finish parses it), stored char[text_cap] */
} nmt_hp_type;

typedef struct nmt_hparam {
    const char *key;       /* metadata key, e.g. "d_model" */
    const char *flag;      /* command-line name without "--", e.g. "d-model" */
    nmt_hp_type type;
    size_t off;            /* offsetof() in the family's config struct */
    int required;          /* 1: absent is NMT_ERR_MODEL_ARCH; 0: `def` / `def_str` */
    int computed_default;  /* 1: absent leaves the field to finish() (e.g. sqrt(d_model)) */
    double def;            /* U32 / FLAG / F32 default */
    const char *def_str;   /* ENUM / TEXT default */
    double lo, hi;         /* U32: inclusive range; F32: exclusive range (lo < hi) */
    const char *const *choices; /* ENUM: NULL-terminated */
    size_t text_cap;       /* TEXT: bytes of the char array */
    const char *help;      /* one line for --help and docs */
} nmt_hparam;

/* ------------------------------------------------------------------------ */
/* Tensors                                                                  */
/* ------------------------------------------------------------------------ */

typedef enum nmt_init {
    NMT_INIT_UNIFORM,  /* U(-b, b), b = weight_scale / sqrt(fan_in) */
    NMT_INIT_LN_GAIN,  /* 1 + U(-0.05, 0.05) */
    NMT_INIT_LN_BIAS,  /* U(-0.05, 0.05) */
} nmt_init;

typedef enum nmt_role { NMT_ROLE_WEIGHT, NMT_ROLE_BIAS } nmt_role;

typedef struct nmt_tensor_decl {
    char name[NMT_TENSOR_NAME_MAX];
    uint32_t ndim, shape[2];  /* shape[1] = 0 for 1-D */
    int quantizable;          /* may be stored int8 (per-row scales) or fp16 */
    nmt_init init;
    uint32_t fan_in;          /* for NMT_INIT_UNIFORM */
    /* Where it lands: dst->w (weight) or dst->b (bias) of the family's
     * weight struct; NULL when the walker was given no struct. */
    nmt_lin *dst;
    nmt_role role;
    /* Fused blocks: parts 0..n_parts-1 of equal shape, stacked along dim 0
     * into one dst (e.g. q, k, v -> one [3d, d] weight); n_parts = 1 else. */
    uint32_t part, n_parts;
} nmt_tensor_decl;

/* For a family's finish(cfg, present, why, why_cap): unless cond, return
 * NMT_ERR_MODEL_ARCH with the reason (printf format and arguments) in why. */
#define NMT_FINISH_CHECK(cond, ...)                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            nmt_why(why, why_cap, __VA_ARGS__);                                \
            return NMT_ERR_MODEL_ARCH;                                         \
        }                                                                      \
    } while (0)

/* Called once per tensor in file order; a non-OK status stops the walk. */
typedef nmt_status (*nmt_tensor_fn)(void *ctx, const nmt_tensor_decl *t);

/* For a catalogue walker: fn(ctx, decl) of the tensor named by fmt, of
 * shape [d0] (ndim 1) or [d0, d1] (ndim 2; only these are quantizable),
 * with its init, fan_in, dst / role and part of n_parts (families/weights.c). */
nmt_status nmt_tensor_emit(nmt_tensor_fn fn, void *ctx, nmt_lin *dst, nmt_role role, uint32_t ndim, uint32_t d0,
                           uint32_t d1, nmt_init init, uint32_t fan_in, uint32_t part, uint32_t n_parts,
                           const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 12, 13)))
#endif
    ;

/* ------------------------------------------------------------------------ */
/* Runtime                                                                  */
/* ------------------------------------------------------------------------ */

/* Shapes a family is planned for (session limits turned into rows). */
typedef struct nmt_plan_dims {
    uint32_t max_batch;     /* sentences per call */
    uint32_t max_beam;
    uint32_t src_cap;       /* source positions incl. EOS (max_src_len + 1) */
    uint32_t tgt_cap;       /* decoder positions incl. BOS (max_tgt_len + 1) */
    uint32_t step_rows;     /* max_batch * max_beam: rows of one decoder step */
    /* alignments (nmt_session_params.alignment; family.alignments): align
     * nonzero when the session wants them; the decoder layer and head
     * (1-based; 0: the last layer, the mean over heads) as the caller gave
     * them (the family checks them against its configuration) */
    int align;
    uint32_t align_layer, align_head;
} nmt_plan_dims;

/* Device buffers shared by session and family.  Int buffers hold cl_int. */
typedef struct nmt_io_bufs {
    nmt_buf src_tok;   /* int [max_batch, src_cap]: padded source ids (+EOS) */
    nmt_buf src_len;   /* int [max_batch]: source length incl. EOS */
    nmt_buf step_tok;  /* int [2 * step_rows]: decoder input token per row (the first
                          step_rows), then the rows' beam scores as float bits (topk) */
    nmt_buf reorder;   /* int [step_rows]: beam back-pointers (row -> source row); during
                          reorder with h_reorder set, only after nmt_io_reorder_upload */
    nmt_buf tgt_tok;   /* int [max_batch, tgt_cap]: teacher-forced decoder inputs */
    nmt_buf logits;    /* float [step_rows, tgt_vocab] */
    nmt_buf align;     /* float [step_rows, src_cap]: a step's alignment rows (dims.align; else absent) */
    /* host, during encode only: the batch's phrase spans (validated; NULL:
     * none) and the source lengths incl. EOS */
    const struct nmt_spans *spans;
    const int32_t *h_src_len;
    /* host, during reorder only: the back-pointers, so that a family may
     * reorder on the host what it keeps there (the Transformer's K|V
     * table).  Set: io->reorder is NOT yet written (a blocking write per
     * beam step saved where nothing gathers); a family that gathers on the
     * device calls nmt_io_reorder_upload first.  NULL: io->reorder holds
     * them and the family gathers everything (tests compare the two). */
    const int32_t *h_reorder;
    /* 1 during a reorder whose back-pointers the device wrote into
     * io->reorder (steps chained on the device, h_reorder NULL): a family
     * with a table it permutes through them may keep it, permuting it on
     * the device (nmt_op_kv_table_permute); the rest is gathered. */
    int reorder_on_device;
} nmt_io_bufs;

/* During reorder: write io->h_reorder's `rows` back-pointers into
 * io->reorder (nothing when h_reorder is NULL: already there). */
nmt_status nmt_io_reorder_upload(nmt_ops *ops, const nmt_io_bufs *io, uint32_t rows);

/* Phrase spans of a batch (nmt_session_set_spans), the caller's arrays. */
typedef struct nmt_spans {
    const nmt_span *const *spans;
    const uint32_t *n_spans;
    uint32_t n;
} nmt_spans;

#define NMT_FAMILY_CFG_BYTES 2048
/* Room for a family's reason (finish) in bytes. */
#define NMT_FAMILY_WHY_BYTES 256

typedef struct nmt_family {
    const char *arch;     /* the metadata value of "arch" */
    const char *summary;  /* one line for --help and docs */
    size_t cfg_size;      /* <= NMT_FAMILY_CFG_BYTES */

    /* --- declaration (used by every tool) --- */
    const nmt_hparam *hparams;
    uint32_t n_hparams;
    /* Cross-key checks and computed defaults after the table was read;
     * `present` has bit i set when hparams[i] was in the file.
     * NMT_ERR_MODEL_ARCH for an invalid combination, saying which keys and
     * values in why[0, why_cap) (nmt_why; NMT_FAMILY_WHY_BYTES is enough),
     * e.g. "bos_id 9999 must be < tgt_vocab 64". */
    nmt_status (*finish)(void *cfg, uint64_t present, char *why, size_t why_cap);
    /* Every tensor the configuration needs, in file order.  `weights` is the
     * family's weight struct to point decl.dst into, or NULL. */
    nmt_status (*catalogue)(const void *cfg, void *weights, nmt_tensor_fn fn, void *ctx);
    /* The architecture part of nmt_model_info. */
    void (*info)(const void *cfg, nmt_model_info *info);
    /* The defaults of `nmt-edge-convert random --arch <arch>` where they
     * differ from the table's ("flag=value" words, e.g. "d-model=32
     * heads=4"): a small model that opens.  Required keys not listed must
     * be given on the command line.  NULL: the table's defaults only. */
    const char *random_args;

    /* --- runtime --- */
    /* Reserve host memory from `a` and create device buffers through
     * nmt_plan_buffer().  Runs twice with identical requests: measuring
     * (nmt_arena_measuring(a), buffers not created) and for real.  `cfg` was
     * filled by nmt_family_parse on this file.  Returns the state in *state. */
    nmt_status (*plan)(nmt_plan_ctx *pc, const nmt_file *f, const void *cfg,
                       const nmt_plan_dims *dims, nmt_arena *a, void **state);
    /* Encoder over n sentences padded to `len` positions (tokens and lengths
     * already in io->src_tok / io->src_len); keeps what the decoder needs. */
    nmt_status (*encode)(void *state, const nmt_io_bufs *io, uint32_t n, uint32_t len);
    /* One incremental decoder step at position t for `rows` rows (row r
     * belongs to sentence r / group), input ids in io->step_tok, logits
     * [rows, V] into io->logits.  `rows` may shrink from one step to the
     * next (finished sentences at the end of the batch drop out; session.c):
     * per-row state must live at strides that do not depend on `rows`, and
     * rows at or past `rows` must be left alone. */
    nmt_status (*step)(void *state, const nmt_io_bufs *io, uint32_t rows, uint32_t group, uint32_t t);
    /* Reorder decoder state rows after a beam step: new row r takes old row
     * io->reorder[r] (on the device after nmt_io_reorder_upload, or
     * io->h_reorder[r] on the host); positions [0, t] are live. */
    nmt_status (*reorder)(void *state, const nmt_io_bufs *io, uint32_t rows, uint32_t t);
    /* Teacher-forced decoder over n sentences of tlen positions (inputs in
     * io->tgt_tok); leaves final hidden states for nmt_family.project. */
    nmt_status (*decode_full)(void *state, const nmt_io_bufs *io, uint32_t n, uint32_t tlen);
    /* Output projection of `rows` rows of the teacher-forced hidden states
     * starting at row `first`, into io->logits. */
    nmt_status (*project)(void *state, const nmt_io_bufs *io, uint32_t first, uint32_t rows);
    /* 1: plan honours dims->align and step writes io->align (when present):
     * row r, column j = the probability of source position j (EOS
     * included, 0 past a sentence's length) for the token step predicts; 0:
     * a session asking for alignments gets NMT_ERR_UNSUPPORTED. */
    int alignments;
    /* Release family-owned OpenCL objects other than session buffers. */
    void (*release)(void *state);
    /* 1: every 2-D weight is read through nmt_layer_matmul / nmt_layer_embed
     * (layers.h), so fp16 weights may stay fp16 on the device (fp16
     * compute, nmt_session_params.fp16_compute); 0: they become fp32. */
    int fp16_weights;
    /* 0 when the model's sources are not followed by eos_id (the session
     * packs an empty source as eos_id alone all the same); NULL: they are. */
    int (*source_eos)(const void *cfg);
} nmt_family;

/* ------------------------------------------------------------------------ */
/* Registry and generic helpers (families/registry.c)                       */
/* ------------------------------------------------------------------------ */

/* The family of an arch string; NULL when unknown. */
const nmt_family *nmt_family_find(const char *arch);
/* Registered families, i = 0 .. ; NULL past the end. */
const nmt_family *nmt_family_at(uint32_t i);

/* The family of a model file ("arch" key): NMT_ERR_MODEL_ARCH when the key
 * is missing or names no family (f->why says which and lists the known). */
nmt_status nmt_family_of(const nmt_file *f, const nmt_family **out);

/* The registered arch names, "transformer, mgsa, phrase", into buf[cap]. */
void nmt_family_names(char *buf, size_t cap);

/* Read every hyper-parameter of `fam` from f into cfg (cfg_size bytes,
 * zeroed first), then fam->finish.  Tensors are not looked at.  A refusal
 * names the key, its value and what is allowed in f->why. */
nmt_status nmt_family_parse(const nmt_family *fam, const nmt_file *f, void *cfg);

/* Check every tensor of the catalogue against f (name, shape, dtype F32 /
 * F16 / I8: nmt_file_expect; the tensor, expected and found in f->why).
 * *any_q8 (optional) is set when some 2-D tensor is stored I8. */
nmt_status nmt_family_check_tensors(const nmt_family *fam, const void *cfg, const nmt_file *f,
                                    int *any_q8);

/* A hyper-parameter's value in cfg as metadata: U32/FLAG as i64, F32 as f64,
 * ENUM/TEXT as a string (pointer into the table or cfg). */
typedef struct nmt_hp_value {
    nmt_meta_type type;
    int64_t i64;
    double f64;
    const char *str;
} nmt_hp_value;
nmt_hp_value nmt_hparam_value(const nmt_hparam *hp, const void *cfg);

/* Set one hyper-parameter of cfg from command-line text (the flag's value):
 * NMT_ERR_INVALID_ARGUMENT when it does not parse or is out of range. */
nmt_status nmt_hparam_set_text(const nmt_hparam *hp, void *cfg, const char *text);

/* Set one hyper-parameter of cfg to the table's default (nothing for a
 * required key or a computed default, which finish() fills). */
nmt_status nmt_hparam_set_default(const nmt_hparam *hp, void *cfg);

/* The values hp allows, as a phrase for messages: "an integer in [1,
 * 1048576]", "one of post, pre", "a number in (0, 1)". */
void nmt_hparam_range(const nmt_hparam *hp, char *buf, size_t cap);

/* The hyper-parameter with this key or flag, or NULL. */
const nmt_hparam *nmt_hparam_find(const nmt_family *fam, const char *key_or_flag);

/* ------------------------------------------------------------------------ */
/* What a session lends a family's runtime part (families/plan.c)           */
/* ------------------------------------------------------------------------ */

/* One device buffer of a plan, in the list its context releases. */
typedef struct nmt_buf_node {
    cl_mem mem;
    struct nmt_buf_node *next;
} nmt_buf_node;

/* The context of plan and nmt_family_load_weights: the op layer, the
 * device buffers created so far and the model file's pages.  The session
 * (runtime/session/) owns one and fills it before each pass; a family sees
 * this, never the session. */
struct nmt_plan_ctx {
    nmt_device *dev;       /* NULL in nmt_session_arena_size's measuring pass */
    nmt_ops *ops;          /* the session's op layer (kernels NULL in the measuring pass) */
    nmt_mapping *map;      /* the model file when the session mapped it, else NULL */
    int fp16;              /* fp16 compute: the family's fp16_weights, the session's
                              fp16_compute and the device's cl_khr_fp16 agree (both passes) */
    nmt_buf_node *bufs;    /* every buffer created, released by nmt_plan_release */
    uint64_t device_bytes; /* bytes asked for (both passes) */
};

/* Create a device buffer owned by the plan (released by nmt_plan_release,
 * at the session's destroy).  In the measuring pass only counts bytes and
 * sets out->mem = NULL.  `init` (optional) is copied in. */
nmt_status nmt_plan_buffer(nmt_plan_ctx *pc, nmt_arena *a, size_t bytes, const void *init, nmt_buf *out);

/* nmt_plan_buffer of `floats` fp32 elements (or 4-byte ints), no initial
 * data; a byte count that overflows is NMT_ERR_DEVICE_MEMORY. */
static inline nmt_status nmt_plan_floats(nmt_plan_ctx *pc, nmt_arena *a, size_t floats, nmt_buf *out) {
    size_t bytes;
    NMT_CHECK(nmt_mul_ok(floats, sizeof(float), &bytes), NMT_ERR_DEVICE_MEMORY);
    return nmt_plan_buffer(pc, a, bytes, NULL, out);
}

/* Release every buffer of the plan. */
void nmt_plan_release(nmt_plan_ctx *pc);

/* Plan the scratch of the int8 x int8 products (runtime/ops/ops_i8dot.c)
 * into the plan's ops: int8 activations of up to rows x kmax elements and
 * their row scales (two nmt_plan_buffer calls, so the arena formula counts
 * them).  Families call it for models with int8 weights, whatever the
 * device (the arena size must not depend on it); products whose A does not
 * fit run int8 weights x fp32. */
nmt_status nmt_plan_i8dot(nmt_plan_ctx *pc, nmt_arena *a, size_t rows, size_t kmax);

/* The model file's bytes [p, p + n) have been copied to the device: give
 * their pages back (platform.h, nmt_mapping_release) when the session mapped
 * the file itself; nothing for a caller's model_data image. */
void nmt_plan_release_model(nmt_plan_ctx *pc, const void *p, size_t n);

/* Load every tensor of the catalogue into the weight struct the catalogue
 * points into: one session buffer per tensor (fused parts into one), 2-D
 * I8 kept int8 (with its scales), 2-D F16 kept half under fp16 compute
 * (nmt_plan_ctx.fp16; fused parts only when all are F16), everything else
 * as fp32.  Runs in both
 * passes like plan; `weights` is NULL in the measuring pass (the arena's
 * pointers are not memory yet). */
nmt_status nmt_family_load_weights(const nmt_family *fam, const void *cfg, void *weights, nmt_plan_ctx *pc,
                                   const nmt_file *f, nmt_arena *a);

#endif
