#!/usr/bin/env bash
# The command line as a whole: help per command, --version, one exit-code contract (0 PASS,
# 1 a check failed or an expectation not met, 2 bad input or usage) with messages that name the
# flag, the value and what is allowed; the grouped report; JSON of every command; zoo from
# anywhere; progress only on a terminal; sweep defaults as docs/cli.md states them.
set -uo pipefail
dmalab="$(realpath "$1")"
cd "$(dirname "$0")/../.."
root="$PWD"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# expect_exit CODE MESSAGE -- ARGS...: runs dmalab ARGS, checks the exit status and that stderr
# contains MESSAGE (a fixed string; empty: not checked).
expect_exit() {
  local code="$1" message="$2"
  shift 3
  "$dmalab" "$@" > "$tmp/out.txt" 2> "$tmp/err.txt"
  local rc=$?
  [[ $rc -eq $code ]] || fail "dmalab $*: exit $rc, expected $code; stderr: $(cat "$tmp/err.txt")"
  if [[ -n "$message" ]]; then
    grep -qF -- "$message" "$tmp/err.txt" || fail "dmalab $*: stderr lacks '$message': $(cat "$tmp/err.txt")"
  fi
}

# --- version and help -----------------------------------------------------------------------
version=$(sed -n 's/^project(dmalab VERSION \([0-9.]*\) .*/\1/p' CMakeLists.txt)
[[ -n "$version" ]] || fail "no VERSION in CMakeLists.txt's project()"
[[ "$("$dmalab" --version)" == "dmalab $version" ]] || fail "--version: $("$dmalab" --version)"
expect_exit 0 "" -- --help
grep -q '^usage: dmalab <command> \[flags\]' "$tmp/out.txt" || fail "--help text: $(head -3 "$tmp/out.txt")"
expect_exit 2 "usage: dmalab <command>" --
expect_exit 2 "'frob' is not a command; commands: replay, demo, sweep, calibrate, zoo, plan" -- frob
for cmd in replay demo sweep calibrate zoo plan; do
  expect_exit 0 "" -- "$cmd" --help
  grep -q "^Usage: dmalab $cmd \[OPTIONS\]" "$tmp/out.txt" || fail "$cmd --help: $(head -3 "$tmp/out.txt")"
  grep -q "^Exit status: 0 PASS, 1 a check failed or an expectation was not met, 2 bad input" \
    "$tmp/out.txt" || fail "$cmd --help has no exit statuses"
  cp "$tmp/out.txt" "$tmp/help1.txt"
  expect_exit 0 "" -- help "$cmd"
  cmp -s "$tmp/out.txt" "$tmp/help1.txt" || fail "'help $cmd' differs from '$cmd --help'"
done
# Each command lists only its own flags.
"$dmalab" zoo --help | grep -q -- '--pieces' && fail "zoo --help lists --pieces"
"$dmalab" plan --help | grep -q -- '--topology' && fail "plan --help lists --topology"
"$dmalab" replay --help | grep -q -- '--ranks' && fail "replay --help lists --ranks"

# --- bad input and usage: exit 2, naming the flag, the value and what is allowed ---------------
scenario=tests/cli/live_at_end.yaml
expect_exit 2 "flag '--pieces=2' means nothing to zoo; its flags: --help, --seeds, --sizes, --write-sizes, --backend, --gpus, --perturb, --jobs, --fidelity, --root, --timeout, --collective, --collective-options, --json, --quiet" -- zoo --pieces=2
expect_exit 2 "flag '--topology=x' means nothing to plan" -- plan --topology=x
expect_exit 2 "flag '--ranks=2' means nothing to replay" -- replay "$scenario" --ranks=2
expect_exit 2 "flag '--no-such-flag' means nothing to demo" -- demo --no-such-flag
expect_exit 2 "unexpected argument 'extra' means nothing to replay" -- replay "$scenario" extra
expect_exit 2 "dmalab replay: FILE is required" -- replay
# Flags that mean something with one backend only.
expect_exit 2 "--gpus means nothing without --backend=hw; drop it or add --backend=hw" -- replay "$scenario" --gpus=2
expect_exit 2 "--seed means nothing without --backend=sim" -- replay "$scenario" --backend=hw --seed=3
expect_exit 2 "--topology means nothing without --backend=sim" -- sweep --backend=hw --topology=x
expect_exit 2 "--perturb means nothing without --backend=hw" -- replay "$scenario" --perturb=3
expect_exit 2 "--perturb means nothing without --backend=hw" -- zoo --perturb=3
expect_exit 2 "--perturb means nothing without --backend=hw" -- demo --perturb=3
expect_exit 2 "--perturb: value 'x' is not an integer; allowed: 0 to 18446744073709551615" -- replay "$scenario" --backend=hw --perturb=x
expect_exit 2 "--fidelity means nothing without --backend=sim" -- zoo --backend=hw --fidelity=shadow
# --procs: one process per rank, on GPUs only, one per rank, the ring or an ABI v2 plugin.
for cmd in "replay $scenario" demo sweep; do
  # shellcheck disable=SC2086
  expect_exit 2 "--procs means nothing without --backend=hw" -- $cmd --procs=2
