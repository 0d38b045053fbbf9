/* SPDX-License-Identifier: MIT */
/* kernel_pack_test.c — kernel packs (runtime/device/kernel_pack.c, docs/FORMAT.md
 * "Kernel packs", issue 19 item 3).
 *
 * A pack is made with the test device (PoCL here) from a JIT session, then a
 * session is created from the pack with source compilation forbidden: the
 * test counts clCreateProgramWithSource calls through a link-time wrapper
 * (tests/CMakeLists.txt) and checks that there are none, that every program
 * came from the pack, and that translations are identical to the JIT
 * session's (same tokens, same scores, bit for bit) for the random test
 * model and the bundled en->de model.  A second wrapper makes the device
 * report no compiler (CL_DEVICE_COMPILER_AVAILABLE false), which must switch
 * binaries-only on by itself.  Every bad pack (corrupt, truncated, another
 * version, device, driver or tuning, programs missing or built for other
 * options or sources, a binary the driver refuses, the file replaced after
 * open) gets its exact status, never a crash.  The last test runs the
 * programs: nmt-edge-convert kernels, then nmt-edge translate --kernel-pack
 * --binaries-only, whose output equals the JIT run's. */
#include "test_util.h"

#include "format.h"
#include "kernel_pack.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- link-time wrappers ------------------------------------------------- */

static unsigned g_source_creates; /* clCreateProgramWithSource calls */
static int g_no_compiler;         /* clGetDeviceInfo answers "no compiler" */

cl_program __real_clCreateProgramWithSource(cl_context, cl_uint, const char **, const size_t *, cl_int *);
cl_program __wrap_clCreateProgramWithSource(cl_context, cl_uint, const char **, const size_t *, cl_int *);
cl_program __wrap_clCreateProgramWithSource(cl_context c, cl_uint n, const char **s, const size_t *l, cl_int *e) {
    g_source_creates++;
    return __real_clCreateProgramWithSource(c, n, s, l, e);
}

cl_int __real_clGetDeviceInfo(cl_device_id, cl_device_info, size_t, void *, size_t *);
cl_int __wrap_clGetDeviceInfo(cl_device_id, cl_device_info, size_t, void *, size_t *);
cl_int __wrap_clGetDeviceInfo(cl_device_id d, cl_device_info what, size_t cap, void *v, size_t *ret) {
    if (g_no_compiler && what == CL_DEVICE_COMPILER_AVAILABLE && cap >= sizeof(cl_bool) && v != NULL) {
        *(cl_bool *)v = CL_FALSE;
        if (ret) *ret = sizeof(cl_bool);
        return CL_SUCCESS;
    }
    return __real_clGetDeviceInfo(d, what, cap, v, ret);
}

/* ---- helpers ------------------------------------------------------------ */

#define TEST_MODEL NMT_TEST_BUILD_DIR "/models/test-model.nmt"
#define BUNDLED_MODEL NMT_TEST_SOURCE_DIR "/models/en-de.nmt"

static char *g_dir;                 /* temporary directory of the test run */
static char g_pack[600];            /* pack of the test model */
static unsigned char *g_pack_bytes; /* its bytes */
static size_t g_pack_size;

/* JIT parameters: the test device, its cache, our GEMM (as `kernels`). */
static void jit_params(nmt_device_params *p) {
    nmt_test_default_params(p);
    p->gemm = NMT_GEMM_OWN;
}

/* Pack parameters: no cache, binaries only unless told otherwise. */
static void pack_params(nmt_device_params *p, const char *pack, int binaries_only) {
    nmt_test_default_params(p);
    p->cache_dir = ""; /* none */
    p->kernel_pack = pack;
    p->binaries_only = binaries_only;
}

typedef struct sess {
    nmt_device *dev;
    void *dev_mem, *arena;
    nmt_session *s;
} sess;

static void sess_close(sess *x) {
    if (x->s) nmt_session_destroy(x->s);
    nmt_test_device_close(x->dev, x->dev_mem);
    free(x->arena);
    memset(x, 0, sizeof *x);
}

/* Open the device, then a session (batch 3, beam 4, 32 tokens).  Returns
 * the first failing status; on failure nothing stays open. */
