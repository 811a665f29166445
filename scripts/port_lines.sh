#!/usr/bin/env bash
# Counts the host code of the example ports: every line of
# c-examples/port_NAME.c (Syrah, C), port_NAME.cpp (Syrah, C++) and
# port_NAME_opencl.c (raw OpenCL) that is neither blank nor comment; the kernels and the checks they share are
# in port_NAME.h and not counted. Prints a Markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
count() {
  awk '
    /^[[:space:]]*$/ { next }
    /^[[:space:]]*\/\*/ { if ($0 !~ /\*\//) incomment = 1; next }
    incomment { if ($0 ~ /\*\//) incomment = 0; next }
    /^[[:space:]]*\/\// { next }
    { n++ }
    END { print n + 0 }' "$1"
}
ratio() { awk -v s="$1" -v r="$2" 'BEGIN { printf "%.2f", s / r }'; }
echo "| port | raw OpenCL (C) | Syrah (C) | Syrah (C++) | C / raw | C++ / raw |"
echo "| --- | --- | --- | --- | --- | --- |"
for port in gemm jacobi; do
  r=$(count "c-examples/port_${port}_opencl.c")
  s=$(count "c-examples/port_$port.c")
  x=$(count "c-examples/port_$port.cpp")
  echo "| $port | $r | $s | $x | $(ratio "$s" "$r") | $(ratio "$x" "$r") |"
done
