# Sourced by setup.sh, test.sh and bench.sh: moves to the repository root,
# installs what is missing (scripts/deps.sh) and makes the OpenCL drivers it
# installed visible to the ICD loader.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SYRAH_DEPS=${SYRAH_DEPS:-/opt/syrah-deps}
export SYRAH_PREFIX=${SYRAH_PREFIX:-/opt/syrah}
bash scripts/deps.sh
# shellcheck disable=SC1091
. "$SYRAH_DEPS/env.sh"