static nmt_status sess_open(const nmt_device_params *dp, const char *model, sess *x) {
    memset(x, 0, sizeof *x);
    nmt_status s = nmt_test_device_open_with(dp, &x->dev_mem, &x->dev);
    if (s != NMT_OK) return s;
    nmt_session_params p;
    memset(&p, 0, sizeof p);
    p.model_path = model;
    p.limits.max_batch = 3;
    p.limits.max_beam = 4;
    p.limits.max_src_len = 32;
    size_t need = 0;
    s = nmt_session_arena_size(&p, &need, NULL);
    if (s == NMT_OK) {
        x->arena = aligned_alloc(NMT_ARENA_ALIGNMENT, nmt_test_round_up(need, NMT_ARENA_ALIGNMENT));
        assert_non_null(x->arena);
        s = nmt_session_create(x->dev, &p, x->arena, need, &x->s);
    }
    if (s != NMT_OK) {
        x->s = NULL;
        sess_close(x);
    }
    return s;
}

static const char *const SENTENCES[3] = {
    "This package contains the development files for the library.",
    "The program prints the help text and exits.",
    "Open the file, then save it in another format.",
};

/* Translate SENTENCES (beam 4) and print every hypothesis and score into buf. */
static void translate_all(sess *x, char *buf, size_t cap) {
    size_t lens[3];
    for (int i = 0; i < 3; i++) lens[i] = strlen(SENTENCES[i]);
    nmt_text_batch b = {SENTENCES, lens, 3};
    nmt_decode_opts o;
    memset(&o, 0, sizeof o);
    o.beam = 4;
    o.n_best = 2;
    nmt_test_assert_ok(x->dev, nmt_session_translate_text(x->s, &b, &o));
    size_t used = 0;
    buf[0] = '\0';
    for (uint32_t i = 0; i < 3; i++)
        for (uint32_t r = 0; r < nmt_session_n_results(x->s, i); r++) {
            const char *t = NULL;
            size_t n = 0;
            float score = 0, lp = 0;
            nmt_test_assert_ok(x->dev, nmt_session_result_text(x->s, i, r, &t, &n, &score, &lp));
            used += (size_t)snprintf(buf + used, cap - used, "%u.%u %.*s |%a|%a\n", i, r, (int)n, t, score, lp);
            assert_true(used < cap);
        }
}

/* The pack of the test model, made once from a JIT session. */
static void ensure_pack(void) {
    if (g_pack_bytes) return;
    g_dir = nmt_test_make_temp_dir("kpack");
    snprintf(g_pack, sizeof g_pack, "%s/test-model.nmk", g_dir);
    nmt_device_params dp;
    jit_params(&dp);
    sess a;
    nmt_test_assert_ok(NULL, sess_open(&dp, TEST_MODEL, &a));
    uint32_t n = 0;
    nmt_test_assert_ok(a.dev, nmt_kpack_write(a.dev, g_pack, &n));
    assert_int_equal(n, a.dev->n_programs);
    assert_true(n >= 4);  /* gemm, attention, norm, elementwise at least */
    sess_close(&a);
    g_pack_bytes = nmt_test_read_file(g_pack, &g_pack_size);
    assert_non_null(g_pack_bytes);
    nmt_kpack_header h;
    char why[256];
    assert_int_equal(nmt_kpack_parse(g_pack_bytes, g_pack_size, 1, &h, why, sizeof why), NMT_OK);
    assert_int_equal(h.n_programs, n);
    assert_int_equal(h.file_size, g_pack_size);
}

/* A pack made from a JIT session of `model`, then a binaries-only session
 * from it without cache: no source compile, every program from the pack,
 * the same translations; then the same with the decoding steps not chained
 * (NMT_EDGE_NO_PRODUCT_CHAIN). */
