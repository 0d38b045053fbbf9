# SPDX-License-Identifier: MIT
# apt-lib.sh — apt helpers sourced by the scripts that install packages
# (setup.sh, cross-setup.sh, sanitize.sh, fuzz.sh, oclgrind.sh,
# test-arm.sh, test-deb.sh, test-intel.sh, test-import.sh; not run on its
# own).  Uses the caller's array `sudo_cmd` (empty as root, or (sudo))
# when it has one, else sets it: empty as root, sudo otherwise.
#
# apt_get ARGS...   apt-get, non-interactive, waiting for the dpkg lock
# apt_update TAG    apt-get update, retried 3 times and never fatal: a mirror
#                   caught mid-sync fails one index now and then ("File has
#                   unexpected size", seen on the armhf security index the
#                   cross builds add); the lists apt already has usually hold
#                   the packages, and the install after it fails clearly when
#                   they do not.  TAG prefixes the messages.
# need_venv         python3 -m venv usable (Debian ships it as python3-venv)

if ! declare -p sudo_cmd > /dev/null 2>&1; then
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
fi

# (the variable goes through env, after sudo: sudo's env_reset would drop
# it from sudo's own environment)
apt_get() {
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 "$@"
}

apt_update() {
  local i
  for i in 1 2 3; do
    apt_get update -qq && return 0
    echo "$1: apt-get update failed (try $i of 3)" >&2
    sleep 10
  done
  echo "$1: continuing with the package lists apt has" >&2
}

need_venv() {
  python3 -c 'import ensurepip, venv' 2> /dev/null && return 0
  apt_get install -y -qq --no-install-recommends python3-venv
}

# clang and its sanitizer runtimes (scripts/sanitize.sh, scripts/tsan.sh).
need_clang() {
  command -v clang > /dev/null && return 0
  apt_get install -y -qq --no-install-recommends clang libclang-rt-dev
}
