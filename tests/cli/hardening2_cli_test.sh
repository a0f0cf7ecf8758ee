#!/usr/bin/env bash
# Hostile input to the command line, round 2 (issue 25): each case the exact input, exit status
# and message kind. Never a crash, a hang, a silent exit 0, a half-written file, a write outside
# --dump, or a library loaded from the working directory.
set -uo pipefail
dmalab="$(realpath "$1")"
examples="$(realpath "$2")"  # the example plugins (build/examples)
cd "$(dirname "$0")/../.."
root="$PWD"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# expect STATUS MESSAGE ARGS...: runs dmalab ARGS (60 s at most), checks the exit status and
# that stderr is exactly MESSAGE.
expect() {
  local want="$1" message="$2"
  shift 2
  timeout 60 "$dmalab" "$@" > "$tmp/out.txt" 2> "$tmp/err.txt"
  local rc=$?
  [[ $rc -eq $want ]] || fail "dmalab $*: exit $rc, wanted $want; stderr: $(head -c 600 "$tmp/err.txt")"
  [[ "$(cat "$tmp/err.txt")" == "$message" ]] ||
    fail "dmalab $*: stderr '$(head -c 600 "$tmp/err.txt")', wanted '$message'"
}

# --- item 1: memory pre-checks honour RLIMIT_AS (and cgroup limits) in every command ---------
# `sweep --backend=sim -b 2G` under an address-space limit aborted in the allocator (134).
# Skipped for a build that cannot run under such a limit (AddressSanitizer's shadow memory).
limit_kib=4194304
available_kib=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
if (ulimit -v $limit_kib && "$dmalab" --version > /dev/null 2>&1) && ((available_kib > limit_kib)); then
  limited() { (ulimit -v $limit_kib && timeout 60 "$dmalab" "$@"); }
  limited sweep --backend=sim --topology=scenarios/topologies/h200_virtual_ranks.yaml -b 2G -e 2G > /dev/null 2> "$tmp/err.txt"
  rc=$?
  [[ $rc -eq 2 ]] && grep -q "^dmalab sweep: the largest size (-e 2 GiB) needs about [0-9]* bytes (.* GiB) of memory, more than the [0-9]* bytes (.* GiB) available (RLIMIT_AS (4294967296 bytes, [0-9]* mapped)); use a smaller -e, fewer --ranks, or --fidelity=shadow (times only, no payload)$" "$tmp/err.txt" ||
    fail "sweep -b 2G under ulimit -v: exit $rc: $(cat "$tmp/err.txt")"
  printf 'world: 4\ntensors: {x: [536870912], y: [536870912]}\nsteps:\n  - fill: {tensor: x}\n  - all_reduce: {input: x, result: y}\n' > "$tmp/big.yaml"
  limited replay "$tmp/big.yaml" > /dev/null 2> "$tmp/err.txt"
  rc=$?
  [[ $rc -eq 2 ]] && grep -q "more than the limit of [0-9]* bytes (.* GiB: RLIMIT_AS (4294967296 bytes, [0-9]* mapped))$" "$tmp/err.txt" ||
    fail "replay of 4 GiB tensors under ulimit -v: exit $rc: $(cat "$tmp/err.txt")"
  limited demo --ranks=16 -b 64M -e 64M > /dev/null 2> "$tmp/err.txt"
  rc=$?
  [[ $rc -eq 2 ]] && grep -q "available (RLIMIT_AS (4294967296 bytes, [0-9]* mapped)); use a smaller -e or fewer --ranks$" "$tmp/err.txt" ||
    fail "demo under ulimit -v: exit $rc: $(cat "$tmp/err.txt")"
fi

# --- item 4: nested repeats around an empty body loop 10^18 times: refused before running ----
printf 'world: 2\ntensors: {x: [64]}\nsteps:\n  - fill: {tensor: x}\n  - repeat: {times: 1000000, steps: [{repeat: {times: 1000000, steps: [{repeat: {times: 1000000, steps: []}}]}}]}\n' > "$tmp/empty_repeats.yaml"
expect 2 "dmalab replay: $tmp/empty_repeats.yaml: found 1000000000000000001 steps with repeats expanded (every repeat iteration counting as one step at least), allowed at most 10000000 steps in one replay (ReplayOptions::max_steps; reduce the repeat counts)" replay "$tmp/empty_repeats.yaml"

