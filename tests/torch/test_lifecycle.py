"""python3 -m dmalab.torch check as processes (issue 25, item 9): workers die with the harness,
what the collective forks ends with its worker, importing the collective is under --timeout, a
bad --timeout is a usage error, and output that cannot be written is exit 2 without a
traceback (the JSON still written)."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from helpers import ROOT, check, replay, run  # noqa: E402

TP2 = "tests/plugins/hostile_tp2.yaml"  # 2 ranks, 2 all-reduces
FIX = "examples.torch.empty_like_fix:make"


def gone(pid):
    """The process ended (a zombie no one reaps counts as ended)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return any(l.startswith("State:") and "Z" in l.split()[1] for l in f)
    except FileNotFoundError:
        return True


def children(pid):
    out = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            out += [int(p) for p in f.read().split()]
    return out


class UsageTest(unittest.TestCase):

    def test_a_timeout_that_is_not_a_finite_number_of_seconds_is_a_usage_error(self):
        for value in ("inf", "nan", "-1", "0", "1e9", "abc"):
            code, out, err = run([sys.executable, "-m", "dmalab.torch", "check", TP2,
                                  f"--collective={FIX}", f"--timeout={value}"])
            self.assertEqual((code, out), (2, ""), value)
            self.assertIn(f"dmalab.torch: argument --timeout: value '{value}' is not a number of "
                          "seconds more than 0 and at most 86400\n", err)
            self.assertNotIn("Traceback", err)

    def test_nested_repeats_around_an_empty_body_are_refused_as_replay_refuses_them(self):
        # Issue 25, item 4: 10^18 iterations of nothing; the workers would loop until --timeout.
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            f.write("world: 2\ntensors: {x: [64]}\nsteps:\n  - fill: {tensor: x}\n"
                    "  - repeat: {times: 1000000, steps: [{repeat: {times: 1000000, steps: "
                    "[{repeat: {times: 1000000, steps: []}}]}}]}\n")
        try:
            code, out, err = run([sys.executable, "-m", "dmalab.torch", "check", f.name,
                                  f"--collective={FIX}"])
            rcode, _, rerr = replay(f.name)
        finally:
            os.unlink(f.name)
        self.assertEqual((code, out, rcode), (2, "", 2))
        self.assertEqual(err, f"dmalab.torch check: {f.name}: found 1000000000000000001 steps "
                         "with repeats expanded (every repeat iteration counting as one step at "
                         "least), allowed at most 10000000 steps in one replay "
                         "(ReplayOptions::max_steps; reduce the repeat counts)\n")
        self.assertEqual(err.replace("dmalab.torch check: ", "dmalab replay: "), rerr)

    def test_help_to_a_full_stdout_is_exit_2_without_a_traceback(self):
        with open("/dev/full", "w") as full:
            p = subprocess.run([sys.executable, "-m", "dmalab.torch", "--help"], cwd=ROOT,
                               stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
        self.assertEqual(p.returncode, 2)
        self.assertEqual(p.stderr, "dmalab.torch: cannot write to stdout: [Errno 28] No space "
                         "left on device\n")


class OutputTest(unittest.TestCase):

    def test_a_report_to_a_full_stdout_is_exit_2_and_the_json_is_written(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "r.json")
            with open("/dev/full", "w") as full:
                p = subprocess.run([sys.executable, "-m", "dmalab.torch", "check", TP2,
                                    f"--collective={FIX}", f"--json={path}"], cwd=ROOT,
                                   stdout=full, stderr=subprocess.PIPE, text=True, timeout=600)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertEqual(p.stderr, "dmalab.torch check: cannot write the report to stdout: "
                             "[Errno 28] No space left on device\n")
            with open(path) as f:
                self.assertEqual(json.load(f)["summary"]["status"], "PASS")


class ProcessTest(unittest.TestCase):

    def test_importing_the_collective_is_under_the_timeout(self):
        start = time.monotonic()
        code, out, err = check(TP2, "sleepy_module:make", "--timeout=3", timeout=600)
        self.assertEqual(code, 1, err)
        self.assertIn("rank 0 made no progress for ", out)
        self.assertIn(" s in importing the collective's module (limit 3 s); killed", out)
        self.assertLess(time.monotonic() - start, 300)

    def test_what_the_collective_forks_ends_with_its_worker(self):
        with tempfile.TemporaryDirectory() as tmp:
            pid_file = os.path.join(tmp, "child.pid")
            code, out, err = run([sys.executable, "-m", "dmalab.torch", "check", TP2,
                                  "--collective=lifecycle_collectives:forks_a_child"],
                                 env={**os.environ, "DMALAB_TEST_CHILD_PID": pid_file})
            self.assertEqual(code, 0, out + err)
            with open(pid_file) as f:
                child = int(f.read())
        time.sleep(0.5)
        if not gone(child):
            os.kill(child, signal.SIGKILL)
            self.fail(f"the collective's child {child} outlived the check")

    def test_workers_die_with_the_harness(self):
        harness = subprocess.Popen([sys.executable, "-m", "dmalab.torch", "check", TP2,
                                    "--collective=lifecycle_collectives:stuck_in_c", "--timeout=600"],
                                   cwd=ROOT, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        try:
            workers = []
            for _ in range(1200):  # the workers start within two minutes
                workers = children(harness.pid)
                if len(workers) == 2:
                    break
                time.sleep(0.1)
            self.assertEqual(len(workers), 2)
        finally:
            harness.kill()
            harness.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not all(gone(w) for w in workers):
            time.sleep(0.1)
        alive = [w for w in workers if not gone(w)]
        for w in alive:
            os.kill(w, signal.SIGKILL)
        self.assertEqual(alive, [], "workers outlived the harness")


if __name__ == "__main__":
    unittest.main()
