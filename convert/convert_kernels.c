/* SPDX-License-Identifier: MIT */
/* convert_kernels.c — nmt-edge-convert kernels: a kernel pack (.nmk,
 * docs/FORMAT.md "Kernel packs") with every program a model's session needs
 * on a device.  It opens the device, creates a session for the model under
 * the given limits (which builds every program the model uses, with the
 * device's tuning defines, and runs each kernel once so that lazy
 * per-work-group-size code is in the binaries), then writes the binaries
 * the driver holds (runtime/device/kernel_pack.c; temporary file + rename). */
#include "convert_cmds.h"
#include "kernel_pack.h"
#include "tool_env.h"
#include "tool_out.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct kernels_args {
    const char *output, *model, *device, *tuning;
    uint32_t max_batch, max_beam, max_src_len, max_tgt_len;
    int alignment, no_cache, verbose, probe;
} kernels_args;

#define KA(field) offsetof(kernels_args, field)

static const opt_def kernels_opts[] = {
    {"model", 'm', OPT_STR, KA(model), "FILE", NULL, "the model (.nmt) whose programs to pack (required)", 0, 0},
    {"output", 'o', OPT_STR, KA(output), "FILE", NULL, "the kernel pack to write, e.g. pack.nmk (required)", 0, 0},
    {"device", 0, OPT_STR, KA(device), "SPEC", NULL,
     "OpenCL device: P:D, gpu, cpu, accelerator or a name substring (default $NMT_EDGE_DEVICE, "
     "else the runtime's default)", 0, 0},
    {"max-batch", 0, OPT_U32, KA(max_batch), "N", NULL, "session limit: sentences per call (default 1)", 1, 4096},
    {"max-beam", 0, OPT_U32, KA(max_beam), "N", NULL, "session limit: beam width (default 4)", 1, 256},
    {"max-src-len", 0, OPT_U32, KA(max_src_len), "N", NULL, "session limit: source tokens (default 256)", 1, 8192},
    {"max-tgt-len", 0, OPT_U32, KA(max_tgt_len), "N", NULL, "session limit: target tokens (default src + 50)", 1,
     8192},
    {"alignment", 0, OPT_FLAG, KA(alignment), NULL, NULL,
     "also the programs of a session with alignments (nmt-edge translate --alignment)", 0, 0},
    {"tuning", 0, OPT_STR, KA(tuning), "FILE", NULL,
     "build with the kernel parameters of this tuning file (another device's, from --probe) instead of "
     "this device's", 0, 0},
    {"probe", 0, OPT_FLAG, KA(probe), NULL, NULL,
     "no model: write an identity-only pack (this device, driver and kernel parameters, no programs; "
     "needs no compiler) and its tuning file PACK.tuning.txt, for a vendor flow (docs/PORTING.md)", 0, 0},
    {"no-cache", 0, OPT_FLAG, KA(no_cache), NULL, NULL, "compile everything, ignoring the program cache", 0, 0},
    {"verbose", 'v', OPT_FLAG, KA(verbose), NULL, NULL, "log the runtime's progress to stderr", 0, 0},
};
#define N_KERNELS_OPTS (sizeof kernels_opts / sizeof kernels_opts[0])

static void kernels_help(FILE *out) {
    fprintf(out,
            "usage: " PROG " kernels --model FILE -o PACK.nmk [--device SPEC] [limits]\n\n"
            "Write a kernel pack: the device binaries of every OpenCL program a session of\n"
            "the model needs on the device (exact build options and tuning defines), for\n"
            "`nmt-edge --kernel-pack PACK.nmk` (or NMT_EDGE_KERNEL_PACK) on devices that\n"
            "cannot compile at run time and on boards where the JIT costs the cold start.\n"
            "The pack is bound to the device, its driver version and the kernel\n"
            "parameters (tuning file) in effect; docs/PORTING.md says how vendor flows\n"
            "make one offline.  GEMM is always our kernels here (CLBlast compiles its own).\n"
            "Programs depend on the model's family and weight types, so make one pack per\n"
            "model (packs of the same family and dtype serve each other).\n\n"
            "Offline flows (FPGA): --probe on the target, --tuning with its tuning file on a\n"
            "device with a compiler for the program list, the vendor's compiler, then\n"
            "scripts/nmk-retarget.py (docs/PORTING.md).\n\noptions:\n");
    print_opts(out, kernels_opts, N_KERNELS_OPTS);
}

static void log_stderr(void *user, nmt_log_level level, const char *msg) {
    if ((int)level <= *(const int *)user) fprintf(stderr, PROG " kernels: %s\n", msg);
}

/* Replace the device's kernel parameters with those of a tuning file. */
static int load_tuning_file(nmt_device *dev, const char *path) {
    size_t n = 0;
    char *text = read_whole("kernels", path, &n);
    if (text == NULL) return 0;
    nmt_status s = nmt_tuning_parse(&dev->tuning, text, n);
    free(text);
    if (s != NMT_OK) {
        fprintf(stderr, PROG " kernels: '%s' is not a tuning file this runtime reads\n", path);
        return 0;
    }
    snprintf(dev->tuning.origin, sizeof dev->tuning.origin, "file: %.140s", path);
    return 1;
}

