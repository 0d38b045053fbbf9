/* tool_env.h — what the three programs (nmt-edge, nmt-edge-train,
 * nmt-edge-convert) read from the environment, written once: the device
 * selection and the kernel cache directory.  Not part of libnmtedge (a
 * library reads no environment); each program links nmtedge_tool. */
#ifndef NMT_TOOL_ENV_H
#define NMT_TOOL_ENV_H

#include <stddef.h>

/* The variable's value when set and non-empty, else NULL. */
const char *nmt_tool_env(const char *name);

/* The compiled-kernel cache directory: $NMT_EDGE_CACHE_DIR, else
 * $XDG_CACHE_HOME/nmt-edge, else $HOME/.cache/nmt-edge (formatted into buf);
 * NULL when none applies or it does not fit. */
const char *nmt_tool_cache_dir(char *buf, size_t cap);

#endif
