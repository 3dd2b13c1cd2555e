"""The campaign-writes benchmark (benchmarks/campaign_writes.py) on a small fleet, so it
cannot rot: campaign.dot over 11 repositories (past 10: the set's table is on a dashboard)
on a fake enforcing scaled-down secondary limits pauses, is resumed on the fast-forwarded
clock and merges every PR; its per-folder figures are the fake's own records and reach the
`python -m benchmarks` summary beside their goals."""

from __future__ import annotations

import io
from contextlib import redirect_stdout
from pathlib import Path
from types import ModuleType

import pytest
from benchmark_helpers import load_benchmark

pytestmark = pytest.mark.slow  # a whole campaign over 11 repositories


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_benchmark("campaign_writes")


@pytest.fixture(scope="module")
def main() -> ModuleType:
    return load_benchmark("__main__")


def summary(main: ModuleType, printed: str) -> dict[str, tuple[str, ...]]:
    return {row[0]: row[1:] for row in main.campaign_writes_rows(printed, 0.0)}


def test_a_campaign_past_the_limits_pauses_merges_all_and_reports_its_writes_per_folder(
        bench: ModuleType, main: ModuleType, tmp_path: Path) -> None:
    got = bench.measure("campaign", 11, tmp_path, failing=0.1, limits=(20, 40))
    assert (got.status, got.merged, got.repairs) == ("succeeded", 11, 1), got.reason
    assert (got.failed, got.refused) == (0, 0)  # paced and paused: nothing turned away
    assert got.pauses >= 1 and got.paused_s > 0  # 40 an hour: the run had to wait
    assert got.writes >= 3 * 11  # at least a PR, a status and a comment per folder
    assert "fleet/r001#1" in got.one_change_objects  # the released folder's own PR
    printed = io.StringIO()
    with redirect_stdout(printed):
        bench.report([got], 0.1, (20, 40))
    rows = summary(main, printed.getvalue())
    per_folder = got.writes / 11
    within = per_folder <= (10 * 11 + 3 * got.repairs) / 11
    assert rows["campaign.dot N=11: content-creating requests per folder"][::2] == (
        f"{per_folder:.2f}", "yes" if within else "no")
    assert rows["campaign.dot N=11: bytes written per folder"] == (f"{got.bytes / 11:.0f}",)
    assert rows["campaign.dot N=11: objects written after one folder's change"][0] == str(
        len(got.one_change_objects))
    assert rows["campaign.dot N=11: failed runs (limits enforced)"] == ("0", "0", "yes")
    assert rows["campaign.dot N=11: pauses for the limits, s paused"] == (
        f"{got.pauses} / {got.paused_s:.0f}",)


def test_the_summary_compares_writes_and_bytes_per_folder_of_the_largest_set_to_the_smallest(
        bench: ModuleType, main: ModuleType) -> None:
    def figures(folders: int, writes: int, size: int) -> object:
        return bench.Figures("campaign", folders, "succeeded", "", folders, 1, 1, writes, size,
                             ["o/r#1"], 0, 0, 0, 0.0, 0.0, 0.0)

    printed = io.StringIO()
    with redirect_stdout(printed):
        # 7 then 7.5 writes a folder (1.07x); 2,750 then 3,850 bytes a folder (1.4x)
        bench.report([figures(12, 84, 33_000), figures(40, 300, 154_000)], 0.1)
    rows = summary(main, printed.getvalue())
    assert rows["campaign.dot: writes per folder N=40 / N=12"] == ("1.07x", "<= 1.1x", "yes")
    assert rows["campaign.dot: bytes per folder N=40 / N=12"] == ("1.40x", "<= 1.3x", "no")
