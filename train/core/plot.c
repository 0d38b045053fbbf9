/* SPDX-License-Identifier: MIT */
/* plot.c — JSON-lines training log -> SVG curves (see plot.h). */
#include "plot.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

/* ---- series ------------------------------------------------------------- */

typedef struct series {
    double *x, *y;
    size_t n, cap;
} series;

static int series_add(series *s, double x, double y) {
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 64;
        double *nx = realloc(s->x, nc * sizeof *nx);
        if (!nx) return -1;
        s->x = nx;
        double *ny = realloc(s->y, nc * sizeof *ny);
        if (!ny) return -1;
        s->y = ny;
        s->cap = nc;
    }
    s->x[s->n] = x;
    s->y[s->n] = y;
    s->n++;
    return 0;
}

static void series_free(series *s) {
    free(s->x);
    free(s->y);
}

/* ---- a tiny parser for flat JSON objects -------------------------------- */

typedef struct rec {
    char kind[16];
    int has_kind, has_step, has_loss, has_bleu;
    double step, loss, bleu;
} rec;

typedef struct pstate {
    const char *p, *end;
    const char *why;
} pstate;

static void skip_ws(pstate *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\r' || *s->p == '\n')) s->p++;
}

/* A JSON string; the first cap-1 bytes of its raw content (escapes kept as
 * written) go to buf when buf != NULL. */
static int parse_string(pstate *s, char *buf, size_t cap) {
    if (s->p >= s->end || *s->p != '"') {
        s->why = "expected a string";
        return -1;
    }
    s->p++;
    size_t n = 0;
    while (s->p < s->end && *s->p != '"') {
        char c = *s->p;
        if ((unsigned char)c < 0x20) {
            s->why = "control character in a string";
            return -1;
        }
        if (c == '\\') {
            if (s->p + 1 >= s->end) break;
            if (buf && n + 1 < cap) buf[n++] = c;
            s->p++;
            c = *s->p;
        }
        if (buf && n + 1 < cap) buf[n++] = c;
        s->p++;
    }
    if (s->p >= s->end) {
        s->why = "unterminated string";
        return -1;
    }
    s->p++;
    if (buf && cap) buf[n] = '\0';
    return 0;
}

static int parse_number(pstate *s, double *v) {
    const char *q = s->p;
    if (q < s->end && *q == '-') q++;
    if (q >= s->end || *q < '0' || *q > '9') {
        s->why = "bad number";
        return -1;
    }
    char tmp[64];
    size_t n = 0;
    const char *r = s->p;
    while (r < s->end && strchr("+-0123456789.eE", *r) && n + 1 < sizeof tmp) tmp[n++] = *r++;
    tmp[n] = '\0';
    char *e;
    errno = 0;
    double d = strtod(tmp, &e);
    if (e == tmp || (size_t)(e - tmp) != n) {
        s->why = "bad number";
        return -1;
    }
    s->p = r;
    *v = d;
    return 0;
}

static int skip_value(pstate *s, int depth);

static int skip_container(pstate *s, int depth, char close) {
    if (depth > 32) {
        s->why = "nesting too deep";
        return -1;
    }
    s->p++;
    skip_ws(s);
    if (s->p < s->end && *s->p == close) {
        s->p++;
        return 0;
    }
    for (;;) {
        skip_ws(s);
        if (close == '}') {
            if (parse_string(s, NULL, 0) != 0) return -1;
            skip_ws(s);
            if (s->p >= s->end || *s->p != ':') {
                s->why = "expected ':'";
                return -1;
            }
            s->p++;
            skip_ws(s);
        }
        if (skip_value(s, depth + 1) != 0) return -1;
        skip_ws(s);
        if (s->p < s->end && *s->p == ',') {
            s->p++;
            continue;
        }
        if (s->p < s->end && *s->p == close) {
            s->p++;
            return 0;
        }
        s->why = "expected ',' or a closing bracket";
        return -1;
    }
}

static int skip_value(pstate *s, int depth) {
    if (s->p >= s->end) {
        s->why = "missing value";
        return -1;
    }
    char c = *s->p;
    if (c == '"') return parse_string(s, NULL, 0);
    if (c == '{') return skip_container(s, depth, '}');
    if (c == '[') return skip_container(s, depth, ']');
    static const char *const words[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(words[i]);
        if ((size_t)(s->end - s->p) >= n && memcmp(s->p, words[i], n) == 0) {
            s->p += n;
            return 0;
        }
    }
    double v;
    return parse_number(s, &v);
}

