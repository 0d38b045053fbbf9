/* SPDX-License-Identifier: MIT */
/* common.h — internal helpers shared by every runtime file: error macros,
 * logging through the caller's callback, small integer utilities. */
#ifndef NMT_COMMON_H
#define NMT_COMMON_H

#include "nmt_edge.h"

#include <stddef.h>
#include <stdint.h>

/* Early-return on a failing status. */
#define NMT_TRY(expr)                                                          \
    do {                                                                       \
        nmt_status nmt_try_s_ = (expr);                                        \
        if (nmt_try_s_ != NMT_OK) return nmt_try_s_;                           \
    } while (0)

/* Early-return `status` when `cond` is false. */
#define NMT_CHECK(cond, status)                                                \
    do {                                                                       \
        if (!(cond)) return (status);                                          \
    } while (0)

#define NMT_MIN(a, b) ((a) < (b) ? (a) : (b))
#define NMT_MAX(a, b) ((a) > (b) ? (a) : (b))
#define NMT_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* The most hypotheses one decoder step of a session holds, max_batch *
 * max_beam: a plan above it is NMT_ERR_INVALID_ARGUMENT (session.c,
 * resolve_limits), which the CLI tells as such before planning. */
#define NMT_SESSION_MAX_ROWS 65536u

static inline size_t nmt_align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* Largest power of two <= x (1 for x <= 1); smallest power of two >= x. */
static inline size_t pow2_floor(size_t x) {
    size_t p = 1;
    while (p <= x / 2) p *= 2;
    return p;
}
static inline size_t pow2_ceil(size_t x) {
    size_t p = 1;
    while (p < x) p *= 2;
    return p;
}

/* Overflow-checked size arithmetic: returns 0 on overflow (callers treat 0
 * as "does not fit"). */
static inline int nmt_mul_ok(size_t a, size_t b, size_t *out) {
    if (a != 0 && b > SIZE_MAX / a) return 0;
    *out = a * b;
    return 1;
}

/* Logging: formats into a stack buffer and calls the user's callback. */
typedef struct nmt_logger {
    nmt_log_fn fn;
    void *user;
    nmt_log_level level;
} nmt_logger;

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
void nmt_log(const nmt_logger *lg, nmt_log_level level, const char *fmt, ...);

/* Case-insensitive substring search (ASCII). */
int nmt_strcasestr_ascii(const char *haystack, const char *needle);

/* Bounded string copy that always NUL-terminates (truncates). */
void nmt_strlcpy(char *dst, const char *src, size_t cap);

/* 1 when the environment variable is set, not empty and not "0" (the
 * NMT_EDGE_NO_* switches). */
int nmt_env_flag(const char *name);

/* printf into an optional message buffer (err may be NULL or cap 0). */
void nmt_errf(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
