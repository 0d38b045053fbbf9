/* SPDX-License-Identifier: MIT */
/* kernel_pack.h — kernel packs: the device binaries of every program a
 * model's session needs on one device, in one file (.nmk), for devices that
 * cannot compile OpenCL C at run time (FPGA flows: CL_DEVICE_COMPILER_AVAILABLE
 * false) and for boards where the JIT costs a cold start.
 *
 * docs/FORMAT.md ("Kernel packs") is the byte-level specification; keep the
 * two in step.  All integers little-endian; every offset absolute.
 *
 *   offset 0            header (896 bytes)
 *   896                 program table: n_programs entries of 384 bytes
 *   multiples of 64     the binaries (CL_PROGRAM_BINARIES), in table order
 *   file_size           end of file (= end of the last binary)
 *
 * The writer is `nmt-edge-convert kernels` (nmt_kpack_write: the programs a
 * device built, straight from the driver into the file's mapping); the
 * reader is nmt_kpack_parse, which treats the bytes as untrusted and is
 * fuzzed (tests/fuzz/fuzz_kernel_pack.c).  Nothing here allocates. */
#ifndef NMT_KERNEL_PACK_H
#define NMT_KERNEL_PACK_H

#include "device.h"

#define NMT_KPACK_MAGIC "NMTKPACK"
#define NMT_KPACK_VERSION 1u
#define NMT_KPACK_HEADER_SIZE 896u
#define NMT_KPACK_ENTRY_SIZE 384u
#define NMT_KPACK_MAX_PROGRAMS 256u
#define NMT_KPACK_ALIGN 64u
#define NMT_KPACK_STR 128     /* identity strings: NUL-terminated, zero-padded */
#define NMT_KPACK_NAME 32     /* program name (file stem of cl/<name>.cl) */
#define NMT_KPACK_OPTIONS 288 /* exact clBuildProgram options, NUL-terminated */

typedef struct nmt_kpack_header {
    char magic[8];                          /*   0: "NMTKPACK" */
    uint32_t version;                       /*   8: NMT_KPACK_VERSION */
    uint32_t header_size;                   /*  12: 896 */
    uint64_t file_size;                     /*  16: exact size of the file */
    uint32_t n_programs;                    /*  24: <= 256 */
    uint32_t table_crc;                     /*  28: CRC-32 of the program table */
    uint64_t device_id;                     /*  32: FNV-1a of the device identity (as the program cache) */
    uint64_t tuning_id;                     /*  40: FNV-1a of the kernel parameters (nmt_kpack_tuning_id) */
    uint64_t reserved0[2];                  /*  48: zero */
    char platform_name[NMT_KPACK_STR];      /*  64: CL_PLATFORM_NAME */
    char platform_version[NMT_KPACK_STR];   /* 192: CL_PLATFORM_VERSION */
    char device_name[NMT_KPACK_STR];        /* 320: CL_DEVICE_NAME */
    char device_vendor[NMT_KPACK_STR];      /* 448: CL_DEVICE_VENDOR */
    char driver_version[NMT_KPACK_STR];     /* 576: CL_DRIVER_VERSION */
    char device_version[NMT_KPACK_STR];     /* 704: CL_DEVICE_VERSION */
    uint8_t reserved1[60];                  /* 832: zero */
    uint32_t header_crc;                    /* 892: CRC-32 of bytes [0, 892) */
} nmt_kpack_header;

typedef struct nmt_kpack_entry {
    char name[NMT_KPACK_NAME];              /*   0: "gemm" for cl/gemm.cl */
    char options[NMT_KPACK_OPTIONS];        /*  32: "-cl-std=CL1.2 -DGEMM_TM=4 ..." */
    uint64_t options_hash;                  /* 320: FNV-1a of options with its NUL */
    uint64_t source_hash;                   /* 328: FNV-1a of common.cl (+ chain.cl) + <name>.cl */
    uint64_t offset;                        /* 336: of the binary; multiple of 64 */
    uint64_t size;                          /* 344: bytes of the binary, > 0 */
    uint32_t crc;                           /* 352: CRC-32 of the binary */
    uint32_t reserved0;                     /* 356: zero */
    uint64_t reserved1[3];                  /* 360: zero */
} nmt_kpack_entry;

_Static_assert(sizeof(nmt_kpack_header) == NMT_KPACK_HEADER_SIZE, "kernel pack header is 896 bytes");
_Static_assert(sizeof(nmt_kpack_entry) == NMT_KPACK_ENTRY_SIZE, "kernel pack entry is 384 bytes");

/* Check an image (untrusted) and copy its header into *h: magic, version,
 * header CRC and fields, size, table bounds and CRC, every entry (strings,
 * option hash, binary inside the file, 64-aligned, ascending, no overlap, no
 * duplicate name+options), and with verify_binaries every binary's CRC.
 * NMT_ERR_KERNEL_PACK_VERSION for another format version, else
 * NMT_ERR_KERNEL_PACK_CORRUPT; why (may be NULL) gets one line saying what. */
nmt_status nmt_kpack_parse(const void *data, size_t size, int verify_binaries, nmt_kpack_header *h, char *why,
                           size_t why_cap);

/* Entry i (< h->n_programs) of an image nmt_kpack_parse accepted. */
void nmt_kpack_entry_at(const void *data, uint32_t i, nmt_kpack_entry *e);

/* Recompute every CRC of an image whose fields point inside it (binaries,
 * table, header), as the writer's last step; tests and the crcfix fuzzer
 * use it to reach the checks behind the checksums. */
void nmt_kpack_seal(void *data, size_t size);

/* Identity of the kernel parameters the programs were built with (the
 * tuning's GEMM table and work-group sizes; not its origin string). */
uint64_t nmt_kpack_tuning_id(const nmt_tuning *t);

/* Device side (device open, program creation; kernel_pack.c). */

/* Validate the pack at `path` against the open device (every CRC, then the
 * device identity: NMT_ERR_KERNEL_PACK_DEVICE; the kernel parameters:
 * NMT_ERR_KERNEL_PACK_TUNING) and remember the path.  The file is mapped
 * for the call only (and again for each program), so a pack replaced later
 * is checked again, never read past its end. */
nmt_status nmt_kpack_attach(nmt_device *dev, const char *path);

/* The program `source` built with `full_options` from the attached pack:
 * clCreateProgramWithBinary + clBuildProgram of the binary.  NMT_OK with
 * *out NULL when the pack has no entry of that name (the caller compiles,
 * or in binaries-only mode reports NMT_ERR_KERNEL_PACK_MISSING);
 * NMT_ERR_KERNEL_PACK_TUNING when it has the name only with other options
 * or other sources (source_hash); a driver that refuses the binary is
 * NMT_ERR_KERNEL_PACK_DEVICE. */
nmt_status nmt_kpack_program(nmt_device *dev, const char *source, const char *full_options, uint64_t source_hash,
                             cl_program *out);

/* Write every program the device has built so far (after a session's
 * creation and warm-up: all the model needs) into `path` (temporary file +
 * rename).  *n_programs gets the count.  A device that has built none
 * gives an identity-only pack (no programs: `kernels --probe`, the device
 * and tuning a vendor flow must target).  NMT_ERR_OPENCL when a binary is
 * unavailable. */
nmt_status nmt_kpack_write(nmt_device *dev, const char *path, uint32_t *n_programs);

#endif
