#!/usr/bin/env bash
# Installs what building and testing Syrah needs on Debian 12, as root:
# compilers, CMake, the OpenCL ICD loader and headers, PoCL, MPICH (for the
# MPI companion), a Rust
# toolchain when none is present, and Intel's CPU OpenCL runtime (from
# PyPI wheels, unpacked under $SYRAH_DEPS). Idempotent.
#
# Writes $SYRAH_DEPS/env.sh, which points OCL_ICD_VENDORS at a folder
# holding PoCL's and Intel's ICD files and names the Python interpreter
# the Debian packages were installed for (SYRAH_PYTHON): the scripts use
# it rather than whatever `python3` comes first on PATH.
set -euo pipefail

SYRAH_DEPS=${SYRAH_DEPS:-/opt/syrah-deps}
INTEL_OPENCL_RT_VERSION=2026.2.0
INTEL_CMPLR_LIB_RT_VERSION=2026.2.0
TBB_VERSION=2023.2.0

need_apt=()
for pkg in build-essential cmake pkg-config ocl-icd-libopencl1 ocl-icd-opencl-dev \
           opencl-c-headers pocl-opencl-icd clinfo spirv-tools python3 python3-pip python3-matplotlib unzip git \
           mpich libmpich-dev; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need_apt+=("$pkg")
done
if ! command -v cargo >/dev/null 2>&1; then
  # Debian 12's rustc is too old; rustc-web tracks current Rust.
  need_apt+=(rustc-web cargo-web)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "deps: installing ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

intel_lib="$SYRAH_DEPS/intel/lib"
if [ ! -f "$intel_lib/libintelocl.so" ] || [ ! -f "$intel_lib/libtbb.so.12" ]; then
  echo "deps: fetching Intel's CPU OpenCL runtime $INTEL_OPENCL_RT_VERSION"
  wheels=$(mktemp -d)
  /usr/bin/python3 -m pip download -q --no-deps --only-binary=:all: -d "$wheels" \
    "intel-opencl-rt==$INTEL_OPENCL_RT_VERSION" \
    "intel-cmplr-lib-rt==$INTEL_CMPLR_LIB_RT_VERSION" \
    "tbb==$TBB_VERSION"
  mkdir -p "$intel_lib"
  for w in "$wheels"/*.whl; do
    stage=$(mktemp -d)
    unzip -q -o "$w" '*.data/data/lib/*' -d "$stage" || true
    cp -a "$stage"/*.data/data/lib/. "$intel_lib"/
    rm -rf "$stage"
  done
  rm -rf "$wheels"
fi

icd="$SYRAH_DEPS/icd"
mkdir -p "$icd"
echo "$intel_lib/libintelocl.so" > "$icd/intel-cpu.icd"
for f in /etc/OpenCL/vendors/*.icd; do
  [ -e "$f" ] && cp -f "$f" "$icd/"
done

cat > "$SYRAH_DEPS/env.sh" <<ENV
# Makes both PoCL and Intel's CPU runtime visible to the OpenCL ICD loader,
# and names the interpreter Debian's python3-matplotlib belongs to.
export OCL_ICD_VENDORS="$icd"
export SYRAH_PYTHON=/usr/bin/python3
ENV
echo "deps: ready (OpenCL vendors: $(ls "$icd" | tr '\n' ' '))"
