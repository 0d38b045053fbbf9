/* SPDX-License-Identifier: MIT */
/* kernel_pack.c — kernel packs (kernel_pack.h, docs/FORMAT.md "Kernel
 * packs"): the reader (pure, fuzzed), the device side that creates programs
 * from a pack's binaries, and the writer used by `nmt-edge-convert kernels`.
 * Nothing here allocates: packs are read through file mappings and written
 * through the atomic writer's mapping. */
#include "kernel_pack.h"

#include "format.h"
#include "platform.h"

#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Reader                                                                   */
/* ------------------------------------------------------------------------ */

#define HEADER_CRC_OFFSET offsetof(nmt_kpack_header, header_crc)

/* Refuse the image as corrupt, saying why. */
#define BAD(...)                                                               \
    do {                                                                       \
        if (why && why_cap) nmt_errf(why, why_cap, __VA_ARGS__);               \
        return NMT_ERR_KERNEL_PACK_CORRUPT;                                    \
    } while (0)

static int all_zero(const void *p, size_t n) {
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < n; i++)
        if (b[i]) return 0;
    return 1;
}

/* A NUL-terminated string in a fixed field, zero after its NUL. */
static int field_ok(const char *f, size_t cap) {
    const char *nul = memchr(f, '\0', cap);
    return nul != NULL && all_zero(nul, cap - (size_t)(nul - f));
}

/* a file stem, or stems joined by '+' (nmt_device_program), none empty */
static int stem_ok(const char *s) {
    if (s[0] == '\0' || s[0] == '+') return 0;
    for (; *s; s++) {
        if (*s == '+' && s[1] != '\0' && s[1] != '+') continue;
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_'))
            return 0;
    }
    return 1;
}

static uint64_t fnv_str(uint64_t h, const char *s) { return nmt_fnv1a(h, s, strlen(s) + 1); }

void nmt_kpack_entry_at(const void *data, uint32_t i, nmt_kpack_entry *e) {
    memcpy(e, (const unsigned char *)data + NMT_KPACK_HEADER_SIZE + (size_t)i * NMT_KPACK_ENTRY_SIZE, sizeof *e);
}

