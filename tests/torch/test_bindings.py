"""dmalab._core: the loader's objects and errors, fills against the documented formula, xxh64
against the specification's values, report formatting."""

import os
import struct
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from helpers import ROOT  # noqa: E402

import dmalab  # noqa: E402

M64 = (1 << 64) - 1


def splitmix64(x):
    z = (x + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def key(scenario_seed, step_seed, rank):
    # scenarios/README.md, "Fill contents"
    return splitmix64(splitmix64(splitmix64(scenario_seed) ^ step_seed) ^ rank)


def u(k, i):
    return splitmix64((k + i * 0x9E3779B97F4A7C15) & M64)


class LoaderTest(unittest.TestCase):

    def test_founding_scenario_fields(self):
        s = dmalab.load_scenario(os.path.join(ROOT, "scenarios/glm52_tp4_layer0_residual.yaml"))
        self.assertEqual((s.name, s.world, s.dtype, s.wire, s.seed),
                         ("glm52_tp4_layer0_residual", 4, "bf16", "bf16", 52))
        self.assertEqual(sorted(s.tensors), ["attn_out", "attn_partial", "embed_partial",
                                             "residual"])
        self.assertEqual(s.tensors["residual"].shape, [2735, 6144])
        self.assertEqual(s.tensors["residual"].elems, 16803840)
        self.assertEqual(s.tensors["residual"].bytes, 33607680)
        self.assertEqual([st.kind for st in s.steps],
                         ["fill", "fill", "all_reduce", "retain", "all_reduce",
                          "expect_unchanged", "unretain", "add", "release", "release", "release",
                          "release"])
        fill = s.steps[0]
        self.assertEqual((fill.tensor, fill.fill_kind, fill.lo, fill.hi, fill.seed),
                         ("embed_partial", "int", 1.0, 16.0, 1))
        ar = s.steps[2]
        self.assertEqual((ar.input, ar.form, ar.result, ar.label),
                         ("embed_partial", "default", "residual", "embedding"))
        self.assertEqual((ar.loc.line, ar.loc.column), (32, 5))
        self.assertTrue(ar.describe().startswith("all_reduce 'embedding' at "))
        add = s.steps[7]
        self.assertEqual((add.dst, add.a, add.b), ("residual", "residual", "attn_out"))
        self.assertEqual(s.expanded_step_count(), 12)

    def test_forms_and_repeat(self):
        s = dmalab.load_scenario(os.path.join(ROOT, "scenarios/explicit_outputs_tp3.yaml"))
        forms = [(st.form, st.out) for st in s.steps if st.kind == "all_reduce"]
        self.assertEqual(forms, [("out", "y"), ("in_place", "")])
        rep = [st for st in s.steps if st.kind == "repeat"][0]
        self.assertEqual(rep.times, 4)
        self.assertEqual([b.label for b in rep.body], ["in_place_again", "out_again"])

    def test_errors_are_the_loaders_located_messages(self):
        # Messages as documented in scenarios/README.md, "Bad input".
        cases = [
            ("world: 17\ntensors: {x: [64]}\nsteps: []\n",
             "t.yaml:1:8: field 'world': found 17, allowed an integer in 2..16"),
            ("world: four\ntensors: {x: [64]}\nsteps: []\n",
             "t.yaml:1:8: field 'world': found 'four', allowed an integer in 2..16"),
            ("world: 2\ndtype: f32\ntensors: {x: [64]}\nsteps: []\n",
             "t.yaml:2:8: field 'dtype': found 'f32', allowed bf16, fp16, fp32"),
        ]
        for text, message in cases:
            with self.assertRaises(dmalab.ScenarioError) as cm:
                dmalab.parse_scenario(text, "t.yaml")
            self.assertEqual(str(cm.exception), message)
            self.assertIsInstance(cm.exception, ValueError)

    def test_missing_file(self):
        with self.assertRaises(dmalab.ScenarioError) as cm:
            dmalab.load_scenario("/nonexistent/x.yaml")
        self.assertIn("/nonexistent/x.yaml", str(cm.exception))


class FillTest(unittest.TestCase):

    def test_int_bf16_follows_the_formula(self):
        k = dmalab.fill_key(52, dmalab.fill_step_seed(1, []), 3)
        self.assertEqual(k, key(52, 1, 3))
        n, lo, hi = 1000, -16, 16
        buf = bytearray(2 * n)
        dmalab.fill_into(buf, "bf16", "int", lo, hi, k)
        for i in range(n):
            v = lo + (((u(k, i) >> 32) * (hi - lo + 1)) >> 32)
            want = struct.pack("<f", float(v))[2:]  # bf16: the top half of an exact fp32
            self.assertEqual(bytes(buf[2 * i:2 * i + 2]), want, i)

    def test_random_fp32_follows_the_formula(self):
        k = dmalab.fill_key(7, 11, 0)
        n, lo, hi = 1000, -1.0, 1.0
        buf = bytearray(4 * n)
        dmalab.fill_into(buf, "fp32", "random", lo, hi, k)
        for i in range(n):
            v = lo + (u(k, i) >> 40) * 2.0 ** -24 * (hi - lo)
            self.assertEqual(bytes(buf[4 * i:4 * i + 4]), struct.pack("<f", v), i)

    def test_repeat_iterations_mix_into_the_step_seed(self):
        s = 5
        for it in (0, 2):
            s = splitmix64(s ^ (it + 1))
        self.assertEqual(dmalab.fill_step_seed(5, [0, 2]), s)

    def test_bad_arguments(self):
        with self.assertRaises(ValueError):
            dmalab.fill_into(bytearray(3), "bf16", "int", 0, 1, 1)
        with self.assertRaises(ValueError):
            dmalab.fill_into(bytearray(4), "int8", "int", 0, 1, 1)
        with self.assertRaises(ValueError):
            dmalab.fill_into(bytearray(4), "bf16", "gauss", 0, 1, 1)

    def test_exact_integer_limits(self):
        self.assertEqual([dmalab.exact_integer_limit(d) for d in ("bf16", "fp16", "fp32")],
                         [256, 2048, 1 << 24])


class HashTest(unittest.TestCase):

    def test_xxh64_specification_values(self):
        # XXH64 with seed 0, from the xxHash project's published test values.
        self.assertEqual(dmalab.xxh64(b""), 0xEF46DB3751D8E999)
        self.assertEqual(dmalab.xxh64(b"a"), 0xD24EC4F1A98C6E5B)
        self.assertEqual(dmalab.xxh64(b"abc"), 0x44BC2CF5AD770999)
        self.assertEqual(dmalab.hash_string(0xEF46DB3751D8E999), "xxh64:ef46db3751d8e999")

    def test_memoryview_and_bytearray_agree(self):
        data = bytes(range(256)) * 33
        self.assertEqual(dmalab.xxh64(memoryview(data)), dmalab.xxh64(bytearray(data)))


class ReportTest(unittest.TestCase):

    def test_summary_line_and_text(self):
        r = dmalab.ReplayReport()
        r.scenario, r.file, r.device, r.world, r.wire, r.faults, r.seed = (
            "s", "s.yaml", "torch-cpu", 4, "m:f", "none", 52)
        r.pointer_alias = True
        r.retained_mismatches = 16803840
        r.retained_elems = 16803840
        r.retained_mismatches_by_rank = [16803840] * 4
        f = dmalab.ReplayFinding()
        f.kind = "wrong_sum"
        f.step_index, f.step, f.rank, f.detail = 3, "all_reduce at s.yaml:3:5", 1, "x"
        f.storage = [dmalab.StorageRef("y", dmalab.MemRef(1, 0x1000, 16, 2))]
        r.findings = [f]
        r.findings_total = 1
        self.assertFalse(r.passed)
        self.assertEqual(dmalab.summary_line(r),
                         "pointer_alias=true  retained_mismatches=16,803,840 / 16,803,840  "
                         "rank_consistent=true  status=FAIL")
        self.assertIn("FINDING wrong_sum: step 3 all_reduce at s.yaml:3:5, rank 1: x; storage: "
                      "'y' rank 1 [0x1000, 0x1010) alloc 2\n", dmalab.format_report_text(r))
        with self.assertRaises(ValueError):
            f.kind = "no_such_kind"


if __name__ == "__main__":
    unittest.main()
