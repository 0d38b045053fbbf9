/* SPDX-License-Identifier: MIT */
/* test_util.c — see test_util.h. */
#include "test_util.h"

#include "format.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- case filters -------------------------------------------------------- */

/* NMT_TEST_FILTER and NMT_TEST_SKIP: cmocka's name patterns ('*', '?'; run
 * only the matching cases / skip them), read before main.  For runs that
 * cannot afford every case of a test, e.g. scripts/oclgrind.sh's session_test
 * (its beam case alone ran over 14 minutes under the simulator on a 2-core
 * machine).  A skip pattern that matches no case skips nothing. */
__attribute__((constructor)) static void nmt_test_case_filters(void) {
    const char *run = getenv("NMT_TEST_FILTER");
    const char *skip = getenv("NMT_TEST_SKIP");
    if (run != NULL && run[0] != '\0') cmocka_set_test_filter(run);
    if (skip != NULL && skip[0] != '\0') cmocka_set_skip_filter(skip);
}

/* ---- devices ------------------------------------------------------------ */

static const char *level_name(nmt_log_level l) {
    switch (l) {
    case NMT_LOG_ERROR: return "ERROR";
    case NMT_LOG_WARN: return "WARN";
    case NMT_LOG_INFO: return "INFO";
    default: return "DEBUG";
    }
}

void nmt_test_log_stderr(void *user, nmt_log_level level, const char *msg) {
    (void)user;
    fprintf(stderr, "[nmt %s] %s\n", level_name(level), msg);
}

static nmt_log_level env_log_level(void) {
    const char *s = getenv("NMT_TEST_LOG");
    if (s == NULL) return NMT_LOG_WARN;
    if (strcmp(s, "error") == 0) return NMT_LOG_ERROR;
    if (strcmp(s, "info") == 0) return NMT_LOG_INFO;
    if (strcmp(s, "debug") == 0) return NMT_LOG_DEBUG;
    return NMT_LOG_WARN;
}

void nmt_test_default_params(nmt_device_params *p) {
    memset(p, 0, sizeof *p);
    const char *d = getenv("NMT_EDGE_DEVICE");
    p->device = (d && d[0]) ? d : NULL;
    const char *c = getenv("NMT_EDGE_CACHE_DIR");
    p->cache_dir = (c && c[0]) ? c : ""; /* unset: none (NULL would be the default directory) */
    p->cache_fill = 1; /* binaries written at build on every driver, as the cache tests expect */
    p->gemm = NMT_GEMM_AUTO;
    p->log = nmt_test_log_stderr;
    p->log_user = NULL;
    p->log_level = env_log_level();
}

nmt_status nmt_test_device_open_with(const nmt_device_params *p, void **mem, nmt_device **out) {
    nmt_device_params def;
    if (p == NULL) {
        nmt_test_default_params(&def);
        p = &def;
    }
    *out = NULL;
    *mem = NULL;
    size_t size = nmt_test_round_up(nmt_device_footprint(), 16);
    void *m = NULL;
    if (posix_memalign(&m, 16, size) != 0) return NMT_ERR_ARENA_TOO_SMALL;
    nmt_device *dev = NULL;
    nmt_status s = nmt_device_open(p, m, size, &dev);
    if (s != NMT_OK) {
        free(m);
        return s;
    }
    *out = dev;
    *mem = m;
    return NMT_OK;
}

nmt_device *nmt_test_device_open(void **mem) {
    nmt_device *dev = NULL;
    nmt_status s = nmt_test_device_open_with(NULL, mem, &dev);
    if (s != NMT_OK) {
        fprintf(stderr, "cannot open the test device: %s\n", nmt_status_str(s));
        return NULL;
    }
    return dev;
}

void nmt_test_device_close(nmt_device *dev, void *mem) {
    if (dev) nmt_device_close(dev);
    free(mem);
}

int nmt_test_dev_setup(void **state) {
    nmt_test_dev_env *e = calloc(1, sizeof *e);
    if (e == NULL) return -1;
    e->dev = nmt_test_device_open(&e->dev_mem);
    if (e->dev == NULL) {
        free(e);
        return -1;
    }
    *state = e;
    return 0;
}

int nmt_test_dev_teardown(void **state) {
    nmt_test_dev_env *e = *state;
    if (e) nmt_test_device_close(e->dev, e->dev_mem);
    free(e);
    return 0;
}

size_t nmt_test_round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* ---- random data -------------------------------------------------------- */

