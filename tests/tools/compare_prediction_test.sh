#!/usr/bin/env bash
# tools/compare_prediction.py on hand-made CSVs: the exact table, the limit's exit status, and
# located errors with exit status 2.
set -uo pipefail
script="$1"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
printf 'size_bytes,oop_time_us\n4096,10\n1048576,100\n2097152,200\n' > "$dir/hw.csv"
printf 'size_bytes,oop_time_us,backend\n4096,20,sim\n1048576,110,sim\n2097152,170,sim\n8388608,9,sim\n' \
  > "$dir/sim.csv"
expected='| size | measured (us) | predicted (us) | predicted / measured | error |
|---|---|---|---|---|
| 4 KiB | 10 | 20 | 2.000 | +100.0% |
| 1 MiB | 100 | 110 | 1.100 | +10.0% |
| 2 MiB | 200 | 170 | 0.850 | -15.0% |

largest error from 1 MiB up: 15.0%'
out="$(python3 "$script" "$dir/hw.csv" "$dir/sim.csv" --limit 16)" || fail "limit 16 exited $?"
[[ "$out" == "$expected" ]] || fail "table differs:
$out"
python3 "$script" "$dir/hw.csv" "$dir/sim.csv" --limit 14 > /dev/null
[[ $? -eq 1 ]] || fail "limit 14 must exit 1"
# From 4 KiB up the 4 KiB row counts: 100% off.
out="$(python3 "$script" "$dir/hw.csv" "$dir/sim.csv" --min-bytes 4096 | tail -1)"
[[ "$out" == "largest error from 4 KiB up: 100.0%" ]] || fail "min-bytes: $out"
printf 'size_bytes,oop_time_us\n1048576,fast\n' > "$dir/bad.csv"
err="$(python3 "$script" "$dir/bad.csv" "$dir/sim.csv" 2>&1 >/dev/null)"
status=$?
[[ $status -eq 2 ]] || fail "bad CSV must exit 2, exited $status"
[[ "$err" == "compare_prediction: $dir/bad.csv:2: size_bytes '1048576' and oop_time_us 'fast' must be an integer and a number" ]] \
  || fail "bad CSV message: $err"
err="$(python3 "$script" "$dir/missing.csv" "$dir/sim.csv" 2>&1 >/dev/null)"
[[ "$err" == "compare_prediction: $dir/missing.csv: No such file or directory" ]] \
  || fail "missing file message: $err"
echo "compare_prediction_test: all passed"
