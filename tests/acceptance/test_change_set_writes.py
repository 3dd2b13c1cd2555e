"""Acceptance (issue 37 item 1): over a whole bundled deliver.dot run on the fake GitHub —
CI finishing a third of the set at a time, one folder's CI failing and repaired, every PR
merged — the content-creating requests per folder stay about 10 (plus 3 per repair) and do
not grow with the set: writes and bytes per folder at 24 folders are within 1.1 and 1.3
times of those at 11: the PR bodies and sticky comments no longer list the whole set. (At 50
and 200 folders a run spends GitHub's 500 writes an hour and pauses: benchmarks/
campaign_writes.py measures those sizes across the pauses, in benchmarks/results.md.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from dashboard_helpers import Measure, deliver_n

from delivery.testing.github import FakeGitHub

pytestmark = pytest.mark.slow  # two whole deliveries over 35 repositories


def _delivered(root: Path, n: int) -> Measure:
    root.mkdir()
    with FakeGitHub() as github:
        measured = deliver_n(github, root, n)
    assert measured.status == "succeeded", measured.reason
    assert measured.repairs == 1
    return measured


def _growth(root: Path, small_n: int, large_n: int) -> None:
    small = _delivered(root / str(small_n), small_n)
    large = _delivered(root / str(large_n), large_n)
    for n, measured in ((small_n, small), (large_n, large)):
        assert measured.writes <= 10 * n + 3 * measured.repairs, (n, measured)
    assert large.writes / large_n <= 1.1 * small.writes / small_n, (small, large)
    assert large.bytes / large_n <= 1.3 * small.bytes / small_n, (small, large)


def test_writes_and_bytes_per_folder_do_not_grow_with_the_set(tmp_path: Path) -> None:
    _growth(tmp_path, 11, 24)  # both past 10 folders: the set's table on a dashboard

