# Sourced by setup.sh, test.sh and bench.sh: moves to the repository root,
# installs what is missing (scripts/deps.sh), makes the OpenCL drivers it
# installed visible to the ICD loader, and picks the Python interpreter
# that deps.sh installed packages for (SYRAH_PYTHON), whatever `python3`
# comes first on PATH.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SYRAH_DEPS=${SYRAH_DEPS:-/opt/syrah-deps}
export SYRAH_PREFIX=${SYRAH_PREFIX:-/opt/syrah}
bash scripts/deps.sh
# shellcheck disable=SC1091
. "$SYRAH_DEPS/env.sh"
if ! "$SYRAH_PYTHON" -c 'import matplotlib' 2>/dev/null; then
  echo "prepare: $SYRAH_PYTHON cannot import matplotlib although scripts/deps.sh installed python3-matplotlib for it"
  exit 1
fi
echo "prepare: Python is $SYRAH_PYTHON (Debian's, with matplotlib), not necessarily the python3 first on PATH ($(command -v python3 || echo none))"
