"""dmalab from Python: the scenario loader, fills, hashes and reports of the C++ library.

The compiled part, ``dmalab._core``, is built by the project's CMake into ``<build>/python/dmalab``;
with ``PYTHONPATH=python:<build>/python`` both halves import as one package from the tree.
``cmake --install`` puts both in one folder the interpreter searches (no ``PYTHONPATH``).
"""

import pkgutil

__path__ = pkgutil.extend_path(__path__, __name__)

try:
    from dmalab._core import (  # noqa: F401
        ScenarioError,
        ReplayReport,
        AllReduceRecord,
        ReplayFinding,
        StorageRef,
        MemRef,
        load_scenario,
        parse_scenario,
        check_replay_work,
        fill_key,
        fill_step_seed,
        fill_into,
        exact_integer_limit,
        dtype_bytes,
        dtype_names,
        xxh64,
        hash_string,
        summary_line,
        format_report_text,
        format_report_json,
        with_thousands,
        compare_with_expectation,
        expectation_line,
    )
except ImportError as e:  # pragma: no cover - depends on the build
    raise ImportError(
        "dmalab._core is not built or not on the path: build it with "
        "'cmake --build build --target dmalab_python_core' (needs python3-pybind11 and "
        "python3-dev) and put build/python on PYTHONPATH next to python/, or install it with "
        "'cmake --install build' (" + str(e) + ")"
    ) from e
