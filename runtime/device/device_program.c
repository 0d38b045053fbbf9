/* SPDX-License-Identifier: MIT */
/* device_program.c — OpenCL programs for a device (device.h): the source
 * text (embedded or from the kernel directory), a kernel pack's binaries, the
 * on-disk binary cache keyed by device, driver, source and options, the build
 * and its log.  Nothing here allocates: cached binaries are read and written
 * through file mappings, build logs go through dev->build_log. */
#include "device.h"

#include "kernel_pack.h"
#include "platform.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#define NMT_BUILD_LOG_LINES 40 /* lines of a failing build log sent to the logger */

/* ------------------------------------------------------------------------ */
/* Programs                                                                 */
/* ------------------------------------------------------------------------ */

double nmt_device_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Fetch the build log into dev->build_log (truncated, NUL-terminated). */
static void fetch_build_log(nmt_device *dev, cl_program prog) {
    char *log = dev->build_log;
    size_t cap = sizeof dev->build_log;
    log[0] = '\0';
    size_t n = 0;
    if (clGetProgramBuildInfo(prog, dev->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &n) != CL_SUCCESS) return;
    if (n <= cap) {
        if (clGetProgramBuildInfo(prog, dev->device, CL_PROGRAM_BUILD_LOG, cap, log, NULL) != CL_SUCCESS)
            log[0] = '\0';
    } else {
        /* Longer than the scratch: the API cannot return a prefix, so say so. */
        snprintf(log, cap, "(build log of %zu bytes exceeds the %zu-byte buffer)", n, cap);
    }
    log[cap - 1] = '\0';
    /* Trim trailing whitespace; drivers often append newlines. */
    size_t len = strlen(log);
    while (len > 0 && (log[len - 1] == '\n' || log[len - 1] == '\r' || log[len - 1] == ' ')) log[--len] = '\0';
}

/* Send dev->build_log to the logger line by line (the logger's line
 * buffer is 1 KiB), at most NMT_BUILD_LOG_LINES lines. */
static void log_build_log(nmt_device *dev, nmt_log_level level, const char *source) {
    const char *p = dev->build_log;
    unsigned lines = 0;
    while (*p && lines < NMT_BUILD_LOG_LINES) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        nmt_log(&dev->log, level, "  %s.cl: %.*s", source, (int)NMT_MIN(n, (size_t)900), p);
        lines++;
        p += n;
        if (*p == '\n') p++;
    }
    if (*p) nmt_log(&dev->log, level, "  %s.cl: (build log truncated)", source);
}

static int contains_ci(const char *h, const char *n) { return nmt_strcasestr_ascii(h, n); }

int nmt_build_log_abi_note(const char *line, size_t len) {
    static const char note[] = "without 'avx512f' enabled changes the ABI";
    const size_t m = sizeof note - 1;
    for (size_t i = 0; i + m <= len; i++)
        if (memcmp(line + i, note, m) == 0) return 1;
    return 0;
}

nmt_log_level nmt_build_log_level(const char *log) {
    for (const char *p = log; p && *p;) {
        const char *e = strchr(p, '\n');
        const size_t n = e ? (size_t)(e - p) : strlen(p);
        char line[1024]; /* a line's head: where a compiler says "warning" */
        snprintf(line, sizeof line, "%.*s", (int)NMT_MIN(n, sizeof line - 1), p);
        const size_t ln = strlen(line);
        const int count_line = line[0] >= '0' && line[0] <= '9' && ln > 10 && strcmp(line + ln - 10, "generated.") == 0;
        if (contains_ci(line, "warning") && !count_line && !nmt_build_log_abi_note(p, n)) return NMT_LOG_WARN;
        p = e ? e + 1 : p + n;
    }
    return NMT_LOG_DEBUG;
}

typedef struct cache_fill_ctx {
    nmt_device *dev;
    cl_program program;
    uint64_t key;
    size_t payload;
} cache_fill_ctx;

/* Writes header + driver binary straight into the temp file's mapping. */
static int cache_fill(void *user, void *dst, size_t size) {
    cache_fill_ctx *c = (cache_fill_ctx *)user;
    if (dst == NULL || size != sizeof(nmt_clbin_header) + c->payload) return 1;
    unsigned char *payload = (unsigned char *)dst + sizeof(nmt_clbin_header);
    cl_int e = clGetProgramInfo(c->program, CL_PROGRAM_BINARIES, sizeof payload, &payload, NULL);
    if (e != CL_SUCCESS) {
        nmt_log(&c->dev->log, NMT_LOG_WARN, "clGetProgramInfo(CL_PROGRAM_BINARIES) failed: %s (%d)",
                nmt_cl_error_str(e), (int)e);
        return 1;
    }
    nmt_clbin_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, NMT_CLBIN_MAGIC, sizeof h.magic);
    h.format = NMT_CLBIN_FORMAT;
    h.key = c->key;
    h.payload_size = c->payload;
    h.payload_hash = nmt_fnv1a(NMT_FNV_OFFSET, payload, c->payload);
    memcpy(dst, &h, sizeof h);
    return 0;
}

