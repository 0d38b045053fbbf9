/* family.h — what a model family (Transformer/HySAN now; MG-SA, phrasal
 * attention and BA-NMT later) provides to the session.  The session owns
 * batching, token upload, beam search and result storage; a family owns its
 * weights, activations and decoder state and runs its forward passes with
 * the op layer.  Nothing here is public. */
#ifndef NMT_FAMILY_H
#define NMT_FAMILY_H

#include "arena.h"
#include "format.h"
#include "ops.h"

typedef struct nmt_session nmt_session;

/* Shapes a family is planned for (session limits turned into rows). */
typedef struct nmt_plan_dims {
    uint32_t max_batch;     /* sentences per call */
    uint32_t max_beam;
    uint32_t src_cap;       /* source positions incl. EOS (max_src_len + 1) */
    uint32_t tgt_cap;       /* decoder positions incl. BOS (max_tgt_len + 1) */
    uint32_t step_rows;     /* max_batch * max_beam: rows of one decoder step */
} nmt_plan_dims;

/* Device buffers shared by session and family.  Int buffers hold cl_int. */
typedef struct nmt_io_bufs {
    nmt_buf src_tok;   /* int [max_batch, src_cap]: padded source ids (+EOS) */
    nmt_buf src_len;   /* int [max_batch]: source length incl. EOS */
    nmt_buf step_tok;  /* int [step_rows]: decoder input token per row */
    nmt_buf reorder;   /* int [step_rows]: beam back-pointers (row -> source row) */
    nmt_buf tgt_tok;   /* int [max_batch, tgt_cap]: teacher-forced decoder inputs */
    nmt_buf logits;    /* float [step_rows, tgt_vocab] */
} nmt_io_bufs;

typedef struct nmt_family {
    const char *arch;
    /* Read and validate hyper-parameters and tensor shapes; fill `info`.
     * `cfg` is family-private, at most NMT_FAMILY_CFG_BYTES. */
    nmt_status (*parse)(const nmt_file *f, void *cfg, nmt_model_info *info);
    /* Reserve host memory from `a` and create device buffers through
     * nmt_session_buffer().  Runs twice with identical requests: measuring
     * (nmt_arena_measuring(a), buffers not created) and for real.  Returns the
     * family state in *state. */
    nmt_status (*plan)(nmt_session *s, const nmt_file *f, const void *cfg,
                       const nmt_plan_dims *dims, nmt_arena *a, void **state);
    /* Encoder over n sentences padded to `len` positions (tokens and lengths
     * already in io->src_tok / io->src_len); keeps what the decoder needs. */
    nmt_status (*encode)(void *state, const nmt_io_bufs *io, uint32_t n, uint32_t len);
    /* One incremental decoder step at position t for `rows` rows (row r
     * belongs to sentence r / group), input ids in io->step_tok, logits
     * [rows, V] into io->logits. */
    nmt_status (*step)(void *state, const nmt_io_bufs *io, uint32_t rows, uint32_t group, uint32_t t);
    /* Reorder decoder state rows after a beam step: new row r takes old row
     * io->reorder[r]; positions [0, t] are live. */
    nmt_status (*reorder)(void *state, const nmt_io_bufs *io, uint32_t rows, uint32_t t);
    /* Teacher-forced decoder over n sentences of tlen positions (inputs in
     * io->tgt_tok); leaves final hidden states for nmt_family.project. */
    nmt_status (*decode_full)(void *state, const nmt_io_bufs *io, uint32_t n, uint32_t tlen);
    /* Output projection of `rows` rows of the teacher-forced hidden states
     * starting at row `first`, into io->logits. */
    nmt_status (*project)(void *state, const nmt_io_bufs *io, uint32_t first, uint32_t rows);
    /* Release family-owned OpenCL objects other than session buffers. */
    void (*release)(void *state);
} nmt_family;

#define NMT_FAMILY_CFG_BYTES 1024

extern const nmt_family nmt_family_transformer;

/* Create a device buffer owned by the session (released at destroy).  In
 * the measuring pass only counts bytes and sets out->mem = NULL.  `init`
 * (optional) is copied in. */
nmt_status nmt_session_buffer(nmt_session *s, nmt_arena *a, size_t bytes, const void *init,
                              nmt_buf *out);

/* The session's op layer and device (valid in both passes; ops kernels are
 * NULL in the measuring pass). */
nmt_ops *nmt_session_ops(nmt_session *s);

#endif
