#!/usr/bin/env bash
# Runs a command on a crowded host: N processes that only spin, one per
# core by default, run beside it and are stopped when it ends. Shows how a
# benchmark fares when every core has other work, as on a shared machine.
#
# usage: bash bench/crowded.sh [N] command [arguments...]
#   e.g. bash bench/crowded.sh 16 build/bench/bench_staged 1.0 4 h2d 20
set -euo pipefail
n=$(nproc)
if [[ $# -gt 1 && $1 =~ ^[0-9]+$ ]]; then
  n=$1
  shift
fi
if [[ $# -lt 1 ]]; then
  echo "usage: bash bench/crowded.sh [N] command [arguments...]" >&2
  exit 2
fi
if ((n < 1 || n > 1024)); then
  echo "crowded.sh: N=$n is not between 1 and 1024" >&2
  exit 2
fi
spinners=()
stop() { kill "${spinners[@]}" 2>/dev/null || true; }
trap stop EXIT
for _ in $(seq "$n"); do
  (while :; do :; done) &
  spinners+=($!)
done
echo "crowded.sh: $n spinning processes beside: $*" >&2
"$@"
