#!/usr/bin/env bash
# Hostile input to the command line, round 2 (issue 25): each case the exact input, exit status
# and message kind. Never a crash, a hang, a silent exit 0, a half-written file, a write outside
# --dump, or a library loaded from the working directory.
set -uo pipefail
dmalab="$(realpath "$1")"
examples="$(realpath "$2")"  # the example plugins (build/examples)
hostile="$(realpath "$3")"   # the hostile plugins (build/tests/plugins/hostile_*.so)
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
if (ulimit -v $limit_kib && "$dmalab" --version; exit $?) > /dev/null 2>&1 && ((available_kib > limit_kib)); then
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

# --- item 3: a collective that crashes, exits or hangs is a finding, with the report of every ----
# step before it and the JSON written, exit 1 (was: exit 139/134 or 0 with nothing, or no end).
scenario=tests/plugins/hostile_tp2.yaml
first="step 2 all_reduce 'first' at $scenario:13:5: x -> y (default) 1,024 elems 2,048 bytes hash=xxh64:"
ring_hash=$("$dmalab" replay "$scenario" > "$tmp/ring.txt" && grep -F "$first" "$tmp/ring.txt" | sed 's/.*hash=xxh64://')
[[ -n "$ring_hash" ]] || fail "the ring's replay of $scenario"
# A sanitizer build reports a SIGSEGV itself and exits 1; these cases are about the signal.
export ASAN_OPTIONS="handle_segv=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
# crash CASE STEP-LINE DETAIL [FLAGS]: replay through hostile_CASE.so; exit 1, the first
# all-reduce reported with the ring's hash, then the one finding, in the text and the JSON.
crash() {
  local case="$1" finding="$2"
  shift 2
  timeout 60 "$dmalab" replay "$scenario" --collective="$hostile/hostile_$case.so" --json="$tmp/$case.json" "$@" > "$tmp/$case.txt" 2> "$tmp/$case.err"
  local rc=$?
  [[ $rc -eq 1 ]] || fail "$case: exit $rc, wanted 1: $(cat "$tmp/$case.txt" "$tmp/$case.err")"
  grep -qxF "$first$ring_hash" "$tmp/$case.txt" || fail "$case: the step before is not reported: $(cat "$tmp/$case.txt")"
  grep -qxF "$finding" "$tmp/$case.txt" || fail "$case: finding: $(grep FINDING "$tmp/$case.txt")"
  grep -qx 'pointer_alias=false  retained_mismatches=0 / 1,024  rank_consistent=true  status=FAIL' "$tmp/$case.txt" ||
    fail "$case: summary: $(tail -2 "$tmp/$case.txt")"
  /usr/bin/python3 - "$tmp/$case.json" "$finding" <<'PY' || fail "$case: JSON"
import json, sys
r = json.load(open(sys.argv[1]))
kinds = [f["kind"] for f in r["findings"]]
assert r["summary"]["status"] == "FAIL" and len(kinds) == 1, r
assert sys.argv[2].startswith("FINDING " + kinds[0] + ": "), (kinds, sys.argv[2])
PY
}
second="step 4 all_reduce 'second' at $scenario:15:5"
crash segv_second_call "FINDING collective_crash: $second, rank 0: the replay's worker process was killed by signal 11 (SIGSEGV: Segmentation fault) in all_reduce 'second' at $scenario:15:5 (the collective under test ran there); the report holds every step before it"
crash abort_in_destroy "FINDING collective_crash: end of scenario, rank 0: the replay's worker process was killed by signal 6 (SIGABRT: Aborted) in end of scenario (destroying the collective) (the collective under test ran there); the report holds every step before it"
grep -q "^step 4 all_reduce 'second'" "$tmp/abort_in_destroy.txt" || fail "abort in destroy: the last all-reduce is not reported"
crash exit0_second_call "FINDING collective_crash: $second, rank 0: the replay's worker process exited with status 0 in all_reduce 'second' at $scenario:15:5 (the collective under test ran there); the report holds every step before it"
crash spin_second_call "FINDING collective_hang: $second, rank 0: the replay's worker process made no progress for 2 s (--timeout) and was killed in all_reduce 'second' at $scenario:15:5; the report holds every step before it" --timeout=2
crash scribble_second_call "FINDING collective_crash: $second, rank 0: the replay's worker process sent a report the command line cannot read (a frame of 2147483647 bytes) and was killed in all_reduce 'second' at $scenario:15:5; the report holds every step before it"
# The same seed gives the same report, crash included.
timeout 60 "$dmalab" replay "$scenario" --collective="$hostile/hostile_segv_second_call.so" > "$tmp/again.txt" 2>&1
cmp -s "$tmp/again.txt" "$tmp/segv_second_call.txt" || fail "a second crashing run differs: $(diff "$tmp/again.txt" "$tmp/segv_second_call.txt")"
# --seeds and --check-determinism: every seed fails, and so does the determinism check.
timeout 60 "$dmalab" replay "$scenario" --collective="$hostile/hostile_exit0_second_call.so" --seeds=2 > "$tmp/seeds.txt" 2>&1
[[ $? -eq 1 ]] && grep -q '^seeds 1..2: 2 failing (first seed 1), inject none, fidelity values, .* s, status=FAIL$' "$tmp/seeds.txt" ||
  fail "--seeds with a crashing plugin: $(cat "$tmp/seeds.txt")"