nmt_status nmt_kpack_parse(const void *data, size_t size, int verify_binaries, nmt_kpack_header *h, char *why,
                           size_t why_cap) {
    const unsigned char *d = (const unsigned char *)data;
    if (why && why_cap) why[0] = '\0';
    if (h) memset(h, 0, sizeof *h);
    if (h == NULL || (d == NULL && size)) return NMT_ERR_INVALID_ARGUMENT;
    if (size < 8 || memcmp(d, NMT_KPACK_MAGIC, 8) != 0)
        BAD("not a kernel pack (bad magic; %zu bytes)", size);
    if (size < 12) BAD("truncated: %zu bytes, shorter than its header", size);
    uint32_t version;
    memcpy(&version, d + 8, 4);
    if (version != NMT_KPACK_VERSION) {
        if (why && why_cap) nmt_errf(why, why_cap, "kernel pack format version %u, this runtime reads %u", version,
                                     NMT_KPACK_VERSION);
        return NMT_ERR_KERNEL_PACK_VERSION;
    }
    if (size < NMT_KPACK_HEADER_SIZE) BAD("truncated: %zu bytes, shorter than its header", size);
    memcpy(h, d, sizeof *h);
    if (h->header_crc != nmt_crc32(0, d, HEADER_CRC_OFFSET))
        BAD("header CRC-32 mismatch (stored 0x%08x)", (unsigned)h->header_crc);
    if (h->header_size != NMT_KPACK_HEADER_SIZE)
        BAD("header_size %u, expected %u", (unsigned)h->header_size, NMT_KPACK_HEADER_SIZE);
    if (!all_zero(h->reserved0, sizeof h->reserved0) || !all_zero(h->reserved1, sizeof h->reserved1))
        BAD("reserved header bytes not zero");
    const char *strs[] = {h->platform_name, h->platform_version, h->device_name,
                          h->device_vendor, h->driver_version, h->device_version};
    for (size_t i = 0; i < NMT_ARRAY_LEN(strs); i++)
        if (!field_ok(strs[i], NMT_KPACK_STR))
            BAD("identity string #%zu not NUL-terminated and zero-padded", i);
    if (h->file_size != size)
        BAD("%s: file_size %llu, the file has %zu bytes", h->file_size > size ? "truncated" : "trailing bytes",
            (unsigned long long)h->file_size, size);
    if (h->n_programs > NMT_KPACK_MAX_PROGRAMS)
        BAD("n_programs %u, at most %u", (unsigned)h->n_programs, NMT_KPACK_MAX_PROGRAMS);
    const uint64_t table_end = NMT_KPACK_HEADER_SIZE + (uint64_t)h->n_programs * NMT_KPACK_ENTRY_SIZE;
    if (table_end > size) BAD("truncated: program table ends at %llu, past the end", (unsigned long long)table_end);
    if (h->table_crc != nmt_crc32(0, d + NMT_KPACK_HEADER_SIZE, (size_t)(table_end - NMT_KPACK_HEADER_SIZE)))
        BAD("program table CRC-32 mismatch (stored 0x%08x)", (unsigned)h->table_crc);

    uint64_t prev_end = table_end;
    for (uint32_t i = 0; i < h->n_programs; i++) {
        nmt_kpack_entry e;
        nmt_kpack_entry_at(d, i, &e);
        if (!field_ok(e.name, sizeof e.name) || !stem_ok(e.name))
            BAD("program #%u: bad name", (unsigned)i);
        if (!field_ok(e.options, sizeof e.options))
            BAD("program '%s': options not NUL-terminated and zero-padded", e.name);
        if (e.options_hash != fnv_str(NMT_FNV_OFFSET, e.options))
            BAD("program '%s': options hash mismatch", e.name);
        if (e.reserved0 != 0 || !all_zero(e.reserved1, sizeof e.reserved1))
            BAD("program '%s': reserved bytes not zero", e.name);
        if (e.size == 0 || e.offset % NMT_KPACK_ALIGN != 0 || e.offset < prev_end || e.offset > size ||
            e.size > size - e.offset)
            BAD("program '%s': binary of %llu bytes at offset %llu misplaced (empty, misaligned, overlapping or "
                "past the end)", e.name, (unsigned long long)e.size, (unsigned long long)e.offset);
        prev_end = e.offset + e.size;
        for (uint32_t j = 0; j < i; j++) {
            nmt_kpack_entry o;
            nmt_kpack_entry_at(d, j, &o);
            if (strcmp(o.name, e.name) == 0 && strcmp(o.options, e.options) == 0)
                BAD("program '%s' twice with the same options", e.name);
        }
        if (verify_binaries && e.crc != nmt_crc32(0, d + e.offset, (size_t)e.size))
            BAD("program '%s': binary CRC-32 mismatch (stored 0x%08x)", e.name, (unsigned)e.crc);
    }
    if (prev_end != size) BAD("%llu bytes after the last binary", (unsigned long long)(size - prev_end));
    return NMT_OK;
}

void nmt_kpack_seal(void *data, size_t size) {
    unsigned char *d = (unsigned char *)data;
    if (d == NULL || size < NMT_KPACK_HEADER_SIZE) return;
    nmt_kpack_header h;
    memcpy(&h, d, sizeof h);
    uint64_t n = h.n_programs;
    if (n > (size - NMT_KPACK_HEADER_SIZE) / NMT_KPACK_ENTRY_SIZE) n = (size - NMT_KPACK_HEADER_SIZE) / NMT_KPACK_ENTRY_SIZE;
    for (uint32_t i = 0; i < n; i++) {
        nmt_kpack_entry e;
        nmt_kpack_entry_at(d, i, &e);
        if (e.offset <= size && e.size <= size - e.offset) e.crc = nmt_crc32(0, d + e.offset, (size_t)e.size);
        memcpy(d + NMT_KPACK_HEADER_SIZE + (size_t)i * NMT_KPACK_ENTRY_SIZE, &e, sizeof e);
    }
    h.table_crc = nmt_crc32(0, d + NMT_KPACK_HEADER_SIZE, (size_t)n * NMT_KPACK_ENTRY_SIZE);
    memcpy(d, &h, sizeof h);
    h.header_crc = nmt_crc32(0, d, HEADER_CRC_OFFSET);
    memcpy(d, &h, sizeof h);
}

