// dmalab._core: the C++ scenario loader, fill generator, output hash and report formatting,
// bound for Python. The Python side never parses scenario YAML itself and never re-implements
// the fill or the report format: a torch replay of a scenario loads, fills, hashes and prints
// exactly as `dmalab replay` does.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/core/dtype.h"
#include "common/core/enum_names.h"
#include "common/core/hash.h"
#include "common/ring/enum_names.h"
#include "common/scenario/enum_names.h"
#include "common/scenario/fill.h"
#include "common/scenario/replay_expectations.h"
#include "dmalab/faults.h"
#include "dmalab/replay.h"
#include "dmalab/report.h"
#include "dmalab/scenario.h"
#include "dmalab/scenario_loader.h"
#include "dmalab/wire.h"

namespace py = pybind11;

namespace dmalab {
namespace {

// The Python type of scenario errors (a ValueError); set once at import.
PyObject* scenario_error = nullptr;

[[noreturn]] void RaiseScenarioError(const absl::Status& s) {
  PyErr_SetString(scenario_error, std::string(s.message()).c_str());
  throw py::error_already_set();
}

// The value `name` names in `table` (common/core/enum_table.h); a ValueError with the table's
// message for any other name.
template <typename E, size_t N>
E EnumArg(const EnumTable<E, N>& table, const std::string& name) {
  absl::StatusOr<E> value = table.Parse(name);
  if (!value.ok()) throw py::value_error(std::string(value.status().message()));
  return *value;
}

// The name of `value` in `table`, as a Python str.
template <typename E, size_t N>
std::string EnumText(const EnumTable<E, N>& table, E value) {
  return std::string(table.Name(value));
}

// A C-contiguous buffer's bytes; `writable` asks for a writable one.
struct Bytes {
  py::buffer_info info;
  uint8_t* data() const { return static_cast<uint8_t*>(info.ptr); }
  size_t size() const { return static_cast<size_t>(info.size) * info.itemsize; }
};

Bytes BufferBytes(const py::buffer& b, bool writable) {
  Bytes out{b.request(writable)};
  if (out.info.ndim > 1) {
    ssize_t stride = out.info.itemsize;
    for (ssize_t d = out.info.ndim - 1; d >= 0; --d) {
      if (out.info.shape[d] > 1 && out.info.strides[d] != stride) {
        throw py::value_error("the buffer must be C-contiguous");
      }
      stride *= out.info.shape[d];
    }
  } else if (out.info.ndim == 1 && out.info.shape[0] > 1 &&
             out.info.strides[0] != out.info.itemsize) {
    throw py::value_error("the buffer must be C-contiguous");
  }
  return out;
}

}  // namespace
}  // namespace dmalab