timeout 60 "$dmalab" replay "$scenario" --collective="$hostile/hostile_abort_in_destroy.so" --check-determinism > "$tmp/det.txt" 2>&1
[[ $? -eq 1 ]] && grep -q '^determinism: the collective failed: collective_crash: ' "$tmp/det.txt" ||
  fail "--check-determinism with a crashing plugin: $(cat "$tmp/det.txt")"
# zoo: each crashing run is a failing run named by its checker; a hang is bounded by --timeout.
timeout 120 "$dmalab" zoo --collective="$hostile/hostile_segv_second_call.so" --seeds=1 --quiet > "$tmp/zoo.txt" 2>&1
[[ $? -eq 1 ]] && grep -Eq '^scenarios/mtp_fused_residual_tp4.yaml +1 +1 +1 collective_crash ' "$tmp/zoo.txt" ||
  fail "zoo with a crashing plugin: $(cat "$tmp/zoo.txt")"
timeout 120 "$dmalab" zoo --collective="$hostile/hostile_spin_second_call.so" --seeds=1 --timeout=1 --quiet > "$tmp/zoo.txt" 2>&1
[[ $? -eq 1 ]] && grep -Eq '^scenarios/mtp_fused_residual_tp4.yaml +1 +1 +1 collective_hang ' "$tmp/zoo.txt" ||
  fail "zoo with a hanging plugin: $(cat "$tmp/zoo.txt")"
# --timeout is a plugin's bound: a usage error with the ring.
expect 2 "dmalab replay: --timeout means nothing without --collective=PLUGIN.so; drop it or add --collective=PLUGIN.so
run 'dmalab replay --help' for its flags" replay "$scenario" --timeout=5
expect 2 "dmalab zoo: --timeout: value '0' is out of range; allowed: 1 to 86400
run 'dmalab zoo --help' for its flags" zoo --timeout=0
# A child the collective forks ends with its worker.
DMALAB_TEST_CHILD_PID="$tmp/child.pid" timeout 60 "$dmalab" replay "$scenario" --collective="$hostile/hostile_fork_at_create.so" > "$tmp/fork.txt" 2>&1 ||
  fail "a forking plugin: $(cat "$tmp/fork.txt")"
child=$(cat "$tmp/child.pid")
sleep 0.2
[[ ! -e /proc/$child ]] || grep -q '^State:.*Z' /proc/$child/status || fail "the collective's child $child outlived the run"
# A worker dies with the command line (killed while the collective spins).
"$dmalab" replay "$scenario" --collective="$hostile/hostile_spin_second_call.so" --timeout=60 > /dev/null 2>&1 &
parent=$!
worker=""
for i in $(seq 200); do
  worker=$(cat /proc/$parent/task/*/children 2> /dev/null | tr ' ' '\n' | grep . | head -1)
  [[ -n "$worker" ]] && break
  sleep 0.05
done
[[ -n "$worker" ]] || fail "no worker process under $parent"
kill -9 "$parent"
wait "$parent" 2> /dev/null
sleep 0.5
if [[ -e /proc/$worker ]] && ! grep -q '^State:.*Z' /proc/$worker/status; then
  kill -9 "$worker"
  fail "the worker $worker outlived dmalab"
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
