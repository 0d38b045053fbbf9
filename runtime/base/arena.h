/* SPDX-License-Identifier: MIT */
/* arena.h — the caller-provided host memory every runtime object lives in.
 *
 * A bump allocator over one block.  The same planning code runs twice: once
 * with a measuring arena (base == NULL, infinite size) to compute the exact
 * byte count, once over the caller's memory.  Because both passes make the
 * same sequence of requests, predicted size == high-water mark by
 * construction (tested).  Mark/release gives scoped scratch. */
#ifndef NMT_ARENA_H
#define NMT_ARENA_H

#include <stddef.h>
#include <stdint.h>

#define NMT_ARENA_ALIGN 64 /* default alignment: a cache line, and float16 vectors */

typedef struct nmt_arena {
    uint8_t *base;  /* NULL: measuring arena, nothing is written */
    size_t size;    /* capacity in bytes */
    size_t used;    /* bytes handed out so far (incl. alignment padding) */
    size_t high;    /* high-water mark of `used` */
    size_t pad0;    /* padding to align `base` itself to NMT_ARENA_ALIGN */
    int failed;     /* sticky: a request did not fit */
} nmt_arena;

/* Initialise over caller memory (base may be unaligned; any size). */
void nmt_arena_init(nmt_arena *a, void *mem, size_t size);

/* Initialise a measuring arena (no memory; every request "succeeds"). */
void nmt_arena_init_measure(nmt_arena *a);

/* Reserve `bytes` aligned to `align` (power of two <= NMT_ARENA_ALIGN).
 * Returns NULL (and sets a->failed) if it does not fit; on a measuring arena
 * returns a non-NULL dummy pointer that must not be dereferenced. */
void *nmt_arena_alloc(nmt_arena *a, size_t bytes, size_t align);

/* Zero-filled variant (no-op fill on a measuring arena). */
void *nmt_arena_calloc(nmt_arena *a, size_t bytes, size_t align);

/* Typed helper: n elements of T, aligned to NMT_ARENA_ALIGN. */
#define NMT_ARENA_NEW(arena, T, n) ((T *)nmt_arena_calloc((arena), sizeof(T) * (size_t)(n), NMT_ARENA_ALIGN))

static inline size_t nmt_arena_mark(const nmt_arena *a) { return a->used; }
static inline void nmt_arena_release(nmt_arena *a, size_t mark) { a->used = mark; }
static inline int nmt_arena_measuring(const nmt_arena *a) { return a->base == NULL; }

/* Bytes a caller must provide for memory aligned to NMT_ARENA_ALIGN (the
 * high-water mark); an arbitrary pointer needs NMT_ARENA_ALIGN - 1 more. */
size_t nmt_arena_required(const nmt_arena *a);

#endif
