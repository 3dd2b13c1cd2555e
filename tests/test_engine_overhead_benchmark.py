"""benchmarks/engine_overhead.py keeps working: its delivery side runs a small linear workflow."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "engine_overhead.py"


def _load_benchmark() -> ModuleType:
    spec = importlib.util.spec_from_file_location("engine_overhead_benchmark", BENCHMARK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_delivery_side_runs_a_20_stage_linear_workflow(tmp_path: Path) -> None:
    already_imported = "langgraph" in sys.modules
    bench = _load_benchmark()
    assert already_imported or "langgraph" not in sys.modules  # imported lazily, if ever
    workflow = bench.write_workflow(tmp_path, 20)
    outcome = bench.run_delivery(workflow, tmp_path, 20)
    assert outcome.status == "succeeded", outcome.failure_reason
    assert len(outcome.path) == 22
    assert outcome.path[0] == "start" and outcome.path[-1] == "exit"
    assert outcome.path[1:-1] == [f"s{i}" for i in range(1, 21)]
