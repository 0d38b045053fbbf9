/* SPDX-License-Identifier: MIT */
/* fuzz_escape.c — libFuzzer harness for nmt_tool_escape (tools/tool_out.c),
 * the one way the programs put a model's text on a terminal.  Byte 0 picks
 * the output's size (1..256; 0: 4 * n + 1, always enough); the rest is the
 * text.  Checks: the output is NUL-terminated inside its buffer, valid
 * UTF-8 with no control byte and no C1 control; with room for everything,
 * a text without backslashes comes back byte for byte once its \xNN are
 * read back; a short buffer holds a prefix of the whole output, cut only
 * where the next character or escape (at most 8 bytes) does not fit.
 * Seeds in tests/fuzz/corpus/fuzz_escape/. */
#include "fuzz.h"
#include "tool_out.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Whether s is valid UTF-8 without control bytes or C1 controls. */
static int terminal_safe(const unsigned char *s) {
    for (size_t i = 0; s[i];) {
        const unsigned c = s[i];
        if (c < 0x20 || c == 0x7f) return 0;
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
        if (c < 0xc2 || c > 0xf4) return 0;
        for (size_t k = 1; k < len; k++)
            if ((s[i + k] & 0xc0) != 0x80) return 0;
        if (c == 0xc2 && s[i + 1] <= 0x9f) return 0;
        if ((c == 0xe0 && s[i + 1] < 0xa0) || (c == 0xed && s[i + 1] > 0x9f) || (c == 0xf0 && s[i + 1] < 0x90) ||
            (c == 0xf4 && s[i + 1] > 0x8f))
            return 0;
        i += len;
    }
    return 1;
}

static int hex(int c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    const char *text = (const char *)data + 1;
    const size_t n = size - 1, full_cap = 4 * n + 1;
    char *full = malloc(full_cap), *out = malloc(full_cap + 256);
    if (full == NULL || out == NULL) abort();
    if (nmt_tool_escape(text, n, full, full_cap) != full) abort();
    const size_t fl = strlen(full);
    if (fl >= full_cap || !terminal_safe((const unsigned char *)full)) abort();
    if (memchr(text, '\\', n) == NULL) { /* read the escapes back: the text */
        size_t o = 0;
        for (size_t i = 0; i < fl; o++) {
            if (full[i] == '\\') {
                if (full[i + 1] != 'x' || o >= n || (unsigned char)text[o] != hex(full[i + 2]) * 16 + hex(full[i + 3]))
                    abort();
                i += 4;
            } else {
                if (o >= n || full[i] != text[o]) abort();
                i++;
            }
        }
        if (o != n) abort();
    }
    const size_t cap = data[0] ? data[0] : full_cap;
    memset(out, 0x55, full_cap + 256);
    nmt_tool_escape(text, n, out, cap);
    const char *nul = memchr(out, 0, cap);
    if (nul == NULL) abort();
    const size_t ol = (size_t)(nul - out);
    if (memcmp(out, full, ol) != 0 || (ol != fl && ol + 8 < cap)) abort();
    if (!terminal_safe((const unsigned char *)out)) abort();
    free(full);
    free(out);
    return 0;
}