static void pack_matches_jit(const char *model, int text) {
    char dir_pack[700];
    snprintf(dir_pack, sizeof dir_pack, "%s/%s.nmk", g_dir, text ? "bundled" : "random");
    nmt_device_params dp;
    jit_params(&dp);
    sess a;
    nmt_test_assert_ok(NULL, sess_open(&dp, model, &a));
    uint32_t n = 0;
    nmt_test_assert_ok(a.dev, nmt_kpack_write(a.dev, dir_pack, &n));
    static char want[8192], got[8192];
    translate_all(&a, want, sizeof want);
    sess_close(&a);

    pack_params(&dp, dir_pack, 1);
    const unsigned before = g_source_creates;
    sess b;
    nmt_test_assert_ok(NULL, sess_open(&dp, model, &b));
    assert_int_equal(g_source_creates, before);      /* nothing compiled from source */
    assert_int_equal(b.dev->n_source_builds, 0);
    assert_int_equal(b.dev->n_pack_hits, n);
    assert_int_equal(b.dev->n_programs, n);
    for (uint32_t i = 0; i < n; i++) assert_true(b.dev->programs[i].from_pack);
    translate_all(&b, got, sizeof got);
    assert_int_equal(g_source_creates, before);
    assert_string_equal(got, want);
    sess_close(&b);
    /* the same pack serves a session that does not chain its steps (the
     * programs' options do not depend on it; the int8 row program's once
     * did, by which op built it first) */
    setenv("NMT_EDGE_NO_PRODUCT_CHAIN", "1", 1);
    sess c;
    const nmt_status st = sess_open(&dp, model, &c);
    unsetenv("NMT_EDGE_NO_PRODUCT_CHAIN");
    nmt_test_assert_ok(NULL, st);
    assert_int_equal(c.dev->n_source_builds, 0);
    translate_all(&c, got, sizeof got);
    assert_string_equal(got, want);
    sess_close(&c);
}

/* ---- tests -------------------------------------------------------------- */

static void test_pack_random_model(void **state) {
    (void)state;
    ensure_pack();
    pack_matches_jit(TEST_MODEL, 0);
}

static void test_pack_bundled_model(void **state) {
    (void)state;
    ensure_pack();
    pack_matches_jit(BUNDLED_MODEL, 1);
}

/* A device without a compiler is binaries-only by itself. */
static void test_no_compiler(void **state) {
    (void)state;
    ensure_pack();
    nmt_device_params dp;
    pack_params(&dp, g_pack, 0);
    g_no_compiler = 1;
    sess x;
    const unsigned before = g_source_creates;
    nmt_status s = sess_open(&dp, TEST_MODEL, &x);
    if (s == NMT_OK) {
        assert_true(x.dev->binaries_only);
        assert_false(x.dev->compiler_available);
        assert_int_equal(g_source_creates, before);
        sess_close(&x);
    }
    /* no pack: a program is missing, whatever the cache holds of others */
    nmt_device_params np;
    nmt_test_default_params(&np);
    np.cache_dir = "";
    sess y;
    nmt_status s2 = sess_open(&np, TEST_MODEL, &y);
    /* CLBlast cannot serve a device that cannot compile */
    np.gemm = NMT_GEMM_CLBLAST;
    void *mem = NULL;
    nmt_device *dev = NULL;
    nmt_status s3 = nmt_test_device_open_with(&np, &mem, &dev);
    g_no_compiler = 0;
    assert_int_equal(s, NMT_OK);
    assert_int_equal(s2, NMT_ERR_KERNEL_PACK_MISSING);
    assert_int_equal(s3, NMT_ERR_UNSUPPORTED);
    assert_int_equal(g_source_creates, before);
}

/* The test model's pack lacks the int8 GEMM the bundled model needs. */
static void test_missing_program(void **state) {
    (void)state;
    ensure_pack();
    nmt_device_params dp;
    pack_params(&dp, g_pack, 1);
    sess x;
    const unsigned before = g_source_creates;
    assert_int_equal(sess_open(&dp, BUNDLED_MODEL, &x), NMT_ERR_KERNEL_PACK_MISSING);
    assert_int_equal(g_source_creates, before);
    /* binaries-only without any pack: the same status */
    pack_params(&dp, NULL, 1);
    assert_int_equal(sess_open(&dp, TEST_MODEL, &x), NMT_ERR_KERNEL_PACK_MISSING);
    assert_int_equal(g_source_creates, before);
    /* compiling allowed: what the pack lacks is compiled, the rest comes from it */
    pack_params(&dp, g_pack, 0);
    dp.cache_dir = getenv("NMT_EDGE_CACHE_DIR");
    nmt_test_assert_ok(NULL, sess_open(&dp, BUNDLED_MODEL, &x));
    assert_true(x.dev->n_pack_hits > 0);
    assert_true(x.dev->n_pack_hits < x.dev->n_programs);
    sess_close(&x);
}

/* ---- bad packs ---------------------------------------------------------- */

typedef enum mutation {
    M_EMPTY, M_MAGIC, M_VERSION, M_SHORT_HEADER, M_TRUNCATED, M_HEADER_CRC, M_TABLE_CRC, M_BINARY_CRC,
    M_HEADER_SIZE, M_RESERVED, M_STRING, M_TOO_MANY, M_TRAILING, M_MISALIGNED, M_OVERLAP, M_PAST_END,
    M_ZERO_SIZE, M_BAD_NAME, M_OPTIONS_HASH, M_DUPLICATE, M_DEVICE, M_DRIVER, M_TUNING, M_OPTIONS, M_SOURCES,
    M_RENAMED, M_GARBAGE_BINARY, M_COUNT
} mutation;

