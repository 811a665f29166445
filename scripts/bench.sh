#!/usr/bin/env bash
# Runs the benchmark suite: installs what is missing (as scripts/test.sh
# does), builds Syrah and the benchmarks, then runs every benchmark on
# every OpenCL device (or on SYRAH_BENCH_DEVICES, e.g. "1.0,0.0") and
# writes results.json, results.md and PNG plots to build/bench-results (or
# the folder given as SYRAH_BENCH_OUT).
#   bash scripts/bench.sh           full sizes (minutes per device)
#   bash scripts/bench.sh --quick   small sizes, as in CI
set -euo pipefail
# shellcheck source=scripts/prepare.sh
. "$(dirname "$0")/prepare.sh"
bash scripts/build.sh
cmake -S bench -B build/bench -DCMAKE_PREFIX_PATH="$SYRAH_PREFIX" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/bench -j "$(nproc)"
LD_LIBRARY_PATH="$SYRAH_PREFIX/lib" "$SYRAH_PYTHON" bench/suite.py --bin build/bench --info "$SYRAH_PREFIX/bin/syrah-info" \
  --devices "${SYRAH_BENCH_DEVICES:-}" --out "${SYRAH_BENCH_OUT:-build/bench-results}" "$@"
