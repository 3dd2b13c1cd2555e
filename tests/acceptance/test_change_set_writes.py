"""Acceptance (issue 37 item 1): over a whole bundled deliver.dot run on the fake GitHub —
CI finishing a third of the set at a time, one folder's CI failing and repaired, every PR
merged — the content-creating requests per folder stay about 10 (plus 3 per repair) and do
not grow with the set: writes and bytes per folder at 40 folders are within 1.1 and 1.3 times
of those at 12 (the PR bodies and sticky comments no longer list the whole set)."""

from __future__ import annotations

from pathlib import Path

import pytest
from dashboard_helpers import Measure, deliver_n

from delivery.testing.github import FakeGitHub

pytestmark = pytest.mark.slow  # two whole deliveries, 52 repositories


def _delivered(root: Path, n: int) -> Measure:
    root.mkdir()
    with FakeGitHub() as github:
        measured = deliver_n(github, root, n)
    assert measured.status == "succeeded", measured.reason
    assert measured.repairs == 1
    return measured


def test_writes_and_bytes_per_folder_do_not_grow_with_the_set(tmp_path: Path) -> None:
    small, large = _delivered(tmp_path / "12", 12), _delivered(tmp_path / "40", 40)
    for n, measured in ((12, small), (40, large)):
        assert measured.writes <= 10 * n + 3 * measured.repairs, (n, measured)
    assert large.writes / 40 <= 1.1 * small.writes / 12, (small, large)
    assert large.bytes / 40 <= 1.3 * small.bytes / 12, (small, large)
