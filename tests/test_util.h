/* SPDX-License-Identifier: MIT */
/* test_util.h — helpers shared by every tests/<module>_test.c (cmocka).
 *
 *   devices   nmt_test_device_open() opens the test device: NMT_EDGE_DEVICE
 *             picks it (default: the library's rule), NMT_EDGE_CACHE_DIR is
 *             the program cache, logs go to stderr at WARN (NMT_TEST_LOG =
 *             error|warn|info|debug overrides).  Memory comes from malloc.
 *   random    a seeded splitmix64 generator: same seed, same data, on every
 *             platform.
 *   compare   normalised error max|got - want| / (max|want| + 1e-12) and an
 *             assertion that prints the worst element on failure.
 *   buffers   create / upload / download wrappers that fail the test on error.
 *   files     temporary directories and whole-file read/write.
 *   cases     NMT_TEST_FILTER / NMT_TEST_SKIP (cmocka name patterns, '*' and
 *             '?') run only the matching cases of any test / skip them.
 *
 * Every nmt_test_* function that "fails the test" does so through cmocka's
 * fail_msg, so it must be called from inside a running test (or a group
 * setup/teardown). */
#ifndef NMT_TEST_UTIL_H
#define NMT_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "device.h"
#include "nmt_edge.h"

/* ---- devices ------------------------------------------------------------ */

/* Log callback writing "[nmt LEVEL] msg" lines to stderr. */
void nmt_test_log_stderr(void *user, nmt_log_level level, const char *msg);

/* The parameters tests open devices with (see the file comment).  The
 * strings point into the environment; valid for the process lifetime. */
void nmt_test_default_params(nmt_device_params *p);

/* Open a device with `p` (NULL = nmt_test_default_params) in malloc'd
 * memory.  Returns the library's status; on success *out is the device and
 * *mem the memory to hand to nmt_test_device_close, on failure both NULL. */
nmt_status nmt_test_device_open_with(const nmt_device_params *p, void **mem, nmt_device **out);

/* Open the default test device (NULL and a message on stderr on failure;
 * usable from group setups). */
nmt_device *nmt_test_device_open(void **mem);

/* nmt_device_close(dev) + free(mem); either may be NULL. */
void nmt_test_device_close(nmt_device *dev, void *mem);
/* 1 when kernel source `text` enables an extension (`#pragma OPENCL
 * EXTENSION NAME : enable`, a fast path's file) that dev does not report,
 * with " NAME " in name[cap]; 0 when it needs none or dev has them all. */
int nmt_test_missing_extension(nmt_device *dev, const char *text, char *name, size_t cap);
/* Asserts that SOURCE builds with OPTIONS warning-free: built with
 * "-Werror OPTIONS".  One kind of warning is not the source's to remove: an
 * x86 compiler without AVX-512 (PoCL on such a host) notes every float16
 * argument or return, vload16 and vstore16 included, as an ABI change
 * (-Wpsabi), and PoCL refuses -Wno-psabi as a build option.  A build whose
 * every error is that note passes if OPTIONS alone then builds; any other
 * warning fails.  Returns the number of such notes (0 on a clean build).
 * What such a host does not check: clang stops generating code at the
 * first error, so a later code-generation warning (rare: the language's
 * warnings come before, and all of them are checked) shows only on an
 * AVX-512 host or another runtime. */
int nmt_test_build_clean(nmt_device *dev, const char *source, const char *options);

/* A cmocka group fixture holding the test device: setup stores a
 * malloc'd nmt_test_dev_env in *state (-1 when no device opens), teardown
 * closes and frees it. */
typedef struct nmt_test_dev_env {
    nmt_device *dev;
    void *dev_mem;
} nmt_test_dev_env;
int nmt_test_dev_setup(void **state);
int nmt_test_dev_teardown(void **state);

/* x rounded up to a multiple of a (a > 0). */
size_t nmt_test_round_up(size_t x, size_t a);

/* ---- random data -------------------------------------------------------- */

typedef struct nmt_test_rng {
    uint64_t state;
} nmt_test_rng;

nmt_test_rng nmt_test_rng_make(uint64_t seed);
uint64_t nmt_test_rng_next(nmt_test_rng *r);                         /* splitmix64 */
float nmt_test_rng_uniform(nmt_test_rng *r, float lo, float hi);     /* [lo, hi) */
int32_t nmt_test_rng_int(nmt_test_rng *r, int32_t lo, int32_t hi);   /* [lo, hi), hi > lo */
void nmt_test_fill_uniform(nmt_test_rng *r, float *x, size_t n, float lo, float hi);
void nmt_test_fill_int(nmt_test_rng *r, int32_t *x, size_t n, int32_t lo, int32_t hi);
void nmt_test_fill_const(float *x, size_t n, float v);

