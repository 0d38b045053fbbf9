/* SPDX-License-Identifier: MIT */
/* tool_env.c — the programs' environment (tool_env.h). */
#include "tool_env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

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
    dp->cache_dir = cache_buf ? cache_dir(cache_buf, cap) : ""; /* "": none (NULL: the library default) */
    dp->kernel_dir = env_nonempty("NMT_EDGE_KERNEL_DIR");
    dp->kernel_pack = env_nonempty("NMT_EDGE_KERNEL_PACK");
    const char *bo = env_nonempty("NMT_EDGE_BINARIES_ONLY");
    dp->binaries_only = bo != NULL && strcmp(bo, "0") != 0;
}

int nmt_tool_fp16_compute(int off) {
    const char *v = env_nonempty("NMT_EDGE_NO_FP16");
    return off || (v != NULL && strcmp(v, "0") != 0) ? NMT_FP16_OFF : NMT_FP16_AUTO;
}

uint64_t nmt_tool_host_memory_limit(void) {
    uint64_t limit = UINT64_MAX;
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) limit = (uint64_t)pages * (uint64_t)page;
    static const int which[] = {RLIMIT_AS, RLIMIT_DATA};
    for (size_t i = 0; i < sizeof which / sizeof which[0]; i++) {
        struct rlimit rl;
        if (getrlimit(which[i], &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
            (uint64_t)rl.rlim_cur < limit)
            limit = (uint64_t)rl.rlim_cur;
    }
    return limit;
}
