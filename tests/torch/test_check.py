"""python3 -m dmalab.torch check: the acceptance runs on the founding incident, equality with
`dmalab replay`, each finding kind, a raising and a hanging rank, and bad input (exit 2)."""

import json
import os
import re
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from helpers import check, hashes, replay, run, summary  # noqa: E402

GLM = "scenarios/glm52_tp4_layer0_residual.yaml"
SMALL = "tests/torch/small_tp4.yaml"
BUG = "examples.torch.persistent_workspace:make"
FIX = "examples.torch.empty_like_fix:make"
REGISTERED = "examples.torch.registered_buffer:make"
FAULTY = "faulty_collectives"


def without_header(text):
    """The report without the device line (device, wire) and the simulator's seed= line."""
    return [l for l in text.splitlines()
            if " device=" not in l and not l.startswith("seed=")]


class FoundingIncidentTest(unittest.TestCase):

    def test_persistent_workspace_fails_with_every_residual_element_overwritten(self):
        code, out, err = check(GLM, BUG)
        self.assertEqual(code, 1, err)
        self.assertEqual(summary(out), "pointer_alias=true  retained_mismatches=16,803,840 / "
                         "16,803,840  rank_consistent=true  status=FAIL")
        self.assertIn("FINDING pointer_alias: step 5 all_reduce 'layer0.o_proj'", out)
        # The fault changes lifetime, not numerics: the hashes are the replay's.
        _, rep, _ = replay(GLM, "--inject=persistent-output")
        self.assertEqual(hashes(out), hashes(rep))

    def test_empty_like_fix_passes_and_reports_exactly_what_replay_reports(self):
        code, out, err = check(GLM, FIX)
        self.assertEqual(code, 0, err)
        self.assertEqual(summary(out), "pointer_alias=false  retained_mismatches=0 / 16,803,840"
                         "  rank_consistent=true  status=PASS")
        rcode, rep, _ = replay(GLM)
        self.assertEqual(rcode, 0)
        self.assertEqual(len(hashes(out)), 2)
        self.assertEqual(without_header(out), without_header(rep))
        self.assertIn(f"collective={FIX} device=torch-cpu fidelity=values world=4 wire={FIX} "
                      "faults=none seed=52 steps=12", out)

    def test_registered_buffer_passes_above_its_size_and_fails_below(self):
        # 33.6 MB per result exceeds the 8 MiB registered buffer: fresh outputs, no finding.
        code, out, _ = check(GLM, REGISTERED)
        self.assertEqual((code, summary(out).endswith("status=PASS")), (0, True))
        # 8 KiB results fit it: every default result is the same buffer, as under the
        # simulator's persistent-output fault, which must count the same overwritten elements.
        code, out, _ = check(SMALL, REGISTERED)
        self.assertEqual(code, 1)
        rcode, rep, _ = replay(SMALL, "--inject=persistent-output")
        self.assertEqual(rcode, 1)
        self.assertEqual(summary(out), summary(rep))
        self.assertTrue(summary(out).startswith("pointer_alias=true  retained_mismatches=4,0"))


class FormsTest(unittest.TestCase):

    def test_out_in_place_repeat_add_equal_the_replay(self):
        # Integer fills: any correct sum is exact, so the whole report equals the replay's.
        for scenario in (SMALL, "scenarios/explicit_outputs_tp3.yaml"):
            code, out, err = check(scenario, FIX)
            self.assertEqual(code, 0, scenario + err)
            rcode, rep, _ = replay(scenario)
            self.assertEqual(rcode, 0)
            self.assertEqual(without_header(out), without_header(rep), scenario)

    def test_random_fills_give_the_replays_verdict_not_its_hashes(self):
        # Random bf16 fills: the example sums in fp32 and rounds once, the ring rounds to bf16
        # at every hop, so the output bytes (and hashes) differ while the verdicts agree.
        scenario = "scenarios/mtp_fused_residual_tp4.yaml"
        code, out, _ = check(scenario, FIX)
        rcode, rep, _ = replay(scenario)
        self.assertEqual((code, rcode), (0, 0))
        self.assertEqual(summary(out), summary(rep))
        self.assertEqual(len(hashes(out)), len(hashes(rep)))
        self.assertNotEqual(hashes(out), hashes(rep))
        code, out, _ = check(scenario, BUG)
        rcode, rep, _ = replay(scenario, "--inject=persistent-output")
        self.assertEqual((code, rcode), (1, 1))

    def test_json_report(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "r.json")
            code, out, _ = check(SMALL, FIX, f"--json={path}")
            self.assertEqual(code, 0)
            with open(path) as f:
                j = json.load(f)
        self.assertEqual(j["summary"], {"pointer_alias": False, "retained_mismatches": 0,
                                        "retained_elems": 4096, "retained_rank": 0,
                                        "retained_mismatches_by_rank": [0, 0, 0, 0],
                                        "rank_consistent": True, "status": "PASS"})
        self.assertEqual([a["form"] for a in j["all_reduces"]],
                         ["default", "default", "out", "in_place", "in_place"])
        self.assertEqual(j["device"], "torch-cpu")
        self.assertEqual(j["steps_executed"], 16)


