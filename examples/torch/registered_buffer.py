"""A collective that returns its cached registered buffer for inputs that fit it.

The class of vLLM#58154: a custom all-reduce registers one buffer (here 8 MiB, vLLM's default
custom all-reduce size limit) for its fast path and, for inputs that fit, returns a view of that
buffer as the result; larger inputs fall back to a fresh output. A caller that keeps a small
result across the next call sees it overwritten. Large-tensor scenarios (the 33.6 MB founding
incident) pass; decode-sized ones and the recorded small model fail.
"""

import torch

from examples.torch.common import sum_into


class RegisteredBufferAllReduce:

    def __init__(self, group, device, registered_bytes=8 << 20):
        self.group = group
        self.buffer = torch.empty(registered_bytes, dtype=torch.uint8, device=device)

    def all_reduce(self, inp, out=None):
        if out is None:
            nbytes = inp.numel() * inp.element_size()
            if nbytes <= self.buffer.numel():
                out = self.buffer[:nbytes].view(inp.dtype).view(inp.shape)  # the bug
            else:
                out = torch.empty_like(inp)
        return sum_into(inp, out, self.group)


def make(rank, world, device, group):
    return RegisteredBufferAllReduce(group, device)