/* One line: 1 = record, 0 = blank, -1 = malformed (s->why). */
static int parse_line(const char *line, size_t len, rec *r, const char **why) {
    pstate s = {line, line + len, NULL};
    memset(r, 0, sizeof *r);
    skip_ws(&s);
    if (s.p == s.end) return 0;
    if (*s.p != '{') {
        *why = "not a JSON object";
        return -1;
    }
    s.p++;
    skip_ws(&s);
    if (s.p < s.end && *s.p == '}') {
        s.p++;
    } else {
        for (;;) {
            char key[32];
            skip_ws(&s);
            if (parse_string(&s, key, sizeof key) != 0) goto bad;
            skip_ws(&s);
            if (s.p >= s.end || *s.p != ':') {
                s.why = "expected ':'";
                goto bad;
            }
            s.p++;
            skip_ws(&s);
            if (strcmp(key, "kind") == 0 && s.p < s.end && *s.p == '"') {
                if (parse_string(&s, r->kind, sizeof r->kind) != 0) goto bad;
                r->has_kind = 1;
            } else if ((strcmp(key, "step") == 0 || strcmp(key, "loss") == 0 || strcmp(key, "bleu") == 0) &&
                       s.p < s.end && (*s.p == '-' || (*s.p >= '0' && *s.p <= '9'))) {
                double v;
                if (parse_number(&s, &v) != 0) goto bad;
                if (key[0] == 's') {
                    r->step = v;
                    r->has_step = 1;
                } else if (key[0] == 'l') {
                    r->loss = v;
                    r->has_loss = 1;
                } else {
                    r->bleu = v;
                    r->has_bleu = 1;
                }
            } else if (skip_value(&s, 1) != 0) {
                goto bad;
            }
            skip_ws(&s);
            if (s.p < s.end && *s.p == ',') {
                s.p++;
                continue;
            }
            if (s.p < s.end && *s.p == '}') {
                s.p++;
                break;
            }
            s.why = "expected ',' or '}'";
            goto bad;
        }
    }
    skip_ws(&s);
    if (s.p != s.end) {
        *why = "text after the object";
        return -1;
    }
    return 1;
bad:
    *why = s.why ? s.why : "malformed";
    return -1;
}

/* ---- SVG output --------------------------------------------------------- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = b->cap - b->n;
        int k = vsnprintf(b->p ? b->p + b->n : NULL, room, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = 1;
            return;
        }
        if ((size_t)k < room) {
            b->n += (size_t)k;
            return;
        }
        size_t nc = b->cap ? b->cap * 2 : 8192;
        while (nc - b->n <= (size_t)k) nc *= 2;
        char *np = realloc(b->p, nc);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
}

/* "Nice" tick spacing (1, 2 or 5 times a power of ten) for about n ticks. */
static double nice_step(double range, int n) {
    double raw = range / n;
    double mag = pow(10.0, floor(log10(raw)));
    double f = raw / mag;
    double nf = f <= 1.0 ? 1.0 : f <= 2.0 ? 2.0 : f <= 5.0 ? 5.0 : 10.0;
    return nf * mag;
}

typedef struct range {
    double lo, hi;
} range;

static range data_range(const series *const *ss, int ns, int use_x) {
    range r = {INFINITY, -INFINITY};
    for (int i = 0; i < ns; i++)
        for (size_t k = 0; k < ss[i]->n; k++) {
            double v = use_x ? ss[i]->x[k] : ss[i]->y[k];
            if (v < r.lo) r.lo = v;
            if (v > r.hi) r.hi = v;
        }
    if (!(r.lo <= r.hi)) {
        r.lo = 0;
        r.hi = 1;
    }
    if (r.hi - r.lo < 1e-12 * (fabs(r.hi) + 1.0)) {
        double d = fabs(r.lo) > 0 ? 0.5 * fabs(r.lo) : 1.0;
        r.lo -= d;
        r.hi += d;
    }
    /* Round outwards to the tick spacing so the curves fit the grid. */
    double st = nice_step(r.hi - r.lo, 5);
    r.lo = floor(r.lo / st) * st;
    r.hi = ceil(r.hi / st) * st;
    return r;
}

typedef struct panel {
    double x0, y0, w, h; /* plot area in SVG units */
    range xr, yr;
} panel;

