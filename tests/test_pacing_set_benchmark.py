"""The large-set benchmark (benchmarks/pacing_set.py) at a few folders, so it cannot rot:
on a fake enforcing GitHub's secondary limits, publish and probe send no failed request,
each probe round is one GraphQL request, and a probe round where nothing changed writes
nothing (no status, no comment edit)."""

from __future__ import annotations

from types import ModuleType

from benchmark_helpers import load_benchmark


def load() -> ModuleType:
    return load_benchmark("pacing_set")


def test_a_set_on_secondary_limits_publishes_and_probes_without_a_failed_request() -> None:
    measured = load().measure(3)
    assert (measured["failed"], measured["refused_by_limits"]) == (0, 0)
    assert (measured["look_graphql"], measured["again_graphql"]) == (1, 1)
    assert measured["again_writes"] == 0
    assert measured["first_pushes"] == 3  # every folder changed, pushed and got its PR
    # the writes went out a second apart on the simulated clock: bounded, never a burst
    assert measured["writes"] >= 6 and measured["busiest_minute"] <= 60
    assert measured["writes"] - 1 <= measured["simulated_s"] <= measured["writes"] + 5
