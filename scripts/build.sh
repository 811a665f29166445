#!/usr/bin/env bash
# Builds libsyrah and installs it to $SYRAH_PREFIX (default /opt/syrah).
set -euo pipefail
cd "$(dirname "$0")/.."
SYRAH_PREFIX=${SYRAH_PREFIX:-/opt/syrah}
cmake -S . -B build/syrah -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/syrah -j "$(nproc)"
cmake --install build/syrah --prefix "$SYRAH_PREFIX" >/dev/null
echo "build: installed to $SYRAH_PREFIX"