/* Store the freshly built program's binary under `path` (best effort). */
static size_t cache_store(nmt_device *dev, cl_program prog, uint64_t key, const char *path) {
    size_t bin_size = 0;
    cl_int e = clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof bin_size, &bin_size, NULL);
    if (e != CL_SUCCESS || bin_size == 0) {
        nmt_log(&dev->log, NMT_LOG_WARN, "program binary unavailable (%s, %zu bytes); not cached",
                nmt_cl_error_str(e), bin_size);
        return 0;
    }
    cache_fill_ctx c = {dev, prog, key, bin_size};
    if (nmt_write_file_atomic(path, sizeof(nmt_clbin_header) + bin_size, cache_fill, &c) != NMT_OK) {
        nmt_log(&dev->log, NMT_LOG_WARN, "cannot write program cache file %s", path);
        return 0;
    }
    nmt_log(&dev->log, NMT_LOG_DEBUG, "cached program binary %s (%zu bytes)", path, bin_size);
    return bin_size;
}

/* Try the cache file.  Returns a built program, or NULL (miss or reject;
 * a rejected file is deleted and counted). */
static cl_program cache_load(nmt_device *dev, uint64_t key, const char *path, const char *options,
                             const char *source) {
    nmt_mapping m;
    if (nmt_map_file(path, &m) != NMT_OK) {
        dev->n_cache_misses++;
        return NULL;
    }
    const char *why = NULL;
    cl_int e = CL_SUCCESS;
    cl_program prog = NULL;
    nmt_clbin_header h;
    if (m.size < sizeof h) {
        why = "shorter than its header";
    } else {
        memcpy(&h, m.data, sizeof h);
        const unsigned char *payload = (const unsigned char *)m.data + sizeof h;
        size_t payload_size = m.size - sizeof h;
        if (memcmp(h.magic, NMT_CLBIN_MAGIC, sizeof h.magic) != 0 || h.format != NMT_CLBIN_FORMAT)
            why = "bad header";
        else if (h.key != key)
            why = "key mismatch";
        else if (h.payload_size != payload_size || payload_size == 0)
            why = "size mismatch";
        else if (h.payload_hash != nmt_fnv1a(NMT_FNV_OFFSET, payload, payload_size))
            why = "checksum mismatch";
        else {
            cl_int bin_status = CL_SUCCESS;
            prog = clCreateProgramWithBinary(dev->context, 1, &dev->device, &payload_size, &payload,
                                             &bin_status, &e);
            if (prog == NULL || e != CL_SUCCESS || bin_status != CL_SUCCESS) {
                if (e == CL_SUCCESS) e = bin_status != CL_SUCCESS ? bin_status : CL_INVALID_BINARY;
                why = "driver rejected the binary";
            } else {
                e = clBuildProgram(prog, 1, &dev->device, options, NULL, NULL);
                if (e != CL_SUCCESS) why = "driver could not build the binary";
            }
            if (why && prog) {
                clReleaseProgram(prog);
                prog = NULL;
            }
        }
    }
    nmt_unmap_file(&m);
    if (why) {
        /* Recovered by rebuilding from source, so last_cl_error is left alone. */
        nmt_log(&dev->log, NMT_LOG_WARN, "program cache %s for %s.cl: %s%s%s; rebuilding", path, source, why,
                e != CL_SUCCESS ? " " : "", e != CL_SUCCESS ? nmt_cl_error_str(e) : "");
        nmt_remove_file(path);
        dev->n_cache_rejects++;
        return NULL;
    }
    dev->n_cache_hits++;
    return prog;
}

void nmt_device_add_sources(nmt_device *dev, const nmt_embedded_source *table, size_t n) {
    if (dev == NULL) return;
    dev->extra_sources = table;
    dev->n_extra_sources = table ? n : 0;
}

static const nmt_embedded_source *find_embedded(const nmt_device *dev, const char *name) {
    for (size_t i = 0; i < nmt_embedded_source_count; i++)
        if (strcmp(nmt_embedded_sources[i].name, name) == 0) return &nmt_embedded_sources[i];
    for (size_t i = 0; i < dev->n_extra_sources; i++)
        if (strcmp(dev->extra_sources[i].name, name) == 0) return &dev->extra_sources[i];
    return NULL;
}