/* --probe: the identity-only pack and PACK.tuning.txt. */
static int probe(nmt_device *dev, const char *output) {
    uint32_t n = 0;
    nmt_status s = nmt_kpack_write(dev, output, &n);
    if (s != NMT_OK) {
        fprintf(stderr, PROG " kernels: cannot write '%s': %s\n", output, nmt_status_str(s));
        return 1;
    }
    static char text[16384];
    char path[4200];
    snprintf(path, sizeof path, "%s.tuning.txt", output);
    size_t len = nmt_tuning_format(&dev->tuning, dev->info.device_name, text, sizeof text);
    FILE *f = len ? fopen(path, "w") : NULL;
    int ok = f != NULL && fwrite(text, 1, len, f) == len;
    if (f != NULL && fclose(f) != 0) ok = 0;
    if (!ok) {
        fprintf(stderr, PROG " kernels: cannot write '%s'\n", path);
        return 1;
    }
    printf("identity-only pack %s for '%s' (%s, driver %s, compiler %s, tuning %016llx); kernel parameters in %s\n",
           output, dev->info.device_name, dev->info.platform_name, dev->info.driver_version,
           dev->compiler_available ? "yes" : "no", (unsigned long long)nmt_kpack_tuning_id(&dev->tuning), path);
    return 0;
}

int cmd_kernels(int argc, char **argv) {
    kernels_args a;
    memset(&a, 0, sizeof a);
    switch (parse_opts("kernels", kernels_opts, N_KERNELS_OPTS, argc, argv, &a)) {
    case PARSE_HELP: kernels_help(stdout); return 0;
    case PARSE_ERROR: return EXIT_USAGE;
    case PARSE_OK: break;
    }
    if ((a.model == NULL && !a.probe) || a.output == NULL || (a.probe && (a.model || a.tuning))) {
        fprintf(stderr, PROG " kernels: --model (or --probe, alone) and -o are required (see " PROG
                        " kernels --help)\n");
        return EXIT_USAGE;
    }
    const char *const inputs[] = {a.model, a.tuning}; /* (--probe reads neither) */
    if (output_is_input("kernels", a.output, inputs, 2)) return EXIT_USAGE;
    int level = a.verbose ? NMT_LOG_INFO : NMT_LOG_WARN;
    nmt_device_params dp;
    char cache_dir[4096];
    memset(&dp, 0, sizeof dp);
    nmt_tool_device_params(&dp, a.device, a.no_cache ? NULL : cache_dir, sizeof cache_dir);
    dp.kernel_pack = NULL;  /* this command compiles: no pack, no binaries-only */
    dp.binaries_only = 0;
    dp.gemm = NMT_GEMM_OWN;
    dp.log = log_stderr;
    dp.log_user = &level;
    dp.log_level = (nmt_log_level)level;

    int rc = 1;
    nmt_device *dev = NULL;
    nmt_session *sess = NULL;
    void *arena = NULL;
    size_t fp = (nmt_device_footprint() + 63) / 64 * 64;
    void *dev_mem = aligned_alloc(64, fp);
    if (dev_mem == NULL) {
        fprintf(stderr, PROG " kernels: out of memory\n");
        return 1;
    }
    nmt_tool_signals sigs;
    nmt_tool_signals_save(&sigs);
    nmt_status s = nmt_device_open(&dp, dev_mem, fp, &dev);
    nmt_tool_signals_restore(&sigs); /* the OpenCL runtime may have installed its own (tool_out.h) */
    if (s != NMT_OK) {
        dev = NULL;
        fprintf(stderr, PROG " kernels: cannot open device '%s': %s\n", dp.device ? dp.device : "default",
                nmt_status_str(s));
        goto done;
    }
    if (a.tuning && !load_tuning_file(dev, a.tuning)) goto done;
    if (a.probe) {
        rc = probe(dev, a.output);
        goto done;
    }
    if (!dev->compiler_available) {
        fprintf(stderr, PROG " kernels: device '%s' has no OpenCL compiler; make its pack with the vendor's offline "
                        "compiler (docs/PORTING.md)\n", dev->info.device_name);
        goto done;
    }
    nmt_session_params p;
    memset(&p, 0, sizeof p);
    p.model_path = a.model;
    p.limits.max_batch = a.max_batch;
    p.limits.max_beam = a.max_beam;
    p.limits.max_src_len = a.max_src_len;
    p.limits.max_tgt_len = a.max_tgt_len;
    p.alignment = a.alignment;
    p.fp16_compute = nmt_tool_fp16_compute(0); /* as nmt-edge: the fp16 programs too where it uses them */
    size_t need = 0;
    s = nmt_session_arena_size(&p, &need, NULL);
    if (s == NMT_OK) {
        arena = aligned_alloc(NMT_ARENA_ALIGNMENT, (need + NMT_ARENA_ALIGNMENT - 1) / NMT_ARENA_ALIGNMENT *
                                                       NMT_ARENA_ALIGNMENT);
        if (arena == NULL) {
            fprintf(stderr, PROG " kernels: out of memory (%zu bytes of session arena)\n", need);
            goto done;
        }
        s = nmt_session_create(dev, &p, arena, need, &sess);
    }
    if (s != NMT_OK) {
        sess = NULL;
        fprintf(stderr, PROG " kernels: '%s': session: %s\n", a.model, nmt_status_str(s));
        goto done;
    }
    uint32_t n = 0;
    s = nmt_kpack_write(dev, a.output, &n);
    if (s != NMT_OK) {
        fprintf(stderr, PROG " kernels: cannot write '%s': %s\n", a.output, nmt_status_str(s));
        goto done;
    }
    printf("kernel pack %s: %u programs for '%s' (%s, driver %s)\n", a.output, (unsigned)n, dev->info.device_name,
           dev->info.platform_name, dev->info.driver_version);
    for (uint32_t i = 0; i < dev->n_programs; i++) {
        char opts[NMT_KPACK_OPTIONS];
        nmt_full_build_options(dev->programs[i].options, opts, sizeof opts);
        printf("  %-14s %s\n", dev->programs[i].source, opts);
    }
    rc = 0;
done:
    if (sess) nmt_session_destroy(sess);
    if (dev) nmt_device_close(dev);
    free(arena);
    free(dev_mem);
    return rc;
}
