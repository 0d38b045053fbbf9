/* SPDX-License-Identifier: MIT */
/* tool_file.h — the one way the programs (nmt-edge, nmt-edge-convert,
 * nmt-edge-train) read a whole input file: a model, a SentencePiece model, a
 * text corpus.  Bounded by construction: a regular file is read up to the
 * size it had when opened; directories, character and block devices
 * (/dev/zero, /dev/null) and sockets are refused without reading; pipes and
 * FIFOs only where the caller allows them, and then up to a limit.  A
 * refusal is a message naming the file and the reason, which the caller
 * prints after its program name: "cannot open 'F': No such file or
 * directory", "cannot read 'F': not a regular file (a character device)".
 * Not part of libnmtedge (which maps model files itself, platform.h). */
#ifndef NMT_TOOL_FILE_H
#define NMT_TOOL_FILE_H

#include <stddef.h>

/* Bytes read from a pipe or FIFO where one is allowed (training corpora,
 * e.g. `--src <(zcat corpus.gz)`); more is an error.  4 GiB (less on 32-bit
 * hosts, where it is half the address space). */
#define NMT_TOOL_MAX_PIPE_BYTES ((size_t)1 << (sizeof(size_t) > 4 ? 32 : 30))

/* Read `path` whole into malloc'd memory (free it): *size bytes followed by
 * a NUL that is not counted.  max_pipe_bytes = 0 refuses pipes and FIFOs;
 * otherwise they are read up to that many bytes.  On failure returns NULL,
 * writes "cannot open|read 'PATH': REASON" to why[0, why_cap) (room for the
 * path: NMT_TOOL_WHY_BYTES) and sets errno (the open/read error, EISDIR,
 * ENODEV for another kind of file, EFBIG over the limit, ENOMEM). */
#define NMT_TOOL_WHY_BYTES 4400
void *nmt_tool_read_file(const char *path, size_t max_pipe_bytes, size_t *size, char *why,
                         size_t why_cap);

/* If `path` exists and is not a regular file, write "is a directory" or
 * "not a regular file (a character device)" etc. to why and return 1; if it
 * is an empty regular file, write "the file is empty" and return 1; else 0
 * (a missing file, or a non-empty regular one).  Follows symbolic links.
 * For messages about a file the library refused (NMT_ERR_IO). */
int nmt_tool_file_problem(const char *path, char *why, size_t why_cap);

/* For a model image the library refused with NMT_ERR_TOKENIZER_MODEL: if an
 * embedded SentencePiece model has more pieces than the vocabulary its ids
 * index, write "tokenizer.src has 8000 pieces, more than src_vocab 600"
 * (tokenizer.tgt against tgt_vocab; a shared tokenizer.src against both)
 * to why and return 1; else 0. */
int nmt_tool_tokenizer_problem(const void *image, size_t size, char *why, size_t why_cap);

#endif
