"""The founding bug: an all-reduce whose default output is a view of one persistent workspace.

`all_reduce(inp)` hands back `workspace[:n]`, so every default-form result aliases every other:
the next call overwrites a result the caller still holds (a transformer's layer-0 residual,
overwritten by the o_proj all-reduce). The fix is empty_like_fix.py.
"""

import torch

from examples.torch.common import sum_into


class PersistentWorkspaceAllReduce:

    def __init__(self, group, device, max_bytes=64 << 20):
        self.group = group
        # One workspace, allocated once, reused by every call.
        self.workspace = torch.empty(max_bytes, dtype=torch.uint8, device=device)

    def all_reduce(self, inp, out=None):
        if out is None:
            nbytes = inp.numel() * inp.element_size()
            if nbytes > self.workspace.numel():
                raise ValueError(f"input of {nbytes} bytes exceeds the {self.workspace.numel()}"
                                 "-byte workspace")
            out = self.workspace[:nbytes].view(inp.dtype).view(inp.shape)  # the bug
        return sum_into(inp, out, self.group)


def make(rank, world, device, group):
    return PersistentWorkspaceAllReduce(group, device)
