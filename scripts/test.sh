#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test.sh — set up, build with warnings as errors, run the whole suite on the
# first OpenCL device (PoCL on machines without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DNMT_WERROR=ON -DNMT_BUILD_BENCH=ON
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure -j"$(nproc)"