nmt_test_rng nmt_test_rng_make(uint64_t seed) {
    nmt_test_rng r = {seed ^ 0x9e3779b97f4a7c15ull};
    return r;
}

uint64_t nmt_test_rng_next(nmt_test_rng *r) {
    uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

float nmt_test_rng_uniform(nmt_test_rng *r, float lo, float hi) {
    double u = (double)(nmt_test_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);  /* [0, 1) */
    return (float)(lo + (hi - lo) * u);
}

int32_t nmt_test_rng_int(nmt_test_rng *r, int32_t lo, int32_t hi) {
    uint64_t span = (uint64_t)((int64_t)hi - (int64_t)lo);
    if (span == 0) return lo;
    return (int32_t)((int64_t)lo + (int64_t)(nmt_test_rng_next(r) % span));
}

void nmt_test_fill_uniform(nmt_test_rng *r, float *x, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++) x[i] = nmt_test_rng_uniform(r, lo, hi);
}

void nmt_test_fill_int(nmt_test_rng *r, int32_t *x, size_t n, int32_t lo, int32_t hi) {
    for (size_t i = 0; i < n; i++) x[i] = nmt_test_rng_int(r, lo, hi);
}

void nmt_test_fill_const(float *x, size_t n, float v) {
    for (size_t i = 0; i < n; i++) x[i] = v;
}

static void *xmalloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (p == NULL) fail_msg("out of memory (%zu bytes)", bytes);
    return p;
}

float *nmt_test_alloc_f32(size_t n) {
    float *x = xmalloc(n * sizeof *x);
    memset(x, 0, n * sizeof *x);
    return x;
}

float *nmt_test_random_f32(nmt_test_rng *r, size_t n, float lo, float hi) {
    float *x = xmalloc(n * sizeof *x);
    nmt_test_fill_uniform(r, x, n, lo, hi);
    return x;
}

int32_t *nmt_test_random_i32(nmt_test_rng *r, size_t n, int32_t lo, int32_t hi) {
    int32_t *x = xmalloc(n * sizeof *x);
    nmt_test_fill_int(r, x, n, lo, hi);
    return x;
}

float *nmt_test_dup_f32(const float *x, size_t n) {
    float *y = xmalloc(n * sizeof *y);
    memcpy(y, x, n * sizeof *y);
    return y;
}

/* ---- comparison --------------------------------------------------------- */

/* Error of one element: NaN anywhere or mismatched infinities -> +INF;
 * equal infinities -> 0. */
static double elem_diff(float g, float w) {
    if (isnan(g) || isnan(w)) return INFINITY;
    if (isinf(g) || isinf(w)) return g == w ? 0.0 : INFINITY;
    return fabs((double)g - (double)w);
}

double nmt_test_norm_error(const float *got, const float *want, size_t n) {
    double max_diff = 0.0, max_ref = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = elem_diff(got[i], want[i]);
        if (d > max_diff) max_diff = d;
        if (isfinite(want[i]) && fabs((double)want[i]) > max_ref) max_ref = fabs((double)want[i]);
    }
    return max_diff / (max_ref + 1e-12);
}

void nmt_test_assert_close_impl(const float *got, const float *want, size_t n, double tol, const char *what,
                          const char *file, int line) {
    double err = nmt_test_norm_error(got, want, n);
    if (err <= tol) return;
    size_t worst = 0;
    double wd = -1.0;
    for (size_t i = 0; i < n; i++) {
        double d = elem_diff(got[i], want[i]);
        if (d > wd) {
            wd = d;
            worst = i;
        }
    }
    fail_msg("%s:%d: %s differs from the reference: normalised error %.3g > %.3g over %zu elements; "
             "worst at [%zu]: got %.9g, want %.9g",
             file, line, what, err, tol, n, worst, n ? (double)got[worst] : 0.0, n ? (double)want[worst] : 0.0);
}

void nmt_test_assert_ok_impl(nmt_status s, const nmt_device *dev, const char *expr, const char *file, int line) {
    if (s == NMT_OK) return;
    fail_msg("%s:%d: %s returned %d (%s), last cl error %d", file, line, expr, (int)s, nmt_status_str(s),
             dev ? (int)nmt_device_last_cl_error(dev) : 0);
}

/* ---- device buffers ----------------------------------------------------- */

cl_mem nmt_test_buffer(nmt_device *dev, size_t bytes, const void *host) {
    cl_mem m = NULL;
    nmt_status s = nmt_device_buffer(dev, bytes, host, &m);
    if (s != NMT_OK) fail_msg("nmt_device_buffer(%zu bytes) failed: %s", bytes, nmt_status_str(s));
    return m;
}