static double px(const panel *p, double x) { return p->x0 + (x - p->xr.lo) / (p->xr.hi - p->xr.lo) * p->w; }
static double py(const panel *p, double y) { return p->y0 + p->h - (y - p->yr.lo) / (p->yr.hi - p->yr.lo) * p->h; }

static void draw_axes_r(sbuf *b, const panel *p, const char *title, const char *ylabel, int ranges) {
    if (ranges)
        sb_printf(b, "<g class=\"axes\" data-x-range=\"%g %g\" data-y-range=\"%g %g\">\n", p->xr.lo, p->xr.hi,
                  p->yr.lo, p->yr.hi);
    else
        sb_printf(b, "<g class=\"axes\">\n");
    sb_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#000\"/>\n",
              p->x0, p->y0, p->w, p->h);
    const range *rs[2] = {&p->xr, &p->yr};
    for (int axis = 0; axis < 2; axis++) {
        double st = nice_step(rs[axis]->hi - rs[axis]->lo, 5);
        double first = ceil(rs[axis]->lo / st - 1e-9) * st;
        for (int k = 0; k < 50; k++) {
            double v = first + k * st;
            if (v > rs[axis]->hi + st * 1e-9) break;
            if (fabs(v) < st * 1e-9) v = 0;
            if (axis == 0) {
                double x = px(p, v);
                sb_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", x, p->y0,
                          x, p->y0 + p->h);
                sb_printf(b, "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", x,
                          p->y0 + p->h + 16, v);
            } else {
                double y = py(p, v);
                sb_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", p->x0, y,
                          p->x0 + p->w, y);
                sb_printf(b, "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
                          p->x0 - 6, y + 4, v);
            }
        }
    }
    sb_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-weight=\"bold\">%s</text>\n",
              p->x0 + p->w / 2, p->y0 - 10, title);
    sb_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">step</text>\n", p->x0 + p->w / 2,
              p->y0 + p->h + 34);
    sb_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(-90 %.1f %.1f)\">%s</text>\n",
              p->x0 - 50, p->y0 + p->h / 2, p->x0 - 50, p->y0 + p->h / 2, ylabel);
    sb_printf(b, "</g>\n");
}

static void draw_axes(sbuf *b, const panel *p, const char *title, const char *ylabel) {
    draw_axes_r(b, p, title, ylabel, 0);
}

static void draw_series(sbuf *b, const panel *p, const series *s, const char *cls, const char *color) {
    if (s->n == 0) return;
    sb_printf(b, "<polyline class=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", cls, color);
    for (size_t k = 0; k < s->n; k++) sb_printf(b, "%s%.2f,%.2f", k ? " " : "", px(p, s->x[k]), py(p, s->y[k]));
    sb_printf(b, "\"/>\n");
}

static void draw_legend(sbuf *b, const panel *p, const char *const *names, const char *const *colors, int n) {
    double x = p->x0 + p->w - 130, y = p->y0 + 10;
    sb_printf(b, "<g class=\"legend\">\n<rect x=\"%.1f\" y=\"%.1f\" width=\"120\" height=\"%d\" fill=\"#fff\" "
                 "stroke=\"#999\"/>\n",
              x, y, 8 + 18 * n);
    for (int i = 0; i < n; i++) {
        double ly = y + 16 + 18 * i;
        sb_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>\n",
                  x + 8, ly - 4, x + 32, ly - 4, colors[i]);
        sb_printf(b, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", x + 38, ly, names[i]);
    }
    sb_printf(b, "</g>\n");
}

static nmt_status write_atomic(const char *path, const char *data, size_t n, char *err, size_t err_cap) {
    size_t len = strlen(path);
    char *tmp = malloc(len + 16);
    if (!tmp) {
        nmt_errf(err, err_cap, "out of memory");
        return NMT_ERR_IO;
    }
    memcpy(tmp, path, len);
    memcpy(tmp + len, ".tmp.XXXXXX", 12);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        nmt_errf(err, err_cap, "%s: cannot create a temporary file: %s", path, strerror(errno));
        free(tmp);
        return NMT_ERR_IO;
    }
    size_t off = 0;
    int bad = 0;
    while (off < n) {
        ssize_t k = write(fd, data + off, n - off);
        if (k < 0) {
            if (errno == EINTR) continue;
            bad = errno;
            break;
        }
        off += (size_t)k;
    }
    if (!bad && fchmod(fd, 0644) != 0) {
        /* mkstemp's 0600 stays: the file is still usable */
    }
    if (!bad && fsync(fd) != 0) bad = errno;
    if (close(fd) != 0 && !bad) bad = errno;
    if (!bad && rename(tmp, path) != 0) bad = errno;
    if (bad) {
        unlink(tmp);
        nmt_errf(err, err_cap, "%s: cannot write: %s", path, strerror(bad));
        free(tmp);
        return NMT_ERR_IO;
    }
    free(tmp);
    return NMT_OK;
}