done
expect_exit 2 "--procs and --gpus cannot be given together" -- replay "$scenario" --backend=hw --procs=2 --gpus=1
expect_exit 2 "--procs and --gpus cannot be given together" -- demo --backend=hw --procs=2 --gpus=1
expect_exit 2 "--procs: value '17' is out of range" -- replay "$scenario" --backend=hw --procs=17
expect_exit 2 "--procs is 3, but scenario 'live_at_end' has world 2; --procs starts one process per rank" -- replay "$scenario" --backend=hw --procs=3
expect_exit 2 "--procs is 2 and --ranks 4; --procs starts one process per rank" -- sweep --backend=hw --procs=2
expect_exit 2 "--procs is 2 and --ranks 4; --procs starts one process per rank" -- demo --backend=hw --procs=2
expect_exit 2 "--procs with -G 1: graphs are captured in one process" -- sweep --backend=hw --procs=4 -G 1
expect_exit 2 "plugin /nonexistent/x.so: cannot load it" -- demo --backend=hw --procs=4 --collective=/nonexistent/x.so
if ! command -v nvidia-smi > /dev/null; then
  # Without a GPU every rank process says so, naming itself, and the launch names the rank that
  # ended first; nothing is left running. The launcher ends the other ranks as soon as one
  # exits, so one may be ended before it prints: the rank the launch names said why.
  expect_exit 2 "--procs=2: rank" -- replay "$scenario" --backend=hw --procs=2
  procs_rank_said_why() {  # COMMAND: the rank the launch names printed its own error
    local first
    first=$(sed -n "s/^dmalab $1: --procs=2: rank \([01]\) exited with status 2$/\1/p" "$tmp/err.txt")
    [[ -n "$first" ]] || return 1
    # "no CUDA device", or "built without the CUDA backend" in a build without CUDA.
    grep -qE "dmalab $1: rank $first: (no CUDA device|backend hw: this dmalab was built without)" "$tmp/err.txt"
  }
  procs_rank_said_why replay || fail "replay --procs: $(cat "$tmp/err.txt")"
  [[ ! -s "$tmp/out.txt" ]] || fail "replay --procs printed a report: $(cat "$tmp/out.txt")"
fi
# -G works on the simulator too (simulator graphs); -J writes nccl-tests' JSON with the command.
"$dmalab" sweep --backend=sim --topology=scenarios/topologies/h200_virtual_ranks.yaml --ranks=4 \
  -b 64K -e 128K -n 1 -w 1 -G 1 -J "$tmp/nccl.json" -q > "$tmp/graph_sweep.txt" 2>&1 ||
  fail "sweep -G 1 on the simulator: $(tail -3 "$tmp/graph_sweep.txt")"
/usr/bin/python3 - "$tmp/nccl.json" <<'PY' || fail "sweep -J: $(head -c 400 "$tmp/nccl.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["args"][:2] == ["dmalab", "sweep"] and "-G" in d["args"], d["args"]
assert len(d["results"]) == 2, d["results"]
PY
expect_exit 2 "--seed: value 'abc' is not an integer; allowed: 0 to 18446744073709551615" -- replay "$scenario" --seed=abc
expect_exit 2 "--seed: value '-1' is not an integer; allowed: 0 to 18446744073709551615" -- demo --seed=-1
expect_exit 2 "--seed: value '18446744073709551616' is out of range; allowed: 0 to 18446744073709551615" -- demo --seed=18446744073709551616
expect_exit 2 "--ranks: value '17' is out of range; allowed: 2 to 16" -- demo --ranks=17
expect_exit 2 "--pieces: value '2x' is not an integer; allowed: 1 to 8" -- plan --pieces=2x
expect_exit 2 "-c/--check: value '2' is out of range; allowed: 0 to 1" -- sweep -c 2
expect_exit 2 "--backend: value 'tpu' is not known; allowed: sim, hw" -- replay "$scenario" --backend=tpu
expect_exit 2 "--fidelity: value 'exact' is not known; allowed: values, shadow" -- zoo --fidelity=exact
expect_exit 2 "--dtype: dtype 'fp8'" -- demo --dtype=fp8
expect_exit 2 "--inject: fault 'nope' is not known; allowed: persistent-output" -- plan --inject=nope
expect_exit 2 "--check-determinism takes no value; found '--check-determinism=3'" -- replay "$scenario" --check-determinism=3
expect_exit 2 "--quiet takes no value; found '--quiet=yes'" -- zoo --quiet=yes
expect_exit 2 "--json: 1 required" -- zoo --json
expect_exit 2 "--collective: value 'nccl' is not a collective; allowed: ring (the DMA ring all-reduce), or the path of a plugin's shared library" -- demo --collective=nccl
# A plugin path: replay, demo, sweep and zoo run it (the founding bug's plugin fails, its fix
# passes).
examples="$(dirname "$dmalab")/../examples"
topology=scenarios/topologies/h200_virtual_ranks.yaml
# --procs runs an ABI v2 plugin, one instance per rank process; an ABI v1 plugin (one instance
# for every rank) is refused by the launcher, naming the ABI, before any process starts.
v1_refused="it speaks plugin ABI v1, whose one instance drives every rank from one process"
expect_exit 2 "--procs with plugin $examples/fresh_output.so: $v1_refused" -- replay "$scenario" --backend=hw --procs=2 --collective="$examples/fresh_output.so"
expect_exit 2 "--procs with plugin $examples/fresh_output.so: $v1_refused" -- demo --backend=hw --procs=2 --ranks=2 --collective="$examples/fresh_output.so"
grep -q "rank 0" "$tmp/err.txt" && fail "demo --procs with an ABI v1 plugin started rank processes: $(cat "$tmp/err.txt")"
if ! command -v nvidia-smi > /dev/null; then
  # An ABI v2 plugin is let through; without a GPU each rank process says so, naming itself.
  for cmd in "replay $scenario" "demo --ranks=2"; do
    # shellcheck disable=SC2086
    expect_exit 2 "--procs=2: rank" -- $cmd --backend=hw --procs=2 --collective="$examples/custom_ar.so"
    procs_rank_said_why "${cmd%% *}" || fail "$cmd --procs with custom_ar: $(cat "$tmp/err.txt")"
    [[ ! -s "$tmp/out.txt" ]] || fail "$cmd --procs with custom_ar printed: $(cat "$tmp/out.txt")"
  done