typedef struct bad_case {
    const char *name;
    nmt_status at_open;     /* nmt_device_open */
    nmt_status at_session;  /* nmt_session_create (binaries only), when open succeeded */
} bad_case;

static const bad_case BAD[M_COUNT] = {
    [M_EMPTY] = {"empty file", NMT_ERR_KERNEL_PACK_CORRUPT, NMT_OK},
    [M_MAGIC] = {"bad magic", NMT_ERR_KERNEL_PACK_CORRUPT, NMT_OK},
    [M_VERSION] = {"format version 2", NMT_ERR_KERNEL_PACK_VERSION, NMT_OK},
    [M_SHORT_HEADER] = {"cut inside the header", NMT_ERR_KERNEL_PACK_CORRUPT, NMT_OK},
    [M_TRUNCATED] = {"cut inside a binary", NMT_ERR_KERNEL_PACK_CORRUPT, NMT_OK},
    [M_HEADER_CRC] = {"header byte flipped", NMT_ERR_KERNEL_PACK_CORRUPT, NMT_OK},
    [M_TABLE_CRC] = {"table byte flipped", NMT_ERR_KERNEL_PACK_CORRUPT, NMT_OK},
    [M_BINARY_CRC] = {"binary byte flipped", NMT_ERR_KERNEL_PACK_CORRUPT, NMT_OK},
    [M_HEADER_SIZE] = {"header_size 1024", NMT_ERR_KERNEL_PACK_CORRUPT, NMT_OK},
    [M_RESERVED] = {"reserved header byte set", NMT_ERR_KERNEL_PACK_CORRUPT, NMT_OK},
    [M_STRING] = {"device name without NUL", NMT_ERR_KERNEL_PACK_CORRUPT, NMT_OK},
    [M_TOO_MANY] = {"n_programs 257", NMT_ERR_KERNEL_PACK_CORRUPT, NMT_OK},
    [M_TRAILING] = {"bytes after the last binary", NMT_ERR_KERNEL_PACK_CORRUPT, NMT_OK},
    [M_MISALIGNED] = {"binary offset not a multiple of 64", NMT_ERR_KERNEL_PACK_CORRUPT, NMT_OK},
    [M_OVERLAP] = {"binaries overlap", NMT_ERR_KERNEL_PACK_CORRUPT, NMT_OK},
    [M_PAST_END] = {"binary past the end", NMT_ERR_KERNEL_PACK_CORRUPT, NMT_OK},
    [M_ZERO_SIZE] = {"empty binary", NMT_ERR_KERNEL_PACK_CORRUPT, NMT_OK},
    [M_BAD_NAME] = {"program name with a slash", NMT_ERR_KERNEL_PACK_CORRUPT, NMT_OK},
    [M_OPTIONS_HASH] = {"options hash wrong", NMT_ERR_KERNEL_PACK_CORRUPT, NMT_OK},
    [M_DUPLICATE] = {"one program twice", NMT_ERR_KERNEL_PACK_CORRUPT, NMT_OK},
    [M_DEVICE] = {"another device", NMT_ERR_KERNEL_PACK_DEVICE, NMT_OK},
    [M_DRIVER] = {"another driver version", NMT_ERR_KERNEL_PACK_DEVICE, NMT_OK},
    [M_TUNING] = {"other kernel parameters", NMT_ERR_KERNEL_PACK_TUNING, NMT_OK},
    [M_OPTIONS] = {"a program built with other options", NMT_OK, NMT_ERR_KERNEL_PACK_TUNING},
    [M_SOURCES] = {"a program built from other sources", NMT_OK, NMT_ERR_KERNEL_PACK_TUNING},
    [M_RENAMED] = {"a program missing", NMT_OK, NMT_ERR_KERNEL_PACK_MISSING},
    [M_GARBAGE_BINARY] = {"a binary the driver refuses", NMT_OK, NMT_ERR_KERNEL_PACK_DEVICE},
};

