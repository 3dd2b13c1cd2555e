"""The large-set benchmark (benchmarks/pacing_set.py) at a few folders, so it cannot rot:
on a fake enforcing GitHub's secondary limits, publish and probe send no failed request,
each probe round is one GraphQL request, and a probe round where nothing changed writes
nothing (no status, no comment edit)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "pacing_set.py"


def load() -> object:
    spec = importlib.util.spec_from_file_location("pacing_set", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("pacing_set", module)
    spec.loader.exec_module(module)
    return module


def test_a_set_on_secondary_limits_publishes_and_probes_without_a_failed_request() -> None:
    measured = load().measure(3)  # type: ignore[attr-defined]
    assert (measured["failed"], measured["refused_by_limits"]) == (0, 0)
    assert (measured["look_graphql"], measured["again_graphql"]) == (1, 1)
    assert measured["again_writes"] == 0
    assert measured["first_pushes"] == 3  # every folder changed, pushed and got its PR
    # the writes went out a second apart on the simulated clock: bounded, never a burst
    assert measured["writes"] >= 6 and measured["busiest_minute"] <= 60
    assert measured["writes"] - 1 <= measured["simulated_s"] <= measured["writes"] + 5
