#!/usr/bin/env bash
# First command of the README: installs what is missing, builds and
# installs Syrah, then builds the C examples against the installed package
# and runs them on the default device (SYRAH_DEVICE picks another).
set -euo pipefail
# shellcheck source=scripts/prepare.sh
. "$(dirname "$0")/prepare.sh"
bash scripts/build.sh
"$SYRAH_PREFIX/bin/syrah-info"
cmake -S c-examples -B build/examples -DCMAKE_PREFIX_PATH="$SYRAH_PREFIX" >/dev/null
cmake --build build/examples -j "$(nproc)"
for e in device_list vector_add reduction_local_arg reduction_local_array stencil_two_devices matmul_tiled graph_replay dlopen_vector_add; do
  echo "== $e"
  LD_LIBRARY_PATH="$SYRAH_PREFIX/lib" build/examples/$e
done
echo "setup: all examples ran and checked their results"