uint64_t nmt_kpack_tuning_id(const nmt_tuning *t) {
    uint64_t h = NMT_FNV_OFFSET;
    for (int op = 0; op < NMT_GOP_COUNT; op++)
        for (int c = 0; c < NMT_GCLASS_COUNT; c++) {
            const nmt_gemm_cfg *g = &t->gemm[op][c];
            const uint16_t f[7] = {g->provider, g->tm, g->tn, g->vw, g->mfast, g->wg, g->kgroup};
            h = nmt_fnv1a(h, f, g->kgroup ? sizeof f : sizeof f - sizeof f[6]); /* ids of kgroup-free tunings kept */
        }
    h = nmt_fnv1a(h, t->i8dot, sizeof t->i8dot);
    const uint16_t w[2] = {t->wg, t->reduce_wg};
    return nmt_fnv1a(h, w, sizeof w);
}

/* ------------------------------------------------------------------------ */
/* Device side                                                              */
/* ------------------------------------------------------------------------ */

static void platform_str(cl_platform_id p, cl_platform_info what, char *buf) {
    char tmp[1024];
    buf[0] = '\0';
    if (clGetPlatformInfo(p, what, sizeof tmp, tmp, NULL) == CL_SUCCESS) {
        tmp[sizeof tmp - 1] = '\0';
        nmt_strlcpy(buf, tmp, NMT_KPACK_STR);
    }
}

static void device_str(cl_device_id d, cl_device_info what, char *buf) {
    char tmp[1024];
    buf[0] = '\0';
    if (clGetDeviceInfo(d, what, sizeof tmp, tmp, NULL) == CL_SUCCESS) {
        tmp[sizeof tmp - 1] = '\0';
        nmt_strlcpy(buf, tmp, NMT_KPACK_STR);
    }
}

/* The header fields that name the open device (strings zero-padded). */
static void identity(const nmt_device *dev, nmt_kpack_header *h) {
    memset(h, 0, sizeof *h);
    platform_str(dev->platform, CL_PLATFORM_NAME, h->platform_name);
    platform_str(dev->platform, CL_PLATFORM_VERSION, h->platform_version);
    device_str(dev->device, CL_DEVICE_NAME, h->device_name);
    device_str(dev->device, CL_DEVICE_VENDOR, h->device_vendor);
    device_str(dev->device, CL_DRIVER_VERSION, h->driver_version);
    device_str(dev->device, CL_DEVICE_VERSION, h->device_version);
    h->device_id = dev->cache_key_base;
    h->tuning_id = nmt_kpack_tuning_id(&dev->tuning);
}

/* Device and tuning of a parsed header against the open device. */
static nmt_status check_identity(nmt_device *dev, const nmt_kpack_header *h, const char *path) {
    if (h->device_id != dev->cache_key_base) {
        nmt_kpack_header me;
        identity(dev, &me);
        const char *what = strcmp(h->device_name, me.device_name) ? "device"
                           : strcmp(h->driver_version, me.driver_version) ? "driver version"
                           : strcmp(h->platform_version, me.platform_version) ? "platform version"
                           : "device identity";
        nmt_log(&dev->log, NMT_LOG_ERROR,
                "kernel pack %s was made for another %s: '%s' (driver %s, %s), this is '%s' (driver %s, %s)", path,
                what, h->device_name, h->driver_version, h->platform_version, me.device_name, me.driver_version,
                me.platform_version);
        return NMT_ERR_KERNEL_PACK_DEVICE;
    }
    if (h->tuning_id != nmt_kpack_tuning_id(&dev->tuning)) {
        nmt_log(&dev->log, NMT_LOG_ERROR,
                "kernel pack %s was made with other kernel parameters (tuning %016llx, this device's %016llx: %s); "
                "make it again with the tuning file in place, or remove the tuning file",
                path, (unsigned long long)h->tuning_id, (unsigned long long)nmt_kpack_tuning_id(&dev->tuning),
                dev->tuning.origin);
        return NMT_ERR_KERNEL_PACK_TUNING;
    }
    return NMT_OK;
}

nmt_status nmt_kpack_attach(nmt_device *dev, const char *path) {
    if (dev == NULL || path == NULL || path[0] == '\0' || strlen(path) >= sizeof dev->kernel_pack)
        return NMT_ERR_INVALID_ARGUMENT;
    nmt_mapping m;
    if (nmt_map_file(path, &m) != NMT_OK) {
        nmt_log(&dev->log, NMT_LOG_ERROR, "cannot read kernel pack %s", path);
        return NMT_ERR_IO;
    }
    nmt_kpack_header h;
    char why[256];
    nmt_status s = nmt_kpack_parse(m.data, m.size, 1, &h, why, sizeof why);
    nmt_unmap_file(&m);
    if (s != NMT_OK) {
        nmt_log(&dev->log, NMT_LOG_ERROR, "kernel pack %s: %s", path, why);
        return s;
    }
    NMT_TRY(check_identity(dev, &h, path));
    nmt_strlcpy(dev->kernel_pack, path, sizeof dev->kernel_pack);
    nmt_log(&dev->log, NMT_LOG_INFO, "kernel pack %s: %u programs for '%s' (driver %s)", path,
            (unsigned)h.n_programs, h.device_name, h.driver_version);
    return NMT_OK;
}

