"""The fix of the founding bug: the default output is a fresh tensor, torch.empty_like(inp)."""

import torch

from examples.torch.common import sum_into


class EmptyLikeAllReduce:

    def __init__(self, group):
        self.group = group

    def all_reduce(self, inp, out=None):
        if out is None:
            out = torch.empty_like(inp)  # the caller owns it
        return sum_into(inp, out, self.group)


def make(rank, world, device, group):
    return EmptyLikeAllReduce(group)
