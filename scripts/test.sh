#!/usr/bin/env bash
# Second command of the README: installs what is missing, then runs every
# check and test: formatting, lints, Rust unit tests, the header's
# freshness, the library's linkage and exports, the C ABI tests on every
# OpenCL device found, and the examples on every device.
set -euo pipefail
# shellcheck source=scripts/prepare.sh
. "$(dirname "$0")/prepare.sh"

committed_header=$(mktemp)
cp include/syrah.h "$committed_header"

echo "== formatting"
if cargo fmt --version >/dev/null 2>&1; then
  cargo fmt --check
else
  echo "SKIP formatting: rustfmt is not installed with this Rust toolchain"
fi
echo "== lints"
if cargo clippy --version >/dev/null 2>&1; then
  cargo clippy --all-targets -- -D warnings
else
  echo "SKIP lints: clippy is not installed with this Rust toolchain"
fi
echo "== layers (docs/architecture.md)"
"$SYRAH_PYTHON" scripts/check_layers.py src
echo "== Rust unit tests (pure logic, no device)"
cargo test

echo "== build and install"
bash scripts/build.sh

echo "== header is up to date"
if ! cmp -s include/syrah.h "$committed_header"; then
  diff -u "$committed_header" include/syrah.h | head -40 || true
  echo "FAIL: include/syrah.h differs from a fresh generation; commit the regenerated header"
  exit 1
fi
rm -f "$committed_header"

echo "== library linkage and exports"
lib="$SYRAH_PREFIX/lib/libsyrah.so.0"
if ldd "$lib" | grep -i opencl; then
  echo "FAIL: libsyrah links OpenCL at load time; it must load it at run time"
  exit 1
fi
others=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^syrah_' || true)
if [ -n "$others" ]; then
  echo "FAIL: libsyrah exports symbols outside syrah_*: $others"
  exit 1
fi
echo "libsyrah loads no OpenCL library at link time and exports $(nm -D --defined-only "$lib" | wc -l) syrah_* symbols"

"$SYRAH_PREFIX/bin/syrah-info"

# Two PoCL devices in one platform, plus Intel's CPU runtime: two platforms.
export POCL_DEVICES="pthread pthread"

echo "== C ABI tests"
cmake -S c-tests -B build/c-tests -DCMAKE_PREFIX_PATH="$SYRAH_PREFIX" >/dev/null
cmake --build build/c-tests -j "$(nproc)"
ctest --test-dir build/c-tests --output-on-failure

echo "== the MPI companion: point-to-point transfers, the random checker and the Jacobi example with mpiexec -n 2 and -n 4"
cmake -S mpi/tests -B build/mpi -DCMAKE_PREFIX_PATH="$SYRAH_PREFIX" >/dev/null
cmake --build build/mpi -j "$(nproc)"
ctest --test-dir build/mpi --output-on-failure