class FindingsTest(unittest.TestCase):

    def test_wrong_sums_on_every_rank(self):
        code, out, _ = check(SMALL, f"{FAULTY}:off_by_one_everywhere")
        self.assertEqual(code, 1)
        wrong = [l for l in out.splitlines() if l.startswith("FINDING wrong_sum")]
        self.assertEqual(len(wrong), 5)  # five all-reduces, each one line for its four ranks
        self.assertIn("FINDING wrong_sum: step 3 all_reduce 'first' at "
                      "tests/torch/small_tp4.yaml:18:5, ranks 0-3 (4 findings, first shown): "
                      "output 'r' differs from the exact "
                      "sum of the ranks' integer inputs in 1 of 4096 elements; first at 0: ", out)
        self.assertEqual(summary(out), "pointer_alias=false  retained_mismatches=0 / 4,096  "
                         "rank_consistent=true  status=FAIL")

    def test_rank_inconsistency(self):
        code, out, _ = check(SMALL, f"{FAULTY}:off_by_one_on_rank1")
        self.assertEqual(code, 1)
        lines = [l for l in out.splitlines() if l.startswith("FINDING rank_inconsistent")]
        self.assertEqual(len(lines), 5)
        self.assertTrue(lines[0].startswith(
            "FINDING rank_inconsistent: step 3 all_reduce 'first' at "
            "tests/torch/small_tp4.yaml:18:5, rank 1: output 'r' differs from rank 0's in 1 of "
            "4096 elements (first at 7); storage: 'r' rank 0 ["), lines[0])
        self.assertIn("; 'r' rank 1 [", lines[0])
        self.assertIn(" hash=", out)
        self.assertTrue(summary(out).endswith("rank_consistent=false  status=FAIL"))

    def test_result_aliasing_its_input(self):
        code, out, _ = check(SMALL, f"{FAULTY}:returns_input")
        self.assertEqual(code, 1)
        self.assertIn("FINDING pointer_alias: step 3 all_reduce 'first' at "
                      "tests/torch/small_tp4.yaml:18:5, rank 0: live tensors 'a' (made by fill at "
                      "tests/torch/small_tp4.yaml:16:5) and 'r' (made by all_reduce 'first' at "
                      "tests/torch/small_tp4.yaml:18:5) share bytes [0x", out)
        self.assertIn(") on rank(s) 0,1,2,3; storage: 'a' rank 0 [", out)


class FailingRanksTest(unittest.TestCase):

    def test_a_rank_raising_in_the_collectives_call_is_a_collective_error(self):
        code, out, err = check(SMALL, f"{FAULTY}:raise_on_rank1", "--timeout=60")
        self.assertEqual(code, 1)
        self.assertIn("FINDING collective_error: step 5 all_reduce 'second' at "
                      "tests/torch/small_tp4.yaml:20:5, rank 1: rank 1 failed in the collective's "
                      "all_reduce: RuntimeError: injected failure on rank 1, call 2\n",
                      out)
        self.assertEqual(len([l for l in out.splitlines() if l.startswith("FINDING")]), 1)
        self.assertIn("raise RuntimeError(\"injected failure on rank 1, call 2\")", err)
        self.assertTrue(summary(out).endswith("status=FAIL"))

    def test_a_fatal_error_is_reported_after_any_number_of_findings(self):
        # Two wrong sums per call (one per rank) for 39 calls: 78 findings, more than the 64 a
        # report keeps; then call 40 raises on rank 1, and that is still in the report.
        code, out, err = check("tests/torch/many_calls_tp2.yaml",
                               f"{FAULTY}:wrong_then_raise_on_rank1", "--timeout=60")
        self.assertEqual(code, 1, err)
        self.assertIn("FINDING collective_error: step 80 all_reduce 'layer' at "
                      "tests/torch/many_calls_tp2.yaml:14:11 [iteration 40/45], rank 1: rank 1 "
                      "failed in the collective's all_reduce: RuntimeError: injected failure on "
                      "rank 1, call 40\n", out)
        self.assertIn("ERROR SUMMARY: 79 findings", out)

    def test_a_hanging_rank_is_reported_within_the_timeout(self):
        start = time.monotonic()
        code, out, _ = check(SMALL, f"{FAULTY}:hang_on_rank2", "--timeout=3", timeout=300)
        elapsed = time.monotonic() - start
        self.assertEqual(code, 1)
        m = re.search(r"FINDING device_error: step 3 all_reduce 'first' at "
                      r"tests/torch/small_tp4.yaml:18:5, rank 2: rank 2 made no progress for "
                      r"([0-9.]+) s in the collective's all_reduce \(limit 3 s\); killed", out)
        self.assertIsNotNone(m, out)
        # Reported once the 3 s limit and the 1 s grace have passed (plus polling and load).
        self.assertGreaterEqual(float(m.group(1)), 3.0)
        self.assertLess(float(m.group(1)), 15.0)
        # The whole run, four processes importing torch on a loaded machine included.
        self.assertLess(elapsed, 280)

    def test_a_collective_returning_the_wrong_shape(self):
        code, out, _ = check(SMALL, f"{FAULTY}:wrong_shape")
        self.assertEqual(code, 1)
        self.assertIn("FINDING collective_error: step 3 all_reduce 'first' at "
                      "tests/torch/small_tp4.yaml:18:5, rank 0: rank 0 failed in the collective's "
                      "all_reduce: CollectiveError: "
                      "all_reduce('a') returned a tensor of torch.bfloat16 [4096] on cpu for an "
                      "input of torch.bfloat16 [64, 64] on cpu", out)


