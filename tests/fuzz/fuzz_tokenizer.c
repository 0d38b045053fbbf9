/* SPDX-License-Identifier: MIT */
/* fuzz_tokenizer.c — libFuzzer harness for the SentencePiece model reader,
 * the normalizer, the unigram/BPE encoders and the decoder.
 *
 * Input layout: byte 0 selects the mode, the rest is split at the first
 * "\n--\n" into a .model image and a text:
 *   mode & 1 == 0: the whole rest is a .model image (reader fuzzing); the
 *                  text is a fixed mix of hard cases.
 *   mode & 1 == 1: the text is fuzzed against a small valid model embedded
 *                  in the seed corpus (the part before the separator).
 * Every status is fine; crashes, sanitizer reports, reads outside the
 * image and an arena high-water mark above the prediction are not.
 *
 * tests/fuzz/CMakeLists.txt builds it (clang, -fsanitize=fuzzer,address,
 * undefined, linking libnmtedge); seeds in
 * tests/fuzz/corpus/fuzz_tokenizer/. */
#include "nmt_edge.h"
#include "fuzz.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char HARD[] = "  Hello\t\tworld \xef\xbc\xa1\xef\xac\x81 e\xcc\x81 \xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd"
                           " \xff\x80\xc3 caf\xc3\xa9 12345 <unk> \xe2\x96\x81 ";

static void run(const uint8_t *model, size_t model_size, const char *text, size_t text_size) {
    const uint32_t max_text = 1024;
    size_t need;
    if (nmt_tokenizer_arena_size(model, model_size, max_text, &need) != NMT_OK) return;
    if (need > ((size_t)64 << 20)) return; /* a huge charsmap string: sized, fine, skip */
    void *arena = malloc(need);
    if (arena == NULL) return;
    nmt_tokenizer *t;
    /* malloc gives 16-byte alignment: hand the documented slack */
    if (nmt_tokenizer_create(model, model_size, max_text, arena, need, &t) != NMT_OK) {
        free(arena);
        arena = aligned_alloc(64, (need + 63) / 64 * 64);
        if (arena == NULL || nmt_tokenizer_create(model, model_size, max_text, arena, need, &t) != NMT_OK) {
            free(arena);
            return;
        }
    }
    const int32_t *ids;
    uint32_t n;
    if (nmt_tokenizer_encode(t, text, text_size > max_text ? max_text : text_size, &ids, &n) == NMT_OK) {
        size_t len, cap = nmt_tokenizer_decode_bound(t, n) + 1;
        char *out = malloc(cap);
        if (out != NULL) {
            nmt_status st = nmt_tokenizer_decode(t, ids, n, out, cap, &len);
            if (st != NMT_OK || len >= cap) abort(); /* the bound must hold */
            free(out);
        }
    }
    free(arena);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const uint8_t mode = data[0];
    const uint8_t *rest = data + 1;
    size_t n = size - 1;
    /* copy so that ASan sees reads past the end of exactly these bytes */
    if (mode & 1) {
        const uint8_t *sep = NULL;
        for (size_t i = 0; i + 4 <= n; i++)
            if (memcmp(rest + i, "\n--\n", 4) == 0) {
                sep = rest + i;
                break;
            }
        if (sep == NULL) return 0;
        const size_t ms = (size_t)(sep - rest), ts = n - ms - 4;
        uint8_t *m = malloc(ms ? ms : 1);
        char *t = malloc(ts ? ts : 1);
        if (m && t) {
            memcpy(m, rest, ms);
            memcpy(t, sep + 4, ts);
            run(m, ms, t, ts);
        }
        free(m);
        free(t);
    } else {
        uint8_t *m = malloc(n ? n : 1);
        if (m) {
            memcpy(m, rest, n);
            run(m, n, HARD, sizeof HARD - 1);
        }
        free(m);
    }
    return 0;
}
