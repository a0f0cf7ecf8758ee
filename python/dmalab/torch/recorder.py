"""Records a live model's all-reduce pattern as a scenario.

    with dmalab.torch.record(collective, path="model.yaml"):
        model(input_ids)

wraps ``collective.all_reduce`` for the duration of the block and notes, per call, the input's
shape and dtype and the call form (default ``all_reduce(inp)``, ``out=buf``, or in place
``out=inp``). Every tensor the calls see (inputs, outputs, results) is followed with a weakref
finalizer, which fires when the tensor object dies (a view keeps its base alive, so a result used
through views stays alive), and with its version counter, which counts in-place writes. At each
later call, and when the block ends, the recorder notes which of them died (``release``) and
which the model wrote into (``fill``). The scenario it writes replays that lifetime pattern with
seeded integer fills instead of the model's data: every tensor the model still holds is
``retain``ed, so a collective that writes into one of them (or hands out storage that overlaps
one) fails the replay, while a correct one passes.

Run the forward under ``torch.no_grad()``, not ``torch.inference_mode()``: inference tensors do not
keep their base alive through views, so lifetimes would be recorded too short (refused).
"""

import inspect
import json
import os
import sys
import weakref

import torch
import torch.distributed as dist

import dmalab
from dmalab.torch import tensors as T


class RecordError(RuntimeError):
    """The recorded pattern cannot be written as a scenario (the message says why)."""


class _Tracked:

    def __init__(self, name, tensor):
        self.name = name
        self.ref = weakref.ref(tensor)
        self.version = tensor._version
        self.dead = False


