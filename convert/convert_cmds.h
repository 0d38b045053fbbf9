/* SPDX-License-Identifier: MIT */
/* convert_cmds.h — the subcommands of nmt-edge-convert (one file each:
 * convert_random.c, convert_export.c, convert_import.c, convert_inspect.c) and what they share
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
int cmd_import(int argc, char **argv);   /* convert_import.c */

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

/* export's work after reading its inputs (convert_export.c), shared with
 * import: validate every image (structure, CRCs, nmt_model_inspect), check
 * they have one architecture, average, store the quantizable tensors as
 * `dtype` ("fp32", "fp16", "int8"), write `output` atomically.  Messages
 * start "nmt-edge-convert CMD:" and name each image by its `path`.  The exit
 * status (0 or 1); the images stay the caller's. */
int export_images(const char *cmd, model_image *in, int n_in, const char *output, const char *dtype);

/* Why the runtime refuses the model image (nmt_model_explain): "STATUS:
 * DETAIL" or the status string alone, into buf[cap]. */
void model_problem(const void *data, size_t size, nmt_status s, char *buf, size_t cap);

#endif