fi
expect_exit 1 "" -- demo --collective="$examples/persistent_workspace.so" --ranks=2 -b 4K -e 16K -f 4
grep -q '^# dmalab demo: all-reduce on the simulator (collective plugin:persistent_workspace)' "$tmp/out.txt" || fail "demo plugin header: $(head -1 "$tmp/out.txt")"
grep -q '^status=FAIL$' "$tmp/out.txt" || fail "demo persistent_workspace: $(tail -3 "$tmp/out.txt")"
expect_exit 0 "" -- demo --collective="$examples/fresh_output.so" --ranks=2 -b 4K -e 16K -f 4
grep -q '^status=PASS$' "$tmp/out.txt" || fail "demo fresh_output: $(tail -3 "$tmp/out.txt")"
expect_exit 2 "fault injections (persistent-output) are bugs of the built-in ring; a plugin brings its own" -- demo --collective="$examples/fresh_output.so" --inject=persistent-output
expect_exit 0 "" -- sweep --collective="$examples/fresh_output.so" --backend=sim --topology="$topology" --ranks=2 -b 64K -e 256K -n 2 -w 1
grep -q "^# dmalab sweep: collective $examples/fresh_output.so, backend sim" "$tmp/out.txt" || fail "sweep plugin header: $(head -2 "$tmp/out.txt")"
grep -q '^# status=PASS$' "$tmp/out.txt" || fail "sweep fresh_output: $(tail -3 "$tmp/out.txt")"
expect_exit 2 "-G replays the ring's own captured graphs" -- sweep --collective="$examples/fresh_output.so" --backend=sim --topology="$topology" --ranks=2 -b 64K -e 256K -G 1
# A plugin that breaks while the sweep runs it, or whose call fails, fails a check (exit 1, after
# the rows it finished); one that cannot be created is bad input (exit 2).
abi="$(dirname "$dmalab")/../tests/plugins"
expect_exit 1 "" -- sweep --collective="$abi/abi_frees_input.so" --backend=sim --topology="$topology" --ranks=2 -b 64K -e 256K -n 2 -w 1
grep -q "^# the all-reduce of 64 KiB (out of place) failed: plugin 'abi_case' broke the ABI's ownership rule" "$tmp/out.txt" || fail "sweep frees_input: $(tail -3 "$tmp/out.txt")"
grep -q '^# status=FAIL$' "$tmp/out.txt" || fail "sweep frees_input status: $(tail -3 "$tmp/out.txt")"
expect_exit 1 "" -- sweep --collective="$abi/abi_all_reduce_fails.so" --backend=sim --topology="$topology" --ranks=2 -b 64K -e 256K -n 2 -w 1
grep -q "^# the all-reduce of 64 KiB (out of place) failed: plugin 'abi_case' failed all_reduce call 1 (explicit form): dtype 0 (bf16) is not supported" "$tmp/out.txt" || fail "sweep all_reduce_fails: $(tail -3 "$tmp/out.txt")"
# ... and so does replay, demo and zoo (a collective_error finding); the zoo goes on with its
# other rows.
expect_exit 1 "" -- replay examples/plugins/persistent_workspace.yaml --collective="$abi/abi_all_reduce_fails.so"
grep -q "^FINDING collective_error: step 3 all_reduce 'embedding' at examples/plugins/persistent_workspace.yaml:[0-9:]*, rank 0: all_reduce 'embedding' at .*: plugin 'abi_case' failed all_reduce call 1 (default form): the default form is not implemented$" "$tmp/out.txt" || fail "replay all_reduce_fails: $(cat "$tmp/out.txt")"
expect_exit 1 "" -- demo --collective="$abi/abi_all_reduce_fails.so" --ranks=2 -b 4K -e 16K
grep -q "the all-reduce failed: plugin 'abi_case' failed all_reduce call 1 (default form)" "$tmp/out.txt" || fail "demo all_reduce_fails: $(cat "$tmp/out.txt")"
# A simulator deadlock in the demo is the collective failing too (exit 1), as in replay.
expect_exit 1 "" -- demo --collective="$abi/abi_waits_forever.so" --ranks=2 -b 4K -e 4K
grep -q "the all-reduce failed: deadlock: work remains but no stream can progress" "$tmp/out.txt" || fail "demo deadlock: $(cat "$tmp/out.txt")"
expect_exit 1 "" -- zoo --collective="$abi/abi_fails_at_world_2.so" --seeds=1 --sizes=1 --quiet
grep -q '^scenarios/mtp_fused_residual_tp4.yaml *1 *0 ' "$tmp/out.txt" || fail "zoo fails_at_world_2, W=4 row: $(cat "$tmp/out.txt")"
grep -q '^tests/zoo/graph_output_freed_tp2.yaml *1 *1 *1 collective_error ' "$tmp/out.txt" || fail "zoo fails_at_world_2, W=2 row: $(cat "$tmp/out.txt")"
grep -q '^sizes/w2_decode.yaml *1 *1 *1 collective_error ' "$tmp/out.txt" || fail "zoo fails_at_world_2, W=2 size row: $(cat "$tmp/out.txt")"
grep -q '^sizes/w8_thresholds.yaml *1 *0 ' "$tmp/out.txt" || fail "zoo fails_at_world_2, W=8 size row: $(cat "$tmp/out.txt")"
grep -q 'status=FAIL$' "$tmp/out.txt" || fail "zoo fails_at_world_2 status: $(tail -2 "$tmp/out.txt")"
# The size-regime family, written out: each file replays on its own.
expect_exit 0 "" -- zoo --write-sizes="$tmp/sizes" --seeds=1 --sizes=0 --quiet
[[ $(ls "$tmp/sizes" | wc -l) -eq 20 ]] || fail "--write-sizes: $(ls "$tmp/sizes")"
expect_exit 0 "" -- replay "$tmp/sizes/w3_decode_graph.yaml" --quiet
grep -q '^expectation: met$' "$tmp/out.txt" || fail "sizes/w3_decode_graph.yaml: $(tail -3 "$tmp/out.txt")"
expect_exit 1 "" -- replay "$tmp/sizes/w4_decode.yaml" --collective="$examples/small_message_spacing.so" --quiet
grep -q "^FINDING rank_inconsistent: step [0-9]* all_reduce 't1.h2048.default' at $tmp/sizes/w4_decode.yaml:" "$tmp/out.txt" || fail "small_message_spacing on w4_decode: $(grep FINDING "$tmp/out.txt" | head -3)"
expect_exit 2 "no device memory for the 2 GiB workspace" -- sweep --collective="$abi/abi_create_fails.so" --backend=sim --topology="$topology" --ranks=2 -b 64K -e 256K -n 2 -w 1
expect_exit 0 "" -- zoo --collective="$examples/fresh_output.so" --seeds=2 --sizes=0 --quiet
grep -q 'status=PASS$' "$tmp/out.txt" || fail "zoo fresh_output: $(tail -3 "$tmp/out.txt")"
grep -q '^tests/zoo/owner_keeps_prequant_i8_tp4.yaml *skipped: wire i8 is the ring' "$tmp/out.txt" || fail "zoo fresh_output i8 row: $(cat "$tmp/out.txt")"
expect_exit 1 "" -- zoo --collective="$examples/persistent_workspace.so" --seeds=2 --sizes=0 --quiet
grep -q '^scenarios/mtp_fused_residual_tp4.yaml *2 *2 *1 ' "$tmp/out.txt" || fail "zoo persistent_workspace: $(cat "$tmp/out.txt")"
# The custom all-reduce under graph capture (register_graph_buffers): rank 0 recording one graph
# buffer more than its peers leaves peer ranges unmapped when the graph runs; the fix passes,
# and both give the same bytes twice.
expect_exit 1 "" -- zoo --collective="$examples/custom_ar_graph_count.so" --seeds=2 --sizes=0 --quiet
grep -q '^examples/plugins/custom_ar.yaml *2 *2 *1 device_error,unmapped_address ' "$tmp/out.txt" || fail "zoo custom_ar_graph_count: $(cat "$tmp/out.txt")"
expect_exit 1 "" -- replay examples/plugins/custom_ar.yaml --collective="$examples/custom_ar_graph_count.so"
grep -q "^FINDING unmapped_address: step 9 launch_graph 'decode' at examples/plugins/custom_ar.yaml:41:5, rank [123]: " "$tmp/out.txt" || fail "custom_ar_graph_count finding: $(grep FINDING "$tmp/out.txt")"
expect_exit 0 "" -- replay examples/plugins/custom_ar.yaml --collective="$examples/custom_ar_graph_count.so" --check-determinism
grep -q '^determinism: seed 1, inject none: two runs gave identical reports' "$tmp/out.txt" || fail "custom_ar_graph_count determinism: $(tail -2 "$tmp/out.txt")"
expect_exit 0 "" -- replay examples/plugins/custom_ar.yaml --collective="$examples/custom_ar.so" --check-determinism
grep -q '^determinism: seed 1, inject none: two runs gave identical reports' "$tmp/out.txt" || fail "custom_ar determinism: $(tail -2 "$tmp/out.txt")"
expect_exit 2 "plugin /nonexistent/x.so: cannot load it" -- replay examples/plugins/persistent_workspace.yaml --collective=/nonexistent/x.so
expect_exit 1 "" -- replay examples/plugins/persistent_workspace.yaml --collective="$examples/persistent_workspace.so"
grep -q 'status=FAIL$' "$tmp/out.txt" || fail "persistent_workspace plugin: $(tail -3 "$tmp/out.txt")"
expect_exit 0 "" -- replay examples/plugins/persistent_workspace.yaml --collective="$examples/fresh_output.so"
grep -q '^collective=plugin:fresh_output device=sim' "$tmp/out.txt" || fail "fresh_output header: $(head -2 "$tmp/out.txt")"
# One size parser for demo and sweep: K/M/G either case, 0 and overflow rejected, bounds named.
expect_exit 2 "-b/--minbytes: size '0' is 0 B; allowed: 1 B to 256 MiB" -- demo -b 0
expect_exit 2 "-b/--minbytes: size '0' is 0 B; allowed: 1 B to 64 GiB" -- sweep -b 0
expect_exit 2 "-e/--maxbytes: size '999999999999G' is more than 2^64 - 1 bytes; allowed: 1 B to 64 GiB" -- sweep -e 999999999999G
expect_exit 2 "-e/--maxbytes: size '1.5M' is not a whole number of bytes with an optional K, M or G suffix" -- demo -e 1.5M
expect_exit 2 "-e/--maxbytes: size '1G' is 1 GiB; allowed: 1 B to 256 MiB" -- demo -e 1G
expect_exit 2 "-b is 2097152 bytes and -e 1048576; need 0 < b <= e" -- demo -b 2M -e 1M
expect_exit 0 "" -- demo -b 1m -e 1m --ranks=2 --json="$tmp/demo.json"
grep -q '^ *1048576 ' "$tmp/out.txt" || fail "demo 1m row: $(cat "$tmp/out.txt")"

