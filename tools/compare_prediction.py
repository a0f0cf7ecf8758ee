#!/usr/bin/env python3
"""Compares a measured `dmalab sweep` CSV with the simulator's prediction of the same sweep.

usage: tools/compare_prediction.py MEASURED.csv PREDICTED.csv [--min-bytes N] [--limit PCT]

Prints a Markdown table, one row per size present in both: measured and predicted out-of-place
time (us), their ratio predicted / measured and the error in percent. With --limit, exits 1
when any size of at least --min-bytes (default 1 MiB) is off by more than PCT percent; exits 2
on unreadable input. Needs only the standard library.
"""
import argparse
import csv
import sys


def fail(message):
    print(f"compare_prediction: {message}", file=sys.stderr)
    sys.exit(2)


def times(path):
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    if not rows or "size_bytes" not in rows[0] or "oop_time_us" not in rows[0]:
        fail(f"{path}: needs a header with columns size_bytes and oop_time_us, and rows")
    out = {}
    for line, r in enumerate(rows, start=2):
        try:
            size, us = int(r["size_bytes"]), float(r["oop_time_us"])
        except (TypeError, ValueError):
            fail(f"{path}:{line}: size_bytes '{r['size_bytes']}' and oop_time_us "
                 f"'{r['oop_time_us']}' must be an integer and a number")
        if size <= 0 or not us > 0:
            fail(f"{path}:{line}: size_bytes {size} and oop_time_us {us} must be > 0")
        out[size] = us
    return out


def size_text(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("measured")
    p.add_argument("predicted")
    p.add_argument("--min-bytes", type=int, default=1 << 20)
    p.add_argument("--limit", type=float, default=None)
    a = p.parse_args()
    measured, predicted = times(a.measured), times(a.predicted)
    sizes = sorted(set(measured) & set(predicted))
    if not sizes:
        fail("the two CSVs share no size")
    print("| size | measured (us) | predicted (us) | predicted / measured | error |")
    print("|---|---|---|---|---|")
    worst = 0.0
    for s in sizes:
        m, q = measured[s], predicted[s]
        err = (q - m) / m * 100
        if s >= a.min_bytes:
            worst = max(worst, abs(err))
        print(f"| {size_text(s)} | {m:.0f} | {q:.0f} | {q / m:.3f} | {err:+.1f}% |")
    print(f"\nlargest error from {size_text(a.min_bytes)} up: {worst:.1f}%")
    if a.limit is not None and worst > a.limit:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
