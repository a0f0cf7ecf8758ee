"""Shared by the Python tests: paths and running commands (run from the repository root)."""

import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DMALAB = os.environ.get("DMALAB_BIN", os.path.join(ROOT, "build", "bin", "dmalab"))


def run(args, timeout=600, **kw):
    """Runs a command from the repository root; returns (exit status, stdout, stderr)."""
    p = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=timeout, **kw)
    return p.returncode, p.stdout, p.stderr


def check(scenario, collective, *extra, timeout=600):
    return run([sys.executable, "-m", "dmalab.torch", "check", scenario,
                f"--collective={collective}", *extra], timeout=timeout)


def replay(scenario, *extra):
    return run([DMALAB, "replay", scenario, *extra])


def summary(text):
    """The summary line of a report."""
    lines = [l for l in text.splitlines() if l.startswith("pointer_alias=")]
    assert len(lines) == 1, text
    return lines[0]


def hashes(text):
    return [l.split("hash=")[1] for l in text.splitlines() if " hash=" in l]
