"""`python3 -m dmalab.torch check`: replays a scenario against a user's torch collective.

The parent loads the scenario with the C++ loader (bad input: exit 2 with the loader's located
message), starts W worker processes (dmalab.torch.worker), follows their progress on one pipe
each, and assembles the report that rank 0 merges step by step. The text and JSON reports and the
summary line come from the C++ formatter (include/dmalab/report.h), so they read exactly as
`dmalab replay`'s. A rank that raises is reported with its exception (a collective_error finding
when it raised inside the collective's call); a rank that makes no progress within the step
timeout is reported as hung; either way every worker is killed and the report ends FAIL (exit 1),
within about timeout + grace seconds of the stall. A rank's fatal error is always in the report,
however many findings came before it.
"""

import ctypes
import datetime
import functools
import json
import math
import os
import selectors
import signal
import subprocess
import sys
import time

import dmalab

MAX_FINDINGS = 64  # as ReplayOptions::max_findings
MAX_TIMEOUT = 86400.0  # seconds, as `dmalab replay --timeout`


def timeout_error(timeout):
    """None when `timeout` is a number of seconds the harness can wait; the reason otherwise."""
    if not isinstance(timeout, (int, float)) or not math.isfinite(timeout) or \
            not 0 < timeout <= MAX_TIMEOUT:
        return (f"--timeout is {timeout}; allowed a number of seconds more than 0 and at most "
                f"{MAX_TIMEOUT:g}")
    return None


def _check_spec(spec):
    """None when spec reads module:factory; the reason otherwise. The module is imported by the
    workers only, under the step timeout: importing user code here could hang the check."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        return (f"--collective is '{spec}'; allowed module:factory, "
                "e.g. examples.torch.persistent_workspace:make")
    return None


_PR_SET_PDEATHSIG = 1


def _die_with(parent):
    """In a worker, before it runs: killed when the harness dies (even by SIGKILL), and gone at
    once when the harness died before this ran."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(3)


def _end_worker(proc):
    """Kills a worker's process group (the worker and whatever the collective forked) and reaps
    the worker. The group is killed first: until the worker is reaped its number stays taken."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _exit_status(proc):
    """A worker's exit status once it has exited, without reaping it (see _end_worker)."""
    info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
    if info.si_code == os.CLD_EXITED:
        return info.si_status
    return -info.si_status  # killed by a signal, as Popen.returncode says it


class _Rank:

    def __init__(self, proc, fd):
        self.proc = proc
        self.fd = fd
        self.buf = b""
        self.step = 0
        self.text = "setup"
        self.phase = "startup"
        self.last = time.monotonic()
        self.started = False  # sent its first message (setup done)
        self.ended = False
        self.error = None
        self.closed = False


def _finding(d):
    f = dmalab.ReplayFinding()
    f.kind = d["kind"]
    f.step_index = d["step_index"]
    f.step = d["step"]
    f.rank = d["rank"]
    f.storage = [dmalab.StorageRef(t, dmalab.MemRef(r, addr, size, alloc))
                 for t, r, addr, size, alloc in d["storage"]]
    f.elems = d["elems"]
    f.of_elems = d["of_elems"]
    f.detail = d["detail"]
    return f


def _record(d):
    a = dmalab.AllReduceRecord()
    for k in ("step_index", "step", "input", "output", "form", "elems", "bytes", "hash",
              "rank_consistent"):
        setattr(a, k, d[k])
    return a


def _graph_step(steps):
    """The first capture_graph or launch_graph step, repeats included; None if there is none."""
    for step in steps:
        if step.kind in ("capture_graph", "launch_graph"):
            return step
        found = _graph_step(step.body)
        if found is not None:
            return found
    return None


