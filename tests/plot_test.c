/* SPDX-License-Identifier: MIT */
/* plot_test.c — the training-curve SVG from a JSON-lines log. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "plot.h"
#include "test_util.h"

static char *join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    assert_non_null(p);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static void write_text(const char *path, const char *text) {
    assert_int_equal(nmt_test_write_file(path, text, strlen(text)), 0);
}

/* Directory entries other than "." and "..". */
static int count_entries(const char *dir) {
    return nmt_test_count_files(dir, "", NULL, 0) - 2;
}

/* Occurrences of needle in hay. */
static int count_str(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

/* The points of <polyline class="cls" ...>: count, x and y into xs/ys. */
static int polyline_points(const char *svg, const char *cls, double *xs, double *ys, int cap) {
    char key[64];
    snprintf(key, sizeof key, "<polyline class=\"%s\"", cls);
    const char *p = strstr(svg, key);
    if (!p) return -1;
    p = strstr(p, "points=\"");
    assert_non_null(p);
    p += 8;
    int n = 0;
    while (*p != '"') {
        char *e;
        double x = strtod(p, &e);
        assert_true(e != p && *e == ',');
        double y = strtod(e + 1, &e);
        if (n < cap) {
            xs[n] = x;
            ys[n] = y;
        }
        n++;
        p = e;
        while (*p == ' ') p++;
    }
    return n;
}

static const char LOG[] =
    "{\"kind\":\"config\",\"model\":{\"d_model\":32,\"layers\":[2,2]},\"name\":\"x \\\"y\\\"\"}\n"
    "{\"kind\":\"train\",\"step\":100,\"loss\":9.5,\"lr\":0.0001,\"tokens\":12000}\n"
    "\n"
    "{\"kind\":\"train\",\"step\":200,\"loss\":7.25,\"ok\":true,\"x\":null}\n"
    "{\"kind\":\"train\",\"step\":300,\"loss\":6.0}\n"
    "{ \"step\" : 300 , \"kind\" : \"dev\" , \"loss\" : 6.5 , \"bleu\" : 1.5e0 }\n"
    "{\"kind\":\"train\",\"step\":400,\"loss\":5.5}\n"
    "{\"kind\":\"train\",\"step\":500,\"loss\":4.75,\"note\":\"loss\"}\n"
    "{\"kind\":\"dev\",\"step\":600,\"loss\":5.0,\"bleu\":12.25}\n"
    "{\"kind\":\"eval\",\"step\":600,\"loss\":1}\n";

static void test_plot(void **state) {
    (void)state;
    char *dir = nmt_test_make_temp_dir("plot");
    char *log = join(dir, "train.jsonl"), *svg = join(dir, "curves.svg");
    write_text(log, LOG);
    char err[256] = "";
    assert_int_equal(plot_svg(log, svg, err, sizeof err), NMT_OK);
    size_t n, m;
    char *text = nmt_test_read_file(svg, &n);
    assert_non_null(text);
    /* byte for byte the SVG the plotter wrote before overlays existed
     * (tests/fixtures/plot/single.svg: LOG plotted by the trainer of before
     * plot_svg_multi) */
    char *before = nmt_test_read_file(NMT_TEST_FIXTURES "/plot/single.svg", &m);
    assert_non_null(before);
    assert_int_equal(n, m);
    assert_memory_equal(text, before, n);
    free(before);
    char *s = malloc(n + 1);
    assert_non_null(s);
    memcpy(s, text, n);
    s[n] = '\0';
    free(text);

    assert_non_null(strstr(s, "<svg"));
    assert_non_null(strstr(s, "</svg>"));
    assert_int_equal(count_str(s, "<polyline"), 3);
    double xs[16], ys[16];
    assert_int_equal(polyline_points(s, "train-loss", xs, ys, 16), 5);
    /* steps increase left to right; loss falls, so y (downwards) grows */
    for (int i = 1; i < 5; i++) {
        assert_true(xs[i] > xs[i - 1]);
        assert_true(ys[i] > ys[i - 1]);
    }
    /* equal steps are equally spaced */
    assert_true(fabs((xs[1] - xs[0]) - (xs[4] - xs[3])) < 0.02);
    double dx[4], dy[4];
    assert_int_equal(polyline_points(s, "dev-loss", dx, dy, 4), 2);
    /* dev at step 300 sits on the train point of step 300 in x; its loss
     * 6.5 lies between the train losses 7.25 and 6.0 */
    assert_true(fabs(dx[0] - xs[2]) < 0.02);
    assert_true(dy[0] > ys[1] && dy[0] < ys[2]);
    assert_int_equal(polyline_points(s, "dev-bleu", dx, dy, 4), 2);
    assert_true(dy[1] < dy[0]); /* BLEU rises */
    /* axes, ticks, legend */
    assert_int_equal(count_str(s, "class=\"axes\""), 2);
    assert_int_equal(count_str(s, "class=\"legend\""), 2);
    assert_true(count_str(s, "class=\"tick\"") >= 8);
    assert_non_null(strstr(s, ">train loss<"));
    assert_non_null(strstr(s, ">dev loss<"));
    assert_non_null(strstr(s, ">dev BLEU<"));
    free(s);

    /* Only the log and the SVG: no temporary file left behind. */
    assert_int_equal(count_entries(dir), 2);

    /* A log being written: an incomplete last line is ignored. */
    write_text(log, "{\"kind\":\"train\",\"step\":1,\"loss\":3}\n{\"kind\":\"train\",\"step\":2,\"lo");
    assert_int_equal(plot_svg(log, svg, err, sizeof err), NMT_OK);
    s = nmt_test_read_file(svg, &n);
    assert_non_null(s);
    s = realloc(s, n + 1);
    s[n] = '\0';
    assert_int_equal(polyline_points(s, "train-loss", xs, ys, 16), 1);
    assert_int_equal(count_str(s, "<polyline"), 1);
    assert_non_null(strstr(s, "no BLEU yet"));
    free(s);

    free(log);
    free(svg);
    nmt_test_remove_tree(dir);
    free(dir);
}

static void expect_bad(const char *dir, const char *content, nmt_status want, const char *msg_part) {
    char *log = join(dir, "bad.jsonl"), *svg = join(dir, "bad.svg");
    write_text(log, content);
    char err[256] = "";
    assert_int_equal(plot_svg(log, svg, err, sizeof err), want);
    if (!strstr(err, msg_part)) fail_msg("message \"%s\" lacks \"%s\"", err, msg_part);
    FILE *f = fopen(svg, "rb");
    assert_null(f); /* no partial file */
    remove(log);
    free(log);
    free(svg);
}

static void test_bad_logs(void **state) {
    (void)state;
    char *dir = nmt_test_make_temp_dir("plot");
    expect_bad(dir, "{\"kind\":\"train\",\"step\":1,\"loss\":2}\n{\"kind\":\"train\",\"step\":,\"loss\":1}\n",
               NMT_ERR_INVALID_ARGUMENT, "bad.jsonl:2:");
    expect_bad(dir, "not json\n", NMT_ERR_INVALID_ARGUMENT, ":1: not a JSON object");
    expect_bad(dir, "{\"kind\":\"train\",\"loss\":1}\n", NMT_ERR_INVALID_ARGUMENT, "step");
    expect_bad(dir, "{\"kind\":\"train\",\"step\":1,\"loss\":1} x\n", NMT_ERR_INVALID_ARGUMENT, "after");
    expect_bad(dir, "{\"kind\":\"dev\",\"step\":1,\"loss\":\"oops\n", NMT_ERR_INVALID_ARGUMENT, "string");
    expect_bad(dir, "", NMT_ERR_INVALID_ARGUMENT, "no \"train\" or \"dev\"");
    expect_bad(dir, "{\"kind\":\"config\"}\n\n", NMT_ERR_INVALID_ARGUMENT, "no \"train\" or \"dev\"");

    /* A failing run leaves an existing SVG untouched. */
    char *log = join(dir, "x.jsonl"), *svg = join(dir, "x.svg");
    write_text(svg, "old");
    write_text(log, "{\"kind\":\"train\",\"step\":1,\"loss\":[}\n");
    char err[256];
    assert_int_equal(plot_svg(log, svg, err, sizeof err), NMT_ERR_INVALID_ARGUMENT);
    size_t n;
    char *old = nmt_test_read_file(svg, &n);
    assert_non_null(old);
    assert_int_equal(n, 3);
    assert_memory_equal(old, "old", 3);
    free(old);

    /* Missing log; unwritable SVG directory. */
    char *missing = join(dir, "missing.jsonl");
    assert_int_equal(plot_svg(missing, svg, err, sizeof err), NMT_ERR_IO);
    assert_non_null(strstr(err, "missing.jsonl"));
    write_text(log, "{\"kind\":\"train\",\"step\":1,\"loss\":2}\n");
    char *nodir = join(dir, "no/such/dir.svg");
    assert_int_equal(plot_svg(log, nodir, err, sizeof err), NMT_ERR_IO);
    assert_int_equal(plot_svg(NULL, svg, err, sizeof err), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(count_entries(dir), 2); /* x.jsonl, x.svg */

    free(log);
    free(svg);
    free(missing);
    free(nodir);
    nmt_test_remove_tree(dir);
    free(dir);
}

static char *read_svg(const char *path) {
    size_t n;
    char *t = nmt_test_read_file(path, &n);
    assert_non_null(t);
    char *s = realloc(t, n + 1);
    assert_non_null(s);
    s[n] = '\0';
    return s;
}

/* The polyline of class cls and run r: its points (polyline_points). */
static int run_points(const char *svg, const char *cls, int run, double *xs, double *ys, int cap) {
    char key[96];
    snprintf(key, sizeof key, "<polyline class=\"%s\" data-run=\"%d\"", cls, run);
    const char *p = strstr(svg, key);
    if (!p) return -1;
    char cls_run[96]; /* polyline_points matches <polyline class="CLS: this run's, from p */
    snprintf(cls_run, sizeof cls_run, "%s\" data-run=\"%d", cls, run);
    return polyline_points(p, cls_run, xs, ys, cap);
}

static void test_overlay(void **state) {
    (void)state;
    char *dir = nmt_test_make_temp_dir("plot");
    char *run_a = join(dir, "run-a"), *run_b = join(dir, "b.jsonl"), *svg = join(dir, "all.svg");
    assert_int_equal(mkdir(run_a, 0755), 0);
    char *log_a = join(run_a, "log.jsonl");
    write_text(log_a, LOG); /* steps 100..600, train loss 9.5..4.75, dev BLEU 1.5, 12.25 */
    write_text(run_b, "{\"kind\":\"train\",\"step\":200,\"loss\":8}\n"
                      "{\"kind\":\"train\",\"step\":1400,\"loss\":3.5}\n"
                      "{\"kind\":\"dev\",\"step\":1000,\"loss\":4,\"bleu\":20.5}\n"
                      "{\"kind\":\"dev\",\"step\":1400,\"loss\":3.75,\"bleu\":24}\n");
    const char *logs[3] = {log_a, run_b, log_a};
    const char *labels[3] = {"base <s1> & co", NULL, "again"};
    char err[256] = "";
    assert_int_equal(plot_svg_multi(logs, labels, 3, svg, err, sizeof err), NMT_OK);
    char *s = read_svg(svg);
    assert_non_null(strstr(s, "data-runs=\"3\""));
    /* three series for each run (train, dev loss, dev BLEU) */
    assert_int_equal(count_str(s, "<polyline"), 9);
    for (int r = 0; r < 3; r++) {
        char key[32];
        snprintf(key, sizeof key, "data-run=\"%d\"", r);
        assert_int_equal(count_str(s, key), 3);
    }
    assert_int_equal(count_str(s, "class=\"dev-loss\" data-run="), 3);
    assert_int_equal(count_str(s, "stroke-dasharray"), 3 + 1); /* dev loss dashed, and its legend key */
    double xs[16], ys[16], xb[16], yb[16];
    assert_int_equal(run_points(s, "train-loss", 0, xs, ys, 16), 5);
    assert_int_equal(run_points(s, "train-loss", 1, xb, yb, 16), 2);
    assert_int_equal(run_points(s, "dev-bleu", 1, xb, yb, 16), 2);
    /* one x axis for all: run 1's step 200 sits on run 0's step 200 */
    assert_int_equal(run_points(s, "train-loss", 1, xb, yb, 16), 2);
    assert_true(fabs(xb[0] - xs[1]) < 0.02);
    /* axis ends: x 0..1500 (steps 100..1400 rounded out to ticks of 500),
     * loss 2..10, BLEU 0..25 */
    assert_int_equal(count_str(s, "data-x-range=\"0 1500\""), 2);
    assert_non_null(strstr(s, "data-y-range=\"2 10\""));
    assert_non_null(strstr(s, "data-y-range=\"0 25\""));
    /* legends: the runs in both panels, the line styles in the loss panel */
    assert_int_equal(count_str(s, "class=\"legend\""), 2);
    assert_int_equal(count_str(s, ">base &lt;s1&gt; &amp; co<"), 2);
    assert_int_equal(count_str(s, ">b<"), 2); /* no label: the file name without .jsonl */
    assert_int_equal(count_str(s, ">again<"), 2);
    assert_int_equal(count_str(s, "class=\"legend-run\""), 6);
    assert_int_equal(count_str(s, "class=\"legend-style\""), 2);
    assert_null(strstr(s, "no BLEU yet"));
    free(s);

    /* no labels at all: DIR/log.jsonl is named after DIR */
    assert_int_equal(plot_svg_multi(logs, NULL, 2, svg, err, sizeof err), NMT_OK);
    s = read_svg(svg);
    assert_int_equal(count_str(s, ">run-a<"), 2);
    assert_int_equal(count_str(s, "<polyline"), 6);
    free(s);

    /* a bad log fails the whole plot with its name; too many logs; the SVG stays */
    char *bad = join(dir, "bad.jsonl");
    write_text(bad, "not json\n");
    const char *with_bad[2] = {log_a, bad};
    assert_int_equal(plot_svg_multi(with_bad, NULL, 2, svg, err, sizeof err), NMT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "bad.jsonl:1: not a JSON object"));
    const char *many[PLOT_MAX_LOGS + 1];
    for (int i = 0; i <= PLOT_MAX_LOGS; i++) many[i] = log_a;
    assert_int_equal(plot_svg_multi(many, NULL, PLOT_MAX_LOGS + 1, svg, err, sizeof err), NMT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "at most"));
    assert_int_equal(plot_svg_multi(many, NULL, PLOT_MAX_LOGS, svg, err, sizeof err), NMT_OK);
    s = read_svg(svg);
    assert_int_equal(count_str(s, "<polyline"), 3 * PLOT_MAX_LOGS);
    free(s);

    free(bad);
    free(log_a);
    free(run_a);
    free(run_b);
    free(svg);
    nmt_test_remove_tree(dir);
    free(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plot),
        cmocka_unit_test(test_bad_logs),
        cmocka_unit_test(test_overlay),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