# --- exit 1: a check failed, or an expectation not met ----------------------------------------
expect_exit 1 "" -- replay tests/cli/grouped_findings_tp2.yaml --inject=persistent-output
sed 's/    status: PASS/    status: FAIL/' "$scenario" > "$tmp/expects_fail.yaml"
expect_exit 1 "" -- replay "$tmp/expects_fail.yaml"
grep -qx 'pointer_alias=false  retained_mismatches=0 / 0  rank_consistent=true  status=PASS' "$tmp/out.txt" ||
  fail "the run itself passes: $(tail -3 "$tmp/out.txt")"
grep -qx "expectation: NOT met: the run's verdict (collective ring, faults=none) differs from the one the scenario states" "$tmp/out.txt" || fail "expectation line: $(tail -3 "$tmp/out.txt")"
expect_exit 0 "" -- replay "$scenario"
grep -qx 'expectation: met' "$tmp/out.txt" || fail "met expectation: $(tail -3 "$tmp/out.txt")"

# --- the grouped report -------------------------------------------------------------------------
g=tests/cli/grouped_findings_tp2.yaml
"$dmalab" replay "$g" --inject=persistent-output --seed=9 --json="$tmp/g.json" > "$tmp/g.txt"
grep -qx "collective=ring device=sim fidelity=values world=2 wire=bf16 faults=persistent-output seed=5 steps=10 scheduling_seed=9" "$tmp/g.txt" ||
  fail "header: $(sed -n 2p "$tmp/g.txt")"
