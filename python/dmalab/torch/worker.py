"""One rank of `python3 -m dmalab.torch check`.

The parent (dmalab.torch.harness) starts W of these. Each joins a gloo world on 127.0.0.1, makes
two groups (the harness's own exchange over gloo, and the group handed to the user's factory:
NCCL when every rank has a GPU of its own, else gloo), builds the collective with
factory(rank, world, device, group) and replays the scenario's steps with torch tensors, exactly
as common/scenario/replay.cc executes them on a Device; graph steps capture the collective's calls
into a torch.cuda.CUDAGraph and replay it. After every step the
ranks exchange what they found over the harness group; rank 0 merges it in the C++ replay's order
and sends records and findings to the parent, which formats the report with the C++ formatter.

Progress goes to the parent as JSON lines on a pipe (fd given in the configuration). A rank whose
code raises reports the exception and then waits to be killed, so the other ranks' errors do not
drown it; the parent bounds every step with a timeout.
"""

import datetime
import importlib
import json
import os
import sys
import threading
import time
import traceback

import torch
import torch.distributed as dist

import dmalab
from dmalab.torch import tensors as T


class BadInput(Exception):
    """The collective cannot be made: reported as bad input (exit 2)."""


class CollectiveError(Exception):
    """The collective returned something that is not a result of this all-reduce."""


