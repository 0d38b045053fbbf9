#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test-deb.sh — the Debian packages (docs/INTEGRATION.md "Debian packages"):
# builds them with CPack (amd64, shared library, Debian's hardening flags),
# installs them with dpkg -i on this machine, translates the README's sentence
# with the installed /usr/bin/nmt-edge and the bundled model, builds
# examples/translate_lines against the installed libnmtedge-dev (CMake and
# pkg-config) and runs it on the shared library, checks the installed .so's
# exports, runs the tools, runs lintian on the .debs (fails on errors; the
# warnings left are overridden in cmake/deb/*.lintian-overrides with their
# reasons), then purges the packages again — and the dependencies apt-get
# installed for them, if any — so the machine is left as it was.
#   bash scripts/test-deb.sh [BUILD_DIR]      (default build-deb)
# Needs root or sudo (dpkg -i); it refuses to run when an nmt-edge package is
# already installed.  The .debs stay in BUILD_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-deb}
# the library package is named after the SONAME: libnmtedge.so.<major>.<minor>
# while the major version is 0 (cmake/nmt_shared.cmake)
version=$(sed -n 's/^project(nmt-edge VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
major=${version%%.*}
minor=${version#*.}
minor=${minor%%.*}
if [ "$major" = 0 ]; then sover=$major.$minor; else sover=$major; fi
packages=(nmt-edge "libnmtedge$sover" libnmtedge-dev nmt-edge-tools)

bash scripts/setup.sh
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo > /dev/null || { echo "test-deb: need root or sudo (dpkg -i)" >&2; exit 1; }
  sudo_cmd=(sudo)
fi
source scripts/apt-lib.sh
need=()
for p in dpkg-dev file lintian xz-utils; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "test-deb: installing ${need[*]}"
  apt_get install -y -qq --no-install-recommends "${need[@]}"
fi
for p in "${packages[@]}"; do
  if dpkg-query -W "$p" > /dev/null 2>&1; then
    echo "test-deb: $p is already in dpkg's database; remove it first (dpkg --purge $p)" >&2
    exit 1
  fi
done

# --- build the packages -----------------------------------------------------
# Debian's build flags (hardening: fortify, stack protector, relro, bindnow,
# PIE) as debhelper passes them: build type None, flags from dpkg-buildflags.
export DEB_BUILD_MAINT_OPTIONS=hardening=+all
SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || date +%s)
export SOURCE_DATE_EPOCH
t0=$SECONDS
cmake -S . -B "$build" -DBUILD_SHARED_LIBS=ON -DNMT_BUILD_TESTS=OFF -DCMAKE_INSTALL_PREFIX=/usr \
      -DCMAKE_BUILD_TYPE=None \
      "-DCMAKE_C_FLAGS=$(dpkg-buildflags --get CFLAGS) $(dpkg-buildflags --get CPPFLAGS)" \
      "-DCMAKE_EXE_LINKER_FLAGS=$(dpkg-buildflags --get LDFLAGS)" \
      "-DCMAKE_SHARED_LINKER_FLAGS=$(dpkg-buildflags --get LDFLAGS)" > /dev/null
cmake --build "$build" -j"$(nproc)"
rm -f "$build"/*.deb
(cd "$build" && cpack -G DEB > cpack.log) || { cat "$build/cpack.log" >&2; exit 1; }
debs=()
for p in "${packages[@]}"; do
  f=$(ls "$build/${p}_"*_amd64.deb 2>/dev/null || true)
  [ -n "$f" ] || { echo "test-deb: no package $p in $build" >&2; ls "$build"/*.deb >&2 || true; exit 1; }
  debs+=("$f")
done
echo "test-deb: built in $((SECONDS - t0)) s:"
for f in "${debs[@]}"; do
  printf '  %-48s %6s KiB   Depends: %s\n' "$(basename "$f")" "$(( $(stat -c %s "$f") / 1024 ))" \
    "$(dpkg-deb -f "$f" Depends)"
  [ "$(dpkg-deb -f "$f" Architecture)" = amd64 ] || { echo "test-deb: $f is not amd64" >&2; exit 1; }
done

# --- install, use, remove -------------------------------------------------------
# The machine may be shared: other jobs run apt-get meanwhile.  So dpkg waits
# for the dpkg lock (up to 10 minutes), and what is removed at the end is
# exactly our packages plus the dependencies apt-get installed for them —
# never a diff of the machine's package list, which other jobs change.
tmp=$(mktemp -d)
deps=()
dpkg_wait() {   # dpkg ARGS..., retried while another process holds the dpkg lock
  local i
  for i in $(seq 120); do
    "${sudo_cmd[@]}" dpkg "$@" > "$tmp/dpkg.log" 2>&1 && return 0
    grep -qi "lock" "$tmp/dpkg.log" || return 1
    [ "$i" -eq 1 ] && echo "test-deb: waiting for the dpkg lock (dpkg $1)"
    sleep 5
  done
  return 1
}
cleanup() {
  # --purge, not only -r: the library package's postinst/postrm (ldconfig)
  # would leave it in dpkg's database as "config-files"
  dpkg_wait --purge "${packages[@]}" || cat "$tmp/dpkg.log" >&2
  if [ ${#deps[@]} -gt 0 ]; then
    echo "test-deb: purging the dependencies apt-get installed for the packages: ${deps[*]}"
    apt_get purge -y -qq "${deps[@]}" > /dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
# Missing dependencies (none on a machine after scripts/setup.sh): what apt
# would install beside our packages, from a simulation; installed with
# apt-get before dpkg -i, purged again by cleanup.  (Not `dpkg -i` then
# `apt-get -f install`: that leaves no exact record of what it added.)
abs=()
for f in "${debs[@]}"; do abs+=("$(realpath "$f")"); done
mapfile -t deps < <(apt-get -s install --no-install-recommends "${abs[@]}" 2>/dev/null |
  awk -v ours=" ${packages[*]} " '/^Inst / && $3 !~ /^\[/ && index(ours, " " $2 " ") == 0 {print $2}')
if [ ${#deps[@]} -gt 0 ]; then
  echo "test-deb: installing missing dependencies: ${deps[*]}"
  apt_get install -y -qq --no-install-recommends "${deps[@]}"
fi
dpkg_wait -i "${debs[@]}" || { cat "$tmp/dpkg.log" >&2; echo "test-deb: dpkg -i failed" >&2; exit 1; }
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" | grep -q "install ok installed" || { cat "$tmp/dpkg.log" >&2; echo "test-deb: $p not installed" >&2; exit 1; }
done

text="This package contains the development files for the library."
got=$(echo "$text" | /usr/bin/nmt-edge translate --model models/en-de.nmt)
echo "test-deb: /usr/bin/nmt-edge: $got"
[[ $got == *Paket* ]] || { echo "test-deb: expected German with 'Paket'" >&2; exit 1; }

# the -dev package: examples/ against /usr with CMake (nmt_edge::nmtedge is
# the shared library) and with pkg-config; both run on /usr/lib/<multiarch>/libnmtedge.so.<SOVERSION>
cmake -S examples -B "$tmp/ex" -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" > /dev/null
cmake --build "$tmp/ex" --target translate_lines > /dev/null
# shellcheck disable=SC2046
cc -Wall -Wextra -Werror examples/translate_lines.c $(pkg-config --cflags --libs nmt-edge) -o "$tmp/tl-pc"
for exe in "$tmp/ex/translate_lines" "$tmp/tl-pc"; do
  lib=$(ldd "$exe" | awk '/libnmtedge/{print $3}')
  [[ -n $lib && $(readlink -f "$lib") == "$(readlink -f /usr/lib/*/"libnmtedge.so.$sover")" ]] ||
    { echo "test-deb: $exe uses '$lib', not the package's libnmtedge.so.$sover" >&2; exit 1; }
  got=$(echo "$text" | "$exe" models/en-de.nmt)
  [[ $got == *Paket* ]] || { echo "test-deb: $exe printed '$got'" >&2; exit 1; }