static void get_entry(const unsigned char *d, uint32_t i, nmt_kpack_entry *e) { nmt_kpack_entry_at(d, i, e); }
static void put_entry(unsigned char *d, uint32_t i, const nmt_kpack_entry *e) {
    memcpy(d + NMT_KPACK_HEADER_SIZE + (size_t)i * NMT_KPACK_ENTRY_SIZE, e, sizeof *e);
}
static uint64_t fnv_s(const char *s) { return nmt_fnv1a(NMT_FNV_OFFSET, s, strlen(s) + 1); }

/* The good pack with mutation m applied; *size its new size.  Malloc'd. */
static unsigned char *mutate(mutation m, size_t *size) {
    unsigned char *d = malloc(g_pack_size + 4096);
    assert_non_null(d);
    memcpy(d, g_pack_bytes, g_pack_size);
    size_t n = g_pack_size;
    nmt_kpack_header h;
    memcpy(&h, d, sizeof h);
    nmt_kpack_entry e0, e1;
    get_entry(d, 0, &e0);
    get_entry(d, 1, &e1);
    int seal = 1;
    switch (m) {
    case M_EMPTY: n = 0; seal = 0; break;
    case M_MAGIC: d[3] ^= 0x20; seal = 0; break;
    case M_VERSION: h.version = 2; break;
    case M_SHORT_HEADER: n = 500; seal = 0; break;
    case M_TRUNCATED: n = (size_t)e1.offset + 10; seal = 0; break;
    case M_HEADER_CRC: d[330] ^= 1; seal = 0; break;
    case M_TABLE_CRC: d[NMT_KPACK_HEADER_SIZE + 100] ^= 1; seal = 0; break;
    case M_BINARY_CRC: d[e0.offset + e0.size / 2] ^= 0x40; seal = 0; break;
    case M_HEADER_SIZE: h.header_size = 1024; break;
    case M_RESERVED: h.reserved1[7] = 1; break;
    case M_STRING: memset(h.device_name, 'x', sizeof h.device_name); break;
    case M_TOO_MANY: h.n_programs = NMT_KPACK_MAX_PROGRAMS + 1; break;
    case M_TRAILING: memset(d + n, 0, 64); n += 64; h.file_size = n; break;
    case M_MISALIGNED: e1.offset += 8; put_entry(d, 1, &e1); break;
    case M_OVERLAP: e1.offset = e0.offset; put_entry(d, 1, &e1); break;
    case M_PAST_END: e0.size = n; put_entry(d, 0, &e0); break;
    case M_ZERO_SIZE: e0.size = 0; put_entry(d, 0, &e0); break;
    case M_BAD_NAME: strcpy(e0.name, "../gemm"); put_entry(d, 0, &e0); break;
    case M_OPTIONS_HASH: e0.options_hash ^= 1; put_entry(d, 0, &e0); break;
    case M_DUPLICATE:
        memcpy(e1.name, e0.name, sizeof e1.name); memcpy(e1.options, e0.options, sizeof e1.options);
        e1.options_hash = e0.options_hash; put_entry(d, 1, &e1); break;
    case M_DEVICE:
        h.device_id ^= 0x5555;
        memset(h.device_name, 0, sizeof h.device_name);
        strcpy(h.device_name, "Some FPGA board");
        break;
    case M_DRIVER:
        h.device_id ^= 0x1234;
        memset(h.driver_version, 0, sizeof h.driver_version);
        strcpy(h.driver_version, "9.9+other");
        break;
    case M_TUNING: h.tuning_id ^= 1; break;
    case M_OPTIONS:
        /* every entry of program 0's name gets other options */
        for (uint32_t i = 0; i < h.n_programs; i++) {
            nmt_kpack_entry e;
            get_entry(d, i, &e);
            if (strcmp(e.name, e0.name) != 0) continue;
            const size_t len = strlen(e.options);
            assert_true(len + 16 < sizeof e.options);
            memcpy(e.options + len, " -DNMT_OTHER=1", 15);
            e.options[len + 13] = (char)('a' + i % 26);
            e.options_hash = fnv_s(e.options);
            put_entry(d, i, &e);
        }
        break;
    case M_SOURCES:
        for (uint32_t i = 0; i < h.n_programs; i++) {
            nmt_kpack_entry e;
            get_entry(d, i, &e);
            e.source_hash ^= 1;
            put_entry(d, i, &e);
        }
        break;
    case M_RENAMED:
        for (uint32_t i = 0; i < h.n_programs; i++) {
            nmt_kpack_entry e;
            get_entry(d, i, &e);
            if (strncmp(e.name, "attention", 9) != 0) continue; /* "attention", or joined with beam.cl */
            e.name[8] = 'X';
            put_entry(d, i, &e);
        }
        break;
    case M_GARBAGE_BINARY:
        for (uint32_t i = 0; i < h.n_programs; i++) {
            nmt_kpack_entry e;
            get_entry(d, i, &e);
            nmt_test_rng r = nmt_test_rng_make(i + 7);
            for (uint64_t k = 0; k < e.size; k++) d[e.offset + k] = (unsigned char)nmt_test_rng_next(&r);
        }
        break;
    case M_COUNT: break;
    }
    if (seal) {
        memcpy(d, &h, sizeof h);
        nmt_kpack_seal(d, n);
    }
    *size = n;
    return d;
}

