#!/usr/bin/env bash
# Command-line behaviour of `dmalab replay`: verdict lines and exit statuses of the founding
# incident, output hashes unchanged by the fault, bad input exits 2, --json and --dump.
set -uo pipefail
dmalab="$1"
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

scenario=scenarios/glm52_tp4_layer0_residual.yaml
"$dmalab" replay "$scenario" --inject=persistent-output --json="$tmp/bad.json" > "$tmp/bad.txt"
[[ $? -eq 1 ]] || fail "persistent-output must exit 1"
grep -qx 'pointer_alias=true  retained_mismatches=16,803,840 / 16,803,840  rank_consistent=true  status=FAIL' "$tmp/bad.txt" ||
  fail "persistent-output summary: $(tail -3 "$tmp/bad.txt")"
"$dmalab" replay "$scenario" > "$tmp/good.txt"
[[ $? -eq 0 ]] || fail "clean replay must exit 0"
grep -qx 'pointer_alias=false  retained_mismatches=0 / 16,803,840  rank_consistent=true  status=PASS' "$tmp/good.txt" ||
  fail "clean summary: $(tail -3 "$tmp/good.txt")"
diff <(grep -o 'hash=xxh64:[0-9a-f]*' "$tmp/bad.txt") <(grep -o 'hash=xxh64:[0-9a-f]*' "$tmp/good.txt") ||
  fail "output hashes differ between the runs"
[[ $(grep -c 'hash=xxh64:' "$tmp/good.txt") -eq 2 ]] || fail "expected two all-reduce hashes"
grep -q '"status": *"FAIL"' "$tmp/bad.json" || fail "JSON report lacks status FAIL"

"$dmalab" replay does/not/exist.yaml > /dev/null 2> "$tmp/err.txt"
[[ $? -eq 2 ]] || fail "a missing file must exit 2"
"$dmalab" replay "$scenario" --inject=no-such-fault > /dev/null 2> "$tmp/err.txt"
[[ $? -eq 2 ]] || fail "an unknown fault must exit 2"
grep -q "fault 'no-such-fault' is not known; allowed: persistent-output" "$tmp/err.txt" ||
  fail "unknown fault message: $(cat "$tmp/err.txt")"
"$dmalab" replay "$scenario" --backend=tpu > /dev/null 2> "$tmp/err.txt"
[[ $? -eq 2 ]] || fail "an unknown backend must exit 2"

"$dmalab" replay tests/cli/live_at_end.yaml --dump="$tmp/dump" > /dev/null || fail "dump replay"
for f in x.rank0 x.rank1 y.rank0 y.rank1; do [[ -s "$tmp/dump/$f.npy" ]] || fail "no $f.npy"; done
/usr/bin/python3 - "$tmp/dump" <<'PY' || fail "npy contents"
import sys, numpy as np
d = sys.argv[1]
x0, x1 = np.load(f"{d}/x.rank0.npy"), np.load(f"{d}/x.rank1.npy")
y0, y1 = np.load(f"{d}/y.rank0.npy"), np.load(f"{d}/y.rank1.npy")
assert x0.dtype == np.float32 and x0.shape == (4, 32), (x0.dtype, x0.shape)
assert np.array_equal(y0, x0 + x1) and np.array_equal(y1, y0), "y is not the exact sum"
assert np.all(x0 == np.round(x0)) and x0.min() >= -8 and x0.max() <= 8
PY
# Seed sweeps and determinism.
zoo=tests/zoo/inplace_then_add_tp3.yaml
"$dmalab" replay "$zoo" --seeds=5 > "$tmp/seeds.txt" || fail "clean seed sweep must exit 0"
grep -q '^seeds 1\.\.5: 0 failing, inject none, .* status=PASS$' "$tmp/seeds.txt" ||
  fail "seed sweep summary: $(cat "$tmp/seeds.txt")"