grep -q "^FINDING pointer_alias: step 5 all_reduce 'again' at $g:24:11, iterations 1-3 of 3, rank 0 (3 findings, first shown): live tensors 'r' (made by all_reduce 'first' at $g:19:5) and 'y' (made by all_reduce 'again' at $g:24:11 \[iteration 1/3\]) share bytes \[0x[0-9a-f]*, 0x[0-9a-f]*) on rank(s) 0,1; storage: 'r' rank 0 " "$tmp/g.txt" ||
  fail "pointer_alias line: $(grep pointer_alias "$tmp/g.txt")"
grep -q "^FINDING retained_mismatch: step 5 all_reduce 'again' at $g:24:11, iteration 1 of 3, ranks 0-1 (2 findings, first shown): retained 'r' (retained by retain at $g:20:5) changed in 128 of 128 elements; first at 0: " "$tmp/g.txt" ||
  fail "retained_mismatch line: $(grep retained_mismatch "$tmp/g.txt")"
# The ERROR SUMMARY counts what the lines list: M lines, N findings in all.
lines=$(grep -c '^FINDING ' "$tmp/g.txt")
sum=$(grep '^FINDING ' "$tmp/g.txt" | sed -n 's/.* (\([0-9,]*\) findings, first shown): .*/\1/p; t; s/.*/1/p' | tr -d , | awk '{s += $1} END {print s}')
grep -qx "ERROR SUMMARY: $sum findings ($lines distinct)" "$tmp/g.txt" ||
  fail "ERROR SUMMARY against $lines lines of $sum findings: $(grep 'ERROR SUMMARY' "$tmp/g.txt")"
