"""dmalab.torch.record: the exact steps of a scripted call sequence, and the small
tensor-parallel transformer recorded at W = 2 and 4 (plain and fused), replayed with
`dmalab replay` (PASS), with the persistent-output fault (FAIL), and checked against the
persistent-workspace collective (FAIL)."""

import os
import re
import sys
import tempfile
import unittest

import torch

sys.path.insert(0, os.path.dirname(__file__))
from helpers import check, replay, run, summary  # noqa: E402

import dmalab  # noqa: E402
import dmalab.torch  # noqa: E402


class Doubling:
    """A one-process stand-in for a collective over two equal ranks: the sum is 2 * inp."""

    def all_reduce(self, inp, out=None):
        if out is None:
            out = torch.empty_like(inp)
        torch.mul(inp, 2, out=out)
        return out


def steps_of(text):
    """The steps as (kind, fields without the label) tuples."""
    out = []
    for line in text.split("steps:\n")[1].split("expect:")[0].splitlines():
        line = re.sub(r', label: "[^"]*"', "", line.strip()[2:])
        out.append(line)
    return out


class RecorderUnitTest(unittest.TestCase):

    def test_forms_lifetimes_and_model_writes(self):
        coll = Doubling()
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "unit.yaml")
            with torch.no_grad(), dmalab.torch.record(coll, path=path, world=2) as rec:
                a = torch.ones(4, 16, dtype=torch.bfloat16)
                r1 = coll.all_reduce(a)             # default form; r1 stays alive
                del a
                buf = torch.empty(4, 16, dtype=torch.bfloat16)
                coll.all_reduce(torch.ones(4, 16, dtype=torch.bfloat16), out=buf)
                r1.add_(1)                          # the model writes into a result
                coll.all_reduce(buf, out=buf)       # in place on a tensor seen before
                view = coll.all_reduce(r1).view(-1)  # only a view of the result is kept
                del buf
                coll.all_reduce(view.view(4, 16), out=r1)
            self.assertEqual(coll.all_reduce.__func__, Doubling.all_reduce)  # unwrapped
            with open(path) as f:
                text = f.read()
        self.assertEqual(text, rec.text)
        self.assertEqual(steps_of(text), [
            "fill: {tensor: x1, kind: int, lo: -64, hi: 64, seed: 1}",
            "all_reduce: {input: x1, result: y1}",
            "retain: x1",
            "retain: y1",
            "release: x1",
            "fill: {tensor: x2, kind: int, lo: -64, hi: 64, seed: 2}",
            "fill: {tensor: buf2, kind: int, lo: -64, hi: 64, seed: 3}",
            "all_reduce: {input: x2, out: buf2}",
            "retain: x2",
            "retain: buf2",
            "release: x2",
            "unretain: y1",
            "fill: {tensor: y1, kind: int, lo: -64, hi: 64, seed: 4}",
            "retain: y1",
            "unretain: buf2",
            "all_reduce: {input: buf2, in_place: true}",
            "retain: buf2",
            "all_reduce: {input: y1, result: y4}",
            "retain: y4",
            "release: buf2",
            "unretain: y1",
            "all_reduce: {input: y4, out: y1}",
            "retain: y1",
        ])
        self.assertIn("world: 2\n", text)
        self.assertIn('label: "call 1: RecorderUnitTest.test_forms_lifetimes_and_model_writes '
                      '(test_recorder.py:', text)
        s = dmalab.parse_scenario(text, "unit.yaml")  # the C++ loader accepts it
        self.assertEqual(s.world, 2)
        self.assertEqual(sorted(s.tensors), ["buf2", "x1", "x2", "y1", "y4"])

    def test_errors(self):
        coll = Doubling()
        with self.assertRaisesRegex(dmalab.torch.RecordError, "world\\*8 = 16; found 'x1' "
                                    "\\[3, 5\\] \\(15 elements\\)"):
            with dmalab.torch.record(coll, world=2):
                coll.all_reduce(torch.ones(3, 5))
        with self.assertRaisesRegex(dmalab.torch.RecordError, "no all_reduce call"):
            with dmalab.torch.record(coll, world=2):
                pass
        with self.assertRaisesRegex(dmalab.torch.RecordError, "inference_mode"):
            with torch.inference_mode(), dmalab.torch.record(coll, world=2):
                pass
        import examples.torch.persistent_workspace as pw
        bug = pw.PersistentWorkspaceAllReduce(group=None, device="cpu", max_bytes=1 << 12)
        bug.all_reduce = lambda inp, out=None, b=bug: b.workspace[:inp.numel() * 2].view(
            inp.dtype).view(inp.shape).copy_(inp)
        with self.assertRaisesRegex(dmalab.torch.RecordError, "call 2: .*all_reduce returned "
                                    "the bytes of 'y1', which is still alive"):
            with dmalab.torch.record(bug, world=2):
                keep = bug.all_reduce(torch.ones(16, dtype=torch.bfloat16))  # noqa: F841
                bug.all_reduce(torch.ones(16, dtype=torch.bfloat16))
        with self.assertRaisesRegex(ValueError, "torch.int32 is not one of bf16, fp16, fp32"):
            with dmalab.torch.record(coll, world=2):
                coll.all_reduce(torch.ones(16, dtype=torch.int32))


class TransformerRecordingTest(unittest.TestCase):

    def record(self, world, fused, d):
        path = os.path.join(d, f"tp{world}{'_fused' if fused else ''}.yaml")
        args = [sys.executable, "-m", "examples.torch.tp_transformer", f"--world={world}",
                f"--out={path}"] + (["--fused"] if fused else [])
        code, out, err = run(args)
        self.assertEqual(code, 0, err)
        # The tensor-parallel bf16 model computes what the unsharded fp32 one does.
        err_max = float(re.search(r"= ([0-9.e-]+)$", out.strip()).group(1))
        self.assertLess(err_max, 0.1, out)
        return path

    def test_recorded_model_replays_pass_and_fails_the_buggy_collectives(self):
        with tempfile.TemporaryDirectory() as d:
            for world, fused, calls in ((2, False, 5), (4, False, 5), (2, True, 5),
                                        (4, True, 5)):
                with self.subTest(world=world, fused=fused):
                    path = self.record(world, fused, d)
                    with open(path) as f:
                        text = f.read()
                    self.assertIn(f"world: {world}\n", text)
                    self.assertEqual(text.count("- all_reduce:"), calls)
                    self.assertEqual("in_place: true" in text, fused)
                    code, out, _ = replay(path)
                    self.assertEqual(code, 0, out)
                    self.assertTrue(summary(out).startswith("pointer_alias=false  "
                                                            "retained_mismatches=0 / "))
                    code, out, _ = replay(path, "--inject=persistent-output")
                    self.assertEqual(code, 1, out)
                    self.assertTrue(summary(out).startswith("pointer_alias=true"), out)
                    if world == 4:
                        for coll, want in (("persistent_workspace", 1), ("registered_buffer", 1),
                                           ("empty_like_fix", 0)):
                            code, out, _ = check(path, f"examples.torch.{coll}:make")
                            self.assertEqual(code, want, coll + out)


if __name__ == "__main__":
    unittest.main()
