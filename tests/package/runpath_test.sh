#!/usr/bin/env bash
# No binary of the build loads anything from the directory it is run in (issue 25, item 7):
# every RUNPATH or RPATH entry of every executable and shared object under the build tree is an
# absolute folder or $ORIGIN-relative (an empty entry, which CMake's install padding used to add,
# means the working directory), and dmalab run from a folder holding a bogus libyaml-cpp and
# libabsl loads the system's.
set -uo pipefail
build="$1"
dmalab="$2"
fail() { echo "FAIL: $*"; exit 1; }
checked=0
while IFS= read -r -d '' f; do
  head -c 4 "$f" 2> /dev/null | grep -q $'\x7fELF' || continue
  while read -r path; do
    IFS=':' read -r -a entries <<< "$path:"  # the trailing ':' keeps a trailing empty entry
    for e in "${entries[@]}"; do
      [[ "$e" == /* || "$e" == '$ORIGIN'* ]] || fail "$f: RUNPATH [$path] has the entry '$e'"
    done
  done < <(readelf -d "$f" | sed -n 's/.*(R\(UN\)\?PATH).*\[\(.*\)\]$/\2/p')
  checked=$((checked + 1))
done < <(find "$build/bin" "$build/examples" "$build/tests/plugins" "$build/python" \
  -type f \( -perm -u+x -o -name '*.so' \) -print0 2> /dev/null)
((checked > 10)) || fail "only $checked binaries found under $build"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for lib in $(ldd "$dmalab" | awk '/libyaml-cpp|libabsl_strings\./ {print $1}'); do
  echo "not a library" > "$tmp/$lib"
done
[[ -n "$(ls "$tmp")" ]] || fail "ldd names neither libyaml-cpp nor libabsl_strings"
out=$(cd "$tmp" && "$dmalab" --version 2>&1) || fail "dmalab run from $tmp: $out"
[[ "$out" == "dmalab "* ]] || fail "dmalab --version from $tmp: $out"
echo "runpath_test: $checked binaries, no empty or relative entry"