# Device findings name their checker and their ranks, and never end with an empty storage.
grep -q '^FINDING device_checker' "$tmp/g.txt" && fail "device finding without its checker"
grep -q 'storage: *$' "$tmp/g.txt" && fail "a finding ends with an empty storage"
grep -q "^FINDING use-after-free: .*, ranks 0-1 (" "$tmp/g.txt" || fail "device findings on both ranks"
tail -1 "$tmp/g.txt" | grep -qx 'expectation: met' || fail "expectation: $(tail -1 "$tmp/g.txt")"
sed -n '$!{h};${x;p}' "$tmp/g.txt" | grep -qx 'pointer_alias=true  retained_mismatches=128 / 128  rank_consistent=true  status=FAIL' ||
  fail "summary line: $(tail -3 "$tmp/g.txt")"

# --- JSON of every command: schema, schema version, tool version, scheduling seed -------------
topo=scenarios/topologies/h200_virtual_ranks.yaml
"$dmalab" plan --ranks=2 --elems=64 --json="$tmp/plan.json" > /dev/null || fail "plan --json"
(cd "$tmp" && "$dmalab" zoo --seeds=1 --sizes=0 --json="$tmp/zoo.json" > "$tmp/zoo.txt") || fail "zoo from $tmp: $(cat "$tmp/zoo.txt")"
"$dmalab" sweep --backend=sim --fidelity=shadow -c 0 --topology="$topo" --csv="$tmp/sweep.csv" \
  --json="$tmp/sweep.json" > "$tmp/sweep.txt" || fail "sweep: $(cat "$tmp/sweep.txt")"
"$dmalab" replay tests/zoo/inplace_then_add_tp3.yaml --seeds=2 --json="$tmp/seeds.json" > /dev/null ||
  fail "replay --seeds --json"
/usr/bin/python3 - "$tmp" "$version" <<'PY' || fail "JSON fields"
import json, sys
d, version = sys.argv[1], sys.argv[2]
def load(name, command):
    j = json.load(open(f"{d}/{name}.json"))
    assert j["schema"] == f"dmalab.{command}", (name, j["schema"])
    assert j["schema_version"] == 1, (name, j["schema_version"])
    assert j["tool"] == "dmalab" and j["tool_version"] == version, (name, j["tool_version"])
    return j
g = load("g", "replay")
assert g["scheduling_seed"] == 9 and g["seed"] == 5, (g["scheduling_seed"], g["seed"])
assert g["summary"]["status"] == "FAIL" and g["expectation"] == {"stated": True, "met": True, "differences": []}
groups = g["finding_groups"]
assert g["findings_distinct"] == len(groups) and sum(x["count"] for x in groups) == g["findings_total"]
alias = [x for x in groups if x["checker"] == "pointer_alias"]
assert len(alias) == 1 and alias[0]["count"] == 3 and alias[0]["ranks"] == [0], alias
assert alias[0]["iteration_ranges"] == [[1, 3]] and alias[0]["iterations"] == 3, alias
for f in g["findings"]:
    if f["kind"] == "device_checker":
        assert f["checker"] in ("use-after-free", "use-after-reuse", "race"), f["checker"]
        assert f["storage"] and f["storage"][0]["rank"] == f["rank"], f