def resolve_factory(spec):
    """module:attr[.attr] to the object it names; BadInput with the reason otherwise."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise BadInput(f"--collective is '{spec}'; allowed module:factory, "
                       "e.g. examples.torch.persistent_workspace:make")
    try:
        obj = importlib.import_module(module_name)
    except Exception as e:
        raise BadInput(f"--collective {spec}: cannot import module '{module_name}': "
                       f"{type(e).__name__}: {e}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise BadInput(f"--collective {spec}: module '{module_name}' has no attribute "
                           f"'{attr}'")
        obj = getattr(obj, part)
    if not callable(obj):
        raise BadInput(f"--collective {spec}: '{attr}' is not callable")
    return obj


# The largest finite magnitude of each dtype (MaxFinite in common/scenario/known_values.h).
MAX_FINITE = {"bf16": 3.3895313892515355e38, "fp16": 65504.0, "fp32": 3.4028234663852886e38}


def _mix(x):
    """SplitMix64's output function (as measure/perturbing_device.cc draws)."""
    x = (x + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return x ^ (x >> 31)


class Perturbation:
    """--perturb=SEED with --device=cuda: before each call of the collective (and each graph
    launch), seeded per rank and call, a spin of the current stream (torch.cuda._sleep) and a
    host pause, with the rates and lengths of measure/perturbing_device.h. Different ranks get
    different delays, so a collective that orders its ranks' work wrongly shows it."""

    SPIN_PERCENT, SPIN_NS = 30, (2_000, 20_000, 200_000)
    PAUSE_PERCENT, PAUSE_NS = 10, (10_000, 100_000)

    def __init__(self, seed, rank):
        self.seed = seed
        self.rank = rank
        self.calls = 0
        # torch.cuda._sleep counts clock cycles: how many make a nanosecond on this GPU.
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(1000)  # load the kernel
        start.record()
        torch.cuda._sleep(1_000_000)
        end.record()
        end.synchronize()
        self.cycles_per_ns = 1_000_000 / max(1.0, start.elapsed_time(end) * 1e6)

    def before_call(self):
        self.calls += 1
        u = _mix(self.seed ^ _mix((self.rank << 32) + 2 * self.calls))
        v = _mix(self.seed ^ _mix((self.rank << 32) + 2 * self.calls + 1))
        if v % 100 < self.PAUSE_PERCENT:
            until = time.perf_counter_ns() + self.PAUSE_NS[(v >> 8) % len(self.PAUSE_NS)]
            while time.perf_counter_ns() < until:
                pass
        if u % 100 < self.SPIN_PERCENT:
            ns = self.SPIN_NS[(u >> 8) % len(self.SPIN_NS)]
            torch.cuda._sleep(max(1, int(ns * self.cycles_per_ns)))


class Captured:
    """A step of a captured graph: an all-reduce (input, output, form, the output tensor as
    captured) or an add (its destination)."""

    def __init__(self, step, output, tensor=None):
        self.step = step
        self.output = output
        self.tensor = tensor


class Live:
    """A live scenario tensor on this rank."""

    def __init__(self, tensor, origin, alloc_id):
        self.t = tensor
        self.origin = origin
        self.alloc_id = alloc_id


class Worker:

    def __init__(self, cfg):
        self.cfg = cfg
        self.rank = cfg["rank"]
        self.world = cfg["world"]
        self.fd = cfg["report_fd"]
        self.index = 0
        self.step_text = "setup"
        self.iterations = []
        self.live = {}
        self.retained = {}  # name -> (origin, snapshot)
        self.storages = {}  # storage base address -> allocation id
        self.next_alloc = 1
        self.graphs = {}  # name -> (torch.cuda.CUDAGraph, [Captured])
        self.perturbation = None
        self.pending = None  # a default-form result between the call and its binding
        # Rank 0's merge state (the C++ Replayer's report state).
        self.max_changed = {}  # retained name -> [most elements changed, per rank]
        self.reported_aliases = set()
        self.summary = {"pointer_alias": False, "retained_mismatches": 0, "retained_elems": 0,
                        "retained_mismatches_by_rank": [0] * self.world, "rank_consistent": True}

    # ---- messages to the parent ----

    def send(self, obj):
        data = (json.dumps(obj) + "\n").encode()
        while data:
            n = os.write(self.fd, data)
            data = data[n:]

    # ---- setup ----

    def setup(self):
        timeout = datetime.timedelta(seconds=self.cfg["timeout"])
        # Ranks start at different times (importing torch takes seconds on a loaded machine):
        # the rendezvous gets the startup allowance, the harness and user groups the step timeout.
        startup = datetime.timedelta(seconds=max(self.cfg["timeout"], self.cfg["startup"]))
        store = dist.TCPStore("127.0.0.1", self.cfg["port"], None, False, timeout=startup)
        dist.init_process_group("gloo", store=store, rank=self.rank, world_size=self.world,
                                timeout=startup)
        self.harness = dist.new_group(backend="gloo", timeout=timeout)
        self.scenario = dmalab.load_scenario(self.cfg["scenario"])
        if self.cfg["device"] == "cuda":
            self.device = torch.device("cuda", self.rank % torch.cuda.device_count())
            torch.cuda.set_device(self.device)
        else:
            self.device = torch.device("cpu")
        # One GPU per rank: an NCCL group, whose collectives a CUDA graph can capture (graph
        # steps); ranks sharing a GPU (NCCL refuses them) or on CPU: gloo.
        nccl = self.device.type == "cuda" and self.world <= torch.cuda.device_count()
        self.group = dist.new_group(backend="nccl" if nccl else "gloo", timeout=timeout)
        if nccl:  # create the communicator now, not inside a capture
            dist.barrier(group=self.group, device_ids=[self.device.index])
        if self.cfg.get("perturb") is not None:
            self.perturbation = Perturbation(self.cfg["perturb"], self.rank)
        self.send({"ev": "phase", "phase": "importing the collective's module"})  # under --timeout
        factory = resolve_factory(self.cfg["collective"])
        self.send({"ev": "phase", "phase": "the collective's factory"})
        try:
            self.coll = factory(self.rank, self.world, self.device, self.group)
        except Exception as e:
            raise BadInput(f"--collective {self.cfg['collective']}: the factory raised on rank "
                           f"{self.rank}: {type(e).__name__}: {e}") from e
        if not callable(getattr(self.coll, "all_reduce", None)):
            raise BadInput(f"--collective {self.cfg['collective']}: the factory returned "
                           f"{type(self.coll).__name__}, which has no all_reduce method")

    def sync(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def gather(self, obj):
        out = [None] * self.world
        dist.all_gather_object(out, obj, group=self.harness)
        return out

    # ---- the steps (common/scenario/replay.cc, Replayer::Steps) ----

    def steps(self, steps):
        for step in steps:
            if step.kind == "repeat":
                self.iterations.append([0, step.times])
                for i in range(step.times):
                    self.iterations[-1][0] = i
                    self.steps(step.body)
                self.iterations.pop()
                continue
            self.index += 1
            self.step_text = step.describe()
            if self.iterations:
                its = ", ".join(f"{i + 1}/{n}" for i, n in self.iterations)
                self.step_text += f" [iteration {its}]"
            self.send({"ev": "step", "i": self.index, "text": self.step_text})
            local = {"outputs": []}
            records = self.one(step, local)
            self.sync()
            if step.kind not in ("retain", "unretain", "expect_equal"):
                local["retained"] = self.verify_retained()
            local["aliases"] = self.aliases()
            local["mems"] = {n: self.mem(n) for n in self.retained}
            if step.kind == "expect_equal":
                local["mem_a"], local["mem_b"] = self.mem(step.a), self.mem(step.b)
            facts = self.gather(local)
            if self.rank == 0:
                self.send({"ev": "done", "i": self.index, "records": records,
                           "findings": self.merge(step, facts), "summary": self.summary})
            else:
                self.send({"ev": "done", "i": self.index})

    def one(self, step, local):
        """Runs one step; returns the all-reduce records it makes (a list)."""
        kind = step.kind
        if step.ranks and self.rank not in step.ranks:
            return []  # a host-side step of other ranks (fill, add or release with ranks:)
        if kind == "fill":
            self.fill(step)
        elif kind == "all_reduce":
            return [self.all_reduce(step, local)]
        elif kind == "capture_graph":
            self.capture_graph(step)
        elif kind == "launch_graph":
            return self.launch_graph(step, local)
        elif kind == "add":
            self.add(step)
        elif kind == "retain":
            self.retain(step.tensor)
        elif kind == "unretain":
            self.end_retention(step.tensor)
        elif kind == "release":
            self.release(step.tensor)
        elif kind == "expect_equal":
            a, b = self.live[step.a].t, self.live[step.b].t
            local["expect_equal"] = T.count_changed(a, b)
        # expect_unchanged: the check after every step is the check.
        return []

    def bind(self, name, tensor):
        ptr = T.storage_ptr(tensor)
        if ptr not in self.storages:
            self.storages[ptr] = self.next_alloc
            self.next_alloc += 1
        self.live[name] = Live(tensor, self.step_text, self.storages[ptr])

    def allocate(self, name):
        decl = self.scenario.tensors[name]
        self.bind(name, torch.empty(decl.shape, dtype=T.DTYPES[decl.dtype], device=self.device))

    def fill(self, step):
        if step.tensor not in self.live:
            self.allocate(step.tensor)
        decl = self.scenario.tensors[step.tensor]
        its = [i for i, _ in self.iterations]
        key = dmalab.fill_key(self.scenario.seed, dmalab.fill_step_seed(step.seed, its), self.rank)
        T.fill_(self.live[step.tensor].t, decl.dtype, step.fill_kind, step.lo, step.hi, key)

    def add(self, step):
        if step.dst not in self.live:
            self.allocate(step.dst)
        torch.add(self.live[step.a].t, self.live[step.b].t, out=self.live[step.dst].t)

    def retain(self, name):
        self.retained[name] = (self.step_text, self.live[name].t.detach().clone())
        if self.rank == 0:
            self.max_changed[name] = [0] * self.world
            self.summary["retained_elems"] += self.scenario.tensors[name].elems

    def end_retention(self, name):
        self.retained.pop(name, None)
        self.max_changed.pop(name, None)

    def release(self, name):
        self.end_retention(name)
        self.reported_aliases = {p for p in self.reported_aliases if name not in p}
        gone = self.live.pop(name)
        ptr = T.storage_ptr(gone.t)
        if all(T.storage_ptr(t.t) != ptr for t in self.live.values()):
            self.storages.pop(ptr, None)

    def call_collective(self, step):
        """Calls the collective as `step` says; returns the output's name."""
        inp = self.live[step.input].t
        self.send({"ev": "phase", "phase": "the collective's all_reduce"})
        if self.perturbation:
            self.perturbation.before_call()
        if step.form == "default":
            res = self.coll.all_reduce(inp)
            self.check_result(step, inp, res)
            self.pending = res
            return step.result
        if step.form == "out":
            self.coll.all_reduce(inp, out=self.live[step.out].t)
            return step.out
        self.coll.all_reduce(inp, out=inp)
        return step.input

    def all_reduce(self, step, local):
        decl = self.scenario.tensors[step.input]
        facts = self.value_facts(self.live[step.input].t, decl.dtype)
        output = self.call_collective(step)
        self.sync()
        self.send({"ev": "phase", "phase": "the harness"})
        if step.form == "default":
            self.bind(step.result, self.pending)
            self.pending = None
        return self.check_output(self.step_text, step, output, facts, local)

    def check_output(self, text, step, output, facts, local):
        """Hashes `output` (rank 0's bytes) and checks it across ranks, against the exact sum
        (facts[0], when known) and for non-finite values (facts[1]): what Replayer::CheckOutput
        checks. Adds this rank's facts to local["outputs"]; returns the record."""
        expected, finite_inputs = facts
        decl = self.scenario.tensors[output]
        out = self.live[output].t
        mine = {"output": output, "out_mem": self.mem(output)}
        h = T.xxh64(out)
        hashes = self.gather(h)
        if any(x != hashes[0] for x in hashes):
            ref, _ = T.host_bytes(out)
            ref = ref.clone().reshape(-1).view(torch.uint8)
            dist.broadcast(ref, 0, group=self.harness)
            if hashes[self.rank] != hashes[0]:
                mine["inconsistent"] = T.count_changed(ref.view(out.dtype), out.detach().cpu())
        got = out.detach().cpu().reshape(-1).float()
        if expected is not None:
            wrong = got != expected
            n = int(wrong.sum().item())
            if n:
                i = int(torch.nonzero(wrong)[0].item())
                mine["wrong_sum"] = (n, i, float(got[i].item()), float(expected[i].item()))
        if finite_inputs:
            bad = ~torch.isfinite(got)
            n = int(bad.sum().item())
            if n:
                i = int(torch.nonzero(bad)[0].item())
                mine["non_finite"] = (n, i, float(got[i].item()))
        local["outputs"].append(mine)
        return {"step_index": self.index, "step": text, "input": step.input, "output": output,
                "form": step.form, "elems": decl.elems, "bytes": decl.bytes, "hash": hashes[0],
                "rank_consistent": all(x == hashes[0] for x in hashes)}

    def value_facts(self, inp, dtype):
        """(the exact sum over ranks, fp32 and flat, or None; whether the inputs are finite and
        small enough that no correct sum overflows): the C++ replay's wrong_sum and non_finite
        conditions (common/scenario/known_values.h), from the inputs themselves. The sum is
        exact when every rank's input holds integers whose partial sums stay in the dtype's
        exact integer range whatever the order (world * max|x| within it)."""
        x = inp.detach().cpu().reshape(-1).float()
        integral = bool(torch.equal(x, x.round())) if x.numel() else True
        finite = bool(torch.isfinite(x).all().item()) if x.numel() else True
        big = float(x.abs().max().item()) if x.numel() and finite else 0.0
        flags = torch.tensor([0.0 if integral and finite else 1.0, 0.0 if finite else 1.0, big],
                             dtype=torch.float64)
        dist.all_reduce(flags, op=dist.ReduceOp.MAX, group=self.harness)
        finite_inputs = flags[1].item() == 0.0 and \
            2 * self.world * flags[2].item() <= MAX_FINITE[dtype]
        if flags[0].item() != 0.0 or self.world * flags[2].item() > dmalab.exact_integer_limit(dtype):
            return None, finite_inputs
        total = x.to(torch.int32)
        dist.all_reduce(total, group=self.harness)
        return total.float(), finite_inputs

    # ---- graphs: torch.cuda.CUDAGraph around the collective's calls ----

    def capture_graph(self, step):
        """Captures the body (explicit-form all-reduces and adds) into a CUDA graph; nothing
        runs. The harness refuses graph scenarios on CPU before any worker starts."""
        if self.device.type != "cuda":
            raise BadInput(f"{step.describe()}: graph steps need --device=cuda")
        entries = []
        stream = torch.cuda.Stream(device=self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        graph = torch.cuda.CUDAGraph()
        self.send({"ev": "phase", "phase": "the collective's all_reduce (capturing)"})
        with torch.cuda.graph(graph, stream=stream):
            for b in step.body:
                if b.kind == "all_reduce":
                    output = self.call_collective(b)
                    entries.append(Captured(b, output, self.live[output].t))
                else:  # add, as the loader allows inside a capture
                    torch.add(self.live[b.a].t, self.live[b.b].t, out=self.live[b.dst].t)
                    entries.append(Captured(b, b.dst))
        torch.cuda.current_stream(self.device).wait_stream(stream)
        self.graphs[step.graph] = (graph, entries)

    def launch_graph(self, step, local):
        """Replays a captured graph once, then checks each captured all-reduce whose output is
        still the tensor captured (as Replayer::LaunchGraph does). The exact sum is known for an
        all-reduce whose input no earlier step of the graph writes (read before the launch)."""
        graph, entries = self.graphs[step.graph]
        facts, written = [], set()
        for e in entries:
            known = e.step.kind == "all_reduce" and e.step.input not in written and \
                e.step.input in self.live
            facts.append(self.value_facts(self.live[e.step.input].t,
                                          self.scenario.tensors[e.step.input].dtype)
                         if known else (None, False))
            written.add(e.output)
        self.send({"ev": "phase", "phase": "the collective's all_reduce (graph launch)"})
        if self.perturbation:
            self.perturbation.before_call()
        graph.replay()
        self.sync()
        self.send({"ev": "phase", "phase": "the harness"})
        records = []
        for e, f in zip(entries, facts):
            live = self.live.get(e.output)
            if e.step.kind != "all_reduce" or live is None or live.t is not e.tensor:
                continue
            records.append(self.check_output(f"{self.step_text} > {e.step.describe()}", e.step,
                                             e.output, f, local))
        return records

    def check_result(self, step, inp, res):
        what = None
        if not isinstance(res, torch.Tensor):
            what = f"{type(res).__name__}, not a tensor"
        elif res.shape != inp.shape or res.dtype != inp.dtype or res.device != inp.device:
            what = (f"a tensor of {res.dtype} {list(res.shape)} on {res.device} for an input of "
                    f"{inp.dtype} {list(inp.shape)} on {inp.device}")
        if what:
            raise CollectiveError(f"all_reduce('{step.input}') returned {what}")

    def verify_retained(self):
        out = {}
        for name in sorted(self.retained):
            origin, snap = self.retained[name]
            cur = self.live[name].t
            n, first = T.count_changed(snap, cur)
            if n:
                out[name] = (n, first, T.element(snap, first), T.element(cur, first))
            else:
                out[name] = (0, 0, 0.0, 0.0)
        return out

    def mem(self, name):
        lo, hi = T.byte_interval(self.live[name].t)
        return (lo, hi - lo, self.live[name].alloc_id)

    def aliases(self):
        names = sorted(self.live)
        spans = [(n, *T.byte_interval(self.live[n].t)) for n in names]
        hits = []
        for i, (a, alo, ahi) in enumerate(spans):
            for b, blo, bhi in spans[i + 1:]:
                if alo < bhi and blo < ahi and ahi > alo and bhi > blo:
                    hits.append((a, b, max(alo, blo), min(ahi, bhi), self.mem(a), self.mem(b),
                                 self.live[a].origin, self.live[b].origin))
        return hits

    # ---- rank 0: the report (Replayer's finding order) ----

    def finding(self, kind, rank, storage=(), elems=0, of_elems=0, detail=""):
        return {"kind": kind, "step_index": self.index, "step": self.step_text, "rank": rank,
                "storage": [[t, r, *m] for t, r, m in storage], "elems": elems,
                "of_elems": of_elems, "detail": detail}

    def merge(self, step, facts):
        found = []
        s = self.summary
        # Each checked output (one per all-reduce, one per captured all-reduce of a launch), in
        # Replayer::CheckOutput's order.
        for i, mine in enumerate(facts[0]["outputs"]):
            output = mine["output"]
            elems = self.scenario.tensors[output].elems
            per_rank = [facts[r]["outputs"][i] for r in range(self.world)]
            for r in range(1, self.world):
                if "inconsistent" not in per_rank[r]:
                    continue
                n, first = per_rank[r]["inconsistent"]
                s["rank_consistent"] = False
                found.append(self.finding(
                    "rank_inconsistent", r, [(output, 0, per_rank[0]["out_mem"]),
                                             (output, r, per_rank[r]["out_mem"])], n, elems,
                    f"output '{output}' differs from rank 0's in {n} of {elems} elements "
                    f"(first at {first})"))
            for r in range(self.world):
                if "wrong_sum" not in per_rank[r]:
                    continue
                n, first, got, want = per_rank[r]["wrong_sum"]
                found.append(self.finding(
                    "wrong_sum", r, [(output, r, per_rank[r]["out_mem"])], n, elems,
                    f"output '{output}' differs from the exact sum of the ranks' integer inputs "
                    f"in {n} of {elems} elements; first at {first}: {T.fmt_g(got)}, exact "
                    f"{T.fmt_g(want)}"))
            for r in range(self.world):
                if "non_finite" not in per_rank[r]:
                    continue
                n, first, got = per_rank[r]["non_finite"]
                found.append(self.finding(
                    "non_finite", r, [(output, r, per_rank[r]["out_mem"])], n, elems,
                    f"output '{output}' holds {n} non-finite elements (NaN or infinity) of "
                    f"{elems}, from finite inputs; first at {first}: {T.fmt_g(got)}"))
        if step.kind == "expect_equal":
            elems = self.scenario.tensors[step.a].elems
            for r in range(self.world):
                n, first = facts[r]["expect_equal"]
                if n:
                    found.append(self.finding(
                        "expect_equal", r, [(step.a, r, facts[r]["mem_a"]),
                                            (step.b, r, facts[r]["mem_b"])], n, elems,
                        f"'{step.a}' and '{step.b}' differ in {n} of {elems} elements "
                        f"(first at {first})"))
        if "retained" in facts[0]:
            for name in sorted(self.max_changed):
                elems = self.scenario.tensors[name].elems
                seen = self.max_changed[name]
                for r in range(self.world):
                    n, first, was, now = facts[r]["retained"][name]
                    if n <= seen[r]:
                        continue
                    if seen[r] == 0:
                        found.append(self.finding(
                            "retained_mismatch", r, [(name, r, facts[r]["mems"][name])], n, elems,
                            f"retained '{name}' (retained by {self.retained[name][0]}) changed "
                            f"in {n} of {elems} elements; first at {first}: {T.fmt_g(was)} -> "
                            f"{T.fmt_g(now)}"))
                    s["retained_mismatches_by_rank"][r] += n - seen[r]
                    if r == 0:
                        s["retained_mismatches"] += n - seen[r]
                    seen[r] = n
        pairs = {}
        for r in range(self.world):
            for a, b, lo, hi, ma, mb, oa, ob in facts[r]["aliases"]:
                pairs.setdefault((a, b), []).append((r, lo, hi, ma, mb, oa, ob))
        for key in sorted(pairs):
            s["pointer_alias"] = True
            if key in self.reported_aliases:
                continue
            self.reported_aliases.add(key)
            hits = pairs[key]
            r, lo, hi, ma, mb, oa, ob = hits[0]
            a, b = key
            ranks = ",".join(str(h[0]) for h in hits)
            found.append(self.finding(
                "pointer_alias", r, [(a, r, ma), (b, r, mb)], 0, 0,
                f"live tensors '{a}' (made by {oa}) and '{b}' (made by {ob}) share bytes"
                f" [0x{lo:x}, 0x{hi:x}) on rank(s) {ranks}"))
        return found

    def run(self):
        self.setup()
        self.send({"ev": "ready"})
        self.steps(self.scenario.steps)
        self.step_text = "end of scenario"
        for name in sorted(self.live):
            self.release(name)
        self.sync()
        self.gather(None)  # every rank finished before any reports the end
        self.send({"ev": "end", "steps": self.index})


def _watch_parent():
    """Exits when the parent goes away (its end of our stdin closes)."""
    try:
        while sys.stdin.buffer.read(65536):
            pass
    finally:
        os._exit(3)


def main():
    cfg = json.loads(sys.argv[1])
    os.dup2(2, 1)  # the user's prints must not mix with anything the parent reads
    threading.Thread(target=_watch_parent, daemon=True).start()
    w = Worker(cfg)
    try:
        w.run()
    except BaseException as e:  # noqa: BLE001 - every failure goes to the parent
        bad = isinstance(e, BadInput) or isinstance(e, dmalab.ScenarioError)
        w.send({"ev": "bad_input" if bad else "error", "i": w.index, "text": w.step_text,
                "type": type(e).__name__, "message": str(e),
                "traceback": traceback.format_exc()})
        while True:  # wait to be killed: exiting would turn every peer's wait into an error
            time.sleep(3600)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
