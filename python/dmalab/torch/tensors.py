"""Tensor helpers shared by the harness and the recorder: dtypes, raw bytes, storage intervals,
bit-level comparison and scenario fills, for torch 1.13 (no untyped_storage) and torch 2.x."""

import ctypes

import torch

import dmalab

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
# A same-size integer dtype, to compare bits (NaN != NaN, -0 != +0 as the C++ replay does).
_BITS = {2: torch.int16, 4: torch.int32}


def dtype_name(dtype):
    """'bf16', 'fp16' or 'fp32' for a torch dtype; ValueError for any other."""
    try:
        return DTYPE_NAMES[dtype]
    except KeyError:
        raise ValueError(f"dtype {dtype} is not one of {', '.join(dmalab.dtype_names())}") from None


def bits(t):
    """The tensor's elements reinterpreted as integers of the same size (flat)."""
    return t.reshape(-1).view(_BITS[t.element_size()])


def _host_array(t):
    """A ctypes byte array over a contiguous CPU tensor's memory (keep `t` alive meanwhile)."""
    assert t.device.type == "cpu" and t.is_contiguous()
    n = t.numel() * t.element_size()
    return (ctypes.c_ubyte * n).from_address(t.data_ptr())


def host_bytes(t):
    """A contiguous CPU copy (or `t` itself) holding the tensor's bytes, and a buffer over them."""
    c = t.detach()
    if c.device.type != "cpu":
        c = c.cpu()
    c = c.contiguous()
    return c, _host_array(c)


def xxh64(t):
    """XXH64 of the tensor's bytes in row-major order, as dmalab replay hashes outputs."""
    c, arr = host_bytes(t)
    h = dmalab.xxh64(arr)
    del arr, c
    return h


def fill_(t, dtype, kind, lo, hi, key):
    """Writes a scenario fill (dmalab.fill_into, bit-identical to the C++ generator) into `t`."""
    if t.device.type == "cpu" and t.is_contiguous():
        dmalab.fill_into(_host_array(t), dtype, kind, lo, hi, key)
        return t
    host = torch.empty(t.shape, dtype=t.dtype)
    dmalab.fill_into(_host_array(host), dtype, kind, lo, hi, key)
    t.copy_(host)
    return t


def byte_interval(t):
    """[lo, hi) of the bytes the tensor's elements occupy (views and strides included)."""
    start = t.data_ptr()
    if t.numel() == 0:
        return start, start
    es = t.element_size()
    lo = hi = 0
    for size, stride in zip(t.shape, t.stride()):
        extent = (size - 1) * stride
        if extent < 0:
            lo += extent
        else:
            hi += extent
    return start + lo * es, start + (hi + 1) * es


def storage_ptr(t):
    """The base address of the tensor's storage (torch 2.x untyped_storage, 1.13 storage)."""
    if hasattr(t, "untyped_storage"):
        return t.untyped_storage().data_ptr()
    return t.storage().data_ptr()


def count_changed(a, b):
    """(number of elements whose bits differ, index of the first) for same-shape tensors."""
    diff = bits(a) != bits(b)
    n = int(diff.sum().item())
    if n == 0:
        return 0, 0
    return n, int(torch.nonzero(diff)[0].item())


def element(t, i):
    """Element i of the flattened tensor as a Python float."""
    return float(t.reshape(-1)[i].item())


def fmt_g(x):
    """printf's %g, as the C++ reports format values."""
    return "%g" % x
