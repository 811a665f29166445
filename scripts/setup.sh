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
for e in $(cat c-examples/examples.list); do
  echo "== $e"
  LD_LIBRARY_PATH="$SYRAH_PREFIX/lib" build/examples/$e
done
echo "setup: all examples ran and checked their results"