cl_mem nmt_test_upload_f32(nmt_device *dev, const float *x, size_t n) { return nmt_test_buffer(dev, n * sizeof(float), x); }

cl_mem nmt_test_upload_i32(nmt_device *dev, const int32_t *x, size_t n) {
    return nmt_test_buffer(dev, n * sizeof(int32_t), x);
}

cl_mem nmt_test_buffer_f32_fill(nmt_device *dev, size_t n, float v) {
    float *tmp = xmalloc(n * sizeof *tmp);
    nmt_test_fill_const(tmp, n, v);
    cl_mem m = nmt_test_buffer(dev, n * sizeof *tmp, tmp);
    free(tmp);
    return m;
}

void nmt_test_download_f32(nmt_device *dev, cl_mem m, size_t off, size_t n, float *dst) {
    nmt_status s = nmt_device_read(dev, m, off * sizeof(float), n * sizeof(float), dst);
    if (s != NMT_OK)
        fail_msg("nmt_device_read failed: %s (cl error %d)", nmt_status_str(s), (int)nmt_device_last_cl_error(dev));
}

void nmt_test_release(cl_mem m) {
    if (m) clReleaseMemObject(m);
}

/* ---- files -------------------------------------------------------------- */

char *nmt_test_make_temp_dir(const char *tag) {
    const char *base = getenv("TMPDIR");
    if (base == NULL || base[0] == '\0') base = "/tmp";
    size_t n = strlen(base) + strlen(tag) + 32;
    char *path = xmalloc(n);
    snprintf(path, n, "%s/nmt-%s-XXXXXX", base, tag);
    if (mkdtemp(path) == NULL) fail_msg("mkdtemp(%s) failed: %s", path, strerror(errno));
    return path;
}

void nmt_test_remove_tree(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (d) {
            struct dirent *e;
            while ((e = readdir(d)) != NULL) {
                if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
                size_t n = strlen(path) + strlen(e->d_name) + 2;
                char *child = xmalloc(n);
                snprintf(child, n, "%s/%s", path, e->d_name);
                nmt_test_remove_tree(child);
                free(child);
            }
            closedir(d);
        }
        rmdir(path);
    } else {
        unlink(path);
    }
}

int nmt_test_write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (f == NULL) return -1;
    size_t w = n ? fwrite(data, 1, n, f) : 0;
    int rc = fclose(f);
    return (w == n && rc == 0) ? 0 : -1;
}

void *nmt_test_read_file(const char *path, size_t *n) {
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return NULL;
    }
    long len = ftell(f);
    if (len < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return NULL;
    }
    char *buf = xmalloc((size_t)len + 1);
    size_t r = fread(buf, 1, (size_t)len, f);
    fclose(f);
    if (r != (size_t)len) {
        free(buf);
        return NULL;
    }
    buf[len] = '\0';  /* convenient for text files */
    *n = (size_t)len;
    return buf;
}

int nmt_test_count_files(const char *dir, const char *suffix, char *first_path, size_t cap) {
    DIR *d = opendir(dir);
    if (d == NULL) return 0;
    int count = 0;
    size_t sl = strlen(suffix);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t nl = strlen(e->d_name);
        if (nl < sl || strcmp(e->d_name + nl - sl, suffix) != 0) continue;
        if (count == 0 && first_path) snprintf(first_path, cap, "%s/%s", dir, e->d_name);
        count++;
    }
    closedir(d);
    return count;
}

/* ---- programs ----------------------------------------------------------- */

