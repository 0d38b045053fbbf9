/* SPDX-License-Identifier: MIT */
/* train_cmds.h — `nmt-edge-train` commands other than training, each a
 * main() taking the whole argv (argv[1] is the command's name): 0, 1 on
 * failure after a message, TRAIN_EXIT_USAGE for bad usage. */
#ifndef NMT_TRAIN_CMDS_H
#define NMT_TRAIN_CMDS_H

/* `plot LOG.jsonl -o PLOT.svg`: the training log as an SVG plot. */
int train_cmd_plot(int argc, char **argv);

/* `bleu REF [HYP]` or `bleu --ref REF --hyp HYP`: corpus BLEU of HYP
 * (standard input when absent or '-') against REF (sacreBLEU's default
 * and its order, reference first). */
int train_cmd_bleu(int argc, char **argv);

/* `attention MODEL SRC TGT`: the interleaved phrase attention's shares. */
int train_cmd_attention(int argc, char **argv);

/* `parse-spans SRC -o SPANS (--spm FILE | --model MODEL)`: MG-SA phrase
 * spans of an English source file (tools/parse_spans.h, link-grammar). */
int train_cmd_parse_spans(int argc, char **argv);

#endif
