#!/usr/bin/env bash
# The Python package is complete after `cmake --install`: its .py files and the compiled
# dmalab._core lie together in the folder DMALAB_PYTHON_INSTALL_DIR names under the prefix, and
# `python3 -m dmalab.torch --help` runs from an empty folder with that one folder on the path,
# after the prefix was moved (nothing in the source or build tree serves). Where the configure
# step found that folder on the interpreter's own search path (the default prefix), it is there.
# usage: python_install_test.sh BUILD_DIR PYTHON INSTALL_DIR CONFIGURED_PREFIX WORK_DIR
set -euo pipefail
build=$(realpath "$1") python=$2 rel=$3 configured_prefix=$4 work=$5
rm -rf "$work"
mkdir -p "$work/cwd"
work=$(realpath "$work")
cmake --install "$build" --prefix "$work/installed" >/dev/null
mv "$work/installed" "$work/moved"
pkg=$work/moved/$rel/dmalab

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

for f in __init__.py torch/__init__.py torch/__main__.py torch/harness.py torch/worker.py; do
  [[ -f "$pkg/$f" ]] || fail "the install has no $rel/dmalab/$f"
done
compgen -G "$pkg/_core*.so" >/dev/null || fail "the install has no $rel/dmalab/_core*.so"

# From an empty folder, the moved prefix's package alone (no source or build tree on the path).
out=$(cd "$work/cwd" && env -u PYTHONPATH PYTHONPATH="$work/moved/$rel" PYTHONNOUSERSITE=1 \
  "$python" -m dmalab.torch --help 2>&1) || fail "python3 -m dmalab.torch --help: $out"
[[ $out == usage:\ python3\ -m\ dmalab.torch\ check\ * ]] || fail "help reads: $out"
where=$(cd "$work/cwd" && env -u PYTHONPATH PYTHONPATH="$work/moved/$rel" PYTHONNOUSERSITE=1 \
  "$python" -c 'import dmalab, dmalab._core; print(dmalab._core.__file__)')
[[ $where == "$pkg/"_core*.so ]] || fail "dmalab._core came from $where, not the install"

# With the configured prefix, the folder is one the interpreter searches by itself.
if "$python" -c 'import sys; sys.exit(0 if any(p.endswith(("site-packages", "dist-packages")) and p.startswith(sys.argv[1] + "/") for p in sys.path) else 1)' "$configured_prefix"; then
  "$python" -c 'import os, sys; sys.exit(0 if os.path.join(sys.argv[1], sys.argv[2]) in sys.path else 1)' \
    "$configured_prefix" "$rel" || fail "$configured_prefix/$rel is not on $python's path"
fi
echo "python_install_test: the moved prefix's package imports from an empty folder"
