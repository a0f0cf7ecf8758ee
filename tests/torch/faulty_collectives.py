"""Collectives with one defect each, for the harness's tests (factories for --collective)."""

import time

import torch

from examples.torch.common import sum_into


class _Base:

    def __init__(self, rank, group):
        self.rank = rank
        self.group = group
        self.calls = 0

    def all_reduce(self, inp, out=None):
        self.calls += 1
        if out is None:
            out = torch.empty_like(inp)
        sum_into(inp, out, self.group)
        self.after(out)
        return out

    def after(self, out):
        pass


class RaiseOnRank1(_Base):
    """Rank 1 raises in its second call."""

    def after(self, out):
        if self.rank == 1 and self.calls == 2:
            raise RuntimeError("injected failure on rank 1, call 2")


class HangOnRank2(_Base):
    """Rank 2 never returns from its first call (the others wait for it in the group)."""

    def all_reduce(self, inp, out=None):
        if self.rank == 2:
            while True:
                time.sleep(60)
        return super().all_reduce(inp, out)


class OffByOneEverywhere(_Base):
    """Every rank adds 1 to element 0 of every output: consistent, but not the sum."""

    def after(self, out):
        out.view(-1)[0] += 1


class OffByOneOnRank1(_Base):
    """Rank 1 adds 1 to element 7 of every output: its output differs from rank 0's."""

    def after(self, out):
        if self.rank == 1:
            out.view(-1)[7] += 1


class WrongThenRaiseOnRank1(OffByOneEverywhere):
    """Wrong sums on every call (a finding per rank each), then rank 1 raises in call 40."""

    def after(self, out):
        super().after(out)
        if self.rank == 1 and self.calls == 40:
            raise RuntimeError("injected failure on rank 1, call 40")


class ReturnsInput(_Base):
    """The default form returns its input, reduced in place: the result aliases the input."""

    def all_reduce(self, inp, out=None):
        sum_into(inp, inp if out is None else out, self.group)
        return inp if out is None else out


class WrongShape(_Base):

    def all_reduce(self, inp, out=None):
        return super().all_reduce(inp, out).reshape(-1)


def raise_on_rank1(rank, world, device, group):
    return RaiseOnRank1(rank, group)


def hang_on_rank2(rank, world, device, group):
    return HangOnRank2(rank, group)


def off_by_one_everywhere(rank, world, device, group):
    return OffByOneEverywhere(rank, group)


def off_by_one_on_rank1(rank, world, device, group):
    return OffByOneOnRank1(rank, group)


def wrong_then_raise_on_rank1(rank, world, device, group):
    return WrongThenRaiseOnRank1(rank, group)


def returns_input(rank, world, device, group):
    return ReturnsInput(rank, group)


def wrong_shape(rank, world, device, group):
    return WrongShape(rank, group)


def factory_raises(rank, world, device, group):
    raise ValueError("no GPU buffers on this host")


NOT_CALLABLE = 3
