/* SPDX-License-Identifier: MIT */
/* format_why.c — the one-line reasons of a refused model (format.h:
 * nmt_why, nmt_shape_str), written by the reader, the registry and the
 * families into the caller's buffer (nmt_file.why).  No heap. */
#include "format.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void nmt_why(char *why, size_t cap, const char *fmt, ...) {
    if (why == NULL || cap == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
}

void nmt_shape_str(uint32_t ndim, const uint32_t *shape, char *buf, size_t cap) {
    size_t used = 0;
    nmt_why(buf, cap, "[");
    for (uint32_t d = 0; d < ndim && d < NMT_MAX_DIMS; d++) {
        used = strlen(buf);
        nmt_why(buf + used, cap - used, "%s%u", d ? ", " : "", shape[d]);
    }
    used = strlen(buf);
    nmt_why(buf + used, cap - used, "]");
}