/* The text of <source>.cl: embedded, or mapped from kernel_dir (*file, to be
 * unmapped by the caller).  A file missing from kernel_dir is an I/O error,
 * never a fallback to the embedded copy. */
static nmt_status source_text(nmt_device *dev, const char *source, nmt_mapping *file, const char **text,
                              size_t *len) {
    if (dev->kernel_dir[0]) {
        char path[NMT_PATH_MAX + 64];
        snprintf(path, sizeof path, "%s/%s.cl", dev->kernel_dir, source);
        if (nmt_map_file(path, file) != NMT_OK) {
            nmt_log(&dev->log, NMT_LOG_ERROR, "cannot read kernel source %s", path);
            return NMT_ERR_IO;
        }
        *text = file->data ? (const char *)file->data : "";
        *len = file->size;
        return NMT_OK;
    }
    const nmt_embedded_source *es = find_embedded(dev, source);
    if (es == NULL) {
        nmt_log(&dev->log, NMT_LOG_ERROR, "no embedded kernel source %s.cl", source);
        return NMT_ERR_INVALID_ARGUMENT;
    }
    *text = es->text;
    *len = es->length;
    return NMT_OK;
}

int nmt_program_has_chain(const char *text, size_t len) {
    static const char mark[] = "CHAIN_KERNEL(";
    const size_t m = sizeof mark - 1;
    if (text == NULL) return 0;
    for (size_t i = 0; i + m <= len; i++) {
        if ((i == 0 || text[i - 1] == '\n') && memcmp(text + i, mark, m) == 0) return 1;
        const char *nl = memchr(text + i, '\n', len - i);
        if (nl == NULL) break;
        i = (size_t)(nl - text); /* the loop's i++ steps past it */
    }
    return 0;
}

