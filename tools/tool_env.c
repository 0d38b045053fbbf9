/* tool_env.c — the programs' environment (tool_env.h). */
#include "tool_env.h"

#include <stdio.h>
#include <stdlib.h>

/* The variable's value when set and non-empty, else NULL. */
static const char *env_nonempty(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static const char *cache_dir(char *buf, size_t cap) {
    const char *v = env_nonempty("NMT_EDGE_CACHE_DIR");
    if (v) return v;
    int n = -1;
    if ((v = env_nonempty("XDG_CACHE_HOME")) != NULL) n = snprintf(buf, cap, "%s/nmt-edge", v);
    else if ((v = env_nonempty("HOME")) != NULL) n = snprintf(buf, cap, "%s/.cache/nmt-edge", v);
    return (n > 0 && (size_t)n < cap) ? buf : NULL;
}

void nmt_tool_device_params(nmt_device_params *dp, const char *device, char *cache_buf, size_t cap) {
    dp->device = (device && *device) ? device : env_nonempty("NMT_EDGE_DEVICE");
    dp->cache_dir = cache_buf ? cache_dir(cache_buf, cap) : NULL;
    dp->kernel_dir = env_nonempty("NMT_EDGE_KERNEL_DIR");
}