nmt_status nmt_kpack_program(nmt_device *dev, const char *source, const char *full_options, uint64_t source_hash,
                             cl_program *out) {
    *out = NULL;
    nmt_mapping m;
    if (nmt_map_file(dev->kernel_pack, &m) != NMT_OK) {
        nmt_log(&dev->log, NMT_LOG_ERROR, "cannot read kernel pack %s", dev->kernel_pack);
        return NMT_ERR_IO;
    }
    /* Structure again (the file may have been replaced since the device
     * opened); each binary's CRC only when it is used, below. */
    nmt_kpack_header h;
    char why[256];
    nmt_status s = nmt_kpack_parse(m.data, m.size, 0, &h, why, sizeof why);
    if (s != NMT_OK) nmt_log(&dev->log, NMT_LOG_ERROR, "kernel pack %s: %s", dev->kernel_pack, why);
    if (s == NMT_OK) s = check_identity(dev, &h, dev->kernel_pack);
    int found = -1, same_name = 0;
    nmt_kpack_entry e;
    for (uint32_t i = 0; s == NMT_OK && i < h.n_programs && found < 0; i++) {
        nmt_kpack_entry_at(m.data, i, &e);
        if (strcmp(e.name, source) != 0) continue;
        same_name = 1;
        if (strcmp(e.options, full_options) == 0) found = (int)i;
    }
    if (s == NMT_OK && found < 0 && same_name) {
        nmt_log(&dev->log, NMT_LOG_ERROR,
                "kernel pack %s has %s.cl only with other build options than \"%s\" (made for other kernel "
                "parameters or another model's shapes?)", dev->kernel_pack, source, full_options);
        s = NMT_ERR_KERNEL_PACK_TUNING;
    }
    if (s == NMT_OK && !same_name && !dev->binaries_only)
        nmt_log(&dev->log, NMT_LOG_INFO, "kernel pack %s has no %s.cl; compiling it", dev->kernel_pack, source);
    if (s == NMT_OK && found >= 0) {
        const unsigned char *bin = (const unsigned char *)m.data + e.offset;
        size_t bin_size = (size_t)e.size;
        cl_int e1 = CL_SUCCESS, bin_status = CL_SUCCESS;
        if (e.source_hash != source_hash) {
            nmt_log(&dev->log, NMT_LOG_ERROR,
                    "kernel pack %s: %s.cl was built from other kernel sources than this runtime's", dev->kernel_pack,
                    source);
            s = NMT_ERR_KERNEL_PACK_TUNING;
        } else if (e.crc != nmt_crc32(0, bin, bin_size)) {
            nmt_log(&dev->log, NMT_LOG_ERROR, "kernel pack %s: binary of %s.cl damaged (CRC-32 mismatch)",
                    dev->kernel_pack, source);
            s = NMT_ERR_KERNEL_PACK_CORRUPT;
        } else {
            cl_program prog = clCreateProgramWithBinary(dev->context, 1, &dev->device, &bin_size, &bin, &bin_status,
                                                        &e1);
            if (prog == NULL || e1 != CL_SUCCESS || bin_status != CL_SUCCESS) {
                if (e1 == CL_SUCCESS) e1 = bin_status != CL_SUCCESS ? bin_status : CL_INVALID_BINARY;
                (void)nmt_cl_fail(dev, e1, "clCreateProgramWithBinary (kernel pack)");
                s = NMT_ERR_KERNEL_PACK_DEVICE;
            } else if ((e1 = clBuildProgram(prog, 1, &dev->device, full_options, NULL, NULL)) != CL_SUCCESS) {
                (void)nmt_cl_fail(dev, e1, "clBuildProgram (kernel pack binary)");
                s = NMT_ERR_KERNEL_PACK_DEVICE;
            }
            if (s != NMT_OK) {
                if (prog) clReleaseProgram(prog);
                nmt_log(&dev->log, NMT_LOG_ERROR, "the driver refused the binary of %s.cl in kernel pack %s", source,
                        dev->kernel_pack);
            } else {
                *out = prog;
                dev->n_pack_hits++;
            }
        }
    }
    nmt_unmap_file(&m);
    return s;
}

