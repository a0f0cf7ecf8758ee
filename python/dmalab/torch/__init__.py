"""dmalab for PyTorch collectives.

- ``python3 -m dmalab.torch check SCENARIO --collective=module:factory``: replays a scenario
  against a torch collective in W processes and reports as ``dmalab replay`` does
  (dmalab.torch.harness, dmalab.torch.worker).
- ``with dmalab.torch.record(collective, path="model.yaml"):`` records the all-reduce calls and
  result lifetimes of a live model as a scenario (dmalab.torch.recorder).
"""

from dmalab.torch.harness import run_check  # noqa: F401
from dmalab.torch.recorder import RecordError, Recorder, record  # noqa: F401
