/* SPDX-License-Identifier: MIT */
/* arena.c — bump allocator over caller memory; see arena.h. */
#include "arena.h"

#include <string.h>

void nmt_arena_init(nmt_arena *a, void *mem, size_t size) {
    uintptr_t p = (uintptr_t)mem;
    size_t pad = (size_t)((NMT_ARENA_ALIGN - (p % NMT_ARENA_ALIGN)) % NMT_ARENA_ALIGN);
    memset(a, 0, sizeof *a);
    if (mem == NULL || size < pad) {
        a->base = (uint8_t *)mem;
        a->size = 0;
        a->failed = mem == NULL;
        return;
    }
    a->base = (uint8_t *)mem + pad;
    a->size = size - pad;
    a->pad0 = pad;
}

void nmt_arena_init_measure(nmt_arena *a) {
    memset(a, 0, sizeof *a);
    a->base = NULL;
    a->size = SIZE_MAX;
}

void *nmt_arena_alloc(nmt_arena *a, size_t bytes, size_t align) {
    if (align == 0) align = 1;
    if (align > NMT_ARENA_ALIGN) align = NMT_ARENA_ALIGN;
    size_t start = (a->used + align - 1) & ~(align - 1);
    if (start < a->used || bytes > a->size || start > a->size - bytes) {
        a->failed = 1;
        return NULL;
    }
    a->used = start + bytes;
    if (a->used > a->high) a->high = a->used;
    if (a->base == NULL) return (void *)(uintptr_t)NMT_ARENA_ALIGN; /* measuring: dummy */
    return a->base + start;
}

void *nmt_arena_calloc(nmt_arena *a, size_t bytes, size_t align) {
    void *p = nmt_arena_alloc(a, bytes, align);
    if (p != NULL && a->base != NULL && bytes > 0) memset(p, 0, bytes);
    return p;
}

size_t nmt_arena_required(const nmt_arena *a) { return a->high; }
