"""One rank of `python3 -m dmalab.torch check`.

The parent (dmalab.torch.harness) starts W of these. Each joins a gloo world on 127.0.0.1, makes
two groups (the harness's own exchange, and the group handed to the user's factory), builds the
collective with factory(rank, world, device, group) and replays the scenario's steps with torch
tensors, exactly as common/scenario/replay.cc executes them on a Device. After every step the
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
        self.group = dist.new_group(backend="gloo", timeout=timeout)
        self.scenario = dmalab.load_scenario(self.cfg["scenario"])
        if self.cfg["device"] == "cuda":
            self.device = torch.device("cuda", self.rank % torch.cuda.device_count())
            torch.cuda.set_device(self.device)
        else:
            self.device = torch.device("cpu")
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
            local = {}
            record = self.one(step, local)
            self.sync()
            if step.kind not in ("retain", "unretain", "expect_equal"):
                local["retained"] = self.verify_retained()
            local["aliases"] = self.aliases()
            local["mems"] = {n: self.mem(n) for n in self.retained}
            if record:
                local["out_mem"] = self.mem(record["output"])
            if step.kind == "expect_equal":
                local["mem_a"], local["mem_b"] = self.mem(step.a), self.mem(step.b)
            facts = self.gather(local)
            if self.rank == 0:
                self.send({"ev": "done", "i": self.index, "record": record,
                           "findings": self.merge(step, facts), "summary": self.summary})
            else:
                self.send({"ev": "done", "i": self.index})

    def one(self, step, local):
        kind = step.kind
        if kind == "fill":
            self.fill(step)
        elif kind == "all_reduce":
            return self.all_reduce(step, local)
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
        return None

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

    def all_reduce(self, step, local):
        inp = self.live[step.input].t
        decl = self.scenario.tensors[step.input]
        expected = self.exact_sum(inp, decl.dtype)
        self.send({"ev": "phase", "phase": "the collective's all_reduce"})
        if step.form == "default":
            res = self.coll.all_reduce(inp)
            self.check_result(step, inp, res)
            output = step.result
        elif step.form == "out":
            self.coll.all_reduce(inp, out=self.live[step.out].t)
            output = step.out
        else:
            self.coll.all_reduce(inp, out=inp)
            output = step.input
        self.sync()
        self.send({"ev": "phase", "phase": "the harness"})
        if step.form == "default":
            self.bind(step.result, res)
        out = self.live[output].t
        h = T.xxh64(out)
        hashes = self.gather(h)
        if any(x != hashes[0] for x in hashes):
            ref, _ = T.host_bytes(out)
            ref = ref.clone().reshape(-1).view(torch.uint8)
            dist.broadcast(ref, 0, group=self.harness)
            if hashes[self.rank] != hashes[0]:
                local["inconsistent"] = T.count_changed(ref.view(out.dtype), out.detach().cpu())
        if expected is not None:
            got = out.detach().cpu().reshape(-1).float()
            wrong = got != expected
            n = int(wrong.sum().item())
            if n:
                i = int(torch.nonzero(wrong)[0].item())
                local["wrong_sum"] = (n, i, float(got[i].item()), float(expected[i].item()))
        return {"step_index": self.index, "step": self.step_text, "input": step.input,
                "output": output, "form": step.form, "elems": decl.elems, "bytes": decl.bytes,
                "hash": hashes[0], "rank_consistent": all(x == hashes[0] for x in hashes)}

    def exact_sum(self, inp, dtype):
        """The exact sum over ranks (fp32, flat) when every rank's input holds integers whose
        partial sums are exact in the dtype whatever the order (world * max|x| within the
        dtype's exact integer range); None otherwise."""
        x = inp.detach().cpu().reshape(-1).float()
        integral = bool(torch.equal(x, x.round())) if x.numel() else True
        big = float(x.abs().max().item()) if x.numel() else 0.0
        flags = torch.tensor([0.0 if integral else 1.0, big], dtype=torch.float64)
        dist.all_reduce(flags, op=dist.ReduceOp.MAX, group=self.harness)
        if flags[0].item() != 0.0 or self.world * flags[1].item() > dmalab.exact_integer_limit(dtype):
            return None
        total = x.to(torch.int32)
        dist.all_reduce(total, group=self.harness)
        return total.float()

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
        if step.kind == "all_reduce":
            output = step.result if step.form == "default" else (
                step.out if step.form == "out" else step.input)
            elems = self.scenario.tensors[output].elems
            for r in range(1, self.world):
                if "inconsistent" not in facts[r]:
                    continue
                n, first = facts[r]["inconsistent"]
                s["rank_consistent"] = False
                found.append(self.finding(
                    "rank_inconsistent", r, [(output, 0, facts[0]["out_mem"]),
                                             (output, r, facts[r]["out_mem"])], n, elems,
                    f"output '{output}' differs from rank 0's in {n} of {elems} elements "
                    f"(first at {first})"))
            for r in range(self.world):
                if "wrong_sum" not in facts[r]:
                    continue
                n, first, got, want = facts[r]["wrong_sum"]
                found.append(self.finding(
                    "wrong_sum", r, [(output, r, facts[r]["out_mem"])], n, elems,
                    f"output '{output}' differs from the exact sum of the ranks' integer inputs "
                    f"in {n} of {elems} elements; first at {first}: {T.fmt_g(got)}, exact "
                    f"{T.fmt_g(want)}"))
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
