/* SPDX-License-Identifier: MIT */
/* plot.h — training curves from the trainer's JSON-lines log as one
 * self-contained SVG.
 *
 * The log holds one flat JSON object per line; the plotter reads
 *   {"kind":"train","step":N,"loss":x,...}             training loss
 *   {"kind":"dev","step":N,"loss":x,"bleu":y,...}        dev loss and BLEU
 * and ignores other keys, other kinds and blank lines (nested values are
 * skipped).  A "train"/"dev" record without a numeric "step" is an error; a
 * missing or non-finite "loss"/"bleu" just leaves that point out.  A last
 * line without its newline (a log being written) is ignored when it does not
 * parse.
 *
 * The SVG has two panels: loss vs step (train and dev) and dev BLEU vs step,
 * each with axes, tick labels and a legend.  Each non-empty series is one
 * <polyline class="train-loss|dev-loss|dev-bleu" points="x,y x,y ...">, one
 * point per record, in log order.  The file is written atomically (temp
 * file in the same directory, fsync, rename); on failure nothing is left.
 *
 * Statuses: NMT_ERR_IO (cannot read the log / write the SVG),
 * NMT_ERR_INVALID_ARGUMENT (a malformed line: "LOG:LINE: why"; no train or
 * dev record at all); NMT_ERR_IO also for running out of memory, as the
 * writer does.  err (may be NULL) receives a
 * one-line message. */
#ifndef NMT_TRAIN_PLOT_H
#define NMT_TRAIN_PLOT_H

#include <stddef.h>

#include "nmt_edge.h"

nmt_status plot_svg(const char *log_path, const char *svg_path, char *err, size_t err_cap);

#endif
