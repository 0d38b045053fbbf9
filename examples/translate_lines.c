/* SPDX-License-Identifier: MIT */
/* translate_lines.c — the smallest program that embeds libnmtedge: open a
 * device, size and hand over the arena once, then translate stdin line by
 * line with a model that carries its SentencePiece tokenizer, printing each
 * translation, its score and the time it took.  Build it against the
 * installed package (examples/CMakeLists.txt, or pkg-config: see
 * docs/INTEGRATION.md):
 *
 *   translate_lines MODEL [BEAM] < input.txt
 *
 * After nmt_session_create() the runtime allocates nothing: every buffer
 * comes from the two blocks of memory this program hands it. */
#define _POSIX_C_SOURCE 200809L
#include <nmt_edge.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int fail(const char *what, nmt_status s) {
    fprintf(stderr, "translate_lines: %s: %s\n", what, nmt_status_str(s));
    return 1;
}

/* Called while OpenCL programs compile from source (a first run). */
static void on_build(void *user, const char *device, uint32_t built, int finished) {
    (void)user;
    if (finished) fprintf(stderr, "\rcompiled %u kernel programs for %s (first run only)\n", built, device);
    else fprintf(stderr, "\rcompiling kernels for %s (first run only): %u", device, built);
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: translate_lines MODEL [BEAM] < input.txt\n");
        return 2;
    }
    const uint32_t beam = argc == 3 ? (uint32_t)strtoul(argv[2], NULL, 10) : 4;
    if (beam < 1 || beam > 64) {
        fprintf(stderr, "translate_lines: BEAM must be 1 to 64\n");
        return 2;
    }
    /* 1. the device (NULL spec: the first GPU, else the first device; the
     * library reads no $NMT_EDGE_DEVICE nor $NMT_EDGE_CACHE_DIR), in memory
     * this program owns.  cache_dir NULL: compiled programs are kept in
     * $XDG_CACHE_HOME/nmt-edge, else $HOME/.cache/nmt-edge, so only the
     * first run compiles the kernels (cache_dir "" would keep none; on PoCL
     * the driver's own cache serves later runs and `nmt-edge warmup` fills
     * ours: nmt_edge.h, cache_fill).  The first run can take seconds to
     * tens of seconds on a small board: say so as it goes.  The device and
     * its session are this thread's alone (nmt_edge.h, "Threads"). */
    nmt_device_params dp;
    memset(&dp, 0, sizeof dp);
    dp.progress = on_build;
    const size_t dbytes = (nmt_device_footprint() + 63) / 64 * 64;
    void *dmem = aligned_alloc(64, dbytes);
    nmt_device *dev = NULL;
    nmt_status s = dmem ? nmt_device_open(&dp, dmem, dbytes, &dev) : NMT_ERR_INVALID_ARGUMENT;
    if (s != NMT_OK) {
        free(dmem);
        return fail("opening the OpenCL device", s);
    }
    nmt_device_info di;
    nmt_device_get_info(dev, &di);
    fprintf(stderr, "device: %s (%s)\n", di.device_name, di.platform_name);
    /* 2. the limits this program translates under, and the exact arena */
    nmt_session_params sp;
    memset(&sp, 0, sizeof sp);
    sp.model_path = argv[1];
    sp.limits.max_batch = 1;
    sp.limits.max_beam = beam;
    sp.limits.max_src_len = 200;
    size_t need = 0;
    s = nmt_session_arena_size(&sp, &need, NULL);
    void *arena = s == NMT_OK ? aligned_alloc(NMT_ARENA_ALIGNMENT, (need + 63) / 64 * 64) : NULL;
    nmt_session *sess = NULL;
    if (s == NMT_OK && arena == NULL) s = NMT_ERR_ARENA_TOO_SMALL;
    if (s == NMT_OK) s = nmt_session_create(dev, &sp, arena, need, &sess);
    int rc = 0;
    if (s != NMT_OK) {
        rc = fail(argv[1], s);
    } else {
        fprintf(stderr, "session: %zu bytes of host memory, beam %u\n", need, beam);
        /* 3. translate line by line */
        char *line = NULL;
        size_t cap = 0;
        ssize_t n;
        const nmt_decode_opts opts = {.beam = beam};
        while (rc == 0 && (n = getline(&line, &cap, stdin)) >= 0) {
            while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
            const char *text[1] = {line};
            const size_t lens[1] = {(size_t)n};
            const nmt_text_batch b = {text, lens, 1};
            const double t0 = now();
            s = nmt_session_translate_text(sess, &b, &opts);
            const char *out = NULL;
            size_t out_len = 0;
            float score = 0;
            if (s == NMT_OK) s = nmt_session_result_text(sess, 0, 0, &out, &out_len, &score, NULL);
            if (s != NMT_OK) {
                rc = fail("translating", s);
                break;
            }
            printf("%.*s\n", (int)out_len, out);
            fprintf(stderr, "score %.3f, %.1f ms\n", score, (now() - t0) * 1e3);
        }
        free(line);
        nmt_session_destroy(sess);
    }
    /* 4. close in reverse order, then the memory is ours again */
    nmt_device_close(dev);
    free(arena);
    free(dmem);
    return rc;
}
