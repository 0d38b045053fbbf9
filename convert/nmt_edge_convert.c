/* SPDX-License-Identifier: MIT */
/* nmt_edge_convert.c — the nmt-edge-convert program: writes .nmt models.
 *
 *   nmt-edge-convert --help | --version
 *   nmt-edge-convert random -o FILE [--arch NAME] [options]   random-weight model of any family
 *   nmt-edge-convert export CKPT... -o FILE [--dtype fp32|fp16|int8]
 *   nmt-edge-convert import FORMAT SRC -o FILE [--dtype fp32|fp16|int8]   another framework's model
 *   nmt-edge-convert info MODEL [--max-batch N ...]
 *   nmt-edge-convert verify MODEL [--device SPEC]
 *   nmt-edge-convert kernels --model MODEL -o PACK.nmk [--device SPEC]   kernel pack
 *
 * One file per subcommand (convert_cmds.h).  Exit status: 0 success, 1 I/O
 * or internal error (also when standard output cannot be written), 2 bad
 * usage.  Each subcommand declares its options in a table (struct opt_def)
 * that drives both parsing and its --help text.
 */
#include "convert_cmds.h"
#include "nmt_edge.h"
#include "tool_out.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Main                                                                     */
/* ------------------------------------------------------------------------ */

typedef struct subcommand {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} subcommand;

static const subcommand subcommands[] = {
    {"random", cmd_random, "write a random-weight model of any family (--arch; default transformer)"},
    {"export", cmd_export, "checkpoint(s) -> deployment model (average, strip train.*, fp32/fp16/int8)"},
    {"import", cmd_import, "another framework's model (hf-marian, fairseq, opennmt) -> deployment model"},
    {"info", cmd_info, "describe a model: hyper-parameters, metadata, tensors, checksums, memory"},
    {"verify", cmd_verify, "check structure and checksums, then run a test forward on a device"},
    {"kernels", cmd_kernels, "write a kernel pack: a model's compiled programs for one device (.nmk)"},
};

static void usage(FILE *out) {
    fprintf(out,
            "usage: " PROG " <command> [options]\n"
            "       " PROG " --help | --version\n\n"
            "Write nmt-edge model files (.nmt, format version %u; see docs/FORMAT.md).\n\n"
            "commands:\n",
            NMT_FILE_VERSION);
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        fprintf(out, "  %-10s %s\n", subcommands[i].name, subcommands[i].summary);
    fprintf(out, "\nRun '" PROG " <command> --help' for the options of a command.\n");
}

static int run(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf(PROG " %s (model format v%u)\n", nmt_version(), NMT_FILE_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        if (strcmp(cmd, subcommands[i].name) == 0) return subcommands[i].run(argc - 2, argv + 2);
    fprintf(stderr, PROG ": unknown command '%s' (see " PROG " --help)\n", cmd);
    return EXIT_USAGE;
}

int main(int argc, char **argv) {
    int rc = run(argc, argv);
    /* every byte of standard output written, or a message and status 1 */
    if (nmt_tool_close_stdout(PROG) != 0 && rc == 0) rc = 1;
    return rc;
}
