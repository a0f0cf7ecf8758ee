"""A small tensor-parallel transformer in torch, to record its all-reduce pattern.

Megatron-style tensor parallelism over W ranks: a vocab-parallel embedding (each rank holds a
slice of the vocabulary; the partial lookups are all-reduced), per layer a column-parallel
q/k/v projection over the rank's heads and a row-parallel o_proj (all-reduced), a
column-parallel gate/up projection and a row-parallel down_proj (all-reduced), residual adds
and RMSNorm. Two variants:

- plain: `h = residual + all_reduce(o_proj partial)`; the embedding result is the layer-0
  residual, held across the o_proj all-reduce (the founding incident's pattern);
- fused: the all-reduce output is handed to a fused add+RMSNorm that adds it into the residual
  in place and writes the normalized result into the all-reduce output itself (as serving
  engines do), and down_proj is all-reduced in place.

Run (W processes on CPU over gloo, rank 0 writes the scenario):

    python3 -m examples.torch.tp_transformer --world=2 --out=model.yaml [--fused]
"""

import argparse
import os
import socket
import sys
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


@dataclass
class Config:
    vocab: int = 512
    hidden: int = 64
    heads: int = 4
    ffn: int = 256
    layers: int = 2
    tokens: int = 16
    seed: int = 0
    eps: float = 1e-6

    @property
    def head_dim(self):
        return self.hidden // self.heads


def full_weights(cfg):
    """The unsharded weights (fp32), the same on every rank."""
    g = torch.Generator().manual_seed(cfg.seed)

    def w(*shape):
        return torch.randn(*shape, generator=g) / shape[0] ** 0.5

    layers = []
    for _ in range(cfg.layers):
        layers.append({
            "norm1": 1 + 0.1 * torch.randn(cfg.hidden, generator=g),
            "qkv": w(cfg.hidden, 3 * cfg.hidden),
            "o": w(cfg.hidden, cfg.hidden),
            "norm2": 1 + 0.1 * torch.randn(cfg.hidden, generator=g),
            "gate_up": w(cfg.hidden, 2 * cfg.ffn),
            "down": w(cfg.ffn, cfg.hidden),
        })
    return {"embed": torch.randn(cfg.vocab, cfg.hidden, generator=g), "layers": layers,
            "norm": 1 + 0.1 * torch.randn(cfg.hidden, generator=g)}


def rms_norm(x, weight, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight).to(x.dtype)


def fused_add_rms_norm_(x, residual, weight, eps):
    """residual += x; x = rms_norm(residual), both in place (x is the all-reduce output)."""
    residual.add_(x)
    x.copy_(rms_norm(residual, weight, eps))
    return x, residual


def attention(q, k, v, heads):
    t = q.shape[0]
    q, k, v = (z.float().view(t, heads, -1).transpose(0, 1) for z in (q, k, v))
    scores = q @ k.transpose(1, 2) / q.shape[-1] ** 0.5
    mask = torch.ones(t, t, dtype=torch.bool).triu(1)
    probs = scores.masked_fill(mask, float("-inf")).softmax(-1)
    return (probs @ v).transpose(0, 1).reshape(t, -1)