demo = load("demo", "demo")
assert demo["scheduling_seed"] == 1 and demo["status"] == "PASS"
assert [r["size_bytes"] for r in demo["rows"]] == [1048576] and demo["rows"][0]["wrong"] == 0
plan = load("plan", "plan")
assert plan["world"] == 2 and plan["elems"] == 64 and len(plan["ranks"]) == 2
zoo = load("zoo", "zoo")
assert zoo["seeds"] == 1 and zoo["status"] == "PASS" and len(zoo["clean"]) == 6
assert zoo["backend"] == "sim" and zoo["perturb"] is None and zoo["sizes"] == [], zoo["sizes"]
sweep = load("sweep", "sweep")
assert sweep["scheduling_seed"] == 1
# The defaults docs/cli.md states: -b 1M -e 16M -f 2 -n 20 -w 5.
assert (sweep["min_bytes"], sweep["max_bytes"], sweep["factor"]) == (1 << 20, 16 << 20, 2)
assert (sweep["iters"], sweep["warmup"]) == (20, 5)
assert [r["size_bytes"] for r in sweep["rows"]] == [1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20]
seeds = load("seeds", "replay")
assert seeds["mode"] == "seeds" and seeds["seeds"] == 2 and seeds["failing"] == []
PY
readme_sweep=$(grep -o '^dmalab sweep .*' docs/cli.md | head -1)
for d in "-b 1M" "-e 16M" "-f 2" "-n 20" "-w 5" "-c 1" "-G 0"; do
  [[ "$readme_sweep" == *"[$d]"* ]] || fail "docs/cli.md's sweep line lacks [$d]: $readme_sweep"
done

# --- --jobs: seeds on several threads, the same report for any number ----------------------------
expect_exit 2 "--jobs means nothing without --seeds or --check-determinism" -- replay "$scenario" --jobs=2
expect_exit 2 "--jobs: value '0' is out of range; allowed: 1 to 4096" -- zoo --jobs=0
# Times (a number of seconds) are the only bytes that may differ.
untimed() { sed -E 's/ *[0-9]+\.[0-9]+( s,|$)/ T\1/g' "$1"; }
for jobs in 1 3; do
  "$dmalab" zoo --seeds=3 --jobs=$jobs --quiet > "$tmp/zoo.$jobs.txt" || fail "zoo --jobs=$jobs: $(tail -2 "$tmp/zoo.$jobs.txt")"
  "$dmalab" replay scenarios/explicit_outputs_tp3.yaml --inject=drop-copy-wait --seeds=6 --jobs=$jobs \
    --quiet > "$tmp/seeds.$jobs.txt"
  [[ $? -eq 1 ]] || fail "replay --seeds --jobs=$jobs: $(tail -2 "$tmp/seeds.$jobs.txt")"
done
cmp -s <(untimed "$tmp/zoo.1.txt") <(untimed "$tmp/zoo.3.txt") ||
  fail "zoo reports differ with --jobs: $(diff <(untimed "$tmp/zoo.1.txt") <(untimed "$tmp/zoo.3.txt"))"
cmp -s <(untimed "$tmp/seeds.1.txt") <(untimed "$tmp/seeds.3.txt") ||
  fail "replay --seeds reports differ with --jobs: $(diff "$tmp/seeds.1.txt" "$tmp/seeds.3.txt")"
grep -q '^seed=1 FAIL' "$tmp/seeds.3.txt" || fail "replay --seeds --jobs=3: $(head -3 "$tmp/seeds.3.txt")"
expect_exit 0 "" -- replay "$scenario" --check-determinism --jobs=2
grep -q '^determinism: seed 3, inject none: two runs gave identical reports' "$tmp/out.txt" ||
  fail "check-determinism --jobs=2: $(cat "$tmp/out.txt")"

# --- zoo finds its files from anywhere, and says where it looked --------------------------------
expect_exit 2 "looked in: /nonexistent (--root)" -- zoo --seeds=1 --sizes=0 --root=/nonexistent
DMALAB_ROOT=/nonexistent "$dmalab" zoo --seeds=1 --sizes=0 > /dev/null 2> "$tmp/err.txt"
[[ $? -eq 2 ]] && grep -qF 'looked in: /nonexistent ($DMALAB_ROOT)' "$tmp/err.txt" ||
  fail "DMALAB_ROOT: $(cat "$tmp/err.txt")"
grep -q 'status=PASS$' "$tmp/zoo.txt" || fail "zoo run from elsewhere: $(tail -2 "$tmp/zoo.txt")"

# --- progress: on a terminal only, never with --quiet -----------------------------------------
"$dmalab" replay "$g" 2> "$tmp/err.txt" > /dev/null
[[ ! -s "$tmp/err.txt" ]] || fail "progress written to a pipe: $(cat -v "$tmp/err.txt")"
/usr/bin/python3 - "$dmalab" "$g" <<'PY' || fail "progress on a terminal"
import os, pty, sys
def run(*args):
    out = b""
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(sys.argv[1], [sys.argv[1], *args])
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.waitpid(pid, 0)
    return out