static void test_bad_packs(void **state) {
    (void)state;
    ensure_pack();
    char path[700];
    snprintf(path, sizeof path, "%s/bad.nmk", g_dir);
    for (int m = 0; m < M_COUNT; m++) {
        size_t n = 0;
        unsigned char *d = mutate((mutation)m, &n);
        assert_int_equal(nmt_test_write_file(path, d, n), 0);
        /* the reader alone (what the fuzzer drives) agrees with the device */
        nmt_kpack_header h;
        char why[256];
        nmt_status ps = nmt_kpack_parse(n ? d : NULL, n, 1, &h, why, sizeof why);
        nmt_device_params dp;
        pack_params(&dp, path, 1);
        sess x;
        const unsigned before = g_source_creates;
        nmt_status s = nmt_test_device_open_with(&dp, &x.dev_mem, &x.dev);
        nmt_status ss = NMT_OK;
        if (s == NMT_OK) {
            nmt_test_device_close(x.dev, x.dev_mem);
            ss = sess_open(&dp, TEST_MODEL, &x);
            if (ss == NMT_OK) sess_close(&x);
        }
        fprintf(stderr, "bad pack '%s': parse %s%s%s, open %s, session %s\n", BAD[m].name, nmt_status_str(ps),
                ps ? ": " : "", ps ? why : "", nmt_status_str(s), nmt_status_str(ss));
        assert_int_equal(s, BAD[m].at_open);
        assert_int_equal(ss, BAD[m].at_session);
        if (BAD[m].at_open == NMT_ERR_KERNEL_PACK_CORRUPT || BAD[m].at_open == NMT_ERR_KERNEL_PACK_VERSION)
            assert_int_equal(ps, BAD[m].at_open);
        else
            assert_int_equal(ps, NMT_OK);
        assert_int_equal(g_source_creates, before);
        free(d);
    }
    /* a path that is no pack file */
    nmt_device_params dp;
    sess x;
    pack_params(&dp, "/nonexistent/pack.nmk", 1);
    assert_int_equal(nmt_test_device_open_with(&dp, &x.dev_mem, &x.dev), NMT_ERR_IO);
    pack_params(&dp, g_dir, 1);
    assert_int_equal(nmt_test_device_open_with(&dp, &x.dev_mem, &x.dev), NMT_ERR_IO);
}

/* The committed seeds of the fuzzer (written by the Python writer in
 * docs/FORMAT.md's words, tests/fuzz/corpus/kernel_pack/): golden files
 * with the status each must give. */
static void test_golden_files(void **state) {
    (void)state;
    static const struct {
        const char *file;
        nmt_status want;
        uint32_t n_programs;
    } golden[] = {
        {"two-programs.nmk", NMT_OK, 2}, {"one-program.nmk", NMT_OK, 1}, {"empty-pack.nmk", NMT_OK, 0},
        {"version2.nmk", NMT_ERR_KERNEL_PACK_VERSION, 0}, {"truncated.nmk", NMT_ERR_KERNEL_PACK_CORRUPT, 0},
    };
    for (size_t i = 0; i < sizeof golden / sizeof golden[0]; i++) {
        char path[700];
        snprintf(path, sizeof path, "%s/tests/fuzz/corpus/kernel_pack/%s", NMT_TEST_SOURCE_DIR, golden[i].file);
        size_t n = 0;
        unsigned char *d = nmt_test_read_file(path, &n);
        assert_non_null(d);
        nmt_kpack_header h;
        char why[256];
        assert_int_equal(nmt_kpack_parse(d, n, 1, &h, why, sizeof why), golden[i].want);
        if (golden[i].want == NMT_OK) {
            assert_int_equal(h.n_programs, golden[i].n_programs);
            assert_string_equal(h.device_name, "fuzz device");
            if (h.n_programs) {
                nmt_kpack_entry e;
                nmt_kpack_entry_at(d, 0, &e);
                assert_int_equal(e.offset % 64, 0);
                assert_int_equal(e.crc, nmt_crc32(0, d + e.offset, (size_t)e.size));
            }
            /* a device refuses it: another device */
            nmt_device_params dp;
            pack_params(&dp, path, 1);
            void *mem = NULL;
            nmt_device *dev = NULL;
            assert_int_equal(nmt_test_device_open_with(&dp, &mem, &dev), NMT_ERR_KERNEL_PACK_DEVICE);
        }
        free(d);
    }
}

