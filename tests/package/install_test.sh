#!/usr/bin/env bash
# The install is complete: `cmake --install` puts the scenarios, the zoo's cases and the example
# plugins under the prefix, and the installed dmalab finds them beside itself, not in the source
# or build tree. The prefix is moved after the install (so nothing the build knows of its path can
# serve), and the installed binary runs from an empty working directory without DMALAB_ROOT: its
# `zoo` rows must equal the build tree's, and every path it prints must lie in the moved prefix.
# usage: install_test.sh BUILD_DIR SOURCE_DIR WORK_DIR
set -euo pipefail
build=$(realpath "$1") src=$(realpath "$2") work=$3
rm -rf "$work"
mkdir -p "$work/cwd"
work=$(realpath "$work")
cmake --install "$build" --prefix "$work/installed" >/dev/null
mv "$work/installed" "$work/moved"
prefix=$work/moved

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# What the install holds, by the names users read in the docs.
for f in share/dmalab/scenarios/glm52_tp4_layer0_residual.yaml \
  share/dmalab/scenarios/mtp_fused_residual_tp4.yaml \
  share/dmalab/scenarios/README.md \
  share/dmalab/scenarios/topologies/h200_virtual_ranks.yaml \
  share/dmalab/tests/zoo/graph_output_freed_tp2.yaml \
  share/dmalab/examples/plugins/persistent_workspace.yaml \
  share/dmalab/examples/plugins/minimal.c \
  lib/dmalab/plugins/persistent_workspace.so \
  lib/dmalab/plugins/fresh_output.so \
  lib/dmalab/plugins/minimal.so; do
  [[ -f "$prefix/$f" ]] || fail "the install has no $f"
done
# Every scenario of the source tree, and every example plugin of the build tree, is installed.
for f in "$src"/scenarios/*.yaml "$src"/tests/zoo/*.yaml "$src"/examples/plugins/*.yaml; do
  rel=${f#"$src"/}
  [[ -f "$prefix/share/dmalab/$rel" ]] || fail "the install has no share/dmalab/$rel"
done
for f in "$build"/examples/*.so; do
  [[ -f "$prefix/lib/dmalab/plugins/$(basename "$f")" ]] ||
    fail "the install has no lib/dmalab/plugins/$(basename "$f")"
done

# Runs a zoo from an empty folder with nothing pointing at a tree; stdout and stderr apart.
zoo() {  # zoo NAME BINARY ARGS...
  local name=$1 bin=$2 rc=0
  shift 2
  (cd "$work/cwd" && env -u DMALAB_ROOT "$bin" zoo --seeds=1 --sizes=0 --jobs=2 --quiet "$@") \
    >"$work/$name.out" 2>"$work/$name.err" || rc=$?
  echo "$rc" >"$work/$name.rc"
}
# The rows without their times and with the tree's own folder written as ROOT.
rows() {  # rows NAME ROOT [PLUGIN]
  sed -e "s|${3:-no plugin}|PLUGIN|g" -e "s|$2/|ROOT/|g" -e 's/ *[0-9][0-9]*\.[0-9]$//' \
    -e 's/, [0-9][0-9.]* s, status=/, status=/' "$work/$1.out"
}
same_rows() {  # same_rows BUILD_NAME INSTALLED_NAME [BUILD_PLUGIN INSTALLED_PLUGIN]
  rows "$1" "$src" "${3:-}" >"$work/$1.rows"
  rows "$2" "$prefix/share/dmalab" "${4:-}" >"$work/$2.rows"
  [[ $(cat "$work/$1.rc") == $(cat "$work/$2.rc") ]] ||
    fail "$2 exited $(cat "$work/$2.rc"), the build tree's zoo $(cat "$work/$1.rc")"
  diff -u "$work/$1.rows" "$work/$2.rows" >&2 || fail "$2's rows differ from the build tree's"
  # Nothing the installed binary printed names the source or the build tree (the work folder,
  # and so the prefix, lies inside the build tree: its own paths are taken out first).
  ! sed "s|$prefix||g" "$work/$2.out" "$work/$2.err" | grep -F -e "$src" -e "$build" >&2 ||
    fail "$2 names the source or build tree"
}

# The ring's zoo: the fault rows and the example plugins' rows (bug and fix).
zoo build "$build/bin/dmalab"
zoo installed "$prefix/bin/dmalab"
same_rows build installed
[[ $(cat "$work/installed.rc") == 0 ]] || fail "installed zoo exited $(cat "$work/installed.rc")"
grep -q '^persistent_workspace ' "$work/installed.out" ||
  fail "the installed zoo has no example plugin rows: $(cat "$work/installed.err")"
[[ ! -s "$work/installed.err" ]] || fail "installed zoo wrote to stderr: $(cat "$work/installed.err")"

# An installed example plugin in the ring's place: the founding bug, caught as in the build tree,
# its first failure located in the installed scenarios.
zoo build_plugin "$build/bin/dmalab" --collective="$build/examples/persistent_workspace.so"
zoo installed_plugin "$prefix/bin/dmalab" \
  --collective="$prefix/lib/dmalab/plugins/persistent_workspace.so"
same_rows build_plugin installed_plugin "$build/examples/persistent_workspace.so" \
  "$prefix/lib/dmalab/plugins/persistent_workspace.so"
[[ $(cat "$work/installed_plugin.rc") == 1 ]] ||
  fail "installed zoo with persistent_workspace exited $(cat "$work/installed_plugin.rc") (want 1)"
grep -qF "first failure: all_reduce 'o_proj' at $prefix/share/dmalab/examples/plugins/persistent_workspace.yaml:" \
  "$work/installed_plugin.out" || fail "no first failure in the installed scenario"

# Without its plugins, the installed zoo names the installed folder it looked in.
rm -r "$prefix/lib/dmalab/plugins"
zoo no_plugins "$prefix/bin/dmalab"
grep -qF "the example plugins are not installed (no $prefix/lib/dmalab/plugins/persistent_workspace.so)" \
  "$work/no_plugins.err" || fail "no_plugins: $(cat "$work/no_plugins.err")"
echo "install_test: the moved prefix's zoo gives the build tree's rows, from the prefix alone"
