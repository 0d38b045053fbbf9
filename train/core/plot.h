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

/* Several logs' curves overlaid in the same two panels (one colour a log;
 * train loss solid, dev loss dashed; dev BLEU), the x range the union of
 * theirs, a legend of the runs in each panel.  labels (NULL, or NULL
 * entries) name the runs; without one a log DIR/log.jsonl is "DIR", another
 * file its name without the extension.  Each series is
 * <polyline class="train-loss|dev-loss|dev-bleu" data-run="I" ...>, I the
 * log's index; each panel's <g class="axes"> carries data-x-range and
 * data-y-range (the axis ends), the <svg> data-runs (the number of logs);
 * legend entries are <text class="legend-run"> (the labels, XML-escaped)
 * and, in the loss panel, <text class="legend-style">.  At most
 * PLOT_MAX_LOGS logs; labels are cut to PLOT_LABEL_BYTES - 1 bytes.  A log
 * that fails fails the whole plot, with its message (as plot_svg). */
#define PLOT_MAX_LOGS 12
#define PLOT_LABEL_BYTES 64
nmt_status plot_svg_multi(const char *const *log_paths, const char *const *labels, int n_logs, const char *svg_path,
                          char *err, size_t err_cap);

#endif