echo "== sanitizers: the C ABI tests and the examples with AddressSanitizer (leaks included) and UBSan, on PoCL"
# libsyrah itself is not instrumented (that needs a nightly Rust), but its
# allocations go through the sanitizer's malloc, so its leaks are found;
# c-tests/lsan.supp names the only driver leaks that are suppressed.
mkdir -p build/icd-pocl
rm -f build/icd-pocl/*.icd
cp /etc/OpenCL/vendors/pocl*.icd build/icd-pocl/
sanitized() {
  OCL_ICD_VENDORS="$PWD/build/icd-pocl" ASAN_OPTIONS=detect_leaks=1 \
    LSAN_OPTIONS="suppressions=$PWD/c-tests/lsan.supp:print_suppressions=0" \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 SYRAH_STRESS_SECONDS=10 "$@"
}
san_flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
cmake -S c-tests -B build/c-tests-asan -DCMAKE_PREFIX_PATH="$SYRAH_PREFIX" -DSYRAH_SANITIZE=ON >/dev/null
cmake --build build/c-tests-asan -j "$(nproc)"
sanitized ctest --test-dir build/c-tests-asan --output-on-failure
cmake -S c-examples -B build/examples-asan -DCMAKE_PREFIX_PATH="$SYRAH_PREFIX" \
  -DCMAKE_C_FLAGS="$san_flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build build/examples-asan -j "$(nproc)"
san_failed=0
for dev in 0.0 0.1; do
  for e in $(cat c-examples/examples.list); do
    if sanitized env LD_LIBRARY_PATH="$SYRAH_PREFIX/lib" SYRAH_DEVICE=$dev build/examples-asan/$e \
      > "build/examples-asan/$e.$dev.log" 2>&1; then
      echo "ok   $e on PoCL device $dev under ASan+UBSan, no leak"
    else
      san_failed=1
      echo "FAIL $e on PoCL device $dev under ASan+UBSan:"
      cat "build/examples-asan/$e.$dev.log"
    fi
  done
done
[ "$san_failed" -eq 0 ]

echo "== the ports' host code, Syrah against raw OpenCL (docs/ports.md)"
bash scripts/port_lines.sh
echo "== examples on every device"
cmake -S c-examples -B build/examples -DCMAKE_PREFIX_PATH="$SYRAH_PREFIX" >/dev/null
cmake --build build/examples -j "$(nproc)"
passed=0
failed=0
# The raw OpenCL halves of the ports run too: the same results, by hand.
for dev in $("$SYRAH_PREFIX/bin/syrah-info" | awk '/^  Device /{print $2}'); do
  for e in $(cat c-examples/examples.list) port_gemm_opencl port_jacobi_opencl; do
    if LD_LIBRARY_PATH="$SYRAH_PREFIX/lib" SYRAH_DEVICE=$dev build/examples/$e > "build/examples/$e.$dev.log" 2>&1; then
      passed=$((passed + 1))
      echo "ok   $e on device $dev: $(tail -1 "build/examples/$e.$dev.log")"
    else
      failed=$((failed + 1))
      echo "FAIL $e on device $dev:"
      cat "build/examples/$e.$dev.log"
    fi
  done
done
# A consumer built with pkg-config alone.
PKG_CONFIG_PATH="$SYRAH_PREFIX/lib/pkgconfig" cc -std=c99 -Wall -Wextra -Werror -pedantic \
  c-examples/vector_add.c -o build/examples/pkgconfig_vector_add \
  $(PKG_CONFIG_PATH="$SYRAH_PREFIX/lib/pkgconfig" pkg-config --cflags --libs syrah) -Wl,-rpath,"$SYRAH_PREFIX/lib"
if build/examples/pkgconfig_vector_add > build/examples/pkgconfig.log 2>&1; then
  passed=$((passed + 1))
  echo "ok   vector_add built with pkg-config: $(tail -1 build/examples/pkgconfig.log)"
else
  failed=$((failed + 1))
  echo "FAIL vector_add built with pkg-config:"
  cat build/examples/pkgconfig.log
fi

# The buffer examples again with every device run as if it had no USM.
for dev in $("$SYRAH_PREFIX/bin/syrah-info" | awk '/^  Device /{print $2}'); do
  for e in stencil_two_devices matmul_tiled graph_replay; do
    if SYRAH_FORCE_USM=none SYRAH_DEVICE=$dev build/examples/$e > "build/examples/$e.$dev.nousm.log" 2>&1; then
      passed=$((passed + 1))
      echo "ok   $e on device $dev without USM: $(tail -1 "build/examples/$e.$dev.nousm.log")"
    else
      failed=$((failed + 1))
      echo "FAIL $e on device $dev without USM:"
      cat "build/examples/$e.$dev.nousm.log"
    fi
  done
done
# The benchmark suite builds and runs at small sizes on every device:
# every benchmark checks its results, and the suite writes its JSON,
# Markdown and plots (speed is measured on purpose-built machines).
cmake -S bench -B build/bench -DCMAKE_PREFIX_PATH="$SYRAH_PREFIX" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/bench -j "$(nproc)"
rm -rf build/bench-quick
if LD_LIBRARY_PATH="$SYRAH_PREFIX/lib" "$SYRAH_PYTHON" bench/suite.py --bin build/bench --info "$SYRAH_PREFIX/bin/syrah-info" \
  --quick --out build/bench-quick > build/bench/suite.log 2>&1 &&
  "$SYRAH_PYTHON" - build/bench-quick <<'PY' > build/bench/suite.check 2>&1; then
import json, os, sys
out = sys.argv[1]
r = json.load(open(os.path.join(out, "results.json")))
assert not r["failures"], r["failures"]
kinds = {"submit", "chains", "independent", "bandwidth", "staged", "coherence", "dag", "dag_summary", "apps", "driver", "graph", "usm_roundtrip", "hop"}
for dev in r["devices"]:
    seen = {x["bench"] for x in r["records"] if x["device"] == dev}
    assert seen == kinds, (dev, sorted(kinds - seen))
    for x in r["records"]:
        if x["device"] == dev and "ok" in x:
            assert x["ok"], x
    for png in ("bandwidth", "dag", "submit"):
        assert os.path.getsize(os.path.join(out, f"{png}_{dev}.png")) > 10000, (png, dev)
two = [x for x in r["records"] if x["bench"] == "stencil2"]
assert len(two) == 1 and two[0]["ok"], two
print(len(r["records"]), "records from", len(r["devices"]), "devices, all results correct, plots written")
PY
  passed=$((passed + 1))
  echo "ok   benchmark suite (quick): $(cat build/bench/suite.check)"
else
  failed=$((failed + 1))
  echo "FAIL benchmark suite (quick):"
  tail -40 build/bench/suite.log
  cat build/bench/suite.check 2>/dev/null || true
fi

# A trace of a two-device run is valid JSON with every kernel in it.
rm -f build/examples/trace.json
if SYRAH_TRACE=build/examples/trace.json build/examples/stencil_two_devices > build/examples/trace.log 2>&1 &&
  "$SYRAH_PYTHON" -c '
import json, sys
t = json.load(open(sys.argv[1]))
k = [e for e in t if e.get("cat") == "kernel"]
assert len(k) == 40, len(k)
print(len(t), "records,", len(k), "kernels")' build/examples/trace.json > build/examples/trace.check 2>&1; then
  passed=$((passed + 1))
  echo "ok   SYRAH_TRACE of stencil_two_devices: $(cat build/examples/trace.check)"
else
  failed=$((failed + 1))
  echo "FAIL SYRAH_TRACE of stencil_two_devices:"
  cat build/examples/trace.log build/examples/trace.check
fi
echo "examples: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