/* The pack checked at open, then replaced, cut or removed before the
 * session: checked again, a status, never a read past its end. */
static void test_pack_replaced_after_open(void **state) {
    (void)state;
    ensure_pack();
    char path[700];
    snprintf(path, sizeof path, "%s/replaced.nmk", g_dir);
    for (int round = 0; round < 3; round++) {
        assert_int_equal(nmt_test_write_file(path, g_pack_bytes, g_pack_size), 0);
        nmt_device_params dp;
        pack_params(&dp, path, 1);
        void *mem = NULL;
        nmt_device *dev = NULL;
        nmt_test_assert_ok(NULL, nmt_test_device_open_with(&dp, &mem, &dev));
        if (round == 0) assert_int_equal(truncate(path, (off_t)(g_pack_size / 2)), 0);
        if (round == 1) {
            size_t n = 0;
            unsigned char *d = mutate(M_DRIVER, &n);
            assert_int_equal(nmt_test_write_file(path, d, n), 0);
            free(d);
        }
        if (round == 2) assert_int_equal(unlink(path), 0);
        nmt_session_params p;
        memset(&p, 0, sizeof p);
        p.model_path = TEST_MODEL;
        size_t need = 0;
        nmt_test_assert_ok(dev, nmt_session_arena_size(&p, &need, NULL));
        void *arena = aligned_alloc(NMT_ARENA_ALIGNMENT, nmt_test_round_up(need, NMT_ARENA_ALIGNMENT));
        nmt_session *s = NULL;
        const nmt_status want[3] = {NMT_ERR_KERNEL_PACK_CORRUPT, NMT_ERR_KERNEL_PACK_DEVICE, NMT_ERR_IO};
        assert_int_equal(nmt_session_create(dev, &p, arena, need, &s), want[round]);
        free(arena);
        nmt_test_device_close(dev, mem);
    }
}

/* The programs: nmt-edge-convert kernels writes the pack, nmt-edge
 * translates from it with compilation forbidden, as the JIT run does. */
static void test_programs(void **state) {
    (void)state;
    ensure_pack();
    char pack[700];
    snprintf(pack, sizeof pack, "%s/cli.nmk", g_dir);
    nmt_test_proc r;
    char *const conv[] = {NMT_CONVERT_BIN, "kernels", "--model", TEST_MODEL, "-o", pack, NULL};
    nmt_test_run(conv, NULL, g_dir, &r);
    fprintf(stderr, "%s%s", r.out, r.err);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "programs for"));
    nmt_test_proc_free(&r);
    const char *in = "Hello world, this is a test.\nAnother line of text.\n";
    char *const jit[] = {NMT_EDGE_BIN, "translate", "--model", TEST_MODEL, "--gemm", "own", NULL};
    nmt_test_run(jit, in, g_dir, &r);
    assert_int_equal(r.status, 0);
    char *want = strdup(r.out);
    nmt_test_proc_free(&r);
    char *const packed[] = {NMT_EDGE_BIN, "translate", "--model", TEST_MODEL, "--no-cache", "--binaries-only",
                            "--kernel-pack", pack, NULL};
    nmt_test_run(packed, in, g_dir, &r);
    fprintf(stderr, "%s", r.err);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, want);
    nmt_test_proc_free(&r);
    /* a bad pack is a message and exit status 1 */
    assert_int_equal(nmt_test_write_file(pack, "NMTKPACK", 8), 0);
    nmt_test_run(packed, in, g_dir, &r);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "kernel pack"));
    nmt_test_proc_free(&r);
    free(want);
}