class Recorder:
    """The state of one recording; `record()` returns it from `__enter__`."""

    def __init__(self, collective, path=None, world=None, name=None, seed=1, dirname=None):
        if not callable(getattr(collective, "all_reduce", None)):
            raise TypeError(f"{type(collective).__name__} has no all_reduce method to record")
        if world is None:
            if not (dist.is_available() and dist.is_initialized()):
                raise ValueError("record(): pass world= or initialize torch.distributed")
            world = dist.get_world_size()
        self.collective = collective
        self.path = path
        self.world = world
        self.name = name or (os.path.splitext(os.path.basename(path))[0] if path else "recorded")
        self.seed = seed
        self.steps = []  # (kind, fields) in order
        self.tensors = {}  # name -> (shape, dtype name)
        self.tracked = {}  # name -> _Tracked, live ones
        self.by_id = {}  # id(tensor) -> name, live ones
        self.retained = set()
        self.calls = 0
        self.fills = 0
        self.errors = []
        self.text = None
        self._dtype = None
        self._original = None

    # ---- the context manager ----

    def __enter__(self):
        if torch.is_inference_mode_enabled():
            raise RecordError("record() cannot follow lifetimes under torch.inference_mode() "
                              "(views of inference tensors do not keep their base alive); run "
                              "the forward under torch.no_grad()")
        had = "all_reduce" in vars(self.collective)
        self._original = (had, vars(self.collective).get("all_reduce"))
        bound = self.collective.all_reduce
        self._signature = inspect.signature(bound)
        recorder = self

        def all_reduce(*args, **kwargs):
            return recorder._call(bound, args, kwargs)

        self.collective.all_reduce = all_reduce
        return self

    def __exit__(self, exc_type, exc, tb):
        had, previous = self._original
        if had:
            self.collective.all_reduce = previous
        else:
            del self.collective.all_reduce
        if exc_type is not None:
            return False
        self._sync()
        self.text = self._render()
        if self.path:
            with open(self.path, "w") as f:
                f.write(self.text)
        return False

    # ---- following tensors ----

    def _step(self, step_kind, **fields):
        self.steps.append((step_kind, fields))

    def _declare(self, name, t):
        self.tensors[name] = (list(t.shape), T.dtype_name(t.dtype))

    def _track(self, name, t):
        tr = _Tracked(name, t)
        self.tracked[name] = tr
        self.by_id[id(t)] = name

        def died(rec=self, tr=tr, key=id(t)):
            tr.dead = True
            if rec.by_id.get(key) == tr.name:
                del rec.by_id[key]

        weakref.finalize(t, died)

    def _fill(self, name):
        self.fills += 1
        limit = dmalab.exact_integer_limit(self.tensors[name][1])
        # Every sum of `world` such values stays exact in the dtype.
        bound = max(1, limit // (self.world * self.world))
        self._step("fill", tensor=name, kind="int", lo=-bound, hi=bound, seed=self.fills)

    def _new(self, prefix, t, fill):
        name = f"{prefix}{self.calls}"
        self._declare(name, t)
        if fill:
            self._fill(name)
        self._track(name, t)
        return name

    def _sync(self):
        """Deaths and model writes since the last call, in name order."""
        for name in sorted(self.tracked):
            tr = self.tracked[name]
            if tr.dead:
                self._step("release", tensor=name)
                self.retained.discard(name)
                del self.tracked[name]
                continue
            t = tr.ref()
            if t is not None and t._version != tr.version:
                # The model wrote into it: a write of new contents, then it is held again.
                if name in self.retained:
                    self._step("unretain", tensor=name)
                self._fill(name)
                self._step("retain", tensor=name)
                self.retained.add(name)
                tr.version = t._version

    def _name_of(self, t):
        """The name of a followed tensor that `t` is, or views exactly (same bytes, shape,
        strides and dtype, e.g. x.view(-1).view(x.shape)); None for a tensor not seen yet."""
        name = self.by_id.get(id(t))
        if name is not None and not self.tracked[name].dead:
            return name
        for name, tr in self.tracked.items():
            u = tr.ref()
            if (u is not None and not tr.dead and u.data_ptr() == t.data_ptr() and
                    u.shape == t.shape and u.stride() == t.stride() and u.dtype == t.dtype and
                    u.device == t.device):
                return name
        return None

    def _label(self):
        frames = []
        f = sys._getframe(2)
        while f is not None and len(frames) < 2:
            code = f.f_code
            if not code.co_filename.startswith(os.path.dirname(__file__)):
                qual = getattr(code, "co_qualname", code.co_name)
                frames.append(f"{qual} ({os.path.basename(code.co_filename)}:{f.f_lineno})")
            f = f.f_back
        return " < ".join(frames)

    def _call(self, original, args, kwargs):
        bound = self._signature.bind(*args, **kwargs)
        params = list(self._signature.parameters)
        inp = bound.arguments[params[0]]
        out = bound.arguments.get("out")
        self.calls += 1
        label = f"call {self.calls}: {self._label()}"
        if not isinstance(inp, torch.Tensor) or (out is not None and
                                                 not isinstance(out, torch.Tensor)):
            raise RecordError(f"{label}: all_reduce arguments must be tensors")
        T.dtype_name(inp.dtype)  # only the scenario dtypes
        self._sync()
        in_name = self._name_of(inp)
        if in_name is None:
            in_name = self._new("x", inp, fill=True)
        out_name = None if out is None else self._name_of(out)
        if out is None:
            form = "default"
        elif out is inp or out_name == in_name:
            form = "in_place"
        else:
            form = "out"
            if out_name is None:
                out_name = self._new("buf", out, fill=True)
        written = in_name if form == "in_place" else (out_name if form == "out" else None)
        if written in self.retained:
            self._step("unretain", tensor=written)
            self.retained.discard(written)

        result = original(*args, **kwargs)

        if form == "default":
            if not isinstance(result, torch.Tensor):
                raise RecordError(f"{label}: all_reduce returned {type(result).__name__}")
            held = self._name_of(result)
            if held is not None:
                raise RecordError(
                    f"{label}: all_reduce returned the bytes of '{held}', which is still alive: a "
                    "default-form result must be a fresh tensor (the bug dmalab checks for); "
                    "record with a correct collective")
            written = self._new("y", result, fill=False)
            self._step("all_reduce", input=in_name, result=written, label=label)
        elif form == "out":
            self._step("all_reduce", input=in_name, out=written, label=label)
        else:
            self._step("all_reduce", input=in_name, in_place=True, label=label)
        for name in (in_name, written):
            if name not in self.retained:
                self._step("retain", tensor=name)
                self.retained.add(name)
        # Whatever changed during the call is the collective's doing, not the model's.
        for tr in self.tracked.values():
            t = tr.ref()
            if t is not None:
                tr.version = t._version
        return result

    # ---- the scenario file ----

    def _render(self):
        if not self.calls:
            raise RecordError("no all_reduce call was recorded")
        unit = self.world * 8
        bad = [f"'{n}' {shape} ({_numel(shape)} elements)"
               for n, (shape, _) in self.tensors.items() if _numel(shape) % unit]
        if bad:
            raise RecordError(
                "a scenario needs every all-reduced tensor's element count divisible by "
                f"world*8 = {unit}; found {', '.join(bad)} (choose a token count that makes "
                "it so)")
        dtypes = [d for _, d in self.tensors.values()]
        default = max(set(dtypes), key=dtypes.count)
        shapes = {}
        for shape, _ in self.tensors.values():
            shapes.setdefault("x".join(str(d) for d in shape), shape)
        lines = [
            f"# Recorded by dmalab.torch.record: {self.calls} all-reduce calls at world {self.world}.",
            "# Every tensor the model held across a call is retained; fills are seeded integers,",
            "# not the model's data. Replay: dmalab replay FILE (expected PASS for a correct",
            "# collective).",
            f"name: {self.name}",
            f"world: {self.world}",
            f"dtype: {default}",
            "wire: bf16",
            f"seed: {self.seed}",
            "shapes:",
        ]
        for key in sorted(shapes):
            lines.append(f"  s{key}: {shapes[key]}")
        lines.append("tensors:")
        for n, (shape, dtype) in self.tensors.items():
            s = "s" + "x".join(str(d) for d in shape)
            lines.append(f"  {n}: {s}" if dtype == default else
                         f"  {n}: {{shape: {s}, dtype: {dtype}}}")
        lines.append("steps:")
        for kind, fields in self.steps:
            if list(fields) == ["tensor"]:
                lines.append(f"  - {kind}: {fields['tensor']}")
                continue
            body = ", ".join(f"{k}: {_yaml_value(v)}" for k, v in fields.items())
            lines.append(f"  - {kind}: {{{body}}}")
        lines += ["expect:", "  - faults: none", "    status: PASS", ""]
        return "\n".join(lines)


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _yaml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str) and v.isidentifier():
        return v
    return json.dumps(str(v))  # a JSON string is a YAML double-quoted scalar


def record(collective, path=None, world=None, name=None, seed=1):
    """Records `collective`'s all-reduce calls inside a `with` block as a scenario (see the
    module comment). `path`: the file to write (None: only `Recorder.text`); `world`: the number
    of ranks (default: torch.distributed's world size)."""
    return Recorder(collective, path=path, world=world, name=name, seed=seed)