# --- item 5: topology values outside physical ranges are located errors --------------------
# memory_gbps: 5e-324 made the timing model loop forever; 1e308 gave inf and -nan times that
# PASSed, and -J wrote them (invalid JSON).
sed 's/^memory_gbps: .*/memory_gbps: 5e-324/' scenarios/topologies/h200_virtual_ranks.yaml > "$tmp/tiny.yaml"
line=$(grep -n '^memory_gbps:' "$tmp/tiny.yaml" | cut -d: -f1)
expect 2 "dmalab sweep: $tmp/tiny.yaml:$line:14: field 'memory_gbps': found '5e-324', allowed a rate in 0.001..1000000 GB/s" sweep --backend=sim --topology="$tmp/tiny.yaml" -b 64K -e 64K -n 1 -w 0 -J "$tmp/nccl.json"
sed 's/^memory_gbps: .*/memory_gbps: 1e308/' scenarios/topologies/h200_virtual_ranks.yaml > "$tmp/huge.yaml"
expect 2 "dmalab sweep: $tmp/huge.yaml:$line:14: field 'memory_gbps': found '1e308', allowed a rate in 0.001..1000000 GB/s" sweep --backend=sim --topology="$tmp/huge.yaml" -b 64K -e 64K -n 1 -w 0 -J "$tmp/nccl.json"
[[ ! -e "$tmp/nccl.json" ]] || fail "a refused sweep wrote -J"
# At the bounds every figure is finite and -J is valid JSON.
sed 's/^memory_gbps: .*/memory_gbps: 1000000/; s/gbps: [0-9.e+]*/gbps: 0.001/g; s/_us: [0-9.e+]*/_us: 0/g' \
  scenarios/topologies/h200_virtual_ranks.yaml > "$tmp/edges.yaml"
timeout 60 "$dmalab" sweep --backend=sim --topology="$tmp/edges.yaml" -b 64K -e 128K -n 1 -w 0 -J "$tmp/nccl.json" > "$tmp/out.txt" 2>&1 ||
  fail "sweep at the bounds: $(cat "$tmp/out.txt")"
/usr/bin/python3 -c 'import json,math,sys
d = json.load(open(sys.argv[1]))
for r in d["results"]:
  for k in ("time", "alg_bw", "bus_bw"):
    assert math.isfinite(r["out_of_place"][k]) and r["out_of_place"][k] > 0, r' "$tmp/nccl.json" || fail "-J at the bounds"
! grep -Eqi 'inf|nan' "$tmp/out.txt" || fail "non-finite figures: $(cat "$tmp/out.txt")"

# --- item 7: nothing is loaded from the working directory ------------------------------------
# A plugin path without '/' is the file in the current folder, as written, never a library the
# loader finds on its search path (libyaml-cpp.so is on the system's).
expect 2 "dmalab replay: $root/examples/plugins/persistent_workspace.yaml: plugin ./libyaml-cpp.so: cannot load it: ./libyaml-cpp.so: cannot open shared object file: No such file or directory" replay "$root/examples/plugins/persistent_workspace.yaml" --collective=libyaml-cpp.so
cp "$examples/fresh_output.so" "$tmp/mine.so"
(cd "$tmp" && timeout 60 "$dmalab" replay "$root/examples/plugins/persistent_workspace.yaml" --collective=mine.so > out.txt 2>&1) ||
  fail "a plugin named without '/' in the current folder: $(cat "$tmp/out.txt")"
grep -q '^collective=plugin:fresh_output ' "$tmp/out.txt" || fail "mine.so: $(head -3 "$tmp/out.txt")"