#ifdef NMT_PYTHON3
/* scripts/nmk-retarget.py (docs/PORTING.md), the whole round trip on the
 * test model's pack: extract writes each program's source (its check that
 * cl/ is the source every program was built from holds only where the
 * script puts cl/chain.cl into the programs the runtime does, so a rule
 * that drifts from nmt_program_has_chain's fails here), the pack's own
 * binaries stand for the vendor compiler's, and assemble with the pack as
 * its own target gives the pack again, byte for byte, from which a session
 * with compilation forbidden translates as the JIT one does. */
static void test_retarget_script(void **state) {
    (void)state;
    ensure_pack();
    char dir[700], out[700], path[800];
    snprintf(dir, sizeof dir, "%s/retarget", g_dir);
    snprintf(out, sizeof out, "%s/retarget.nmk", g_dir);
    const char *script = NMT_TEST_SOURCE_DIR "/scripts/nmk-retarget.py";
    nmt_test_proc r;
    char *const ex[] = {NMT_PYTHON3, (char *)script, "extract", g_pack, dir, NULL};
    nmt_test_run(ex, NULL, g_dir, &r);
    fprintf(stderr, "%s", r.err);
    assert_int_equal(r.status, 0);
    nmt_test_proc_free(&r);
    nmt_kpack_header h;
    char why[256];
    assert_int_equal(nmt_kpack_parse(g_pack_bytes, g_pack_size, 1, &h, why, sizeof why), NMT_OK);
    int chained = 0;
    for (uint32_t i = 0; i < h.n_programs; i++) {
        nmt_kpack_entry en;
        nmt_kpack_entry_at(g_pack_bytes, i, &en);
        size_t n = 0;
        snprintf(path, sizeof path, "%s/%02u-%s.options", dir, i, en.name);
        char *opts = nmt_test_read_file(path, &n);
        assert_non_null(opts);
        free(opts);
        snprintf(path, sizeof path, "%s/%02u-%s.cl", dir, i, en.name);
        char *text = nmt_test_read_file(path, &n);
        assert_non_null(text);
        assert_true(n > 0);
        /* chain.cl went in exactly where the program has a chain kernel */
        const int has_chain = nmt_program_has_chain(text, n);
        assert_int_equal(strstr(text, "#define CHAIN_KERNEL(") != NULL, has_chain);
        chained += has_chain;
        free(text);
        snprintf(path, sizeof path, "%s/%02u-%s.bin", dir, i, en.name);
        assert_int_equal(nmt_test_write_file(path, g_pack_bytes + en.offset, (size_t)en.size), 0);
    }
    assert_true(chained >= 1); /* a program cl/chain.cl goes into, and others */
    assert_true(h.n_programs > (uint32_t)chained);
    char *const as[] = {NMT_PYTHON3, (char *)script, "assemble", g_pack, g_pack, dir, "-o", out, NULL};
    nmt_test_run(as, NULL, g_dir, &r);
    fprintf(stderr, "%s", r.err);
    assert_int_equal(r.status, 0);
    nmt_test_proc_free(&r);
    size_t n = 0;
    char *again = nmt_test_read_file(out, &n);
    assert_non_null(again);
    assert_int_equal(n, g_pack_size);
    assert_memory_equal(again, g_pack_bytes, n);
    free(again);
    static char want[8192], got[8192];
    nmt_device_params dp;
    jit_params(&dp);
    sess a;
    nmt_test_assert_ok(NULL, sess_open(&dp, TEST_MODEL, &a));
    translate_all(&a, want, sizeof want);
    sess_close(&a);
    pack_params(&dp, out, 1);
    const unsigned before = g_source_creates;
    nmt_test_assert_ok(NULL, sess_open(&dp, TEST_MODEL, &a));
    translate_all(&a, got, sizeof got);
    assert_int_equal(g_source_creates, before);
    assert_int_equal(a.dev->n_pack_hits, h.n_programs);
    assert_string_equal(got, want);
    sess_close(&a);
}
#endif

static int teardown(void **state) {
    (void)state;
    if (g_dir) nmt_test_remove_tree(g_dir);
    free(g_dir);
    free(g_pack_bytes);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pack_random_model),
        cmocka_unit_test(test_pack_bundled_model),
        cmocka_unit_test(test_no_compiler),
        cmocka_unit_test(test_missing_program),
        cmocka_unit_test(test_bad_packs),
        cmocka_unit_test(test_golden_files),
        cmocka_unit_test(test_pack_replaced_after_open),
        cmocka_unit_test(test_programs),
#ifdef NMT_PYTHON3
        cmocka_unit_test(test_retarget_script),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, teardown);
}
