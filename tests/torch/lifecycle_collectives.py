"""Collectives that misbehave as processes, for the harness's lifecycle tests (issue 25, item 9):
factories for --collective. Importing this module is harmless; `sleepy_module` sleeps at import.
"""

import ctypes
import os
import time

import torch

from examples.torch.common import sum_into


class _Sum:

    def __init__(self, group):
        self.group = group

    def all_reduce(self, inp, out=None):
        out = torch.empty_like(inp) if out is None else out
        sum_into(inp, out, self.group)
        return out


class _Stuck(_Sum):
    """Never returns from a call: an hour in C code that holds the interpreter lock, so no
    thread of the worker's own runs either (its watch on the harness included)."""

    def all_reduce(self, inp, out=None):
        ctypes.PyDLL(None).sleep(3600)


def forks_a_child(rank, world, device, group):
    """A correct collective that forks a child which sleeps for an hour; rank 0's child writes
    its pid to $DMALAB_TEST_CHILD_PID."""
    child = os.fork()
    if child == 0:
        time.sleep(3600)
        os._exit(0)
    path = os.environ.get("DMALAB_TEST_CHILD_PID")
    if rank == 0 and path:
        with open(path, "w") as f:
            f.write(f"{child}\n")
    return _Sum(group)


def stuck_in_c(rank, world, device, group):
    return _Stuck(group)
