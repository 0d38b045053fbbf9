/* tool_env.c — the programs' environment (tool_env.h). */
#include "tool_env.h"

#include <stdio.h>
#include <stdlib.h>

const char *nmt_tool_env(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

const char *nmt_tool_cache_dir(char *buf, size_t cap) {
    const char *v = nmt_tool_env("NMT_EDGE_CACHE_DIR");
    if (v) return v;
    int n = -1;
    if ((v = nmt_tool_env("XDG_CACHE_HOME")) != NULL) n = snprintf(buf, cap, "%s/nmt-edge", v);
    else if ((v = nmt_tool_env("HOME")) != NULL) n = snprintf(buf, cap, "%s/.cache/nmt-edge", v);
    return (n > 0 && (size_t)n < cap) ? buf : NULL;
}