/* ---- entry points ------------------------------------------------------- */

/* Writes b (atomically) unless it ran out of memory; frees it. */
static nmt_status finish_svg(sbuf *b, const char *svg_path, char *err, size_t err_cap) {
    nmt_status st;
    if (b->oom) {
        nmt_errf(err, err_cap, "out of memory");
        st = NMT_ERR_IO;
    } else {
        st = write_atomic(svg_path, b->p, b->n, err, err_cap);
    }
    free(b->p);
    return st;
}

/* The train loss, dev loss and dev BLEU series of one log (plot.h). */
static nmt_status read_log(const char *log_path, series *trp, series *dlp, series *dbp, char *err, size_t err_cap) {
    FILE *f = fopen(log_path, "rb");
    if (!f) {
        nmt_errf(err, err_cap, "%s: cannot open: %s", log_path, strerror(errno));
        return NMT_ERR_IO;
    }
    nmt_status st = NMT_OK;
    char *line = NULL;
    size_t lcap = 0;
    ssize_t got;
    unsigned long long ln = 0;
    while ((got = getline(&line, &lcap, f)) >= 0) {
        ln++;
        size_t len = (size_t)got;
        int complete = len > 0 && line[len - 1] == '\n';
        rec r;
        const char *why = NULL;
        int k = parse_line(line, len, &r, &why);
        if (k < 0) {
            if (!complete) break; /* a record still being written */
            nmt_errf(err, err_cap, "%s:%llu: %s", log_path, ln, why);
            st = NMT_ERR_INVALID_ARGUMENT;
            break;
        }
        if (k == 0 || !r.has_kind) continue;
        int is_train = strcmp(r.kind, "train") == 0, is_dev = strcmp(r.kind, "dev") == 0;
        if (!is_train && !is_dev) continue;
        if (!r.has_step || !isfinite(r.step)) {
            nmt_errf(err, err_cap, "%s:%llu: \"%s\" record without a numeric \"step\"", log_path, ln, r.kind);
            st = NMT_ERR_INVALID_ARGUMENT;
            break;
        }
        int oom = 0;
        if (r.has_loss && isfinite(r.loss)) oom |= series_add(is_train ? trp : dlp, r.step, r.loss);
        if (is_dev && r.has_bleu && isfinite(r.bleu)) oom |= series_add(dbp, r.step, r.bleu);
        if (oom) {
            nmt_errf(err, err_cap, "out of memory");
            st = NMT_ERR_IO;
            break;
        }
    }
    if (st == NMT_OK && ferror(f)) {
        nmt_errf(err, err_cap, "%s: read error", log_path);
        st = NMT_ERR_IO;
    }
    free(line);
    fclose(f);
    if (st == NMT_OK && trp->n + dlp->n + dbp->n == 0) {
        nmt_errf(err, err_cap, "%s: no \"train\" or \"dev\" record with a loss or BLEU", log_path);
        st = NMT_ERR_INVALID_ARGUMENT;
    }
    return st;
}


