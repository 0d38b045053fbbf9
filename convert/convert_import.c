/* SPDX-License-Identifier: MIT */
/* convert_import.c — nmt-edge-convert import: another framework's model ->
 * a deployment model (docs/IMPORT.md).
 *
 * The reading of the source format is Python (convert/import/
 * nmt_edge_import.py; the formats are pickles, JSON and protobuf files whose
 * own tools are Python): it writes an fp32 .nmt into a temporary file that
 * this program created beside -o.  That file is then read, removed, and
 * handed to export's code (export_images: the runtime's checks,
 * quantization, the atomic write of -o).  Nothing is written on failure;
 * the temporary is removed on every path, and by a terminating signal
 * (tool_out.h). */
#include "convert_cmds.h"
#include "tool_out.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define IMPORT_SCRIPT "nmt_edge_import.py"
#define IMPORT_MAX_INPUTS 256

/* The formats nmt_edge_import.py reads, with their help lines. */
static const struct {
    const char *name, *help;
} formats[] = {
    {"hf-marian", "a Hugging Face MarianMTModel directory (OPUS-MT): config.json, model.safetensors or "
                  "pytorch_model.bin, source.spm, target.spm, vocab.json"},
    {"fairseq", "a fairseq transformer checkpoint (checkpoint*.pt, or its directory) with dict.SRC.txt, "
                "dict.TGT.txt and, when the data was encoded with one, the SentencePiece model; needs torch"},
    {"opennmt", "an OpenNMT-py 3.x Transformer checkpoint (model_step_N.pt); token ids in and out (its "
                "tokenization lives in its transforms); needs torch"},
};

typedef struct import_args {
    const char *output;
    const char *dtype;
    int quiet;
} import_args;

#define IA(field) offsetof(import_args, field)

static const opt_def import_opts[] = {
    {"output", 'o', OPT_STR, IA(output), "FILE", NULL, "output model file (required)", 0, 0},
    {"dtype", 0, OPT_CHOICE, IA(dtype), "fp32|fp16|int8", "fp32 fp16 int8",
     "storage type of the tensors the family marks quantizable (default fp32), as export", 0, 0},
    {"quiet", 'q', OPT_FLAG, IA(quiet), NULL, NULL, "no report of what was imported on stderr", 0, 0},
};

static void import_help(FILE *out) {
    fprintf(out, "usage: " PROG " import FORMAT SRC -o FILE [--dtype fp32|fp16|int8]\n\n"
                 "Convert a model of another framework into an nmt-edge model: its weights,\n"
                 "hyper-parameters and tokenizers (embedded, renumbered to the model's ids).\n"
                 "Settings the runtime cannot reproduce are refused with a message naming\n"
                 "the setting and its value, and nothing is written.  The model is checked\n"
                 "and quantized as export does.  See docs/IMPORT.md.\n\nformats:\n");
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) { /* wrapped at 79 columns */
        fprintf(out, "  %-10s", formats[i].name);
        int col = 12;
        for (const char *w = formats[i].help; *w;) {
            const size_t len = strcspn(w, " ");
            if (col + 1 + (int)len > 79) {
                fprintf(out, "\n%13s", "");
                col = 13;
            } else {
                fputc(' ', out);
                col++;
            }
            fprintf(out, "%.*s", (int)len, w);
            col += (int)len;
            w += len;
            while (*w == ' ') w++;
        }
        fputc('\n', out);
    }
    fprintf(out, "\nThe importer is Python 3 with numpy (torch for pickles): python3 from PATH, or\n"
                 "$NMT_EDGE_PYTHON; its script from $NMT_EDGE_IMPORT_DIR, else\n"
                 "<dir of this program>/" NMT_IMPORT_SHARE_REL ".\n\noptions:\n");
    print_opts(out, import_opts, sizeof import_opts / sizeof import_opts[0]);
}

static int is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The directory of the importer's script into dir[cap]: $NMT_EDGE_IMPORT_DIR,
 * else <dir of the executable>/NMT_IMPORT_SHARE_REL (an installed tree),
 * else the source tree's convert/import (a build-tree run).  0 when none
 * holds the script (the message lists where it looked). */
