/* SPDX-License-Identifier: MIT */
/* common.c — logging and small string helpers shared by the runtime. */
#include "common.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void nmt_log(const nmt_logger *lg, nmt_log_level level, const char *fmt, ...) {
    if (lg == NULL || lg->fn == NULL || level > lg->level) return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    lg->fn(lg->user, level, buf);
}

int nmt_strcasestr_ascii(const char *h, const char *n) {
    size_t nl = strlen(n);
    if (nl == 0) return 1;
    for (; *h; h++) {
        size_t i = 0;
        while (i < nl && h[i] && tolower((unsigned char)h[i]) == tolower((unsigned char)n[i])) i++;
        if (i == nl) return 1;
    }
    return 0;
}

void nmt_errf(char *err, size_t cap, const char *fmt, ...) {
    if (!err || cap == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
}

void nmt_strlcpy(char *dst, const char *src, size_t cap) {
    if (cap == 0) return;
    size_t n = src ? strlen(src) : 0;
    if (n >= cap) n = cap - 1;
    if (n) memcpy(dst, src, n);
    dst[n] = '\0';
}

int nmt_env_flag(const char *name) {
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0' && strcmp(v, "0") != 0;
}
