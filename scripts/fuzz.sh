#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fuzz.sh — builds the libFuzzer harnesses (tests/fuzz/fuzz_*.c) with clang,
# -fsanitize=fuzzer,address,undefined, in build-fuzz/, and runs each for a
# bounded time.
#
#   bash scripts/fuzz.sh [SECONDS] [NAME...]     default: 60 s each, every harness
#   e.g. bash scripts/fuzz.sh 300 fuzz_model fuzz_model_crcfix
#
# Working corpora grow in build-fuzz/corpus/<harness>/ (seeded from
# tests/fuzz/corpus/); crashes, leaks and timeouts land in
# build-fuzz/artifacts/<harness>/.  Prints one summary line per harness
# (executions, exec/s, coverage, findings) and writes them to
# build-fuzz/fuzz-summary.txt.  Exit status 1 if anything was found.
# Each find: copy it into tests/fuzz/regressions/<name>/, fix the bug, and
# the fuzz_<name>_replay test keeps it fixed (docs/RELIABILITY.md).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true

if ! command -v clang >/dev/null; then
  source scripts/apt-lib.sh
  apt_get install -y -qq --no-install-recommends clang libclang-rt-dev
fi
bash scripts/setup.sh
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DNMT_FUZZ=ON -DNMT_WERROR=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for f in tests/fuzz/fuzz_*.c; do names+=("$(basename "$f" .c)"); done
fi
cmake --build build-fuzz -j"$(nproc)" --target "${names[@]}"

export ASAN_OPTIONS="detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
summary=build-fuzz/fuzz-summary.txt
: > "$summary"
found=0
for n in "${names[@]}"; do
  short=${n#fuzz_}
  base=${short%_crcfix}
  work=build-fuzz/corpus/$n
  art=build-fuzz/artifacts/$n
  mkdir -p "$work" "$art"
  seeds=()
  for d in "tests/fuzz/corpus/$short" "tests/fuzz/corpus/$n" "tests/fuzz/corpus/$base" \
           "tests/fuzz/regressions/$short"; do
    [ -d "$d" ] || continue
    case " ${seeds[*]-} " in *" $d "*) ;; *) seeds+=("$d") ;; esac
  done
  log=build-fuzz/$n.log
  set +e
  "build-fuzz/tests/fuzz/$n" "$work" "${seeds[@]}" -max_total_time="$secs" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$art/" > "$log" 2>&1
  rc=$?
  set -e
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  speed=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n1 | grep -o '[0-9]*' || echo "?")
  corp=$(find "$work" -type f | wc -l)
  finds=$(find "$art" -type f | wc -l)
  line="$n: ${secs}s, $runs executions ($speed/s), coverage $cov edges, corpus $corp, findings $finds (exit $rc)"
  echo "$line" | tee -a "$summary"
  if [ "$rc" -ne 0 ] || [ "$finds" -ne 0 ]; then
    found=1
    grep -E "ERROR|SUMMARY|invariant" "$log" | head -n 5 || true
  fi
done
exit $found