static int find_script_dir(char *dir, size_t cap) {
    const char *env = getenv("NMT_EDGE_IMPORT_DIR");
    char path[PATH_MAX + 64], tried[3 * (PATH_MAX + 8)] = "";
    if (env != NULL && env[0] != '\0') {
        snprintf(path, sizeof path, "%s/" IMPORT_SCRIPT, env);
        if (is_file(path)) return snprintf(dir, cap, "%s", env) < (int)cap;
        fprintf(stderr, PROG " import: $NMT_EDGE_IMPORT_DIR '%s' has no " IMPORT_SCRIPT "\n", env);
        return 0;
    }
    char exe[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash != NULL) {
            *slash = '\0';
            snprintf(path, sizeof path, "%s/" NMT_IMPORT_SHARE_REL "/" IMPORT_SCRIPT, exe);
            if (is_file(path)) return snprintf(dir, cap, "%s/" NMT_IMPORT_SHARE_REL, exe) < (int)cap;
            snprintf(tried, sizeof tried, "'%s/" NMT_IMPORT_SHARE_REL "'", exe);
        }
    }
#ifdef NMT_IMPORT_SOURCE_DIR
    snprintf(path, sizeof path, "%s/" IMPORT_SCRIPT, NMT_IMPORT_SOURCE_DIR);
    if (is_file(path)) return snprintf(dir, cap, "%s", NMT_IMPORT_SOURCE_DIR) < (int)cap;
    snprintf(tried + strlen(tried), sizeof tried - strlen(tried), "%s'%s'", tried[0] ? ", " : "",
             NMT_IMPORT_SOURCE_DIR);
#endif
    fprintf(stderr, PROG " import: the importer " IMPORT_SCRIPT " is not installed (looked in %s); set "
                         "$NMT_EDGE_IMPORT_DIR to its directory\n", tried[0] ? tried : "no directory");
    return 0;
}

/* -o naming a file of the source (SRC, and the files of SRC's directory, or
 * of the directory holding SRC: dictionaries and tokenizers sit beside a
 * checkpoint) is refused before any work, as export refuses -o naming an
 * input. */
static int output_in_source(const char *output, const char *src, int src_is_dir) {
    const char *inputs[IMPORT_MAX_INPUTS + 1];
    char *names[IMPORT_MAX_INPUTS];
    int n = 0, hit;
    inputs[n++] = src;
    char parent[PATH_MAX];
    const char *dir = src;
    if (!src_is_dir) {
        const char *slash = strrchr(src, '/');
        snprintf(parent, sizeof parent, "%.*s", slash == NULL ? 1 : slash == src ? 1 : (int)(slash - src),
                 slash == NULL ? "." : src);
        dir = parent;
    }
    DIR *d = opendir(dir);
    if (d != NULL) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL && n <= IMPORT_MAX_INPUTS) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            const size_t len = strlen(dir) + strlen(e->d_name) + 2;
            char *p = malloc(len);
            if (p == NULL) break;
            snprintf(p, len, "%s/%s", dir, e->d_name);
            names[n - 1] = p;
            inputs[n++] = p;
        }
        closedir(d);
    }
    hit = output_is_input("import", output, inputs, n);
    for (int i = 1; i < n; i++) free(names[i - 1]);
    return hit;
}

/* Run the importer: python SCRIPT FORMAT SRC --output-fd FD [--quiet]; its
 * exit status (1 when it could not run or died of a signal). */