/* malloc'd arrays (fail the test when out of memory); free() them. */
float *nmt_test_alloc_f32(size_t n);                           /* zero-filled */
float *nmt_test_random_f32(nmt_test_rng *r, size_t n, float lo, float hi);
int32_t *nmt_test_random_i32(nmt_test_rng *r, size_t n, int32_t lo, int32_t hi);
float *nmt_test_dup_f32(const float *x, size_t n);

/* ---- comparison --------------------------------------------------------- */

/* max_i |got[i] - want[i]| / (max_i |want[i]| + 1e-12); +INF if any got[i]
 * or want[i] is NaN or the two disagree on an infinity. */
double nmt_test_norm_error(const float *got, const float *want, size_t n);

/* Fail the test (with the worst element, its index, both values and the
 * error) unless nmt_test_norm_error(got, want, n) <= tol. */
void nmt_test_assert_close_impl(const float *got, const float *want, size_t n, double tol, const char *what,
                          const char *file, int line);
#define nmt_test_assert_close(got, want, n, tol) nmt_test_assert_close_impl((got), (want), (n), (tol), #got, __FILE__, __LINE__)

/* Fail unless status == NMT_OK; prints the status string and last cl error. */
void nmt_test_assert_ok_impl(nmt_status s, const nmt_device *dev, const char *expr, const char *file, int line);
#define nmt_test_assert_ok(dev, expr) nmt_test_assert_ok_impl((expr), (dev), #expr, __FILE__, __LINE__)

/* ---- device buffers (fail the test on error) ---------------------------- */

/* Buffer of `bytes`; host != NULL copies it in. */
cl_mem nmt_test_buffer(nmt_device *dev, size_t bytes, const void *host);
cl_mem nmt_test_upload_f32(nmt_device *dev, const float *x, size_t n);
cl_mem nmt_test_upload_i32(nmt_device *dev, const int32_t *x, size_t n);
/* n floats, every one set to `v` (NaN makes unwritten elements visible). */
cl_mem nmt_test_buffer_f32_fill(nmt_device *dev, size_t n, float v);
/* Blocking read of n floats starting at element `off` (waits for the queue). */
void nmt_test_download_f32(nmt_device *dev, cl_mem m, size_t off, size_t n, float *dst);
void nmt_test_release(cl_mem m);  /* NULL is fine */

/* ---- files -------------------------------------------------------------- */

/* Fresh directory under $TMPDIR (or /tmp) named nmt-<tag>-XXXXXX; malloc'd
 * path (free it), fails the test on error. */
char *nmt_test_make_temp_dir(const char *tag);
/* rm -r (files, symlinks and directories; errors ignored). */
void nmt_test_remove_tree(const char *path);
/* Whole-file helpers: 0 on success / malloc'd contents or NULL. */
int nmt_test_write_file(const char *path, const void *data, size_t n);
void *nmt_test_read_file(const char *path, size_t *n);
/* Number of directory entries whose name ends with `suffix`; the first
 * match's full path goes to first_path (if non-NULL, cap bytes). */
int nmt_test_count_files(const char *dir, const char *suffix, char *first_path, size_t cap);
/* Every ckpt-*.nmt in dir opens with all CRCs checked (the test fails
 * otherwise, naming the file and the status); returns their count. */
int nmt_test_check_checkpoints(const char *dir);

/* ---- programs ----------------------------------------------------------- */

typedef struct nmt_test_proc {
    int status;      /* exit status, or 128 + signal */
    char *out, *err; /* NUL-terminated stdout / stderr (malloc'd) */
    size_t out_len;
} nmt_test_proc;

/* Run argv (NULL-terminated, argv[0] a path) with `in` (NULL = empty) as
 * stdin, capturing stdout/stderr through files in `dir`; blocks.  Free the
 * result with nmt_test_proc_free.  Fails the test if it cannot run. */
void nmt_test_run(char *const *argv, const char *in, const char *dir, nmt_test_proc *r);
void nmt_test_proc_free(nmt_test_proc *r);
/* Start argv in the background (stdin /dev/null, stdout and stderr to
 * `log_path`); returns the pid. */
int nmt_test_spawn(char *const *argv, const char *log_path);
/* waitpid: exit status or 128 + signal. */
int nmt_test_wait(int pid);

#endif
