"""The sum all the example collectives share: a torch.distributed all-reduce of `inp` into `out`.

On an NCCL group the device tensor is reduced directly. On a gloo group (CPU, or CUDA ranks that
share one GPU, where NCCL refuses several ranks per device) the values are staged through a host
fp32 copy: gloo in torch 1.13 has no bf16, and fp32 sums of bf16 or fp16 integers are exact.
"""

import torch
import torch.distributed as dist


def sum_into(inp, out, group):
    """out = sum over the group's ranks of inp; out may be inp (in place)."""
    if dist.get_backend(group) == "nccl":
        if out is not inp:
            out.copy_(inp)
        dist.all_reduce(out, group=group)
        return out
    wide = torch.float32 if inp.dtype in (torch.bfloat16, torch.float16) else inp.dtype
    staged = inp.detach().to("cpu", wide, copy=True)
    dist.all_reduce(staged, group=group)
    out.copy_(staged)
    return out
