#!/usr/bin/env bash
# Seed campaigns over MPI ranks (runner/seed_split.h): under `mpirun -np 2`, zoo and
# replay --seeds print the same lines and JSON as one process (times apart) and exit with the
# same status; other commands are refused there. Usage: mpi_test.sh DMALAB MPIEXEC
set -uo pipefail
dmalab="$(realpath "$1")"
mpiexec="$2"
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# As root (CI) OpenMPI needs to be told; --oversubscribe: more ranks than cores is fine here.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi() { "$mpiexec" --oversubscribe -np 2 "$dmalab" "$@"; }
# Times (a number of seconds) are the only bytes that may differ.
untimed() { sed -E 's/ *[0-9]+\.[0-9]+( s,|$)/ T\1/g; s/"(seconds|elapsed_s|wall_s)":[0-9.e+-]+/"\1":T/g' "$1"; }

# replay --seeds: failing seeds listed in order, the same summary, exit 1 from every rank.
s=scenarios/explicit_outputs_tp3.yaml
"$dmalab" replay "$s" --inject=drop-copy-wait --seeds=7 --quiet --json="$tmp/one.json" > "$tmp/one.txt"
[[ $? -eq 1 ]] || fail "replay --seeds, one process: $(tail -2 "$tmp/one.txt")"
mpi replay "$s" --inject=drop-copy-wait --seeds=7 --quiet --json="$tmp/mpi.json" > "$tmp/mpi.txt" 2> "$tmp/mpi.err"
[[ $? -eq 1 ]] || fail "replay --seeds under mpirun: exit not 1: $(cat "$tmp/mpi.err") $(tail -2 "$tmp/mpi.txt")"
grep -q '^seed=1 FAIL' "$tmp/mpi.txt" || fail "replay --seeds under mpirun: $(head -3 "$tmp/mpi.txt")"
cmp -s <(untimed "$tmp/one.txt") <(untimed "$tmp/mpi.txt") ||
  fail "replay --seeds differs under mpirun: $(diff <(untimed "$tmp/one.txt") <(untimed "$tmp/mpi.txt"))"
cmp -s <(untimed "$tmp/one.json") <(untimed "$tmp/mpi.json") ||
  fail "replay --seeds JSON differs under mpirun: $(diff <(untimed "$tmp/one.json") <(untimed "$tmp/mpi.json"))"
# A passing campaign exits 0 on every rank.
mpi replay "$s" --seeds=3 --quiet > "$tmp/pass.txt" 2>&1 || fail "replay --seeds (PASS) under mpirun: $(cat "$tmp/pass.txt")"
grep -q 'status=PASS$' "$tmp/pass.txt" || fail "replay --seeds (PASS): $(cat "$tmp/pass.txt")"

# zoo: the same table and JSON.
"$dmalab" zoo --seeds=3 --sizes=0 --quiet --json="$tmp/zoo1.json" > "$tmp/zoo1.txt" ||
  fail "zoo, one process: $(tail -2 "$tmp/zoo1.txt")"
mpi zoo --seeds=3 --sizes=0 --quiet --json="$tmp/zoo2.json" > "$tmp/zoo2.txt" 2> "$tmp/zoo2.err" ||
  fail "zoo under mpirun: $(cat "$tmp/zoo2.err") $(tail -2 "$tmp/zoo2.txt")"
cmp -s <(untimed "$tmp/zoo1.txt") <(untimed "$tmp/zoo2.txt") ||
  fail "zoo differs under mpirun: $(diff <(untimed "$tmp/zoo1.txt") <(untimed "$tmp/zoo2.txt"))"
cmp -s <(untimed "$tmp/zoo1.json") <(untimed "$tmp/zoo2.json") ||
  fail "zoo JSON differs under mpirun: $(diff <(untimed "$tmp/zoo1.json") <(untimed "$tmp/zoo2.json") | head -5)"

# Commands that do not split their runs are refused under mpirun, as a single replay is.
mpi demo > "$tmp/out.txt" 2> "$tmp/err.txt"
[[ $? -eq 2 ]] || fail "demo under mpirun: not exit 2: $(cat "$tmp/err.txt")"
grep -qF "only zoo and replay --seeds split their runs over MPI ranks" "$tmp/err.txt" ||
  fail "demo under mpirun: $(cat "$tmp/err.txt")"
mpi replay "$s" > "$tmp/out.txt" 2> "$tmp/err.txt"
[[ $? -eq 2 ]] || fail "replay under mpirun: not exit 2: $(cat "$tmp/err.txt")"
grep -qF "replay splits --seeds=N over them" "$tmp/err.txt" || fail "replay under mpirun: $(cat "$tmp/err.txt")"
echo "mpi_test: PASS"
