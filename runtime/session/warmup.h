/* SPDX-License-Identifier: MIT */
/* warmup.h — session start-up: run every kernel a model uses once, then
 * refresh the program cache (warmup.c). */
#ifndef NMT_WARMUP_H
#define NMT_WARMUP_H

#include "session_internal.h"

/* Called at the end of nmt_session_create (after planning): encodes one
 * dummy source and runs decoder steps of 1 and of several rows, a log-softmax
 * and a beam reorder, so that every (kernel, local size) the model will
 * launch is compiled now (PoCL compiles lazily per local size) and shape
 * classes of the products are all touched; then stores the device's program
 * binaries again, now holding that code, so the next start with the same
 * cache directory compiles nothing.  Kernels the model does not use are not
 * launched.  The session's buffers are left in a state the next translate /
 * score call overwrites.  Enqueues only: creates no OpenCL objects.  Says
 * at debug level how long the kernels and the cache refresh took. */
nmt_status nmt_session_warm(nmt_session *s);

#endif
