#!/usr/bin/python3
"""tools/plot_bandwidth.py's one-GPU ceiling: 4/9 of the speed of light, only where it applies."""
import importlib.util
import sys

spec = importlib.util.spec_from_file_location("plot_bandwidth", sys.argv[1])
plot = importlib.util.module_from_spec(spec)
spec.loader.exec_module(plot)


def row(wire="bf16", gpus="1", ranks="4", sol="90"):
    return {"wire": wire, "gpus": gpus, "ranks": ranks, "sol_busbw_gbps": sol}


failures = []


def expect(got, want, what):
    if got != want:
        failures.append("%s: got %r, want %r" % (what, got, want))


# 90 * 4 / 9 = 40 and 450 * 4 / 9 = 200, both exact in binary floating point.
expect(plot.ceiling_busbw([row(sol="90"), row(sol="450")], "auto"), [40.0, 200.0],
       "one GPU, 4 ranks, bf16")
expect(plot.ceiling_busbw([row(gpus="2")], "auto"), None, "two GPUs")
expect(plot.ceiling_busbw([row(ranks="1")], "auto"), None, "one rank")
expect(plot.ceiling_busbw([row(wire="i8_ring")], "auto"), None, "compressed wire")
expect(plot.ceiling_busbw([row(wire="i8_ring")], "on"), None, "compressed wire, forced")
expect(plot.ceiling_busbw([row()], "off"), None, "off")
old = {"wire": "bf16", "ranks": "4", "sol_busbw_gbps": "90"}  # a CSV without the gpus column
expect(plot.ceiling_busbw([old], "auto"), None, "no gpus column, auto")
expect(plot.ceiling_busbw([old], "on"), [40.0], "no gpus column, on")
if failures:
    sys.exit("plot_ceiling_test:\n  " + "\n  ".join(failures))
print("plot_ceiling_test: ok")