static int run_importer(const char *script_dir, const char *format, const char *src, int fd, int quiet) {
    const char *python = getenv("NMT_EDGE_PYTHON");
    if (python == NULL || python[0] == '\0') python = "python3";
    char script[PATH_MAX + 64], fdarg[24];
    snprintf(script, sizeof script, "%s/" IMPORT_SCRIPT, script_dir);
    snprintf(fdarg, sizeof fdarg, "%d", fd);
    fflush(NULL);
    const pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, PROG " import: cannot start %s: %s\n", python, strerror(errno));
        return 1;
    }
    if (pid == 0) {
        const int flags = fcntl(fd, F_GETFD);
        if (flags >= 0) fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC);
        char *argv[] = {(char *)python, script, (char *)format, (char *)src, "--output-fd", fdarg,
                        quiet ? "--quiet" : NULL, NULL};
        execvp(python, argv);
        fprintf(stderr, PROG " import: cannot run '%s': %s (install Python 3 with numpy, or set $NMT_EDGE_PYTHON)\n",
                python, strerror(errno));
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            fprintf(stderr, PROG " import: waiting for %s: %s\n", python, strerror(errno));
            return 1;
        }
    if (WIFSIGNALED(status)) {
        fprintf(stderr, PROG " import: the importer (%s %s) died of signal %d (nothing was written)\n", python,
                script, WTERMSIG(status));
        return 1;
    }
    const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    return rc == 0 ? 0 : rc == EXIT_USAGE ? EXIT_USAGE : 1;
}

int cmd_import(int argc, char **argv) {
    import_args a;
    memset(&a, 0, sizeof a);
    a.dtype = "fp32";
    const char *pos[3];
    int n_pos = 0;
    switch (parse_opts_pos("import", import_opts, sizeof import_opts / sizeof import_opts[0], argc, argv, &a, pos, 3,
                           &n_pos)) {
    case PARSE_HELP: import_help(stdout); return 0;
    case PARSE_ERROR: return EXIT_USAGE;
    case PARSE_OK: break;
    }
    if (n_pos != 2 || a.output == NULL || a.output[0] == '\0') {
        fprintf(stderr, PROG " import: %s (see " PROG " import --help)\n",
                n_pos != 2 ? "expected FORMAT and SRC" : "-o FILE is required");
        return EXIT_USAGE;
    }
    size_t f = 0;
    while (f < sizeof formats / sizeof formats[0] && strcmp(formats[f].name, pos[0]) != 0) f++;
    if (f == sizeof formats / sizeof formats[0]) {
        fprintf(stderr, PROG " import: unknown format '%s' (", pos[0]);
        for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
            fprintf(stderr, "%s%s", i ? ", " : "", formats[i].name);
        fprintf(stderr, ")\n");
        return EXIT_USAGE;
    }
    const char *src = pos[1];
    struct stat st;
    if (stat(src, &st) != 0) {
        fprintf(stderr, PROG " import: '%s': %s\n", src, strerror(errno));
        return 1;
    }
    if (output_in_source(a.output, src, S_ISDIR(st.st_mode))) return EXIT_USAGE;
    char dir[PATH_MAX + 1];
    if (!find_script_dir(dir, sizeof dir)) return 1;

    /* the fp32 model: a fresh temporary beside -o (O_EXCL: never someone
     * else's file), registered for removal by a terminating signal */
    const size_t cap = strlen(a.output) + 48;
    char *tmp = malloc(cap);
    if (tmp == NULL) {
        fprintf(stderr, PROG " import: out of memory\n");
        return 1;
    }
    int fd = -1;
    for (unsigned attempt = 0; attempt < 1000 && fd < 0; attempt++) {
        snprintf(tmp, cap, "%s.import.%ld.%u", a.output, (long)getpid(), attempt);
        fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        fprintf(stderr, PROG " import: cannot write '%s': cannot create a temporary file beside it: %s\n", a.output,
                strerror(errno));
        free(tmp);
        return 1;
    }
    nmt_tool_tmp_begin(tmp);
    int rc = run_importer(dir, pos[0], src, fd, a.quiet);
    close(fd);
    model_image img;
    memset(&img, 0, sizeof img);
    int have = 0;
    if (rc == 0) have = read_image("import", tmp, &img);
    unlink(tmp);
    nmt_tool_tmp_end();
    free(tmp);
    if (rc != 0) return rc;
    if (!have) return 1;
    img.path = src;
    rc = export_images("import", &img, 1, a.output, a.dtype);
    free_image(&img);
    return rc;
}
