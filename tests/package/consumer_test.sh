#!/usr/bin/env bash
# The installed package, as another project sees it: installs this build into a fresh prefix,
# compiles every installed header through the dmalab/ prefix, builds examples/consumer with
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

# Every installed header, by its prefixed name, in one translation unit.
includes=()
[[ -d "$prefix/include/dmalab/hw" ]] && includes+=(-I/usr/local/cuda/include)
(cd "$prefix/include" && find dmalab -name '*.h' | sort | sed 's/.*/#include <&>/') >"$work/all_headers.cc"
headers=$(wc -l <"$work/all_headers.cc")
((headers > 40)) || { echo "only $headers headers installed" >&2; exit 1; }
# shellcheck disable=SC2086
"$cxx" -std=c++20 $flags -fsyntax-only -I"$prefix/include" -I"$prefix/include/dmalab" \
  "${includes[@]}" "$work/all_headers.cc"

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