nmt_status plot_svg(const char *log_path, const char *svg_path, char *err, size_t err_cap) {
    if (err && err_cap) err[0] = '\0';
    if (!log_path || !svg_path) {
        nmt_errf(err, err_cap, "plot_svg: missing path");
        return NMT_ERR_INVALID_ARGUMENT;
    }
    series tr = {0}, dl = {0}, db = {0};
    nmt_status st = read_log(log_path, &tr, &dl, &db, err, err_cap);
    if (st == NMT_OK) {
        const double W = 800, H = 640;
        const series *all[3] = {&tr, &dl, &db};
        range xr = data_range(all, 3, 1);
        const series *losses[2] = {&tr, &dl};
        panel p1 = {80, 40, W - 110, 220, xr, data_range(losses, 2, 0)};
        const series *bleus[1] = {&db};
        panel p2 = {80, 360, W - 110, 220, xr, data_range(bleus, 1, 0)};
        sbuf b = {0};
        sb_printf(&b,
                  "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                  "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
                  "font-family=\"sans-serif\" font-size=\"12\">\n"
                  "<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n",
                  W, H, W, H);
        draw_axes(&b, &p1, "Loss", "loss");
        draw_series(&b, &p1, &tr, "train-loss", "#1f77b4");
        draw_series(&b, &p1, &dl, "dev-loss", "#ff7f0e");
        const char *n1[2] = {"train loss", "dev loss"}, *c1[2] = {"#1f77b4", "#ff7f0e"};
        draw_legend(&b, &p1, n1, c1, 2);
        draw_axes(&b, &p2, "Dev BLEU", "BLEU");
        draw_series(&b, &p2, &db, "dev-bleu", "#2ca02c");
        if (db.n == 0)
            sb_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#999\">no BLEU yet</text>\n",
                      p2.x0 + p2.w / 2, p2.y0 + p2.h / 2);
        const char *n2[1] = {"dev BLEU"}, *c2[1] = {"#2ca02c"};
        draw_legend(&b, &p2, n2, c2, 1);
        sb_printf(&b, "</svg>\n");
        st = finish_svg(&b, svg_path, err, err_cap);
    }
    series_free(&tr);
    series_free(&dl);
    series_free(&db);
    return st;
}

/* ---- several logs overlaid ---------------------------------------------- */

static const char *const RUN_COLORS[PLOT_MAX_LOGS] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                                       "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                                                       "#bcbd22", "#17becf", "#393b79", "#ad494a"};

/* XML text of a label (&, <, >, " escaped). */
static void sb_xml(sbuf *b, const char *s) {
    for (; *s; s++) {
        if (*s == '&') sb_printf(b, "&amp;");
        else if (*s == '<') sb_printf(b, "&lt;");
        else if (*s == '>') sb_printf(b, "&gt;");
        else if (*s == '"') sb_printf(b, "&quot;");
        else sb_printf(b, "%c", *s);
    }
}

/* The label of a log without one: the folder of DIR/log.jsonl, else the
 * file name without its extension. */
static void default_label(const char *path, char *out, size_t cap) {
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (strcmp(base, "log.jsonl") == 0 && slash && slash > path) {
        const char *end = slash, *start = slash;
        while (start > path && start[-1] != '/') start--;
        snprintf(out, cap, "%.*s", (int)(end - start), start);
        return;
    }
    const char *dot = strrchr(base, '.');
    size_t n = dot && dot > base ? (size_t)(dot - base) : strlen(base);
    snprintf(out, cap, "%.*s", (int)n, base);
}

static void draw_run_legend(sbuf *b, const panel *p, char (*labels)[PLOT_LABEL_BYTES], int n, int styles) {
    size_t longest = styles ? 10 : 0; /* "train loss" */
    for (int i = 0; i < n; i++)
        if (strlen(labels[i]) > longest) longest = strlen(labels[i]);
    double w = 46 + 7.0 * (double)longest;
    if (w < 120) w = 120;
    int rows = n + (styles ? 2 : 0);
    double x = p->x0 + p->w - w - 10, y = p->y0 + 10;
    sb_printf(b, "<g class=\"legend\">\n<rect x=\"%.1f\" y=\"%.1f\" width=\"%.0f\" height=\"%d\" fill=\"#fff\" "
                 "stroke=\"#999\"/>\n",
              x, y, w, 8 + 18 * rows);
    for (int i = 0; i < rows; i++) {
        double ly = y + 16 + 18 * i;
        int style = i >= n;
        sb_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"%s/>\n",
                  x + 8, ly - 4, x + 32, ly - 4, style ? "#000" : RUN_COLORS[i],
                  style && i == n + 1 ? " stroke-dasharray=\"5,3\"" : "");
        sb_printf(b, "<text class=\"%s\" x=\"%.1f\" y=\"%.1f\">", style ? "legend-style" : "legend-run", x + 38, ly);
        if (style) sb_printf(b, "%s", i == n ? "train loss" : "dev loss");
        else sb_xml(b, labels[i]);
        sb_printf(b, "</text>\n");
    }
    sb_printf(b, "</g>\n");
}

