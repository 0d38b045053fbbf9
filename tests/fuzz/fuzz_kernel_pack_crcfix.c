/* SPDX-License-Identifier: MIT */
/* fuzz_kernel_pack_crcfix.c — fuzz_kernel_pack.c with the input resealed
 * (every CRC recomputed) before parsing, so that mutations reach the
 * structural checks behind the checksums.  Seeds: corpus/kernel_pack/. */
#define NMT_FUZZ_FIX_CRC 1
#include "fuzz_kernel_pack.c"