def run_check(scenario_path, collective, device="cpu", json_path=None, timeout=300.0,
              grace=None, startup=120.0, stdout=None, stderr=None, perturb=None):
    """Runs the check; returns the exit status (0 PASS, 1 FAIL, 2 bad input).

    timeout: seconds any step (or the factory) may take on a rank before the rank counts as
    hung; startup: seconds a worker may take to start (import torch, join the gloo world);
    perturb: with device "cuda", the seed of the schedule perturbation (worker.Perturbation)."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr

    def bad(msg):
        print(f"dmalab.torch check: {msg}", file=stderr)
        return 2

    try:
        scenario = dmalab.load_scenario(scenario_path)
        dmalab.check_replay_work(scenario)  # as dmalab replay refuses it, before any worker
    except dmalab.ScenarioError as e:
        return bad(str(e))
    if device not in ("cpu", "cuda"):
        return bad(f"--device is '{device}'; allowed cpu, cuda")
    reason = timeout_error(timeout)
    if reason:
        return bad(reason)
    if perturb is not None and device != "cuda":
        return bad(f"--perturb={perturb} needs --device=cuda: it delays the GPU's streams")
    graph = _graph_step(scenario.steps)
    if graph is not None and device != "cuda":
        # Never skipped: a graph scenario run without its graphs would check something else.
        return bad(f"{graph.describe()}: graph steps need --device=cuda (they capture the "
                   "collective's calls into a torch.cuda.CUDAGraph); on CPU the scenario cannot "
                   "run as written")
    if device == "cuda":
        import torch
        if not torch.cuda.is_available():
            return bad("--device=cuda: torch sees no CUDA device")
    reason = _check_spec(collective)
    if reason:
        return bad(reason)
    if grace is None:
        grace = min(5.0, max(1.0, 0.25 * timeout))

    world = scenario.world
    # The rendezvous store lives here, on a port the kernel picked and this process holds: the
    # workers join it (no race for a free port) and it goes away with the check.
    import torch.distributed as dist
    store = dist.TCPStore("127.0.0.1", 0, None, True,
                          timeout=datetime.timedelta(seconds=max(timeout, startup)),
                          wait_for_workers=False)
    port = store.port
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.abspath(p or os.curdir) for p in sys.path])
    ranks = []
    try:
        for rank in range(world):
            r_fd, w_fd = os.pipe()
            cfg = {"rank": rank, "world": world, "port": port, "scenario": scenario_path,
                   "collective": collective, "device": device, "timeout": timeout,
                   "startup": startup, "report_fd": w_fd, "perturb": perturb}
            # A process group of its own (what the collective forks is ended with it) and a
            # parent-death signal (it dies with the harness).
            proc = subprocess.Popen(
                [sys.executable, "-m", "dmalab.torch.worker", json.dumps(cfg)],
                stdin=subprocess.PIPE, pass_fds=(w_fd,), env=env, process_group=0,
                preexec_fn=functools.partial(_die_with, os.getpid()))
            os.close(w_fd)
            ranks.append(_Rank(proc, r_fd))
        return _follow(scenario, collective, device, ranks, timeout, max(timeout, startup), grace,
                       json_path, stdout, stderr, perturb)
    finally:
        for r in ranks:
            _end_worker(r.proc)
            if r.proc.stdin:
                r.proc.stdin.close()
            if not r.closed:
                os.close(r.fd)


def _follow(scenario, collective, device, ranks, timeout, startup, grace, json_path, stdout,
            stderr, perturb=None):
    report = dmalab.ReplayReport()
    report.scenario = scenario.name
    report.file = scenario.file
    report.collective = collective
    report.device = f"torch-{device}"
    report.fidelity = "values"
    report.world = scenario.world
    report.wire = collective
    report.faults = "none"
    report.seed = scenario.seed
    report.perturb_seed = perturb
    records, findings, total = [], [], 0
    summary = None
    bad_input = None
    stop_at = None
    sel = selectors.DefaultSelector()
    for i, r in enumerate(ranks):
        sel.register(r.fd, selectors.EVENT_READ, i)

    def handle(i, ev):
        nonlocal total, summary, bad_input, stop_at
        r = ranks[i]
        r.last = time.monotonic()
        r.started = True
        kind = ev["ev"]
        if kind == "step":
            r.step, r.text, r.phase = ev["i"], ev["text"], "the harness"
        elif kind == "phase":
            r.phase = ev["phase"]
        elif kind == "done" and "records" in ev:
            records.extend(_record(r) for r in ev["records"])
            for f in ev["findings"]:
                total += 1
                if len(findings) < MAX_FINDINGS:
                    findings.append(_finding(f))
            summary = ev["summary"]
        elif kind == "end":
            r.ended = True
        elif kind == "bad_input":
            bad_input = ev["message"]
            stop_at = time.monotonic()
        elif kind == "error":
            r.error = ev
            if stop_at is None:
                stop_at = time.monotonic() + grace

    while True:
        now = time.monotonic()
        if all(r.ended for r in ranks):
            break
        if stop_at is None:
            for r in ranks:
                limit = timeout if r.started else startup
                if not r.ended and r.error is None and now - r.last > limit + grace:
                    stop_at = now
        if stop_at is not None and now >= stop_at:
            break
        wait = 0.5 if stop_at is None else max(0.0, min(0.5, stop_at - now))
        for key, _ in sel.select(timeout=wait):
            i = key.data
            r = ranks[i]
            data = os.read(r.fd, 1 << 16)
            if not data:
                sel.unregister(r.fd)
                os.close(r.fd)
                r.closed = True
                if not r.ended and r.error is None:
                    code = _exit_status(r.proc)
                    r.error = {"type": "exit", "i": r.step, "text": r.text,
                               "message": f"the process exited with status {code}",
                               "traceback": ""}
                    if stop_at is None:
                        stop_at = time.monotonic() + grace
                continue
            r.buf += data
            while b"\n" in r.buf:
                line, r.buf = r.buf.split(b"\n", 1)
                handle(i, json.loads(line))
    for r in ranks:
        if not r.ended:
            try:
                os.killpg(r.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    if bad_input is not None:
        print(f"dmalab.torch check: {bad_input}", file=stderr)
        return 2

    now = time.monotonic()
    failed = [r for r in ranks if r.error is not None]
    stalled = [r for r in ranks if not r.ended and r.error is None and
               now - r.last >= (timeout if r.started else startup)]
    extra = []
    for rank, r in enumerate(ranks):
        f = None
        if r.error is not None:
            e = r.error
            msg = e["message"].strip().splitlines()
            first = msg[0] if msg else ""
            what = (f"{e['type']}: {first}" if e["type"] != "exit" else first)
            f = dmalab.ReplayFinding()
            f.detail = f"rank {rank} failed in {r.phase}: {what}"
            if e.get("traceback"):
                print(f"--- rank {rank} ---\n{e['traceback']}", file=stderr, end="")
        elif r in stalled:
            f = dmalab.ReplayFinding()
            limit = timeout if r.started else startup
            f.detail = (f"rank {rank} made no progress for {now - r.last:.1f} s in {r.phase} "
                        f"(limit {limit:g} s); killed")
        if f is None:
            continue
        # A collective that raised inside its call, or returned something no all-reduce returns,
        # failed (issue 22: as a plugin's failing call); any other failure (an exit, a hang, an
        # exception of the harness's own work) stops the replay as a device error.
        f.kind = ("collective_error" if r.error is not None and r.error["type"] != "exit" and
                  (r.error["type"] == "CollectiveError" or
                   r.phase.startswith("the collective's")) else "device_error")
        f.step_index = r.step
        f.step = r.text
        f.rank = rank
        extra.append(f)
    if not failed and not stalled and not all(r.ended for r in ranks):
        f = dmalab.ReplayFinding()
        f.kind = "device_error"
        f.detail = "the ranks stopped without finishing"
        extra.append(f)
    # A rank's fatal error is what stopped the run: always kept, past MAX_FINDINGS too.
    for f in extra:
        total += 1
        findings.append(f)

    report.steps_executed = max(r.step for r in ranks)
    report.all_reduces = records
    report.findings = findings
    report.findings_total = total
    report.retained_mismatches_by_rank = [0] * scenario.world
    if summary:
        for k, v in summary.items():
            setattr(report, k, v)
    text = dmalab.format_report_text(report)
    diffs = dmalab.compare_with_expectation(scenario, report)
    if diffs is not None:
        text += dmalab.expectation_line(scenario, report) + "\n"
        text += "".join(f"  {d}\n" for d in diffs)
    # A report that cannot be written (a full disk, a reader gone) is exit 2 with the reason,
    # after the JSON is written.
    stdout_error = None
    try:
        stdout.write(text)
        stdout.flush()
    except OSError as e:
        stdout_error = e
    if json_path:
        try:
            with open(json_path, "w") as out:
                out.write(dmalab.format_report_json(report) + "\n")
        except OSError as e:
            print(f"dmalab.torch check: --json: cannot write '{json_path}': {e}", file=stderr)
            return 2
    if stdout_error is not None:
        print(f"dmalab.torch check: cannot write the report to stdout: {stdout_error}",
              file=stderr)
        return 2
    return 0 if report.passed else 1
