/* SPDX-License-Identifier: MIT */
/* run_lock.h — one trainer per run directory (issue 55 item 3;
 * docs/TRAINING.md "Run directories").
 *
 * The trainer that writes a run's checkpoints (the only process, or rank 0
 * under MPI) takes an exclusive flock(2) on DIR/.lock before it touches
 * anything in DIR, and keeps the descriptor open until it exits.  After
 * locking it writes one line to the file:
 *
 *     nmt-edge-train pid PID on HOST
 *
 * A second trainer on the same directory finds the lock held and stops at
 * once, naming the holder from that line.  The lock belongs to the open
 * file, so the kernel drops it when the holder exits in any way (SIGKILL
 * included): a lock file left behind by a dead trainer is no lock, and the
 * next trainer takes it over.  The descriptor is close-on-exec, so spm_train
 * and other children never hold it. */
#ifndef NMT_RUN_LOCK_H
#define NMT_RUN_LOCK_H

#include <stddef.h>

/* The lock file's name inside a run directory. */
#define RUN_LOCK_NAME ".lock"

/* Lock the existing directory `dir`: 0 and *fd the open lock file (keep it
 * open while the run lasts; -1 where the file system has no locks, after a
 * warning), or 1 after a message on stderr: the directory is in use by
 * another process (named from the lock file when it says who) or the lock
 * file cannot be opened. */
int run_lock_take(const char *dir, int *fd);

/* The holder named by a lock file's text[0, n): "nmt-edge-train pid PID on
 * HOST" in who[0, cap) and 1, or 0 when the text names none (an older or
 * foreign file, or a holder that has not written its line yet). */
int run_lock_holder(const char *text, size_t n, char *who, size_t cap);

#endif