nmt_status nmt_device_program(nmt_device *dev, const char *source, const char *options, cl_program *out) {
    if (out) *out = NULL;
    if (dev == NULL || source == NULL || out == NULL || dev->context == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (options == NULL) options = "";
    if (source[0] == '\0' || strlen(source) >= sizeof dev->programs[0].source ||
        strlen(options) >= sizeof dev->programs[0].options)
        return NMT_ERR_INVALID_ARGUMENT;
    /* file stems, never paths: one, or several joined by '+' (one program of
     * their texts, device.h) */
    const char *stems[NMT_PROGRAM_STEMS];
    size_t stem_len[NMT_PROGRAM_STEMS];
    int n_stems = 0;
    for (const char *c = source;; c++) {
        const char *e = c;
        while (*e && *e != '+') e++;
        if (e == c || n_stems == NMT_PROGRAM_STEMS) return NMT_ERR_INVALID_ARGUMENT;
        for (const char *q = c; q < e; q++)
            if (*q == '/' || *q == '\\' || *q == '.') return NMT_ERR_INVALID_ARGUMENT;
        const size_t n = (size_t)(e - c);
        if ((n == strlen(NMT_COMMON_SOURCE) && memcmp(c, NMT_COMMON_SOURCE, n) == 0) ||
            (n == strlen(NMT_CHAIN_SOURCE) && memcmp(c, NMT_CHAIN_SOURCE, n) == 0))
            return NMT_ERR_INVALID_ARGUMENT; /* prepended, not programs */
        stems[n_stems] = c;
        stem_len[n_stems++] = n;
        if (*e == '\0') break;
        c = e;
    }

    for (uint32_t i = 0; i < dev->n_programs; i++) {
        nmt_program_slot *sl = &dev->programs[i];
        if (strcmp(sl->source, source) == 0 && strcmp(sl->options, options) == 0) {
            *out = sl->program;
            return NMT_OK;
        }
    }
    if (dev->n_programs >= NMT_MAX_PROGRAMS) {
        nmt_log(&dev->log, NMT_LOG_ERROR, "program table full (%d programs)", NMT_MAX_PROGRAMS);
        return NMT_ERR_UNSUPPORTED;
    }

    /* Source text: cl/common.cl (helpers every program shares), cl/chain.cl
     * where a program's own text has a chain kernel, then the own texts in
     * the order named; embedded, or all mapped from kernel_dir for the
     * duration of the build.  The own texts are read first: they decide
     * whether chain.cl goes in. */
    enum { N_TEXTS = 2 + NMT_PROGRAM_STEMS };
    nmt_mapping files[N_TEXTS], own[NMT_PROGRAM_STEMS];
    memset(files, 0, sizeof files);
    memset(own, 0, sizeof own);
    const char *texts[N_TEXTS], *own_text[NMT_PROGRAM_STEMS];
    size_t lens[N_TEXTS], own_len[NMT_PROGRAM_STEMS];
    int n_own = 0, n_texts = 0, has_chain = 0;
    nmt_status ls = NMT_OK;
    for (; n_own < n_stems && ls == NMT_OK; n_own++) {
        char stem[sizeof dev->programs[0].source];
        memcpy(stem, stems[n_own], stem_len[n_own]);
        stem[stem_len[n_own]] = '\0';
        ls = source_text(dev, stem, &own[n_own], &own_text[n_own], &own_len[n_own]);
        if (ls == NMT_OK) has_chain |= nmt_program_has_chain(own_text[n_own], own_len[n_own]);
    }
    if (ls == NMT_OK) {
        const char *parts[2] = {NMT_COMMON_SOURCE, NMT_CHAIN_SOURCE};
        for (int i = 0; i < 1 + has_chain && ls == NMT_OK; i++, n_texts++)
            ls = source_text(dev, parts[i], &files[n_texts], &texts[n_texts], &lens[n_texts]);
    }
    for (int i = 0; i < n_own; i++, n_texts++) {
        files[n_texts] = own[i];
        texts[n_texts] = own_text[i];
        lens[n_texts] = own_len[i];
    }
    if (ls != NMT_OK) {
        for (int i = 0; i < n_texts; i++) nmt_unmap_file(&files[i]);
        return ls;
    }
    char full_opts[NMT_BUILD_OPTIONS_MAX + 32];
    nmt_full_build_options(options, full_opts, sizeof full_opts);
    uint64_t source_hash = NMT_FNV_OFFSET;  /* what a pack entry must have been built from */
    for (int i = 0; i < n_texts; i++) {  /* lengths as u64: the same on every host */
        const uint64_t len64 = (uint64_t)lens[i];
        source_hash = nmt_fnv1a(source_hash, &len64, sizeof len64);
        source_hash = nmt_fnv1a(source_hash, texts[i], lens[i]);
    }

    const double t_start = nmt_device_now(); /* the debug log's seconds (issue 54) */
    char cache_path[NMT_PATH_MAX + 32];
    uint64_t key = 0;
    cl_program prog = NULL;
    int from_cache = 0, from_pack = 0;
    size_t binary_size = 0;
    nmt_status s = NMT_OK;
    if (dev->kernel_pack[0]) {
        s = nmt_kpack_program(dev, source, full_opts, source_hash, &prog);
        from_pack = prog != NULL;
    }
    if (s == NMT_OK && prog == NULL && dev->cache_dir[0]) {
        const uint32_t fmt = NMT_CLBIN_FORMAT;
        key = nmt_fnv1a_str(dev->cache_key_base, source);
        for (int i = 0; i < n_texts; i++) {
            key = nmt_fnv1a(key, &lens[i], sizeof lens[i]);
            key = nmt_fnv1a(key, texts[i], lens[i]);
        }
        key = nmt_fnv1a_str(key, full_opts);
        key = nmt_fnv1a(key, &fmt, sizeof fmt);
        snprintf(cache_path, sizeof cache_path, "%s/%016llx.clbin", dev->cache_dir, (unsigned long long)key);
        prog = cache_load(dev, key, cache_path, full_opts, source);
        from_cache = prog != NULL;
        if (prog != NULL &&
            clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof binary_size, &binary_size, NULL) != CL_SUCCESS)
            binary_size = 0;
    }

    if (s == NMT_OK && prog == NULL && dev->binaries_only) {
        nmt_log(&dev->log, NMT_LOG_ERROR, "%s.cl (\"%s\") is in no kernel pack%s and cannot be compiled here "
                "(binaries only); make a pack for this model and device (nmt-edge-convert kernels)",
                source, full_opts, dev->kernel_pack[0] ? "" : " (none given)");
        s = NMT_ERR_KERNEL_PACK_MISSING;
    }
    if (s == NMT_OK && prog == NULL) {
        cl_int e = CL_SUCCESS;
        if (dev->progress) dev->progress(dev->progress_user, dev->info.device_name, dev->n_source_builds, 0);
        prog = clCreateProgramWithSource(dev->context, (cl_uint)n_texts, texts, lens, &e);
        if (prog == NULL || e != CL_SUCCESS) {
            prog = NULL;
            s = nmt_cl_fail(dev, e != CL_SUCCESS ? e : CL_INVALID_PROGRAM, "clCreateProgramWithSource");
        } else {
            /* -w is not in full_opts (the cache key, a pack entry's record):
             * it changes no code, only what the compiler says */
            char build_opts[sizeof full_opts + 4];
            snprintf(build_opts, sizeof build_opts, "%s%s", full_opts, dev->quiet_builds ? " -w" : "");
            e = clBuildProgram(prog, 1, &dev->device, build_opts, NULL, NULL);
            fetch_build_log(dev, prog);
            if (e != CL_SUCCESS) {
                nmt_status mapped = nmt_cl_fail(dev, e, "clBuildProgram");
                /* Compiler rejections are build failures whatever the code. */
                if (e == CL_BUILD_PROGRAM_FAILURE || e == CL_INVALID_BUILD_OPTIONS ||
                    e == CL_COMPILER_NOT_AVAILABLE || e == CL_INVALID_PROGRAM)
                    mapped = NMT_ERR_KERNEL_BUILD;
                s = mapped;
                nmt_log(&dev->log, NMT_LOG_ERROR, "building %s.cl with \"%s\" failed; build log:", source,
                        full_opts);
                log_build_log(dev, NMT_LOG_ERROR, source);
                clReleaseProgram(prog);
                prog = NULL;
            } else {
                dev->n_source_builds++;
                if (dev->build_log[0]) {
                    const nmt_log_level lvl = nmt_build_log_level(dev->build_log);
                    nmt_log(&dev->log, lvl, "build log of %s.cl (\"%s\"):", source, full_opts);
                    log_build_log(dev, lvl, source);
                }
                if (dev->cache_dir[0] && dev->cache_write) binary_size = cache_store(dev, prog, key, cache_path);
            }
        }
    }
    for (int i = 0; i < n_texts; i++) nmt_unmap_file(&files[i]);
    if (s != NMT_OK) return s;

    nmt_program_slot *sl = &dev->programs[dev->n_programs++];
    nmt_strlcpy(sl->source, source, sizeof sl->source);
    nmt_strlcpy(sl->options, options, sizeof sl->options);
    sl->program = prog;
    sl->from_cache = from_cache;
    sl->key = key;
    sl->binary_size = binary_size;
    sl->source_hash = source_hash;
    sl->from_pack = from_pack;
    const double dt = nmt_device_now() - t_start;
    if (!from_pack && !from_cache) dev->source_build_s += dt;
    nmt_log(&dev->log, NMT_LOG_DEBUG, "program %s.cl (\"%s\") %s in %.3f s", source, options,
            from_pack ? "created from the kernel pack" : from_cache ? "loaded from cache" : "built from source", dt);
    *out = prog;
    return NMT_OK;
}

