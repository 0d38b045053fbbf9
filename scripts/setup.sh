#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# setup.sh — installs the Debian packages nmt-edge builds and tests with.
# Idempotent: installs only what is missing; safe to run again.
#   build:   gcc make cmake, OpenCL ICD loader + headers, CLBlast, cmocka
#   device:  PoCL (OpenCL on the CPU) for machines without a GPU driver
#   MPI:     Open MPI (libopenmpi-dev, openmpi-bin): nmt-edge-train on several
#            devices and machines (docs/TRAINING.md); the build turns
#            NMT_WITH_MPI on when it is installed, and train_mpi_test runs
#   training: sentencepiece (spm_train), which nmt-edge-train runs to train
#            the SentencePiece model of a run given no --spm MODEL
#   optional (--with-link-grammar): link-grammar's English parser for MG-SA
#            syntax heads (nmt-edge translate, nmt-edge-train parse-spans);
#            the build turns NMT_WITH_LINK_GRAMMAR on when it is installed
set -euo pipefail

packages=(gcc make cmake pkg-config ocl-icd-opencl-dev opencl-c-headers libclblast-dev
          libcmocka-dev pocl-opencl-icd clinfo libopenmpi-dev openmpi-bin sentencepiece)
if [ "${1:-}" = "--with-link-grammar" ]; then
  packages+=(liblink-grammar-dev link-grammar)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
  exit 0
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo_cmd=(sudo)
fi
echo "setup: installing ${missing[*]}"
source "$(dirname "$0")/apt-lib.sh"
apt_update setup
apt_get install -y -qq --no-install-recommends "${missing[@]}"
