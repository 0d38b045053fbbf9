/* SPDX-License-Identifier: MIT */
/* tool_out.h — output integrity for the programs (nmt-edge, nmt-edge-convert,
 * nmt-edge-train): temporary files that must not outlive an interrupted
 * program, and standard output checked at exit (docs/RELIABILITY.md, "files
 * replaced or lost", "output integrity").  Not part of libnmtedge, which
 * installs no signal handler and writes no standard output. */
#ifndef NMT_TOOL_OUT_H
#define NMT_TOOL_OUT_H

#include <signal.h>
#include <stddef.h>

/* The temporary file a writer is filling (`path`, copied; at most 4 KiB):
 * until nmt_tool_tmp_end(), SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE and
 * SIGXFSZ remove it before the program dies of the signal.  Handlers are
 * installed on the first call, only for signals whose action is the default
 * one: a program that handles SIGINT itself (the trainer saves a checkpoint
 * and finishes the write in progress) or a signal that is ignored (nohup)
 * keeps its action.  One temporary at a time (writes are sequential). */
void nmt_tool_tmp_begin(const char *path);
void nmt_tool_tmp_end(void);

/* The actions of those six signals, to put back after nmt_device_open: an
 * OpenCL implementation may install handlers of its own while a device
 * opens (its LLVM-based compiler registers crash handlers: PoCL 3.1 and
 * Intel's CPU runtime 2026.2 both do, over an inherited "ignore" too; on
 * SIGXFSZ, Intel's printed "PLEASE submit a bug report" before the write
 * failed).  Save before the open, restore right after. */
typedef struct nmt_tool_signals {
    struct sigaction action[6];
    unsigned char saved[6];
} nmt_tool_signals;
void nmt_tool_signals_save(nmt_tool_signals *s);
void nmt_tool_signals_restore(const nmt_tool_signals *s);

/* Text from a model (metadata strings and keys, tensor names, and the
 * reasons that quote them) made safe for a terminal: s[0, n) (n SIZE_MAX:
 * up to its NUL) into out[0, cap), NUL-terminated, with every control byte
 * (below 0x20, 0x7f), every C1 control (U+0080..U+009F, both bytes) and
 * every byte that is no part of valid UTF-8 written as \xNN; printable
 * ASCII and valid UTF-8 kept as they are.  Cut at a whole character or
 * escape when out is short (4 * n + 1 bytes always suffice).  Returns out. */
const char *nmt_tool_escape(const char *s, size_t n, char *out, size_t cap);

/* Flush and close standard output at the end of a program: 0 when every
 * byte was written, else "PROG: error writing standard output: REASON" on
 * standard error and 1 (a full disk, /dev/full, a closed pipe).  Call it
 * once, last, and return its status when the program otherwise succeeded. */
int nmt_tool_close_stdout(const char *prog);

#endif