done
so=$(ls /usr/lib/*/"libnmtedge.so.$sover")
cmake -DNM=nm -DREADELF=readelf -DLIB="$so" -DSONAME="libnmtedge.so.$sover" -DHEADER=/usr/include/nmt_edge.h \
      -P tests/check_exports.cmake
# the tools package
nmt-edge-convert --version > /dev/null
nmt-edge-train --help > /dev/null
usage=$(nmt-edge-tune --help 2>&1 || true)   # --help: usage, exit status 2
[[ $usage == "usage: nmt-edge-tune"* ]] || { echo "test-deb: nmt-edge-tune --help printed '$usage'" >&2; exit 1; }
echo "test-deb: installed packages translate; examples build against libnmtedge-dev and run on the shared library"

# --- lintian ------------------------------------------------------------------
# Fails on errors; warnings are printed (each one left is explained in
# docs/INTEGRATION.md or overridden in cmake/deb/<component>.lintian-overrides).
lintian --fail-on error "${debs[@]}" 2>&1 | tee "$tmp/lintian.log"
echo "test-deb: lintian: $(grep -c '^E:' "$tmp/lintian.log" || true) errors, $(grep -c '^W:' "$tmp/lintian.log" || true) warnings"

cleanup
trap - EXIT
for p in "${packages[@]}"; do
  if dpkg-query -W "$p" > /dev/null 2>&1; then
    echo "test-deb: $p still in dpkg's database after dpkg --purge" >&2
    exit 1
  fi
done
echo "test-deb: built, installed, used, linted and removed the packages in $SECONDS s"
