"""benchmarks/engine_overhead.py keeps working: its delivery side runs a small linear workflow."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

from benchmark_helpers import load_benchmark


def _load_benchmark() -> ModuleType:
    return load_benchmark("engine_overhead")


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