"$dmalab" replay "$zoo" --seeds=3 --inject=inplace-alias-ring > "$tmp/seeds_bad.txt"
[[ $? -eq 1 ]] || fail "a failing seed sweep must exit 1"
[[ $(grep -c '^seed=[123] FAIL' "$tmp/seeds_bad.txt") -eq 3 ]] || fail "failing seeds: $(cat "$tmp/seeds_bad.txt")"
grep -q '3 failing (first seed 1)' "$tmp/seeds_bad.txt" || fail "failing summary"
"$dmalab" replay "$scenario" --check-determinism --seed=7 --inject=drop-copy-wait > "$tmp/det.txt" ||
  fail "determinism: $(cat "$tmp/det.txt")"
grep -q '^determinism: seed 7, inject drop-copy-wait: two runs gave identical reports' "$tmp/det.txt" ||
  fail "determinism line: $(cat "$tmp/det.txt")"
"$dmalab" replay "$zoo" --check-determinism --backend=hw > /dev/null 2> "$tmp/err.txt"
[[ $? -eq 2 ]] || fail "--check-determinism on hw must exit 2"
grep -q -- "--check-determinism means nothing without --backend=sim" "$tmp/err.txt" || fail "determinism on hw: $(cat "$tmp/err.txt")"


# The shadow fidelity: the founding incident's verdicts, provenance hashes, and what it refuses.
"$dmalab" replay "$scenario" --fidelity=shadow --inject=persistent-output > "$tmp/shadow_bad.txt"
[[ $? -eq 1 ]] || fail "shadow persistent-output must exit 1"
grep -qx 'pointer_alias=true  retained_mismatches=16,803,840 / 16,803,840  rank_consistent=true  status=FAIL' "$tmp/shadow_bad.txt" ||
  fail "shadow persistent-output summary: $(tail -3 "$tmp/shadow_bad.txt")"
"$dmalab" replay "$scenario" --fidelity=shadow > "$tmp/shadow_good.txt" || fail "shadow clean replay must exit 0"
grep -q '^collective=ring device=sim fidelity=shadow ' "$tmp/shadow_good.txt" || fail "shadow header: $(head -2 "$tmp/shadow_good.txt")"
[[ $(grep -c 'hash=provenance:' "$tmp/shadow_good.txt") -eq 2 ]] || fail "expected two provenance hashes"
diff <(grep -o 'hash=provenance:[0-9a-f]*' "$tmp/shadow_bad.txt") <(grep -o 'hash=provenance:[0-9a-f]*' "$tmp/shadow_good.txt") ||
  fail "provenance hashes differ between the runs"
"$dmalab" replay "$scenario" --fidelity=exact > /dev/null 2> "$tmp/err.txt"
[[ $? -eq 2 ]] || fail "an unknown fidelity must exit 2"
grep -q "fidelity: value 'exact' is not known; allowed: values, shadow" "$tmp/err.txt" || fail "fidelity message: $(cat "$tmp/err.txt")"
"$dmalab" replay "$scenario" --fidelity=shadow --backend=hw > /dev/null 2> "$tmp/err.txt"
[[ $? -eq 2 ]] || fail "shadow on hw must exit 2"
"$dmalab" replay tests/cli/live_at_end.yaml --fidelity=shadow --dump="$tmp/dump2" > /dev/null 2> "$tmp/err.txt"
[[ $? -eq 2 ]] || fail "shadow --dump must exit 2"
grep -q "shadow fidelity keeps none" "$tmp/err.txt" || fail "shadow dump message: $(cat "$tmp/err.txt")"
"$dmalab" replay "$zoo" --seeds=3 --fidelity=shadow --inject=inplace-alias-ring > "$tmp/seeds_shadow.txt"
[[ $? -eq 1 ]] || fail "a failing shadow seed sweep must exit 1"
grep -q 'fidelity shadow, .* status=FAIL$' "$tmp/seeds_shadow.txt" || fail "shadow sweep: $(cat "$tmp/seeds_shadow.txt")"
echo "replay CLI: all checks passed"