static void draw_run_series(sbuf *b, const panel *p, const series *s, const char *cls, int run, int dashed) {
    if (s->n == 0) return;
    sb_printf(b, "<polyline class=\"%s\" data-run=\"%d\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\"%s points=\"",
              cls, run, RUN_COLORS[run], dashed ? " stroke-dasharray=\"5,3\"" : "");
    for (size_t k = 0; k < s->n; k++) sb_printf(b, "%s%.2f,%.2f", k ? " " : "", px(p, s->x[k]), py(p, s->y[k]));
    sb_printf(b, "\"/>\n");
}

nmt_status plot_svg_multi(const char *const *log_paths, const char *const *labels, int n_logs, const char *svg_path,
                          char *err, size_t err_cap) {
    if (err && err_cap) err[0] = '\0';
    if (!log_paths || !svg_path || n_logs < 1) {
        nmt_errf(err, err_cap, "plot_svg_multi: missing path");
        return NMT_ERR_INVALID_ARGUMENT;
    }
    if (n_logs > PLOT_MAX_LOGS) {
        nmt_errf(err, err_cap, "%d logs: at most %d in one plot", n_logs, PLOT_MAX_LOGS);
        return NMT_ERR_INVALID_ARGUMENT;
    }
    for (int i = 0; i < n_logs; i++)
        if (!log_paths[i]) {
            nmt_errf(err, err_cap, "plot_svg_multi: missing path");
            return NMT_ERR_INVALID_ARGUMENT;
        }
    series tr[PLOT_MAX_LOGS] = {{0}}, dl[PLOT_MAX_LOGS] = {{0}}, db[PLOT_MAX_LOGS] = {{0}};
    char names[PLOT_MAX_LOGS][PLOT_LABEL_BYTES];
    nmt_status st = NMT_OK;
    for (int i = 0; i < n_logs && st == NMT_OK; i++) {
        if (labels && labels[i]) snprintf(names[i], sizeof names[i], "%s", labels[i]);
        else default_label(log_paths[i], names[i], sizeof names[i]);
        st = read_log(log_paths[i], &tr[i], &dl[i], &db[i], err, err_cap);
    }
    if (st == NMT_OK) {
        const double W = 800, H = 640;
        const series *all[3 * PLOT_MAX_LOGS], *losses[2 * PLOT_MAX_LOGS], *bleus[PLOT_MAX_LOGS];
        size_t n_bleu = 0;
        for (int i = 0; i < n_logs; i++) {
            all[3 * i] = &tr[i];
            all[3 * i + 1] = &dl[i];
            all[3 * i + 2] = &db[i];
            losses[2 * i] = &tr[i];
            losses[2 * i + 1] = &dl[i];
            bleus[i] = &db[i];
            n_bleu += db[i].n;
        }
        range xr = data_range(all, 3 * n_logs, 1);
        panel p1 = {80, 40, W - 110, 220, xr, data_range(losses, 2 * n_logs, 0)};
        panel p2 = {80, 360, W - 110, 220, xr, data_range(bleus, n_logs, 0)};
        sbuf b = {0};
        sb_printf(&b,
                  "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                  "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
                  "font-family=\"sans-serif\" font-size=\"12\" data-runs=\"%d\">\n"
                  "<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n",
                  W, H, W, H, n_logs);
        draw_axes_r(&b, &p1, "Loss", "loss", 1);
        for (int i = 0; i < n_logs; i++) {
            draw_run_series(&b, &p1, &tr[i], "train-loss", i, 0);
            draw_run_series(&b, &p1, &dl[i], "dev-loss", i, 1);
        }
        draw_run_legend(&b, &p1, names, n_logs, 1);
        draw_axes_r(&b, &p2, "Dev BLEU", "BLEU", 1);
        for (int i = 0; i < n_logs; i++) draw_run_series(&b, &p2, &db[i], "dev-bleu", i, 0);
        if (n_bleu == 0)
            sb_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#999\">no BLEU yet</text>\n",
                      p2.x0 + p2.w / 2, p2.y0 + p2.h / 2);
        draw_run_legend(&b, &p2, names, n_logs, 0);
        sb_printf(&b, "</svg>\n");
        st = finish_svg(&b, svg_path, err, err_cap);
    }
    for (int i = 0; i < n_logs; i++) {
        series_free(&tr[i]);
        series_free(&dl[i]);
        series_free(&db[i]);
    }
    return st;
}