shown = run("replay", sys.argv[2])
assert b"\rreplay [####################] 10/10 steps" in shown, shown[-400:]
assert b"\rreplay [" not in run("replay", sys.argv[2], "--quiet")
PY
# --- the first hour's surprises -----------------------------------------------------------------
# The demo holds each size's output across the next call, as the founding incident holds its
# residual: the persistent-output fault (outputs are views of one workspace) is caught.
expect_exit 1 "" -- demo --inject=persistent-output --ranks=2 -b 4K -e 16K -f 4
grep -qx '       16384 the 4096 B output, held across this call, changed in 4096 of 4096 elements and shares bytes with this call'"'"'s output on rank(s) 0,1' "$tmp/out.txt" ||
  fail "demo persistent-output: $(cat "$tmp/out.txt")"
grep -qx 'status=FAIL' "$tmp/out.txt" || fail "demo persistent-output status: $(tail -1 "$tmp/out.txt")"
expect_exit 1 "" -- demo --inject=persistent-output
expect_exit 0 "" -- demo --ranks=2 -b 4K -e 16K -f 4 --json="$tmp/demo_held.json"
! grep -q 'held across this call' "$tmp/out.txt" || fail "demo without a fault: $(cat "$tmp/out.txt")"
python3 - "$tmp/demo_held.json" <<'PY' || fail "demo held keys"
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
assert [(r["held_changed"], r["held_aliased"]) for r in rows] == [(None, None), (0, False)], rows
PY
# A library's own prefix is not repeated after the command's.
expect_exit 2 "dmalab plan: elems is 100; must be a positive multiple of world*8 = 24" -- plan --ranks=3 --elems=100
! grep -q 'plan: plan:' "$tmp/err.txt" || fail "plan prefix: $(cat "$tmp/err.txt")"
# A sweep it refuses prints no table header, and names itself once.
topo=scenarios/topologies/h200_virtual_ranks.yaml
expect_exit 2 "dmalab sweep: -G needs -w >= 1" -- sweep --backend=sim --topology="$topo" -G 1 -w 0
[[ ! -s "$tmp/out.txt" ]] || fail "refused sweep wrote stdout: $(cat "$tmp/out.txt")"
! grep -q 'sweep: sweep:' "$tmp/err.txt" || fail "sweep prefix: $(cat "$tmp/err.txt")"
expect_exit 2 "dmalab sweep: -c 1 compares results with the exact sum, but device 'sim' runs in the shadow fidelity" -- sweep --backend=sim --topology="$topo" --fidelity=shadow -c 1
[[ ! -s "$tmp/out.txt" ]] || fail "refused shadow sweep wrote stdout: $(cat "$tmp/out.txt")"
# A mistyped flag: the closest one the command takes.
expect_exit 2 "flag '--rank=3' means nothing to demo (did you mean --ranks?); its flags:" -- demo --rank=3
expect_exit 2 "flag '--seed=3' means nothing to zoo (did you mean --seeds?); its flags:" -- zoo --seed=3
expect_exit 2 "flag '--minbyte 1M' means nothing to sweep (did you mean --minbytes?); its flags:" -- sweep --minbyte 1M
expect_exit 2 "flag '--no-such-flag' means nothing to demo; its flags:" -- demo --no-such-flag
# The native wire of an fp16 scenario is fp16; its integer fill too large to sum exactly over the
# ranks is a located warning (the run itself goes on).
cat > "$tmp/fp16.yaml" <<'YAML'
world: 2
dtype: fp16
tensors: {x: [64], y: [64]}
steps:
  - fill: {tensor: x, kind: int, lo: -2000, hi: 3}
  - all_reduce: {input: x, result: y}
YAML
expect_exit 0 "" -- replay "$tmp/fp16.yaml"
grep -q '^collective=ring device=sim fidelity=values world=2 wire=fp16 ' "$tmp/out.txt" ||
  fail "fp16 wire: $(sed -n 2p "$tmp/out.txt")"
[[ "$(cat "$tmp/err.txt")" == "dmalab replay: warning: $tmp/fp16.yaml:6:25: field 'steps[1].all_reduce.input': tensor 'x' holds the integers of the fill at $tmp/fp16.yaml:5:5, up to 2000 in magnitude; their sum over 2 ranks reaches 4000, past fp16's exact integer range (2048), so this all-reduce's output is not checked against its exact sum (wrong_sum); fill within 1024 (2048 / 2) to have it checked" ]] ||
  fail "fp16 fill warning: $(cat "$tmp/err.txt")"
expect_exit 0 "" -- plan --dtype=fp16
grep -q '^ring plan: world=4 elems=4096 dtype=fp16 wire=fp16 ' "$tmp/out.txt" || fail "plan fp16 wire: $(head -1 "$tmp/out.txt")"
# An unmet expectation names the collective under test as what failed.
expect_exit 1 "" -- replay tests/cli/grouped_findings_tp2.yaml --collective="$examples/persistent_workspace.so"
grep -qx 'expectation: NOT met: the collective under test (plugin:persistent_workspace) fails this scenario, which states PASS for faults=none: a bug of the collective, shown by the findings above' "$tmp/out.txt" ||
  fail "plugin expectation line: $(tail -3 "$tmp/out.txt")"

echo "CLI: all checks passed"