void nmt_full_build_options(const char *options, char *buf, size_t cap) {
    snprintf(buf, cap, "-cl-std=CL1.2%s%s", options && options[0] ? " " : "", options ? options : "");
}

void nmt_device_progress_done(nmt_device *dev, uint32_t builds_before) {
    if (dev && dev->progress && dev->n_source_builds != builds_before)
        dev->progress(dev->progress_user, dev->info.device_name, dev->n_source_builds, 1);
}

uint32_t nmt_device_cache_refresh(nmt_device *dev) {
    if (dev == NULL || dev->cache_dir[0] == '\0' || !dev->cache_write) return 0;
    uint32_t written = 0;
    for (uint32_t i = 0; i < dev->n_programs; i++) {
        nmt_program_slot *sl = &dev->programs[i];
        size_t now = 0;
        if (sl->program == NULL || sl->key == 0 ||
            clGetProgramInfo(sl->program, CL_PROGRAM_BINARY_SIZES, sizeof now, &now, NULL) != CL_SUCCESS ||
            now == 0 || now == sl->binary_size)
            continue;
        char path[NMT_PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/%016llx.clbin", dev->cache_dir, (unsigned long long)sl->key);
        size_t stored = cache_store(dev, sl->program, sl->key, path);
        if (stored) {
            sl->binary_size = stored;
            written++;
        }
    }
    if (written) nmt_log(&dev->log, NMT_LOG_DEBUG, "program cache: %u binaries refreshed after warm-up", (unsigned)written);
    return written;
}

void nmt_device_tuning_path(const nmt_device *dev, char *buf, size_t cap) {
    if (buf == NULL || cap == 0) return;
    buf[0] = '\0';
    if (dev == NULL || dev->cache_dir[0] == '\0') return;
    snprintf(buf, cap, "%s/tuning-%016llx.txt", dev->cache_dir, (unsigned long long)dev->cache_key_base);
}