class GraphsTest(unittest.TestCase):

    def test_a_graph_scenario_on_cpu_is_refused_not_skipped(self):
        code, out, err = check("examples/plugins/graph_shared_buffer.yaml", FIX)
        self.assertEqual((code, out), (2, ""))
        self.assertEqual(err, "dmalab.torch check: capture_graph 'decode' at examples/plugins/"
                         "graph_shared_buffer.yaml:33:5: graph steps need --device=cuda (they "
                         "capture the collective's calls into a torch.cuda.CUDAGraph); on CPU "
                         "the scenario cannot run as written\n")

    def test_perturbation_needs_cuda(self):
        code, out, err = check(SMALL, FIX, "--perturb=3")
        self.assertEqual((code, out), (2, ""))
        self.assertIn("--perturb=3 needs --device=cuda", err)
        code, _, err = check(SMALL, FIX, "--perturb=x")
        self.assertEqual(code, 2)
        self.assertIn("argument --perturb: 'x' is not an integer", err)


class BadInputTest(unittest.TestCase):

    def test_bad_scenario_is_the_loaders_located_error(self):
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            f.write("world: 4\ntensors: {x: [64]}\nsteps:\n  - allreduce: {input: x}\n")
        try:
            code, out, err = check(f.name, FIX)
        finally:
            os.unlink(f.name)
        self.assertEqual(code, 2)
        self.assertEqual(out, "")
        self.assertEqual(err, f"dmalab.torch check: {f.name}:4:5: field 'steps[0]': found step "
                         "'allreduce', allowed fill, all_reduce, retain, unretain, release, free, "
                         "add, expect_unchanged, expect_equal, repeat, capture_graph, "
                         "launch_graph\n")

    def test_bad_collectives_and_flags(self):
        cases = [
            ("nomodule", "--collective is 'nomodule'; allowed module:factory"),
            (f"{FAULTY}:nope", "module 'faulty_collectives' has no attribute 'nope'"),
            (f"{FAULTY}:NOT_CALLABLE", "'NOT_CALLABLE' is not callable"),
            ("no_such_module_xyz:make", "cannot import module 'no_such_module_xyz'"),
        ]
        for spec, message in cases:
            code, out, err = check(SMALL, spec)
            self.assertEqual((code, out), (2, ""), spec)
            self.assertIn(message, err)
        code, _, err = check(SMALL, FIX, "--device=tpu")
        self.assertEqual(code, 2)
        self.assertIn("--device is 'tpu'; allowed cpu, cuda", err)
        code, _, err = check("/nonexistent.yaml", FIX)
        self.assertEqual(code, 2)
        self.assertIn("/nonexistent.yaml", err)

    def test_usage_errors(self):
        for args, message in (([], "a command is required: check"),
                              (["check", SMALL], "the following arguments are required: "
                               "--collective"),
                              (["check", SMALL, f"--collective={FIX}", "--timeout=abc"],
                               "argument --timeout: value 'abc' is not a number of seconds"),
                              (["check", SMALL, f"--collective={FIX}", "--timeout=0"],
                               "argument --timeout: value '0' is not a number of seconds more "
                               "than 0 and at most 86400")):
            code, out, err = run([sys.executable, "-m", "dmalab.torch", *args])
            self.assertEqual((code, out), (2, ""), args)
            self.assertIn(message, err)

    def test_help_says_usage_once(self):
        for args in (["--help"], ["check", "--help"]):
            code, out, err = run([sys.executable, "-m", "dmalab.torch", *args])
            self.assertEqual((code, err), (0, ""), args)
            self.assertTrue(out.startswith("usage: python3 -m dmalab.torch check SCENARIO "
                                           "--collective=module:factory "), out)
            self.assertEqual(out.count("usage:"), 1, out)

    def test_a_raising_factory_is_bad_input(self):
        code, out, err = check(SMALL, f"{FAULTY}:factory_raises")
        self.assertEqual((code, out), (2, ""))
        self.assertRegex(err, r"--collective faulty_collectives:factory_raises: the factory raised "
                         r"on rank [0-3]: ValueError: no GPU buffers on this host")


if __name__ == "__main__":
    unittest.main()