/* ------------------------------------------------------------------------ */
/* Writer                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct pack_fill_ctx {
    nmt_device *dev;
    uint32_t n;
    size_t sizes[NMT_MAX_PROGRAMS];
    uint64_t offsets[NMT_MAX_PROGRAMS];
} pack_fill_ctx;

static int pack_fill(void *user, void *dst, size_t size) {
    pack_fill_ctx *c = (pack_fill_ctx *)user;
    unsigned char *d = (unsigned char *)dst;
    memset(d, 0, c->n ? (size_t)c->offsets[0] : size);
    nmt_kpack_header h;
    identity(c->dev, &h);
    memcpy(h.magic, NMT_KPACK_MAGIC, 8);
    h.version = NMT_KPACK_VERSION;
    h.header_size = NMT_KPACK_HEADER_SIZE;
    h.file_size = size;
    h.n_programs = c->n;
    for (uint32_t i = 0; i < c->n; i++) {
        const nmt_program_slot *sl = &c->dev->programs[i];
        unsigned char *bin = d + c->offsets[i];
        if (i + 1 < c->n) memset(bin + c->sizes[i], 0, (size_t)(c->offsets[i + 1] - c->offsets[i]) - c->sizes[i]);
        cl_int e = clGetProgramInfo(sl->program, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL);
        if (e != CL_SUCCESS) {
            (void)nmt_cl_fail(c->dev, e, "clGetProgramInfo(CL_PROGRAM_BINARIES)");
            return 1;
        }
        nmt_kpack_entry en;
        memset(&en, 0, sizeof en);
        nmt_strlcpy(en.name, sl->source, sizeof en.name);
        nmt_full_build_options(sl->options, en.options, sizeof en.options);
        en.options_hash = fnv_str(NMT_FNV_OFFSET, en.options);
        en.source_hash = sl->source_hash;
        en.offset = c->offsets[i];
        en.size = c->sizes[i];
        memcpy(d + NMT_KPACK_HEADER_SIZE + (size_t)i * NMT_KPACK_ENTRY_SIZE, &en, sizeof en);
    }
    memcpy(d, &h, sizeof h);
    nmt_kpack_seal(d, size);
    return 0;
}

nmt_status nmt_kpack_write(nmt_device *dev, const char *path, uint32_t *n_programs) {
    if (n_programs) *n_programs = 0;
    if (dev == NULL || path == NULL) return NMT_ERR_INVALID_ARGUMENT;
    pack_fill_ctx c;
    memset(&c, 0, sizeof c);
    c.dev = dev;
    c.n = dev->n_programs;
    uint64_t off = NMT_KPACK_HEADER_SIZE + (uint64_t)c.n * NMT_KPACK_ENTRY_SIZE;
    for (uint32_t i = 0; i < c.n; i++) {
        size_t sz = 0;
        cl_int e = clGetProgramInfo(dev->programs[i].program, CL_PROGRAM_BINARY_SIZES, sizeof sz, &sz, NULL);
        if (e != CL_SUCCESS || sz == 0) {
            nmt_log(&dev->log, NMT_LOG_ERROR, "binary of %s.cl unavailable (%s, %zu bytes)", dev->programs[i].source,
                    nmt_cl_error_str(e), sz);
            return e != CL_SUCCESS ? nmt_cl_fail(dev, e, "clGetProgramInfo(CL_PROGRAM_BINARY_SIZES)") : NMT_ERR_OPENCL;
        }
        off = (off + NMT_KPACK_ALIGN - 1) / NMT_KPACK_ALIGN * NMT_KPACK_ALIGN;
        c.offsets[i] = off;
        c.sizes[i] = sz;
        off += sz;
    }
    if (off > SIZE_MAX) return NMT_ERR_UNSUPPORTED;
    nmt_status s = nmt_write_file_atomic(path, (size_t)off, pack_fill, &c);
    if (s != NMT_OK) {
        nmt_log(&dev->log, NMT_LOG_ERROR, "cannot write kernel pack %s", path);
        return s;
    }
    if (n_programs) *n_programs = c.n;
    return NMT_OK;
}
