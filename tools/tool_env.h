/* SPDX-License-Identifier: MIT */
/* tool_env.h — what the three programs (nmt-edge, nmt-edge-train,
 * nmt-edge-convert) read from the environment, written once: the device
 * selection, the kernel cache directory, the kernel source directory, the
 * kernel pack and binaries-only mode,
 * and the host memory the process may take.
 * Not part of libnmtedge (a library reads no environment); each program
 * links nmtedge_tool. */
#ifndef NMT_TOOL_ENV_H
#define NMT_TOOL_ENV_H

#include "nmt_edge.h"

#include <stddef.h>
#include <stdint.h>

/* Fill the device-selection fields of *dp, the same way in every program:
 *   device     `device` (the --device option) when non-empty, else
 *              $NMT_EDGE_DEVICE, else NULL (the runtime's default);
 *   cache_dir  NULL when cache_buf is NULL (--no-cache), else
 *              $NMT_EDGE_CACHE_DIR, else $XDG_CACHE_HOME/nmt-edge, else
 *              $HOME/.cache/nmt-edge (formatted into cache_buf, cap bytes),
 *              else NULL (nothing applies or it does not fit);
 *   kernel_dir $NMT_EDGE_KERNEL_DIR, else NULL (the embedded sources);
 *   kernel_pack $NMT_EDGE_KERNEL_PACK, else NULL (no pack; a program's
 *              --kernel-pack option overrides it after this call);
 *   binaries_only 1 when $NMT_EDGE_BINARIES_ONLY is set and not "0".
 * Empty variables count as unset.  The other fields of *dp are left as they
 * are.  The strings set point into `device`, the environment or cache_buf,
 * which must outlive the nmt_device_open call. */
void nmt_tool_device_params(nmt_device_params *dp, const char *device, char *cache_buf, size_t cap);

/* nmt_session_params.fp16_compute for a program: NMT_FP16_OFF when `off`
 * (its --no-fp16) or $NMT_EDGE_NO_FP16 is set to anything but "0", else
 * NMT_FP16_AUTO (fp16 compute where the device has cl_khr_fp16). */
int nmt_tool_fp16_compute(int off);

/* Bytes of host memory this process may take: the least of the physical
 * memory and the soft address-space and data limits (ulimit -v, ulimit -d);
 * UINT64_MAX when none is known.  The programs refuse a session arena larger
 * than this before allocating it (docs/RELIABILITY.md, resource limits). */
uint64_t nmt_tool_host_memory_limit(void);

#endif
