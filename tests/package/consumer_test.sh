#!/usr/bin/env bash
# The installed package, as another project sees it: installs this build into a fresh prefix,
# checks that the headers installed are the public ones (include/dmalab/*.h) only, compiles each
# of them alone against the prefix, builds examples/consumer with
# find_package(dmalab), and runs it on a scenario (PASS, then FAIL with the founding incident's
# fault injected, then bad input).
# usage: consumer_test.sh BUILD_DIR SOURCE_DIR WORK_DIR GENERATOR CXX [CXX_FLAGS]
set -euo pipefail
build=$1 src=$2 work=$3 generator=$4 cxx=$5 flags=${6:-}
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null

config=$(find "$prefix" -name dmalabConfig.cmake)
[[ -n "$config" && -f "$(dirname "$config")/dmalabConfigVersion.cmake" ]] ||
  { echo "no dmalabConfig.cmake and version file under $prefix" >&2; exit 1; }
[[ -x "$prefix/bin/dmalab" ]] || { echo "no bin/dmalab under $prefix" >&2; exit 1; }

# Only the public API is installed: the prefix's include/ holds the tree's include/dmalab/*.h and
# nothing else (no header of common/, sim/, hw/ or measure/).
(cd "$src/include" && find dmalab -name '*.h' | sort) >"$work/public_headers.txt"
(cd "$prefix/include" && find . ! -type d | sed 's#^\./##' | sort) >"$work/installed_headers.txt"
if ! diff -u "$work/public_headers.txt" "$work/installed_headers.txt" >"$work/headers.diff"; then
  echo "installed include/ differs from the tree's include/dmalab/*.h:" >&2
  cat "$work/headers.diff" >&2
  exit 1
fi
headers=$(wc -l <"$work/public_headers.txt")
((headers >= 10)) || { echo "only $headers headers installed" >&2; exit 1; }

# Each installed header compiles alone (twice: its include guard) with the prefix and third-party
# headers only, so none includes a header that is not installed; then all of them together.
while read -r header; do
  printf '#include <%s>\n#include <%s>\n' "$header" "$header" >"$work/one_header.cc"
  # shellcheck disable=SC2086
  "$cxx" -std=c++20 $flags -fsyntax-only -I"$prefix/include" "$work/one_header.cc" ||
    { echo "installed header $header does not compile alone" >&2; exit 1; }
done <"$work/public_headers.txt"
sed 's/.*/#include <&>/' "$work/public_headers.txt" >"$work/all_headers.cc"
# shellcheck disable=SC2086
"$cxx" -std=c++20 $flags -fsyntax-only -I"$prefix/include" "$work/all_headers.cc"

cmake -S "$src/examples/consumer" -B "$work/build" -G "$generator" -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/build" >/dev/null
run=$work/build/replay_on_sim
scenario=$src/scenarios/glm52_tp4_layer0_residual.yaml

expect() {  # expect STATUS TEXT COMMAND...: exit status and a line of output
  local want=$1 text=$2 rc=0
  shift 2
  "$@" >"$work/out.txt" 2>&1 || rc=$?
  if [[ $rc -ne $want ]] || ! grep -qF -- "$text" "$work/out.txt"; then
    echo "FAIL: $* exited $rc (want $want), output (want '$text'):" >&2
    cat "$work/out.txt" >&2
    exit 1
  fi
}
expect 0 "status=PASS" "$run" "$scenario"
expect 1 "pointer_alias=true" "$run" "$scenario" persistent-output
expect 2 "no-such-fault" "$run" "$scenario" no-such-fault
expect 2 "usage: replay_on_sim" "$run"
echo "consumer_test: $headers headers, examples/consumer built and ran against $prefix"
