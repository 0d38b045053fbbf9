#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# cross-setup.sh — prepares this x86-64 Debian 12 machine to cross-compile
# nmt-edge for ARM boards and to run the test suite under qemu-user.
#
#   bash scripts/cross-setup.sh [arm64] [armhf]      (default: both)
#
# Per architecture it installs, beside the native packages:
#   - the gcc cross compiler, its libc6-dev-<arch>-cross and binutils (PoCL also calls the cross linker
#     at run time to link kernels, so keep them installed),
#   - qemu-user-static,
#   - the ARM builds of the OpenCL ICD loader, CLBlast and cmocka (multiarch).
# PoCL for ARM cannot be installed by apt beside the native toolchain (it
# pulls clang-15:<arch> and would remove the native compilers), so its .debs
# and their libraries are downloaded with `apt-get download` and unpacked with
# `dpkg -x` into a private directory:
#   ${NMT_CROSS_DIR:-$HOME/.cache/nmt-edge-cross}/<arch>/root   unpacked libraries
#   ${NMT_CROSS_DIR:-$HOME/.cache/nmt-edge-cross}/<arch>/pocl.icd
# The toolchain files (toolchains/*.cmake) find that directory and give the
# tests OCL_ICD_VENDORS=<pocl.icd> and LD_LIBRARY_PATH=<root libs>.
# Idempotent: what is already there is kept.
set -euo pipefail

arches=("$@")
[ ${#arches[@]} -eq 0 ] && arches=(arm64 armhf)

cross_dir=${NMT_CROSS_DIR:-$HOME/.cache/nmt-edge-cross}

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "cross-setup: need root or sudo" >&2; exit 1; }
  sudo_cmd=(sudo)
fi
source "$(dirname "$0")/apt-lib.sh"
installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

triple_of() {
  case "$1" in
    arm64) echo aarch64-linux-gnu ;;
    armhf) echo arm-linux-gnueabihf ;;
    *) echo "cross-setup: unknown architecture $1 (arm64 or armhf)" >&2; exit 1 ;;
  esac
}

# --- 1. apt packages ------------------------------------------------------
need_update=0
for a in "${arches[@]}"; do
  triple_of "$a" >/dev/null
  if ! dpkg --print-foreign-architectures | grep -qx "$a"; then
    "${sudo_cmd[@]}" dpkg --add-architecture "$a"
    need_update=1
  fi
done
missing=()
installed qemu-user-static || missing+=(qemu-user-static)
for a in "${arches[@]}"; do
  t=$(triple_of "$a")
  for p in "gcc-$t" "binutils-$t" "libc6-dev-$a-cross" "ocl-icd-opencl-dev:$a" "libclblast-dev:$a" "libcmocka-dev:$a"; do
    installed "$p" || missing+=("$p")
  done
done
if [ ${#missing[@]} -gt 0 ] || [ $need_update -eq 1 ]; then
  apt_update cross-setup
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "cross-setup: installing ${missing[*]}"
  apt_get install -y -qq --no-install-recommends "${missing[@]}"
fi

# --- 2. PoCL for ARM, unpacked privately -----------------------------------
# (libpocl2-common is Architecture: all, the others are per architecture)
pocl_debs=(libpocl2 libllvm15 libclang-cpp15 libhwloc15 libudev1 libedit2
           libffi8 libtinfo6 libxml2 libicu72 libz3-4 zlib1g libbsd0 libmd0 liblzma5)
for a in "${arches[@]}"; do
  t=$(triple_of "$a")
  d="$cross_dir/$a"
  lib=$(ls "$d"/root/usr/lib/"$t"/libpocl.so.2.* 2>/dev/null | head -n1 || true)
  if [ -z "$lib" ]; then
    echo "cross-setup: downloading PoCL for $a into $d"
    mkdir -p "$d/debs" "$d/root"
    ( cd "$d/debs" && apt-get download -qq "${pocl_debs[@]/%/:$a}" libpocl2-common 2>/dev/null ) || {
      apt_update cross-setup
      ( cd "$d/debs" && apt-get download -qq "${pocl_debs[@]/%/:$a}" libpocl2-common )
    }
    for deb in "$d"/debs/*.deb; do dpkg -x "$deb" "$d/root"; done
    lib=$(ls "$d"/root/usr/lib/"$t"/libpocl.so.2.* | head -n1)
  fi
  echo "$lib" > "$d/pocl.icd"
  echo "cross-setup: $a ready: OCL_ICD_VENDORS=$d/pocl.icd"
done