# --- item 8: output that cannot be written is exit 2 with the reason, in every command --------
for args in "--version" "--help" "demo --help" "plan" "demo -b 64K -e 64K" "zoo --help" "sweep --help"; do
  read -r -a argv <<< "$args"
  timeout 60 "$dmalab" "${argv[@]}" > /dev/full 2> "$tmp/err.txt"
  rc=$?
  [[ $rc -eq 2 ]] || fail "dmalab $args > /dev/full: exit $rc, wanted 2"
  grep -qx "dmalab\( [a-z]*\)\?: cannot write to stdout: No space left on device" "$tmp/err.txt" ||
    fail "dmalab $args > /dev/full: $(cat "$tmp/err.txt")"
done
timeout 60 "$dmalab" plan >&- 2> "$tmp/err.txt"
rc=$?
[[ $rc -eq 2 && "$(cat "$tmp/err.txt")" == "dmalab plan: cannot write to stdout: Bad file descriptor" ]] ||
  fail "plan with stdout closed: exit $rc: $(cat "$tmp/err.txt")"
# A reader that goes away: the run goes on, writes its --json, then exits 2 naming the reason
# (was: killed by SIGPIPE before writing it). 2000 all-reduce lines overflow the pipe's buffer.
printf 'world: 2\ntensors: {x: [64]}\nsteps:\n  - fill: {tensor: x}\n  - repeat: {times: 2000, steps: [{all_reduce: {input: x, in_place: true}}]}\n' > "$tmp/many.yaml"
timeout 60 "$dmalab" replay "$tmp/many.yaml" --json="$tmp/many.json" 2> "$tmp/err.txt" | head -1 > /dev/null
rc=${PIPESTATUS[0]}
[[ $rc -eq 2 ]] || fail "replay | head -1: exit $rc, wanted 2"
[[ "$(cat "$tmp/err.txt")" == "dmalab replay: cannot write to stdout: Broken pipe" ]] ||
  fail "replay | head -1: $(cat "$tmp/err.txt")"
/usr/bin/python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["summary"]["status"] == "PASS" and r["all_reduces_total"] == 2000' "$tmp/many.json" ||
  fail "replay | head -1 did not write its --json"
# --dump never writes through a link already in the dump folder.
mkdir -p "$tmp/dump" && echo precious > "$tmp/outside.txt"
ln -s "$tmp/outside.txt" "$tmp/dump/x.rank0.npy"
timeout 60 "$dmalab" replay tests/cli/live_at_end.yaml --dump="$tmp/dump" > /dev/null 2>&1 || fail "dump replay"
[[ "$(cat "$tmp/outside.txt")" == precious ]] || fail "--dump wrote through a link"
[[ -f "$tmp/dump/x.rank0.npy" && ! -L "$tmp/dump/x.rank0.npy" ]] || fail "the link was not replaced"
# Two runs writing one --json path, 20 times over: the file is always one whole report.
for i in $(seq 20); do
  "$dmalab" replay tests/cli/live_at_end.yaml --json="$tmp/race.json" > /dev/null &
  "$dmalab" replay tests/cli/live_at_end.yaml --seed=7 --json="$tmp/race.json" > /dev/null &
  wait
  /usr/bin/python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$tmp/race.json" ||
    fail "two runs writing one --json left invalid JSON (round $i)"
done
[[ -z "$(ls -A "$tmp" | grep '\.tmp\.')" ]] || fail "temporary files left: $(ls -A "$tmp")"

# --- item 10: usage errors instead of silent nothing ------------------------------------------
expect 2 "dmalab demo: -b is 1 B: an all-reduce over 4 ranks takes a multiple of 32 elements (4 x 8), at least 64 B of bf16; allowed: -b >= 64 B" demo -b 1 -e 1
expect 2 "dmalab replay: --seeds and --check-determinism cannot be given together (--seeds replays seeds 1..N once each, --check-determinism one seed twice); give one
run 'dmalab replay --help' for its flags" replay tests/cli/live_at_end.yaml --seeds=3 --check-determinism

echo "hardening2_cli_test: all cases passed"
