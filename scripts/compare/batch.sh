#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# batch.sh — several runs of the family comparison protocol at once
# (scripts/compare/run.sh), for a machine with more cores and a GPU: each
# line of SPEC_FILE is `NAME SEED [MODEL OPTIONS...]`; all runs start
# together (each its own process and OpenCL context on the same device),
# and one still training at DEADLINE seconds gets SIGTERM (run.sh's
# trainer writes a checkpoint and exits; the run resumes with run.sh).
# Each run's output goes to data/compare/NAME-sSEED.log.
#
#   bash scripts/compare/batch.sh SPEC_FILE [DEADLINE]
#
# Environment: as run.sh (STEPS, BUILD); DEADLINE default 3600.
set -uo pipefail
cd "$(dirname "$0")/../.."
if [[ $# -lt 1 ]]; then
  sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
spec=$1 deadline=${2:-3600}
mkdir -p data/compare
pids=()
while read -r -a args; do
  [[ ${#args[@]} -ge 2 && ${args[0]} != \#* ]] || continue
  log=data/compare/${args[0]}-s${args[1]}.log
  setsid bash scripts/compare/run.sh "${args[@]}" > "$log" 2>&1 &
  pids+=($!)
  echo "batch: ${args[*]} (pid $!, $log)"
done < "$spec"
t0=$SECONDS
while (( SECONDS - t0 < deadline )); do
  alive=0
  for p in "${pids[@]}"; do kill -0 "$p" 2> /dev/null && alive=1; done
  (( alive )) || break
  sleep 5
done
for p in "${pids[@]}"; do
  kill -0 "$p" 2> /dev/null && { echo "batch: deadline: stopping pid $p"; kill -TERM -- "-$p" 2> /dev/null; }
done
wait
echo "batch: done in $((SECONDS - t0)) s"
