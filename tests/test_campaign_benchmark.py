"""The campaign benchmark (benchmarks/campaign.py) at two folders, so it cannot rot: a run
in its own process reaches all merged, and the figures are the run's own — the forge's
merged PRs, the agent's calls, the largest prompt.md, the event log's times — and reach the
`python -m benchmarks` summary."""

from __future__ import annotations

import io
from contextlib import redirect_stdout
from pathlib import Path
from types import ModuleType

import pytest
from benchmark_helpers import load_benchmark

pytestmark = pytest.mark.slow  # two whole campaigns, each in a process of its own


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_benchmark("campaign")


def test_the_deliver_run_of_the_benchmark_gives_figures_read_from_the_run(
        bench: ModuleType, tmp_path: Path) -> None:
    got = bench.measure("deliver", "local", 2, tmp_path, seconds=0.0, failing=0.1,
                        max_parallel=0)
    assert (got.status, got.merged) == ("succeeded", 2)
    # scope, plan, implement over both folders, one repair of the folder failing CI once
    assert got.agent_calls == 4
    [run] = tmp_path.glob("deliver-local-2-*")
    repair = run / "run" / "repair" / "1" / "prompt.md"
    assert (got.largest_prompt_stage, got.largest_prompt) == ("repair/1",
                                                              repair.stat().st_size)
    assert 0 < got.all_merged_s <= got.run_s
    assert got.peak_mib > 10


def test_the_summary_gives_campaigns_growth_with_its_goal(bench: ModuleType,
                                                         tmp_path: Path) -> None:
    rows = [bench.measure("campaign", "local", n, tmp_path, seconds=0.0, failing=0.1,
                          max_parallel=0) for n in (2, 3)]
    printed = io.StringIO()
    with redirect_stdout(printed):
        bench.report(rows, 0.0, 0.1)
    benchmarks = load_benchmark("__main__")
    summary = {row[0]: row[1:] for row in benchmarks.campaign_rows(printed.getvalue(), 0.0)}
    growth = rows[1].largest_prompt / rows[0].largest_prompt
    assert summary["campaign.dot on local, largest prompt N=3 / N=2"] == (
        f"{growth:.2f}", "<= 1.5", "yes" if growth <= 1.5 else "no")
    assert "campaign.dot on local, time to all merged t(3)/t(2)" in summary
    assert [row.merged for row in rows] == [2, 3]
