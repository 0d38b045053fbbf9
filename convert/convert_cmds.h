/* SPDX-License-Identifier: MIT */
/* convert_cmds.h — the subcommands of nmt-edge-convert (one file each:
 * convert_random.c, convert_export.c, convert_inspect.c) and what they share
 * (convert_image.c): model files read whole, tensor and metadata helpers. */
#ifndef NMT_CONVERT_CMDS_H
#define NMT_CONVERT_CMDS_H

#include "convert_opts.h"
#include "format.h"
#include "nmt_edge.h"

#include <stddef.h>
#include <stdint.h>

#define EXIT_USAGE 2
#define TRAIN_PREFIX "train."

/* Subcommands: argv after the subcommand's name; the exit status. */
int cmd_random(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_kernels(int argc, char **argv);  /* convert_kernels.c */

/* A model file read whole into malloc'd memory (8-byte aligned). */
typedef struct model_image {
    const char *path;
    unsigned char *data;
    size_t size;
    nmt_file f;
} model_image;

/* Read `path` whole (an empty file is fine: the format check reports it).
 * 0 and a message on I/O failure. */
int read_image(const char *cmd, const char *path, model_image *m);
void free_image(model_image *m);

int starts_with(const char *s, const char *prefix);
/* Element i of a float tensor (F32, F16 or I8 dequantized) as double. */
double elem(const nmt_tensor_view *v, uint64_t i);
/* "64x32" */
void shape_str(const nmt_tensor_view *v, char *buf, size_t cap);
int same_shape(const nmt_tensor_view *a, const nmt_tensor_view *b);
int meta_equal(const nmt_meta_view *a, const nmt_meta_view *b);
/* Index of the metadata record `key` in f, or -1. */
int64_t meta_index(const nmt_file *f, const char *key, nmt_meta_view *out);

/* Why the runtime refuses the model image (nmt_model_explain): "STATUS:
 * DETAIL" or the status string alone, into buf[cap]. */
void model_problem(const void *data, size_t size, nmt_status s, char *buf, size_t cap);

#endif