class TPTransformer:
    """Rank `rank`'s shard of the model; `collective.all_reduce(inp, out=None)` sums partials."""

    def __init__(self, cfg, rank, world, collective, dtype=torch.bfloat16, fused=False):
        assert cfg.vocab % world == 0 and cfg.heads % world == 0 and cfg.ffn % world == 0
        self.cfg, self.rank, self.world = cfg, rank, world
        self.collective, self.dtype, self.fused = collective, dtype, fused
        full = full_weights(cfg)
        v = cfg.vocab // world
        self.vocab_lo, self.vocab_hi = rank * v, (rank + 1) * v
        self.embed = full["embed"][self.vocab_lo:self.vocab_hi].to(dtype)
        h, f = cfg.hidden // world, cfg.ffn // world
        self.local_heads = cfg.heads // world
        self.layers = []
        for lw in full["layers"]:
            q, k, vv = lw["qkv"].split(cfg.hidden, dim=1)
            gate, up = lw["gate_up"].split(cfg.ffn, dim=1)
            cols = slice(rank * h, (rank + 1) * h)
            fcols = slice(rank * f, (rank + 1) * f)
            self.layers.append({
                "norm1": lw["norm1"], "norm2": lw["norm2"],
                # column-parallel: this rank's heads / ffn columns
                "qkv": torch.cat([q[:, cols], k[:, cols], vv[:, cols]], dim=1).to(dtype),
                "gate_up": torch.cat([gate[:, fcols], up[:, fcols]], dim=1).to(dtype),
                # row-parallel: the matching input rows; outputs are partial sums
                "o": lw["o"][cols].to(dtype),
                "down": lw["down"][fcols].to(dtype),
            })
        self.norm = full["norm"]

    def embedding(self, ids):
        local = (ids >= self.vocab_lo) & (ids < self.vocab_hi)
        partial = self.embed[(ids - self.vocab_lo).clamp(0, self.embed.shape[0] - 1)]
        partial = partial * local.unsqueeze(-1).to(self.dtype)
        return self.collective.all_reduce(partial)  # fresh output: the layer-0 residual

    def attn_partial(self, x, lw):
        q, k, v = (x @ lw["qkv"]).chunk(3, dim=-1)
        return attention(q, k, v, self.local_heads).to(self.dtype) @ lw["o"]  # o_proj partial

    def mlp_partial(self, x, lw):
        gate, up = (x @ lw["gate_up"]).chunk(2, dim=-1)
        return (torch.nn.functional.silu(gate.float()) * up.float()).to(self.dtype) @ lw["down"]

    def forward(self, ids):
        eps = self.cfg.eps
        residual = self.embedding(ids)
        if not self.fused:
            h = residual
            for lw in self.layers:
                attn = self.collective.all_reduce(self.attn_partial(rms_norm(h, lw["norm1"], eps),
                                                                    lw))
                h = h + attn
                mlp = self.collective.all_reduce(self.mlp_partial(rms_norm(h, lw["norm2"], eps),
                                                                  lw))
                h = h + mlp
            return rms_norm(h, self.norm, eps)
        x = rms_norm(residual, self.layers[0]["norm1"], eps)
        for i, lw in enumerate(self.layers):
            attn = self.collective.all_reduce(self.attn_partial(x, lw))
            x, residual = fused_add_rms_norm_(attn, residual, lw["norm2"], eps)
            partial = self.mlp_partial(x, lw)
            self.collective.all_reduce(partial, out=partial)  # in place
            nxt = self.layers[i + 1]["norm1"] if i + 1 < len(self.layers) else self.norm
            x, residual = fused_add_rms_norm_(partial, residual, nxt, eps)
        return x


def reference_forward(cfg, ids, dtype=torch.float32):
    """The same model unsharded on one process, for checking the tensor-parallel one."""
    class Sum:
        def all_reduce(self, inp, out=None):
            if out is None:
                return inp.clone()
            out.copy_(inp)
            return out

    return TPTransformer(cfg, 0, 1, Sum(), dtype=dtype).forward(ids)


def input_ids(cfg):
    g = torch.Generator().manual_seed(cfg.seed + 1)
    return torch.randint(0, cfg.vocab, (cfg.tokens,), generator=g)


def _run(rank, world, port, args, results):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    import importlib

    import dmalab.torch

    module_name, factory_name = args.collective.split(":")
    factory = getattr(importlib.import_module(module_name), factory_name)
    collective = factory(rank, world, torch.device("cpu"), dist.group.WORLD)
    cfg = Config()
    model = TPTransformer(cfg, rank, world, collective, fused=args.fused)
    name = args.name or os.path.splitext(os.path.basename(args.out))[0]
    with torch.no_grad(), dmalab.torch.record(collective, world=world, name=name) as rec:
        out = model.forward(input_ids(cfg))
    texts = [None] * world
    dist.all_gather_object(texts, rec.text)
    if rank == 0:
        if any(t != texts[0] for t in texts):
            raise SystemExit("the ranks recorded different all-reduce patterns")
        with open(args.out, "w") as f:
            f.write(rec.text)
        results.put(out.float().tolist())
    dist.destroy_process_group()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--out", required=True, help="the scenario file to write")
    p.add_argument("--fused", action="store_true", help="the fused add+RMSNorm variant")
    p.add_argument("--name", default=None, help="the scenario's name")
    p.add_argument("--collective", default="examples.torch.empty_like_fix:make",
                   help="module:factory of the collective the model runs with")
    args = p.parse_args(argv)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    results = ctx.SimpleQueue()
    mp.start_processes(_run, args=(args.world, port, args, results), nprocs=args.world,
                       start_method="spawn")
    out = torch.tensor(results.get())
    ref = reference_forward(Config(), input_ids(Config()))
    err = (out - ref).abs().max().item()
    print(f"wrote {args.out}: world {args.world}, {'fused' if args.fused else 'plain'}; "
          f"max |tensor-parallel bf16 - unsharded fp32| = {err:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
