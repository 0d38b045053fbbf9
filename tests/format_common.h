/* SPDX-License-Identifier: MIT */
/* format_common.h — helpers shared by the .nmt format tests
 * (format_test.c, format_writer_test.c, format_random_test.c): whole-file
 * reads and the round-trip model, a writer holding every metadata type and
 * every dtype.  Every function fails the running cmocka test on error. */
#ifndef NMT_FORMAT_COMMON_H
#define NMT_FORMAT_COMMON_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "format.h"
#include "nmt_writer.h"

/* Whole file into a malloc'd buffer (malloc memory is suitably aligned). */
uint8_t *slurp(const char *path, size_t *size);

/* The content used by the round-trip tests: every metadata type and every
 * dtype. */
extern const float T_F32[2 * 3];
extern const uint16_t T_F16[4];
extern const int8_t T_I8[3 * 5];
extern const float T_SCALES[3];
extern const uint8_t T_BLOB[7];
extern const float T_F32_4D[1 * 2 * 1 * 3];

/* A writer holding the round-trip content (nmtw_destroy it) and its image
 * written to memory (free() it). */
nmtw_writer *roundtrip_writer(void);
uint8_t *roundtrip_image(size_t *size);

/* A valid random Transformer (nmt_random_transformer_defaults: d_model 32,
 * 4 heads, d_ff 64, 2 + 2 layers, vocabularies 64) with one change, for the
 * messages that name what is wrong (nmt_model_explain): tensor `drop` left
 * out, tensor `reshape` stored with shape {rows, cols} (fp32), tensor
 * `as_u8` stored as bytes, metadata key `meta_drop` left out, `meta_key`
 * set to the integer `meta_i64` or, when `meta_str` is not NULL, to that
 * string.  NULL fields change nothing.  malloc'd image (free it). */
typedef struct model_change {
    const char *drop, *reshape, *as_u8, *meta_drop, *meta_key, *meta_str;
    const char *add_f32, *add_blob; /* one more tensor: fp32 [2], or 3 bytes of u8 */
    const void *blob_data;          /* add_blob's bytes instead (blob_size of them) */
    uint32_t blob_size;
    const char *set_f32;            /* fp32 tensor whose element set_index becomes set_value */
    uint32_t set_index;
    float set_value;
    uint32_t rows, cols;
    int64_t meta_i64;
    int meta_is_f64; /* meta_key set to the number meta_f64 instead */
    double meta_f64;
} model_change;
uint8_t *model_variant(const model_change *c, size_t *size);
/* The same change made to a copy of any valid image `good` (a training
 * checkpoint: its train.* keys and tensors). */
uint8_t *image_variant(const void *good, size_t good_n, const model_change *c, size_t *size);

/* A copy of model image `img` with the hyper-parameters of `cfg` (a
 * configuration of family `fam`) and every fp32 2-D tensor quantized per
 * row to int8 (q8) or to the fp32 values those int8 weights stand for
 * (dequantized), the rest unchanged (free() it). */
struct nmt_family;
void *requantize(const struct nmt_family *fam, const void *cfg, const void *img, size_t size, int q8,
                 size_t *out_size);

#endif
