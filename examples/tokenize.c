/* SPDX-License-Identifier: MIT */
/* tokenize.c — the tokenizer alone, no OpenCL device: read the SentencePiece
 * model a .nmt model carries (or a .model file), then print the pieces and
 * ids of each stdin line.  The tokenizer's memory is one arena sized up
 * front (the model file and the line buffer are this program's); it reads
 * no environment variable and needs no device, though the program links
 * libnmtedge, and so OpenCL, as every user of the library does.
 *
 *   tokenize MODEL.nmt|SPM.model < input.txt */
#define _POSIX_C_SOURCE 200809L
#include <nmt_edge.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *read_all(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    void *buf = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0) n = ftell(f);
    if (n > 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n)) != NULL &&
        fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *size = n > 0 ? (size_t)n : 0;
    return buf;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: tokenize MODEL.nmt|SPM.model < input.txt\n");
        return 2;
    }
    size_t size = 0;
    void *file = read_all(argv[1], &size);
    if (file == NULL) {
        fprintf(stderr, "tokenize: cannot read '%s'\n", argv[1]);
        return 1;
    }
    /* a .nmt model: its embedded source tokenizer; else the file itself */
    const void *spm = file;
    size_t spm_size = size;
    nmt_model_info mi;
    if (nmt_model_inspect(file, size, &mi) == NMT_OK) {
        nmt_status s = nmt_model_tokenizer(file, size, 0, &spm, &spm_size);
        if (s != NMT_OK) {
            fprintf(stderr, "tokenize: '%s' has no tokenizer: %s\n", argv[1], nmt_status_str(s));
            free(file);
            return 1;
        }
    }
    const uint32_t max_text = 1 << 16;
    size_t need = 0;
    nmt_status s = nmt_tokenizer_arena_size(spm, spm_size, max_text, &need);
    void *arena = s == NMT_OK ? malloc(need + NMT_ARENA_ALIGNMENT) : NULL;
    nmt_tokenizer *t = NULL;
    if (s == NMT_OK && arena == NULL) s = NMT_ERR_ARENA_TOO_SMALL;
    if (s == NMT_OK) s = nmt_tokenizer_create(spm, spm_size, max_text, arena, need + NMT_ARENA_ALIGNMENT, &t);
    int rc = 0;
    if (s != NMT_OK) {
        fprintf(stderr, "tokenize: '%s': %s\n", argv[1], nmt_status_str(s));
        rc = 1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while (rc == 0 && (n = getline(&line, &cap, stdin)) >= 0) {
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
        const int32_t *ids = NULL;
        uint32_t n_ids = 0;
        s = nmt_tokenizer_encode(t, line, (size_t)n, &ids, &n_ids);
        if (s != NMT_OK) {
            fprintf(stderr, "tokenize: %s\n", nmt_status_str(s));
            rc = 1;
            break;
        }
        for (uint32_t i = 0; i < n_ids; i++) {
            const char *piece;
            size_t plen;
            if (nmt_tokenizer_piece(t, ids[i], &piece, &plen) != NMT_OK) piece = "?", plen = 1;
            printf("%s%.*s/%d", i ? " " : "", (int)plen, piece, ids[i]);
        }
        printf("\n");
    }
    free(line);
    free(arena);
    free(file);
    return rc;
}
