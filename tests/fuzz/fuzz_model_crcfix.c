/* SPDX-License-Identifier: MIT */
/* fuzz_model_crcfix.c — fuzz_model.c with every CRC of the input recomputed
 * before loading, so that mutations reach the structural checks behind the
 * checksums (see fuzz_model.c).  Seeds: corpus/model_crcfix/ (same files). */
#define NMT_FUZZ_FIX_CRC 1
#include "fuzz_model.c"