static pid_t spawn_redirected(char *const *argv, const char *in_path, const char *out_path, const char *err_path) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int fi = open(in_path, O_RDONLY);
        int fo = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fe = err_path ? open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644) : fo;
        if (fi < 0 || fo < 0 || fe < 0) _exit(126);
        dup2(fi, 0);
        dup2(fo, 1);
        dup2(fe, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

int nmt_test_wait(int pid) {
    int ws = 0;
    pid_t got;
    while ((got = waitpid((pid_t)pid, &ws, 0)) < 0 && errno == EINTR) {
    }
    assert_int_equal(got, pid);
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}

void nmt_test_run(char *const *argv, const char *in, const char *dir, nmt_test_proc *r) {
    char in_path[1024], out_path[1024], err_path[1024];
    snprintf(in_path, sizeof in_path, "%s/.stdin", dir);
    snprintf(out_path, sizeof out_path, "%s/.stdout", dir);
    snprintf(err_path, sizeof err_path, "%s/.stderr", dir);
    assert_int_equal(nmt_test_write_file(in_path, in ? in : "", in ? strlen(in) : 0), 0);
    pid_t pid = spawn_redirected(argv, in_path, out_path, err_path);
    assert_true(pid > 0);
    r->status = nmt_test_wait(pid);
    size_t n = 0;
    r->out = nmt_test_read_file(out_path, &n);
    r->out_len = n;
    r->err = nmt_test_read_file(err_path, &n);
    assert_non_null(r->out);
    assert_non_null(r->err);
}

void nmt_test_proc_free(nmt_test_proc *r) {
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

int nmt_test_spawn(char *const *argv, const char *log_path) {
    pid_t pid = spawn_redirected(argv, "/dev/null", log_path, NULL);
    assert_true(pid > 0);
    return (int)pid;
}

int nmt_test_check_checkpoints(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (strncmp(e->d_name, "ckpt-", 5) != 0 || l < 4 || strcmp(e->d_name + l - 4, ".nmt") != 0) continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        size_t size;
        void *img = nmt_test_read_file(p, &size);
        assert_non_null(img);
        nmt_file f;
        nmt_status s = nmt_file_open(&f, img, size, 1);
        if (s != NMT_OK) fprintf(stderr, "%s: %s\n", p, nmt_status_str(s));
        assert_int_equal(s, NMT_OK);
        free(img);
        n++;
    }
    closedir(d);
    return n;
}

int nmt_test_missing_extension(nmt_device *dev, const char *text, char *name, size_t cap) {
    static const char pragma[] = "#pragma OPENCL EXTENSION ";
    size_t n = 0;
    assert_int_equal(clGetDeviceInfo(dev->device, CL_DEVICE_EXTENSIONS, 0, NULL, &n), CL_SUCCESS);
    char *ext = malloc(n + 2);
    assert_non_null(ext);
    assert_int_equal(clGetDeviceInfo(dev->device, CL_DEVICE_EXTENSIONS, n, ext + 1, NULL), CL_SUCCESS);
    ext[0] = ' '; /* " list " so that " name " finds whole tokens */
    ext[n] = ' ';
    ext[n + 1] = '\0';
    int missing = 0;
    for (const char *p = strstr(text, pragma); p != NULL && !missing; p = strstr(p + 1, pragma)) {
        const char *s = p + sizeof pragma - 1, *e = s;
        while (*e && *e != ' ' && *e != ':') e++;
        assert_true((size_t)(e - s) + 3 <= cap);
        snprintf(name, cap, " %.*s ", (int)(e - s), s);
        missing = strstr(ext, name) == NULL;
    }
    free(ext);
    return missing;
}

int nmt_test_build_clean(nmt_device *dev, const char *source, const char *options) {
    char opts[NMT_BUILD_OPTIONS_MAX];
    assert_true((size_t)snprintf(opts, sizeof opts, "-Werror%s%s", options[0] ? " " : "", options) < sizeof opts);
    cl_program prog = NULL;
    const nmt_logger saved = dev->log;
    const int quiet = dev->quiet_builds;
    dev->log.fn = NULL;    /* the tolerated notes are not errors of the test's */
    dev->quiet_builds = 0; /* -w would hide what -Werror checks */
    const nmt_status st = nmt_device_program(dev, source, opts, &prog);
    dev->log = saved;
    dev->quiet_builds = quiet;
    if (st == NMT_OK) return 0;
    if (st != NMT_ERR_KERNEL_BUILD) fail_msg("%s.cl with \"%s\": %s", source, opts, nmt_status_str(st));
    const char *log = dev->build_log;
    if (strncmp(log, "(build log of ", 14) == 0) fail_msg("%s.cl with \"%s\": %s", source, opts, log);
    int notes = 0;
    for (const char *line = log; *line;) {
        const char *end = strchr(line, '\n');
        const size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[1024];
        snprintf(buf, sizeof buf, "%.*s", (int)len, line);
        if (strstr(buf, "error:") != NULL) {
            if (!nmt_build_log_abi_note(line, len)) fail_msg("%s.cl with \"%s\" is not warning-free:\n%s", source, opts, log);
            notes++;
        }
        line += len + (end != NULL);
    }
    if (notes == 0) fail_msg("%s.cl with \"%s\" failed to build:\n%s", source, opts, log);
    nmt_test_assert_ok(dev, nmt_device_program(dev, source, options, &prog));
    printf("%s.cl \"%s\": %d x86 ABI notes (no AVX-512 here), no other warning\n", source, options, notes);
    return notes;
}
