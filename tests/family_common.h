/* SPDX-License-Identifier: MIT */
/* family_common.h — helpers shared by the model-family tests (mgsa_test.c,
 * phrase_test.c, and the trainers' tests train_model_test.c,
 * mgsa_syntax_test.c, banmt_train_test.c): a random model of any family
 * from a configuration struct, a session over it, teacher-forced session
 * scores, a trainer model's image, and the check that incremental decoding
 * scores its own results as teacher-forced scoring does.  Every function
 * fails the running cmocka test on error. */
#ifndef NMT_FAMILY_COMMON_H
#define NMT_FAMILY_COMMON_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "family.h"
#include "nmt_edge.h"
#include "tf_train.h"

/* A model image of `fam` with cfg's hyper-parameters and seeded random
 * weights (free() it). */
void *family_image(const nmt_family *fam, const void *cfg, uint64_t seed, size_t *size);

/* A session over an image (which the model owns from then on) with these
 * limits; its arena and device bytes are exactly what
 * nmt_session_arena_size predicts. */
typedef struct test_model {
    void *image, *arena;
    size_t size;
    nmt_file file;
    nmt_session *s;
} test_model;
void test_model_open(nmt_device *dev, void *image, size_t size, const nmt_limits *lim, test_model *m);
void test_model_close(test_model *m);

/* nmt_session_score of tgt given src (out: src->n scores) from a fresh
 * session over img with lim; spans / n_spans (NULL: none) are set first
 * (nmt_session_set_spans). */
void family_session_scores(nmt_device *dev, const void *img, size_t size, const nmt_limits *lim, const nmt_batch *src,
                           const nmt_batch *tgt, const nmt_span *const *spans, const uint32_t *n_spans, float *out);

/* A Transformer-family trainer model as an image (tft_add_to_writer; with
 * `optimizer` a checkpoint) (free() it). */
void *tft_export_image(tft_model *m, int optimizer, size_t *size);

/* For beams 1 .. max_beam (step 1 or 2 as given): translate src with
 * max_len, then score each first result teacher-forced; the incremental
 * log-probability must equal the forced score (relative 1e-4).  First,
 * with beam max_beam: trailing finished sentences skipping the step change
 * no result (and some rows are skipped when src's lengths differ).  `what`
 * names the model in a failure. */
/* Finished sentences at the end of a batch skip the step (session.c,
 * s->trim_finished): src's sentences longest first, each allowed as many
 * tokens as its source has (max_len_a 1), so the short ones end first and
 * their rows drop out; every hypothesis, score and log-probability (n-best
 * of `beam`) must be what the untrimmed search gives, and rows must have
 * been skipped when the lengths differ.  Then src in its own order: the
 * session orders it longest first (s->order_batch) and result i must be
 * the same as before, with rows skipped again; and with the ordering off,
 * the same results once more. */
void check_trim_equals_full(nmt_device *dev, nmt_session *s, const nmt_batch *src, uint32_t beam, const char *what);

void check_incremental_equals_forced(nmt_device *dev, nmt_session *s, const nmt_batch *src, uint32_t max_beam,
                                     uint32_t beam_step, uint32_t max_len, const char *what);

#endif
