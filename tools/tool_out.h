/* tool_out.h — output integrity for the programs (nmt-edge, nmt-edge-convert,
 * nmt-edge-train): temporary files that must not outlive an interrupted
 * program, and standard output checked at exit (docs/RELIABILITY.md, "files
 * replaced or lost", "output integrity").  Not part of libnmtedge, which
 * installs no signal handler and writes no standard output. */
#ifndef NMT_TOOL_OUT_H
#define NMT_TOOL_OUT_H

/* The temporary file a writer is filling (`path`, copied; at most 4 KiB):
 * until nmt_tool_tmp_end(), SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE and
 * SIGXFSZ remove it before the program dies of the signal.  Handlers are
 * installed on the first call, only for signals whose action is the default
 * one: a program that handles SIGINT itself (the trainer saves a checkpoint
 * and finishes the write in progress) or a signal that is ignored (nohup)
 * keeps its action.  One temporary at a time (writes are sequential). */
void nmt_tool_tmp_begin(const char *path);
void nmt_tool_tmp_end(void);

/* Flush and close standard output at the end of a program: 0 when every
 * byte was written, else "PROG: error writing standard output: REASON" on
 * standard error and 1 (a full disk, /dev/full, a closed pipe).  Call it
 * once, last, and return its status when the program otherwise succeeded. */
int nmt_tool_close_stdout(const char *prog);

#endif
