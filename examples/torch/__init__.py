"""PyTorch all-reduce collectives and a tensor-parallel model, as users write them.

Each collective module has make(rank, world, device, group), the factory signature of
`python3 -m dmalab.torch check --collective=module:make`.
"""