PYBIND11_MODULE(_core, m) {
  using namespace dmalab;
  m.doc() = "dmalab's scenario loader, fill generator, xxh64 and report formatting.";

  static py::exception<std::exception> error(m, "ScenarioError", PyExc_ValueError);
  scenario_error = error.ptr();

  py::class_<SourceLoc>(m, "SourceLoc")
      .def_readonly("file", &SourceLoc::file)
      .def_readonly("line", &SourceLoc::line)
      .def_readonly("column", &SourceLoc::column)
      .def("__str__", &SourceLoc::ToString)
      .def("__repr__", [](const SourceLoc& l) { return "<SourceLoc " + l.ToString() + ">"; });

  py::class_<TensorDecl>(m, "TensorDecl")
      .def_readonly("name", &TensorDecl::name)
      .def_readonly("shape", &TensorDecl::shape)
      .def_property_readonly("dtype",
                             [](const TensorDecl& t) { return EnumText(kDTypes, t.dtype); })
      .def_readonly("loc", &TensorDecl::loc)
      .def_property_readonly("elems", &TensorDecl::elems)
      .def_property_readonly("bytes", &TensorDecl::bytes);

  py::class_<Step>(m, "Step")
      .def_property_readonly("kind", [](const Step& s) { return EnumText(kStepKinds, s.kind); })
      .def_readonly("loc", &Step::loc)
      .def_readonly("path", &Step::path)
      .def_readonly("label", &Step::label)
      .def_readonly("tensor", &Step::tensor)
      .def_property_readonly("fill_kind",
                             [](const Step& s) { return EnumText(kFillKinds, s.fill_kind); })
      .def_readonly("seed", &Step::seed)
      .def_readonly("lo", &Step::lo)
      .def_readonly("hi", &Step::hi)
      .def_readonly("input", &Step::input)
      .def_property_readonly("form",
                             [](const Step& s) { return EnumText(kAllReduceForms, s.form); })
      .def_readonly("result", &Step::result)
      .def_readonly("out", &Step::out)
      .def_readonly("dst", &Step::dst)
      .def_readonly("a", &Step::a)
      .def_readonly("b", &Step::b)
      .def_readonly("times", &Step::times)
      .def_readonly("body", &Step::body)
      .def_readonly("graph", &Step::graph)
      .def_readonly("ranks", &Step::ranks)
      .def("describe", &Step::Describe, "\"all_reduce 'label' at file:line:column\"");

  py::class_<Expectation>(m, "Expectation")
      .def_readonly("faults", &Expectation::faults)
      .def_readonly("passed", &Expectation::pass)
      .def_readonly("pointer_alias", &Expectation::pointer_alias)
      .def_readonly("retained_mismatches", &Expectation::retained_mismatches)
      .def_readonly("rank_consistent", &Expectation::rank_consistent);

  py::class_<Scenario>(m, "Scenario")
      .def_readonly("name", &Scenario::name)
      .def_readonly("description", &Scenario::description)
      .def_readonly("file", &Scenario::file)
      .def_readonly("world", &Scenario::world)
      .def_property_readonly("dtype", [](const Scenario& s) { return EnumText(kDTypes, s.dtype); })
      .def_property_readonly("wire", [](const Scenario& s) { return EnumText(kWireModes, s.wire); })
      .def_readonly("seed", &Scenario::seed)
      .def_readonly("topology", &Scenario::topology)
      .def_readonly("shapes", &Scenario::shapes)
      .def_readonly("tensors", &Scenario::tensors)
      .def_readonly("steps", &Scenario::steps)
      .def_readonly("expect", &Scenario::expect)
      .def("expanded_step_count", &Scenario::ExpandedStepCount)
      .def("expanded_work", &Scenario::ExpandedWork)
      .def("max_all_reduce_bytes", &Scenario::MaxAllReduceBytes);

  m.def(
      "load_scenario",
      [](const std::string& path) {
        absl::StatusOr<Scenario> s = LoadScenarioFile(path);
        if (!s.ok()) RaiseScenarioError(s.status());
        return *std::move(s);
      },
      py::arg("path"),
      "Loads a scenario file; raises ScenarioError with the loader's located message.");
  m.def(
      "parse_scenario",
      [](const std::string& yaml, const std::string& file_name) {
        absl::StatusOr<Scenario> s = ParseScenario(yaml, file_name);
        if (!s.ok()) RaiseScenarioError(s.status());
        return *std::move(s);
      },
      py::arg("yaml"), py::arg("file_name"));

  // Fills (common/scenario/fill.h).
  m.def(
      "check_replay_work",
      [](const Scenario& s) {
        if (absl::Status st = CheckReplayWork(s); !st.ok()) RaiseScenarioError(st);
      },
      "Raises ScenarioError when the scenario's work exceeds what one replay may do (dmalab "
      "replay's bound, repeats around an empty body included).");
  m.def("fill_step_seed", [](uint64_t step_seed, const std::vector<int64_t>& iterations) {
    return FillStepSeed(step_seed, iterations);
  });
  m.def("fill_key", &FillKey, py::arg("scenario_seed"), py::arg("step_seed"), py::arg("rank"));
  m.def(
      "fill_into",
      [](py::buffer out, const std::string& dtype, const std::string& kind, double lo, double hi,
         uint64_t key) {
        const DType t = EnumArg(kDTypes, dtype);
        const FillKind k = EnumArg(kFillKinds, kind);
        Bytes b = BufferBytes(out, /*writable=*/true);
        if (b.size() % DTypeBytes(t) != 0) {
          throw py::value_error("the buffer's size is not a whole number of elements");
        }
        py::gil_scoped_release unlocked;
        FillElements(t, k, lo, hi, key, absl::MakeSpan(b.data(), b.size()));
      },
      py::arg("out"), py::arg("dtype"), py::arg("kind"), py::arg("lo"), py::arg("hi"),
      py::arg("key"), "Writes the fill's elements into a writable C-contiguous buffer.");
  m.def("exact_integer_limit",
        [](const std::string& dtype) { return ExactIntegerLimit(EnumArg(kDTypes, dtype)); });
  m.def("dtype_bytes",
        [](const std::string& dtype) { return DTypeBytes(EnumArg(kDTypes, dtype)); });
  m.def(
      "dtype_names", [] { return kDTypes.Names(); },
      "The element types' names, as scenarios and the command line write them: "
      "['bf16', 'fp16', 'fp32'].");

  // Hashes (common/core/hash.h).
  m.def(
      "xxh64",
      [](py::buffer bytes, uint64_t seed) {
        Bytes b = BufferBytes(bytes, /*writable=*/false);
        py::gil_scoped_release unlocked;
        return Xxh64(absl::MakeConstSpan(b.data(), b.size()), seed);
      },
      py::arg("bytes"), py::arg("seed") = 0);
  m.def("hash_string", &HashString);

  // Reports (include/dmalab/replay.h, report.h).
  py::class_<MemRef>(m, "MemRef")
      .def(py::init([](int rank, uint64_t addr, uint64_t bytes, uint64_t alloc_id) {
             return MemRef{rank, addr, bytes, alloc_id};
           }),
           py::arg("rank"), py::arg("addr"), py::arg("bytes"), py::arg("alloc_id") = 0)
      .def_readwrite("rank", &MemRef::rank)
      .def_readwrite("addr", &MemRef::addr)
      .def_readwrite("bytes", &MemRef::bytes)
      .def_readwrite("alloc_id", &MemRef::alloc_id);

  py::class_<StorageRef>(m, "StorageRef")
      .def(py::init([](std::string tensor, MemRef mem) {
             return StorageRef{std::move(tensor), mem};
           }),
           py::arg("tensor"), py::arg("mem"))
      .def_readwrite("tensor", &StorageRef::tensor)
      .def_readwrite("mem", &StorageRef::mem);

  py::class_<ReplayFinding>(m, "ReplayFinding")
      .def(py::init<>())
      .def_property(
          "kind", [](const ReplayFinding& f) { return EnumText(kReplayFindingKinds, f.kind); },
          [](ReplayFinding& f, const std::string& k) { f.kind = EnumArg(kReplayFindingKinds, k); })
      .def_readwrite("step_index", &ReplayFinding::step_index)
      .def_readwrite("step", &ReplayFinding::step)
      .def_readwrite("rank", &ReplayFinding::rank)
      .def_readwrite("storage", &ReplayFinding::storage)
      .def_readwrite("elems", &ReplayFinding::elems)
      .def_readwrite("of_elems", &ReplayFinding::of_elems)
      .def_readwrite("detail", &ReplayFinding::detail);

  py::class_<AllReduceRecord>(m, "AllReduceRecord")
      .def(py::init<>())
      .def_readwrite("step_index", &AllReduceRecord::step_index)
      .def_readwrite("step", &AllReduceRecord::step)
      .def_readwrite("input", &AllReduceRecord::input)
      .def_readwrite("output", &AllReduceRecord::output)
      .def_property(
          "form", [](const AllReduceRecord& a) { return EnumText(kAllReduceForms, a.form); },
          [](AllReduceRecord& a, const std::string& f) { a.form = EnumArg(kAllReduceForms, f); })
      .def_readwrite("elems", &AllReduceRecord::elems)
      .def_readwrite("bytes", &AllReduceRecord::bytes)
      .def_readwrite("hash", &AllReduceRecord::hash)
      .def_readwrite("rank_consistent", &AllReduceRecord::rank_consistent);

  py::class_<ReplayReport>(m, "ReplayReport")
      .def(py::init<>())
      .def_readwrite("scenario", &ReplayReport::scenario)
      .def_readwrite("file", &ReplayReport::file)
      .def_readwrite("collective", &ReplayReport::collective)
      .def_readwrite("device", &ReplayReport::device)
      .def_readwrite("fidelity", &ReplayReport::fidelity)
      .def_readwrite("world", &ReplayReport::world)
      .def_readwrite("wire", &ReplayReport::wire)
      .def_readwrite("faults", &ReplayReport::faults)
      .def_readwrite("seed", &ReplayReport::seed)
      .def_readwrite("perturb_seed", &ReplayReport::perturb_seed)
      .def_readwrite("steps_executed", &ReplayReport::steps_executed)
      .def_readwrite("all_reduces", &ReplayReport::all_reduces)
      // Setting the findings regroups them (GroupFindings): the report prints groups.
      .def_property(
          "findings", [](const ReplayReport& r) { return r.findings; },
          [](ReplayReport& r, std::vector<ReplayFinding> findings) {
            r.findings = std::move(findings);
            GroupFindings(r);
          })
      .def_readwrite("findings_total", &ReplayReport::findings_total)
      .def_readwrite("pointer_alias", &ReplayReport::pointer_alias)
      .def_readwrite("retained_rank", &ReplayReport::retained_rank)
      .def_readwrite("retained_mismatches", &ReplayReport::retained_mismatches)
      .def_readwrite("retained_elems", &ReplayReport::retained_elems)
      .def_readwrite("retained_mismatches_by_rank", &ReplayReport::retained_mismatches_by_rank)
      .def_readwrite("rank_consistent", &ReplayReport::rank_consistent)
      .def_property_readonly("passed", &ReplayReport::pass);

  m.def("summary_line", &SummaryLine);
  m.def("format_report_text", &FormatReportText);
  m.def("format_report_json", &FormatReportJson);
  m.def("with_thousands", &WithThousands);
  m.def(
      "compare_with_expectation",
      [](const Scenario& s, const ReplayReport& r, const std::string& faults) -> py::object {
        absl::StatusOr<FaultSet> f = FaultSet::Parse(faults);
        if (!f.ok()) throw py::value_error(std::string(f.status().message()));
        const Expectation* e = FindExpectation(s, *f);
        if (e == nullptr) return py::none();
        return py::cast(CompareWithExpectation(*e, r));
      },
      py::arg("scenario"), py::arg("report"), py::arg("faults") = "none",
      "None when the scenario states no verdict for these faults, else the differences (empty: "
      "met).");
  m.def(
      "expectation_line",
      [](const Scenario& s, const ReplayReport& r, const std::string& faults) -> py::object {
        absl::StatusOr<FaultSet> f = FaultSet::Parse(faults);
        if (!f.ok()) throw py::value_error(std::string(f.status().message()));
        const Expectation* e = FindExpectation(s, *f);
        if (e == nullptr) return py::none();
        return py::cast(ExpectationLine(*e, r, CompareWithExpectation(*e, r)));
      },
      py::arg("scenario"), py::arg("report"), py::arg("faults") = "none",
      "None when the scenario states no verdict for these faults, else the report's expectation "
      "line (dmalab replay's).");
}
