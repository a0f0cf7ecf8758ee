#!/usr/bin/python3
"""Plots `dmalab sweep` CSVs: bus bandwidth and time against size (docs/bandwidth.md).

usage: /usr/bin/python3 tools/plot_bandwidth.py MEASURED.csv [MEASURED.csv ...]
           [--sim LABEL=SIM.csv] [--baseline LABEL=BASE.csv] [--ceiling auto|on|off]
           [--title TEXT] --out PREFIX

Each measured CSV adds its out-of-place busbw and its speed of light (busbw a ring of sol_us
would reach). On one GPU (virtual ranks) the bf16 ring cannot pass 4/9 of its speed of light:
the speed of light counts only the ring's copies, 4(W-1) chunk-sized HBM transfers (2(W-1)
copies, each read and written), while the ring also adds (3(W-1): two reads, one write) and
places (2(W-1)) through the same HBM, 9(W-1) in all. That ceiling is drawn for such CSVs
(--ceiling auto: the CSV's gpus column is 1, ranks > 1 and wire bf16; on: every bf16 CSV, for
CSVs written before the gpus column; off: never). --sim adds a simulator sweep's out-of-place busbw as the prediction. --baseline
adds any CSV with a size column (size_bytes or size) and a busbw column (oop_busbw_gbps,
busbw_gbps or busbw) and optionally a time column (oop_time_us, time_us or time); a column
named nccl_busbw_gbps in a measured CSV is plotted as an NCCL line too. Writes PREFIX.png and
PREFIX.svg: busbw against size (log x), and time against size (log-log).
"""
import argparse
import csv
import itertools
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SIZE_COLUMNS = ("size_bytes", "size")
BUSBW_COLUMNS = ("oop_busbw_gbps", "busbw_gbps", "busbw")
TIME_COLUMNS = ("oop_time_us", "time_us", "time")
# HBM traffic of the ring's copies over all its traffic on one GPU: 4(W-1) / 9(W-1).
ONE_GPU_CEILING = 4.0 / 9.0


def read_rows(path):
    with open(path, newline="") as f:
        return [row for row in csv.DictReader(f) if row]


def column(rows, names, path, required=True):
    """The first of `names` present in the CSV, as floats (None for empty cells)."""
    for name in names:
        if rows and name in rows[0]:
            return [float(r[name]) if r[name] not in ("", None) else None for r in rows]
    if required:
        sys.exit("plot_bandwidth: %s has none of the columns %s" % (path, ", ".join(names)))
    return None


def ceiling_busbw(rows, mode):
    """4/9 of each row's speed-of-light busbw where the one-GPU ceiling applies, else None."""
    if mode == "off" or not rows or "sol_busbw_gbps" not in rows[0]:
        return None
    if any(r.get("wire") != "bf16" for r in rows):
        return None
    if mode == "auto":
        one_gpu = all(r.get("gpus") == "1" and int(r.get("ranks") or 0) > 1 for r in rows)
        if not one_gpu:
            return None
    return [float(r["sol_busbw_gbps"]) * ONE_GPU_CEILING if r["sol_busbw_gbps"] else None
            for r in rows]


def labelled(spec):
    label, sep, path = spec.partition("=")
    if not sep:
        label, path = os.path.splitext(os.path.basename(spec))[0], spec
    return label, path


def size_label(x, _pos=None):
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if x >= div:
            return "%g%s" % (x / div, unit)
    return "%g" % x


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("measured", nargs="+", help="dmalab sweep CSVs (hw or sim)")
    p.add_argument("--sim", action="append", default=[], help="LABEL=CSV: simulator prediction")
    p.add_argument("--baseline", action="append", default=[], help="LABEL=CSV: e.g. NCCL")
    p.add_argument("--ceiling", choices=("auto", "on", "off"), default="auto",
                   help="draw 4/9 of the speed of light where one GPU holds all ranks")
    p.add_argument("--title", default="DMA ring all-reduce")
    p.add_argument("--out", required=True, help="output prefix: writes PREFIX.png, PREFIX.svg")
    a = p.parse_args()

    fig, (bw_ax, t_ax) = plt.subplots(1, 2, figsize=(13, 5))
    lines = []  # (label, sizes, busbw, time, style, color)
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colors = itertools.cycle(palette)
    for spec in a.measured:
        color = next(colors)  # a measured line and its speed of light share a color
        label, path = labelled(spec)
        rows = read_rows(path)
        sizes = column(rows, SIZE_COLUMNS, path)
        lines.append((label, sizes, column(rows, BUSBW_COLUMNS, path),
                      column(rows, TIME_COLUMNS, path), "o-", color))
        sol_bw = column(rows, ("sol_busbw_gbps",), path, required=False)
        if sol_bw:
            lines.append((label + " speed of light", sizes, sol_bw,
                          column(rows, ("sol_us",), path, required=False), "--", color))
        ceiling = ceiling_busbw(rows, a.ceiling)
        if ceiling:
            lines.append((label + " one-GPU ceiling: 4/9 of speed of light", sizes, ceiling, None,
                          ":", color))
        nccl = column(rows, ("nccl_busbw_gbps",), path, required=False)
        if nccl:
            lines.append((label + " NCCL", sizes, nccl,
                          column(rows, ("nccl_time_us",), path, required=False), "s-",
                          next(colors)))
    for spec, style in [(s, "^:") for s in a.sim] + [(s, "s-.") for s in a.baseline]:
        label, path = labelled(spec)
        rows = read_rows(path)
        lines.append((label, column(rows, SIZE_COLUMNS, path), column(rows, BUSBW_COLUMNS, path),
                      column(rows, TIME_COLUMNS, path, required=False), style, next(colors)))

    for label, sizes, busbw, time, style, color in lines:
        pts = [(s, b) for s, b in zip(sizes, busbw) if b is not None]
        bw_ax.plot([s for s, _ in pts], [b for _, b in pts], style, color=color, label=label,
                   markersize=4)
        if time:
            pts = [(s, t) for s, t in zip(sizes, time) if t is not None]
            t_ax.plot([s for s, _ in pts], [t for _, t in pts], style, color=color, label=label,
                      markersize=4)
    bw_ax.set_xscale("log", base=2)
    bw_ax.set_ylabel("bus bandwidth (GB/s)")
    bw_ax.set_ylim(bottom=0)
    t_ax.set_xscale("log", base=2)
    t_ax.set_yscale("log")
    t_ax.set_ylabel("time per all-reduce (us)")
    for ax in (bw_ax, t_ax):
        ax.set_xlabel("size (bytes)")
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(size_label))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    bw_ax.set_title(a.title + ": busbw")
    t_ax.set_title(a.title + ": time")
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig("%s.%s" % (a.out, ext), dpi=120)
    print("plot_bandwidth: wrote %s.png and %s.svg" % (a.out, a.out))


if __name__ == "__main__":
    main()
